//! Test binaries whose tests depend on the machine (root, a tool on `PATH`, a kernel
//! feature, a VM): a skipped test is reported as *ignored, with its reason* in cargo
//! test's own summary, never as passed.
//!
//! The standard harness cannot decide at run time that a test is ignored, so such a
//! binary sets `harness = false` in `Cargo.toml` and runs its tests through
//! [`libtest_mimic`] with [`suite_main!`]:
//!
//! ```ignore
//! mod common;
//! use common::suite::{Requirement, TestResult, skip};
//!
//! fn needs_root_and_ip() -> TestResult {
//!     Requirement::check_all(&[Requirement::Root, Requirement::tool("ip", "apt-get install iproute2")])?;
//!     // ... the test; panics and failed asserts fail it as usual.
//!     Ok(())
//! }
//!
//! fn plain() { assert_eq!(1 + 1, 2) }
//!
//! suite_main!(needs_root_and_ip, plain);
//! ```
//!
//! A test body returns `()` or [`TestResult`]. Two kinds of skip:
//! - [`skip`] (and a failed [`Requirement`]): a prerequisite someone can install or grant
//!   is missing (a tool, root). Under `CI=true` this is a **failure**: CI installs
//!   everything, so a missing prerequisite there is a broken CI, not a reason to pass.
//! - [`not_here`]: this machine is not the kind of machine the test is about (no virtio
//!   `eth0`, the kernel lacks the feature, no KVM for the QEMU lab). Reported as ignored
//!   with its reason everywhere, CI included.
//!
//! libtest-mimic prints each as `test NAME ... ignored, REASON`; `scripts/test` collects
//! those lines into its closing summary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Completion, Failed, Trial};

/// Why a test did not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    pub reason: String,
    /// A prerequisite that can be installed or granted (fails under `CI=true`).
    pub prerequisite: bool,
}

/// What a test body that may skip returns.
pub type TestResult = Result<(), Skip>;

/// Skips: a prerequisite is missing (a failure under `CI=true`). Say what to do in the
/// reason, e.g. "promtool not found (apt-get install prometheus)".
pub fn skip(reason: impl Into<String>) -> TestResult {
    Err(Skip {
        reason: reason.into(),
        prerequisite: true,
    })
}

/// Skips: this machine is not one the test is about (a skip under `CI=true` too).
pub fn not_here(reason: impl Into<String>) -> TestResult {
    Err(Skip {
        reason: reason.into(),
        prerequisite: false,
    })
}

/// Whether the run is CI's (`CI=true`), where missing prerequisites fail.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Something a test needs from the machine.
#[derive(Debug, Clone)]
pub enum Requirement {
    /// Effective user id 0.
    Root,
    /// A program on `PATH`, and how to install it.
    Tool { name: String, install: String },
    /// A file (or one of several, when the path holds a `*` as its last component's
    /// prefix match, e.g. `/boot/vmlinuz-*`), and what provides it.
    File { path: PathBuf, provides: String },
}

impl Requirement {
    pub fn tool(name: &str, install: &str) -> Requirement {
        Requirement::Tool {
            name: name.into(),
            install: install.into(),
        }
    }

    pub fn file(path: impl AsRef<Path>, provides: &str) -> Requirement {
        Requirement::File {
            path: path.as_ref().to_path_buf(),
            provides: provides.into(),
        }
    }

    /// `Ok`, or the skip (a missing prerequisite) saying what is missing and what to do.
    pub fn check(&self) -> TestResult {
        match self {
            Requirement::Root => {
                if nix::unistd::geteuid().is_root() {
                    Ok(())
                } else {
                    skip("not root (run the tests as root to include it)")
                }
            }
            Requirement::Tool { name, install } => {
                if on_path(name) {
                    Ok(())
                } else {
                    skip(format!("{name} not found on PATH ({install})"))
                }
            }
            Requirement::File { path, provides } => {
                if file_exists(path) {
                    Ok(())
                } else {
                    skip(format!("{} not found ({provides})", path.display()))
                }
            }
        }
    }

