//! Configuration texts built to hurt the parser: each is refused within a second, with a
//! message that names the problem (docs/config.md, "Limits").

use std::time::{Duration, Instant};

use super::check_config;

/// Generous for a loaded 2-core machine: each case takes milliseconds.
const QUICK: Duration = Duration::from_secs(1);

/// The first error's text, and how long the check took.
fn refused(text: &str) -> (String, Duration) {
    let started = Instant::now();
    let result = check_config(text);
    let took = started.elapsed();
    let errors = result.expect_err("a hostile config must be refused");
    (errors[0].to_string(), took)
}

/// "Billion laughs": nine levels of nine aliases, 9^9 (387 M) scalars if expanded.
fn alias_bomb() -> String {
    let mut text = String::from(
        "a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for level in 1..=9 {
        let prev = format!("*a{}", level - 1);
        let items = [prev.as_str(); 9].join(",");
        text.push_str(&format!("a{level}: &a{level} [{items}]\n"));
    }
    text.push_str("devices:\n  eth0:\n    rps: *a9\n");
    text
}

#[test]
fn an_alias_bomb_is_refused_quickly_naming_aliases() {
    let (message, took) = refused(&alias_bomb());
    assert!(took < QUICK, "took {took:?}");
    assert!(message.contains("alias"), "{message}");
}

#[test]
fn deep_flow_nesting_is_refused_quickly_naming_the_depth() {
    for text in ["[".repeat(100_000), "{a: ".repeat(100_000)] {
        let (message, took) = refused(&text);
        assert!(took < QUICK, "took {took:?}");
        assert!(message.contains("nested more than 128 levels"), "{message}");
    }
}

#[test]
fn deep_block_nesting_is_refused_quickly_naming_the_depth() {
    let mut text = String::new();
    for depth in 0..1000 {
        text.push_str(&" ".repeat(depth + 2));
        text.push_str("k:\n");
    }
    let (message, took) = refused(&format!("devices:\n  eth0:\n{text}"));
    assert!(took < QUICK, "took {took:?}");
    assert!(message.contains("nested more than 128 levels"), "{message}");
}

#[test]
fn huge_numbers_are_refused_naming_the_key() {
    let cases = [
        (
            "hysteresis:\n  confirm_ticks: 99999999999999999999999999999999\n".to_string(),
            "hysteresis",
        ),
        (format!("interval: {}s\n", "9".repeat(5000)), "interval"),
        (
            format!("watermarks:\n  high: 1e{}\n", "9".repeat(400)),
            "watermarks",
        ),
    ];
    for (text, key) in &cases {
        let (message, took) = refused(text);
        assert!(took < QUICK, "took {took:?}");
        assert!(message.contains(*key), "{message}");
    }
}
