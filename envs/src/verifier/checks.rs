//! Running a native task's hidden checks across the verifier's process
//! boundary.
//!
//! One verification is one *paired action* (see
//! `arbor_runtime::sandbox::protocol::PeerRequest`) in a throwaway fork of
//! the final snapshot:
//!
//! ```text
//! helper
//!  ├─ trusted runner   python3 -I -S -B $ARBOR_CHECKS/.arbor/trusted.py run
//!  │                   sees the checks at /verifier/<random>, the nonce, the
//!  │                   budget; never imports or runs workspace code
//!  └─ subject          python3 -I -S -B -c BOOTSTRAP (the code under test)
//!                      no /verifier, no nonce; reads its program from fd 3
//!     (fd 3 ⇄ fd 3: the only channel; /workspace and /tmp are shared)
//! ```
//!
//! The checks snapshot is the task's checks folder plus `.arbor/`: the
//! trusted runner and its libraries (trusted.py, arbor_boundary.py,
//! arbor_strict.py), the subject's program (subject.py), the task's check
//! configuration (config.json), and for pytest tasks the trusted site with
//! pytest (`site/`). The verdict is read from the trusted runner's one
//! nonce-tagged result line.

use std::path::{Path, PathBuf};

use arbor_rollout::env::describe_exit;
use arbor_runtime::sandbox::ReadOnlyMount;
use arbor_runtime::store::object::ExitStatus;
use arbor_runtime::{ExecOptions, PeerCommand, Sandbox, SandboxError, Snapshot};
use serde::Deserialize;

use crate::failure::CheckFailure;
use crate::task::{CheckRunner, Semantics, TaskSpec};

/// The trusted runner's entry point (main program of the verifier's paired action).
pub const TRUSTED: &str = include_str!("trusted.py");
/// The trusted runner proper.
pub const RUNNER: &str = include_str!("runner.py");
/// The trusted side of the boundary: channel, codec, proxies, routing.
pub const BOUNDARY: &str = include_str!("boundary.py");
/// Strict assertions of the bundled families.
pub const STRICT: &str = include_str!("strict.py");
/// The subject's program (sent over the channel, never on its disk).
pub const SUBJECT: &str = include_str!("subject.py");

/// What the subject runs: read its program from fd 3 and run it in a
/// namespace of its own (in no module table).
pub const SUBJECT_BOOTSTRAP: &str = r#"import os
def _arbor_boot():
    def r(n):
        b = b''
        while len(b) < n:
            c = os.read(3, n - len(b))
            if not c:
                os._exit(3)
            b += c
        return b
    src = r(int.from_bytes(r(4), 'big'))
    if src[:1] == b'M':
        import marshal
        code = marshal.loads(src[1:])
    else:
        code = compile(src[1:], '<arbor-subject>', 'exec')
    exec(code, {'__name__': 'arbor_subject', '__builtins__': __builtins__})
_arbor_boot()
"#;

/// The interpreter both sides run: started isolated (`-I`: no `PYTHON*`
/// variable an image's Env may carry is read), no `site` (`-S`), no
/// bytecode (`-B`), then re-executed by [`SEEDED`] with string hashing
/// seeded as in every action.
const PYTHON: &str = "/usr/bin/python3 -I -S -B";

/// Run by [`PYTHON`] before either side's program: `-I` also ignores
/// `PYTHONHASHSEED`, so it replaces itself with the same interpreter on
/// an environment holding no `PYTHON*` variable but `PYTHONHASHSEED=0`,
/// with `-s -S -B` (and `-P` where it exists) for the rest of `-I`. Set
/// and dict iteration order is then the same in the verifier as in the
/// agent's actions and the same on every run: a check parametrized over a
/// set keeps its ids from listing to running.
const SEEDED: &str = "import os, sys\n\
e = {k: v for k, v in os.environ.items() if not k.startswith('PYTHON')}\n\
e['PYTHONHASHSEED'] = '0'\n\
f = ['-s', '-S', '-B'] + (['-P'] if sys.version_info >= (3, 11) else [])\n\
os.execve(sys.executable, [sys.executable] + f + sys.argv[1:], e)\n";

