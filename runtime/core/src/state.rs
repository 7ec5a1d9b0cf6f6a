//! One handle for a stored state and one for a live fork, whatever the
//! backend: [`AnySnapshot`] and [`AnySandbox`].
//!
//! Arbor has two backends ([`Backend`]): *native* snapshots (a workspace
//! layer chain and a shell session, run by [`crate::Sandbox`] in Linux
//! namespaces) and, with feature `wasm`, *WebAssembly sessions* (a live
//! interpreter's linear memory plus a workspace, run by
//! [`crate::wasm::WasmSandbox`]). Everything that only names, opens, runs,
//! seals, compares, materialises or replays a state — the CLI, rollout
//! drivers, task environments, the trainer — goes through these handles and
//! never asks which backend it holds.
//!
//! **Why an enum and not a trait object.** The set of backends is closed and
//! small, and both live in this crate; a `match` in one place per operation
//! is all the dispatch there is, the compiler checks that every operation
//! covers every backend, and a caller that does need a backend's own
//! capabilities (a session's memory pages, a native sandbox's peer
//! processes) gets the concrete type back with [`AnySnapshot::native`] /
//! [`AnySnapshot::wasm`] instead of downcasting. A trait would buy
//! third-party backends, which Arbor does not want (the store, replay and
//! verifier invariants are the backends' job), at the price of boxing every
//! handle and erasing those capabilities. wasmtime makes its instance
//! allocator a trait because embedders plug in their own; our analogue of
//! that seam is the workspace backend ([`crate::WorkspaceBackend`]) and the
//! helper's syscalls, not the state handle.
//!
//! The shared vocabulary: a step's result is a [`StepResult`], how it ended
//! an [`Outcome`] (one mapping onto shell exit statuses and one set of
//! labels), a chain entry's history a [`Record`], and a replay a
//! [`crate::replay::ReplayReport`] on both backends.
//!
//! ```no_run
//! # fn main() -> arbor_runtime::Result<()> {
//! # let rt = arbor_runtime::Runtime::open_at("/tmp/arbor-home")?;
//! let base = rt.resolve_any("base")?; // a native snapshot or a session
//! let mut sandbox = base.open()?;
//! let step = sandbox.run("echo hello", &arbor_runtime::ExecOptions::default())?;
//! println!("{} {}", step.outcome.label(), step.stdout_text());
//! let next = sandbox.snapshot()?;
//! for entry in next.chain()? {
//!     println!("{} {}", entry.id().short(), entry.summary());
//! }
//! # Ok(())
//! # }
//! ```

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::layer::{Diff, MaterializeReport};
use crate::replay::{ReplayOptions, ReplayReport};
use crate::runtime::{Result, RuntimeError};
use crate::store::Store;
use crate::store::object::{Action, ExitStatus, LayerId, Manifest, ObservationDigest, SnapshotId};
use crate::{ExecOptions, Runtime, Sandbox, Snapshot};

#[cfg(feature = "wasm")]
use crate::wasm::{StepOutcome, WasmAction, WasmManifest, WasmSandbox, WasmSnapshot};

/// Which backend runs a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Linux namespaces over a copy-on-write workspace; steps are shell commands.
    Native,
    /// A WebAssembly interpreter session; steps are its input (Python source).
    Wasm,
}

impl Backend {
    /// The step text that command-line words stand for. Native: one word is
    /// a shell string as given (`make && make test`); several are an argv,
    /// each word quoted so the shell passes it through unchanged, as
    /// `docker exec` does. A session: the words joined by spaces are one
    /// program text (Python source).
    pub fn step_text(self, words: &[String]) -> String {
        match (self, words) {
            (Self::Wasm, _) => words.join(" "),
            (Self::Native, [one]) => one.clone(),
            (Self::Native, _) => words
                .iter()
                .map(|w| shell_quote(w))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// `native` or `wasm`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Wasm => "wasm",
        }
    }
}

/// A stored state of either backend.
#[allow(
    clippy::large_enum_variant,
    reason = "a handful live at a time (tree nodes, one per fork); boxing buys nothing"
)]
#[derive(Clone, Debug)]
pub enum AnySnapshot {
    /// A native snapshot.
    Native(Snapshot),
    /// A WebAssembly session snapshot.
    #[cfg(feature = "wasm")]
    Wasm(WasmSnapshot),
}

