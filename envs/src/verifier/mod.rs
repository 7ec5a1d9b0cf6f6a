//! The native tasks' layered verifier, and [`TaskEnv`] (in `native`), a
//! prepared native task that implements [`arbor_rollout::Environment`].
//!
//! Preparation imports the task's workspace (and runs its setup) as the root
//! snapshot, and imports the hidden checks, with the trusted runner, as a
//! separate single-layer snapshot. Both are tagged by a hash of the task's
//! files, so they are made once per store. The checks snapshot is never part
//! of any agent's sandbox. To grade, the verifier forks the episode's final
//! snapshot, resets the session (nothing the agent exported reaches the
//! checks), and runs the checks as a paired action across a process boundary
//! ([`checks`]): a trusted runner that holds the checks and never runs
//! workspace code, and a subject process that runs the code under test. The
//! reward depends only on the trusted runner's nonce-tagged result line, the
//! state diff, and the static analysis of the agent's changes
//! ([`integrity`]).

mod checks;
mod constraints;
pub mod integrity;
mod native;
mod recheck;

use std::time::Instant;

use arbor_rollout::{AgentAction, EnvError, EnvObservation};
use arbor_runtime::SandboxError;
use arbor_runtime::store::object::ExitStatus;

pub use checks::{
    ChecksDirError, ListFailure, NoReport, SiteError, VERIFIER_SITE_ENV, verifier_site,
};
pub(crate) use constraints::path_violations;
pub use constraints::shadows_stdlib;
pub use native::{PrepareKeyError, TaskEnv};
pub use recheck::{RecheckError, recheck};

use crate::task::{CandidateLabel, TaskSpec};

/// Bytes of an action's output kept in an observation.
const OBSERVATION_BYTES: usize = 8 << 10;

/// The trusted runner's report of one run of the hidden checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckRun {
    /// Every check it ran.
    pub tests: Vec<CheckReport>,
    /// A problem with the run as a whole (the budget ran out, say).
    pub problem: Option<String>,
    /// Why the subject process became unusable, if it did.
    pub subject: Option<String>,
}

/// One hidden check's outcome as the trusted runner reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckReport {
    /// `module.Class.method` (unittest) or a pytest node id; `module.*` or
    /// `file::*` for an error of a whole module.
    pub id: String,
    /// `pass`, `fail`, `error`, `skip`, `xfail` or `xpass`.
    pub outcome: String,
    /// The failure's text, or the skip's reason.
    pub detail: String,
}

/// What the agent sees after `step` actions: the task, and the last
/// action with its output and exit status.
pub(crate) fn observation(
    spec: &TaskSpec,
    step: usize,
    last: Option<(&AgentAction, String, ExitStatus)>,
) -> EnvObservation {
    let (last_action, output, exit) = match last {
        Some((action, output, exit)) => (Some(action.text()), output, Some(exit)),
        None => (None, String::new(), None),
    };
    EnvObservation {
        task: spec.id.clone(),
        instructions: spec.instructions.clone(),
        step,
        last_action,
        output,
        exit,
    }
}

/// A task's `right` candidates, in order.
pub(crate) fn right_candidates(spec: &TaskSpec) -> Vec<AgentAction> {
    spec.candidates
        .iter()
        .filter(|c| c.label == CandidateLabel::Right)
        .map(|c| c.action.clone())
        .collect()
}

/// A task's `right` candidates in order (which `task validate` proves
/// solve it), else its free-form gold.
pub(crate) fn reference_solution(spec: &TaskSpec) -> Vec<AgentAction> {
    let right = right_candidates(spec);
    if right.is_empty() {
        spec.gold.clone()
    } else {
        right
    }
}

/// The candidates in a fixed order that does not follow their labels (a
/// stable shuffle keyed by the task id), so position gives nothing away.
pub(crate) fn shuffled_candidates(spec: &TaskSpec) -> Vec<AgentAction> {
    let mut keyed: Vec<([u8; 32], AgentAction)> = spec
        .candidates
        .iter()
        .map(|c| {
            let mut h = blake3::Hasher::new();
            h.update(spec.id.as_bytes());
            h.update(c.action.text().as_bytes());
            (*h.finalize().as_bytes(), c.action.clone())
        })
        .collect();
    keyed.sort_by_key(|k| k.0);
    keyed.into_iter().map(|(_, a)| a).collect()
}

/// The label of `action` among the task's candidates, if it is one.
pub fn candidate_label(spec: &TaskSpec, action: &AgentAction) -> Option<CandidateLabel> {
    spec.candidates
        .iter()
        .find(|c| &c.action == action)
        .map(|c| c.label)
}

pub(crate) fn runtime_err(e: arbor_runtime::store::StoreError) -> EnvError {
    EnvError::Sandbox(SandboxError::Store(e))
}

pub(crate) fn millis(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)
}

pub(crate) fn nonce_bytes() -> [u8; 16] {
    let mut b = [0u8; 16];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_err()
    {
        // Fall back to a hash of time and pid (still unknown to the agent in advance).
        let mut h = blake3::Hasher::new();
        h.update(&std::process::id().to_le_bytes());
        h.update(format!("{:?}", std::time::SystemTime::now()).as_bytes());
        b.copy_from_slice(&h.finalize().as_bytes()[..16]);
    }
    b
}

pub(crate) fn cap(mut s: String) -> String {
    if s.len() > OBSERVATION_BYTES {
        let mut cut = OBSERVATION_BYTES;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        let dropped = s.len() - cut;
        s.truncate(cut);
        s.push_str(&format!("\n[... {dropped} bytes more]"));
    }
    s
}

pub(crate) fn tail(s: &str, n: usize) -> String {
    let s = s.trim();
    if s.len() <= n {
        return s.to_owned();
    }
    let mut start = s.len() - n;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &s[start..])
}
