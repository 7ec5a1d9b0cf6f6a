//! [`PreparedTask`]: a task of either backend, ready to run and verify —
//! what `arbor task run` and `arbor task validate` use — and
//! [`environment`], the same as an [`Environment`] for rollouts and
//! training (both [`crate::TaskEnv`] and, with feature `wasm`,
//! `SessionEnv` implement it).

use arbor_rollout::env::describe_exit;
use std::sync::Arc;

use arbor_rollout::{AgentAction, EnvError, Environment, Verdict};
use arbor_runtime::Runtime;
use serde::Serialize;

use crate::task::{Backend, TaskSpec};
use crate::verifier::TaskEnv;

/// What a binary built without the `wasm` feature says about a `wasm` task.
pub const WITHOUT_WASM: &str = "this arbor was built without the wasm feature, so it cannot run \
                                `backend = \"wasm\"` tasks (rebuild with --features wasm)";

/// A prepared task of either backend.
#[derive(Debug)]
pub enum PreparedTask {
    /// `backend = "native"`.
    Native(Box<TaskEnv>),
    /// `backend = "wasm"`.
    #[cfg(feature = "wasm")]
    Session(Box<crate::session::SessionEnv>),
}

/// One action of [`PreparedTask::run_report`], for display.
#[derive(Clone, Debug, Serialize)]
pub struct StepReport {
    /// The action.
    pub action: AgentAction,
    /// How it ended (`exit 0`, `exception`, `out of fuel`, ...).
    pub exit: String,
    /// Wall-clock milliseconds.
    pub duration_ms: f64,
    /// Its output (capped).
    pub output: String,
}

/// Prepare `spec` with the runtime its backend needs.
///
/// # Errors
/// Preparation failures; for a `wasm` task in a build without the feature,
/// [`WITHOUT_WASM`].
pub fn prepare(runtime: &Runtime, spec: TaskSpec) -> Result<PreparedTask, EnvError> {
    match spec.backend {
        Backend::Native => {
            TaskEnv::prepare(runtime, spec).map(|e| PreparedTask::Native(Box::new(e)))
        }
        #[cfg(feature = "wasm")]
        Backend::Wasm => crate::session::SessionEnv::prepare(runtime, spec)
            .map(|e| PreparedTask::Session(Box::new(e))),
        #[cfg(not(feature = "wasm"))]
        Backend::Wasm => Err(EnvError::Task {
            task: spec.id,
            message: WITHOUT_WASM.to_owned(),
        }),
    }
}

/// Prepare `spec` as an [`Environment`] (either backend), for rollouts,
/// credit and training.
///
/// # Errors
/// As [`prepare`].
pub fn environment(runtime: &Runtime, spec: TaskSpec) -> Result<Arc<dyn Environment>, EnvError> {
    Ok(match prepare(runtime, spec)? {
        PreparedTask::Native(e) => Arc::new(*e),
        #[cfg(feature = "wasm")]
        PreparedTask::Session(e) => Arc::new(*e),
    })
}

impl PreparedTask {
    /// The task.
    pub fn spec(&self) -> &TaskSpec {
        match self {
            Self::Native(e) => e.spec(),
            #[cfg(feature = "wasm")]
            Self::Session(e) => e.spec(),
        }
    }

    /// Run `actions` from the task's root and verify the result.
    ///
    /// # Errors
    /// Runtime faults while running the actions.
    pub fn run_and_verify(&self, actions: &[AgentAction]) -> Result<Verdict, EnvError> {
        match self {
            Self::Native(e) => e.run_and_verify(actions),
            #[cfg(feature = "wasm")]
            Self::Session(e) => e.run_and_verify(actions),
        }
    }

    /// Run `actions`, verify, and report every step and the final
    /// snapshot's id.
    ///
    /// # Errors
    /// Runtime faults while running the actions.
    pub fn run_report(
        &self,
        actions: &[AgentAction],
    ) -> Result<(Vec<StepReport>, String, Verdict), EnvError> {
        match self {
            Self::Native(env) => {
                let (episode, results) = env.run(actions)?;
                let verdict = env.verify(&episode);
                let steps = results
                    .iter()
                    .map(|r| StepReport {
                        action: r.record.action.clone(),
                        exit: describe_exit(&r.record.exit),
                        duration_ms: r.record.duration_us as f64 / 1000.0,
                        output: r.observation.output.clone(),
                    })
                    .collect();
                Ok((steps, episode.last.id().to_string(), verdict))
            }
            #[cfg(feature = "wasm")]
            Self::Session(env) => {
                let episode = env.run(actions)?;
                let verdict = env.verify(&episode);
                let steps = episode
                    .steps
                    .iter()
                    .map(|s| StepReport {
                        action: s.action.clone(),
                        exit: crate::session::describe_outcome(&s.outcome),
                        duration_ms: s.duration_us as f64 / 1000.0,
                        output: s.output.clone(),
                    })
                    .collect();
                Ok((steps, episode.last.id().to_string(), verdict))
            }
        }
    }

    /// The native task environment, if this is one.
    pub fn native(&self) -> Option<&TaskEnv> {
        match self {
            Self::Native(e) => Some(e),
            #[cfg(feature = "wasm")]
            Self::Session(_) => None,
        }
    }
}
