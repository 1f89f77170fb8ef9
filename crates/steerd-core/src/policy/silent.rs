//! Says which receive queues of a busy device receive (almost) nothing, and why as far as
//! the RSS table tells: no entry of the table points at them (someone's `ethtool -X`, or a
//! table left from fewer channels), or the table does and the flows' hash misses them
//! (few flows, or a hash key that puts them elsewhere). A note, never an action: neither an
//! IRQ move nor RPS makes a queue receive, and the RSS lever (when on) is what moves table
//! entries. The rule is [`crate::silent_queues`]; logged once per set of queues.

use super::context::Planner;
use super::plan::NoteKind;
use crate::silent_queues;

/// The key a device's note is reported under, once per set of silent queues.
pub fn note_key(device: &str, silent: &silent_queues::SilentQueues) -> String {
    format!("{device} silent {}", silent.names())
}

pub fn notice(p: &mut Planner) {
    let floor = p.work_floor();
    let mut found = Vec::new();
    for d in 0..p.devices.len() {
        let name = &p.devices[d].dev.name;
        let Some(rates) = p.load.rx_queues.get(name) else {
            continue;
        };
        let Some(silent) = silent_queues::find(rates, floor) else {
            continue;
        };
        let why = silent.why(name, p.placement.rss_tables.get(name).map(Vec::as_slice));
        found.push((
            note_key(name, &silent),
            format!(
                "{name}: {} receive under a quarter of an even share of its {:.0}k pkt/s: {why}; \
                 an IRQ move or RPS cannot make a queue receive",
                silent.names(),
                silent.total_pps / 1000.0
            ),
        ));
    }
    for (key, text) in found {
        p.note(NoteKind::SilentQueues, None, key, text);
    }
}
