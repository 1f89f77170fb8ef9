//! The steerd command line. Only argument handling lives here; everything else is in the
//! library.

use clap::Parser;

fn main() {
    let _cli = steerd::cli::Cli::parse();
}
