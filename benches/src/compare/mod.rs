//! The side-by-side comparison of Arbor with what users do today (issue 7):
//! copying the workspace (`cp -a`), tarballs, git commits with worktrees, a
//! hand-made `unshare` + overlay mount (the floor an overlay backend can
//! approach), `bubblewrap` (running one command isolated) and a container
//! engine (`podman`), measured on the same generated workspaces in the same
//! run, each operation ending at the same point.
//!
//! (~860 lines: the comparison's plan, runner and statistics, used only by
//! the `compare` bench.)
//!
//! [`run`] drives the measurements and returns a [`Report`];
//! [`report`] renders it as Markdown, JSON and an SVG chart. The driver is the
//! `compare` bench target (`benches/benches/compare.rs`).
//!
//! Samples of one case are interleaved: round r runs one sample of every
//! method before round r + 1 starts, so a burst of load on the shared machine
//! hits all methods alike. Nothing asserts on timings.

pub mod methods;
pub mod report;
pub mod tools;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};

use crate::{MB, WorkloadSpec, generate_workspace, quick_mode, sync_all};
use methods::{Forks, Method, Workspace};
use tools::{ToolState, Toolbox};

/// Environment variable selecting workloads by name (`small,medium,large`).
pub const WORKLOADS_ENV: &str = "ARBOR_COMPARE_WORKLOADS";
/// Environment variable overriding the soft time budget in seconds.
pub const BUDGET_ENV: &str = "ARBOR_COMPARE_BUDGET_S";

/// One workspace of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ComparisonWorkload {
    /// Short name: `small`, `medium` or `large`.
    pub name: &'static str,
    /// What it stands for, for the report.
    pub description: &'static str,
    /// The generated files.
    pub spec: WorkloadSpec,
}

/// The small workspace: 100 files, 1 MB.
pub const SMALL: ComparisonWorkload = ComparisonWorkload {
    name: "small",
    description: "100 files, 1 MB",
    spec: WorkloadSpec::new(100, MB),
};
/// The medium workspace: 2,000 files, 50 MB (like a Python project with its virtualenv).
pub const MEDIUM: ComparisonWorkload = ComparisonWorkload {
    name: "medium",
    description: "2,000 files, 50 MB: like a Python project with its virtualenv",
    spec: WorkloadSpec::new(2_000, 50 * MB),
};
/// The large workspace: 20,000 files, 500 MB (like a monorepo checkout).
pub const LARGE: ComparisonWorkload = ComparisonWorkload {
    name: "large",
    description: "20,000 files, 500 MB: like a monorepo checkout",
    spec: WorkloadSpec::new(20_000, 500 * MB),
};

/// An operation measured for every method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Seal the state after one small edit (a new 100-byte file; the edit is untimed).
    Snapshot,
    /// Make N forks of the base state, timed until `true` has exited in each.
    Fork(usize),
    /// Open the stored snapshot taken by [`Operation::Snapshot`] and run
    /// `true` in it, with no state kept from earlier opens.
    Restore,
    /// Run a short Python test file (three unittest cases) in an existing fork.
    PythonTest,
    /// Run `true` in an existing fork (the exec overhead).
    ExecTrue,
    /// Disk used by N forks that each appended a line to one existing file.
    Disk(usize),
}

