//! tuned running a profile that moves IRQs: its `scheduler` plugin moves every IRQ off
//! `isolated_cores` unless told `irq_process=false`, and its `irq` plugin writes the
//! affinities a profile lists. Each writes when a profile is applied (and the scheduler
//! plugin again on CPU hot-plug), so steerd finds its placement changed by someone else
//! and, with `on_external_change: respect`, leaves those IRQs where tuned put them. The
//! `irqbalance` plugin only writes irqbalance's ban file, which steerd can follow.
//!
//! The profile is read as tuned reads it: the names in `etc/tuned/active_profile`, each
//! from the first of `etc/tuned/profiles/NAME`, `etc/tuned/NAME`,
//! `usr/lib/tuned/profiles/NAME` and `usr/lib/tuned/NAME` holding a `tuned.conf`, its
//! `[main]` `include=` profiles read first and overridden key by key. Parsed by hand: the
//! format is an INI dialect whose include and override rules are tuned's own, and only
//! section names, `type=` and three keys matter here.

use std::collections::BTreeMap;

use super::{Context, Finding, Severity};

/// A profile's sections: name -> key -> value.
type Sections = BTreeMap<String, BTreeMap<String, String>>;

/// How deep `include=` chains are followed (tuned's own profiles nest two or three deep).
const MAX_INCLUDE_DEPTH: usize = 8;

