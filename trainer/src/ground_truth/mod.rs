//! Exact ground-truth credit (`arbor credit eval`).
//!
//! Arbor knows when two states are the same (content-addressed snapshots),
//! so for a Markov policy `Q^π(s, a)` and `A^π(s, a)` can be computed
//! exactly by dynamic programming over a task's reachable states, and any
//! credit estimator can be scored against them.
//!
//! - [`mdp`]: the plain in-memory MDP, its exact solution (`V^π`, `Q^π`,
//!   `A^π`, `d^π`) and the driver-faithful episode simulator;
//! - [`explore`]: fills an MDP from a native task by running every
//!   candidate action once per distinct state (memoised by content key);
//! - [`markov`]: the Markov policy (the trainer's DRRN without history) and
//!   its policy gradients;
//! - [`estimators`] and [`branching`]: GRPO, Dr.GRPO, RLOO, uniform /
//!   entropy / uncertainty branching trees, VinePPO-style and RTMC-style
//!   estimates, replayed from the MDP (no environment calls);
//! - [`metrics`]: MSE, decisive sign accuracy, sibling ranking accuracy,
//!   bootstrap intervals, budget to a target accuracy;
//! - [`validate`]: real driver trees checked against the cache;
//! - [`eval`], [`report`], [`chart`]: the command's pipeline and outputs.
//!
//! ```no_run
//! # fn demo(runtime: &arbor_rollout::runtime::Runtime,
//! #         tasks: &[arbor_trainer::ground_truth::eval::TaskInput]) -> Result<(), Box<dyn std::error::Error>> {
//! use arbor_trainer::ground_truth::{eval, report};
//! let cfg = eval::EvalConfig::quick();
//! let r = eval::run(runtime, tasks, &cfg, &eval::Quiet)?;
//! report::write_outputs(&r, std::path::Path::new("target/credit-eval"))?;
//! println!("{}", r.markdown);
//! # Ok(()) }
//! ```

pub mod branching;
pub mod chart;
pub mod estimators;
pub mod eval;
pub mod explore;
pub mod markov;
pub mod mdp;
pub mod metrics;
pub mod report;
pub mod validate;

use std::path::PathBuf;

use arbor_rollout::EnvError;

/// Why a ground-truth evaluation failed.
#[derive(Debug, thiserror::Error)]
pub enum GroundTruthError {
    /// The settings are not usable.
    #[error("credit eval: {0}")]
    Config(String),
    /// The environment failed (a runtime fault or a broken task).
    #[error("task {task}: {source}")]
    Env {
        /// The task.
        task: String,
        /// What failed (boxed: runtime errors are large).
        #[source]
        source: Box<EnvError>,
    },
    /// The task cannot be evaluated exactly (not native, too many states,
    /// a verdict that is a runtime fault, ...).
    #[error("task {task}: {message}")]
    Task {
        /// The task.
        task: String,
        /// What is wrong.
        message: String,
    },
    /// The explored MDP is malformed.
    #[error("task {task}: the explored MDP is malformed: {source}")]
    Mdp {
        /// The task.
        task: String,
        /// The violation.
        #[source]
        source: mdp::MdpError,
    },
    /// The policy network failed.
    #[error("task {task}: the Markov policy: {message}")]
    Policy {
        /// The task.
        task: String,
        /// What failed.
        message: String,
    },
    /// A live tree disagrees with the cache.
    #[error(
        "task {task}: live validation found {count} mismatch(es) between the real driver and the cache; the first: {first}"
    )]
    Mismatch {
        /// The task.
        task: String,
        /// How many.
        count: usize,
        /// The first, naming its edge or node.
        first: String,
    },
    /// An output file could not be written.
    #[error("{}: {message}", path.display())]
    Output {
        /// The file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
}
