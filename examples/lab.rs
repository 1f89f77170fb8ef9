//! The real-NIC lab's command line: runs scenarios with every balancer and prints the
//! side-by-side table (`scripts/lab.sh` writes it into `docs/lab.md`).
//!
//! `cargo run --release --example lab -- [--reps N] [--idle SECS] [--rss-secs SECS]
//! [--balancers a,b] [--steerd PATH] [SCENARIO...]`; root and QEMU needed (see
//! docs/lab.md). `--rss-secs` sets the traffic of `rss-skew` and `rss-elephant` (40 s by
//! default; 300 for the lever's 5-minute oscillation check). `LAB_CONSOLE=DIR` keeps each
//! run's guest console as `DIR/SCENARIO-BALANCER-N.log`. `--format json` prints one JSON
//! object per run on stdout as it ends (`steerd_testkit::lab::json`) and the tables on stderr.
//! The `tuned` scenarios need `--tuned $(scripts/lab-tuned.sh)` (Debian's tuned, copied into
//! the guest).
//!
//! `lab soak [--minutes N] [--steerd PATH] [--max-rss-growth PCT]` runs the soak instead
//! (steerd alone for an hour by default; `scripts/soak.sh`) and prints its first and last
//! windows side by side; it exits 1 when a target is not met.

use steerd_testkit::lab;

use std::path::PathBuf;
use std::time::Duration;

use lab::scenario::{self, Balancer};

