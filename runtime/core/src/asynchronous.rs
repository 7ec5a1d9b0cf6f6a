//! An async adapter for tokio: the blocking [`Sandbox`] API run on tokio's
//! blocking pool, so a driver can keep many sandboxes busy from one runtime.

use std::sync::Arc;

use tokio::sync::Mutex;

use crate::runtime::{Result, RuntimeError};
use crate::sandbox::{ExecOptions, Observation, Sandbox, SandboxError};
use crate::snapshot::Snapshot;

/// A [`Sandbox`] usable from async code. Cloning shares the sandbox.
#[derive(Clone, Debug)]
pub struct AsyncSandbox {
    inner: Arc<Mutex<Sandbox>>,
}

fn join_error(e: tokio::task::JoinError) -> RuntimeError {
    RuntimeError::Sandbox(SandboxError::WorkerFailed(format!(
        "blocking task failed: {e}"
    )))
}

impl AsyncSandbox {
    /// Wrap a sandbox.
    pub fn new(sandbox: Sandbox) -> Self {
        Self {
            inner: Arc::new(Mutex::new(sandbox)),
        }
    }

    /// Open a sandbox on `snapshot` without blocking the async runtime.
    pub async fn open(snapshot: Snapshot) -> Result<Self> {
        let sb = tokio::task::spawn_blocking(move || snapshot.open())
            .await
            .map_err(join_error)??;
        Ok(Self::new(sb))
    }

    /// [`Sandbox::exec`] on the blocking pool.
    pub async fn exec(&self, command: String, opts: ExecOptions) -> Result<Observation> {
        let mut guard = self.inner.clone().lock_owned().await;
        tokio::task::spawn_blocking(move || guard.exec(&command, &opts).map_err(RuntimeError::from))
            .await
            .map_err(join_error)?
    }

    /// [`Sandbox::snapshot`] on the blocking pool.
    pub async fn snapshot(&self) -> Result<Snapshot> {
        let mut guard = self.inner.clone().lock_owned().await;
        tokio::task::spawn_blocking(move || guard.snapshot())
            .await
            .map_err(join_error)?
    }
}
