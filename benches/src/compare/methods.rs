//! The methods compared, one type each, behind the [`Method`] trait.
//!
//! (~1,360 lines: one type per compared method, each a few dozen lines with
//! the same shape; reading them side by side is the point of the file.)
//!
//! Every timed section ends at the same point: the command (`true`, or the
//! Python test) has exited in every fork. Untimed work (writing the edit
//! before a snapshot, removing copies, containers and sandboxes after the
//! clock stops) is kept out of the samples. Forks of one sample are made by
//! min(N, [`MAX_THREADS`]) threads for every method.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail, ensure};
use arbor_runtime::{ExecOptions, Runtime, Sandbox, Snapshot};

use super::tools::{self, PYTHON, Podman, Toolbox, run_checked};
use super::{EDITED_FILE, MethodId, Operation, PYTHON_TEST_PATH};
use crate::{BenchEnv, small_change, sync_all};

/// Most threads making the forks of one sample.
pub const MAX_THREADS: usize = 8;

/// A generated workspace on the host, shared read-only by every method.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workspace {
    /// The directory (never written after generation).
    pub dir: PathBuf,
    /// The workload's name.
    pub name: &'static str,
}

/// The forks made by one sample of [`Method::fork`], alive until dropped
/// (dropping removes them, untimed).
pub trait Forks {
    /// Append a line to [`EDITED_FILE`] in every fork, as each fork's own change.
    fn change_one_file_each(&mut self) -> Result<()>;
    /// Bytes on disk that the forks use beyond what they share.
    fn disk_bytes(&self) -> Result<u64>;
}

/// One way of snapshotting, forking and running commands.
pub trait Method {
    /// Which method this is.
    fn id(&self) -> MethodId;
    /// For Arbor: the backend the runtime chose.
    fn backend(&self) -> Option<String> {
        None
    }
    /// `Err(reason)` when the method has no such operation.
    fn supports(&self, op: Operation) -> std::result::Result<(), String>;
    /// Write one small new file (untimed), then time sealing the state.
    fn snapshot(&mut self, k: u64) -> Result<Duration>;
    /// Time N forks of the base state, each until `true` has exited in it.
    fn fork(&mut self, n: usize) -> Result<(Duration, Box<dyn Forks>)>;
    /// Time opening the last stored snapshot and running `true` in it.
    fn restore(&mut self) -> Result<Duration>;
    /// Time the Python test file run in an existing fork.
    fn python_test(&mut self) -> Result<Duration>;
    /// Time `true` run in an existing fork.
    fn exec_true(&mut self) -> Result<Duration>;
}

/// Prepare method `id` for workspace `ws`; its files go under `dir` (the
/// workload's scratch directory). Arbor's sandboxes are driven by `helper`.
pub fn prepare(
    id: MethodId,
    toolbox: &Toolbox,
    ws: &Workspace,
    dir: &Path,
    helper: &Path,
) -> Result<Box<dyn Method>> {
    let python = toolbox.python.is_some();
    let own = dir.join(id.key());
    std::fs::create_dir_all(&own).with_context(|| format!("create {}", own.display()))?;
    Ok(match id {
        MethodId::Arbor => Box::new(ArborMethod::prepare(ws, helper, python)?),
        MethodId::OverlayFloor => Box::new(FloorMethod::prepare(ws, own)?),
        MethodId::Cp => Box::new(CpMethod::prepare(ws, own)?),
        MethodId::Tar => Box::new(TarMethod::prepare(ws, own)?),
        MethodId::Git => Box::new(GitMethod::prepare(ws, own)?),
        MethodId::Host => Box::new(HostMethod {
            ws: ws.dir.clone(),
            python,
        }),
        MethodId::Bubblewrap => Box::new(BwrapMethod::prepare(
            ws,
            own,
            toolbox.bwrap_system.clone(),
            python,
        )?),
        MethodId::Podman => {
            let podman = toolbox
                .podman
                .clone()
                .context("podman did not pass its probe")?;
            Box::new(PodmanMethod::prepare(ws, own, podman, python)?)
        }
    })
}

/// The command every method runs for the Python test (through `bash -c`).
fn python_command() -> String {
    format!("{PYTHON} {PYTHON_TEST_PATH}")
}

static UNIQUE: AtomicU64 = AtomicU64::new(0);

/// A fresh name component.
fn unique() -> u64 {
    UNIQUE.fetch_add(1, Ordering::Relaxed)
}

/// Run `f(0..n)` on min(n, [`MAX_THREADS`]) threads; the time until every
/// call has returned, and the results in order (the first error otherwise;
/// the results made so far are dropped).
fn parallel<T: Send>(
    n: usize,
    f: impl Fn(usize) -> Result<T> + Sync,
) -> Result<(Duration, Vec<T>)> {
    let threads = n.clamp(1, MAX_THREADS);
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<T>>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let result = f(i);
                    if let Ok(mut slot) = slots[i].lock() {
                        *slot = Some(result);
                    }
                }
            });
        }
    });
    let elapsed = start.elapsed();
    let mut out = Vec::with_capacity(n);
    let mut first_error = None;
    for slot in slots {
        match slot.into_inner() {
            Ok(Some(Ok(value))) => out.push(value),
            Ok(Some(Err(e))) => {
                first_error.get_or_insert(e);
            }
            _ => {
                first_error.get_or_insert(anyhow!("a fork worker stopped early"));
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok((elapsed, out)),
    }
}

/// A directory removed when dropped.
#[derive(Debug)]
struct DirGuard(PathBuf);

impl Drop for DirGuard {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            eprintln!("compare: could not remove {}: {e}", self.0.display());
        }
    }
}

