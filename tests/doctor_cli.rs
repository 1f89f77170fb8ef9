//! `steerd doctor` as a user runs it: the real binary on generated roots, its exit status
//! by the worst finding, a running daemon's /status read over HTTP, and the JSON contract
//! of docs/doctor-json.md checked field by field.

use std::collections::BTreeSet;
use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use steerd::cpuset::CpuSet;
use steerd::fakeroot::{FakeCounters, FakeMachine, FakeNic, FakeTree};
use steerd::status_report::{LiveStatus, NoWrites};

/// Nothing listens on port 1: "no daemon" without waiting.
const NO_DAEMON: &str = "127.0.0.1:1";

fn doctor(root: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_steerd"))
        .arg("doctor")
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .expect("run steerd doctor");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn put(tree: &FakeTree, relative: &str, text: &str) {
    let path = tree.root.join(relative);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A 4-CPU machine with a 4-queue eth0 and the given edits.
fn machine(dir: &Path, edit: impl FnOnce(&mut FakeMachine)) -> FakeTree {
    let mut machine = FakeMachine::new(4);
    machine.nics.push(FakeNic {
        name: "eth0".into(),
        driver: "ixgbe".into(),
        node: Some(0),
        queues: 4,
    });
    edit(&mut machine);
    machine.write(dir).unwrap()
}

/// Everything wrong at once: irqbalance running, CPU 3 isolated, RFS tables with no
/// global table, drops since boot, and every queue IRQ delivered to CPU 0.
fn a_sick_machine(dir: &Path) -> FakeTree {
    let tree = machine(dir, |m| {
        m.isolated = CpuSet::parse_list("3").unwrap();
        m.rps_sock_flow_entries = Some(0);
    });
    put(&tree, "proc/1/comm", "systemd\n");
    put(&tree, "proc/977/comm", "irqbalance\n");
    put(
        &tree,
        "sys/class/net/eth0/queues/rx-0/rps_flow_cnt",
        "4096\n",
    );
    put(&tree, "proc/sys/net/core/netdev_max_backlog", "1000\n");
    tree.write_counters(&FakeCounters {
        softnet: vec![(1000, 0, 0), (500, 42, 0)],
        ..FakeCounters::default()
    })
    .unwrap();
    tree
}

#[test]
fn a_sick_machine_gets_every_finding_with_its_fix_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let tree = a_sick_machine(dir.path());
    let (code, text, stderr) = doctor(&tree.root, &["--metrics-listen", NO_DAEMON]);
    eprintln!("{text}");
    assert_eq!(code, 2, "{text}\n{stderr}");
    for needle in [
        "error: [irqbalance] irqbalance is running (pid 977)",
        "  fix:      systemctl disable --now irqbalance",
        "warning: [isolated_cpus] 4 NIC queue IRQ(s) may fire on isolated or nohz_full CPUs 3",
        "warning: [rfs_tables] rx queues have RFS flow tables but the global socket flow table is 0",
        "  fix:      sysctl -w net.core.rps_sock_flow_entries=32768",
        "warning: [one_cpu] eth0: all 4 receive queue IRQs land on CPU 0",
        "info: [softnet] 42 packet(s) dropped from full CPU backlogs since boot",
        "  fix:      sysctl -w net.core.netdev_max_backlog=2000",
        "info: [daemon] not checked: no steerd answered at 127.0.0.1:1",
        "info: [rings] not checked: ring sizes of all devices",
        "info: [coalescing] not checked: interrupt coalescing of all devices",
        "info: [gro] not checked: GRO of all devices",
        "info: [udp_hash] not checked: UDP hash fields of all devices",
        "info: [silent_queues] not checked: receive queue rates of all devices",
        "info: [ntuple] not checked: ntuple filters (aRFS) of all devices",
        "1 error(s), 3 warning(s), 8 note(s) from 18 checks",
    ] {
        assert!(text.contains(needle), "{needle:?} not in:\n{text}");
    }
}

#[test]
fn a_well_set_machine_exits_0_with_notes_only() {
    let dir = tempfile::tempdir().unwrap();
    let tree = machine(dir.path(), |m| m.rps_sock_flow_entries = Some(0));
    for (q, irq) in tree.queue_irqs[0].iter().enumerate() {
        put(
            &tree,
            &format!("proc/irq/{irq}/effective_affinity_list"),
            &format!("{q}\n"),
        );
    }
    let (code, text, stderr) = doctor(&tree.root, &["--metrics-listen", NO_DAEMON]);
    assert_eq!(code, 0, "{text}\n{stderr}");
    assert!(
        text.contains("0 error(s), 0 warning(s), 7 note(s)"),
        "{text}"
    );
}

/// Issue 33: two `steerd run` on one machine (one the service, as re-executed through
/// `/proc/self/exe`, one started by hand with its own state file) are an error naming both
/// command lines; `steerd doctor` itself, a dry run and a daemon on another `--root` are not
/// daemons of this machine.
#[test]
fn a_second_steerd_daemon_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let tree = machine(dir.path(), |m| m.rps_sock_flow_entries = Some(0));
    for (q, irq) in tree.queue_irqs[0].iter().enumerate() {
        put(
            &tree,
            &format!("proc/irq/{irq}/effective_affinity_list"),
            &format!("{q}\n"),
        );
    }
    let process = |pid: u32, comm: &str, args: &[&str]| {
        put(&tree, &format!("proc/{pid}/comm"), &format!("{comm}\n"));
        put(
            &tree,
            &format!("proc/{pid}/cmdline"),
            &format!("{}\0", args.join("\0")),
        );
    };
    process(
        410,
        "exe",
        &[
            "/usr/sbin/steerd",
            "run",
            "--config",
            "/etc/steerd/steerd.yaml",
        ],
    );
    put(
        &tree,
        "proc/410/cgroup",
        "0::/system.slice/steerd.service\n",
    );
    process(900, "steerd", &["steerd", "doctor"]);
    process(901, "steerd", &["steerd", "run", "--dry-run"]);
    process(902, "steerd", &["steerd", "--root", "/tmp/tree", "run"]);
    let (code, text, _) = doctor(&tree.root, &["--metrics-listen", NO_DAEMON]);
    assert!(!text.contains("[steerd_daemons]"), "{text}");
    assert_eq!(code, 0, "{text}");

    process(
        5120,
        "steerd",
        &["steerd", "run", "--state-file", "/root/s/state.json"],
    );
    let (code, text, stderr) = doctor(&tree.root, &["--metrics-listen", NO_DAEMON]);
    assert_eq!(code, 2, "{text}\n{stderr}");
    for needle in [
        "error: [steerd_daemons] 2 steerd daemons are running (pids 410, 5120)",
        "  evidence: proc/410/cmdline = /usr/sbin/steerd run --config /etc/steerd/steerd.yaml \
         (cgroup /system.slice/steerd.service); proc/5120/cmdline = steerd run --state-file \
         /root/s/state.json",
        "  fix:      kill 5120",
    ] {
        assert!(text.contains(needle), "{needle:?} not in:\n{text}");
    }
}

