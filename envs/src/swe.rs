//! `arbor task import-swe`: SWE-bench instances (one JSON object a line)
//! turned into Arbor task directories of family `upstream`.
//!
//! Per instance, from the local clone of its repository:
//! - `workspace/`: the tree at `base_commit` (no `.git`, so nothing beyond
//!   the base is visible), minus the files the test patch touches;
//! - `checks/`: the files of the test patch after applying it to the base,
//!   at the same relative paths, with their non-test Python siblings
//!   (`conftest.py`, `__init__.py`, helper modules) so they import as they
//!   would in the repository;
//! - `task.toml`: pytest checks with the instance's `FAIL_TO_PASS` and
//!   `PASS_TO_PASS`; the gold solution is a `write` (or `delete`) of every
//!   file the gold `patch` touches, with its post-patch content; `[paths]
//!   allow` is those files.
//!
//! Nothing is written unless every instance converts: the tasks are built
//! in a staging folder beside the output and renamed into place at the end.
//!
//! (Over 600 lines: about 150 of them are the tests at the bottom, which
//! build real git repositories and belong beside the conversion they check.)

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Why an instance set could not be imported. Every message names the
/// instance (and field) at fault.
#[derive(Debug, thiserror::Error)]
pub enum SweError {
    /// A file or folder could not be read or written.
    #[error("{}: {message}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// A line of the instances file is not a JSON object.
    #[error("{}:{line}: not a JSON object: {message}", file.display())]
    Json {
        /// The instances file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// A field of an instance is missing, of the wrong type, or invalid.
    #[error("instance {instance:?}: field `{field}`: {message}")]
    Field {
        /// The instance (or `line N` when it has no id).
        instance: String,
        /// The field.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A git command on the instance's repository failed.
    #[error("instance {instance:?}: `git {command}` failed: {message}")]
    Git {
        /// The instance.
        instance: String,
        /// The git arguments.
        command: String,
        /// git's error output.
        message: String,
    },
    /// The `--image` argument is neither an image name nor a recipe file.
    #[error("--image {given:?}: {message}")]
    Image {
        /// What was given.
        given: String,
        /// What is wrong.
        message: String,
    },
    /// The converted task does not load.
    #[error("instance {instance:?}: the generated task is invalid: {source}")]
    Task {
        /// The instance.
        instance: String,
        /// The loader's error.
        source: crate::task::TaskError,
    },
}

/// One SWE-bench instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    /// `instance_id`, e.g. `astropy__astropy-12907`.
    pub instance_id: String,
    /// `owner/name`.
    pub repo: String,
    /// The commit the workspace is taken from.
    pub base_commit: String,
    /// The gold fix, a unified diff.
    pub patch: String,
    /// The diff adding or changing the tests.
    pub test_patch: String,
    /// pytest ids that fail before the fix and pass after it.
    pub fail_to_pass: Vec<String>,
    /// pytest ids that pass before and after.
    pub pass_to_pass: Vec<String>,
    /// The issue text (the agent's instructions), if any.
    pub problem_statement: Option<String>,
    /// `pre_install` and `install`, as given (recorded as comments).
    pub install_notes: Vec<(String, String)>,
}

/// What the tasks run on.
#[derive(Clone, Debug, PartialEq)]
pub enum ImageSpec {
    /// `image = "NAME"`.
    Named(String),
    /// An `[image]` recipe table, copied into each task.toml.
    Recipe(toml::Table),
}

impl ImageSpec {
    /// `--image`: the path of a TOML file with an `[image]` table, or else
    /// an image name.
    ///
    /// # Errors
    /// [`SweError::Image`] for a recipe without `[image]` or an invalid name.
    pub fn parse(given: &str) -> Result<Self, SweError> {
        let err = |message: String| SweError::Image {
            given: given.to_owned(),
            message,
        };
        let path = Path::new(given);
        if path.is_file() {
            let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
            let mut table: toml::Table = toml::from_str(&text).map_err(|e| err(e.to_string()))?;
            return match table.remove("image") {
                Some(toml::Value::Table(t)) => {
                    // Checked now, so no task is written with a recipe the
                    // loader would refuse.
                    crate::task::read_image_recipe(path).map_err(|e| err(e.to_string()))?;
                    Ok(Self::Recipe(t))
                }
                _ => Err(err("the recipe file has no [image] table".to_owned())),
            };
        }
        arbor_runtime::store::validate_image_name(given)
            .map_err(|e| err(format!("not a recipe file, nor an image name: {e}")))?;
        Ok(Self::Named(given.to_owned()))
    }
}

/// Where the clone of `repo` (`owner/name`) is: `repo_dir/owner__name`.
pub fn repo_path(repo_dir: &Path, repo: &str) -> PathBuf {
    repo_dir.join(repo.replace('/', "__"))
}

/// The task id of an instance: lower case, runs of other characters than
/// `a-z0-9` made one `-`, at most 64 characters.
pub fn task_id(instance_id: &str) -> String {
    let mut id = String::new();
    for c in instance_id.to_lowercase().chars() {
        if c.is_ascii_alphanumeric() {
            id.push(c);
        } else if !id.is_empty() && !id.ends_with('-') {
            id.push('-');
        }
    }
    let id = id.trim_end_matches('-');
    id[..id.len().min(64)].trim_end_matches('-').to_owned()
}

/// Parse an instances file: one JSON object a line (blank lines skipped).
///
/// # Errors
/// [`SweError::Json`] or [`SweError::Field`] naming the line or instance.
pub fn parse_instances(file: &Path, text: &str) -> Result<Vec<Instance>, SweError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let json_err = |message: String| SweError::Json {
            file: file.to_owned(),
            line: i + 1,
            message,
        };
        let v: Value = serde_json::from_str(line).map_err(|e| json_err(e.to_string()))?;
        let Value::Object(o) = v else {
            return Err(json_err("not an object".to_owned()));
        };
        let name = o
            .get("instance_id")
            .and_then(Value::as_str)
            .map_or_else(|| format!("line {}", i + 1), str::to_owned);
        let field_err = |field: &str, message: &str| SweError::Field {
            instance: name.clone(),
            field: field.to_owned(),
            message: message.to_owned(),
        };
        let text = |field: &str| -> Result<String, SweError> {
            match o.get(field) {
                Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
                Some(Value::String(_)) => Err(field_err(field, "is empty")),
                Some(_) => Err(field_err(field, "is not a string")),
                None => Err(field_err(field, "is missing")),
            }
        };
        let ids = |field: &str| -> Result<Vec<String>, SweError> {
            let v = o.get(field).ok_or_else(|| field_err(field, "is missing"))?;
            let parsed;
            let list = match v {
                Value::String(s) => {
                    parsed = serde_json::from_str::<Value>(s).map_err(|e| {
                        field_err(field, &format!("a string that is not a JSON list: {e}"))
                    })?;
                    &parsed
                }
                v => v,
            };
            let Value::Array(items) = list else {
                return Err(field_err(field, "is not a list of test ids"));
            };
            items
                .iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| field_err(field, "holds a test id that is not a string"))
                })
                .collect()
        };
        let mut install_notes = Vec::new();
        for key in ["pre_install", "install"] {
            match o.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) => install_notes.push((key.to_owned(), s.clone())),
                Some(v) => install_notes.push((key.to_owned(), v.to_string())),
            }
        }
        let instance = Instance {
            instance_id: text("instance_id")?,
            repo: text("repo")?,
            base_commit: text("base_commit")?,
            patch: text("patch")?,
            test_patch: text("test_patch")?,
            fail_to_pass: ids("FAIL_TO_PASS")?,
            pass_to_pass: ids("PASS_TO_PASS")?,
            problem_statement: o
                .get("problem_statement")
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_owned),
            install_notes,
        };
        if instance.fail_to_pass.is_empty() {
            return Err(field_err("FAIL_TO_PASS", "is empty"));
        }
        if !instance.repo.contains('/') {
            return Err(field_err("repo", "is not of the form owner/name"));
        }
        if task_id(&instance.instance_id).is_empty() {
            return Err(field_err("instance_id", "has no letters or digits"));
        }
        out.push(instance);
    }
    Ok(out)
}