/// A live fork of an [`AnySnapshot`], where steps run.
#[allow(
    clippy::large_enum_variant,
    reason = "one per running episode; boxing buys nothing"
)]
#[derive(Debug)]
pub enum AnySandbox {
    /// A native sandbox.
    Native(Sandbox),
    /// A WebAssembly session.
    #[cfg(feature = "wasm")]
    Wasm(WasmSandbox),
}

/// How one step ended, on either backend.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Outcome {
    /// A native action's exit status.
    Exit(ExitStatus),
    /// A session step's outcome.
    #[cfg(feature = "wasm")]
    Session(StepOutcome),
}

impl Outcome {
    /// The status in the native vocabulary (the one mapping onto exit codes).
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            Self::Exit(e) => *e,
            #[cfg(feature = "wasm")]
            Self::Session(o) => o.exit_status(),
        }
    }

    /// The shell-style exit code (124 timeout, 125 disk/memory limit, 128+N signal N).
    pub fn shell_code(&self) -> i32 {
        self.exit_status().shell_code()
    }

    /// A short label (`0`, `timeout`, `signal 9`; `ok`, `exception`, `out of fuel`…).
    pub fn label(&self) -> String {
        match self {
            Self::Exit(e) => e.label(),
            #[cfg(feature = "wasm")]
            Self::Session(o) => o.label(),
        }
    }

    /// Why the step stopped, when that deserves a sentence (`None` for a
    /// normal exit, an ok step or an exception). `timeout` is the step's
    /// wall-clock limit, named in a native timeout's note.
    pub fn note(&self, timeout: Duration) -> Option<String> {
        match self {
            Self::Exit(ExitStatus::Code { .. }) => None,
            Self::Exit(ExitStatus::Timeout) => Some(format!(
                "timed out after {} s; its process tree was killed",
                timeout.as_secs_f64()
            )),
            Self::Exit(ExitStatus::DiskLimit) => {
                Some("stopped: the workspace grew past its disk limit".into())
            }
            Self::Exit(ExitStatus::Signal { signal }) => Some(format!("killed by signal {signal}")),
            #[cfg(feature = "wasm")]
            Self::Session(o) => match o {
                StepOutcome::Ok | StepOutcome::Exception | StepOutcome::Status { .. } => None,
                StepOutcome::Exited { code } => Some(format!(
                    "the guest exited with code {code}; the session has ended"
                )),
                StepOutcome::Trap { message } => Some(format!(
                    "the guest trapped ({message}); the session has ended"
                )),
                StepOutcome::OutOfFuel => {
                    Some("the step ran out of fuel (its CPU budget); the session has ended".into())
                }
                StepOutcome::Timeout => {
                    Some("the step passed its wall-clock limit; the session has ended".into())
                }
                StepOutcome::MemoryLimit => Some(
                    "the guest tried to grow its memory past the cap; the session has ended".into(),
                ),
                StepOutcome::Ended => Some("this session had already ended; nothing ran".into()),
            },
        }
    }
}

/// What one step printed and how it ended, on either backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepResult {
    /// Stdout (capped).
    pub stdout: Vec<u8>,
    /// Stderr (capped).
    pub stderr: Vec<u8>,
    /// How it ended.
    pub outcome: Outcome,
    /// Wall-clock time (not part of any digest).
    pub duration: Duration,
    /// Background processes still running when a native action's shell
    /// exited, which were killed (always empty for a session).
    pub killed_background: Vec<String>,
    /// Fuel a session step used (deterministic); `None` on native.
    pub fuel: Option<u64>,
    /// Bytes of stdout and stderr dropped past a session's output cap
    /// (native output carries its own truncation mark).
    pub dropped: [u64; 2],
}

