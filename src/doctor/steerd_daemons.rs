//! A second steerd daemon on the machine (issue 33): two balancers overwrite each other's
//! IRQ affinity and RPS masks, so neither placement holds. `steerd run` refuses to start
//! beside another with the same state file (`daemon::instance_lock`), but two with
//! different state files (one started by hand with its own `--state-file`, a host service
//! beside a container that keeps its state elsewhere) both run; this finds them.
//!
//! A daemon is a steerd process running the `run` subcommand, read from its
//! `proc/PID/cmdline` (NUL-separated): not `steerd doctor` (this one), `top` or `plan`.
//! steerd is known by its `comm`, `steerd`, or by `comm` `exe` with an `argv[0]` named
//! `steerd`: `steerd run` executes itself again through `/proc/self/exe` (src/memory.rs),
//! and the kernel names a process after the file it executed. Only the daemons that write
//! to this machine count: one with `--dry-run` writes nothing, and one with a `--root`
//! other than `/` steers the tree there, not this machine.

use std::path::Path;

use super::{Context, Finding, Severity};

/// The longest command line shown in the evidence, in characters.
const MAX_SHOWN: usize = 200;

/// A `steerd run` that writes to this machine.
#[derive(Debug, PartialEq, Eq)]
struct Daemon {
    pid: u32,
    /// Its arguments, `argv[0]` first.
    args: Vec<String>,
    /// Its cgroup (the unified hierarchy's, or systemd's on cgroup v1), when read.
    cgroup: Option<String>,
}

impl Daemon {
    /// Whether systemd runs it as `steerd.service`.
    fn is_service(&self) -> bool {
        self.cgroup
            .as_deref()
            .is_some_and(|path| path.rsplit('/').next() == Some("steerd.service"))
    }
}

pub fn check(context: &Context) -> Vec<Finding> {
    // On the real machine, doctor itself is a steerd process (not `run`, but named so).
    let own = context.root.is_host().then(std::process::id);
    let daemons = daemons(context, own);
    if daemons.len() < 2 {
        return Vec::new();
    }
    let pids: Vec<String> = daemons.iter().map(|d| d.pid.to_string()).collect();
    let evidence: Vec<String> = daemons
        .iter()
        .map(|d| {
            let cgroup = d
                .cgroup
                .as_deref()
                .map_or(String::new(), |c| format!(" (cgroup {c})"));
            format!("proc/{}/cmdline = {}{cgroup}", d.pid, shown(&d.args))
        })
        .collect();
    let services: Vec<&Daemon> = daemons.iter().filter(|d| d.is_service()).collect();
    let fix = match services[..] {
        // Keep the service's; the others were started by hand.
        [service] => format!("kill {}", others(&daemons, service.pid)),
        _ => format!(
            "kill {} (keeps pid {}; `systemctl stop steerd` stops the service's instead)",
            others(&daemons, daemons[0].pid),
            daemons[0].pid
        ),
    };
    vec![Finding {
        check: "steerd_daemons",
        severity: Severity::Error,
        summary: format!(
            "{} steerd daemons are running (pids {})",
            daemons.len(),
            pids.join(", ")
        ),
        evidence: evidence.join("; "),
        why: "two balancers overwrite each other's IRQ affinity and RPS masks, so neither \
              placement holds and the receive load moves back and forth."
            .into(),
        fix: Some(fix),
    }]
}

