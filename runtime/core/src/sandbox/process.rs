//! The runtime's end of a helper process: spawning it from a thread that
//! lives as long as the process (so `PR_SET_PDEATHSIG` fires only when the
//! runtime dies, never when some worker thread exits), writing its id maps,
//! putting it in cgroups, and the request/response exchange.

use std::fs::{self, File};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

use super::SandboxError;
use super::channel::{ExchangeError, HelperChannel, OutputSink, exchange};
use super::helper::HelperError;
use super::helper::sys::{IdMap, Linux, Syscalls};
use super::protocol::{Request, Response};
use crate::store::OwnerMode;

/// How to start the helper: a program and the arguments that put it in helper mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelperCommand {
    /// The executable.
    pub program: PathBuf,
    /// Arguments (e.g. `["__sandbox-helper"]` for the `arbor` binary itself).
    pub args: Vec<String>,
}

impl HelperCommand {
    /// Find the helper: `$ARBOR_SANDBOX_HELPER`; the `arbor` binary itself
    /// (`arbor __sandbox-helper`); `arbor-sandbox-helper` next to the current
    /// executable or one directory up (cargo's `target/*/deps` layout); an
    /// `arbor` next to the current executable (so `arbor-train`, which links
    /// libtorch, never starts itself per sandbox); `$PATH`.
    pub fn locate() -> Result<Self, SandboxError> {
        if let Some(p) = std::env::var_os("ARBOR_SANDBOX_HELPER") {
            return Ok(Self {
                program: PathBuf::from(p),
                args: Vec::new(),
            });
        }
        let exe = std::env::current_exe().ok();
        if let Some(exe) = &exe {
            if exe.file_name().is_some_and(|n| n == "arbor") {
                return Ok(Self {
                    program: exe.clone(),
                    args: vec!["__sandbox-helper".to_owned()],
                });
            }
            let mut dir = exe.parent();
            for _ in 0..2 {
                let Some(d) = dir else { break };
                let candidate = d.join("arbor-sandbox-helper");
                if candidate.is_file() {
                    return Ok(Self {
                        program: candidate,
                        args: Vec::new(),
                    });
                }
                dir = d.parent();
            }
            if let Some(sibling) = exe.parent().map(|d| d.join("arbor"))
                && sibling.is_file()
            {
                return Ok(Self {
                    program: sibling,
                    args: vec!["__sandbox-helper".to_owned()],
                });
            }
        }
        if let Some(path) = std::env::var_os("PATH") {
            for d in std::env::split_paths(&path) {
                let candidate = d.join("arbor-sandbox-helper");
                if candidate.is_file() {
                    return Ok(Self {
                        program: candidate,
                        args: Vec::new(),
                    });
                }
            }
        }
        Err(SandboxError::HelperNotFound)
    }
}

