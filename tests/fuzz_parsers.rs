//! Property tests of every parser of bytes from outside the process (issue 16): each is
//! fed (a) arbitrary bytes and (b) the real captures under `tests/fixtures/`, mutated
//! (bits flipped, bytes inserted and deleted, lines duplicated and dropped, numbers
//! replaced by 4294967295, 18446744073709551615 and friends, truncated). Every parser must
//! return `Ok` or an error, never panic, and what it accepts must respect the bounds of
//! `steerd::limits` (and `cpuset::MAX_CPUS`), so that no input can size a table.
//!
//! The RSS reply parsers (`kernel::rss`) read binary structs and netlink attributes: they get
//! arbitrary bytes, any sizes, and mutated well-formed replies. The netdev netlink parsers
//! are private; their properties are unit tests in `crates/steerd-kernel/src/kernel/netlink/fuzz.rs`.
//!
//! Each property runs a fixed number of cases so that this file stays well under a minute
//! in a debug build on two cores; `PROPTEST_CASES=N` (what `scripts/fuzz.sh` sets) runs
//! N cases of every property instead.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;

use steerd::Root;
use steerd::cpuset::{CpuSet, MAX_CPUS};
use steerd::kernel::ethtool_names::{classify, map_queue_stats};
use steerd::kernel::irq_names::{DeviceNames, KnownDevice};
use steerd::kernel::procfs::interrupts;
use steerd::kernel::procfs::softirqs::parse_softirqs;
use steerd::kernel::procfs::softnet::parse_softnet;
use steerd::kernel::procfs::stat::parse_stat;
use steerd::kernel::rss;
use steerd::limits::{MAX_INTERRUPT_CELLS, MAX_IRQS, MAX_QUEUES};

mod common;

/// `cases` per run, unless `PROPTEST_CASES` says otherwise (it only reaches
/// `ProptestConfig::default()`, which `with_cases` would override).
fn budget(cases: u32) -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = cases;
    }
    config
}

// ---------------------------------------------------------------------------------------
// The captures, by the parser that reads them.

/// A capture: its path and bytes.
type Capture = (PathBuf, Vec<u8>);

/// Every fixture file, grouped by the parser it is for (by its name).
fn fixtures() -> &'static BTreeMap<&'static str, Vec<Capture>> {
    static FIXTURES: OnceLock<BTreeMap<&'static str, Vec<Capture>>> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        let mut groups: BTreeMap<&'static str, Vec<Capture>> = BTreeMap::new();
        let mut stack = vec![common::fixture("")];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    stack.push(path);
                } else if kind.is_file()
                    && let Some(group) = group_of(&path)
                    && let Ok(bytes) = std::fs::read(&path)
                {
                    groups.entry(group).or_default().push((path, bytes));
                }
            }
        }
        for files in groups.values_mut() {
            files.sort();
        }
        groups
    })
}

fn group_of(path: &Path) -> Option<&'static str> {
    let name = path.file_name()?.to_str()?;
    let in_proc = path.components().any(|c| c.as_os_str() == "proc");
    let in_ethtool = path.components().any(|c| c.as_os_str() == "ethtool");
    Some(match name {
        n if n.starts_with("interrupts") => "interrupts",
        n if n.starts_with("softirqs") => "softirqs",
        n if n.to_ascii_lowercase().starts_with("softnet_stat") => "softnet",
        "stat" if in_proc => "stat",
        "local_cpulist" | "cpulistaffinity" | "online" | "possible" | "present" | "isolated"
        | "nohz_full" | "related_cpus" | "affected_cpus" | "cpulist" => "cpulist",
        n if n.ends_with("_list") => "cpulist",
        "local_cpus" | "rps_cpus" | "xps_cpus" | "cpuaffinity" | "cpumap" => "mask",
        "statistics" if in_ethtool => "ethtool",
        n if n.contains("ETHTOOL_S") => "ethtool",
        _ if path.parent()?.file_name()? == "ethq" && name != "INDEX.md" => "ethtool",
        _ => return None,
    })
}