/// Every daemon writing to this machine, except the process `own`.
fn daemons(context: &Context, own: Option<u32>) -> Vec<Daemon> {
    // The irqbalance check reports an unreadable process list.
    let Ok(pids) = super::processes::named_any(context.root, &["steerd", "exe"]) else {
        return Vec::new();
    };
    pids.into_iter()
        .filter(|&pid| Some(pid) != own)
        .filter_map(|pid| {
            let read = |file: &str| {
                context
                    .root
                    .read_optional(format!("proc/{pid}/{file}"))
                    .ok()
                    .flatten()
            };
            // Gone meanwhile, or unreadable: not judged.
            let comm = read("comm")?;
            let cmdline = read("cmdline")?;
            let args: Vec<String> = cmdline
                .strip_suffix('\0')
                .unwrap_or(&cmdline)
                .split('\0')
                .map(str::to_string)
                .collect();
            let argv0 = args.first().map(Path::new)?;
            let is_steerd = comm.trim_end() == "steerd"
                || argv0.file_name().is_some_and(|name| name == "steerd");
            (is_steerd && writes_to_this_machine(&args)).then(|| Daemon {
                pid,
                args,
                cgroup: read("cgroup").as_deref().and_then(cgroup_path),
            })
        })
        .collect()
}

/// Whether a steerd command line (`argv[0]` first) runs the daemon on `/` without
/// `--dry-run`. `--root` is the one option that may come before the subcommand.
fn writes_to_this_machine(args: &[String]) -> bool {
    let mut subcommand = None;
    let mut root = "/";
    let mut dry_run = false;
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        if arg == "--" {
            break;
        } else if arg == "--root" {
            if let Some(value) = rest.next() {
                root = value;
            }
        } else if let Some(value) = arg.strip_prefix("--root=") {
            root = value;
        } else if arg == "--dry-run" {
            dry_run = true;
        } else if !arg.starts_with('-') && subcommand.is_none() {
            subcommand = Some(arg.as_str());
        }
    }
    subcommand == Some("run") && !dry_run && Path::new(root) == Path::new("/")
}

/// The cgroup path of `proc/PID/cgroup`: the unified hierarchy's (`0::PATH`), else
/// systemd's on cgroup v1 (`N:name=systemd:PATH`).
fn cgroup_path(text: &str) -> Option<String> {
    let paths: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, ':');
            let _id = fields.next()?;
            Some((fields.next()?, fields.next()?))
        })
        .collect();
    paths
        .iter()
        .find(|(controllers, _)| controllers.is_empty())
        .or_else(|| paths.iter().find(|(c, _)| *c == "name=systemd"))
        .map(|(_, path)| path.to_string())
}

