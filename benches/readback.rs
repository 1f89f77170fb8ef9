//! What the daemon's read-back of its own writes costs (`daemon::RECHECK_EVERY`, every
//! 10 s since 2026-11-28, when it was every 30 s): one `Actuator::read` of every value
//! steerd has changed, which is how it notices a value another tool rewrote that no link
//! event announces (tuned, a second balancer: docs/operations.md).
//!
//! Measured on a fake tree of a writing daemon's worst ordinary case: one NIC of 64
//! queues on 64 CPUs, with every queue's vector affinity, RPS mask and RFS flow count
//! written (192 values). The tree lives in a temporary directory, so a read is the open,
//! read and close of a small file and its parse, not the kernel's `show` of a sysfs or
//! procfs attribute (which formats a bitmap or a number: the same order of work). Prints
//! the median of 200 passes, and that cost spread over the 10-s interval.
//!
//! Self-timed rather than criterion: the figure wanted is one pass's median and its share
//! of a second, printed as a line the docs quote (docs/performance.md).

use std::hint::black_box;
use std::time::Instant;

use steerd::Root;
use steerd::apply::Actuator;
use steerd::cpuset::CpuSet;
use steerd::daemon::RECHECK_EVERY;
use steerd::fakeroot::FakeMachine;
use steerd::knob::{Knob, KnobValue};

const QUEUES: u32 = 64;
const PASSES: usize = 200;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let tree = FakeMachine::with_eth0(QUEUES, "ice", QUEUES).write(dir.path())?;
    let state = dir.path().join("state.json");
    let mut actuator = Actuator::open(Root::new(dir.path()), state)?;
    for (queue, irq) in tree.queue_irqs[0].iter().copied().enumerate() {
        let queue = queue as u32;
        let cpu = CpuSet::from_iter([queue]);
        let writes = [
            (Knob::IrqAffinity { irq }, KnobValue::Cpus(cpu.clone())),
            (
                Knob::RpsCpus {
                    device: "eth0".into(),
                    queue,
                },
                KnobValue::Cpus(cpu),
            ),
            (
                Knob::RpsFlowCnt {
                    device: "eth0".into(),
                    queue,
                },
                KnobValue::Count(4096),
            ),
        ];
        for (knob, value) in writes {
            actuator
                .write(&knob, &value, 2)
                .map_err(|f| format!("writing {knob:?}: {}", f.message))?;
        }
    }
    let knobs: Vec<Knob> = actuator.changed().map(|(knob, _)| knob.clone()).collect();
    let mut passes = Vec::with_capacity(PASSES);
    for _ in 0..PASSES {
        let started = Instant::now();
        for knob in &knobs {
            let read = actuator.read(knob);
            black_box(&read);
            read.map_err(|f| format!("reading {knob:?}: {}", f.message))?;
        }
        passes.push(started.elapsed());
    }
    passes.sort();
    let median = passes[PASSES / 2];
    let per_second = median.as_secs_f64() * 1e6 / RECHECK_EVERY.as_secs_f64();
    println!(
        "read-back of {} written values ({QUEUES} queues: vector affinity, rps_cpus, rps_flow_cnt): median {:.0} µs per pass (min {:.0}, max {:.0}, {PASSES} passes); every {} s: {per_second:.1} µs/s",
        knobs.len(),
        median.as_secs_f64() * 1e6,
        passes[0].as_secs_f64() * 1e6,
        passes[PASSES - 1].as_secs_f64() * 1e6,
        RECHECK_EVERY.as_secs(),
    );
    Ok(())
}
