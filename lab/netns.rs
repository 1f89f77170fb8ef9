//! The host side of the guest's NIC: a network namespace of the lab's own holding a
//! multi-queue tap with an address and a static neighbour entry for the guest. QEMU runs
//! inside it, so the traffic never leaves that namespace and the guest; dropping the
//! value removes the namespace and with it the tap.

use std::fs::File;
use std::os::fd::AsFd;

use super::{Result, io, run_cmd};

pub const HOST_ADDR: &str = "10.77.0.1";
pub const GUEST_ADDR: &str = "10.77.0.2";
pub const HOST_MAC: &str = "52:54:00:77:00:01";
pub const GUEST_MAC: &str = "52:54:00:77:00:02";
pub const TAP: &str = "tap0";

/// A namespace with the lab's tap; removed on drop.
#[derive(Debug)]
pub struct LabNetns {
    pub name: String,
}

impl LabNetns {
    /// Creates `steerd-lab-<pid>-<n>` with a multi-queue tap.
    pub fn create(n: u32) -> Result<Self> {
        let name = format!("steerd-lab-{}-{n}", std::process::id());
        run_cmd("ip", &["netns", "add", &name])?;
        let ns = LabNetns { name };
        let ip = |args: &[&str]| {
            let mut all = vec!["-n", ns.name.as_str()];
            all.extend_from_slice(args);
            run_cmd("ip", &all).map(drop)
        };
        ip(&["link", "set", "lo", "up"])?;
        ip(&["tuntap", "add", "dev", TAP, "mode", "tap", "multi_queue"])?;
        ip(&["link", "set", TAP, "address", HOST_MAC])?;
        ip(&["addr", "add", &format!("{HOST_ADDR}/24"), "dev", TAP])?;
        ip(&["link", "set", TAP, "up"])?;
        ip(&[
            "neigh",
            "replace",
            GUEST_ADDR,
            "lladdr",
            GUEST_MAC,
            "dev",
            TAP,
            "nud",
            "permanent",
        ])?;
        Ok(ns)
    }

    /// Moves the calling thread into the namespace (sockets it opens afterwards live there).
    pub fn enter_thread(&self) -> Result<()> {
        let path = format!("/run/netns/{}", self.name);
        let file = File::open(&path).map_err(io(format!("opening {path}")))?;
        nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| {
            super::LabError::Io {
                what: format!("entering {path}"),
                source: e.into(),
            }
        })
    }

    /// The tap's transmit drops (packets the guest's queues had no room for).
    pub fn tap_tx_dropped(&self) -> u64 {
        run_cmd(
            "ip",
            &[
                "netns",
                "exec",
                &self.name,
                "cat",
                &format!("/sys/class/net/{TAP}/statistics/tx_dropped"),
            ],
        )
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
    }
}

impl Drop for LabNetns {
    fn drop(&mut self) {
        if let Err(e) = run_cmd("ip", &["netns", "del", &self.name]) {
            eprintln!("lab: could not remove network namespace {}: {e}", self.name);
        }
    }
}
