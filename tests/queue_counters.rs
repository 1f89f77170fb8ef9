//! Per-queue counters: every `ethtool -S` capture in the fixtures maps to the right queues,
//! and, as root, the netdev family and SIOCETHTOOL answer on the real kernel (eth0, `lo`,
//! and a veth pair in a namespace of the test's own).

mod common;
mod netns;

use std::time::Duration;

use common::suite::{TestResult, not_here};
use steerd::kernel::ethtool::Ethtool;
use steerd::kernel::ethtool_names::{MappedQueue, map_queue_stats};
use steerd::kernel::netlink::NetdevClient;
use steerd::kernel::queue_counters::{CounterSource, DeviceId, QueueCounterSource};
use steerd::model::snapshot::QueueDirection::{self, Rx, Tx};

/// Parses `ethtool -S` text: an optional `NIC statistics:` header, `#` comment lines (as
/// in node_exporter's capture), then `<indent><name>: <value>` lines. The indentation
/// ethtool adds is the smallest one seen; deeper indentation belongs to the name
/// (vmxnet3). Names may contain `: ` themselves (be2net `rxq0: rx_pkts`), so the value is
/// after the last one.
fn parse_ethtool_s(text: &str) -> Vec<(String, u64)> {
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| {
            let trimmed = line.trim();
            !trimmed.is_empty() && !trimmed.starts_with('#') && trimmed != "NIC statistics:"
        })
        .collect();
    let indent = lines
        .iter()
        .map(|line| line.len() - line.trim_start().len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|line| {
            let (name, value) = line[indent..]
                .rsplit_once(": ")
                .unwrap_or_else(|| panic!("not a stat line: {line:?}"));
            let value = value
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {line:?}"));
            (name.to_string(), value)
        })
        .collect()
}

fn mapped(fixture: &str) -> Vec<MappedQueue> {
    let path = common::fixture(fixture);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    map_queue_stats(&parse_ethtool_s(&text))
}

fn count(queues: &[MappedQueue], direction: QueueDirection) -> usize {
    queues.iter().filter(|q| q.direction == direction).count()
}

fn packets(queues: &[MappedQueue], direction: QueueDirection, queue: u32) -> Option<u64> {
    queues
        .iter()
        .find(|q| q.direction == direction && q.queue == queue)
        .and_then(|q| q.packets)
}

/// (fixture, rx queues, tx queues, spot check (direction, queue, packets)).
type Case = (
    &'static str,
    usize,
    usize,
    Option<(QueueDirection, u32, u64)>,
);

const CASES: &[Case] = &[
    ("ethq/ice", 128, 128, Some((Rx, 2, 452_533))),
    ("ethq/mlx5_core", 16, 16, Some((Tx, 0, 101_488_959))),
    ("ethq/i40e", 12, 12, Some((Rx, 0, 64_128_515_158))),
    ("ethq/i40e-v2.3.2k", 64, 64, Some((Tx, 0, 36_459_363_750))),
    ("ethq/iavf", 16, 16, Some((Rx, 8, 69_038))),
    ("ethq/be2net", 9, 8, Some((Rx, 8, 11_437_669))),
    ("ethq/ena", 4, 4, Some((Rx, 0, 9_300_271))),
    ("ethq/sfc", 12, 18, Some((Rx, 0, 232))),
    ("ethq/virtio_net", 2, 2, Some((Rx, 1, 10_401_806))),
    // ucast + mcast + bcast of ring 0.
    (
        "ethq/bnxt_en",
        12,
        12,
        Some((Rx, 0, 10_198_513_532 + 3_854_315 + 124_570_464)),
    ),
    // The capture has per-queue `[n]:` groups (the fixture INDEX says "totals only").
    ("ethq/bnx2x", 8, 8, Some((Rx, 7, 178_090_659 + 6 + 12_588))),
    // Block layout: ucast + mcast + bcast pkts of `Rx Queue#: 1`.
    (
        "ethq/vmxnet3",
        2,
        2,
        Some((Rx, 1, 143_523 + 82_558 + 17_327)),
    ),
    (
        "insights-core/SUCCEED_ETHTOOL_S",
        4,
        4,
        Some((Tx, 1, 935_473)),
    ),
    (
        "insights-core/ETHTOOL_S_eth0_1",
        2,
        0,
        Some((Rx, 1, 5_000_000)),
    ),
    // Totals only: no queue at all, in particular not queue 0.
    ("ethq/bnx2", 0, 0, None),
    ("ethq/e1000e", 0, 0, None),
    ("ethq/r8169", 0, 0, None),
    ("ethq/tg3", 0, 0, None),
    ("ethq/fsl_dpaa2_eth", 0, 0, None),
    ("node_exporter/ethtool/eth0/statistics", 0, 0, None),
    ("node_exporter/ethtool/bond0/statistics", 0, 0, None),
];

