//! steerd's core: the configuration, the load model built from the kernel crate's
//! snapshots, the policy that decides from the model alone, and the engine that runs a
//! tick (sample, decide, apply through a [`engine::Writer`]) and keeps the decision log.
//!
//! Why a crate of its own: it sits between the kernel layer (below: it may name it) and the
//! daemon and front ends (above: it cannot), so the compiler keeps the policy free of the
//! HTTP server, the CLI and the terminal UI. See `docs/architecture.md`.

// The kernel layer's modules under their own names (`crate::model`, `crate::kernel`), as
// the policy and the engine have always named them.
#[cfg(any(test, feature = "test-support"))]
pub use steerd_kernel::fakeroot;
pub use steerd_kernel::{
    CpuSet, Error, Root, apply, cpuset, discover, error, irqbalance_compat, kernel, knob, limits,
    model, root, silent_queues,
};

pub mod config;
pub mod decisions;
pub mod engine;
pub mod load;
pub mod policy;
#[cfg(any(test, feature = "test-support"))]
pub mod sim;
pub mod status_report;
