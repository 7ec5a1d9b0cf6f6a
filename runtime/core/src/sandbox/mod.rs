//! Isolation: a live, isolated view over a snapshot.
//!
//! A [`Sandbox`] is driven by a single-threaded helper process (see
//! [`helper`]) that owns its namespaces (user, mount, pid per action, net with
//! loopback only, uts, ipc) and mounts: a read-only system view, the
//! workspace at `/workspace` (the snapshot's layers as read-only lowers of an
//! overlay with a private upper, or a private copy with the copy backend), a
//! fresh `/tmp` per action. Each action runs as a fresh process tree; what
//! survives from one action to the next is exactly what a snapshot captures:
//! the workspace and the session state (cwd, exported and unset variables).
//!
//! The host-side file API ([`Sandbox::read_file`], [`Sandbox::write_file`],
//! [`Sandbox::list_dir`], [`Sandbox::delete_file`]) goes through the helper,
//! which resolves paths with a cap-std handle rooted at the workspace, as the
//! sandbox's root user, after `chroot`ing into the sandbox root: a symlink or
//! `..` planted by the agent never makes the runtime read or write a host path.

mod declare;
pub mod env;
pub mod helper;
pub(crate) mod pool;
pub mod process;
pub mod protocol;

use std::path::{Path, PathBuf};

use crate::layer::{self, MergedView};
use crate::store::StoreError;
use crate::store::object::{
    Action, EntryKind, ExitStatus, LayerId, ObjectId, ObjectKind, ObservationDigest, SessionState,
    SnapshotId, Tree, TreeEntry, object_id,
};
use crate::{Runtime, WorkspaceBackend};
pub use process::{CgroupLimits, HelperCommand};
use protocol::{
    ExecRequest, FileOp, FileResult, MountSpec, PeerRequest, Request, Response, WorkspaceMount,
};
pub use protocol::{Limits, ListEntry, PeerResult, SystemView};

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
    /// The helper binary could not be found.
    #[error(
        "cannot find the sandbox helper: set ARBOR_SANDBOX_HELPER, run the `arbor` binary, or build it with `cargo build -p arbor-runtime --bins`"
    )]
    HelperNotFound,
    /// The helper reported a failure.
    #[error("sandbox helper: {0}")]
    Helper(String),
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

impl SandboxError {
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
    /// [`protocol::CHANNEL_FD`] (see [`protocol::PeerRequest`]); it sees
    /// neither `mounts` nor `env`, and is stopped when the action ends.
    pub peer: Option<PeerCommand>,
}

