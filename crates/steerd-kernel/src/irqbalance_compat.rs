//! irqbalance's ban list, read from the files irqbalance reads, so that tools written for
//! irqbalance keep working with steerd (`cpus.irqbalance_banned_cpus: true`).
//!
//! The one that matters: Kubernetes CRI-O keeps IRQs off the CPUs of pods that ask for it
//! by rewriting `IRQBALANCE_BANNED_CPUS` in `/etc/sysconfig/irqbalance` and restarting
//! irqbalance. steerd follows the file instead (the daemon watches it), and the ban takes
//! effect from the next tick without a restart.
//!
//! The files are shell variable assignments (`EnvironmentFile=` of irqbalance's unit).
//! Only the two ban variables are read, with the quoting those files use in practice; it
//! is a reader for `KEY=value` lines, not a shell.

use std::path::PathBuf;

use crate::cpuset::CpuSet;
use crate::error::Error;
use crate::root::Root;

/// Where irqbalance's packages keep its environment: Debian's, then Red Hat's (which is
/// also CRI-O's default `irqbalance_config_file`). Relative to `--root`.
pub const BAN_FILES: [&str; 2] = ["etc/default/irqbalance", "etc/sysconfig/irqbalance"];

/// The CPUs irqbalance would keep IRQs off, and which file lines said so.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IrqbalanceBan {
    pub cpus: CpuSet,
    /// `path: KEY` of every assignment that contributed.
    pub sources: Vec<String>,
}

/// The paths of [`BAN_FILES`] under `root`, for watching.
pub fn ban_file_paths(root: &Root) -> Vec<PathBuf> {
    BAN_FILES.iter().map(|f| root.path(f)).collect()
}

/// Reads the ban from every one of [`BAN_FILES`] that exists; both existing is unusual
/// (a Debian host with CRI-O) and then both bans hold. A missing file bans nothing.
pub fn read_ban(root: &Root) -> Result<IrqbalanceBan, Error> {
    let mut ban = IrqbalanceBan::default();
    for file in BAN_FILES {
        let path = root.path(file);
        let Some(text) = root.read_optional(file)? else {
            continue;
        };
        if let Some((key, cpus)) =
            ban_in(&text).map_err(|(line, why)| Error::parse(&path, line, why))?
        {
            ban.cpus = ban.cpus.union(&cpus);
            ban.sources.push(format!("{}: {key}", path.display()));
        }
    }
    Ok(ban)
}

/// The ban one file declares, read as irqbalance 1.9 reads it (`cputree.c`):
/// `IRQBALANCE_BANNED_CPUS` (a hex mask, comma-separated 32-bit words; deprecated, but
/// what CRI-O writes) when set and not empty, else `IRQBALANCE_BANNED_CPULIST` (a
/// cpulist). `Err((line, why))` for a value that is neither.
fn ban_in(text: &str) -> Result<Option<(&'static str, CpuSet)>, (usize, String)> {
    let mut list = None;
    let mut mask = None;
    for (index, line) in text.lines().enumerate() {
        let Some((key, value)) = assignment(line) else {
            continue;
        };
        match key {
            "IRQBALANCE_BANNED_CPULIST" => list = Some((index + 1, value)),
            "IRQBALANCE_BANNED_CPUS" => mask = Some((index + 1, value)),
            _ => {}
        }
    }
    if let Some((line, value)) = mask.filter(|(_, v)| !v.is_empty()) {
        let cpus = CpuSet::parse_mask(&value)
            .map_err(|e| (line, format!("IRQBALANCE_BANNED_CPUS={value:?}: {e}")))?;
        return Ok(Some(("IRQBALANCE_BANNED_CPUS", cpus)));
    }
    if let Some((line, value)) = list.filter(|(_, v)| !v.is_empty()) {
        let cpus = CpuSet::parse_list(&value)
            .map_err(|e| (line, format!("IRQBALANCE_BANNED_CPULIST={value:?}: {e}")))?;
        return Ok(Some(("IRQBALANCE_BANNED_CPULIST", cpus)));
    }
    Ok(None)
}

