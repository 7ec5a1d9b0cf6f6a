//! Checks of a task's hidden-check settings: the `[checks]` table of a
//! native task, and the `[[session_check]]` and `[[workspace_check]]`
//! tables of a `wasm` task.

use std::path::Path;

use toml::Spanned;

use super::load::{RawChecks, RawSessionCheck, RawWorkspaceCheck, Source};
use super::*;

/// The `[checks]` settings beyond `dir` and `timeout_s`, checked.
pub(super) fn check_config(
    src: &Source<'_>,
    raw: Option<&RawChecks>,
    checks_dir: &Path,
    wasm: bool,
) -> Result<CheckConfig, TaskError> {
    let Some(raw) = raw else {
        return Ok(CheckConfig {
            roots: vec![".".to_owned()],
            ..CheckConfig::default()
        });
    };
    let runner = raw.runner.unwrap_or_default();
    let semantics = match &raw.semantics {
        Some(s) => *s.get_ref(),
        None if runner == CheckRunner::Pytest => Semantics::Upstream,
        None => Semantics::Strict,
    };
    if let (Some(s), true) = (&raw.semantics, wasm) {
        return Err(src.error(
            s,
            "checks.semantics",
            "`wasm` tasks have declarative checks",
        ));
    }
    if runner == CheckRunner::Pytest && semantics == Semantics::Strict {
        let s = raw.semantics.as_ref().map_or(0..0, Spanned::span);
        return Err(src.error_at(
            s.start,
            Some("checks.semantics"),
            "pytest checks run with upstream semantics (strict assertions are unittest's)",
        ));
    }
    let roots = match &raw.roots {
        Some(r) => {
            if let Some(bad) = r.get_ref().iter().find(|p| !is_plain_relative(p)) {
                return Err(src.error(
                    r,
                    "checks.roots",
                    format!(
                        "{bad:?}: import roots are folders relative to /workspace, without `..`"
                    ),
                ));
            }
            if r.get_ref().is_empty() {
                return Err(src.error(r, "checks.roots", "give at least one import root"));
            }
            r.get_ref().clone()
        }
        None => vec![".".to_owned()],
    };
    let ids = |f: &Option<Spanned<Vec<String>>>, field: &str| -> Result<Vec<String>, TaskError> {
        let Some(f) = f else { return Ok(Vec::new()) };
        for id in f.get_ref() {
            let ok = match runner {
                CheckRunner::Pytest => {
                    let file = id.split("::").next().unwrap_or_default();
                    file.ends_with(".py") && is_plain_relative(file) && id.contains("::")
                }
                CheckRunner::Unittest => {
                    id.split('.').count() >= 3
                        && id.split('.').all(|p| !p.is_empty() && !p.contains('/'))
                }
            };
            if !ok {
                return Err(src.error(
                    f,
                    field,
                    format!(
                        "{id:?} is not a {runner} test id ({})",
                        match runner {
                            CheckRunner::Pytest => "path/test_x.py::Class::test_name[param]",
                            CheckRunner::Unittest => "module.Class.test_method",
                        }
                    ),
                ));
            }
        }
        Ok(f.get_ref().clone())
    };
    let fail_to_pass = ids(&raw.fail_to_pass, "checks.fail_to_pass")?;
    let pass_to_pass = ids(&raw.pass_to_pass, "checks.pass_to_pass")?;
    let pytest_ini = match &raw.pytest_ini {
        Some(p) => {
            let rel = p.get_ref();
            if !is_plain_relative(rel) || !checks_dir.join(rel).is_file() {
                return Err(src.error(
                    p,
                    "checks.pytest_ini",
                    format!("{rel:?} is not a file of the checks folder"),
                ));
            }
            Some(rel.clone())
        }
        None => None,
    };
    Ok(CheckConfig {
        runner,
        semantics,
        roots,
        fail_to_pass,
        pass_to_pass,
        pytest_ini,
        allow_static: raw.allow_static.clone(),
    })
}

/// Why an expected value of a check is not a value.
#[derive(Debug, thiserror::Error)]
pub(super) enum ValueError {
    /// A float that JSON cannot hold.
    #[error("{0} is not a finite number")]
    NotFinite(f64),
    /// A TOML datetime.
    #[error("{0}: a datetime is not a value here")]
    Datetime(toml::value::Datetime),
    /// JSON text that does not parse.
    #[error("not JSON: {0}")]
    NotJson(serde_json::Error),
    /// Both or neither of the TOML value and the JSON text.
    #[error("give exactly one of the TOML value and the JSON text")]
    NotExactlyOne,
}

/// A TOML value as JSON (datetimes are refused).
fn toml_to_json(v: &toml::Value) -> Result<serde_json::Value, ValueError> {
    Ok(match v {
        toml::Value::String(s) => serde_json::Value::String(s.clone()),
        toml::Value::Integer(i) => serde_json::Value::from(*i),
        toml::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(serde_json::Value::Number)
            .ok_or(ValueError::NotFinite(*f))?,
        toml::Value::Boolean(b) => serde_json::Value::Bool(*b),
        toml::Value::Datetime(d) => return Err(ValueError::Datetime(*d)),
        toml::Value::Array(a) => {
            serde_json::Value::Array(a.iter().map(toml_to_json).collect::<Result<_, _>>()?)
        }
        toml::Value::Table(t) => serde_json::Value::Object(
            t.iter()
                .map(|(k, v)| Ok((k.clone(), toml_to_json(v)?)))
                .collect::<Result<_, ValueError>>()?,
        ),
    })
}

