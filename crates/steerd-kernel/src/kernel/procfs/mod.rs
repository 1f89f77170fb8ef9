//! Readers for `proc/` files.

pub mod interrupts;
pub mod softirqs;
pub mod softnet;
pub mod stat;