/// One imported task.
#[derive(Clone, Debug)]
pub struct ImportedTask {
    /// The task id (and directory name).
    pub id: String,
    /// The task directory, in its final place.
    pub dir: PathBuf,
}

/// Convert `instances` into task directories under `out` (created if
/// missing), finding each repository with [`repo_path`].
///
/// # Errors
/// [`SweError`] for the first instance that does not convert; then nothing
/// is written.
pub fn import(
    instances: &[Instance],
    repo_dir: &Path,
    image: Option<&ImageSpec>,
    out: &Path,
) -> Result<Vec<ImportedTask>, SweError> {
    let io = |path: &Path, e: std::io::Error| SweError::Io {
        path: path.to_owned(),
        message: e.to_string(),
    };
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let mut ids = BTreeSet::new();
    for inst in instances {
        let id = task_id(&inst.instance_id);
        if out.join(&id).exists() || !ids.insert(id.clone()) {
            return Err(SweError::Field {
                instance: inst.instance_id.clone(),
                field: "instance_id".to_owned(),
                message: format!(
                    "task {id:?} exists already (in {} or the file)",
                    out.display()
                ),
            });
        }
    }
    let staging = tempfile::Builder::new()
        .prefix(".import-swe-")
        .tempdir_in(&parent)
        .map_err(|e| io(&parent, e))?;
    let work = tempfile::tempdir().map_err(|e| io(Path::new("(temp)"), e))?;
    for (n, inst) in instances.iter().enumerate() {
        let scratch = work.path().join(n.to_string());
        let dir = staging.path().join(task_id(&inst.instance_id));
        convert(inst, repo_dir, image, &scratch, &dir)?;
    }
    let mut done = Vec::new();
    if out.exists() {
        for inst in instances {
            let id = task_id(&inst.instance_id);
            let dir = out.join(&id);
            std::fs::rename(staging.path().join(&id), &dir).map_err(|e| io(&dir, e))?;
            done.push(ImportedTask { id, dir });
        }
    } else {
        let staged = staging.keep();
        std::fs::rename(&staged, out).map_err(|e| io(out, e))?;
        for inst in instances {
            let id = task_id(&inst.instance_id);
            done.push(ImportedTask {
                dir: out.join(&id),
                id,
            });
        }
    }
    Ok(done)
}