fn every_ethtool_capture_maps_to_its_queues() {
    let mut failures = Vec::new();
    for &(fixture, rx, tx, spot) in CASES {
        let queues = mapped(fixture);
        let got = (count(&queues, Rx), count(&queues, Tx));
        if got != (rx, tx) {
            failures.push(format!(
                "{fixture}: {got:?} queues, expected {:?}",
                (rx, tx)
            ));
        }
        // Queues are numbered 0..n without gaps in every capture.
        for direction in [Rx, Tx] {
            let numbers: Vec<u32> = queues
                .iter()
                .filter(|q| q.direction == direction)
                .map(|q| q.queue)
                .collect();
            let expected: Vec<u32> = (0..numbers.len() as u32).collect();
            if numbers != expected {
                failures.push(format!("{fixture}: {direction:?} queues {numbers:?}"));
            }
        }
        if queues.iter().any(|q| q.packets.is_none()) {
            failures.push(format!("{fixture}: a queue without packets"));
        }
        if let Some((direction, queue, value)) = spot {
            let got = packets(&queues, direction, queue);
            if got != Some(value) {
                failures.push(format!(
                    "{fixture}: {direction:?} {queue} packets {got:?}, expected {value}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn every_capture_in_the_fixtures_is_covered() {
    let mut files: Vec<String> = std::fs::read_dir(common::fixture("ethq"))
        .unwrap()
        .map(|e| format!("ethq/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|name| !name.ends_with(".md"))
        .collect();
    files.sort();
    for file in files {
        assert!(
            CASES.iter().any(|case| case.0 == file),
            "{file} has no expectation"
        );
    }
}

fn bytes_follow_packets_where_drivers_count_them() {
    let ice = mapped("ethq/ice");
    let q2 = ice
        .iter()
        .find(|q| q.direction == Rx && q.queue == 2)
        .unwrap();
    assert_eq!(q2.bytes, Some(29_867_186));
    let bnx2x = mapped("ethq/bnx2x");
    let q7 = bnx2x
        .iter()
        .find(|q| q.direction == Rx && q.queue == 7)
        .unwrap();
    assert_eq!(q7.bytes, Some(209_770_669_380), "whole rx_bytes counter");
    let sfc = mapped("ethq/sfc");
    assert!(
        sfc.iter().all(|q| q.bytes.is_none()),
        "sfc counts packets only"
    );
}

fn the_test_parser_reads_names_with_colons_and_spaces() {
    let stats = parse_ethtool_s("NIC statistics:\n     rxq0: rx_pkts: 5\n     [hw] rx frames: 7\n");
    assert_eq!(
        stats,
        vec![
            ("rxq0: rx_pkts".to_string(), 5),
            ("[hw] rx frames".to_string(), 7)
        ]
    );
}

// ---------------------------------------------------------------------------------------
// Real kernel (root only).

fn ifindex_of(name: &str) -> Option<u32> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn real_kernel_netdev_family_on_eth0() -> TestResult {
    netns::require()?;
    let Some(client) = NetdevClient::connect().expect("connect") else {
        return not_here("this kernel has no netdev generic-netlink family (before 6.4)");
    };
    let mut client = client;
    let family = client.family().clone();
    eprintln!("netdev family: {family:?}");
    assert!(family.id > 0);
    let Some(eth0) = ifindex_of("eth0") else {
        return not_here("no eth0 here; only the netdev family was checked");
    };
    if family.ops.queue_get {
        let queues = client.queues(Some(eth0)).expect("queue-get eth0");
        assert!(
            queues
                .iter()
                .any(|q| q.direction == Rx && q.id == 0 && q.ifindex == eth0),
            "{queues:?}"
        );
        assert!(
            queues.iter().any(|q| q.direction == Tx && q.id == 0),
            "{queues:?}"
        );
        if family.ops.napi_get
            && let Some(napi_id) = queues.iter().find_map(|q| q.napi_id)
        {
            let napi = client.napi(napi_id).expect("napi-get");
            assert_eq!((napi.id, napi.ifindex), (napi_id, eth0));
            eprintln!("eth0 NAPI {napi_id}: irq {:?}", napi.irq);
            let all = client.napis(Some(eth0)).expect("napi-get dump");
            assert!(all.iter().any(|n| n.id == napi_id), "{all:?}");
        }
        if family.ops.napi_get {
            let joined = client.queue_irqs(Some(eth0)).expect("queue -> irq");
            assert_eq!(joined.len(), queues.len());
            eprintln!("eth0 queue -> irq: {joined:?}");
            // virtio_net's NAPI reports no irq (6.18): the join must say None, not guess.
            if std::fs::read_link("/sys/class/net/eth0/device/driver")
                .is_ok_and(|p| p.ends_with("virtio_net"))
            {
                assert!(joined.iter().all(|q| q.irq.is_none()), "{joined:?}");
            }
        }
        let error = client.queues(Some(u32::MAX)).unwrap_err().to_string();
        assert!(
            error.contains("queue-get") && error.contains("ENODEV"),
            "{error}"
        );
    }
    if !family.ops.qstats_get {
        return not_here("no qstats-get before Linux 6.9; queue-get was checked, qstats not");
    }
    let stats = client.queue_stats(Some(eth0)).expect("qstats-get eth0");
    let rx0 = stats
        .iter()
        .find(|s| s.direction == Some(Rx) && s.queue == 0)
        .unwrap_or_else(|| panic!("no rx queue 0 in {stats:?}"));
    assert!(rx0.packets().unwrap_or(0) > 0, "{rx0:?}");
    // The whole-machine dump (what a tick does) includes eth0 too.
    let all = client.queue_stats(None).expect("qstats-get dump");
    assert!(all.iter().any(|s| s.ifindex == eth0), "{all:?}");

    // The glue picks netlink for eth0.
    let mut source = QueueCounterSource::new().expect("source");
    assert!(source.uses_netlink());
    let mut out = Vec::new();
    let devices = [DeviceId {
        name: "eth0",
        ifindex: eth0,
    }];
    source.sample(&devices, &mut out).expect("sample");
    assert_eq!(source.source("eth0"), Some(CounterSource::Netlink));
    assert!(
        out.iter()
            .any(|q| q.direction == Rx && q.queue == 0 && q.packets > 0)
    );
    let first = out
        .iter()
        .find(|q| q.direction == Rx && q.queue == 0)
        .unwrap()
        .packets;
    std::thread::sleep(Duration::from_millis(20));
    source.sample(&devices, &mut out).expect("second sample");
    let second = out
        .iter()
        .find(|q| q.direction == Rx && q.queue == 0)
        .unwrap()
        .packets;
    assert!(second >= first, "counters are cumulative");
    Ok(())
}

fn real_kernel_ethtool_errors_name_the_ioctl_and_errno() -> TestResult {
    netns::require()?;
    let mut ethtool = Ethtool::new().expect("socket");
    let error = ethtool.driver_info("lo").unwrap_err().to_string();
    assert!(
        error.contains("ETHTOOL_GDRVINFO on lo") && error.contains("EOPNOTSUPP"),
        "{error}"
    );
    let error = ethtool.sample("lo").unwrap_err().to_string();
    assert!(error.contains("EOPNOTSUPP"), "{error}");
    assert!(ethtool.sample_if_available("lo").expect("lo").is_none());
    let error = ethtool.driver_info("steerd-none0").unwrap_err().to_string();
    assert!(error.contains("ENODEV"), "{error}");
    assert!(
        ethtool
            .sample_if_available("steerd-none0")
            .expect("gone")
            .is_none()
    );
    if ifindex_of("eth0").is_some() {
        let info = ethtool.driver_info("eth0").expect("eth0 driver");
        eprintln!("eth0: {info:?}");
        assert!(!info.driver.is_empty());
        let stats = ethtool.stats("eth0").expect("eth0 stats");
        assert_eq!(stats.len(), info.n_stats as usize);
    }
    Ok(())
}

fn real_kernel_veth_in_a_namespace() -> TestResult {
    netns::require()?;
    // Deleted (with both veth ends) by its Drop, also when an assertion below fails.
    let ns = netns::Netns::create("qc");
    ns.add_veth("qc-a", "qc-b", 4);
    netns::ip(&["-n", &ns.name, "link", "set", "qc-a", "up"]);
    netns::ip(&["-n", &ns.name, "link", "set", "qc-b", "up"]);

    let outcome = ns
        .spawn(None, || -> Result<(), String> {
            let ifindex = nix::net::if_::if_nametoindex("qc-a").map_err(|e| e.to_string())?;
            // SIOCETHTOOL in the namespace.
            let mut ethtool = Ethtool::new().map_err(|e| e.to_string())?;
            let info = ethtool.driver_info("qc-a").map_err(|e| e.to_string())?;
            if info.driver != "veth" {
                return Err(format!("driver {:?}", info.driver));
            }
            let stats = ethtool.stats("qc-a").map_err(|e| e.to_string())?;
            if stats.is_empty() || stats.len() != info.n_stats as usize {
                return Err(format!(
                    "{} stats, drvinfo says {}",
                    stats.len(),
                    info.n_stats
                ));
            }
            if !stats
                .iter()
                .any(|(name, _)| name == "rx_queue_3_xdp_packets")
            {
                return Err(format!("no per-queue xdp stats: {stats:?}"));
            }
            // veth's per-queue stats are XDP counters, not queue packets.
            let queues = map_queue_stats(&stats);
            if !queues.is_empty() {
                return Err(format!("veth mapped to queues: {queues:?}"));
            }

            // The netdev family in the namespace.
            let Some(mut client) = NetdevClient::connect().map_err(|e| e.to_string())? else {
                eprintln!("no netdev family: skipping its part");
                return Ok(());
            };
            if client.family().ops.queue_get {
                let queues = client.queues(Some(ifindex)).map_err(|e| e.to_string())?;
                let rx: Vec<u32> = queues
                    .iter()
                    .filter(|q| q.direction == Rx)
                    .map(|q| q.id)
                    .collect();
                if rx != [0, 1, 2, 3] {
                    return Err(format!("rx queues {rx:?}"));
                }
                if queues.iter().filter(|q| q.direction == Tx).count() != 4 {
                    return Err(format!("tx queues in {queues:?}"));
                }
            }
            if client.family().ops.qstats_get {
                // veth has no netdev_stat_ops: asking for it by ifindex is EOPNOTSUPP...
                match client.queue_stats(Some(ifindex)) {
                    Err(error) => {
                        let text = error.to_string();
                        if !(text.contains("qstats-get") && text.contains("EOPNOTSUPP")) {
                            return Err(format!("unexpected error {text}"));
                        }
                    }
                    Ok(stats) => return Err(format!("veth has qstats? {stats:?}")),
                }
                // ...and the whole-namespace dump simply leaves it out.
                let all = client.queue_stats(None).map_err(|e| e.to_string())?;
                if all.iter().any(|s| s.ifindex == ifindex) {
                    return Err(format!("veth in the dump: {all:?}"));
                }
            }

            // The glue: neither source has per-queue packets for a veth.
            let mut source = QueueCounterSource::new().map_err(|e| e.to_string())?;
            let mut out = Vec::new();
            let devices = [DeviceId {
                name: "qc-a",
                ifindex,
            }];
            source
                .sample(&devices, &mut out)
                .map_err(|e| e.to_string())?;
            if !out.is_empty() || source.source("qc-a") != Some(CounterSource::Unavailable) {
                return Err(format!("{out:?} {:?}", source.source("qc-a")));
            }
            // A device that vanished is skipped, not an error.
            let gone = [DeviceId {
                name: "qc-gone",
                ifindex: 999_999,
            }];
            source.sample(&gone, &mut out).map_err(|e| e.to_string())?;
            Ok(())
        })
        .join();
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(message)) => panic!("{message}"),
        Err(_) => panic!("the namespace thread panicked"),
    }
    Ok(())
}

suite_main!(
    every_ethtool_capture_maps_to_its_queues,
    every_capture_in_the_fixtures_is_covered,
    bytes_follow_packets_where_drivers_count_them,
    the_test_parser_reads_names_with_colons_and_spaces,
    real_kernel_netdev_family_on_eth0,
    real_kernel_ethtool_errors_name_the_ioctl_and_errno,
    real_kernel_veth_in_a_namespace,
);
