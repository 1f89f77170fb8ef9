//! The real-NIC lab: boots a real Linux guest under QEMU with a multi-queue virtio-net
//! NIC (real MSI-X vectors, the real `/proc/irq` semantics), feeds it UDP and TCP flows
//! from a multi-queue tap in a network namespace of its own, and runs each scenario with
//! steerd, with the distribution's irqbalance, with a static hand placement and with no
//! balancer, on the same traffic. Fake trees and the simulator cannot show how a real
//! kernel reports and moves vectors (stale effective affinities, separate rx and tx
//! vectors, hot-unplug, channel changes); this can.
//!
//! Used by `examples/lab.rs` (the full table in `docs/lab.md`, `scripts/lab.sh`) and by
//! `tests/lab.rs` (a short subset under `cargo test`), and the soak (`soak`, `soak_report`:
//! steerd for an hour under changing traffic and reloads, `scripts/soak.sh`). Nothing here touches the host's
//! IRQs: every value a balancer changes is the guest's.

// The veth bed shares this module's helpers; examples/lab.rs does not run it.
#[allow(dead_code)]
pub mod bed;
pub mod busy_poll;
pub mod doctor;
pub mod faults;
pub mod guest_clock;
pub mod image;
pub mod isolation;
pub mod json;
pub mod napi_switch;
pub mod netns;
pub mod platform;
pub mod queue_stall;
pub mod report;
pub mod rss;
pub mod rss_notify;
pub mod run;
pub mod saturation;
pub mod scenario;
pub mod second_balancer;
pub mod soak;
pub mod soak_report;
pub mod traffic;
pub mod tuned;
pub mod vm;
pub mod xps;

use std::path::PathBuf;

/// What went wrong in the lab, with what to do about it where there is something to do.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("{0} not found: {1}")]
    Missing(String, String),
    #[error("guest: {0}")]
    Guest(String),
}

pub type Result<T> = std::result::Result<T, LabError>;

/// Wraps an I/O error with what was being done.
pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LabError {
    let what = what.into();
    move |source| LabError::Io { what, source }
}

/// Runs a command to completion; an error carries its stderr.
pub fn run_cmd(program: &str, args: &[&str]) -> Result<String> {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .map_err(io(format!("running {program}")))?;
    if !out.status.success() {
        return Err(LabError::Command {
            command: format!("{program} {}", args.join(" ")),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The first of `names` found on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Why the lab cannot run on this machine, or `None` when it can.
pub fn unavailable() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("needs root (network namespaces, a tap device)".into());
    }
    for tool in [
        "qemu-system-x86_64",
        "busybox",
        "cpio",
        "ip",
        "irqbalance",
        "ethtool",
        "strace",
        "tc",
    ] {
        if which(tool).is_none() {
            return Some(format!(
                "{tool} not found (apt-get install qemu-system-x86 busybox-static cpio iproute2 irqbalance ethtool strace)"
            ));
        }
    }
    if let Err(e) = image::GuestKernel::find() {
        return Some(e.to_string());
    }
    None
}
