//! Loading tasks: good ones load, and malformed fields name the file, line and field.

use super::*;

fn task_dir(toml: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t-1");
    std::fs::create_dir_all(dir.join("workspace")).unwrap();
    std::fs::create_dir_all(dir.join("checks")).unwrap();
    std::fs::write(dir.join("checks/test_x.py"), "").unwrap();
    std::fs::write(dir.join("task.toml"), toml).unwrap();
    root
}

const GOOD: &str = r#"id = "t-1"
family = "coding"
group = "g"
difficulty = "easy"
instructions = "fix it"

[limits]
max_steps = 5
step_timeout_s = 10
total_time_s = 60

[paths]
allow = ["src/*.py"]

[[gold]]
write = "src/a.py"
content = "x = 1\n"

[[candidates]]
label = "wrong"
replaces = 0
write = "src/a.py"
content = "x = 2\n"
"#;

#[test]
fn a_good_task_loads() {
    let root = task_dir(GOOD);
    let t = TaskSpec::load(&root.path().join("t-1")).unwrap();
    assert_eq!(t.id, "t-1");
    assert_eq!(t.family, Family::Coding);
    assert_eq!(t.limits.step_timeout_ms, 10_000);
    assert!(t.allow.matches("src/a.py"));
    assert!(
        !t.allow.matches("src/sub/a.py"),
        "* stays within a component"
    );
    assert!(t.byproducts.matches("src/__pycache__/a.cpython-311.pyc"));
    assert_eq!(t.candidates[0].replaces, Some(0));
    assert_eq!(t.gold, vec![AgentAction::write("src/a.py", "x = 1\n")]);
}

fn load_err(toml: &str) -> String {
    let root = task_dir(toml);
    TaskSpec::load(&root.path().join("t-1"))
        .unwrap_err()
        .to_string()
}

#[test]
fn malformed_fields_name_file_line_and_field() {
    let e = load_err(&GOOD.replace("max_steps = 5", "max_steps = \"five\""));
    assert!(e.contains("task.toml:8:"), "{e}");
    assert!(e.contains("field `limits.max_steps`"), "{e}");

    let e = load_err(&GOOD.replace("family = \"coding\"", "family = \"cooking\""));
    assert!(e.contains("task.toml:2:"), "{e}");
    assert!(e.contains("field `family`"), "{e}");
    assert!(e.contains("cooking"), "{e}");

    let e = load_err(&GOOD.replace("replaces = 0", "replaces = 7"));
    assert!(e.contains("candidates[0].replaces"), "{e}");
    assert!(e.contains("not an index"), "{e}");

    let e = load_err(&GOOD.replace("id = \"t-1\"", "id = \"other\""));
    assert!(e.contains("task.toml:1:"), "{e}");
    assert!(e.contains("differs from the directory name"), "{e}");

    let e = load_err(&GOOD.replace("instructions = \"fix it\"\n", ""));
    assert!(e.contains("field `instructions`"), "{e}");
    assert!(e.contains("missing"), "{e}");

    let e = load_err(&GOOD.replace("content = \"x = 1\\n\"", "content = \"x\"\nexec = \"ls\""));
    assert!(e.contains("exactly one of"), "{e}");
    assert!(e.contains("task.toml:1"), "{e}");

    let e = load_err(&GOOD.replace("allow = [\"src/*.py\"]", "allow = [\"../x\"]"));
    assert!(e.contains("field `paths.allow`"), "{e}");

    let e = load_err(&GOOD.replace("[limits]", "bogus = 1\n[limits]"));
    assert!(e.contains("unknown field `bogus`"), "{e}");
    assert!(e.contains("task.toml:7:"), "{e}");
}

#[test]
fn an_image_is_a_name_or_a_recipe_table_checked_field_by_field() {
    let with = |image: &str| GOOD.replace("[limits]", &format!("{image}\n[limits]"));
    let root = task_dir(&with("image = \"py-311\""));
    let t = TaskSpec::load(&root.path().join("t-1")).unwrap();
    assert_eq!(t.image, Some(TaskImage::Named("py-311".into())));
    let recipe =
        "[image]\ndebian = \"bookworm\"\npackages = [\"python3\"]\npip = [\"six==1.16.0\"]\n";
    let root = task_dir(&with(recipe));
    let t = TaskSpec::load(&root.path().join("t-1")).unwrap();
    match &t.image {
        Some(TaskImage::Recipe(r)) => {
            assert_eq!(r.debian, "bookworm");
            assert_eq!(r.pip, vec!["six==1.16.0"]);
        }
        other => panic!("expected a recipe, got {other:?}"),
    }
    let e = load_err(&with("[image]\ndebain = \"bookworm\"\n"));
    assert!(e.contains("field `image`") && e.contains("debain"), "{e}");
    let e = load_err(&with(
        "[image]\ndebian = \"bookworm\"\npip = [\"--index-url=http://x\"]\n",
    ));
    assert!(e.contains("field `image`") && e.contains("pip"), "{e}");
    let e = load_err(&with("image = 3"));
    assert!(e.contains("field `image`"), "{e}");
    // workdir = "image" puts the workspace at the image's WorkingDir too.
    let root = task_dir(&with("image = \"py-311\"\nworkdir = \"image\""));
    assert!(
        TaskSpec::load(&root.path().join("t-1"))
            .unwrap()
            .at_image_workdir
    );
    let root = task_dir(&with("image = \"py-311\""));
    assert!(
        !TaskSpec::load(&root.path().join("t-1"))
            .unwrap()
            .at_image_workdir
    );
    let e = load_err(&with("workdir = \"image\""));
    assert!(
        e.contains("field `workdir`") && e.contains("needs the task to run on an image"),
        "{e}"
    );
    let e = load_err(&with("image = \"py-311\"\nworkdir = \"/app\""));
    assert!(e.contains("field `workdir`"), "{e}");
}