fn group(name: &str) -> &'static [Capture] {
    let files = fixtures().get(name).map(Vec::as_slice).unwrap_or_default();
    assert!(!files.is_empty(), "no fixture for {name}");
    files
}

/// `ethtool -S` text as `(name, value)` pairs, leniently: a mutated capture is still a
/// list of names (values that no longer parse are 0).
fn ethtool_pairs(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|line| {
            let (name, value) = line.trim().rsplit_once(':')?;
            Some((name.trim().to_string(), value.trim().parse().unwrap_or(0)))
        })
        .collect()
}

/// The action names of every parsable `interrupts` capture: real IRQ names to mutate.
fn action_names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names: Vec<String> = group("interrupts")
            .iter()
            .filter_map(|(path, bytes)| {
                interrupts::parse(&String::from_utf8_lossy(bytes), path).ok()
            })
            .flat_map(|parsed| {
                parsed
                    .lines
                    .iter()
                    .flat_map(|line| line.actions().map(str::to_string).collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            })
            .collect();
        names.sort();
        names.dedup();
        names
    })
}

// ---------------------------------------------------------------------------------------
// Mutations.

/// One edit of a byte string.
#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize, usize),
    Truncate(usize),
    DuplicateLine(usize, usize),
    DropLine(usize),
    /// Replaces the n-th run of (hex) digits by a huge or boundary number.
    HugeNumber(usize, &'static str),
    /// Repeats a slice many times (long lines, many columns, many rows).
    Repeat(usize, usize, usize),
}

const HUGE: &[&str] = &[
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999",
    "65535",
    "65536",
    "1048576",
    "ffffffff",
    "ffffffffffffffff",
    "-1",
    "0",
];

/// Bytes a mutation inserts: the separators the formats use, and some that they do not.
const INSERTED: &[u8] = b" \t\n:,-._#=\"'[]0123456789abcdefxXCPU\x00\xff";

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Edit::Flip(at, 1 << bit)),
        (any::<usize>(), prop::sample::select(INSERTED)).prop_map(|(at, b)| Edit::Insert(at, b)),
        (any::<usize>(), 1usize..32).prop_map(|(at, n)| Edit::Delete(at, n)),
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), 1usize..50).prop_map(|(at, n)| Edit::DuplicateLine(at, n)),
        any::<usize>().prop_map(Edit::DropLine),
        (any::<usize>(), prop::sample::select(HUGE)).prop_map(|(n, v)| Edit::HugeNumber(n, v)),
        (any::<usize>(), 1usize..64, 2usize..200).prop_map(|(at, len, n)| Edit::Repeat(at, len, n)),
    ]
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    proptest::collection::vec(edit(), 1..8)
}

