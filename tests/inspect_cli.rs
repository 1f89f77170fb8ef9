//! `steerd inspect` as a user runs it: the real binary, on generated and real trees, with
//! the JSON contract of docs/inspect-json.md checked field by field.

mod common;
use common::suite::{TestResult, not_here};
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use steerd::fakeroot::{FakeMachine, FakeNic};

fn inspect(root: &Path, format: &str) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_steerd"))
        .args(["inspect", "--format", format, "--root"])
        .arg(root)
        .output()
        .expect("run steerd");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(root: &Path) -> Value {
    let (ok, stdout, stderr) = inspect(root, "json");
    assert!(ok, "inspect failed: {stderr}");
    serde_json::from_str(&stdout).expect("valid JSON")
}

/// Every field the issue and docs promise, with its JSON type.
fn assert_contract(model: &Value) {
    for key in [
        "schema",
        "nr_cpu_ids",
        "cpus",
        "nodes",
        "devices",
        "irqs",
        "queue_counters",
        "queue_counters_unknown",
        "warnings",
    ] {
        assert!(model.get(key).is_some(), "top-level {key} missing");
    }
    for cpu in model["cpus"].as_array().unwrap() {
        for key in [
            "id",
            "online",
            "core",
            "package",
            "node",
            "llc",
            "isolated",
            "nohz_full",
        ] {
            assert!(cpu.get(key).is_some(), "cpu.{key} missing in {cpu}");
        }
    }
    for dev in model["devices"].as_array().unwrap() {
        for key in [
            "name",
            "driver",
            "kind",
            "pci_function",
            "physical_function",
            "numa_node",
            "local_cpus",
            "rx_queues",
            "tx_queues",
            "irqs",
            "rss",
        ] {
            assert!(dev.get(key).is_some(), "device.{key} missing in {dev}");
        }
        for key in [
            "threaded",
            "threaded_mode",
            "napi_defer_hard_irqs",
            "gro_flush_timeout_ns",
        ] {
            assert!(dev.get(key).is_some(), "device.{key} missing in {dev}");
        }
        let rss = &dev["rss"];
        if !rss.is_null() {
            let status = rss["status"].as_str().unwrap();
            assert!(["ok", "no_table", "error"].contains(&status), "{rss}");
            for key in [
                "reason",
                "source",
                "rx_rings",
                "table_size",
                "indirection",
                "shares",
                "default_spread",
                "key",
                "hash_function",
                "input_xfrm",
                "flow_hash",
            ] {
                assert!(rss.get(key).is_some(), "rss.{key} missing in {rss}");
            }
            assert_eq!(rss["indirection"].is_array(), status == "ok", "{rss}");
        }
        for q in dev["rx_queues"].as_array().unwrap() {
            for key in [
                "index",
                "rps_cpus",
                "rps_flow_cnt",
                "irq",
                "napi_id",
                "napi_thread",
                "napi",
            ] {
                assert!(q.get(key).is_some(), "rx_queue.{key} missing");
            }
            assert!(q["rps_cpus"].is_array() || q["rps_cpus"].is_null());
            for key in [
                "defer_hard_irqs",
                "gro_flush_timeout_ns",
                "irq_suspend_timeout_ns",
                "threaded",
                "per_napi",
            ] {
                assert!(q["napi"].get(key).is_some(), "rx_queue.napi.{key} missing");
            }
        }
        for q in dev["tx_queues"].as_array().unwrap() {
            for key in ["index", "xps_cpus", "irq"] {
                assert!(q.get(key).is_some(), "tx_queue.{key} missing");
            }
        }
    }
    for irq in model["irqs"].as_array().unwrap() {
        for key in [
            "irq",
            "name",
            "device",
            "queue",
            "role",
            "affinity",
            "effective_affinity",
            "managed",
            "total",
        ] {
            assert!(irq.get(key).is_some(), "irq.{key} missing in {irq}");
        }
        let role = irq["role"].as_str().unwrap();
        assert!(["rx", "tx", "rxtx", "other"].contains(&role), "{role}");
        assert!(irq["affinity"].is_array() || irq["affinity"].is_null());
    }
}

fn the_1152_cpu_tree_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let tree = FakeMachine::large().write(dir.path()).unwrap();
    let model = json(dir.path());
    assert_contract(&model);
    assert_eq!(model["nr_cpu_ids"], 1152);
    assert_eq!(model["nodes"].as_array().unwrap().len(), 8);
    let irqs = model["irqs"].as_array().unwrap();
    assert_eq!(irqs.len(), tree.all_irqs().len());
    assert!(irqs.len() > 1000);
    let queue_vectors = irqs.iter().filter(|i| i["role"] == "rxtx").count();
    assert_eq!(queue_vectors, 4 * 94);
    let dev = model["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "ens3f0")
        .unwrap();
    assert_eq!(dev["numa_node"], 2);
    assert_eq!(dev["rx_queues"].as_array().unwrap().len(), 94);
    assert_eq!(dev["rx_queues"][93]["irq"], tree.queue_irqs[2][93]);
    assert_eq!(dev["rx_queues"][0]["rps_cpus"], serde_json::json!([]));
    let managed = irqs
        .iter()
        .find(|i| i["irq"] == tree.other_irqs[0])
        .unwrap();
    assert_eq!(managed["managed"], true);
    assert_eq!(managed["device"], Value::Null);

    let (ok, text, _) = inspect(dir.path(), "text");
    assert!(ok);
    assert!(
        text.contains("ens1f0 (ice, physical, up) pci 0000:01:00.0  node 0"),
        "{}",
        &text[..400]
    );
    assert!(text.contains("rx-93"));
    // Off the host the RSS state is not read: null in the JSON, no line in the text.
    assert!(
        model["devices"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["rss"].is_null())
    );
    assert!(!text.contains("rss:"), "{}", &text[..400]);
}