/// Run git with `args` in `cwd`; its stdout.
fn git(
    inst: &Instance,
    cwd: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
) -> Result<Vec<u8>, SweError> {
    let mut cmd = Command::new("git");
    cmd.current_dir(cwd).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let fail = |message: String| SweError::Git {
        instance: inst.instance_id.clone(),
        command: args.join(" "),
        message,
    };
    let out = cmd.output().map_err(|e| fail(e.to_string()))?;
    if !out.status.success() {
        return Err(fail(String::from_utf8_lossy(&out.stderr).trim().to_owned()));
    }
    Ok(out.stdout)
}

/// Write the tree of `commit` into `dest` through a private index (the
/// repository's own index and work tree are not touched).
fn extract(
    inst: &Instance,
    repo: &Path,
    commit: &str,
    scratch: &Path,
    dest: &Path,
) -> Result<(), SweError> {
    let name = dest
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let index = scratch.join(format!("{name}.index"));
    let env = [("GIT_INDEX_FILE", index.as_path())];
    git(inst, repo, &["read-tree", commit], &env)?;
    let prefix = format!("{}/", dest.display());
    git(
        inst,
        repo,
        &["checkout-index", "-a", "-f", &format!("--prefix={prefix}")],
        &env,
    )?;
    let _ = std::fs::remove_file(&index);
    Ok(())
}

