//! A deterministic simulated machine for tests, benches and docs.
//!
//! It models CPUs with their topology (SMT siblings, NUMA nodes), NICs with queues and
//! IRQs, flows hashed to buckets and buckets to queues by an RSS indirection table (skewed
//! buckets, one heavy bucket, a table the policy or the operator writes), the cost of
//! receive work on the interrupting CPU and on the RPS target, an IPI cost per RPS batch
//! on the sending CPU, CPU capacity, and drops when a CPU is over capacity; it publishes
//! the counters the readers would read (`proc/stat`, softnet, `intr`, per-queue packets)
//! for whatever placement the policy chose, and applies the policy's writes as the kernel
//! would. Runs are seeded and the same on every machine.
//!
//! The scenarios of issues 3 and 18 live in [`scenarios`]; [`table`] runs them under
//! steerd and an irqbalance-like [`baseline`] side by side; [`fixed`] has the veth bed's
//! other two balancers (none, RPS by hand) for [`scenarios::veth_bed`].

pub mod baseline;
pub mod fixed;
mod knobs;
pub mod machine;
mod nic;
pub mod rng;
pub mod run;
pub mod scenarios;
pub mod steerd;
pub mod table;
pub mod topo;
mod traffic;
mod view;

pub use fixed::{HandRps, NoBalancer};
pub use machine::{Costs, NicSpec, SimMachine, TickTruth};
pub use run::{Run, Scenario, TickRecord, run};
pub use steerd::{Change, Controller, Steerd};
pub use topo::{Shape, Siblings};
