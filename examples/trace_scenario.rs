//! Prints one scenario's run tick by tick (changes, hottest CPU, drops), for debugging
//! the policy: `cargo run --release --example trace_scenario -- 6 [ticks]`.

use steerd::sim::{Steerd, run, scenarios};

fn main() {
    let mut args = std::env::args().skip(1);
    let id: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let limit: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(40);
    let Some(scenario) = scenarios::all()
        .into_iter()
        .chain(scenarios::rss())
        .find(|s| s.id == id)
    else {
        eprintln!("no scenario {id}");
        return;
    };
    let mut steerd = Steerd::new(scenario.config.clone());
    let result = run(&scenario, &mut steerd);
    for t in result.ticks.iter().take(limit as usize) {
        println!(
            "tick {:>3}: hottest CPU {:>3} {:.2}, mean {:.2}, dropped {:>9.0}, goal {}",
            t.tick, t.hottest.0, t.hottest.1, t.mean_loaded, t.dropped, t.goal
        );
        for c in &t.changes {
            println!(
                "    {} {} -> {} [{}]{}",
                c.target,
                c.old,
                c.new,
                c.reason,
                if c.accepted { "" } else { " REFUSED" }
            );
        }
        for n in t.notes.iter().filter(|n| n.new) {
            println!("    note: {}", n.text);
        }
    }
}
