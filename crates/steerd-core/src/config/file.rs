//! Reading the configuration file, bounded: the parser never sees more than
//! [`MAX_CONFIG_BYTES`], so a huge file (or `/dev/zero` given as `--config`) is refused
//! in microseconds instead of being read into memory and parsed for minutes.
//!
//! Alias bombs and deep nesting are the parser's to refuse (yaml_serde stops at 128 levels
//! and at a bounded number of alias expansions); `check` words those errors so they say
//! what to do (docs/config.md, "Limits").

use std::io::Read as _;
use std::path::{Path, PathBuf};

/// The largest configuration file steerd reads: 1 MiB. The shipped file is about 6 KiB; a
/// fleet's with a `devices:` entry for every NIC stays far below this.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// Why a configuration file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{}: the file is larger than {limit} bytes, the most steerd reads; a configuration \
         needs a few KiB (is this the right file?)",
        path.display()
    )]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("{}: not UTF-8 text (byte {at}); save the file as UTF-8", path.display())]
    NotText { path: PathBuf, at: usize },
}

/// The text of the configuration file at `path`, refused when larger than
/// [`MAX_CONFIG_BYTES`] (checked while reading, so a file that grows, or a character
/// device, cannot get past it).
pub fn read_config_file(path: &Path) -> Result<String, ConfigFileError> {
    read_bounded(path, MAX_CONFIG_BYTES)
}

fn read_bounded(path: &Path, limit: u64) -> Result<String, ConfigFileError> {
    let io = |source| ConfigFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(ConfigFileError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    String::from_utf8(bytes).map_err(|e| ConfigFileError::NotText {
        path: path.to_path_buf(),
        at: e.utf8_error().valid_up_to(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_over_the_limit_is_refused_without_reading_it_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.yaml");
        std::fs::write(&path, "# x\n".repeat(300_000)).unwrap();
        let started = std::time::Instant::now();
        let err = read_config_file(&path).unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(matches!(err, ConfigFileError::TooLarge { .. }), "{err}");
        assert!(
            err.to_string().contains("larger than 1048576 bytes"),
            "{err}"
        );
    }

    #[test]
    fn an_endless_device_is_refused() {
        let err = read_config_file(Path::new("/dev/zero")).unwrap_err();
        assert!(matches!(err, ConfigFileError::TooLarge { .. }), "{err}");
    }

    #[test]
    fn a_file_at_the_limit_is_read_and_binary_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exact.yaml");
        std::fs::write(&path, "#".repeat(MAX_CONFIG_BYTES as usize)).unwrap();
        assert_eq!(
            read_config_file(&path).unwrap().len() as u64,
            MAX_CONFIG_BYTES
        );
        std::fs::write(&path, b"interval: 1s\n\xff\xfe").unwrap();
        let err = read_config_file(&path).unwrap_err();
        assert!(
            err.to_string().contains("not UTF-8 text (byte 13)"),
            "{err}"
        );
    }
}