fn main() {
    if let Err(e) = run() {
        eprintln!("lab: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("soak") {
        return soak(std::env::args().skip(2));
    }
    let mut reps = 3;
    let mut idle = 300;
    let mut rss_secs = scenario::RSS_SECS.as_secs();
    let mut balancers = Balancer::ALL.to_vec();
    let mut steerd = PathBuf::from("target/release/steerd");
    let mut wanted = Vec::new();
    let (mut cpus, mut queues, mut rss) = (None, None, false);
    let mut json = false;
    let mut nic = lab::platform::Nic::Virtio;
    let mut userland = std::env::var_os("STEERD_LAB_USERLAND").map(PathBuf::from);
    let mut irqbalance = None;
    let mut steerd_config = None;
    let mut tuned: Option<PathBuf> = None;
    let mut pps: Option<u32> = None;
    let mut rules: Option<u32> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--reps" => reps = value()?.parse()?,
            "--idle" => idle = value()?.parse()?,
            "--rss-secs" => rss_secs = value()?.parse()?,
            "--steerd" => steerd = PathBuf::from(value()?),
            "--cpus" => cpus = Some(value()?.parse::<u32>()?),
            "--queues" => queues = Some(value()?.parse::<u32>()?),
            "--rss" => rss = true,
            "--pps" => pps = Some(value()?.parse::<u32>()?),
            "--rules" => rules = Some(value()?.parse::<u32>()?),
            "--format" => json = value()? == "json",
            "--nic" => {
                let name = value()?;
                nic = lab::platform::Nic::parse(&name)
                    .ok_or(format!("unknown NIC {name} ({})", nic_names("|")))?
            }
            "--userland" => userland = Some(PathBuf::from(value()?)),
            "--irqbalance" => irqbalance = Some(value()?),
            "--steerd-config" => steerd_config = Some(PathBuf::from(value()?)),
            "--tuned" => tuned = Some(PathBuf::from(value()?)),
            "--balancers" => {
                balancers = value()?
                    .split(',')
                    .map(|b| Balancer::parse(b).ok_or(format!("unknown balancer {b}")))
                    .collect::<Result<_, _>>()?
            }
            "-h" | "--help" => {
                println!(
                    "lab [--reps N] [--idle SECS] [--rss-secs SECS] [--balancers none,irqbalance,steerd,hand] [--steerd PATH] [--format text|json]\n    \
                     [--nic {}] [--userland DIR] [--irqbalance VERSION] [--steerd-config FILE] [--tuned DIR] [--pps N] [--rules N] [SCENARIO...]\n    \
                     --pps N offers N UDP packets/s in every phase that sends UDP (default: each scenario's own, {} for cpu0 and most; a slower bed saturates at it)\n    \
                     --rules N puts N never-matching policy-routing rules in the sat- scenarios' receive path (default {}; a slower bed needs fewer)\n\
                     {SOAK_USAGE}",
                    nic_names("|"),
                    scenario::UDP_PPS,
                    lab::saturation::RULES
                );
                for s in scenario::all(Duration::from_secs(idle)) {
                    println!("  {:<17} {}", s.name, s.what);
                }
                return Ok(());
            }
            name => wanted.push(name.to_string()),
        }
    }
    if let Some(why) = lab::unavailable() {
        return Err(format!("the lab cannot run here: {why}").into());
    }
    let rss_length = Duration::from_secs(rss_secs);
    let scenarios: Vec<_> = scenario::all(Duration::from_secs(idle))
        .into_iter()
        .filter(|s| wanted.is_empty() || wanted.iter().any(|w| w == s.name))
        .map(|s| match s.name {
            "rss-skew" => lab::rss::skew(rss_length),
            "rss-elephant" => lab::rss::elephant(rss_length),
            "threaded-rss" => lab::rss::threaded(rss_length),
            lab::rss_notify::NAME => lab::rss_notify::scenario(rss_length),
            _ => s,
        })
        .collect();
    let scenarios: Vec<_> = scenarios
        .into_iter()
        .map(|mut s| {
            if let Some(n) = cpus {
                s.vm.cpus = n;
                if s.hand_cpus == "0 1 2 3" {
                    s.hand_cpus = (0..n).map(|c| c.to_string()).collect::<Vec<_>>().join(" ");
                }
            }
            if let Some(q) = queues {
                s.vm.queues = q;
            }
            s.vm.rss |= rss;
            if let Some(pps) = pps {
                s = s.offering(pps);
            }
            if let Some(rules) = rules {
                s = lab::saturation::with_rules(s, rules);
            }
            s
        })
        .collect();
    if let (Some(c), _) | (_, Some(c)) = (
        cpus.filter(|c| !(2..=8).contains(c)),
        queues.filter(|q| !(1..=8).contains(q)),
    ) {
        return Err(format!("--cpus takes 2 to 8 and --queues 1 to 8 (got {c})").into());
    }
    if scenarios.is_empty() {
        return Err(format!("no such scenario: {}", wanted.join(" ")).into());
    }
    // A scenario that would run on this NIC and report figures that mean nothing
    // (`Nic::cannot_run`): left out of "every scenario", and refused when named.
    let cannot = |s: &scenario::Scenario| nic.cannot_run(s.name);
    // The tuned scenarios need tuned's root in the guest (`--tuned DIR`): without it they
    // are left out of "every scenario", and refused when named.
    let scenarios: Vec<_> = if wanted.is_empty() {
        scenarios
            .into_iter()
            .filter(|s| cannot(s).is_none())
            .filter(|s| tuned.is_some() || !lab::tuned::needs_tuned(s))
            .collect()
    } else {
        scenarios
    };
    if let Some((name, why)) = scenarios
        .iter()
        .find_map(|s| cannot(s).map(|why| (s.name, why)))
    {
        return Err(format!(
            "{name} cannot run with --nic {}: {why}; name the other scenarios to run them without it",
            nic.name()
        )
        .into());
    }
    let scenarios = match &steerd_config {
        Some(file) => with_steerd_config(scenarios, file)?,
        None => scenarios,
    };
    let work = std::env::temp_dir().join(format!("steerd-lab-{}", std::process::id()));
    let platform = lab::platform::Platform::new(nic, userland, irqbalance.as_deref())?;
    let mut lab =
        lab::run::Lab::build_with(&work, &steerd, lab::image::GuestKernel::find()?, platform)?;
    if scenarios
        .iter()
        .any(|s| lab::busy_poll::is_busy_poll(s) || lab::napi_switch::is_napi_switch(s))
    {
        // The busy-poll and napi-set scenarios switch a NAPI with examples/napi_set.rs,
        // built beside this program (`cargo build --release --example napi_set`).
        let napi_set = std::env::current_exe()?.with_file_name("napi_set");
        if !napi_set.is_file() {
            return Err(format!(
                "{} is missing: the busy-poll and napi-set scenarios need it (cargo build --release --example napi_set)",
                napi_set.display()
            )
            .into());
        }
        lab.add_program(&napi_set, "usr/sbin/napi_set")?;
    }
    if scenarios.iter().any(lab::tuned::needs_tuned) {
        let Some(root) = &tuned else {
            return Err(
                "the tuned scenarios need --tuned DIR, Debian's tuned in a root of its own (sudo scripts/lab-tuned.sh builds it and prints DIR)"
                    .into(),
            );
        };
        if !root.join("usr/sbin/tuned").is_file() {
            return Err(format!(
                "{}: no usr/sbin/tuned there (sudo scripts/lab-tuned.sh builds the root)",
                root.display()
            )
            .into());
        }
        lab.add_tree(root, "tuned")?;
    }
    let about = format!(
        "guest kernel {}, NIC {}, QEMU {}, irqbalance {}",
        lab.kernel.version,
        lab.platform.nic.name(),
        lab.platform.qemu_version(),
        lab.platform.irqbalance.version
    );
    eprintln!("lab: {about}");
    if !json {
        println!("Guest: {about}.\n");
    }
    let mut rows = Vec::new();
    let mut failures = 0;
    for s in &scenarios {
        // Round by round: each round runs every balancer once, so a ratio taken within a
        // round (scripts/sat-table.py pairs runs by `rep`) compares runs a few minutes apart
        // on this shared host, not runs a whole scenario's length apart.
        let mut runs_by_balancer: Vec<Vec<_>> = balancers.iter().map(|_| Vec::new()).collect();
        for rep in 0..reps {
            for (&b, runs) in balancers.iter().zip(runs_by_balancer.iter_mut()) {
                let raw = match lab.run(s, b) {
                    Ok(raw) => raw,
                    Err(e) => {
                        eprintln!("lab: {} {} #{}: {e}", s.name, b.name(), rep + 1);
                        failures += 1;
                        continue;
                    }
                };
                if let Some(dir) = std::env::var_os("LAB_CONSOLE") {
                    let file =
                        PathBuf::from(dir).join(format!("{}-{}-{}.log", s.name, b.name(), rep + 1));
                    if let Err(e) = std::fs::write(&file, raw.lines.join("\n") + "\n") {
                        eprintln!("lab: writing {}: {e}", file.display());
                    }
                }
                let m = lab::report::analyse(s, &raw);
                if let Some(why) = m.guest_stalled() {
                    eprintln!(
                        "lab: {} {} #{}: {why}; its figures measure the host",
                        s.name,
                        b.name(),
                        rep + 1
                    );
                }
                if json {
                    let mut line = lab::json::line(s, b.name(), rep + 1, &m);
                    line.nic = lab.platform.nic.name();
                    line.irqbalance = Some(lab.platform.irqbalance.version.clone());
                    println!("{}", serde_json::to_string(&line)?);
                }
                eprintln!(
                    "lab: {} {} #{}: first change {:?}, busiest {:.2}, input CPUs {}, late changes {}, restored {}",
                    s.name,
                    b.name(),
                    rep + 1,
                    m.first_change,
                    m.busiest_processed,
                    m.input_cpus,
                    m.late_changes,
                    m.restored
                );
                if s.threaded {
                    eprintln!(
                        "lab: {} {} #{}: kernel {}, NAPI threads {} rx / {} tx, rx threads on their IRQ CPU {} (last seen elsewhere {:?} s), off their IRQ CPU {:?}, queue packet shares {:.2?}, their threads' tick shares {:.2?}, mapping correlation {:.2?} agrees {:?}, with steerd's {:?}",
                        s.name,
                        b.name(),
                        rep + 1,
                        m.kernel.as_deref().unwrap_or("?"),
                        m.rx_threads,
                        m.tx_threads,
                        m.threads_pinned
                            .map_or("never".into(), |t| format!("after {t:.1} s")),
                        m.threads_unpinned_last,
                        m.threads_off_irq_cpu,
                        m.queue_packet_shares,
                        m.thread_tick_shares,
                        m.mapping_correlation,
                        m.mapping_agrees,
                        m.mapping_daemon_agrees
                    );
                }
                if let Some(rss) = &m.rss {
                    eprintln!(
                        "lab: {} {} #{}: {}",
                        s.name,
                        b.name(),
                        rep + 1,
                        lab::rss::describe(&m, rss)
                    );
                }
                if s.name == lab::rss_notify::NAME {
                    eprintln!(
                        "lab: {} {} #{}: {}",
                        s.name,
                        b.name(),
                        rep + 1,
                        lab::rss_notify::analyse(&raw, &m).describe()
                    );
                }
                if lab::napi_switch::is_napi_switch(s) {
                    eprintln!(
                        "lab: {} {} #{}: {}",
                        s.name,
                        b.name(),
                        rep + 1,
                        lab::napi_switch::analyse(&raw, &m).describe()
                    );
                }
                if lab::faults::is_in_flight(s.name) {
                    eprintln!(
                        "lab: {} {} #{}: {}",
                        s.name,
                        b.name(),
                        rep + 1,
                        lab::faults::describe(&lab::faults::HeldWrite::from_log(&m.log))
                    );
                }
                if lab::tuned::needs_tuned(s) {
                    eprintln!(
                        "lab: {} {} #{}: {:?}",
                        s.name,
                        b.name(),
                        rep + 1,
                        lab::tuned::figures(&raw.lines)
                    );
                }
                if s.name == lab::second_balancer::NAME {
                    eprintln!(
                        "lab: {} {} #{}: {:?}",
                        s.name,
                        b.name(),
                        rep + 1,
                        lab::second_balancer::figures(&raw.lines)
                    );
                }
                match lab::doctor::DoctorRun::from_lines(&raw.lines) {
                    Some(Ok(doctor)) => {
                        eprintln!(
                            "lab: {} {} #{}: steerd doctor exited {:?}",
                            s.name,
                            b.name(),
                            rep + 1,
                            doctor.exit
                        );
                        for f in &doctor.findings {
                            eprintln!("    {} [{}] {}", f.severity, f.check, f.summary);
                            if let Some(fix) = &f.fix {
                                eprintln!("      fix: {fix}");
                            }
                        }
                        for l in &doctor.stderr {
                            eprintln!("    stderr: {l}");
                        }
                    }
                    Some(Err(e)) => eprintln!("lab: {} {} #{}: {e}", s.name, b.name(), rep + 1),
                    None => {}
                }
                if std::env::var_os("LAB_VERBOSE").is_some() {
                    for l in &m.log {
                        eprintln!("    {l}");
                    }
                    for d in &m.diffs {
                        eprintln!("    diff {d}");
                    }
                }
                runs.push(m);
            }
        }
        for (&b, runs) in balancers.iter().zip(runs_by_balancer) {
            rows.push((s.clone(), b.name(), runs));
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    // With --format json the tables and verdicts go to stderr: stdout holds JSON only.
    let mut summary = String::new();
    for table in [
        lab::report::table(&rows),
        lab::report::threaded_table(&rows),
        lab::rss::table(&rows),
    ] {
        if !table.is_empty() {
            summary.push_str(&table);
            summary.push('\n');
        }
    }
    for (what, ok) in lab::report::verdicts(&rows) {
        summary.push_str(&format!(
            "- {} {what}\n",
            if ok { "met:" } else { "NOT MET:" }
        ));
    }
    if json {
        eprint!("{summary}");
    } else {
        print!("{summary}");
    }
    if failures > 0 {
        return Err(format!("{failures} run(s) failed (see above)").into());
    }
    Ok(())
}

const SOAK_USAGE: &str =
    "lab soak [--minutes N] [--steerd PATH] [--max-rss-growth PCT] [--from-log FILE]";

/// The soak: one steerd run of `--minutes` (60) under changing traffic and reloads; prints
/// the first and last windows side by side and the targets (RSS growth at most
/// `--max-rss-growth` per cent, 1 by default; the mean tick time of the last window at most
/// 25 % above the first's when both windows are 5 minutes, i.e. hold the same traffic).
/// `--from-log FILE` boots nothing: it reads the `lab: D` and `lab: LAB` lines a soak
/// copied to stderr (a run stopped before its report, or one to read again).
fn soak(mut args: impl Iterator<Item = String>) -> Result<(), Box<dyn std::error::Error>> {
    let mut minutes: u32 = 60;
    let mut steerd = PathBuf::from("target/release/steerd");
    let mut max_growth = 1.0;
    let mut from_log = None;
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--minutes" => minutes = value()?.parse()?,
            "--steerd" => steerd = PathBuf::from(value()?),
            "--max-rss-growth" => max_growth = value()?.parse()?,
            "--from-log" => from_log = Some(PathBuf::from(value()?)),
            other => return Err(format!("soak: unknown argument {other} ({SOAK_USAGE})").into()),
        }
    }
    if minutes < 2 {
        return Err("soak: --minutes takes 2 or more".into());
    }
    let s = lab::soak::scenario(minutes);
    if let Some(path) = from_log {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let lines = text
            .lines()
            .filter_map(|l| l.strip_prefix("lab: "))
            .map(str::to_string)
            .collect();
        let raw = lab::run::RawRun {
            lines,
            sent: Default::default(),
            tap_dropped: 0,
        };
        let soak = lab::soak_report::analyse(s.duration.as_secs_f64(), &raw);
        println!("Soak of {minutes} minutes, read from {}.\n", path.display());
        return soak_verdicts(&soak, max_growth);
    }
    if let Some(why) = lab::unavailable() {
        return Err(format!("the lab cannot run here: {why}").into());
    }
    let work = std::env::temp_dir().join(format!("steerd-lab-{}", std::process::id()));
    let mut lab = lab::run::Lab::build(&work, &steerd)?;
    lab.echo = true;
    eprintln!(
        "lab: soak of {minutes} minutes, guest kernel {}; {} reloads planned",
        lab.kernel.version,
        s.events.len()
    );
    let raw = lab.run(&s, Balancer::Steerd);
    let _ = std::fs::remove_dir_all(&work);
    let soak = lab::soak_report::analyse(s.duration.as_secs_f64(), &raw?);
    println!(
        "Soak of {minutes} minutes, guest kernel {}, steerd {}.\n",
        lab.kernel.version,
        steerd.display()
    );
    if std::env::var_os("LAB_VERBOSE").is_some() {
        for l in &soak.log {
            eprintln!("    {l}");
        }
    }
    soak_verdicts(&soak, max_growth)
}

