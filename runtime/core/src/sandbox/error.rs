//! The errors of the sandbox module: each variant names what failed.

use std::path::{Path, PathBuf};

use super::helper;
use crate::layer;
use crate::store::StoreError;

/// Errors of the sandbox module.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A filesystem or process operation on the host failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// On what.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The image's `User` cannot be resolved, so no sandbox opens on it.
    #[error("image {image}: {why}")]
    ImageUser {
        /// The image's short id.
        image: String,
        /// What is missing.
        why: String,
    },
    /// The helper binary could not be found.
    #[error(
        "cannot find the sandbox helper: set ARBOR_SANDBOX_HELPER, run the `arbor` binary, or build it with `cargo build -p arbor-runtime --bins`"
    )]
    HelperNotFound,
    /// A request failed inside the helper (or a set-up step the runtime
    /// makes on its behalf, such as writing its id maps): the operation,
    /// the path and the errno.
    #[error("sandbox helper: {error}{}", log_tail(log))]
    Helper {
        /// What failed.
        error: helper::HelperError,
        /// The last lines of the helper's log, when they were read.
        log: String,
    },
    /// The helper died (a runtime fault, never the agent's doing).
    #[error("sandbox helper died ({what}; exit status {status:?}); its last log lines:\n{log}")]
    HelperDied {
        /// What the runtime was doing when it noticed.
        what: String,
        /// The helper's exit status, if known.
        status: Option<String>,
        /// The tail of the helper's log.
        log: String,
    },
    /// The helper's reply was malformed, or not the reply the request expects.
    #[error("sandbox helper protocol: {what}")]
    Protocol {
        /// What was wrong with the reply.
        what: String,
    },
    /// An object could not be encoded.
    #[error("encode {what}: {source}")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// A recorded action cannot be applied inside a sandbox (an import).
    #[error("an import of {origin} cannot be re-applied inside a sandbox")]
    NotReapplicable {
        /// Where the import came from.
        origin: String,
    },
    /// An operation of one workspace backend was asked of the other.
    #[error("{op} needs the copy backend")]
    NeedsCopyBackend {
        /// The operation.
        op: &'static str,
    },
    /// The overlay's upper directory disappeared after a failed seal.
    #[error("the upper directory {} is gone; open a new sandbox", path.display())]
    UpperGone {
        /// The directory.
        path: PathBuf,
    },
    /// The workspace changed while it was being sealed.
    #[error("{0}")]
    SealRace(String),
    /// A chain cannot be replayed (an error, not a divergence).
    #[error("{0}")]
    Unreplayable(String),
    /// A worker thread or blocking task panicked or was cancelled.
    #[error("{0}")]
    WorkerFailed(String),
    /// A lock was poisoned by a panicking thread.
    #[error("{0} lock poisoned")]
    Poisoned(&'static str),
    /// An egress allowlist was refused.
    #[error("egress: {0}")]
    Egress(String),
    /// A file operation failed inside the sandbox (missing file, hostile path, ...).
    #[error("{0}")]
    File(String),
    /// A read-only mount was asked for something that cannot be mounted.
    #[error("{0}")]
    Mount(String),
    /// A store operation failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A layer operation failed.
    #[error(transparent)]
    Layer(#[from] layer::LayerError),
}

fn log_tail(log: &str) -> String {
    if log.is_empty() {
        String::new()
    } else {
        format!("; helper log: {log}")
    }
}

impl SandboxError {
    /// Whether this is the overlay mount failing (the runtime then falls
    /// back to the copy backend).
    pub fn is_overlay_unavailable(&self) -> bool {
        matches!(self, Self::Helper { error, .. } if error.is_overlay_mount())
    }

    pub(crate) fn io(op: &'static str, path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            op,
            path: path.to_owned(),
            source,
        }
    }
}

/// Result type of this module.
pub type Result<T, E = SandboxError> = std::result::Result<T, E>;
