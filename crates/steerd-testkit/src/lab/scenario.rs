//! The lab's scenarios: a guest, a set-up, timed events and traffic, each run with every
//! balancer on the same traffic.

use std::time::Duration;

use super::platform::Nic;
use super::traffic::{Phase, udp_flows};
use super::vm::VmSpec;

/// Who steers the guest's IRQs during a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balancer {
    /// Nothing moves: the set-up stays.
    None,
    /// Debian's irqbalance with default options (`irqbalance --foreground`).
    Irqbalance,
    /// The steerd binary under test, on its built-in default config.
    Steerd,
    /// A static placement by hand: queue N's vectors on the scenario's Nth allowed CPU.
    Hand,
}

impl Balancer {
    pub const ALL: [Balancer; 4] = [
        Balancer::None,
        Balancer::Irqbalance,
        Balancer::Steerd,
        Balancer::Hand,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Balancer::None => "none",
            Balancer::Irqbalance => "irqbalance",
            Balancer::Steerd => "steerd",
            Balancer::Hand => "hand",
        }
    }

    pub fn parse(s: &str) -> Option<Balancer> {
        Balancer::ALL.into_iter().find(|b| b.name() == s)
    }
}

/// One scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: &'static str,
    pub what: &'static str,
    pub vm: VmSpec,
    /// Guest shell run before the snapshot and the balancer (the machine as found).
    pub setup: String,
    /// Guest shell commands run at these seconds after the balancer starts.
    pub events: Vec<(u32, &'static str)>,
    /// The CPUs a hand placement uses, in queue order.
    pub hand_cpus: String,
    /// How long the guest samples after the balancer starts.
    pub duration: Duration,
    pub phases: Vec<Phase>,
    /// The window whose shares the table reports: the last `steady` of the last phase.
    pub steady: Duration,
    /// Whether it is a "spread" scenario: steerd's busiest share is held against the hand
    /// placement's.
    pub spread: bool,
    /// Seconds between two samples: 0.5 for the table's reaction times; the soak samples
    /// less often, so an hour of samples stays cheap for the guest and the console.
    pub period: f64,
    /// Extra arguments to `steerd run` (the soak's `--config`).
    pub steerd_args: String,
    /// Whether each sample carries the daemon's RSS, threads, fds and tick time (the soak).
    pub daemon_stats: bool,
    /// Whether the set-up turns threaded NAPI on (`/sys/class/net/eth0/threaded`): the
    /// run's figures then go to the threaded-NAPI table, with its thread columns.
    pub threaded: bool,
    /// Whether each sample carries the NIC's per-queue packet counters and its RSS table
    /// (`QS`, `X`), the table is in the snapshot, and steerd's `steerd_rss_*` metrics are
    /// scraped before SIGTERM: the RSS lever's scenarios (`lab/rss.rs`), whose figures go to
    /// their own table.
    pub rss_watch: bool,
    /// Whether each sample carries the NIC's per-queue packet counters and its RSS table
    /// (`QS`, `X`) without the RSS lever's steering and metrics: the saturated scenarios,
    /// where a virtio queue that stops receiving mid-run (QEMU's fault, not a balancer's:
    /// docs/lab.md, "A queue that stops") must be seen so the run can be set aside
    /// (`lab::queue_stall`).
    pub queue_watch: bool,
    /// Whether the hand placement also turns RPS on over every CPU with RFS sized
    /// (`hand_rps`): the seeds' recipe, the hand row of the saturated scenarios.
    pub hand_rps: bool,
}

impl Scenario {
    /// Whether the guest samples the NIC's per-queue counters and RSS table (`QS`, `X`):
    /// the RSS lever's scenarios and those with `queue_watch`.
    pub fn samples_queues(&self) -> bool {
        self.rss_watch || self.queue_watch
    }

    /// The same scenario offering `pps` UDP packets/s in every phase that sends UDP: a
    /// scenario meant to leave the guest unsaturated, on a bed too slow to carry
    /// [`UDP_PPS`] (docs/lab.md, "A slower bed").
    pub fn offering(mut self, pps: u32) -> Scenario {
        for phase in &mut self.phases {
            if !phase.udp_flows.is_empty() {
                phase.udp_pps = pps;
            }
        }
        self
    }
}

/// The total UDP rate of the scenarios, packets/s: about what the host offers from 2 CPUs
/// under TCG without loss (docs/lab.md).
pub const UDP_PPS: u32 = 60_000;

