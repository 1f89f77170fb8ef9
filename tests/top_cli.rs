//! `steerd top` as a script or a pipe runs it: the real binary on generated roots whose
//! counters a thread keeps advancing (CPU 2 busy with eth0's queue 2), in `--once` text,
//! `--format json` (checked field by field against docs/top-json.md), streaming text when
//! standard output is a pipe, with and without a daemon answering, and on a root that
//! cannot be read. The live terminal view is tested in tmux by tests/top_tmux.rs.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::advancing::Advancing;

use serde_json::Value;
use steerd::decisions::Decision;
use steerd::fakeroot::{FakeCounters, FakeMachine, FakeNic, FakeTree};

/// Nothing listens on port 1: "no daemon" without waiting.
const NO_DAEMON: &str = "127.0.0.1:1";

/// The busy CPU, and the queue whose vector fires on it.
const BUSY: usize = 2;

/// A 4-CPU machine with a 4-queue eth0 whose queue q's vector is delivered to CPU q.
fn machine(dir: &Path) -> FakeTree {
    let mut machine = FakeMachine::new(4);
    machine.nics.push(FakeNic {
        name: "eth0".into(),
        driver: "ixgbe".into(),
        node: Some(0),
        queues: 4,
    });
    let tree = machine.write(dir).unwrap();
    for (q, irq) in tree.queue_irqs[0].iter().enumerate() {
        fs::write(
            tree.root
                .join(format!("proc/irq/{irq}/effective_affinity_list")),
            format!("{q}\n"),
        )
        .unwrap();
    }
    tree
}

/// The counters after `step` steps: CPU 2 spends 60 % of its time in irq+softirq,
/// processes 500 times the packets of the others, drops and squeezes; eth0's queue 2
/// vector fires on it 1000 times a step.
fn counters(tree: &FakeTree, step: u64) -> FakeCounters {
    let cpus = tree.machine.cpu_count() as usize;
    let mut counters = FakeCounters::default();
    for cpu in 0..cpus {
        let busy = cpu == BUSY;
        let k = step as u32;
        counters.softnet.push(if busy {
            (50_000 * k, 5 * k, 3 * k)
        } else {
            (100 * k, 0, 0)
        });
        counters.cpu_ticks.push(if busy {
            (step, step, 2 * step, step, 5 * step)
        } else {
            (step, 0, 9 * step, 0, 0)
        });
    }
    for (q, &irq) in tree.queue_irqs[0].iter().enumerate() {
        let mut per_cpu = vec![0; cpus];
        per_cpu[q] = if q == BUSY { 1000 * step } else { step };
        counters.irq_counts.insert(irq, per_cpu);
    }
    counters
}

/// Advances the tree's counters every 30 ms until dropped.
fn advancing(tree: &FakeTree) -> Advancing {
    tree.write_counters(&counters(tree, 1)).unwrap();
    let tree = tree.clone();
    Advancing::start(Duration::from_millis(30), move |step| {
        tree.write_counters(&counters(&tree, step)).unwrap()
    })
}

fn top(root: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_steerd"))
        .arg("top")
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .expect("run steerd top");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Serves one `/decisions` answer at a loopback port, as a running steerd would.
fn fake_daemon(decisions: Vec<Decision>) -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let body = serde_json::to_string(&decisions).unwrap();
    let server = std::thread::spawn(move || {
        let (mut peer, _) = listener.accept().unwrap();
        let mut request = Vec::new();
        let mut byte = [0u8; 1];
        while !request.ends_with(b"\r\n\r\n") && peer.read(&mut byte).is_ok_and(|n| n == 1) {
            request.push(byte[0]);
        }
        assert!(request.starts_with(b"GET /decisions "));
        let _ = write!(peer, "HTTP/1.0 200 OK\r\n\r\n{body}");
    });
    (addr, server)
}

fn decision() -> Decision {
    Decision {
        unix_time: 1_700_000_000.0,
        tick: 42,
        target: "irq 26 affinity".into(),
        action: "irq_affinity".into(),
        old: "0".into(),
        new: "2".into(),
        reason: "stacked_vectors".into(),
        detail: "4 queue vectors on CPU 0".into(),
        outcome: "applied".into(),
    }
}