/// Start and end of the line holding byte `at`.
fn line_around(bytes: &[u8], at: usize) -> (usize, usize) {
    let at = at.min(bytes.len());
    let start = bytes[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let end = bytes[at..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |p| at + p + 1);
    (start, end)
}

/// The most bytes a mutated input may grow to: duplicating a line 50 times, twice, would
/// otherwise make megabytes of a short name, and the cases would be about memory speed.
const MAX_MUTATED: usize = 512 << 10;

fn apply(bytes: &mut Vec<u8>, edit: &Edit) {
    let len = bytes.len();
    if len > MAX_MUTATED && matches!(edit, Edit::DuplicateLine(..) | Edit::Repeat(..)) {
        return;
    }
    let at = |i: usize| if len == 0 { 0 } else { i % len };
    match *edit {
        Edit::Flip(i, mask) => {
            if let Some(b) = bytes.get_mut(at(i)) {
                *b ^= mask;
            }
        }
        Edit::Insert(i, b) => bytes.insert(i % (len + 1), b),
        Edit::Delete(i, n) => {
            let start = at(i);
            bytes.drain(start..(start + n).min(len));
        }
        Edit::Truncate(i) => bytes.truncate(at(i)),
        Edit::DuplicateLine(i, n) => {
            let (start, end) = line_around(bytes, at(i));
            let line = bytes[start..end].to_vec();
            for _ in 0..n {
                bytes.splice(end..end, line.iter().copied());
            }
        }
        Edit::DropLine(i) => {
            let (start, end) = line_around(bytes, at(i));
            bytes.drain(start..end);
        }
        Edit::HugeNumber(n, value) => {
            let runs: Vec<(usize, usize)> = digit_runs(bytes);
            if !runs.is_empty() {
                let (start, end) = runs[n % runs.len()];
                bytes.splice(start..end, value.bytes());
            }
        }
        Edit::Repeat(i, width, n) => {
            let start = at(i);
            let slice = bytes[start..(start + width).min(len)].to_vec();
            let chunk: Vec<u8> = slice.repeat(n);
            bytes.splice(start..start, chunk);
        }
    }
}

/// The maximal runs of ASCII hex digits: every number of the formats read.
fn digit_runs(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut start = None;
    for (i, b) in bytes.iter().enumerate() {
        match (b.is_ascii_hexdigit(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                runs.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        runs.push((s, bytes.len()));
    }
    runs
}

fn mutated(base: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut bytes = base.to_vec();
    for e in edits {
        apply(&mut bytes, e);
    }
    bytes
}

/// A fixture of `name`'s group and edits for it.
fn mutated_fixture(name: &'static str) -> impl Strategy<Value = Capture> {
    let files = group(name);
    (0..files.len(), edits()).prop_map(move |(index, edits)| {
        let (path, bytes) = &files[index];
        (path.clone(), mutated(bytes, &edits))
    })
}

fn arbitrary_bytes() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..2048)
}

/// Text made of the formats' own tokens: arbitrary bytes rarely get past the first
/// check, this reaches deeper.
fn token_soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("CPU0".to_string()),
        Just("CPU1".to_string()),
        Just("CPU65535".to_string()),
        Just("cpu0".to_string()),
        Just("cpu".to_string()),
        Just("intr".to_string()),
        Just("NET_RX:".to_string()),
        Just("\n".to_string()),
        Just(" ".to_string()),
        Just(":".to_string()),
        Just(",".to_string()),
        Just("-".to_string()),
        Just("IR-PCI-MSI".to_string()),
        Just("edge".to_string()),
        Just("eth0-TxRx-3".to_string()),
        prop::sample::select(HUGE).prop_map(str::to_string),
        (0u64..100_000).prop_map(|n| n.to_string()),
        (0u32..u32::MAX).prop_map(|n| format!("{n:08x}")),
    ];
    proptest::collection::vec(token, 0..300).prop_map(|t| t.concat())
}

// ---------------------------------------------------------------------------------------
// What an accepted parse must respect.

fn check_softnet(bytes: &[u8], path: &Path) {
    let mut rows = Vec::new();
    if parse_softnet(bytes, path, None, &mut rows).is_ok() {
        assert!(rows.iter().all(|r| r.cpu < MAX_CPUS), "{rows:?}");
    }
    // With an online list (a gap, and a CPU past the first 64), rows without a CPU id
    // take its CPUs in order: never one outside it.
    let online = steerd::cpuset::CpuSet::parse_list("0-2,4,70").expect("a cpulist");
    if parse_softnet(bytes, path, Some(&online), &mut rows).is_ok() {
        assert!(rows.iter().all(|r| r.cpu < MAX_CPUS), "{rows:?}");
    }
}

fn check_stat(bytes: &[u8], path: &Path) {
    let (mut cpu_times, mut irq_totals) = (Vec::new(), Vec::new());
    if parse_stat(bytes, path, &mut cpu_times, &mut irq_totals).is_ok() {
        assert!(cpu_times.iter().all(|t| t.cpu < MAX_CPUS));
        assert!(irq_totals.len() <= MAX_IRQS as usize);
    }
}

