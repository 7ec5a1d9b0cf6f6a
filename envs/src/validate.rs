//! `arbor task validate`: prove a task is solvable, not solvable by accident,
//! and not gameable.
//!
//! - the gold solution scores 1; doing nothing scores 0;
//! - every mutated gold (a `wrong` candidate in place of the gold action it
//!   `replaces`) scores 0;
//! - every single candidate alone scores 0, and the `right` candidates
//!   together, in order, score 1 (so a discrete policy can solve it); a
//!   one-edit task (`[validate] multi_step = false`, the default of the
//!   `upstream` family) is exempt from the first half for its `right`
//!   candidates, and from the structural rules on candidates;
//! - every canary (the generic suite and the task's own) scores 0;
//! - a workspace that is a git repository holds nothing beyond its base
//!   commit (no further commits, tags, remotes, stashes, reflog entries or
//!   unreachable objects that could leak the fix).

use std::time::Instant;

use arbor_rollout::{AgentAction, EnvError, Verdict};
use arbor_runtime::ExecOptions;
use serde::Serialize;

use crate::canary;
use crate::prepared::PreparedTask;
use crate::task::{Backend, CandidateLabel, TaskSpec};
use crate::verifier::{TaskEnv, right_candidates};

/// One validation check.
#[derive(Clone, Debug, Serialize)]
pub struct ValidationCheck {
    /// What was run (`gold`, `noop`, `mutated-gold[3]`, `candidate[2]`, `canary:conftest`).
    pub name: String,
    /// The reward it must get.
    pub expected: f64,
    /// The reward it got (`None`: a runtime fault).
    pub got: Option<f64>,
    /// Whether `got == expected`.
    pub ok: bool,
    /// The verdict's one-line summary.
    pub summary: String,
    /// Wall-clock milliseconds (actions and verification).
    pub ms: u64,
}

/// The result of validating one task.
#[derive(Clone, Debug, Serialize)]
pub struct ValidationReport {
    /// The task.
    pub task: String,
    /// Every check run.
    pub checks: Vec<ValidationCheck>,
    /// Structural problems (too few candidates, git history, ...).
    pub problems: Vec<String>,
}

impl ValidationReport {
    /// Whether the task passed.
    pub fn ok(&self) -> bool {
        self.problems.is_empty() && self.checks.iter().all(|c| c.ok)
    }

    /// The failures, one line each.
    pub fn failures(&self) -> Vec<String> {
        self.problems
            .iter()
            .cloned()
            .chain(self.checks.iter().filter(|c| !c.ok).map(|c| {
                format!(
                    "{}: expected reward {}, got {} ({})",
                    c.name,
                    c.expected,
                    c.got.map_or("none".to_owned(), |g| g.to_string()),
                    c.summary
                )
            }))
            .collect()
    }
}

/// The episodes validation runs, with the reward each must get.
pub fn plan(spec: &TaskSpec) -> Vec<(String, f64, Vec<AgentAction>)> {
    let mut plan = vec![
        ("gold".to_owned(), 1.0, spec.gold.clone()),
        ("noop".to_owned(), 0.0, Vec::new()),
    ];
    for (i, c) in spec.candidates.iter().enumerate() {
        if let (CandidateLabel::Wrong, Some(r)) = (c.label, c.replaces) {
            let mut mutated = spec.gold.clone();
            mutated[r] = c.action.clone();
            plan.push((format!("mutated-gold[candidate {i} at {r}]"), 0.0, mutated));
        }
    }
    for (i, c) in spec.candidates.iter().enumerate() {
        if !spec.multi_step && c.label == CandidateLabel::Right {
            continue;
        }
        plan.push((
            format!("candidate[{i}] alone ({:?})", c.label).to_lowercase(),
            0.0,
            vec![c.action.clone()],
        ));
    }
    let right = right_candidates(spec);
    if !right.is_empty() {
        plan.push(("right-candidates-in-order".to_owned(), 1.0, right));
    }
    for c in canary::generic(spec) {
        plan.push((format!("canary:{}", c.name), 0.0, c.actions));
    }
    for c in &spec.canaries {
        plan.push((format!("canary:{}", c.name), 0.0, c.actions.clone()));
    }
    plan
}

