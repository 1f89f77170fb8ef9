//! One tick's sampling cost: reading and parsing `proc/stat` and `proc/net/softnet_stat`.
//!
//! Measured on a generated 1152-CPU tree (1152 `cpuN` lines, an `intr` line with 1500
//! IRQs, 1152 fifteen-column softnet rows, realistic magnitudes) and on this machine
//! (`/`), each as:
//!
//! * `pread only`: re-reading the same bytes from kept-open files, the floor;
//! * `sample`: one [`TickSampler::sample`] (read + parse into a reused snapshot);
//! * `parse only` (generated tree): parsing bytes already in memory.
//!
//! Throughput is in decimal MB/s of kernel text. The sampler's replaced-file check (on for
//! fake roots, off on `/`) is switched off for the generated tree, so it measures what a
//! 1152-CPU host would run. After criterion, a short self-timed pass prints one line per
//! target of issue 2 (parse >= 500 MB/s; a tick < 2 ms on 1152 CPUs; < 100 µs here).

use std::fmt::Write as _;
use std::fs;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use steerd::Root;
use steerd::kernel::procfs::softnet::parse_softnet;
use steerd::kernel::procfs::stat::parse_stat;
use steerd::kernel::sampler::{KeptOpenFile, TickSampler};
use steerd::model::snapshot::Snapshot;

const CPUS: u32 = 1152;
const IRQS: u32 = 1500;

/// A small deterministic generator (xorshift64*), so every run measures the same text.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Roughly uniform in `[low, high)`.
    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low).max(1)
    }
}

/// `proc/stat` of a 1152-CPU host up for about 30 days at USER_HZ=100.
fn generated_stat(rng: &mut Rng) -> String {
    let mut lines = String::new();
    let mut sums = [0u64; 10];
    for cpu in 0..CPUS {
        let fields = [
            rng.between(10_000_000, 60_000_000),   // user
            rng.between(0, 50_000),                // nice
            rng.between(3_000_000, 20_000_000),    // system
            rng.between(150_000_000, 250_000_000), // idle
            rng.between(10_000, 500_000),          // iowait
            rng.between(0, 100_000),               // irq
            rng.between(100_000, 9_000_000),       // softirq
            rng.between(0, 100_000),               // steal
            0,                                     // guest
            0,                                     // guest_nice
        ];
        for (sum, value) in sums.iter_mut().zip(fields) {
            *sum += value;
        }
        let _ = write!(lines, "cpu{cpu}");
        for value in fields {
            let _ = write!(lines, " {value}");
        }
        lines.push('\n');
    }
    let mut text = String::from("cpu ");
    for sum in sums {
        let _ = write!(text, " {sum}");
    }
    text.push('\n');
    text.push_str(&lines);
    // Many IRQ numbers never fire; the rest range from a few to billions.
    let counts: Vec<u64> = (0..IRQS)
        .map(|_| match rng.next() % 10 {
            0..=3 => 0,
            digits => rng.between(1, 10u64.pow(digits as u32 + 1)),
        })
        .collect();
    let _ = write!(text, "intr {}", counts.iter().sum::<u64>());
    for count in &counts {
        let _ = write!(text, " {count}");
    }
    text.push('\n');
    let _ = writeln!(text, "ctxt {}", rng.between(1 << 36, 1 << 40));
    text.push_str("btime 1767225600\nprocesses 48213377\nprocs_running 37\nprocs_blocked 0\n");
    text.push_str("softirq");
    for _ in 0..11 {
        let _ = write!(text, " {}", rng.between(1 << 30, 1 << 38));
    }
    text.push('\n');
    text
}

/// A 6.x `proc/net/softnet_stat`: 1152 rows of 15 `%08x` columns.
fn generated_softnet(rng: &mut Rng) -> String {
    let mut text = String::new();
    for cpu in 0..CPUS {
        let processed = rng.next() as u32;
        let dropped = (rng.next() % 1000) as u32;
        let squeeze = (rng.next() % 100_000) as u32;
        let rps = (rng.next() % 50_000_000) as u32;
        let flow = (rng.next() % 100) as u32;
        let _ = writeln!(
            text,
            "{processed:08x} {dropped:08x} {squeeze:08x} 00000000 00000000 00000000 00000000 \
             00000000 00000000 {rps:08x} {flow:08x} 00000000 {cpu:08x} 00000000 00000000"
        );
    }
    text
}

/// The files of one tick, opened once (the `pread only` floor).
struct RawTick {
    stat: KeptOpenFile,
    softnet: KeptOpenFile,
}

impl RawTick {
    fn open(root: &Root) -> RawTick {
        RawTick {
            stat: KeptOpenFile::open(root.path("proc/stat")).expect("proc/stat"),
            softnet: KeptOpenFile::open(root.path("proc/net/softnet_stat"))
                .expect("proc/net/softnet_stat"),
        }
    }

    fn read(&mut self) -> usize {
        let a = self.stat.read().expect("read proc/stat").len();
        let b = self.softnet.read().expect("read softnet_stat").len();
        a + b
    }
}

fn parse_both(stat: &[u8], softnet: &[u8], snapshot: &mut Snapshot) {
    parse_stat(
        stat,
        Path::new("proc/stat"),
        &mut snapshot.cpu_times,
        &mut snapshot.irq_totals,
    )
    .expect("parse proc/stat");
    parse_softnet(
        softnet,
        Path::new("proc/net/softnet_stat"),
        None,
        &mut snapshot.softnet,
    )
    .expect("parse softnet_stat");
}

