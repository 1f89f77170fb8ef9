//! The per-tick and discovery readers of `proc/` (`stat`, `net/softnet_stat`, `softirqs`)
//! and the tick sampler, against every real capture in `tests/fixtures`, synthetic edge
//! cases (6.x 15-column rows with offline CPUs, truncation, garbage, overflow), property
//! tests (random input never panics; kernel-formatted values round-trip), and a check
//! that a warmed-up tick allocates nothing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use steerd::Root;
use steerd::cpuset::{CpuSet, MAX_CPUS};
use steerd::kernel::procfs::softirqs::{Softirqs, parse_softirqs, read_softirqs};
use steerd::kernel::procfs::softnet::{parse_softnet, read_softnet};
use steerd::kernel::procfs::stat::{Stat, parse_stat, read_stat};
use steerd::kernel::sampler::TickSampler;
use steerd::load::Load;
use steerd::model::snapshot::{CpuTimes, Snapshot, SoftnetRow};

// ---------------------------------------------------------------------------------------
// Helpers

fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(relative)
}

fn stat_of(relative: &str) -> Stat {
    let path = fixture(relative);
    let bytes = fs::read(&path).unwrap();
    let mut stat = Stat::default();
    parse_stat(&bytes, &path, &mut stat.cpu_times, &mut stat.irq_totals)
        .unwrap_or_else(|e| panic!("{e}"));
    stat
}

fn softnet_of(relative: &str) -> Vec<SoftnetRow> {
    let path = fixture(relative);
    let bytes = fs::read(&path).unwrap();
    let mut rows = Vec::new();
    parse_softnet(&bytes, &path, None, &mut rows).unwrap_or_else(|e| panic!("{e}"));
    rows
}

fn softirqs_of(relative: &str) -> Softirqs {
    let path = fixture(relative);
    parse_softirqs(&fs::read(&path).unwrap(), &path).unwrap_or_else(|e| panic!("{e}"))
}

fn stat_text(text: &str) -> Result<Stat, String> {
    let mut stat = Stat::default();
    parse_stat(
        text.as_bytes(),
        Path::new("proc/stat"),
        &mut stat.cpu_times,
        &mut stat.irq_totals,
    )
    .map_err(|e| e.to_string())?;
    Ok(stat)
}

fn softnet_text(text: &str) -> Result<Vec<SoftnetRow>, String> {
    let mut rows = Vec::new();
    parse_softnet(
        text.as_bytes(),
        Path::new("proc/net/softnet_stat"),
        None,
        &mut rows,
    )
    .map_err(|e| e.to_string())?;
    Ok(rows)
}

fn softirqs_text(text: &str) -> Result<Softirqs, String> {
    parse_softirqs(text.as_bytes(), Path::new("proc/softirqs")).map_err(|e| e.to_string())
}

/// Widths of the columns a `SoftnetRow` exposes, as (received_rps, flow_limit, backlog).
fn optional_columns(row: &SoftnetRow) -> (bool, bool, bool) {
    (
        row.received_rps.is_some(),
        row.flow_limit_count.is_some(),
        row.backlog_len.is_some(),
    )
}

fn cpus(rows: &[SoftnetRow]) -> Vec<u32> {
    rows.iter().map(|r| r.cpu).collect()
}

// ---------------------------------------------------------------------------------------
// proc/stat captures

