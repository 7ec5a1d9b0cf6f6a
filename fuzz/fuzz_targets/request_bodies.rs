//! What a client sends the server: the JSON bodies of every route, the
//! workspace paths of the file API, and upload archives. Paths normalise to
//! relative paths without `..`; an accepted archive extracts only inside
//! its destination.
#![no_main]

use arbor_server::archive::{extract, read_entries, relative, workspace_path};
use arbor_server::types::{
    CreateSandbox, ExecRequest, ForkRequest, ReplayRequest, RolloutRequest, SnapshotRequest,
    StepRequest,
};
use libfuzzer_sys::fuzz_target;

fn json(data: &[u8]) {
    let _ = serde_json::from_slice::<CreateSandbox>(data);
    let _ = serde_json::from_slice::<ExecRequest>(data);
    let _ = serde_json::from_slice::<ForkRequest>(data);
    let _ = serde_json::from_slice::<SnapshotRequest>(data);
    let _ = serde_json::from_slice::<ReplayRequest>(data);
    let _ = serde_json::from_slice::<StepRequest>(data);
    let _ = serde_json::from_slice::<RolloutRequest>(data);
    let _ = serde_json::from_slice::<arbor_runtime::store::Action>(data);
}

fn path(text: &str) {
    for got in [relative(text), workspace_path(text)].into_iter().flatten() {
        assert!(!got.starts_with('/'), "{text:?} -> {got:?}");
        assert!(
            got.split('/').all(|c| c != ".." && c != "."),
            "{text:?} -> {got:?}"
        );
        assert!(!got.contains('\0'));
    }
}

fn archive(data: &[u8]) {
    let Ok(entries) = read_entries(data, 1000) else {
        return;
    };
    let out = arbor_fuzz::Contained::default();
    let _ = extract(&entries, &out.dest);
    out.check();
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    match pick % 3 {
        0 => json(rest),
        1 => path(&String::from_utf8_lossy(rest)),
        _ => archive(rest),
    }
});
