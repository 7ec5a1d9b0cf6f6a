//! Fork independence (design invariant 1), as a property test: random
//! writes, deletes and renames in K forks of one snapshot; each fork sees
//! exactly its own changes; the parent snapshot and the host are unchanged.

use std::collections::BTreeMap;
use std::path::Path;

use arbor_runtime::ExecOptions;
use proptest::prelude::*;

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");
const NAMES: &[&str] = &["a.txt", "b.txt", "src/c.py", "src/d.py", "e"];

#[derive(Clone, Debug)]
enum Op {
    Write(usize, u8),
    Delete(usize),
    Rename(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..NAMES.len(), any::<u8>()).prop_map(|(i, b)| Op::Write(i, b)),
        (0..NAMES.len()).prop_map(Op::Delete),
        (0..NAMES.len(), 0..NAMES.len()).prop_map(|(a, b)| Op::Rename(a, b)),
    ]
}

fn initial() -> BTreeMap<String, String> {
    NAMES
        .iter()
        .take(3)
        .map(|n| ((*n).to_owned(), format!("init {n}\n")))
        .collect()
}

/// Apply to the model and return the equivalent shell command.
fn apply(model: &mut BTreeMap<String, String>, op: &Op) -> String {
    match *op {
        Op::Write(i, b) => {
            let name = NAMES[i];
            model.insert(name.to_owned(), format!("v{b}\n"));
            format!("mkdir -p \"$(dirname {name})\" && echo v{b} > {name}")
        }
        Op::Delete(i) => {
            model.remove(NAMES[i]);
            format!("rm -f {}", NAMES[i])
        }
        Op::Rename(a, b) => {
            let (from, to) = (NAMES[a], NAMES[b]);
            if from != to
                && let Some(v) = model.remove(from)
            {
                model.insert(to.to_owned(), v);
                return format!("mkdir -p \"$(dirname {to})\" && mv -f {from} {to}");
            }
            "true".to_owned()
        }
    }
}

const LIST: &str = "find . -type f | sort | while read -r f; do printf '%s=%s' \"${f#./}\" \"$(cat \"$f\")\"; echo; done";

fn listing(model: &BTreeMap<String, String>) -> String {
    model
        .iter()
        .map(|(k, v)| format!("{k}={}\n", v.trim_end()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]
    #[test]
    fn forks_see_exactly_their_own_changes(ops in proptest::collection::vec(proptest::collection::vec(op(), 1..6), 3)) {
        let t = arbor_tests::runtime(Path::new(HELPER));
        let src = t.scratch("src");
        for (name, content) in initial() {
            let p = src.join(&name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }
        let host_before = std::fs::read_dir(&src).unwrap().count();
        let base = t.runtime.import(&src, None).unwrap();
        let mut forks = base.fork(ops.len()).unwrap();
        let mut models = Vec::new();
        for (sb, ops) in forks.iter_mut().zip(&ops) {
            let mut model = initial();
            for op in ops {
                let cmd = apply(&mut model, op);
                let obs = sb.exec(&cmd, &ExecOptions::default()).unwrap();
                prop_assert_eq!(obs.code(), Some(0), "{}: {}", cmd, String::from_utf8_lossy(&obs.stderr));
            }
            models.push(model);
        }
        // Each fork sees exactly its own model, also after all forks changed things.
        let mut snaps = Vec::new();
        for (sb, model) in forks.iter_mut().zip(&models) {
            let obs = sb.exec(LIST, &ExecOptions::default()).unwrap();
            prop_assert_eq!(obs.stdout_text(), listing(model));
            snaps.push(sb.snapshot().unwrap());
        }
        // The parent snapshot is unchanged: a fresh fork sees the initial state.
        let mut fresh = base.open().unwrap();
        prop_assert_eq!(fresh.exec(LIST, &ExecOptions::default()).unwrap().stdout_text(), listing(&initial()));
        // Each child snapshot reproduces its fork's state in a new sandbox.
        for (snap, model) in snaps.iter().zip(&models) {
            let mut sb = snap.open().unwrap();
            prop_assert_eq!(sb.exec(LIST, &ExecOptions::default()).unwrap().stdout_text(), listing(model));
        }
        // The host directory is untouched.
        prop_assert_eq!(std::fs::read_dir(&src).unwrap().count(), host_before);
        for (name, content) in initial() {
            prop_assert_eq!(std::fs::read_to_string(src.join(&name)).unwrap(), content);
        }
    }
}
