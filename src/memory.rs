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

/// Every allocation of [`MMAP_THRESHOLD`] or more gets its own mapping, returned to the
/// kernel when freed, whatever was allocated before.
///
/// glibc starts with a 128 KiB threshold and raises it to the size of each mmapped chunk
/// that is freed (up to 32 MiB), so after one large buffer is freed later ones of that
/// size come from the brk heap, where the small allocations made while they lived (a
/// decision, a tick's samples) keep the heap from shrinking back: each `/status` and
/// `/decisions` request builds its whole body in one buffer of up to about 100 kB.
/// Setting the threshold fixes it (and the trim threshold, at 128 KiB) for the process's
/// life. Measured with `scripts/decision-memory.sh` (docs/performance.md, "Where the
/// memory goes"): see there for the figures.
pub const MMAP_THRESHOLD: usize = 64 * 1024;

/// Sets glibc's mmap threshold to [`MMAP_THRESHOLD`] (see there why).
pub fn fixed_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: as for M_ARENA_MAX: called before the HTTP thread starts, and the
        // value is below glibc's maximum (HEAP_MAX_SIZE / 2, 32 MiB on 64-bit).
        let ok = unsafe { nix::libc::mallopt(nix::libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as i32) };
        if ok != 1 {
            tracing::debug!("mallopt(M_MMAP_THRESHOLD) refused; glibc adjusts it itself");
        }
    }
}
