//! Actions: their options, what they produce, and how a sandbox runs,
//! records and re-applies them.

use super::protocol::{ActionRoot, ExecRequest, MountSpec, PeerRequest, Request, Response};
use super::workspace::same_as_lower;
use super::{PeerResult, Result, Sandbox, SandboxError, env};
use crate::store::object::{
    Action, ExitStatus, LayerId, ObjectId, ObjectKind, ObservationDigest, Tree, object_id,
};

/// Options of one action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecOptions {
    /// Wall-clock limit in milliseconds; the whole process tree is killed when it passes.
    pub timeout_ms: u64,
    /// Snapshots bound read-only into the sandbox for this action only (the
    /// verifier's checks at `/verifier`, say). They are never part of the
    /// sandbox's workspace, its snapshots or its later actions.
    pub mounts: Vec<ReadOnlyMount>,
    /// Variables added to this action's environment only (they are not part
    /// of the session, and the peer does not see them).
    pub env: Vec<(String, String)>,
    /// A peer process tree started beside the action, connected to it at
    /// [`super::protocol::CHANNEL_FD`] (see [`super::protocol::PeerRequest`]); it sees
    /// neither `mounts` nor `env`, and is stopped when the action ends.
    pub peer: Option<PeerCommand>,
    /// The root the action sees: the sandbox root (the default), or the
    /// workspace itself (an image build step; see
    /// [`super::protocol::ActionRoot`]).
    pub root: super::protocol::ActionRoot,
}

impl Default for ExecOptions {
    fn default() -> Self {
        Self {
            timeout_ms: 60_000,
            mounts: Vec::new(),
            env: Vec::new(),
            peer: None,
            root: super::protocol::ActionRoot::System,
        }
    }
}

/// The peer of an action (see [`ExecOptions::peer`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerCommand {
    /// Shell text, run by `/bin/bash -c` in `/workspace`, with the fixed
    /// environment (nothing of the session) plus `env`.
    pub command: String,
    /// Extra environment variables of the peer.
    pub env: Vec<(String, String)>,
}

impl ExecOptions {
    /// Options with this wall-clock limit and nothing else.
    pub fn with_timeout_ms(timeout_ms: u64) -> Self {
        Self {
            timeout_ms,
            ..Self::default()
        }
    }
}

/// A single-layer snapshot (such as an imported directory) bound read-only at
/// a top-level path of the sandbox for one action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadOnlyMount {
    layer: LayerId,
    target: String,
}

impl ReadOnlyMount {
    /// Mount `snapshot` (which must consist of exactly one layer, as an
    /// imported directory does) at `/<target>`.
    ///
    /// # Errors
    /// [`SandboxError::Mount`] when the snapshot has no layer or several.
    pub fn new(snapshot: &crate::Snapshot, target: &str) -> Result<Self> {
        match snapshot.manifest().layers.as_slice() {
            [layer] => Ok(Self {
                layer: *layer,
                target: target.trim_start_matches('/').to_owned(),
            }),
            layers => Err(SandboxError::Mount(format!(
                "snapshot {} has {} layers; a read-only mount takes exactly one (an imported directory)",
                snapshot.id().short(),
                layers.len()
            ))),
        }
    }

    /// Mount the store's layer `layer` at `/<target>`.
    pub(crate) fn of_layer(layer: LayerId, target: &str) -> Self {
        Self {
            layer,
            target: target.trim_start_matches('/').to_owned(),
        }
    }

    /// The path inside the sandbox, without the leading `/`.
    pub fn target(&self) -> &str {
        &self.target
    }
}

/// What an action produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// Captured stdout (capped; a truncation mark says how much was dropped).
    pub stdout: Vec<u8>,
    /// Captured stderr (capped likewise).
    pub stderr: Vec<u8>,
    /// How the action ended.
    pub exit: ExitStatus,
    /// Wall-clock duration in microseconds (not part of the digest).
    pub duration_us: u64,
    /// Background processes that were still running when the action's shell
    /// exited and were killed.
    pub killed_background: Vec<String>,
    /// The digest recorded in the next snapshot and checked by replay.
    pub digest: ObservationDigest,
    /// How the action's peer ended, when it had one (not part of the digest).
    pub peer: Option<PeerResult>,
    /// Connections the action made through the egress proxy (allowed and
    /// refused); empty without an allowlist. Not part of the digest.
    pub egress: Vec<super::egress::EgressEvent>,
}

