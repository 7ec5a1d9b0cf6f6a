//! The `arbor` command line.
fn main() {}