type SpawnJob = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawn `cmd` from the process-lifetime spawner thread.
fn spawn_from_stable_thread(cmd: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("arbor-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .map(drop)
            .ok();
        Mutex::new(tx)
    });
    let (tx, rx) = mpsc::channel();
    sender
        .lock()
        .map_err(|_| std::io::Error::other("spawner lock poisoned"))?
        .send((cmd, tx))
        .map_err(|_| std::io::Error::other("spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| std::io::Error::other("spawner thread dropped the request"))?
}

/// A live helper process.
#[derive(Debug)]
pub struct HelperProcess {
    child: Child,
    input: ChildStdin,
    output: ChildStdout,
    log: PathBuf,
    cgroups: Vec<PathBuf>,
}

impl HelperProcess {
    /// Spawn the helper, create its namespaces and write its id maps.
    pub fn start(
        cmd: &HelperCommand,
        mode: OwnerMode,
        log: &Path,
        limits: &CgroupLimits,
    ) -> Result<Self, SandboxError> {
        let log_file =
            File::create(log).map_err(|e| SandboxError::io("create helper log", log, e))?;
        let mut command = Command::new(&cmd.program);
        command
            // What `/proc/1/cmdline` shows inside instead of a host path.
            .arg0("arbor-sandbox")
            .args(&cmd.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .env_clear();
        // SAFETY: the closure runs between fork and exec and only calls
        // prctl, which is async-signal-safe.
        unsafe {
            command.pre_exec(|| {
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))
                .map_err(std::io::Error::from)
            });
        }
        let mut child = spawn_from_stable_thread(command)
            .map_err(|e| SandboxError::io("spawn sandbox helper", &cmd.program, e))?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(SandboxError::Protocol {
                what: "the helper's pipes are missing".into(),
            });
        };
        let mut helper = Self {
            child,
            input,
            output,
            log: log.to_owned(),
            cgroups: Vec::new(),
        };
        match helper.request(&Request::Unshare)? {
            Response::Unshared => {}
            other => return Err(helper.unexpected(other)),
        }
        helper.write_id_maps(mode)?;
        if matches!(mode, OwnerMode::Root { .. }) {
            helper.cgroups = join_cgroups(helper.pid(), limits);
        }
        Ok(helper)
    }

    /// The helper's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Cgroup directories the helper (and so every action) was placed in.
    pub fn cgroups(&self) -> &[PathBuf] {
        &self.cgroups
    }

    fn write_id_maps(&self, mode: OwnerMode) -> Result<(), SandboxError> {
        write_id_maps(&mut Linux, self.pid(), mode).map_err(|error| SandboxError::Helper {
            error,
            log: String::new(),
        })
    }

    /// Send one request and wait for its response. A dead helper is a runtime fault.
    pub fn request(&mut self, req: &Request) -> Result<Response, SandboxError> {
        self.exchange(req, None)
    }

    fn exchange(
        &mut self,
        req: &Request,
        on_output: Option<OutputSink<'_>>,
    ) -> Result<Response, SandboxError> {
        exchange(&mut self.input, &mut self.output, req, on_output).map_err(|e| match e {
            ExchangeError::Gone(what) => self.died(&what),
            ExchangeError::Failed(e) => e,
        })
    }

    /// Add the tail of the helper's log to a helper-reported error.
    pub fn with_log(&self, e: SandboxError) -> SandboxError {
        match e {
            SandboxError::Helper { error, log } if log.is_empty() => {
                let text = fs::read_to_string(&self.log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(3).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                SandboxError::Helper {
                    error,
                    log: tail.join(" | "),
                }
            }
            other => other,
        }
    }

    /// Turn an unexpected response into an error.
    pub fn unexpected(&self, resp: Response) -> SandboxError {
        SandboxError::Protocol {
            what: format!("unexpected response from helper: {resp:?}"),
        }
    }

    fn died(&mut self, what: &str) -> SandboxError {
        let status = self.child.try_wait().ok().flatten();
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        let tail: String = log
            .lines()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        SandboxError::HelperDied {
            what: what.to_owned(),
            status: status.map(|s| s.to_string()),
            log: tail,
        }
    }

    /// Kill the helper (and with it every process and mount of the sandbox).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for cg in self.cgroups.drain(..) {
            for _ in 0..50 {
                if fs::remove_dir(&cg).is_ok() || !cg.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
    }
}

impl HelperChannel for HelperProcess {
    fn request(&mut self, req: &Request) -> Result<Response, SandboxError> {
        HelperProcess::request(self, req)
    }

    fn request_streaming(
        &mut self,
        req: &Request,
        on_output: OutputSink<'_>,
    ) -> Result<Response, SandboxError> {
        self.exchange(req, Some(on_output))
    }

    fn with_log(&self, e: SandboxError) -> SandboxError {
        HelperProcess::with_log(self, e)
    }

    fn pid(&self) -> u32 {
        HelperProcess::pid(self)
    }

    fn cgroups(&self) -> &[PathBuf] {
        HelperProcess::cgroups(self)
    }

    fn kill(&mut self) {
        HelperProcess::kill(self);
    }
}

impl Drop for HelperProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Write the id maps of helper `pid`: the sandbox's ids 0-65535 onto the
/// store's range (root mode), or its root onto the caller's own ids alone,
/// after denying `setgroups` as an unprivileged `gid_map` requires (rootless).
pub(crate) fn write_id_maps<S: Syscalls>(
    sys: &mut S,
    pid: u32,
    mode: OwnerMode,
) -> Result<(), HelperError> {
    match mode {
        OwnerMode::Root { uid_base } => {
            sys.write_id_map(pid, IdMap::Uid, &format!("0 {uid_base} 65536\n"))?;
            sys.write_id_map(pid, IdMap::Gid, &format!("0 {uid_base} 65536\n"))?;
        }
        OwnerMode::Rootless => {
            let uid = rustix::process::getuid().as_raw();
            let gid = rustix::process::getgid().as_raw();
            sys.write_id_map(pid, IdMap::SetGroups, "deny\n")?;
            sys.write_id_map(pid, IdMap::Uid, &format!("0 {uid} 1\n"))?;
            sys.write_id_map(pid, IdMap::Gid, &format!("0 {gid} 1\n"))?;
        }
    }
    Ok(())
}

