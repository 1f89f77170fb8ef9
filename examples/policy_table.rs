//! Prints the side-by-side table of steerd and an irqbalance-like baseline on every
//! simulated scenario (the RSS lever's with steerd under `rss.mode: auto` and `off`), as
//! shown in docs/policy.md:
//!
//!     cargo run --release --example policy_table
//!
//! The simulator is seeded: the table is the same on every machine (decision times,
//! printed after it, are measured and are not).

use steerd::sim::table;

fn main() {
    let comparisons = table::compare_all();
    print!("{}", table::markdown(&comparisons));
    println!();
    for c in &comparisons {
        // For an RSS scenario, the run with every lever on.
        let (mean, max) = c.rss_auto.as_ref().unwrap_or(&c.steerd).decide_time();
        println!(
            "scenario {:>2}: steerd decide() mean {:>7.1} µs, max {:>7.1} µs per tick",
            c.scenario.id,
            mean as f64 / 1e3,
            max as f64 / 1e3
        );
    }
}
