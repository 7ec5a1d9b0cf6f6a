//! Re-executing a WASM snapshot's chain and comparing it with the record.

use std::time::Instant;

use super::manifest::{StepDigest, StepOutcome, WasmAction};
use super::runtime::WasmRuntime;
use super::snapshot::WasmSnapshot;
use super::{Result, WasmError};
use crate::replay::{Divergence, ReplayReport, StepReport};
use crate::store::object::ObjectId;

impl WasmRuntime {
    /// Re-execute `snapshot`'s chain from the guest module: boot the root
    /// again, then run each snapshot's actions in a fork of the *replayed*
    /// previous snapshot, and compare every action's digest and every
    /// snapshot's memory hash, globals, WASI state and workspace. The report
    /// has one step per snapshot of the chain, the root's boot as step 0.
    pub fn replay(&self, snapshot: &WasmSnapshot) -> Result<ReplayReport> {
        self.replay_with_options(snapshot, crate::replay::ReplayOptions::default())
    }

    /// [`Self::replay`] with options: `strict` stops at the first
    /// divergent snapshot (`stopped_early` says it did).
    pub fn replay_with_options(
        &self,
        snapshot: &WasmSnapshot,
        options: crate::replay::ReplayOptions,
    ) -> Result<ReplayReport> {
        self.replay_edited(snapshot, options, |_, _| None)
    }

    /// [`Self::replay`] with step inputs replaced: `edit(step, code)`
    /// returns the input to run instead (steps are numbered from 1 along
    /// the chain). For negative controls.
    pub fn replay_with(
        &self,
        snapshot: &WasmSnapshot,
        edit: impl Fn(usize, &str) -> Option<String>,
    ) -> Result<ReplayReport> {
        self.replay_edited(snapshot, crate::replay::ReplayOptions::default(), edit)
    }

    pub(super) fn replay_edited(
        &self,
        snapshot: &WasmSnapshot,
        options: crate::replay::ReplayOptions,
        edit: impl Fn(usize, &str) -> Option<String>,
    ) -> Result<ReplayReport> {
        let started = Instant::now();
        let chain = self.chain(snapshot)?;
        let root = &chain[0];
        let boot = root.manifest.boot.clone().ok_or_else(|| {
            WasmError::BadSnapshot(format!("root {} has no boot record", root.id))
        })?;
        let mut replayed = self.boot(&root.manifest.guest, &boot, None)?;
        let mut made = vec![replayed.id];
        let mut steps = vec![StepReport {
            step: 0,
            recorded: root.id,
            replayed: replayed.id,
            actions: vec!["boot".to_owned()],
            divergences: self.compare_snapshots(root, &replayed)?,
        }];
        let mut actions_run = 0;
        let mut step_no = 0;
        let diverged = |steps: &[StepReport]| steps.iter().any(|s| !s.divergences.is_empty());
        let mut stopped_early = false;
        for recorded in &chain[1..] {
            if options.strict && diverged(&steps) {
                stopped_early = true;
                break;
            }
            let mut sb = replayed.open()?;
            let mut digests = Vec::new();
            for action in &recorded.manifest.actions {
                step_no += 1;
                match action {
                    WasmAction::Step { code } => {
                        let code = edit(step_no, code).unwrap_or_else(|| code.clone());
                        sb.step(&code)?;
                    }
                    WasmAction::WriteFile { path, content } => {
                        let bytes = self.store().get_blob(content)?;
                        sb.write_file(path, &bytes)?;
                    }
                    WasmAction::DeleteFile { path } => sb.delete_file(path)?,
                }
                digests.push(sb.last_digest()?);
            }
            actions_run += digests.len();
            // The snapshot writes the replayed outputs, which the diffs read.
            let next = sb.snapshot()?;
            made.push(next.id);
            let mut divergences =
                self.compare_digests(&recorded.manifest.observations, &digests)?;
            divergences.extend(self.compare_snapshots(recorded, &next)?);
            steps.push(StepReport {
                step: steps.len(),
                recorded: recorded.id,
                replayed: next.id,
                actions: recorded
                    .manifest
                    .actions
                    .iter()
                    .map(WasmAction::summary)
                    .collect(),
                divergences,
            });
            replayed = next;
        }
        // The replayed snapshots served only the comparison: they leave
        // the index (gc frees them) unless they are recorded ones.
        for id in made {
            if !chain.iter().any(|c| c.id == id) {
                self.store().unlist_snapshot(&id)?;
            }
        }
        Ok(ReplayReport {
            target: snapshot.id,
            root: root.id,
            replayed: replayed.id,
            identical: !diverged(&steps),
            stopped_early,
            actions: actions_run,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            steps,
        })
    }

