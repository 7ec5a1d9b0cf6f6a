//! The skeleton's helpers, and the episode's flow driven through a fake
//! backend with no runtime: the order of the hook calls, and how a fault
//! becomes a verdict.

use std::cell::RefCell;

use arbor_rollout::env::VerdictOutcome;

use super::*;

const TOML: &str = r#"id = "t-1"
family = "coding"
group = "g"
difficulty = "easy"
instructions = "fix it"

[limits]
max_steps = 5
step_timeout_s = 10
total_time_s = 60

[paths]
allow = ["a.py"]

[[gold]]
write = "a.py"
content = "x = 1\n"
"#;

/// A task loaded from a temporary folder (no runtime involved).
fn spec() -> (tempfile::TempDir, TaskSpec) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t-1");
    std::fs::create_dir_all(dir.join("workspace")).unwrap();
    std::fs::create_dir_all(dir.join("checks")).unwrap();
    std::fs::write(dir.join("checks/test_x.py"), "").unwrap();
    std::fs::write(dir.join("task.toml"), TOML).unwrap();
    let spec = TaskSpec::load(&dir).unwrap();
    (root, spec)
}

/// A backend with no runtime: a state is a number, a sandbox counts the
/// actions run in it, and every hook call is written to `calls`.
struct Fake {
    spec: TaskSpec,
    candidates: Vec<AgentAction>,
    /// What `episode` answers: `Some(why)` refuses the recorded episode.
    refuse: Option<&'static str>,
    /// What `run_checks` answers: `Some(why)` is a runtime fault.
    fault: Option<&'static str>,
    calls: RefCell<Vec<String>>,
}

impl Fake {
    fn new(spec: TaskSpec) -> Self {
        Self {
            spec,
            candidates: vec![AgentAction::exec("true"), AgentAction::Submit],
            refuse: None,
            fault: None,
            calls: RefCell::new(Vec::new()),
        }
    }

    fn call(&self, c: impl Into<String>) {
        self.calls.borrow_mut().push(c.into());
    }

    fn calls(&self) -> Vec<String> {
        self.calls.borrow().clone()
    }
}

impl TaskBackend for Fake {
    type Step = u64;
    type State = u32;
    type Sandbox = usize;
    type Recorded = Vec<u64>;
    type Episode = Vec<u64>;

    fn spec(&self) -> &TaskSpec {
        &self.spec
    }

    fn root_state(&self) -> u32 {
        self.call("root_state");
        7
    }

    fn candidate_list(&self) -> &[AgentAction] {
        self.call("candidate_list");
        &self.candidates
    }

    fn run_action(
        &self,
        sandbox: &mut usize,
        action: &AgentAction,
    ) -> Result<ActionOutcome, EnvError> {
        self.call(format!("run_action {}", action.text()));
        *sandbox += 1;
        Ok(ActionOutcome {
            exit: ExitStatus::Code { code: 3 },
            output: "out".into(),
            duration_us: 42,
        })
    }

    fn episode<'r>(&self, recorded: &'r Vec<u64>) -> Result<Cow<'r, Vec<u64>>, EnvError> {
        self.call("episode");
        match self.refuse {
            Some(why) => Err(EnvError::Task {
                task: self.spec.id.clone(),
                message: why.into(),
            }),
            None => Ok(Cow::Borrowed(recorded)),
        }
    }

    fn steps<'e>(&self, episode: &'e Vec<u64>) -> &'e [u64] {
        self.call("steps");
        episode
    }

    fn run_checks(
        &self,
        episode: &Vec<u64>,
        process: &mut ProcessDiagnostics,
    ) -> Result<Graded, EnvError> {
        self.call(format!("run_checks {}", episode.len()));
        process.verify_checks_ms = 5;
        match self.fault {
            Some(why) => Err(EnvError::Task {
                task: self.spec.id.clone(),
                message: why.into(),
            }),
            None => {
                let mut task = TaskOutcome {
                    checks_total: 1,
                    ..TaskOutcome::default()
                };
                task.record("c".into(), Ok(()));
                Ok(Graded {
                    task,
                    ..Graded::default()
                })
            }
        }
    }

    fn facts(&self, index: usize, step: &u64) -> StepFacts {
        self.call(format!("facts {index}"));
        StepFacts {
            is_exec: true,
            ok: *step == 0,
            duration_us: 1000,
            violation: None,
        }
    }
}

#[test]
fn reset_and_step_run_the_hooks_and_build_the_transition() {
    let (_dir, spec) = spec();
    let fake = Fake::new(spec);
    let (root, first) = reset(&fake);
    assert_eq!(root, 7);
    assert_eq!((first.step, first.exit, first.last_action), (0, None, None));
    let mut sandbox = 0usize;
    let t = step(&fake, &mut sandbox, 2, &AgentAction::exec("ls")).unwrap();
    assert_eq!(sandbox, 1, "the action ran in the sandbox it was given");
    assert_eq!(t.observation.step, 3);
    assert_eq!(t.observation.output, "out");
    assert_eq!(t.observation.exit, Some(ExitStatus::Code { code: 3 }));
    assert_eq!(t.record.exit, ExitStatus::Code { code: 3 });
    assert_eq!(t.record.duration_us, 42);
    assert_eq!(t.record.action, AgentAction::exec("ls"));
    assert_eq!(candidates(&fake), fake.candidates);
    assert_eq!(
        fake.calls(),
        ["root_state", "run_action exec: ls", "candidate_list"]
    );
    assert_eq!(reference_solution(&fake), Some(fake.spec.gold.clone()));
}

