//! The path layer of the hard constraints: what the agent's changes to the
//! workspace may not touch (paths outside the task's allowed ones, grader
//! hooks, modules that would shadow the standard library).

use std::sync::OnceLock;

use arbor_rollout::env::{Violation, ViolationKind};
use arbor_runtime::layer::{self, MergedView};
use arbor_runtime::store::object::EntryKind;

use crate::task::{Globs, TaskSpec};

/// Python module names of the standard library (a workspace file at the top
/// level with one of these names would shadow it).
const STDLIB_MODULES: &str = include_str!("../stdlib_modules.txt");

/// Grader hooks: added or changed, any of these breaks a hard constraint.
const HOOK_GLOBS: &[&str] = &[
    "**/conftest.py",
    "**/sitecustomize.py",
    "**/usercustomize.py",
    "**/*.pth",
    "**/entry_points.txt",
    "**/pytest.ini",
    "**/.pytest_cache",
    "**/.pytest_cache/**",
    "**/junit*.xml",
    "**/test-results*",
    "**/test_results*",
    "**/results.json",
    "**/.arbor*",
    "**/.arbor*/**",
];

fn hooks() -> &'static Globs {
    static HOOKS: OnceLock<Globs> = OnceLock::new();
    HOOKS.get_or_init(|| {
        let patterns: Vec<String> = HOOK_GLOBS.iter().map(|s| (*s).to_owned()).collect();
        Globs::new(&patterns).expect("the built-in hook globs parse")
    })
}

/// Whether `path` (a workspace path) would shadow a standard-library module:
/// `json.py` or `json/` at the top level, where the workspace is on `sys.path`.
pub fn shadows_stdlib(path: &str) -> bool {
    let top = path.split('/').next().unwrap_or(path);
    let name = top.strip_suffix(".py").unwrap_or(top);
    STDLIB_MODULES.lines().any(|m| m == name) && (top.ends_with(".py") || path.contains('/'))
}

/// The hard-constraint violations of a workspace change from `base` to
/// `last`: grader hooks and modules shadowing the standard library added or
/// changed, paths outside `allow` (and the by-products) changed.
pub(crate) fn path_violations(
    spec: &TaskSpec,
    base: &MergedView,
    last: &MergedView,
) -> Vec<Violation> {
    let mut violations = Vec::new();
    let d = layer::diff(base, last);
    let is_dir = |path: &str| {
        matches!(
            base.entries.get(path).map(|e| &e.kind),
            Some(EntryKind::Dir { .. })
        ) || matches!(
            last.entries.get(path).map(|e| &e.kind),
            Some(EntryKind::Dir { .. })
        )
    };
    let changed: Vec<(&str, &String)> = d
        .added
        .iter()
        .map(|p| ("added", p))
        .chain(d.modified.iter().map(|p| ("modified", p)))
        .chain(d.deleted.iter().map(|p| ("deleted", p)))
        .collect();
    let ok_file = |p: &str| spec.allow.matches(p) || spec.byproducts.matches(p);
    for (how, path) in &changed {
        let path = path.as_str();
        if *how != "deleted" && (hooks().matches(path) || shadows_stdlib(path)) {
            violations.push(Violation {
                kind: ViolationKind::GraderHook,
                detail: format!("{path} {how}"),
            });
            continue;
        }
        if ok_file(path) {
            continue;
        }
        if is_dir(path) {
            // A directory is judged by what changed inside it: fine when
            // it was only modified in place (its children are judged on
            // their own), or when an allowed change lies beneath it.
            let prefix = format!("{path}/");
            let covers = *how == "modified"
                || changed
                    .iter()
                    .any(|(_, p)| p.starts_with(&prefix) && ok_file(p))
                || spec.allow.patterns().iter().any(|g| g.starts_with(&prefix));
            if covers {
                continue;
            }
        }
        let kind = if spec.protected.matches(path) {
            ViolationKind::ProtectedChanged
        } else {
            ViolationKind::OutsideAllowed
        };
        violations.push(Violation {
            kind,
            detail: format!("{path} {how}"),
        });
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdlib_shadowing_is_recognised_at_the_top_level_only() {
        assert!(shadows_stdlib("json.py"));
        assert!(shadows_stdlib("unittest/__init__.py"));
        assert!(!shadows_stdlib("pkg/json.py"));
        assert!(!shadows_stdlib("mymodule.py"));
        assert!(
            !shadows_stdlib("json"),
            "a file without .py is not a module"
        );
    }

    #[test]
    fn hooks_match_anywhere() {
        for p in [
            "conftest.py",
            "a/b/conftest.py",
            "x.pth",
            "sitecustomize.py",
            ".pytest_cache/v",
            "junit-report.xml",
            ".arbor-verifier-nonce",
        ] {
            assert!(hooks().matches(p), "{p}");
        }
        for p in ["src/app.py", "tests/test_app.py", "README.md"] {
            assert!(!hooks().matches(p), "{p}");
        }
    }
}
