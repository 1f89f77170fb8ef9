//! `steerd top`'s live view in a real terminal: tmux runs it in a detached session of a
//! fixed size on a generated root whose counters keep moving; the test reads the screen
//! (`capture-pane`), resizes the window and checks the layout follows, sends `q` and checks
//! the process exited 0 and the session ended; and checks the terminal is put back (main
//! screen, canonical mode) after a quit and after an error (the root's counters vanish).
//!
//! Each test uses its own tmux server (`tmux -L <unique name>`, no configuration file), so
//! nothing of anyone else's tmux is touched, and kills only the session it created. Every
//! wait is bounded. Without tmux the tests are skipped with the reason
//! (`scripts/test` installs it).

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::advancing::Advancing;
use common::suite::{Requirement, TestResult};
use steerd::fakeroot::{FakeCounters, FakeMachine, FakeNic, FakeTree};

/// The CPU the generated load makes busiest.
const BUSY: u32 = 5;

/// How long any one wait for the screen may take.
const WAIT: Duration = Duration::from_secs(15);

fn tmux_present() -> TestResult {
    Requirement::tool("tmux", "apt-get install tmux").check()
}

/// A 16-CPU machine with two 4-queue NICs; queue q of each is delivered to CPU q.
fn machine(dir: &Path) -> FakeTree {
    let mut machine = FakeMachine::new(16);
    for name in ["eth0", "eth1"] {
        machine.nics.push(FakeNic {
            name: name.into(),
            driver: "ixgbe".into(),
            node: Some(0),
            queues: 4,
        });
    }
    let tree = machine.write(dir).unwrap();
    for irqs in &tree.queue_irqs {
        for (q, irq) in irqs.iter().enumerate() {
            std::fs::write(
                tree.root
                    .join(format!("proc/irq/{irq}/effective_affinity_list")),
                format!("{q}\n"),
            )
            .unwrap();
        }
    }
    tree
}

/// CPU 5 spends half its time in irq+softirq; the others a little.
fn counters(tree: &FakeTree, step: u64) -> FakeCounters {
    let mut counters = FakeCounters::default();
    for cpu in 0..tree.machine.cpu_count() {
        let k = step as u32;
        if cpu == BUSY {
            counters.softnet.push((40_000 * k, 0, k));
            counters
                .cpu_ticks
                .push((step, step, 3 * step, step, 4 * step));
        } else {
            counters.softnet.push((100 * k, 0, 0));
            counters.cpu_ticks.push((step, 0, 9 * step, 0, 0));
        }
    }
    counters
}

/// Advances the counters every 50 ms until dropped.
fn advancing(tree: &FakeTree) -> Advancing {
    tree.write_counters(&counters(tree, 1)).unwrap();
    let tree = tree.clone();
    Advancing::start(Duration::from_millis(50), move |step| {
        // The error test removes a counter file: writing may then fail; go on.
        let _ = tree.write_counters(&counters(&tree, step));
    })
}

/// One session on a tmux server of this test's own.
struct Session {
    socket: String,
}

const SESSION: &str = "top";

