//! Readers for `sys/` (and `proc/irq/`) trees.

pub mod cpu;
pub mod irq;
pub mod net;

/// For the readers' tests: writes a file of a hand-made tree, making its directories.
#[cfg(test)]
pub(crate) fn write_test_file(dir: &std::path::Path, relative: &str, text: &str) {
    let path = dir.join(relative);
    std::fs::create_dir_all(path.parent().expect("a file under the tree")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}
