//! Each transmit queue's qdisc requeues, read from `tc -s qdisc show dev eth0` as the guest
//! prints it at the start and the end of a run (`TCB`/`TCE`, guest-init.sh's `tx_qdiscs`).
//! A requeue is a packet the queue's qdisc dequeued and had to put back because the
//! driver's queue was stopped (its ring full): the transmit side's back-pressure, which the
//! per-queue packet counts (`TXB`/`TXE`) do not show. The guest prints tc's own lines so the
//! format is read here, where a real sample tests it, rather than in busybox awk.

use std::collections::BTreeMap;

use super::parse::run_delta;

/// One qdisc of a dump: its kind, where it hangs and the requeues its statistics give.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Qdisc {
    kind: String,
    /// `None` for the root; else the parent class as (major, minor).
    parent: Option<(u32, u32)>,
    /// The handle's major (`8001:` -> 0x8001, `0:` -> 0).
    major: u32,
    requeues: Option<u64>,
}

/// The qdiscs of one dump, in its order. A qdisc is a `qdisc KIND HANDLE root|parent ID ...`
/// line followed by its statistics, whose first `requeues R` (on the `Sent` line) is its
/// own; the `backlog` line repeats it.
fn qdiscs(lines: &[String]) -> Vec<Qdisc> {
    let mut out: Vec<Qdisc> = Vec::new();
    // Whether the statistics lines that follow are the last qdisc's (not those of a
    // `qdisc` line that did not read).
    let mut open = false;
    for line in lines {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.first() == Some(&"qdisc") {
            let qdisc = qdisc_line(&f);
            open = qdisc.is_some();
            out.extend(qdisc);
            continue;
        }
        let Some(last) = out.last_mut().filter(|q| open && q.requeues.is_none()) else {
            continue;
        };
        last.requeues = f
            .iter()
            .position(|w| *w == "requeues")
            .and_then(|i| f.get(i + 1))
            .and_then(|v| v.trim_end_matches(')').parse().ok());
    }
    out
}

/// A `qdisc KIND HANDLE root ...` or `qdisc KIND HANDLE parent ID ...` line's fields.
fn qdisc_line(f: &[&str]) -> Option<Qdisc> {
    let parent = match *f.get(3)? {
        "root" => None,
        "parent" => Some(class_id(f.get(4)?)?),
        _ => return None,
    };
    Some(Qdisc {
        kind: f.get(1)?.to_string(),
        parent,
        major: class_id(f.get(2)?)?.0,
        requeues: None,
    })
}

/// A handle or class id as tc prints it, hex `MAJOR:MINOR` (either may be empty: 0).
fn class_id(id: &str) -> Option<(u32, u32)> {
    let (major, minor) = id.split_once(':')?;
    let hex = |v: &str| {
        if v.is_empty() {
            Some(0)
        } else {
            u32::from_str_radix(v, 16).ok()
        }
    };
    Some((hex(major)?, hex(minor)?))
}

/// Requeues by transmit queue from one dump (its lines without the tag). A multi-queue
/// device's queue N has the root `mq`'s class N+1 as its qdisc's parent (`parent 8001:1`
/// for queue 0, or `parent :1` under the default mq the kernel attaches); a single-queue
/// device's root qdisc is queue 0's (not `noqueue`, which queues nothing). Qdiscs below
/// those (under a class of another qdisc) and the mq's own totals are left out.
pub(super) fn requeues(lines: &[String]) -> BTreeMap<u32, u64> {
    let all = qdiscs(lines);
    let root = all.iter().find(|q| q.parent.is_none());
    let mq = root.filter(|q| q.kind == "mq").map(|q| q.major);
    all.iter()
        .filter_map(|q| {
            let queue = match (q.parent, mq) {
                (Some((major, minor)), Some(mq)) if major == mq => minor.checked_sub(1)?,
                (None, None) if q.kind != "noqueue" => 0,
                _ => return None,
            };
            Some((queue, q.requeues?))
        })
        .collect()
}

/// Requeues each transmit queue counted between the `start` and `end` dumps, in queue
/// order; empty when either dump has none (tc failed: no figure rather than the count
/// since boot).
pub(super) fn run_requeues(start: &[String], end: &[String]) -> Vec<u64> {
    let (start, end) = (requeues(start), requeues(end));
    if start.is_empty() || end.is_empty() {
        return Vec::new();
    }
    run_delta(&start, &end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(String::from).collect()
    }

    /// `tc -s qdisc show dev va` (iproute2 6.1) on a 4-queue veth with `tc qdisc add dev
    /// va root handle 10: mq`, as printed, with distinct requeues written in (a veth never
    /// requeues): the children are listed last queue first, and each qdisc's statistics
    /// repeat its requeues on the backlog line.
    const VETH_MQ: &str = "\
qdisc mq 10: root 
 Sent 90 bytes 1 pkt (dropped 0, overlimits 0 requeues 10) 
 backlog 0b 0p requeues 10
qdisc pfifo_fast 0: parent 10:4 bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 4) 
 backlog 0b 0p requeues 4
