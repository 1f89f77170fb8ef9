//! The state file on disk, kept where only steerd (or root) can touch it.
//!
//! What the state file says is what steerd writes back to the kernel on stop, so whoever
//! can write it decides kernel values. Hence:
//!
//! - its directory is created mode 0700 when missing, and must be a real directory (not a
//!   symbolic link) owned by the running user or root and not group- or world-writable;
//! - it is read with `O_NOFOLLOW` (a symbolic link is refused, not followed), must be a
//!   regular file owned by the running user or root, and at most [`MAX_STATE_BYTES`];
//! - it is written to a temporary file created with `O_CREAT | O_EXCL | O_NOFOLLOW`, mode
//!   0600, then renamed over the old one (atomic, and a rename never follows a link).
//!
//! A check that fails is a [`StateFileError::Unsafe`] saying what to fix; the daemon
//! refuses to start on it (docs/operations.md, "The state file").

use std::fs::{self, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// The largest state file steerd reads: 16 MiB. An entry is about 200 bytes; a machine
/// with 8 NICs of 256 queues and 3 knobs each needs 1.2 MB.
pub const MAX_STATE_BYTES: u64 = 16 * 1024 * 1024;

/// Why the state file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    #[error("state file {}: {problem}; {fix}", path.display())]
    Unsafe {
        path: PathBuf,
        problem: String,
        fix: String,
    },
    #[error(
        "state file {}: larger than {limit} bytes, more than steerd ever writes; remove it \
         (the originals it held are lost) or pass another --state-file",
        path.display()
    )]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("state file {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

fn unsafe_(path: &Path, problem: impl Into<String>, fix: impl Into<String>) -> StateFileError {
    StateFileError::Unsafe {
        path: path.to_path_buf(),
        problem: problem.into(),
        fix: fix.into(),
    }
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> StateFileError + '_ {
    move |source| StateFileError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where the next state is written before it is renamed into place.
pub fn temporary_path(path: &Path) -> PathBuf {
    path.with_extension("json.tmp")
}

/// Owned by the running user or by root (who can do anything anyway).
fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == nix::unistd::geteuid().as_raw()
}

/// Checks the state file's directory; with `create`, makes it (mode 0700) when missing.
/// `Ok(false)`: it does not exist (and `create` was not asked).
pub fn check_dir(path: &Path, create: bool) -> Result<bool, StateFileError> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let meta = match fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io_error(dir))?;
            fs::symlink_metadata(dir).map_err(io_error(dir))?
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_error(dir)(e)),
    };
    let shown = dir.display();
    if meta.file_type().is_symlink() {
        return Err(unsafe_(
            path,
            format!("its directory {shown} is a symbolic link"),
            format!("replace it with a real directory (mkdir -m 700 {shown})"),
        ));
    }
    if !meta.is_dir() {
        return Err(unsafe_(
            path,
            format!("{shown} is not a directory"),
            "choose a state file in a directory".to_string(),
        ));
    }
    if !trusted_owner(meta.uid()) {
        return Err(unsafe_(
            path,
            format!("its directory {shown} belongs to uid {}", meta.uid()),
            "chown it to the user steerd runs as, or remove it for steerd to create".to_string(),
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(unsafe_(
            path,
            format!(
                "its directory {shown} is group- or world-writable (mode {:o})",
                meta.mode() & 0o7777
            ),
            format!(
                "chmod 700 {shown}, or choose a state file in a directory only steerd can write"
            ),
        ));
    }
    Ok(true)
}

/// The state file's text; `None` when there is none.
pub fn read(path: &Path) -> Result<Option<String>, StateFileError> {
    if !check_dir(path, false)? {
        return Ok(None);
    }
    check_temporary(path)?;
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(unsafe_(
                path,
                "it is a symbolic link",
                "remove the link (steerd writes a regular file there)",
            ));
        }
        Err(e) => return Err(io_error(path)(e)),
    };
    let meta = file.metadata().map_err(io_error(path))?;
    if !meta.is_file() {
        return Err(unsafe_(
            path,
            "it is not a regular file",
            "remove it, or pass another --state-file",
        ));
    }
    if !trusted_owner(meta.uid()) {
        return Err(unsafe_(
            path,
            format!("it belongs to uid {}", meta.uid()),
            "remove it (someone else may have written the values steerd would restore)",
        ));
    }
    let mut bytes = Vec::new();
    file.take(MAX_STATE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io_error(path))?;
    if bytes.len() as u64 > MAX_STATE_BYTES {
        return Err(StateFileError::TooLarge {
            path: path.to_path_buf(),
            limit: MAX_STATE_BYTES,
        });
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|e| io_error(path)(io::Error::new(io::ErrorKind::InvalidData, e)))
}

