//! `Root`: the directory under which `proc/` and `sys/` are found.
//!
//! Every path steerd reads or writes goes through a `Root`, so tests, replays and bug
//! reports run the real code on a fake tree laid out exactly like the kernel's
//! (`DIR/proc/...`, `DIR/sys/...`), writes included. The default root is `/`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::limits::{MAX_FILE_BYTES, read_optional_bounded, read_text_bounded};

/// A directory standing in for `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    base: PathBuf,
}

impl Default for Root {
    fn default() -> Self {
        Root::new("/")
    }
}

impl Root {
    /// A root at `base` (for the real machine, `/`).
    pub fn new(base: impl Into<PathBuf>) -> Self {
        Root { base: base.into() }
    }

    /// Whether this root is the running machine's own `/`, where netlink and ioctls
    /// describe the same machine as the files do.
    pub fn is_host(&self) -> bool {
        self.base == Path::new("/")
    }

    /// The directory itself.
    pub fn base(&self) -> &Path {
        &self.base
    }

    /// `relative` (written without a leading slash, e.g. `proc/stat`) under this root.
    pub fn path(&self, relative: impl AsRef<Path>) -> PathBuf {
        let relative = relative.as_ref();
        let relative = relative.strip_prefix("/").unwrap_or(relative);
        self.base.join(relative)
    }

    /// Reads a whole file as text; the error names the file. At most
    /// [`MAX_FILE_BYTES`] are read: a longer file (or one that never ends) is
    /// [`Error::TooLarge`].
    pub fn read(&self, relative: impl AsRef<Path>) -> Result<String, Error> {
        read_text_bounded(&self.path(relative), MAX_FILE_BYTES)
    }

    /// Reads a file that may legitimately be absent: `Ok(None)` when it does not exist
    /// (ENOENT, or ENOTDIR for a vanished parent), any other failure is an error.
    /// Bounded like [`Root::read`].
    pub fn read_optional(&self, relative: impl AsRef<Path>) -> Result<Option<String>, Error> {
        read_optional_bounded(&self.path(relative), MAX_FILE_BYTES)
    }
}

/// Whether an I/O error means "this file is not there": ENOENT, or ENOTDIR when a parent
/// directory vanished or is a plain file.
pub fn is_absent(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::NotFound || err.raw_os_error() == Some(nix::libc::ENOTDIR)
}

/// The entries of a directory that may legitimately be absent: an absent one (see
/// [`is_absent`]) has none; any other failure, opening it or reading an entry, is an
/// [`Error::Io`] naming the directory. Streams, as `fs::read_dir` does. Shared by the
/// sysfs readers that list devices, queues, MSI IRQs and numbered CPU entries.
pub fn optional_dir_entries(
    dir: &Path,
) -> Result<impl Iterator<Item = Result<fs::DirEntry, Error>> + '_, Error> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => Some(entries),
        Err(err) if is_absent(&err) => None,
        Err(err) => return Err(Error::io(dir, err)),
    };
    Ok(entries
        .into_iter()
        .flatten()
        .map(move |entry| entry.map_err(|err| Error::io(dir, err))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn paths_stay_under_the_root() {
        let root = Root::new("/tmp/fake");
        assert_eq!(root.path("proc/stat"), PathBuf::from("/tmp/fake/proc/stat"));
        assert_eq!(
            root.path("/sys/class/net"),
            PathBuf::from("/tmp/fake/sys/class/net")
        );
        assert!(Root::default().is_host());
        assert!(!root.is_host());
    }

    #[test]
    fn absent_files_are_none_and_other_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        assert_eq!(root.read_optional("proc/nothing").unwrap(), None);
        fs::create_dir(dir.path().join("adir")).unwrap();
        let err = root.read_optional("adir").unwrap_err().to_string();
        assert!(err.contains("adir"), "{err}");
        let err = root.read("proc/nothing").unwrap_err().to_string();
        assert!(err.contains("proc/nothing"), "{err}");
    }
}