/// The rate of the lab tests' unsaturated checks (`cpu0` against irqbalance, the VF's
/// `cpu0`, `kill9`, `hotplug` and `nic-remove` in the short form, `threaded-cpu0`, the
/// 5-minute soak's UDP), packets/s: one whose work no guest CPU is near saturated by once the
/// vectors are spread, on a host slower than the one [`UDP_PPS`] was chosen on. On a 2-CPU
/// EPYC VM (2026-11-29) `cpu0` at `UDP_PPS` saturated the guest's CPUs (time squeezes,
/// steerd's RPS trial undone as harmful) and at this rate left the busiest CPU 0.16
/// (steerd) and 0.31 (irqbalance) of its time in irq+softirq, delivering 0.96 of it
/// (`examples/lab --pps 20000 cpu0`).
pub const PLACEMENT_PPS: u32 = 20_000;

/// A phase of `flows` UDP flows at `pps` in total, `start` seconds after the balancer starts.
pub fn udp(start: u64, length: u64, flows: u16, pps: u32) -> Phase {
    Phase {
        start: Duration::from_secs(start),
        length: Duration::from_secs(length),
        udp_flows: udp_flows(flows),
        udp_pps: pps,
        tcp_ports: Vec::new(),
    }
}

/// A scenario with the table's defaults: 4 queues, 8 UDP flows for 30 s, no set-up.
pub fn base(name: &'static str, what: &'static str) -> Scenario {
    Scenario {
        name,
        what,
        vm: VmSpec::default(),
        setup: String::new(),
        events: Vec::new(),
        hand_cpus: "0 1 2 3".into(),
        duration: Duration::from_secs(32),
        phases: vec![udp(1, 30, 8, UDP_PPS)],
        steady: Duration::from_secs(12),
        spread: false,
        period: 0.5,
        steerd_args: String::new(),
        daemon_stats: false,
        threaded: false,
        rss_watch: false,
        queue_watch: false,
        hand_rps: false,
    }
}

/// `channels`' and `sat-channels`' queue-set changes: 2 combined channels at 10 s, 4 again
/// at 18 s.
pub const CHANNEL_CHANGES: [(u32, &str); 2] = [
    (10, "ethtool -L eth0 combined 2"),
    (18, "ethtool -L eth0 combined 4"),
];

/// The guest shell that turns threaded NAPI on for the NIC: each NAPI instance then polls
/// in a kernel thread `napi/eth0-ID` that the scheduler places, not in the softirq of the
/// CPU its IRQ fired on (Linux 5.12 and later; issue 20).
pub const THREADED_ON: &str = "echo 1 > /sys/class/net/eth0/threaded";

/// The guest shell that removes the NIC's PCI function (its IRQs and queue files vanish,
/// as when a device is unplugged): `eth0/device` itself, or for virtio-net (whose device is
/// `virtioN`) its parent. Until 2026-11-28 it removed the parent of `eth0/device` for every
/// NIC, which for igb is the root bus, with no `remove` file: the igb runs removed nothing.
pub const NIC_REMOVE: &str = "nic=$(readlink -f /sys/class/net/eth0/device); \
     case \"${nic##*/}\" in virtio*) nic=${nic%/*} ;; esac; \
     echo 1 > \"$nic/remove\" || echo \"LAB ERROR removing $nic\"";

/// The guest shell that finds the removed NIC again (a PCI rescan: the driver's placement,
/// often the same IRQ numbers) and configures its interface as before, the NIC's own
/// set-up included (igb hashes UDP on addresses only until told otherwise: without it
/// every flow of the re-probed igb went to one queue).
pub const NIC_RESCAN: &str = "echo 1 > /sys/bus/pci/rescan; sleep 1; ip link set eth0 up; \
     ip addr add $GUEST_ADDR/24 dev eth0; \
     ip neigh replace $HOST_ADDR lladdr $HOST_MAC dev eth0 nud permanent; eval \"$NIC_SETUP\"";

/// The traffic of the RSS lever's scenarios in the table (`examples/lab --rss-secs` for
/// the 5-minute oscillation check).
pub const RSS_SECS: Duration = Duration::from_secs(40);

/// The scenario `examples/lab` calls `name`, as [`all`] makes it.
pub fn named(name: &str, idle: Duration) -> Option<Scenario> {
    all(idle).into_iter().find(|s| s.name == name)
}

