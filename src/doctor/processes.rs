//! The processes running under a name (`proc/PID/comm`), for the checks that look for
//! another tool beside steerd (irqbalance, tuned, a second steerd).

use std::io;

use crate::root::Root;

/// The pids whose `comm` is `name`, ascending. A process that exits while we look is
/// simply not there; the process list itself failing to read is the error.
pub fn named(root: &Root, name: &str) -> io::Result<Vec<u32>> {
    named_any(root, &[name])
}

/// The pids whose `comm` is one of `names`, ascending, as [`named`].
pub fn named_any(root: &Root, names: &[&str]) -> io::Result<Vec<u32>> {
    let mut pids: Vec<u32> = std::fs::read_dir(root.path("proc"))?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            matches!(
                root.read_optional(format!("proc/{pid}/comm")),
                Ok(Some(comm)) if names.contains(&comm.trim_end())
            )
        })
        .collect();
    pids.sort_unstable();
    Ok(pids)
}
