//! The state file on disk, kept where only steerd (or root) can touch it.
//!
//! What the state file says is what steerd writes back to the kernel on stop, so whoever
//! can write it decides kernel values. Hence:
//!
//! - its directory is created mode 0700 when missing, and must be a real directory (not a
//!   symbolic link) owned by the running user or root and not group- or world-writable;
//! - it is read with `O_NOFOLLOW` (a symbolic link is refused, not followed), must be a
//!   regular file owned by the running user or root, not group- or world-writable, and at
//!   most [`MAX_STATE_BYTES`];
//! - it is written to a temporary file created with `O_CREAT | O_EXCL | O_NOFOLLOW`, mode
//!   0600, then renamed over the old one (atomic, and a rename never follows a link).
//!
//! A check that fails is a [`StateFileError::Unsafe`] saying what to fix; the daemon
//! refuses to start on it (docs/operations.md, "The state file"). A directory that fails
//! is never to be changed (it may be `/tmp`, or anyone's): the fix is to keep the state
//! file elsewhere, or, for steerd's own default directory, to remove it for steerd to make
//! again.

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

/// Owned by the running user or by root (who can do anything anyway): the owners steerd
/// trusts for its state file, its directory and the daemon's lock beside it.
pub fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == nix::unistd::geteuid().as_raw()
}