/// Every scenario; `idle` is the idle spell of `idle-burst` (5 minutes in the full table).
pub fn all(idle: Duration) -> Vec<Scenario> {
    let idle_s = idle.as_secs();
    vec![
        Scenario {
            setup: "pin_inputs 0".into(),
            spread: true,
            ..base("cpu0", "4 queues, every input vector on CPU0, 8 UDP flows")
        },
        Scenario {
            spread: true,
            ..base(
                "defaults",
                "4 queues, the driver's placement (queue N on CPU N), 8 UDP flows",
            )
        },
        Scenario {
            phases: vec![Phase {
                tcp_ports: vec![5001, 5002, 5003, 5004],
                ..udp(1, 30, 0, 0)
            }],
            setup: "pin_inputs 0".into(),
            spread: true,
            ..base(
                "tcp-cpu0",
                "4 queues, every input vector on CPU0, 4 TCP flows",
            )
        },
        Scenario {
            phases: vec![udp(1, 30, 1, UDP_PPS)],
            ..base("elephant", "4 queues, driver's placement, one UDP flow")
        },
        Scenario {
            vm: VmSpec {
                rss: true,
                ..VmSpec::default()
            },
            setup: "ethtool -X eth0 weight 1 1 0 0".into(),
            ..base(
                "skew-2of4",
                "rss=on, indirection table on queues 0-1 only, 8 UDP flows",
            )
        },
        Scenario {
            duration: Duration::from_secs(idle_s + 22),
            phases: vec![udp(idle_s, 20, 8, UDP_PPS)],
            steady: Duration::from_secs(10),
            ..base("idle-burst", "driver's placement, idle, then 8 UDP flows")
        },
        Scenario {
            events: vec![
                (10, "echo 0 > /sys/devices/system/cpu/cpu3/online"),
                (18, "echo 1 > /sys/devices/system/cpu/cpu3/online"),
            ],
            steady: Duration::from_secs(8),
            ..base(
                "hotplug",
                "driver's placement, CPU 3 offline at 10 s and back at 18 s, 8 UDP flows",
            )
        },
        Scenario {
            events: CHANNEL_CHANGES.to_vec(),
            steady: Duration::from_secs(8),
            ..base(
                "channels",
                "ethtool -L eth0 combined 2 at 10 s, 4 at 18 s, 8 UDP flows",
            )
        },
        Scenario {
            vm: VmSpec {
                cmdline: "isolcpus=3 nohz_full=3".into(),
                ..VmSpec::default()
            },
            hand_cpus: "0 1 2".into(),
            ..base(
                "isolated",
                "isolcpus=3 nohz_full=3, driver's placement (queue 3 on CPU 3), 8 UDP flows",
            )
        },
        Scenario {
            vm: VmSpec {
                blk_queues: Some(4),
                ..VmSpec::default()
            },
            ..base(
                "managed",
                "virtio-blk num-queues=4 beside the NIC (kernel-managed vectors), 8 UDP flows",
            )
        },
        Scenario {
            vm: VmSpec {
                numa: true,
                ..VmSpec::default()
            },
            setup: "pin_inputs 0".into(),
            hand_cpus: "2 3".into(),
            ..base(
                "numa",
                "2 nodes, NIC on node 1 (CPUs 2-3), every input on CPU0, 8 UDP flows",
            )
        },
        Scenario {
            events: vec![(10, "kill -9 $BPID; sleep 1; start_balancer")],
            setup: "pin_inputs 0".into(),
            ..base(
                "kill9",
                "every input on CPU0, the balancer killed with -9 at 10 s and restarted, 8 UDP flows",
            )
        },
        Scenario {
            setup: format!("{THREADED_ON}; pin_inputs 0"),
            spread: true,
            threaded: true,
            ..base(
                "threaded-cpu0",
                "threaded NAPI on, every input vector on CPU0, 8 UDP flows",
            )
        },
        Scenario {
            setup: THREADED_ON.into(),
            spread: true,
            threaded: true,
            ..base(
                "threaded-defaults",
                "threaded NAPI on, the driver's placement (queue N on CPU N), 8 UDP flows",
            )
        },
        Scenario {
            events: vec![(10, "kill -9 $BPID; sleep 1; start_balancer")],
            setup: format!("{THREADED_ON}; pin_inputs 0"),
            threaded: true,
            ..base(
                "threaded-kill9",
                "threaded NAPI on, every input on CPU0, the balancer killed with -9 at 10 s and restarted, 8 UDP flows",
            )
        },
        Scenario {
            // `steerd doctor` under traffic on the machine as it comes with every input
            // vector on CPU0 (issue 17): its findings on a real virtio-net.
            events: vec![(8, "run_doctor")],
            setup: "pin_inputs 0".into(),
            duration: Duration::from_secs(20),
            phases: vec![udp(1, 18, 8, UDP_PPS)],
            steady: Duration::from_secs(6),
            ..base(
                "doctor",
                "every input on CPU0, steerd doctor run at 8 s under 8 UDP flows",
            )
        },
        Scenario {
            // `steerd doctor` on a NIC whose RSS hashes UDP on addresses only (as many
            // drivers do by default), set with ethtool on virtio-net with `rss=on`. The
            // driver hands the hash fields to the device only with `rxhash` on.
            vm: VmSpec {
                rss: true,
                ..VmSpec::default()
            },
            events: vec![(8, "run_doctor")],
            setup: "ethtool -K eth0 rxhash on; ethtool -N eth0 rx-flow-hash udp4 sd".into(),
            duration: Duration::from_secs(20),
            phases: vec![udp(1, 18, 8, UDP_PPS)],
            steady: Duration::from_secs(6),
            ..base(
                "doctor-udp",
                "rss=on, UDP hashed on addresses only, steerd doctor run at 8 s under 8 UDP flows",
            )
        },
        Scenario {
            // The guest's kernel removes the NIC's PCI function under traffic (its IRQs and
            // queue files vanish, as when a device is unplugged) and finds it again on a
            // rescan, with the driver's placement; the interface is then configured again.
            events: vec![(10, NIC_REMOVE), (14, NIC_RESCAN)],
            setup: "pin_inputs 0".into(),
            steady: Duration::from_secs(8),
            ..base(
                "nic-remove",
                "every input on CPU0, the NIC's PCI function removed at 10 s and found again at 14 s, 8 UDP flows",
            )
        },
        super::rss::skew(RSS_SECS),
        super::rss::elephant(RSS_SECS),
        super::rss::threaded(RSS_SECS),
        super::rss::igb(RSS_SECS),
        super::rss_notify::scenario(RSS_SECS),
        super::faults::offline_in_flight(),
        super::faults::removal_in_flight(),
    ]
    .into_iter()
    .chain(super::saturation::all(idle, RSS_SECS))
    .chain(super::isolation::all())
    .chain(super::xps::all())
    .chain(super::tuned::all())
    .chain([super::second_balancer::scenario()])
    .chain([super::busy_poll::scenario()])
    .chain([super::napi_switch::scenario()])
    .collect()
}