impl Default for ExecOptions {
    fn default() -> Self {
        Self {
            timeout_ms: 60_000,
            mounts: Vec::new(),
            env: Vec::new(),
            peer: None,
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

/// A path a sandbox wrote (see [`Sandbox::written_paths`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathChange {
    /// Relative to `/workspace`.
    pub path: String,
    /// Whether the base snapshot had it.
    pub kind: ChangeKind,
}

/// How a written path relates to the base snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// New.
    Added,
    /// Present in the base snapshot and written (possibly back to what it was).
    Modified,
    /// Present in the base snapshot and deleted.
    Deleted,
}

/// The sandbox's private writable part.
///
/// Invariant: for `Overlay`, `upper` and `work` are directories on the same
/// filesystem as the store's layers, `upper` holds exactly the changes since
/// the last snapshot, and `work` is private to the current mount.
#[derive(Debug)]
enum Private {
    Overlay {
        upper: PathBuf,
        work: PathBuf,
    },
    Copy {
        workspace: PathBuf,
        base: Box<MergedView>,
    },
}

/// A live, isolated sandbox over a snapshot.
///
/// ```no_run
/// use arbor_runtime::ExecOptions;
///
/// # fn main() -> arbor_runtime::Result<()> {
/// # let rt = arbor_runtime::Runtime::open_at("/tmp/arbor-home")?;
/// let mut sandbox = rt.resolve("base")?.open()?;
/// let obs = sandbox.exec("make test", &ExecOptions::with_timeout_ms(30_000))?;
/// println!("{:?}: {}", obs.exit, String::from_utf8_lossy(&obs.stdout));
/// let after = sandbox.snapshot()?; // seal the changes; the sandbox continues on it
/// # drop(after);
/// # Ok(())
/// # }
/// ```
pub struct Sandbox {
    runtime: Runtime,
    helper: process::HelperProcess,
    /// Private directory under the store's `run/` (`<pid>-<n>`), removed on drop.
    run_dir: PathBuf,
    private: Private,
    /// Counter for fresh upper/work directory names.
    generation: u64,
    /// The snapshot the current lower chain belongs to.
    base: Option<SnapshotId>,
    /// The lower chain, bottom first (the base snapshot's layers).
    layers: Vec<LayerId>,
    session: SessionState,
    /// Actions (with their observation digests) since `base`, in order.
    pending: Vec<(Action, ObservationDigest)>,
    killed_background: Vec<String>,
    /// The tree of the private changes, when nothing was done since it was computed.
    delta_cache: Option<(Tree, ObjectId)>,
    /// Objects that pending observations and actions refer to (captured
    /// output, written file contents, delta trees), kept in memory and
    /// written when the next snapshot is taken: an action costs no fsync,
    /// and a sandbox dropped without a snapshot leaves nothing in the store.
    unwritten: Vec<(ObjectKind, Vec<u8>, ObjectId)>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("run_dir", &self.run_dir)
            .field("base", &self.base)
            .field("layers", &self.layers.len())
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl Sandbox {
    /// Open a sandbox over `layers` (bottom first) with `session`, as a child
    /// of snapshot `base`. Use [`crate::Snapshot::fork`] or
    /// [`Runtime::open_sandbox`] rather than calling this directly.
    pub(crate) fn open(
        runtime: &Runtime,
        base: Option<SnapshotId>,
        layers: Vec<LayerId>,
        session: SessionState,
    ) -> Result<Self> {
        let store = runtime.store();
        let pool::Prepared {
            mut helper,
            run_dir,
        } = runtime.claim_helper()?;
        let owners = runtime.owner_map();
        let prepared = (|| -> Result<(Private, WorkspaceMount)> {
            Ok(match runtime.workspace_backend() {
                WorkspaceBackend::Overlay => {
                    let upper = run_dir.join("upper-0");
                    let work = run_dir.join("work-0");
                    make_upper(&upper, &work, &owners)?;
                    let lowers = runtime.lower_dirs(base.as_ref(), &layers)?;
                    let ws = WorkspaceMount::Overlay {
                        lowers,
                        upper: upper.clone(),
                        work: work.clone(),
                    };
                    (Private::Overlay { upper, work }, ws)
                }
                WorkspaceBackend::Copy => {
                    let workspace = run_dir.join("ws");
                    layer::materialize(
                        store,
                        &layers,
                        &workspace,
                        &layer::MaterializeOptions {
                            verify: false,
                            owners: Some(owners),
                        },
                    )?;
                    let (uid, gid) = owners.to_host(0, 0);
                    rustix::fs::chown(
                        &workspace,
                        Some(rustix::fs::Uid::from_raw(uid)),
                        Some(rustix::fs::Gid::from_raw(gid)),
                    )
                    .map_err(|e| SandboxError::io("chown", &workspace, e.into()))?;
                    let base_view = layer::merge_layers(store, &layers)?;
                    let ws = WorkspaceMount::Bind {
                        dir: workspace.clone(),
                    };
                    (
                        Private::Copy {
                            workspace,
                            base: Box::new(base_view),
                        },
                        ws,
                    )
                }
            })
        })();
        let mounted = prepared.and_then(|(private, ws)| {
            match helper.request(&Request::MountWorkspace(ws))? {
                Response::Ok => Ok(private),
                other => Err(helper.unexpected(other)),
            }
        });
        let private = match mounted {
            Ok(private) => private,
            Err(e) => {
                drop(helper);
                crate::cleanup::remove_dir_forcefully(&run_dir);
                return Err(e);
            }
        };
        record_base(&run_dir, base.as_ref())?;
        let mut session = session;
        if session.cwd.is_empty() {
            session.cwd = "/workspace".to_owned();
        }
        Ok(Self {
            runtime: runtime.clone(),
            helper,
            run_dir,
            private,
            generation: 0,
            base,
            layers,
            session,
            pending: Vec::new(),
            killed_background: Vec::new(),
            delta_cache: None,
            unwritten: Vec::new(),
        })
    }

    /// Run a shell command (`bash -c`) as a fresh process tree in the session.
    ///
    /// # Errors
    /// Only runtime faults are errors (the helper died, the store failed); a
    /// failing, crashing or timed-out command is an ordinary [`Observation`].
    pub fn exec(&mut self, command: &str, opts: &ExecOptions) -> Result<Observation> {
        let mut action_env = env::action_env(&self.session);
        action_env.extend(opts.env.iter().cloned());
        let peer = opts.peer.as_ref().map(|p| {
            let mut env = env::fixed_env();
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
            fixed_env: env::fixed_env(),
            mounts: opts
                .mounts
                .iter()
                .map(|m| MountSpec {
                    source: self.runtime.store().layer_dir(&m.layer),
                    target: m.target.clone(),
                })
                .collect(),
            peer,
        };
        let result = match self
            .helper
            .request(&Request::Exec(Box::new(req)))
            .map_err(|e| self.helper.with_log(e))?
        {
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
        })
    }

    /// The entries of `tree` (the private changes) that differ from what the
    /// lower chain holds at the same path.
    fn net_change(&self, tree: &Tree) -> Result<Tree> {
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
    fn hold(&mut self, kind: ObjectKind, payload: Vec<u8>) -> ObjectId {
        let id = object_id(kind, &payload);
        if !self.unwritten.iter().any(|(_, _, held)| *held == id) {
            self.unwritten.push((kind, payload, id));
        }
        id
    }

    /// Write the objects held for the next snapshot into the store.
    pub(crate) fn write_held_objects(&mut self) -> Result<()> {
        for (kind, payload, id) in std::mem::take(&mut self.unwritten) {
            let written = self.runtime.store().put(kind, &payload)?;
            debug_assert_eq!(written, id);
        }
        Ok(())
    }

    fn record(
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
            let bytes = serde_json::to_vec(&digest_tree)
                .map_err(|e| SandboxError::Helper(format!("encode tree: {e}")))?;
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

    /// The tree of the changes since the last snapshot (cached until the next action).
    pub(crate) fn delta(&mut self) -> Result<(Tree, ObjectId)> {
        if let Some(cached) = &self.delta_cache {
            return Ok(cached.clone());
        }
        let owners = self.runtime.owner_map();
        let tree = match &self.private {
            Private::Overlay { upper, .. } => layer::tree_of_dir(upper, &owners)?,
            Private::Copy { workspace, base } => {
                let out = self.runtime.store().new_temp_path("delta");
                let tree = layer::write_delta_layer(workspace, base, &out, &owners);
                crate::cleanup::remove_dir_forcefully(&out);
                tree?
            }
        };
        crate::store::validate_tree(&tree)?;
        let bytes = serde_json::to_vec(&tree)
            .map_err(|e| SandboxError::Helper(format!("encode tree: {e}")))?;
        let id = self.hold(ObjectKind::Tree, bytes);
        self.delta_cache = Some((tree.clone(), id));
        Ok((tree, id))
    }

    /// Every workspace path written since the base snapshot, directories
    /// aside. With the overlay backend that is every file copied up, even
    /// one whose content was later put back as it was (so a write that is
    /// undone again is still seen); with the copy backend, every path whose
    /// content or metadata differs from the base.
    ///
    /// # Errors
    /// Runtime faults reading the private layer or the lower chain.
    pub fn written_paths(&mut self) -> Result<Vec<PathChange>> {
        let (tree, _) = self.delta()?;
        let mut lowers = Vec::with_capacity(self.layers.len());
        for id in self.layers.iter().rev() {
            lowers.push(self.runtime.layer_index(id)?);
        }
        let mut out = Vec::new();
        for e in &tree.entries {
            let below = lower_entry(&lowers, &e.path);
            let kind = match (&e.kind, below) {
                (EntryKind::Dir { opaque: false }, _) => continue,
                (EntryKind::Whiteout, None) => continue,
                (EntryKind::Whiteout, Some(_)) => ChangeKind::Deleted,
                (_, Some(_)) => ChangeKind::Modified,
                (_, None) => ChangeKind::Added,
            };
            out.push(PathChange {
                path: e.path.clone(),
                kind,
            });
        }
        Ok(out)
    }

    fn file(&mut self, op: FileOp) -> Result<FileResult> {
        match self.helper.request(&Request::File(op))? {
            Response::File(FileResult::Failed { message }) => Err(SandboxError::File(message)),
            Response::File(r) => Ok(r),
            other => Err(self.helper.unexpected(other)),
        }
    }

    /// Read a file of the workspace (path relative to `/workspace`).
    pub fn read_file(&mut self, path: &str) -> Result<Vec<u8>> {
        match self.file(FileOp::Read {
            path: path.to_owned(),
        })? {
            FileResult::Data { data } => Ok(data),
            other => Err(SandboxError::Helper(format!(
                "unexpected file result {other:?}"
            ))),
        }
    }

    /// List a directory of the workspace (`""` for its root), sorted by name.
    pub fn list_dir(&mut self, path: &str) -> Result<Vec<ListEntry>> {
        match self.file(FileOp::List {
            path: path.to_owned(),
        })? {
            FileResult::Entries { entries } => Ok(entries),
            other => Err(SandboxError::Helper(format!(
                "unexpected file result {other:?}"
            ))),
        }
    }

    /// Create or replace a file (parents created), recorded as an action.
    pub fn write_file(&mut self, path: &str, data: &[u8], mode: u32) -> Result<()> {
        self.file(FileOp::Write {
            path: path.to_owned(),
            data: data.to_vec(),
            mode,
        })?;
        self.delta_cache = None;
        let content = self.hold(ObjectKind::Blob, data.to_vec());
        self.record(
            Action::WriteFile {
                path: path.to_owned(),
                content,
                mode,
            },
            b"",
            b"",
            ExitStatus::Code { code: 0 },
        )?;
        Ok(())
    }

    /// Delete a file or symlink, recorded as an action.
    pub fn delete_file(&mut self, path: &str) -> Result<()> {
        self.file(FileOp::Delete {
            path: path.to_owned(),
        })?;
        self.delta_cache = None;
        self.record(
            Action::DeleteFile {
                path: path.to_owned(),
            },
            b"",
            b"",
            ExitStatus::Code { code: 0 },
        )?;
        Ok(())
    }

    /// The digest of the last recorded action, as a one-element list.
    fn last_digest(&self) -> Vec<ObservationDigest> {
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
            Action::Import { source } => Err(SandboxError::Helper(format!(
                "an import of {source} cannot be re-applied inside a sandbox"
            ))),
        }
    }

    /// Forget what actions did to the session (exported variables, unsets,
    /// the working directory): the next action starts from the fixed
    /// environment in `/workspace`. Verifiers use it so that nothing the
    /// agent exported (`PATH`, `BASH_ENV`, ...) reaches the checks.
    pub fn reset_session(&mut self) {
        self.session = SessionState {
            cwd: "/workspace".to_owned(),
            ..SessionState::default()
        };
    }

    /// The current session state.
    pub fn session(&self) -> &SessionState {
        &self.session
    }

    /// The snapshot this sandbox's current lower chain belongs to.
    pub fn base(&self) -> Option<&SnapshotId> {
        self.base.as_ref()
    }

    /// The lower layer chain, bottom first.
    pub fn layers(&self) -> &[LayerId] {
        &self.layers
    }

    /// The runtime this sandbox belongs to.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Cgroup directories the sandbox's processes run in (empty when none could be created).
    pub fn cgroups(&self) -> &[PathBuf] {
        self.helper.cgroups()
    }

    /// The helper's pid (for tests that check nothing is left behind).
    pub fn helper_pid(&self) -> u32 {
        self.helper.pid()
    }

    pub(crate) fn take_pending(&mut self) -> (Vec<(Action, ObservationDigest)>, Vec<String>) {
        (
            std::mem::take(&mut self.pending),
            std::mem::take(&mut self.killed_background),
        )
    }

    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Unmount the workspace so its private part can be sealed.
    pub(crate) fn unmount_workspace(&mut self) -> Result<()> {
        if matches!(self.private, Private::Overlay { .. }) {
            match self.helper.request(&Request::UnmountWorkspace)? {
                Response::Ok => {}
                other => return Err(self.helper.unexpected(other)),
            }
        }
        Ok(())
    }

    /// The directory holding the private changes (overlay upper or copy workspace).
    pub(crate) fn private_dir(&self) -> &Path {
        match &self.private {
            Private::Overlay { upper, .. } => upper,
            Private::Copy { workspace, .. } => workspace,
        }
    }

    /// Whether the workspace is an overlay (else a private copy).
    pub(crate) fn is_overlay(&self) -> bool {
        matches!(self.private, Private::Overlay { .. })
    }

    /// Copy backend: write the delta since the base as a layer directory at `out`.
    pub(crate) fn write_copy_delta(&self, out: &Path) -> Result<Tree> {
        match &self.private {
            Private::Copy { workspace, base } => Ok(layer::write_delta_layer(
                workspace,
                base,
                out,
                &self.runtime.owner_map(),
            )?),
            Private::Overlay { .. } => Err(SandboxError::Helper(
                "write_copy_delta on an overlay sandbox".into(),
            )),
        }
    }

    /// Mount the current (unsealed) upper again after a failed seal.
    pub(crate) fn remount_after_failed_seal(&mut self) -> Result<()> {
        let Private::Overlay { upper, work } = &mut self.private else {
            return Ok(());
        };
        if !upper.exists() {
            return Err(SandboxError::Helper(
                "the upper directory is gone; open a new sandbox".into(),
            ));
        }
        crate::cleanup::remove_dir_forcefully(work);
        make_upper(upper, work, &self.runtime.owner_map())?;
        let lowers = self.runtime.lower_dirs(self.base.as_ref(), &self.layers)?;
        let ws = WorkspaceMount::Overlay {
            lowers,
            upper: upper.clone(),
            work: work.clone(),
        };
        match self.helper.request(&Request::MountWorkspace(ws))? {
            Response::Ok => Ok(()),
            other => Err(self.helper.unexpected(other)),
        }
    }

    /// After sealing: continue on `layers` (bottom first) as snapshot `base`
    /// with a fresh, empty private part.
    pub(crate) fn continue_on(&mut self, base: SnapshotId, layers: Vec<LayerId>) -> Result<()> {
        self.generation += 1;
        let owners = self.runtime.owner_map();
        match &mut self.private {
            Private::Overlay { upper, work } => {
                crate::cleanup::remove_dir_forcefully(work);
                if upper.exists() {
                    crate::cleanup::remove_dir_forcefully(upper);
                }
                let new_upper = self.run_dir.join(format!("upper-{}", self.generation));
                let new_work = self.run_dir.join(format!("work-{}", self.generation));
                make_upper(&new_upper, &new_work, &owners)?;
                let lowers = self.runtime.lower_dirs(Some(&base), &layers)?;
                let ws = WorkspaceMount::Overlay {
                    lowers,
                    upper: new_upper.clone(),
                    work: new_work.clone(),
                };
                match self.helper.request(&Request::MountWorkspace(ws))? {
                    Response::Ok => {}
                    other => return Err(self.helper.unexpected(other)),
                }
                *upper = new_upper;
                *work = new_work;
            }
            Private::Copy { base: view, .. } => {
                **view = layer::merge_layers(self.runtime.store(), &layers)?;
            }
        }
        record_base(&self.run_dir, Some(&base))?;
        self.base = Some(base);
        self.layers = layers;
        self.delta_cache = None;
        Ok(())
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.helper.kill();
        crate::cleanup::remove_dir_forcefully(&self.run_dir);
    }
}

/// Whether a private entry equals what the lower chain (topmost first)
/// already holds at its path: then it records no change.
fn same_as_lower(lowers: &[std::sync::Arc<crate::runtime::LayerIndex>], entry: &TreeEntry) -> bool {
    match entry.kind {
        // A deletion is a change; an opaque directory hides what was below.
        EntryKind::Whiteout | EntryKind::Dir { opaque: true } => false,
        _ => lower_entry(lowers, &entry.path).is_some_and(|lower| {
            let same_kind = match (&lower.kind, &entry.kind) {
                (EntryKind::Dir { .. }, EntryKind::Dir { .. }) => true,
                (a, b) => a == b,
            };
            same_kind
                && lower.mode == entry.mode
                && (lower.uid, lower.gid) == (entry.uid, entry.gid)
        }),
    }
}

/// The entry the lower chain (topmost first) shows at `path`, with overlay
/// semantics: whiteouts, opaque directories and non-directories above a
/// path hide it.
fn lower_entry<'a>(
    lowers: &'a [std::sync::Arc<crate::runtime::LayerIndex>],
    path: &str,
) -> Option<&'a TreeEntry> {
    for layer in lowers {
        if let Some(e) = layer.get(path) {
            return (!matches!(e.kind, EntryKind::Whiteout)).then_some(e);
        }
        let mut ancestor = path;
        while let Some(i) = ancestor.rfind('/') {
            ancestor = &ancestor[..i];
            if let Some(a) = layer.get(ancestor)
                && !matches!(a.kind, EntryKind::Dir { opaque: false })
            {
                return None;
            }
        }
    }
    None
}

/// Record the base snapshot in the run directory so that `gc` keeps the
/// mounted chain alive while this sandbox runs.
fn record_base(run_dir: &Path, base: Option<&SnapshotId>) -> Result<()> {
    let Some(base) = base else { return Ok(()) };
    let path = run_dir.join("base");
    std::fs::write(&path, base.to_hex()).map_err(|e| SandboxError::io("write", &path, e))
}

fn mkdir(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).map_err(|e| SandboxError::io("create directory", path, e))
}

/// Create an empty upper directory owned by the sandbox's root (its
/// attributes are those of `/workspace` inside) and an empty work directory.
fn make_upper(upper: &Path, work: &Path, owners: &layer::OwnerMap) -> Result<()> {
    mkdir(upper)?;
    mkdir(work)?;
    let (uid, gid) = owners.to_host(0, 0);
    for dir in [upper, work] {
        rustix::fs::chown(
            dir,
            Some(rustix::fs::Uid::from_raw(uid)),
            Some(rustix::fs::Gid::from_raw(gid)),
        )
        .map_err(|e| SandboxError::io("chown", dir, e.into()))?;
    }
    Ok(())
}
