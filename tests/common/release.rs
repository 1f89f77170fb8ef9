//! The steerd binary the measuring tests run: the shipped build, the one the packages hold
//! (`packaging/build-packages.sh --binary`: release, glibc linked in), built once per test
//! binary in the packaging target directory, whatever profile `cargo test` built.
//!
//! Under TCG the debug build took 3x as long to make its first change (igb, 6.19, `cpu0`,
//! 2026-11-29: 2.6-3.3 s after launch, where the release build's were 0.8-0.9 s), and on
//! the 2-CPU veth bed, whose receive path fills both CPUs, the debug build's own CPU time
//! cost it 5-8 % of the packets against the hand recipe in every round (steerd/hand
//! 0.92, 0.92, 0.95; the release build's 1.11, `examples/bed --reps 3 --secs 12`): targets
//! measured on it measured the build, not steerd.
//!
//! Why the shipped build rather than `cargo build --release`: both are fat-LTO release
//! builds of about four minutes each on a 2-CPU host, and CI needs the shipped one for the
//! packages anyway; one tree for the lab, the bed and the packages saved CI that build.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The shipped steerd, built (once per test binary) by `packaging/build-packages.sh
/// --binary`.
pub fn steerd_under_test() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| shipped(&[]))
}

/// An example program built as [`steerd_under_test`] is, from the same tree: for a guest
/// that runs it beside steerd.
pub fn example_under_test(name: &str) -> PathBuf {
    shipped(&["--example", name])
}

/// Runs `packaging/build-packages.sh --binary ARGS` and returns the path it prints.
fn shipped(args: &[&str]) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/build-packages.sh");
    let out = Command::new(&script)
        .arg("--binary")
        .args(args)
        .output()
        .expect("run packaging/build-packages.sh --binary");
    assert!(
        out.status.success(),
        "packaging/build-packages.sh --binary {}: {}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
    assert!(
        path.is_file(),
        "packaging/build-packages.sh --binary {} printed {path:?}, not a file",
        args.join(" ")
    );
    path
}
