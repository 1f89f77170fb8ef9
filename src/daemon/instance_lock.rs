//! One daemon per state file: an exclusive `flock` on `<state file>.lock`, beside the state
//! file, held for the daemon's whole life.
//!
//! Why it exists (issue 33): two balancers on one machine overwrite each other. Two
//! `steerd run` with the same state file would both move the same IRQs and RPS masks, each
//! taking the other's writes for an operator's change, and both record originals in, and
//! restore from, one file. So `steerd run` takes this lock before it reads the state file
//! or writes anything (before it even binds its HTTP port, whose "address in use" would
//! hide the real reason), and a second one refuses to start, naming the lock file and the
//! pid holding it.
//!
//! How:
//!
//! - the lock file sits in the state file's directory, which is checked as the state
//!   file's is (`apply::state_file`): a real directory, not a symbolic link, owned by
//!   steerd's user or root, not group- or world-writable; created mode 0700 when missing;
//! - it is opened relative to that directory's descriptor with `O_CREAT | O_NOFOLLOW |
//!   O_CLOEXEC`, mode 0600, and must be a regular file of steerd's user or root that
//!   nobody else can open (anyone who can open it could hold the lock and keep steerd
//!   from starting);
//! - the lock is `flock(LOCK_EX | LOCK_NB)`; after taking it steerd writes its pid into
//!   the file, which only the message of a refused start reads;
//! - the file is never removed. The kernel drops the lock when its holder dies (kill -9, a
//!   crash), so a lock file left by a dead daemon is simply locked again; removing it
//!   would let a daemon lock a new file while another still holds the old one.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt as _, FileExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg, OFlag};
use nix::sys::stat::Mode;

use crate::apply::trusted_owner;

/// The most of the lock file read for the holder's pid.
const MAX_PID_BYTES: usize = 32;

/// The lock, held until dropped (or the process ends).
#[derive(Debug)]
pub struct InstanceLock {
    path: PathBuf,
    file: Option<Flock<File>>,
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it: another daemon runs with this state file.
    #[error("{} is locked by {}", lock.display(), holder(*pid))]
    Held { lock: PathBuf, pid: Option<u32> },
    /// The lock file or its directory is somewhere steerd must not trust.
    #[error("lock file {}: {problem}; {fix}", lock.display())]
    Unsafe {
        lock: PathBuf,
        problem: String,
        fix: String,
    },
    #[error(
        "{}: {source}; steerd must be able to create and lock its lock file there (run it as \
         root, or pass a --state-file in a directory of your own)",
        path.display()
    )]
    Io { path: PathBuf, source: io::Error },
}

impl LockError {
    /// Not allowed to create or open the lock file (not root, a read-only file system).
    pub fn is_permission(&self) -> bool {
        matches!(self, LockError::Io { source, .. }
            if matches!(source.raw_os_error(), Some(nix::libc::EACCES | nix::libc::EPERM | nix::libc::EROFS)))
    }
}

/// "pid N", or what is known without it.
pub(super) fn holder(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("pid {pid}"),
        None => "a process that has not written its pid there yet".to_string(),
    }
}