/// Write the `k`th small edit (a new 100-byte file) into `dir`.
fn write_change(dir: &Path, k: u64) -> Result<()> {
    let bench = dir.join("bench");
    std::fs::create_dir_all(&bench).with_context(|| format!("create {}", bench.display()))?;
    let path = bench.join(format!("change-{k:08}.txt"));
    std::fs::write(&path, small_change(k)).with_context(|| format!("write {}", path.display()))
}

/// Append a line to `dir/EDITED_FILE`.
fn append_change(dir: &Path) -> Result<()> {
    let path = dir.join(EDITED_FILE);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(b"change\n"))
        .with_context(|| format!("append to {}", path.display()))
}

/// Run `true` with `dir` as the working directory.
fn true_in(dir: &Path) -> Result<()> {
    run_checked(Command::new("true").current_dir(dir)).map(|_| ())
}

/// `cp -al src dest`: a hard-linked working copy (setup only).
fn link_copy(src: &Path, dest: &Path) -> Result<()> {
    run_checked(Command::new("cp").arg("-al").arg(src).arg(dest)).map(|_| ())
}

/// Forks that are plain host directories (copies, extractions, worktrees).
#[derive(Debug)]
struct DirForks {
    dirs: Vec<DirGuard>,
    /// The repository whose worktrees these are (pruned after removal).
    git_main: Option<PathBuf>,
}

impl Forks for DirForks {
    fn change_one_file_each(&mut self) -> Result<()> {
        self.dirs.iter().try_for_each(|d| append_change(&d.0))
    }

    fn disk_bytes(&self) -> Result<u64> {
        let dirs: Vec<PathBuf> = self.dirs.iter().map(|d| d.0.clone()).collect();
        tools::disk_usage(&dirs)
    }
}

impl Drop for DirForks {
    fn drop(&mut self) {
        self.dirs.clear();
        if let Some(main) = &self.git_main
            && let Err(e) = run_checked(git(main).args(["worktree", "prune"]))
        {
            eprintln!("compare: {e:#}");
        }
    }
}

// ---------------------------------------------------------------- Arbor

/// Arbor: a runtime on its own temporary store with the workspace imported.
/// Fields drop in order: sandboxes before the store they live in.
struct ArborMethod {
    /// The sandbox the snapshot operation edits and seals.
    editor: Option<Sandbox>,
    /// The open sandbox of the Python test and the exec overhead.
    runner: Option<Sandbox>,
    base: Snapshot,
    /// The last snapshot taken by [`Method::snapshot`].
    stored: Option<Snapshot>,
    env: BenchEnv,
    python: bool,
}

impl std::fmt::Debug for ArborMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArborMethod")
            .field("base", self.base.id())
            .finish_non_exhaustive()
    }
}

/// Run `command` in `sandbox` and require exit status 0.
fn exec_ok(sandbox: &mut Sandbox, command: &str) -> Result<()> {
    let obs = sandbox
        .exec(command, &ExecOptions::default())
        .with_context(|| format!("exec {command:?} in the sandbox"))?;
    ensure!(
        obs.code() == Some(0),
        "{command:?} failed in the sandbox ({:?}): {}",
        obs.exit,
        tools::tail(&obs.stderr)
    );
    Ok(())
}

impl ArborMethod {
    fn prepare(ws: &Workspace, helper: &Path, python: bool) -> Result<Self> {
        let env = BenchEnv::open(helper)?;
        let base = env
            .runtime
            .import(&ws.dir, None)
            .with_context(|| format!("import {}", ws.dir.display()))?;
        sync_all()?;
        // Opening the first sandbox decides the backend (untimed).
        let runner = base.open().context("open a sandbox")?;
        Ok(Self {
            editor: None,
            runner: Some(runner),
            base,
            stored: None,
            env,
            python,
        })
    }

    fn runner(&mut self) -> Result<&mut Sandbox> {
        match &mut self.runner {
            Some(sb) => Ok(sb),
            none => Ok(none.insert(self.base.open().context("open a sandbox")?)),
        }
    }
}

/// Private directories (`upper-*`, `work-*`) of the sandboxes whose run
/// directories appeared in `run` since `before` was listed.
fn new_private_dirs(run: &Path, before: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for dir in list_dir(run)? {
        if before.contains(&dir) || !dir.is_dir() {
            continue;
        }
        for sub in list_dir(&dir)? {
            let name = sub.file_name().map(|n| n.to_string_lossy().into_owned());
            if name.is_some_and(|n| n.starts_with("upper-") || n.starts_with("work-")) {
                out.push(sub);
            }
        }
    }
    Ok(out)
}

fn list_dir(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::read_dir(dir)
        .with_context(|| format!("read {}", dir.display()))?
        .map(|e| {
            e.map(|e| e.path())
                .with_context(|| format!("read {}", dir.display()))
        })
        .collect()
}