fn check_interrupts(bytes: &[u8], path: &Path) {
    if let Ok(parsed) = interrupts::parse(&String::from_utf8_lossy(bytes), path) {
        assert!(parsed.cpus.iter().all(|&cpu| cpu < MAX_CPUS));
        assert!(parsed.lines.iter().all(|l| l.irq < MAX_IRQS));
        let cells: usize = parsed.lines.iter().map(|l| l.per_cpu.len()).sum::<usize>()
            + parsed.named.iter().map(|n| n.per_cpu.len()).sum::<usize>();
        assert!(cells <= MAX_INTERRUPT_CELLS, "{cells} cells");
    }
}

fn check_softirqs(bytes: &[u8], path: &Path) {
    if let Ok(parsed) = parse_softirqs(bytes, path) {
        assert!(parsed.cpus.iter().all(|&cpu| cpu < MAX_CPUS));
        assert!(
            parsed
                .rows
                .iter()
                .all(|r| r.counts.len() == parsed.cpus.len())
        );
    }
}

fn check_cpuset(text: &str) {
    for set in [CpuSet::parse_list(text), CpuSet::parse_mask(text)]
        .into_iter()
        .flatten()
    {
        assert!(set.last().is_none_or(|cpu| cpu < MAX_CPUS), "{text:?}");
    }
}

fn devices() -> Vec<KnownDevice<'static>> {
    let device = |name, driver, pci_function, virtio_device| KnownDevice {
        name,
        driver,
        pci_function,
        virtio_device,
    };
    vec![
        device("eth0", Some("ixgbe"), Some("0000:01:00.0"), None),
        device("eth1", Some("igb"), Some("0000:02:00.0"), None),
        device("ens5", Some("ena"), Some("0000:00:05.0"), None),
        device("mlx0", Some("mlx5_core"), Some("0000:81:00.0"), None),
        device("gve0", Some("gve"), Some("0000:00:04.0"), None),
        device("tg0", Some("tg3"), Some("0000:0a:00.0"), None),
        device(
            "eth9",
            Some("virtio_net"),
            Some("0000:00:03.0"),
            Some("virtio2"),
        ),
        device("p1p1", None, None, None),
        device("em1", None, None, None),
    ]
}

fn check_irq_name(names: &DeviceNames<'_>, action: &str) {
    if let Some(c) = names.classify(action) {
        assert!(c.device < names.devices().len());
        assert!(c.rx_queue.is_none_or(|q| q < MAX_QUEUES), "{action:?}");
        assert!(c.tx_queue.is_none_or(|q| q < MAX_QUEUES), "{action:?}");
    }
}

fn check_ethtool(pairs: &[(String, u64)]) {
    for (name, _) in pairs {
        if let Some(key) = classify(name) {
            assert!(key.index < MAX_QUEUES, "{name:?}");
        }
    }
    for queue in map_queue_stats(pairs) {
        assert!(queue.queue < MAX_QUEUES, "{queue:?}");
    }
}

/// irqbalance's environment file, through the public reader (it reads files under a root).
fn check_irqbalance(text: &[u8]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("etc/default/irqbalance");
    std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
    std::fs::write(&file, text).expect("write");
    if let Ok(ban) = steerd::irqbalance_compat::read_ban(&Root::new(dir.path())) {
        assert!(ban.cpus.last().is_none_or(|cpu| cpu < MAX_CPUS));
    }
}

/// The actuator's state file, through `Actuator::open` on a scratch root (it only reads
/// under the root, and rewrites the state file there).
fn check_state_file(text: &[u8]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.json");
    std::fs::write(&state, text).expect("write");
    let _ = steerd::apply::Actuator::open(Root::new(dir.path()), state);
}

const STATE_SEED: &str = r#"{"version":1,"boot_id":null,"entries":[
{"knob":{"knob":"irq_affinity","irq":30},"original":"0-3","written":[1,2]},
{"knob":{"knob":"rps_cpus","device":"eth0","queue":3},"original":"00","written":[0,1],"intended":[2]},
{"knob":{"knob":"rps_flow_cnt","device":"eth0","queue":0},"original":"0","written":4096},
{"knob":{"knob":"rps_sock_flow_entries"},"original":"0","written":32768}]}"#;

