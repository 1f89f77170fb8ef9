//! steerd's test support that runs real things around steerd: the real-NIC lab ([`lab`]:
//! QEMU guests with real NIC drivers, the veth bed, their traffic and reports) and the
//! fake kernel ([`fake_kernel`]) that plays a generated tree's counters while a real
//! `steerd run` steers it.
//!
//! Why a crate: the lab and the fake kernel serve the tests, the examples and the scripts
//! alike; as a crate they are built once and named by path (`steerd_testkit::lab`) instead
//! of being included file by file into each test and example. Never part of the package.
//! The fake trees and the simulator stay in the crates whose own unit tests use them
//! (`steerd-kernel`'s and `steerd-core`'s `test-support` feature).

pub mod fake_kernel;
pub mod lab;
