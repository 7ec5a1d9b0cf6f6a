//! The learner on fixed data (no sandboxes): one PPO step moves log-probs
//! the way the advantages say, and checkpoints reproduce probabilities and
//! the optimiser state exactly.

use arbor_trainer::learner::{Learner, LearnerConfig, Loss, Sample};
use arbor_trainer::model::ModelConfig;
use arbor_trainer::policy::state_features;
use tch::{Device, Kind, Tensor};

fn batch() -> Vec<Sample> {
    let obs = [
        "task: fix mean. FAIL: test_mean (1 != 1.5)",
        "task: organise downloads. $ ls downloads",
        "task: repair backup.sh; output file missing",
    ];
    // Distinct candidate texts: near-identical twins share almost every
    // feature, so one step cannot move them apart reliably (that is the
    // features' limit, not PPO's).
    let cands = [
        vec![
            "write stats/mean.py: return float division of the total",
            "exec: sed -i s/assert/pass/ tests/test_mean.py",
            "exec: rm -rf tests",
            "submit",
        ],
        vec![
            "exec: mkdir -p images && mv *.png images/",
            "exec: mv *.png documents/",
            "exec: ls -la",
            "submit",
        ],
        vec![
            "write backup.sh: append each line to out.txt",
            "exec: truncate --size 0 out.txt",
            "exec: cat backup.sh",
            "submit",
        ],
    ];
    let mut out = Vec::new();
    for (o, c) in obs.iter().zip(&cands) {
        let state = state_features(o, c.iter());
        // Action 0 is good (advantage +1), action 1 is bad (−1).
        for (chosen, adv) in [(0, 1.0), (1, -1.0)] {
            out.push(Sample {
                state: state.clone(),
                chosen,
                behaviour_log_prob: (1.0f64 / c.len() as f64).ln(),
                advantage: adv,
                version: 0,
            });
        }
    }
    out
}

fn log_probs(learner: &Learner, samples: &[Sample]) -> Vec<f64> {
    tch::no_grad(|| {
        let states: Vec<_> = samples.iter().map(|s| &s.state).collect();
        let f = learner.net.forward(&states);
        samples
            .iter()
            .enumerate()
            .map(|(i, s)| f.log_prob_of(i, s.chosen).double_value(&[]))
            .collect()
    })
}

#[test]
fn one_ppo_step_raises_positive_and_lowers_negative_actions() {
    // Without the entropy bonus, the step follows the advantages alone.
    let mut learner = Learner::new(
        ModelConfig::default(),
        LearnerConfig {
            entropy: 0.0,
            ..LearnerConfig::default()
        },
        Device::Cpu,
    );
    let b = batch();
    let before = log_probs(&learner, &b);
    let stats = learner.update(&b, Loss::Ppo);
    assert!(stats.grad_norm > 0.0);
    let after = log_probs(&learner, &b);
    for (i, s) in b.iter().enumerate() {
        if s.advantage > 0.0 {
            assert!(
                after[i] > before[i],
                "sample {i}: {} -> {}",
                before[i],
                after[i]
            );
        } else {
            assert!(
                after[i] < before[i],
                "sample {i}: {} -> {}",
                before[i],
                after[i]
            );
        }
    }
    // A zero-advantage batch leaves the policy where it is (up to the entropy bonus).
    let mut zero = b.clone();
    for s in &mut zero {
        s.advantage = 0.0;
    }
    let mut quiet = Learner::new(
        ModelConfig::default(),
        LearnerConfig {
            entropy: 0.0,
            ..LearnerConfig::default()
        },
        Device::Cpu,
    );
    let p0 = log_probs(&quiet, &zero);
    quiet.update(&zero, Loss::Ppo);
    let p1 = log_probs(&quiet, &zero);
    for (a, b) in p0.iter().zip(&p1) {
        assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    }
}

#[test]
fn behaviour_cloning_makes_the_demonstrated_action_likely() {
    let mut learner = Learner::new(
        ModelConfig::default(),
        LearnerConfig::default(),
        Device::Cpu,
    );
    let demos: Vec<Sample> = batch().into_iter().filter(|s| s.advantage > 0.0).collect();
    for _ in 0..40 {
        learner.update(&demos, Loss::Bc);
    }
    for p in log_probs(&learner, &demos) {
        assert!(p.exp() > 0.8, "p = {}", p.exp());
    }
}

#[test]
fn checkpoints_reproduce_probabilities_and_optimiser_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut learner = Learner::new(
        ModelConfig {
            seed: 5,
            ..ModelConfig::default()
        },
        LearnerConfig::default(),
        Device::Cpu,
    );
    let b = batch();
    learner.update(&b, Loss::Ppo);
    learner.update(&b, Loss::Ppo);
    learner.counters.version = 2;
    learner.counters.env_steps = 123;
    learner.save(dir.path()).unwrap();
    let mut loaded = Learner::load(dir.path(), Device::Cpu).unwrap();
    assert_eq!(loaded.counters, learner.counters);
    let p = log_probs(&learner, &b);
    let q = log_probs(&loaded, &b);
    assert_eq!(p, q, "identical action probabilities");
    // The optimiser state came back too: the next update is identical.
    learner.update(&b, Loss::Ppo);
    loaded.update(&b, Loss::Ppo);
    assert_eq!(log_probs(&learner, &b), log_probs(&loaded, &b));
    // Weights really are the saved ones (a fresh network differs).
    let fresh = Learner::new(
        ModelConfig {
            seed: 5,
            ..ModelConfig::default()
        },
        LearnerConfig::default(),
        Device::Cpu,
    );
    assert_ne!(log_probs(&fresh, &b), q);
    let w = Tensor::from_slice(&[1.0f32]).to_kind(Kind::Float);
    assert_eq!(w.size(), vec![1]);
    // A damaged checkpoint is an error that names the file.
    std::fs::write(dir.path().join("meta.json"), "{").unwrap();
    let err = Learner::load(dir.path(), Device::Cpu).unwrap_err();
    assert!(err.contains("meta.json"), "{err}");
}

#[test]
fn features_are_deterministic_and_in_range() {
    use arbor_trainer::features::{BUCKETS, features};
    let a = features("Fix mean() so that mean([1, 2]) == 1.5");
    assert_eq!(a, features("Fix mean() so that mean([1, 2]) == 1.5"));
    assert!(a.iter().all(|&i| (0..BUCKETS).contains(&i)));
    assert_ne!(a, features("rm -rf tests"));
    assert_eq!(features("").len(), 1, "the bias feature only");
}