/// Serves one `/status` answer at a loopback port, as a running steerd would.
fn fake_daemon(live: LiveStatus) -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let body = serde_json::to_string(&live.report(1060.0, Ok(()), Vec::new())).unwrap();
    let server = std::thread::spawn(move || {
        let (mut peer, _) = listener.accept().unwrap();
        // The whole request first: the client writes it in pieces, and closing early
        // would fail its next piece with EPIPE.
        let mut request = Vec::new();
        let mut byte = [0u8; 1];
        while !request.ends_with(b"\r\n\r\n") && peer.read(&mut byte).is_ok_and(|n| n == 1) {
            request.push(byte[0]);
        }
        let _ = write!(peer, "HTTP/1.0 200 OK\r\n\r\n{body}");
    });
    (addr, server)
}

#[test]
fn an_observe_only_daemon_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let tree = machine(dir.path(), |m| m.rps_sock_flow_entries = Some(0));
    for (q, irq) in tree.queue_irqs[0].iter().enumerate() {
        put(
            &tree,
            &format!("proc/irq/{irq}/effective_affinity_list"),
            &format!("{q}\n"),
        );
    }
    let (addr, server) = fake_daemon(LiveStatus {
        version: "0.1.0",
        started_unix: 1000.0,
        ticks: 60,
        last_tick_unix: 1059.5,
        interval_s: 1.0,
        no_writes: Some(NoWrites::ObserveOnly("not running as root".into())),
        ..LiveStatus::default()
    });
    let (code, text, stderr) = doctor(&tree.root, &["--metrics-listen", &addr]);
    server.join().unwrap();
    assert_eq!(code, 2, "{text}\n{stderr}");
    assert!(
        text.contains("error: [daemon] steerd only observes"),
        "{text}"
    );
    assert!(text.contains("not running as root"), "{text}");
}

/// The field paths docs/doctor-json.md documents: `## Top level` and `## Finding` tables.
fn documented_fields() -> BTreeSet<String> {
    let doc = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/doctor-json.md"))
        .unwrap();
    let mut prefix = None;
    let mut fields = BTreeSet::new();
    for line in doc.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            prefix = match heading {
                "Top level" => Some(""),
                "Finding" => Some("findings[]."),
                _ => None,
            };
            continue;
        }
        let (Some(prefix), Some(row)) = (prefix, line.strip_prefix("| `")) else {
            continue;
        };
        let cell = row.split(" |").next().unwrap_or_default();
        for name in cell.split(", ") {
            fields.insert(format!("{prefix}{}", name.trim_matches('`')));
        }
    }
    fields
}