impl Operation {
    /// A stable key for JSON.
    pub fn key(self) -> &'static str {
        match self {
            Self::Snapshot => "snapshot",
            Self::Fork(_) => "fork",
            Self::Restore => "restore",
            Self::PythonTest => "python_test",
            Self::ExecTrue => "exec_true",
            Self::Disk(_) => "disk",
        }
    }

    /// N for fork and disk operations.
    pub fn count(self) -> Option<usize> {
        match self {
            Self::Fork(n) | Self::Disk(n) => Some(n),
            _ => None,
        }
    }

    /// Where the operation goes in a table: snapshot, forks by N (each
    /// followed by its disk row), restore, Python test, exec.
    pub fn rank(self) -> (u8, usize) {
        match self {
            Self::Snapshot => (0, 0),
            Self::Fork(n) => (1, 2 * n),
            Self::Disk(n) => (1, 2 * n + 1),
            Self::Restore => (2, 0),
            Self::PythonTest => (3, 0),
            Self::ExecTrue => (4, 0),
        }
    }

    /// A label for tables.
    pub fn label(self) -> String {
        match self {
            Self::Snapshot => "snapshot after one small edit".to_owned(),
            Self::Fork(1) => "fork 1, until `true` exited".to_owned(),
            Self::Fork(n) => format!("fork {n}, until `true` exited in each"),
            Self::Restore => "restore a stored snapshot + `true`".to_owned(),
            Self::PythonTest => "short Python test file in a fork".to_owned(),
            Self::ExecTrue => "`true` in an existing fork".to_owned(),
            Self::Disk(n) => format!("disk used by {n} forks, one file changed in each"),
        }
    }

    /// What the samples measure.
    pub fn unit(self) -> Unit {
        match self {
            Self::Disk(_) => Unit::Bytes,
            _ => Unit::Seconds,
        }
    }
}

/// The unit of a case's samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Wall-clock seconds.
    Seconds,
    /// Bytes on disk (allocated blocks).
    Bytes,
}

/// The methods compared, in report order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MethodId {
    /// Arbor's runtime (overlay backend unless `ARBOR_BACKEND` says otherwise).
    Arbor,
    /// `unshare --user --map-root-user --mount` + an overlay mount: the floor.
    OverlayFloor,
    /// `cp -a` of the workspace per fork.
    Cp,
    /// A tarball per snapshot, extracted per fork.
    Tar,
    /// A git commit per snapshot, `git worktree add` per fork.
    Git,
    /// A plain host process in the workspace (no isolation): the exec baseline.
    Host,
    /// `bwrap` running the command isolated over the workspace.
    Bubblewrap,
    /// A podman container per fork, `podman commit` per snapshot.
    Podman,
}

impl MethodId {
    /// Every method, in report order.
    pub const ALL: [Self; 8] = [
        Self::Arbor,
        Self::OverlayFloor,
        Self::Cp,
        Self::Tar,
        Self::Git,
        Self::Host,
        Self::Bubblewrap,
        Self::Podman,
    ];

    /// A stable key for JSON.
    pub fn key(self) -> &'static str {
        match self {
            Self::Arbor => "arbor",
            Self::OverlayFloor => "unshare_overlay",
            Self::Cp => "cp_a",
            Self::Tar => "tar",
            Self::Git => "git_worktree",
            Self::Host => "host",
            Self::Bubblewrap => "bubblewrap",
            Self::Podman => "podman",
        }
    }

    /// The column heading.
    pub fn name(self) -> &'static str {
        match self {
            Self::Arbor => "Arbor",
            Self::OverlayFloor => "unshare + overlay (floor)",
            Self::Cp => "cp -a",
            Self::Tar => "tar",
            Self::Git => "git worktree",
            Self::Host => "host process",
            Self::Bubblewrap => "bubblewrap",
            Self::Podman => "podman",
        }
    }

    /// Whether each fork copies the whole workspace.
    pub fn is_copy_based(self) -> bool {
        matches!(self, Self::Cp | Self::Tar | Self::Git)
    }
}

/// How one case (workload, operation, method) ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Measured samples (seconds or bytes, see [`Operation::unit`]).
    Measured(Vec<f64>),
    /// The method has no such operation.
    NotApplicable(String),
    /// The tool is not installed or cannot run here.
    Unavailable(String),
    /// Left out by the plan (size limits, time budget).
    Skipped(String),
    /// The method failed; the error chain.
    Failed(String),
}

/// One cell of the comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseResult {
    /// The workload's name.
    pub workload: &'static str,
    /// The operation.
    pub operation: Operation,
    /// The method.
    pub method: MethodId,
    /// What happened.
    pub outcome: Outcome,
}

/// What to measure and how often.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Quick smoke mode: small workspace, one repetition.
    pub quick: bool,
    /// The workspaces, smallest first.
    pub workloads: Vec<ComparisonWorkload>,
    /// The fork counts N.
    pub fork_counts: Vec<usize>,
    /// N of the disk measurement (taken from the first sample of `Fork(N)`).
    pub disk_forks: usize,
    /// Largest N copy-based methods run on the large workspace.
    pub copy_limit_large: usize,
    /// Soft budget for the whole run, shared out between the workloads (see [`run`]).
    pub budget: Duration,
    /// A method stops sampling a case once it has spent this long on it
    /// (after its first sample).
    pub case_cap: Duration,
}