#[test]
fn once_prints_the_busy_cpu_first_with_its_vector_and_no_decisions_without_a_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let tree = machine(dir.path());
    let advancing = advancing(&tree);
    let (code, text, stderr) = top(
        &tree.root,
        &[
            "--once",
            "--interval",
            "300ms",
            "--metrics-listen",
            NO_DAEMON,
        ],
    );
    drop(advancing);
    assert_eq!(code, 0, "{text}\n{stderr}");
    let lines: Vec<&str> = text.lines().collect();
    let titles = lines
        .iter()
        .position(|l| l.starts_with("CPU  IRQ+SI%"))
        .unwrap_or_else(|| panic!("no CPU table in:\n{text}"));
    let first: Vec<&str> = lines[titles + 1].split_whitespace().collect();
    assert_eq!(first[0], "2", "the busy CPU first:\n{text}");
    let share: f64 = first[1].parse().unwrap();
    assert!((55.0..=65.0).contains(&share), "60 % irq+softirq:\n{text}");
    assert!(
        lines[titles + 1].contains("eth0:2 "),
        "queue 2's vector fires on CPU 2:\n{text}"
    );
    assert!(text.contains("4 CPUs online, 4 NIC queues"), "{text}");
    assert!(
        text.contains("queue packets/s and bytes/s unknown: --root is not this machine"),
        "{text}"
    );
    let queue_titles = lines
        .iter()
        .position(|l| l.starts_with("DEVICE"))
        .unwrap_or_else(|| panic!("no queue table in:\n{text}"));
    let busiest: Vec<&str> = lines[queue_titles + 1].split_whitespace().collect();
    assert_eq!(
        &busiest[..2],
        &["eth0", "2"],
        "the queue whose vector fires most first:\n{text}"
    );
    assert_eq!(busiest[3], "2", "its vector's CPU:\n{text}");
    assert_eq!(busiest[5], "-", "not threaded: no NAPI thread CPU:\n{text}");
    assert_eq!(busiest[6], "off", "RPS off:\n{text}");
    assert!(
        !text.contains("decisions"),
        "no daemon, no decisions:\n{text}"
    );
}

#[test]
fn once_shows_a_running_daemons_decisions() {
    let dir = tempfile::tempdir().unwrap();
    let tree = machine(dir.path());
    tree.write_counters(&counters(&tree, 1)).unwrap();
    let (addr, server) = fake_daemon(vec![decision()]);
    let (code, text, stderr) = top(
        &tree.root,
        &["--once", "--interval", "100ms", "--metrics-listen", &addr],
    );
    server.join().unwrap();
    assert_eq!(code, 0, "{text}\n{stderr}");
    assert!(
        text.contains(&format!("Recent decisions of steerd at {addr}")),
        "{text}"
    );
    assert!(
        text.contains(
            "tick 42  irq 26 affinity  0 -> 2  [stacked_vectors: 4 queue vectors on CPU 0] applied"
        ),
        "{text}"
    );
}

/// The field paths docs/top-json.md documents, by table.
fn documented_fields() -> BTreeSet<String> {
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/top-json.md")).unwrap();
    let mut prefix = None;
    let mut fields = BTreeSet::new();
    for line in doc.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            prefix = match heading {
                "Top level" => Some(""),
                "Cpu" => Some("cpus[]."),
                "Vector" => Some("cpus[].vectors[]."),
                "Queue" => Some("queues[]."),
                "Daemon" => Some("daemon."),
                _ => None,
            };
            continue;
        }
        let (Some(prefix), Some(row)) = (prefix, line.strip_prefix("| `")) else {
            continue;
        };
        let cell = row.split(" |").next().unwrap_or_default();
        fields.insert(format!("{prefix}{}", cell.trim_matches('`')));
    }
    fields
}

/// The field paths in a JSON frame (a decision's own fields are docs/status-json.md's).
fn printed_fields(value: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let path = format!("{prefix}{key}");
                out.insert(path.clone());
                if path != "daemon.decisions" {
                    printed_fields(child, &format!("{path}."), out);
                }
            }
        }
        Value::Array(items) => {
            let prefix = format!("{}[].", prefix.trim_end_matches('.'));
            for item in items {
                printed_fields(item, &prefix, out);
            }
        }
        _ => {}
    }
}

#[test]
fn json_has_exactly_the_documented_fields_and_the_busy_cpu_first() {
    let dir = tempfile::tempdir().unwrap();
    let tree = machine(dir.path());
    let advancing = advancing(&tree);
    let (addr, server) = fake_daemon(vec![decision()]);
    let (code, json, stderr) = top(
        &tree.root,
        &[
            "--format",
            "json",
            "--interval",
            "300ms",
            "--metrics-listen",
            &addr,
        ],
    );
    drop(advancing);
    server.join().unwrap();
    assert_eq!(code, 0, "{json}\n{stderr}");
    let frame: Value = serde_json::from_str(&json).expect("one JSON object");

    let mut printed = BTreeSet::new();
    printed_fields(&frame, "", &mut printed);
    assert_eq!(printed, documented_fields(), "{json}");

    assert_eq!(frame["schema_version"], 1);
    assert_eq!(frame["cpus_online"], 4);
    let busy = &frame["cpus"][0];
    assert_eq!(busy["cpu"], BUSY, "{json}");
    let share = busy["net_share"].as_f64().unwrap();
    assert!((0.55..=0.65).contains(&share), "{json}");
    assert!(busy["dropped_per_sec"].as_f64().unwrap() > 0.0, "{json}");
    assert!(busy["squeezed_per_sec"].as_f64().unwrap() > 0.0, "{json}");
    assert_eq!(busy["vectors"][0]["queue"], 2, "{json}");
    assert!(
        busy["vectors"][0]["per_sec"].as_f64().unwrap() > 0.0,
        "{json}"
    );
    let queue = &frame["queues"][0];
    assert_eq!(queue["queue"], 2, "{json}");
    assert_eq!(queue["irq_cpus"], "2", "{json}");
    assert_eq!(queue["rps_cpus"], "", "{json}");
    assert!(queue["packets_per_sec"].is_null(), "a fake root: {json}");
    assert!(frame["queue_rates_unknown"].is_string(), "{json}");
    assert_eq!(frame["daemon"]["address"], addr.as_str());
    assert_eq!(frame["daemon"]["decisions"][0]["reason"], "stacked_vectors");
}

