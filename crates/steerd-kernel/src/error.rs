//! The library's error type.
//!
//! Every error names what it is about: the file (and line) for kernel input, the key for
//! configuration. Bad input is an error, never a panic.

use std::io;
use std::path::PathBuf;

/// An error from reading, parsing or writing kernel state.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    /// A kernel file did not have the expected shape. `line` counts from 1; 0 means the
    /// file as a whole.
    #[error("{}:{line}: {reason}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    /// A file held more than steerd reads of one file ([`crate::limits`]): a corrupt or
    /// fake file, or one that never ends.
    #[error(
        "{}: longer than {limit} bytes, the most steerd reads of one kernel file",
        path.display()
    )]
    TooLarge { path: PathBuf, limit: u64 },
    /// A netlink or ioctl request failed.
    #[error("{what}: {reason}")]
    Kernel { what: String, reason: String },
    /// The state file or its directory is not safe to use (or too large).
    #[error(transparent)]
    StateFile(#[from] crate::apply::StateFileError),
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub fn parse(path: impl Into<PathBuf>, line: usize, reason: impl Into<String>) -> Self {
        Error::Parse {
            path: path.into(),
            line,
            reason: reason.into(),
        }
    }

    /// As an `io::Error` for callers that classify failures by errno: an I/O error's own
    /// (its errno kept), anything else as `Other` with this error's message.
    pub fn into_io(self) -> io::Error {
        match self {
            Error::Io { source, .. } => source,
            other => io::Error::other(other.to_string()),
        }
    }

    /// The errno behind an I/O error, if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}
