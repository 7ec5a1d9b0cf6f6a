//! Rendering a comparison [`Report`]: Markdown (`compare.md`), JSON
//! (`compare.json`) and an SVG chart of fork latency by workspace size
//! (`fork-latency.svg`), plus the published figures of hosted peers, which
//! are kept in their own table and never enter a measured ratio.
//!
//! (~1,040 lines, most of it the Markdown, JSON and SVG templates of one
//! report and their tests.)

use std::fmt::Write as _;

use super::{MethodId, Operation, Outcome, Report, Unit};

/// Median, minimum and maximum of a case's samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    /// The median (the mean of the middle two for an even count).
    pub median: f64,
    /// The smallest sample.
    pub min: f64,
    /// The largest sample.
    pub max: f64,
    /// The number of samples.
    pub n: usize,
}

impl Stats {
    /// The statistics of `samples`; `None` when there are none.
    pub fn of(samples: &[f64]) -> Option<Self> {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Self {
            median,
            min: sorted[0],
            max: sorted[n - 1],
            n,
        })
    }
}

/// Three significant digits, without a trailing `.0` run.
fn sig3(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A value in its unit: `850 µs`, `4.52 ms`, `1.23 s`; `24.0 KiB`, `512 MiB`.
pub fn format_value(v: f64, unit: Unit) -> String {
    if !v.is_finite() {
        return "?".to_owned();
    }
    match unit {
        Unit::Seconds => {
            if v < 1e-3 {
                format!("{} µs", sig3(v * 1e6))
            } else if v < 1.0 {
                format!("{} ms", sig3(v * 1e3))
            } else {
                format!("{} s", sig3(v))
            }
        }
        Unit::Bytes => {
            const KIB: f64 = 1024.0;
            if v < KIB * KIB {
                format!("{} KiB", sig3(v / KIB))
            } else if v < KIB * KIB * KIB {
                format!("{} MiB", sig3(v / (KIB * KIB)))
            } else {
                format!("{} GiB", sig3(v / (KIB * KIB * KIB)))
            }
        }
    }
}

/// A ratio to Arbor: `×15.3`, `×0.42`.
pub fn format_ratio(r: f64) -> String {
    format!("×{}", sig3(r))
}

/// The statistics of a measured case.
pub fn stats_of(report: &Report, workload: &str, op: Operation, method: MethodId) -> Option<Stats> {
    match &report.find(workload, op, method)?.outcome {
        Outcome::Measured(samples) => Stats::of(samples),
        _ => None,
    }
}

/// `method`'s median divided by Arbor's on the same case, when both were
/// measured (never for Arbor itself).
pub fn ratio_to_arbor(
    report: &Report,
    workload: &str,
    op: Operation,
    method: MethodId,
) -> Option<f64> {
    if method == MethodId::Arbor {
        return None;
    }
    let arbor = stats_of(report, workload, op, MethodId::Arbor)?;
    let other = stats_of(report, workload, op, method)?;
    (arbor.median > 0.0).then(|| other.median / arbor.median)
}

/// A published figure of a hosted or VM-based peer (from
/// `../shared/reference/peers.md`), reported beside the measurements and
/// never compared with them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublishedFigure {
    /// The system.
    pub system: &'static str,
    /// What the figure is about.
    pub operation: &'static str,
    /// The figure as published.
    pub figure: &'static str,
    /// Vendor claim, project documentation, benchmark file, ...
    pub kind: &'static str,
    /// Where it was published.
    pub source: &'static str,
}