#[test]
fn procfs_stat_through_a_root() {
    let stat = read_stat(&Root::new(fixture("procfs"))).unwrap();
    assert_eq!(stat.cpu_times.len(), 8);
    assert_eq!(
        stat.cpu_times[0],
        CpuTimes {
            cpu: 0,
            user: 44490,
            nice: 19,
            system: 21045,
            idle: 1087069,
            iowait: 220,
            irq: 1,
            softirq: 3410,
            steal: 0,
        }
    );
    assert_eq!(
        stat.cpu_times.iter().map(|t| t.cpu).collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
    assert_eq!(stat.cpu_times[7].nice, 268);
    // The intr line: 65960 IRQ numbers (a box with a huge nr_irqs), counts by number.
    assert_eq!(stat.irq_totals.len(), 65960);
    assert_eq!(&stat.irq_totals[..2], &[41, 9]);
    assert_eq!(stat.irq_totals[17], 5772089);
    assert_eq!(stat.irq_totals[29], 521732);
    assert_eq!(stat.irq_totals.iter().sum::<u64>(), 6547749);
}

#[test]
fn node_exporter_stat_with_guest_columns() {
    let stat = stat_of("node_exporter/proc/stat");
    assert_eq!(stat.cpu_times.len(), 8);
    let cpu7 = stat.cpu_times[7];
    assert_eq!(
        (cpu7.cpu, cpu7.user, cpu7.idle, cpu7.softirq, cpu7.steal),
        (7, 29098, 1139282, 31, 0),
        "guest and guest_nice (9 8) are not mistaken for steal"
    );
    assert_eq!(stat.irq_totals.len(), 744);
    assert_eq!(stat.irq_totals[49], 1283803);
    assert_eq!(stat.irq_totals[22], 250586);
    assert_eq!(stat.irq_totals.iter().sum::<u64>(), 2260116);
}

#[test]
fn this_machines_stat() {
    // Every Linux machine has it: unreadable here is a failure, not a skip.
    let stat = read_stat(&Root::default()).expect("/proc/stat readable");
    assert!(!stat.cpu_times.is_empty());
    assert!(!stat.irq_totals.is_empty());
    assert!(stat.cpu_times.iter().all(|t| t.total() > 0));
}

// ---------------------------------------------------------------------------------------
// softnet_stat captures

#[test]
fn procfs_softnet_mixed_widths_through_a_root() {
    let rows = read_softnet(&Root::new(fixture("procfs"))).unwrap();
    // Rows of 13, 13, 11, 9 and 10 columns in one file.
    assert_eq!(rows.len(), 5);
    assert_eq!(
        cpus(&rows),
        [0, 1, 2, 3, 4],
        "col 12 for the first two, row number after"
    );
    assert_eq!(
        rows.iter().map(optional_columns).collect::<Vec<_>>(),
        [
            (true, true, true),
            (true, true, true),
            (true, true, false),
            (false, false, false),
            (true, false, false),
        ]
    );
    assert_eq!(
        rows[1],
        SoftnetRow {
            cpu: 1,
            processed: 0x00953d1a,
            dropped: 0x446,
            time_squeeze: 0xb1,
            received_rps: Some(0x008eeb9a),
            flow_limit_count: Some(0x2b),
            backlog_len: Some(0xdc),
        }
    );
    assert_eq!(
        rows[2].time_squeeze, 0xf0000769,
        "high bit set: a u32, not i32"
    );
    assert_eq!(rows[2].flow_limit_count, Some(2));
    assert_eq!(rows[3].processed, 0x01663fb2);
    assert_eq!(rows[4].received_rps, Some(0x10));
}

#[test]
fn procfs_broken_softnet_is_rejected_naming_file_and_line() {
    let path = fixture("procfs/proc/net/softnet_stat.broken");
    let mut rows = Vec::new();
    let err = parse_softnet(&fs::read(&path).unwrap(), &path, None, &mut rows).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{}:1: 4 columns, expected at least 9", path.display())
    );
    match err {
        steerd::Error::Parse { line, .. } => assert_eq!(line, 1),
        other => panic!("not a parse error: {other:?}"),
    }
}

#[test]
fn node_exporter_softnet_eleven_columns_without_final_newline() {
    let bytes = fs::read(fixture("node_exporter/proc/net/softnet_stat")).unwrap();
    assert_ne!(
        bytes.last(),
        Some(&b'\n'),
        "the capture lacks the final newline"
    );
    let rows = softnet_of("node_exporter/proc/net/softnet_stat");
    assert_eq!(rows.len(), 4);
    assert_eq!(cpus(&rows), [0, 1, 2, 3]);
    assert!(
        rows.iter()
            .all(|r| optional_columns(r) == (true, true, false))
    );
    assert_eq!(rows[1].processed, 0xdfb82);
    assert_eq!(rows[1].dropped, 0x29);
    assert_eq!(rows[3].processed, 0x002f8339);
    assert_eq!(rows[3].time_squeeze, 0x32);
    assert_eq!(rows[3].flow_limit_count, Some(0));
}