impl Session {
    /// Starts `command` (a shell command line) in a detached `width` × `height` session.
    fn start(test: &str, command: &str, width: u16, height: u16) -> Session {
        let session = Session {
            socket: format!("steerd-{test}-{}", std::process::id()),
        };
        let out = session.tmux(&[
            "new-session",
            "-d",
            "-s",
            SESSION,
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            command,
        ]);
        assert!(
            out.status.success(),
            "tmux new-session: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        session
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("run tmux")
    }

    /// The visible screen, one string per line.
    fn screen(&self) -> Vec<String> {
        let out = self.tmux(&["capture-pane", "-p", "-t", SESSION]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn alive(&self) -> bool {
        self.tmux(&["has-session", "-t", SESSION]).status.success()
    }

    /// Waits until `ready` holds for the screen; panics with the last screen after
    /// [`WAIT`].
    fn wait_for(&self, what: &str, ready: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = Instant::now() + WAIT;
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited {WAIT:?} for {what}; the screen:\n{}",
                screen.join("\n")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.alive() {
            // Only the session this test created, on its own server (which then exits).
            let _ = self.tmux(&["kill-session", "-t", SESSION]);
        }
    }
}

/// `steerd top` on `root`, as a shell command line.
fn top_command(root: &Path) -> String {
    format!(
        "'{}' top --root '{}' --metrics-listen 127.0.0.1:1 --interval 200ms",
        env!("CARGO_BIN_EXE_steerd"),
        root.display()
    )
}

fn contains(screen: &[String], needle: &str) -> bool {
    screen.iter().any(|line| line.contains(needle))
}

/// The CPU ids of the CPU table's rows, top to bottom.
fn cpu_rows(screen: &[String]) -> Vec<u32> {
    let Some(titles) = screen.iter().position(|l| l.contains("IRQ+SI%")) else {
        return Vec::new();
    };
    screen[titles + 1..]
        .iter()
        .map_while(|line| {
            line.trim_start_matches('│')
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

fn widest(screen: &[String]) -> usize {
    screen.iter().map(|l| l.chars().count()).max().unwrap_or(0)
}

fn start_read_resize_quit() -> TestResult {
    tmux_present()?;
    let dir = tempfile::tempdir().unwrap();
    let tree = machine(dir.path());
    let _advancing = advancing(&tree);
    let status: PathBuf = dir.path().join("exit-status");
    let command = format!(
        "{}; echo $? > '{}'",
        top_command(&tree.root),
        status.display()
    );
    let session = Session::start("top-resize", &command, 100, 40);

    // A capture may catch the screen while a frame is being drawn: wait for one that
    // shows everything, rather than judge the first.
    let screen = session.wait_for(
        "a frame with rates, every CPU shown, the busy one first, within 100 columns",
        |s| {
            contains(s, "rates over")
                && contains(s, "CPUs, busiest first: all 16")
                && contains(s, "NIC receive queues, busiest first: all 8")
                && cpu_rows(s).len() == 16
                && cpu_rows(s).first() == Some(&BUSY)
                && widest(s) <= 100
        },
    );
    assert!(contains(&screen, "q quits"));
    assert!(contains(&screen, "eth0:1"), "{}", screen.join("\n"));

    session.tmux(&["resize-window", "-t", SESSION, "-x", "60", "-y", "15"]);
    let small = session.wait_for(
        "the layout of a 60 x 15 window: fewer CPUs, the busy one first, how many hidden",
        |s| {
            let rows = cpu_rows(s);
            s.len() <= 15
                && widest(s) <= 60
                && !rows.is_empty()
                && rows.len() < 16
                && rows[0] == BUSY
                && contains(
                    s,
                    &format!("{} of 16, {} hidden", rows.len(), 16 - rows.len()),
                )
        },
    );
    assert!(contains(&small, "steerd top: root"), "{}", small.join("\n"));

    session.tmux(&["resize-window", "-t", SESSION, "-x", "120", "-y", "45"]);
    session.wait_for("the layout growing back", |s| {
        s.len() > 40 && contains(s, "CPUs, busiest first: all 16")
    });

    session.tmux(&["send-keys", "-t", SESSION, "q"]);
    let deadline = Instant::now() + WAIT;
    while session.alive() {
        assert!(
            Instant::now() < deadline,
            "the session did not end after q:\n{}",
            session.screen().join("\n")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let code = std::fs::read_to_string(&status).unwrap_or_default();
    assert_eq!(code.trim(), "0", "steerd top's exit status after q");
    Ok(())
}

/// A shell that runs `steerd top`, then prints its exit status and the terminal's
/// canonical-mode and echo flags, then `reported`, and stays, so the screen after it can
/// be read.
fn then_report(command: &str) -> String {
    format!(
        "{command}; echo exit=$?; stty -a | tr ' ;' '\\n\\n' | grep -x -e -icanon -e icanon -e -echo -e echo; echo reported; sleep 60"
    )
}

fn the_terminal_is_restored_after_q_and_after_an_error() -> TestResult {
    tmux_present()?;
    let dir = tempfile::tempdir().unwrap();
    let tree = machine(dir.path());
    let mut advancing = advancing(&tree);

    // Ctrl-C quits too (in raw mode it is a key, not a signal).
    let session = Session::start("top-quit", &then_report(&top_command(&tree.root)), 100, 30);
    session.wait_for("the live view", |s| contains(s, "q quits"));
    session.tmux(&["send-keys", "-t", SESSION, "C-c"]);
    let after = session.wait_for("the shell after top", |s| contains(s, "reported"));
    assert!(contains(&after, "exit=0"), "{}", after.join("\n"));
    assert_restored(&after);
    drop(session);

    let session = Session::start("top-error", &then_report(&top_command(&tree.root)), 100, 30);
    session.wait_for("the live view", |s| contains(s, "rates over"));
    advancing.stop();
    std::fs::remove_file(tree.root.join("proc/net/softnet_stat")).unwrap();
    let after = session.wait_for("the shell after top failed", |s| contains(s, "reported"));
    assert!(contains(&after, "exit=1"), "{}", after.join("\n"));
    assert!(
        contains(&after, "steerd: cannot sample the counters"),
        "the error is on the restored screen:\n{}",
        after.join("\n")
    );
    assert_restored(&after);
    Ok(())
}

/// Raw mode is off (canonical input and echo back on) and the main screen is back (the
/// live view, drawn on the alternate screen, is gone).
fn assert_restored(screen: &[String]) {
    let text = screen.join("\n");
    let flags: Vec<&str> = screen
        .iter()
        .map(|l| l.trim())
        .filter(|l| ["icanon", "-icanon", "echo", "-echo"].contains(l))
        .collect();
    assert_eq!(
        flags,
        ["icanon", "echo"],
        "terminal modes after top:\n{text}"
    );
    assert!(
        !contains(screen, "q quits"),
        "the live view is still on the screen:\n{text}"
    );
}

/// The terminal goes away under the live view (the tmux session killed, as an SSH
/// session's end does): `steerd top` ends within 3 s instead of spinning on a terminal that
/// reads end-of-file forever (seen once: three such views at 38 % of a CPU each, for hours).
fn ends_when_its_terminal_goes_away() -> TestResult {
    tmux_present()?;
    let dir = tempfile::tempdir().unwrap();
    let tree = machine(dir.path());
    let pid_file = dir.path().join("pid");
    let command = format!(
        "echo $$ > '{}'; exec {}",
        pid_file.display(),
        top_command(&tree.root)
    );
    let session = Session::start("top-hangup", &command, 100, 40);
    session.wait_for("the live view", |s| contains(s, "q quits"));
    let pid: u32 = fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _ = session.tmux(&["kill-session", "-t", SESSION]);
    let deadline = Instant::now() + Duration::from_secs(3);
    while Path::new(&format!("/proc/{pid}")).exists() {
        let state = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if state.split_whitespace().nth(2) == Some("Z") {
            break;
        }
        if Instant::now() >= deadline {
            // Ours, started by this test: end it rather than leave it spinning.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("steerd top (pid {pid}) still runs 3 s after its terminal went away");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

suite_main!(
    start_read_resize_quit,
    the_terminal_is_restored_after_q_and_after_an_error,
    ends_when_its_terminal_goes_away
);