qdisc pfifo_fast 0: parent 10:3 bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1
 Sent 90 bytes 1 pkt (dropped 0, overlimits 0 requeues 3) 
 backlog 0b 0p requeues 3
qdisc pfifo_fast 0: parent 10:2 bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 2) 
 backlog 0b 0p requeues 2
qdisc pfifo_fast 0: parent 10:1 bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 1) 
 backlog 0b 0p requeues 1
";

    #[test]
    fn each_mq_child_is_its_queue_and_the_mq_totals_are_left_out() {
        let by_queue = requeues(&lines(VETH_MQ));
        assert_eq!(by_queue, BTreeMap::from([(0, 1), (1, 2), (2, 3), (3, 4)]));
    }

    /// The guest's own dump at the end of an `xps-tcp` run with steerd (6.1 cloud,
    /// virtio-net, 2026-11-30; the `TCE` lines without their tag): the default `mq 0:` with
    /// an fq_codel child per queue, listed last queue first. Its `Sent`
    /// packets, 3711, 3320, 3186 and 2769 for `:1` to `:4`, are the run's `ethtool -S`
    /// `tx_queue_N_packets` for queues 0 to 3: the mapping holds.
    #[test]
    fn the_guests_real_dump_gives_four_queues() {
        let dump = lines(include_str!("xps-tcp-steerd-end.tc"));
        assert_eq!(
            requeues(&dump),
            BTreeMap::from([(0, 0), (1, 0), (2, 0), (3, 0)])
        );
        assert_eq!(qdiscs(&dump).len(), 5);
    }

    /// The default qdiscs the kernel attaches (`mq 0:`, children `parent :N`, here
    /// fq_codel with its two extra statistics lines), queues past 9 in hex, a qdisc under
    /// another's class (not a queue's) and the ingress qdisc.
    #[test]
    fn default_mq_children_hex_queues_and_other_qdiscs() {
        let dump = "\
qdisc mq 0: root 
 Sent 5000 bytes 50 pkt (dropped 0, overlimits 0 requeues 7) 
 backlog 0b 0p requeues 7
qdisc fq_codel 0: parent :b limit 10240p flows 1024 quantum 1514 target 5ms interval 100ms memory_limit 32Mb ecn drop_batch 64 
 Sent 1000 bytes 10 pkt (dropped 0, overlimits 0 requeues 5) 
 backlog 0b 0p requeues 5
  maxpacket 0 drop_overlimit 0 new_flow_count 0 ecn_mark 0
  new_flows_len 0 old_flows_len 0
qdisc fq_codel 0: parent :1 limit 10240p flows 1024 quantum 1514 target 5ms interval 100ms memory_limit 32Mb ecn drop_batch 64 
 Sent 4000 bytes 40 pkt (dropped 0, overlimits 0 requeues 2) 
 backlog 0b 0p requeues 2
  maxpacket 0 drop_overlimit 0 new_flow_count 0 ecn_mark 0
  new_flows_len 0 old_flows_len 0
qdisc pfifo 20: parent 30:1 limit 1000p
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 99) 
 backlog 0b 0p requeues 99
qdisc ingress ffff: parent ffff:fff1 ---------------- 
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 98) 
 backlog 0b 0p requeues 98
";
        assert_eq!(requeues(&lines(dump)), BTreeMap::from([(0, 2), (10, 5)]));
    }

    /// A single-queue device's root qdisc is queue 0's; `noqueue` (`tc -s qdisc show dev
    /// lo`, as printed) queues nothing.
    #[test]
    fn a_single_root_qdisc_is_queue_0_and_noqueue_is_none() {
        let single = "\
qdisc pfifo_fast 0: root refcnt 2 bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1
 Sent 60 bytes 1 pkt (dropped 0, overlimits 0 requeues 6) 
 backlog 0b 0p requeues 6
";
        assert_eq!(requeues(&lines(single)), BTreeMap::from([(0, 6)]));
        let lo = "\
qdisc noqueue 0: root refcnt 2 
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
";
        assert!(requeues(&lines(lo)).is_empty());
    }

    #[test]
    fn a_run_counts_each_queues_requeues_from_start_to_end() {
        let start = lines(VETH_MQ);
        let end: Vec<String> = start
            .iter()
            .map(|l| l.replace("requeues 3", "requeues 33"))
            .collect();
        assert_eq!(run_requeues(&start, &end), vec![0, 0, 30, 0]);
        // tc failed at one end: no figure, not the count since boot.
        assert!(run_requeues(&[], &end).is_empty());
        assert!(run_requeues(&start, &[]).is_empty());
    }
}
