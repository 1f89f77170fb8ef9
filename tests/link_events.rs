//! A link added inside a test namespace wakes the link-event socket (root only).

mod netns;

use std::time::Duration;

use steerd::kernel::link_events::LinkEvents;

#[test]
fn a_new_link_is_an_event() {
    if let Some(why) = netns::skip_reason() {
        eprintln!("skipping: {why}");
        return;
    }
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
}
