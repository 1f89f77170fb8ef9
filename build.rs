//! Links the release `steerd` with the code the daemon runs first in its text
//! (`packaging/text-order.txt`, written by `scripts/text-order.sh`), so that the 64 kB
//! windows the kernel maps around each page fault in the program cover that code and little
//! else: the daemon's peak RSS is mostly program text (docs/performance.md, "Where the
//! memory goes"). The file is a list of symbol names for lld's `--symbol-ordering-file`
//! (the linker of Rust's x86_64-unknown-linux-gnu target); names a build no longer has are
//! skipped without a warning, so a stale list costs memory, never correctness. Other
//! profiles, and a toolchain whose linker is not lld, link as before.

use std::path::Path;

fn main() {
    let order = Path::new("packaging/text-order.txt");
    println!("cargo:rerun-if-changed={}", order.display());
    println!("cargo:rerun-if-changed=build.rs");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let linux_gnu = std::env::var("TARGET").is_ok_and(|t| t == "x86_64-unknown-linux-gnu");
    if !(release && linux_gnu && order.is_file()) {
        return;
    }
    let Ok(dir) = std::env::var("CARGO_MANIFEST_DIR") else {
        return;
    };
    let file = Path::new(&dir).join(order);
    println!(
        "cargo:rustc-link-arg-bin=steerd=-Wl,--symbol-ordering-file={}",
        file.display()
    );
    println!("cargo:rustc-link-arg-bin=steerd=-Wl,--no-warn-symbol-ordering");
}
