//! An idle tick allocates nothing: after a second asleep every allocation is a round of
//! cache misses in the allocator, and an idle tick is most of what steerd does (the CPU
//! budget, docs/performance.md). This counts the allocations of what an idle tick runs on
//! the data path (parse `softnet_stat` into the kept vector, carry `proc/stat` over, fold
//! the interval into the load model) once the tables have grown, on a 64-CPU machine.
//! It counts, it does not time: a regression shows as a number, not as noise.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fmt::Write as _;
use std::path::Path;

use steerd::kernel::procfs::softnet::parse_softnet;
use steerd::load::Load;
use steerd::model::snapshot::{CpuTimes, Snapshot};

/// Counts the allocations (and reallocations) made by the current thread, so that other
/// tests' threads do not count.
struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    // `try_with`: the thread-local may be gone while a thread is being torn down.
    let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

const CPUS: u32 = 64;

/// A kernel-formatted `softnet_stat` (13 columns, the CPU id last) where every CPU has
/// processed `processed` packets.
fn softnet_text(processed: u32) -> String {
    let mut text = String::new();
    for cpu in 0..CPUS {
        let _ = write!(text, "{processed:08x}");
        for _ in 1..12 {
            text.push_str(" 00000000");
        }
        let _ = writeln!(text, " {cpu:08x}");
    }
    text
}

fn cpu_times(idle: u64) -> Vec<CpuTimes> {
    (0..CPUS)
        .map(|cpu| CpuTimes {
            cpu,
            user: 10,
            idle,
            ..CpuTimes::default()
        })
        .collect()
}

#[test]
fn an_idle_tick_allocates_nothing_once_warm() {
    let path = Path::new("proc/net/softnet_stat");
    // The texts the kernel would hand over, read into steerd's kept buffer beforehand.
    let texts: Vec<String> = (0..8).map(|tick| softnet_text(100 + tick)).collect();
    let mut previous = Snapshot {
        taken_at_ns: 1_000_000_000,
        cpu_times: cpu_times(1000),
        irq_totals: vec![0; 128],
        ..Snapshot::default()
    };
    parse_softnet(texts[0].as_bytes(), path, &mut previous.softnet).unwrap();
    let mut current = previous.clone();
    let mut load = Load::new();

    let mut tick = |previous: &mut Snapshot, current: &mut Snapshot, text: &str, n: u64| {
        std::mem::swap(previous, current);
        current.carry_stat_from(previous);
        parse_softnet(text.as_bytes(), path, &mut current.softnet).unwrap();
        current.taken_at_ns = (n + 1) * 1_000_000_000;
        load.update(previous, current, 0.5);
    };
    // Warm-up: the first ticks grow the load model's tables.
    tick(&mut previous, &mut current, &texts[1], 1);
    tick(&mut previous, &mut current, &texts[2], 2);

    let before = allocations();
    for (n, text) in texts.iter().enumerate().skip(3) {
        tick(&mut previous, &mut current, text, n as u64);
    }
    let during = allocations() - before;
    assert_eq!(during, 0, "{during} allocations in 5 idle ticks");

    // The ticks did fold the intervals in: the count above is of real work.
    let cpu = load.cpu(CPUS - 1).unwrap();
    assert!(cpu.online && cpu.warm);
    assert_eq!(
        cpu.processed_pps, 1.0,
        "one more packet per tick, a tick a second"
    );

    // And the counter counts: a fresh model allocates its tables.
    let before = allocations();
    Load::new().update(&previous, &current, 0.5);
    assert!(
        allocations() > before,
        "the counting allocator counts nothing"
    );
}
