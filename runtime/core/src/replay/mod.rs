//! Replay: re-execute a snapshot's action chain from its root, in fresh
//! forks, and compare every observation digest with the recorded one.
//!
//! Same-state branching is only worth something if a state can be
//! reproduced: the difference between two branches must come from the
//! action at the fork, not from noise in the prefix. [`replay`] proves a
//! chain deterministic, or names each step that diverged, which part (stdout,
//! stderr, exit status, filesystem), and shows both sides.
//!
//! Each step of the chain (one snapshot and the actions that produced it) is
//! re-executed in a fresh sandbox opened on the *replayed* previous snapshot,
//! so replaying through forks and running the chain linearly see the same
//! world (design invariant 8). By default every divergent step is reported
//! and replay continues from the replayed state; `strict` stops at the first.
//!
//! What is controlled and what is not is listed by [`explain`] (`arbor
//! replay --explain`).

use std::time::Instant;

use serde::Serialize;

use crate::digest::digest_tree;
use crate::layer::MergedView;
use crate::runtime::{Result, RuntimeError};
use crate::sandbox::Sandbox;
use crate::snapshot::Snapshot;
use crate::store::object::{
    Action, EntryKind, ExitStatus, ObjectId, ObservationDigest, SnapshotId, Tree, TreeEntry,
};
use crate::{Runtime, SandboxError};

/// Options of a replay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayOptions {
    /// Stop at the first divergent step.
    pub strict: bool,
}

/// The outcome of a replay.
#[derive(Clone, Debug, Serialize)]
pub struct ReplayReport {
    /// The snapshot whose chain was replayed.
    pub target: SnapshotId,
    /// The root of the chain (replay starts from it; it is not re-created).
    pub root: SnapshotId,
    /// Every replayed step, in chain order.
    pub steps: Vec<StepReport>,
    /// The snapshot the replay ended with.
    pub replayed: SnapshotId,
    /// Whether every replayed observation matched its record.
    pub identical: bool,
    /// Whether replay stopped early (`strict` and a divergence).
    pub stopped_early: bool,
    /// Actions executed.
    pub actions: usize,
    /// Wall-clock time of the replay in milliseconds.
    pub duration_ms: u64,
}

impl ReplayReport {
    /// The first divergent step, if any.
    pub fn first_divergence(&self) -> Option<&StepReport> {
        self.steps.iter().find(|s| !s.divergences.is_empty())
    }
}

/// One step of the chain: the actions between a snapshot and its parent.
#[derive(Clone, Debug, Serialize)]
pub struct StepReport {
    /// 1-based position in the chain (the root is step 0 and is not replayed).
    pub step: usize,
    /// The recorded snapshot of this step.
    pub recorded: SnapshotId,
    /// The snapshot replay produced for this step.
    pub replayed: SnapshotId,
    /// The actions, summarised.
    pub actions: Vec<String>,
    /// What differed (empty when the step replayed identically).
    pub divergences: Vec<Divergence>,
}

/// One difference between a recorded and a replayed observation (or, for a
/// WebAssembly session, between a recorded and a replayed snapshot's state).
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "part", rename_all = "snake_case")]
pub enum Divergence {
    /// Standard output differs.
    Stdout {
        /// Index of the action within the step.
        action: usize,
        /// A short line diff of both sides.
        diff: Vec<String>,
    },
    /// Standard error differs.
    Stderr {
        /// Index of the action within the step.
        action: usize,
        /// A short line diff of both sides.
        diff: Vec<String>,
    },
    /// The exit status differs.
    Exit {
        /// Index of the action within the step.
        action: usize,
        /// As recorded.
        recorded: ExitStatus,
        /// As replayed.
        replayed: ExitStatus,
    },
    /// The filesystem delta differs.
    Filesystem {
        /// Index of the action within the step.
        action: usize,
        /// The paths that differ, each with what differs.
        paths: Vec<String>,
    },
    /// The step recorded a different number of observations than replay produced.
    ObservationCount {
        /// As recorded.
        recorded: usize,
        /// As replayed.
        replayed: usize,
    },
    /// A session's linear memory differs (WebAssembly backend).
    Memory {
        /// The recorded memory hash.
        recorded: ObjectId,
        /// The replayed memory hash.
        replayed: ObjectId,
    },
    /// A session's mutable globals differ (WebAssembly backend).
    Globals {
        /// The globals whose values differ (or that only one side has).
        names: Vec<String>,
    },
    /// A session's guest-visible WASI state differs: arguments, environment,
    /// clocks, the generator's position (WebAssembly backend).
    Wasi,
    /// A session's workspace differs (WebAssembly backend).
    Workspace {
        /// The paths that differ, each with what differs.
        paths: Vec<String>,
    },
    /// The fuel an action used differs (WebAssembly backend).
    Fuel {
        /// Index of the action within the step.
        action: usize,
        /// As recorded.
        recorded: u64,
        /// As replayed.
        replayed: u64,
    },
    /// How an action, or the session, ended differs (WebAssembly backend).
    Outcome {
        /// Index of the action within the step; `None`: the session's end.
        action: Option<usize>,
        /// As recorded.
        recorded: String,
        /// As replayed.
        replayed: String,
    },
}