#[test]
fn insights_core_rhel5_to_rhel9_formats() {
    // RHEL6/7: 10 columns (received_rps), col 8 cpu_collision ignored.
    let rows = softnet_of("insights-core/SOFTNET_STAT");
    assert_eq!(rows.len(), 4);
    assert_eq!(cpus(&rows), [0, 1, 2, 3]);
    assert!(
        rows.iter()
            .all(|r| optional_columns(r) == (true, false, false))
    );
    assert_eq!(
        rows.iter().map(|r| r.received_rps).collect::<Vec<_>>(),
        [Some(5), Some(6), Some(7), Some(8)]
    );
    assert_eq!(rows[1].dropped, 0xff);

    let rows = softnet_of("insights-core/SOFTNET_STAT_2");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].time_squeeze, 0xf003eca7);
    assert_eq!(rows[1].dropped, 0xee);

    // RHEL9: 13 columns, CPU index in col 12; this capture's last row says CPU 0 again.
    let rows = softnet_of("insights-core/SOFTNET_STAT_3");
    assert_eq!(rows.len(), 5);
    assert_eq!(cpus(&rows), [0, 1, 2, 3, 0]);
    assert!(
        rows.iter()
            .all(|r| optional_columns(r) == (true, true, true))
    );
    assert_eq!(rows[2].processed, 0x02600138);
    assert_eq!(rows[2].backlog_len, Some(0xa));
    assert_eq!(rows[3].flow_limit_count, Some(0xbd));
    assert_eq!(rows[4].dropped, 0x0002db94);

    // RHEL5: 9 columns, nothing optional.
    let rows = softnet_of("insights-core/SOFTNET_STAT_4");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].processed, 0x6dcad223);
    assert_eq!(optional_columns(&rows[0]), (false, false, false));

    // RHEL8: 11 columns, flow_limit_count present.
    let rows = softnet_of("insights-core/SOFTNET_STAT_5");
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (
            rows[0].processed,
            rows[0].dropped,
            rows[0].time_squeeze,
            rows[0].received_rps,
            rows[0].flow_limit_count,
            rows[0].backlog_len
        ),
        (0x22be3, 0xfe, 0x12, Some(2), Some(1), None)
    );
}

#[test]
fn netutils_consecutive_softnet_samples() {
    let samples: Vec<Vec<SoftnetRow>> = (1..=5)
        .map(|i| softnet_of(&format!("netutils/softnet_stat/softnet_stat{i}")))
        .collect();
    for rows in &samples {
        assert_eq!(rows.len(), 8);
        assert_eq!(cpus(rows), (0..8).collect::<Vec<_>>());
        assert!(
            rows.iter()
                .all(|r| optional_columns(r) == (true, false, false))
        );
    }
    assert_eq!(samples[0][0].processed, 0x1ba0fbc3);
    assert_eq!(samples[0][2].processed, 0xc31633d5);
    assert_eq!(samples[4][0].processed, 0x1ba2928e);
    assert_eq!(samples[0][7].time_squeeze, 0xc3);
    // Consecutive samples of one box: processed never goes backwards (no wrap here).
    for pair in samples.windows(2) {
        for (before, after) in pair[0].iter().zip(&pair[1]) {
            assert!(after.processed >= before.processed);
        }
    }
}

#[test]
fn netutils_strange_cpu_softnet() {
    let rows = softnet_of("netutils/strange-cpu/softnet-stat");
    assert_eq!(rows.len(), 8);
    assert_eq!(rows[0].processed, 0xa4a1bcc9);
    assert_eq!(rows[7].processed, 0x94bbfca8);
    assert_eq!(rows[7].time_squeeze, 0xd4);
    assert_eq!(rows[7].cpu, 7);
}

#[test]
fn this_machines_softnet() {
    // Every Linux machine has it: unreadable here is a failure, not a skip.
    let rows = read_softnet(&Root::default()).expect("/proc/net/softnet_stat readable");
    assert!(!rows.is_empty());
    let mut ids = cpus(&rows);
    let sorted = {
        ids.dedup();
        ids.windows(2).all(|w| w[0] < w[1])
    };
    assert!(sorted, "a real kernel lists CPUs in ascending order");
}

// ---------------------------------------------------------------------------------------
// softirqs captures

#[test]
fn procfs_and_node_exporter_softirqs() {
    let s = read_softirqs(&Root::new(fixture("procfs"))).unwrap();
    assert_eq!(s.cpus, [0, 1]);
    assert_eq!(s.rows.len(), 10);
    assert_eq!(s.net_rx(), Some(&[55919, 28694][..]));
    assert_eq!(s.net_tx(), Some(&[2419, 772][..]));
    assert_eq!(s.count("BLOCK", 1), Some(262755));
    assert_eq!(s.row("IRQ_POLL"), Some(&[0, 0][..]));
    assert_eq!(s.rows.last().unwrap().name, "RCU");

    let s = softirqs_of("node_exporter/proc/softirqs");
    assert_eq!(s.cpus, [0, 1]);
    assert_eq!(s.net_rx(), Some(&[43066, 104508][..]));
    assert_eq!(s.net_tx(), Some(&[2301, 2430][..]));
    assert_eq!(s.count("HI", 0), Some(7));
}

