//! Reads or writes a NIC's RSS indirection table with steerd's own `kernel::rss` (the code
//! `steerd inspect` reads it with, and the next slice of issue 18 will write it with):
//!
//!     rss DEV                  the state: source, rings, size, shares, the table
//!     rss DEV set E0 E1 ...    write the table (one ring per entry), then read it back
//!     rss DEV default          put the driver's default spread back
//!
//! It exists so that the write can be tried on a real table: `tests/lab.rs` runs it inside a
//! guest whose virtio-net has `rss=on`. Lines start with a word the test parses; a failed
//! request prints `error KIND NOT_SETTABLE MESSAGE` and exits 1.

use std::process::ExitCode;

use steerd::kernel::ethtool::Ethtool;
use steerd::kernel::rss::{self, RssError};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(device) = args.first() else {
        eprintln!("usage: rss DEV [set E0 E1 ... | default]");
        return ExitCode::from(2);
    };
    let ethtool = match Ethtool::new() {
        Ok(ethtool) => ethtool,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let written = match args.get(1).map(String::as_str) {
        None => Ok(()),
        Some("default") => rss::reset_indirection(&ethtool, device),
        Some("set") => {
            let table: Result<Vec<u32>, _> = args[2..].iter().map(|e| e.parse()).collect();
            match table {
                Ok(table) => rss::set_indirection(&ethtool, device, &table),
                Err(e) => {
                    eprintln!("bad entry: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        Some(other) => {
            eprintln!("unknown request {other:?}: set or default");
            return ExitCode::from(2);
        }
    };
    if let Err(error) = written {
        report(&error);
        return ExitCode::FAILURE;
    }
    match rss::read(&ethtool, device) {
        Ok(state) => {
            let shares: Vec<String> = state.shares().iter().map(|s| format!("{s:.2}")).collect();
            println!(
                "state {:?} rings {} size {} default {} hfunc {} shares {}",
                state.source,
                state.rx_rings,
                state.indirection.len(),
                state.is_default_spread(),
                state.hash_function,
                shares.join(" ")
            );
            let table: Vec<String> = state.indirection.iter().map(u32::to_string).collect();
            println!("table {}", table.join(" "));
            // The other paths, for comparison: the ioctls (GRSSH, or GRXFHINDIR), and the
            // GRXFHINDIR table alone.
            match rss::read_ioctl(&ethtool, device) {
                Ok(ioctl) => println!(
                    "ioctl {:?} same {}",
                    ioctl.source,
                    (
                        &ioctl.indirection,
                        &ioctl.key,
                        ioctl.hash_function,
                        ioctl.flow_hash
                    ) == (
                        &state.indirection,
                        &state.key,
                        state.hash_function,
                        state.flow_hash
                    )
                ),
                Err(error) => report(&error),
            }
            match rss::read_indirection_only(&ethtool, device) {
                Ok(table) => println!("indir same {}", table == state.indirection),
                Err(error) => report(&error),
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            report(&error);
            ExitCode::FAILURE
        }
    }
}

fn report(error: &RssError) {
    println!(
        "error {} {} {error}",
        error.failure_kind().label(),
        error.is_not_settable()
    );
}
