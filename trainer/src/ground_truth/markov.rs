//! The Markov policy exact credit is computed for, and its policy gradients.
//!
//! The trainer's policy reads `decision_text`, whose `done:` lines make it
//! depend on the whole history, so its `Q^π` is not a function of the state.
//! This one is the same network ([`Drrn`], a fixed seed) reading only what a
//! DP state determines: the observation's text (durations masked: they are
//! not deterministic) and the step index (`step t`
//! in the text, and the progress input `t / 10`), the candidate texts, and
//! history-free flags (submit, write, delete, shell command; never "already
//! taken"). Optionally it is behaviour-cloned for a few epochs on the task's
//! gold decisions. Its distribution is `π = (1 − ε)·softmax(z / τ) + ε/K`
//! (temperature `τ`, uniform share `ε`), so every action has probability > 0.

use std::sync::Mutex;

use arbor_rollout::env::{AgentAction, EnvObservation};
use arbor_rollout::policy::{Choice, Policy, PolicyError, PolicyInput, Rng, entropy, sample_index};
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::experiment::behaviour_clone;
use crate::learner::{Learner, LearnerConfig, Sample};
use crate::model::{Drrn, ModelConfig, StateFeatures};
use crate::policy::FeatureCache;

/// States per forward pass (bounds memory on large tasks).
const CHUNK: usize = 128;

/// Settings of the Markov policy.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MarkovConfig {
    /// Initialisation (and behaviour-cloning shuffle) seed.
    pub seed: u64,
    /// Behaviour-cloning epochs on the task's gold decisions (0: untrained).
    pub bc_epochs: usize,
    /// Softmax temperature `τ` (> 0).
    pub temperature: f64,
    /// Uniform share `ε` in [0, 1).
    pub epsilon: f64,
}

impl Default for MarkovConfig {
    /// Seed 1, 30 epochs of behaviour cloning (one Adam step each on the
    /// task's few gold decisions: on the quick tasks `V^π(root)` is then
    /// about 0.25, against about 0.05 after 3), `τ = 1`, `ε = 0.1`.
    fn default() -> Self {
        Self {
            seed: 1,
            bc_epochs: 30,
            temperature: 1.0,
            epsilon: 0.1,
        }
    }
}

impl MarkovConfig {
    /// Check the ranges.
    ///
    /// # Errors
    /// A temperature that is not positive and finite, or `ε` outside [0, 1).
    pub fn check(&self) -> Result<(), String> {
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return Err(format!(
                "temperature {} is not a positive number",
                self.temperature
            ));
        }
        if !(0.0..1.0).contains(&self.epsilon) {
            return Err(format!("epsilon {} is not in [0, 1)", self.epsilon));
        }
        Ok(())
    }
}

/// The network's input at a state (no history: only kind flags are set).
pub fn markov_features(
    cache: &mut FeatureCache,
    observation: &EnvObservation,
    step: usize,
    candidates: &[AgentAction],
) -> StateFeatures {
    let texts: Vec<String> = candidates.iter().map(AgentAction::text).collect();
    cache.markov_state(&observation.text(), &texts, step)
}

/// The Markov policy (see the module docs).
#[derive(Debug)]
pub struct MarkovPolicy {
    net: Mutex<Drrn>,
    cfg: MarkovConfig,
}

impl MarkovPolicy {
    /// A network of `cfg.seed`, behaviour-cloned for `cfg.bc_epochs` epochs
    /// on `gold` (state features, chosen candidate) when both are non-zero.
    pub fn new(cfg: MarkovConfig, gold: &[(StateFeatures, usize)]) -> Self {
        let model = ModelConfig {
            seed: cfg.seed,
            ..ModelConfig::default()
        };
        let net = if cfg.bc_epochs > 0 && !gold.is_empty() {
            let mut learner = Learner::new(model, LearnerConfig::default(), Device::Cpu);
            let samples: Vec<Sample> = gold
                .iter()
                .map(|(state, chosen)| Sample {
                    state: state.clone(),
                    chosen: *chosen,
                    behaviour_log_prob: 0.0,
                    target_log_prob: 0.0,
                    weight: 1.0,
                    advantage: 1.0,
                    version: 0,
                })
                .collect();
            behaviour_clone(
                &mut learner,
                &samples,
                cfg.bc_epochs,
                samples.len(),
                cfg.seed,
            );
            learner.net
        } else {
            Drrn::new(model, Device::Cpu)
        };
        Self {
            net: Mutex::new(net),
            cfg,
        }
    }