const IRQBALANCE_SEEDS: &[&str] = &[
    "# Debian\n#ENABLED=1\n#ONESHOT=0\nIRQBALANCE_BANNED_CPULIST=0-3,8\n",
    "IRQBALANCE_BANNED_CPUS=00000000,0000000f\nIRQBALANCE_ARGS=\"--policyscript=/x\"\n",
    "export IRQBALANCE_BANNED_CPUS='ff' # CRI-O\n",
];

// ---------------------------------------------------------------------------------------
// The properties.

proptest! {
    #![proptest_config(budget(200))]

    #[test]
    fn softnet_arbitrary_bytes(bytes in arbitrary_bytes()) {
        check_softnet(&bytes, Path::new("softnet_stat"));
    }

    #[test]
    fn softnet_mutated_captures((path, bytes) in mutated_fixture("softnet")) {
        check_softnet(&bytes, &path);
    }

    #[test]
    fn stat_arbitrary_bytes(bytes in arbitrary_bytes()) {
        check_stat(&bytes, Path::new("stat"));
    }

    #[test]
    fn stat_token_soup(text in token_soup()) {
        check_stat(text.as_bytes(), Path::new("stat"));
    }

    #[test]
    fn stat_mutated_captures((path, bytes) in mutated_fixture("stat")) {
        check_stat(&bytes, &path);
    }

    #[test]
    fn interrupts_arbitrary_bytes(bytes in arbitrary_bytes()) {
        check_interrupts(&bytes, Path::new("interrupts"));
    }

    #[test]
    fn interrupts_token_soup(text in token_soup()) {
        check_interrupts(text.as_bytes(), Path::new("interrupts"));
    }

    #[test]
    fn interrupts_mutated_captures((path, bytes) in mutated_fixture("interrupts")) {
        check_interrupts(&bytes, &path);
    }

    #[test]
    fn softirqs_arbitrary_bytes(bytes in arbitrary_bytes()) {
        check_softirqs(&bytes, Path::new("softirqs"));
    }

    #[test]
    fn softirqs_token_soup(text in token_soup()) {
        check_softirqs(text.as_bytes(), Path::new("softirqs"));
    }

    #[test]
    fn softirqs_mutated_captures((path, bytes) in mutated_fixture("softirqs")) {
        check_softirqs(&bytes, &path);
    }

    #[test]
    fn cpuset_arbitrary_text(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        check_cpuset(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn cpuset_token_soup(text in "([0-9]{1,11}|[0-9a-f]{1,9}|[-,:]| |\n){0,40}") {
        check_cpuset(&text);
    }

    #[test]
    fn cpulist_mutated_captures((_path, bytes) in mutated_fixture("cpulist")) {
        check_cpuset(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn cpumask_mutated_captures((_path, bytes) in mutated_fixture("mask")) {
        check_cpuset(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn irq_names_arbitrary(action in "\\PC{0,64}") {
        let devices = devices();
        check_irq_name(&DeviceNames::new(&devices), &action);
    }

    #[test]
    fn irq_names_mutated_real_names(index in any::<usize>(), edits in edits()) {
        let names = action_names();
        prop_assume!(!names.is_empty());
        let name = &names[index % names.len()];
        let devices = devices();
        let bytes = mutated(name.as_bytes(), &edits);
        check_irq_name(&DeviceNames::new(&devices), &String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn ethtool_names_arbitrary(names in proptest::collection::vec("\\PC{0,40}", 0..40)) {
        let pairs: Vec<(String, u64)> = names.into_iter().map(|n| (n, 1)).collect();
        check_ethtool(&pairs);
    }

    #[test]
    fn ethtool_names_mutated_captures((_path, bytes) in mutated_fixture("ethtool")) {
        check_ethtool(&ethtool_pairs(&String::from_utf8_lossy(&bytes)));
    }
}

proptest! {
    // These write a small file per case: fewer cases.
    #![proptest_config(budget(64))]

    #[test]
    fn irqbalance_env_arbitrary_bytes(bytes in arbitrary_bytes()) {
        check_irqbalance(&bytes);
    }

    #[test]
    fn irqbalance_env_mutated(index in any::<usize>(), edits in edits()) {
        let seed = IRQBALANCE_SEEDS[index % IRQBALANCE_SEEDS.len()];
        check_irqbalance(&mutated(seed.as_bytes(), &edits));
    }

    #[test]
    fn state_file_arbitrary_bytes(bytes in arbitrary_bytes()) {
        check_state_file(&bytes);
    }

    #[test]
    fn state_file_mutated(edits in edits()) {
        check_state_file(&mutated(STATE_SEED.as_bytes(), &edits));
    }
}

// The RSS replies of `kernel::rss`: binary structs the kernel fills (`struct ethtool_rxfh`,
// `struct ethtool_rxfh_indir`) and the attributes of an ethtool netlink `RSS_GET` reply.
// Whatever they hold, a parse is `Ok` or an error, and what it accepts respects the caps:
// at most `MAX_INDIRECTION` entries, `MAX_KEY` key bytes, entries below `MAX_QUEUES`.

/// A `GRSSH` reply as the kernel lays it out: header (sizes, toeplitz), entries, key.
fn rxfh_seed(entries: u32, key: u32) -> Vec<u8> {
    let mut reply = Vec::new();
    for word in [0x46, 0, entries, key] {
        reply.extend(u32::to_ne_bytes(word));
    }
    reply.extend([1, 0, 0, 0, 0, 0, 0, 0]);
    for i in 0..entries {
        reply.extend((i % 4).to_ne_bytes());
    }
    reply.extend((0..key).map(|b| b as u8));
    reply
}

/// An `RSS_GET` reply's attributes: header nest, hfunc, table, key.
fn rss_netlink_seed(entries: u32, key: u32) -> Vec<u8> {
    let attr = |kind: u16, value: &[u8]| {
        let mut out = Vec::new();
        out.extend(((4 + value.len()) as u16).to_ne_bytes());
        out.extend(kind.to_ne_bytes());
        out.extend(value);
        out.resize(out.len().div_ceil(4) * 4, 0);
        out
    };
    let table: Vec<u8> = (0..entries).flat_map(|i| (i % 4).to_ne_bytes()).collect();
    let mut attrs = attr(1 | 0x8000, &attr(2, b"eth0\0"));
    attrs.extend(attr(3, &1u32.to_ne_bytes()));
    attrs.extend(attr(4, &table));
    attrs.extend(attr(5, &vec![0x6d; key as usize]));
    attrs
}

fn check_rss_table(entries: &[u32], key: &[u8]) {
    assert!(entries.len() <= rss::MAX_INDIRECTION as usize);
    assert!(key.len() <= rss::MAX_KEY as usize);
    assert!(entries.iter().all(|&ring| ring < MAX_QUEUES));
}

/// Every ioctl reply parser on `bytes`, as a reply to a request for `indir` entries and
/// `key` key bytes.
fn check_rss_ioctl(bytes: &[u8], indir: u32, key: u32) {
    if let Ok(header) = rss::parse_rxfh_header(bytes) {
        assert!(header.indir_size <= rss::MAX_INDIRECTION);
        assert!(header.key_size <= rss::MAX_KEY);
    }
    if let Ok(rxfh) = rss::parse_rxfh(bytes, indir, key) {
        assert_eq!(rxfh.indirection.len(), indir as usize);
        assert_eq!(rxfh.key.len(), key as usize);
        check_rss_table(&rxfh.indirection, &rxfh.key);
    }
    if let Ok((size, entries)) = rss::parse_rxfh_indir(bytes, indir) {
        assert!(size <= rss::MAX_INDIRECTION);
        check_rss_table(&entries, &[]);
    }
}

fn check_rss_netlink(bytes: &[u8]) {
    if let Ok(reply) = rss::netlink::parse_reply(bytes) {
        check_rss_table(&reply.indirection, &reply.key);
    }
}

proptest! {
    #![proptest_config(budget(256))]

    #[test]
    fn rss_replies_arbitrary_bytes(
        bytes in arbitrary_bytes(),
        indir in prop_oneof![any::<u32>(), 0u32..600],
        key in prop_oneof![any::<u32>(), 0u32..300],
    ) {
        check_rss_ioctl(&bytes, indir, key);
        check_rss_netlink(&bytes);
    }

    /// A well-formed header with any sizes (the kernel's answer to the size query), then
    /// whatever follows; parsed as the reply to a request for those sizes.
    #[test]
    fn rss_replies_with_any_sizes(
        indir in prop_oneof![any::<u32>(), 0u32..5000],
        key in prop_oneof![any::<u32>(), 0u32..300],
        tail in proptest::collection::vec(any::<u8>(), 0..4096),
    ) {
        let mut bytes = rxfh_seed(0, 0);
        bytes[8..12].copy_from_slice(&indir.to_ne_bytes());
        bytes[12..16].copy_from_slice(&key.to_ne_bytes());
        bytes.extend(tail);
        check_rss_ioctl(&bytes, indir, key);
    }

    #[test]
    fn rss_replies_mutated(entries in 0u32..600, key in 0u32..64, edits in edits()) {
        let bytes = mutated(&rxfh_seed(entries, key), &edits);
        check_rss_ioctl(&bytes, entries, key);
        let bytes = mutated(&rss_netlink_seed(entries, key), &edits);
        check_rss_netlink(&bytes);
    }
}

/// The RSS seeds are what the kernel sends: unmutated, they parse whole.
#[test]
fn rss_seeds_parse() {
    let rxfh = rss::parse_rxfh(&rxfh_seed(128, 40), 128, 40).expect("GRSSH seed");
    assert_eq!((rxfh.indirection.len(), rxfh.key.len()), (128, 40));
    let reply = rss::netlink::parse_reply(&rss_netlink_seed(128, 40)).expect("RSS_GET seed");
    assert_eq!(reply.indirection, rxfh.indirection);
}

proptest! {
    // The YAML loader is the slowest parser here.
    #![proptest_config(budget(48))]

    #[test]
    fn config_arbitrary_text(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = steerd::config::check_config(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn config_mutated_default(edits in edits()) {
        let bytes = mutated(steerd::config::DEFAULT_YAML.as_bytes(), &edits);
        let _ = steerd::config::check_config(&String::from_utf8_lossy(&bytes));
    }
}

// ---------------------------------------------------------------------------------------
// Seeds and regressions: each finding of these properties, by name.

#[test]
fn every_fixture_group_is_found_and_the_seeds_parse() {
    for name in [
        "softnet",
        "stat",
        "interrupts",
        "softirqs",
        "cpulist",
        "mask",
        "ethtool",
    ] {
        assert!(!group(name).is_empty(), "{name}");
    }
    assert!(!action_names().is_empty());
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state.json");
    std::fs::write(&state, STATE_SEED).expect("write");
    steerd::apply::Actuator::open(Root::new(dir.path()), state).expect("the state seed parses");
}

/// `rx_queue_4294967295_packets` reached `Load::update_queues`, whose per-queue table
/// was resized to 2^32 entries (64 GiB) and aborted. Such a name is no queue statistic.
#[test]
fn regression_ethtool_queue_4294967295_is_not_a_queue_stat() {
    for name in [
        "rx_queue_4294967295_packets",
        "rx4294967295_packets",
        "rx-65536.packets",
        "[4294967295]: rx_ucast_packets",
    ] {
        assert_eq!(classify(name), None, "{name}");
    }
    let pairs = vec![
        ("rx_queue_0_packets".to_string(), 5),
        ("rx_queue_4294967295_packets".to_string(), 7),
    ];
    let queues = map_queue_stats(&pairs);
    assert_eq!(queues.len(), 1, "{queues:?}");
    assert_eq!(queues[0].queue, 0);
    assert!(classify("rx_queue_65535_packets").is_some());
}

#[test]
fn regression_irq_name_with_a_queue_beyond_max_queues_is_unclassified() {
    let devices = devices();
    let names = DeviceNames::new(&devices);
    assert!(names.classify("eth0-TxRx-4294967295").is_none());
    assert!(names.classify("eth0-rx-65536").is_none());
    assert_eq!(
        names.classify("eth0-TxRx-65535").and_then(|c| c.queue()),
        Some(65535)
    );
}

/// Found by `irq_names_mutated_real_names`: the search for `<if>-<suffix>` hashed the
/// whole prefix at every dash, so a long name of dashes took minutes (quadratic).
#[test]
fn regression_irq_name_of_many_dashes_is_classified_in_linear_time() {
    let devices = devices();
    let names = DeviceNames::new(&devices);
    let action = format!("eth0{}", "-".repeat(400_000));
    let started = std::time::Instant::now();
    assert!(names.classify(&action).is_none());
    let elapsed = started.elapsed();
    // Linear: a few milliseconds; quadratic was minutes.
    assert!(elapsed.as_secs() < 5, "{elapsed:?}");
}

#[test]
fn regression_interrupts_irq_beyond_max_irqs_is_an_error() {
    let text = format!("  CPU0\n {}: 5  PCI-MSI 1-edge eth0\n", MAX_IRQS);
    let err = interrupts::parse(&text, Path::new("interrupts")).unwrap_err();
    assert!(err.to_string().contains(":2:"), "{err}");
    let text = format!("  CPU0\n {}: 5  PCI-MSI 1-edge eth0\n", MAX_IRQS - 1);
    assert!(interrupts::parse(&text, Path::new("interrupts")).is_ok());
}

/// A header naming only `CPU65535` gives every row a 65536-entry table: a few megabytes
/// of one-number rows asked for hundreds of gigabytes.
#[test]
fn regression_interrupts_sparse_wide_header_cannot_multiply_memory() {
    let rows = MAX_INTERRUPT_CELLS / MAX_CPUS as usize + 1;
    let mut text = String::from("  CPU65535\n");
    for irq in 0..rows {
        text.push_str(&format!("{irq}: 1\n"));
    }
    let err = interrupts::parse(&text, Path::new("interrupts")).unwrap_err();
    assert!(err.to_string().contains("cells"), "{err}");
}

#[test]
fn regression_stat_intr_line_beyond_max_irqs_is_an_error() {
    let mut text = String::from("cpu0 1 2 3 4\nintr 0");
    text.push_str(&" 1".repeat(MAX_IRQS as usize + 1));
    text.push('\n');
    let (mut cpu_times, mut irq_totals) = (Vec::new(), Vec::new());
    let err = parse_stat(
        text.as_bytes(),
        Path::new("stat"),
        &mut cpu_times,
        &mut irq_totals,
    )
    .unwrap_err();
    assert!(err.to_string().contains("stat:2:"), "{err}");
}

#[test]
fn regression_softirqs_cpu_beyond_max_cpus_is_an_error() {
    let text = "  CPU0 CPU4294967295\nNET_RX: 1 2\n";
    let err = parse_softirqs(text.as_bytes(), Path::new("softirqs")).unwrap_err();
    assert!(err.to_string().contains("softirqs:1:"), "{err}");
}

#[test]
fn regression_sysfs_queue_dir_beyond_max_queues_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let queues = dir.path().join("sys/class/net/eth0/queues");
    std::fs::create_dir_all(queues.join("rx-0")).expect("mkdir");
    std::fs::create_dir_all(queues.join("rx-4294967295")).expect("mkdir");
    let err = steerd::kernel::sysfs::net::read_device(&Root::new(dir.path()), "eth0")
        .expect_err("rx-4294967295 is refused");
    assert!(err.to_string().contains("rx-4294967295"), "{err}");
}