impl StepResult {
    /// Stdout as (lossy) UTF-8.
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Stderr as (lossy) UTF-8.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// What produced a snapshot, as recorded: the backend's own actions and
/// their observation digests.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Record<'a> {
    /// A native snapshot's action and observations.
    Native {
        /// The action (a sequence when several ran between two snapshots).
        action: Option<&'a Action>,
        /// One digest per action.
        observations: &'a [ObservationDigest],
        /// Background processes killed when their action ended.
        killed_background: &'a [String],
    },
    /// A session snapshot's actions and memory.
    #[cfg(feature = "wasm")]
    Wasm {
        /// The steps and host file operations since the parent.
        actions: &'a [WasmAction],
        /// The outcome of each step.
        outcomes: Vec<StepOutcome>,
        /// Hash of the linear memory.
        memory_hash: SnapshotId,
        /// Size of the linear memory.
        memory_bytes: u64,
    },
}

/// A snapshot's stored manifest, for display.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(untagged)]
pub enum AnyManifest<'a> {
    /// A native manifest.
    Native(&'a Manifest),
    /// A session record.
    #[cfg(feature = "wasm")]
    Wasm(&'a WasmManifest),
}

/// What a session snapshot holds besides its workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SessionInfo {
    /// The guest module (a blob).
    pub guest_module: SnapshotId,
    /// Hash of the linear memory (equal content, equal hash).
    pub memory_hash: SnapshotId,
    /// Size of the linear memory in bytes.
    pub memory_bytes: u64,
}

/// What [`AnySnapshot::diff`] found.
#[derive(Clone, Debug, Serialize)]
pub struct StateDiff {
    /// Workspace paths added, modified and deleted.
    #[serde(flatten)]
    pub workspace: Diff,
    /// With two sessions, how their linear memories differ.
    #[serde(skip_serializing_if = "Option::is_none", flatten)]
    pub memory: Option<MemoryDiff>,
}

/// How two sessions' linear memories differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryDiff {
    /// 64 KiB pages whose content differs (or that only one side has).
    #[serde(rename = "memory_pages_changed")]
    pub pages_changed: usize,
    /// Size of each memory in bytes.
    #[serde(rename = "memory_bytes")]
    pub bytes: [u64; 2],
}

/// Bytes in a WebAssembly page.
#[cfg(feature = "wasm")]
const WASM_PAGE: u64 = 65536;

impl Runtime {
    /// Load the state `id` names, on whichever backend stored it.
    ///
    /// # Errors
    /// Unknown id, unreadable record, or a session in a build without the
    /// `wasm` feature ([`RuntimeError::NoWasmBackend`]).
    pub fn load_any(&self, id: &SnapshotId) -> Result<AnySnapshot> {
        if !self.store().is_wasm_snapshot(id) {
            return Ok(AnySnapshot::Native(self.snapshot(id)?));
        }
        #[cfg(feature = "wasm")]
        {
            let rt = self.wasm(crate::wasm::WasmLimits::default())?;
            Ok(AnySnapshot::Wasm(rt.snapshot(id)?))
        }
        #[cfg(not(feature = "wasm"))]
        Err(RuntimeError::NoWasmBackend(*id))
    }

    /// Resolve an id, unique id prefix or tag to a state of either backend.
    ///
    /// # Errors
    /// As [`crate::store::Store::resolve`] and [`Self::load_any`].
    pub fn resolve_any(&self, what: &str) -> Result<AnySnapshot> {
        let id = self.store().resolve(what)?;
        self.load_any(&id)
    }
}

/// What [`Runtime::import_session`] boots.
#[derive(Clone, Copy, Debug)]
pub struct SessionImport<'a> {
    /// `python` (the bundled guest) or the path of a `.wasm` guest module.
    pub guest: &'a str,
    /// A directory that becomes the session's initial `/workspace`.
    pub workspace: Option<&'a Path>,
    /// The guest's randomness seed, 64 hex digits (default: the boot spec's).
    pub seed: Option<&'a str>,
}

