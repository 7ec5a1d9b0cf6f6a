//! The fixed, deterministic environment every action starts from.
//!
//! Determinism controls (listed in the README): a fixed `PATH`, `HOME`,
//! `TZ=UTC`, a C.UTF-8 locale, `PYTHONHASHSEED=0`,
//! `PYTHONDONTWRITEBYTECODE=1`, `SOURCE_DATE_EPOCH`, fixed git identity and
//! dates, and no system git configuration. The hostname is fixed by the
//! helper, and each action gets a fresh pid namespace so PIDs repeat.

/// `SOURCE_DATE_EPOCH` and the git dates: 2000-01-01T00:00:00Z.
pub const FIXED_EPOCH: u64 = 946_684_800;

/// The hostname inside every sandbox.
pub const HOSTNAME: &str = "arbor";

/// The fixed environment, in a stable order.
pub fn fixed_env() -> Vec<(String, String)> {
    let epoch = FIXED_EPOCH.to_string();
    let git_date = format!("@{FIXED_EPOCH} +0000");
    [
        (
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ),
        ("HOME", "/tmp/home"),
        ("USER", "root"),
        ("LOGNAME", "root"),
        ("SHELL", "/bin/bash"),
        ("TERM", "dumb"),
        ("TMPDIR", "/tmp"),
        ("TZ", "UTC"),
        ("LANG", "C.UTF-8"),
        ("LC_ALL", "C.UTF-8"),
        ("PYTHONHASHSEED", "0"),
        ("PYTHONDONTWRITEBYTECODE", "1"),
        ("PYTHONUNBUFFERED", "1"),
        ("SOURCE_DATE_EPOCH", epoch.as_str()),
        ("GIT_AUTHOR_NAME", "Arbor Agent"),
        ("GIT_AUTHOR_EMAIL", "agent@arbor.invalid"),
        ("GIT_COMMITTER_NAME", "Arbor Agent"),
        ("GIT_COMMITTER_EMAIL", "agent@arbor.invalid"),
        ("GIT_AUTHOR_DATE", git_date.as_str()),
        ("GIT_COMMITTER_DATE", git_date.as_str()),
        ("GIT_CONFIG_NOSYSTEM", "1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// The environment an action starts with: the fixed environment, minus the
/// session's unset variables, plus the session's exported variables.
pub fn action_env(session: &crate::store::object::SessionState) -> Vec<(String, String)> {
    action_env_over(fixed_env(), session)
}

/// [`action_env`] over another fixed environment (an image's).
pub fn action_env_over(
    fixed: Vec<(String, String)>,
    session: &crate::store::object::SessionState,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = fixed
        .into_iter()
        .filter(|(k, _)| !session.unset.contains(k) && !session.env.contains_key(k))
        .collect();
    env.extend(session.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::object::SessionState;

    #[test]
    fn session_overrides_and_unsets_apply() {
        let mut s = SessionState::default();
        s.env.insert("TZ".into(), "Europe/Paris".into());
        s.env.insert("NEW".into(), "1".into());
        s.unset.push("LANG".into());
        let env = action_env(&s);
        let get = |k: &str| env.iter().find(|(ek, _)| ek == k).map(|(_, v)| v.as_str());
        assert_eq!(get("TZ"), Some("Europe/Paris"));
        assert_eq!(get("NEW"), Some("1"));
        assert_eq!(get("LANG"), None);
        assert_eq!(env.iter().filter(|(k, _)| k == "TZ").count(), 1);
    }
}
