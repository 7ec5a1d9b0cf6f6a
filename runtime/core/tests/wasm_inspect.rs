//! The Python guest's native inspector (`WasmSandbox::inspect`, feature
//! `wasm`): exact plain types are serialised, subclasses and objects are
//! refused, and nothing the session's code does to the interpreter changes
//! the answer. The guest is built by `.ci/build-guests`;
//! `ARBOR_PYTHON_GUEST` names another build of it.

use std::sync::OnceLock;

use arbor_runtime::store::{OwnerMode, Store};
use arbor_runtime::wasm::inspect::Inspected;
use arbor_runtime::wasm::{BootSpec, StepOutcome, WasmOptions, WasmRuntime, WasmSandbox};
use serde_json::json;

fn guest() -> &'static [u8] {
    static GUEST: OnceLock<Vec<u8>> = OnceLock::new();
    GUEST.get_or_init(|| arbor_runtime::wasm::python_guest().unwrap_or_else(|e| panic!("{e}")))
}

fn session(dir: &std::path::Path) -> WasmSandbox {
    let store = Store::open(
        dir,
        OwnerMode::for_current_user(arbor_runtime::DEFAULT_UID_BASE),
    )
    .unwrap();
    let rt = WasmRuntime::open(store, WasmOptions::default()).unwrap();
    rt.import(guest(), &BootSpec::python())
        .unwrap()
        .open()
        .unwrap()
}

fn run(sb: &mut WasmSandbox, code: &str) {
    let r = sb.step(code).unwrap();
    assert_eq!(
        r.outcome,
        StepOutcome::Ok,
        "step {code:?} failed: {}",
        r.stderr_text()
    );
}

fn value(sb: &mut WasmSandbox, name: &str) -> serde_json::Value {
    match sb.inspect(name).unwrap() {
        Inspected::Value(v) => v,
        other => panic!("{name}: {other:?}"),
    }
}

fn refused(sb: &mut WasmSandbox, name: &str) -> String {
    match sb.inspect(name).unwrap() {
        Inspected::Refused(why) => why,
        other => panic!("{name} was not refused: {other:?}"),
    }
}

#[test]
fn exact_plain_types_are_serialised_canonically() {
    let d = tempfile::tempdir().unwrap();
    let mut sb = session(d.path());
    run(
        &mut sb,
        "a = None\nb = True\nc = -7\nd = 2**70\ne = 2.5\nf = 1.0\ng = 'h\\u00e9\"\\n'\n\
         h = [1, [2, 'x'], (3, None)]\ni = {'z': 1, 'a': {'k': [False]}}\n\
         j = {3, 1, 2}\nk = frozenset({'b', 'a'})\nl = ()\nm = {'tuple': [1]}\n",
    );
    assert_eq!(value(&mut sb, "a"), json!(null));
    assert_eq!(value(&mut sb, "b"), json!(true));
    assert_eq!(value(&mut sb, "c"), json!(-7));
    assert_eq!(
        value(&mut sb, "d"),
        json!({"int": "1180591620717411303424"})
    );
    assert_eq!(value(&mut sb, "e"), json!(2.5));
    let f = value(&mut sb, "f");
    assert!(f.is_f64(), "a float stays a float: {f}");
    assert_eq!(value(&mut sb, "g"), json!("hé\"\n"));
    assert_eq!(
        value(&mut sb, "h"),
        json!([1, [2, "x"], {"tuple": [3, null]}])
    );
    assert_eq!(value(&mut sb, "i"), json!({"a": {"k": [false]}, "z": 1}));
    assert_eq!(value(&mut sb, "j"), json!({"set": [1, 2, 3]}));
    assert_eq!(value(&mut sb, "k"), json!({"set": ["a", "b"]}));
    assert_eq!(value(&mut sb, "l"), json!({"tuple": []}));
    assert_eq!(
        value(&mut sb, "m"),
        json!({"dict": {"tuple": [1]}}),
        "a dict that looks like a marker is wrapped"
    );
    assert_eq!(sb.inspect("nope").unwrap(), Inspected::Undefined);
}