impl Runtime {
    /// Boot a WebAssembly guest (with `workspace` as its initial
    /// `/workspace`) and store the live session as a root snapshot.
    ///
    /// # Errors
    /// A seed that is not 64 hex digits, an unreadable guest, a guest that
    /// does not speak the guest protocol, or a build without the `wasm`
    /// feature ([`RuntimeError::WasmUnavailable`]).
    pub fn import_session(&self, spec: &SessionImport<'_>) -> Result<AnySnapshot> {
        if let Some(seed) = spec.seed
            && !(seed.len() == 64 && seed.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(RuntimeError::BadSeed(seed.to_owned()));
        }
        #[cfg(feature = "wasm")]
        {
            let (name, bytes) = if spec.guest == "python" {
                ("python".to_owned(), crate::wasm::python_guest()?)
            } else {
                let path = Path::new(spec.guest);
                let bytes = std::fs::read(path).map_err(|e| RuntimeError::Io {
                    op: "read the guest module (give `python` or a .wasm file)",
                    path: path.to_owned(),
                    source: e,
                })?;
                let stem = path
                    .file_stem()
                    .map_or_else(|| "guest".to_owned(), |s| s.to_string_lossy().into_owned());
                (stem, bytes)
            };
            let mut boot = crate::wasm::BootSpec::python();
            boot.args = vec![name];
            if let Some(seed) = spec.seed {
                boot.seed = seed.to_ascii_lowercase();
            }
            if let Some(dir) = spec.workspace {
                // The directory becomes the session's workspace layers; the
                // native snapshot that carried them is not kept in the index.
                let carrier = self.import(dir, None)?;
                boot.workspace_layers = carrier.manifest().layers.clone();
                self.store().unlist_snapshot(carrier.id())?;
            }
            let rt = self.wasm(crate::wasm::WasmLimits::default())?;
            Ok(AnySnapshot::Wasm(rt.import(&bytes, &boot)?))
        }
        #[cfg(not(feature = "wasm"))]
        Err(RuntimeError::WasmUnavailable)
    }
}

impl AnySnapshot {
    /// Its id in the store.
    pub fn id(&self) -> &SnapshotId {
        match self {
            Self::Native(s) => s.id(),
            #[cfg(feature = "wasm")]
            Self::Wasm(s) => s.id(),
        }
    }

    /// Which backend it belongs to.
    pub fn backend(&self) -> Backend {
        match self {
            Self::Native(_) => Backend::Native,
            #[cfg(feature = "wasm")]
            Self::Wasm(_) => Backend::Wasm,
        }
    }

    /// The store it lives in.
    pub fn store(&self) -> &Store {
        match self {
            Self::Native(s) => s.runtime().store(),
            #[cfg(feature = "wasm")]
            Self::Wasm(s) => s.runtime().store(),
        }
    }

    /// The snapshot it was taken from (`None` for a root).
    pub fn parent(&self) -> Option<SnapshotId> {
        match self {
            Self::Native(s) => s.manifest().parent,
            #[cfg(feature = "wasm")]
            Self::Wasm(s) => s.manifest().parent,
        }
    }

    /// Creation time, seconds since the Unix epoch.
    pub fn created_at(&self) -> u64 {
        match self {
            Self::Native(s) => s.manifest().created_at,
            #[cfg(feature = "wasm")]
            Self::Wasm(s) => s.manifest().created_at,
        }
    }

    /// The workspace's layer chain, bottom first.
    pub fn layers(&self) -> &[LayerId] {
        match self {
            Self::Native(s) => &s.manifest().layers,
            #[cfg(feature = "wasm")]
            Self::Wasm(s) => &s.manifest().layers,
        }
    }