/// Arbor's forks: open sandboxes and the store's run directory.
struct ArborForks {
    sandboxes: Vec<Sandbox>,
    run: PathBuf,
    before: Vec<PathBuf>,
}

impl Forks for ArborForks {
    fn change_one_file_each(&mut self) -> Result<()> {
        let command = format!("echo change >> {EDITED_FILE}");
        self.sandboxes
            .iter_mut()
            .try_for_each(|sb| exec_ok(sb, &command))
    }

    fn disk_bytes(&self) -> Result<u64> {
        let private = new_private_dirs(&self.run, &self.before)?;
        ensure!(
            private.len() >= self.sandboxes.len(),
            "found {} private directories for {} sandboxes",
            private.len(),
            self.sandboxes.len()
        );
        tools::disk_usage(&private)
    }
}

impl Method for ArborMethod {
    fn id(&self) -> MethodId {
        MethodId::Arbor
    }

    fn backend(&self) -> Option<String> {
        Some(format!("{:?}", self.env.runtime.workspace_backend()).to_lowercase())
    }

    fn supports(&self, op: Operation) -> std::result::Result<(), String> {
        match op {
            Operation::PythonTest if !self.python => Err("/usr/bin/python3 is missing".into()),
            _ => Ok(()),
        }
    }

    fn snapshot(&mut self, k: u64) -> Result<Duration> {
        let editor = match &mut self.editor {
            Some(sb) => sb,
            none => none.insert(self.base.open().context("open a sandbox")?),
        };
        editor
            .write_file(&format!("bench/change-{k:08}.txt"), &small_change(k), 0o644)
            .context("write the small edit")?;
        let start = Instant::now();
        let snapshot = editor.snapshot().context("snapshot")?;
        let elapsed = start.elapsed();
        self.stored = Some(snapshot);
        Ok(elapsed)
    }

    fn fork(&mut self, n: usize) -> Result<(Duration, Box<dyn Forks>)> {
        // The warm pool refills between bursts, as it does in real use.
        let _ = self.env.runtime.warm_up(Duration::from_secs(5));
        let run = self.env.runtime.store().run_dir();
        let before = list_dir(&run)?;
        let base = &self.base;
        let (elapsed, sandboxes) = parallel(n, |_| {
            let mut sandbox = base.open().context("open a fork")?;
            exec_ok(&mut sandbox, "true")?;
            Ok(sandbox)
        })?;
        Ok((
            elapsed,
            Box::new(ArborForks {
                sandboxes,
                run,
                before,
            }),
        ))
    }

    fn restore(&mut self) -> Result<Duration> {
        let id = *self.stored.as_ref().unwrap_or(&self.base).id();
        let options = self.env.runtime.options().clone();
        let start = Instant::now();
        let runtime = Runtime::open(options).context("open the store")?;
        let snapshot = runtime.snapshot(&id).context("load the stored snapshot")?;
        let mut sandbox = snapshot.open().context("open the stored snapshot")?;
        exec_ok(&mut sandbox, "true")?;
        let elapsed = start.elapsed();
        drop(sandbox);
        drop(snapshot);
        drop(runtime);
        Ok(elapsed)
    }

    fn python_test(&mut self) -> Result<Duration> {
        let command = python_command();
        let runner = self.runner()?;
        let start = Instant::now();
        exec_ok(runner, &command)?;
        Ok(start.elapsed())
    }

    fn exec_true(&mut self) -> Result<Duration> {
        let runner = self.runner()?;
        let start = Instant::now();
        exec_ok(runner, "true")?;
        Ok(start.elapsed())
    }
}

// ---------------------------------------------------------------- floor

/// The floor: `unshare` + an overlay mount over plain directories. A
/// snapshot syncs the upper directory (`sync -f`, i.e. `syncfs`) and renames
/// it into a new lower layer.
#[derive(Debug)]
struct FloorMethod {
    dir: PathBuf,
    ws: PathBuf,
    /// Sealed layers, oldest first.
    layers: Vec<PathBuf>,
    /// The upper directory the next snapshot seals.
    upper: PathBuf,
}

const NO_HOST_FORKS: &str = "its forks are plain host directories: see `host process`";
const NO_SANDBOX: &str =
    "no sandbox outlives a command: each command is a fork (see the fork rows)";
const NO_FORKS: &str = "no snapshots or forks";

impl FloorMethod {
    fn prepare(ws: &Workspace, dir: PathBuf) -> Result<Self> {
        let upper = dir.join("upper-live");
        std::fs::create_dir_all(&upper).with_context(|| format!("create {}", upper.display()))?;
        Ok(Self {
            dir,
            ws: ws.dir.clone(),
            layers: Vec::new(),
            upper,
        })
    }

    /// `lowerdir=` for the base (`chain` false) or the stored chain.
    fn lowers(&self, chain: bool) -> String {
        let mut dirs: Vec<String> = Vec::new();
        if chain {
            dirs.extend(
                self.layers
                    .iter()
                    .rev()
                    .map(|l| l.to_string_lossy().into_owned()),
            );
        }
        dirs.push(self.ws.to_string_lossy().into_owned());
        dirs.join(":")
    }

