//! The task-environment skeleton both kinds of task share: a native task
//! ([`crate::TaskEnv`]) and a session task (`SessionEnv`, feature `wasm`)
//! differ only in how they make a root, run one action and grade; the
//! preparation key, the process diagnostics, the hard constraints and the
//! soft quality are written here once, behind the [`TaskBackend`] seam.

use std::path::Path;

use arbor_rollout::env::{
    HardConstraints, ProcessDiagnostics, SoftQuality, Violation, ViolationKind,
};
use arbor_rollout::{AgentAction, EnvLimits};
use arbor_runtime::layer::{self, MergedView};
use arbor_runtime::store::object::EntryKind;

use crate::task::TaskSpec;
use crate::verifier::path_violations;

/// Files larger than this are not read to count changed lines.
const QUALITY_READ_LIMIT: u64 = 256 << 10;

/// What the skeleton needs to know of one recorded action.
#[derive(Clone, Debug)]
pub(crate) struct StepFacts {
    /// Whether it was code (`exec`).
    pub is_exec: bool,
    /// Whether it ended well (exit 0; a session step's `ok`).
    pub ok: bool,
    /// Wall-clock microseconds.
    pub duration_us: u64,
    /// The hard constraint it broke on its own (a timeout, a crash), if any.
    pub violation: Option<Violation>,
}

/// The backend-specific half of a task environment: how a recorded step
/// reads. The rest of grading (diagnostics, hard constraints) is provided.
pub(crate) trait TaskBackend {
    /// One recorded action of an episode.
    type Step;

    /// The task.
    fn spec(&self) -> &TaskSpec;

    /// What the skeleton needs to know of step `index`.
    fn facts(&self, index: usize, step: &Self::Step) -> StepFacts;

    /// The process diagnostics of an episode of `steps`, before grading.
    fn process(&self, steps: &[Self::Step]) -> ProcessDiagnostics {
        let facts: Vec<StepFacts> = steps
            .iter()
            .enumerate()
            .map(|(i, s)| self.facts(i, s))
            .collect();
        ProcessDiagnostics {
            steps: facts.len(),
            commands: facts.iter().filter(|f| f.is_exec).count(),
            failed: facts.iter().filter(|f| !f.ok).count(),
            agent_ms: agent_ms(&facts),
            ..ProcessDiagnostics::default()
        }
    }

    /// The hard constraints of an episode of `steps` that changed the
    /// workspace from `base` to `last`: paths, the step limit, each step's
    /// own violation, the total time limit.
    fn hard_constraints(
        &self,
        steps: &[Self::Step],
        base: &MergedView,
        last: &MergedView,
    ) -> HardConstraints {
        let spec = self.spec();
        let mut violations = path_violations(spec, base, last);
        violations.extend(step_limit_violation(&spec.limits, steps.len()));
        let facts: Vec<StepFacts> = steps
            .iter()
            .enumerate()
            .map(|(i, s)| self.facts(i, s))
            .collect();
        violations.extend(facts.iter().filter_map(|f| f.violation.clone()));
        violations.extend(time_limit_violation(&spec.limits, agent_ms(&facts)));
        HardConstraints { violations }
    }
}

/// Milliseconds the agent's actions took in all.
fn agent_ms(facts: &[StepFacts]) -> u64 {
    facts.iter().map(|f| f.duration_us).sum::<u64>() / 1000
}

/// The violation of an episode of `steps` actions past the task's step limit.
pub(crate) fn step_limit_violation(limits: &EnvLimits, steps: usize) -> Option<Violation> {
    (steps > limits.max_steps).then(|| Violation {
        kind: ViolationKind::StepLimit,
        detail: format!("{steps} actions, the task allows {}", limits.max_steps),
    })
}

/// The violation of actions that took `agent_ms` in all, past the task's
/// total time limit.
pub(crate) fn time_limit_violation(limits: &EnvLimits, agent_ms: u64) -> Option<Violation> {
    (agent_ms > limits.total_time_ms).then(|| Violation {
        kind: ViolationKind::TimeLimit,
        detail: format!(
            "actions took {agent_ms} ms, the task allows {}",
            limits.total_time_ms
        ),
    })
}

/// Reads one file of the final state; `Ok(None)` skips it.
pub(crate) type ReadFinal<'a, E> = dyn FnMut(&str) -> Result<Option<Vec<u8>>, E> + 'a;

/// How [`quality`] reads the final state's files.
pub(crate) enum FinalFiles<'a, E> {
    /// Not read (nothing to read them with): only the counts.
    #[cfg_attr(
        not(feature = "wasm"),
        expect(dead_code, reason = "only session tasks grade unread states")
    )]
    Unread,
    /// Read with this function.
    Read(&'a mut ReadFinal<'a, E>),
}

/// The soft quality of a change from `base` to `last`: files added,
/// modified and deleted, and the lines changed — `code_lines` (code the
/// agent ran), plus the lines of every added or modified file read through
/// `files`, plus, with `count_deleted`, the lines of deleted files.
///
/// # Errors
/// What `files` returns.
pub(crate) fn quality<E>(
    spec: &TaskSpec,
    base: &MergedView,
    last: &MergedView,
    code_lines: usize,
    files: FinalFiles<'_, E>,
    count_deleted: bool,
) -> Result<SoftQuality, E> {
    let d = layer::diff(base, last);
    let mut changed_lines = code_lines;
    if let FinalFiles::Read(read) = files {
        for path in d.added.iter().chain(&d.modified) {
            let Some(EntryKind::File { size, .. }) = last.entries.get(path).map(|e| &e.kind) else {
                continue;
            };
            if *size > QUALITY_READ_LIMIT {
                continue;
            }
            let Some(new) = read(path)? else { continue };
            let old = if d.modified.contains(path) {
                std::fs::read(spec.workspace.join(path)).unwrap_or_default()
            } else {
                Vec::new()
            };
            changed_lines += line_changes(&old, &new);
        }
    }
    if count_deleted {
        changed_lines += d
            .deleted
            .iter()
            .filter_map(|p| std::fs::read(spec.workspace.join(p)).ok())
            .map(|old| line_changes(&old, b""))
            .sum::<usize>();
    }
    Ok(SoftQuality {
        added: d.added.len(),
        modified: d.modified.len(),
        deleted: d.deleted.len(),
        changed_lines,
        lint_errors: Vec::new(),
    })
}

