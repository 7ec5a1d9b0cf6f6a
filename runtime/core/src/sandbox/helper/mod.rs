//! The sandbox helper process: single-threaded, spawned (never forked) by the
//! runtime, it creates the sandbox's namespaces, owns every mount in its
//! private mount namespace, and runs each action as a fresh process tree.
//!
//! Process tree of one action:
//!
//! ```text
//! helper (user, mount, net, uts, ipc namespaces; the sandbox's root user)
//!  └─ G   cloned into a fresh mount + pid namespace, pid 1 there: mounts
//!     │   /tmp, /proc, /dev/shm, pivot_root()s into the sandbox root, reaps,
//!     │   reports leftovers; dies with the helper (PDEATHSIG), and its death
//!     │   kills everything in the namespace
//!     └─ S   the action: rlimits, capabilities dropped from the bounding
//!            set, no_new_privs, `bash -c` with the session wrapper
//! ```
//!
//! A timeout, a disk-limit breach or the helper's own death kills G, and the
//! pid-namespace teardown kills every process the action started.
//!
//! A *paired* action (the verifier's: [`super::protocol::PeerRequest`]) has
//! a second tree, G' and S', cloned beside G before the action's read-only
//! mounts exist, so `/verifier` is only in G's mount namespace. The two
//! trees share one `/tmp` (mounted by the helper before either is cloned)
//! and `/workspace`, are joined by a socket pair at fd 3 in S and S', and
//! cannot see each other's processes (sibling pid namespaces). G' is killed
//! as soon as G's tree is over.
//!
//! Layout: this file serves requests; `sys` is the syscall seam (and every
//! `unsafe` block), `setup` the set-up logic over it, `action` and
//! `supervise` start and wait for process trees, `files` the file API,
//! `session` the shell wrapper and its parsers.

mod action;
mod error;
#[cfg(test)]
mod fake;
mod files;
pub mod landlock;
pub mod seccomp;
pub(crate) mod session;
mod setup;
mod supervise;
pub(crate) mod sys;
#[cfg(test)]
mod tests;

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};
use nix::sys::wait::waitpid;

pub use error::{HelperError, Op};
use sys::{Linux, Syscalls};

use super::protocol::{
    ActionRoot, ExecRequest, ExecResult, FileOp, FileResult, Request, Response, Setup, SystemView,
    WorkspaceMount,
};
use action::{ActionSpec, high_fd, spawn_action};
use error::Result;

/// Entry point of the `arbor-sandbox-helper` binary (and of `arbor
/// __sandbox-helper`). Must run before any thread is started.
pub fn main() -> ! {
    let code = match serve() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("arbor-sandbox-helper: {e}");
            1
        }
    };
    sys::exit_now(code)
}

/// The helper's state between requests.
struct Helper<S: Syscalls> {
    sys: S,
    setup: Option<Setup>,
    /// The directory whose size is policed: the mounted workspace's upper
    /// directory, or the copy backend's workspace.
    policed: Option<PathBuf>,
    /// The store root, opened while the helper still had its host ids. Every
    /// store path is then reached as `/proc/self/fd/<fd>/<relative>`, so the
    /// helper, once it is the sandbox's root (a mapped id, which overlayfs
    /// requires of its mounter), needs no search permission on the store's
    /// parent directories (which may be private, like `/root`).
    store: Option<(OwnedFd, PathBuf)>,
}

fn protocol_err(e: &std::io::Error) -> HelperError {
    HelperError::io(Op::Protocol, None, e)
}