    /// Make one fork directory over `lowers` and run `script` in the mount.
    fn one_fork(dir: &Path, lowers: &str, script: &str) -> Result<DirGuard> {
        let guard = DirGuard(dir.join(format!("fork-{}", unique())));
        for sub in ["u", "w", "m"] {
            let p = guard.0.join(sub);
            std::fs::create_dir_all(&p).with_context(|| format!("create {}", p.display()))?;
        }
        run_checked(&mut tools::floor_command(
            lowers,
            &guard.0.join("u"),
            &guard.0.join("w"),
            &guard.0.join("m"),
            script,
        ))?;
        Ok(guard)
    }
}

/// The floor's forks: upper and work directories (the mounts are gone with
/// their namespaces).
#[derive(Debug)]
struct FloorForks {
    dirs: Vec<DirGuard>,
    lowers: String,
}

impl Forks for FloorForks {
    fn change_one_file_each(&mut self) -> Result<()> {
        let script = format!("echo change >> {EDITED_FILE}");
        for d in &self.dirs {
            run_checked(&mut tools::floor_command(
                &self.lowers,
                &d.0.join("u"),
                &d.0.join("w"),
                &d.0.join("m"),
                &script,
            ))?;
        }
        Ok(())
    }

    fn disk_bytes(&self) -> Result<u64> {
        let dirs: Vec<PathBuf> = self
            .dirs
            .iter()
            .flat_map(|d| [d.0.join("u"), d.0.join("w")])
            .collect();
        tools::disk_usage(&dirs)
    }
}

impl Method for FloorMethod {
    fn id(&self) -> MethodId {
        MethodId::OverlayFloor
    }

    fn supports(&self, op: Operation) -> std::result::Result<(), String> {
        match op {
            Operation::PythonTest | Operation::ExecTrue => Err(NO_SANDBOX.into()),
            _ => Ok(()),
        }
    }

    fn snapshot(&mut self, k: u64) -> Result<Duration> {
        write_change(&self.upper, k)?;
        let layer = self.dir.join(format!("layer-{k:08}"));
        let start = Instant::now();
        run_checked(Command::new("sync").arg("-f").arg(&self.upper))?;
        std::fs::rename(&self.upper, &layer)
            .with_context(|| format!("rename {} to {}", self.upper.display(), layer.display()))?;
        std::fs::create_dir(&self.upper)
            .with_context(|| format!("create {}", self.upper.display()))?;
        let elapsed = start.elapsed();
        self.layers.push(layer);
        Ok(elapsed)
    }

    fn fork(&mut self, n: usize) -> Result<(Duration, Box<dyn Forks>)> {
        let lowers = self.lowers(false);
        let dir = &self.dir;
        let (elapsed, dirs) = parallel(n, |_| Self::one_fork(dir, &lowers, "exec true"))?;
        Ok((elapsed, Box::new(FloorForks { dirs, lowers })))
    }

    fn restore(&mut self) -> Result<Duration> {
        let lowers = self.lowers(true);
        let start = Instant::now();
        let guard = Self::one_fork(&self.dir, &lowers, "exec true")?;
        let elapsed = start.elapsed();
        drop(guard);
        Ok(elapsed)
    }

    fn python_test(&mut self) -> Result<Duration> {
        bail!(NO_SANDBOX)
    }

    fn exec_true(&mut self) -> Result<Duration> {
        bail!(NO_SANDBOX)
    }
}

// ---------------------------------------------------------------- cp -a

/// `cp -a`: a snapshot is a copy of the working directory, a fork a copy
/// of the base.
#[derive(Debug)]
struct CpMethod {
    dir: PathBuf,
    ws: PathBuf,
    /// The working directory the snapshot operation edits.
    work: PathBuf,
    stored: Option<DirGuard>,
}

impl CpMethod {
    fn prepare(ws: &Workspace, dir: PathBuf) -> Result<Self> {
        let work = dir.join("work");
        link_copy(&ws.dir, &work)?;
        Ok(Self {
            dir,
            ws: ws.dir.clone(),
            work,
            stored: None,
        })
    }

    fn one_fork(dir: &Path, src: &Path) -> Result<DirGuard> {
        let dest = dir.join(format!("fork-{}", unique()));
        run_checked(Command::new("cp").arg("-a").arg(src).arg(&dest))?;
        let guard = DirGuard(dest);
        true_in(&guard.0)?;
        Ok(guard)
    }
}

impl Method for CpMethod {
    fn id(&self) -> MethodId {
        MethodId::Cp
    }

    fn supports(&self, op: Operation) -> std::result::Result<(), String> {
        match op {
            Operation::PythonTest | Operation::ExecTrue => Err(NO_HOST_FORKS.into()),
            _ => Ok(()),
        }
    }

    fn snapshot(&mut self, k: u64) -> Result<Duration> {
        write_change(&self.work, k)?;
        let dest = self.dir.join(format!("snap-{k:08}"));
        let start = Instant::now();
        run_checked(Command::new("cp").arg("-a").arg(&self.work).arg(&dest))?;
        let elapsed = start.elapsed();
        self.stored = Some(DirGuard(dest));
        Ok(elapsed)
    }

    fn fork(&mut self, n: usize) -> Result<(Duration, Box<dyn Forks>)> {
        let (dir, ws) = (&self.dir, &self.ws);
        let (elapsed, dirs) = parallel(n, |_| Self::one_fork(dir, ws))?;
        Ok((
            elapsed,
            Box::new(DirForks {
                dirs,
                git_main: None,
            }),
        ))
    }