    /// The first unmet requirement's skip, in order.
    pub fn check_all(requirements: &[Requirement]) -> TestResult {
        requirements.iter().try_for_each(Requirement::check)
    }
}

/// Whether `program` is an executable file in a `PATH` directory.
pub fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(program))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// Whether `path` exists; a last component ending in `*` matches by prefix.
fn file_exists(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return path.exists();
    };
    let Some(prefix) = name.strip_suffix('*') else {
        return path.exists();
    };
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(prefix))
    })
}

/// What a test body may return: `()` (it ran) or a [`TestResult`].
pub trait IntoTestResult {
    fn into_test_result(self) -> TestResult;
}

impl IntoTestResult for () {
    fn into_test_result(self) -> TestResult {
        Ok(())
    }
}

impl IntoTestResult for TestResult {
    fn into_test_result(self) -> TestResult {
        self
    }
}

/// One trial: runs `body`; a skip becomes "ignored, reason" (or, for a missing
/// prerequisite under `CI=true`, a failure).
pub fn trial<R: IntoTestResult + 'static>(name: &str, body: fn() -> R) -> Trial {
    let timed = name.to_string();
    Trial::ignorable_test(name, move || {
        let _timer = SlowTrialTimer::start(timed);
        verdict(body().into_test_result())
    })
}

/// A trial's outcome in libtest-mimic's terms.
fn verdict(result: TestResult) -> Result<Completion, Failed> {
    match result {
        Ok(()) => Ok(Completion::Completed),
        Err(skip) if skip.prerequisite && in_ci() => Err(Failed::from(format!(
            "missing prerequisite under CI=true (a skip elsewhere): {}",
            skip.reason
        ))),
        Err(skip) => Ok(Completion::ignored_with(skip.reason)),
    }
}

thread_local! {
    /// Time the running trial spent waiting for another test ([`waited`]).
    static WAITED: std::cell::Cell<std::time::Duration> =
        const { std::cell::Cell::new(std::time::Duration::ZERO) };
}

/// Counts `d` as time the running trial spent waiting for another test (a shared guest:
/// tests/lab.rs's `ONE_GUEST`), which its timing line then gives apart: libtest-mimic runs
/// trials on several threads, so a trial's wall time holds its neighbours' too.
pub fn waited(d: std::time::Duration) {
    WAITED.with(|w| w.set(w.get() + d));
}

/// Prints how long a trial took when that was at least [`SLOW_TRIAL`], also when it
/// panicked (on drop): CI has a time budget (`.ci/run`, under an hour), and the guest
/// tests' times are what decide whether it is kept; libtest-mimic reports none.
struct SlowTrialTimer {
    name: String,
    started: std::time::Instant,
}

/// Trials quicker than this are not timed aloud.
const SLOW_TRIAL: std::time::Duration = std::time::Duration::from_secs(10);

impl SlowTrialTimer {
    fn start(name: String) -> SlowTrialTimer {
        WAITED.with(|w| w.set(std::time::Duration::ZERO));
        SlowTrialTimer {
            name,
            started: std::time::Instant::now(),
        }
    }
}

impl Drop for SlowTrialTimer {
    fn drop(&mut self) {
        let waited = WAITED.with(|w| w.get());
        let took = self.started.elapsed().saturating_sub(waited);
        if took >= SLOW_TRIAL {
            eprintln!(
                "trial time: {} took {:.0} s (and waited {:.0} s for another test)",
                self.name,
                took.as_secs_f64(),
                waited.as_secs_f64()
            );
        }
    }
}

/// Runs the trials with the command line cargo test passed, and exits with their verdict.
pub fn run(trials: Vec<Trial>) -> ! {
    let arguments = Arguments::from_args();
    libtest_mimic::run(&arguments, trials).exit()
}

/// `fn main` for a `harness = false` test binary: one trial per listed function, named
/// after it.
#[macro_export]
macro_rules! suite_main {
    ($($test:ident),+ $(,)?) => {
        fn main() {
            common::suite::run(vec![$(common::suite::trial(stringify!($test), $test)),+])
        }
    };
}
