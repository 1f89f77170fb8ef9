//! One run: a fresh namespace and guest for one scenario and one balancer, the traffic,
//! and the guest's console kept for the report.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::image::{self, GuestKernel};
use super::netns::LabNetns;
use super::platform::{Nic, Platform};
use super::scenario::{Balancer, Scenario};
use super::traffic::{self, Sent};
use super::vm::Vm;
use super::{LabError, Result, io};

/// The built guest: kernel, base archive and the modules it carries.
pub struct Lab {
    pub kernel: GuestKernel,
    pub platform: Platform,
    pub base: PathBuf,
    pub modules: Vec<String>,
    pub work: PathBuf,
    /// Copy the guest's event and daemon-figure lines (`LAB EVENT`, `D`) to stderr as they
    /// come: an hour-long soak shows its progress, and its log keeps the figures even if
    /// the run is stopped before its report.
    pub echo: bool,
    runs: u32,
}

/// What one run produced.
#[derive(Debug, Clone)]
pub struct RawRun {
    pub lines: Vec<String>,
    pub sent: Sent,
    pub tap_dropped: u64,
}

impl Lab {
    /// Builds the guest image around `steerd` in `work`.
    pub fn build(work: &Path, steerd: &Path) -> Result<Lab> {
        Self::build_on(work, steerd, GuestKernel::find()?)
    }

    /// Builds the guest image around `steerd` in `work` for the given kernel.
    pub fn build_on(work: &Path, steerd: &Path, kernel: GuestKernel) -> Result<Lab> {
        Self::build_with(work, steerd, kernel, Platform::host()?)
    }

    /// Builds the guest image around `steerd` in `work` for the given kernel and platform
    /// (NIC, userland, irqbalance).
    pub fn build_with(
        work: &Path,
        steerd: &Path,
        kernel: GuestKernel,
        platform: Platform,
    ) -> Result<Lab> {
        std::fs::create_dir_all(work).map_err(io(format!("creating {}", work.display())))?;
        let (base, modules) = image::build_base(work, &kernel, &platform, steerd)?;
        Ok(Lab {
            kernel,
            platform,
            base,
            modules,
            work: work.to_path_buf(),
            echo: false,
            runs: 0,
        })
    }

    /// Puts `program` into every later guest at `to` (e.g. `usr/sbin/rss`).
    #[allow(dead_code)] // only tests/lab.rs adds a program so far
    pub fn add_program(&mut self, program: &Path, to: &str) -> Result<()> {
        image::add_program(&self.work, &self.base, program, to)
    }

    /// Puts the directory `tree` into every later guest at `to` (the tuned root at
    /// `tuned`).
    pub fn add_tree(&mut self, tree: &Path, to: &str) -> Result<()> {
        image::add_tree(&self.work, &self.base, tree, to)
    }