impl Plan {
    /// The full plan: three workspaces, N = 1, 8, 64.
    pub fn full() -> Self {
        Self {
            quick: false,
            workloads: vec![SMALL, MEDIUM, LARGE],
            fork_counts: vec![1, 8, 64],
            disk_forks: 8,
            copy_limit_large: 8,
            // About 13 minutes in all on 2 cores: enough for one sample of
            // every copy-based method at N = 64 on the medium workspace and
            // N = 8 on the large one.
            budget: Duration::from_secs(780),
            case_cap: Duration::from_secs(8),
        }
    }

    /// The smoke plan: the small workspace, N = 1 and 8, one sample each.
    pub fn quick() -> Self {
        Self {
            quick: true,
            workloads: vec![SMALL],
            fork_counts: vec![1, 8],
            disk_forks: 8,
            copy_limit_large: 8,
            budget: Duration::from_secs(40),
            case_cap: Duration::from_secs(5),
        }
    }

    /// [`Self::quick`] in quick mode ([`crate::quick_mode`]), else
    /// [`Self::full`]; [`WORKLOADS_ENV`] picks workloads by name and
    /// [`BUDGET_ENV`] sets the budget.
    pub fn from_env() -> Result<Self> {
        let mut plan = if quick_mode() {
            Self::quick()
        } else {
            Self::full()
        };
        if let Ok(names) = std::env::var(WORKLOADS_ENV) {
            let all = [SMALL, MEDIUM, LARGE];
            let mut chosen = Vec::new();
            for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                let found = all
                    .iter()
                    .find(|w| w.name == name)
                    .with_context(|| format!("{WORKLOADS_ENV}: unknown workload {name:?}"))?;
                chosen.push(*found);
            }
            ensure!(!chosen.is_empty(), "{WORKLOADS_ENV} names no workload");
            plan.workloads = chosen;
        }
        if let Ok(secs) = std::env::var(BUDGET_ENV) {
            let secs: u64 = secs
                .trim()
                .parse()
                .with_context(|| format!("{BUDGET_ENV}: not a number of seconds: {secs:?}"))?;
            plan.budget = Duration::from_secs(secs);
        }
        Ok(plan)
    }

    /// The operations measured on `workload`, in order.
    pub fn operations(&self, workload: &ComparisonWorkload) -> Vec<Operation> {
        // Cheap operations first, so a spent time budget cuts the largest
        // fan-outs of the copy-based methods rather than anything else.
        let mut ops = vec![Operation::Snapshot];
        ops.extend(self.fork_counts.iter().take(1).map(|&n| Operation::Fork(n)));
        ops.push(Operation::Restore);
        ops.push(Operation::PythonTest);
        // The exec overhead does not depend on the workspace's size.
        if workload.name == self.workloads[0].name {
            ops.push(Operation::ExecTrue);
        }
        ops.extend(self.fork_counts.iter().skip(1).map(|&n| Operation::Fork(n)));
        ops
    }

    /// Samples per method for `op` on `workload` (before the caps).
    pub fn samples(&self, workload: &ComparisonWorkload, op: Operation) -> usize {
        if self.quick {
            return 1;
        }
        let large = workload.name == LARGE.name;
        let medium = workload.name == MEDIUM.name;
        match op {
            Operation::ExecTrue => 15,
            Operation::Fork(n) if n >= 64 => {
                if large {
                    1
                } else {
                    2
                }
            }
            Operation::Fork(n) if n > 1 => {
                if large {
                    2
                } else if medium {
                    3
                } else {
                    5
                }
            }
            _ => {
                if large {
                    3
                } else {
                    5
                }
            }
        }
    }
}

