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

use std::ffi::CString;
use std::fs::{self, File};
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::mount::{MntFlags, MsFlags};
use nix::sched::CloneFlags;
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Gid, Pid, Uid};

use super::protocol::{
    CHANNEL_FD, ExecRequest, ExecResult, FileOp, FileResult, Limits, ListEntry, MOUNT_POINTS,
    PeerResult, Request, Response, Setup, SystemView, WorkspaceMount,
};
use crate::store::object::{ExitStatus, SessionState};
use crate::sys;

/// The descriptor the session wrapper writes the final cwd and environment to.
const STATE_FD: i32 = 63;

/// Shell text run by `bash -c`: the command runs in this shell (so `cd` and
/// `export` persist), and the EXIT trap reports the resulting state, including
/// after `exit N`, without changing the exit status. The report uses builtins
/// only (no process is started): the cwd, a NUL, then `declare -px`, which
/// [`parse_declarations`] reads back.
const WRAPPER: &str = r#"__arbor_state() {
  __arbor_rc=$?
  { builtin printf '%s\0' "$PWD"; builtin declare -px; } >&63 2>/dev/null
  builtin exit "$__arbor_rc"
}
builtin trap __arbor_state EXIT
__arbor_cmd=$ARBOR_COMMAND
builtin unset ARBOR_COMMAND
builtin eval "$__arbor_cmd"
"#;

/// Variables bash itself maintains; never part of the session state.
const SHELL_OWNED_VARS: &[&str] = &["PWD", "OLDPWD", "SHLVL", "_", "__arbor_cmd", "__arbor_rc"];

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