    /// The stored manifest, for display.
    pub fn manifest(&self) -> AnyManifest<'_> {
        match self {
            Self::Native(s) => AnyManifest::Native(s.manifest()),
            #[cfg(feature = "wasm")]
            Self::Wasm(s) => AnyManifest::Wasm(s.manifest()),
        }
    }

    /// What produced it, as recorded.
    pub fn record(&self) -> Record<'_> {
        match self {
            Self::Native(s) => {
                let m = s.manifest();
                Record::Native {
                    action: m.action.as_ref(),
                    observations: &m.observations,
                    killed_background: &m.killed_background,
                }
            }
            #[cfg(feature = "wasm")]
            Self::Wasm(s) => {
                let m = s.manifest();
                Record::Wasm {
                    actions: &m.actions,
                    outcomes: m.observations.iter().map(|o| o.outcome.clone()).collect(),
                    memory_hash: m.memory_hash,
                    memory_bytes: m.memory_pages * WASM_PAGE,
                }
            }
        }
    }

    /// How each recorded step ended, in order.
    pub fn outcomes(&self) -> Vec<Outcome> {
        match self {
            Self::Native(s) => s
                .manifest()
                .observations
                .iter()
                .map(|o| Outcome::Exit(o.exit))
                .collect(),
            #[cfg(feature = "wasm")]
            Self::Wasm(s) => s
                .manifest()
                .observations
                .iter()
                .map(|o| Outcome::Session(o.outcome.clone()))
                .collect(),
        }
    }

    /// A session's guest module and memory (`None` on native).
    pub fn session_info(&self) -> Option<SessionInfo> {
        match self {
            Self::Native(_) => None,
            #[cfg(feature = "wasm")]
            Self::Wasm(s) => Some(SessionInfo {
                guest_module: s.manifest().guest,
                memory_hash: s.manifest().memory_hash,
                memory_bytes: s.manifest().memory_pages * WASM_PAGE,
            }),
        }
    }

    /// One line saying what produced it (`$ make test`, `>>> x = 1`,
    /// `import --wasm python (guest 1a2b…)`).
    pub fn summary(&self) -> String {
        match self {
            Self::Native(s) => action_summary(s.manifest().action.as_ref()),
            #[cfg(feature = "wasm")]
            Self::Wasm(s) => session_summary(s.manifest()),
        }
    }

    /// Load what opening a fork needs once (a session's memory image and
    /// compiled guest), so that the opens that follow cost only the fork.
    /// Nothing to do on native.
    ///
    /// # Errors
    /// The image or the guest cannot be loaded.
    pub fn warm(&self) -> Result<()> {
        match self {
            Self::Native(_) => Ok(()),
            #[cfg(feature = "wasm")]
            Self::Wasm(s) => {
                drop(s.open()?);
                Ok(())
            }
        }
    }

    /// Open one sandbox on it.
    ///
    /// # Errors
    /// Runtime faults.
    pub fn open(&self) -> Result<AnySandbox> {
        Ok(match self {
            Self::Native(s) => AnySandbox::Native(s.open()?),
            #[cfg(feature = "wasm")]
            Self::Wasm(s) => AnySandbox::Wasm(s.open()?),
        })
    }

    /// The chain from the root to this snapshot, root first.
    ///
    /// # Errors
    /// A parent cannot be read.
    pub fn chain(&self) -> Result<Vec<AnySnapshot>> {
        Ok(match self {
            Self::Native(s) => s
                .runtime()
                .log(s)?
                .into_iter()
                .map(AnySnapshot::Native)
                .collect(),
            #[cfg(feature = "wasm")]
            Self::Wasm(s) => s
                .runtime()
                .chain(s)?
                .into_iter()
                .map(AnySnapshot::Wasm)
                .collect(),
        })
    }

    /// Workspace paths added, modified and deleted from `self` to `other`
    /// (from the layers' trees; no file is read), and with two sessions the
    /// memory pages that differ. Either side may be of either backend.
    ///
    /// # Errors
    /// A layer or page index cannot be read.
    pub fn diff(&self, other: &AnySnapshot) -> Result<StateDiff> {
        let workspace = crate::runtime::diff_layers(self.store(), self.layers(), other.layers())?;
        let memory = match (self, other) {
            #[cfg(feature = "wasm")]
            (Self::Wasm(a), Self::Wasm(b)) => {
                let (pa, pb) = (a.page_hashes()?, b.page_hashes()?);
                let n = pa.len().max(pb.len());
                Some(MemoryDiff {
                    pages_changed: (0..n).filter(|i| pa.get(*i) != pb.get(*i)).count(),
                    bytes: [
                        a.manifest().memory_pages * WASM_PAGE,
                        b.manifest().memory_pages * WASM_PAGE,
                    ],
                })
            }
            _ => None,
        };
        Ok(StateDiff { workspace, memory })
    }

    /// Materialise its workspace into `dest` (absent or empty), verifying
    /// every layer file against its tree first.
    ///
    /// # Errors
    /// `dest` is not empty; a layer file is corrupt (named).
    pub fn checkout(&self, dest: &Path) -> Result<MaterializeReport> {
        crate::runtime::checkout_layers(self.store(), self.layers(), dest)
    }

    /// Re-execute its chain from the root in fresh forks and compare every
    /// recorded observation (and, for a session, every memory image,
    /// global and WASI state) with what replay produces.
    ///
    /// # Errors
    /// Runtime faults (a divergence is not an error: it is in the report).
    pub fn replay(&self, options: ReplayOptions) -> Result<ReplayReport> {
        match self {
            Self::Native(s) => crate::replay::replay(s.runtime(), s, options),
            #[cfg(feature = "wasm")]
            Self::Wasm(_) => {
                let _ = options;
                Err(RuntimeError::NativeOnly(
                    "replay (pending the shared report)",
                ))
            }
        }
    }

    /// The native snapshot, if it is one.
    pub fn native(&self) -> Option<&Snapshot> {
        match self {
            Self::Native(s) => Some(s),
            #[cfg(feature = "wasm")]
            Self::Wasm(_) => None,
        }
    }

    /// The session snapshot, if it is one.
    #[cfg(feature = "wasm")]
    pub fn wasm(&self) -> Option<&WasmSnapshot> {
        match self {
            Self::Native(_) => None,
            Self::Wasm(s) => Some(s),
        }
    }
}