/// The host the run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct HostInfo {
    /// Logical CPUs.
    pub cpus: usize,
    /// `uname -r`.
    pub kernel: String,
    /// The effective user id.
    pub uid: u32,
    /// `/proc/loadavg`'s first three fields at the start.
    pub load_before: String,
    /// The same at the end.
    pub load_after: String,
    /// Arbor's backend as the runtime reported it.
    pub backend: String,
}

/// Everything a run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The plan it ran.
    pub plan: Plan,
    /// Seconds since the Unix epoch at the start.
    pub started_unix: u64,
    /// Wall-clock time of the whole run.
    pub wall: Duration,
    /// The host.
    pub host: HostInfo,
    /// What was found of each external tool.
    pub tools: Vec<tools::ToolReport>,
    /// Every case, workloads in plan order.
    pub results: Vec<CaseResult>,
}

impl Report {
    /// The result of one case, if it was run.
    pub fn find(&self, workload: &str, op: Operation, method: MethodId) -> Option<&CaseResult> {
        self.results
            .iter()
            .find(|r| r.workload == workload && r.operation == op && r.method == method)
    }
}

/// The Python test file written into every workspace (`tests/test_bench.py`).
pub const PYTHON_TEST: &str = r#""""A short test file, the same in every workspace of the comparison."""
import os
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class WorkspaceTest(unittest.TestCase):
    def test_readme_is_text(self):
        with open(os.path.join(ROOT, "README.md"), encoding="ascii") as f:
            self.assertTrue(f.read(64))

    def test_first_module_lists(self):
        self.assertTrue(os.listdir(os.path.join(ROOT, "src", "m00", "s00")))

    def test_arithmetic(self):
        self.assertEqual(sum(i * i for i in range(1000)), 332833500)


if __name__ == "__main__":
    unittest.main()
"#;

/// Where the Python test file lives in a workspace.
pub const PYTHON_TEST_PATH: &str = "tests/test_bench.py";
/// The existing file each fork of the disk measurement appends a line to.
pub const EDITED_FILE: &str = "src/m00/s00/f00001.txt";

/// Generate `workload` into `dir` (absent) with the Python test file added.
pub fn prepare_workspace(dir: &Path, workload: &ComparisonWorkload) -> Result<Workspace> {
    generate_workspace(dir, &workload.spec)
        .with_context(|| format!("generate the {} workspace", workload.name))?;
    let test = dir.join(PYTHON_TEST_PATH);
    if let Some(parent) = test.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("create {}", parent.display()))?;
    }
    std::fs::write(&test, PYTHON_TEST).with_context(|| format!("write {}", test.display()))?;
    ensure!(
        dir.join(EDITED_FILE).is_file(),
        "the workspace has no {EDITED_FILE}"
    );
    sync_all()?;
    Ok(Workspace {
        dir: dir.to_owned(),
        name: workload.name,
    })
}

/// Per-method progress through one case.
#[derive(Debug, Default)]
struct CaseProgress {
    samples: Vec<f64>,
    /// Wall-clock time of the samples, cleanup included.
    spent: Duration,
    failure: Option<String>,
    /// Why the method took no sample (the time budget).
    skipped: Option<String>,
    disk: Option<std::result::Result<f64, String>>,
}

impl CaseProgress {
    /// Mean wall-clock time of one sample, cleanup included.
    fn mean_wall(&self) -> Option<f64> {
        (!self.samples.is_empty()).then(|| self.spent.as_secs_f64() / self.samples.len() as f64)
    }
}

/// A prepared method, or why there is none.
type Prepared = (MethodId, std::result::Result<Box<dyn Method>, Outcome>);

/// The relative share of the time budget each workload gets.
fn budget_weight(workload: &ComparisonWorkload) -> f64 {
    match workload.name {
        "small" => 1.0,
        "medium" => 3.0,
        _ => 4.0,
    }
}

