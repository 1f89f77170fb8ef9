//! steerd: steers NIC receive work (IRQ affinity, RPS and RFS) continuously, with
//! hysteresis, and says why.
//!
//! Data flows one way: [`kernel`] readers build the [`model`] (topology, inventory,
//! snapshots); the policy decides from the model alone; the actuator writes. See
//! `docs/architecture.md`.

pub mod apply;
pub mod cli;
pub mod config;
pub mod cpuset;
pub mod daemon;
pub mod decisions;
pub mod discover;
pub mod doctor;
pub mod engine;
pub mod error;
#[cfg(any(test, feature = "test-support"))]
pub mod fakeroot;
pub mod http;
pub mod inspect;
pub mod irqbalance_compat;
pub mod kernel;
pub mod knob;
pub mod limits;
pub mod load;
pub mod logfmt;
pub mod memory;
pub mod metrics;
pub mod model;
pub mod plan_once;
pub mod policy;
pub mod root;
pub mod silent_queues;
#[cfg(any(test, feature = "test-support"))]
pub mod sim;
pub mod status;
pub mod status_report;
pub mod top;

pub use cpuset::CpuSet;
pub use error::Error;
pub use root::Root;
