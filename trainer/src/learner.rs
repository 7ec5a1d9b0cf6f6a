//! The learner: losses (PPO with clipping, the GRPO baseline, behaviour
//! cloning), an Adam optimiser whose state is part of the checkpoint,
//! gradient-norm clipping, and checkpoints that resume exactly.
//!
//! - PPO: the ratio `π_θ(a|s) / π_old(a|s)` is anchored on the acting
//!   network `π_old` (the target log-prob on the tree edge), not on the
//!   behaviour distribution μ that sampled the action (an exploring mixture
//!   `(1 − ε)·π_old + ε/K`): anchored on μ, an action with `π_old > 6/K`
//!   would start outside the trust region and could only go down. The
//!   off-policy correction is a separate truncated importance weight
//!   `ρ = min(1, π_old/μ)` (V-trace): loss
//!   `−Σ wᵢ·ρᵢ·min(ratioᵢ·Aᵢ, clip(ratioᵢ, 1−ε, 1+ε)·Aᵢ) / Σ wᵢ − β·mean(H)`,
//!   where `wᵢ` is the sample's weight (the number of merged identical
//!   samples it stands for).
//! - GRPO: the same clipped objective with the group-normalised episode
//!   advantage on every step of the episode.
//! - BC: `−mean(log π(a_gold|s)) − β·mean(H)`.

use std::path::Path;

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::model::{Drrn, ModelConfig, StateFeatures};

/// One training example: a decision and its credit.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The state's features.
    pub state: StateFeatures,
    /// Index of the action taken.
    pub chosen: usize,
    /// Behaviour log-prob of it: log μ(a|s), the distribution that sampled it.
    pub behaviour_log_prob: f64,
    /// log π_old(a|s) under the acting network (equal to the behaviour
    /// log-prob when the actor did not explore): PPO's ratio is anchored here.
    pub target_log_prob: f64,
    /// How many samples it stands for (a merged edge's count; 1 otherwise).
    pub weight: f64,
    /// Its advantage (PPO / GRPO) or 1 (BC).
    pub advantage: f64,
    /// Policy version that acted.
    pub version: u64,
}

/// Which loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Loss {
    /// Clipped PPO on the samples' advantages.
    Ppo,
    /// Behaviour cloning of the chosen actions.
    Bc,
}

/// Optimiser and loss settings.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LearnerConfig {
    /// Adam learning rate.
    pub lr: f64,
    /// PPO clip ε.
    pub clip: f64,
    /// Entropy bonus β.
    pub entropy: f64,
    /// Gradient-norm limit.
    pub max_grad_norm: f64,
}

impl Default for LearnerConfig {
    fn default() -> Self {
        Self {
            lr: 1e-2,
            clip: 0.2,
            entropy: 0.01,
            max_grad_norm: 1.0,
        }
    }
}

/// Counters kept in checkpoints.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// Optimiser steps taken.
    pub updates: u64,
    /// Samples trained on.
    pub samples: u64,
    /// Published weight versions.
    pub version: u64,
    /// Environment budget spent producing the training data.
    pub env_steps: u64,
}

/// What one update did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UpdateStats {
    /// The loss.
    pub loss: f64,
    /// Mean entropy of the batch's states.
    pub entropy: f64,
    /// Gradient norm before clipping.
    pub grad_norm: f64,
    /// Fraction of PPO samples whose ratio was clipped.
    pub clipped: f64,
}

/// The network being trained, its optimiser state and counters.
#[derive(Debug)]
pub struct Learner {
    /// The network.
    pub net: Drrn,
    /// Settings.
    pub cfg: LearnerConfig,
    /// Counters.
    pub counters: Counters,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
}

#[derive(Serialize, Deserialize)]
struct Meta {
    model: ModelConfig,
    learner: LearnerConfig,
    counters: Counters,
}

impl Learner {
    /// A new learner with a fresh network.
    pub fn new(model: ModelConfig, cfg: LearnerConfig, device: Device) -> Self {
        let net = Drrn::new(model, device);
        let (m, v) = zeros_like_params(&net);
        Self {
            net,
            cfg,
            counters: Counters::default(),
            m,
            v,
        }
    }

    /// One optimiser step on `batch` with `loss`.
    pub fn update(&mut self, batch: &[Sample], loss: Loss) -> UpdateStats {
        let states: Vec<&StateFeatures> = batch.iter().map(|s| &s.state).collect();
        let fwd = self.net.forward(&states);
        let device = self.net.device();
        let picked: Vec<Tensor> = batch
            .iter()
            .enumerate()
            .map(|(i, s)| fwd.log_prob_of(i, s.chosen))
            .collect();
        let logp = Tensor::stack(&picked, 0);
        let ent = fwd.entropies();
        let mean_ent = ent.mean(Kind::Float);
        let tensor = |v: Vec<f64>| {
            Tensor::from_slice(&v)
                .to_kind(Kind::Float)
                .to_device(device)
        };
        let weights: Vec<f64> = batch.iter().map(|s| s.weight.max(0.0)).collect();
        let total_weight: f64 = weights.iter().sum::<f64>().max(1e-12);
        let weights = tensor(weights);
        let (objective, clipped) = match loss {
            Loss::Bc => ((&logp * &weights).sum(Kind::Float) / total_weight, 0.0),
            Loss::Ppo => {
                let old = tensor(batch.iter().map(|s| s.target_log_prob).collect());
                let adv = tensor(batch.iter().map(|s| s.advantage).collect());
                // Truncated importance weight of the behaviour (V-trace's ρ̄ = 1).
                let rho = tensor(
                    batch
                        .iter()
                        .map(|s| (s.target_log_prob - s.behaviour_log_prob).exp().min(1.0))
                        .collect(),
                );
                let ratio = (&logp - &old).exp();
                let clipped_ratio = ratio.clamp(1.0 - self.cfg.clip, 1.0 + self.cfg.clip);
                let surr = (&ratio * &adv).minimum(&(&clipped_ratio * &adv)) * &rho * &weights;
                let frac = tch::no_grad(|| {
                    ratio
                        .ne_tensor(&clipped_ratio)
                        .to_kind(Kind::Float)
                        .mean(Kind::Float)
                        .double_value(&[])
                });
                (surr.sum(Kind::Float) / total_weight, frac)
            }
        };
        let loss_t = -(objective + self.cfg.entropy * &mean_ent);
        let params = self.net.vs.trainable_variables();
        for p in &params {
            let mut g = p.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        }
        loss_t.backward();
        let grad_norm = self.adam_step(&params);
        self.counters.updates += 1;
        self.counters.samples += batch.len() as u64;
        UpdateStats {
            loss: loss_t.double_value(&[]),
            entropy: mean_ent.double_value(&[]),
            grad_norm,
            clipped,
        }
    }