/// The published figures of the peers named in issue 7 (Firecracker
/// restore, Morph branch, E2B and CodeSandbox fork/resume) and a few more,
/// as collected in `../shared/reference/peers.md`.
pub const PUBLISHED: &[PublishedFigure] = &[
    PublishedFigure {
        system: "Firecracker",
        operation: "snapshot restore (resume a microVM)",
        figure: "< 8 ms target, p90 5 ms (2 vCPU, 512 MiB)",
        kind: "project documentation",
        source: "firecracker `docs/snapshotting/snapshot-support.md` (older revision)",
    },
    PublishedFigure {
        system: "Firecracker",
        operation: "snapshot create",
        figure: "Full 180 ms, Diff 70 ms (2 vCPU, 256 MiB)",
        kind: "test baselines",
        source: "firecracker `test_snapshot_perf.py` (older revision)",
    },
    PublishedFigure {
        system: "Morph Cloud (Infinibranch)",
        operation: "snapshot, branch and restore",
        figure: "under 250 ms",
        kind: "vendor claim",
        source: "cloud.morph.so/developers",
    },
    PublishedFigure {
        system: "E2B",
        operation: "pause (filesystem + memory)",
        figure: "≈ 4 s per GiB",
        kind: "documentation (beta)",
        source: "E2B persistence docs; e2b PR #516",
    },
    PublishedFigure {
        system: "E2B",
        operation: "resume a paused sandbox",
        figure: "≈ 1 s",
        kind: "documentation (beta)",
        source: "E2B persistence docs; e2b PR #516",
    },
    PublishedFigure {
        system: "E2B",
        operation: "filesystem-only restore (cold boot)",
        figure: "≈ 0.51 s",
        kind: "pull request measurement",
        source: "e2b-dev/infra PR #2965",
    },
    PublishedFigure {
        system: "CodeSandbox",
        operation: "fork (clone a VM)",
        figure: "within 2 s; live fork adds ≈ 0.5 s",
        kind: "SDK documentation",
        source: "CodeSandbox SDK fork docs",
    },
    PublishedFigure {
        system: "CodeSandbox",
        operation: "resume / hibernate",
        figure: "0.5–2 s / 3–10 s",
        kind: "SDK documentation",
        source: "CodeSandbox SDK fork docs",
    },
    PublishedFigure {
        system: "gVisor (RFC)",
        operation: "fork with the writable layer kept out of the image",
        figure: "220–290 ms per fork, flat from N = 1 to 64",
        kind: "RFC measurement",
        source: "google/gvisor RFC #14229",
    },
    PublishedFigure {
        system: "Mitos",
        operation: "fork → first exec",
        figure: "P50 ≈ 104 ms (bare-metal i7-6700)",
        kind: "project benchmark",
        source: "Mitos `BENCHMARKS.md`",
    },
    PublishedFigure {
        system: "Daytona",
        operation: "start from snapshot",
        figure: "sub-90 ms",
        kind: "vendor claim",
        source: "daytona.io",
    },
];

/// `YYYY-MM-DD HH:MM UTC` for seconds since the Unix epoch.
pub fn format_utc(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        secs / 3600,
        (secs % 3600) / 60
    )
}

/// One table cell for a case.
fn cell(report: &Report, workload: &str, op: Operation, method: MethodId) -> String {
    let Some(result) = report.find(workload, op, method) else {
        return String::new();
    };
    match &result.outcome {
        Outcome::Measured(samples) => match Stats::of(samples) {
            Some(s) => {
                let unit = op.unit();
                let mut text = format!("**{}**", format_value(s.median, unit));
                if s.n > 1 {
                    let _ = write!(
                        text,
                        " ({}–{}, n={})",
                        format_value(s.min, unit),
                        format_value(s.max, unit),
                        s.n
                    );
                }
                if let Some(r) = ratio_to_arbor(report, workload, op, method) {
                    let _ = write!(text, " {}", format_ratio(r));
                }
                text
            }
            None => "no samples".to_owned(),
        },
        Outcome::NotApplicable(_) => "—".to_owned(),
        Outcome::Unavailable(_) => "unavailable".to_owned(),
        Outcome::Skipped(_) => "skipped".to_owned(),
        Outcome::Failed(_) => "failed".to_owned(),
    }
}

/// Escape `|` for a Markdown table cell and keep it on one line.
fn md_cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The operations present for `workload`, in table order.
fn operations_of(report: &Report, workload: &str) -> Vec<Operation> {
    let mut ops: Vec<Operation> = Vec::new();
    for r in report.results.iter().filter(|r| r.workload == workload) {
        if !ops.contains(&r.operation) {
            ops.push(r.operation);
        }
    }
    ops.sort_by_key(|op| op.rank());
    ops
}