impl std::fmt::Display for Divergence {
    /// One line naming what differs (the diff lines and paths are left out).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stdout { action, .. } => write!(f, "action {}: stdout differs", action + 1),
            Self::Stderr { action, .. } => write!(f, "action {}: stderr differs", action + 1),
            Self::Exit {
                action,
                recorded,
                replayed,
            } => write!(
                f,
                "action {}: exit status differs: recorded {recorded:?}, replayed {replayed:?}",
                action + 1
            ),
            Self::Filesystem { action, paths } => write!(
                f,
                "action {}: filesystem differs ({} paths)",
                action + 1,
                paths.len()
            ),
            Self::ObservationCount { recorded, replayed } => {
                write!(f, "{recorded} observations recorded, {replayed} replayed")
            }
            Self::Memory { recorded, replayed } => write!(
                f,
                "memory differs: recorded {}, replayed {}",
                recorded.short(),
                replayed.short()
            ),
            Self::Globals { names } => write!(f, "globals differ: {}", names.join(", ")),
            Self::Wasi => write!(f, "WASI state differs"),
            Self::Workspace { paths } => {
                write!(f, "workspace differs ({} paths)", paths.len())
            }
            Self::Fuel {
                action,
                recorded,
                replayed,
            } => write!(
                f,
                "action {}: fuel differs: recorded {recorded}, replayed {replayed}",
                action + 1
            ),
            Self::Outcome {
                action,
                recorded,
                replayed,
            } => {
                if let Some(a) = action {
                    write!(f, "action {}: ", a + 1)?;
                } else {
                    write!(f, "the session's end: ")?;
                }
                write!(
                    f,
                    "outcome differs: recorded {recorded}, replayed {replayed}"
                )
            }
        }
    }
}

/// Re-executes recorded actions from a snapshot, in a fresh fork.
#[derive(Clone, Debug)]
pub struct Replayer {
    runtime: Runtime,
}

impl Replayer {
    /// A replayer on `runtime`'s store.
    pub fn new(runtime: Runtime) -> Self {
        Self { runtime }
    }

    /// Apply `actions` in a fresh sandbox opened on `from`, snapshot the
    /// result, and return it with the observation digests, in order.
    pub fn run(
        &self,
        from: &Snapshot,
        actions: &[Action],
    ) -> Result<(Snapshot, Vec<ObservationDigest>)> {
        let mut sandbox: Sandbox = self.runtime.open_sandbox(from)?;
        let mut digests = Vec::new();
        for action in actions {
            digests.extend(sandbox.apply(action)?);
        }
        let snapshot = sandbox.snapshot()?;
        Ok((snapshot, digests))
    }
}

/// Flatten a step's recorded action into the actions it consists of.
fn step_actions(action: &Option<Action>) -> Vec<Action> {
    match action {
        None => Vec::new(),
        Some(Action::Sequence { actions }) => actions.clone(),
        Some(a) => vec![a.clone()],
    }
}

