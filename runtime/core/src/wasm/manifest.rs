//! The records of a WASM snapshot: how a step ended, the actions and their
//! digests, the globals and the manifest itself.

use serde::{Deserialize, Serialize};

use super::BootSpec;
use super::wasi::WasiState;
use crate::store::object::{LayerId, ObjectId};

/// How one step ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StepOutcome {
    /// The step ran to completion (`arbor_step` returned 0).
    Ok,
    /// The code raised an exception (status 1; traceback on stderr).
    Exception,
    /// `arbor_step` returned another status.
    Status {
        /// The status.
        status: u32,
    },
    /// The guest called `proc_exit`.
    Exited {
        /// Its exit code.
        code: i32,
    },
    /// The guest trapped.
    Trap {
        /// The trap.
        message: String,
    },
    /// The step used up its fuel.
    OutOfFuel,
    /// The step passed its wall-clock deadline.
    Timeout,
    /// The guest tried to grow its memory past the cap.
    MemoryLimit,
    /// The session had already ended; nothing ran.
    Ended,
}

impl StepOutcome {
    /// The step's status in the native vocabulary, the one mapping that
    /// commands, rollout records and exit codes share: 0 ok; 1 an exception
    /// (or a session that had ended); the code of an exit or other status;
    /// signal 6 (abort) for a trap; a timeout for fuel or time; the disk
    /// limit for the memory cap (the resource-limit status).
    pub fn exit_status(&self) -> crate::store::ExitStatus {
        use crate::store::ExitStatus;
        match self {
            Self::Ok => ExitStatus::Code { code: 0 },
            Self::Exception | Self::Ended => ExitStatus::Code { code: 1 },
            Self::Status { status } => ExitStatus::Code {
                code: i32::try_from(*status).unwrap_or(1),
            },
            Self::Exited { code } => ExitStatus::Code { code: *code },
            Self::Trap { .. } => ExitStatus::Signal { signal: 6 },
            Self::OutOfFuel | Self::Timeout => ExitStatus::Timeout,
            Self::MemoryLimit => ExitStatus::DiskLimit,
        }
    }

    /// A short label: `ok`, `exception`, `status N`, `exit N`, `trap`,
    /// `out of fuel`, `timeout`, `memory limit`, `ended`.
    pub fn label(&self) -> String {
        match self {
            Self::Ok => "ok".into(),
            Self::Exception => "exception".into(),
            Self::Status { status } => format!("status {status}"),
            Self::Exited { code } => format!("exit {code}"),
            Self::Trap { .. } => "trap".into(),
            Self::OutOfFuel => "out of fuel".into(),
            Self::Timeout => "timeout".into(),
            Self::MemoryLimit => "memory limit".into(),
            Self::Ended => "ended".into(),
        }
    }

    /// Whether the session can run further steps after this outcome.
    pub fn is_alive(&self) -> bool {
        matches!(
            self,
            StepOutcome::Ok | StepOutcome::Exception | StepOutcome::Status { .. }
        )
    }
}

#[cfg(test)]
mod outcome_tests {
    use super::StepOutcome;

    #[test]
    fn outcomes_map_onto_shell_statuses_once() {
        let cases = [
            (StepOutcome::Ok, 0, "ok"),
            (StepOutcome::Exception, 1, "exception"),
            (StepOutcome::Ended, 1, "ended"),
            (StepOutcome::Status { status: 7 }, 7, "status 7"),
            (StepOutcome::Exited { code: 3 }, 3, "exit 3"),
            (
                StepOutcome::Trap {
                    message: "unreachable".into(),
                },
                134,
                "trap",
            ),
            (StepOutcome::OutOfFuel, 124, "out of fuel"),
            (StepOutcome::Timeout, 124, "timeout"),
            (StepOutcome::MemoryLimit, 125, "memory limit"),
        ];
        for (o, code, label) in cases {
            assert_eq!(o.exit_status().shell_code(), code, "{o:?}");
            assert_eq!(o.label(), label);
        }
        // A status that does not fit an i32 is a plain failure, not a wrap.
        let big = StepOutcome::Status { status: u32::MAX };
        assert_eq!(big.exit_status().shell_code(), 1);
    }
}

/// One recorded action of a WASM session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WasmAction {
    /// Input for `arbor_step` (Python source for the Python guest).
    Step {
        /// The input.
        code: String,
    },
    /// A file written into the workspace by the host.
    WriteFile {
        /// Path relative to `/workspace`.
        path: String,
        /// The blob holding the content.
        content: ObjectId,
    },
    /// A file deleted from the workspace by the host.
    DeleteFile {
        /// Path relative to `/workspace`.
        path: String,
    },
}

impl WasmAction {
    /// One line saying what it did: `>>> x = 1` (a step's input on one
    /// line), `write a.txt`, `delete b` (as [`crate::store::Action::summary`]).
    pub fn summary(&self) -> String {
        match self {
            Self::Step { code } => format!(">>> {}", crate::store::object::one_line(code)),
            Self::WriteFile { path, .. } => format!("write {path}"),
            Self::DeleteFile { path } => format!("delete {path}"),
        }
    }
}

/// Digest of one action's observation (timestamps and durations excluded).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepDigest {
    /// Blob of the kept stdout.
    pub stdout: ObjectId,
    /// Blob of the kept stderr.
    pub stderr: ObjectId,
    /// Bytes of stdout and stderr dropped past the cap.
    pub dropped: [u64; 2],
    /// How it ended.
    pub outcome: StepOutcome,
    /// Fuel used (deterministic).
    pub fuel: u64,
}

/// A global's saved value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "bits", rename_all = "snake_case")]
pub enum GlobalValue {
    /// An `i32`.
    I32(i32),
    /// An `i64`.
    I64(i64),
    /// An `f32`, as bits.
    F32(u32),
    /// An `f64`, as bits.
    F64(u64),
    /// A `v128`, as hex.
    V128(String),
}

/// A WASM snapshot, stored as a blob object holding this as JSON; the
/// snapshot id is that object's id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WasmManifest {
    /// [`MANIFEST_FORMAT`](super::MANIFEST_FORMAT).
    pub format: u32,
    /// The guest module as imported (a blob).
    pub guest: ObjectId,
    /// How the guest was booted (root snapshots only).
    pub boot: Option<BootSpec>,
    /// The page index blob of the linear memory.
    pub memory: ObjectId,
    /// Memory size in 64 KiB pages.
    pub memory_pages: u64,
    /// blake3 of the page hashes: equal content, equal hash.
    pub memory_hash: ObjectId,
    /// Every mutable global, by export name.
    pub globals: Vec<(String, GlobalValue)>,
    /// Guest-visible WASI state.
    pub wasi: WasiState,
    /// Workspace layers, bottom first.
    pub layers: Vec<LayerId>,
    /// The snapshot this one was taken from.
    pub parent: Option<ObjectId>,
    /// Actions since the parent, in order.
    pub actions: Vec<WasmAction>,
    /// One digest per action.
    pub observations: Vec<StepDigest>,
    /// Set once a step ended the session (trap, limit): later steps do not run.
    pub ended: Option<StepOutcome>,
    /// Seconds since the Unix epoch.
    pub created_at: u64,
}
