//! A link added inside a test namespace wakes the link-event socket (root only).

mod common;
mod netns;

use std::time::Duration;

use common::suite::TestResult;
use steerd::kernel::link_events::LinkEvents;

fn a_new_link_is_an_event() -> TestResult {
    netns::require()?;
    let ns = netns::Netns::create("links");
    let name = ns.name.clone();
    let counted = ns
        .spawn(None, move || {
            let mut events = LinkEvents::subscribe().expect("subscribe");
            assert_eq!(events.drain().expect("drain"), 0, "quiet before any change");
            netns::ip(&[
                "-n", &name, "link", "add", "steerd-a", "type", "veth", "peer", "name", "steerd-b",
            ]);
            std::thread::sleep(Duration::from_millis(100));
            events.drain().expect("drain")
        })
        .join()
        .expect("thread");
    assert!(counted > 0, "no link event seen");
    Ok(())
}

suite_main!(a_new_link_is_an_event,);
