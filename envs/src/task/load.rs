//! Loading `task.toml`: the raw TOML shapes, positions of errors in the
//! source, and the checks of every field (the hidden-check tables are
//! checked in `checks`).

use std::path::Path;

use arbor_rollout::{AgentAction, EnvLimits};
use arbor_runtime::image::ImageRecipe;
use serde::Deserialize;
use toml::Spanned;

use super::checks::{check_config, session_checks};
use super::*;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTask {
    pub(super) id: Spanned<String>,
    pub(super) family: Family,
    pub(super) group: Spanned<String>,
    pub(super) difficulty: Difficulty,
    pub(super) instructions: Spanned<String>,
    #[serde(default)]
    pub(super) workspace: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) setup: Vec<String>,
    #[serde(default)]
    pub(super) setup_allow_hosts: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) image: Option<Spanned<toml::Value>>,
    #[serde(default)]
    pub(super) workdir: Option<Spanned<String>>,
    pub(super) limits: RawLimits,
    pub(super) paths: RawPaths,
    #[serde(default)]
    pub(super) checks: Option<RawChecks>,
    pub(super) gold: Spanned<Vec<AgentAction>>,
    #[serde(default)]
    pub(super) candidates: Vec<Spanned<RawCandidate>>,
    #[serde(default)]
    pub(super) canaries: Vec<RawCanary>,
    #[serde(default)]
    pub(super) backend: Backend,
    #[serde(default)]
    pub(super) session_check: Vec<Spanned<RawSessionCheck>>,
    #[serde(default)]
    pub(super) workspace_check: Vec<Spanned<RawWorkspaceCheck>>,
    #[serde(default)]
    pub(super) validate: Option<RawValidate>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawValidate {
    #[serde(default)]
    pub(super) multi_step: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSessionCheck {
    pub(super) id: String,
    #[serde(default)]
    pub(super) run: Option<String>,
    #[serde(default)]
    pub(super) expr: Option<String>,
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) expect: Option<toml::Value>,
    #[serde(default)]
    pub(super) expect_json: Option<String>,
    #[serde(default)]
    pub(super) tolerance: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWorkspaceCheck {
    pub(super) id: String,
    pub(super) path: String,
    #[serde(default)]
    pub(super) text: Option<String>,
    #[serde(default)]
    pub(super) json: Option<toml::Value>,
    #[serde(default)]
    pub(super) json_text: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub(super) max_steps: Spanned<usize>,
    pub(super) step_timeout_s: Spanned<f64>,
    pub(super) total_time_s: Spanned<f64>,
    #[serde(default)]
    pub(super) step_fuel: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPaths {
    pub(super) allow: Spanned<Vec<String>>,
    #[serde(default)]
    pub(super) byproducts: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub(super) protected: Option<Spanned<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawChecks {
    #[serde(default)]
    pub(super) dir: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) timeout_s: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) fuel: Option<Spanned<u64>>,
    #[serde(default)]
    pub(super) runner: Option<CheckRunner>,
    #[serde(default)]
    pub(super) semantics: Option<Spanned<Semantics>>,
    #[serde(default)]
    pub(super) roots: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub(super) fail_to_pass: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub(super) pass_to_pass: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub(super) pytest_ini: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) allow_static: Vec<String>,
}

#[derive(Deserialize)]
pub(super) struct RawCandidate {
    pub(super) label: CandidateLabel,
    #[serde(default)]
    pub(super) replaces: Option<usize>,
    #[serde(flatten)]
    pub(super) action: AgentAction,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCanary {
    pub(super) name: Spanned<String>,
    pub(super) actions: Vec<AgentAction>,
}

/// Whether `dir` holds a test file (`test*.py` or `*_test.py`), looking
/// `depth` folders down (pytest suites keep theirs in `tests/`).
fn has_test_files(dir: &Path, depth: usize) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    rd.filter_map(Result::ok).any(|e| {
        let n = e.file_name().to_string_lossy().into_owned();
        match e.file_type() {
            Ok(t) if t.is_file() => {
                n.ends_with(".py") && (n.starts_with("test") || n.ends_with("_test.py"))
            }
            Ok(t) if t.is_dir() => depth > 0 && has_test_files(&e.path(), depth - 1),
            _ => false,
        }
    })
}

pub(super) struct Source<'a> {
    file: &'a Path,
    text: &'a str,
}