#[test]
fn json_has_exactly_the_documented_fields() {
    let dir = tempfile::tempdir().unwrap();
    let tree = a_sick_machine(dir.path());
    let (code, json, stderr) = doctor(
        &tree.root,
        &["--format", "json", "--metrics-listen", NO_DAEMON],
    );
    assert_eq!(code, 2, "{json}\n{stderr}");
    let report: Value = serde_json::from_str(&json).expect("valid JSON");
    let mut fields = BTreeSet::new();
    for (key, value) in report.as_object().expect("an object") {
        fields.insert(key.clone());
        if key == "findings" {
            for finding in value.as_array().expect("findings array") {
                for inner in finding.as_object().expect("finding object").keys() {
                    fields.insert(format!("findings[].{inner}"));
                }
            }
        }
    }
    assert_eq!(fields, documented_fields(), "{json}");
    let severities: BTreeSet<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["severity"].as_str())
        .collect();
    assert_eq!(severities, BTreeSet::from(["error", "warning", "info"]));
    assert_eq!(report["errors"], 1);
}

/// Sets `pid`'s allowed CPUs in its `proc/PID/status`, as `taskset -pc` would show them.
fn pin_thread(tree: &FakeTree, pid: u32, cpus: &str) {
    let path = tree.root.join(format!("proc/{pid}/status"));
    let text = fs::read_to_string(&path).unwrap();
    let pinned =
        steerd::kernel::napi_threads::with_affinity(&text, &CpuSet::parse_list(cpus).unwrap());
    fs::write(path, pinned).unwrap();
}

/// eth0's queue vectors delivered to CPUs 0-3, one each.
fn spread_vectors(tree: &FakeTree) {
    for (q, irq) in tree.queue_irqs[0].iter().enumerate() {
        put(
            tree,
            &format!("proc/irq/{irq}/effective_affinity_list"),
            &format!("{q}\n"),
        );
    }
}

/// Interrupt deferral without its timer, and busy-polling NAPI threads: rx-0's pinned
/// where rx-2's vector fires, the others each beside their own vector.
#[test]
fn napi_deferral_without_a_timer_and_a_crowding_busy_poll_thread_are_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let tree = machine(dir.path(), |m| m.rps_sock_flow_entries = Some(0));
    spread_vectors(&tree);
    tree.set_napi_deferral(0, 2, 0).unwrap();
    let pids = tree.make_busy_poll(0, 700).unwrap();
    pin_thread(&tree, pids[0], "2");
    for (q, &pid) in pids.iter().enumerate().skip(1) {
        pin_thread(&tree, pid, &q.to_string());
    }
    let (code, text, stderr) = doctor(&tree.root, &["--metrics-listen", NO_DAEMON]);
    eprintln!("{text}");
    assert_eq!(code, 1, "{text}\n{stderr}");
    let flush = tree.root.join("sys/class/net/eth0/gro_flush_timeout");
    let crowded = tree.queue_irqs[0][2];
    for needle in [
        "warning: [napi_deferral] eth0: napi_defer_hard_irqs 2 with gro_flush_timeout 0: no interrupt is deferred".to_string(),
        format!("  fix:      echo 200000 > {}", flush.display()),
        "warning: [busy_poll] eth0 rx-0: busy-polling NAPI thread napi/eth0-8193 may spin on CPUs that serve other queues".to_string(),
        format!("CPU 2: eth0 rx-2 (IRQ {crowded})"),
        format!("  fix:      taskset -pc 3 {}", pids[0]),
        "0 error(s), 3 warning(s)".to_string(),
    ] {
        assert!(text.contains(&needle), "{needle:?} not in:\n{text}");
    }
    assert!(
        text.contains("[napi_threads]"),
        "rx-0's thread is not beside its IRQ:\n{text}"
    );
}

/// The same machine with the deferral's timer set and every busy-poll thread on its own
/// queue's CPU: neither check finds anything.
#[test]
fn napi_deferral_with_its_timer_and_busy_poll_threads_beside_their_own_queue_are_fine() {
    let dir = tempfile::tempdir().unwrap();
    let tree = machine(dir.path(), |m| m.rps_sock_flow_entries = Some(0));
    spread_vectors(&tree);
    tree.set_napi_deferral(0, 2, 200_000).unwrap();
    let pids = tree.make_busy_poll(0, 700).unwrap();
    for (q, &pid) in pids.iter().enumerate() {
        pin_thread(&tree, pid, &q.to_string());
    }
    let (code, text, stderr) = doctor(&tree.root, &["--metrics-listen", NO_DAEMON]);
    assert_eq!(code, 0, "{text}\n{stderr}");
    assert!(!text.contains("[napi_deferral]"), "{text}");
    assert!(!text.contains("[busy_poll]"), "{text}");
    assert!(!text.contains("[napi_threads]"), "{text}");
}