/// Structural rules on the candidates (those of the multi-step families
/// apply only to tasks that keep `multi_step`).
pub fn structural_problems(spec: &TaskSpec) -> Vec<String> {
    let mut p = Vec::new();
    if spec.backend == Backend::Wasm && spec.canaries.is_empty() {
        p.push(
            "no task-specific canary; a `wasm` task needs one (hard-code the visible example)"
                .to_owned(),
        );
    }
    if !spec.multi_step {
        return p;
    }
    let n = spec.candidates.len();
    if n < 6 {
        p.push(format!("{n} candidate actions; a task needs at least 6"));
    }
    let count = |l: CandidateLabel| spec.candidates.iter().filter(|c| c.label == l).count();
    if count(CandidateLabel::Right) == 0 {
        p.push("no `right` candidate".to_owned());
    }
    if count(CandidateLabel::Harmful) == 0 {
        p.push("no `harmful` candidate".to_owned());
    }
    if !spec
        .candidates
        .iter()
        .any(|c| c.label == CandidateLabel::Wrong && c.replaces.is_some())
    {
        p.push("no `wrong` candidate with `replaces` (the mutated gold)".to_owned());
    }
    p
}

/// Validate a prepared task, calling `progress` after each check.
///
/// # Errors
/// Runtime faults outside verification (which are recorded as failed checks).
pub fn validate(
    env: &PreparedTask,
    progress: &mut dyn FnMut(&ValidationCheck),
) -> Result<ValidationReport, EnvError> {
    let spec = env.spec();
    let mut problems = structural_problems(spec);
    // A native workspace's git history; a session's root has none.
    if let Some(native) = env.native() {
        problems.extend(git_problems(native)?);
    }
    let mut checks = Vec::new();
    for (name, expected, actions) in plan(spec) {
        let t = Instant::now();
        let verdict: Verdict = env.run_and_verify(&actions)?;
        let check = ValidationCheck {
            ok: verdict.reward == Some(expected),
            got: verdict.reward,
            summary: verdict.summary(),
            name,
            expected,
            ms: u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX),
        };
        progress(&check);
        checks.push(check);
    }
    Ok(ValidationReport {
        task: spec.id.clone(),
        checks,
        problems,
    })
}

const GIT_PROBE: &str = r#"cd /workspace
if [ -e .git ]; then
  echo "commits $(git rev-list --all --count 2>/dev/null || echo 0)"
  echo "tags $(git tag -l | wc -l)"
  echo "remotes $(git remote | wc -l)"
  echo "stashes $(git stash list 2>/dev/null | wc -l)"
  echo "refs $(git for-each-ref | wc -l)"
  echo "reflog $(git reflog 2>/dev/null | wc -l)"
  echo "unreachable $(git fsck --unreachable --no-reflogs 2>/dev/null | wc -l)"
fi"#;

/// A git workspace must hold nothing beyond its base state.
fn git_problems(env: &TaskEnv) -> Result<Vec<String>, EnvError> {
    let mut sb = env.root().open()?;
    let obs = sb.exec(GIT_PROBE, &ExecOptions::with_timeout_ms(30_000))?;
    let text = String::from_utf8_lossy(&obs.stdout).into_owned();
    let mut problems = Vec::new();
    for line in text.lines() {
        let Some((what, n)) = line.split_once(' ') else {
            continue;
        };
        let n: u64 = n.trim().parse().unwrap_or(u64::MAX);
        let max = match what {
            "commits" | "refs" | "reflog" => 1,
            _ => 0,
        };
        if n > max {
            problems.push(format!(
                "the workspace's git repository has {n} {what} (at most {max}): history beyond the base state can leak the fix"
            ));
        }
    }
    Ok(problems)
}