/// The environment variable that names a directory holding pytest (and
/// its dependencies) for the checks' trusted environment.
pub const VERIFIER_SITE_ENV: &str = "ARBOR_VERIFIER_SITE";

/// Packages copied into the trusted site of a pytest task.
const PYTEST_PACKAGES: &[&str] = &[
    "pytest",
    "_pytest",
    "pluggy",
    "iniconfig",
    "packaging",
    "py.py",
    "exceptiongroup",
    "tomli",
];

/// The runner's verdict line, decoded.
#[derive(Debug, Deserialize)]
pub(crate) struct RunnerResult {
    pub tests: Vec<RunnerTest>,
    #[serde(default)]
    pub problem: Option<String>,
    /// Why the subject became unusable, if it did.
    #[serde(default)]
    pub subject: Option<String>,
}

/// One check's outcome as the runner reports it.
#[derive(Debug, Deserialize)]
pub(crate) struct RunnerTest {
    pub id: String,
    /// `pass`, `fail`, `error`, `skip`, `xfail` or `xpass`.
    pub outcome: String,
    pub detail: String,
    /// Strict mode: the recorded comparisons (see `recheck`).
    #[serde(default)]
    pub asserts: Option<Vec<serde_json::Value>>,
    /// Whether the code under test caused the failure, and how: the
    /// runner's typed signal (the detail's text is never read for it).
    #[serde(default)]
    pub blame: Option<Blame>,
}

/// What the trusted runner blames a check's failure on, when it was the
/// code under test (`"blame"` of a test in the result line).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Blame {
    /// The subject process ended: its channel closed under the check.
    SubjectExited,
    /// The code under test otherwise: an exception it raised, a break of
    /// the channel's protocol, a value the strict checks refused, a reply
    /// that never came.
    Subject,
}

/// Why listing the hidden checks gave no ids (every verdict is then 0 and
/// says so).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ListFailure {
    /// The runner's list mode did not exit 0.
    #[error("listing the hidden checks failed ({exit}): {stderr}")]
    Failed {
        /// How it ended.
        exit: String,
        /// The tail of its standard error.
        stderr: String,
    },
    /// Its output is not the expected JSON.
    #[error("the runner's list output is not JSON: {0}")]
    NotJson(String),
    /// It listed no check.
    #[error("the hidden checks define no test (unittest: classes with test* methods)")]
    Empty,
}

/// Why a run of the hidden checks gave no report (every check then fails
/// and the verdict says why).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoReport {
    /// The checks could not be listed when the task was prepared.
    #[error(transparent)]
    Listing(#[from] ListFailure),
    /// The paired action ran out of time before the runner's result line.
    #[error("the checks timed out")]
    TimedOut,
    /// The runner wrote no single, well-formed, nonce-tagged result line.
    #[error("no result from the check runner ({exit}): {stderr}")]
    NoResult {
        /// How the runner ended.
        exit: String,
        /// The tail of its standard error.
        stderr: String,
    },
}

#[derive(Deserialize)]
struct ListedIds {
    ids: Vec<String>,
}

/// The configuration the trusted runner reads (`.arbor/config.json`).
fn config_json(spec: &TaskSpec) -> String {
    let c = &spec.check_config;
    serde_json::json!({
        "runner": c.runner.to_string(),
        "mode": c.semantics.to_string(),
        "roots": c.roots,
        "ids": c.listed_ids(),
        "pytest_ini": c.pytest_ini,
    })
    .to_string()
}

