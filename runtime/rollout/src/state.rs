//! The states episodes start from and reach, on either backend: a native
//! snapshot (a workspace and a shell session) or, with feature `wasm`, a
//! WebAssembly session snapshot (a live interpreter's memory and a
//! workspace). The driver only opens, snapshots and names them, so rollout
//! trees, credit and the attached trainer work the same on both.

use arbor_runtime::store::SnapshotId;
use arbor_runtime::{Sandbox, Snapshot};

use crate::env::EnvError;

/// A state: what a rollout tree's nodes are.
#[allow(
    clippy::large_enum_variant,
    reason = "a handful live at a time (tree nodes, one per fork); boxing buys nothing"
)]
#[derive(Clone, Debug)]
pub enum EnvSnapshot {
    /// A native snapshot.
    Native(Snapshot),
    /// A WebAssembly session snapshot.
    #[cfg(feature = "wasm")]
    Session(arbor_runtime::wasm::WasmSnapshot),
}

/// A live fork of an [`EnvSnapshot`], where an episode's actions run.
#[allow(
    clippy::large_enum_variant,
    reason = "one per running episode; boxing buys nothing"
)]
#[derive(Debug)]
pub enum EnvSandbox {
    /// A native sandbox.
    Native(Sandbox),
    /// A WebAssembly session.
    #[cfg(feature = "wasm")]
    Session(arbor_runtime::wasm::WasmSandbox),
}

#[cfg(feature = "wasm")]
fn wasm_err(e: arbor_runtime::wasm::WasmError) -> EnvError {
    EnvError::from(e)
}

impl EnvSnapshot {
    /// Its id in the store.
    pub fn id(&self) -> &SnapshotId {
        match self {
            Self::Native(s) => s.id(),
            #[cfg(feature = "wasm")]
            Self::Session(s) => s.id(),
        }
    }

    /// Fork it.
    ///
    /// # Errors
    /// Runtime faults.
    pub fn open(&self) -> Result<EnvSandbox, EnvError> {
        Ok(match self {
            Self::Native(s) => EnvSandbox::Native(s.open()?),
            #[cfg(feature = "wasm")]
            Self::Session(s) => EnvSandbox::Session(s.open().map_err(wasm_err)?),
        })
    }

    /// The native snapshot, if it is one.
    pub fn native(&self) -> Option<&Snapshot> {
        match self {
            Self::Native(s) => Some(s),
            #[cfg(feature = "wasm")]
            Self::Session(_) => None,
        }
    }

    /// The session snapshot, if it is one.
    #[cfg(feature = "wasm")]
    pub fn session(&self) -> Option<&arbor_runtime::wasm::WasmSnapshot> {
        match self {
            Self::Native(_) => None,
            Self::Session(s) => Some(s),
        }
    }
}

impl From<Snapshot> for EnvSnapshot {
    fn from(s: Snapshot) -> Self {
        Self::Native(s)
    }
}

#[cfg(feature = "wasm")]
impl From<arbor_runtime::wasm::WasmSnapshot> for EnvSnapshot {
    fn from(s: arbor_runtime::wasm::WasmSnapshot) -> Self {
        Self::Session(s)
    }
}

impl EnvSandbox {
    /// Seal its state into a snapshot and continue on it.
    ///
    /// # Errors
    /// Runtime faults.
    pub fn snapshot(&mut self) -> Result<EnvSnapshot, EnvError> {
        Ok(match self {
            Self::Native(s) => EnvSnapshot::Native(s.snapshot()?),
            #[cfg(feature = "wasm")]
            Self::Session(s) => EnvSnapshot::Session(s.snapshot().map_err(wasm_err)?),
        })
    }

    /// The native sandbox, if it is one.
    pub fn native_mut(&mut self) -> Option<&mut Sandbox> {
        match self {
            Self::Native(s) => Some(s),
            #[cfg(feature = "wasm")]
            Self::Session(_) => None,
        }
    }

    /// The session, if it is one.
    #[cfg(feature = "wasm")]
    pub fn session_mut(&mut self) -> Option<&mut arbor_runtime::wasm::WasmSandbox> {
        match self {
            Self::Native(_) => None,
            Self::Session(s) => Some(s),
        }
    }
}
