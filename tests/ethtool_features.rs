//! The ethtool ioctls behind doctor's `gro`, `udp_hash` and `ntuple` checks on a real
//! kernel (root only): a veth pair with 4 queues in a namespace of the test's own, GRO
//! turned off and on again with ethtool(8), and what `ETHTOOL_GFEATURES` and
//! `ETHTOOL_GRXFH` answer each time, compared with `ethtool -k` and judged by the checks.
//! The namespace (and with it both veth ends) is deleted by a Drop guard, also when an
//! assertion fails; nothing outside it is touched. And, read-only, the host's `eth0`
//! (when there is one) as ethtool(8) shows it.
//!
//! The RSS requests of `kernel::rss` too: a veth pair has no RSS table, and every path
//! (netlink `RSS_GET`, the ioctls, the table write) says so with the clear "no RSS table"
//! error; `eth0`'s table (or its absence) is what `ethtool -x` shows.

mod common;
mod netns;

use std::process::Command;

use common::suite::{Requirement, TestResult, not_here};
use steerd::doctor::{Severity, gro, ntuple, udp_hash};
use steerd::kernel::ethtool::{Ethtool, UDP_V4_FLOW};
use steerd::kernel::rss;

/// `ethtool ARGS` inside the namespace; its stdout, or a panic with its stderr.
fn ethtool_in(ns: &netns::Netns, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, "ethtool"])
        .args(args)
        .output()
        .expect("run ip netns exec ethtool");
    assert!(
        out.status.success(),
        "ethtool {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value `ethtool -k` prints for `name` ("on", "off [fixed]", ...).
fn shown(text: &str, name: &str) -> String {
    text.lines()
        .find_map(|line| line.trim().strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("{name} not in ethtool -k:\n{text}"))
        .to_string()
}

/// Reads the features in the namespace and judges them as the `gro` check would.
fn gro_in(ns: &netns::Netns, device: &'static str) -> (bool, Option<steerd::doctor::Finding>) {
    ns.spawn(None, move || {
        let ethtool = Ethtool::new().expect("socket in the namespace");
        let features = ethtool.features(device).expect("ETHTOOL_GFEATURES");
        let active = features.get("rx-gro").expect("rx-gro").active;
        (active, gro::judge(device, &features))
    })
    .join()
    .expect("namespace thread")
}

fn real_kernel_veth_gro_ntuple_and_flow_hash() -> TestResult {
    netns::require()?;
    Requirement::tool("ethtool", "apt-get install ethtool").check()?;
    let ns = netns::Netns::create("ef");
    ns.add_veth("ef-a", "ef-b", 4);
    netns::ip(&["-n", &ns.name, "link", "set", "ef-a", "up"]);
    netns::ip(&["-n", &ns.name, "link", "set", "ef-b", "up"]);

    // GRO off: the ioctl says so, as ethtool -k does, and the check finds it.
    ethtool_in(&ns, &["-K", "ef-a", "gro", "off"]);
    let shown_off = shown(&ethtool_in(&ns, &["-k", "ef-a"]), "generic-receive-offload");
    let (active, finding) = gro_in(&ns, "ef-a");
    assert!(!active && shown_off.starts_with("off"), "{shown_off}");
    let finding = finding.expect("GRO off is found");
    eprintln!("{finding:?}");
    assert_eq!(finding.severity, Severity::Warning);
    assert_eq!(finding.fix.as_deref(), Some("ethtool -K ef-a gro on"));

    // GRO on again: nothing found.
    ethtool_in(&ns, &["-K", "ef-a", "gro", "on"]);
    let shown_on = shown(&ethtool_in(&ns, &["-k", "ef-a"]), "generic-receive-offload");
    let (active, finding) = gro_in(&ns, "ef-a");
    assert!(active && shown_on.starts_with("on"), "{shown_on}");
    assert_eq!(finding, None);

    // ntuple as ethtool -k shows it (veth: "off [fixed]"), and nothing for aRFS to use;
    // the flow hash refused with EOPNOTSUPP (veth has no RSS).
    let ntuple_shown = shown(&ethtool_in(&ns, &["-k", "ef-a"]), "ntuple-filters");
    let (state, hash) = ns
        .spawn(None, || {
            let ethtool = Ethtool::new().expect("socket in the namespace");
            let features = ethtool.features("ef-a").expect("ETHTOOL_GFEATURES");
            let state = features.get("rx-ntuple-filter").expect("rx-ntuple-filter");
            let rfs = ntuple::RfsTables {
                sock_flow_entries: Some(0),
                queues: 4,
                queues_with_table: 0,
            };
            assert_eq!(ntuple::judge("ef-a", &features, &rfs), None);
            let hash = ethtool
                .rx_flow_hash("ef-a", UDP_V4_FLOW)
                .map_err(|e| e.to_string());
            (state, hash)
        })
        .join()
        .expect("namespace thread");
    eprintln!("ntuple-filters: {ntuple_shown}; {state:?}; udp4 hash: {hash:?}");
    assert_eq!(ntuple_shown.starts_with("on"), state.active);
    assert_eq!(ntuple_shown.contains("[fixed]"), state.fixed());
    match hash {
        Err(error) => assert!(
            error.contains("ETHTOOL_GRXFH on ef-a") && error.contains("EOPNOTSUPP"),
            "{error}"
        ),
        // A kernel whose veth reports hash fields: then they must judge cleanly.
        Ok(fields) => {
            let hash = udp_hash::UdpHash {
                udp4: fields,
                udp6: None,
            };
            let _ = udp_hash::judge("ef-a", 4, &hash);
        }
    }
    Ok(())
}

/// The host's eth0, read only: GRO, GRO-HW and ntuple as `ethtool -k eth0` prints them,
/// and the udp4 hash fields as `ethtool -n eth0 rx-flow-hash udp4` lists them.
fn real_kernel_eth0_reads_as_ethtool_shows() -> TestResult {
    netns::require()?;
    Requirement::tool("ethtool", "apt-get install ethtool").check()?;
    if !std::path::Path::new("/sys/class/net/eth0").exists() {
        return not_here("no eth0 on this machine");
    }
    let run = |args: &[&str]| {
        let out = Command::new("ethtool")
            .args(args)
            .output()
            .expect("ethtool");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let ethtool = Ethtool::new().expect("socket");
    let features = ethtool.features("eth0").expect("ETHTOOL_GFEATURES on eth0");
    let (_, k) = run(&["-k", "eth0"]);
    for (ours, theirs) in [
        ("rx-gro", "generic-receive-offload"),
        ("rx-gro-hw", "rx-gro-hw"),
        ("rx-ntuple-filter", "ntuple-filters"),
    ] {
        let state = features.get(ours).expect(ours);
        let printed = shown(&k, theirs);
        eprintln!("eth0 {ours}: {state:?}; ethtool -k: {theirs}: {printed}");
        assert_eq!(printed.starts_with("on"), state.active, "{ours}");
        assert_eq!(printed.contains("[fixed]"), state.fixed(), "{ours}");
    }
    let (ok, n) = run(&["-n", "eth0", "rx-flow-hash", "udp4"]);
    match ethtool.rx_flow_hash("eth0", UDP_V4_FLOW) {
        Ok(hash) => {
            assert!(ok, "ethtool -n failed where the ioctl answered");
            let listed: Vec<&str> = n
                .lines()
                .skip(1)
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .collect();
            eprintln!(
                "eth0 udp4: {hash:?} = {}; ethtool -n: {listed:?}",
                hash.describe()
            );
            assert_eq!(hash.describe(), listed.join(", "));
        }
        Err(error) => {
            eprintln!("eth0 udp4: {error}");
            assert!(!ok, "ethtool -n answered where the ioctl failed: {n}");
        }
    }
    Ok(())
}

/// A veth pair (in a namespace of the test's own) has no RSS table: reading it by netlink
/// and by ioctl, and writing one, all end in the clear "no RSS table" or "not settable"
/// error, never a generic failure; a device that does not exist is "vanished".
fn real_kernel_veth_has_no_rss_table() -> TestResult {
    netns::require()?;
    let ns = netns::Netns::create("rss");
    ns.add_veth("rss-a", "rss-b", 4);
    netns::ip(&["-n", &ns.name, "link", "set", "rss-a", "up"]);
    let errors = ns
        .spawn(None, || {
            let ethtool = Ethtool::new().expect("socket in the namespace");
            [
                rss::read(&ethtool, "rss-a"),
                rss::read_ioctl(&ethtool, "rss-a"),
            ]
            .map(|r| r.expect_err("veth has no RSS table"))
            .into_iter()
            .chain([rss::set_indirection(&ethtool, "rss-a", &[0, 1, 2, 3]).unwrap_err()])
            .chain([rss::read(&ethtool, "no-such-dev0").unwrap_err()])
            .collect::<Vec<_>>()
        })
        .join()
        .expect("namespace thread");
    for error in &errors {
        eprintln!("{error}");
    }
    for error in &errors[..3] {
        assert!(error.is_not_settable(), "{error}");
        assert!(
            error.to_string().starts_with("rss-a: no RSS table"),
            "{error}"
        );
    }
    assert!(
        matches!(errors[3], rss::RssError::Vanished { .. }),
        "{}",
        errors[3]
    );
    Ok(())
}

/// The host's `eth0`, read only: a table where `ethtool -x eth0` prints one (the same
/// entries), "no RSS table" where it prints "Operation not supported"; and the netlink
/// and ioctl paths agree.
fn real_kernel_eth0_rss_reads_as_ethtool_shows() -> TestResult {
    netns::require()?;
    Requirement::tool("ethtool", "apt-get install ethtool").check()?;
    if !std::path::Path::new("/sys/class/net/eth0").exists() {
        return not_here("no eth0 on this machine");
    }
    let out = Command::new("ethtool")
        .args(["-x", "eth0"])
        .output()
        .expect("ethtool -x");
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    let ethtool = Ethtool::new().expect("socket");
    let by_netlink = rss::read(&ethtool, "eth0");
    let by_ioctl = rss::read_ioctl(&ethtool, "eth0");
    eprintln!("ethtool -x eth0:\n{shown}\nsteerd: {by_netlink:?}\nioctl: {by_ioctl:?}");
    // `ethtool -x` prints entries as "  0:      0     1     0     1 ..." rows, then the key
    // (whose "81:2c:..." must not be read as a row).
    let entries: Vec<u32> = shown
        .lines()
        .take_while(|line| !line.starts_with("RSS hash key"))
        .filter_map(|line| line.trim().split_once(':'))
        .filter(|(index, _)| index.chars().all(|c| c.is_ascii_digit()) && !index.is_empty())
        .flat_map(|(_, rest)| rest.split_whitespace().map(|v| v.parse::<u32>().unwrap()))
        .collect();
    match (&by_netlink, &by_ioctl) {
        (Ok(netlink), Ok(ioctl)) => {
            assert_eq!(netlink.indirection, entries);
            assert_eq!(netlink.indirection, ioctl.indirection);
            assert_eq!(netlink.key, ioctl.key);
            assert_eq!(netlink.hash_function, ioctl.hash_function);
            assert_eq!(netlink.flow_hash, ioctl.flow_hash);
        }
        (Err(netlink), Err(ioctl)) => {
            assert!(entries.is_empty(), "ethtool -x shows a table: {shown}");
            assert!(netlink.is_not_settable(), "{netlink}");
            assert!(ioctl.is_not_settable(), "{ioctl}");
        }
        _ => panic!("the paths disagree: {by_netlink:?} / {by_ioctl:?}"),
    }
    Ok(())
}

suite_main!(
    real_kernel_veth_gro_ntuple_and_flow_hash,
    real_kernel_eth0_reads_as_ethtool_shows,
    real_kernel_veth_has_no_rss_table,
    real_kernel_eth0_rss_reads_as_ethtool_shows,
);
