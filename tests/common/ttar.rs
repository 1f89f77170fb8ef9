//! Extracts a `.ttar` text archive (prometheus/procfs and node_exporter fixtures) into a
//! directory, symlinks included.
//!
//! The fixtures' extracted `sys/` trees beside the archives lost their symlinks
//! (`sys/class/net/<if>` → `../../devices/…`, `device`, `driver`), which discovery needs,
//! so whole-tree tests extract the archive itself. Format, as written by the `ttar` script:
//! blocks separated by `# …` comment lines; `Directory: P` + `Mode: M`; `Path: P` +
//! `SymlinkTo: T`; or `Path: P` + `Lines: N` + N content lines + `Mode: M`. In content lines
//! `NULLBYTE` stands for a NUL byte, and a line ending in `EOF` is the file's last line
//! without a trailing newline; `\NULLBYTE` and `\EOF` are the literal words.

use std::fs;
use std::io;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

/// Extracts `archive` under `dest` (paths in the archive are relative to it).
pub fn extract(archive: &Path, dest: &Path) -> io::Result<()> {
    let data = fs::read(archive)?;
    let bad = |line: usize, what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}:{}: {what}", archive.display(), line + 1),
        )
    };
    let lines: Vec<&[u8]> = split_lines(&data);
    let mut index = 0;
    let mut current: Option<std::path::PathBuf> = None;
    while index < lines.len() {
        let line = lines[index];
        let text = String::from_utf8_lossy(line);
        if line.is_empty() || line.starts_with(b"#") {
            index += 1;
            continue;
        }
        if let Some(path) = text.strip_prefix("Directory: ") {
            let path = dest.join(path);
            fs::create_dir_all(&path)?;
            current = Some(path);
        } else if let Some(path) = text.strip_prefix("Path: ") {
            let path = dest.join(path);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
            current = Some(path);
        } else if let Some(target) = text.strip_prefix("SymlinkTo: ") {
            let path = current
                .as_ref()
                .ok_or_else(|| bad(index, "SymlinkTo without Path"))?;
            symlink(target, path)?;
        } else if let Some(count) = text.strip_prefix("Lines: ") {
            let path = current
                .as_ref()
                .ok_or_else(|| bad(index, "Lines without Path"))?;
            let count: usize = count
                .trim()
                .parse()
                .map_err(|_| bad(index, "bad Lines count"))?;
            let mut content = Vec::new();
            for offset in 1..=count {
                let raw = lines
                    .get(index + offset)
                    .ok_or_else(|| bad(index, "archive ends inside a file"))?;
                let (decoded, no_newline) = decode_line(raw);
                content.extend_from_slice(&decoded);
                if !no_newline {
                    content.push(b'\n');
                }
            }
            fs::write(path, content)?;
            index += count;
        } else if let Some(mode) = text.strip_prefix("Mode: ") {
            let path = current
                .as_ref()
                .ok_or_else(|| bad(index, "Mode without Path"))?;
            let mode = u32::from_str_radix(mode.trim(), 8).map_err(|_| bad(index, "bad Mode"))?;
            // Directories stay writable so the rest of the archive can be extracted.
            if !path.is_dir() {
                fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
            }
        } else {
            return Err(bad(index, "unknown keyword"));
        }
        index += 1;
    }
    Ok(())
}

/// Splits on `\n`, keeping the bytes of each line (content may be binary).
fn split_lines(data: &[u8]) -> Vec<&[u8]> {
    let mut lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    if data.ends_with(b"\n") {
        lines.pop();
    }
    lines
}

/// Decodes one content line: `NULLBYTE` → NUL, a final unescaped `EOF` → no newline,
/// `\NULLBYTE` / `\EOF` → the literal words.
fn decode_line(raw: &[u8]) -> (Vec<u8>, bool) {
    let mut out = Vec::with_capacity(raw.len());
    let mut no_newline = false;
    let mut i = 0;
    while i < raw.len() {
        let rest = &raw[i..];
        if rest.starts_with(b"\\NULLBYTE") {
            out.extend_from_slice(b"NULLBYTE");
            i += 9;
        } else if rest.starts_with(b"\\EOF") {
            out.extend_from_slice(b"EOF");
            i += 4;
        } else if rest.starts_with(b"NULLBYTE") {
            out.push(0);
            i += 8;
        } else if rest == b"EOF" && i > 0 {
            no_newline = true;
            i += 3;
        } else {
            out.push(raw[i]);
            i += 1;
        }
    }
    (out, no_newline)
}

#[cfg(test)]
mod tests {
    // Unused in `harness = false` binaries, where `#[test]` functions are left out.
    #[allow(unused_imports)]
    use super::*;

    #[test]
    fn decodes_escapes() {
        assert_eq!(decode_line(b"aNULLBYTEb"), (b"a\0b".to_vec(), false));
        assert_eq!(decode_line(b"lastEOF"), (b"last".to_vec(), true));
        assert_eq!(decode_line(b"\\EOF x"), (b"EOF x".to_vec(), false));
        assert_eq!(decode_line(b"\\NULLBYTE"), (b"NULLBYTE".to_vec(), false));
        assert_eq!(decode_line(b"EOF"), (b"EOF".to_vec(), false));
    }
}
