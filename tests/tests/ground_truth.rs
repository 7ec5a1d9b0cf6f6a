//! Exact ground-truth credit (`arbor credit eval`): the DP and the
//! estimators on a hand-built MDP, then a real task explored in sandboxes,
//! its cache checked against a live driver tree (and a corrupted cache
//! caught), and the quick evaluation end to end.

use std::path::Path;
use std::sync::Arc;

use arbor_envs::TaskEnv;
use arbor_envs::rollout::policy::Rng;
use arbor_envs::suite::{Suite, bundled_dir};
use arbor_trainer::ground_truth::estimators::{Estimates, Estimator, standard_set};
use arbor_trainer::ground_truth::eval::{
    EvalConfig, QUICK_TASKS, Quiet, TaskInput, monte_carlo, prepare, run,
};
use arbor_trainer::ground_truth::explore::mask_durations;
use arbor_trainer::ground_truth::mdp::{Budget, Mdp, MdpError, MdpState, Next, Transition};
use arbor_trainer::ground_truth::metrics::{budget_to_reach, score};
use arbor_trainer::ground_truth::report::{REPORT_SCHEMA, write_outputs};
use arbor_trainer::ground_truth::validate::{check_tree, grow_live};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");

/// A task-shaped MDP: `H` decisions; at step `t` with `p` right actions
/// done, action 0 is right (p + 1), action 1 is neutral, action 2 is a trap
/// (the episode can no longer succeed), action 3 submits. Success needs 2
/// right actions. The policy differs from state to state.
fn task_mdp(horizon: usize) -> Mdp {
    // States by (t, p, trapped); index assigned in creation order.
    let mut keys: Vec<(usize, usize, bool)> = vec![(0, 0, false)];
    let mut states: Vec<MdpState> = Vec::new();
    let reward = |p: usize, trapped: bool| if p >= 2 && !trapped { 1.0 } else { 0.0 };
    let mut i = 0;
    while i < keys.len() {
        let (t, p, trapped) = keys[i];
        let mut actions = Vec::new();
        for (np, ntrap) in [(p + 1, trapped), (p, trapped), (p, true)] {
            let next = if t + 1 == horizon {
                Next::End(reward(np, ntrap))
            } else {
                let key = (t + 1, np, ntrap);
                let j = keys.iter().position(|k| *k == key).unwrap_or_else(|| {
                    keys.push(key);
                    keys.len() - 1
                });
                Next::State(j)
            };
            actions.push(Transition {
                next,
                executes: true,
            });
        }
        actions.push(Transition {
            next: Next::End(reward(p, trapped)),
            executes: false,
        });
        let tilt = 0.1 * ((t + p) % 3) as f64;
        states.push(MdpState {
            step: t,
            actions,
            stop_reward: reward(p, trapped),
            policy: vec![0.4 + tilt, 0.3 - tilt / 2.0, 0.1, 0.2 - tilt / 2.0],
        });
        i += 1;
    }
    Mdp { states }
}

#[test]
fn exact_values_satisfy_the_invariants_and_match_monte_carlo() {
    let mdp = task_mdp(4);
    let exact = mdp.exact().unwrap();
    assert!(
        exact.max_weighted_advantage(&mdp) < 1e-12,
        "Σ_a π(a|s)·A(s,a) = 0 at every state"
    );
    assert_eq!(exact.visitation[0], 1.0);
    // Visitation per step sums to the probability of not having submitted yet.
    let by_step = |t: usize| -> f64 {
        mdp.states
            .iter()
            .zip(&exact.visitation)
            .filter(|(s, _)| s.step == t)
            .map(|(_, d)| d)
            .sum()
    };
    assert!((by_step(0) - 1.0).abs() < 1e-12);
    assert!(
        (by_step(1) - (1.0 - mdp.states[0].policy[3])).abs() < 1e-12,
        "everything but a first submit reaches step 1"
    );
    // The exact root value agrees with simulated episodes...
    let mc = monte_carlo(&mdp, 20_000, 3, 500).unwrap();
    let v = exact.v[0];
    let se = (v * (1.0 - v) / 20_000.0).sqrt();
    assert!((mc.mean - v).abs() < 4.0 * se, "V {v} vs MC {mc:?}");
    assert!(
        mc.lo <= v && v <= mc.hi,
        "V {v} outside the MC interval {mc:?}"
    );
    // ... and a wrong value would not (the check can fail).
    assert!((mc.mean - (v + 0.05)).abs() > 4.0 * se);
    // The empirical visitation of a deep state matches d^π.
    let target = mdp.states.len() - 1;
    let mut rng = Rng::new(5);
    let n = 20_000;
    let hits = (0..n)
        .filter_map(|_| mdp.episode(0, &mut Budget::new(u64::MAX), &mut rng))
        .filter(|e| e.steps.iter().any(|(s, _)| *s == target))
        .count();
    let d = exact.visitation[target];
    assert!(
        (hits as f64 / n as f64 - d).abs() < 4.0 * (d * (1.0 - d) / n as f64).sqrt() + 1e-3,
        "state {target}: {hits}/{n} vs d {d}"
    );
}