fn small_tree_text_shows_queues_irqs_and_cores() {
    let dir = tempfile::tempdir().unwrap();
    let mut machine = FakeMachine::new(4);
    machine.threads_per_core = 2;
    machine.isolated = steerd::CpuSet::parse_list("3").unwrap();
    machine.nics.push(FakeNic {
        name: "eth0".into(),
        driver: "ixgbe".into(),
        node: None,
        queues: 2,
    });
    let tree = machine.write(dir.path()).unwrap();
    let (ok, text, stderr) = inspect(dir.path(), "text");
    assert!(ok, "{stderr}");
    let irq = tree.queue_irqs[0][1];
    assert!(
        text.contains(&format!("rx-1        {irq}  eth0-TxRx-1")),
        "{text}"
    );
    assert!(text.contains("core 3: 3* 7"), "{text}");
    let model = json(dir.path());
    assert_contract(&model);
    assert_eq!(model["devices"][0]["numa_node"], Value::Null, "-1 is null");
    assert_eq!(model["cpus"][3]["isolated"], true);
}

/// A threaded NIC with interrupt deferral set: per receive queue its NAPI id (none on a
/// fake root: netlink is the running kernel's), the thread with its pid, last CPU and
/// allowed CPUs, the deferral from the device's files, and irq-suspend-timeout "n/a".
fn threaded_napi_per_queue_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let mut machine = FakeMachine::new(4);
    machine.nics.push(FakeNic {
        name: "eth0".into(),
        driver: "virtio_net".into(),
        node: None,
        queues: 2,
    });
    let tree = machine.write(dir.path()).unwrap();
    let pids = tree.make_threaded(0, 700).unwrap();
    tree.set_napi_deferral(0, 2, 200_000).unwrap();
    let (ok, text, stderr) = inspect(dir.path(), "text");
    assert!(ok, "{stderr}");
    eprintln!("{text}");
    assert!(
        text.contains("NAPI settings: the device's sys/class/net/eth0 files, for every NAPI"),
        "{text}"
    );
    let row = format!(
        "rx-1           -  yes       napi/eth0-8194       {}    0  0-3          2       200000          n/a            -",
        pids[1]
    );
    assert!(text.contains(&row), "{row:?} not in:\n{text}");
    let model = json(dir.path());
    assert_contract(&model);
    let eth0 = &model["devices"][0];
    assert_eq!(eth0["threaded_mode"], "enabled");
    assert_eq!(eth0["napi_defer_hard_irqs"], 2);
    let napi = &eth0["rx_queues"][1]["napi"];
    assert_eq!(napi["defer_hard_irqs"], 2);
    assert_eq!(napi["gro_flush_timeout_ns"], 200_000);
    assert_eq!(
        napi["irq_suspend_timeout_ns"],
        Value::Null,
        "not known here, never 0"
    );
    assert_eq!(napi["threaded"], "enabled");
    assert_eq!(napi["per_napi"], false);
    let thread = &eth0["rx_queues"][1]["napi_thread"];
    assert_eq!(thread["pid"], pids[1]);
    assert_eq!(thread["cpu"], 0);
    assert_eq!(model["queue_counters"], serde_json::json!([]));
    assert!(
        model["queue_counters_unknown"]
            .as_str()
            .unwrap()
            .contains("--root tree"),
        "{}",
        model["queue_counters_unknown"]
    );
}

fn a_missing_root_is_a_clear_error() {
    let (ok, _, stderr) = inspect(Path::new("/nonexistent-steerd-root"), "text");
    assert!(!ok);
    assert!(stderr.starts_with("steerd: "), "{stderr}");
    assert!(
        stderr.contains("/nonexistent-steerd-root/sys/devices/system/cpu"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"));
}

fn the_real_machine() -> TestResult {
    if !Path::new("/sys/class/net").exists() {
        return not_here("no /sys/class/net here");
    }
    let model = json(Path::new("/"));
    assert_contract(&model);
    assert!(!model["cpus"].as_array().unwrap().is_empty());
    // On the host every device's RSS state is read: a table, or why there is none.
    for dev in model["devices"].as_array().unwrap() {
        eprintln!("{} rss: {}", dev["name"], dev["rss"]);
        assert!(dev["rss"].is_object(), "{}: {}", dev["name"], dev["rss"]);
    }
    let (ok, text, _) = inspect(Path::new("/"), "text");
    assert!(ok);
    let devices = model["devices"].as_array().unwrap().len();
    assert_eq!(text.matches("\n  rss: ").count(), devices, "{text}");
    Ok(())
}

suite_main!(
    the_1152_cpu_tree_through_the_binary,
    small_tree_text_shows_queues_irqs_and_cores,
    threaded_napi_per_queue_in_text_and_json,
    a_missing_root_is_a_clear_error,
    the_real_machine,
);
