//! Why `steerd run` could not start, one variant per step of the start-up, each message
//! saying what to fix. Once running, the daemon logs and counts errors instead.

use std::path::PathBuf;

/// A start-up that failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot set up signal handling: {0}")]
    Signals(#[source] std::io::Error),
    #[error(transparent)]
    Http(#[from] crate::http::StartError),
    /// The configuration file cannot be read or is invalid: every problem, one per line,
    /// each naming the file, key and line.
    #[error("{}", .0.join("\n"))]
    Config(Vec<String>),
    #[error("cannot read the machine under {root}: {source}; is --root right?")]
    Discovery { root: PathBuf, source: crate::Error },
    #[error("cannot open the per-tick counters: {0}")]
    Sampling(#[source] crate::Error),
    #[error(
        "cannot use the state file {path}: {source}; pass another with --state-file, or fix its directory"
    )]
    StateFile { path: PathBuf, source: crate::Error },
    #[error("cannot set up the wake-ups: {0}")]
    Wakeups(#[source] std::io::Error),
}
