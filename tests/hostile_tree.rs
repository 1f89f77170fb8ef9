//! Every kernel file of a generated tree, replaced in turn by a FIFO, a directory and a
//! character device: opening a FIFO waits for its other end forever and a device may never
//! end, so one open of them without care hangs steerd. Each one-shot command (`inspect`,
//! `plan`, `doctor`) must end, without a panic; `inspect` and `plan` must fail or succeed
//! within a few seconds (a second here), naming the file when they fail; the daemon must
//! keep ticking, say each lasting failure once, and stop on SIGTERM.
//!
//! The files are all the regular files under `proc/` and `sys/` that the generator writes
//! (CPU topology and caches, IRQ affinity and effective affinity, queue masks, counters),
//! so a reader added later is covered without a list to keep. Every run is bounded in time.

mod daemon_support;

use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use daemon_support::{Steerd, wait_until};
use steerd::fakeroot::{FakeMachine, FakeNic};

/// How long one command may take on a loaded 2-CPU CI machine before it counts as hung
/// (each one takes well under a second here).
const COMMAND_DEADLINE: Duration = Duration::from_secs(20);

/// Four CPUs (two cores of two threads), a 2-queue NIC and a 1-queue one, every queue IRQ
/// on CPU 0 so that the daemon has writes to make.
fn machine() -> FakeMachine {
    let mut machine = FakeMachine::new(2);
    machine.threads_per_core = 2;
    for (name, queues) in [("eth0", 2), ("eth1", 1)] {
        machine.nics.push(FakeNic {
            name: name.into(),
            driver: "ixgbe".into(),
            node: Some(0),
            queues,
        });
    }
    machine
}

fn write_tree(dir: &Path) -> PathBuf {
    let root = dir.join("root");
    let tree = machine().write(&root).expect("write the tree");
    for irq in tree.queue_irqs.iter().flatten() {
        fs::write(
            root.join(format!("proc/irq/{irq}/smp_affinity_list")),
            "0\n",
        )
        .expect("write affinity");
    }
    root
}

/// The regular files under `root/proc` and `root/sys`, relative to `root`, sorted.
/// Symlinks are not followed (sysfs links back up the tree).
fn kernel_files(root: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let kind = fs::symlink_metadata(&path).expect("lstat").file_type();
            if kind.is_dir() {
                walk(root, &path, out);
            } else if kind.is_file() {
                out.push(path.strip_prefix(root).expect("under root").to_path_buf());
            }
        }
    }
    let mut files = Vec::new();
    for top in ["proc", "sys"] {
        walk(root, &root.join(top), &mut files);
    }
    files
}

/// What stands where a kernel file was.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Fifo,
    Directory,
    /// A link to `/dev/null`: opening it opens the device.
    CharDevice,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Fifo, Kind::Directory, Kind::CharDevice];

    fn name(self) -> &'static str {
        match self {
            Kind::Fifo => "a FIFO",
            Kind::Directory => "a directory",
            Kind::CharDevice => "a character device",
        }
    }
}

/// A kernel file replaced by something else; `restore` puts the file back as it was.
struct Planted {
    path: PathBuf,
    bytes: Vec<u8>,
    mode: u32,
}

impl Planted {
    fn new(root: &Path, relative: &Path, kind: Kind) -> Planted {
        let path = root.join(relative);
        let bytes = fs::read(&path).expect("read before planting");
        let mode = fs::metadata(&path).expect("stat").permissions().mode();
        fs::remove_file(&path).expect("remove");
        match kind {
            Kind::Fifo => {
                nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600))
                    .expect("mkfifo")
            }
            Kind::Directory => fs::create_dir(&path).expect("mkdir"),
            Kind::CharDevice => std::os::unix::fs::symlink("/dev/null", &path).expect("symlink"),
        }
        Planted { path, bytes, mode }
    }

    fn restore(self) {
        let kind = fs::symlink_metadata(&self.path).expect("lstat").file_type();
        if kind.is_dir() {
            fs::remove_dir_all(&self.path).expect("remove the directory");
        } else {
            fs::remove_file(&self.path).expect("remove what was planted");
        }
        fs::write(&self.path, &self.bytes).expect("write back");
        fs::set_permissions(&self.path, fs::Permissions::from_mode(self.mode)).expect("chmod");
    }
}

/// How a bounded run of a command ended.
enum Ended {
    Exited {
        code: Option<i32>,
        stderr: String,
        took: Duration,
    },
    Hung,
}

