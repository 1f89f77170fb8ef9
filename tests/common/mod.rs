//! Helpers shared by the integration tests.

#![allow(dead_code)]

pub mod advancing;
pub mod release;
pub mod suite;
pub mod ttar;

use std::path::{Path, PathBuf};

/// `tests/fixtures/<relative>`.
pub fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(relative)
}