/// The scenario's guest environment for one balancer.
pub fn guest_env(s: &Scenario, balancer: Balancer, modules: &[String], nic: Nic) -> String {
    let mut setup = s.setup.clone();
    let daemon = match balancer {
        Balancer::Hand => {
            let hand = if s.hand_rps {
                "hand_place; hand_rps"
            } else {
                "hand_place"
            };
            setup = if setup.is_empty() {
                hand.into()
            } else {
                format!("{setup}; {hand}")
            };
            "none"
        }
        other => other.name(),
    };
    // One listener per port, however many phases use it (the soak's TCP phase recurs).
    let tcp: std::collections::BTreeSet<u16> = s
        .phases
        .iter()
        .flat_map(|p| p.tcp_ports.iter().copied())
        .collect();
    let tcp: Vec<String> = tcp.iter().map(u16::to_string).collect();
    let events: Vec<String> = s
        .events
        .iter()
        .map(|(at, cmd)| format!("{at} {cmd}"))
        .collect();
    let events = events.join("\n");
    let quote = |v: &str| format!("'{}'", v.replace('\'', r"'\''"));
    format!(
        "MODULES={}\nGUEST_ADDR={}\nHOST_ADDR={}\nHOST_MAC={}\nTCP_PORTS={}\nBALANCER={daemon}\n\
         SETUP={}\nEVENTS={}\nHAND_CPUS={}\nDURATION={}\nPERIOD={}\nSTEERD_ARGS={}\n\
         DAEMON_STATS={}\nRSS_WATCH={}\nQUEUE_WATCH={}\nNIC={}\nNIC_SETUP={}\nNIC_PREPARE={}\nGUEST_MAC={}\n",
        quote(&modules.join(" ")),
        super::netns::GUEST_ADDR,
        super::netns::HOST_ADDR,
        super::netns::HOST_MAC,
        quote(&tcp.join(" ")),
        quote(&setup),
        quote(&events),
        quote(&s.hand_cpus),
        s.duration.as_secs(),
        s.period,
        quote(&s.steerd_args),
        u8::from(s.daemon_stats),
        u8::from(s.rss_watch),
        u8::from(s.samples_queues()),
        nic.name(),
        quote(nic.guest_setup()),
        quote(nic.guest_prepare()),
        super::netns::GUEST_MAC,
    )
}
