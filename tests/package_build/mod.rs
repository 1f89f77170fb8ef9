//! Builds the Debian and RPM packages once per test binary, with
//! `packaging/build-packages.sh`, for the tests that inspect them (`tests/packages.rs`) and
//! the one that installs the `.deb` in a real systemd (`tests/package_install.rs`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::common::suite::{Requirement, Skip};

/// Whether `tool` is on the PATH.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The built `.deb` and `.rpm`, built on the first call; a skip (a missing prerequisite)
/// when the packaging tools are missing. A failed build is a test failure.
pub fn packages() -> Result<&'static (PathBuf, PathBuf), Skip> {
    static BUILT: OnceLock<Result<(PathBuf, PathBuf), Skip>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            for (tool, install) in [
                ("cargo-deb", "cargo install --locked cargo-deb"),
                (
                    "cargo-generate-rpm",
                    "cargo install --locked cargo-generate-rpm",
                ),
                ("dpkg-deb", "apt-get install dpkg"),
            ] {
                Requirement::tool(tool, install).check()?;
            }
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/build-packages.sh");
            let out = Command::new(&script)
                .output()
                .expect("run build-packages.sh");
            assert!(
                out.status.success(),
                "build-packages.sh failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let stdout = String::from_utf8_lossy(&out.stdout);
            let mut lines = stdout.lines().rev();
            let rpm = PathBuf::from(lines.next().expect("rpm path"));
            let deb = PathBuf::from(lines.next().expect("deb path"));
            assert!(deb.is_file() && rpm.is_file(), "{deb:?} {rpm:?}");
            eprintln!("built {} and {}", deb.display(), rpm.display());
            Ok((deb, rpm))
        })
        .as_ref()
        .map_err(Clone::clone)
}