    fn restore(&mut self) -> Result<Duration> {
        let src = self.stored.as_ref().map_or(&self.ws, |g| &g.0);
        let start = Instant::now();
        let guard = Self::one_fork(&self.dir, src)?;
        let elapsed = start.elapsed();
        drop(guard);
        Ok(elapsed)
    }

    fn python_test(&mut self) -> Result<Duration> {
        bail!(NO_HOST_FORKS)
    }

    fn exec_true(&mut self) -> Result<Duration> {
        bail!(NO_HOST_FORKS)
    }
}

// ---------------------------------------------------------------- tar

/// `tar`: a snapshot is a tarball of the working directory, a fork an
/// extraction into a new directory.
#[derive(Debug)]
struct TarMethod {
    dir: PathBuf,
    work: PathBuf,
    base_tar: PathBuf,
    stored: Option<PathBuf>,
}

impl TarMethod {
    fn prepare(ws: &Workspace, dir: PathBuf) -> Result<Self> {
        let work = dir.join("work");
        link_copy(&ws.dir, &work)?;
        let base_tar = dir.join("base.tar");
        run_checked(
            Command::new("tar")
                .arg("-cf")
                .arg(&base_tar)
                .arg("-C")
                .arg(&ws.dir)
                .arg("."),
        )?;
        Ok(Self {
            dir,
            work,
            base_tar,
            stored: None,
        })
    }

    fn one_fork(dir: &Path, tarball: &Path) -> Result<DirGuard> {
        let guard = DirGuard(dir.join(format!("fork-{}", unique())));
        std::fs::create_dir(&guard.0).with_context(|| format!("create {}", guard.0.display()))?;
        run_checked(
            Command::new("tar")
                .arg("-xf")
                .arg(tarball)
                .arg("-C")
                .arg(&guard.0),
        )?;
        true_in(&guard.0)?;
        Ok(guard)
    }
}

impl Method for TarMethod {
    fn id(&self) -> MethodId {
        MethodId::Tar
    }

    fn supports(&self, op: Operation) -> std::result::Result<(), String> {
        match op {
            Operation::PythonTest | Operation::ExecTrue => Err(NO_HOST_FORKS.into()),
            _ => Ok(()),
        }
    }

    fn snapshot(&mut self, k: u64) -> Result<Duration> {
        write_change(&self.work, k)?;
        let dest = self.dir.join(format!("snap-{k:08}.tar"));
        let start = Instant::now();
        run_checked(
            Command::new("tar")
                .arg("-cf")
                .arg(&dest)
                .arg("-C")
                .arg(&self.work)
                .arg("."),
        )?;
        let elapsed = start.elapsed();
        if let Some(old) = self.stored.replace(dest) {
            std::fs::remove_file(&old).with_context(|| format!("remove {}", old.display()))?;
        }
        Ok(elapsed)
    }

    fn fork(&mut self, n: usize) -> Result<(Duration, Box<dyn Forks>)> {
        let (dir, tarball) = (&self.dir, &self.base_tar);
        let (elapsed, dirs) = parallel(n, |_| Self::one_fork(dir, tarball))?;
        Ok((
            elapsed,
            Box::new(DirForks {
                dirs,
                git_main: None,
            }),
        ))
    }

    fn restore(&mut self) -> Result<Duration> {
        let tarball = self.stored.as_ref().unwrap_or(&self.base_tar);
        let start = Instant::now();
        let guard = Self::one_fork(&self.dir, tarball)?;
        let elapsed = start.elapsed();
        drop(guard);
        Ok(elapsed)
    }

    fn python_test(&mut self) -> Result<Duration> {
        bail!(NO_HOST_FORKS)
    }

    fn exec_true(&mut self) -> Result<Duration> {
        bail!(NO_HOST_FORKS)
    }
}

// ---------------------------------------------------------------- git

/// `git -C main` with the system and global configuration ignored.
fn git(main: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(main)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null");
    cmd
}

/// git: a snapshot is `git add -A` + `git commit`, a fork `git worktree add`.
#[derive(Debug)]
struct GitMethod {
    dir: PathBuf,
    /// The main working tree and repository.
    main: PathBuf,
    base: String,
    stored: Option<String>,
}

impl GitMethod {
    fn prepare(ws: &Workspace, dir: PathBuf) -> Result<Self> {
        let main = dir.join("main");
        link_copy(&ws.dir, &main)?;
        run_checked(git(&main).args(["init", "-q"]))?;
        for (key, value) in [
            ("core.compression", "0"),
            ("core.looseCompression", "0"),
            ("gc.auto", "0"),
            ("user.name", "Arbor Bench"),
            ("user.email", "bench@arbor.invalid"),
        ] {
            run_checked(git(&main).args(["config", key, value]))?;
        }
        run_checked(git(&main).args(["add", "-A"]))?;
        run_checked(git(&main).args(["commit", "-q", "-m", "base"]))?;
        let base = Self::head(&main)?;
        Ok(Self {
            dir,
            main,
            base,
            stored: None,
        })
    }