/// Run `plan`: for each workload, generate it, prepare every available method
/// and measure every operation. Arbor's sandboxes are driven by `helper`.
/// Failures of single methods are recorded in the report, never returned.
///
/// Time budget: each workload gets a share of what is left of
/// [`Plan::budget`] (small 1, medium 3, large 4); a method skips a sample
/// that would not fit in its workload's share (estimated from its previous
/// samples, or from N times its single fork), and the report says so.
/// Arbor always takes at least one sample, so every ratio has a base.
pub fn run(plan: &Plan, helper: &Path) -> Result<Report> {
    let started = Instant::now();
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let load_before = tools::load_average();
    let scratch = tempfile::Builder::new()
        .prefix("arbor-compare-")
        .tempdir()
        .context("create a temporary directory for the comparison")?;
    make_traversable(scratch.path())?;
    eprintln!("compare: probing the tools");
    let toolbox = Toolbox::detect(&scratch.path().join("tools"))?;
    for t in &toolbox.reports {
        eprintln!("compare:   {:<18} {}", t.tool, t.summary());
    }
    let mut results = Vec::new();
    let mut backend = String::from("(not opened)");
    for (index, workload) in plan.workloads.iter().enumerate() {
        let left = plan.budget.saturating_sub(started.elapsed());
        let weights: f64 = plan.workloads[index..].iter().map(budget_weight).sum();
        let share = left.mul_f64(budget_weight(workload) / weights);
        let deadline = Instant::now() + share;
        eprintln!(
            "compare: workload {} ({}), {:.0} s of the time budget",
            workload.name,
            workload.description,
            share.as_secs_f64()
        );
        let dir = scratch.path().join(workload.name);
        let t0 = Instant::now();
        let ws = prepare_workspace(&dir.join("ws"), workload)?;
        eprintln!(
            "compare:   generated in {:.1} s",
            t0.elapsed().as_secs_f64()
        );
        let mut prepared: Vec<Prepared> = Vec::new();
        for id in MethodId::ALL {
            let t0 = Instant::now();
            let method = match toolbox.state(id) {
                ToolState::NotInstalled(why) | ToolState::CannotRun(why) => {
                    Err(Outcome::Unavailable(why))
                }
                ToolState::Ready if id != MethodId::Arbor && Instant::now() >= deadline => Err(
                    Outcome::Skipped("time budget spent before this method was prepared".into()),
                ),
                ToolState::Ready => methods::prepare(id, &toolbox, &ws, &dir, helper)
                    .map_err(|e| Outcome::Failed(format!("prepare: {e:#}"))),
            };
            if let Ok(m) = &method
                && let Some(b) = m.backend()
            {
                backend = b;
            }
            eprintln!(
                "compare:   {:<26} {}",
                id.name(),
                match &method {
                    Ok(_) => format!("ready in {:.1} s", t0.elapsed().as_secs_f64()),
                    Err(o) => describe_outcome(o),
                }
            );
            prepared.push((id, method));
        }
        // Per method: wall-clock seconds of one single-fork sample (cleanup
        // included), to estimate what larger cases cost before running them.
        let mut fork1_wall: Vec<Option<f64>> = vec![None; prepared.len()];
        for op in plan.operations(workload) {
            let t0 = Instant::now();
            let rounds = plan.samples(workload, op);
            let (case, walls) = measure_case(
                plan,
                workload,
                op,
                rounds,
                deadline,
                &fork1_wall,
                &mut prepared,
            );
            if op == Operation::Fork(1) {
                fork1_wall = walls;
            }
            results.extend(case);
            eprintln!(
                "compare:     (the case took {:.1} s)",
                t0.elapsed().as_secs_f64()
            );
        }
        let t0 = Instant::now();
        // Methods clean up (containers, images, worktrees) before their files go.
        drop(prepared);
        remove_dir_logged(&dir);
        eprintln!(
            "compare:   cleaned up in {:.1} s; {:.0} s since the start",
            t0.elapsed().as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
    }
    if let Err(e) = toolbox.cleanup() {
        eprintln!("compare: cleaning up the tools' state: {e:#}");
    }
    drop(scratch);
    Ok(Report {
        plan: plan.clone(),
        started_unix,
        wall: started.elapsed(),
        host: HostInfo {
            cpus: std::thread::available_parallelism()
                .map(usize::from)
                .unwrap_or(1),
            kernel: tools::first_line_of("uname", &["-r"]).unwrap_or_else(|| "?".to_owned()),
            uid: tools::effective_uid(),
            load_before,
            load_after: tools::load_average(),
            backend,
        },
        tools: toolbox.reports.clone(),
        results,
    })
}

/// Measure one operation on one workload for every method, interleaved by
/// round. Returns one result per method (and the disk results for the fork
/// count that yields them), and each method's mean wall-clock time per sample.
fn measure_case(
    plan: &Plan,
    workload: &ComparisonWorkload,
    op: Operation,
    rounds: usize,
    deadline: Instant,
    fork1_wall: &[Option<f64>],
    prepared: &mut [Prepared],
) -> (Vec<CaseResult>, Vec<Option<f64>>) {
    let disk_op = match op {
        Operation::Fork(n) if n == plan.disk_forks => Some(Operation::Disk(n)),
        _ => None,
    };
    let mut progress: Vec<CaseProgress> =
        prepared.iter().map(|_| CaseProgress::default()).collect();
    let mut excluded: Vec<Option<Outcome>> = prepared
        .iter()
        .map(|(id, method)| match method {
            Err(outcome) => Some(outcome.clone()),
            Ok(m) => {
                if let Err(why) = m.supports(op) {
                    Some(Outcome::NotApplicable(why))
                } else if let Operation::Fork(n) = op
                    && id.is_copy_based()
                    && workload.name == LARGE.name
                    && n > plan.copy_limit_large
                {
                    Some(Outcome::Skipped(format!(
                        "copy-based alternatives run at N ≤ {} on the large workspace",
                        plan.copy_limit_large
                    )))
                } else {
                    None
                }
            }
        })
        .collect();
    for round in 0..rounds {
        let count = prepared.len();
        for step in 0..count {
            // Rotate the order each round so no method always runs first.
            let i = (step + round) % count;
            let (id, Ok(method)) = &mut prepared[i] else {
                continue;
            };
            let p = &mut progress[i];
            if excluded[i].is_some()
                || p.failure.is_some()
                || p.skipped.is_some()
                || (!p.samples.is_empty() && p.spent >= plan.case_cap)
            {
                continue;
            }
            // Would the sample fit in the workload's share of the budget?
            let estimate = p.mean_wall().or_else(|| match op {
                Operation::Fork(n) => fork1_wall[i].map(|w| w * n as f64),
                Operation::Restore => fork1_wall[i],
                _ => None,
            });
            let left = deadline.saturating_duration_since(Instant::now());
            if let Some(estimate) = estimate
                && estimate > left.as_secs_f64()
                && !(*id == MethodId::Arbor && p.samples.is_empty())
            {
                if p.samples.is_empty() {
                    p.skipped = Some(format!(
                        "time budget: a sample would take about {estimate:.0} s, {:.0} s were left \
                         for this workload",
                        left.as_secs_f64()
                    ));
                }
                continue;
            }
            // Write back every dirty page first (untimed), so no method pays
            // for the writes of the one before it (cp -a leaves tens of MB
            // dirty, and the next fsync or syncfs would flush them).
            flush_page_cache();
            let t0 = Instant::now();
            let sample = match op {
                Operation::Snapshot => method.snapshot(round as u64 + 1),
                Operation::Fork(n) => method.fork(n).map(|(elapsed, mut forks)| {
                    if disk_op.is_some() && p.disk.is_none() {
                        p.disk = Some(
                            disk_of(forks.as_mut())
                                .map(|b| b as f64)
                                .map_err(|e| format!("{e:#}")),
                        );
                    }
                    drop(forks);
                    elapsed
                }),
                Operation::Restore => method.restore(),
                Operation::PythonTest => method.python_test(),
                Operation::ExecTrue => method.exec_true(),
                Operation::Disk(_) => Err(anyhow::anyhow!("disk is measured with the forks")),
            };
            p.spent += t0.elapsed();
            match sample {
                Ok(d) => p.samples.push(d.as_secs_f64()),
                Err(e) => p.failure = Some(format!("{e:#}")),
            }
        }
    }
    let mut out = Vec::new();
    let mut walls = Vec::new();
    let mut line = format!(
        "compare:   {:<48}",
        format!("{} {}", workload.name, op.label())
    );
    for (i, (id, _)) in prepared.iter().enumerate() {
        let p = std::mem::take(&mut progress[i]);
        walls.push(p.mean_wall());
        let outcome = if let Some(o) = excluded[i].take() {
            o
        } else if let Some(f) = p.failure {
            Outcome::Failed(f)
        } else if p.samples.is_empty() {
            Outcome::Skipped(p.skipped.unwrap_or_else(|| "no sample was taken".into()))
        } else {
            Outcome::Measured(p.samples)
        };
        match &outcome {
            Outcome::Measured(s) => {
                let med = report::Stats::of(s).map_or(f64::NAN, |st| st.median);
                line.push_str(&format!(
                    " {}={}",
                    id.key(),
                    report::format_value(med, op.unit())
                ));
            }
            Outcome::Skipped(_) | Outcome::Failed(_) => {
                line.push_str(&format!(" {}={}", id.key(), describe_outcome(&outcome)));
            }
            _ => {}
        }
        if let Some(disk) = disk_op {
            let disk_outcome = match (&outcome, p.disk) {
                (Outcome::Measured(_), Some(Ok(bytes))) => Outcome::Measured(vec![bytes]),
                (Outcome::Measured(_), Some(Err(e))) => Outcome::Failed(e),
                (Outcome::Measured(_), None) => Outcome::Failed("no forks were measured".into()),
                (other, _) => other.clone(),
            };
            out.push(CaseResult {
                workload: workload.name,
                operation: disk,
                method: *id,
                outcome: disk_outcome,
            });
        }
        out.push(CaseResult {
            workload: workload.name,
            operation: op,
            method: *id,
            outcome,
        });
    }
    eprintln!("{line}");
    // The operation before its disk measurement.
    out.sort_by_key(|r| matches!(r.operation, Operation::Disk(_)));
    (out, walls)
}

/// `sync(1)`: write back all dirty data, best effort.
fn flush_page_cache() {
    if let Err(e) = std::process::Command::new("sync").status() {
        eprintln!("compare: sync: {e}");
    }
}

/// Change one file in each fork and measure the disk they use.
fn disk_of(forks: &mut dyn Forks) -> Result<u64> {
    forks
        .change_one_file_each()
        .context("change one file in each fork")?;
    forks.disk_bytes().context("measure the forks' disk use")
}

/// A one-line description of a non-measured outcome.
pub fn describe_outcome(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Measured(s) => format!("{} samples", s.len()),
        Outcome::NotApplicable(why) => format!("n/a: {why}"),
        Outcome::Unavailable(why) => format!("unavailable: {why}"),
        Outcome::Skipped(why) => format!("skipped: {why}"),
        Outcome::Failed(why) => format!("failed: {why}"),
    }
}

