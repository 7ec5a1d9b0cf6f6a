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
                target_log_prob: (1.0f64 / c.len() as f64).ln(),
                weight: 1.0,
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

/// Bug B1 of the credit review: the actor samples from the exploring mixture
/// μ = (1 − ε)·π + ε/K. Anchored on μ, PPO's ratio for a confident right
/// action starts above 1 + clip (π/μ > 1.2 once π > 6/K): its positive
/// advantages are clipped away, the wrong actions' negative ones too (their
/// ratio starts below 1 − clip), and only the entropy bonus is left, which
/// pulls the right action down. Anchored on π_old with the truncated π/μ as
/// a separate weight, the right action rises.
#[test]
fn a_confident_right_action_rises_when_the_ratio_is_anchored_on_the_acting_network() {
    use arbor_rollout::policy::{Rng, sample_index};
    const K: usize = 9;
    const EPS: f64 = 0.2;
    let cands: Vec<String> = (0..K)
        .map(|k| {
            format!(
                "write pkg/m{k}.py: variant {k} of the fix, {}",
                "x".repeat(k)
            )
        })
        .collect();
    let state = state_features("task: fix pkg; FAIL: test_m0", cands.iter());
    let fresh = || {
        let mut l = Learner::new(
            ModelConfig::default(),
            LearnerConfig::default(),
            Device::Cpu,
        );
        // Behaviour cloning until π(right) is about 0.8.
        let demo = Sample {
            state: state.clone(),
            chosen: 0,
            behaviour_log_prob: 0.0,
            target_log_prob: 0.0,
            weight: 1.0,
            advantage: 1.0,
            version: 0,
        };
        while l.net.probabilities(&state)[0] < 0.8 {
            l.update(std::slice::from_ref(&demo), Loss::Bc);
        }
        l.set_lr(1e-3);
        l
    };
    // (π(right) before, after, clipped share of the first pass)
    let run = |anchor_on_mixture: bool| -> (f64, f64, f64) {
        let mut l = fresh();
        let start = l.net.probabilities(&state)[0];
        let mut rng = Rng::new(7);
        let mut first_clipped = None;
        for _round in 0..5 {
            let pi = l.net.probabilities(&state);
            let mu: Vec<f64> = pi
                .iter()
                .map(|p| (1.0 - EPS) * p + EPS / K as f64)
                .collect();
            // A GRPO group of 12: reward 1 for the right action.
            let chosen: Vec<usize> = (0..12).map(|_| sample_index(&mu, &mut rng)).collect();
            let rewards: Vec<f64> = chosen
                .iter()
                .map(|&c| f64::from(u8::from(c == 0)))
                .collect();
            let mean = rewards.iter().sum::<f64>() / rewards.len() as f64;
            let batch: Vec<Sample> = chosen
                .iter()
                .zip(&rewards)
                .map(|(&c, r)| Sample {
                    state: state.clone(),
                    chosen: c,
                    behaviour_log_prob: mu[c].ln(),
                    target_log_prob: if anchor_on_mixture {
                        mu[c].ln()
                    } else {
                        pi[c].ln()
                    },
                    weight: 1.0,
                    advantage: r - mean,
                    version: 0,
                })
                .collect();
            for _ in 0..4 {
                let stats = l.update(&batch, Loss::Ppo);
                first_clipped.get_or_insert(stats.clipped);
            }
        }
        (
            start,
            l.net.probabilities(&state)[0],
            first_clipped.unwrap_or(0.0),
        )
    };
    let (start, anchored, clipped) = run(false);
    eprintln!(
        "anchored on π_old: π(right) {start:.3} -> {anchored:.3}, first pass clipped {clipped:.2}"
    );
    let (start_mu, mixture, clipped_mu) = run(true);
    eprintln!(
        "anchored on μ: π(right) {start_mu:.3} -> {mixture:.3}, first pass clipped {clipped_mu:.2}"
    );
    assert!(
        anchored > start + 0.02,
        "π(right) {start:.3} -> {anchored:.3}"
    );
    // Anchored on π_old the first pass starts inside the trust region.
    assert_eq!(clipped, 0.0);
    // The bug, reproduced: anchored on μ, the first pass starts clipped for
    // every right action (π/μ > 1.2) and the right action gains less.
    assert!(clipped_mu > 0.5, "first pass clipped {clipped_mu}");
    assert!(
        mixture - start_mu < anchored - start,
        "anchored on μ: {start_mu:.3} -> {mixture:.3}; on π_old: {start:.3} -> {anchored:.3}"
    );
}
