//! Writes the man page `steerd(8)` and the bash, zsh and fish completions into a directory
//! (default `target/assets`), generated from the same clap definition as the parser
//! (`steerd::cli::Cli`), so they can never disagree with the binary. The packages ship
//! them (`packaging/build-packages.sh` runs this first).
//!
//!     cargo run --release --example gen_assets -- target/assets

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::{Shell, generate_to};

fn main() -> Result<(), String> {
    let out = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("target/assets"), PathBuf::from);
    let completions = out.join("completions");
    fs::create_dir_all(&completions).map_err(|e| format!("{}: {e}", completions.display()))?;
    let mut command = steerd::cli::Cli::command();
    write_man_page(&command, &out)?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let path = generate_to(shell, &mut command, "steerd", &completions)
            .map_err(|e| format!("{shell} completions: {e}"))?;
        // clap_complete names the bash file `steerd.bash`, zsh `_steerd`, fish `steerd.fish`.
        println!("{}", path.display());
    }
    Ok(())
}

/// `steerd.8.gz`: section 8 (a daemon for the administrator), gzipped with no timestamp
/// (reproducible), as Debian policy wants man pages.
fn write_man_page(command: &clap::Command, out: &Path) -> Result<(), String> {
    let man = clap_mangen::Man::new(command.clone())
        .section("8")
        .manual("System Administration")
        .source(format!("steerd {}", env!("CARGO_PKG_VERSION")));
    let mut page = Vec::new();
    man.render(&mut page)
        .map_err(|e| format!("man page: {e}"))?;
    page.extend_from_slice(FILES_AND_SEE_ALSO.as_bytes());
    let plain = out.join("steerd.8");
    fs::write(&plain, &page).map_err(|e| format!("{}: {e}", plain.display()))?;
    let gz = out.join("steerd.8.gz");
    let status = std::process::Command::new("gzip")
        .args(["-9", "-n", "-f", "-k"])
        .arg(&plain)
        .status()
        .map_err(|e| format!("gzip: {e}"))?;
    if !status.success() {
        return Err(format!("gzip {} failed: {status}", plain.display()));
    }
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "{}", gz.display());
    Ok(())
}

/// Sections clap does not know about.
const FILES_AND_SEE_ALSO: &str = r#".SH FILES
.TP
\fI/etc/steerd/steerd.yaml\fR
The configuration (\fBsteerd check\-config\fR checks it). Reloaded by
\fBsystemctl reload steerd\fR (SIGHUP).
.TP
\fI/run/steerd/state.json\fR
The original value of everything steerd changed, restored on stop.
.SH SIGNALS
SIGHUP reloads the configuration; an invalid file keeps the running one. SIGTERM and SIGINT
restore every value steerd changed and exit 0.
.SH SEE ALSO
\fBirqbalance\fR(1), \fBsystemctl\fR(1), \fI/usr/share/doc/steerd/\fR
"#;
