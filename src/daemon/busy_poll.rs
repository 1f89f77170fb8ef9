//! Following where busy-polling NAPI threads (`threaded` = 2, Linux 6.19) are pinned while
//! the daemon runs. steerd never moves such a thread; the CPUs an operator pins one to are
//! kept free of every other queue's interrupt and RPS mask
//! ([`crate::policy::context::busy_poll_cpus`]). The pin is a `taskset` at any time, with
//! no event, and the machine model otherwise learns a thread's allowed CPUs only at
//! rediscovery (every 300 s, `REDISCOVER_EVERY`); so every tick reads each busy-polling thread's
//! `Cpus_allowed_list` (one `/proc/PID/status` read a thread; none on a machine without
//! them), and a change reaches the engine before that tick decides.

use tracing::{debug, info};

use super::Daemon;
use crate::cpuset::CpuSet;
use crate::kernel::napi_threads::read_affinity;
use crate::knob::{Knob, KnobValue};

impl Daemon {
    /// Reads the allowed CPUs of every busy-polling receive NAPI thread and hands a change
    /// to the engine, which then keeps other work off a newly pinned thread's CPUs (or lets
    /// it back onto those of one allowed everywhere again) in this tick.
    pub(super) fn follow_busy_poll_threads(&mut self) {
        let threads: Vec<(u32, String, CpuSet)> = self
            .engine
            .machine()
            .inventory
            .devices
            .iter()
            .flat_map(|device| &device.rx_queues)
            .filter(|queue| queue.napi.busy_polls())
            .filter_map(|queue| queue.napi_thread.as_ref())
            .map(|thread| (thread.pid, thread.name.clone(), thread.affinity.clone()))
            .collect();
        for (pid, name, known) in threads {
            match read_affinity(&self.options.root, pid, &name) {
                Ok(Some(now)) if now != known => {
                    info!(
                        thread = %name,
                        pid,
                        cpus = %now.to_list(),
                        "{name} (pid {pid}, busy-polling) is now allowed on CPUs {} (was {}); steerd keeps other receive work off the CPUs busy-polling threads are pinned to, and none off those of a thread allowed everywhere",
                        now.to_list(),
                        known.to_list()
                    );
                    let knob = Knob::NapiThread { pid, name };
                    self.engine.observe_value(&knob, &KnobValue::Cpus(now));
                }
                Ok(_) => {}
                // Gone or unreadable: the next rediscovery finds out which.
                Err(e) => {
                    debug!(thread = %name, pid, error = %e, "cannot read a busy-polling thread's CPUs: {e}")
                }
            }
        }
    }
}