/// The paths a diff touches (old and new names), by `git apply --numstat`.
fn touched(
    inst: &Instance,
    field: &str,
    tree: &Path,
    diff: &Path,
    ceiling: &Path,
) -> Result<Vec<String>, SweError> {
    let env = [("GIT_CEILING_DIRECTORIES", ceiling)];
    let arg = diff.display().to_string();
    let raw = git(inst, tree, &["apply", "--numstat", "-z", &arg], &env).map_err(|e| {
        SweError::Field {
            instance: inst.instance_id.clone(),
            field: field.to_owned(),
            message: format!("is not a diff git can read: {e}"),
        }
    })?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let mut parts = text.split('\0').filter(|s| !s.is_empty());
    let mut paths = Vec::new();
    while let Some(head) = parts.next() {
        let mut cols = head.splitn(3, '\t');
        let (added, path) = (cols.next().unwrap_or(""), cols.nth(1).unwrap_or(""));
        if added == "-" {
            return Err(SweError::Field {
                instance: inst.instance_id.clone(),
                field: field.to_owned(),
                message: "changes a binary file (not supported)".to_owned(),
            });
        }
        if path.is_empty() {
            // A rename: the old and the new name follow.
            paths.extend(parts.next().map(str::to_owned));
            paths.extend(parts.next().map(str::to_owned));
        } else {
            paths.push(path.to_owned());
        }
    }
    for p in &paths {
        if p.starts_with('/') || p.split('/').any(|c| c == ".." || c == ".git") {
            return Err(SweError::Field {
                instance: inst.instance_id.clone(),
                field: field.to_owned(),
                message: format!("touches {p:?}, outside the repository"),
            });
        }
    }
    Ok(paths)
}

/// Apply `diff` (the instance's `field`) to the tree in `tree`.
fn apply(
    inst: &Instance,
    field: &str,
    tree: &Path,
    diff: &Path,
    ceiling: &Path,
) -> Result<(), SweError> {
    let env = [("GIT_CEILING_DIRECTORIES", ceiling)];
    let arg = diff.display().to_string();
    git(inst, tree, &["apply", "--whitespace=nowarn", &arg], &env).map_err(|e| {
        SweError::Field {
            instance: inst.instance_id.clone(),
            field: field.to_owned(),
            message: format!("does not apply to base_commit {}: {e}", inst.base_commit),
        }
    })?;
    Ok(())
}