/// Let every user traverse `dir` (Arbor's sandbox root is an unprivileged
/// mapped uid when the bench runs as real root).
fn make_traversable(dir: &Path) -> Result<()> {
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .with_context(|| format!("chmod {}", dir.display()))
}

/// Remove `dir`, reporting (not failing on) errors.
fn remove_dir_logged(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        eprintln!("compare: could not remove {}: {e}", dir.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_cover_the_issue() {
        let full = Plan::full();
        assert_eq!(full.workloads, vec![SMALL, MEDIUM, LARGE]);
        assert_eq!(full.fork_counts, vec![1, 8, 64]);
        assert_eq!(LARGE.spec.files, 20_000);
        assert_eq!(LARGE.spec.total_bytes, 500 * MB);
        assert_eq!(MEDIUM.spec.files, 2_000);
        let ops = full.operations(&SMALL);
        assert!(ops.contains(&Operation::ExecTrue));
        assert!(!full.operations(&LARGE).contains(&Operation::ExecTrue));
        assert!(full.samples(&LARGE, Operation::Fork(8)) <= 3);
        assert_eq!(Plan::quick().samples(&SMALL, Operation::Snapshot), 1);
    }

    #[test]
    fn workspace_has_the_test_and_the_edited_file() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = prepare_workspace(&tmp.path().join("ws"), &SMALL).expect("prepare");
        assert!(ws.dir.join(PYTHON_TEST_PATH).is_file());
        assert!(ws.dir.join(EDITED_FILE).is_file());
    }
}
