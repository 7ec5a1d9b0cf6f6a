//! The trainer against real sandboxes on bundled tasks: rollout workers and
//! the learner overlap in time and one tree carries several policy versions;
//! behaviour cloning on a few training tasks lifts success on their unseen
//! variants above the untrained policy, while a network that sees only the
//! candidate texts stays near the "twin chance" a policy gets from the task
//! structure alone.

use std::path::Path;
use std::sync::Arc;

use arbor_envs::TaskEnv;
use arbor_envs::rollout::Environment;
use arbor_envs::rollout::policy::Policy;
use arbor_envs::suite::{Suite, bundled_dir};
use arbor_envs::task::{CandidateLabel, TaskSpec};
use arbor_runtime::Runtime;
use arbor_trainer::attached::{AttachedConfig, Credit, run_attached};
use arbor_trainer::experiment::{behaviour_clone, evaluate, gold_samples};
use arbor_trainer::learner::{Learner, LearnerConfig};
use arbor_trainer::model::ModelConfig;
use arbor_trainer::policy::{FeatureCache, NetPolicy};
use tch::Device;

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");

fn runtime() -> arbor_tests::TestRuntime {
    arbor_tests::runtime_with(Path::new(HELPER), |o| o.warm_helpers = 2)
}

fn envs(rt: &Runtime, suite: &Suite, ids: &[&str]) -> Vec<Arc<dyn Environment>> {
    ids.iter()
        .map(|id| {
            Arc::new(TaskEnv::prepare(rt, suite.get(id).unwrap().clone()).unwrap())
                as Arc<dyn Environment>
        })
        .collect()
}

fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap()
}

#[test]
fn learner_and_workers_overlap_and_trees_carry_several_versions() {
    tch::set_num_threads(1);
    let rt = runtime();
    let rt = &rt.runtime;
    let suite = Suite::load(&bundled_dir()).unwrap();
    let tasks = envs(rt, &suite, &["py-stats-1", "files-organise-1"]);
    let model = ModelConfig::default();
    let mut learner = Learner::new(model, LearnerConfig::default(), Device::Cpu);
    // A warm start, so the trees hold successes and failures (advantages).
    let tokio = tokio();
    let (gold, _) = tokio
        .block_on(gold_samples(&tasks, FeatureCache::default()))
        .unwrap();
    behaviour_clone(&mut learner, &gold, 5, 16, 1);
    let actor = Arc::new(NetPolicy::new(model, Device::Cpu));
    actor.publish(&learner.net, 0).unwrap();
    let cfg = AttachedConfig {
        budget: 160,
        tree_budget: 40,
        workers: 2,
        batch: 4,
        epochs: 1,
        channel: 2,
        max_staleness: 3,
        credit: Credit::Branched,
        seed: 9,
        first_task: 0,
    };
    let (learner, report, trees) = tokio
        .block_on(run_attached(&tasks, Arc::clone(&actor), learner, &cfg))
        .unwrap();
    assert!(report.env_steps <= cfg.budget, "{report:?}");
    assert!(report.updates >= 2, "{report:?}");
    assert_eq!(
        learner.counters.version,
        actor.version(),
        "the actor has the last weights"
    );
    assert!(
        report.max_versions_per_tree >= 2,
        "weights were published while a tree grew: {report:?}"
    );
    assert!(
        report.overlap_s > 0.0,
        "learner updates ran while workers rolled out: {report:?}"
    );
    assert!(report.max_staleness_seen <= report.updates, "{report:?}");
    let edges_versions: usize = trees
        .iter()
        .map(|t| {
            let mut v: Vec<u64> = t.edges.iter().map(|e| e.policy_version).collect();
            v.sort_unstable();
            v.dedup();
            v.len()
        })
        .max()
        .unwrap();
    assert_eq!(edges_versions, report.max_versions_per_tree);
}

