//! Prometheus metrics: what steerd sees and what it did, under the `steerd_` prefix.
//!
//! One registry (prometheus-client), encoded as OpenMetrics text at `/metrics`. The
//! reference with every metric's meaning is `docs/metrics.md`; a test keeps the two in
//! step. Per-CPU and per-IRQ series are replaced wholesale when the machine changes, so a
//! vanished IRQ does not leave a stale series behind.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::apply::FailureKind;
use crate::policy::ReasonKind;

/// The default metrics address: loopback only, on a port no well-known exporter uses
/// (node_exporter 9100, process-exporter 9256, ... — see the Prometheus default port
/// allocations page; 9847 was unallocated there).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9847";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CpuLabels {
    pub cpu: u32,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IrqLabels {
    pub irq: u32,
    pub device: String,
    pub queue: String,
    pub role: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    pub device: String,
    pub queue: u32,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UdpHashLabels {
    pub device: String,
    /// `udp4` or `udp6`.
    pub family: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RssStepLabels {
    pub device: String,
    /// `taken` (a step written), `kept` or `reverted` (a move of a judged step).
    pub verdict: String,
}

/// The `verdict` label values of `steerd_rss_steps_total`.
pub const RSS_STEP_VERDICTS: [&str; 3] = ["taken", "kept", "reverted"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    pub action: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteErrorLabels {
    pub kind: String,
    pub errno: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: String,
}

/// The `reason` label of `steerd_rediscoveries_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
}

pub type FloatGauge = Gauge<f64, AtomicU64>;

/// One online CPU's load gauges, looked up in their families once (when the CPU set is
/// known) so that a tick only stores four atomics instead of hashing a label set and
/// taking the family's lock per series.
pub struct CpuLoadGauges {
    pub cpu: u32,
    pub processed: FloatGauge,
    pub dropped: FloatGauge,
    pub squeezed: FloatGauge,
    pub softirq_share: FloatGauge,
}

/// Every metric steerd exports.
pub struct Metrics {
    registry: Registry,
    pub cpu_processed: Family<CpuLabels, FloatGauge>,
    pub cpu_dropped: Family<CpuLabels, FloatGauge>,
    pub cpu_squeezed: Family<CpuLabels, FloatGauge>,
    pub cpu_softirq_share: Family<CpuLabels, FloatGauge>,
    pub irq_effective_cpu: Family<IrqLabels, Gauge>,
    pub rx_queue_rps_cpus: Family<QueueLabels, Gauge>,
    pub rss_table_entries: Family<QueueLabels, Gauge>,
    pub rss_steps: Family<RssStepLabels, Counter>,
    pub udp_hash_addresses_only: Family<UdpHashLabels, Gauge>,
    pub actions: Family<ActionLabels, Counter>,
    pub write_errors: Family<WriteErrorLabels, Counter>,
    pub config_reloads: Family<ResultLabels, Counter>,
    pub irq_move_checks: Family<ResultLabels, Counter>,
    pub rediscoveries: Family<ReasonLabels, Counter>,
    pub tick_duration: Histogram,
    pub ticks: Counter,
    pub ticks_skipped: Counter,
    pub sampling_failures: Counter,
    pub unmanageable_irqs: Gauge,
    pub observe_only: Gauge,
    pub external_changes: Counter,
    pub quiet_mode: Gauge,
    pub quiet_mode_available: Gauge,
    pub quiet_receive_wakeups: Counter,
}

/// The tick-duration histogram's bounds: 10 µs times 4^i for i in 0..11 (10 µs .. ~10 s),
/// the same values as prometheus-client's `exponential_buckets(0.00001, 4.0, 11)`.
///
/// Computed by multiplying with exact powers of two instead, because
/// `exponential_buckets` calls `f64::powf`, which LLVM turns into glibc's `exp2`: that one
/// call was steerd's only use of libm, and loading libm.so.6 cost 380-540 kB of RSS
/// (its text and tables, faulted in 64 kB at a time; `scripts/memory.sh`). Without it
/// the linker (`--as-needed`) drops libm. Scaling by 4^i = 2^(2i) is exact, so each bound,
/// and the `le` label printed from it, is bit for bit what it was
/// (`tests::tick_duration_buckets_are_the_exponential_ones`).
fn tick_duration_buckets() -> impl Iterator<Item = f64> {
    (0..11u32).map(|i| 0.00001 * f64::from(1u32 << (2 * i)))
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("steerd");
        let metrics = Metrics {
            cpu_processed: Family::default(),
            cpu_dropped: Family::default(),
            cpu_squeezed: Family::default(),
            cpu_softirq_share: Family::default(),
            irq_effective_cpu: Family::default(),
            rx_queue_rps_cpus: Family::default(),
            rss_table_entries: Family::default(),
            rss_steps: Family::default(),
            udp_hash_addresses_only: Family::default(),
            actions: Family::default(),
            write_errors: Family::default(),
            config_reloads: Family::default(),
            irq_move_checks: Family::default(),
            rediscoveries: Family::default(),
            tick_duration: Histogram::new(tick_duration_buckets()),
            ticks: Counter::default(),
            ticks_skipped: Counter::default(),
            sampling_failures: Counter::default(),
            unmanageable_irqs: Gauge::default(),
            observe_only: Gauge::default(),
            external_changes: Counter::default(),
            quiet_mode: Gauge::default(),
            quiet_mode_available: Gauge::default(),
            quiet_receive_wakeups: Counter::default(),
            registry: Registry::default(),
        };
        registry.register(
            "cpu_softnet_processed_per_second",
            "Packets processed per second on the CPU (softnet_stat processed; rises at once, falls smoothed)",
            metrics.cpu_processed.clone(),
        );
        registry.register(
            "cpu_softnet_dropped_per_second",
            "Packets dropped per second because the CPU's backlog was full (last interval)",
            metrics.cpu_dropped.clone(),
        );
        registry.register(
            "cpu_softnet_squeezed_per_second",
            "NET_RX runs per second that ran out of budget or time (time_squeeze, last interval)",
            metrics.cpu_squeezed.clone(),
        );
        registry.register(
            "cpu_softirq_share",
            "Share of the CPU's time spent in hard and soft interrupts, 0 to 1 (smoothed)",
            metrics.cpu_softirq_share.clone(),
        );
        registry.register(
            "irq_effective_cpu",
            "CPU an IRQ is delivered to (lowest CPU of effective_affinity)",
            metrics.irq_effective_cpu.clone(),
        );
        registry.register(
            "rx_queue_rps_cpus",
            "Number of CPUs in a receive queue's RPS mask (0 = RPS off)",
            metrics.rx_queue_rps_cpus.clone(),
        );
        registry.register(
            "rss_table_entries",
            "RSS indirection table entries (default context) that send to the receive queue",
            metrics.rss_table_entries.clone(),
        );
        registry.register(
            "rss_steps",
            "RSS table lever: steps written (taken), and moves of judged steps kept or reverted",
            metrics.rss_steps.clone(),
        );
        registry.register(
            "udp_hash_addresses_only",
            "1 for a NIC with an RSS table that hashes the UDP family on IP addresses only (no ports)",
            metrics.udp_hash_addresses_only.clone(),
        );
        registry.register(
            "actions",
            "Changes applied, by action and reason",
            metrics.actions.clone(),
        );
        registry.register(
            "write_errors",
            "Failed writes, by kind and errno",
            metrics.write_errors.clone(),
        );
        registry.register(
            "config_reloads",
            "Configuration reloads (SIGHUP, or a changed file with --watch-config), by result (ok, error)",
            metrics.config_reloads.clone(),
        );
        registry.register(
            "irq_move_checks",
            "Checked moves of queue vectors whose queue carried work, by result (took_effect, no_effect, took_effect_late, unknown)",
            metrics.irq_move_checks.clone(),
        );
        registry.register(
            "rediscoveries",
            "Times steerd read the machine's devices, IRQs and queues again, by what made it (a kernel notification, a write's finding, the periodic read)",
            metrics.rediscoveries.clone(),
        );
        registry.register(
            "tick_duration_seconds",
            "Time one tick took: sample, decide, apply",
            metrics.tick_duration.clone(),
        );
        // Every counter series whose labels are known in advance exists from the start,
        // so an alert or a dashboard's increase() on the first failed reload, write error
        // or action sees a rise from 0 rather than a new series.
        for result in ["ok", "error"] {
            drop(metrics.config_reloads.get_or_create(&ResultLabels {
                result: result.to_string(),
            }));
        }
        for result in crate::engine::MoveEffect::LABELS {
            drop(metrics.irq_move_checks.get_or_create(&ResultLabels {
                result: result.to_string(),
            }));
        }
        for reason in crate::daemon::rediscovery::Rediscovery::ALL {
            drop(metrics.rediscoveries.get_or_create(&ReasonLabels {
                reason: reason.label().to_string(),
            }));
        }
        for reason in ReasonKind::ALL {
            for action in reason.knob_kinds() {
                drop(metrics.actions.get_or_create(&ActionLabels {
                    action: (*action).to_string(),
                    reason: reason.as_str().to_string(),
                }));
            }
        }
        for (kind, errno) in FailureKind::label_pairs() {
            drop(metrics.write_errors.get_or_create(&WriteErrorLabels {
                kind: kind.to_string(),
                errno,
            }));
        }
        registry.register("ticks", "Ticks run", metrics.ticks.clone());
        registry.register(
            "idle_ticks",
            "Ticks on which nothing could change, so the policy did not run",
            metrics.ticks_skipped.clone(),
        );
        registry.register(
            "sampling_failures",
            "Ticks skipped because the counters could not be read (the log names the file)",
            metrics.sampling_failures.clone(),
        );
        registry.register(
            "unmanageable_irqs",
            "IRQs of network devices that user space cannot move (kernel-managed)",
            metrics.unmanageable_irqs.clone(),
        );
        registry.register(
            "quiet_mode",
            "1 while steerd ticks every quiet.interval and waits for the kernel's NAPI polls to wake it",
            metrics.quiet_mode.clone(),
        );
        registry.register(
            "quiet_mode_available",
            "1 when quiet mode is enabled and its perf events could be opened (or were not tried yet), else 0",
            metrics.quiet_mode_available.clone(),
        );
        registry.register(
            "quiet_receive_wakeups",
            "Times receive work (NAPI polls) woke steerd out of quiet mode",
            metrics.quiet_receive_wakeups.clone(),
        );
        registry.register(
            "observe_only",
            "1 when steerd cannot or may not write (dry run, no permission), else 0",
            metrics.observe_only.clone(),
        );
        registry.register(
            "external_changes",
            "Values found changed by someone else since steerd wrote them",
            metrics.external_changes.clone(),
        );
        // A gauge fixed at 1 rather than an OpenMetrics `info`: the classic Prometheus
        // text parsers (promtool check metrics) do not know the `info` type.
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_string(),
            })
            .set(1);
        registry.register(
            "build_info",
            "steerd build information (always 1)",
            build_info,
        );
        Metrics {
            registry,
            ..metrics
        }
    }

    /// The load gauges of `cpus`, each created in its family if new. They share their
    /// value with the family's series: setting one is what the next scrape shows.
    pub fn cpu_load_gauges(&self, cpus: impl IntoIterator<Item = u32>) -> Vec<CpuLoadGauges> {
        cpus.into_iter()
            .map(|cpu| {
                let labels = CpuLabels { cpu };
                CpuLoadGauges {
                    cpu,
                    processed: self.cpu_processed.get_or_create(&labels).clone(),
                    dropped: self.cpu_dropped.get_or_create(&labels).clone(),
                    squeezed: self.cpu_squeezed.get_or_create(&labels).clone(),
                    softirq_share: self.cpu_softirq_share.get_or_create(&labels).clone(),
                }
            })
            .collect()
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// The classic Prometheus text exposition (format 0.0.4), for clients that do not ask
    /// for OpenMetrics: the same samples, with counters' HELP and TYPE named like their
    /// `_total` samples and no `# EOF`/`# UNIT` lines, as promtool and older scrapers expect.
    pub fn encode_classic(&self) -> String {
        to_classic(&self.encode())
    }

    /// Counts an applied action.
    pub fn count_action(&self, action: &str, reason: &str) {
        self.actions
            .get_or_create(&ActionLabels {
                action: action.to_string(),
                reason: reason.to_string(),
            })
            .inc();
    }

    /// Counts a failed write.
    pub fn count_write_error(&self, kind: &str, errno: &str) {
        self.write_errors
            .get_or_create(&WriteErrorLabels {
                kind: kind.to_string(),
                errno: errno.to_string(),
            })
            .inc();
    }

    /// Counts a configuration reload.
    pub fn count_reload(&self, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.config_reloads
            .get_or_create(&ResultLabels {
                result: result.to_string(),
            })
            .inc();
    }
}

