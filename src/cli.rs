//! The command-line definition, in the library so the man page and shell completions can
//! be generated from the same source as the parser.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// steerd steers NIC receive work: IRQ affinity and RPS/RFS masks, continuously, with
/// hysteresis, and says why.
#[derive(Debug, Parser)]
#[command(name = "steerd", version, about, long_about = None)]
pub struct Cli {
    /// Directory under which `proc/` and `sys/` are found (and written), laid out as the
    /// kernel lays them out.
    #[arg(long, global = true, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the machine model: CPUs, NUMA nodes, network devices, queues and their IRQs.
    Inspect {
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

/// How to print a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Tables for people.
    Text,
    /// JSON for programs (see docs/inspect-json.md).
    Json,
}
