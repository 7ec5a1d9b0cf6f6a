//! Measured compatibility of the verifier with upstream test runs, on code
//! nobody here wrote:
//!
//! - CPython's own test files for 14 pure-Python standard-library modules
//!   (Debian's `libpython3.11-testsuite`), each graded against its
//!   unmodified module copied into the workspace as `ws_<module>.py` (the
//!   test file's imports of the module rewritten to that name), compared
//!   with `python3 -m unittest` discovery of the same files;
//! - the pytest suites of five PyPI packages (sdists fetched by name with
//!   pinned hashes by `.ci/prerequisites`), compared with plain `pytest`.
//!
//! Both sides run in sandboxes of the same root snapshot: the verifier
//! across its process boundary (`TaskEnv::check_report`, upstream
//! semantics), the baseline as upstream runs it (tests/compat/baseline.py).
//! Per test id, the outcomes must agree for at least 98% of the ids of each
//! group (stdlib; the gated PyPI packages); every disagreement is printed
//! with the verifier's reason, and the table is written to
//! `target/arbor-verifier/upstream-compat.md`.
//!
//! The full measurement runs as root on the overlay backend (the first
//! pass of `make test`); the copy-backend and unprivileged passes run a
//! quick subset (one module, one package), which proves the path works
//! there. `ARBOR_COMPAT=full|quick` overrides.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use arbor_envs::verifier::verifier_site;
use arbor_envs::{TaskEnv, TaskSpec};
use arbor_runtime::sandbox::ReadOnlyMount;
use arbor_runtime::{ExecOptions, Runtime, Snapshot};
use arbor_tests::{TestRuntime, is_root, runtime};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");
const BASELINE: &str = include_str!("../compat/baseline.py");
const LIB: &str = "/usr/lib/python3.11";

/// The standard-library modules measured.
const STDLIB: &[&str] = &[
    "colorsys",
    "shlex",
    "textwrap",
    "fnmatch",
    "graphlib",
    "getopt",
    "calendar",
    "ipaddress",
    "string",
    "fractions",
    "bisect",
    "heapq",
    "base64",
    "difflib",
];

/// A PyPI package measured: its sdist folder, where its code and tests are,
/// and whether it counts toward the gate.
struct Package {
    name: &'static str,
    sdist: &'static str,
    /// (from, to) folders of code copied into the workspace.
    code: &'static [(&'static str, &'static str)],
    /// Folder of the sdist whose `test*.py` files are the checks.
    tests: &'static str,
    /// Whether it counts toward the 98% gate.
    gated: bool,
}

const PACKAGES: &[Package] = &[
    Package {
        name: "more-itertools",
        sdist: "more-itertools-10.5.0",
        code: &[("more_itertools", "more_itertools")],
        tests: "tests",
        gated: true,
    },
    Package {
        name: "cachetools",
        sdist: "cachetools-5.5.0",
        code: &[("src/cachetools", "cachetools")],
        tests: "tests",
        gated: true,
    },
    Package {
        name: "inflection",
        sdist: "inflection-0.5.1",
        code: &[("inflection", "inflection")],
        tests: ".",
        gated: true,
    },
    // A src layout whose exception classes cross the boundary as classes
    // (`pytest.raises(ISO8601Error)`; pytest then tests their truth value).
    Package {
        name: "isodate",
        sdist: "isodate-0.7.2",
        code: &[("src/isodate", "isodate")],
        tests: "tests",
        gated: true,
    },
    Package {
        name: "toolz",
        sdist: "toolz-1.0.0",
        code: &[("toolz", "toolz"), ("tlz", "tlz")],
        tests: "toolz/tests",
        gated: false,
    },
];

/// One measured suite's outcome.
struct Measured {
    name: String,
    total: usize,
    agree: usize,
    /// (id, baseline outcome, verifier outcome, verifier detail).
    disagreements: Vec<(String, String, String, String)>,
    verifier_ms: u128,
    problem: Option<String>,
}