/// The whole report as Markdown.
pub fn to_markdown(report: &Report) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Arbor and the alternatives, side by side\n");
    let _ = writeln!(
        md,
        "Generated by `cargo bench -p arbor-benches --bench compare` (part of `make bench`) on {}{}, \
         in {:.1} min. Host: {} CPUs, Linux {}, {}, Arbor backend {}; load average {} at the start, \
         {} at the end.\n",
        format_utc(report.started_unix),
        if report.plan.quick {
            " — **quick smoke mode: small workspace, one sample, not a measurement**"
        } else {
            ""
        },
        report.wall.as_secs_f64() / 60.0,
        report.host.cpus,
        report.host.kernel,
        if report.host.uid == 0 {
            "as root".to_owned()
        } else {
            format!("as uid {}", report.host.uid)
        },
        report.host.backend,
        report.host.load_before,
        report.host.load_after,
    );
    let _ = writeln!(
        md,
        "Cells: **median** (min–max, n samples) and ×R, the method's median divided by Arbor's \
         on the same row (above 1: Arbor is faster, or smaller on disk). Every timed operation \
         ends when the command has exited in every fork; the forks of one sample are made by \
         min(N, {}) threads for every method, and the samples of one row are interleaved \
         (one of each method per round) so load on the shared machine hits all methods alike. \
         — : the method has no such operation.\n",
        super::methods::MAX_THREADS
    );
    md.push_str(METHOD_TABLE);
    md.push('\n');
    md.push_str(METHOD_NOTES);
    md.push('\n');

    let _ = writeln!(md, "## Tools\n");
    let _ = writeln!(md, "| tool | status | version | how it ran |");
    let _ = writeln!(md, "|---|---|---|---|");
    for t in &report.tools {
        let status = match &t.state {
            super::tools::ToolState::Ready => "ready".to_owned(),
            super::tools::ToolState::NotInstalled(why) => format!("not installed ({why})"),
            super::tools::ToolState::CannotRun(why) => format!("cannot run: {why}"),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            t.tool,
            md_cell(&status),
            md_cell(t.version.as_deref().unwrap_or("")),
            md_cell(t.note.as_deref().unwrap_or(""))
        );
    }
    md.push('\n');

    for workload in &report.plan.workloads {
        let _ = writeln!(
            md,
            "## Results: {} workspace ({})\n",
            workload.name, workload.description
        );
        let _ = write!(md, "| operation |");
        for m in MethodId::ALL {
            let _ = write!(md, " {} |", m.name());
        }
        let _ = write!(md, "\n|---|");
        for _ in MethodId::ALL {
            md.push_str("---|");
        }
        md.push('\n');
        let ops = operations_of(report, workload.name);
        for op in &ops {
            let _ = write!(md, "| {} |", op.label());
            for m in MethodId::ALL {
                let _ = write!(md, " {} |", cell(report, workload.name, *op, m));
            }
            md.push('\n');
        }
        // The reasons behind cells that are neither measured nor n/a.
        let mut notes: Vec<String> = Vec::new();
        for r in report
            .results
            .iter()
            .filter(|r| r.workload == workload.name)
        {
            let why = match &r.outcome {
                Outcome::Unavailable(w) => format!("{}: unavailable: {w}", r.method.name()),
                Outcome::Skipped(w) => format!("{}: skipped: {w}", r.method.name()),
                Outcome::Failed(w) => {
                    format!("{}, {}: failed: {w}", r.method.name(), r.operation.label())
                }
                _ => continue,
            };
            if !notes.contains(&why) {
                notes.push(why);
            }
        }
        if !notes.is_empty() {
            md.push('\n');
            for n in notes {
                let _ = writeln!(md, "- {}", n.replace('\n', " "));
            }
        }
        md.push('\n');
    }

    let _ = writeln!(md, "## Fork latency by workspace size\n");
    let _ = writeln!(
        md,
        "![Fork latency by workspace size](fork-latency.svg)\n\n\
         Fork 1 and fork 8, until `true` has exited in every fork (medians):\n"
    );
    let _ = write!(md, "| method |");
    for w in &report.plan.workloads {
        for n in [1, 8] {
            let _ = write!(md, " {} · {n} |", w.name);
        }
    }
    let _ = write!(md, "\n|---|");
    for _ in &report.plan.workloads {
        md.push_str("---|---|");
    }
    md.push('\n');
    for m in MethodId::ALL {
        let values: Vec<Option<Stats>> = report
            .plan
            .workloads
            .iter()
            .flat_map(|w| [1, 8].map(|n| stats_of(report, w.name, Operation::Fork(n), m)))
            .collect();
        if values.iter().all(Option::is_none) {
            continue;
        }
        let _ = write!(md, "| {} |", m.name());
        for v in values {
            let _ = write!(
                md,
                " {} |",
                v.map(|s| format_value(s.median, Unit::Seconds))
                    .unwrap_or_default()
            );
        }
        md.push('\n');
    }
    md.push('\n');

    let _ = writeln!(
        md,
        "## Published figures of hosted peers (not measured here)\n\n\
         These systems run elsewhere (hosted services, microVMs with memory snapshots) and were \
         not run by this benchmark. Their figures are quoted as published, on their own hardware \
         and terms, from `../shared/reference/peers.md`; they are **never** part of the ratios \
         above.\n"
    );
    let _ = writeln!(
        md,
        "| system | operation | published figure | kind | source |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|");
    for p in PUBLISHED {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            p.system, p.operation, p.figure, p.kind, p.source
        );
    }
    md
}

