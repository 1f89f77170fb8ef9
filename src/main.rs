//! The steerd command line. Only argument handling lives here; everything else is in the
//! library.

fn main() {
    println!("steerd: being written");
}