#[test]
fn netutils_dualcore_softirqs_with_idle_possible_cpus() {
    let samples: Vec<Softirqs> = (1..=5)
        .map(|i| softirqs_of(&format!("netutils/softirqs.dualcore/softirqs{i}")))
        .collect();
    for s in &samples {
        assert_eq!(s.cpus, [0, 1, 2, 3], "4 possible CPUs, 2 of them never ran");
        assert_eq!(s.rows.len(), 10);
        assert_eq!(s.rows[5].name, "BLOCK_IOPOLL", "older name of IRQ_POLL");
        for name in ["NET_RX", "TIMER", "RCU"] {
            assert_eq!(&s.row(name).unwrap()[2..], &[0, 0], "{name}");
        }
    }
    assert_eq!(samples[0].net_rx(), Some(&[183741596, 182082160, 0, 0][..]));
    assert_eq!(samples[4].count("NET_RX", 1), Some(182083533));
}

#[test]
fn netutils_i7_softirqs_above_two_to_the_31() {
    let samples: Vec<Softirqs> = (1..=5)
        .map(|i| softirqs_of(&format!("netutils/softirqs.i7/softirqs{i}")))
        .collect();
    for s in &samples {
        assert_eq!(s.cpus, (0..8).collect::<Vec<_>>());
        assert_eq!(s.rows.len(), 10);
    }
    assert_eq!(samples[0].count("NET_RX", 4), Some(3497390485));
    assert_eq!(samples[0].count("NET_TX", 0), Some(20940277));
    assert_eq!(samples[4].count("NET_RX", 4), Some(3497390508));
    for pair in samples.windows(2) {
        let (before, after) = (pair[0].net_rx().unwrap(), pair[1].net_rx().unwrap());
        assert!(before.iter().zip(after).all(|(b, a)| a >= b));
    }
}

#[test]
fn netutils_strange_cpu_softirqs() {
    let s = softirqs_of("netutils/strange-cpu/softirqs");
    assert_eq!(s.cpus.len(), 8);
    assert_eq!(s.count("NET_RX", 5), Some(367278260));
    assert_eq!(s.count("TIMER", 4), Some(2059638024));
    assert_eq!(s.count("RCU", 3), Some(1489231279));
}

#[test]
fn this_machines_softirqs() {
    // Every Linux machine has it: unreadable here is a failure, not a skip.
    let s = read_softirqs(&Root::default()).expect("/proc/softirqs readable");
    assert!(!s.cpus.is_empty());
    assert!(s.net_rx().is_some() && s.net_tx().is_some());
}

// ---------------------------------------------------------------------------------------
// Synthetic cases

/// A 6.x row: 15 columns, CPU id in column 12.
fn row15(cpu: u32, processed: u32, dropped: u32, squeeze: u32) -> String {
    format!(
        "{processed:08x} {dropped:08x} {squeeze:08x} 00000000 00000000 00000000 00000000 \
         00000000 00000000 00000007 00000003 00000002 {cpu:08x} 00000001 00000001\n"
    )
}

#[test]
fn fifteen_columns_with_offline_cpus() {
    // CPUs 1, 2 and 5 offline: rows skip them, column 12 tells who is who.
    let text: String = [0u32, 3, 4, 6, 1151]
        .iter()
        .map(|&cpu| row15(cpu, cpu * 1000 + 1, cpu, 2 * cpu))
        .collect();
    let rows = softnet_text(&text).unwrap();
    assert_eq!(cpus(&rows), [0, 3, 4, 6, 1151]);
    assert_eq!(rows[1].processed, 3001);
    assert_eq!(rows[4].processed, 1151001);
    assert_eq!(rows[4].time_squeeze, 2302);
    assert!(rows.iter().all(|r| {
        r.received_rps == Some(7) && r.flow_limit_count == Some(3) && r.backlog_len == Some(2)
    }));
    // Columns beyond 15 (a future kernel) are tolerated.
    let wider = text.replace('\n', " deadbeef 00000000\n");
    assert_eq!(softnet_text(&wider).unwrap(), rows);
}