/// Write the checks snapshot's directory: the task's checks folder plus
/// `.arbor/` (see the module docs).
///
/// # Errors
/// A message naming the file that could not be copied or written, or the
/// missing trusted site of a pytest task.
pub(crate) fn write_checks_dir(spec: &TaskSpec, dst: &Path) -> Result<(), ChecksDirError> {
    copy_tree(&spec.checks, dst)?;
    let arbor = dst.join(".arbor");
    std::fs::create_dir_all(&arbor).map_err(io_at(&arbor))?;
    for (name, text) in [
        ("trusted.py", TRUSTED),
        ("arbor_runner.py", RUNNER),
        ("arbor_boundary.py", BOUNDARY),
        ("arbor_strict.py", STRICT),
        ("subject.py", SUBJECT),
    ] {
        let path = arbor.join(name);
        std::fs::write(&path, text).map_err(io_at(&path))?;
    }
    let config = arbor.join("config.json");
    std::fs::write(&config, config_json(spec)).map_err(io_at(&config))?;
    precompile(&arbor);
    if spec.check_config.runner == CheckRunner::Pytest {
        let site = verifier_site()?;
        let dst_site = arbor.join("site");
        for name in PYTEST_PACKAGES {
            let src = site.join(name);
            if src.is_dir() {
                copy_tree(&src, &dst_site.join(name))?;
            } else if src.is_file() {
                std::fs::create_dir_all(&dst_site).map_err(io_at(&dst_site))?;
                std::fs::copy(&src, dst_site.join(name)).map_err(io_at(&src))?;
            }
        }
    }
    Ok(())
}

/// Why the checks folder could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ChecksDirError {
    /// A file could not be read, copied or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A pytest task's trusted site is missing.
    #[error(transparent)]
    Site(#[from] SiteError),
}

/// An I/O error at `path`, for `map_err`.
fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> ChecksDirError + use<> {
    let path = path.to_owned();
    move |source| ChecksDirError::Io { path, source }
}

/// Bytecode of the runner's modules and the subject's program, made by the
/// system's `/usr/bin/python3` (the interpreter the sandbox runs), so a
/// verification does not compile 3,000 lines of Python twice. Only Arbor's
/// own embedded files are compiled, never a task's; unchecked hash-based
/// `.pyc` files load whatever the files' times. Where it fails (no
/// interpreter), the sources are used as they are.
fn precompile(arbor: &Path) {
    const SCRIPT: &str = r#"import importlib.util, marshal, py_compile, sys
d = sys.argv[1]
for name in ("arbor_runner", "arbor_boundary", "arbor_strict"):
    py_compile.compile(f"{d}/{name}.py", doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
with open(f"{d}/subject.py") as f:
    code = compile(f.read(), "<arbor-subject>", "exec")
with open(f"{d}/subject.marshal", "wb") as f:
    f.write(b"ARBOR " + importlib.util.MAGIC_NUMBER.hex().encode() + b"\n" + marshal.dumps(code))
"#;
    let _ = std::process::Command::new("/usr/bin/python3")
        .args(["-I", "-S", "-c", SCRIPT])
        .arg(arbor)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// The directory holding pytest for the checks' trusted environment:
/// `$ARBOR_VERIFIER_SITE`, else the project's `target/verifier-site` (what
/// `.ci/prerequisites` fills), looked up from the running binary.
///
/// # Errors
/// A message that says how to provide it.
pub fn verifier_site() -> Result<PathBuf, SiteError> {
    let has_pytest = |d: &Path| d.join("pytest").is_dir() && d.join("_pytest").is_dir();
    if let Some(dir) = std::env::var_os(VERIFIER_SITE_ENV) {
        let dir = PathBuf::from(dir);
        return if has_pytest(&dir) {
            Ok(dir)
        } else {
            Err(SiteError::NoPytest { dir })
        };
    }
    if let Ok(exe) = std::env::current_exe() {
        for dir in exe.ancestors().skip(1) {
            let candidate = dir.join("target/verifier-site");
            if has_pytest(&candidate) {
                return Ok(candidate);
            }
            if dir.file_name().is_some_and(|n| n == "target") {
                let candidate = dir.join("verifier-site");
                if has_pytest(&candidate) {
                    return Ok(candidate);
                }
            }
        }
    }
    Err(SiteError::NotFound)
}

/// Why the trusted site with pytest was not found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SiteError {
    /// `$ARBOR_VERIFIER_SITE` names a folder without pytest.
    #[error("{VERIFIER_SITE_ENV}={} holds no pytest (pip install --target DIR pytest)", dir.display())]
    NoPytest {
        /// The folder.
        dir: PathBuf,
    },
    /// No `target/verifier-site` beside the program, and no
    /// `$ARBOR_VERIFIER_SITE`.
    #[error(
        "pytest checks need a trusted site with pytest: run .ci/prerequisites (it fills \
         target/verifier-site) or set {VERIFIER_SITE_ENV} to a directory made with \
         `pip install --target DIR pytest`"
    )]
    NotFound,
}

