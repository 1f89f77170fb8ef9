//! The veth throughput bed's command line (`steerd_testkit::lab::bed`): runs each balancer
//! `--reps` times on the same load and prints one JSON line per run (`--format json`) or a table, then the
//! medians of the ratios within each round and whether the targets hold.
//!
//! `cargo run --release --example bed -- [--reps N] [--secs S] [--rate PPS] [--flows N]
//! [--queues Q] [--rules N] [--sender-cpu C] [--balancers none,steerd,hand]
//! [--steerd PATH] [--connected-echo] [--channels-at SECS:N,...] [--format text|json]
//! [--check]`; root needed.
//! `--channels-at 6:2,12:4` runs `ethtool -L bed-rx rx 2` 6 s into each run's traffic and
//! `rx 4` at 12 s (scenario `veth-bed-channels`; the last must restore `--queues`).
//! `--connected-echo` connects the probe's echo to the prober, as an RPC server's
//! connection is, so that each run says which CPU received the probe (`probe_rx_share`);
//! the figures in docs/performance.md are without it. `--check` exits 1 when a
//! target is not met (steerd at least 1.25x none's and 0.95x hand's delivered packets,
//! probe p99 at most none's and at most 2x hand's, every run restored: `BedVerdict::met`).
//! Runs go in `--balancers`' order in odd rounds and with steerd and hand swapped in even
//! ones (`bed::round_order`). `BED_STEERD_LOG=DIR` keeps steerd's log of each round.
//! `scripts/bed.sh` builds and runs it.

use steerd_testkit::lab;

use std::path::PathBuf;
use std::time::Duration;

use lab::bed::{self, BedBalancer, BedConfig, BedRun};

const USAGE: &str = "bed [--reps N] [--secs S] [--rate PPS] [--flows N] [--queues Q] [--rules N] \
[--sender-cpu C] [--balancers none,steerd,hand] [--steerd PATH] [--connected-echo] \
[--channels-at SECS:N,...] [--format text|json] [--check]";

fn main() {
    match run() {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("bed: {e}");
            std::process::exit(2);
        }
    }
}

fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let mut config = BedConfig::default();
    let mut reps = 3;
    let mut balancers = BedBalancer::ALL.to_vec();
    let (mut json, mut check) = (false, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--reps" => reps = value()?.parse()?,
            "--secs" => config.length = Duration::from_secs(value()?.parse()?),
            "--rate" => config.rate = value()?.parse()?,
            "--flows" => config.flows = value()?.parse()?,
            "--queues" => config.queues = value()?.parse()?,
            "--rules" => config.rules = value()?.parse()?,
            "--sender-cpu" => config.sender_cpu = value()?.parse()?,
            "--steerd" => config.steerd = PathBuf::from(value()?),
            "--balancers" => {
                balancers = value()?
                    .split(',')
                    .map(|b| BedBalancer::parse(b).ok_or(format!("unknown balancer {b}")))
                    .collect::<Result<_, _>>()?
            }
            "--format" => json = value()? == "json",
            "--check" => check = true,
            "--connected-echo" => config.connected_echo = true,
            "--channels-at" => config.channel_changes = bed::ChannelChange::parse_list(&value()?)?,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(true);
            }
            other => return Err(format!("unknown argument {other}\n{USAGE}").into()),
        }
    }
    if let Some(why) = bed::unavailable(&config) {
        return Err(format!("cannot run here: {why}").into());
    }
    let mut runs = Vec::new();
    for rep in 1..=reps {
        for balancer in bed::round_order(&balancers, rep) {
            let run = bed::run(&config, balancer, rep)?;
            if json {
                println!("{}", serde_json::to_string(&run)?);
            } else {
                eprintln!("{}", row(&run));
            }
            runs.push(run);
        }
    }
    let verdict = bed::report::judge(&runs);
    print!(
        "{}",
        if json {
            String::new()
        } else {
            verdict.text.clone()
        }
    );
    if json {
        eprint!("{}", verdict.text);
    }
    Ok(!check || verdict.met)
}

fn row(r: &BedRun) -> String {
    format!(
        "rep {} {:<6} delivered {:>6.0} pkt/s (run {:>6.0}, sent {:>6.0}) drops softnet {:>6} rcvbuf {:>5} busiest si {:.2} {:?} p50/p99 {:?}/{:?} us lost {} first change {:?} s after {} restored {} masks {:?} waited for quiet {} s",
        r.rep,
        r.balancer,
        r.delivered_pps,
        r.delivered_run_pps,
        r.sent_pps,
        r.softnet_drops,
        r.rcvbuf_errors,
        r.busiest_si_share,
        r.si_share,
        r.probe_p50_us,
        r.probe_p99_us,
        r.probe_lost,
        r.first_change_s,
        r.changes_after_convergence,
        r.restored,
        r.rps_cpus,
        r.waited_for_quiet_s
    )
}