/// `KEY=value` from one line: skips blank lines and comments, an `export ` prefix, one
/// level of single or double quotes, and a `#` comment after an unquoted value.
fn assignment(line: &str) -> Option<(&str, String)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
    let (key, raw) = line.split_once('=')?;
    let key = key.trim();
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let raw = raw.trim();
    let value = match raw.chars().next() {
        Some(quote @ ('"' | '\'')) => {
            let rest = raw.get(1..).unwrap_or_default();
            rest.split(quote).next().unwrap_or_default().to_string()
        }
        _ => raw
            .split_once(" #")
            .map_or(raw, |(value, _)| value)
            .trim()
            .to_string(),
    };
    Some((key, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let root = Root::new(dir.path());
        (dir, root)
    }

    #[test]
    fn debian_default_file_with_everything_commented_bans_nothing() {
        // Debian's irqbalance 1.9.2 ships this.
        let text = "#Configuration for the irqbalance daemon\n\n\
                    #IRQBALANCE_ONESHOT=\n\
                    #IRQBALANCE_BANNED_CPULIST=\n\
                    #IRQBALANCE_ARGS=\n";
        let (_dir, root) = root_with(&[("etc/default/irqbalance", text)]);
        assert_eq!(read_ban(&root).unwrap(), IrqbalanceBan::default());
    }

    #[test]
    fn crio_mask_in_sysconfig() {
        // What CRI-O writes: a hex mask, 32-bit words separated by commas.
        let text = "# irqbalance daemon config\nIRQBALANCE_BANNED_CPUS=\"00000000,0000000c\"\n";
        let (_dir, root) = root_with(&[("etc/sysconfig/irqbalance", text)]);
        let ban = read_ban(&root).unwrap();
        assert_eq!(ban.cpus, CpuSet::from_iter([2, 3]));
        assert_eq!(ban.sources.len(), 1);
        assert!(ban.sources[0].ends_with("etc/sysconfig/irqbalance: IRQBALANCE_BANNED_CPUS"));
    }

    #[test]
    fn mask_wins_over_list_as_in_irqbalance_and_quotes_exports_comments_are_read() {
        let text = "export IRQBALANCE_BANNED_CPUS=3\nIRQBALANCE_BANNED_CPULIST='1,4-5' # pods\n";
        assert_eq!(
            ban_in(text).unwrap(),
            Some(("IRQBALANCE_BANNED_CPUS", CpuSet::from_iter([0, 1])))
        );
        assert_eq!(
            ban_in("IRQBALANCE_BANNED_CPUS=\nIRQBALANCE_BANNED_CPULIST='1,4-5' # pods\n").unwrap(),
            Some(("IRQBALANCE_BANNED_CPULIST", CpuSet::from_iter([1, 4, 5])))
        );
    }

    #[test]
    fn both_files_ban_together() {
        let (_dir, root) = root_with(&[
            ("etc/default/irqbalance", "IRQBALANCE_BANNED_CPULIST=0\n"),
            ("etc/sysconfig/irqbalance", "IRQBALANCE_BANNED_CPUS=2\n"),
        ]);
        assert_eq!(read_ban(&root).unwrap().cpus, CpuSet::from_iter([0, 1]));
    }

    #[test]
    fn a_bad_value_names_file_and_line() {
        let (_dir, root) = root_with(&[(
            "etc/sysconfig/irqbalance",
            "# x\nIRQBALANCE_BANNED_CPULIST=\"1-zz\"\n",
        )]);
        let message = read_ban(&root).unwrap_err().to_string();
        assert!(message.contains("etc/sysconfig/irqbalance"), "{message}");
        assert!(message.contains(":2"), "{message}");
        assert!(message.contains("IRQBALANCE_BANNED_CPULIST"), "{message}");
    }

    #[test]
    fn no_files_no_ban() {
        let (_dir, root) = root_with(&[]);
        assert_eq!(read_ban(&root).unwrap(), IrqbalanceBan::default());
    }
}