impl Observation {
    /// The exit code, if the action exited normally.
    pub fn code(&self) -> Option<i32> {
        match self.exit {
            ExitStatus::Code { code } => Some(code),
            _ => None,
        }
    }

    /// Stdout as (lossy) UTF-8.
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

impl Sandbox {
    /// Run a shell command (`bash -c`) as a fresh process tree in the session.
    ///
    /// # Errors
    /// Only runtime faults are errors (the helper died, the store failed); a
    /// failing, crashing or timed-out command is an ordinary [`Observation`].
    pub fn exec(&mut self, command: &str, opts: &ExecOptions) -> Result<Observation> {
        self.exec_inner(command, opts, None)
    }

    /// [`exec`](Self::exec), with the action's stdout and stderr handed to
    /// `on_output` chunk by chunk as the helper reads them (only the bytes
    /// kept under the output cap, so the chunks of each stream, joined, are
    /// exactly the observation's). The observation, its record and its
    /// digest are the same as `exec`'s.
    ///
    /// # Errors
    /// As [`exec`](Self::exec).
    pub fn exec_streaming(
        &mut self,
        command: &str,
        opts: &ExecOptions,
        on_output: &mut dyn FnMut(crate::state::OutputStream, &[u8]),
    ) -> Result<Observation> {
        self.exec_inner(command, opts, Some(on_output))
    }

    fn exec_inner(
        &mut self,
        command: &str,
        opts: &ExecOptions,
        on_output: Option<super::channel::OutputSink<'_>>,
    ) -> Result<Observation> {
        let fixed = self.fixed_env();
        let mut action_env = env::action_env_over(fixed.clone(), &self.session);
        action_env.extend(opts.env.iter().cloned());
        let peer = opts.peer.as_ref().map(|p| {
            let mut env = fixed.clone();
            env.extend(p.env.iter().cloned());
            PeerRequest {
                command: p.command.clone(),
                env,
            }
        });
        let req = ExecRequest {
            command: command.to_owned(),
            session: self.session.clone(),
            env: action_env,
            timeout_ms: opts.timeout_ms,
            limits: self.runtime.options().limits.clone(),
            fixed_env: fixed.clone(),
            mounts: opts
                .mounts
                .iter()
                .map(|m| MountSpec {
                    source: self.runtime.store().layer_dir(&m.layer),
                    target: m.target.clone(),
                })
                .collect(),
            peer,
            stream: on_output.is_some(),
            root: opts.root,
            workdir: self.workdir.clone(),
            // A build step's root is the workspace, not the image: it runs as root.
            user: match opts.root {
                ActionRoot::System => self.user,
                ActionRoot::Workspace => None,
            },
        };
        let req = Request::Exec(Box::new(req));
        let reply = match on_output {
            Some(sink) => self.helper.request_streaming(&req, sink),
            None => self.helper.request(&req),
        };
        let result = match reply.map_err(|e| self.helper.with_log(e))? {
            Response::Exec(r) => r,
            other => return Err(self.helper.unexpected(other)),
        };
        self.delta_cache = None;
        if let Some(mut session) = result.session.clone() {
            // Variables given for this action only do not enter the session.
            for (k, v) in &opts.env {
                if session.env.get(k) == Some(v) && self.session.env.get(k) != Some(v) {
                    session.env.remove(k);
                }
            }
            self.session = session;
        }
        self.killed_background = result.killed_background.clone();
        let action = Action::Exec {
            command: command.to_owned(),
            timeout_ms: opts.timeout_ms,
        };
        let digest = self.record(action, &result.stdout, &result.stderr, result.exit)?;
        Ok(Observation {
            stdout: result.stdout,
            stderr: result.stderr,
            exit: result.exit,
            duration_us: result.duration_us,
            killed_background: result.killed_background,
            digest,
            peer: result.peer,
            egress: self.egress_log(),
        })
    }