    /// Boots a guest for the scenario with the balancer and drives its traffic.
    pub fn run(&mut self, scenario: &Scenario, balancer: Balancer) -> Result<RawRun> {
        self.runs += 1;
        let env = super::scenario::guest_env(scenario, balancer, &self.modules, self.platform.nic);
        let initrd = image::with_env(&self.base, &self.work, &env)?;
        let disk = self.work.join("disk.img");
        if scenario.vm.blk_queues.is_some() {
            let f = std::fs::File::create(&disk).map_err(io("creating the guest's disk"))?;
            f.set_len(16 << 20).map_err(io("sizing the guest's disk"))?;
        }
        let ns = LabNetns::create(self.runs)?;
        let vm = Vm::start(
            &scenario.vm,
            &self.platform,
            &ns,
            &self.work,
            &self.work.join("vmlinuz"),
            &initrd,
            &disk,
        )?;
        let mut lines = Vec::new();
        let boot_deadline = Instant::now() + Duration::from_secs(120);
        loop {
            match vm
                .next_line(boot_deadline)
                .map_err(|e| hung_after(e, &lines))?
            {
                Some(line) => {
                    let ready = line.starts_with("LAB READY");
                    if self.echo && ready {
                        eprintln!("lab: {line}");
                    }
                    if line.starts_with("LAB ERROR") {
                        return Err(LabError::Guest(line));
                    }
                    lines.push(line);
                    if ready {
                        break;
                    }
                }
                None => {
                    return Err(LabError::Guest(format!(
                        "console closed before ready: {}",
                        tail(&lines)
                    )));
                }
            }
        }
        // The RSS scenarios on virtio-net: each flow on the tap queue the guest's table
        // sends it to (see LabNetns::steer_by_table), from the default table on, following
        // every table the guest's samples show (`X` lines). igb's tap has one queue, and
        // the device hashes by itself.
        let steering = if scenario.rss_watch && self.platform.nic == Nic::Virtio {
            let steering = ns.steer_by_table()?;
            let table: Vec<u32> = (0..super::rss::TABLE_SIZE)
                .map(|i| i % scenario.vm.queues)
                .collect();
            super::rss::follow_table(&steering, scenario, &table)?;
            Some((steering, table))
        } else {
            if self.platform.nic == Nic::Virtio && spread_evenly(scenario) {
                let steering = ns.steer_by_table()?;
                for (i, sport) in udp_source_ports(scenario).into_iter().enumerate() {
                    steering.set(sport, i as u32 % scenario.vm.queues.max(1))?;
                }
            }
            None
        };
        let t0 = Instant::now();
        let echo = self.echo;
        let mut steering = steering;
        let sent = std::thread::scope(|scope| {
            let senders: Vec<_> = scenario
                .phases
                .iter()
                .map(|phase| {
                    let ns = &ns;
                    scope.spawn(move || traffic::send(ns, phase, t0))
                })
                .collect();
            let end = t0 + scenario.duration + Duration::from_secs(90);
            let mut done = false;
            while !done {
                match vm.next_line(end) {
                    Ok(Some(line)) => {
                        done = line == "LAB DONE";
                        if echo
                            && ["D ", "DS ", "DL ", "LAB "]
                                .iter()
                                .any(|p| line.starts_with(p))
                        {
                            eprintln!("lab: {line}");
                        }
                        if let (Some((steer, last)), Some(x)) =
                            (steering.as_mut(), line.strip_prefix("X "))
                        {
                            let table: Vec<u32> = x
                                .split_whitespace()
                                .filter_map(|v| v.parse().ok())
                                .collect();
                            if table.len() == super::rss::TABLE_SIZE as usize && table != *last {
                                super::rss::follow_table(steer, scenario, &table)?;
                                *last = table;
                            }
                        }
                        lines.push(line);
                    }
                    Ok(None) => break,
                    Err(e) => return Err(hung_after(e, &lines)),
                }
            }
            let mut total = Sent::default();
            for s in senders {
                let sent = s
                    .join()
                    .map_err(|_| LabError::Guest("a traffic thread panicked".into()))??;
                total.udp_packets += sent.udp_packets;
                total.udp_errors += sent.udp_errors;
                total.tcp_bytes += sent.tcp_bytes;
            }
            Ok(total)
        })?;
        if !lines.iter().any(|l| l == "LAB DONE") {
            return Err(LabError::Guest(format!(
                "the guest stopped early: {}",
                tail(&lines)
            )));
        }
        let tap_dropped = ns.tap_tx_dropped();
        // The run's record is complete at LAB DONE (the guest has checked what it restored
        // and printed every figure). A QEMU that outlives the guest's `poweroff -f` is
        // killed (`Vm`'s drop) and said, not a failed run: seen in a `sat-defaults` run
        // (2026-11-28) and in CI's `sat-cpu0` with no balancer (2026-11-30), each after
        // a complete record.
        if let Err(e) = vm.wait(Duration::from_secs(20)) {
            eprintln!(
                "lab: {} with {}: {e}; killed it after LAB DONE",
                scenario.name,
                balancer.name()
            );
        }
        drop(ns);
        Ok(RawRun {
            lines,
            sent,
            tap_dropped,
        })
    }
}

/// Whether the host puts the scenario's UDP flows on the tap's queues in turn (virtio-net
/// without `rss=on`, whose receive queue is the tap queue a packet came through). Left to
/// itself the tap picks a queue from its flow hash, whose seed is random per *host* boot:
/// on one boot of this host the 8 flows of `cpu0` went 0:2:3:3 over the queues in every
/// run, another spread them evenly, so a scenario meant a different machine on each host
/// boot. TCP's source ports are the kernel's to choose, so scenarios with TCP keep the
/// tap's hash (a port missing from the steering map would go to queue 0).
fn spread_evenly(scenario: &Scenario) -> bool {
    !scenario.vm.rss && scenario.phases.iter().all(|p| p.tcp_ports.is_empty())
}

