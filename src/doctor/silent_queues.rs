//! Receive queues of a busy NIC that receive (almost) nothing (issue 31): the hash or the
//! RSS table sends the flows elsewhere, so the other queues' CPUs carry the work however
//! well the vectors are placed. Seen in the lab on igb (a per-boot random RSS key put
//! every flow on one or two of four queues) and with UDP hashed on addresses only
//! (`doctor-udp`: every flow between two hosts on one queue).
//!
//! The rule is [`crate::silent_queues`], the one `steerd top` marks queues by and the
//! daemon's notes use, with the same floor (an even share of the device's packets must be
//! measured work, the built-in `watermarks.busy_pps` x 0.1), over the rates `doctor`
//! samples (netdev qstats or `ethtool -S`, which describe the running machine: on a
//! `--root` other than `/` the check says it did not run). A note: few flows, or one elephant, leave queues silent
//! with nothing wrong on the machine.

use super::{Context, Finding, Severity};
use crate::model::inventory::NetDevice;
use crate::silent_queues::{SilentQueues, find};

/// Why the check matters, in one sentence, for its "not checked" finding.
const MATTERS: &str =
    "a queue the hash or the RSS table does not feed leaves its work to the others' CPUs.";

pub fn check(context: &Context) -> Vec<Finding> {
    if !context.root.is_host() {
        return vec![Finding {
            check: "silent_queues",
            severity: Severity::Info,
            summary: "not checked: receive queue rates of all devices".into(),
            evidence: "per-queue counters come from netdev netlink or an ethtool ioctl, which \
                       describe the running machine, not a --root tree"
                .into(),
            why: MATTERS.into(),
            fix: None,
        }];
    }
    // A failed sampling is reported once, by `softirq_share`.
    let Ok(samples) = &context.samples else {
        return Vec::new();
    };
    let floor = crate::policy::work_floor(&crate::config::Config::default());
    context
        .machine
        .inventory
        .devices
        .iter()
        .filter_map(|device| {
            let rates = samples.load.rx_queues.get(&device.name)?;
            let silent = find(rates, floor)?;
            Some(judge(device, rates, &silent, samples.seconds))
        })
        .collect()
}

/// The finding for one device's silent queues, with its rates as evidence and, where the
/// machine says how, the command that feeds them again.
fn judge(
    device: &NetDevice,
    rates: &[Option<f64>],
    silent: &SilentQueues,
    seconds: f64,
) -> Finding {
    let name = &device.name;
    let table = device.rss_table.as_deref();
    let shown: Vec<String> = rates
        .iter()
        .enumerate()
        .filter_map(|(q, rate)| Some(format!("rx-{q} {}", per_sec((*rate)?))))
        .collect();
    let mut why = silent.why(name, table);
    if !device.udp_hashed_on_addresses.is_empty() {
        why.push_str(&format!(
            "; {name} hashes {} on IP addresses only, so every flow between two hosts takes one queue",
            device.udp_hashed_on_addresses.join(" and ")
        ));
    }
    let fix = if table.is_some_and(|t| silent.left_out_of(t)) {
        Some(format!("ethtool -X {name} default"))
    } else if !device.udp_hashed_on_addresses.is_empty() {
        Some(
            device
                .udp_hashed_on_addresses
                .iter()
                .map(|family| format!("ethtool -N {name} rx-flow-hash {family} sdfn"))
                .collect::<Vec<_>>()
                .join("; "),
        )
    } else {
        None
    };
    Finding {
        check: "silent_queues",
        severity: Severity::Info,
        summary: format!(
            "{name}: {} receive under a quarter of an even share of its {} pkt/s",
            silent.names(),
            per_sec(silent.total_pps)
        ),
        evidence: format!(
            "received packets per second over {seconds:.1} s (netdev qstats or ethtool -S): {}",
            shown.join(", ")
        ),
        why: format!(
            "{why}. The other queues' CPUs carry their work, and neither an IRQ move nor RPS \
             makes a queue receive (steerd's RSS lever, rss.mode: auto, moves table entries)."
        ),
        fix,
    }
}

