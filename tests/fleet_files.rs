//! The fleet files under `packaging/` hold what they promise, against the real steerd:
//!
//! * the Prometheus rules pass `promtool check rules`, and `promtool test rules` runs the
//!   unit tests, which show every alert firing and not firing;
//! * the Grafana dashboard parses, has the panels and variables docs/operations.md
//!   describes, and its queries are valid PromQL;
//! * every `steerd_*` name used by the dashboard, the rules and the rules' unit tests is
//!   one the binary really serves: the names come from the `/metrics` of a running
//!   `steerd run` on a generated tree, made to act, reload (well and badly) and fail a
//!   write, so that every family has a sample;
//! * the Kubernetes DaemonSet parses and has the pod settings steerd needs (privileged,
//!   host network, own PID namespace, host /sys, ConfigMap at /etc/steerd followed with
//!   `--watch-config`, state on the host, metrics port and probes, a pinned image), its
//!   arguments parse with steerd's own command line, its ConfigMap passes steerd's config
//!   check, and its memory limit covers steerd's peak RSS on the 1152-CPU tree.
//!
//! `promtool` comes with Debian's `prometheus` package (`PROMTOOL` overrides the path);
//! without it the promtool parts print why they are skipped and the rest still runs.

mod common;
mod daemon_support;

use std::collections::BTreeSet;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use common::suite::{TestResult, skip};
use daemon_support::{Steerd, wait_until};
use nix::sys::signal::Signal;
use serde::Deserialize;
use serde_json::Value as Json;
use steerd::fakeroot::{FakeMachine, FakeNic};
use yaml_serde::Value as Yaml;

const RULES: &str = "packaging/prometheus/steerd-rules.yml";
const RULES_TEST: &str = "packaging/prometheus/steerd-rules.test.yml";
const DASHBOARD: &str = "packaging/grafana/steerd.json";
const DAEMONSET: &str = "packaging/kubernetes/steerd-daemonset.yaml";
const WAIT: Duration = Duration::from_secs(20);

fn repo_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