/// Runs `steerd ARGS` with output to files (a full pipe cannot stall it), killing it after
/// [`COMMAND_DEADLINE`].
fn run_bounded(args: &[&str], scratch: &Path) -> Ended {
    let out = scratch.join("stdout");
    let err = scratch.join("stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_steerd"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(File::create(&out).expect("stdout file"))
        .stderr(File::create(&err).expect("stderr file"))
        .spawn()
        .expect("spawn steerd");
    let started = Instant::now();
    let deadline = started + COMMAND_DEADLINE;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Ended::Exited {
                code: status.code(),
                stderr: fs::read_to_string(&err).unwrap_or_default(),
                took: started.elapsed(),
            };
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ended::Hung;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether an error names the file: its path, or (read through a `sys/class/net` link)
/// its name as the last part of the path it gives.
fn names(stderr: &str, relative: &Path) -> bool {
    let name = relative
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    stderr.contains(&*relative.to_string_lossy())
        || name.is_some_and(|name| stderr.contains(&format!("/{name}: ")))
}

/// The longest a one-shot command may take to end on a planted file before it counts as
/// slow (it takes well under a second here; CI machines are slower and shared).
const SLOW: Duration = Duration::from_secs(5);

/// What went wrong with one command on one planted file, if anything. `inspect` and
/// `plan` succeed or fail naming the file, within [`SLOW`]; `doctor` reports findings
/// through its exit code (0, 1, 2) and samples for a second, so only a hang or a panic
/// counts against it.
fn judge(command: &str, relative: &Path, kind: Kind, ended: &Ended) -> Option<String> {
    let at = format!("{} at {}", kind.name(), relative.display());
    let Ended::Exited { code, stderr, took } = ended else {
        return Some(format!("{command} hung on {at}"));
    };
    let one_shot = command != "doctor";
    if stderr.contains("panicked") {
        Some(format!("{command} panicked on {at}: {stderr}"))
    } else if code.is_none() {
        Some(format!(
            "{command} was killed by a signal on {at}: {stderr}"
        ))
    } else if one_shot && *took > SLOW {
        Some(format!("{command} took {took:?} on {at}"))
    } else if one_shot && *code != Some(0) && !names(stderr, relative) {
        Some(format!(
            "{command} failed ({code:?}) on {at} without naming it: {stderr}"
        ))
    } else {
        None
    }
}

#[test]
fn one_shot_commands_end_on_anything_at_any_kernel_file() {
    const WORKERS: usize = 4;
    let files = kernel_files(&write_tree(tempfile::tempdir().unwrap().path()));
    assert!(files.len() > 50, "the tree has only {} files", files.len());
    eprintln!(
        "{} kernel files, each a FIFO, a directory and a character device in turn",
        files.len()
    );
    // Each worker has its own tree, so the files are tried four at a time (`doctor` alone
    // samples for a second).
    let problems: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|worker| {
                let files = &files;
                scope.spawn(move || {
                    let dir = tempfile::tempdir().unwrap();
                    let root = write_tree(dir.path());
                    let root_arg = root.to_str().expect("utf-8 path").to_string();
                    let mut problems = Vec::new();
                    let mut slowest = Duration::ZERO;
                    for relative in files.iter().skip(worker).step_by(WORKERS) {
                        for kind in Kind::ALL {
                            let planted = Planted::new(&root, relative, kind);
                            for (command, extra) in [
                                ("inspect", &[][..]),
                                ("plan", &["--window", "100ms"][..]),
                                ("doctor", &["--metrics-listen", "127.0.0.1:1"][..]),
                            ] {
                                let mut args = vec![command, "--root", &root_arg];
                                args.extend_from_slice(extra);
                                let ended = run_bounded(&args, dir.path());
                                if let (Ended::Exited { took, .. }, true) =
                                    (&ended, command != "doctor")
                                {
                                    slowest = slowest.max(*took);
                                }
                                problems.extend(judge(command, relative, kind, &ended));
                            }
                            planted.restore();
                        }
                    }
                    (problems, slowest)
                })
            })
            .collect();
        let mut problems = Vec::new();
        let mut slowest = Duration::ZERO;
        for worker in workers {
            let (found, took) = worker.join().expect("worker");
            problems.extend(found);
            slowest = slowest.max(took);
        }
        eprintln!("the slowest inspect or plan took {slowest:?}");
        problems
    });
    assert!(
        problems.is_empty(),
        "{} of {} files x 3 kinds x 3 commands:\n{}",
        problems.len(),
        files.len(),
        problems.join("\n")
    );
}

#[test]
fn the_daemon_keeps_ticking_with_anything_at_any_kernel_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = write_tree(dir.path());
    let files = kernel_files(&root);
    let mut daemon = Steerd::start(&root, None);
    // A tick whose counters cannot be read is skipped and counted apart: either counter
    // rising shows the loop is not stuck in an open or a read.
    let ticks = |daemon: &Steerd| {
        daemon.metric("steerd_ticks_total").unwrap_or(0.0)
            + daemon
                .metric("steerd_sampling_failures_total")
                .unwrap_or(0.0)
    };
    wait_until(
        Duration::from_secs(10),
        "three ticks",
        Some(&daemon),
        || ticks(&daemon) >= 3.0,
    );
    let mut stalled = Vec::new();
    'files: for relative in &files {
        for kind in Kind::ALL {
            let planted = Planted::new(&root, relative, kind);
            let before = ticks(&daemon);
            let deadline = Instant::now() + COMMAND_DEADLINE;
            while ticks(&daemon) < before + 3.0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if ticks(&daemon) < before + 3.0 {
                stalled.push(format!("{} at {}", kind.name(), relative.display()));
            }
            planted.restore();
            if !daemon.is_running() {
                break 'files;
            }
        }
    }
    assert!(
        daemon.is_running(),
        "steerd exited\n{}",
        daemon.stderr_text()
    );
    assert!(
        stalled.is_empty(),
        "no tick for {COMMAND_DEADLINE:?} with: {}\n--- stderr ---\n{}",
        stalled.join(", "),
        daemon.stderr_text()
    );
    // A failure that lasts is told once (and its end once), not on every tick: each planted
    // file stands for at least three ticks, so a line per tick would show up three times.
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for line in daemon.stderr_lines() {
        if line.text.contains(" WARN ") || line.text.contains(" ERROR ") {
            let text = line.text.split_once(' ').map_or("", |(_, t)| t).to_string();
            *counts.entry(text).or_default() += 1;
        }
    }
    let repeated: Vec<_> = counts.into_iter().filter(|(_, n)| *n > 2).collect();
    assert!(repeated.is_empty(), "told again and again: {repeated:#?}");
    let status = daemon.stop(nix::sys::signal::Signal::SIGTERM);
    assert!(status.success(), "{status:?}\n{}", daemon.stderr_text());
    assert!(
        !daemon.stderr_text().contains("panicked"),
        "{}",
        daemon.stderr_text()
    );
}