#[test]
fn subclasses_objects_and_odd_values_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let mut sb = session(d.path());
    run(
        &mut sb,
        "class L(list):\n    def __eq__(self, o): return True\n    def __repr__(self): return '[1, 2, 3]'\n\
         forged = L([9])\n\
         class I(int):\n    def __eq__(self, o): return True\n\
         forged_int = I(3)\n\
         class D(dict):\n    pass\n\
         forged_dict = D(a=1)\n\
         class Obj:\n    pass\n\
         obj = Obj()\nfn = len\nnan = float('nan')\n\
         inner = [1, L([2])]\nbad_key = {1: 2}\nnested_set = {(1, 2)}\n\
         cyc = []\ncyc.append(cyc)\n\
         deep = []\nfor _ in range(100):\n    deep = [deep]\n\
         big = 'x' * (2 << 20)\n",
    );
    for (name, type_name) in [
        ("forged", "L"),
        ("forged_int", "I"),
        ("forged_dict", "D"),
        ("obj", "Obj"),
        ("fn", "builtin"),
        ("inner", "L"),
        ("bad_key", "int"),
        ("nested_set", "tuple"),
    ] {
        let why = refused(&mut sb, name);
        assert!(why.contains(type_name), "{name}: {why}");
    }
    assert!(refused(&mut sb, "nan").contains("finite"));
    assert!(refused(&mut sb, "cyc").contains("deeper"));
    assert!(refused(&mut sb, "deep").contains("deeper"));
    let why = refused(&mut sb, "big");
    assert!(why.contains("bytes"), "{why}");
    // The session goes on after refusals.
    run(&mut sb, "ok = [1]");
    assert_eq!(value(&mut sb, "ok"), json!([1]));
}

#[test]
fn monkeypatching_the_interpreter_changes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let mut sb = session(d.path());
    run(
        &mut sb,
        "import builtins, json\nresult = [3, 2, 1]\nscores = {'a': 1}\n\
         builtins.repr = lambda *a: '[1, 2, 3]'\nbuiltins.str = lambda *a: 'x'\n\
         builtins.sorted = lambda *a, **k: []\njson.dumps = lambda *a, **k: '[1, 2, 3]'\n\
         json.JSONEncoder.encode = lambda *a: '[]'\n",
    );
    assert_eq!(value(&mut sb, "result"), json!([3, 2, 1]));
    assert_eq!(value(&mut sb, "scores"), json!({"a": 1}));
    // A str-subclass key that claims to equal every name is never
    // consulted: here it even captured the assignment (the dict found it
    // "equal" to 'answer'), so the name is not bound to an exact str key
    // and the inspector fails closed.
    run(
        &mut sb,
        "class K(type('')):\n    def __eq__(self, o): return True\n    def __hash__(self): return hash('answer')\n\
         globals()[K('decoy')] = [0]\nanswer = [42]\nother = [7]\n",
    );
    assert_eq!(sb.inspect("answer").unwrap(), Inspected::Undefined);
    assert_eq!(value(&mut sb, "other"), json!([7]));
    run(&mut sb, "answer = [43]\n");
    assert_eq!(sb.inspect("answer").unwrap(), Inspected::Undefined);
    // A trace hook could rebind names behind the caller's back: refused.
    run(&mut sb, "import sys\nsys.settrace(lambda *a: None)\n");
    let why = refused(&mut sb, "other");
    assert!(why.contains("trace"), "{why}");
}

#[test]
fn inspection_is_not_an_action_and_ended_sessions_say_so() {
    let d = tempfile::tempdir().unwrap();
    let mut sb = session(d.path());
    run(&mut sb, "x = 1");
    let snap = sb.snapshot().unwrap();
    let mut fork = snap.open().unwrap();
    assert_eq!(value(&mut fork, "x"), json!(1));
    assert_eq!(value(&mut fork, "x"), json!(1), "inspecting twice works");
    // The parent snapshot records exactly the one step.
    assert_eq!(snap.manifest().actions.len(), 1);
    let r = fork.step("import sys\nsys.exit(0)").unwrap();
    assert_eq!(
        r.outcome,
        StepOutcome::Exception,
        "SystemExit is an exception here"
    );
    assert_eq!(value(&mut fork, "x"), json!(1));
    // An inspected sandbox cannot be snapshotted (its state would not
    // replay); a fork that was not inspected can.
    let err = fork.snapshot().unwrap_err().to_string();
    assert!(err.contains("inspected"), "{err}");
    let mut clean = snap.open().unwrap();
    run(&mut clean, "y = 2");
    assert_eq!(clean.snapshot().unwrap().manifest().actions.len(), 1);
}

#[test]
fn per_sandbox_limits_stop_a_loop_early() {
    let d = tempfile::tempdir().unwrap();
    let mut sb = session(d.path());
    run(&mut sb, "x = [1]");
    let snap = sb.snapshot().unwrap();
    let mut fork = snap.open().unwrap();
    let mut limits = fork.step_limits();
    limits.fuel_per_step = 200_000_000;
    fork.set_step_limits(limits);
    let t = std::time::Instant::now();
    let r = fork.step("while True:\n    pass\n").unwrap();
    eprintln!("200M fuel ran out in {:?}", t.elapsed());
    assert_eq!(r.outcome, StepOutcome::OutOfFuel);
    assert!(matches!(
        fork.inspect("x").unwrap(),
        Inspected::Failed(StepOutcome::Ended)
    ));
    // The snapshot is untouched: a new fork has the runtime's limits and works.
    let mut again = snap.open().unwrap();
    assert_eq!(value(&mut again, "x"), json!([1]));
}
