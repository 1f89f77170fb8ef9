//! A fake machine whose load keeps changing, so that a `steerd run --root DIR` on it keeps
//! deciding and its decision log fills past its capacity. `scripts/decision-memory.sh`
//! runs it beside each steerd it measures:
//!
//! ```text
//! cargo build --release --example decision_churn
//! target/release/examples/decision_churn DIR [PHASE_MS]
//! ```
//!
//! It writes the tree to `DIR` (which must not exist yet: 8 cores × 2 threads, eth0 with
//! 8 queues and eth1 with one, every queue IRQ on CPU 0 as irqbalance's power-save packing
//! leaves them), prints `ready` on stdout, and then plays the kernel for it (the fake kernel
//! `steerd_testkit::fake_kernel`), switching the load every `PHASE_MS` (default 2000)
//! between every queue busy and idle. With a short interval and short hysteresis (the
//! script's configuration) steerd turns RPS and RFS on and off for each queue in each
//! round: about 36 decisions per round. It runs until killed; the caller removes `DIR`.

use steerd_testkit::fake_kernel as kernel;

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use kernel::{FakeKernel, QueueLoad};
use steerd::fakeroot::{FakeMachine, FakeNic};

const ETH0_QUEUES: u32 = 8;

fn load(device: &str, queue: u32, pps: f64) -> QueueLoad {
    QueueLoad {
        device: device.into(),
        queue,
        pps,
    }
}

/// The load of phase `phase`: every queue at 400k pkt/s (each queue's CPU at about 0.8
/// irq+softirq share, hot, and one queue per core, so only RPS can relieve them: RPS and
/// RFS go on for each queue), then idle (they go off again once calm).
fn loads(phase: u64) -> Vec<QueueLoad> {
    if phase % 2 == 1 {
        return Vec::new();
    }
    let mut all: Vec<QueueLoad> = (0..ETH0_QUEUES)
        .map(|q| load("eth0", q, 400_000.0))
        .collect();
    all.push(load("eth1", 0, 400_000.0));
    all
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1);
    let Some(dir) = args.next().map(PathBuf::from) else {
        eprintln!("usage: decision_churn DIR [PHASE_MS]");
        std::process::exit(2);
    };
    let phase_ms: u64 = match args.next() {
        Some(text) => text
            .to_str()
            .and_then(|t| t.parse().ok())
            .ok_or("PHASE_MS must be a number of milliseconds")?,
        None => 2000,
    };
    if dir.exists() {
        return Err(format!("{} exists; give a new directory", dir.display()).into());
    }
    let mut machine = FakeMachine::new(8);
    machine.threads_per_core = 2;
    for (name, queues) in [("eth0", ETH0_QUEUES), ("eth1", 1)] {
        machine.nics.push(FakeNic {
            name: name.into(),
            driver: "ixgbe".into(),
            node: Some(0),
            queues,
        });
    }
    let tree = machine.write(&dir)?;
    for irq in tree.queue_irqs.iter().flatten() {
        std::fs::write(dir.join(format!("proc/irq/{irq}/smp_affinity_list")), "0\n")?;
    }
    let kernel = FakeKernel::start(tree, loads(0));
    println!("ready");
    std::io::stdout().flush()?;
    for step in 1u64.. {
        std::thread::sleep(Duration::from_millis(phase_ms));
        kernel.set_loads(loads(step));
    }
    Ok(())
}