/// Convert one instance into the task directory `dir`.
fn convert(
    inst: &Instance,
    repo_dir: &Path,
    image: Option<&ImageSpec>,
    scratch: &Path,
    dir: &Path,
) -> Result<(), SweError> {
    let io = |path: &Path, e: std::io::Error| SweError::Io {
        path: path.to_owned(),
        message: e.to_string(),
    };
    let field = |field: &str, message: String| SweError::Field {
        instance: inst.instance_id.clone(),
        field: field.to_owned(),
        message,
    };
    let repo = repo_path(repo_dir, &inst.repo);
    if !repo.join(".git").exists() && !repo.join("HEAD").is_file() {
        return Err(field(
            "repo",
            format!(
                "no git clone at {} (--repo-dir DIR holds DIR/owner__name)",
                repo.display()
            ),
        ));
    }
    let spec = format!("{}^{{commit}}", inst.base_commit);
    let commit = git(
        inst,
        &repo,
        &["rev-parse", "--verify", "--quiet", &spec],
        &[],
    )
    .map_err(|_| {
        field(
            "base_commit",
            format!("{} is not a commit of {}", inst.base_commit, repo.display()),
        )
    })?;
    let commit = String::from_utf8_lossy(&commit).trim().to_owned();
    std::fs::create_dir_all(scratch).map_err(|e| io(scratch, e))?;
    let (base, tested, fixed) = (
        scratch.join("base"),
        scratch.join("tested"),
        scratch.join("fixed"),
    );
    for t in [&base, &tested, &fixed] {
        extract(inst, &repo, &commit, scratch, t)?;
    }
    let (patch_file, test_file) = (scratch.join("patch.diff"), scratch.join("test.diff"));
    std::fs::write(&patch_file, &inst.patch).map_err(|e| io(&patch_file, e))?;
    std::fs::write(&test_file, &inst.test_patch).map_err(|e| io(&test_file, e))?;
    let gold_paths = touched(inst, "patch", &base, &patch_file, scratch)?;
    let test_paths = touched(inst, "test_patch", &base, &test_file, scratch)?;
    apply(inst, "patch", &fixed, &patch_file, scratch)?;
    apply(inst, "test_patch", &tested, &test_file, scratch)?;
    if let Some(p) = gold_paths.iter().find(|p| test_paths.contains(p)) {
        return Err(field(
            "patch",
            format!("touches {p:?}, a file of the test patch"),
        ));
    }
    if let Some(p) = gold_paths
        .iter()
        .find(|p| p.contains(['*', '?', '[', ']', '{', '}']))
    {
        return Err(field(
            "patch",
            format!("touches {p:?}, whose name has glob characters"),
        ));
    }
    let check_files: Vec<&String> = test_paths
        .iter()
        .filter(|p| tested.join(p).is_file())
        .collect();
    for (name, ids) in [
        ("FAIL_TO_PASS", &inst.fail_to_pass),
        ("PASS_TO_PASS", &inst.pass_to_pass),
    ] {
        for id in ids {
            let file = id.split("::").next().unwrap_or_default();
            if !id.contains("::") || !check_files.iter().any(|f| f.as_str() == file) {
                return Err(field(
                    name,
                    format!(
                        "{id:?} is not a test of a file the test patch leaves (files: {check_files:?})"
                    ),
                ));
            }
        }
    }
    // The workspace: the base minus the test patch's files.
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    std::fs::rename(&base, &workspace).map_err(|e| io(&workspace, e))?;
    for p in &test_paths {
        let f = workspace.join(p);
        if f.is_file() || f.is_symlink() {
            std::fs::remove_file(&f).map_err(|e| io(&f, e))?;
        }
    }
    // The checks: the test patch's files and their non-test Python siblings.
    let checks = dir.join("checks");
    let mut copy: BTreeSet<String> = check_files.iter().map(|s| (*s).clone()).collect();
    for f in &check_files {
        let folder = Path::new(f.as_str()).parent().unwrap_or(Path::new(""));
        let Ok(rd) = std::fs::read_dir(tested.join(folder)) else {
            continue;
        };
        for e in rd.filter_map(Result::ok) {
            let n = e.file_name().to_string_lossy().into_owned();
            let test = n.starts_with("test") || n.ends_with("_test.py");
            if n.ends_with(".py") && !test && e.path().is_file() {
                copy.insert(folder.join(&n).to_string_lossy().into_owned());
            }
        }
    }
    for rel in &copy {
        let to = checks.join(rel);
        if let Some(p) = to.parent() {
            std::fs::create_dir_all(p).map_err(|e| io(p, e))?;
        }
        std::fs::copy(tested.join(rel), &to).map_err(|e| io(&to, e))?;
    }
    let text = task_toml(inst, image, &gold_paths, &workspace, &fixed)?;
    let toml_path = dir.join("task.toml");
    std::fs::write(&toml_path, text).map_err(|e| io(&toml_path, e))?;
    crate::task::TaskSpec::load(dir).map_err(|source| SweError::Task {
        instance: inst.instance_id.clone(),
        source,
    })?;
    Ok(())
}