    /// The entries of `tree` (the private changes) that differ from what the
    /// lower chain holds at the same path.
    pub(super) fn net_change(&self, tree: &Tree) -> Result<Tree> {
        let mut lowers = Vec::with_capacity(self.layers.len());
        for id in self.layers.iter().rev() {
            lowers.push(self.runtime.layer_index(id)?);
        }
        let entries = tree
            .entries
            .iter()
            .filter(|e| !same_as_lower(&lowers, e))
            .cloned()
            .collect();
        Ok(Tree { entries })
    }

    /// Keep an object for the next snapshot; returns its id.
    pub(super) fn hold(&mut self, kind: ObjectKind, payload: Vec<u8>) -> ObjectId {
        let id = object_id(kind, &payload);
        if !self.unwritten.iter().any(|(_, _, held)| *held == id) {
            self.unwritten.push((kind, payload, id));
        }
        id
    }

    /// Add the objects held for the next snapshot to its batch (they stay
    /// held until [`Self::take_pending`] after the snapshot is listed).
    pub(crate) fn held_objects<'a>(&'a self, batch: &mut crate::store::Batch<'a>) {
        for (kind, payload, id) in &self.unwritten {
            batch.add_known(*id, *kind, payload.as_slice());
        }
    }

    pub(super) fn record(
        &mut self,
        action: Action,
        stdout: &[u8],
        stderr: &[u8],
        exit: ExitStatus,
    ) -> Result<ObservationDigest> {
        let stdout = self.hold(ObjectKind::Blob, stdout.to_vec());
        let stderr = self.hold(ObjectKind::Blob, stderr.to_vec());
        let (tree, layer_id) = self.delta()?;
        // The digest covers the net change: entries equal to what the layers
        // below already hold (copied up by a metadata-only touch such as
        // git's `utime` on an existing object) are not changes, and the few
        // files whose content embeds inode numbers or times are left out
        // (see `digest::DIGEST_EXCLUDED`).
        let digest_tree = crate::digest::digest_tree(&self.net_change(&tree)?);
        let fs_delta = if digest_tree.entries.len() == tree.entries.len() {
            layer_id
        } else {
            let bytes = serde_json::to_vec(&digest_tree).map_err(|e| SandboxError::Encode {
                what: "tree",
                source: e,
            })?;
            self.hold(ObjectKind::Tree, bytes)
        };
        let digest = ObservationDigest {
            stdout,
            stderr,
            exit,
            fs_delta,
        };
        self.pending.push((action, digest.clone()));
        Ok(digest)
    }

    /// The digest of the last recorded action, as a one-element list.
    pub(super) fn last_digest(&self) -> Vec<ObservationDigest> {
        self.pending
            .last()
            .map(|(_, d)| d.clone())
            .into_iter()
            .collect()
    }

    /// Apply a recorded action (replay and re-execution use this).
    pub fn apply(&mut self, action: &Action) -> Result<Vec<ObservationDigest>> {
        match action {
            Action::Exec {
                command,
                timeout_ms,
            } => Ok(vec![
                self.exec(command, &ExecOptions::with_timeout_ms(*timeout_ms))?
                    .digest,
            ]),
            Action::WriteFile {
                path,
                content,
                mode,
            } => {
                let held = self.unwritten.iter().find(|(_, _, id)| id == content);
                let data = match held {
                    Some((_, data, _)) => data.clone(),
                    None => self.runtime.store().get_blob(content)?,
                };
                self.write_file(path, &data, *mode)?;
                Ok(self.last_digest())
            }
            Action::DeleteFile { path } => {
                self.delete_file(path)?;
                Ok(self.last_digest())
            }
            Action::Sequence { actions } => {
                let mut out = Vec::new();
                for a in actions {
                    out.extend(self.apply(a)?);
                }
                Ok(out)
            }
            Action::Import { source } => Err(SandboxError::NotReapplicable {
                origin: source.clone(),
            }),
        }
    }
}