/// Where the lock for `state_file` is: `<state file>.lock`, in the same directory.
pub fn lock_path(state_file: &Path) -> PathBuf {
    let mut name = state_file.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

impl InstanceLock {
    /// Takes the lock for `state_file`, creating its directory (0700) and the lock file
    /// (0600) when missing. Never blocks: a lock someone holds is [`LockError::Held`].
    pub fn acquire(state_file: &Path) -> Result<InstanceLock, LockError> {
        let lock = lock_path(state_file);
        let unsafe_ = |problem: String, fix: String| LockError::Unsafe {
            lock: lock.clone(),
            problem,
            fix,
        };
        let Some(name) = lock.file_name() else {
            return Err(unsafe_(
                format!("{} names no file", state_file.display()),
                "pass a --state-file that names a file".into(),
            ));
        };
        let dir_path = match lock.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let dir = open_dir(dir_path, &unsafe_)?;
        let io_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| LockError::Io { path, source }
        };
        let meta = dir.metadata().map_err(io_error(dir_path))?;
        let shown = dir_path.display();
        let elsewhere = "choose a --state-file in a directory only steerd's user can write (the \
                         default /run/steerd/state.json, or one in a directory that does not \
                         exist yet: steerd creates it, mode 0700)";
        if !trusted_owner(meta.uid()) {
            return Err(unsafe_(
                format!("its directory {shown} belongs to uid {}", meta.uid()),
                elsewhere.into(),
            ));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(unsafe_(
                format!(
                    "its directory {shown} is group- or world-writable (mode {:04o})",
                    meta.mode() & 0o7777
                ),
                elsewhere.into(),
            ));
        }
        let fd = nix::fcntl::openat(
            &dir,
            name,
            OFlag::O_RDWR
                | OFlag::O_CREAT
                | OFlag::O_NOFOLLOW
                | OFlag::O_CLOEXEC
                | OFlag::O_NOCTTY
                | OFlag::O_NONBLOCK,
            Mode::from_bits_truncate(0o600),
        );
        let file = match fd {
            Ok(fd) => File::from(fd),
            Err(Errno::ELOOP) => {
                return Err(unsafe_(
                    "it is a symbolic link".into(),
                    "remove the link (steerd makes a regular file there)".into(),
                ));
            }
            Err(Errno::EISDIR) => {
                return Err(unsafe_(
                    "it is a directory".into(),
                    format!(
                        "remove it (steerd makes a regular file there), or pass another \
                         --state-file than {}",
                        state_file.display()
                    ),
                ));
            }
            Err(errno) => return Err(io_error(&lock)(io::Error::from(errno))),
        };
        let meta = file.metadata().map_err(io_error(&lock))?;
        let remove = format!(
            "remove it once no steerd runs with the state file {}",
            state_file.display()
        );
        if !meta.is_file() {
            return Err(unsafe_("it is not a regular file".into(), remove));
        }
        if !trusted_owner(meta.uid()) {
            return Err(unsafe_(format!("it belongs to uid {}", meta.uid()), remove));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(unsafe_(
                format!(
                    "others may open it (mode {:04o}), and whoever holds it keeps steerd from \
                     starting",
                    meta.mode() & 0o7777
                ),
                format!("chmod 600 {}", lock.display()),
            ));
        }
        let file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(locked) => locked,
            Err((file, Errno::EWOULDBLOCK)) => {
                return Err(LockError::Held {
                    pid: read_pid(&file),
                    lock,
                });
            }
            Err((_, errno)) => return Err(io_error(&lock)(io::Error::from(errno))),
        };
        // Written over the old text, then cut to length, so the file is never empty; a
        // reader in between may find no pid it can parse, and says so. Only for a refused
        // start's message, so a failure (a full /run) is no reason not to run.
        let pid = format!("{}\n", std::process::id());
        if let Err(e) = file
            .write_all_at(pid.as_bytes(), 0)
            .and_then(|()| file.set_len(pid.len() as u64))
        {
            let shown = lock.display();
            tracing::warn!(lock = %shown, error = %e, "cannot write the pid into {shown}: {e}");
        }
        Ok(InstanceLock {
            path: lock,
            file: Some(file),
        })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for InstanceLock {
    /// Unlocks and closes. `Flock`'s own drop panics if unlocking fails; here a failure
    /// just leaves the descriptor open, and the kernel drops the lock at exit.
    fn drop(&mut self) {
        if let Some(locked) = self.file.take()
            && let Err((locked, _)) = locked.unlock()
        {
            std::mem::forget(locked);
        }
    }
}

/// Opens the lock file's directory without following a link, creating it (0700) when
/// missing.
fn open_dir(dir: &Path, unsafe_: &impl Fn(String, String) -> LockError) -> Result<File, LockError> {
    let open = || {
        OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(dir)
    };
    let io_error = |source| LockError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let result = match open() {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io_error)?;
            open()
        }
        other => other,
    };
    match result {
        Ok(file) => Ok(file),
        // With O_DIRECTORY a link is ENOTDIR, like a file; only a look tells them apart.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(nix::libc::ELOOP | nix::libc::ENOTDIR)
            ) =>
        {
            let is_link = std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink());
            Err(if is_link {
                unsafe_(
                    format!("its directory {} is a symbolic link", dir.display()),
                    "choose a --state-file in a real directory".into(),
                )
            } else {
                unsafe_(
                    format!("{} is not a directory", dir.display()),
                    "choose a --state-file in a directory".into(),
                )
            })
        }
        Err(e) => Err(io_error(e)),
    }
}

