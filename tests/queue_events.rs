//! A channel-count change on a veth inside a test namespace wakes the queue-event (kobject
//! uevent) socket and the ethtool `monitor` socket, and sends no rtnetlink link event (root
//! only; needs `ethtool`).

mod common;
mod netns;

use std::process::Command;
use std::time::Duration;

use common::suite::{Requirement, TestResult};

use steerd::kernel::ethtool_events::EthtoolEvents;
use steerd::kernel::link_events::LinkEvents;
use steerd::kernel::queue_events::QueueEvents;

fn ethtool(args: &[&str]) {
    let out = Command::new("ethtool")
        .args(args)
        .output()
        .expect("run ethtool");
    assert!(
        out.status.success(),
        "ethtool {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn a_channel_count_change_is_a_queue_event_not_a_link_event() -> TestResult {
    netns::require()?;
    Requirement::tool("ethtool", "apt-get install ethtool").check()?;
    let ns = netns::Netns::create("queues");
    ns.add_veth("steerd-a", "steerd-b", 4);
    let (queue_events, link_events) = ns
        .spawn(None, move || {
            let mut queues = QueueEvents::subscribe().expect("subscribe to uevents");
            let mut links = LinkEvents::subscribe().expect("subscribe to link events");
            assert_eq!(queues.drain().expect("drain"), 0, "quiet before any change");
            // This thread is in the namespace: ethtool sees its devices.
            ethtool(&["-L", "steerd-a", "rx", "2", "tx", "2"]);
            ethtool(&["-L", "steerd-a", "rx", "4", "tx", "4"]);
            std::thread::sleep(Duration::from_millis(200));
            (
                queues.drain().expect("drain"),
                links.drain().expect("drain"),
            )
        })
        .join()
        .expect("thread");
    // rx-2, rx-3, tx-2, tx-3 removed, then added again.
    assert_eq!(queue_events, 8, "queue uevents");
    assert_eq!(
        link_events, 0,
        "a link event: the uevent socket would not be needed"
    );
    Ok(())
}

/// The ethtool `monitor` group hears the same change as one channels notification per
/// `ethtool -L`, and nothing when nothing changed.
fn a_channel_count_change_is_an_ethtool_notification() -> TestResult {
    netns::require()?;
    Requirement::tool("ethtool", "apt-get install ethtool").check()?;
    let ns = netns::Netns::create("ethntf");
    ns.add_veth("steerd-a", "steerd-b", 4);
    let (quiet, heard) = ns
        .spawn(None, move || {
            let mut events = EthtoolEvents::subscribe()
                .expect("subscribe to ethtool notifications")
                .expect("this kernel has ethtool netlink and its monitor group");
            let quiet = events.drain().expect("drain");
            ethtool(&["-L", "steerd-a", "rx", "2", "tx", "2"]);
            ethtool(&["-L", "steerd-a", "rx", "4", "tx", "4"]);
            std::thread::sleep(Duration::from_millis(200));
            (quiet, events.drain().expect("drain"))
        })
        .join()
        .expect("thread");
    assert!(!quiet.any(), "nothing changed yet: {quiet:?}");
    assert_eq!(heard.channels, 2, "{heard:?}");
    assert_eq!(heard.rss, 0, "{heard:?}");
    Ok(())
}

suite_main!(
    a_channel_count_change_is_a_queue_event_not_a_link_event,
    a_channel_count_change_is_an_ethtool_notification
);
