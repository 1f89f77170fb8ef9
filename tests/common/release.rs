//! The steerd binary the measuring tests run: the release build, as the packages ship
//! it, built once per test binary when `cargo test` built the debug one.
//!
//! Under TCG the debug build took 3x as long to make its first change (igb, 6.19, `cpu0`,
//! 2026-11-29: 2.6-3.3 s after launch, where the release build's were 0.8-0.9 s), and on
//! the 2-CPU veth bed, whose receive path fills both CPUs, the debug build's own CPU time
//! cost it 5-8 % of the packets against the hand recipe in every round (steerd/hand
//! 0.92, 0.92, 0.95; the release build's 1.11, `examples/bed --reps 3 --secs 12`): targets
//! measured on it measured the build, not steerd.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The release steerd: this test binary's own when it is a release build, else built with
/// `cargo build --release --bin steerd` (once) beside the debug one.
pub fn steerd_under_test() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let this = Path::new(env!("CARGO_BIN_EXE_steerd"));
        let dir = this.parent().expect("the binary's directory");
        if dir.ends_with("release") {
            return this.to_path_buf();
        }
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--quiet", "--release", "--bin", "steerd"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo build --release --bin steerd");
        assert!(
            status.success(),
            "cargo build --release --bin steerd: {status}"
        );
        let target = dir.parent().expect("the target directory");
        target.join("release").join("steerd")
    })
}
