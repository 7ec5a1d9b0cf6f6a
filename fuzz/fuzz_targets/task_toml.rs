//! A task's `task.toml` and a suite's `manifest.toml`: loaded, or refused
//! with an error that names the file it is about.
#![no_main]

use arbor_envs::suite::Suite;
use arbor_envs::task::TaskSpec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let case = arbor_fuzz::fresh_dir();
    let task = case.path().join("task");
    let suite = case.path().join("suite");
    std::fs::create_dir(&task).unwrap();
    std::fs::create_dir(&suite).unwrap();
    std::fs::write(task.join("task.toml"), data).unwrap();
    if let Err(e) = TaskSpec::load(&task) {
        let shown = e.to_string();
        assert!(
            shown.contains(task.to_str().unwrap()),
            "the error does not name the file: {shown}"
        );
    }
    std::fs::write(suite.join("manifest.toml"), data).unwrap();
    if let Err(e) = Suite::load(&suite) {
        let shown = e.to_string();
        assert!(
            shown.contains("manifest.toml"),
            "the error does not name the file: {shown}"
        );
    }
});