const METHOD_TABLE: &str = "\
| method | snapshot after one small edit | fork N | restore a stored snapshot | command in a fork |
|---|---|---|---|---|
| Arbor | `Sandbox::snapshot()`: syncfs, hash the upper directory, seal it as a layer | `Snapshot::open()` + `exec(\"true\")` per fork (warm pool refilled before each sample) | a new `Runtime` on the store, load the snapshot, open it, `true` | `Sandbox::exec` in an open sandbox |
| unshare + overlay (floor) | `sync -f` of the upper directory, rename it into a lower layer | `unshare --user --map-root-user --mount` + `mount -t overlay` + `true` per fork | the same over the stored layer chain | — |
| cp -a | `cp -a` of the working directory | `cp -a` + `true` in the copy | `cp -a` of the stored copy + `true` | — |
| tar | `tar -cf` of the working directory | `tar -xf` into a new directory + `true` | extract the stored tarball + `true` | — |
| git worktree | `git add -A` + `git commit` | `git worktree add --detach` + `true` | `git worktree add` of the stored commit + `true` | — |
| host process | — | — | — | `bash -c` in the workspace, no isolation |
| bubblewrap | — | — | — | `bwrap --unshare-all …` running `bash -c` over the workspace |
| podman | `podman commit` of a running container | `podman run IMAGE /bin/true` per fork | `podman run` of the committed image | `podman exec` into a running container |
";

const METHOD_NOTES: &str = "\
Notes on fairness:
- The copy-based methods (cp, tar, git) and the floor run `true` directly; Arbor runs every command \
  through `bash -c` with its session capture, which costs it about 1–2 ms per command.
- cp, tar and git snapshots are left in the page cache (their default); Arbor's and the floor's \
  are made durable with `syncfs` before they count as taken. Arbor's also hashes the change and \
  seals it into its content-addressed store (one `syncfs` for all its objects and the layer, \
  then an fsync of each directory that gained a name and one for the listing), so on a busy disk \
  it pays two journal commits more than the floor.
- `git worktree add` cannot run concurrently on one repository (it races on `.git/worktrees`), \
  so git's forks add their worktrees one at a time; `true` still runs in parallel.
- Every timed sample starts after an untimed `sync`, so no method pays for the writes of the \
  method before it.
- Restore: Arbor opens a fresh `Runtime` (cold warm pool: the sandbox helper is prepared inside the \
  timed section); the page cache is warm for every method (dropping it would disturb other work on \
  the shared machine).
