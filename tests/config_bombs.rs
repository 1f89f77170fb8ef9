//! `steerd check-config FILE` on configurations built to hurt the parser: each is refused
//! within a few seconds (the binary, a debug build, on a loaded machine) with a message
//! naming the problem. The in-process checks are in crates/steerd-core/src/config/hostile.rs.

use std::process::Command;
use std::time::{Duration, Instant};

/// The exit status and stderr of `steerd check-config` on `text`, and how long it took.
fn check_config(text: &[u8]) -> (bool, String, Duration) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("steerd.yaml");
    std::fs::write(&path, text).expect("write");
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_steerd"))
        .arg("check-config")
        .arg(&path)
        .output()
        .expect("run steerd check-config");
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.success(), stderr, took)
}

#[test]
fn check_config_refuses_each_bomb_quickly_saying_why() {
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
    for level in 1..=9 {
        let items = vec![format!("*a{}", level - 1); 9].join(", ");
        bomb.push_str(&format!("a{level}: &a{level} [{items}]\n"));
    }
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("alias bomb", bomb.into_bytes(), "too many alias expansions"),
        (
            "100k [",
            "[".repeat(100_000).into_bytes(),
            "nested more than 128 levels",
        ),
        (
            "2 MiB file",
            "# padding\n".repeat(200_000).into_bytes(),
            "larger than 1048576 bytes",
        ),
        (
            "huge number",
            b"hysteresis:\n  confirm_ticks: 99999999999999999999999999999\n".to_vec(),
            "hysteresis",
        ),
    ];
    for (name, text, expected) in cases {
        let (ok, stderr, took) = check_config(&text);
        println!("{name}: refused in {took:?}: {}", stderr.trim());
        assert!(!ok, "{name}: accepted");
        assert!(stderr.contains(expected), "{name}: {stderr}");
        assert!(took < Duration::from_secs(5), "{name}: took {took:?}");
    }
}