struct Helper {
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

impl Helper {
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
}

fn serve() -> Result<(), String> {
    // Take the protocol pipes off fds 0/1 so that nothing else can write to them.
    let input =
        nix::unistd::dup(std::io::stdin().as_fd()).map_err(|e| format!("dup stdin: {e}"))?;
    let output =
        nix::unistd::dup(std::io::stdout().as_fd()).map_err(|e| format!("dup stdout: {e}"))?;
    let mut input = File::from(input);
    let mut output = File::from(output);
    nix::fcntl::fcntl(
        &input,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .map_err(|e| e.to_string())?;
    nix::fcntl::fcntl(
        &output,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .map_err(|e| e.to_string())?;
    // Then point fds 0 and 1 elsewhere: /dev/null and the log. (Every
    // process the helper forks inherits them until it replaces them.)
    let null = File::open("/dev/null").map_err(|e| format!("open /dev/null: {e}"))?;
    for (src, dst) in [(null.as_raw_fd(), 0), (2, 1)] {
        // SAFETY: dup2 onto fds 0 and 1, which from here on nothing in the
        // helper uses as the protocol (the copies above are).
        if unsafe { libc::dup2(src, dst) } < 0 {
            return Err(format!(
                "dup2 onto fd {dst}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }

    let mut helper = Helper {
        setup: None,
        policed: None,
        store: None,
    };
    loop {
        let Some(req) = super::protocol::read_frame::<_, Request>(&mut input)
            .map_err(|e| format!("read request: {e}"))?
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
            Request::Exec(req) => helper.exec(&req).map(|r| Response::Exec(Box::new(r))),
            Request::UnmountWorkspace => helper.unmount_workspace().map(|()| Response::Ok),
            Request::MountWorkspace(ws) => helper.mount_workspace(&ws).map(|()| Response::Ok),
            Request::File(op) => helper.file_op(&op).map(Response::File),
        };
        let resp = resp.unwrap_or_else(|message| Response::Error { message });
        super::protocol::write_frame(&mut output, &resp)
            .map_err(|e| format!("write response: {e}"))?;
    }
}

fn err<E: std::fmt::Display>(what: impl std::fmt::Display) -> impl FnOnce(E) -> String {
    move |e| format!("{what}: {e}")
}

impl Helper {
    fn unshare(&mut self) -> Result<(), String> {
        nix::sched::unshare(
            CloneFlags::CLONE_NEWUSER
                | CloneFlags::CLONE_NEWNS
                | CloneFlags::CLONE_NEWNET
                | CloneFlags::CLONE_NEWUTS
                | CloneFlags::CLONE_NEWIPC,
        )
        .map_err(err("unshare(user, mount, net, uts, ipc namespaces)"))
    }

    fn setup(&mut self, setup: Setup) -> Result<(), String> {
        let store = nix::fcntl::open(
            &setup.store_root,
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(err(format!("open store {}", setup.store_root.display())))?;
        self.store = Some((store, setup.store_root.clone()));
        let mut setup = setup;
        setup.root_dir = self.via_store(&setup.root_dir);
        become_sandbox_root()?;
        nix::mount::mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None::<&str>,
        )
        .map_err(err("make mounts private"))?;
        nix::unistd::sethostname(&setup.hostname).map_err(err("sethostname"))?;
        sys::loopback_up().map_err(err("bring up loopback"))?;

        let root = &setup.root_dir;
        // Creating inodes on a filesystem mounted inside the user namespace
        // needs an id mapped there; the helper keeps its host id (so it can
        // reach the store's layers wherever they are), so a child that has
        // become the sandbox's root builds the system view.
        in_sandbox_root_child(|| {
            sys::mount_tmpfs(root, MsFlags::MS_NOSUID, "mode=0755,size=16m")
                .map_err(|e| e.to_string())?;
            build_system_view(root, &setup.system, &setup.hostname)?;
            for dir in ["workspace", "tmp", "proc", "dev/shm"]
                .into_iter()
                .chain(MOUNT_POINTS.iter().copied())
            {
                mkdir(&root.join(dir), 0o755)?;
            }
            fs::set_permissions(root.join("tmp"), fs::Permissions::from_mode(0o1777))
                .map_err(err("chmod /tmp"))
        })?;
        nix::mount::mount(
            None::<&str>,
            root.as_path(),
            None::<&str>,
            MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID,
            Some("mode=0755,size=16m"),
        )
        .map_err(err("remount sandbox root read-only"))?;
        self.setup = Some(setup);
        Ok(())
    }

    fn cfg(&self) -> Result<&Setup, String> {
        self.setup
            .as_ref()
            .ok_or_else(|| "sandbox is not set up".to_owned())
    }

    fn unmount_workspace(&mut self) -> Result<(), String> {
        let target = self.cfg()?.root_dir.join("workspace");
        nix::mount::umount2(&target, MntFlags::empty())
            .map_err(err(format!("unmount {}", target.display())))
    }

    fn mount_workspace(&mut self, ws: &WorkspaceMount) -> Result<(), String> {
        let target = self.cfg()?.root_dir.join("workspace");
        let ws = &self.rewrite_workspace(ws);
        mount_workspace_at(&target, ws)?;
        self.policed = Some(match ws {
            WorkspaceMount::Overlay { upper, .. } => upper.clone(),
            WorkspaceMount::Bind { dir } => dir.clone(),
        });
        Ok(())
    }

    /// Run a file operation in a forked child that has `chroot`ed into the
    /// sandbox root and become the sandbox's root user, through a cap-std
    /// handle on `/workspace`: permissions are checked as inside, new files
    /// are owned by the sandbox's root, and no path can resolve outside.
    fn file_op(&mut self, op: &FileOp) -> Result<FileResult, String> {
        let root = self.cfg()?.root_dir.clone();
        in_sandbox_root_child(|| {
            Ok(file_op_as_sandbox_root(&root, op)
                .unwrap_or_else(|message| FileResult::Failed { message }))
        })
    }

    /// Run one action (and its peer, if it has one) with its read-only
    /// mounts in place in its own mount namespace.
    ///
    /// Order matters for the peer: the shared `/tmp` is mounted first (so
    /// both process trees inherit the same tmpfs), then the peer is cloned,
    /// and only then are the read-only mounts bound, so they exist in the
    /// main action's mount namespace alone. The helper's own copies of those
    /// mounts are taken down as soon as the trees are cloned.
    fn exec(&mut self, req: &ExecRequest) -> Result<ExecResult, String> {
        let setup = self.cfg()?.clone();
        let root = setup.root_dir.clone();
        let policed = self
            .policed
            .clone()
            .ok_or_else(|| "no workspace is mounted".to_owned())?;
        let shared_tmp = req.peer.is_some();
        if shared_tmp {
            sys::mount_tmpfs(
                &root.join("tmp"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                "mode=1777,uid=0,gid=0,size=1g",
            )
            .map_err(|e| e.to_string())?;
        }
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
                    .map_err(err("socketpair for the peer channel"))?;
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
                    };
                    Some(spawn_action(&root, &spec)?)
                }
                _ => None,
            };
            let main = (|| {
                for m in &req.mounts {
                    let (point, below) = check_mount_target(&m.target)?;
                    let mut dst = root.join(point);
                    if let Some(below) = below {
                        // A private directory of this action's own under the
                        // mount point: its name is not visible from any other
                        // mount namespace (the peer's, the agent's).
                        if !mounted.contains(&dst) {
                            sys::mount_tmpfs(
                                &dst,
                                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                                "mode=0755,size=64k",
                            )
                            .map_err(|e| e.to_string())?;
                            mounted.push(dst.clone());
                        }
                        dst = dst.join(below);
                        mkdir(&dst, 0o755)?;
                    }
                    sys::bind_read_only(&self.via_store(&m.source), &dst)
                        .map_err(|e| e.to_string())?;
                    mounted.push(dst);
                }
                let spec = ActionSpec {
                    command: &req.command,
                    env: &req.env,
                    cwd: &req.session.cwd,
                    limits: &req.limits,
                    channel: channel.as_ref().map(|(ours, _)| ours.as_raw_fd()),
                    other_end: channel.as_ref().map(|(_, theirs)| theirs.as_raw_fd()),
                    mount_tmp: !shared_tmp,
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
            if let Err(e) = nix::mount::umount2(dst, MntFlags::MNT_DETACH) {
                teardown = Err(format!("unmount {}: {e}", dst.display()));
            }
        }
        let (main, peer) = spawned?;
        let result = supervise(main, peer, req, &policed);
        teardown?;
        result
    }
}

/// What one process tree of an action needs to start.
struct ActionSpec<'a> {
    command: &'a str,
    env: &'a [(String, String)],
    cwd: &'a str,
    limits: &'a Limits,
    /// A descriptor to hand to the action at [`CHANNEL_FD`].
    channel: Option<i32>,
    /// The channel's other end, which this tree's init must not keep open
    /// (the peer would never see the channel close).
    other_end: Option<i32>,
    /// Whether the action's init mounts a fresh `/tmp` (a paired action and
    /// its peer share one the helper mounted instead).
    mount_tmp: bool,
}

/// Move `fd` above [`STATE_FD`], so that the `dup2`s in the action (onto
/// 0, 1, 2, [`CHANNEL_FD`] and [`STATE_FD`]) can never overwrite it.
fn high_fd(fd: OwnedFd) -> Result<OwnedFd, String> {
    let raw = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(STATE_FD + 1))
        .map_err(err("move the channel descriptor"))?;
    // SAFETY: F_DUPFD_CLOEXEC just returned this new descriptor, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// One started process tree: its init (G), the pidfd that says when G
/// ended, and its four pipes (stdout, stderr, session state, G's report).
struct RunningAction {
    pid: Pid,
    pidfd: Option<OwnedFd>,
    streams: [Stream; 4],
    status: Option<WaitStatus>,
    /// The write end of G's lifeline, held open until the tree is finished.
    _lifeline: OwnedFd,
}

impl RunningAction {
    fn done(&self) -> bool {
        self.status.is_some() && self.streams.iter().all(|s| s.eof)
    }

    /// Collect G's status if it has ended.
    fn reap(&mut self) -> Result<(), String> {
        if self.status.is_none() {
            match waitpid(self.pid, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => {}
                Ok(status) => self.status = Some(status),
                Err(e) => return Err(format!("wait for action: {e}")),
            }
        }
        Ok(())
    }

    /// Kill G, which ends the whole pid namespace (see module docs).
    fn kill(&self) {
        if self.status.is_none() {
            let _ = nix::sys::signal::kill(self.pid, Signal::SIGKILL);
        }
    }

    /// How the tree ended: `killed` if the helper stopped it, else what G
    /// reported (the shell's status, then leftover processes).
    fn finish(self, killed: Option<ExitStatus>) -> Result<Finished, String> {
        let [stdout, stderr, state, report] = self.streams;
        let report = String::from_utf8_lossy(&report.data).into_owned();
        let mut lines = report.lines();
        let shell_status = lines.next().and_then(parse_status);
        let killed_background: Vec<String> = lines.map(str::to_owned).collect();
        let exit = match (killed, shell_status) {
            (Some(k), _) => k,
            (None, Some(s)) => s,
            (None, None) => match self.status {
                Some(WaitStatus::Signaled(_, sig, _)) => ExitStatus::Signal { signal: sig as i32 },
                Some(WaitStatus::Exited(_, code)) => {
                    return Err(format!(
                        "action supervisor exited with {code} without reporting (see helper stderr)"
                    ));
                }
                other => return Err(format!("action supervisor ended unexpectedly: {other:?}")),
            },
        };
        Ok(Finished {
            stdout: stdout.finish(),
            stderr: stderr.finish(),
            state: state.data,
            exit,
            killed_background,
        })
    }
}

/// What a finished process tree left: its capped output, the session state
/// its shell reported, how it ended, and the processes that outlived it.
struct Finished {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    state: Vec<u8>,
    exit: ExitStatus,
    killed_background: Vec<String>,
}

/// Clone one process tree of an action (G, which forks S; see the module
/// docs) with the sandbox root as its cwd.
fn spawn_action(root: &Path, spec: &ActionSpec<'_>) -> Result<RunningAction, String> {
    let pipe = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(err("pipe"));
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let (st_r, st_w) = pipe()?;
    let (rep_r, rep_w) = pipe()?;
    let (life_r, life_w) = pipe()?;

    // Everything the children need is prepared before fork.
    let mut env: Vec<CString> = Vec::with_capacity(spec.env.len() + 1);
    for (k, v) in spec.env {
        env.push(
            CString::new(format!("{k}={v}")).map_err(err("environment variable contains NUL"))?,
        );
    }
    env.push(
        CString::new(format!("ARBOR_COMMAND={}", spec.command))
            .map_err(err("command contains a NUL byte"))?,
    );
    let argv = [
        c"bash".to_owned(),
        c"-c".to_owned(),
        CString::new(WRAPPER).map_err(err("wrapper"))?,
    ];
    let cwd = CString::new(spec.cwd).map_err(err("cwd contains NUL"))?;
    let child = ActionChild {
        limits: spec.limits,
        env: &env,
        argv: &argv,
        cwd: &cwd,
        stdout: out_w.as_raw_fd(),
        stderr: err_w.as_raw_fd(),
        state: st_w.as_raw_fd(),
        report: rep_w.as_raw_fd(),
        life_r: life_r.as_raw_fd(),
        life_w: life_w.as_raw_fd(),
        channel: spec.channel,
        other_end: spec.other_end,
        mount_tmp: spec.mount_tmp,
    };
    // Enter the sandbox root first: clone() carries the cwd over to the
    // copy of its mount in the new mount namespace, whereas the helper's
    // `/proc/self/fd/<store>` paths would keep pointing into the old one.
    nix::unistd::chdir(root).map_err(err("chdir sandbox root"))?;
    let mut stack = vec![0u8; 256 << 10];
    // SAFETY: the helper is single-threaded, and the child (which gets a
    // copy of the address space, not a shared one: no CLONE_VM) runs
    // only the callback on its own stack and ends in `_exit`.
    let c_pid = unsafe {
        nix::sched::clone(
            Box::new(|| sys::exit_now(child.run_g())),
            &mut stack,
            CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID,
            Some(libc::SIGCHLD),
        )
    }
    .map_err(err("clone the action's init"))?;
    // The lifeline's write end stays open in the helper until the action
    // is over: it is moved into the result and dropped with it.
    drop((out_w, err_w, st_w, rep_w, life_r));
    // Readable once G has exited, so the wait below wakes at once. (Where
    // pidfds are unavailable the loop polls instead.)
    let pidfd: Option<OwnedFd> = rustix::process::Pid::from_raw(c_pid.as_raw()).and_then(|pid| {
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
    });
    let streams = [
        Stream::new(out_r, spec.limits.output_bytes),
        Stream::new(err_r, spec.limits.output_bytes),
        Stream::new(st_r, 16 << 20),
        Stream::new(rep_r, 16 << 20),
    ];
    Ok(RunningAction {
        pid: c_pid,
        pidfd,
        streams,
        status: None,
        _lifeline: life_w,
    })
}

/// Wait for the main process tree (and its peer) to end, enforcing the
/// wall-clock limit and the upper layer's size limit on both; the peer is
/// stopped when the main action is over.
fn supervise(
    mut main: RunningAction,
    mut peer: Option<RunningAction>,
    req: &ExecRequest,
    policed: &Path,
) -> Result<ExecResult, String> {
    let start = Instant::now();
    let deadline = start + Duration::from_millis(req.timeout_ms);
    let mut killed: Option<ExitStatus> = None;
    let mut peer_stopped = false;
    let mut next_size_check = start + Duration::from_millis(100);
    loop {
        let main_done = main.done();
        if main_done && peer.as_ref().is_none_or(RunningAction::done) {
            break;
        }
        if let (true, false, Some(p)) = (main_done, peer_stopped, &peer) {
            peer_stopped = p.status.is_none();
            p.kill();
        }
        let now = Instant::now();
        let wait = if killed.is_none() {
            deadline
                .saturating_duration_since(now)
                .min(Duration::from_millis(50))
        } else {
            Duration::from_millis(50)
        };
        poll_streams(&mut main, peer.as_mut(), wait)?;
        main.reap()?;
        if let Some(p) = peer.as_mut() {
            p.reap()?;
        }
        if main.status.is_none() && killed.is_none() {
            let now = Instant::now();
            if now >= deadline {
                killed = Some(ExitStatus::Timeout);
            } else if now >= next_size_check {
                next_size_check = now + Duration::from_millis(200);
                if crate::layer::dir_size(policed).unwrap_or(0) > req.limits.upper_bytes {
                    killed = Some(ExitStatus::DiskLimit);
                }
            }
            if killed.is_some() {
                main.kill();
                if let Some(p) = &peer {
                    p.kill();
                }
            }
        }
    }
    let duration_us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    if killed.is_none() && crate::layer::dir_size(policed).unwrap_or(0) > req.limits.upper_bytes {
        killed = Some(ExitStatus::DiskLimit);
    }
    let peer = match peer {
        Some(p) => {
            let stopped_by = peer_stopped.then_some(ExitStatus::Signal { signal: 9 });
            let f = p.finish(killed.or(stopped_by))?;
            Some(PeerResult {
                stdout: f.stdout,
                stderr: f.stderr,
                exit: f.exit,
                stopped: peer_stopped,
            })
        }
        None => None,
    };
    let f = main.finish(killed)?;
    let session = if matches!(f.exit, ExitStatus::Timeout | ExitStatus::DiskLimit) {
        None
    } else {
        parse_session(&f.state, &req.fixed_env)
    };
    Ok(ExecResult {
        stdout: f.stdout,
        stderr: f.stderr,
        exit: f.exit,
        duration_us,
        session,
        killed_background: f.killed_background,
        peer,
    })
}

/// Run `f` in a forked child that has become the sandbox's root user (uid
/// and gid 0 inside, no supplementary groups) and send its result back.
fn in_sandbox_root_child<T, F>(f: F) -> Result<T, String>
where
    T: serde::Serialize + for<'de> serde::Deserialize<'de>,
    F: FnOnce() -> Result<T, String>,
{
    let (rd, wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(err("pipe"))?;
    // SAFETY: the helper is single-threaded; the child ends in `_exit`.
    let pid = match unsafe { nix::unistd::fork() }.map_err(err("fork"))? {
        ForkResult::Child => {
            drop(rd);
            let result: Result<T, String> = become_sandbox_root().and_then(|()| f());
            let mut out = File::from(wr);
            let code = i32::from(super::protocol::write_frame(&mut out, &result).is_err());
            sys::exit_now(code)
        }
        ForkResult::Parent { child } => child,
    };
    drop(wr);
    let mut input = File::from(rd);
    let result = super::protocol::read_frame::<_, Result<T, String>>(&mut input);
    let _ = waitpid(pid, None);
    match result {
        Ok(Some(r)) => r,
        Ok(None) => Err("child exited without a result".to_owned()),
        Err(e) => Err(format!("child result: {e}")),
    }
}

/// uid and gid 0 inside the user namespace, no supplementary groups (where
/// setgroups is allowed: not in rootless mode).
fn become_sandbox_root() -> Result<(), String> {
    nix::unistd::setresgid(Gid::from_raw(0), Gid::from_raw(0), Gid::from_raw(0))
        .map_err(err("setresgid(0)"))?;
    let _ = nix::unistd::setgroups(&[]);
    nix::unistd::setresuid(Uid::from_raw(0), Uid::from_raw(0), Uid::from_raw(0))
        .map_err(err("setresuid(0)"))
}

fn file_op_as_sandbox_root(root: &Path, op: &FileOp) -> Result<FileResult, String> {
    use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
    nix::unistd::chroot(root).map_err(err("chroot into the sandbox root"))?;
    nix::unistd::chdir("/").map_err(err("chdir /"))?;
    let ws = Dir::open_ambient_dir("/workspace", cap_std::ambient_authority())
        .map_err(err("open /workspace"))?;
    let rel = |p: &str| -> Result<PathBuf, String> {
        let p = p.trim_start_matches("./");
        if p.starts_with('/') {
            return Err(format!(
                "{p}: absolute paths are not accepted; give a path relative to /workspace"
            ));
        }
        Ok(PathBuf::from(if p.is_empty() { "." } else { p }))
    };
    match op {
        FileOp::Read { path } => {
            let data = ws.read(rel(path)?).map_err(err(format!("read {path}")))?;
            Ok(FileResult::Data { data })
        }
        FileOp::Write { path, data, mode } => {
            let p = rel(path)?;
            if let Some(parent) = p.parent().filter(|p| !p.as_os_str().is_empty()) {
                ws.create_dir_all(parent)
                    .map_err(err(format!("create parent directories of {path}")))?;
            }
            let mut opts = OpenOptions::new();
            opts.write(true).create(true).truncate(true).mode(*mode);
            let mut file = ws
                .open_with(&p, &opts)
                .map_err(err(format!("open {path} for writing")))?;
            file.write_all(data).map_err(err(format!("write {path}")))?;
            file.set_permissions(cap_std::fs::Permissions::from_std(
                fs::Permissions::from_mode(*mode),
            ))
            .map_err(err(format!("chmod {path}")))?;
            Ok(FileResult::Done)
        }
        FileOp::Delete { path } => {
            ws.remove_file(rel(path)?)
                .map_err(err(format!("delete {path}")))?;
            Ok(FileResult::Done)
        }
        FileOp::List { path } => {
            let mut entries = Vec::new();
            for entry in ws
                .read_dir(rel(path)?)
                .map_err(err(format!("list {path}")))?
            {
                let entry = entry.map_err(err(format!("list {path}")))?;
                let meta = entry
                    .metadata()
                    .map_err(err(format!("stat entry of {path}")))?;
                let ft = meta.file_type();
                let kind = if ft.is_symlink() {
                    "symlink"
                } else if ft.is_dir() {
                    "dir"
                } else if ft.is_file() {
                    "file"
                } else {
                    "other"
                };
                entries.push(ListEntry {
                    name: entry.file_name().to_string_lossy().into_owned(),
                    kind: kind.to_owned(),
                    size: if ft.is_file() { meta.len() } else { 0 },
                });
            }
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(FileResult::Entries { entries })
        }
    }
}

fn parse_status(line: &str) -> Option<ExitStatus> {
    let (kind, n) = line.split_once(' ')?;
    let n: i32 = n.trim().parse().ok()?;
    match kind {
        "exit" => Some(ExitStatus::Code { code: n }),
        "signal" => Some(ExitStatus::Signal { signal: n }),
        _ => None,
    }
}

/// Parse `cwd\0` + `declare -px` output into session state relative to
/// the fixed environment.
fn parse_session(data: &[u8], fixed: &[(String, String)]) -> Option<SessionState> {
    let nul = data.iter().position(|&b| b == 0)?;
    let cwd = String::from_utf8(data[..nul].to_vec()).ok()?;
    if !cwd.starts_with('/') {
        return None;
    }
    let mut env = std::collections::BTreeMap::new();
    let mut seen = std::collections::BTreeSet::new();
    for (k, v) in super::declare::parse_declarations(&data[nul + 1..]) {
        if SHELL_OWNED_VARS.contains(&k.as_str()) {
            continue;
        }
        let v = String::from_utf8_lossy(&v).into_owned();
        seen.insert(k.clone());
        if fixed.iter().any(|(fk, fv)| *fk == k && *fv == v) {
            continue;
        }
        env.insert(k, v);
    }
    let unset = fixed
        .iter()
        .filter(|(k, _)| !seen.contains(k))
        .map(|(k, _)| k.clone())
        .collect();
    Some(SessionState { cwd, env, unset })
}

/// One captured pipe.
struct Stream {
    fd: OwnedFd,
    data: Vec<u8>,
    cap: u64,
    dropped: u64,
    eof: bool,
}

impl Stream {
    fn new(fd: OwnedFd, cap: u64) -> Self {
        let _ = nix::fcntl::fcntl(
            &fd,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        );
        Self {
            fd,
            data: Vec::new(),
            cap,
            dropped: 0,
            eof: false,
        }
    }

    fn read_available(&mut self) -> Result<(), String> {
        let mut buf = [0u8; 65536];
        loop {
            match nix::unistd::read(&self.fd, &mut buf) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    let room = usize::try_from(self.cap.saturating_sub(self.data.len() as u64))
                        .unwrap_or(usize::MAX);
                    let keep = n.min(room);
                    self.data.extend_from_slice(&buf[..keep]);
                    self.dropped += (n - keep) as u64;
                }
                Err(nix::errno::Errno::EAGAIN) => return Ok(()),
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(format!("read action output: {e}")),
            }
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if self.dropped > 0 {
            self.data.extend_from_slice(
                format!(
                    "\n[arbor: output truncated, {} bytes dropped]\n",
                    self.dropped
                )
                .as_bytes(),
            );
        }
        self.data
    }
}

/// Wait up to `wait` for output on the open streams of the main process
/// tree and its peer, or for either's init to exit (its pidfd becomes
/// readable), and read what is there.
fn poll_streams(
    main: &mut RunningAction,
    peer: Option<&mut RunningAction>,
    wait: Duration,
) -> Result<(), String> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut trees: Vec<&mut RunningAction> = std::iter::once(main).chain(peer).collect();
    let mut slots: Vec<(usize, Option<usize>)> = Vec::new();
    let ready: Vec<bool> = {
        let mut fds: Vec<PollFd<'_>> = Vec::new();
        for (t, tree) in trees.iter().enumerate() {
            for (i, s) in tree.streams.iter().enumerate() {
                if !s.eof {
                    fds.push(PollFd::new(s.fd.as_fd(), PollFlags::POLLIN));
                    slots.push((t, Some(i)));
                }
            }
            if let (None, Some(pidfd)) = (tree.status, tree.pidfd.as_ref()) {
                fds.push(PollFd::new(pidfd.as_fd(), PollFlags::POLLIN));
                slots.push((t, None));
            }
        }
        if fds.is_empty() {
            std::thread::sleep(wait.min(Duration::from_millis(1)));
            return Ok(());
        }
        let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(format!("poll: {e}")),
        }
        fds.iter()
            .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
            .collect()
    };
    for (k, &(t, stream)) in slots.iter().enumerate() {
        if let (true, Some(i)) = (ready[k], stream) {
            trees[t].streams[i].read_available()?;
        }
    }
    Ok(())
}

/// A read-only mount's target: one of the empty, read-only mount points
/// every sandbox root has (`verifier`), optionally with one more path
/// component below it (`verifier/3f9a0c`). Returns the mount point and the
/// component.
fn check_mount_target(target: &str) -> Result<(&str, Option<&str>), String> {
    let (point, below) = match target.split_once('/') {
        Some((p, b)) => (p, Some(b)),
        None => (target, None),
    };
    let name_ok = |b: &str| {
        !b.is_empty()
            && b.len() <= 64
            && b.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
    };
    if MOUNT_POINTS.contains(&point) && below.is_none_or(name_ok) {
        Ok((point, below))
    } else {
        Err(format!(
            "read-only mount target {target:?} is not a mount point of the sandbox, or one name \
             ([A-Za-z0-9_-]) below one (the mount points are: {})",
            MOUNT_POINTS.join(", ")
        ))
    }
}

fn mkdir(path: &Path, mode: u32) -> Result<(), String> {
    match fs::DirBuilder::new().mode(mode).create(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("mkdir {}: {e}", path.display())),
    }
}

fn touch(path: &Path) -> Result<(), String> {
    File::create(path)
        .map(drop)
        .map_err(err(format!("create {}", path.display())))
}

fn mount_workspace_at(target: &Path, ws: &WorkspaceMount) -> Result<(), String> {
    match ws {
        WorkspaceMount::Overlay {
            lowers,
            upper,
            work,
        } => {
            let lowers: Vec<&Path> = lowers.iter().map(PathBuf::as_path).collect();
            sys::mount_overlay(&lowers, upper, work, target).map_err(|e| e.to_string())
        }
        WorkspaceMount::Bind { dir } => nix::mount::mount(
            Some(dir.as_path()),
            target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(err(format!("bind workspace {}", dir.display()))),
    }
}

/// `/etc` entries bound read-only from the host (when present).
const HOST_ETC: &[&str] = &[
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "mime.types",
    "protocols",
    "services",
    "os-release",
    "debian_version",
    "perl",
    "python3",
    "python3.11",
    "bash.bashrc",
    "inputrc",
    "localtime",
];

/// Top-level host directories bound read-only (or recreated as symlinks).
const HOST_TOP: &[&str] = &["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"];

fn replicate(src: &Path, dst: &Path) -> Result<(), String> {
    let Ok(meta) = fs::symlink_metadata(src) else {
        return Ok(());
    };
    if meta.file_type().is_symlink() {
        let target = fs::read_link(src).map_err(err(format!("readlink {}", src.display())))?;
        symlink(&target, dst).map_err(err(format!("symlink {}", dst.display())))
    } else if meta.is_dir() {
        mkdir(dst, 0o755)?;
        sys::bind_read_only(src, dst).map_err(|e| e.to_string())
    } else if meta.is_file() {
        touch(dst)?;
        sys::bind_read_only(src, dst).map_err(|e| e.to_string())
    } else {
        Ok(())
    }
}

fn build_system_view(root: &Path, view: &SystemView, hostname: &str) -> Result<(), String> {
    match view {
        SystemView::Host => {
            for name in HOST_TOP {
                replicate(&Path::new("/").join(name), &root.join(name))?;
            }
            let etc = root.join("etc");
            mkdir(&etc, 0o755)?;
            for name in HOST_ETC {
                replicate(&Path::new("/etc").join(name), &etc.join(name))?;
            }
        }
        SystemView::Rootfs { dir } => {
            let entries =
                fs::read_dir(dir).map_err(err(format!("read rootfs {}", dir.display())))?;
            for entry in entries {
                let entry = entry.map_err(err("read rootfs entry"))?;
                let name = entry.file_name();
                if matches!(
                    name.to_str(),
                    Some("proc" | "dev" | "tmp" | "workspace" | "sys" | "etc")
                ) {
                    continue;
                }
                replicate(&entry.path(), &root.join(&name))?;
            }
            let etc = root.join("etc");
            mkdir(&etc, 0o755)?;
            if let Ok(entries) = fs::read_dir(dir.join("etc")) {
                for entry in entries.flatten() {
                    let name = entry.file_name();
                    if matches!(
                        name.to_str(),
                        Some(
                            "passwd"
                                | "group"
                                | "hosts"
                                | "hostname"
                                | "resolv.conf"
                                | "nsswitch.conf"
                        )
                    ) {
                        continue;
                    }
                    replicate(&entry.path(), &etc.join(&name))?;
                }
            }
        }
    }
    let etc = root.join("etc");
    let files: [(&str, String); 6] = [
        ("passwd", "root:x:0:0:root:/tmp/home:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n".into()),
        ("group", "root:x:0:\nnogroup:x:65534:\n".into()),
        ("hosts", format!("127.0.0.1\tlocalhost {hostname}\n::1\tlocalhost ip6-localhost\n")),
        ("hostname", format!("{hostname}\n")),
        ("resolv.conf", String::new()),
        ("nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files\n".into()),
    ];
    for (name, content) in files {
        fs::write(etc.join(name), content).map_err(err(format!("write /etc/{name}")))?;
    }
    let dev = root.join("dev");
    mkdir(&dev, 0o755)?;
    for name in ["null", "zero", "full", "random", "urandom", "tty"] {
        let dst = dev.join(name);
        touch(&dst)?;
        nix::mount::mount(
            Some(&Path::new("/dev").join(name)),
            &dst,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(err(format!("bind /dev/{name}")))?;
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        symlink(target, dev.join(name)).map_err(err(format!("symlink /dev/{name}")))?;
    }
    Ok(())
}

/// What the forked children of one action need; prepared before `fork`.
struct ActionChild<'a> {
    limits: &'a Limits,
    env: &'a [CString],
    argv: &'a [CString],
    cwd: &'a CString,
    stdout: i32,
    stderr: i32,
    state: i32,
    report: i32,
    /// Read end of the helper's lifeline: G sees it hang up once the helper is gone.
    life_r: i32,
    /// Write end of the lifeline, held open by the helper until the action ends.
    life_w: i32,
    /// A descriptor handed to the action at [`CHANNEL_FD`] (a paired action's channel).
    channel: Option<i32>,
    /// The channel's other end, closed by G at once.
    other_end: Option<i32>,
    /// Whether G mounts a fresh `/tmp` (not when the helper mounted a shared one).
    mount_tmp: bool,
}

impl ActionChild<'_> {
    /// G: pid 1 of the action's pid namespace.
    fn run_g(&self) -> i32 {
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            eprintln!("arbor-sandbox-helper: action init: {what}: {e}");
            73
        };
        // G never execs: it holds the helper's descriptors and memory, and it
        // is pid 1 of the action's /proc. Not dumpable, the action (the same
        // uid, in rootless mode) cannot open /proc/1/fd, environ, mem, root.
        if let Err(e) = sys::set_not_dumpable() {
            return fail("not dumpable", &e);
        }
        if let Err(e) =
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        {
            return fail("PDEATHSIG", &e);
        }
        // The helper may have died before PDEATHSIG was armed: its lifeline tells.
        // SAFETY: closing G's inherited copy of the lifeline's write end, which nothing else in G uses.
        unsafe { libc::close(self.life_w) };
        if let Some(fd) = self.other_end {
            // SAFETY: G's inherited copy of the other tree's channel end,
            // which nothing in this tree uses.
            unsafe { libc::close(fd) };
        }
        let mut pfd = libc::pollfd {
            fd: self.life_r,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is a valid pollfd array of length 1.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        if n != 0 {
            return 74;
        }
        // The cwd is the sandbox root in this mount namespace (see run_c).
        let root = Path::new(".");
        if self.mount_tmp
            && let Err(e) = sys::mount_tmpfs(
                &root.join("tmp"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                "mode=1777,uid=0,gid=0,size=1g",
            )
        {
            return fail("mount /tmp", &e);
        }
        if let Err(e) = sys::mount_tmpfs(
            &root.join("dev/shm"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            "mode=1777,uid=0,gid=0,size=64m",
        ) {
            return fail("mount /dev/shm", &e);
        }
        if let Err(e) = nix::mount::mount(
            Some("proc"),
            &root.join("proc"),
            Some("proc"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            None::<&str>,
        ) {
            return fail("mount /proc", &e);
        }
        if let Err(e) = nix::unistd::pivot_root(".", ".") {
            return fail("pivot_root", &e);
        }
        if let Err(e) = nix::mount::umount2(".", MntFlags::MNT_DETACH) {
            return fail("detach old root", &e);
        }
        if let Err(e) = nix::unistd::chdir("/") {
            return fail("chdir /", &e);
        }
        // SAFETY: G is single-threaded.
        let s_pid = match unsafe { nix::unistd::fork() } {
            Err(e) => return fail("fork action", &e),
            Ok(ForkResult::Child) => sys::exit_now(self.run_s()),
            Ok(ForkResult::Parent { child }) => child,
        };
        // G keeps its log (2), its report pipe, its lifeline and its copy of
        // the channel; everything else it inherited (the action's pipes, the
        // helper's) is closed. Holding the channel until G has reported keeps
        // the order the verifier relies on: the peer sees the channel close
        // only once this tree's end (a crash's signal) is known.
        let keep = [2, self.report, self.life_r, self.channel.unwrap_or(-1)];
        if let Err(e) = sys::close_all_except(&keep) {
            return fail("close inherited descriptors", &e);
        }
        // Reap everything until the action's shell ends.
        let status = loop {
            match waitpid(None::<Pid>, None) {
                Ok(WaitStatus::Exited(pid, code)) if pid == s_pid => break format!("exit {code}"),
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == s_pid => {
                    break format!("signal {}", sig as i32);
                }
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return fail("wait action", &e),
            }
        };
        let mut report = status;
        report.push('\n');
        for leftover in list_processes() {
            report.push_str(&leftover);
            report.push('\n');
        }
        // SAFETY: `report` is a pipe write end inherited from the helper and
        // owned by this process alone from here on.
        let mut out = unsafe { File::from_raw_fd(self.report) };
        let _ = out.write_all(report.as_bytes());
        // Returning ends pid 1, which kills every leftover process.
        0
    }

    /// S: the action itself.
    fn run_s(&self) -> i32 {
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            eprintln!("arbor: sandbox: {what}: {e}");
            126
        };
        if let Err(e) = nix::unistd::setsid() {
            return fail("setsid", &e);
        }
        // stdin from /dev/null, stdout/stderr to the capture pipes, the state fd at 63.
        let null = match File::open("/dev/null") {
            Ok(f) => f,
            Err(e) => return fail("open /dev/null", &e),
        };
        for (src, dst) in [
            (null.as_raw_fd(), 0),
            (self.stdout, 1),
            (self.stderr, 2),
            (self.state, STATE_FD),
        ] {
            // SAFETY: dup2 onto a fixed descriptor number; the old ones are
            // either ours to replace (0-2) or unused (63).
            if unsafe { libc::dup2(src, dst) } < 0 {
                return fail("dup2", &std::io::Error::last_os_error());
            }
        }
        if let Err(e) = sys::cloexec_from(3) {
            return fail("close_range", &e);
        }
        if let Some(channel) = self.channel {
            // The channel descriptor is above STATE_FD (see `high_fd`), so
            // nothing above overwrote it; dup2 clears close-on-exec on the copy.
            // SAFETY: dup2 onto a fixed descriptor number that holds nothing
            // this process still needs (0-2 and 63 are set above).
            if unsafe { libc::dup2(channel, CHANNEL_FD) } < 0 {
                return fail("dup2 channel", &std::io::Error::last_os_error());
            }
        }
        // Keep the state descriptor across exec.
        // SAFETY: STATE_FD was just created by dup2 above.
        if unsafe { libc::fcntl(STATE_FD, libc::F_SETFD, 0) } < 0 {
            return fail("fcntl state fd", &std::io::Error::last_os_error());
        }
        let limits = [
            (Resource::RLIMIT_NPROC, self.limits.nproc),
            (Resource::RLIMIT_FSIZE, self.limits.fsize),
            (Resource::RLIMIT_NOFILE, self.limits.nofile),
            (Resource::RLIMIT_CPU, self.limits.cpu_seconds),
            (Resource::RLIMIT_CORE, 0),
        ];
        for (res, value) in limits {
            if let Err(e) = setrlimit(res, value, value) {
                return fail("setrlimit", &e);
            }
        }
        if let Err(e) = become_sandbox_root() {
            return fail("become root inside", &e);
        }
        for cap in DROPPED_CAPS.iter() {
            if let Err(e) = rustix::thread::remove_capability_from_bounding_set(cap) {
                return fail("drop capability", &e);
            }
        }
        if let Err(e) = rustix::thread::set_no_new_privs(true) {
            return fail("no_new_privs", &e);
        }
        let _ = fs::DirBuilder::new().mode(0o700).create("/tmp/home");
        if nix::unistd::chdir(self.cwd.as_c_str()).is_err() {
            let _ = nix::unistd::chdir("/workspace");
        }
        let e = sys::exec("/bin/bash", self.argv, self.env);
        fail("exec /bin/bash", &e)
    }
}

/// Capabilities removed from the bounding set before the action runs, so the
/// action (root inside its user namespace) can neither undo the read-only
/// system view, nor mount, nor touch the network configuration.
const DROPPED_CAPS: rustix::thread::CapabilitySet = {
    use rustix::thread::CapabilitySet as C;
    C::SYS_ADMIN
        .union(C::SYS_MODULE)
        .union(C::SYS_BOOT)
        .union(C::SYS_TIME)
        .union(C::SYS_RAWIO)
        .union(C::SYS_RESOURCE)
        .union(C::SYS_PACCT)
        .union(C::SYS_TTY_CONFIG)
        .union(C::NET_ADMIN)
        .union(C::NET_RAW)
        .union(C::SETPCAP)
        .union(C::SETFCAP)
        .union(C::LINUX_IMMUTABLE)
        .union(C::AUDIT_CONTROL)
        .union(C::AUDIT_WRITE)
        .union(C::AUDIT_READ)
        .union(C::SYSLOG)
        .union(C::WAKE_ALARM)
        .union(C::BLOCK_SUSPEND)
        .union(C::MAC_OVERRIDE)
        .union(C::MAC_ADMIN)
        .union(C::BPF)
        .union(C::PERFMON)
        .union(C::CHECKPOINT_RESTORE)
        .union(C::LEASE)
        .union(C::MKNOD)
};

/// Command lines of every process in this pid namespace except pid 1.
fn list_processes() -> Vec<String> {
    // Reap what has already exited: zombies are not running processes.
    while let Ok(status) = waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
        if matches!(status, WaitStatus::StillAlive) {
            break;
        }
    }
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|&pid| pid != 1)
        .collect();
    pids.sort_unstable();
    pids.into_iter().filter_map(describe_process).collect()
}

/// The command line of a live process. A process caught between `fork` and
/// `exec` still shows the action's own `bash -c <wrapper>`, and one inside
/// `exec` shows nothing, for a moment: wait a little for it, then name it
/// by its `comm`.
fn describe_process(pid: i32) -> Option<String> {
    let wrapper_start = WRAPPER.lines().next().unwrap_or_default();
    for _ in 0..20 {
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let text: Vec<String> = cmdline
            .split(|&b| b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect();
        let forked_shell = text.len() == 3 && text[1] == "-c" && text[2].starts_with(wrapper_start);
        if !text.is_empty() && !forked_shell {
            return Some(text.join(" "));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(format!("[{}]", comm.trim_end()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_state_parses_newlines_and_reports_unsets() {
        let fixed = vec![
            ("HOME".to_owned(), "/tmp/home".to_owned()),
            ("TZ".to_owned(), "UTC".to_owned()),
        ];
        let data = b"/workspace/src\0declare -x HOME=\"/tmp/home\"\ndeclare -x MULTI=$'a\\nb'\ndeclare -x PWD=\"/x\"\ndeclare -x SHLVL=\"1\"\n";
        let s = parse_session(data, &fixed).unwrap();
        assert_eq!(s.cwd, "/workspace/src");
        assert_eq!(s.env.get("MULTI").map(String::as_str), Some("a\nb"));
        assert!(!s.env.contains_key("PWD") && !s.env.contains_key("HOME"));
        assert_eq!(s.unset, vec!["TZ".to_owned()]);
        assert!(parse_session(b"", &fixed).is_none());
        assert!(parse_session(b"relative\0", &fixed).is_none());
    }

    #[test]
    fn status_lines_parse() {
        assert_eq!(parse_status("exit 3"), Some(ExitStatus::Code { code: 3 }));
        assert_eq!(
            parse_status("signal 9"),
            Some(ExitStatus::Signal { signal: 9 })
        );
        assert_eq!(parse_status("garbage"), None);
    }
}