impl Source<'_> {
    fn position(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        (line, column)
    }

    /// The dotted field at `offset`: the enclosing `[table]` and the key on that line.
    fn field_at(&self, offset: usize) -> String {
        let before = &self.text[..offset.min(self.text.len())];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line_end = self.text[line_start..]
            .find('\n')
            .map_or(self.text.len(), |i| line_start + i);
        let line = &self.text[line_start..line_end];
        let key = line
            .split_once('=')
            .map(|(k, _)| k.trim().to_owned())
            .filter(|k| !k.is_empty() && !k.starts_with('['));
        let table = before[..line_start]
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| l.starts_with('['))
            .map(|l| l.trim_matches(|c| c == '[' || c == ']').trim().to_owned());
        let header = line.trim();
        if header.starts_with('[') {
            return header
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_owned();
        }
        match (table, key) {
            (Some(t), Some(k)) => format!("{t}.{k}"),
            (None, Some(k)) => k,
            (Some(t), None) => t,
            (None, None) => "(top level)".to_owned(),
        }
    }

    pub(super) fn error_at(
        &self,
        offset: usize,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> TaskError {
        let (line, column) = self.position(offset);
        TaskError::Field {
            file: self.file.to_owned(),
            line,
            column,
            field: field.map_or_else(|| self.field_at(offset), str::to_owned),
            message: message.into(),
        }
    }

    pub(super) fn error<T>(
        &self,
        spanned: &Spanned<T>,
        field: &str,
        message: impl Into<String>,
    ) -> TaskError {
        self.error_at(spanned.span().start, Some(field), message)
    }
}