/// A temporary file left by a crash between create and rename is removed; anything else
/// there (a symbolic link, a directory, someone else's file) is refused.
fn check_temporary(path: &Path) -> Result<(), StateFileError> {
    let temporary = temporary_path(path);
    let meta = match fs::symlink_metadata(&temporary) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_error(&temporary)(e)),
    };
    if meta.is_file() && trusted_owner(meta.uid()) {
        return fs::remove_file(&temporary).map_err(io_error(&temporary));
    }
    Err(unsafe_(
        path,
        format!(
            "{} is in the way of its temporary file ({})",
            temporary.display(),
            if meta.file_type().is_symlink() {
                "a symbolic link".to_string()
            } else {
                format!("owned by uid {}", meta.uid())
            }
        ),
        format!("remove {}", temporary.display()),
    ))
}

/// Replaces the state file with `text`: a new temporary file (never an existing one,
/// never through a link), synced, renamed into place.
pub fn write(path: &Path, text: &str) -> Result<(), StateFileError> {
    check_dir(path, true)?;
    check_temporary(path)?;
    let temporary = temporary_path(path);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&temporary)
        .map_err(io_error(&temporary))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io_error(&temporary))?;
    fs::rename(&temporary, path).map_err(io_error(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt as _, symlink};

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_new_state_file_is_0600_in_a_new_0700_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/steerd/state.json");
        write(&path, "{}").unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(read(&path).unwrap().as_deref(), Some("{}"));
        write(&path, "{\"a\":1}").unwrap();
        assert_eq!(read(&path).unwrap().as_deref(), Some("{\"a\":1}"));
        assert!(!temporary_path(&path).exists());
    }

    #[test]
    fn no_directory_means_no_state_and_nothing_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing/state.json");
        assert_eq!(read(&path).unwrap(), None);
        assert!(!path.parent().unwrap().exists());
    }

    #[test]
    fn a_symlink_at_the_state_path_is_refused_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        fs::write(&target, "{}").unwrap();
        let path = dir.path().join("state.json");
        symlink(&target, &path).unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("is a symbolic link"), "{err}");
        assert!(err.contains("remove the link"), "{err}");
    }

    #[test]
    fn a_symlink_at_the_temporary_path_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("victim");
        fs::write(&target, "precious").unwrap();
        let path = dir.path().join("state.json");
        symlink(&target, temporary_path(&path)).unwrap();
        let err = write(&path, "{}").unwrap_err().to_string();
        assert!(err.contains("a symbolic link"), "{err}");
        assert!(err.contains("remove "), "{err}");
        assert!(read(&path).is_err());
        assert_eq!(fs::read_to_string(&target).unwrap(), "precious");
    }

    #[test]
    fn a_leftover_temporary_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        fs::write(temporary_path(&path), "half").unwrap();
        write(&path, "{}").unwrap();
        assert_eq!(read(&path).unwrap().as_deref(), Some("{}"));
    }

    #[test]
    fn a_writable_or_linked_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let err = write(&open.join("state.json"), "{}")
            .unwrap_err()
            .to_string();
        assert!(err.contains("group- or world-writable (mode 777)"), "{err}");
        assert!(err.contains("chmod 700"), "{err}");
        assert!(read(&open.join("state.json")).is_err());

        let linked = dir.path().join("linked");
        symlink(dir.path(), &linked).unwrap();
        let err = write(&linked.join("state.json"), "{}")
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a symbolic link"), "{err}");
    }

    #[test]
    fn someone_elses_directory_or_file_is_refused() {
        if !nix::unistd::geteuid().is_root() {
            println!("skipped: needs root to chown a directory to another user");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let theirs = dir.path().join("theirs");
        fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let err = write(&theirs.join("state.json"), "{}")
            .unwrap_err()
            .to_string();
        assert!(err.contains("belongs to uid 65534"), "{err}");
        let file = dir.path().join("state.json");
        fs::write(&file, "{}").unwrap();
        std::os::unix::fs::chown(&file, Some(65534), Some(65534)).unwrap();
        let err = read(&file).unwrap_err().to_string();
        assert!(err.contains("belongs to uid 65534"), "{err}");
    }

    #[test]
    fn an_oversized_or_special_state_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let file = fs::File::create(&path).unwrap();
        file.set_len(MAX_STATE_BYTES + 1).unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("larger than 16777216 bytes"), "{err}");
        fs::remove_file(&path).unwrap();
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }
}