/// Limits applied through cgroups where the host lets us create them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupLimits {
    /// `pids.max`.
    pub pids: u64,
    /// Memory limit in bytes.
    pub memory_bytes: u64,
}

impl Default for CgroupLimits {
    fn default() -> Self {
        Self {
            pids: 1024,
            memory_bytes: 8 << 30,
        }
    }
}

/// This process's cgroup (relative path) in the v1 hierarchy of
/// `controller`, from the text of `/proc/self/cgroup`.
fn own_cgroup(proc_self_cgroup: &str, controller: &str) -> Option<String> {
    proc_self_cgroup.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        ctrls
            .split(',')
            .any(|c| c == controller)
            .then(|| path.trim_start_matches('/').to_owned())
    })
}

/// Remove empty per-sandbox cgroups left by runtimes that were killed
/// (`arbor-<runtime pid>-<helper pid>` whose runtime is gone). Best effort.
fn remove_stale_cgroups() {
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut parents = vec![PathBuf::from("/sys/fs/cgroup")];
    for controller in ["pids", "memory"] {
        let base = Path::new("/sys/fs/cgroup").join(controller);
        parents.push(base.clone());
        if let Some(rel) = own_cgroup(&own, controller) {
            parents.push(base.join(rel));
        }
    }
    for parent in parents {
        let Ok(entries) = fs::read_dir(&parent) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("arbor-")) else {
                continue;
            };
            let Some(owner) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
                continue;
            };
            let alive = rustix::process::Pid::from_raw(owner)
                .is_some_and(|pid| rustix::process::test_kill_process(pid).is_ok());
            if !alive {
                // rmdir of a cgroup succeeds only when it has no processes.
                let _ = fs::remove_dir(entry.path());
            }
        }
    }
}

/// Create per-sandbox cgroups (pids, memory), set their limits and move
/// `pid` into them. Best effort: where the host does not let us, the rlimits
/// still apply; the list of cgroups joined is reported.
fn join_cgroups(pid: u32, limits: &CgroupLimits) -> Vec<PathBuf> {
    static SWEPT: OnceLock<()> = OnceLock::new();
    SWEPT.get_or_init(remove_stale_cgroups);
    let name = format!("arbor-{}-{pid}", std::process::id());
    let mut joined = Vec::new();
    let unified = Path::new("/sys/fs/cgroup/cgroup.controllers");
    if unified.exists() {
        let dir = Path::new("/sys/fs/cgroup").join(&name);
        if fs::create_dir(&dir).is_ok() {
            let _ = fs::write(dir.join("pids.max"), limits.pids.to_string());
            let _ = fs::write(dir.join("memory.max"), limits.memory_bytes.to_string());
            if fs::write(dir.join("cgroup.procs"), pid.to_string()).is_ok() {
                joined.push(dir);
            } else {
                let _ = fs::remove_dir(&dir);
            }
        }
        return joined;
    }
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    for (controller, file, value) in [
        ("pids", "pids.max", limits.pids.to_string()),
        (
            "memory",
            "memory.limit_in_bytes",
            limits.memory_bytes.to_string(),
        ),
    ] {
        let base = Path::new("/sys/fs/cgroup").join(controller);
        if !base.join("tasks").exists() {
            continue;
        }
        let rel = own_cgroup(&own, controller).unwrap_or_default();
        let dir = base.join(rel).join(&name);
        if fs::create_dir(&dir).is_err() {
            continue;
        }
        if fs::write(dir.join(file), &value).is_ok()
            && fs::write(dir.join("cgroup.procs"), pid.to_string()).is_ok()
        {
            joined.push(dir);
        } else {
            let _ = fs::remove_dir(&dir);
        }
    }
    joined
}
