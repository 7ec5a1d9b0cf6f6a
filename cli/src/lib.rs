//! The `arbor` command line as a library, shared by two binaries:
//!
//! - `arbor` (`src/main.rs`): every command. It never links libtorch, so it
//!   starts in milliseconds; it is also the sandbox helper
//!   (`arbor __sandbox-helper`).
//! - `arbor-train` (`cli/train`): `train` and `credit eval`, which need the
//!   trainer (libtorch). `arbor train ...` and `arbor credit eval ...` exec
//!   the `arbor-train` found next to `arbor` with the same arguments, so
//!   users only ever type `arbor`.
//!
//! [`entry::main`] is both binaries' `main`: parse, open the store, dispatch.

pub mod args;
pub mod commands;
pub mod entry;
pub mod error;
pub mod output;

mod render;
mod rollout;
mod task;
