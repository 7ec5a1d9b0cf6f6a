//! Starting one process tree of an action: the helper clones G (pid 1 of a
//! fresh pid namespace, in a fresh mount namespace), which mounts what the
//! action sees, `pivot_root`s into the sandbox root and forks S, the action's
//! shell, which confines itself and `exec`s bash with the session wrapper.

use std::ffi::CString;
use std::fs;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid};

use super::error::{HelperError, Op, Result};
use super::landlock;
use super::seccomp::SyscallFilter;
use super::session::{STATE_FD, WRAPPER};
use super::setup::{become_image_user, confine_action, enter_action_root};
use super::supervise::{RunningAction, Stream};
use super::sys::{self, Linux};
use crate::image::user::ImageUser;
use crate::sandbox::protocol::{CHANNEL_FD, Confinement, SandboxLimits};

/// What one process tree of an action needs to start.
pub(super) struct ActionSpec<'a> {
    pub command: &'a str,
    pub env: &'a [(String, String)],
    pub cwd: &'a str,
    pub limits: &'a SandboxLimits,
    /// A descriptor to hand to the action at [`CHANNEL_FD`].
    pub channel: Option<i32>,
    /// The channel's other end, which this tree's init must not keep open
    /// (the peer would never see the channel close).
    pub other_end: Option<i32>,
    /// Whether the action's init mounts a fresh `/tmp` (a paired action and
    /// its peer share one the helper mounted instead).
    pub mount_tmp: bool,
    /// Whether the action's root is the workspace (see
    /// [`crate::sandbox::protocol::ActionRoot::Workspace`]).
    pub workspace_root: bool,
    /// Where the workspace is bound too (the image's `WorkingDir`).
    pub workdir: Option<&'a str>,
    /// The ids the action runs as (the image's `User`; `None`: root).
    pub user: Option<ImageUser>,
    /// The syscall filter and Landlock to install.
    pub confinement: Confinement,
}

/// Move `fd` above [`STATE_FD`], so that the `dup2`s in the action (onto
/// 0, 1, 2, [`CHANNEL_FD`] and [`STATE_FD`]) can never overwrite it.
pub(super) fn high_fd(fd: OwnedFd) -> Result<OwnedFd> {
    sys::dup_above(&fd, STATE_FD + 1)
}

