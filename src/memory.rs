//! The daemon's allocator settings, made once at the start of `steerd run` before any
//! other thread exists (docs/performance.md, "Where the memory goes"): glibc's per-thread
//! cache off, then one arena; and, every 30 s while it runs, the heap's free pages handed
//! back to the kernel.
//!
//! The daemon's heap is small (about 300 kB live, most of it kept for the process's life:
//! receive buffers, the metrics registry, the machine model), so what matters is not
//! leaving memory touched and idle in places glibc would otherwise create for us.

/// Makes every thread allocate from glibc's main arena.
///
/// glibc gives a thread that allocates while another holds the main arena's lock an arena
/// of its own (up to 8 per CPU): a 64 MiB reservation whose first pages are touched at once
/// and whose free chunks are never handed to the other thread. steerd has two threads that
/// allocate: the tick loop and the HTTP thread (a scrape, `/status`), which rarely run at
/// the same moment, so the second arena is pure cost. Measured with `scripts/memory.sh`
/// (3 rounds): the HTTP thread's arena held 56 kB of RSS (15 kB of it in use, glibc's
/// `malloc_stats`); with one arena it is gone, the main heap grows by 36 kB, and RssAnon
/// is 24 kB lower (564 -> 540 kB).
pub fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes glibc's allocator parameters; it is called before
        // the daemon starts its HTTP thread, and M_ARENA_MAX takes any positive value.
        let ok = unsafe { nix::libc::mallopt(nix::libc::M_ARENA_MAX, 1) };
        if ok != 1 {
            tracing::debug!("mallopt(M_ARENA_MAX, 1) refused; each thread may get an arena");
        }
    }
}

/// The glibc tunable that empties its per-thread cache of freed chunks (tcache).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const NO_THREAD_CACHE: &str = "glibc.malloc.tcache_count=0";

/// Set in the environment of the program executed again, so that it never does it twice.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const EXECED: &str = "STEERD_WITHOUT_THREAD_CACHE";

/// Executes this program again in place, once, with glibc's per-thread cache of freed
/// chunks turned off, unless `GLIBC_TUNABLES` already names a tcache count (then, or on a
/// libc that is not glibc, it does nothing). Returns only if there was nothing to do, or
/// with the error of an exec that failed (the daemon then runs on with the cache).
///
/// Why: glibc keeps up to seven freed chunks of each small size per thread, outside its
/// bins, where they can neither serve another size nor merge with their neighbours. With
/// the daemon's mix of long-lived and per-tick allocations that held about 120 kB of RSS:
/// on the fake root of `scripts/decision-memory.sh 240` (about 8 decisions a second),
/// RssAnon 700-704 kB with the cache, 576-580 kB without it, in one run
/// (docs/performance.md, where the idle CPU cost of doing without it is measured too).
/// glibc reads its tunables only when a program starts, from `GLIBC_TUNABLES`, and
/// `mallopt` has no parameter for this one, so the only way from inside is an exec with
/// the variable set: same PID, arguments, environment (an operator's own tunables are
/// kept, this one appended) and open descriptors, before the daemon has opened anything,
/// started a thread or logged a line.
pub fn without_thread_cache() -> Option<std::io::Error> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::process::CommandExt;
        let tunables = std::env::var_os("GLIBC_TUNABLES").unwrap_or_default();
        let tunables = tunables.to_string_lossy();
        // The marker: once is enough, whatever glibc made of the variable (it rewrites it
        // in place while parsing it).
        if tunables.contains("glibc.malloc.tcache_count") || std::env::var_os(EXECED).is_some() {
            return None;
        }
        let value = if tunables.is_empty() {
            NO_THREAD_CACHE.to_string()
        } else {
            format!("{tunables}:{NO_THREAD_CACHE}")
        };
        let mut args = std::env::args_os();
        let argv0 = args.next().unwrap_or_else(|| "steerd".into());
        // /proc/self/exe: the running program itself, even if its file was replaced since.
        let error = std::process::Command::new("/proc/self/exe")
            .arg0(argv0)
            .args(args)
            .env("GLIBC_TUNABLES", value)
            .env(EXECED, "1")
            .exec();
        Some(error)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

/// Hands the pages of the heap that hold no live allocation back to the kernel
/// (`malloc_trim(0)`: glibc `madvise`s every whole free page inside the heap, not only
/// the top). The daemon calls it at the end of a tick every 30 s
/// (`daemon::RETURN_FREE_PAGES_EVERY`), after that tick's own allocations are freed.
///
/// Why: glibc frees a chunk into its bins and keeps its pages; only free memory at the
/// top of the heap above `M_TRIM_THRESHOLD` is ever given back by `free`. A rediscovery
/// or a reload builds the new model (or configuration) while the old one is alive and
/// then frees the old one, so the heap's live data moves and the holes it leaves stay
/// resident. In the lab's hour soak (docs/reliability.md, "Soak") that was the whole of
/// the RSS growth: the heap's RSS rose 412 -> 524 kB in 4-8 kB steps, most of them just
/// after a rediscovery or a reload, while the heap's range stayed put. The cost is one
/// walk of glibc's bins and a few `madvise` calls every 30 s; pages reused afterwards
/// fault back in.
pub fn return_free_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only takes glibc's arena locks and madvises pages that hold
        // no allocation; no pointer the program holds is affected.
        unsafe {
            nix::libc::malloc_trim(0);
        }
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::return_free_pages;

    /// This process's anonymous RSS in kB, from `smaps_rollup` (exact: `status` lags on
    /// 6.1, whose per-thread counters are folded in late).
    fn anonymous_kb() -> u64 {
        let text = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
        text.lines()
            .find_map(|line| line.strip_prefix("Anonymous:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    #[test]
    fn free_pages_in_the_middle_of_the_heap_go_back() {
        // 2 MiB in 8 kB chunks (below glibc's mmap threshold, so they come from the
        // heap), each page touched; the last one stays alive, so freeing the others leaves
        // a hole below it that free() alone keeps resident.
        let mut chunks: Vec<Box<[u8]>> = (0..257)
            .map(|_| std::hint::black_box(vec![1u8; 8192]))
            .map(Vec::into_boxed_slice)
            .collect();
        let pin = chunks.pop();
        drop(std::hint::black_box(chunks));
        let before = anonymous_kb();
        return_free_pages();
        let after = anonymous_kb();
        assert!(before > 0, "no Anonymous line in /proc/self/smaps_rollup");
        // Most of the 2 MiB hole is handed back (other tests allocate meanwhile).
        assert!(
            before.saturating_sub(after) >= 1024,
            "anonymous RSS {before} -> {after} kB: the freed 2 MiB stayed resident"
        );
        drop(pin);
    }
}