fn copy_tree(src: &Path, dst: &Path) -> Result<(), ChecksDirError> {
    std::fs::create_dir_all(dst).map_err(io_at(dst))?;
    for e in std::fs::read_dir(src).map_err(io_at(src))? {
        let e = e.map_err(io_at(src))?;
        let from = e.path();
        let to = dst.join(e.file_name());
        let meta = std::fs::symlink_metadata(&from).map_err(io_at(&from))?;
        if meta.is_dir() {
            if e.file_name() != "__pycache__" {
                copy_tree(&from, &to)?;
            }
        } else if meta.is_file() {
            std::fs::copy(&from, &to).map_err(io_at(&from))?;
        }
    }
    Ok(())
}

/// A paired action's command and options: the trusted runner in `mode`
/// with the checks at a fresh random path, the subject beside it.
fn paired(
    checks: &Snapshot,
    mode: &str,
    timeout_ms: u64,
    nonce: &str,
) -> Result<(String, ExecOptions), SandboxError> {
    let dir = hex::encode(&super::nonce_bytes()[..8]);
    let mut opts = ExecOptions::with_timeout_ms(timeout_ms);
    opts.mounts = vec![ReadOnlyMount::new(checks, &format!("verifier/{dir}"))?];
    // The runner stops its own clock well before the action's, so that it
    // can still report which checks the subject held up.
    let budget = timeout_ms.saturating_mul(9) / 10;
    opts.env = vec![
        ("ARBOR_CHECKS".into(), format!("/verifier/{dir}")),
        ("ARBOR_NONCE".into(), nonce.to_owned()),
        (
            "ARBOR_BUDGET_MS".into(),
            budget.saturating_sub(300).max(1000).to_string(),
        ),
    ];
    opts.peer = Some(PeerCommand {
        command: format!(
            "exec {PYTHON} -c {} -c {}",
            shell_quote(SEEDED),
            shell_quote(SUBJECT_BOOTSTRAP)
        ),
        env: Vec::new(),
    });
    Ok((
        format!(
            "exec {PYTHON} -c {} \"$ARBOR_CHECKS/.arbor/trusted.py\" {mode}",
            shell_quote(SEEDED)
        ),
        opts,
    ))
}

/// List the hidden checks' ids in `sb` (a fork of the task's root).
///
/// # Errors
/// Runtime faults; `Ok(Err(_))` when the checks cannot be listed (a check
/// file that does not parse or import, say).
pub(crate) fn list(
    sb: &mut Sandbox,
    checks: &Snapshot,
    timeout_ms: u64,
) -> Result<Result<Vec<String>, ListFailure>, SandboxError> {
    let (cmd, opts) = paired(checks, "list", timeout_ms, "")?;
    let obs = sb.exec(&cmd, &opts)?;
    if obs.code() != Some(0) {
        return Ok(Err(ListFailure::Failed {
            exit: describe_exit(&obs.exit),
            stderr: super::tail(&String::from_utf8_lossy(&obs.stderr), 1200),
        }));
    }
    let listed: ListedIds = match serde_json::from_slice(&obs.stdout) {
        Ok(l) => l,
        Err(e) => return Ok(Err(ListFailure::NotJson(e.to_string()))),
    };
    if listed.ids.is_empty() {
        return Ok(Err(ListFailure::Empty));
    }
    Ok(Ok(listed.ids))
}