- Disk: bytes allocated under each method's forks after each fork appended a line to one existing \
  file: the copies, extractions or worktrees themselves (git's shared repository not counted), or \
  the overlay upper and work directories (Arbor, the floor, podman's containers).
- Copy-based methods run at N ≤ 8 on the large workspace. Python: `/usr/bin/python3 \
  tests/test_bench.py` (three unittest cases) with `PYTHONDONTWRITEBYTECODE=1` everywhere.
";

/// Minimal JSON values, written by hand (no serialisation dependency).
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number (non-finite numbers are written as `null`).
    Num(f64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object, keys in order.
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// A string value.
    pub fn str(s: impl Into<String>) -> Self {
        Self::Str(s.into())
    }

    /// An object from `(key, value)` pairs.
    pub fn obj(pairs: Vec<(&str, Json)>) -> Self {
        Self::Obj(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    }

    /// A string, or `null` for `None`.
    pub fn opt_str(s: Option<&str>) -> Self {
        s.map_or(Self::Null, Self::str)
    }

    /// Pretty-printed text (two-space indent).
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.write_to(&mut out, 0);
        out.push('\n');
        out
    }

    fn write_to(&self, out: &mut String, indent: usize) {
        match self {
            Self::Null => out.push_str("null"),
            Self::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Self::Num(v) => {
                if v.is_finite() {
                    let _ = write!(out, "{v}");
                } else {
                    out.push_str("null");
                }
            }
            Self::Str(s) => write_json_string(out, s),
            Self::Arr(items) => {
                if items.is_empty() {
                    out.push_str("[]");
                    return;
                }
                // Arrays of plain numbers stay on one line.
                if items.iter().all(|i| matches!(i, Self::Num(_))) {
                    out.push('[');
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        item.write_to(out, indent);
                    }
                    out.push(']');
                    return;
                }
                out.push_str("[\n");
                for (i, item) in items.iter().enumerate() {
                    out.push_str(&"  ".repeat(indent + 1));
                    item.write_to(out, indent + 1);
                    out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
                }
                out.push_str(&"  ".repeat(indent));
                out.push(']');
            }
            Self::Obj(pairs) => {
                if pairs.is_empty() {
                    out.push_str("{}");
                    return;
                }
                out.push_str("{\n");
                for (i, (k, v)) in pairs.iter().enumerate() {
                    out.push_str(&"  ".repeat(indent + 1));
                    write_json_string(out, k);
                    out.push_str(": ");
                    v.write_to(out, indent + 1);
                    out.push_str(if i + 1 < pairs.len() { ",\n" } else { "\n" });
                }
                out.push_str(&"  ".repeat(indent));
                out.push('}');
            }
        }
    }
}

fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The whole report as JSON.
pub fn to_json(report: &Report) -> String {
    let tools = report
        .tools
        .iter()
        .map(|t| {
            let (state, detail) = match &t.state {
                super::tools::ToolState::Ready => ("ready", None),
                super::tools::ToolState::NotInstalled(w) => ("not_installed", Some(w.as_str())),
                super::tools::ToolState::CannotRun(w) => ("cannot_run", Some(w.as_str())),
            };
            Json::obj(vec![
                ("tool", Json::str(t.tool)),
                (
                    "methods",
                    Json::Arr(t.methods.iter().map(|m| Json::str(m.key())).collect()),
                ),
                ("state", Json::str(state)),
                ("detail", Json::opt_str(detail)),
                ("version", Json::opt_str(t.version.as_deref())),
                ("note", Json::opt_str(t.note.as_deref())),
            ])
        })
        .collect();
    let workloads = report
        .plan
        .workloads
        .iter()
        .map(|w| {
            Json::obj(vec![
                ("name", Json::str(w.name)),
                ("description", Json::str(w.description)),
                ("files", Json::Num(w.spec.files as f64)),
                ("bytes", Json::Num(w.spec.total_bytes as f64)),
            ])
        })
        .collect();
    let results = report
        .results
        .iter()
        .map(|r| {
            let (status, reason, samples) = match &r.outcome {
                Outcome::Measured(s) => ("measured", None, s.clone()),
                Outcome::NotApplicable(w) => ("not_applicable", Some(w.as_str()), Vec::new()),
                Outcome::Unavailable(w) => ("unavailable", Some(w.as_str()), Vec::new()),
                Outcome::Skipped(w) => ("skipped", Some(w.as_str()), Vec::new()),
                Outcome::Failed(w) => ("failed", Some(w.as_str()), Vec::new()),
            };
            let stats = Stats::of(&samples);
            let num = |f: fn(&Stats) -> f64| stats.as_ref().map_or(Json::Null, |s| Json::Num(f(s)));
            Json::obj(vec![
                ("workload", Json::str(r.workload)),
                ("operation", Json::str(r.operation.key())),
                (
                    "n",
                    r.operation
                        .count()
                        .map_or(Json::Null, |n| Json::Num(n as f64)),
                ),
                ("method", Json::str(r.method.key())),
                (
                    "unit",
                    Json::str(match r.operation.unit() {
                        Unit::Seconds => "seconds",
                        Unit::Bytes => "bytes",
                    }),
                ),
                ("status", Json::str(status)),
                ("reason", Json::opt_str(reason)),
                (
                    "samples",
                    Json::Arr(samples.into_iter().map(Json::Num).collect()),
                ),
                ("median", num(|s| s.median)),
                ("min", num(|s| s.min)),
                ("max", num(|s| s.max)),
                (
                    "ratio_to_arbor",
                    ratio_to_arbor(report, r.workload, r.operation, r.method)
                        .map_or(Json::Null, Json::Num),
                ),
            ])
        })
        .collect();
    let published = PUBLISHED
        .iter()
        .map(|p| {
            Json::obj(vec![
                ("system", Json::str(p.system)),
                ("operation", Json::str(p.operation)),
                ("figure", Json::str(p.figure)),
                ("kind", Json::str(p.kind)),
                ("source", Json::str(p.source)),
            ])
        })
        .collect();
    Json::obj(vec![
        ("schema", Json::str("arbor-bench-compare/1")),
        (
            "command",
            Json::str("cargo bench -p arbor-benches --bench compare"),
        ),
        ("quick", Json::Bool(report.plan.quick)),
        ("started_unix", Json::Num(report.started_unix as f64)),
        ("started_utc", Json::str(format_utc(report.started_unix))),
        ("wall_seconds", Json::Num(report.wall.as_secs_f64())),
        (
            "host",
            Json::obj(vec![
                ("cpus", Json::Num(report.host.cpus as f64)),
                ("kernel", Json::str(report.host.kernel.clone())),
                ("uid", Json::Num(f64::from(report.host.uid))),
                ("arbor_backend", Json::str(report.host.backend.clone())),
                ("load_before", Json::str(report.host.load_before.clone())),
                ("load_after", Json::str(report.host.load_after.clone())),
            ]),
        ),
        ("tools", Json::Arr(tools)),
        ("workloads", Json::Arr(workloads)),
        ("results", Json::Arr(results)),
        (
            "published_peers_not_measured",
            Json::obj(vec![
                (
                    "note",
                    Json::str(
                        "published figures of hosted peers, quoted from ../shared/reference/peers.md; \
                         not measured here and never part of ratio_to_arbor",
                    ),
                ),
                ("figures", Json::Arr(published)),
            ]),
        ),
    ])
    .render()
}

/// Escape text for SVG.
fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn method_color(m: MethodId) -> &'static str {
    match m {
        MethodId::Arbor => "#1b7f3b",
        MethodId::OverlayFloor => "#6a3d9a",
        MethodId::Cp => "#d62728",
        MethodId::Tar => "#ff7f0e",
        MethodId::Git => "#8c564b",
        MethodId::Host => "#7f7f7f",
        MethodId::Bubblewrap => "#17becf",
        MethodId::Podman => "#1f77b4",
    }
}