/// With threaded NAPI, each queue shows its thread and the CPU the thread last ran on,
/// which is where its receive work runs (here CPU 3 for queue 1, whose vector fires on 1).
#[test]
fn a_threaded_queue_shows_the_cpu_its_napi_thread_runs_on() {
    let dir = tempfile::tempdir().unwrap();
    let tree = machine(dir.path());
    tree.write_counters(&counters(&tree, 1)).unwrap();
    let pids = tree.make_threaded(0, 700).unwrap();
    let stat = tree.root.join(format!("proc/{}/stat", pids[1]));
    let line = fs::read_to_string(&stat).unwrap();
    // Field 39, the CPU it last ran on, is the 37th after the name's `)`.
    let (head, tail) = line.rsplit_once(')').unwrap();
    let mut fields: Vec<String> = tail.split_whitespace().map(String::from).collect();
    fields[36] = "3".into();
    fs::write(&stat, format!("{head}) {}\n", fields.join(" "))).unwrap();
    let (code, json, stderr) = top(
        &tree.root,
        &[
            "--format",
            "json",
            "--interval",
            "100ms",
            "--metrics-listen",
            NO_DAEMON,
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let frame: Value = serde_json::from_str(&json).unwrap();
    let queue = |q: u64| {
        frame["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["queue"] == q)
            .unwrap()
            .clone()
    };
    assert_eq!(queue(1)["napi_thread_pid"], pids[1], "{json}");
    assert_eq!(queue(1)["napi_thread_cpu"], 3, "{json}");
    assert_eq!(queue(1)["irq_cpus"], "1", "{json}");
    assert_eq!(queue(0)["napi_thread_cpu"], 0, "{json}");

    let (code, text, stderr) = top(
        &tree.root,
        &[
            "--once",
            "--interval",
            "100ms",
            "--metrics-listen",
            NO_DAEMON,
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(text.contains("NAPI CPU"), "{text}");
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.split_whitespace().take(2).eq(["eth0", "1"]))
        .unwrap_or_else(|| panic!("no eth0 1 row in:\n{text}"))
        .split_whitespace()
        .collect();
    assert_eq!(
        (row[3], row[5]),
        ("1", "3"),
        "IRQ CPU 1, thread on 3:\n{text}"
    );
}

#[test]
fn json_without_a_daemon_has_daemon_null() {
    let dir = tempfile::tempdir().unwrap();
    let tree = machine(dir.path());
    tree.write_counters(&counters(&tree, 1)).unwrap();
    let (code, json, stderr) = top(
        &tree.root,
        &[
            "--format",
            "json",
            "--interval",
            "100ms",
            "--metrics-listen",
            NO_DAEMON,
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let frame: Value = serde_json::from_str(&json).unwrap();
    assert!(frame["daemon"].is_null(), "{json}");
}

#[test]
fn on_a_pipe_it_prints_text_frames_until_the_reader_goes_away() {
    let dir = tempfile::tempdir().unwrap();
    let tree = machine(dir.path());
    let advancing = advancing(&tree);
    let mut child = Command::new(env!("CARGO_BIN_EXE_steerd"))
        .args([
            "top",
            "--interval",
            "100ms",
            "--metrics-listen",
            NO_DAEMON,
            "--root",
        ])
        .arg(&tree.root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut headers = 0;
    let mut escapes = false;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        escapes |= line.contains('\u{1b}');
        if line.starts_with("steerd top: root") {
            headers += 1;
            if headers == 3 {
                break;
            }
        }
    }
    // The reader is gone: the next frame's write fails and top ends, quietly.
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("steerd top did not end when its reader went away");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(advancing);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(headers, 3);
    assert!(!escapes, "no colour or cursor movement on a pipe");
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn a_root_that_cannot_be_read_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-root");
    let (code, text, stderr) = top(&missing, &["--once", "--metrics-listen", NO_DAEMON]);
    assert_eq!(code, 1, "{text}");
    assert!(
        stderr.starts_with(&format!(
            "steerd: cannot read the machine under {}",
            missing.display()
        )),
        "{stderr}"
    );

    // A machine without its per-tick counters.
    let tree = machine(dir.path());
    fs::remove_file(tree.root.join("proc/net/softnet_stat")).unwrap();
    let (code, _, stderr) = top(&tree.root, &["--once", "--metrics-listen", NO_DAEMON]);
    assert_eq!(code, 1);
    assert!(stderr.contains("softnet_stat"), "{stderr}");
}