/// The pids of `daemons` but `keep`, for `kill`.
fn others(daemons: &[Daemon], keep: u32) -> String {
    daemons
        .iter()
        .filter(|d| d.pid != keep)
        .map(|d| d.pid.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A command line for the evidence, cut at [`MAX_SHOWN`] characters.
fn shown(args: &[String]) -> String {
    let line = args.join(" ");
    match line.char_indices().nth(MAX_SHOWN) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{machine, not_sampled, put, run_check};
    use super::*;
    use crate::fakeroot::FakeTree;
    use crate::root::Root;

    /// A process `pid` named `comm` running `args`.
    fn process(tree: &FakeTree, pid: u32, comm: &str, args: &[&str]) {
        put(tree, &format!("proc/{pid}/comm"), &format!("{comm}\n"));
        let mut cmdline = args.join("\0");
        cmdline.push('\0');
        put(tree, &format!("proc/{pid}/cmdline"), &cmdline);
    }

    fn the_service(tree: &FakeTree, pid: u32) {
        process(
            tree,
            pid,
            "exe",
            &[
                "/usr/sbin/steerd",
                "run",
                "--config",
                "/etc/steerd/steerd.yaml",
            ],
        );
        put(
            tree,
            &format!("proc/{pid}/cgroup"),
            "0::/system.slice/steerd.service\n",
        );
    }

    #[test]
    fn one_daemon_is_the_normal_case_and_other_steerd_commands_are_not_daemons() {
        let (_dir, tree) = machine(|_| {});
        process(&tree, 1, "systemd", &["/sbin/init"]);
        the_service(&tree, 410);
        process(&tree, 900, "steerd", &["steerd", "doctor"]);
        process(
            &tree,
            901,
            "steerd",
            &["steerd", "--root", "/", "top", "--once"],
        );
        process(&tree, 902, "steerd", &["steerd", "plan", "--config", "run"]);
        // Named like a re-executed steerd, but another program.
        process(&tree, 903, "exe", &["/usr/bin/python3", "run"]);
        // steerd's name and the word run, but not its subcommand.
        process(&tree, 904, "steerd", &["steerd", "check-config", "run"]);
        // Daemons that do not write to this machine.
        process(&tree, 905, "steerd", &["steerd", "run", "--dry-run"]);
        process(&tree, 906, "exe", &["steerd", "--root", "/tmp/tree", "run"]);
        process(&tree, 907, "steerd", &["steerd", "run", "--root=/srv/tree"]);
        assert_eq!(run_check(&tree, check, not_sampled(), None), vec![]);
    }

    #[test]
    fn a_second_daemon_is_an_error_naming_both_and_killing_the_one_by_hand() {
        let (_dir, tree) = machine(|_| {});
        the_service(&tree, 410);
        process(
            &tree,
            5120,
            "exe",
            &[
                "./target/release/steerd",
                "--root",
                "//",
                "run",
                "--state-file",
                "/root/steerd/state.json",
            ],
        );
        let found = run_check(&tree, check, not_sampled(), None);
        assert_eq!(found.len(), 1, "{found:?}");
        let finding = &found[0];
        assert_eq!(finding.check, "steerd_daemons");
        assert_eq!(finding.severity, Severity::Error);
        assert_eq!(
            finding.summary,
            "2 steerd daemons are running (pids 410, 5120)"
        );
        assert!(
            finding.evidence.contains(
                "proc/410/cmdline = /usr/sbin/steerd run --config /etc/steerd/steerd.yaml \
                 (cgroup /system.slice/steerd.service)"
            ),
            "{finding:?}"
        );
        assert!(
            finding.evidence.contains(
                "proc/5120/cmdline = ./target/release/steerd --root // run --state-file \
                 /root/steerd/state.json"
            ),
            "{finding:?}"
        );
        assert!(finding.why.contains("overwrite each other"), "{finding:?}");
        assert_eq!(finding.fix.as_deref(), Some("kill 5120"));
    }

    #[test]
    fn daemons_all_started_by_hand_keep_the_first() {
        let (_dir, tree) = machine(|_| {});
        for pid in [300, 200, 100] {
            process(&tree, pid, "steerd", &["steerd", "run"]);
        }
        let found = run_check(&tree, check, not_sampled(), None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].summary,
            "3 steerd daemons are running (pids 100, 200, 300)"
        );
        let fix = found[0].fix.as_deref().unwrap_or_default();
        assert!(fix.starts_with("kill 200 300 (keeps pid 100;"), "{fix}");
        assert!(fix.contains("systemctl stop steerd"), "{fix}");
    }

    #[test]
    fn doctors_own_process_is_left_out() {
        let (_dir, tree) = machine(|_| {});
        process(&tree, 100, "steerd", &["steerd", "run"]);
        process(&tree, 200, "steerd", &["steerd", "run"]);
        let root = Root::new(&tree.root);
        let discovered = crate::discover::discover(&root).expect("discover");
        let context = Context {
            root: &root,
            machine: &discovered,
            samples: not_sampled(),
            daemon: None,
        };
        let pids = |own| {
            daemons(&context, own)
                .iter()
                .map(|d| d.pid)
                .collect::<Vec<_>>()
        };
        assert_eq!(pids(None), vec![100, 200]);
        assert_eq!(pids(Some(200)), vec![100]);
    }

    #[test]
    fn cgroup_paths_of_v2_and_v1() {
        assert_eq!(
            cgroup_path("0::/system.slice/steerd.service\n").as_deref(),
            Some("/system.slice/steerd.service")
        );
        assert_eq!(
            cgroup_path("12:cpuset:/\n1:name=systemd:/system.slice/steerd.service\n0::/\n")
                .as_deref(),
            Some("/")
        );
        assert_eq!(
            cgroup_path("12:cpuset:/\n1:name=systemd:/user.slice\n").as_deref(),
            Some("/user.slice")
        );
        assert_eq!(cgroup_path(""), None);
    }
}