/// An expected value given as `expect` (TOML) or `expect_json` (JSON text).
fn expected_value(
    toml_value: Option<&toml::Value>,
    json_text: Option<&str>,
) -> Result<serde_json::Value, ValueError> {
    match (toml_value, json_text) {
        (Some(v), None) => toml_to_json(v),
        (None, Some(t)) => serde_json::from_str(t).map_err(ValueError::NotJson),
        _ => Err(ValueError::NotExactlyOne),
    }
}

/// Check and convert the hidden checks of a `wasm` task (and refuse them
/// in a `native` one).
pub(super) fn session_checks(
    src: &Source<'_>,
    wasm: bool,
    raw_session: &[Spanned<RawSessionCheck>],
    raw_workspace: &[Spanned<RawWorkspaceCheck>],
) -> Result<(Vec<SessionCheck>, Vec<WorkspaceCheck>), TaskError> {
    let at = |span: std::ops::Range<usize>, field: String, message: String| {
        src.error_at(span.start, Some(&field), message)
    };
    if !wasm {
        if let Some(c) = raw_session.first() {
            return Err(at(
                c.span(),
                "session_check".into(),
                "only `backend = \"wasm\"` tasks have session checks".into(),
            ));
        }
        if let Some(c) = raw_workspace.first() {
            return Err(at(
                c.span(),
                "workspace_check".into(),
                "only `backend = \"wasm\"` tasks have workspace checks (native tasks use checks/)"
                    .into(),
            ));
        }
        return Ok((Vec::new(), Vec::new()));
    }
    if raw_session.is_empty() {
        return Err(src.error_at(
            0,
            Some("session_check"),
            "a `wasm` task needs at least one [[session_check]]",
        ));
    }
    let mut ids = std::collections::BTreeSet::new();
    let mut session = Vec::new();
    for (i, c) in raw_session.iter().enumerate() {
        let field = |f: &str| format!("session_check[{i}].{f}");
        let r = c.get_ref();
        if !valid_id(&r.id.replace('_', "-")) || !ids.insert(r.id.clone()) {
            return Err(at(
                c.span(),
                field("id"),
                format!("{:?} is not a unique check id ([a-z0-9_-])", r.id),
            ));
        }
        let target = match (&r.expr, &r.name) {
            (Some(e), None) if !e.trim().is_empty() => SessionTarget::Expr(e.clone()),
            (None, Some(n)) if is_identifier(n) => SessionTarget::Name(n.clone()),
            (None, Some(n)) => {
                return Err(at(
                    c.span(),
                    field("name"),
                    format!("{n:?} is not a Python identifier"),
                ));
            }
            _ => {
                return Err(at(
                    c.span(),
                    field("expr"),
                    "give exactly one of `expr` (an expression) and `name` (a session variable)"
                        .into(),
                ));
            }
        };
        let expect = expected_value(r.expect.as_ref(), r.expect_json.as_deref())
            .map_err(|e| at(c.span(), field("expect"), e.to_string()))?;
        crate::canonical::Canonical::from_json(&expect).map_err(|e| {
            at(
                c.span(),
                field("expect"),
                format!("not canonical JSON: {e}"),
            )
        })?;
        if let Some(t) = r.tolerance
            && !(t.is_finite() && t >= 0.0)
        {
            return Err(at(
                c.span(),
                field("tolerance"),
                format!("{t} is not a tolerance (a finite number >= 0)"),
            ));
        }
        session.push(SessionCheck {
            id: r.id.clone(),
            run: r.run.clone().filter(|s| !s.trim().is_empty()),
            target,
            expect,
            tolerance: r.tolerance,
        });
    }
    let mut workspace = Vec::new();
    for (i, c) in raw_workspace.iter().enumerate() {
        let field = |f: &str| format!("workspace_check[{i}].{f}");
        let r = c.get_ref();
        if !valid_id(&r.id.replace('_', "-")) || !ids.insert(r.id.clone()) {
            return Err(at(
                c.span(),
                field("id"),
                format!("{:?} is not a unique check id ([a-z0-9_-])", r.id),
            ));
        }
        if !is_plain_relative(&r.path) {
            return Err(at(
                c.span(),
                field("path"),
                format!("{:?} is not a path relative to /workspace", r.path),
            ));
        }
        let expect = match (&r.text, &r.json, &r.json_text) {
            (Some(t), None, None) => WorkspaceExpect::Text(t.clone()),
            (None, j, t) if j.is_some() || t.is_some() => WorkspaceExpect::Json(
                expected_value(j.as_ref(), t.as_deref())
                    .map_err(|e| at(c.span(), field("json"), e.to_string()))?,
            ),
            _ => {
                return Err(at(
                    c.span(),
                    field("text"),
                    "give exactly one of `text`, `json` and `json_text`".into(),
                ));
            }
        };
        workspace.push(WorkspaceCheck {
            id: r.id.clone(),
            path: r.path.clone(),
            expect,
        });
    }
    Ok((session, workspace))
}

/// Whether `s` is a plain (ASCII) Python identifier.
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