/// Median time of one call of `f`, over `batches` batches lasting about `per_batch`.
fn median_time(mut f: impl FnMut(), batches: usize, per_batch: Duration) -> Duration {
    let start = Instant::now();
    let mut calls = 0u32;
    while start.elapsed() < per_batch / 4 {
        f();
        calls += 1;
    }
    let per_call = start.elapsed() / calls.max(1);
    let iterations = (per_batch.as_nanos() / per_call.as_nanos().max(1)).clamp(1, 1_000_000) as u32;
    let mut times: Vec<Duration> = (0..batches)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iterations {
                f();
            }
            start.elapsed() / iterations
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn mb_per_s(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / time.as_secs_f64() / 1e6
}

fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "FAIL" }
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    fs::create_dir_all(dir.path().join("proc/net")).expect("mkdir");
    let mut rng = Rng(0x5eed_cafe_f00d_0001);
    let stat_text = generated_stat(&mut rng);
    let softnet_text = generated_softnet(&mut rng);
    fs::write(dir.path().join("proc/stat"), &stat_text).expect("write stat");
    fs::write(dir.path().join("proc/net/softnet_stat"), &softnet_text).expect("write softnet");
    let big = Root::new(dir.path());
    let host = Root::default();
    let big_bytes = stat_text.len() + softnet_text.len();

    let mut big_raw = RawTick::open(&big);
    let mut big_sampler = TickSampler::open(&big).expect("sampler on the generated tree");
    big_sampler.set_follow_replaced_files(false);
    let mut host_raw = RawTick::open(&host);
    let mut host_sampler = TickSampler::open(&host).expect("sampler on /");
    let host_bytes = host_raw.read();
    let mut snapshot = Snapshot::default();
    big_sampler.sample(&mut snapshot).expect("sample");
    assert_eq!(snapshot.cpu_times.len(), CPUS as usize);
    assert_eq!(snapshot.softnet.len(), CPUS as usize);
    assert_eq!(snapshot.irq_totals.len(), IRQS as usize);

    let mut criterion = Criterion::default().configure_from_args();
    {
        let mut group = criterion.benchmark_group("tick/1152-cpu-tree");
        group.throughput(Throughput::BytesDecimal(big_bytes as u64));
        group.bench_function("pread only", |b| b.iter(|| black_box(big_raw.read())));
        group.bench_function("sample (read + parse)", |b| {
            b.iter(|| {
                big_sampler
                    .sample(black_box(&mut snapshot))
                    .expect("sample")
            })
        });
        group.bench_function("parse only", |b| {
            b.iter(|| {
                parse_both(
                    black_box(stat_text.as_bytes()),
                    black_box(softnet_text.as_bytes()),
                    &mut snapshot,
                )
            })
        });
        group.finish();
    }
    {
        let mut group = criterion.benchmark_group("parse/1152-cpu-tree");
        group.throughput(Throughput::BytesDecimal(stat_text.len() as u64));
        group.bench_function("proc/stat", |b| {
            b.iter(|| {
                parse_stat(
                    black_box(stat_text.as_bytes()),
                    Path::new("proc/stat"),
                    &mut snapshot.cpu_times,
                    &mut snapshot.irq_totals,
                )
                .expect("parse")
            })
        });
        group.throughput(Throughput::BytesDecimal(softnet_text.len() as u64));
        group.bench_function("softnet_stat", |b| {
            b.iter(|| {
                parse_softnet(
                    black_box(softnet_text.as_bytes()),
                    Path::new("proc/net/softnet_stat"),
                    None,
                    &mut snapshot.softnet,
                )
                .expect("parse")
            })
        });
        group.finish();
    }
    {
        let mut group = criterion.benchmark_group("tick/this-machine");
        group.throughput(Throughput::BytesDecimal(host_bytes as u64));
        group.bench_function("pread only", |b| b.iter(|| black_box(host_raw.read())));
        group.bench_function("sample (read + parse)", |b| {
            b.iter(|| {
                host_sampler
                    .sample(black_box(&mut snapshot))
                    .expect("sample")
            })
        });
        group.finish();
    }
    criterion.final_summary();

    // `cargo test --benches` runs this binary without `--bench`: skip the timed summary.
    if !std::env::args().any(|arg| arg == "--bench") {
        return;
    }
    let batches = 15;
    let per_batch = Duration::from_millis(100);
    let parse = median_time(
        || parse_both(stat_text.as_bytes(), softnet_text.as_bytes(), &mut snapshot),
        batches,
        per_batch,
    );
    let big_read = median_time(
        || {
            black_box(big_raw.read());
        },
        batches,
        per_batch,
    );
    let big_tick = median_time(
        || big_sampler.sample(&mut snapshot).expect("sample"),
        batches,
        per_batch,
    );
    let host_read = median_time(
        || {
            black_box(host_raw.read());
        },
        batches,
        per_batch,
    );
    let host_tick = median_time(
        || host_sampler.sample(&mut snapshot).expect("sample"),
        batches,
        per_batch,
    );
    let parse_rate = mb_per_s(big_bytes, parse);
    println!(
        "summary: parsing the 1152-CPU tick text ({big_bytes} bytes): {parse_rate:.0} MB/s \
         ({parse:?} per tick); target >= 500 MB/s: {}",
        verdict(parse_rate >= 500.0)
    );
    println!(
        "summary: one tick on the 1152-CPU tree: {big_tick:?} (pread alone {big_read:?}); \
         target < 2 ms: {}",
        verdict(big_tick < Duration::from_millis(2))
    );
    println!(
        "summary: one tick on this machine ({host_bytes} bytes, kernel time included): \
         {host_tick:?} (pread alone {host_read:?}); target < 100 µs: {}",
        verdict(host_tick < Duration::from_micros(100))
    );
}