#[test]
fn truncated_input_is_an_error_with_the_line() {
    let full = row15(0, 1, 0, 0) + &row15(1, 2, 0, 0);
    // The second row cut after 5 columns.
    let cut = &full[..full.len() - 9 * 10 - 1];
    assert_eq!(
        softnet_text(cut).unwrap_err(),
        "proc/net/softnet_stat:2: 5 columns, expected at least 9"
    );
    // A cpu line cut after two counters.
    assert_eq!(
        stat_text("cpu  1 2 3 4\ncpu0 1 2 3 4 5\ncpu1 7 8\n").unwrap_err(),
        "proc/stat:3: cpu1 has 2 counters, expected at least 4 (user nice system idle)"
    );
    // A file cut before the intr line.
    assert_eq!(
        stat_text("cpu0 1 2 3 4 5 6 7 8\n").unwrap_err(),
        "proc/stat:0: no intr line"
    );
    // softirqs cut in the middle of a row.
    assert_eq!(
        softirqs_text("   CPU0 CPU1 CPU2\nHI: 1 2 3\nTIMER: 4 5").unwrap_err(),
        "proc/softirqs:3: TIMER has 2 counts but the header names 3 CPUs"
    );
}

#[test]
fn garbage_is_an_error_quoting_it() {
    assert_eq!(
        softnet_text("0000000g 0 0 0 0 0 0 0 0\n").unwrap_err(),
        "proc/net/softnet_stat:1: `0000000g` is not a hex number"
    );
    assert_eq!(
        softnet_text("0x000001 0 0 0 0 0 0 0 0\n").unwrap_err(),
        "proc/net/softnet_stat:1: `0x000001` is not a hex number"
    );
    assert_eq!(
        stat_text("cpu0 1 2 -3 4\nintr 0\n").unwrap_err(),
        "proc/stat:1: `-3` is not a decimal number"
    );
    assert_eq!(
        stat_text("cpu0 1 2 3 4\nintr 1 \u{fffd}\n").unwrap_err(),
        "proc/stat:2: `\u{fffd}` is not a decimal number"
    );
    assert_eq!(
        softirqs_text("CPU0 CPUx\nHI: 1 2\n").unwrap_err(),
        "proc/softirqs:1: header field `CPUx` is not CPUn"
    );
    assert_eq!(
        softirqs_text("CPU0\nNET_RX: 1e3\n").unwrap_err(),
        "proc/softirqs:2: `1e3` is not a decimal number"
    );
}

#[test]
fn empty_files_are_errors() {
    for text in ["", "\n", "  \n\n"] {
        assert_eq!(stat_text(text).unwrap_err(), "proc/stat:0: empty file");
        assert_eq!(
            softnet_text(text).unwrap_err(),
            "proc/net/softnet_stat:0: empty file"
        );
        assert_eq!(
            softirqs_text(text).unwrap_err(),
            "proc/softirqs:0: empty file"
        );
    }
}

#[test]
fn huge_numbers_are_errors_not_panics() {
    let max = u64::MAX.to_string();
    let stat = stat_text(&format!("cpu0 {max} 0 0 {max}\nintr {max} {max}\n")).unwrap();
    assert_eq!(stat.cpu_times[0].user, u64::MAX);
    assert_eq!(stat.irq_totals, [u64::MAX]);
    // One more than u64::MAX, and far more.
    assert_eq!(
        stat_text("cpu0 18446744073709551616 0 0 0\nintr 0\n").unwrap_err(),
        "proc/stat:1: `18446744073709551616` does not fit in 64 bits"
    );
    let long = "9".repeat(100);
    let err = stat_text(&format!("cpu0 1 2 3 4\nintr 1 {long}\n")).unwrap_err();
    assert!(err.starts_with("proc/stat:2: `9999"), "{err}");
    assert!(err.ends_with("…` does not fit in 64 bits"), "{err}");
    assert_eq!(
        softirqs_text("CPU0\nNET_RX: 99999999999999999999\n").unwrap_err(),
        "proc/softirqs:2: `99999999999999999999` does not fit in 64 bits"
    );
    // softnet columns are u32: nine hex digits do not fit, leading zeros do.
    assert_eq!(
        softnet_text("100000000 0 0 0 0 0 0 0 0\n").unwrap_err(),
        "proc/net/softnet_stat:1: `100000000` does not fit in 32 bits"
    );
    let rows = softnet_text("0000000000000000ffffffff 0 0 0 0 0 0 0 0\n").unwrap();
    assert_eq!(rows[0].processed, u32::MAX);
    // A CPU number beyond u32 in col 12 is an overflow too (it is a u32 column).
    assert!(
        softnet_text(&row15(0, 0, 0, 0).replace("00000000 00000001 00000001", "1ffffffff 1 1"))
            .unwrap_err()
            .contains("does not fit in 32 bits")
    );
}