/// The lines of Python an episode's code steps ran (blank lines and
/// comments not counted).
#[cfg_attr(
    not(any(feature = "wasm", test)),
    expect(dead_code, reason = "only session tasks run code steps")
)]
pub(crate) fn code_lines<'a>(actions: impl IntoIterator<Item = &'a AgentAction>) -> usize {
    actions
        .into_iter()
        .filter_map(|a| match a {
            AgentAction::Exec { command, .. } => Some(
                command
                    .lines()
                    .filter(|l| !l.trim().is_empty() && !l.trim().starts_with('#'))
                    .count(),
            ),
            _ => None,
        })
        .sum()
}

/// Lines added plus lines removed between two texts (a multiset comparison,
/// which is exact for pure insertions and deletions and close otherwise).
pub(crate) fn line_changes(old: &[u8], new: &[u8]) -> usize {
    use std::collections::BTreeMap;
    fn count(b: &[u8]) -> BTreeMap<&[u8], isize> {
        let mut m: BTreeMap<&[u8], isize> = BTreeMap::new();
        for l in b.split(|c| *c == b'\n').filter(|l| !l.is_empty()) {
            *m.entry(l).or_default() += 1;
        }
        m
    }
    let (a, b) = (count(old), count(new));
    let mut total = 0isize;
    for (l, n) in &a {
        total += (n - b.get(l).copied().unwrap_or(0)).max(0);
    }
    for (l, n) in &b {
        total += (n - a.get(l).copied().unwrap_or(0)).max(0);
    }
    total.unsigned_abs()
}

/// A file or folder that could not be read to compute a preparation key.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct KeyError {
    /// The file or folder.
    pub path: std::path::PathBuf,
    /// Why.
    pub source: std::io::Error,
}

/// The preparation key of `spec`: a hash of `version`, the `parts` (the
/// runner's sources, the guest's hash), `task.toml` and the folders in
/// `dirs` (`(label, folder, optional)`; a missing optional folder is
/// skipped), ready for more input and for [`key_hex`]. Roots are cached
/// under it.
///
/// # Errors
/// [`KeyError`] for a file that cannot be read.
pub(crate) fn content_key(
    spec: &TaskSpec,
    version: &str,
    parts: &[&[u8]],
    dirs: &[(&str, &Path, bool)],
) -> Result<blake3::Hasher, KeyError> {
    let mut h = blake3::Hasher::new();
    h.update(version.as_bytes());
    for p in parts {
        h.update(p);
    }
    let toml_path = spec.dir.join("task.toml");
    let toml = std::fs::read(&toml_path).map_err(|source| KeyError {
        path: toml_path,
        source,
    })?;
    h.update(&toml);
    for (label, dir, optional) in dirs {
        if *optional && !dir.is_dir() {
            continue;
        }
        h.update(label.as_bytes());
        hash_dir(&mut h, dir, dir)?;
    }
    Ok(h)
}

/// Feed every entry under `dir` (names relative to `root`, kinds, modes,
/// contents and link targets, in name order) to `h`.
///
/// # Errors
/// [`KeyError`] for an entry that cannot be read.
pub(crate) fn hash_dir(h: &mut blake3::Hasher, root: &Path, dir: &Path) -> Result<(), KeyError> {
    let err = |path: &Path| {
        let path = path.to_owned();
        move |source| KeyError { path, source }
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(err(dir))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let path = e.path();
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        let meta = std::fs::symlink_metadata(&path).map_err(err(&path))?;
        h.update(rel.as_bytes());
        h.update(&[0]);
        if meta.is_dir() {
            h.update(b"d");
            hash_dir(h, root, &path)?;
        } else if meta.file_type().is_symlink() {
            h.update(b"l");
            let t = std::fs::read_link(&path).map_err(err(&path))?;
            h.update(t.to_string_lossy().as_bytes());
        } else {
            use std::os::unix::fs::PermissionsExt;
            h.update(&meta.permissions().mode().to_le_bytes());
            let data = std::fs::read(&path).map_err(err(&path))?;
            h.update(&(data.len() as u64).to_le_bytes());
            h.update(&data);
        }
    }
    Ok(())
}

/// The first `bytes` bytes of a key hash, as hex.
pub(crate) fn key_hex(h: &blake3::Hasher, bytes: usize) -> String {
    hex::encode(&h.finalize().as_bytes()[..bytes])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_changes_count_insertions_and_deletions() {
        assert_eq!(line_changes(b"a\nb\nc\n", b"a\nb\nc\n"), 0);
        assert_eq!(line_changes(b"a\nb\n", b"a\nx\nb\n"), 1);
        assert_eq!(line_changes(b"a\nb\n", b"a\nc\n"), 2);
        assert_eq!(line_changes(b"", b"a\nb\n"), 2);
    }

    #[test]
    fn code_lines_skip_blanks_and_comments() {
        let actions = [
            AgentAction::exec("x = 1\n\n# note\ny = 2\n"),
            AgentAction::write("a.py", "z = 3\n"),
        ];
        assert_eq!(code_lines(&actions), 2);
    }
}
