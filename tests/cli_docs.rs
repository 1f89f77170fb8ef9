//! Every subcommand's `--help` agrees with README.md's command table and with the docs page
//! it points to, so that help, README and docs cannot drift apart: each option the help
//! lists is in the command's README row and the README row names no option the command
//! lacks; each `docs/*.md` the help names exists, documents that command, and is named in
//! the README row too.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const SUBCOMMANDS: &[&str] = &[
    "run",
    "plan",
    "inspect",
    "check-config",
    "status",
    "doctor",
    "top",
];

/// Options every command takes, described once above the table ("Every command takes
/// `--root DIR`"), and clap's own.
const GLOBAL: &[&str] = &["--root", "--help", "--version"];

fn repo_file(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn help(subcommand: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_steerd"))
        .args([subcommand, "--help"])
        .output()
        .expect("run steerd --help");
    assert!(out.status.success(), "steerd {subcommand} --help failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `--long-option` words in `text`.
fn long_options(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("--") {
        let tail = &rest[at + 2..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        if name.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
            found.insert(format!("--{name}"));
        }
        rest = &tail[end..];
    }
    found
}

/// The options listed in a `--help` (lines starting with `-x, --name` or `--name`).
fn help_options(help: &str) -> BTreeSet<String> {
    help.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("--") || l.starts_with('-') && l.get(2..4) == Some(", "))
        .flat_map(|l| {
            long_options(
                l.split_whitespace()
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(" ")
                    .as_str(),
            )
        })
        .filter(|o| !GLOBAL.contains(&o.as_str()))
        .collect()
}

/// README's command-table row for `steerd SUBCOMMAND`.
fn readme_row(readme: &str, subcommand: &str) -> String {
    let prefix = format!("| `steerd {subcommand}");
    let rows: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with(&prefix) && l[prefix.len()..].starts_with([' ', '`']))
        .collect();
    assert_eq!(
        rows.len(),
        1,
        "README.md: one row for steerd {subcommand}: {rows:?}"
    );
    rows[0].to_string()
}

/// `docs/NAME.md` references in `text`.
fn doc_references(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("docs/") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.')))
            .unwrap_or(tail.len());
        let reference = tail[..end].trim_end_matches('.');
        if reference.ends_with(".md") {
            found.insert(reference.to_string());
        }
        rest = &tail[end..];
    }
    found
}

#[test]
fn every_subcommand_has_a_readme_row_with_exactly_its_options() {
    let readme = repo_file("README.md");
    for subcommand in SUBCOMMANDS {
        let help = help(subcommand);
        let row = readme_row(&readme, subcommand);
        let usage = row.split(" | ").next().unwrap_or_default();
        let in_help = help_options(&help);
        let in_readme: BTreeSet<String> = long_options(usage)
            .into_iter()
            .filter(|o| !GLOBAL.contains(&o.as_str()))
            .collect();
        assert_eq!(
            in_help, in_readme,
            "steerd {subcommand}: --help lists {in_help:?}, README.md's row {in_readme:?}:\n{row}"
        );
    }
}

#[test]
fn the_subcommands_tested_are_all_there_are() {
    let out = Command::new(env!("CARGO_BIN_EXE_steerd"))
        .arg("--help")
        .output()
        .expect("steerd --help");
    let text = String::from_utf8_lossy(&out.stdout);
    let listed: BTreeSet<&str> = text
        .split("Commands:")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .take_while(|w| !w.ends_with(':'))
        .filter(|w| *w != "help")
        .collect();
    let tested: BTreeSet<&str> = SUBCOMMANDS.iter().copied().collect();
    assert_eq!(listed, tested, "steerd --help:\n{text}");
}

#[test]
fn every_doc_a_help_names_documents_that_command_and_is_in_its_readme_row() {
    let readme = repo_file("README.md");
    for subcommand in SUBCOMMANDS {
        let help = help(subcommand);
        let row = readme_row(&readme, subcommand);
        for doc in doc_references(&help) {
            let text = repo_file(&doc);
            assert!(
                text.contains(&format!("steerd {subcommand}")),
                "steerd {subcommand} --help points at {doc}, which does not document `steerd {subcommand}`"
            );
            assert!(
                row.contains(&doc),
                "steerd {subcommand} --help names {doc}; README.md's row does not:\n{row}"
            );
        }
        for doc in doc_references(&row) {
            assert!(
                help.contains(&doc),
                "README.md's row for steerd {subcommand} names {doc}; its --help does not"
            );
        }
    }
}

#[test]
fn each_json_doc_is_named_by_exactly_one_command() {
    let readme = repo_file("README.md");
    for (doc, subcommand) in [
        ("docs/inspect-json.md", "inspect"),
        ("docs/plan-json.md", "plan"),
        ("docs/status-json.md", "status"),
        ("docs/doctor-json.md", "doctor"),
        ("docs/top-json.md", "top"),
    ] {
        let naming: Vec<&&str> = SUBCOMMANDS
            .iter()
            .filter(|s| help(s).contains(doc))
            .collect();
        assert_eq!(naming, vec![&subcommand], "{doc} is named by {naming:?}");
        assert!(readme.contains(doc), "README.md does not list {doc}");
    }
}