// ---------------------------------------------------------------------------------------
// Property tests

/// Input made of the tokens these files are made of, to reach deeper than random bytes.
fn procfs_like_text() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("cpu".to_string()),
        Just("cpu0".to_string()),
        Just("cpu17".to_string()),
        Just("intr".to_string()),
        Just("CPU0".to_string()),
        Just("CPU1".to_string()),
        Just("NET_RX:".to_string()),
        Just(":".to_string()),
        Just(" ".to_string()),
        Just("\n".to_string()),
        Just("\t".to_string()),
        Just("ffffffff".to_string()),
        Just("100000000".to_string()),
        Just("18446744073709551616".to_string()),
        "[0-9a-fA-F]{1,12}",
        "[0-9]{1,25}",
        any::<u32>().prop_map(|n| format!("{n:08x}")),
    ];
    proptest::collection::vec(token, 0..200).prop_map(|tokens| tokens.join(" "))
}

/// Counter values of every width, from 1 to 20 digits.
fn counter() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..10,
        0u64..100_000_000,
        100_000_000u64..10_000_000_000_000_000,
        any::<u64>(),
    ]
}

fn parse_all(bytes: &[u8]) {
    let path = Path::new("fuzz");
    let mut stat = Stat::default();
    let _ = parse_stat(bytes, path, &mut stat.cpu_times, &mut stat.irq_totals);
    let mut rows = Vec::new();
    let _ = parse_softnet(bytes, path, None, &mut rows);
    let online = CpuSet::parse_list("0-3,5,64").unwrap();
    let _ = parse_softnet(bytes, path, Some(&online), &mut rows);
    let _ = parse_softirqs(bytes, path);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        parse_all(&bytes);
    }

    #[test]
    fn procfs_like_text_never_panics(text in procfs_like_text()) {
        parse_all(text.as_bytes());
    }

    #[test]
    fn stat_round_trips(
        cpus in proptest::collection::vec((0..MAX_CPUS, proptest::array::uniform8(counter())), 1..40),
        irqs in proptest::collection::vec(counter(), 0..300),
    ) {
        let mut text = String::from("cpu  1 2 3 4 5 6 7 8 0 0\n");
        for (cpu, v) in &cpus {
            writeln!(text, "cpu{cpu} {} {} {} {} {} {} {} {} 0 0",
                v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]).unwrap();
        }
        write!(text, "intr 12345").unwrap();
        for count in &irqs {
            write!(text, " {count}").unwrap();
        }
        text.push_str("\nctxt 1\nsoftirq 1 2 3\n");
        let stat = stat_text(&text).unwrap();
        prop_assert_eq!(&stat.irq_totals, &irqs);
        let expected: Vec<CpuTimes> = cpus.iter().map(|&(cpu, v)| CpuTimes {
            cpu, user: v[0], nice: v[1], system: v[2], idle: v[3],
            iowait: v[4], irq: v[5], softirq: v[6], steal: v[7],
        }).collect();
        prop_assert_eq!(stat.cpu_times, expected);
    }

    #[test]
    fn softnet_round_trips(
        rows in proptest::collection::vec((any::<u32>(), any::<[u32; 14]>(), 9usize..17), 1..60),
    ) {
        let mut text = String::new();
        for (row, (processed, rest, width)) in rows.iter().enumerate() {
            let mut columns = vec![*processed];
            columns.extend_from_slice(rest);
            columns[12] %= MAX_CPUS; // the CPU id column: larger ids are errors
            columns.push(0xabc);
            columns.push(0xdef);
            let line: Vec<String> = columns[..*width].iter().map(|c| format!("{c:08x}")).collect();
            writeln!(text, "{}", line.join(" ")).unwrap();
            let _ = row;
        }
        let parsed = softnet_text(&text).unwrap();
        prop_assert_eq!(parsed.len(), rows.len());
        for (index, (got, (processed, rest, width))) in parsed.iter().zip(&rows).enumerate() {
            prop_assert_eq!(got.processed, *processed);
            prop_assert_eq!(got.dropped, rest[0]);
            prop_assert_eq!(got.time_squeeze, rest[1]);
            prop_assert_eq!(got.received_rps, (*width > 9).then_some(rest[8]));
            prop_assert_eq!(got.flow_limit_count, (*width > 10).then_some(rest[9]));
            prop_assert_eq!(got.backlog_len, (*width > 11).then_some(rest[10]));
            let cpu = if *width > 12 { rest[11] % MAX_CPUS } else { index as u32 };
            prop_assert_eq!(got.cpu, cpu);
        }
    }
}