pub fn check(context: &Context) -> Vec<Finding> {
    let pids = match super::processes::named(context.root, "tuned") {
        Ok(pids) => pids,
        // The irqbalance check reports an unreadable process list.
        Err(_) => return Vec::new(),
    };
    let Some(&pid) = pids.first() else {
        return Vec::new();
    };
    let active = context
        .root
        .read_optional("etc/tuned/active_profile")
        .ok()
        .flatten()
        .unwrap_or_default();
    let profiles: Vec<&str> = active.split_whitespace().collect();
    let mut movers = Vec::new();
    let mut fixes = Vec::new();
    let mut notes = Vec::new();
    for profile in &profiles {
        let mut sections = Sections::new();
        let mut read = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        load(context, profile, 0, &mut seen, &mut sections, &mut read);
        // The active profile's own file comes last; one under usr/lib is the package's,
        // which its next upgrade overwrites: the fix is a profile of the operator's own.
        let shipped = read.last().is_some_and(|path| path.starts_with("usr/lib/"));
        for (section, keys) in &sections {
            // A unit switched off does not run.
            if keys.get("enabled").is_some_and(|v| is_false(v)) {
                continue;
            }
            let kind = keys.get("type").map_or(section.as_str(), String::as_str);
            match kind {
                "scheduler" => {
                    let isolated = keys.get("isolated_cores").map(String::as_str);
                    let irq_process = keys.get("irq_process").map(String::as_str);
                    if let Some(cores) = isolated.filter(|c| !c.trim().is_empty())
                        && !irq_process.is_some_and(is_false)
                    {
                        movers.push(format!(
                            "[{section}] (scheduler plugin) of profile {profile} moves every IRQ \
                             off isolated_cores={cores} ({})",
                            read.join(", ")
                        ));
                        fixes.push(if shipped {
                            format!(
                                "{}, and keep steerd off those CPUs with cpus.banned",
                                own_profile(profile, section, "irq_process=false")
                            )
                        } else {
                            format!(
                                "set irq_process=false in [{section}] of profile {profile} \
                                 (tuned-adm profile {profile} to apply it), and keep steerd \
                                 off those CPUs with cpus.banned"
                            )
                        });
                    }
                }
                "irq" => {
                    if let Some(affinity) = keys.get("affinity").filter(|a| !a.trim().is_empty()) {
                        movers.push(format!(
                            "[{section}] (irq plugin) of profile {profile} sets IRQ affinity \
                             {affinity} ({})",
                            read.join(", ")
                        ));
                        fixes.push(if shipped {
                            own_profile(profile, section, "enabled=false")
                        } else {
                            format!(
                                "remove the [{section}] instance from profile {profile}, or \
                                 leave its affinity empty"
                            )
                        });
                    }
                }
                "irqbalance" => {
                    if let Some(banned) = keys.get("banned_cpus") {
                        notes.push(format!(
                            "[{section}] (irqbalance plugin) of profile {profile} writes \
                             IRQBALANCE_BANNED_CPUS for banned_cpus={banned}: steerd follows it \
                             with cpus.irqbalance_banned_cpus: true"
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    if movers.is_empty() {
        if notes.is_empty() {
            return Vec::new();
        }
        return vec![Finding {
            check: "tuned",
            severity: Severity::Info,
            summary: format!("tuned is running (pid {pid}); its profile moves no IRQ"),
            evidence: notes.join("; "),
            why: "tuned's irqbalance plugin only writes irqbalance's ban file.".into(),
            fix: None,
        }];
    }
    movers.extend(notes);
    vec![Finding {
        check: "tuned",
        severity: Severity::Warning,
        summary: format!(
            "tuned (pid {pid}, profile {}) moves IRQs steerd places",
            profiles.join(" ")
        ),
        evidence: format!("proc/{pid}/comm = tuned; {}", movers.join("; ")),
        why: "tuned writes IRQ affinities when it applies its profile (and on CPU hot-plug); \
              steerd then finds them changed by someone else and, with on_external_change: \
              respect, leaves those IRQs where tuned put them."
            .into(),
        fix: Some(fixes.join("; ")),
    }]
}

/// tuned's false values for a boolean option.
fn is_false(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "false" | "0" | "no" | "n" | "off"
    )
}

/// Reads `profile` into `sections` (its includes first, then its own keys over them, or
/// in place of them for a unit with `replace=true`), and the files read into `read`. Each
/// profile is read once (`seen`): an include cycle or a repeated include ends there.
fn load(
    context: &Context,
    profile: &str,
    depth: usize,
    seen: &mut std::collections::BTreeSet<String>,
    sections: &mut Sections,
    read: &mut Vec<String>,
) {
    if depth > MAX_INCLUDE_DEPTH
        || profile.contains('/')
        || profile.starts_with('.')
        || !seen.insert(profile.to_string())
    {
        return;
    }
    let candidates = [
        format!("etc/tuned/profiles/{profile}/tuned.conf"),
        format!("etc/tuned/{profile}/tuned.conf"),
        format!("usr/lib/tuned/profiles/{profile}/tuned.conf"),
        format!("usr/lib/tuned/{profile}/tuned.conf"),
    ];
    let Some((path, text)) = candidates.iter().find_map(|path| {
        let text = context.root.read_optional(path).ok().flatten()?;
        Some((path.clone(), text))
    }) else {
        return;
    };
    let own = parse(&text);
    if let Some(includes) = own.get("main").and_then(|main| main.get("include")) {
        for include in includes
            .split([',', ';'])
            .map(str::trim)
            .filter(|i| !i.is_empty())
        {
            load(context, include, depth + 1, seen, sections, read);
        }
    }
    read.push(path);
    for (section, keys) in own {
        let merged = sections.entry(section).or_default();
        if keys.get("replace").is_some_and(|v| !is_false(v)) {
            merged.clear();
        }
        for (key, value) in keys {
            merged.insert(key, value);
        }
    }
}

/// The fix for a profile the tuned package ships: a profile of the operator's own that
/// includes it and sets `key_value` in `[section]`, applied with `tuned-adm`.
fn own_profile(profile: &str, section: &str, key_value: &str) -> String {
    format!(
        "profile {profile} is the package's (its next upgrade would undo an edit): make \
         /etc/tuned/profiles/{profile}-steerd/tuned.conf (/etc/tuned/{profile}-steerd/ \
         before tuned 2.23) holding [main] include={profile} and [{section}] {key_value}, \
         then tuned-adm profile {profile}-steerd"
    )
}

/// The sections of a `tuned.conf`: `[name]` headers, `key=value` lines, `#` comments.
fn parse(text: &str) -> Sections {
    let mut sections = Sections::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = Some(name.trim().to_string());
            sections.entry(name.trim().to_string()).or_default();
        } else if let (Some(section), Some((key, value))) = (&current, line.split_once('=')) {
            sections
                .entry(section.clone())
                .or_default()
                .insert(key.trim().to_string(), value.trim().to_string());
        }
    }
    sections
}

#[cfg(test)]
mod tests {
    use super::super::testing::{machine, not_sampled, put, run_check};
    use super::*;

    #[test]
    fn a_profile_whose_scheduler_plugin_moves_irqs_is_named_with_the_setting() {
        let (_dir, tree) = machine(|_| {});
        put(&tree, "proc/1/comm", "systemd\n");
        // Not running: nothing, whatever the profile.
        put(&tree, "etc/tuned/active_profile", "cpu-partitioning\n");
        put(
            &tree,
            "usr/lib/tuned/profiles/cpu-partitioning/tuned.conf",
            "[main]\ninclude=network-latency\n\n[scheduler]\nisolated_cores=${isolated_cores}\n",
        );
        put(
            &tree,
            "usr/lib/tuned/profiles/network-latency/tuned.conf",
            "[main]\nsummary=low latency\n[scheduler]\nirq_process=false\n",
        );
        assert_eq!(run_check(&tree, check, not_sampled(), None), vec![]);
        put(&tree, "proc/700/comm", "tuned\n");
        // The included profile's irq_process=false holds: no IRQ moves.
        assert_eq!(run_check(&tree, check, not_sampled(), None), vec![]);

        // The package's profile as it is (no include turning irq_process off): the fix
        // is a profile of the operator's own, not an edit an upgrade would undo.
        put(
            &tree,
            "usr/lib/tuned/profiles/network-latency/tuned.conf",
            "[main]\nsummary=low latency\n",
        );
        let found = run_check(&tree, check, not_sampled(), None);
        assert_eq!(found.len(), 1, "{found:?}");
        let fix = found[0].fix.as_deref().unwrap();
        assert!(
            fix.contains("/etc/tuned/profiles/cpu-partitioning-steerd/tuned.conf")
                && fix.contains("include=cpu-partitioning and [scheduler] irq_process=false")
                && fix.contains("tuned-adm profile cpu-partitioning-steerd"),
            "{fix}"
        );

        // An operator's copy in /etc wins, and turns irq_process back on.
        put(
            &tree,
            "etc/tuned/profiles/cpu-partitioning/tuned.conf",
            "[main]\ninclude=network-latency\n[scheduler]\nisolated_cores=2-3\nirq_process=true\n",
        );
        let found = run_check(&tree, check, not_sampled(), None);
        assert_eq!(found.len(), 1, "{found:?}");
        let f = &found[0];
        assert_eq!(f.severity, Severity::Warning);
        assert!(
            f.summary
                .contains("tuned (pid 700, profile cpu-partitioning)"),
            "{f:?}"
        );
        assert!(f.evidence.contains("isolated_cores=2-3"), "{f:?}");
        assert!(
            f.evidence
                .contains("etc/tuned/profiles/cpu-partitioning/tuned.conf"),
            "{f:?}"
        );
        let fix = f.fix.as_deref().unwrap();
        assert!(fix.contains("irq_process=false in [scheduler]"), "{fix}");
    }

    #[test]
    fn the_irq_plugin_and_the_irqbalance_plugin() {
        let (_dir, tree) = machine(|_| {});
        put(&tree, "proc/700/comm", "tuned\n");
        put(&tree, "etc/tuned/active_profile", "mine\n");
        put(
            &tree,
            "etc/tuned/mine/tuned.conf",
            "[irqs_to_0]\ntype=irq\naffinity=0\n[irqbalance]\nbanned_cpus=3\n",
        );
        let found = run_check(&tree, check, not_sampled(), None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].evidence.contains("[irqs_to_0] (irq plugin)"),
            "{found:?}"
        );
        assert!(found[0].evidence.contains("banned_cpus=3"), "{found:?}");
        assert!(
            found[0]
                .fix
                .as_deref()
                .unwrap()
                .contains("remove the [irqs_to_0] instance"),
            "{found:?}"
        );
        // The irqbalance plugin alone is a note.
        put(
            &tree,
            "etc/tuned/mine/tuned.conf",
            "[irqbalance]\nbanned_cpus=3\n",
        );
        let found = run_check(&tree, check, not_sampled(), None);
        assert_eq!(found[0].severity, Severity::Info, "{found:?}");
        // A profile including itself, many times over, ends at once.
        put(
            &tree,
            "etc/tuned/mine/tuned.conf",
            &format!("[main]\ninclude={}\n", ["mine"; 12].join(",")),
        );
        assert_eq!(run_check(&tree, check, not_sampled(), None), vec![]);
        // A unit switched off does not run; replace=true drops what an include set.
        put(
            &tree,
            "etc/tuned/mine/tuned.conf",
            "[irq]\naffinity=0\nenabled=false\n",
        );
        assert_eq!(run_check(&tree, check, not_sampled(), None), vec![]);
        put(
            &tree,
            "etc/tuned/base/tuned.conf",
            "[scheduler]\nisolated_cores=2\nirq_process=false\n",
        );
        put(
            &tree,
            "etc/tuned/mine/tuned.conf",
            "[main]\ninclude=base\n[scheduler]\nreplace=true\nisolated_cores=3\n",
        );
        let found = run_check(&tree, check, not_sampled(), None);
        assert!(found[0].evidence.contains("isolated_cores=3"), "{found:?}");
    }
}