fn full() -> bool {
    match std::env::var("ARBOR_COMPAT").as_deref() {
        Ok("full") => true,
        Ok("quick") => false,
        _ => is_root() && std::env::var("ARBOR_BACKEND").as_deref() != Ok("copy"),
    }
}

fn sdists() -> PathBuf {
    let dir = std::env::var_os("ARBOR_UPSTREAM_SDISTS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/upstream-sdists"),
        PathBuf::from,
    );
    assert!(
        dir.join("inflection-0.5.1/.arbor-ok").is_file(),
        "the PyPI sdists are missing from {}: run .ci/prerequisites (or .ci/fetch-upstream DIR and set ARBOR_UPSTREAM_SDISTS)",
        dir.display()
    );
    dir
}

/// A test file's imports of `module` rewritten to `ws_<module>` (the name
/// the module has in the workspace, so it does not shadow the standard
/// library's own copy).
fn rewrite_imports(src: &str, module: &str) -> String {
    let new = format!("ws_{module}");
    let mut out = String::with_capacity(src.len() + 256);
    for line in src.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let trimmed = body.trim_start();
        let indent = &body[..body.len() - trimmed.len()];
        let rewritten = if trimmed.trim_end() == format!("import {module}") {
            format!("{indent}import {new} as {module}")
        } else if let Some(rest) = trimmed.strip_prefix(&format!("from {module} import")) {
            format!("{indent}from {new} import{rest}")
        } else if let Some(rest) = trimmed.strip_prefix(&format!("import {module}, ")) {
            format!("{indent}import {new} as {module}; import {rest}")
        } else {
            body.replace(
                &format!("import_fresh_module('{module}'"),
                &format!("import_fresh_module('{new}'"),
            )
            .replace(
                &format!("import_fresh_module(\"{module}\""),
                &format!("import_fresh_module(\"{new}\""),
            )
        };
        out.push_str(&rewritten);
        if line.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

fn copy_tree(from: &Path, to: &Path, skip: &dyn Fn(&Path) -> bool) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let path = e.path();
        if skip(&path) {
            continue;
        }
        let ty = e.file_type().unwrap();
        if ty.is_dir() {
            if e.file_name() != "__pycache__" {
                copy_tree(&path, &to.join(e.file_name()), skip);
            }
        } else if ty.is_file() {
            std::fs::copy(&path, to.join(e.file_name())).unwrap();
        }
    }
}

fn write_task(dir: &Path, runner: &str) {
    let id = dir.file_name().unwrap().to_string_lossy();
    std::fs::write(
        dir.join("task.toml"),
        format!(
            r#"id = "{id}"
family = "upstream"
group = "compat"
difficulty = "easy"
instructions = "Upstream compatibility measurement."

[limits]
max_steps = 1
step_timeout_s = 10
total_time_s = 10

[paths]
allow = ["*.py"]

[checks]
runner = "{runner}"
semantics = "upstream"
timeout_s = 1800

[[gold]]
exec = "true"
"#
        ),
    )
    .unwrap();
}

/// The task of the stdlib module `m`.
fn stdlib_task(root: &Path, m: &str) -> PathBuf {
    let dir = root.join(format!("compat-{m}"));
    std::fs::create_dir_all(dir.join("workspace")).unwrap();
    std::fs::create_dir_all(dir.join("checks")).unwrap();
    std::fs::copy(
        format!("{LIB}/{m}.py"),
        dir.join(format!("workspace/ws_{m}.py")),
    )
    .unwrap();
    let test = std::fs::read_to_string(format!("{LIB}/test/test_{m}.py")).unwrap_or_else(|e| {
        panic!(
            "{LIB}/test/test_{m}.py: {e} (CPython's test files: apt-get install libpython3.11-testsuite, or run .ci/prerequisites)"
        )
    });
    std::fs::write(
        dir.join(format!("checks/test_{m}.py")),
        rewrite_imports(&test, m),
    )
    .unwrap();
    write_task(&dir, "unittest");
    dir
}