    /// Divergences between the recorded and replayed digests of one step's actions.
    fn compare_digests(
        &self,
        recorded: &[StepDigest],
        replayed: &[StepDigest],
    ) -> Result<Vec<Divergence>> {
        let store = self.store();
        let mut out = Vec::new();
        if recorded.len() != replayed.len() {
            out.push(Divergence::ObservationCount {
                recorded: recorded.len(),
                replayed: replayed.len(),
            });
        }
        for (action, (r, p)) in recorded.iter().zip(replayed).enumerate() {
            let lines = |a: &ObjectId, b: &ObjectId| -> Result<Vec<String>> {
                Ok(crate::replay::line_diff(
                    &store.get_blob(a)?,
                    &store.get_blob(b)?,
                ))
            };
            if r.stdout != p.stdout || r.dropped[0] != p.dropped[0] {
                let diff = lines(&r.stdout, &p.stdout)?;
                out.push(Divergence::Stdout { action, diff });
            }
            if r.stderr != p.stderr || r.dropped[1] != p.dropped[1] {
                let diff = lines(&r.stderr, &p.stderr)?;
                out.push(Divergence::Stderr { action, diff });
            }
            if r.outcome != p.outcome {
                out.push(Divergence::Outcome {
                    action: Some(action),
                    recorded: r.outcome.label(),
                    replayed: p.outcome.label(),
                });
            }
            if r.fuel != p.fuel {
                out.push(Divergence::Fuel {
                    action,
                    recorded: r.fuel,
                    replayed: p.fuel,
                });
            }
        }
        Ok(out)
    }

    /// Divergences between the state of a recorded and a replayed snapshot.
    fn compare_snapshots(
        &self,
        recorded: &WasmSnapshot,
        replayed: &WasmSnapshot,
    ) -> Result<Vec<Divergence>> {
        let (a, b) = (&recorded.manifest, &replayed.manifest);
        let mut out = Vec::new();
        if a.memory_hash != b.memory_hash || a.memory_pages != b.memory_pages {
            out.push(Divergence::Memory {
                recorded: a.memory_hash,
                replayed: b.memory_hash,
            });
        }
        if a.globals != b.globals {
            let mut names: Vec<String> = a
                .globals
                .iter()
                .filter(|g| !b.globals.contains(g))
                .chain(b.globals.iter().filter(|g| !a.globals.contains(g)))
                .map(|(name, _)| name.clone())
                .collect();
            names.sort();
            names.dedup();
            out.push(Divergence::Globals { names });
        }
        if a.wasi != b.wasi {
            out.push(Divergence::Wasi);
        }
        if a.layers != b.layers {
            let va = crate::layer::merge_layers(self.store(), &a.layers)?;
            let vb = crate::layer::merge_layers(self.store(), &b.layers)?;
            out.push(Divergence::Workspace {
                paths: crate::replay::view_diff(&va, &vb),
            });
        }
        if a.ended != b.ended {
            let label =
                |e: &Option<StepOutcome>| e.as_ref().map_or("live".to_owned(), StepOutcome::label);
            out.push(Divergence::Outcome {
                action: None,
                recorded: label(&a.ended),
                replayed: label(&b.ended),
            });
        }
        Ok(out)
    }
}