/// An SVG line chart of fork-1 latency (median, log scale, min–max whiskers)
/// by workspace size, one line per method.
pub fn fork_chart_svg(report: &Report) -> String {
    const W: f64 = 760.0;
    const H: f64 = 440.0;
    const LEFT: f64 = 80.0;
    const RIGHT: f64 = 220.0;
    const TOP: f64 = 50.0;
    const BOTTOM: f64 = 70.0;
    let workloads = &report.plan.workloads;
    let series: Vec<(MethodId, Vec<Option<Stats>>)> = MethodId::ALL
        .iter()
        .map(|&m| {
            (
                m,
                workloads
                    .iter()
                    .map(|w| stats_of(report, w.name, Operation::Fork(1), m))
                    .collect::<Vec<_>>(),
            )
        })
        .filter(|(_, v)| v.iter().any(Option::is_some))
        .collect();
    let all: Vec<f64> = series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten().flat_map(|s| [s.min, s.max]))
        .filter(|v| *v > 0.0)
        .collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(0.0, f64::max);
    let (lo_exp, hi_exp) = if all.is_empty() {
        (-3, 0)
    } else {
        let lo_exp = lo.log10().floor() as i32;
        let hi_exp = (hi.log10().ceil() as i32).max(lo_exp + 1);
        (lo_exp, hi_exp)
    };
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let y_of = |v: f64| {
        let t = (v.log10() - f64::from(lo_exp)) / f64::from(hi_exp - lo_exp);
        TOP + plot_h * (1.0 - t)
    };
    let n = workloads.len().max(1);
    let x_of = |i: usize| LEFT + plot_w * (i as f64 + 0.5) / n as f64;

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(
        svg,
        "<rect x=\"0\" y=\"0\" width=\"{W}\" height=\"{H}\" fill=\"white\"/>"
    );
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"24\" font-size=\"15\" font-weight=\"bold\" text-anchor=\"middle\">{}</text>",
        LEFT + plot_w / 2.0,
        xml("Fork latency by workspace size (1 fork, until `true` has exited)")
    );
    // Decade grid lines and labels.
    for e in lo_exp..=hi_exp {
        let v = 10f64.powi(e);
        let y = y_of(v);
        let _ = writeln!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#dddddd\"/>",
            LEFT + plot_w
        );
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT - 8.0,
            y + 4.0,
            xml(&format_value(v, Unit::Seconds))
        );
    }
    let _ = writeln!(
        svg,
        "<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{:.1}\" stroke=\"black\"/>",
        TOP + plot_h
    );
    let _ = writeln!(
        svg,
        "<line x1=\"{LEFT}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\"/>",
        TOP + plot_h,
        LEFT + plot_w,
        TOP + plot_h
    );
    let _ = writeln!(
        svg,
        "<text x=\"18\" y=\"{:.1}\" transform=\"rotate(-90 18 {:.1})\" text-anchor=\"middle\">median, log scale (whiskers: min–max)</text>",
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    );
    for (i, w) in workloads.iter().enumerate() {
        let x = x_of(i);
        let _ = writeln!(
            svg,
            "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-weight=\"bold\">{}</text>",
            TOP + plot_h + 20.0,
            xml(w.name)
        );
        let _ = writeln!(
            svg,
            "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            TOP + plot_h + 36.0,
            xml(&format!(
                "{} files, {} MB",
                w.spec.files,
                w.spec.total_bytes / 1_000_000
            ))
        );
    }
    for (k, (m, values)) in series.iter().enumerate() {
        let color = method_color(*m);
        // A small horizontal offset per series keeps whiskers apart.
        let dx = (k as f64 - (series.len() as f64 - 1.0) / 2.0) * 4.0;
        let points: Vec<(f64, f64)> = values
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.map(|s| (x_of(i) + dx, y_of(s.median))))
            .collect();
        if points.len() > 1 {
            let path: Vec<String> = points
                .iter()
                .map(|(x, y)| format!("{x:.1},{y:.1}"))
                .collect();
            let _ = writeln!(
                svg,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>",
                path.join(" ")
            );
        }
        for (i, s) in values.iter().enumerate() {
            let Some(s) = s else { continue };
            let x = x_of(i) + dx;
            let _ = writeln!(
                svg,
                "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"{color}\"/>",
                y_of(s.min),
                y_of(s.max)
            );
            let _ = writeln!(
                svg,
                "<circle cx=\"{x:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{color}\"><title>{}</title></circle>",
                y_of(s.median),
                xml(&format!(
                    "{} on {}: {} (min {}, max {}, n={})",
                    m.name(),
                    workloads[i].name,
                    format_value(s.median, Unit::Seconds),
                    format_value(s.min, Unit::Seconds),
                    format_value(s.max, Unit::Seconds),
                    s.n
                ))
            );
        }
        let ly = TOP + 10.0 + 22.0 * k as f64;
        let lx = LEFT + plot_w + 20.0;
        let _ = writeln!(
            svg,
            "<line x1=\"{lx:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{color}\" stroke-width=\"3\"/>",
            lx + 22.0
        );
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            lx + 28.0,
            ly + 4.0,
            xml(m.name())
        );
    }
    if series.is_empty() {
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">no fork was measured</text>",
            LEFT + plot_w / 2.0,
            TOP + plot_h / 2.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{CaseResult, HostInfo, Plan, SMALL};
    use std::time::Duration;

    fn sample_report() -> Report {
        let mut plan = Plan::quick();
        plan.workloads = vec![SMALL];
        let measured = |method, op, samples: Vec<f64>| CaseResult {
            workload: "small",
            operation: op,
            method,
            outcome: Outcome::Measured(samples),
        };
        Report {
            plan,
            started_unix: 1_700_000_000,
            wall: Duration::from_secs(42),
            host: HostInfo {
                cpus: 2,
                kernel: "6.0".into(),
                uid: 0,
                load_before: "1 1 1".into(),
                load_after: "2 2 2".into(),
                backend: "overlay".into(),
            },
            tools: vec![],
            results: vec![
                measured(
                    MethodId::Arbor,
                    Operation::Fork(1),
                    vec![0.004, 0.005, 0.006],
                ),
                measured(MethodId::Cp, Operation::Fork(1), vec![0.05, 0.06]),
                CaseResult {
                    workload: "small",
                    operation: Operation::Fork(1),
                    method: MethodId::Podman,
                    outcome: Outcome::Unavailable("not \"installed\"".into()),
                },
            ],
        }
    }

    #[test]
    fn stats_and_formats() {
        let s = Stats::of(&[3.0, 1.0, 2.0, 10.0]).expect("stats");
        assert_eq!((s.median, s.min, s.max, s.n), (2.5, 1.0, 10.0, 4));
        assert!(Stats::of(&[]).is_none());
        assert_eq!(format_value(0.00452, Unit::Seconds), "4.52 ms");
        assert_eq!(format_value(0.000_85, Unit::Seconds), "850 µs");
        assert_eq!(format_value(12.34, Unit::Seconds), "12.3 s");
        assert_eq!(format_value(24.0 * 1024.0, Unit::Bytes), "24.0 KiB");
        assert_eq!(format_ratio(172.4), "×172");
        assert_eq!(format_utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(format_utc(1_700_000_000), "2023-11-14 22:13 UTC");
    }

    #[test]
    fn ratios_use_arbor_medians() {
        let report = sample_report();
        let r = ratio_to_arbor(&report, "small", Operation::Fork(1), MethodId::Cp).expect("ratio");
        assert!((r - 0.055 / 0.005).abs() < 1e-9);
        assert!(ratio_to_arbor(&report, "small", Operation::Fork(1), MethodId::Arbor).is_none());
        assert!(ratio_to_arbor(&report, "small", Operation::Fork(1), MethodId::Podman).is_none());
    }

    #[test]
    fn renders_markdown_json_and_svg() {
        let report = sample_report();
        let md = to_markdown(&report);
        assert!(md.contains("**5.00 ms** (4.00 ms–6.00 ms, n=3)"), "{md}");
        assert!(md.contains("×11.0"), "{md}");
        assert!(md.contains("Published figures of hosted peers (not measured here)"));
        let json = to_json(&report);
        assert!(json.contains("\"ratio_to_arbor\": 11"), "{json}");
        assert!(json.contains("not \\\"installed\\\""), "{json}");
        let svg = fork_chart_svg(&report);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("cp -a"));
    }
}