/// What the forked children of one action need; prepared before `fork`.
struct ActionChild<'a> {
    limits: &'a SandboxLimits,
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
    /// Whether G makes the workspace the root.
    workspace_root: bool,
    /// Where G binds the workspace too.
    workdir: Option<&'a str>,
    /// The ids S runs the action as.
    user: Option<ImageUser>,
    /// The syscall filter S installs last (built before the fork).
    filter: Option<&'static SyscallFilter>,
    /// Whether S restricts its writes with Landlock.
    landlock: bool,
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
        sys::close(self.life_w);
        if let Some(fd) = self.other_end {
            // G's inherited copy of the other tree's channel end, which
            // nothing in this tree uses.
            sys::close(fd);
        }
        if sys::ready_now(self.life_r) {
            return 74;
        }
        // The cwd is the sandbox root in this mount namespace (see spawn_action).
        if let Err(e) = enter_action_root(
            &mut Linux,
            self.mount_tmp,
            self.workspace_root,
            self.workdir,
        ) {
            return fail("enter the sandbox root", &e);
        }
        let s_pid = match sys::fork() {
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
        for leftover in super::supervise::list_processes() {
            report.push_str(&leftover);
            report.push('\n');
        }
        let mut out = sys::file_from_inherited(self.report);
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
        let null = match fs::File::open("/dev/null") {
            Ok(f) => f,
            Err(e) => return fail("open /dev/null", &e),
        };
        for (src, dst) in [
            (null.as_raw_fd(), 0),
            (self.stdout, 1),
            (self.stderr, 2),
            (self.state, STATE_FD),
        ] {
            if let Err(e) = sys::dup2(src, dst) {
                return fail("dup2", &e);
            }
        }
        if let Err(e) = sys::cloexec_from(3) {
            return fail("close_range", &e);
        }
        if let Some(channel) = self.channel {
            // The channel descriptor is above STATE_FD (see `high_fd`), so
            // nothing above overwrote it; dup2 clears close-on-exec on the copy.
            if let Err(e) = sys::dup2(channel, CHANNEL_FD) {
                return fail("dup2 channel", &e);
            }
        }
        if let Err(e) = sys::keep_across_exec(STATE_FD) {
            return fail("fcntl state fd", &e);
        }
        if let Err(e) = confine_action(&mut Linux, self.limits) {
            return fail("confine the action", &e);
        }
        let _ = fs::DirBuilder::new().mode(0o700).create("/tmp/home");
        if let Some(user) = self.user {
            // S inherited G's not-dumpable flag, which makes its /proc/PID
            // files the host root's; it is about to exec the action (which
            // makes it dumpable anyway), and nothing else in its pid
            // namespace runs yet.
            if let Err(e) = sys::set_dumpable() {
                return fail("dumpable", &e);
            }
            if let Err(e) = become_image_user(&mut Linux, user, std::process::id()) {
                return fail("become the image's user", &e);
            }
        }
        if nix::unistd::chdir(self.cwd.as_c_str()).is_err() {
            let _ = nix::unistd::chdir("/workspace");
        }
        // An image build's step writes the root it builds (the workspace is
        // the root): no write rule would be narrower than `/`.
        if self.landlock
            && !self.workspace_root
            && let Err(e) = landlock::restrict_writes(self.workdir)
        {
            return fail("restrict writes (landlock)", &e);
        }
        // Last: from here on only execve and what the program itself calls.
        if let Some(filter) = self.filter
            && let Err(e) = filter.install()
        {
            return fail("install the syscall filter", &e);
        }
        let e = sys::exec("/bin/bash", self.argv, self.env);
        fail("exec /bin/bash", &e)
    }
}

fn cstring(what: &str, s: String) -> Result<CString> {
    CString::new(s).map_err(|_| HelperError::Nul {
        what: what.to_owned(),
    })
}

/// Clone one process tree of an action (G, which forks S; see the module
/// docs) with the sandbox root as its cwd.
pub(super) fn spawn_action(root: &Path, spec: &ActionSpec<'_>) -> Result<RunningAction> {
    let pipe = || {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| HelperError::sys_bare(Op::Pipe, e))
    };
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let (st_r, st_w) = pipe()?;
    let (rep_r, rep_w) = pipe()?;
    let (life_r, life_w) = pipe()?;

    // Everything the children need is prepared before fork.
    let mut env: Vec<CString> = Vec::with_capacity(spec.env.len() + 1);
    for (k, v) in spec.env {
        env.push(cstring("an environment variable", format!("{k}={v}"))?);
    }
    env.push(cstring(
        "the command",
        format!("ARBOR_COMMAND={}", spec.command),
    )?);
    let argv = [
        c"bash".to_owned(),
        c"-c".to_owned(),
        cstring("the wrapper", WRAPPER.to_owned())?,
    ];
    let cwd = cstring("the cwd", spec.cwd.to_owned())?;
    let filter = match spec.confinement.syscall_filter {
        true => Some(SyscallFilter::get()?),
        false => None,
    };
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
        workspace_root: spec.workspace_root,
        workdir: spec.workdir,
        user: spec.user,
        filter,
        landlock: spec.confinement.landlock,
    };
    // Enter the sandbox root first: clone() carries the cwd over to the
    // copy of its mount in the new mount namespace, whereas the helper's
    // `/proc/self/fd/<store>` paths would keep pointing into the old one.
    nix::unistd::chdir(root).map_err(|e| HelperError::sys(Op::Chdir, root, e))?;
    let mut stack = vec![0u8; 256 << 10];
    let c_pid = sys::clone_action_init(&mut || sys::exit_now(child.run_g()), &mut stack)?;
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