// ---------------------------------------------------------------------------------------
// A tick allocates nothing once warm

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// Counts allocations made by the current thread (tests run on several threads).
struct CountingAllocator;

fn count_allocation() {
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_allocation();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn allocations_during(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

/// A 256-CPU tree with 2000 IRQs, written in place.
fn write_counters(dir: &Path, tick: u64) {
    let mut stat = String::from("cpu  0 0 0 0 0 0 0 0 0 0\n");
    for cpu in 0..256u64 {
        writeln!(
            stat,
            "cpu{cpu} {} 0 {} 9000000 0 {} {} 0 0 0",
            tick * 7 + cpu,
            tick * 3,
            tick,
            tick * 2
        )
        .unwrap();
    }
    write!(stat, "intr {}", tick * 2000).unwrap();
    for irq in 0..2000u64 {
        write!(stat, " {}", tick * irq).unwrap();
    }
    stat.push_str("\nctxt 1\nbtime 1\n");
    fs::write(dir.join("proc/stat"), stat).unwrap();
    let softnet: String = (0..256u32)
        .map(|cpu| row15(cpu, tick as u32 * 1000 + cpu, 0, 0))
        .collect();
    fs::write(dir.join("proc/net/softnet_stat"), softnet).unwrap();
}

#[test]
fn a_warm_tick_allocates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("proc/net")).unwrap();
    write_counters(dir.path(), 1);
    let mut sampler = TickSampler::open(&Root::new(dir.path())).unwrap();
    let mut snapshot = Snapshot::default();
    sampler.sample(&mut snapshot).unwrap();
    for tick in 2..6 {
        write_counters(dir.path(), tick);
        let allocations = allocations_during(|| sampler.sample(&mut snapshot).unwrap());
        assert_eq!(allocations, 0, "tick {tick} allocated");
        assert_eq!(snapshot.cpu_times.len(), 256);
        assert_eq!(snapshot.cpu_times[5].user, tick * 7 + 5);
        assert_eq!(snapshot.irq_totals.len(), 2000);
        assert_eq!(snapshot.irq_totals[1999], tick * 1999);
        assert_eq!(snapshot.softnet[255].processed, tick as u32 * 1000 + 255);
    }
    // The same without the replaced-file check, as on `/`.
    sampler.set_follow_replaced_files(false);
    assert_eq!(
        allocations_during(|| sampler.sample(&mut snapshot).unwrap()),
        0
    );
}

/// Old kernels' rows (11 columns, no CPU id) are mapped to the online CPUs in the same
/// pass: a warm tick still allocates nothing, and the rows land on the CPUs of the list
/// (256 online CPUs out of 320, every fifth one offline).
#[test]
fn a_warm_tick_of_rows_without_a_cpu_id_allocates_nothing() {
    let online: CpuSet = (0..320u32).filter(|cpu| cpu % 5 != 4).collect();
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("proc/net")).unwrap();
    let write = |tick: u32| {
        let softnet: String = online
            .iter()
            .map(|cpu| {
                let row = row15(cpu, tick * 1000 + cpu, 0, 0);
                // The first 11 columns, as kernels before 5.10 print them.
                format!("{}\n", &row[..11 * 9 - 1])
            })
            .collect();
        fs::write(dir.path().join("proc/net/softnet_stat"), softnet).unwrap();
    };
    fs::write(
        dir.path().join("proc/stat"),
        "cpu0 1 0 1 1 0 0 1 0 0 0\nintr 0\n",
    )
    .unwrap();
    write(1);
    let mut sampler = TickSampler::open(&Root::new(dir.path())).unwrap();
    sampler.set_online_cpus(Some(&online));
    let mut snapshot = Snapshot::default();
    sampler.sample(&mut snapshot).unwrap();
    for tick in 2..5 {
        write(tick);
        let allocations = allocations_during(|| sampler.sample(&mut snapshot).unwrap());
        assert_eq!(allocations, 0, "tick {tick} allocated");
        assert!(snapshot.softnet.iter().map(|r| r.cpu).eq(online.iter()));
        assert_eq!(snapshot.softnet[255].cpu, 318);
        assert_eq!(snapshot.softnet[255].processed, tick * 1000 + 318);
        assert_eq!(snapshot.softnet[255].flow_limit_count, Some(3));
        assert_eq!(snapshot.softnet[255].backlog_len, None);
    }
}