/// Replay `target`'s chain from its root and compare every observation.
///
/// # Errors
/// A chain that cannot be replayed is an error, not a divergence: a missing
/// or corrupt manifest or root layer (named in the error), an import in the
/// middle of a chain, a sandbox that cannot be opened.
pub fn replay(runtime: &Runtime, target: &Snapshot, opts: ReplayOptions) -> Result<ReplayReport> {
    let started = Instant::now();
    let chain = runtime.log(target).map_err(|e| broken_chain(target, e))?;
    let Some(root) = chain.first().cloned() else {
        return Err(RuntimeError::Sandbox(SandboxError::Unreplayable(
            "empty chain".into(),
        )));
    };
    // The root is the starting state: verify its layers byte for byte, since
    // everything replayed builds on them.
    for layer in &root.manifest().layers {
        let problems = runtime.store().verify_layer(layer)?;
        if let Some(p) = problems.first() {
            return Err(RuntimeError::Sandbox(SandboxError::Unreplayable(format!(
                "cannot replay {}: its root {} is corrupt: {p}",
                target.id().short(),
                root.id().short()
            ))));
        }
    }
    let replayer = Replayer::new(runtime.clone());
    let mut current = root.clone();
    let mut steps = Vec::new();
    let mut actions_run = 0;
    let mut stopped_early = false;
    for (index, recorded) in chain.iter().enumerate().skip(1) {
        let actions = step_actions(&recorded.manifest().action);
        if actions.iter().any(|a| matches!(a, Action::Import { .. })) {
            return Err(RuntimeError::Sandbox(SandboxError::Unreplayable(format!(
                "cannot replay step {index} ({}): an import is only valid as a root",
                recorded.id().short()
            ))));
        }
        let (replayed, digests) = replayer.run(&current, &actions)?;
        actions_run += actions.len();
        let divergences = compare(runtime, &recorded.manifest().observations, &digests)?;
        let diverged = !divergences.is_empty();
        steps.push(StepReport {
            step: index,
            recorded: *recorded.id(),
            replayed: *replayed.id(),
            actions: actions.iter().map(Action::summary).collect(),
            divergences,
        });
        current = replayed;
        if diverged && opts.strict {
            stopped_early = index + 1 < chain.len();
            break;
        }
    }
    let identical = steps.iter().all(|s| s.divergences.is_empty());
    Ok(ReplayReport {
        target: *target.id(),
        root: *root.id(),
        replayed: *current.id(),
        identical,
        stopped_early,
        actions: actions_run,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        steps,
    })
}

fn broken_chain(target: &Snapshot, e: RuntimeError) -> RuntimeError {
    RuntimeError::Sandbox(SandboxError::Unreplayable(format!(
        "cannot replay {}: its chain to the root is broken: {e}",
        target.id().short()
    )))
}

/// Compare recorded and replayed digests of one step.
fn compare(
    runtime: &Runtime,
    recorded: &[ObservationDigest],
    replayed: &[ObservationDigest],
) -> Result<Vec<Divergence>> {
    let mut out = Vec::new();
    if recorded.len() != replayed.len() {
        out.push(Divergence::ObservationCount {
            recorded: recorded.len(),
            replayed: replayed.len(),
        });
    }
    let store = runtime.store();
    for (action, (r, p)) in recorded.iter().zip(replayed).enumerate() {
        if r.stdout != p.stdout {
            out.push(Divergence::Stdout {
                action,
                diff: line_diff(&store.get_blob(&r.stdout)?, &store.get_blob(&p.stdout)?),
            });
        }
        if r.stderr != p.stderr {
            out.push(Divergence::Stderr {
                action,
                diff: line_diff(&store.get_blob(&r.stderr)?, &store.get_blob(&p.stderr)?),
            });
        }
        if r.exit != p.exit {
            out.push(Divergence::Exit {
                action,
                recorded: r.exit,
                replayed: p.exit,
            });
        }
        if r.fs_delta != p.fs_delta {
            let a = digest_tree(&store.get_tree(&r.fs_delta)?);
            let b = digest_tree(&store.get_tree(&p.fs_delta)?);
            out.push(Divergence::Filesystem {
                action,
                paths: tree_diff(&a, &b),
            });
        }
    }
    Ok(out)
}

/// Lines that differ, at most a few, as `-` (recorded) and `+` (replayed).
pub fn line_diff(recorded: &[u8], replayed: &[u8]) -> Vec<String> {
    const MAX: usize = 6;
    let a = String::from_utf8_lossy(recorded);
    let b = String::from_utf8_lossy(replayed);
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    let mut out = Vec::new();
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (a.get(i), b.get(i));
        if x == y {
            continue;
        }
        if out.len() >= MAX {
            out.push("…".to_owned());
            break;
        }
        let clip = |s: &str| -> String {
            if s.chars().count() > 120 {
                format!("{}…", s.chars().take(120).collect::<String>())
            } else {
                s.to_owned()
            }
        };
        match x {
            Some(x) => out.push(format!("line {}: - {}", i + 1, clip(x))),
            None => out.push(format!("line {}: - (absent)", i + 1)),
        }
        match y {
            Some(y) => out.push(format!("line {}: + {}", i + 1, clip(y))),
            None => out.push(format!("line {}: + (absent)", i + 1)),
        }
    }
    if out.is_empty() {
        // Same lines, different bytes (e.g. a missing final newline).
        out.push(format!(
            "same lines, different bytes ({} vs {} bytes)",
            recorded.len(),
            replayed.len()
        ));
    }
    out
}