    fn head(main: &Path) -> Result<String> {
        let out = run_checked(git(main).args(["rev-parse", "HEAD"]))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    fn one_fork(dir: &Path, main: &Path, commit: &str) -> Result<DirGuard> {
        // Concurrent `git worktree add` on one repository races on
        // .git/worktrees ("failed to read .git/worktrees/…/commondir", seen at
        // N = 64), so the adds take turns; `true` still runs in parallel.
        static ADD: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let dest = dir.join(format!("fork-{}", unique()));
        let added = {
            let _turn = ADD
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            run_checked(
                git(main)
                    .args(["worktree", "add", "-q", "--detach"])
                    .arg(&dest)
                    .arg(commit),
            )
        };
        let guard = DirGuard(dest);
        added?;
        true_in(&guard.0)?;
        Ok(guard)
    }
}

impl Method for GitMethod {
    fn id(&self) -> MethodId {
        MethodId::Git
    }

    fn supports(&self, op: Operation) -> std::result::Result<(), String> {
        match op {
            Operation::PythonTest | Operation::ExecTrue => Err(NO_HOST_FORKS.into()),
            _ => Ok(()),
        }
    }

    fn snapshot(&mut self, k: u64) -> Result<Duration> {
        write_change(&self.main, k)?;
        let start = Instant::now();
        run_checked(git(&self.main).args(["add", "-A"]))?;
        run_checked(git(&self.main).args(["commit", "-q", "-m", &format!("snapshot {k}")]))?;
        let elapsed = start.elapsed();
        self.stored = Some(Self::head(&self.main)?);
        Ok(elapsed)
    }

    fn fork(&mut self, n: usize) -> Result<(Duration, Box<dyn Forks>)> {
        let (dir, main, base) = (&self.dir, &self.main, &self.base);
        let forked = parallel(n, |_| Self::one_fork(dir, main, base));
        let (elapsed, dirs) = match forked {
            Ok(done) => done,
            Err(e) => {
                let _ = run_checked(git(main).args(["worktree", "prune"]));
                return Err(e);
            }
        };
        Ok((
            elapsed,
            Box::new(DirForks {
                dirs,
                git_main: Some(self.main.clone()),
            }),
        ))
    }

    fn restore(&mut self) -> Result<Duration> {
        let commit = self.stored.as_ref().unwrap_or(&self.base);
        let start = Instant::now();
        let guard = Self::one_fork(&self.dir, &self.main, commit)?;
        let elapsed = start.elapsed();
        drop(DirForks {
            dirs: vec![guard],
            git_main: Some(self.main.clone()),
        });
        Ok(elapsed)
    }

    fn python_test(&mut self) -> Result<Duration> {
        bail!(NO_HOST_FORKS)
    }

    fn exec_true(&mut self) -> Result<Duration> {
        bail!(NO_HOST_FORKS)
    }
}

// ---------------------------------------------------------------- host

/// A plain host process in the workspace: the exec baseline with no isolation.
#[derive(Debug)]
struct HostMethod {
    ws: PathBuf,
    python: bool,
}

/// Time `bash -c command` in `dir` on the host.
fn time_host_bash(dir: &Path, command: &str) -> Result<Duration> {
    let start = Instant::now();
    run_checked(
        Command::new("bash")
            .args(["-c", command])
            .current_dir(dir)
            .env("PYTHONDONTWRITEBYTECODE", "1"),
    )?;
    Ok(start.elapsed())
}

impl Method for HostMethod {
    fn id(&self) -> MethodId {
        MethodId::Host
    }

    fn supports(&self, op: Operation) -> std::result::Result<(), String> {
        match op {
            Operation::PythonTest if !self.python => Err("/usr/bin/python3 is missing".into()),
            Operation::PythonTest | Operation::ExecTrue => Ok(()),
            _ => Err(NO_FORKS.into()),
        }
    }

    fn snapshot(&mut self, _k: u64) -> Result<Duration> {
        bail!(NO_FORKS)
    }

    fn fork(&mut self, _n: usize) -> Result<(Duration, Box<dyn Forks>)> {
        bail!(NO_FORKS)
    }

    fn restore(&mut self) -> Result<Duration> {
        bail!(NO_FORKS)
    }

    fn python_test(&mut self) -> Result<Duration> {
        time_host_bash(&self.ws, &python_command())
    }

    fn exec_true(&mut self) -> Result<Duration> {
        time_host_bash(&self.ws, "true")
    }
}

// ---------------------------------------------------------------- bubblewrap

/// bubblewrap: each command in fresh namespaces over a workspace directory.
#[derive(Debug)]
struct BwrapMethod {
    system: Vec<String>,
    work: PathBuf,
    python: bool,
}

const NO_BWRAP_FORKS: &str =
    "bubblewrap runs a command isolated; it has no snapshots and (0.8) no copy-on-write forks";

impl BwrapMethod {
    fn prepare(ws: &Workspace, dir: PathBuf, system: Vec<String>, python: bool) -> Result<Self> {
        let work = dir.join("work");
        link_copy(&ws.dir, &work)?;
        Ok(Self {
            system,
            work,
            python,
        })
    }

    fn time_bash(&self, command: &str) -> Result<Duration> {
        let start = Instant::now();
        run_checked(&mut tools::bwrap_command(
            &self.system,
            &self.work,
            &["bash", "-c", command],
        ))?;
        Ok(start.elapsed())
    }
}

impl Method for BwrapMethod {
    fn id(&self) -> MethodId {
        MethodId::Bubblewrap
    }

