//! The steerd command line. Only argument handling lives here; everything else is in the
//! library.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;

use steerd::Root;
use steerd::cli::{Cli, Command, Format};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let root = Root::new(&cli.root);
    match run(&cli, &root) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("steerd: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli, root: &Root) -> Result<ExitCode, String> {
    match &cli.command {
        Command::Inspect { format } => {
            let machine = steerd::discover::discover(root).map_err(|e| e.to_string())?;
            let text = match format {
                Format::Text => steerd::inspect::to_text(&machine),
                Format::Json => steerd::inspect::to_json(&machine, &cli.root.to_string_lossy()),
            };
            print_out(&text)
        }
        _ => Err("this command is not built yet".to_string()),
    }
}

/// Prints a report. A reader that went away (`steerd inspect | head`) ends the output
/// quietly, as for any Unix filter, instead of panicking.
fn print_out(text: &str) -> Result<ExitCode, String> {
    let mut stdout = io::stdout().lock();
    match writeln!(stdout, "{}", text.trim_end()).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(format!("cannot write the output: {e}")),
    }
}
