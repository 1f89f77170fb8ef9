//! docs/architecture.md's "Crates" table is what the compiler enforces: each crate's
//! dependencies on the workspace's other crates are the ones the table lists (from `cargo
//! metadata`, so an arrow added back up, or one dropped, fails here), and each module the
//! table gives a crate is a module of that crate's sources.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One row of the table: crate name, the workspace crates it depends on, its modules.
type Row = (String, BTreeSet<String>, Vec<String>);

fn table() -> Vec<Row> {
    let text = include_str!("../docs/architecture.md");
    let section = text
        .split("\n## Crates\n")
        .nth(1)
        .expect("docs/architecture.md has a Crates section");
    let names = |cell: &str| -> Vec<String> {
        cell.split(',')
            .map(|n| n.trim().trim_matches('`').to_string())
            .filter(|n| !n.is_empty() && n != "(none)")
            .collect()
    };
    section
        .lines()
        .skip_while(|l| !l.starts_with("| crate |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            (
                cells[1].trim_matches('`').to_string(),
                names(cells[2]).into_iter().collect(),
                names(cells[3]),
            )
        })
        .collect()
}

/// Each workspace package: its manifest's directory and the workspace packages it depends
/// on (normal dependencies).
fn metadata() -> BTreeMap<String, (PathBuf, BTreeSet<String>)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let packages = json["packages"].as_array().expect("packages");
    let ours: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().expect("name").to_string())
        .collect();
    packages
        .iter()
        .map(|p| {
            let name = p["name"].as_str().expect("name").to_string();
            let dir = Path::new(p["manifest_path"].as_str().expect("manifest_path"))
                .parent()
                .expect("manifest dir")
                .to_path_buf();
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().expect("dep name").to_string())
                .filter(|d| ours.contains(d) && *d != name)
                .collect();
            (name, (dir, deps))
        })
        .collect()
}

#[test]
fn the_crates_table_is_what_cargo_builds() {
    let table = table();
    let built = metadata();
    let listed: BTreeSet<&String> = table.iter().map(|(name, _, _)| name).collect();
    let packages: BTreeSet<&String> = built.keys().collect();
    assert_eq!(
        listed, packages,
        "the table's crates against the workspace's"
    );
    for (name, deps, modules) in &table {
        let (dir, built_deps) = &built[name];
        assert_eq!(deps, built_deps, "{name}'s workspace dependencies");
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).expect("lib.rs");
        for module in modules {
            assert!(
                lib.contains(&format!("pub mod {module};")),
                "{name}'s src/lib.rs declares no module {module}"
            );
        }
        let declared = lib
            .lines()
            .filter_map(|l| l.trim().strip_prefix("pub mod "))
            .map(|m| m.trim_end_matches(';').to_string());
        for module in declared {
            assert!(
                modules.contains(&module),
                "{name} declares {module}, which the table does not list for it"
            );
        }
    }
}