fn serve() -> Result<()> {
    // Take the protocol pipes off fds 0/1 (close-on-exec copies) so that
    // nothing else can write to them.
    let input = sys::dup_above(std::io::stdin().as_fd(), 0)?;
    let output = sys::dup_above(std::io::stdout().as_fd(), 0)?;
    let mut input = File::from(input);
    let mut output = File::from(output);
    // Then point fds 0 and 1 elsewhere: /dev/null and the log. (Every
    // process the helper forks inherits them until it replaces them.)
    let null = File::open("/dev/null")
        .map_err(|e| HelperError::io(Op::Dup, Some(Path::new("/dev/null")), &e))?;
    for (src, dst) in [(null.as_raw_fd(), 0), (2, 1)] {
        sys::dup2(src, dst).map_err(|e| HelperError::io(Op::Dup, None, &e))?;
    }

    let mut helper = Helper::new(Linux);
    loop {
        let Some(req) =
            super::protocol::read_frame::<_, Request>(&mut input).map_err(|e| protocol_err(&e))?
        else {
            return Ok(()); // the runtime went away
        };
        let resp = match req {
            Request::Shutdown => {
                super::protocol::write_frame(&mut output, &Response::Ok).ok();
                return Ok(());
            }
            Request::Unshare => helper.unshare().map(|()| Response::Unshared),
            Request::Setup(setup) => helper.setup(*setup).map(|()| Response::Ok),
            Request::Exec(req) => {
                // With `stream` set, each chunk of output goes out as its
                // own frame while the action runs. A failed write means the
                // runtime is gone: the action is left to finish (the
                // runtime's death kills this helper and so the action), and
                // the failure ends the helper once it is over.
                let mut failed: Option<std::io::Error> = None;
                let mut stream = |stream, data: &[u8]| {
                    if failed.is_none() {
                        let frame = Response::Output {
                            stream,
                            data: data.to_vec(),
                        };
                        failed = super::protocol::write_frame(&mut output, &frame).err();
                    }
                };
                let result = if req.stream {
                    helper.exec(&req, &mut stream)
                } else {
                    helper.exec(&req, &mut |_, _| {})
                };
                if let Some(e) = failed {
                    return Err(protocol_err(&e));
                }
                result.map(|r| Response::Exec(Box::new(r)))
            }
            Request::UnmountWorkspace => helper.unmount_workspace().map(|()| Response::Ok),
            Request::MountWorkspace(ws) => helper.mount_workspace(&ws).map(|()| Response::Ok),
            Request::File(op) => helper.file_op(&op).map(Response::File),
            Request::Egress { socket, port } => helper.egress(&socket, port).map(|()| Response::Ok),
        };
        let resp = resp.unwrap_or_else(|error| Response::Error { error });
        super::protocol::write_frame(&mut output, &resp).map_err(|e| protocol_err(&e))?;
    }
}

impl<S: Syscalls> Helper<S> {
    fn new(sys: S) -> Self {
        Self {
            sys,
            setup: None,
            policed: None,
            store: None,
        }
    }

    /// `path` reached through the store descriptor when it is below the store root.
    fn via_store(&self, path: &Path) -> PathBuf {
        match &self.store {
            Some((fd, root)) => match path.strip_prefix(root) {
                Ok(rel) => Path::new(&format!("/proc/self/fd/{}", fd.as_raw_fd())).join(rel),
                Err(_) => path.to_owned(),
            },
            None => path.to_owned(),
        }
    }

    fn rewrite_workspace(&self, ws: &WorkspaceMount) -> WorkspaceMount {
        match ws {
            WorkspaceMount::Overlay {
                lowers,
                upper,
                work,
            } => WorkspaceMount::Overlay {
                lowers: lowers.iter().map(|l| self.via_store(l)).collect(),
                upper: self.via_store(upper),
                work: self.via_store(work),
            },
            WorkspaceMount::Bind { dir } => WorkspaceMount::Bind {
                dir: self.via_store(dir),
            },
        }
    }

    fn egress(&mut self, socket: &Path, port: u16) -> Result<()> {
        let socket = self.via_store(socket);
        let keep: Vec<i32> = self.store.iter().map(|(fd, _)| fd.as_raw_fd()).collect();
        self.sys.start_forwarder(&socket, port, &keep)
    }

    fn unshare(&mut self) -> Result<()> {
        self.sys.unshare(setup::NAMESPACES)
    }

    fn setup(&mut self, setup: Setup) -> Result<()> {
        let store = self.sys.open_dir(&setup.store_root)?;
        self.store = Some((store, setup.store_root.clone()));
        let mut setup = setup;
        setup.root_dir = self.via_store(&setup.root_dir);
        if let SystemView::Image { lowers, at } = &mut setup.system {
            *lowers = lowers.iter().map(|l| self.via_store(l)).collect();
            *at = self.via_store(at);
        }
        setup::build_sandbox(
            &mut self.sys,
            &setup.root_dir,
            &setup.system,
            &setup.hostname,
        )?;
        if setup.confinement.landlock {
            eprintln!("arbor-sandbox-helper: {}", landlock::describe());
        }
        self.setup = Some(setup);
        Ok(())
    }

    fn cfg(&self) -> Result<&Setup> {
        self.setup.as_ref().ok_or(HelperError::NotSetUp)
    }

    fn unmount_workspace(&mut self) -> Result<()> {
        let target = self.cfg()?.root_dir.join("workspace");
        setup::unmount_workspace(&mut self.sys, &target)
    }

