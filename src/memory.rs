//! The daemon's allocator settings, made once at the start of `steerd run` before any
//! other thread exists (docs/performance.md, "Where the memory goes").
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