#[test]
fn verify_reads_the_diagnostics_before_the_checks_and_grades() {
    // Positive control: checks that pass give a graded reward of 1,
    // with the diagnostics of the steps and the checks' timing.
    let (_dir, spec) = spec();
    let fake = Fake::new(spec);
    let v = verify(&fake, &vec![0, 1]);
    assert_eq!(v.outcome, VerdictOutcome::Graded);
    assert_eq!(v.reward, Some(1.0));
    assert_eq!((v.process.steps, v.process.failed), (2, 1));
    assert_eq!(v.process.verify_checks_ms, 5);
    assert_eq!(
        fake.calls(),
        ["episode", "steps", "facts 0", "facts 1", "run_checks 2"]
    );
}

#[test]
fn a_fault_in_the_checks_is_a_fault_verdict_with_the_diagnostics() {
    let (_dir, spec) = spec();
    let fake = Fake {
        fault: Some("the store is gone"),
        ..Fake::new(spec)
    };
    let v = verify(&fake, &vec![0, 1]);
    let VerdictOutcome::RuntimeFault { message } = &v.outcome else {
        panic!("not a fault: {v:?}");
    };
    assert!(message.contains("the store is gone"), "{message}");
    assert_eq!(v.reward, None, "a fault is no reward, never a 0");
    assert_eq!(v.process.steps, 2, "the diagnostics survive the fault");
    assert_eq!(v.process.verify_checks_ms, 5);
    assert_eq!(v.task.checks_passed, 0);
}

#[test]
fn a_refused_episode_is_a_fault_verdict_before_any_hook() {
    let (_dir, spec) = spec();
    let fake = Fake {
        refuse: Some("not this backend's states"),
        ..Fake::new(spec)
    };
    let v = verify(&fake, &vec![0, 1]);
    let VerdictOutcome::RuntimeFault { message } = &v.outcome else {
        panic!("not a fault: {v:?}");
    };
    assert!(message.contains("not this backend's states"), "{message}");
    assert_eq!(v.reward, None);
    assert_eq!(v.process.steps, 0, "nothing of the episode was read");
    assert_eq!(fake.calls(), ["episode"]);
}

#[test]
fn line_changes_count_insertions_and_deletions() {
    assert_eq!(line_changes(b"a\nb\nc\n", b"a\nb\nc\n"), 0);
    assert_eq!(line_changes(b"a\nb\n", b"a\nx\nb\n"), 1);
    assert_eq!(line_changes(b"a\nb\n", b"a\nc\n"), 2);
    assert_eq!(line_changes(b"", b"a\nb\n"), 2);
}

#[test]
fn code_lines_skip_blanks_and_comments() {
    let actions = [
        AgentAction::exec("x = 1\n\n# note\ny = 2\n"),
        AgentAction::write("a.py", "z = 3\n"),
    ];
    assert_eq!(code_lines(&actions), 2);
}

/// A root cache with no runtime: roots are numbers, the cache a map, and
/// every hook call is written down.
#[derive(Default)]
struct FakeRoots {
    cache: RefCell<std::collections::BTreeMap<String, u32>>,
    calls: RefCell<Vec<String>>,
    /// What `make_root` answers: `Some(why)` is a failing setup step.
    setup_fails: Option<&'static str>,
}

impl RootSource for FakeRoots {
    type Root = u32;

    fn root_key(&self, spec: &TaskSpec) -> Result<String, EnvError> {
        self.calls.borrow_mut().push("root_key".into());
        Ok(format!("k-{}", spec.id))
    }

    fn cached_root(
        &self,
        _spec: &TaskSpec,
        key: &str,
        make: &mut dyn FnMut() -> Result<u32, EnvError>,
    ) -> Result<u32, EnvError> {
        self.calls.borrow_mut().push(format!("cached_root {key}"));
        if let Some(root) = self.cache.borrow().get(key) {
            return Ok(*root);
        }
        let root = make()?;
        self.cache.borrow_mut().insert(key.to_owned(), root);
        Ok(root)
    }

    fn make_root(&self, spec: &TaskSpec, key: &str) -> Result<u32, EnvError> {
        self.calls.borrow_mut().push(format!("make_root {key}"));
        match self.setup_fails {
            Some(why) => Err(EnvError::Task {
                task: spec.id.clone(),
                message: why.into(),
            }),
            None => Ok(9),
        }
    }
}

#[test]
fn a_root_is_made_once_under_its_key_and_then_found() {
    let (_dir, spec) = spec();
    let roots = FakeRoots::default();
    assert_eq!(prepare_root(&roots, &spec).unwrap(), ("k-t-1".into(), 9));
    assert_eq!(prepare_root(&roots, &spec).unwrap(), ("k-t-1".into(), 9));
    assert_eq!(
        *roots.calls.borrow(),
        [
            "root_key",
            "cached_root k-t-1",
            "make_root k-t-1",
            "root_key",
            "cached_root k-t-1"
        ]
    );
}

#[test]
fn a_failing_setup_is_an_error_and_caches_nothing() {
    let (_dir, spec) = spec();
    let roots = FakeRoots {
        setup_fails: Some("setup[0] failed"),
        ..FakeRoots::default()
    };
    let err = prepare_root(&roots, &spec).unwrap_err();
    assert!(err.to_string().contains("setup[0] failed"), "{err}");
    assert!(roots.cache.borrow().is_empty());
}