/// Paths whose entries differ between two delta trees, with what differs:
/// first the recorded paths (changed or only recorded), then those only in
/// the replay, each group in path order.
pub fn tree_diff(recorded: &Tree, replayed: &Tree) -> Vec<String> {
    let view = |t: &Tree| MergedView {
        entries: t
            .entries
            .iter()
            .map(|e| (e.path.clone(), e.clone()))
            .collect(),
    };
    view_diff(&view(recorded), &view(replayed))
}

/// [`tree_diff`] of two merged views (e.g. two workspaces' layer chains).
pub fn view_diff(a: &MergedView, b: &MergedView) -> Vec<String> {
    let d = crate::layer::diff(a, b);
    let mut out: Vec<(&String, String)> = d
        .deleted
        .iter()
        .map(|p| (p, format!("{p}: only in the recorded run")))
        .chain(d.modified.iter().map(|p| {
            (
                p,
                format!("{p}: {}", what_differs(&a.entries[p], &b.entries[p])),
            )
        }))
        .collect();
    out.sort();
    let mut lines: Vec<String> = out.into_iter().map(|(_, line)| line).collect();
    lines.extend(d.added.iter().map(|p| format!("{p}: only in the replay")));
    lines
}

fn what_differs(a: &TreeEntry, b: &TreeEntry) -> &'static str {
    match (&a.kind, &b.kind) {
        (EntryKind::File { .. }, EntryKind::File { .. }) if a.mode == b.mode => "content differs",
        (EntryKind::Symlink { .. }, EntryKind::Symlink { .. }) => "symlink target differs",
        _ if std::mem::discriminant(&a.kind) != std::mem::discriminant(&b.kind) => "type differs",
        _ if a.mode != b.mode => "mode differs",
        _ if (a.uid, a.gid) != (b.uid, b.gid) => "owner differs",
        _ => "differs",
    }
}

/// What replay controls and what it cannot, for `arbor replay --explain`.
pub fn explain() -> String {
    let mut out = String::from("Determinism controls (on for every action):\n");
    for (k, v) in crate::sandbox::env::fixed_env() {
        out.push_str(&format!("  {k}={v}\n"));
    }
    out.push_str(&format!(
        "  hostname {}; a fresh pid namespace per action (PIDs repeat); a fresh /tmp per action;\n  \
         no network but loopback; timestamps and inode numbers are not part of filesystem digests\n",
        crate::sandbox::env::HOSTNAME
    ));
    out.push_str("\nLeft out of filesystem digests (the whole list):\n");
    for (path, why) in crate::digest::DIGEST_EXCLUDED {
        out.push_str(&format!("  {path}  ({why})\n"));
    }
    out.push_str(
        "\nNot controlled (replay reports these as divergent at their step):\n  \
         the clock (date, python time.time(), file mtimes printed by ls -l),\n  \
         $RANDOM and /dev/urandom (and so mktemp names, uuid, Python's random without a seed),\n  \
         output that prints durations (e.g. unittest's \"Ran N tests in 0.001s\").\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, byte: u8) -> TreeEntry {
        TreeEntry {
            path: path.into(),
            mode: 0o644,
            uid: 0,
            gid: 0,
            kind: EntryKind::File {
                size: 1,
                hash: crate::store::object::ObjectId([byte; 32]),
            },
        }
    }

    #[test]
    fn diffs_name_lines_and_paths() {
        let d = line_diff(b"same\nold\n", b"same\nnew\nextra\n");
        assert_eq!(
            d,
            [
                "line 2: - old",
                "line 2: + new",
                "line 3: - (absent)",
                "line 3: + extra"
            ]
        );
        assert_eq!(
            line_diff(b"a", b"a\n"),
            ["same lines, different bytes (1 vs 2 bytes)"]
        );
        let a = Tree {
            entries: vec![file("a", 1), file("b", 1)],
        };
        let b = Tree {
            entries: vec![file("a", 2), file("c", 1)],
        };
        assert_eq!(
            tree_diff(&a, &b),
            [
                "a: content differs",
                "b: only in the recorded run",
                "c: only in the replay"
            ]
        );
    }
}