#[test]
fn malformed_mdps_are_named() {
    let good = task_mdp(3);
    assert!(good.check().is_ok());
    let mut bad = good.clone();
    bad.states[0].policy[0] += 0.1;
    assert!(matches!(
        bad.check(),
        Err(MdpError::PolicySum { state: 0, .. })
    ));
    let mut bad = good.clone();
    bad.states[0].actions[0].next = Next::State(0);
    assert!(matches!(
        bad.check(),
        Err(MdpError::StepOrder { state: 0, .. })
    ));
    let mut bad = good.clone();
    bad.states[1].actions[3].next = Next::State(2);
    assert!(matches!(
        bad.check(),
        Err(MdpError::SubmitContinues { state: 1, .. }) | Err(MdpError::StepOrder { .. })
    ));
    let mut bad = good.clone();
    bad.states[0].actions[1].next = Next::State(99);
    let err = bad.check().unwrap_err();
    assert!(err.to_string().contains("state 99"), "{err}");
    assert!(Mdp::default().exact().is_err());
}

fn mean_mse(mdp: &Mdp, est: Estimator, budget: u64, seeds: u64) -> f64 {
    let exact = mdp.exact().unwrap();
    let v: Vec<f64> = (0..seeds)
        .filter_map(|s| score(&exact, &est.estimate(mdp, budget, 1000 + s)).mse)
        .collect();
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn estimators_stay_within_budget_and_consistent_ones_improve_with_it() {
    let mdp = task_mdp(4);
    let exact = mdp.exact().unwrap();
    for est in standard_set(1.0, 4) {
        for budget in [2, 7, 30, 480] {
            for seed in 0..30 {
                let e = est.estimate(&mdp, budget, seed);
                assert!(
                    e.budget_used <= budget,
                    "{est:?} at {budget}: {}",
                    e.budget_used
                );
                // Positive control: the budget is put to use (trees stop
                // early once 64 walks in a row find only known paths, as
                // the driver's do: on this small MDP that happens).
                if budget >= 30 {
                    assert!(e.budget_used > 0 && !e.pairs.is_empty(), "{est:?}");
                    let tree = matches!(
                        est,
                        Estimator::Uniform { .. }
                            | Estimator::Entropy { .. }
                            | Estimator::Uncertainty { .. }
                    );
                    assert!(
                        tree || e.budget_used + 20 >= budget,
                        "{est:?} at {budget}: {}",
                        e.budget_used
                    );
                }
                for &(s, a) in e.pairs.keys() {
                    assert!(a < exact.advantage[s].len());
                }
            }
        }
    }
    // Estimators of A(s, a) itself converge; episode-level ones estimate
    // R − mean(R) on every step, which is biased away from the root.
    for est in [
        Estimator::Rtmc,
        Estimator::VinePpo { k: 4 },
        Estimator::Uniform { width: 3, every: 2 },
        Estimator::Entropy {
            threshold: 1.0,
            width: 3,
        },
        Estimator::Uncertainty { initial: 4 },
    ] {
        let small = mean_mse(&mdp, est, 30, 200);
        let large = mean_mse(&mdp, est, 480, 200);
        assert!(
            large < 0.7 * small,
            "{est:?}: MSE {small:.4} at budget 30, {large:.4} at 480"
        );
    }
}

#[test]
fn exact_values_score_perfectly_and_shuffled_values_do_not() {
    let mdp = task_mdp(4);
    let exact = mdp.exact().unwrap();
    let sampled = Estimator::Rtmc.estimate(&mdp, 480, 9);
    let pairs: Vec<(usize, usize)> = sampled.pairs.keys().copied().collect();
    assert!(pairs.len() > 10);
    let fed = |values: &[f64]| {
        let mut e = Estimates::default();
        for (&(s, a), &v) in pairs.iter().zip(values) {
            e.add(s, a, v, 1.0);
        }
        score(&exact, &e)
    };
    let truth: Vec<f64> = pairs.iter().map(|&(s, a)| exact.advantage[s][a]).collect();
    let oracle = fed(&truth);
    assert!(oracle.decisive > 5 && oracle.ranked > 5, "{oracle:?}");
    assert_eq!(oracle.sign_accuracy, Some(1.0));
    assert_eq!(oracle.ranking_accuracy, Some(1.0));
    assert!(oracle.mse.unwrap() < 1e-24);
    let mut shuffled = truth.clone();
    shuffled.rotate_left(pairs.len() / 3);
    let s = fed(&shuffled);
    assert!(s.sign_accuracy.unwrap() < 0.9, "{s:?}");
    assert!(s.ranking_accuracy.unwrap() < 0.9, "{s:?}");
    assert!(s.mse.unwrap() > 1e-3);
    // Zero estimates count as wrong signs, and as coin flips when ranking.
    let zeros = fed(&vec![0.0; pairs.len()]);
    assert_eq!(zeros.sign_accuracy, Some(0.0));
    assert_eq!(zeros.ranking_accuracy, Some(0.5));
}

#[test]
fn budget_to_reach_finds_the_first_budget_and_says_when_none_does() {
    let budgets = [30, 60, 120];
    let curves: Vec<Vec<Option<f64>>> = (0..20)
        .map(|i| {
            let j = f64::from(i % 5) * 0.01;
            vec![Some(0.5 + j), Some(0.92 + j), Some(0.97)]
        })
        .collect();
    let r = budget_to_reach(&curves, &budgets, 0.9, 200, 1);
    assert_eq!(r.budget, Some(60));
    assert_eq!((r.lo, r.hi), (Some(60), Some(60)));
    let never: Vec<Vec<Option<f64>>> = curves
        .iter()
        .map(|c| c.iter().map(|v| v.map(|x| x - 0.5)).collect())
        .collect();
    let r = budget_to_reach(&never, &budgets, 0.9, 200, 1);
    assert_eq!((r.budget, r.lo, r.hi), (None, None, None));
}

#[test]
fn durations_are_masked_and_nothing_else() {
    assert_eq!(
        mask_durations("Ran 3 tests in 0.004s\n\nOK"),
        "Ran 3 tests in <t>s\n\nOK"
    );
    assert_eq!(
        mask_durations("== 2 passed in 12.50s == in 0.1s"),
        "== 2 passed in <t>s == in <t>s"
    );
    for same in [
        "in 3s",
        "in 0.5 s",
        "within 0.1",
        "mean in 1.5x",
        "done in 2.",
        "in 0",
        "",
    ] {
        assert_eq!(mask_durations(same), same);
    }
}

fn task_input(rt: &arbor_runtime::Runtime, suite: &Suite, id: &str) -> TaskInput {
    let spec = suite.get(id).unwrap().clone();
    let globs = spec.byproducts.clone();
    TaskInput {
        env: Arc::new(TaskEnv::prepare(rt, spec).unwrap()),
        byproducts: Arc::new(move |p: &str| globs.matches(p)),
    }
}

#[test]
fn a_real_task_is_solved_exactly_and_its_cache_agrees_with_a_live_tree() {
    tch::set_num_threads(1);
    let rt = arbor_tests::runtime_with(Path::new(HELPER), |o| o.warm_helpers = 2);
    let rt = &rt.runtime;
    let suite = Suite::load(&bundled_dir()).unwrap();
    let input = task_input(rt, &suite, QUICK_TASKS[0]);
    let cfg = EvalConfig::quick();
    let p = prepare(rt, &input, &cfg, &Quiet).unwrap();
    let ex = &p.exploration;
    let c = ex.cost;
    assert!(
        c.content_states > 5 && c.dp_states >= c.content_states,
        "{c:?}"
    );
    assert_eq!(c.transitions as u64, c.actions, "each transition ran once");
    assert!(c.verifier_runs as usize <= 2 * c.content_states, "{c:?}");
    // DP invariants and Monte Carlo on the explored MDP.
    assert!(p.exact.max_weighted_advantage(&ex.mdp) < 1e-9);
    let v = p.exact.v[0];
    assert!(v > 0.01 && v < 0.99, "a non-trivial policy: V {v}");
    let mc = monte_carlo(&ex.mdp, 8_000, 11, 500).unwrap();
    let se = (v * (1.0 - v) / 8_000.0).sqrt();
    assert!((mc.mean - v).abs() < 4.0 * se, "V {v} vs MC {mc:?}");
    for st in &ex.mdp.states {
        assert!(st.policy.iter().all(|x| *x > 0.0));
    }
    // A live tree with the same policy agrees with the cache...
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let tree = tokio
        .block_on(grow_live(
            Arc::clone(&input.env),
            Arc::clone(&p.policy) as Arc<dyn arbor_envs::rollout::policy::Policy>,
            40,
            3,
            2,
        ))
        .unwrap();
    let report = check_tree(rt, &tree, ex, input.byproducts.as_ref()).unwrap();
    assert!(report.mismatches.is_empty(), "{:#?}", report.mismatches);
    assert!(
        report.edges >= 10 && report.leaves >= 2 && report.states >= 10,
        "{report:?}"
    );
    // ... and a corrupted cache entry is caught, naming the edge.
    let edge = tree
        .edges
        .iter()
        .find(|e| e.action != arbor_envs::rollout::AgentAction::Submit)
        .unwrap();
    let mut corrupted = p.exploration.clone();
    let key = corrupted
        .transitions
        .keys()
        .find(|(_, a)| *a == edge.action)
        .cloned()
        .unwrap();
    for (k, step) in corrupted.transitions.iter_mut() {
        if k.1 == key.1 {
            step.observation.output.push_str("\ncorrupted");
        }
    }
    let bad = check_tree(rt, &tree, &corrupted, input.byproducts.as_ref()).unwrap();
    assert!(!bad.mismatches.is_empty());
    assert!(
        bad.mismatches
            .iter()
            .any(|m| m.contains(&format!("edge {} ", edge.id)) && m.contains("observation")),
        "{:#?}",
        bad.mismatches
    );
    // A wrong cached verdict is caught too.
    let mut corrupted = p.exploration.clone();
    for r in corrupted.verdicts.values_mut() {
        *r = 1.0 - *r;
    }
    let bad = check_tree(rt, &tree, &corrupted, input.byproducts.as_ref()).unwrap();
    assert!(
        bad.mismatches.iter().any(|m| m.contains("leaf node")),
        "{:#?}",
        bad.mismatches
    );
}

#[test]
fn the_quick_evaluation_runs_end_to_end() {
    tch::set_num_threads(1);
    let rt = arbor_tests::runtime_with(Path::new(HELPER), |o| o.warm_helpers = 2);
    let out = rt.scratch("credit-eval");
    let rt = &rt.runtime;
    let suite = Suite::load(&bundled_dir()).unwrap();
    let inputs: Vec<TaskInput> = QUICK_TASKS
        .iter()
        .map(|id| task_input(rt, &suite, id))
        .collect();
    let cfg = EvalConfig::quick();
    let report = run(rt, &inputs, &cfg, &Quiet).unwrap();
    let files = write_outputs(&report, &out).unwrap();
    let png = std::fs::read(&files.plot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&files.json).unwrap()).unwrap();
    assert_eq!(json["schema"], REPORT_SCHEMA);
    assert_eq!(json["tasks"].as_array().unwrap().len(), QUICK_TASKS.len());
    let estimators = standard_set(1.0, cfg.vine_k).len();
    assert_eq!(report.summary.len(), estimators * cfg.budgets.len());
    assert_eq!(report.reach.len(), estimators);
    for t in &report.tasks {
        assert_eq!(t.runs.len(), estimators * cfg.budgets.len() * cfg.seeds);
        assert!(t.max_weighted_advantage < 1e-9, "{}", t.task);
        assert!(t.runs.iter().all(|r| r.budget_used <= r.budget));
        assert!(
            t.runs
                .iter()
                .all(|r| (-1.0 - 1e-9..=1.0 + 1e-9).contains(&r.cosine))
        );
    }
    let validated: Vec<_> = report
        .tasks
        .iter()
        .filter_map(|t| t.validation.as_ref())
        .collect();
    assert_eq!(validated.len(), cfg.validate_tasks);
    assert!(
        validated
            .iter()
            .all(|v| v.mismatches.is_empty() && v.edges > 0)
    );
    assert!(
        report.markdown.contains("| rtmc | 120 |"),
        "{}",
        report.markdown
    );
    assert!(report.exact_env_steps > 0);
}
