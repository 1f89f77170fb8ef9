//! Readers for `sys/` (and `proc/irq/`) trees.

pub mod cpu;
pub mod irq;
pub mod net;
