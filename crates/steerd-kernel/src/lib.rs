//! steerd's kernel layer: everything steerd reads from or writes to the kernel, under a
//! [`Root`] (`/proc`, `/sys`, cgroupfs, tracefs, netlink, ethtool), and the machine model
//! those readers build ([`model`]: topology, inventory, snapshots).
//!
//! Why a crate of its own: the data flows one way (kernel -> load and policy -> engine ->
//! writes), and as a crate below `steerd` the compiler refuses any arrow back up: nothing
//! here can name the policy, the engine, the daemon or a front end. See
//! `docs/architecture.md`.

pub mod apply;
pub mod cpuset;
pub mod discover;
pub mod error;
#[cfg(any(test, feature = "test-support"))]
pub mod fakeroot;
pub mod irqbalance_compat;
pub mod kernel;
pub mod knob;
pub mod limits;
pub mod model;
pub mod root;
pub mod silent_queues;

pub use cpuset::CpuSet;
pub use error::Error;
pub use root::Root;