impl From<Snapshot> for AnySnapshot {
    fn from(s: Snapshot) -> Self {
        Self::Native(s)
    }
}

#[cfg(feature = "wasm")]
impl From<WasmSnapshot> for AnySnapshot {
    fn from(s: WasmSnapshot) -> Self {
        Self::Wasm(s)
    }
}

impl AnySandbox {
    /// Which backend runs it.
    pub fn backend(&self) -> Backend {
        match self {
            Self::Native(_) => Backend::Native,
            #[cfg(feature = "wasm")]
            Self::Wasm(_) => Backend::Wasm,
        }
    }

    /// Run one step: a shell command line on native, the session's input
    /// (Python source) on wasm. `options.timeout_ms` is the wall-clock
    /// limit on both (a session's deterministic limit is its fuel); the
    /// mounts, environment and peer of `options` are native-only and a
    /// session refuses them.
    ///
    /// # Errors
    /// Runtime faults (a failing step is not an error: see its outcome);
    /// native-only options on a session.
    pub fn run(&mut self, command: &str, options: &ExecOptions) -> Result<StepResult> {
        match self {
            Self::Native(s) => {
                let o = s.exec(command, options)?;
                Ok(StepResult {
                    stdout: o.stdout,
                    stderr: o.stderr,
                    outcome: Outcome::Exit(o.exit),
                    duration: Duration::from_micros(o.duration_us),
                    killed_background: o.killed_background,
                    fuel: None,
                    dropped: [0, 0],
                })
            }
            #[cfg(feature = "wasm")]
            Self::Wasm(s) => {
                if !options.mounts.is_empty() || !options.env.is_empty() || options.peer.is_some() {
                    return Err(RuntimeError::NativeOnly(
                        "read-only mounts, environment variables and peers",
                    ));
                }
                s.set_step_timeout(Duration::from_millis(options.timeout_ms));
                let r = s.step(command)?;
                Ok(StepResult {
                    stdout: r.stdout,
                    stderr: r.stderr,
                    outcome: Outcome::Session(r.outcome),
                    duration: r.duration,
                    killed_background: Vec::new(),
                    fuel: Some(r.fuel),
                    dropped: r.dropped,
                })
            }
        }
    }

    /// Seal its state into a snapshot and continue on it.
    ///
    /// # Errors
    /// Runtime faults.
    pub fn snapshot(&mut self) -> Result<AnySnapshot> {
        Ok(match self {
            Self::Native(s) => AnySnapshot::Native(s.snapshot()?),
            #[cfg(feature = "wasm")]
            Self::Wasm(s) => AnySnapshot::Wasm(s.snapshot()?),
        })
    }

    /// The native sandbox, if it is one.
    pub fn native_mut(&mut self) -> Option<&mut Sandbox> {
        match self {
            Self::Native(s) => Some(s),
            #[cfg(feature = "wasm")]
            Self::Wasm(_) => None,
        }
    }

    /// The session, if it is one.
    #[cfg(feature = "wasm")]
    pub fn wasm_mut(&mut self) -> Option<&mut WasmSandbox> {
        match self {
            Self::Native(_) => None,
            Self::Wasm(s) => Some(s),
        }
    }
}