/// After a second asleep every allocation is a round of cache misses in the allocator,
/// and an idle tick is most of what steerd does (the CPU budget, docs/performance.md):
/// what an idle tick runs after the `pread` (parse `softnet_stat` into the kept vector,
/// carry `proc/stat` over, fold the interval into the load model) allocates nothing once
/// the load model's tables have grown.
#[test]
fn a_warm_idle_tick_of_the_load_model_allocates_nothing() {
    let path = Path::new("proc/net/softnet_stat");
    let texts: Vec<String> = (0..8u32)
        .map(|tick| (0..64).map(|cpu| row15(cpu, 100 + tick, 0, 0)).collect())
        .collect();
    let mut previous = Snapshot {
        taken_at_ns: 1_000_000_000,
        cpu_times: (0..64)
            .map(|cpu| CpuTimes {
                cpu,
                user: 10,
                idle: 1000,
                ..CpuTimes::default()
            })
            .collect(),
        irq_totals: vec![0; 128],
        ..Snapshot::default()
    };
    parse_softnet(texts[0].as_bytes(), path, None, &mut previous.softnet).unwrap();
    let mut current = previous.clone();
    let mut load = Load::new();
    let mut tick = |n: usize| {
        std::mem::swap(&mut previous, &mut current);
        current.carry_stat_from(&previous);
        parse_softnet(texts[n].as_bytes(), path, None, &mut current.softnet).unwrap();
        current.taken_at_ns = (n as u64 + 1) * 1_000_000_000;
        load.update(&previous, &current, 0.5);
    };
    tick(1); // grows the load model's tables
    tick(2);
    let during = allocations_during(|| (3..8).for_each(&mut tick));
    assert_eq!(during, 0, "{during} allocations in 5 idle ticks");
    // The ticks did fold the intervals in: one more packet per tick, a tick a second.
    let cpu = load.cpu(63).unwrap();
    assert!(cpu.online && cpu.warm);
    assert_eq!(cpu.processed_pps, 1.0);
}

/// What an idle tick records for `steerd status` (the verdict with the numbers of its
/// sentence, the tick count, the time) allocates nothing: the sentence is rendered only
/// when someone asks. Replacing the policy's last sentence frees it, allocating nothing.
#[test]
fn an_idle_tick_s_status_update_allocates_nothing() {
    use steerd::status_report::{Calm, LiveStatus, Verdict};
    let status = std::sync::Mutex::new(LiveStatus {
        reason: Some("no CPU is hot (the policy's last sentence)".to_string()),
        ..LiveStatus::default()
    });
    let during = allocations_during(|| {
        for tick in 1..=5u64 {
            let mut live = status.lock().unwrap();
            let calm = Calm {
                high_watermark: 0.6,
                imbalance: 3.0,
                busy_pps: 50_000.0,
                busiest: Some((1, 0.01, tick as f64)),
            };
            live.record_verdict(Verdict::Calm(calm), tick, None);
            live.record_tick(tick, tick as f64, 1.0, 10.0);
        }
    });
    assert_eq!(during, 0, "{during} allocations in 5 idle status updates");
    let report = status.lock().unwrap().report(6.0, Ok(()), Vec::new());
    assert!(
        report.last_tick.reason.contains("no CPU is hot"),
        "{report:?}"
    );
}

#[test]
fn a_warm_tick_on_this_machine_allocates_nothing() {
    // Every Linux machine has it: unreadable here is a failure, not a skip.
    let mut sampler = TickSampler::open(&Root::default()).expect("per-tick files readable");
    let mut snapshot = Snapshot::default();
    sampler.sample(&mut snapshot).unwrap();
    sampler.sample(&mut snapshot).unwrap();
    let allocations = allocations_during(|| {
        for _ in 0..10 {
            sampler.sample(&mut snapshot).unwrap();
        }
    });
    assert_eq!(allocations, 0);
}

#[test]
fn the_allocation_counter_can_fail() {
    assert!(allocations_during(|| drop(std::hint::black_box(vec![1u8; 64]))) >= 1);
}