/// Run the hidden checks in `sb` (a fresh fork of the final snapshot) and
/// return the runner's report, or why there is none.
///
/// # Errors
/// Runtime faults only.
pub(crate) fn run(
    sb: &mut Sandbox,
    checks: &Snapshot,
    timeout_ms: u64,
) -> Result<Result<RunnerResult, NoReport>, SandboxError> {
    let nonce = hex::encode(super::nonce_bytes());
    let (cmd, opts) = paired(checks, "run", timeout_ms, &nonce)?;
    let obs = sb.exec(&cmd, &opts)?;
    let prefix = format!("ARBOR-RESULT {nonce} ");
    let stdout = String::from_utf8_lossy(&obs.stdout);
    let lines: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .collect();
    let mut parsed: Option<RunnerResult> = match lines.as_slice() {
        [one] => serde_json::from_str(one).ok(),
        _ => None,
    };
    // The subject's own end (a crash, an exit) is known here, not to the
    // runner: name it where the runner saw the subject go.
    if let (Some(r), Some(peer)) = (parsed.as_mut(), obs.peer.as_ref())
        && !peer.stopped
    {
        let how = format!("the subject process ended: {}", exit_words(&peer.exit));
        for t in &mut r.tests {
            if t.blame == Some(Blame::SubjectExited) {
                t.detail.push_str(&format!(" [{how}]"));
            }
        }
        r.subject.get_or_insert(how);
    }
    // Output written straight to its file descriptors, past the helper's cap.
    if let (Some(r), Some(peer)) = (parsed.as_mut(), obs.peer.as_ref()) {
        let flooded = [&peer.stdout, &peer.stderr]
            .iter()
            .any(|b| String::from_utf8_lossy(b).contains("[arbor: output truncated"));
        if flooded {
            let note = "the code under test flooded its standard output or error \
                        (past the capture limit)";
            for t in &mut r.tests {
                if t.blame.is_some() && t.outcome != "pass" {
                    t.detail.push_str(&format!(" [{note}]"));
                }
            }
            r.subject.get_or_insert(note.to_owned());
        }
    }
    Ok(parsed.ok_or_else(|| match obs.exit {
        ExitStatus::Timeout => NoReport::TimedOut,
        ref e => NoReport::NoResult {
            exit: describe_exit(e),
            stderr: super::tail(&String::from_utf8_lossy(&obs.stderr), 400),
        },
    }))
}

/// Whether a reported outcome passes the check under `semantics`: strict
/// checks must pass and every recorded comparison must hold here; upstream
/// checks pass or fail as expected (as SWE-bench counts XFAIL).
pub(crate) fn judge(test: &RunnerTest, semantics: Semantics) -> Result<(), CheckFailure> {
    match (semantics, test.outcome.as_str()) {
        (Semantics::Strict, "pass") => {
            super::recheck::recheck(test.asserts.as_deref().unwrap_or(&[]))
                .map_err(CheckFailure::Recheck)
        }
        (Semantics::Upstream, "pass" | "xfail") => Ok(()),
        (_, "skip") => Err(CheckFailure::Skipped(test.detail.clone())),
        (_, "xpass") => Err(CheckFailure::UnexpectedPass),
        (_, "xfail") => Err(CheckFailure::ExpectedFailure(test.detail.clone())),
        _ => Err(CheckFailure::Reported(test.detail.clone())),
    }
}

/// The verdict of a whole-file check (pytest `file::*`, listed for a file
/// that could not be collected at the task's root) that collects now:
/// every test of the file must pass. `None` when `id` is no such check or
/// the file reported no test.
pub(crate) fn whole_file(
    tests: &[RunnerTest],
    id: &str,
    semantics: Semantics,
) -> Option<Result<(), CheckFailure>> {
    let prefix = id.strip_suffix('*').filter(|p| p.ends_with("::"))?;
    let mut of_file = tests.iter().filter(|t| t.id.starts_with(prefix)).peekable();
    of_file.peek()?;
    Some(of_file.try_for_each(|t| judge(t, semantics)))
}

/// The report for `id` when the runner did not report it by name: the
/// error of its module (unittest `module.*`) or file (pytest `file::*`).
pub(crate) fn module_error<'a>(tests: &'a [RunnerTest], id: &str) -> Option<&'a RunnerTest> {
    let unittest = id.split('.').next().map(|m| format!("{m}.*"));
    let pytest = id.split("::").next().map(|f| format!("{f}::*"));
    tests
        .iter()
        .find(|t| Some(&t.id) == unittest.as_ref() || Some(&t.id) == pytest.as_ref())
}

