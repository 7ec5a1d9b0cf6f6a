//! Shared workload generators for the benches.