/// `word` as one shell word: as is when it is plainly safe, else in single
/// quotes (a quote inside becomes `'\\''`).
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Text on one line: line breaks become visible `\\n`, tabs spaces.
fn one_line(text: &str) -> String {
    text.trim_end_matches('\n')
        .replace('\n', "\\n")
        .replace('\t', " ")
}

/// One line describing a native action.
pub fn action_summary(action: Option<&Action>) -> String {
    match action {
        None => "(no action)".to_owned(),
        Some(Action::Exec { command, .. }) => format!("$ {}", one_line(command)),
        Some(Action::WriteFile { path, .. }) => format!("write {path}"),
        Some(Action::DeleteFile { path }) => format!("delete {path}"),
        Some(Action::Import { source }) => format!("import {source}"),
        Some(Action::Sequence { actions }) => {
            let n = actions.len();
            let first = action_summary(actions.first());
            format!(
                "sequence of {n} action{}: {first}{}",
                if n == 1 { "" } else { "s" },
                if n > 1 { ", ..." } else { "" }
            )
        }
    }
}

/// One line describing a session action.
#[cfg(feature = "wasm")]
fn wasm_action_summary(action: &WasmAction) -> String {
    match action {
        WasmAction::Step { code } => format!(">>> {}", one_line(code)),
        WasmAction::WriteFile { path, .. } => format!("write {path}"),
        WasmAction::DeleteFile { path } => format!("delete {path}"),
    }
}

/// One line describing what produced a session snapshot.
#[cfg(feature = "wasm")]
fn session_summary(m: &WasmManifest) -> String {
    match (m.boot.as_ref(), m.actions.as_slice()) {
        (Some(boot), _) => format!(
            "import --wasm {} (guest {})",
            boot.args.first().map_or("?", String::as_str),
            m.guest.short()
        ),
        (None, []) => "(no action)".into(),
        (None, [one]) => wasm_action_summary(one),
        (None, [first, ..]) => format!(
            "{} steps: {}, ...",
            m.actions.len(),
            wasm_action_summary(first)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_share_one_mapping_and_one_set_of_labels() {
        let exit = Outcome::Exit(ExitStatus::Timeout);
        assert_eq!(exit.shell_code(), 124);
        assert_eq!(exit.label(), ExitStatus::Timeout.label());
        assert!(
            exit.note(Duration::from_secs(3))
                .is_some_and(|n| n.contains("after 3 s"))
        );
        // Control: a normal exit has no note.
        assert_eq!(
            Outcome::Exit(ExitStatus::Code { code: 2 }).note(Duration::ZERO),
            None
        );
        #[cfg(feature = "wasm")]
        {
            let fuel = Outcome::Session(StepOutcome::OutOfFuel);
            assert_eq!(fuel.shell_code(), exit.shell_code());
            assert_eq!(fuel.label(), "out of fuel");
            assert!(fuel.note(Duration::ZERO).is_some());
            assert_eq!(
                Outcome::Session(StepOutcome::Exception).note(Duration::ZERO),
                None
            );
        }
    }

    #[test]
    fn several_words_are_an_argv_one_word_a_shell_string() {
        let words = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            Backend::Native.step_text(&words(&["printf", "%s", "a b", "it's", ""])),
            "printf %s 'a b' 'it'\\''s' ''"
        );
        // Control: one word passes through as a shell string.
        assert_eq!(Backend::Native.step_text(&words(&["a && b"])), "a && b");
        assert_eq!(
            Backend::Wasm.step_text(&words(&["print(1,", "2)"])),
            "print(1, 2)"
        );
    }

    #[test]
    fn summaries_are_one_line() {
        let exec = Action::Exec {
            command: "echo a\necho b\n".into(),
            timeout_ms: 1,
        };
        assert_eq!(action_summary(Some(&exec)), "$ echo a\\necho b");
        let seq = Action::Sequence {
            actions: vec![exec, Action::DeleteFile { path: "x".into() }],
        };
        assert_eq!(
            action_summary(Some(&seq)),
            "sequence of 2 actions: $ echo a\\necho b, ..."
        );
        assert_eq!(action_summary(None), "(no action)");
    }
}
