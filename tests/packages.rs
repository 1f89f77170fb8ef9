//! The Debian and RPM packages, built by `packaging/build-packages.sh`: every promised file
//! is in both, the configuration is a conffile / `%config(noreplace)`, the maintainer
//! scripts are there, `lintian` reports no error, and the man page renders.
//!
//! Reported as ignored with the reason when cargo-deb, cargo-generate-rpm, lintian, rpm or
//! man is missing (`scripts/test` installs them as root; under `CI=true` that is a failure). Installing the package is tested in a real systemd by
//! `tests/package_install.rs`.

mod common;
mod package_build;

use std::path::Path;
use std::process::Command;

use common::suite::{Requirement, TestResult};
use package_build::packages;

/// Files both packages install, by their path in the Debian package (the RPM differs only
/// where the distributions do: see `rpm_path`).
const PROMISED: &[&str] = &[
    "/usr/sbin/steerd",
    "/usr/lib/systemd/system/steerd.service",
    "/usr/lib/systemd/system/irqbalance.service.d/steerd.conf",
    "/etc/steerd/steerd.yaml",
    "/usr/share/man/man8/steerd.8.gz",
    "/usr/share/bash-completion/completions/steerd",
    "/usr/share/zsh/vendor-completions/_steerd",
    "/usr/share/fish/vendor_completions.d/steerd.fish",
    "/usr/share/doc/steerd/README.md",
    "/usr/share/doc/steerd/config.md",
    "/usr/share/doc/steerd/metrics.md",
    "/usr/share/doc/steerd/systemd.md",
    "/usr/share/doc/steerd/operations.md",
    "/usr/share/doc/steerd/migrating-from-irqbalance.md",
    "/usr/share/doc/steerd/copyright",
    "/usr/share/steerd/grafana/steerd.json",
    "/usr/share/steerd/prometheus/steerd-rules.yml",
    "/usr/share/steerd/kubernetes/steerd-daemonset.yaml",
];

fn rpm_path(deb_path: &str) -> Option<&str> {
    Some(match deb_path {
        "/usr/share/zsh/vendor-completions/_steerd" => "/usr/share/zsh/site-functions/_steerd",
        // RPM keeps the license apart from the docs.
        "/usr/share/doc/steerd/copyright" => "/usr/share/licenses/steerd/LICENSE",
        other => other,
    })
}

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn the_deb_holds_every_promised_file_and_marks_the_config_as_a_conffile() -> TestResult {
    let (deb, _) = packages()?;
    let deb = deb.to_str().unwrap();
    let listing = run("dpkg-deb", &["-c", deb]);
    let files: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(|p| p.trim_start_matches('.'))
        .collect();
    for promised in PROMISED {
        assert!(
            files.contains(promised),
            "{promised} missing from the .deb:\n{listing}"
        );
    }
    let conffiles = run("dpkg-deb", &["--info", deb, "conffiles"]);
    assert_eq!(conffiles.trim(), "/etc/steerd/steerd.yaml");
    for script in ["postinst", "postrm", "prerm"] {
        let text = run("dpkg-deb", &["--info", deb, script]);
        assert!(text.starts_with("#!/bin/sh"), "{script}: {text}");
    }
    let postinst = run("dpkg-deb", &["--info", deb, "postinst"]);
    assert!(postinst.contains("systemctl disable --quiet irqbalance.service"));
    assert!(
        postinst.contains("deb-systemd-helper"),
        "cargo-deb's unit snippet"
    );
    let postrm = run("dpkg-deb", &["--info", deb, "postrm"]);
    assert!(postrm.contains("systemctl enable --quiet irqbalance.service"));
    // The packaged configuration is the embedded default, byte for byte.
    let dir = tempfile::tempdir().unwrap();
    run("dpkg-deb", &["-x", deb, dir.path().to_str().unwrap()]);
    let shipped = std::fs::read_to_string(dir.path().join("etc/steerd/steerd.yaml")).unwrap();
    assert_eq!(shipped, steerd::config::DEFAULT_YAML);
    // The binary in the package runs.
    let version = run(
        dir.path().join("usr/sbin/steerd").to_str().unwrap(),
        &["--version"],
    );
    assert_eq!(
        version.trim(),
        format!("steerd {}", env!("CARGO_PKG_VERSION"))
    );
    Ok(())
}

fn lintian_reports_no_error() -> TestResult {
    let (deb, _) = packages()?;
    Requirement::tool("lintian", "apt-get install lintian").check()?;
    let out = Command::new("lintian")
        .arg(deb)
        .output()
        .expect("run lintian");
    let report = String::from_utf8_lossy(&out.stdout);
    eprintln!("lintian:\n{report}");
    let errors: Vec<&str> = report.lines().filter(|l| l.starts_with("E:")).collect();
    assert!(errors.is_empty(), "lintian errors:\n{}", errors.join("\n"));
    Ok(())
}

fn the_rpm_holds_the_same_files_with_a_noreplace_config() -> TestResult {
    let (_, rpm) = packages()?;
    Requirement::tool(
        "rpm",
        "apt-get install rpm; the RPM was built but not inspected",
    )
    .check()?;
    let rpm = rpm.to_str().unwrap();
    let listing = run("rpm", &["-qpl", rpm]);
    for promised in PROMISED {
        let path = rpm_path(promised).unwrap();
        assert!(
            listing.lines().any(|l| l == path),
            "{path} missing from the RPM:\n{listing}"
        );
    }
    assert_eq!(run("rpm", &["-qpc", rpm]).trim(), "/etc/steerd/steerd.yaml");
    let flags = run(
        "rpm",
        &["-qp", "--qf", "[%{FILENAMES} %{FILEFLAGS:fflags}\\n]", rpm],
    );
    let config = flags
        .lines()
        .find(|l| l.starts_with("/etc/steerd/steerd.yaml "))
        .unwrap();
    assert!(config.contains('n'), "not %config(noreplace): {config}");
    let scripts = run("rpm", &["-qp", "--scripts", rpm]);
    for part in [
        "postinstall scriptlet",
        "preuninstall scriptlet",
        "postuninstall scriptlet",
    ] {
        assert!(scripts.contains(part), "{part} missing:\n{scripts}");
    }
    Ok(())
}

fn the_man_page_renders_with_every_subcommand() -> TestResult {
    packages()?;
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/assets/steerd.8");
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(
        text.starts_with(".ie \\n(.g .ds Aq") || text.contains(".TH steerd 8"),
        "{text}"
    );
    Requirement::tool(
        "man",
        "apt-get install man-db; the page's source was checked, not its rendering",
    )
    .check()?;
    let out = Command::new("man")
        .args(["-l", "-P", "cat"])
        .arg(&page)
        .env("MANWIDTH", "100")
        .output()
        .expect("man -l");
    let rendered = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "NAME",
        "SYNOPSIS",
        "inspect",
        "plan",
        "check-config",
        "run",
        "status",
        "doctor",
        "FILES",
        "/etc/steerd/steerd.yaml",
    ] {
        assert!(
            rendered.contains(needle),
            "{needle} not in the rendered page:\n{rendered}"
        );
    }
    Ok(())
}

suite_main!(
    the_deb_holds_every_promised_file_and_marks_the_config_as_a_conffile,
    lintian_reports_no_error,
    the_rpm_holds_the_same_files_with_a_noreplace_config,
    the_man_page_renders_with_every_subcommand,
);
