//! The `arbor` command line: import host directories as snapshots, run
//! commands in forks of them, diff, log, check out, list, tag, remove,
//! collect and verify. See `arbor --help` and the README.
//!
//! `train` and `credit eval` run in the separate `arbor-train` binary (it
//! links libtorch); this one execs it. See [`arbor_cli::entry`].

fn main() {
    arbor_cli::entry::main(arbor_cli::entry::Binary::Arbor);
}