fn read(relative: &str) -> String {
    fs::read_to_string(repo_file(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

fn yaml(relative: &str) -> Yaml {
    yaml_serde::from_str(&read(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

fn dashboard() -> Json {
    serde_json::from_str(&read(DASHBOARD)).unwrap_or_else(|e| panic!("{DASHBOARD}: {e}"))
}

fn promtool() -> PathBuf {
    std::env::var_os("PROMTOOL").map_or_else(|| PathBuf::from("promtool"), PathBuf::from)
}

/// `Ok` when promtool runs; a skip saying why not (and what was not checked) otherwise.
fn have_promtool(skipped: &str) -> TestResult {
    match Command::new(promtool()).arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => panic!(
            "{} --version failed: {}",
            promtool().display(),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) if e.kind() == ErrorKind::NotFound => skip(format!(
            "{} not found (Debian: apt-get install prometheus); {skipped}",
            promtool().display()
        )),
        Err(e) => panic!("cannot run {}: {e}", promtool().display()),
    }
}

/// Runs `promtool ARGS` in `dir`; panics with its output when it fails.
fn run_promtool(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(promtool())
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run promtool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool {} failed ({}):\n{text}",
        args.join(" "),
        out.status
    );
    text
}

// ---------------------------------------------------------------------------------------
// PromQL text: the steerd metric names an expression uses.

/// Every `steerd_...` identifier in `text` (a PromQL expression or a series selector).
fn steerd_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(found) = text[at..].find("steerd_") {
        let start = at + found;
        let preceded_by_ident = start > 0 && is_ident(bytes[start - 1]);
        let end = start + text[start..].bytes().take_while(|&b| is_ident(b)).count();
        if !preceded_by_ident {
            names.insert(text[start..end].to_string());
        }
        at = end;
    }
    names
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b':'
}

fn steerd_names_finds_metric_identifiers_only() {
    let names = steerd_names(
        r#"sum by (le) (rate(steerd_tick_duration_seconds_bucket{job="steerd"}[5m])) / x_steerd_no"#,
    );
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        vec!["steerd_tick_duration_seconds_bucket"]
    );
}

// ---------------------------------------------------------------------------------------
// The rules.

/// `(alert name, expression)` of every alerting rule.
fn alerts() -> Vec<(String, String)> {
    let rules = yaml(RULES);
    let mut alerts = Vec::new();
    for group in rules["groups"].as_sequence().expect("groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            let name = rule["alert"].as_str().expect("only alerting rules");
            let expr = rule["expr"].as_str().expect("expr");
            alerts.push((name.to_string(), expr.to_string()));
        }
    }
    alerts
}

fn the_rules_promise_what_the_issue_asks() {
    let names: BTreeSet<String> = alerts().into_iter().map(|(name, _)| name).collect();
    for alert in [
        "SteerdDown",
        "SteerdAbsent",
        "SteerdPacketDropsSustained",
        "SteerdCpuSoftirqSaturated",
        "SteerdWriteErrors",
        "SteerdConfigReloadFailed",
    ] {
        assert!(names.contains(alert), "no {alert} alert in {RULES}");
    }
    for (name, expr) in alerts() {
        let rule_text = read(RULES);
        assert!(
            rule_text.contains(&format!("alert: {name}")),
            "{name} not found by text"
        );
        assert!(
            expr.contains("steerd") || expr.contains("up{"),
            "{name}: {expr}"
        );
    }
}

/// Every alert has a unit test where it fires and one where it does not.
fn every_alert_has_a_firing_and_a_quiet_unit_test() {
    let tests = yaml(RULES_TEST);
    let mut fires = BTreeSet::new();
    let mut quiet = BTreeSet::new();
    for test in tests["tests"].as_sequence().expect("tests") {
        for case in test["alert_rule_test"].as_sequence().into_iter().flatten() {
            let name = case["alertname"].as_str().expect("alertname").to_string();
            let expected = case["exp_alerts"].as_sequence().map_or(0, Vec::len);
            if expected > 0 {
                fires.insert(name);
            } else {
                quiet.insert(name);
            }
        }
    }
    for (name, _) in alerts() {
        assert!(
            fires.contains(&name),
            "{RULES_TEST}: {name} is never shown firing"
        );
        assert!(
            quiet.contains(&name),
            "{RULES_TEST}: {name} is never shown quiet"
        );
    }
}

fn promtool_checks_and_tests_the_rules() -> TestResult {
    have_promtool("the rules were neither checked nor unit-tested")?;
    let dir = repo_file("packaging/prometheus");
    let checked = run_promtool(&dir, &["check", "rules", "steerd-rules.yml"]);
    assert!(checked.contains("SUCCESS"), "{checked}");
    let tested = run_promtool(&dir, &["test", "rules", "steerd-rules.test.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The dashboard.

/// Every panel, rows' nested panels included.
fn panels(dashboard: &Json) -> Vec<&Json> {
    let mut all = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        all.push(panel);
        for inner in panel["panels"].as_array().into_iter().flatten() {
            all.push(inner);
        }
    }
    all
}

fn exprs(panel: &Json) -> Vec<&str> {
    panel["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["expr"].as_str())
        .collect()
}

/// The dashboard's queries, as Prometheus would receive them.
fn dashboard_queries(dashboard: &Json) -> Vec<(String, String)> {
    let mut queries = Vec::new();
    for panel in panels(dashboard) {
        let title = panel["title"].as_str().unwrap_or("?");
        for expr in exprs(panel) {
            queries.push((
                title.to_string(),
                expr.replace("$__rate_interval", "2m")
                    .replace("$instance", ".+"),
            ));
        }
    }
    queries
}

/// The variable queries (`label_values(metric, label)`), which name metrics too.
fn variable_queries(dashboard: &Json) -> Vec<String> {
    dashboard["templating"]["list"]
        .as_array()
        .expect("templating.list")
        .iter()
        .filter_map(|v| {
            v["definition"]
                .as_str()
                .or_else(|| v["query"]["query"].as_str())
                .map(str::to_string)
        })
        .collect()
}

fn dashboard_has_the_promised_panels_and_variables() {
    let dashboard = dashboard();
    assert_eq!(dashboard["uid"], "steerd-overview");
    assert!(dashboard["schemaVersion"].as_u64().unwrap() >= 36);

    // A data source variable every query panel uses, and an instance variable.
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    let variable = |name: &str| {
        variables
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no ${name} variable"))
    };
    assert_eq!(variable("DS_PROMETHEUS")["type"], "datasource");
    assert_eq!(variable("DS_PROMETHEUS")["query"], "prometheus");
    let instance = variable("instance");
    assert_eq!(instance["type"], "query");
    assert_eq!(instance["datasource"]["uid"], "${DS_PROMETHEUS}");
    assert!(
        instance["definition"]
            .as_str()
            .unwrap()
            .contains("instance)")
    );

    let all = panels(&dashboard);
    let mut ids = BTreeSet::new();
    for panel in &all {
        let title = panel["title"].as_str().expect("every panel has a title");
        assert!(ids.insert(panel["id"].as_u64().expect("id")), "id reused");
        assert!(panel["gridPos"]["w"].as_u64().is_some(), "{title}: gridPos");
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(
            panel["datasource"]["uid"], "${DS_PROMETHEUS}",
            "{title}: data source"
        );
        let exprs = exprs(panel);
        assert!(!exprs.is_empty(), "{title}: no query");
        for (target, expr) in panel["targets"].as_array().unwrap().iter().zip(&exprs) {
            assert_eq!(target["datasource"]["uid"], "${DS_PROMETHEUS}", "{title}");
            assert!(
                expr.contains("instance=~\"$instance\""),
                "{title}: {expr} ignores $instance"
            );
        }
    }

    // The panels the issue and the brief promise, found by what they query.
    let find = |what: &str, wanted: &dyn Fn(&Json, &str) -> bool| {
        all.iter()
            .find(|p| exprs(p).iter().any(|e| wanted(p, e)))
            .unwrap_or_else(|| panic!("no panel shows {what}"))
    };
    find("per-CPU softirq share", &|_, e| {
        e.contains("steerd_cpu_softirq_share")
    });
    find("per-CPU processed rate", &|_, e| {
        e.contains("steerd_cpu_softnet_processed_per_second")
    });
    find("drops", &|_, e| {
        e.contains("steerd_cpu_softnet_dropped_per_second")
    });
    find("squeezes", &|_, e| {
        e.contains("steerd_cpu_softnet_squeezed_per_second")
    });
    find("actions over time by reason", &|p, e| {
        p["type"] == "timeseries" && e.contains("steerd_actions_total") && e.contains("reason")
    });
    let placement = find("the IRQ placement table", &|p, e| {
        p["type"] == "table" && e.contains("steerd_irq_effective_cpu")
    });
    let target = &placement["targets"][0];
    assert_eq!(target["format"], "table");
    assert_eq!(target["instant"], true);
    let shown = &placement["transformations"][0]["options"]["indexByName"];
    for column in ["irq", "device", "queue", "role"] {
        assert!(
            shown.get(column).is_some(),
            "placement table lacks {column}"
        );
    }
    find("RPS CPUs per queue", &|_, e| {
        e.contains("steerd_rx_queue_rps_cpus")
    });
    find("reloads", &|_, e| e.contains("steerd_config_reloads_total"));
    find("write errors", &|_, e| {
        e.contains("steerd_write_errors_total")
    });
    find("tick duration", &|_, e| {
        e.contains("steerd_tick_duration_seconds_bucket")
    });
}

/// The dashboard's queries are valid PromQL: promtool checks them as recording rules.
fn dashboard_queries_are_valid_promql() -> TestResult {
    have_promtool("the dashboard's PromQL was not checked")?;
    let dashboard = dashboard();
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (index, (title, expr)) in dashboard_queries(&dashboard).iter().enumerate() {
        rules.push_str(&format!(
            "      # {title}\n      - record: dashboard:query_{index}\n        expr: {}\n",
            serde_json::to_string(expr).unwrap()
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("dashboard-queries.yml"), &rules).unwrap();
    run_promtool(dir.path(), &["check", "rules", "dashboard-queries.yml"]);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Every metric name used exists.

/// The metric names in an exposition: every sample's name and every `# TYPE`d family.
fn exposed_names(exposition: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in exposition.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some(name) = rest.split_whitespace().next() {
                names.insert(name.to_string());
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_string());
        }
    }
    names
}

/// Runs the real daemon on a generated tree and makes every metric family have a sample:
/// it places IRQs (actions), reloads a good and a bad configuration, and fails a write
/// (a vanished `smp_affinity_list`). Returns the last exposition.
fn exposition_with_every_family() -> String {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let mut machine = FakeMachine::new(4);
    machine.nics.push(FakeNic {
        name: "eth0".into(),
        driver: "ixgbe".into(),
        node: Some(0),
        queues: 2,
    });
    let tree = machine.write(&root).unwrap();
    let config = dir.path().join("steerd.yaml");
    fs::write(&config, "interval: 1s\n").unwrap();
    let daemon = Steerd::start(&root, Some(&config));
    daemon.wait_ticks(3);

    // The NIC's misc vector may fire anywhere ("0-3"): banning CPU 0 makes steerd rewrite
    // it at the next tick, and its file is gone by then.
    let misc = tree.misc_irqs[0];
    fs::remove_file(root.join(format!("proc/irq/{misc}/smp_affinity_list"))).unwrap();
    fs::write(&config, "interval: 1s\ncpus:\n  banned: \"0\"\n").unwrap();
    daemon.signal(Signal::SIGHUP);
    wait_until(
        WAIT,
        "a failed write and an accepted reload",
        Some(&daemon),
        || {
            daemon.metrics().contains("steerd_write_errors_total{")
                && daemon.metric("steerd_config_reloads_total{result=\"ok\"}") == Some(1.0)
        },
    );
    fs::write(&config, "interval: 1s\nbogus: true\n").unwrap();
    daemon.signal(Signal::SIGHUP);
    wait_until(WAIT, "a refused reload", Some(&daemon), || {
        daemon.metric("steerd_config_reloads_total{result=\"error\"}") == Some(1.0)
    });
    daemon.wait_ticks(2);
    daemon.metrics()
}

fn every_metric_name_used_is_one_steerd_exports() {
    let exposition = exposition_with_every_family();
    let exported = exposed_names(&exposition);
    // Every family steerd registers has a sample in this exposition, so a name missing
    // from it is a name steerd does not export (not one that happened to be empty).
    for family in [
        "steerd_cpu_softirq_share",
        "steerd_irq_effective_cpu",
        "steerd_rx_queue_rps_cpus",
        "steerd_actions_total",
        "steerd_write_errors_total",
        "steerd_config_reloads_total",
        "steerd_tick_duration_seconds_bucket",
    ] {
        assert!(
            exported.contains(family),
            "the test run did not make steerd export {family}:\n{exposition}"
        );
    }

    let mut used: Vec<(String, String)> = Vec::new();
    for (name, expr) in alerts() {
        used.extend(
            steerd_names(&expr)
                .into_iter()
                .map(|m| (format!("{RULES}: {name}"), m)),
        );
    }
    let tests = yaml(RULES_TEST);
    for test in tests["tests"].as_sequence().unwrap() {
        for series in test["input_series"].as_sequence().into_iter().flatten() {
            let selector = series["series"].as_str().unwrap();
            used.extend(
                steerd_names(selector)
                    .into_iter()
                    .map(|m| (format!("{RULES_TEST}: {selector}"), m)),
            );
        }
    }
    let dashboard = dashboard();
    for (title, expr) in dashboard_queries(&dashboard) {
        used.extend(
            steerd_names(&expr)
                .into_iter()
                .map(|m| (format!("{DASHBOARD}: {title}"), m)),
        );
    }
    for query in variable_queries(&dashboard) {
        used.extend(
            steerd_names(&query)
                .into_iter()
                .map(|m| (format!("{DASHBOARD}: variable {query}"), m)),
        );
    }
    assert!(used.len() > 20, "too few names found: {used:?}");
    let unknown: Vec<String> = used
        .iter()
        .filter(|(_, name)| !exported.contains(name))
        .map(|(place, name)| format!("{place}: {name}"))
        .collect();
    assert!(
        unknown.is_empty(),
        "names steerd does not export:\n{}\n--- exported ---\n{exported:#?}",
        unknown.join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// The DaemonSet.

/// The documents of the manifest, by kind.
fn manifest() -> Vec<Yaml> {
    let text = read(DAEMONSET);
    yaml_serde::Deserializer::from_str(&text)
        .map(|doc| Yaml::deserialize(doc).unwrap_or_else(|e| panic!("{DAEMONSET}: {e}")))
        .collect()
}

fn of_kind<'a>(docs: &'a [Yaml], kind: &str) -> &'a Yaml {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("{DAEMONSET}: no {kind}"))
}

fn strings(value: &Yaml) -> Vec<String> {
    value
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|v| v.as_str().expect("a string").to_string())
        .collect()
}

/// Parses a Kubernetes quantity of memory (`128Mi`, `1Gi`, `500M`) into bytes.
fn memory_bytes(quantity: &str) -> u64 {
    let split = quantity
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(quantity.len());
    let (number, unit) = quantity.split_at(split);
    let number: u64 = number.parse().expect("a number");
    let factor = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        other => panic!("unit {other}"),
    };
    number * factor
}

fn daemonset_container(docs: &[Yaml]) -> (&Yaml, &Yaml) {
    let daemonset = of_kind(docs, "DaemonSet");
    let pod = &daemonset["spec"]["template"]["spec"];
    let containers = pod["containers"].as_sequence().expect("containers");
    assert_eq!(containers.len(), 1, "one container");
    (pod, &containers[0])
}

fn daemonset_has_what_steerd_needs() {
    let docs = manifest();
    let daemonset = of_kind(&docs, "DaemonSet");
    assert_eq!(daemonset["apiVersion"], "apps/v1");
    let (pod, container) = daemonset_container(&docs);
    let labels = &daemonset["spec"]["template"]["metadata"]["labels"];
    for (key, value) in daemonset["spec"]["selector"]["matchLabels"]
        .as_mapping()
        .expect("selector")
    {
        assert_eq!(&labels[key.as_str().unwrap()], value, "selector matches");
    }

    // Privileged, host network, own PID namespace.
    assert_eq!(container["securityContext"]["privileged"], true);
    assert_eq!(pod["hostNetwork"], true);
    assert!(
        pod.get("hostPID").is_none() || pod["hostPID"] == false,
        "hostPID must be off"
    );

    // Mounts: the host's /sys at /sys; /proc is the container's own (see the manifest's
    // comment: under hostNetwork it shows the host's IRQs and network namespace, and
    // `--root` stays `/` so link events and per-queue counters work).
    let volumes = pod["volumes"].as_sequence().expect("volumes");
    let volume = |name: &str| {
        volumes
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no volume {name}"))
    };
    let mounts = container["volumeMounts"].as_sequence().expect("mounts");
    let mounted_at = |path: &str| {
        let mount = mounts
            .iter()
            .find(|m| m["mountPath"] == path)
            .unwrap_or_else(|| panic!("nothing mounted at {path}"));
        volume(mount["name"].as_str().unwrap())
    };
    assert_eq!(mounted_at("/sys")["hostPath"]["path"], "/sys");
    assert!(
        mounts.iter().all(|m| m["mountPath"] != "/proc"),
        "/proc must be the container's own procfs"
    );
    let state = mounted_at("/run/steerd");
    assert_eq!(state["hostPath"]["path"], "/run/steerd");
    let config_volume = mounted_at("/etc/steerd");
    let config_map = config_volume["configMap"]["name"]
        .as_str()
        .expect("/etc/steerd is a ConfigMap");

    // The ConfigMap is in the manifest and steerd accepts its configuration.
    let config_map = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == config_map)
        .unwrap_or_else(|| panic!("ConfigMap {config_map} not in the manifest"));
    let config_text = config_map["data"]["steerd.yaml"]
        .as_str()
        .expect("steerd.yaml in the ConfigMap");
    if let Err(errors) = steerd::config::check_config(config_text) {
        panic!("the ConfigMap's steerd.yaml is refused: {errors:?}");
    }

    // The command line: steerd's own parser accepts it (with the downward-API address
    // substituted), with the config in the ConfigMap, followed, and metrics on 9847.
    let command = strings(&container["command"]);
    assert_eq!(command, vec!["/usr/sbin/steerd"]);
    let env = container["env"].as_sequence().expect("env");
    let host_ip = env
        .iter()
        .find(|e| e["name"] == "HOST_IP")
        .expect("HOST_IP from the downward API");
    assert_eq!(
        host_ip["valueFrom"]["fieldRef"]["fieldPath"],
        "status.hostIP"
    );
    let args: Vec<String> = strings(&container["args"])
        .iter()
        .map(|a| a.replace("$(HOST_IP)", "10.1.2.3"))
        .collect();
    let cli = steerd::cli::Cli::try_parse_from(std::iter::once("steerd".to_string()).chain(args))
        .unwrap_or_else(|e| panic!("steerd refuses the DaemonSet's arguments: {e}"));
    assert_eq!(cli.root, Path::new("/"), "--root stays /");
    let steerd::cli::Command::Run {
        config,
        watch_config,
        dry_run,
        metrics_listen,
        state_file,
        ..
    } = cli.command
    else {
        panic!("the container does not run `steerd run`");
    };
    assert_eq!(
        config.as_deref(),
        Some(Path::new("/etc/steerd/steerd.yaml"))
    );
    assert!(
        watch_config,
        "--watch-config: reload when the ConfigMap changes"
    );
    assert!(!dry_run);
    assert!(state_file.is_none(), "default state file under /run/steerd");
    assert_eq!(metrics_listen.to_string(), "10.1.2.3:9847");

    // The metrics port; readiness on /metrics, liveness on /healthz (which fails when the
    // tick loop stalls), both through it.
    let ports = container["ports"].as_sequence().expect("ports");
    let metrics = ports
        .iter()
        .find(|p| p["containerPort"].as_u64() == Some(9847))
        .expect("port 9847 declared");
    let port_name = metrics["name"].as_str().expect("named port");
    for (probe, path) in [
        ("readinessProbe", "/metrics"),
        ("livenessProbe", "/healthz"),
    ] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert!(
            get["port"] == port_name || get["port"].as_u64() == Some(9847),
            "{probe} port"
        );
    }

    // A pinned image: the crate's version, never `latest`.
    let image = container["image"].as_str().expect("image");
    let (_, tag) = image.rsplit_once(':').expect("an image tag");
    assert_ne!(tag, "latest");
    assert_eq!(
        tag,
        env!("CARGO_PKG_VERSION"),
        "image tag follows the crate"
    );

    // Every node, time to restore on SIGTERM, resources set.
    let tolerations = pod["tolerations"].as_sequence().expect("tolerations");
    assert!(
        tolerations
            .iter()
            .any(|t| t["operator"] == "Exists" && t.get("key").is_none()),
        "tolerates every taint"
    );
    let grace = pod["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("terminationGracePeriodSeconds");
    assert!(grace >= 10, "{grace} s to restore on SIGTERM");
    let resources = &container["resources"];
    for side in ["requests", "limits"] {
        for what in ["cpu", "memory"] {
            assert!(
                resources[side][what].as_str().is_some(),
                "resources.{side}.{what}"
            );
        }
    }
    assert!(
        memory_bytes(resources["requests"]["memory"].as_str().unwrap())
            <= memory_bytes(resources["limits"]["memory"].as_str().unwrap())
    );
}

/// Peak RSS (`VmHWM`) of a process, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM");
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("VmHWM value");
    kb * 1024
}

/// The DaemonSet's memory limit holds steerd's peak RSS on the 1152-CPU, 1080-IRQ tree
/// (discovery, a few ticks and a rediscovery after a reload) at least twice over.
fn daemonset_memory_limit_covers_the_largest_tree() {
    let docs = manifest();
    let (_, container) = daemonset_container(&docs);
    let limit = memory_bytes(
        container["resources"]["limits"]["memory"]
            .as_str()
            .expect("memory limit"),
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    FakeMachine::large().write(&root).unwrap();
    let started = Instant::now();
    let daemon = Steerd::start_with(&root, None, &["--dry-run"]);
    daemon.wait_ticks(5);
    daemon.signal(Signal::SIGHUP);
    daemon.wait_ticks(3);
    let peak = peak_rss(daemon.pid().as_raw() as u32);
    eprintln!(
        "steerd peak RSS on the 1152-CPU tree: {:.1} MiB (memory limit {:.0} MiB; {} build; {:.1} s)",
        peak as f64 / (1u64 << 20) as f64,
        limit as f64 / (1u64 << 20) as f64,
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        started.elapsed().as_secs_f64()
    );
    assert!(
        2 * peak <= limit,
        "peak RSS {peak} bytes leaves less than half of the {limit}-byte limit free"
    );
}

suite_main!(
    steerd_names_finds_metric_identifiers_only,
    the_rules_promise_what_the_issue_asks,
    every_alert_has_a_firing_and_a_quiet_unit_test,
    promtool_checks_and_tests_the_rules,
    dashboard_has_the_promised_panels_and_variables,
    dashboard_queries_are_valid_promql,
    every_metric_name_used_is_one_steerd_exports,
    daemonset_has_what_steerd_needs,
    daemonset_memory_limit_covers_the_largest_tree,
);
