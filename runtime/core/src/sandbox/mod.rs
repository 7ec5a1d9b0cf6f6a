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

mod channel;
pub(crate) mod declare;
pub mod egress;
pub mod env;
mod error;
mod exec;
mod files;
pub mod helper;
pub(crate) mod pool;
pub mod process;
pub mod protocol;
mod workspace;

use std::path::PathBuf;

use crate::layer;
use crate::store::object::{
    Action, LayerId, ObjectId, ObjectKind, ObservationDigest, SessionState, SnapshotId, Tree,
};
use crate::{Runtime, WorkspaceBackend};
pub use error::{Result, SandboxError};
pub use exec::{ExecOptions, Observation, PeerCommand, ReadOnlyMount};
pub use process::{CgroupLimits, HelperCommand};
pub use protocol::{ActionRoot, Confinement, ListEntry, PeerResult, SandboxLimits, SystemView};
use protocol::{Request, Response, WorkspaceMount};
pub use workspace::{ChangeKind, PathChange};
use workspace::{Private, make_upper, record_base};

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
    helper: Box<dyn channel::HelperChannel>,
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
    /// The image whose root filesystem the sandbox sees (`None`: the host's).
    image: Option<std::sync::Arc<crate::image::Image>>,
    /// The ids the image's actions run as (its `User`; `None`: root).
    user: Option<crate::image::user::ImageUser>,
    /// Where the workspace also appears (see [`crate::store::Manifest::workdir`]).
    workdir: Option<String>,
    /// The egress proxy, when the sandbox was given an allowlist.
    egress: Option<egress::EgressProxy>,
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
        image: Option<std::sync::Arc<crate::image::Image>>,
        workdir: Option<String>,
    ) -> Result<Self> {
        let store = runtime.store();
        let user = match image.as_deref().map(|i| &i.user) {
            None | Some(Ok(None)) => None,
            Some(Ok(Some(u))) => Some(*u),
            Some(Err(why)) => {
                return Err(SandboxError::ImageUser {
                    image: image.as_deref().map(|i| i.id.short()).unwrap_or_default(),
                    why: why.clone(),
                });
            }
        };
        let pool::Prepared {
            mut helper,
            run_dir,
        } = runtime.claim_helper(&runtime.system_view(image.as_deref()))?;
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
            helper: Box::new(helper),
            run_dir,
            private,
            generation: 0,
            base,
            layers,
            session,
            pending: Vec::new(),
            killed_background: Vec::new(),
            image,
            user,
            workdir,
            egress: None,
            delta_cache: None,
            unwritten: Vec::new(),
        })
    }

    /// Where the workspace also appears, if anywhere (the image's `WorkingDir`).
    pub fn workdir(&self) -> Option<&str> {
        self.workdir.as_deref()
    }

    /// The image the sandbox runs on, if any.
    pub fn image(&self) -> Option<&crate::image::Image> {
        self.image.as_deref()
    }

    /// The fixed environment of this sandbox's actions: Arbor's, with the
    /// image's `Env` on top when it runs on an image.
    pub fn fixed_env(&self) -> Vec<(String, String)> {
        let mut fixed = match &self.image {
            Some(img) => img.fixed_env(),
            None => env::fixed_env(),
        };
        if self.egress.is_some() {
            let url = egress::proxy_url();
            for k in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
                fixed.retain(|(ek, _)| ek != k);
                fixed.push((k.to_owned(), url.clone()));
            }
        }
        fixed
    }

    /// Let the sandbox reach exactly these host names (by name; IP literals
    /// and names resolving to loopback or link-local addresses are refused)
    /// through an HTTP proxy outside it, at `127.0.0.1:3128` inside, with
    /// `HTTP(S)_PROXY` set for every later action. Without this call the
    /// sandbox has loopback only and nothing listens on that port. Each
    /// action's connections come back in [`Observation::egress`]. Not
    /// inherited by snapshots or forks (it is the sandbox's, not state).
    pub fn allow_egress(&mut self, hosts: &[String]) -> Result<()> {
        let mut allow = Vec::new();
        for h in hosts {
            allow.push(egress::check_host_name(h).map_err(SandboxError::Egress)?);
        }
        if let Some(p) = &self.egress {
            if p.allow() == allow.as_slice() {
                return Ok(());
            }
            return Err(SandboxError::Egress(
                "this sandbox already has an allowlist; open a new sandbox for another".into(),
            ));
        }
        let socket = self.run_dir.join("egress.sock");
        let proxy = egress::EgressProxy::start(&socket, allow)
            .map_err(|e| SandboxError::io("start the egress proxy on", &socket, e))?;
        match self.helper.request(&Request::Egress {
            socket,
            port: egress::PROXY_PORT,
        })? {
            Response::Ok => {}
            other => return Err(self.helper.unexpected(other)),
        }
        self.egress = Some(proxy);
        Ok(())
    }

    /// The allowlist, if the sandbox has one.
    pub fn egress_allowlist(&self) -> Option<&[String]> {
        self.egress.as_ref().map(|p| p.allow())
    }

    pub(super) fn egress_log(&self) -> Vec<egress::EgressEvent> {
        self.egress
            .as_ref()
            .map(|p| p.take_log())
            .unwrap_or_default()
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

    /// Forget what a listed snapshot recorded: the pending actions and
    /// killed background processes (returned), and the held objects.
    pub(crate) fn take_pending(&mut self) -> (Vec<(Action, ObservationDigest)>, Vec<String>) {
        self.unwritten.clear();
        (
            std::mem::take(&mut self.pending),
            std::mem::take(&mut self.killed_background),
        )
    }

    /// The pending actions with their observations, and the background
    /// processes killed since the last snapshot (what its manifest records).
    pub(crate) fn pending(&self) -> (&[(Action, ObservationDigest)], &[String]) {
        (&self.pending, &self.killed_background)
    }

    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.helper.kill();
        crate::cleanup::remove_dir_forcefully(&self.run_dir);
    }
}
