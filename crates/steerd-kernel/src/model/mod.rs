//! What steerd knows about the machine: plain data, no I/O.
//!
//! The readers in [`crate::kernel`] build these values; the policy consumes them. Keeping
//! them free of I/O lets the policy run on simulated machines of any size.

pub mod inventory;
pub mod snapshot;
pub mod topology;
