//! Why `steerd run` could not start, one variant per step of the start-up, each message
//! saying what to fix. Once running, the daemon logs and counts errors instead.

use std::path::PathBuf;

/// A start-up that failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Another `steerd run` holds the state file's lock (`daemon::instance_lock`): two
    /// daemons would overwrite each other's placements, so this one does not start.
    #[error(
        "another steerd daemon is running with the state file {}: its lock {} is held by {}; \
         two daemons would overwrite each other's IRQ affinities and RPS masks, so this one \
         does not start. Stop the other one (`systemctl stop steerd`, or `kill {}` if it was \
         started by hand), or give this one a state file of its own with --state-file \
         (a daemon on another --root has its own)",
        state_file.display(),
        lock.display(),
        super::instance_lock::holder(*pid),
        pid.map_or("PID".to_string(), |p| p.to_string())
    )]
    AnotherDaemon {
        state_file: PathBuf,
        lock: PathBuf,
        pid: Option<u32>,
    },
    /// The state file's lock cannot be taken (its directory or file is unsafe, or cannot
    /// be made).
    #[error("cannot lock the state file {}: {source}", state_file.display())]
    InstanceLock {
        state_file: PathBuf,
        source: super::instance_lock::LockError,
    },
    #[error("cannot set up signal handling: {0}")]
    Signals(#[source] std::io::Error),
    #[error(transparent)]
    Http(#[from] crate::http::ServerStartError),
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