/// The pid the holder wrote, if it has.
fn read_pid(file: &File) -> Option<u32> {
    let mut bytes = [0u8; MAX_PID_BYTES];
    let n = file.read_at(&mut bytes, 0).ok()?;
    std::str::from_utf8(&bytes[..n])
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|&pid| pid > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{PermissionsExt as _, symlink};

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_second_lock_on_the_same_state_file_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("run/steerd/state.json");
        let first = InstanceLock::acquire(&state).unwrap();
        let lock = dir.path().join("run/steerd/state.json.lock");
        assert_eq!(first.path(), lock);
        assert_eq!(mode(&lock), 0o600);
        assert_eq!(mode(lock.parent().unwrap()), 0o700);
        let pid = std::process::id();
        assert_eq!(fs::read_to_string(&lock).unwrap(), format!("{pid}\n"));
        // A second open file description conflicts even within one process.
        match InstanceLock::acquire(&state) {
            Err(LockError::Held {
                lock: held,
                pid: Some(p),
            }) => {
                assert_eq!(held, lock);
                assert_eq!(p, pid);
            }
            other => panic!("{other:?}"),
        }
        // Another state file in the same directory has its own lock.
        let _other = InstanceLock::acquire(&dir.path().join("run/steerd/other.json")).unwrap();
        assert!(!state.exists(), "the lock writes no state file");
        drop(first);
        let again = InstanceLock::acquire(&state).unwrap();
        assert_eq!(again.path(), lock);
    }

    #[test]
    fn a_stale_lock_file_is_locked_again_and_its_text_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state.json");
        let lock = lock_path(&state);
        fs::write(&lock, "4194304 and some longer leftover text\n").unwrap();
        fs::set_permissions(&lock, fs::Permissions::from_mode(0o600)).unwrap();
        let held = InstanceLock::acquire(&state).unwrap();
        assert_eq!(
            fs::read_to_string(&lock).unwrap(),
            format!("{}\n", std::process::id())
        );
        drop(held);
        // Still there: never removed, only locked again.
        assert!(lock.exists());
    }

    #[test]
    fn a_holder_that_wrote_no_pid_is_still_a_holder() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state.json");
        let first = InstanceLock::acquire(&state).unwrap();
        fs::write(first.path(), "").unwrap();
        let err = InstanceLock::acquire(&state).unwrap_err();
        assert!(matches!(err, LockError::Held { pid: None, .. }), "{err:?}");
        assert!(err.to_string().contains("not written its pid"), "{err}");
    }

    #[test]
    fn a_link_at_the_lock_path_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("victim");
        fs::write(&target, "precious").unwrap();
        let state = dir.path().join("state.json");
        symlink(&target, lock_path(&state)).unwrap();
        let err = InstanceLock::acquire(&state).unwrap_err();
        assert!(matches!(err, LockError::Unsafe { .. }), "{err:?}");
        assert!(err.to_string().contains("is a symbolic link"), "{err}");
        assert_eq!(fs::read_to_string(&target).unwrap(), "precious");
    }

    #[test]
    fn an_unsafe_directory_or_lock_file_is_refused_and_nothing_made() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o1777)).unwrap();
        let err = InstanceLock::acquire(&open.join("state.json")).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("(mode 1777)"), "{text}");
        assert!(!text.contains("chmod"), "{text}");
        assert_eq!(fs::read_dir(&open).unwrap().count(), 0);

        let linked = dir.path().join("linked");
        symlink(dir.path(), &linked).unwrap();
        let err = InstanceLock::acquire(&linked.join("state.json")).unwrap_err();
        assert!(err.to_string().contains("is a symbolic link"), "{err}");

        let state = dir.path().join("state.json");
        let lock = lock_path(&state);
        fs::write(&lock, "").unwrap();
        fs::set_permissions(&lock, fs::Permissions::from_mode(0o644)).unwrap();
        let err = InstanceLock::acquire(&state).unwrap_err().to_string();
        assert!(err.contains("(mode 0644)"), "{err}");
        assert!(
            err.contains(&format!("chmod 600 {}", lock.display())),
            "{err}"
        );

        fs::remove_file(&lock).unwrap();
        fs::create_dir(&lock).unwrap();
        let err = InstanceLock::acquire(&state).unwrap_err().to_string();
        assert!(err.contains("it is a directory"), "{err}");
        assert!(err.contains(&lock.display().to_string()), "{err}");

        fs::remove_dir(&lock).unwrap();
        nix::unistd::mkfifo(&lock, Mode::from_bits_truncate(0o600)).unwrap();
        let err = InstanceLock::acquire(&state).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }
}