/// Rewrites an OpenMetrics text exposition into the classic text format.
fn to_classic(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let rest = line
            .strip_prefix("# HELP ")
            .map(|r| ("# HELP ", r))
            .or_else(|| line.strip_prefix("# TYPE ").map(|r| ("# TYPE ", r)));
        match rest {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(prefix);
                out.push_str(name);
                if counters.contains(name) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_duration_buckets_are_the_exponential_ones() {
        let ours: Vec<u64> = tick_duration_buckets().map(f64::to_bits).collect();
        let theirs: Vec<u64> =
            prometheus_client::metrics::histogram::exponential_buckets(0.00001, 4.0, 11)
                .map(f64::to_bits)
                .collect();
        assert_eq!(ours, theirs);
    }

    #[test]
    fn exposition_has_the_prefix_and_eof() {
        let metrics = Metrics::new();
        metrics
            .cpu_processed
            .get_or_create(&CpuLabels { cpu: 1 })
            .set(12.5);
        metrics.count_action("rps_cpus", "rps_on");
        metrics.count_write_error("managed", "EPERM");
        metrics.count_reload(false);
        metrics.tick_duration.observe(0.0001);
        let text = metrics.encode();
        assert!(
            text.contains("steerd_cpu_softnet_processed_per_second{cpu=\"1\"} 12.5"),
            "{text}"
        );
        assert!(text.contains("steerd_actions_total{action=\"rps_cpus\",reason=\"rps_on\"} 1"));
        assert!(text.contains("steerd_write_errors_total{kind=\"managed\",errno=\"EPERM\"} 1"));
        assert!(text.contains("steerd_config_reloads_total{result=\"error\"} 1"));
        assert!(text.contains("steerd_build_info{version=\""));
        assert!(text.trim_end().ends_with("# EOF"));
        let classic = metrics.encode_classic();
        assert!(
            classic.contains("# TYPE steerd_actions_total counter\n"),
            "{classic}"
        );
        assert!(classic.contains("# HELP steerd_actions_total Changes applied"));
        assert!(classic.contains("# TYPE steerd_tick_duration_seconds histogram"));
        assert!(!classic.contains("# EOF"));
    }
}

#[cfg(test)]
mod reference {
    use super::*;

    /// A fresh registry holds every action and write-error series at 0, and docs/metrics.md
    /// names every label value they carry (and only values steerd emits).
    #[test]
    fn known_series_start_at_zero_and_their_label_values_are_documented() {
        let docs = include_str!("../docs/metrics.md");
        let row = |name: &str| {
            docs.lines()
                .find(|l| l.starts_with(&format!("| `{name}`")))
                .unwrap_or_else(|| panic!("no row for {name}"))
                .to_string()
        };
        let text = Metrics::new().encode();
        let actions = row("steerd_actions_total");
        for reason in ReasonKind::ALL {
            assert!(
                actions.contains(&format!("`{}`", reason.as_str())),
                "{reason:?}"
            );
            for action in reason.knob_kinds() {
                assert!(actions.contains(&format!("`{action}`")), "{action}");
                let series = format!(
                    "steerd_actions_total{{action=\"{action}\",reason=\"{}\"}} 0",
                    reason.as_str()
                );
                assert!(text.contains(&series), "{series} not in:\n{text}");
            }
        }
        let errors = row("steerd_write_errors_total");
        for (kind, errno) in FailureKind::label_pairs() {
            assert!(errors.contains(&format!("`{kind}`")), "{kind}");
            assert!(errors.contains(&format!("`{errno}`")), "{errno}");
            let series =
                format!("steerd_write_errors_total{{kind=\"{kind}\",errno=\"{errno}\"}} 0");
            assert!(text.contains(&series), "{series} not in:\n{text}");
        }
        let rediscoveries = row("steerd_rediscoveries_total");
        for reason in crate::daemon::rediscovery::Rediscovery::ALL {
            assert!(
                rediscoveries.contains(&format!("`{}`", reason.label())),
                "{reason:?}"
            );
            let series = format!(
                "steerd_rediscoveries_total{{reason=\"{}\"}} 0",
                reason.label()
            );
            assert!(text.contains(&series), "{series} not in:\n{text}");
        }
        for stale in ["move_irq", "cpu_hot"] {
            assert!(
                !docs.contains(stale),
                "docs/metrics.md names {stale}, never emitted"
            );
        }
    }

    /// Every metric family in the exposition is documented in docs/metrics.md.
    #[test]
    fn docs_name_every_metric() {
        let docs = include_str!("../docs/metrics.md");
        let metrics = Metrics::new();
        metrics.count_action("a", "b");
        metrics.count_write_error("a", "b");
        metrics.count_reload(true);
        for family in [
            &metrics.cpu_processed,
            &metrics.cpu_dropped,
            &metrics.cpu_squeezed,
            &metrics.cpu_softirq_share,
        ] {
            family.get_or_create(&CpuLabels { cpu: 0 }).set(1.0);
        }
        let irq = IrqLabels {
            irq: 1,
            device: "eth0".into(),
            queue: "0".into(),
            role: "rxtx".into(),
        };
        metrics.irq_effective_cpu.get_or_create(&irq).set(0);
        let queue = QueueLabels {
            device: "eth0".into(),
            queue: 0,
        };
        metrics.rx_queue_rps_cpus.get_or_create(&queue).set(0);
        metrics.rss_table_entries.get_or_create(&queue).set(0);
        metrics
            .udp_hash_addresses_only
            .get_or_create(&UdpHashLabels {
                device: "eth0".into(),
                family: "udp4".into(),
            })
            .set(1);
        metrics
            .rss_steps
            .get_or_create(&RssStepLabels {
                device: "eth0".into(),
                verdict: "taken".into(),
            })
            .inc();
        let text = metrics.encode();
        let families: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert!(families.len() >= 14, "{families:?}");
        for family in families {
            let documented = [
                family.to_string(),
                format!("{family}_total"),
                format!("{family}_info"),
            ]
            .iter()
            .any(|name| docs.contains(&format!("`{name}`")));
            assert!(documented, "{family} is not in docs/metrics.md");
        }
    }
}