impl TaskSpec {
    /// Load and check the task in `dir` (which holds `task.toml`).
    ///
    /// # Errors
    /// [`TaskError`] naming the file, line and field of the first problem.
    pub fn load(dir: &Path) -> Result<Self, TaskError> {
        let file = dir.join("task.toml");
        let text = std::fs::read_to_string(&file).map_err(|e| TaskError::File {
            file: file.clone(),
            message: format!("cannot read: {e}"),
        })?;
        let src = Source {
            file: &file,
            text: &text,
        };
        let raw: RawTask = toml::from_str(&text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            let message = e.message().trim().to_owned();
            let field = missing_field(&message);
            src.error_at(offset, field.as_deref(), message)
        })?;
        Self::check(dir, &src, raw)
    }

    fn check(dir: &Path, src: &Source<'_>, raw: RawTask) -> Result<Self, TaskError> {
        let id = raw.id.get_ref().clone();
        if !valid_id(&id) {
            return Err(src.error(
                &raw.id,
                "id",
                format!("{id:?} is not a task id (1-64 characters of a-z, 0-9 and -)"),
            ));
        }
        let dir_name = dir
            .canonicalize()
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
        if dir_name.as_deref() != Some(id.as_str()) {
            return Err(src.error(
                &raw.id,
                "id",
                format!(
                    "{id:?} differs from the directory name {:?}",
                    dir_name.unwrap_or_default()
                ),
            ));
        }
        if raw.group.get_ref().trim().is_empty() {
            return Err(src.error(&raw.group, "group", "must not be empty"));
        }
        if raw.instructions.get_ref().trim().is_empty() {
            return Err(src.error(&raw.instructions, "instructions", "must not be empty"));
        }
        let workspace = match &raw.workspace {
            Some(w) => {
                let path = dir.join(w.get_ref());
                if !path.is_dir() || !is_plain_relative(w.get_ref()) {
                    return Err(src.error(
                        w,
                        "workspace",
                        format!(
                            "{:?} is not a folder inside the task directory",
                            w.get_ref()
                        ),
                    ));
                }
                path
            }
            None => {
                let path = dir.join("workspace");
                // A `wasm` task may start from an empty workspace.
                if !path.is_dir() && raw.backend == Backend::Native {
                    return Err(TaskError::File {
                        file: path,
                        message: "the task has no workspace folder (set `workspace`)".to_owned(),
                    });
                }
                path
            }
        };
        let image = match &raw.image {
            None => None,
            Some(v) if v.get_ref().is_table() => {
                let recipe = ImageRecipe::deserialize(v.get_ref().clone())
                    .map_err(|e| src.error(v, "image", format!("not an image recipe: {e}")))?;
                recipe
                    .validate()
                    .map_err(|e| src.error(v, "image", e.to_string()))?;
                Some(TaskImage::Recipe(recipe))
            }
            Some(v) => {
                let Some(text) = v.get_ref().as_str() else {
                    return Err(src.error(
                        v,
                        "image",
                        "expected an image name, an archive in the task directory, or an [image] recipe table",
                    ));
                };
                let path = dir.join(text);
                if is_plain_relative(text) && path.is_file() {
                    Some(TaskImage::Archive(path))
                } else if arbor_runtime::store::validate_image_name(text).is_ok() {
                    Some(TaskImage::Named(text.to_owned()))
                } else {
                    return Err(src.error(
                        v,
                        "image",
                        format!(
                            "{text:?} is neither an image name (see `arbor image ls`) nor an archive file inside the task directory"
                        ),
                    ));
                }
            }
        };
        if let Some(v) = raw
            .image
            .as_ref()
            .filter(|_| raw.backend != Backend::Native)
        {
            return Err(src.error(v, "image", "only native tasks run on an image"));
        }
        let at_image_workdir = match &raw.workdir {
            None => false,
            Some(w) if w.get_ref() == "workspace" => false,
            Some(w) if w.get_ref() == "image" => {
                if image.is_none() {
                    return Err(src.error(
                        w,
                        "workdir",
                        "\"image\" needs the task to run on an image (`image = ...`)",
                    ));
                }
                true
            }
            Some(w) => {
                return Err(src.error(
                    w,
                    "workdir",
                    format!(
                        "{:?}: expected \"workspace\" (the default) or \"image\" (the image's WorkingDir)",
                        w.get_ref()
                    ),
                ));
            }
        };
        let mut setup_allow_hosts = Vec::new();
        for h in &raw.setup_allow_hosts {
            let host = arbor_runtime::sandbox::egress::check_host_name(h.get_ref())
                .map_err(|why| src.error(h, "setup_allow_hosts", why))?;
            setup_allow_hosts.push(host);
        }
        if let Some(h) = raw.setup_allow_hosts.first()
            && raw.setup.is_empty()
        {
            return Err(src.error(
                h,
                "setup_allow_hosts",
                "the task has no setup commands to allow hosts for",
            ));
        }
        let limits = &raw.limits;
        if *limits.max_steps.get_ref() == 0 || *limits.max_steps.get_ref() > 1000 {
            return Err(src.error(
                &limits.max_steps,
                "limits.max_steps",
                "must be between 1 and 1000",
            ));
        }
        let seconds = |s: &Spanned<f64>, field: &str| -> Result<u64, TaskError> {
            let v = *s.get_ref();
            if v.is_finite() && v > 0.0 && v <= 86_400.0 {
                Ok((v * 1000.0) as u64)
            } else {
                Err(src.error(
                    s,
                    field,
                    format!("{v} is not a number of seconds in (0, 86400]"),
                ))
            }
        };
        let limits = EnvLimits {
            max_steps: *limits.max_steps.get_ref(),
            step_timeout_ms: seconds(&limits.step_timeout_s, "limits.step_timeout_s")?,
            total_time_ms: seconds(&limits.total_time_s, "limits.total_time_s")?,
        };
        let globs = |s: &Spanned<Vec<String>>, field: &str, extra: &[&str]| {
            let mut all: Vec<String> = extra.iter().map(|p| (*p).to_owned()).collect();
            all.extend(s.get_ref().iter().cloned());
            if let Some(bad) = s
                .get_ref()
                .iter()
                .find(|p| p.starts_with('/') || p.contains(".."))
            {
                return Err(src.error(
                    s,
                    field,
                    format!("{bad:?}: globs are relative to /workspace, without `..`"),
                ));
            }
            Globs::new(&all).map_err(|e| src.error(s, field, e.to_string()))
        };
        let allow = globs(&raw.paths.allow, "paths.allow", &[])?;
        let empty = Spanned::new(0..0, Vec::new());
        let byproducts = globs(
            raw.paths.byproducts.as_ref().unwrap_or(&empty),
            "paths.byproducts",
            DEFAULT_BYPRODUCTS,
        )?;
        let protected = globs(
            raw.paths.protected.as_ref().unwrap_or(&empty),
            "paths.protected",
            &[],
        )?;
        let wasm = raw.backend == Backend::Wasm;
        let (checks, checks_timeout_ms) = if wasm {
            if let Some(d) = raw.checks.as_ref().and_then(|c| c.dir.as_ref()) {
                return Err(src.error(
                    d,
                    "checks.dir",
                    "a `wasm` task has no checks folder: its hidden checks are \
                     [[session_check]] and [[workspace_check]] tables",
                ));
            }
            let timeout = match raw.checks.as_ref().and_then(|c| c.timeout_s.as_ref()) {
                Some(t) => seconds(t, "checks.timeout_s")?,
                None => 60_000,
            };
            (dir.join("checks"), timeout)
        } else {
            let checks = raw.checks.as_ref();
            let dir_field = checks.and_then(|c| c.dir.as_ref());
            let rel = dir_field.map_or("checks", |d| d.get_ref().as_str());
            let path = dir.join(rel);
            if !has_test_files(&path, 4) || !is_plain_relative(rel) {
                let message = format!(
                    "{rel:?} is not a folder of test files (test*.py or *_test.py) in the task"
                );
                return Err(match dir_field {
                    Some(d) => src.error(d, "checks.dir", message),
                    None => TaskError::File {
                        file: path,
                        message,
                    },
                });
            }
            let timeout = match checks.and_then(|c| c.timeout_s.as_ref()) {
                Some(t) => seconds(t, "checks.timeout_s")?,
                None => 60_000,
            };
            (path, timeout)
        };
        let check_config = check_config(src, raw.checks.as_ref(), &checks, wasm)?;
        let multi_step = raw
            .validate
            .as_ref()
            .and_then(|v| v.multi_step)
            .unwrap_or(raw.family != Family::Upstream);
        if raw.gold.get_ref().is_empty() {
            return Err(src.error(&raw.gold, "gold", "the gold solution has no actions"));
        }
        let gold = raw.gold.into_inner();
        let mut candidates = Vec::new();
        for (i, c) in raw.candidates.into_iter().enumerate() {
            let span = c.span();
            let c = c.into_inner();
            if let Some(r) = c.replaces
                && r >= gold.len()
            {
                return Err(src.error_at(
                    span.start,
                    Some(&format!("candidates[{i}].replaces")),
                    format!(
                        "{r} is not an index of the gold solution (0..{})",
                        gold.len()
                    ),
                ));
            }
            candidates.push(Candidate {
                label: c.label,
                replaces: c.replaces,
                action: c.action,
            });
        }
        let (session_checks, workspace_checks) =
            session_checks(src, wasm, &raw.session_check, &raw.workspace_check)?;
        let fuel = |f: Option<&Spanned<u64>>, field: &str, default: u64| match f {
            Some(f) if !wasm => Err(src.error(f, field, "only `wasm` tasks are metered in fuel")),
            Some(f) if *f.get_ref() < 1_000_000 || *f.get_ref() > 1_000_000_000_000 => {
                Err(src.error(f, field, "must be between 1e6 and 1e12 units"))
            }
            Some(f) => Ok(*f.get_ref()),
            None => Ok(default),
        };
        let step_fuel = fuel(
            raw.limits.step_fuel.as_ref(),
            "limits.step_fuel",
            DEFAULT_STEP_FUEL,
        )?;
        let check_fuel = fuel(
            raw.checks.as_ref().and_then(|c| c.fuel.as_ref()),
            "checks.fuel",
            DEFAULT_CHECK_FUEL,
        )?;
        let mut canaries = Vec::new();
        for c in raw.canaries {
            if c.actions.is_empty() {
                return Err(src.error(&c.name, "canaries.actions", "a canary needs actions"));
            }
            canaries.push(CanarySpec {
                name: c.name.into_inner(),
                actions: c.actions,
            });
        }
        Ok(Self {
            id,
            family: raw.family,
            group: raw.group.into_inner(),
            difficulty: raw.difficulty,
            instructions: raw.instructions.into_inner(),
            dir: dir.to_owned(),
            workspace,
            setup: raw.setup,
            setup_allow_hosts,
            at_image_workdir,
            image,
            limits,
            allow,
            byproducts,
            protected,
            checks,
            checks_timeout_ms,
            check_config,
            multi_step,
            gold,
            candidates,
            canaries,
            backend: raw.backend,
            session_checks,
            workspace_checks,
            step_fuel,
            check_fuel,
        })
    }
}

/// `missing field `x`` → `x`.
fn missing_field(message: &str) -> Option<String> {
    let rest = message.split("missing field `").nth(1)?;
    Some(rest.split('`').next()?.to_owned())
}

/// Read an image recipe from a TOML file: its `[image]` table (as in a
/// `task.toml`), or the whole file when it has none. Every field is checked.
pub fn read_image_recipe(path: &Path) -> Result<ImageRecipe, TaskError> {
    let text = std::fs::read_to_string(path).map_err(|e| TaskError::File {
        file: path.to_owned(),
        message: e.to_string(),
    })?;
    let bad = |message: String| TaskError::File {
        file: path.to_owned(),
        message,
    };
    let mut table: toml::Table = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let value = match table.remove("image") {
        Some(v) => v,
        None => toml::Value::Table(table),
    };
    let recipe =
        ImageRecipe::deserialize(value).map_err(|e| bad(format!("not an image recipe: {e}")))?;
    recipe.validate().map_err(|e| bad(e.to_string()))?;
    Ok(recipe)
}
