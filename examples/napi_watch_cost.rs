//! What the tick's per-NAPI threaded watch costs (`engine::napi_modes`): discovers this
//! machine as the daemon does, follows it with the watch, then asks it N times (one
//! `napi-get` dump each, as one tick does) and prints the process's CPU time per ask
//! (user + system, `CLOCK_PROCESS_CPUTIME_ID`: a netlink dump is built in the asking
//! thread's `recvmsg`, so the kernel's side is counted too) and how many NAPIs it watches.
//! On a kernel whose NAPIs report no threaded mode (before 6.17) it watches none and asks
//! nothing.
//!
//!     cargo build --release --example napi_watch_cost
//!     sudo target/release/examples/napi_watch_cost [N]     # N: 2000 unless given

use std::time::Duration;

use nix::time::{ClockId, clock_gettime};
use steerd::Root;
use steerd::engine::napi_modes::{NapiModeWatch, watched};

fn cpu_time() -> Result<Duration, nix::Error> {
    Ok(Duration::from(clock_gettime(
        ClockId::CLOCK_PROCESS_CPUTIME_ID,
    )?))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let asks: u32 = match std::env::args().nth(1) {
        Some(n) => n.parse()?,
        None => 2000,
    };
    let machine = steerd::discover::discover(&Root::new("/"))?;
    let napis = watched(&machine.inventory).len();
    let mut watch = NapiModeWatch::default();
    watch.follow(&machine.inventory, true);
    // The first ask opens the netlink socket, as the daemon's first tick does.
    let switched = watch.switched();
    let before = cpu_time()?;
    for _ in 0..asks {
        watch.switched();
    }
    let spent = cpu_time()?.saturating_sub(before);
    println!(
        "napi watch: {napis} NAPIs watched, {asks} asks, {:.1} µs of CPU per ask (a tick's), switched {:?}",
        spent.as_secs_f64() * 1e6 / f64::from(asks.max(1)),
        switched
    );
    Ok(())
}