#[test]
fn setup_egress_names_hosts_and_needs_setup_commands() {
    let with = |extra: &str| {
        GOOD.replace(
            "instructions = \"fix it\"\n",
            &format!("instructions = \"fix it\"\n{extra}"),
        )
    };
    let root = task_dir(&with(
        "setup = [\"true\"]\nsetup_allow_hosts = [\"files.example.org\"]\n",
    ));
    let t = TaskSpec::load(&root.path().join("t-1")).unwrap();
    assert_eq!(t.setup_allow_hosts, vec!["files.example.org"]);
    let e = load_err(&with(
        "setup = [\"true\"]\nsetup_allow_hosts = [\"10.1.2.3\"]\n",
    ));
    assert!(e.contains("field `setup_allow_hosts`"), "{e}");
    let e = load_err(&with("setup_allow_hosts = [\"files.example.org\"]\n"));
    assert!(e.contains("no setup commands"), "{e}");
}

const WASM: &str = r#"id = "t-1"
family = "interpreter"
backend = "wasm"
group = "g"
difficulty = "easy"
instructions = "define f"
setup = ["data = [1, 2]\n"]

[limits]
max_steps = 5
step_timeout_s = 10
total_time_s = 60
step_fuel = 100000000

[paths]
allow = []

[[gold]]
exec = "def f(x):\n    return x + 1\n"

[[session_check]]
id = "f"
expr = "f(41)"
expect = 42

[[session_check]]
id = "pair"
run = "p = (f(1), None)"
expr = "p"
expect_json = '{"tuple": [2, null]}'
tolerance = 0.5

[[session_check]]
id = "data"
name = "data"
expect = [1, 2]

[[workspace_check]]
id = "out"
path = "out.json"
json = { total = 3 }
"#;

#[test]
fn a_wasm_task_loads_with_declarative_checks() {
    let root = task_dir(WASM);
    let t = TaskSpec::load(&root.path().join("t-1")).unwrap();
    assert_eq!(t.backend, Backend::Wasm);
    assert_eq!(t.family, Family::Interpreter);
    assert_eq!(t.step_fuel, 100_000_000);
    assert_eq!(t.check_fuel, DEFAULT_CHECK_FUEL);
    assert_eq!(t.session_checks.len(), 3);
    assert_eq!(t.session_checks[0].expect, serde_json::json!(42));
    assert_eq!(
        t.session_checks[1].expect,
        serde_json::json!({"tuple": [2, null]})
    );
    assert_eq!(t.session_checks[1].tolerance, Some(0.5));
    assert_eq!(
        t.session_checks[2].target,
        SessionTarget::Name("data".into())
    );
    assert_eq!(
        t.workspace_checks[0].expect,
        WorkspaceExpect::Json(serde_json::json!({"total": 3}))
    );
    let native = TaskSpec::load(&task_dir(GOOD).path().join("t-1")).unwrap();
    assert_eq!(native.backend, Backend::Native, "the default backend");
    assert!(native.session_checks.is_empty());
}

#[test]
fn malformed_wasm_fields_name_file_line_and_field() {
    let e = load_err(&WASM.replace("backend = \"wasm\"", "backend = \"jvm\""));
    assert!(e.contains("task.toml:3:"), "{e}");
    assert!(e.contains("field `backend`"), "{e}");
    assert!(e.contains("jvm"), "{e}");

    let e = load_err(&WASM.replace("expr = \"f(41)\"\n", ""));
    assert!(e.contains("session_check[0].expr"), "{e}");
    assert!(e.contains("exactly one of `expr`"), "{e}");

    let e = load_err(&WASM.replace("name = \"data\"", "name = \"1x\""));
    assert!(e.contains("session_check[2].name"), "{e}");

    let e = load_err(&WASM.replace("expect = 42\n", "expect = 42\nexpect_json = \"42\"\n"));
    assert!(e.contains("session_check[0].expect"), "{e}");

    let e = load_err(&WASM.replace("[2, null]", "5"));
    assert!(e.contains("session_check[1].expect"), "{e}");
    assert!(e.contains("not canonical JSON"), "{e}");

    let e = load_err(&WASM.replace("id = \"pair\"", "id = \"f\""));
    assert!(e.contains("not a unique check id"), "{e}");

    let e = load_err(&WASM.replace("json = { total = 3 }", "text = \"x\"\njson = 1"));
    assert!(e.contains("workspace_check[0].text"), "{e}");

    let e = load_err(&WASM.replace("step_fuel = 100000000", "step_fuel = 5"));
    assert!(e.contains("field `limits.step_fuel`"), "{e}");

    let e = load_err(&GOOD.replace(
        "[limits]",
        "[[session_check]]\nid = \"x\"\nname = \"x\"\nexpect = 1\n\n[limits]",
    ));
    assert!(e.contains("only `backend = \"wasm\"` tasks"), "{e}");
    assert!(e.contains("task.toml:7:"), "{e}");

    let e = load_err(&WASM.replace(
        "[[session_check]]\nid = \"f\"\nexpr = \"f(41)\"\nexpect = 42\n\n[[session_check]]\nid = \"pair\"\nrun = \"p = (f(1), None)\"\nexpr = \"p\"\nexpect_json = '{\"tuple\": [2, null]}'\ntolerance = 0.5\n\n[[session_check]]\nid = \"data\"\nname = \"data\"\nexpect = [1, 2]\n",
        "",
    ));
    assert!(e.contains("at least one [[session_check]]"), "{e}");
}