/// How a process ended, with the signal's name.
fn exit_words(exit: &ExitStatus) -> String {
    let name = match exit {
        ExitStatus::Signal { signal } => match signal {
            4 => " (SIGILL)",
            6 => " (SIGABRT)",
            7 => " (SIGBUS)",
            8 => " (SIGFPE)",
            9 => " (SIGKILL)",
            11 => " (SIGSEGV)",
            15 => " (SIGTERM)",
            _ => "",
        },
        _ => "",
    };
    format!("{}{name}", describe_exit(exit))
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_file_check_passes_only_when_every_test_of_its_file_does() {
        let report = |line: &str| serde_json::from_str::<RunnerResult>(line).unwrap().tests;
        let good = report(
            r#"{"tests": [{"id": "t/f.py::a", "outcome": "pass", "detail": ""},
                          {"id": "t/g.py::a", "outcome": "fail", "detail": "other file"}]}"#,
        );
        let bad = report(
            r#"{"tests": [{"id": "t/f.py::a", "outcome": "pass", "detail": ""},
                          {"id": "t/f.py::b", "outcome": "fail", "detail": "AssertionError"}]}"#,
        );
        let up = Semantics::Upstream;
        assert!(matches!(whole_file(&good, "t/f.py::*", up), Some(Ok(()))));
        assert!(matches!(whole_file(&bad, "t/f.py::*", up), Some(Err(_))));
        assert!(
            whole_file(&good, "t/h.py::*", up).is_none(),
            "no test of the file"
        );
        assert!(
            whole_file(&good, "t/f.py::a", up).is_none(),
            "not a whole-file id"
        );
    }

    #[test]
    fn the_runners_blame_is_read_from_its_field_not_the_text() {
        let line = r#"{"tests": [
            {"id": "m.T.a", "outcome": "error", "detail": "SubjectExited: x", "blame": "subject_exited"},
            {"id": "m.T.b", "outcome": "fail", "detail": "TypeError: y", "blame": "subject"},
            {"id": "m.T.c", "outcome": "fail", "detail": "AssertionError: the code under test exited"}
        ], "problem": null, "subject": null}"#;
        let r: RunnerResult = serde_json::from_str(line).unwrap();
        let blames: Vec<Option<Blame>> = r.tests.iter().map(|t| t.blame).collect();
        assert_eq!(
            blames,
            [Some(Blame::SubjectExited), Some(Blame::Subject), None],
            "a check's own text that names the code under test is no blame"
        );
        let bad = r#"{"tests": [{"id": "a", "outcome": "fail", "detail": "", "blame": "who"}]}"#;
        assert!(
            serde_json::from_str::<RunnerResult>(bad).is_err(),
            "an unknown blame is refused, not guessed"
        );
    }

    /// The trusted side's classification (boundary.blame_of, strict's
    /// refusals), run by the interpreter the sandbox uses.
    #[test]
    fn the_trusted_side_blames_by_type_and_mark() {
        let python = Path::new("/usr/bin/python3");
        if !python.exists() {
            eprintln!("skipped: no /usr/bin/python3");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("arbor_boundary.py"), BOUNDARY).unwrap();
        std::fs::write(dir.path().join("arbor_strict.py"), STRICT).unwrap();
        let script = r#"import sys
sys.path.insert(0, sys.argv[1])
import arbor_boundary as b, arbor_strict as s
class Remote:
    _arbor_remote = True
def refusal(v):
    try:
        s.canon(v)
    except TypeError as e:
        return b.blame_of(e)
print(b.blame_of(b.SubjectExited("x")), b.blame_of(b.SubjectError("x")),
      b.blame_of(b.blame(ValueError("v"))), b.blame_of(ValueError("v")),
      b.blame_of(AssertionError("the code under test exited")),
      refusal(Remote()), refusal(b"bytes"))
"#;
        let out = std::process::Command::new(python)
            .args(["-I", "-S", "-B", "-c", script])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "subject_exited subject subject None None subject None"
        );
    }
}