/// What to do when `path`'s directory `dir` cannot hold a state file. Never to chmod or
/// chown it: it may be `/tmp` or someone's home. Only the default's directory
/// (`/run/steerd`, also under `--root`) is steerd's own, made by steerd or systemd with
/// mode 0700, so removing it is safe advice; anywhere else the fix is another directory.
/// A symbolic link there (`is_link`) is to be removed as a link, not as the directory it
/// points to.
fn another_directory(path: &Path, dir: &Path, is_link: bool) -> String {
    let elsewhere = "a --state-file in a directory that does not exist yet (steerd creates \
                     it, mode 0700)";
    if path.ends_with(super::DEFAULT_STATE_FILE) {
        let remove = if is_link {
            "remove the link (not what it points to)"
        } else {
            "remove it (the originals recorded in it are lost)"
        };
        format!(
            "{} is meant to be steerd's own directory: {remove} for steerd to create it \
             again, mode 0700, or pass {elsewhere}",
            dir.display()
        )
    } else {
        format!(
            "choose a state file in a directory only steerd's user can write: the default \
             /run/steerd/state.json (leave out --state-file), or {elsewhere}"
        )
    }
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
    let is_link = meta.file_type().is_symlink();
    let problem = if is_link {
        format!("its directory {shown} is a symbolic link")
    } else if !meta.is_dir() {
        format!("{shown} is not a directory")
    } else if !trusted_owner(meta.uid()) {
        format!("its directory {shown} belongs to uid {}", meta.uid())
    } else if meta.mode() & 0o022 != 0 {
        format!(
            "its directory {shown} is group- or world-writable (mode {:04o})",
            meta.mode() & 0o7777
        )
    } else {
        return Ok(true);
    };
    Err(unsafe_(
        path,
        problem,
        another_directory(path, dir, is_link),
    ))
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
    // Checked as root too: root's own file is no better than the mode lets it be.
    if meta.mode() & 0o022 != 0 {
        return Err(unsafe_(
            path,
            format!(
                "it is group- or world-writable (mode {:04o}), so someone else may have written \
                 the values steerd would restore",
                meta.mode() & 0o7777
            ),
            format!(
                "remove it (the originals it recorded are lost), or, if you are sure it holds \
                 only what steerd wrote, chmod 600 {}",
                path.display()
            ),
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
/// there (a symbolic link, a directory, someone else's file) is refused. A leftover of
/// steerd's own is removed whatever its mode, even group- or world-writable: it is never
/// read, only unlinked (which neither follows a link nor touches another name of the
/// file), and the next one is created new with `O_EXCL`, mode 0600, so nothing written
/// into the old one, even through a descriptor still open, reaches the state file.
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
    fn a_writable_leftover_temporary_file_is_removed_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write(&path, "{\"a\":1}").unwrap();
        let temporary = temporary_path(&path);
        fs::write(&temporary, "{\"planted\":1}").unwrap();
        fs::set_permissions(&temporary, fs::Permissions::from_mode(0o602)).unwrap();
        // A read removes it and reads the state file, not the leftover.
        assert_eq!(read(&path).unwrap().as_deref(), Some("{\"a\":1}"));
        assert!(!temporary.exists());
        // A write replaces it with a new 0600 file; a descriptor someone kept open on
        // the old one writes into an unlinked file.
        fs::write(&temporary, "half").unwrap();
        fs::set_permissions(&temporary, fs::Permissions::from_mode(0o602)).unwrap();
        let mut kept = OpenOptions::new().write(true).open(&temporary).unwrap();
        write(&path, "{}").unwrap();
        kept.write_all(b"{\"planted\":1}").unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(read(&path).unwrap().as_deref(), Some("{}"));
        assert!(!temporary.exists());
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
        assert!(
            err.contains("group- or world-writable (mode 0777)"),
            "{err}"
        );
        // Never advice to change a directory steerd may not have made (/tmp, a home):
        // another directory instead.
        assert!(!err.contains("chmod") && !err.contains("chown"), "{err}");
        assert!(err.contains("/run/steerd/state.json"), "{err}");
        assert!(err.contains("directory that does not exist yet"), "{err}");
        assert!(read(&open.join("state.json")).is_err());

        // Like /tmp: sticky and world-writable.
        let sticky = dir.path().join("tmp");
        fs::create_dir(&sticky).unwrap();
        fs::set_permissions(&sticky, fs::Permissions::from_mode(0o1777)).unwrap();
        let err = read(&sticky.join("state.json")).unwrap_err().to_string();
        assert!(
            err.contains("group- or world-writable (mode 1777)"),
            "{err}"
        );
        assert!(!err.contains("chmod") && !err.contains("chown"), "{err}");
        assert!(
            !err.contains(&format!("remove {}", sticky.display())),
            "{err}"
        );

        // Only writable by the group is refused too.
        let shared = dir.path().join("shared");
        fs::create_dir(&shared).unwrap();
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o770)).unwrap();
        let err = read(&shared.join("state.json")).unwrap_err().to_string();
        assert!(err.contains("(mode 0770)"), "{err}");
        assert!(!err.contains("chmod"), "{err}");

        let linked = dir.path().join("linked");
        symlink(dir.path(), &linked).unwrap();
        let err = write(&linked.join("state.json"), "{}")
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a symbolic link"), "{err}");
        assert!(!err.contains("mkdir") && !err.contains("chmod"), "{err}");
    }

    #[test]
    fn steerds_own_default_directory_made_writable_is_to_be_removed_not_chmodded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(super::super::DEFAULT_STATE_FILE);
        write(&path, "{}").unwrap();
        let own = path.parent().unwrap();
        fs::set_permissions(own, fs::Permissions::from_mode(0o777)).unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(
            err.contains("group- or world-writable (mode 0777)"),
            "{err}"
        );
        assert!(
            err.contains(&format!(
                "{} is meant to be steerd's own directory: remove it",
                own.display()
            )),
            "{err}"
        );
        assert!(!err.contains("chmod") && !err.contains("chown"), "{err}");
        // Removed, steerd makes it again, 0700.
        fs::remove_dir_all(own).unwrap();
        // A link there is to be removed as a link.
        symlink(dir.path(), own).unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("is a symbolic link"), "{err}");
        assert!(
            err.contains("remove the link (not what it points to)"),
            "{err}"
        );
        fs::remove_file(own).unwrap();
        assert_eq!(read(&path).unwrap(), None);
        write(&path, "{}").unwrap();
        assert_eq!(mode(own), 0o700);
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
    fn a_group_or_world_writable_state_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write(&path, "{}").unwrap();
        for (bits, shown) in [(0o666, "0666"), (0o620, "0620"), (0o602, "0602")] {
            fs::set_permissions(&path, fs::Permissions::from_mode(bits)).unwrap();
            let err = read(&path).unwrap_err();
            assert!(matches!(err, StateFileError::Unsafe { .. }), "{err:?}");
            let err = err.to_string();
            assert!(err.contains(&path.display().to_string()), "{err}");
            assert!(
                err.contains(&format!("group- or world-writable (mode {shown})")),
                "{err}"
            );
            assert!(
                err.contains(&format!("chmod 600 {}", path.display())),
                "{err}"
            );
        }
        // Writable by its owner only (or read-only) is fine.
        for bits in [0o600, 0o644, 0o400] {
            fs::set_permissions(&path, fs::Permissions::from_mode(bits)).unwrap();
            assert_eq!(read(&path).unwrap().as_deref(), Some("{}"));
        }
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
