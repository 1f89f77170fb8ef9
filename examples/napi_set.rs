//! Switches the threaded mode of the NAPI that serves one receive queue, with steerd's own
//! netdev netlink client (`napi-set`, Linux 6.17; mode `2`, busy-polling, 6.19):
//!
//!     napi_set DEV QUEUE MODE      0 off, 1 threaded, 2 busy-polling
//!
//! It exists for the lab's `busy-poll` scenario (`steerd_testkit::lab::busy_poll`): the
//! guest has no `ynl`, and `sys/class/net/DEV/threaded` refuses `2`. Prints `napi ID
//! threaded MODE` once set; a failure is said on stderr with exit status 1.

use std::process::ExitCode;

use steerd::kernel::netlink::NetdevClient;
use steerd::model::snapshot::QueueDirection;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [device, queue, mode] = &args[..] else {
        eprintln!("usage: napi_set DEV QUEUE MODE");
        return ExitCode::from(2);
    };
    let (Ok(queue), Ok(mode)) = (queue.parse::<u32>(), mode.parse::<u32>()) else {
        eprintln!("QUEUE and MODE are numbers");
        return ExitCode::from(2);
    };
    match set(device, queue, mode) {
        Ok(id) => {
            println!("napi {id} threaded {mode}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("napi_set {device} {queue} {mode}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn set(device: &str, queue: u32, mode: u32) -> Result<u32, Box<dyn std::error::Error>> {
    let ifindex: u32 = std::fs::read_to_string(format!("/sys/class/net/{device}/ifindex"))?
        .trim()
        .parse()?;
    let mut client = NetdevClient::connect()?.ok_or("this kernel has no netdev netlink family")?;
    let id = client
        .queues(Some(ifindex))?
        .into_iter()
        .find(|q| q.id == queue && q.direction == QueueDirection::Rx)
        .and_then(|q| q.napi_id)
        .ok_or_else(|| format!("{device} rx-{queue} has no NAPI id"))?;
    client.set_napi_threaded(id, mode)?;
    Ok(id)
}