/// The scenario's UDP source ports in the order they first appear.
fn udp_source_ports(scenario: &Scenario) -> Vec<u16> {
    let mut ports = Vec::new();
    for &(sport, _) in scenario.phases.iter().flat_map(|p| &p.udp_flows) {
        if !ports.contains(&sport) {
            ports.push(sport);
        }
    }
    ports
}

/// A hung guest's error with the last console lines it printed, so the failure says where
/// the guest stopped (booting, in the set-up, under traffic).
fn hung_after(error: LabError, lines: &[String]) -> LabError {
    match error {
        LabError::Guest(why) => {
            LabError::Guest(format!("{why}; last console lines: {}", tail(lines)))
        }
        other => other,
    }
}

/// The last console lines, led by the first kernel oops's own lines when the console has
/// one: a guest that panicked prints 30 or more lines of registers and trace, and its last 8
/// (registers, "Kernel panic") never say what crashed (CI at 6480714: `threaded-kill9`
/// stopped with only those).
fn tail(lines: &[String]) -> String {
    let start = lines.len().saturating_sub(8);
    let last = lines[start..].join(" | ");
    match oops(lines) {
        Some(oops) => format!("kernel oops: {oops} || last lines: {last}"),
        None => last,
    }
}

/// The first oops or warning on the console: its header, the faulting instruction and the
/// call trace's frames, at most 24 lines.
fn oops(lines: &[String]) -> Option<String> {
    const HEADERS: [&str; 6] = [
        "BUG:",
        "Oops:",
        "general protection fault",
        "kernel BUG at",
        "WARNING:",
        "Kernel panic",
    ];
    let first = lines
        .iter()
        .position(|l| HEADERS.iter().any(|h| l.contains(h)))?;
    let telling: Vec<&str> = lines[first..]
        .iter()
        .enumerate()
        .filter(|(i, l)| {
            *i == 0
                || l.contains("RIP:")
                || l.contains("Comm:")
                || l.contains("Call Trace")
                || l.contains("Kernel panic")
                || l.trim_start_matches(|c: char| {
                    c == '[' || c == ' ' || c == '.' || c.is_ascii_digit() || c == ']'
                })
                .trim_start()
                .contains("+0x")
        })
        .map(|(_, l)| l.as_str())
        .take(24)
        .collect();
    Some(telling.join(" | "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oops_is_quoted_by_its_header_rip_and_trace() {
        let console: Vec<String> = [
            "D 1.0 0 0",
            "[    7.40] BUG: kernel NULL pointer dereference, address: 0000000000000008",
            "[    7.41] CPU: 1 UID: 0 PID: 0 Comm: swapper/1 Not tainted 6.12.57",
            "[    7.42] RIP: 0010:napi_schedule_prep+0x12/0x40",
            "[    7.43] RAX: 0000000000000000 RBX: ffff8880",
            "[    7.44] Call Trace:",
            "[    7.45]  <IRQ>",
            "[    7.46]  vring_interrupt+0x6b/0xa0",
            "[    7.47] Kernel panic - not syncing: Fatal exception in interrupt",
        ]
        .map(String::from)
        .to_vec();
        let said = tail(&console);
        assert!(
            said.starts_with("kernel oops: [    7.40] BUG: kernel NULL"),
            "{said}"
        );
        for part in [
            "RIP: 0010:napi_schedule_prep",
            "Comm: swapper/1",
            "vring_interrupt+0x6b",
        ] {
            assert!(said.contains(part), "{part} missing from {said}");
        }
        assert!(
            !said.split("||").next().unwrap_or("").contains("RAX:"),
            "{said}"
        );
    }

    #[test]
    fn a_console_without_an_oops_is_its_last_lines() {
        let console: Vec<String> = (0..20).map(|i| format!("line {i}")).collect();
        assert_eq!(
            tail(&console),
            (12..20)
                .map(|i| format!("line {i}"))
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
}
