//! What an action's shell leaves for the helper to read back: the status
//! line, and the `cwd\0` + `declare -px` dump that becomes the session
//! state. The agent writes these bytes (it can replace the shell's
//! builtins), so they are parsed as hostile.
#![no_main]

use libfuzzer_sys::fuzz_target;

use arbor_runtime::fuzzing::{parse_declarations, parse_session, parse_status};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        parse_status(text.lines().next().unwrap_or(""));
    }
    let fixed = vec![
        ("HOME".to_owned(), "/root".to_owned()),
        ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
    ];
    if let Some(state) = parse_session(data, &fixed) {
        assert!(state.cwd.starts_with('/'), "{state:?}");
        for k in state.env.keys() {
            assert!(
                !matches!(k.as_str(), "PWD" | "OLDPWD" | "SHLVL" | "_"),
                "{k}"
            );
        }
        for k in &state.unset {
            assert!(fixed.iter().any(|(f, _)| f == k), "{k} was never fixed");
        }
    }
    for (name, _) in parse_declarations(data) {
        assert!(!name.is_empty());
    }
});
