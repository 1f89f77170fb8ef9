//! The floor under steerd's idle cost: a loop that does only what an idle steerd tick
//! must do at the kernel interface — wake once a second from `epoll_wait`, `pread`
//! `/proc/net/softnet_stat`, and `/proc/stat` every fifth second — and nothing else (no
//! parsing, no load model, no metrics). `scripts/ab-idle.sh` runs it beside steerd to show
//! how much of steerd's idle CPU time is steerd's own code:
//!
//! ```text
//! cargo build --release --example idle_floor
//! sudo scripts/ab-idle.sh target/release/steerd target/release/examples/idle_floor 20 10
//! ```
//!
//! It ignores its arguments (the script passes steerd's) and runs until killed. With
//! `IDLE_FLOOR_READS=0` in its environment it reads nothing: the cost of the wake-up alone.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollTimeout};

fn main() -> std::io::Result<()> {
    let softnet = File::open("/proc/net/softnet_stat")?;
    let stat = File::open("/proc/stat")?;
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
    let mut buffer = vec![0u8; 16384];
    let reads = std::env::var_os("IDLE_FLOOR_READS").is_none_or(|v| v != "0");
    let mut next = Instant::now();
    for tick in 0u64.. {
        if reads {
            if tick % 5 == 0 {
                stat.read_at(&mut buffer, 0)?;
            }
            softnet.read_at(&mut buffer, 0)?;
        }
        next += Duration::from_secs(1);
        let millis = next
            .saturating_duration_since(Instant::now())
            .as_nanos()
            .div_ceil(1_000_000);
        let timeout = EpollTimeout::try_from(millis as u64).unwrap_or(EpollTimeout::NONE);
        let mut events = [EpollEvent::empty(); 1];
        let _ = epoll.wait(&mut events, timeout);
    }
    Ok(())
}