/// The task of the PyPI package `p`.
fn package_task(root: &Path, sdists: &Path, p: &Package) -> PathBuf {
    let dir = root.join(format!("compat-{}", p.name));
    let src = sdists.join(p.sdist);
    for (from, to) in p.code {
        let tests_dir = src.join(p.tests);
        copy_tree(
            &src.join(from),
            &dir.join("workspace").join(to),
            &|path: &Path| path == tests_dir,
        );
    }
    let checks = dir.join("checks/tests");
    std::fs::create_dir_all(&checks).unwrap();
    for e in std::fs::read_dir(src.join(p.tests)).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().unwrap().is_file()
            && name.ends_with(".py")
            && (name.starts_with("test") || name == "__init__.py" || name == "conftest.py")
        {
            std::fs::copy(e.path(), checks.join(&name)).unwrap();
        }
    }
    write_task(&dir, "pytest");
    dir
}

/// The baseline's folder (mounted at /verifier): baseline.py, the checks,
/// and pytest's site for pytest suites.
fn baseline_snapshot(rt: &Runtime, scratch: &Path, task: &Path, pytest: bool) -> Snapshot {
    let dir = scratch.join(format!(
        "baseline-{}",
        task.file_name().unwrap().to_string_lossy()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("baseline.py"), BASELINE).unwrap();
    copy_tree(&task.join("checks"), &dir.join("checks"), &|_| false);
    if pytest {
        let site = verifier_site().expect("pytest's trusted site (.ci/prerequisites)");
        copy_tree(&site, &dir.join("site"), &|_| false);
    }
    rt.import(&dir, None).unwrap()
}

fn measure(t: &TestRuntime, task: &Path, pytest: bool) -> Measured {
    let rt = &t.runtime;
    let name = task
        .file_name()
        .unwrap()
        .to_string_lossy()
        .trim_start_matches("compat-")
        .to_owned();
    let env = TaskEnv::prepare(rt, TaskSpec::load(task).unwrap()).unwrap();

    // The baseline, as upstream runs it, in a sandbox of the same root.
    let base_snap = baseline_snapshot(rt, &t.scratch("baselines"), task, pytest);
    let mut sb = env.root().open().unwrap();
    let mut opts = ExecOptions::with_timeout_ms(1_800_000);
    opts.mounts = vec![ReadOnlyMount::new(&base_snap, "verifier").unwrap()];
    let mode = if pytest { "pytest" } else { "unittest" };
    let obs = sb
        .exec(
            &format!(
                "/usr/bin/python3 -B /verifier/baseline.py {mode} /workspace/.arbor-baseline.json ."
            ),
            &opts,
        )
        .unwrap();
    let out = sb.read_file(".arbor-baseline.json").unwrap_or_else(|e| {
        panic!(
            "{name}: the baseline wrote no result ({e}): {}",
            String::from_utf8_lossy(&obs.stderr)
        )
    });
    let baseline: BTreeMap<String, String> = serde_json::from_slice(&out).unwrap();
    assert!(
        baseline.len() >= 5,
        "{name}: the baseline ran {} tests",
        baseline.len()
    );

    // The verifier, across its process boundary.
    let t0 = Instant::now();
    let run = env
        .check_report(env.root())
        .unwrap()
        .unwrap_or_else(|why| panic!("{name}: the verifier gave no report: {why}"));
    let verifier_ms = t0.elapsed().as_millis();
    let by_id: BTreeMap<&str, (&str, &str)> = run
        .tests
        .iter()
        .map(|r| (r.id.as_str(), (r.outcome.as_str(), r.detail.as_str())))
        .collect();
    let mut agree = 0;
    let mut disagreements = Vec::new();
    for (id, want) in &baseline {
        let (got, detail) = by_id.get(id.as_str()).copied().unwrap_or(("missing", ""));
        if got == want {
            agree += 1;
        } else {
            disagreements.push((
                id.clone(),
                want.clone(),
                got.to_owned(),
                detail.lines().last().unwrap_or_default().to_owned(),
            ));
        }
    }
    Measured {
        name,
        total: baseline.len(),
        agree,
        disagreements,
        verifier_ms,
        problem: run.problem.or(run.subject),
    }
}

fn table(title: &str, rows: &[Measured]) -> (String, usize, usize) {
    let mut s = format!(
        "### {title}\n\n| suite | tests | agree | % | verifier s |\n|---|---|---|---|---|\n"
    );
    let (mut total, mut agree) = (0, 0);
    for m in rows {
        total += m.total;
        agree += m.agree;
        s.push_str(&format!(
            "| {} | {} | {} | {:.2} | {:.1} |\n",
            m.name,
            m.total,
            m.agree,
            100.0 * m.agree as f64 / m.total as f64,
            m.verifier_ms as f64 / 1000.0
        ));
    }
    s.push_str(&format!(
        "| **all** | {total} | {agree} | {:.2} | |\n\nDisagreements:\n\n",
        100.0 * agree as f64 / total.max(1) as f64
    ));
    for m in rows {
        if let Some(p) = &m.problem {
            s.push_str(&format!("- {}: run problem: {p}\n", m.name));
        }
        for (id, want, got, why) in &m.disagreements {
            s.push_str(&format!(
                "- `{id}`: upstream {want}, verifier {got}: {}\n",
                why.chars().take(200).collect::<String>()
            ));
        }
    }
    (s, total, agree)
}

fn save(report: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/arbor-verifier");
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join("upstream-compat.md"), report);
    }
}