    fn supports(&self, op: Operation) -> std::result::Result<(), String> {
        match op {
            Operation::PythonTest if !self.python => Err("/usr/bin/python3 is missing".into()),
            Operation::PythonTest | Operation::ExecTrue => Ok(()),
            _ => Err(NO_BWRAP_FORKS.into()),
        }
    }

    fn snapshot(&mut self, _k: u64) -> Result<Duration> {
        bail!(NO_BWRAP_FORKS)
    }

    fn fork(&mut self, _n: usize) -> Result<(Duration, Box<dyn Forks>)> {
        bail!(NO_BWRAP_FORKS)
    }

    fn restore(&mut self) -> Result<Duration> {
        bail!(NO_BWRAP_FORKS)
    }

    fn python_test(&mut self) -> Result<Duration> {
        self.time_bash(&python_command())
    }

    fn exec_true(&mut self) -> Result<Duration> {
        self.time_bash("true")
    }
}

// ---------------------------------------------------------------- podman

/// podman: the workspace is an image made by `podman import`; a fork is a
/// container (`podman run`), a snapshot `podman commit` of a container.
#[derive(Debug)]
struct PodmanMethod {
    podman: Podman,
    dir: PathBuf,
    ws: PathBuf,
    /// Prefix of every image and container name of this workload.
    prefix: String,
    image: String,
    stored: Option<String>,
    /// The container the snapshot operation edits and commits.
    snap_container: Option<String>,
    /// The running container of the Python test and the exec overhead.
    exec_container: Option<String>,
    python: bool,
}

impl PodmanMethod {
    fn prepare(ws: &Workspace, dir: PathBuf, podman: Podman, python: bool) -> Result<Self> {
        let prefix = format!("arbor-bench-{}-{}", std::process::id(), ws.name);
        let rootfs = DirGuard(dir.join("rootfs"));
        Podman::skeleton(&rootfs.0, Some(&ws.dir))?;
        let image = format!("localhost/{prefix}:base");
        podman.import_dir(&rootfs.0, &image)?;
        drop(rootfs);
        Ok(Self {
            podman,
            dir,
            ws: ws.dir.clone(),
            prefix,
            image,
            stored: None,
            snap_container: None,
            exec_container: None,
            python,
        })
    }

    fn name(prefix: &str) -> String {
        format!("{prefix}-{}", unique())
    }

    /// `podman run --name NAME <options> image argv...`, waiting for it to exit.
    fn run_to_exit(podman: &Podman, name: &str, image: &str, argv: &[&str]) -> Result<()> {
        run_checked(
            podman
                .command()
                .args(["run", "--name", name])
                .args(&podman.run_options)
                .arg(image)
                .args(argv),
        )
        .map(|_| ())
    }

    /// A detached container running `sleep infinity` on `image`.
    fn start_idle(&self, image: &str) -> Result<String> {
        let name = Self::name(&self.prefix);
        run_checked(
            self.podman
                .command()
                .args(["run", "-d", "--name", &name])
                .args(&self.podman.run_options)
                .args([image, "sleep", "infinity"]),
        )?;
        Ok(name)
    }

    fn exec_container(&mut self) -> Result<String> {
        if let Some(name) = &self.exec_container {
            return Ok(name.clone());
        }
        let name = self.start_idle(&self.image.clone())?;
        self.exec_container = Some(name.clone());
        Ok(name)
    }

    fn time_exec(&mut self, command: &str) -> Result<Duration> {
        let name = self.exec_container()?;
        let start = Instant::now();
        run_checked(
            self.podman
                .command()
                .args([
                    "exec",
                    "-w",
                    "/workspace",
                    "-e",
                    "PYTHONDONTWRITEBYTECODE=1",
                ])
                .args([name.as_str(), "bash", "-c", command]),
        )?;
        Ok(start.elapsed())
    }

    fn remove_containers(podman: &Podman, names: &[String]) {
        if names.is_empty() {
            return;
        }
        if let Err(e) = run_checked(podman.command().args(["rm", "-f", "-t", "0"]).args(names)) {
            eprintln!("compare: {e:#}");
        }
    }
}

/// podman's forks: stopped containers.
#[derive(Debug)]
struct PodmanForks {
    podman: Podman,
    names: Vec<String>,
    /// The edited copy of [`EDITED_FILE`] that `podman cp` puts in each container.
    edited: PathBuf,
    ws: PathBuf,
}

impl Forks for PodmanForks {
    fn change_one_file_each(&mut self) -> Result<()> {
        let mut content = std::fs::read(self.ws.join(EDITED_FILE))
            .with_context(|| format!("read {EDITED_FILE}"))?;
        content.extend_from_slice(b"change\n");
        std::fs::write(&self.edited, content)
            .with_context(|| format!("write {}", self.edited.display()))?;
        for name in &self.names {
            run_checked(
                self.podman
                    .command()
                    .arg("cp")
                    .arg(&self.edited)
                    .arg(format!("{name}:/workspace/{EDITED_FILE}")),
            )?;
        }
        Ok(())
    }