/// Bug B3 of the credit review: each attached phase restarted the task
/// cursor at 0, so with a few trees per phase only the first tasks were ever
/// trained on. Phases that pass the cursor on cover every task.
#[test]
fn attached_phases_carry_the_task_cursor_so_every_task_is_trained_on() {
    tch::set_num_threads(1);
    let rt = runtime();
    let rt = &rt.runtime;
    let suite = Suite::load(&bundled_dir()).unwrap();
    let tasks = envs(
        rt,
        &suite,
        &["py-stats-1", "files-organise-1", "log-extract-1"],
    );
    let model = ModelConfig::default();
    let tokio = tokio();
    let phases = |carry: bool| -> Vec<String> {
        let mut learner = Learner::new(model, LearnerConfig::default(), Device::Cpu);
        let actor = Arc::new(NetPolicy::new(model, Device::Cpu));
        actor.publish(&learner.net, 0).unwrap();
        let mut cursor = 0;
        let mut seen = Vec::new();
        for phase in 0..3 {
            let cfg = AttachedConfig {
                budget: 12,
                tree_budget: 12,
                workers: 1,
                batch: 64,
                epochs: 1,
                channel: 2,
                max_staleness: 3,
                credit: Credit::Grpo,
                seed: phase,
                first_task: if carry { cursor } else { 0 },
            };
            let (l, report, trees) = tokio
                .block_on(run_attached(&tasks, Arc::clone(&actor), learner, &cfg))
                .unwrap();
            learner = l;
            assert_eq!(trees.len(), 1, "one tree per phase: {report:?}");
            cursor = report.next_task;
            seen.extend(trees.iter().map(|t| t.task.clone()));
        }
        seen
    };
    let mut carried = phases(true);
    carried.sort();
    assert_eq!(carried, ["files-organise-1", "log-extract-1", "py-stats-1"]);
    // Positive control: restarting the cursor trains on the first task only.
    assert_eq!(phases(false), ["py-stats-1"; 3]);
}

/// Bug B2 of the credit review: evaluation read the root V̂ of a tree of
/// walks, which weighted a leaf by the product of the counts on its path and
/// depended on which worker finished first. Now it is the plain mean of
/// independent episodes: the same seed gives the same number whatever the
/// number of workers, and the number is a mean of finished episodes.
#[test]
fn evaluation_is_a_monte_carlo_mean_that_does_not_depend_on_the_workers() {
    tch::set_num_threads(1);
    let rt = runtime();
    let rt = &rt.runtime;
    let suite = Suite::load(&bundled_dir()).unwrap();
    let tasks = envs(rt, &suite, &["py-stats-1", "files-organise-1"]);
    let model = ModelConfig::default();
    let tokio = tokio();
    let (gold, _) = tokio
        .block_on(gold_samples(&tasks, FeatureCache::default()))
        .unwrap();
    // A partly trained policy: successes and failures both.
    let mut learner = Learner::new(model, LearnerConfig::default(), Device::Cpu);
    behaviour_clone(&mut learner, &gold, 8, 16, 5);
    let actor = Arc::new(NetPolicy::new(model, Device::Cpu));
    actor.publish(&learner.net, 1).unwrap();
    let eval = |workers: usize, seed: u64| {
        tokio
            .block_on(evaluate(
                &tasks,
                Arc::clone(&actor) as Arc<dyn Policy>,
                12,
                workers,
                seed,
            ))
            .unwrap()
    };
    let one = eval(1, 4);
    let two = eval(2, 4);
    eprintln!("one worker {:?}, two workers {:?}", one.tasks, two.tasks);
    assert_eq!(one.tasks, two.tasks, "same seed, different worker counts");
    for v in one.tasks.values() {
        // A mean of 12 episodes with reward 0 or 1.
        assert!((v * 12.0 - (v * 12.0).round()).abs() < 1e-9, "{v}");
    }
}

/// The success a policy gets from structure alone: follow the gold steps but
/// pick uniformly between each gold action and its wrong twins.
fn twin_chance(spec: &TaskSpec) -> f64 {
    spec.gold
        .iter()
        .enumerate()
        .map(|(i, _)| {
            let twins = spec
                .candidates
                .iter()
                .filter(|c| c.label == CandidateLabel::Wrong && c.replaces == Some(i))
                .count();
            1.0 / (1 + twins) as f64
        })
        .product()
}