    /// Its settings.
    pub fn config(&self) -> MarkovConfig {
        self.cfg
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Drrn>, String> {
        self.net
            .lock()
            .map_err(|_| "the policy network's lock is poisoned".to_owned())
    }

    /// `log π(a|s)` of every candidate of `states`, concatenated (with gradients).
    fn log_policy(&self, net: &Drrn, states: &[&StateFeatures]) -> Tensor {
        let fwd = net.forward(states);
        let (tau, eps) = (self.cfg.temperature, self.cfg.epsilon);
        let parts: Vec<Tensor> = fwd
            .spans
            .iter()
            .map(|&(start, len)| {
                let z = fwd.log_probs.narrow(0, start, len) / tau;
                (z.softmax(0, Kind::Float) * (1.0 - eps) + eps / len as f64).log()
            })
            .collect();
        Tensor::cat(&parts, 0)
    }

    /// `π(·|s)` for each of `states` (in f64, each row summing to 1).
    ///
    /// # Errors
    /// The network's lock is poisoned or its output cannot be read.
    pub fn probabilities(&self, states: &[&StateFeatures]) -> Result<Vec<Vec<f64>>, String> {
        let net = self.lock()?;
        let mut out = Vec::with_capacity(states.len());
        for chunk in states.chunks(CHUNK) {
            let p = tch::no_grad(|| {
                self.log_policy(&net, chunk)
                    .exp()
                    .to_kind(Kind::Double)
                    .to_device(Device::Cpu)
            });
            let flat = Vec::<f64>::try_from(&p).map_err(|e| format!("read π: {e}"))?;
            let mut at = 0;
            for s in chunk {
                let k = s.candidates.len();
                let mut row = flat
                    .get(at..at + k)
                    .ok_or("π has too few entries")?
                    .to_vec();
                // The network computes in f32: renormalise, so Σ π = 1 in f64.
                let sum: f64 = row.iter().sum();
                row.iter_mut().for_each(|p| *p /= sum);
                out.push(row);
                at += k;
            }
        }
        Ok(out)
    }

    /// `∇θ Σ_i Σ_a weights[i][a]·log π(a|states[i])` over all the network's
    /// parameters, flattened into one vector.
    ///
    /// # Errors
    /// The lock is poisoned, a weight row does not match its state's
    /// candidates, or autograd failed.
    pub fn gradient(
        &self,
        states: &[&StateFeatures],
        weights: &[Vec<f64>],
    ) -> Result<Tensor, String> {
        if states.len() != weights.len() {
            return Err(format!(
                "{} weight rows for {} states",
                weights.len(),
                states.len()
            ));
        }
        let net = self.lock()?;
        let params = net.vs.trainable_variables();
        let mut total: Option<Tensor> = None;
        for (chunk, w) in states.chunks(CHUNK).zip(weights.chunks(CHUNK)) {
            let mut flat: Vec<f32> = Vec::new();
            for (s, row) in chunk.iter().zip(w) {
                if row.len() != s.candidates.len() {
                    return Err(format!(
                        "{} weights for {} candidates",
                        row.len(),
                        s.candidates.len()
                    ));
                }
                flat.extend(row.iter().map(|&x| x as f32));
            }
            let lp = self.log_policy(&net, chunk);
            let loss = (lp * Tensor::from_slice(&flat)).sum(Kind::Float);
            let grads = Tensor::f_run_backward(&[&loss], &params, false, false)
                .map_err(|e| format!("autograd: {e}"))?;
            let parts: Vec<Tensor> = grads.iter().map(|g| g.flatten(0, -1)).collect();
            let g = Tensor::cat(&parts, 0);
            total = Some(match total {
                Some(t) => t + g,
                None => g,
            });
        }
        total.ok_or_else(|| "no states to differentiate".to_owned())
    }
}

/// The cosine of two flat gradients; 0 when either is zero.
pub fn cosine(a: &Tensor, b: &Tensor) -> f64 {
    let na = a.norm().double_value(&[]);
    let nb = b.norm().double_value(&[]);
    if na == 0.0 || nb == 0.0 || !na.is_finite() || !nb.is_finite() {
        return 0.0;
    }
    a.dot(b).double_value(&[]) / (na * nb)
}

impl Policy for MarkovPolicy {
    fn name(&self) -> String {
        "markov-drrn".to_owned()
    }

    fn choose(&self, input: &PolicyInput<'_>, rng: &mut Rng) -> Result<Choice, PolicyError> {
        let fail = |message: String| PolicyError {
            policy: self.name(),
            message,
        };
        if input.candidates.is_empty() {
            return Err(fail(format!(
                "task {} lists no candidate actions",
                input.task
            )));
        }
        let f = markov_features(
            &mut FeatureCache::default(),
            input.observation,
            input.history.len(),
            input.candidates,
        );
        let p = self
            .probabilities(&[&f])
            .map_err(&fail)?
            .pop()
            .ok_or_else(|| fail("the network gave no distribution".to_owned()))?;
        let i = sample_index(&p, rng);
        Ok(Choice {
            action: input.candidates[i].clone(),
            index: Some(i),
            log_prob: p[i].ln(),
            target_log_prob: None,
            entropy: entropy(&p),
            version: 0,
            tokens: None,
            generation: None,
        })
    }
}
