//! steerd: steers NIC receive work (IRQ affinity, RPS and RFS) continuously, with
//! hysteresis, and says why.
//!
//! Data flows one way: [`kernel`] readers build the [`model`] (topology, inventory,
//! snapshots); the policy decides from the model alone; the actuator writes. See
//! `docs/architecture.md`.

pub mod cli;
pub mod daemon;
pub mod doctor;
pub mod http;
pub mod inspect;
pub mod logfmt;
pub mod memory;
pub mod metrics;
pub mod plan_once;
pub mod status;
pub mod top;

// The kernel layer and the core are crates of their own (crates/steerd-kernel,
// crates/steerd-core); their modules keep their paths here (`steerd::kernel`,
// `steerd::policy`, `crate::model`) for the modules above them and for the tests.
#[cfg(any(test, feature = "test-support"))]
pub use steerd_core::sim;
pub use steerd_core::{config, decisions, engine, load, policy, status_report};
#[cfg(any(test, feature = "test-support"))]
pub use steerd_kernel::fakeroot;
pub use steerd_kernel::{
    CpuSet, Error, Root, apply, cpuset, discover, error, irqbalance_compat, kernel, knob, limits,
    model, root, silent_queues,
};