#[test]
fn upstream_suites_grade_as_upstream_runs_them() {
    let t = runtime(Path::new(HELPER));
    let root = t.scratch("tasks");
    let full = full();
    let sdists = sdists();

    let modules: Vec<&str> = if full {
        STDLIB.to_vec()
    } else {
        vec!["fractions"]
    };
    let stdlib: Vec<Measured> = modules
        .iter()
        .map(|m| measure(&t, &stdlib_task(&root, m), false))
        .collect();
    let packages: Vec<&Package> = PACKAGES
        .iter()
        .filter(|p| full || p.name == "inflection")
        .collect();
    let (gated, reported): (Vec<&Package>, Vec<&Package>) =
        packages.into_iter().partition(|p| p.gated);
    let pypi: Vec<Measured> = gated
        .iter()
        .map(|p| measure(&t, &package_task(&root, &sdists, p), true))
        .collect();
    let extra: Vec<Measured> = reported
        .iter()
        .map(|p| measure(&t, &package_task(&root, &sdists, p), true))
        .collect();

    let (s1, total1, agree1) = table(
        "CPython test files (unittest discovery) vs the verifier",
        &stdlib,
    );
    let (s2, total2, agree2) = table("PyPI pytest suites vs the verifier", &pypi);
    let mut report = format!(
        "Mode: {}\n\n{s1}\n{s2}",
        if full { "full" } else { "quick" }
    );
    if !extra.is_empty() {
        report.push_str(&format!(
            "\n{}",
            table("Measured, not gated (see README)", &extra).0
        ));
    }
    println!("{report}");
    save(&report);
    for (what, total, agree) in [("stdlib", total1, agree1), ("pypi", total2, agree2)] {
        assert!(
            agree as f64 >= 0.98 * total as f64,
            "{what}: {agree}/{total} agree, under 98%\n\n{report}"
        );
    }
}

#[test]
fn import_rewriting_keeps_everything_else() {
    let src = "import textwrap\nfrom textwrap import dedent\n    import textwrap\nimport textwrapper\nx = import_fresh_module('textwrap')\nimport textwrap, os\n";
    assert_eq!(
        rewrite_imports(src, "textwrap"),
        "import ws_textwrap as textwrap\nfrom ws_textwrap import dedent\n    import ws_textwrap as textwrap\nimport textwrapper\nx = import_fresh_module('ws_textwrap')\nimport ws_textwrap as textwrap; import os\n"
    );
}