    fn disk_bytes(&self) -> Result<u64> {
        let out = run_checked(
            self.podman
                .command()
                .args([
                    "inspect",
                    "--format",
                    "{{.GraphDriver.Data.UpperDir}}\n{{.GraphDriver.Data.WorkDir}}",
                ])
                .args(&self.names),
        )?;
        let dirs: Vec<PathBuf> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && *l != "<no value>")
            .map(PathBuf::from)
            .collect();
        ensure!(
            dirs.len() >= self.names.len(),
            "podman inspect named {} directories for {} containers",
            dirs.len(),
            self.names.len()
        );
        tools::disk_usage(&dirs)
    }
}

impl Drop for PodmanForks {
    fn drop(&mut self) {
        PodmanMethod::remove_containers(&self.podman, &self.names);
        let _ = std::fs::remove_file(&self.edited);
    }
}

impl Method for PodmanMethod {
    fn id(&self) -> MethodId {
        MethodId::Podman
    }

    fn supports(&self, op: Operation) -> std::result::Result<(), String> {
        match op {
            Operation::PythonTest if !self.python => Err("/usr/bin/python3 is missing".into()),
            _ => Ok(()),
        }
    }

    fn snapshot(&mut self, k: u64) -> Result<Duration> {
        let container = match &self.snap_container {
            Some(name) => name.clone(),
            None => {
                let name = self.start_idle(&self.image.clone())?;
                self.snap_container = Some(name.clone());
                name
            }
        };
        let content = String::from_utf8_lossy(&small_change(k)).into_owned();
        run_checked(self.podman.command().args([
            "exec",
            "-w",
            "/workspace",
            &container,
            "sh",
            "-c",
            "mkdir -p bench && printf %s \"$1\" > \"bench/change-$2.txt\"",
            "sh",
            &content,
            &format!("{k:08}"),
        ]))
        .context("write the small edit in the container")?;
        let image = format!("localhost/{}:snap-{k:08}", self.prefix);
        let start = Instant::now();
        run_checked(
            self.podman
                .command()
                .args(["commit", "-q", &container, &image]),
        )?;
        let elapsed = start.elapsed();
        if let Some(old) = self.stored.replace(image) {
            run_checked(self.podman.command().args(["rmi", &old]))?;
        }
        Ok(elapsed)
    }

    fn fork(&mut self, n: usize) -> Result<(Duration, Box<dyn Forks>)> {
        let (podman, prefix, image) = (&self.podman, &self.prefix, &self.image);
        let (elapsed, names) = parallel(n, |_| {
            let name = Self::name(prefix);
            Self::run_to_exit(podman, &name, image, &["/bin/true"]).map(|()| name)
        })
        .inspect_err(|_| {
            // Containers of a failed sample are removed by name prefix below.
            if let Ok(out) = run_checked(podman.command().args([
                "ps",
                "-a",
                "--format",
                "{{.Names}}",
                "--filter",
                &format!("name={prefix}"),
            ])) {
                let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .map(str::to_owned)
                    .filter(|n| {
                        Some(n) != self.snap_container.as_ref()
                            && Some(n) != self.exec_container.as_ref()
                    })
                    .collect();
                Self::remove_containers(podman, &names);
            }
        })?;
        Ok((
            elapsed,
            Box::new(PodmanForks {
                podman: self.podman.clone(),
                names,
                edited: self.dir.join(format!("edited-{}.txt", unique())),
                ws: self.ws.clone(),
            }),
        ))
    }

    fn restore(&mut self) -> Result<Duration> {
        let image = self.stored.clone().unwrap_or_else(|| self.image.clone());
        let name = Self::name(&self.prefix);
        let start = Instant::now();
        let ran = Self::run_to_exit(&self.podman, &name, &image, &["/bin/true"]);
        let elapsed = start.elapsed();
        Self::remove_containers(&self.podman, std::slice::from_ref(&name));
        ran?;
        Ok(elapsed)
    }

    fn python_test(&mut self) -> Result<Duration> {
        self.time_exec(&python_command())
    }

    fn exec_true(&mut self) -> Result<Duration> {
        self.time_exec("true")
    }
}

impl Drop for PodmanMethod {
    fn drop(&mut self) {
        let containers: Vec<String> = [self.snap_container.take(), self.exec_container.take()]
            .into_iter()
            .flatten()
            .collect();
        Self::remove_containers(&self.podman, &containers);
        let mut images = vec![self.image.clone()];
        images.extend(self.stored.take());
        if let Err(e) = run_checked(self.podman.command().args(["rmi", "-f"]).args(&images)) {
            eprintln!("compare: {e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_keeps_order_and_reports_errors() {
        let (_, out) = parallel(20, |i| Ok(i * 2)).expect("parallel");
        assert_eq!(out, (0..20).map(|i| i * 2).collect::<Vec<_>>());
        let err = parallel(5, |i| if i == 3 { bail!("three") } else { Ok(i) });
        assert!(err.is_err_and(|e| e.to_string() == "three"));
    }

    #[test]
    fn floor_lowers_put_the_newest_layer_first() {
        let floor = FloorMethod {
            dir: PathBuf::from("/d"),
            ws: PathBuf::from("/ws"),
            layers: vec![PathBuf::from("/d/l1"), PathBuf::from("/d/l2")],
            upper: PathBuf::from("/d/u"),
        };
        assert_eq!(floor.lowers(false), "/ws");
        assert_eq!(floor.lowers(true), "/d/l2:/d/l1:/ws");
    }
}
