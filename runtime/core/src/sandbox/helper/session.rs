//! The session wrapper the action's shell runs, and the parsers of what it
//! and the action's init report back (the session state, the exit status).

use crate::store::object::{ExitStatus, SessionState};

/// The descriptor the session wrapper writes the final cwd and environment to.
pub(super) const STATE_FD: i32 = 63;

/// Shell text run by `bash -c`: the command runs in this shell (so `cd` and
/// `export` persist), and the EXIT trap reports the resulting state, including
/// after `exit N`, without changing the exit status. The report uses builtins
/// only (no process is started): the cwd, a NUL, then `declare -px`, which
/// [`parse_session`] reads back.
pub(super) const WRAPPER: &str = r#"__arbor_state() {
  __arbor_rc=$?
  { builtin printf '%s\0' "$PWD"; builtin declare -px; } >&63 2>/dev/null
  builtin exit "$__arbor_rc"
}
builtin trap __arbor_state EXIT
__arbor_cmd=$ARBOR_COMMAND
builtin unset ARBOR_COMMAND
builtin eval "$__arbor_cmd"
"#;

/// Variables bash itself maintains; never part of the session state.
const SHELL_OWNED_VARS: &[&str] = &["PWD", "OLDPWD", "SHLVL", "_", "__arbor_cmd", "__arbor_rc"];

/// The first line of G's report: `exit N` or `signal N`.
pub(crate) fn parse_status(line: &str) -> Option<ExitStatus> {
    let (kind, n) = line.split_once(' ')?;
    let n: i32 = n.trim().parse().ok()?;
    match kind {
        "exit" => Some(ExitStatus::Code { code: n }),
        "signal" => Some(ExitStatus::Signal { signal: n }),
        _ => None,
    }
}

/// Parse `cwd\0` + `declare -px` output into session state relative to
/// the fixed environment.
pub(crate) fn parse_session(data: &[u8], fixed: &[(String, String)]) -> Option<SessionState> {
    let nul = data.iter().position(|&b| b == 0)?;
    let cwd = String::from_utf8(data[..nul].to_vec()).ok()?;
    if !cwd.starts_with('/') {
        return None;
    }
    let mut env = std::collections::BTreeMap::new();
    let mut seen = std::collections::BTreeSet::new();
    for (k, v) in crate::sandbox::declare::parse_declarations(&data[nul + 1..]) {
        if SHELL_OWNED_VARS.contains(&k.as_str()) {
            continue;
        }
        let v = String::from_utf8_lossy(&v).into_owned();
        seen.insert(k.clone());
        if fixed.iter().any(|(fk, fv)| *fk == k && *fv == v) {
            continue;
        }
        env.insert(k, v);
    }
    let unset = fixed
        .iter()
        .filter(|(k, _)| !seen.contains(k))
        .map(|(k, _)| k.clone())
        .collect();
    Some(SessionState { cwd, env, unset })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_state_parses_newlines_and_reports_unsets() {
        let fixed = vec![
            ("HOME".to_owned(), "/tmp/home".to_owned()),
            ("TZ".to_owned(), "UTC".to_owned()),
        ];
        let data = b"/workspace/src\0declare -x HOME=\"/tmp/home\"\ndeclare -x MULTI=$'a\\nb'\ndeclare -x PWD=\"/x\"\ndeclare -x SHLVL=\"1\"\n";
        let s = parse_session(data, &fixed).unwrap();
        assert_eq!(s.cwd, "/workspace/src");
        assert_eq!(s.env.get("MULTI").map(String::as_str), Some("a\nb"));
        assert!(!s.env.contains_key("PWD") && !s.env.contains_key("HOME"));
        assert_eq!(s.unset, vec!["TZ".to_owned()]);
        assert!(parse_session(b"", &fixed).is_none());
        assert!(parse_session(b"relative\0", &fixed).is_none());
    }

    #[test]
    fn status_lines_parse() {
        assert_eq!(parse_status("exit 3"), Some(ExitStatus::Code { code: 3 }));
        assert_eq!(
            parse_status("signal 9"),
            Some(ExitStatus::Signal { signal: 9 })
        );
        assert_eq!(parse_status("garbage"), None);
    }
}
