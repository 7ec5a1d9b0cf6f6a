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

use crate::layer::MaterializeReport;
use crate::replay::{ReplayOptions, ReplayReport};
use crate::runtime::{Result, RuntimeError};
use crate::store::Store;
use crate::store::object::{Action, LayerId, SnapshotId};
use crate::{ExecOptions, Runtime, Sandbox, Snapshot};

#[cfg(feature = "wasm")]
use crate::wasm::{WasmSandbox, WasmSnapshot};

mod import;
mod vocabulary;

pub use import::SessionImport;
pub use vocabulary::{
    AnyManifest, Backend, MemoryDiff, Outcome, OutputStream, Record, SessionInfo, StateDiff,
    StepResult, shell_quote,
};

/// A stored state of either backend.
///
/// ```no_run
/// # fn main() -> arbor_runtime::Result<()> {
/// # let rt = arbor_runtime::Runtime::open_at("/tmp/arbor-home")?;
/// let a = rt.resolve_any("base")?;
/// let b = rt.resolve_any("3f2a9c")?;
/// let d = a.diff(&b)?; // workspace paths, and memory pages for two sessions
/// println!("{} added, {:?}", d.workspace.added.len(), d.memory);
/// let report = b.replay(arbor_runtime::replay::ReplayOptions::default())?;
/// assert!(report.identical);
/// # Ok(())
/// # }
/// ```
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
///
/// ```no_run
/// # fn main() -> arbor_runtime::Result<()> {
/// # let rt = arbor_runtime::Runtime::open_at("/tmp/arbor-home")?;
/// use arbor_runtime::{Backend, ExecOptions};
/// let base = rt.resolve_any("base")?;
/// let mut sandbox = base.open()?;
/// let step = match sandbox.backend() {
///     Backend::Native => "python3 -c 'print(6 * 7)'",
///     Backend::Wasm => "print(6 * 7)",
/// };
/// let r = sandbox.run(step, &ExecOptions::with_timeout_ms(10_000))?;
/// assert_eq!(r.outcome.shell_code(), 0);
/// let child = sandbox.snapshot()?; // sealed, listed, and the sandbox goes on
/// # drop(child);
/// # Ok(())
/// # }
/// ```
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

/// Bytes in a WebAssembly page.
#[cfg(feature = "wasm")]
pub(crate) const WASM_PAGE: u64 = 65536;

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
            Self::Native(s) => s
                .manifest()
                .action
                .as_ref()
                .map_or_else(|| "(no action)".to_owned(), Action::summary),
            #[cfg(feature = "wasm")]
            Self::Wasm(s) => vocabulary::session_summary(s.manifest()),
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
            Self::Wasm(s) => Ok(s.runtime().replay_with_options(s, options)?),
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
        self.run_streaming(command, options, &mut |_, _| {})
    }

    /// [`run`](Self::run), with the step's stdout and stderr handed to
    /// `on_output` as they are produced: chunk by chunk while a native
    /// action runs; on wasm (a session step is one call into the guest) one
    /// chunk per non-empty stream once the step is over. The chunks of each
    /// stream, joined, are exactly the result's.
    ///
    /// # Errors
    /// As [`run`](Self::run).
    pub fn run_streaming(
        &mut self,
        command: &str,
        options: &ExecOptions,
        on_output: &mut dyn FnMut(OutputStream, &[u8]),
    ) -> Result<StepResult> {
        match self {
            Self::Native(s) => {
                let o = s.exec_streaming(command, options, on_output)?;
                Ok(StepResult {
                    stdout: o.stdout,
                    stderr: o.stderr,
                    outcome: Outcome::Exit(o.exit),
                    duration: Duration::from_micros(o.duration_us),
                    killed_background: o.killed_background,
                    fuel: None,
                    dropped: [0, 0],
                    egress: o.egress,
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
                if !r.stdout.is_empty() {
                    on_output(OutputStream::Stdout, &r.stdout);
                }
                if !r.stderr.is_empty() {
                    on_output(OutputStream::Stderr, &r.stderr);
                }
                Ok(StepResult {
                    stdout: r.stdout,
                    stderr: r.stderr,
                    outcome: Outcome::Session(r.outcome),
                    duration: r.duration,
                    killed_background: Vec::new(),
                    fuel: Some(r.fuel),
                    dropped: r.dropped,
                    egress: Vec::new(),
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