/// A rate as `14.2k` or `310`.
fn per_sec(pps: f64) -> String {
    if pps >= 1000.0 {
        format!("{:.1}k", pps / 1000.0)
    } else {
        format!("{pps:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{machine, not_sampled, put, run_check};
    use super::*;
    use crate::root::Root;

    /// eth0 as discovered from a fake tree, with `table` as its RSS table when given.
    fn eth0(table: Option<Vec<u32>>) -> (tempfile::TempDir, NetDevice) {
        let (dir, tree) = machine(|_| {});
        if let Some(table) = table {
            let entries: Vec<String> = table.iter().map(u32::to_string).collect();
            put(
                &tree,
                "sys/class/net/eth0/rss_indirection",
                &entries.join(" "),
            );
        }
        let machine = crate::discover::discover(&Root::new(&tree.root)).expect("discover");
        let device = machine.inventory.device("eth0").expect("eth0").clone();
        (dir, device)
    }

    fn judged(device: &NetDevice, rates: &[f64]) -> Option<Finding> {
        let rates: Vec<Option<f64>> = rates.iter().map(|&r| Some(r)).collect();
        let silent = find(&rates, 5_000.0)?;
        Some(judge(device, &rates, &silent, 1.0))
    }

    #[test]
    fn a_busy_nic_with_silent_queues_is_a_note_with_the_table_fix() {
        // `ethtool -X eth0 weight 1 1 0 0`: queues 2 and 3 have no entry.
        let (_dir, device) = eth0(Some((0..128).map(|i| i % 2).collect()));
        let f = judged(&device, &[30_000.0, 28_000.0, 40.0, 0.0]).expect("a finding");
        assert_eq!(f.severity, Severity::Info);
        assert_eq!(
            f.summary,
            "eth0: rx-2, rx-3 receive under a quarter of an even share of its 58.0k pkt/s"
        );
        assert!(
            f.evidence
                .ends_with("rx-0 30.0k, rx-1 28.0k, rx-2 40, rx-3 0"),
            "{f:?}"
        );
        assert!(f.why.contains("gives rx-2, rx-3 no entry"), "{f:?}");
        assert_eq!(f.fix.as_deref(), Some("ethtool -X eth0 default"));
    }

    #[test]
    fn udp_on_addresses_only_is_named_with_its_fix() {
        let (_dir, mut device) = eth0(Some((0..128).map(|i| i % 4).collect()));
        device.udp_hashed_on_addresses = vec!["udp4".into()];
        let f = judged(&device, &[60_000.0, 0.0, 0.0, 0.0]).expect("a finding");
        assert!(
            f.why.contains("points at them (96 of 128 entries)"),
            "{f:?}"
        );
        assert!(f.why.contains("hashes udp4 on IP addresses only"), "{f:?}");
        assert_eq!(
            f.fix.as_deref(),
            Some("ethtool -N eth0 rx-flow-hash udp4 sdfn")
        );
        device.udp_hashed_on_addresses.clear();
        assert_eq!(
            judged(&device, &[60_000.0, 0.0, 0.0, 0.0]).unwrap().fix,
            None
        );
    }

    #[test]
    fn an_even_spread_or_a_quiet_nic_is_fine_and_a_tree_is_not_checked() {
        let (_dir, device) = eth0(None);
        assert!(judged(&device, &[15_000.0; 4]).is_none());
        // An even share of 1.2k pkt/s is under the floor: too little to say.
        assert!(judged(&device, &[4_800.0, 0.0, 0.0, 0.0]).is_none());
        let (_dir, tree) = machine(|_| {});
        let f = run_check(&tree, check, not_sampled(), None);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            f[0].summary,
            "not checked: receive queue rates of all devices"
        );
    }
}