    /// The optimiser settings in use.
    pub fn config(&self) -> LearnerConfig {
        self.cfg
    }

    /// Change the learning rate from the next update on (the Adam moments
    /// are kept): the experiment clones behaviour at one rate and runs PPO
    /// or GRPO at a lower one.
    pub fn set_lr(&mut self, lr: f64) {
        self.cfg.lr = lr;
    }

    /// Clip the gradients' global norm, then one Adam step. Returns the norm before clipping.
    fn adam_step(&mut self, params: &[Tensor]) -> f64 {
        tch::no_grad(|| {
            let mut sq = 0.0;
            for p in params {
                let g = p.grad();
                if g.defined() {
                    sq += g.pow_tensor_scalar(2).sum(Kind::Double).double_value(&[]);
                }
            }
            let norm = sq.sqrt();
            let scale = if norm > self.cfg.max_grad_norm {
                self.cfg.max_grad_norm / (norm + 1e-12)
            } else {
                1.0
            };
            let (b1, b2, eps): (f64, f64, f64) = (0.9, 0.999, 1e-8);
            let t = (self.counters.updates + 1) as f64;
            let lr_t = self.cfg.lr * (1.0 - b2.powf(t)).sqrt() / (1.0 - b1.powf(t));
            for (i, p) in params.iter().enumerate() {
                let g = p.grad();
                if !g.defined() {
                    continue;
                }
                let g = &g * scale;
                let m = &mut self.m[i];
                let v = &mut self.v[i];
                let _ = m.g_mul_scalar_(b1).g_add_(&(&g * (1.0 - b1)));
                let _ = v
                    .g_mul_scalar_(b2)
                    .g_add_(&(g.pow_tensor_scalar(2) * (1.0 - b2)));
                let step = &*m / (v.sqrt() + eps) * lr_t;
                let mut p = p.shallow_clone();
                let _ = p.g_sub_(&step);
            }
            norm
        })
    }

    /// Save weights, optimiser state and counters into `dir` (created).
    ///
    /// # Errors
    /// I/O or serialisation failures, with the path.
    pub fn save(&self, dir: &Path) -> Result<(), String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        self.net
            .vs
            .save(dir.join("weights.safetensors"))
            .map_err(|e| format!("save weights: {e}"))?;
        let named: Vec<(String, Tensor)> = self
            .m
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("m.{i}"), t.shallow_clone()))
            .chain(
                self.v
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (format!("v.{i}"), t.shallow_clone())),
            )
            .collect();
        Tensor::save_multi(&named, dir.join("adam.ot"))
            .map_err(|e| format!("save optimiser: {e}"))?;
        let meta = Meta {
            model: self.net.cfg,
            learner: self.cfg,
            counters: self.counters.clone(),
        };
        let text = serde_json::to_vec_pretty(&meta).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("meta.json"), text).map_err(|e| format!("meta.json: {e}"))
    }

    /// Load a checkpoint written by [`Learner::save`].
    ///
    /// # Errors
    /// Missing or damaged files, or a checkpoint of another shape.
    pub fn load(dir: &Path, device: Device) -> Result<Self, String> {
        let text = std::fs::read(dir.join("meta.json"))
            .map_err(|e| format!("{}: {e}", dir.join("meta.json").display()))?;
        let meta: Meta = serde_json::from_slice(&text).map_err(|e| format!("meta.json: {e}"))?;
        let mut learner = Self::new(meta.model, meta.learner, device);
        learner
            .net
            .vs
            .load(dir.join("weights.safetensors"))
            .map_err(|e| format!("load weights: {e}"))?;
        let named = Tensor::load_multi_with_device(dir.join("adam.ot"), device)
            .map_err(|e| format!("load optimiser: {e}"))?;
        for (name, t) in named {
            let (kind, idx) = name.split_once('.').ok_or("bad optimiser entry")?;
            let idx: usize = idx.parse().map_err(|_| "bad optimiser entry")?;
            let slot = match kind {
                "m" => learner.m.get_mut(idx),
                "v" => learner.v.get_mut(idx),
                _ => None,
            }
            .ok_or_else(|| format!("optimiser entry {name} does not fit this model"))?;
            *slot = t;
        }
        learner.counters = meta.counters;
        Ok(learner)
    }
}

fn zeros_like_params(net: &Drrn) -> (Vec<Tensor>, Vec<Tensor>) {
    let params = net.vs.trainable_variables();
    let m = params.iter().map(|p| p.zeros_like()).collect();
    let v = params.iter().map(|p| p.zeros_like()).collect();
    (m, v)
}