/// Prints the soak's table and targets; an error when a target is not met.
fn soak_verdicts(
    soak: &lab::soak_report::Soak,
    max_growth: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    print!("{}", soak.table());
    println!();
    let mut verdicts = soak.verdicts(max_growth);
    if soak.early.to - soak.early.from >= lab::soak_report::WINDOW_SECS
        && let (Some(a), Some(b)) = (soak.early.tick_mean_ms, soak.late.tick_mean_ms)
    {
        verdicts.push((
            format!("mean tick time {a:.3} ms in the first window, {b:.3} ms in the last (at most +25 %)"),
            b <= a * 1.25,
        ));
    }
    let mut failed = 0;
    for (what, ok) in &verdicts {
        println!("- {} {what}", if *ok { "met:" } else { "NOT MET:" });
        failed += usize::from(!ok);
    }
    if failed > 0 {
        return Err(format!("{failed} soak target(s) not met").into());
    }
    Ok(())
}

/// `--steerd-config FILE`: steerd runs on FILE (written to the guest's
/// /etc/steerd/steerd.yaml before the snapshot) instead of its built-in defaults, to
/// compare one setting on the same scenarios (`--steerd` compares builds). A scenario that
/// brings its own config is refused rather than silently given another.
fn with_steerd_config(
    scenarios: Vec<scenario::Scenario>,
    file: &std::path::Path,
) -> Result<Vec<scenario::Scenario>, Box<dyn std::error::Error>> {
    let yaml = std::fs::read_to_string(file)
        .map_err(|e| format!("--steerd-config {}: {e}", file.display()))?;
    // Single-quoted for the guest's shell: a quote inside ends the string, writes one
    // escaped, and opens it again.
    let quoted = yaml.replace('\'', "'\\''");
    scenarios
        .into_iter()
        .map(|mut s| {
            if !s.steerd_args.is_empty() || s.setup.contains("/etc/steerd/steerd.yaml") {
                return Err(format!(
                    "{} brings its own steerd config; run it without --steerd-config \
                     (name the scenarios to run with it)",
                    s.name
                )
                .into());
            }
            let write =
                format!("mkdir -p /etc/steerd; printf '%s' '{quoted}' > /etc/steerd/steerd.yaml");
            s.setup = if s.setup.is_empty() {
                write
            } else {
                format!("{write}; {}", s.setup)
            };
            s.steerd_args = "--config /etc/steerd/steerd.yaml".into();
            Ok(s)
        })
        .collect()
}

/// The NICs `--nic` takes, from the one list of them (`Nic::ALL`).
fn nic_names(separator: &str) -> String {
    lab::platform::Nic::ALL
        .map(lab::platform::Nic::name)
        .join(separator)
}