/// A TOML string literal.
fn quote(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// A TOML array of strings, one a line.
fn string_list(items: &[String]) -> String {
    if items.is_empty() {
        return "[]".to_owned();
    }
    let mut s = "[\n".to_owned();
    for i in items {
        let _ = writeln!(s, "    {},", quote(i));
    }
    s + "]"
}

/// The task.toml of an instance.
fn task_toml(
    inst: &Instance,
    image: Option<&ImageSpec>,
    gold_paths: &[String],
    workspace: &Path,
    fixed: &Path,
) -> Result<String, SweError> {
    let field = |field: &str, message: String| SweError::Field {
        instance: inst.instance_id.clone(),
        field: field.to_owned(),
        message,
    };
    let id = task_id(&inst.instance_id);
    let name = inst.repo.rsplit('/').next().unwrap_or(&inst.repo);
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Imported by `arbor task import-swe` from instance {:?}",
        inst.instance_id
    );
    let _ = writeln!(
        t,
        "# (repository {}, base_commit {}).",
        inst.repo, inst.base_commit
    );
    for (k, v) in &inst.install_notes {
        for (i, line) in v.lines().enumerate() {
            let _ = writeln!(t, "# {}: {line}", if i == 0 { k.as_str() } else { "  " });
        }
    }
    let instructions = inst.problem_statement.clone().unwrap_or_else(|| {
        format!(
            "The workspace holds {} at commit {}. These tests fail and must pass after your fix:\n{}\n\
             Fix the code, not the tests. It is graded by the project's own pytest suite (hidden).\n",
            inst.repo,
            inst.base_commit,
            inst.fail_to_pass.iter().map(|i| format!("- {i}")).collect::<Vec<_>>().join("\n")
        )
    });
    let _ = writeln!(t, "id = {}", quote(&id));
    t.push_str("family = \"upstream\"\n");
    let _ = writeln!(t, "group = {}", quote(&format!("swe-{}", task_id(name))));
    t.push_str("difficulty = \"medium\"\n");
    let _ = writeln!(t, "instructions = {}", quote(&instructions));
    match image {
        Some(ImageSpec::Named(n)) => {
            let _ = writeln!(t, "image = {}", quote(n));
        }
        Some(ImageSpec::Recipe(table)) => {
            let mut outer = toml::Table::new();
            outer.insert("image".to_owned(), toml::Value::Table(table.clone()));
            let text = toml::to_string(&outer).map_err(|e| field("image", e.to_string()))?;
            let _ = write!(t, "\n{text}");
        }
        None => {}
    }
    t.push_str("\n[limits]\nmax_steps = 10\nstep_timeout_s = 30\ntotal_time_s = 300\n");
    let _ = write!(t, "\n[paths]\nallow = {}\n", string_list(gold_paths));
    t.push_str("\n[checks]\nrunner = \"pytest\"\nsemantics = \"upstream\"\ntimeout_s = 120\n");
    if gold_paths.iter().all(|p| p.starts_with("src/")) {
        t.push_str("roots = [\"src\"]\n");
    }
    let _ = writeln!(t, "fail_to_pass = {}", string_list(&inst.fail_to_pass));
    let _ = writeln!(t, "pass_to_pass = {}", string_list(&inst.pass_to_pass));
    // Gold: every touched file's post-patch content (or its deletion).
    let mut right = Vec::new();
    let mut wrong = None;
    let mut harmful = None;
    for (i, p) in gold_paths.iter().enumerate() {
        let after = fixed.join(p);
        let entry = if after.is_file() {
            let bytes = std::fs::read(&after).map_err(|e| field("patch", format!("{p}: {e}")))?;
            let content = String::from_utf8(bytes)
                .map_err(|_| field("patch", format!("{p} is not UTF-8 text after the patch")))?;
            use std::os::unix::fs::PermissionsExt as _;
            let exec = std::fs::metadata(&after).is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
            let mode = if exec { "mode = 493\n" } else { "" };
            format!(
                "write = {}\n{mode}content = {}\n",
                quote(p),
                quote(&content)
            )
        } else {
            format!("delete = {}\n", quote(p))
        };
        let before = workspace.join(p);
        if before.is_file() {
            if wrong.is_none() && p.ends_with(".py") && after.is_file() {
                // The mutated gold: this file left as it was (a no-op rewrite).
                let content = std::fs::read_to_string(&before)
                    .map_err(|e| field("patch", format!("{p}: {e}")))?;
                wrong = Some(format!(
                    "replaces = {i}\nwrite = {}\ncontent = {}\n",
                    quote(p),
                    quote(&content)
                ));
            }
            harmful.get_or_insert_with(|| format!("delete = {}\n", quote(p)));
        }
        let _ = write!(t, "\n[[gold]]\n{entry}");
        right.push(entry);
    }
    for r in right {
        let _ = write!(t, "\n[[candidates]]\nlabel = \"right\"\n{r}");
    }
    if let Some(w) = wrong {
        let _ = write!(t, "\n[[candidates]]\nlabel = \"wrong\"\n{w}");
    }
    if let Some(h) = harmful {
        let _ = write!(t, "\n[[candidates]]\nlabel = \"harmful\"\n{h}");
    }
    t.push_str("\n[[candidates]]\nlabel = \"neutral\"\nexec = \"ls -R\"\n");
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, script: &str) -> String {
        let out = Command::new("bash")
            .arg("-ec")
            .arg(script)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// A repo `local__calc` with a buggy `calc/ops.py`; the instance's
    /// patch fixes it and its test patch adds a test.
    fn fixture(root: &Path) -> Instance {
        let repo = root.join("repos/local__calc");
        std::fs::create_dir_all(&repo).unwrap();
        sh(
            &repo,
            "git init -q . && mkdir calc tests && touch calc/__init__.py tests/__init__.py
             printf 'def add(a, b):\\n    return a - b\\n' > calc/ops.py
             printf 'from calc.ops import add\\n\\ndef test_zero():\\n    assert add(0, 0) == 0\\n' > tests/test_ops.py
             git add -A && git commit -qm base",
        );
        let base = sh(&repo, "git rev-parse HEAD").trim().to_owned();
        let patch = sh(
            &repo,
            "sed -i 's/a - b/a + b/' calc/ops.py && git diff && git checkout -q -- .",
        );
        let test_patch = sh(
            &repo,
            "printf '\\ndef test_two():\\n    assert add(1, 1) == 2\\n' >> tests/test_ops.py && git diff && git checkout -q -- .",
        );
        Instance {
            instance_id: "local__calc-1".into(),
            repo: "local/calc".into(),
            base_commit: base,
            patch,
            test_patch,
            fail_to_pass: vec!["tests/test_ops.py::test_two".into()],
            pass_to_pass: vec!["tests/test_ops.py::test_zero".into()],
            problem_statement: None,
            install_notes: vec![("install".into(), "pip install -e .".into())],
        }
    }

    #[test]
    fn parses_lists_and_json_strings() {
        let text = r#"{"instance_id":"a__b-1","repo":"a/b","base_commit":"abc","patch":"p","test_patch":"t","FAIL_TO_PASS":"[\"t.py::x\"]","PASS_TO_PASS":["t.py::y"]}"#;
        let i = &parse_instances(Path::new("i.jsonl"), text).unwrap()[0];
        assert_eq!(i.fail_to_pass, ["t.py::x"]);
        assert_eq!(i.pass_to_pass, ["t.py::y"]);
        assert_eq!(task_id(&i.instance_id), "a-b-1");
        let missing = text.replace(r#""patch":"p","#, "");
        let e = parse_instances(Path::new("i.jsonl"), &missing)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a__b-1") && e.contains("`patch`") && e.contains("missing"),
            "{e}"
        );
    }

    #[test]
    fn converts_an_instance() {
        let tmp = tempfile::tempdir().unwrap();
        let inst = fixture(tmp.path());
        let out = tmp.path().join("out");
        let done = import(&[inst], &tmp.path().join("repos"), None, &out).unwrap();
        let dir = &done[0].dir;
        assert_eq!(done[0].id, "local-calc-1");
        assert!(dir.join("workspace/calc/ops.py").is_file());
        assert!(!dir.join("workspace/tests/test_ops.py").exists());
        assert!(!dir.join("workspace/.git").exists());
        let check = std::fs::read_to_string(dir.join("checks/tests/test_ops.py")).unwrap();
        assert!(check.contains("test_two"));
        assert!(dir.join("checks/tests/__init__.py").is_file());
        let spec = crate::task::TaskSpec::load(dir).unwrap();
        assert_eq!(
            spec.check_config.fail_to_pass,
            ["tests/test_ops.py::test_two"]
        );
        let toml = std::fs::read_to_string(dir.join("task.toml")).unwrap();
        assert!(toml.contains("# install: pip install -e ."), "{toml}");
        assert!(toml.contains("a + b"));
    }

    #[test]
    fn refuses_a_bad_set_and_writes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let good = fixture(tmp.path());
        let repos = tmp.path().join("repos");
        let out = tmp.path().join("out");
        let mut bad = good.clone();
        bad.instance_id = "local__calc-2".into();
        bad.patch = bad.patch.replace("a - b", "a * b");
        let e = import(&[good.clone(), bad], &repos, None, &out)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("local__calc-2") && e.contains("`patch`") && e.contains("does not apply"),
            "{e}"
        );
        assert!(!out.exists());
        let mut unknown = good.clone();
        unknown.base_commit = "0".repeat(40);
        let e = import(&[unknown], &repos, None, &out)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`base_commit`"), "{e}");
        let mut stray = good.clone();
        stray.pass_to_pass = vec!["tests/test_other.py::test_x".into()];
        let e = import(&[stray], &repos, None, &out)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`PASS_TO_PASS`") && e.contains("test_other.py"),
            "{e}"
        );
        assert!(!out.exists());
        // The control: the good one alone is written.
        import(&[good], &repos, None, &out).unwrap();
        assert!(out.join("local-calc-1/task.toml").is_file());
    }

    #[test]
    fn an_image_recipe_is_copied() {
        let tmp = tempfile::tempdir().unwrap();
        let recipe = tmp.path().join("image.toml");
        std::fs::write(
            &recipe,
            "[image]\ndebian = \"bookworm\"\npackages = [\"python3\"]\n",
        )
        .unwrap();
        let image = ImageSpec::parse(&recipe.display().to_string()).unwrap();
        let inst = fixture(tmp.path());
        let out = tmp.path().join("out");
        import(&[inst], &tmp.path().join("repos"), Some(&image), &out).unwrap();
        let toml = std::fs::read_to_string(out.join("local-calc-1/task.toml")).unwrap();
        let v: toml::Table = toml::from_str(&toml).unwrap();
        assert_eq!(v["image"]["debian"].as_str(), Some("bookworm"));
        let spec = crate::task::TaskSpec::load(&out.join("local-calc-1")).unwrap();
        assert!(matches!(spec.image, Some(crate::TaskImage::Recipe(_))));
        assert!(ImageSpec::parse("Not An Image!").is_err());
        // A recipe the loader would refuse is refused here, naming the field.
        std::fs::write(
            &recipe,
            "[image]\ndebian = \"bookworm\"\npip = [\"--index-url=http://x/simple\"]\n",
        )
        .unwrap();
        let err = ImageSpec::parse(&recipe.display().to_string()).unwrap_err();
        assert!(err.to_string().contains("pip"), "{err}");
    }
}