#[test]
fn cloning_lifts_unseen_variants_and_action_text_alone_stays_near_twin_chance() {
    tch::set_num_threads(1);
    let rt = runtime();
    let rt = &rt.runtime;
    let suite = Suite::load(&bundled_dir()).unwrap();
    let train_ids: Vec<String> = suite
        .split("train")
        .unwrap()
        .iter()
        .map(|t| t.id.clone())
        .collect();
    let train_refs: Vec<&str> = train_ids.iter().map(String::as_str).collect();
    // Unseen variants of five trained coding groups.
    let test_ids = [
        "py-stats-4",
        "py-parse-3",
        "py-intervals-3",
        "py-graph-3",
        "py-ledger-3",
    ];
    let train = envs(rt, &suite, &train_refs);
    let test = envs(rt, &suite, &test_ids);
    let chance: f64 = test_ids
        .iter()
        .map(|id| twin_chance(suite.get(id).unwrap()))
        .sum::<f64>()
        / test_ids.len() as f64;
    let tokio = tokio();
    let (gold, _) = tokio
        .block_on(gold_samples(&train, FeatureCache::default()))
        .unwrap();
    let success = |action_only: bool, epochs: usize| {
        let model = ModelConfig {
            action_only,
            seed: 3,
            ..ModelConfig::default()
        };
        let mut learner = Learner::new(model, LearnerConfig::default(), Device::Cpu);
        behaviour_clone(&mut learner, &gold, epochs, 32, 3);
        let actor = Arc::new(NetPolicy::new(model, Device::Cpu));
        actor.publish(&learner.net, 1).unwrap();
        tokio
            .block_on(evaluate(&test, actor as Arc<dyn Policy>, 20, 2, 11))
            .unwrap()
            .mean()
    };
    let untrained = success(false, 0);
    let cloned = success(false, 60);
    let action_only = success(true, 60);
    eprintln!(
        "untrained {untrained:.3}, cloned {cloned:.3}, action-only {action_only:.3}, twin chance {chance:.3}"
    );
    assert!(
        cloned > untrained + 0.05,
        "untrained {untrained:.3}, cloned {cloned:.3}"
    );
    assert!(
        action_only <= chance + 0.15,
        "candidate texts alone give the answer away: {action_only:.3} vs twin chance {chance:.3}"
    );
}

#[test]
fn the_experiment_splits_are_disjoint_and_validation_is_carved_from_train() {
    use arbor_trainer::experiment::{HELDOUT_TASKS, TRAIN_TASKS, VALIDATION_TASKS};
    let suite = Suite::load(&bundled_dir()).unwrap();
    let groups = |ids: &[&str]| -> std::collections::BTreeSet<String> {
        ids.iter()
            .map(|id| suite.get(id).unwrap().group.clone())
            .collect()
    };
    for id in TRAIN_TASKS.iter().chain(&VALIDATION_TASKS) {
        assert_eq!(suite.split_of(id), Some("train"), "{id}");
    }
    for id in &HELDOUT_TASKS {
        assert_eq!(suite.split_of(id), Some("heldout-variants"), "{id}");
    }
    let train: std::collections::BTreeSet<&str> = TRAIN_TASKS.iter().copied().collect();
    // Positive control: the check below would catch a trained-on task.
    assert!(train.contains(TRAIN_TASKS[0]));
    for id in VALIDATION_TASKS.iter().chain(&HELDOUT_TASKS) {
        assert!(!train.contains(id), "{id} is trained on");
    }
    // Validation and held-out are variants of groups that are trained on.
    let trained = groups(&TRAIN_TASKS);
    assert!(groups(&VALIDATION_TASKS).is_subset(&trained));
    assert!(groups(&HELDOUT_TASKS).is_subset(&trained));
}