    fn mount_workspace(&mut self, ws: &WorkspaceMount) -> Result<()> {
        let target = self.cfg()?.root_dir.join("workspace");
        let ws = &self.rewrite_workspace(ws);
        setup::mount_workspace(&mut self.sys, &target, ws)?;
        self.policed = Some(match ws {
            WorkspaceMount::Overlay { upper, .. } => upper.clone(),
            WorkspaceMount::Bind { dir } => dir.clone(),
        });
        Ok(())
    }

    /// Run a file operation as the sandbox's root (see [`files`]).
    fn file_op(&mut self, op: &FileOp) -> Result<FileResult> {
        let root = self.cfg()?.root_dir.clone();
        files::file_op(&mut self.sys, &root, op)
    }

    /// Run one action (and its peer, if it has one) with its read-only
    /// mounts in place in its own mount namespace.
    ///
    /// Order matters for the peer: the shared `/tmp` is mounted first (so
    /// both process trees inherit the same tmpfs), then the peer is cloned,
    /// and only then are the read-only mounts bound, so they exist in the
    /// main action's mount namespace alone. The helper's own copies of those
    /// mounts are taken down as soon as the trees are cloned.
    ///
    /// `on_output` gets the main action's output as it is read (see
    /// [`supervise::supervise`]).
    fn exec(
        &mut self,
        req: &ExecRequest,
        on_output: &mut dyn FnMut(crate::state::OutputStream, &[u8]),
    ) -> Result<ExecResult> {
        let root = self.cfg()?.root_dir.clone();
        let confinement = self.cfg()?.confinement;
        let policed = self.policed.clone().ok_or(HelperError::NoWorkspace)?;
        let shared_tmp = req.peer.is_some();
        if shared_tmp {
            setup::mount_tmpfs(
                &mut self.sys,
                &root.join("tmp"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                setup::TMP_TMPFS,
            )?;
        }
        let sources: Vec<PathBuf> = req
            .mounts
            .iter()
            .map(|m| self.via_store(&m.source))
            .collect();
        let mut mounted: Vec<PathBuf> = Vec::new();
        let spawned = (|| {
            let channel = match req.peer {
                Some(_) => {
                    let (a, b) = nix::sys::socket::socketpair(
                        nix::sys::socket::AddressFamily::Unix,
                        nix::sys::socket::SockType::Stream,
                        None,
                        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
                    )
                    .map_err(|e| HelperError::sys_bare(Op::Socketpair, e))?;
                    Some((high_fd(a)?, high_fd(b)?))
                }
                None => None,
            };
            let peer = match (&req.peer, &channel) {
                (Some(p), Some((_, theirs))) => {
                    let spec = ActionSpec {
                        command: &p.command,
                        env: &p.env,
                        cwd: "/workspace",
                        limits: &req.limits,
                        channel: Some(theirs.as_raw_fd()),
                        other_end: channel.as_ref().map(|(ours, _)| ours.as_raw_fd()),
                        mount_tmp: false,
                        workspace_root: false,
                        workdir: None,
                        // The peer is Arbor's (a verifier's trusted side): the sandbox's root.
                        user: None,
                        confinement,
                    };
                    Some(spawn_action(&root, &spec)?)
                }
                _ => None,
            };
            let main = (|| {
                for (m, source) in req.mounts.iter().zip(&sources) {
                    setup::mount_read_only(&mut self.sys, &root, source, &m.target, &mut mounted)?;
                }
                let spec = ActionSpec {
                    command: &req.command,
                    env: &req.env,
                    cwd: &req.session.cwd,
                    limits: &req.limits,
                    channel: channel.as_ref().map(|(ours, _)| ours.as_raw_fd()),
                    other_end: channel.as_ref().map(|(_, theirs)| theirs.as_raw_fd()),
                    mount_tmp: !shared_tmp,
                    workspace_root: req.root == ActionRoot::Workspace,
                    workdir: req.workdir.as_deref(),
                    user: req.user,
                    confinement,
                };
                spawn_action(&root, &spec)
            })();
            let main = match main {
                Ok(main) => main,
                Err(e) => {
                    // Do not leave the peer running without its main action.
                    if let Some(p) = &peer {
                        p.kill();
                        let _ = waitpid(p.pid, None);
                    }
                    return Err(e);
                }
            };
            // The channel's ends now live in the two process trees only.
            drop(channel);
            Ok((main, peer))
        })();
        let mut teardown = Ok(());
        for dst in mounted
            .iter()
            .rev()
            .chain(shared_tmp.then(|| root.join("tmp")).iter())
        {
            if let Err(e) = self.sys.umount(dst, MntFlags::MNT_DETACH) {
                teardown = Err(e);
            }
        }
        let (main, peer) = spawned?;
        let result = supervise::supervise(main, peer, req, &policed, on_output);
        teardown?;
        result
    }
}
