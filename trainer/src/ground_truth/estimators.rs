//! Credit estimators replayed on an [`Mdp`]: each samples from the policy
//! under a budget (executed actions plus verifier runs, the driver's
//! accounting) and returns advantage estimates `Â(s, a)` for the pairs it
//! sampled. No environment is touched: transitions come from the MDP.
//!
//! - episode level, over one group of independent episodes (as many as the
//!   budget pays for): GRPO `(R_i − mean)/(std + 1e-6)`, Dr.GRPO `R_i − mean`,
//!   RLOO `R_i − mean of the others`, each on every step of episode `i`
//!   ([`arbor_rollout::credit::grpo_advantages`]);
//! - branching trees grown like the driver's strategies
//!   ([`super::branching`]): uniform, entropy-guided, uncertainty-guided;
//! - VinePPO-style Monte Carlo: one trajectory at a time; `K` rollouts from
//!   every visited state estimate `V̂(s_t)`; `Â_t = V̂(s_{t+1}) − V̂(s_t)`
//!   (at the end `R − V̂(s_t)`);
//! - RTMC-style merging: independent episodes merged into a graph by exact
//!   state identity; `Q̂(s, a)` and `V̂(s)` are the mean returns of the
//!   episodes through them.
//!
//! Episodes cut short by the budget are left out of every estimate: their
//! reward is that of an unfinished state, not a return (the review's B4).
//! A pair estimated several times in a run gets the weighted mean of its
//! estimates; the weight (the number of samples an estimate stands for) is
//! what the sampled policy gradient multiplies it by.

use std::collections::BTreeMap;

use arbor_rollout::credit::grpo_advantages;
use arbor_rollout::policy::Rng;
use serde::{Deserialize, Serialize};

use super::branching;
use super::mdp::{Budget, Episode, Mdp};

/// A credit estimator and its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Estimator {
    /// Group-normalised episode advantage.
    Grpo,
    /// Group-centred episode advantage (no division by the std).
    DrGrpo,
    /// Leave-one-out episode advantage.
    Rloo,
    /// A tree branching `width` ways at the root and every `every` steps.
    Uniform {
        /// Samples per branch point.
        width: usize,
        /// Steps between branch points.
        every: usize,
    },
    /// A tree branching `width` ways where the policy's entropy exceeds `threshold`.
    Entropy {
        /// Entropy threshold in nats.
        threshold: f64,
        /// Samples per branch point.
        width: usize,
    },
    /// `initial` episodes, then one branch at a time where `p̂(1−p̂)` of `V̂` is largest.
    Uncertainty {
        /// Unbranched episodes first.
        initial: usize,
    },
    /// Monte-Carlo values from `k` rollouts at every visited state.
    VinePpo {
        /// Rollouts per state.
        k: usize,
    },
    /// Independent episodes merged by exact state identity.
    Rtmc,
}

impl Estimator {
    /// The estimator's name in reports (its parameters are in the report's configuration).
    pub fn label(&self) -> &'static str {
        match self {
            Self::Grpo => "grpo",
            Self::DrGrpo => "dr-grpo",
            Self::Rloo => "rloo",
            Self::Uniform { .. } => "uniform",
            Self::Entropy { .. } => "entropy",
            Self::Uncertainty { .. } => "uncertainty",
            Self::VinePpo { .. } => "vineppo",
            Self::Rtmc => "rtmc",
        }
    }

    /// Run it once on `mdp` with `budget` units and the sampling seed `seed`.
    pub fn estimate(&self, mdp: &Mdp, budget: u64, seed: u64) -> Estimates {
        let mut rng = Rng::new(seed);
        let mut budget = Budget::new(budget);
        let mut out = Estimates::default();
        match *self {
            Self::Grpo | Self::DrGrpo | Self::Rloo => {
                episode_level(mdp, *self, &mut budget, &mut rng, &mut out);
            }
            Self::Uniform { width, every } => branching::grow(
                mdp,
                branching::Rule::Uniform { width, every },
                &mut budget,
                &mut rng,
                &mut out,
            ),
            Self::Entropy { threshold, width } => branching::grow(
                mdp,
                branching::Rule::Entropy { threshold, width },
                &mut budget,
                &mut rng,
                &mut out,
            ),
            Self::Uncertainty { initial } => branching::grow(
                mdp,
                branching::Rule::Uncertainty { initial },
                &mut budget,
                &mut rng,
                &mut out,
            ),
            Self::VinePpo { k } => vine(mdp, k.max(1), &mut budget, &mut rng, &mut out),
            Self::Rtmc => rtmc(mdp, &mut budget, &mut rng, &mut out),
        }
        out.budget_used = budget.used();
        out
    }
}

/// The estimators of `arbor credit eval`, with the driver's default
/// parameters (uniform 3 ways every 2 steps, entropy 3 ways, uncertainty
/// after 4 episodes), the given entropy threshold and VinePPO's `k`.
pub fn standard_set(entropy_threshold: f64, vine_k: usize) -> Vec<Estimator> {
    vec![
        Estimator::Grpo,
        Estimator::DrGrpo,
        Estimator::Rloo,
        Estimator::Uniform { width: 3, every: 2 },
        Estimator::Entropy {
            threshold: entropy_threshold,
            width: 3,
        },
        Estimator::Uncertainty { initial: 4 },
        Estimator::VinePpo { k: vine_k },
        Estimator::Rtmc,
    ]
}

/// The weighted sum of one pair's estimates.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PairEstimate {
    /// `Σ weight·Â`.
    pub sum: f64,
    /// `Σ weight` (samples).
    pub weight: f64,
}

impl PairEstimate {
    /// The weighted mean estimate.
    pub fn mean(&self) -> f64 {
        if self.weight > 0.0 {
            self.sum / self.weight
        } else {
            0.0
        }
    }
}

/// What one run of an estimator produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Estimates {
    /// `(state, action)` → its estimates.
    pub pairs: BTreeMap<(usize, usize), PairEstimate>,
    /// Budget units the run used.
    pub budget_used: u64,
}

impl Estimates {
    /// Record the estimate `advantage` of `(state, action)`, standing for `weight` samples.
    pub fn add(&mut self, state: usize, action: usize, advantage: f64, weight: f64) {
        let e = self.pairs.entry((state, action)).or_default();
        e.sum += weight * advantage;
        e.weight += weight;
    }
}

/// Independent episodes from the root until the budget cannot start another.
pub fn episodes(mdp: &Mdp, budget: &mut Budget, rng: &mut Rng) -> Vec<Episode> {
    std::iter::from_fn(|| mdp.episode(0, budget, rng)).collect()
}

fn episode_level(
    mdp: &Mdp,
    kind: Estimator,
    budget: &mut Budget,
    rng: &mut Rng,
    out: &mut Estimates,
) {
    let finished: Vec<Episode> = episodes(mdp, budget, rng)
        .into_iter()
        .filter(|e| !e.truncated)
        .collect();
    let rewards: Vec<f64> = finished.iter().map(|e| e.reward).collect();
    let advantages = match kind {
        Estimator::Grpo => grpo_advantages(&rewards, 1e-6, true),
        Estimator::DrGrpo => grpo_advantages(&rewards, 1e-6, false),
        _ => leave_one_out(&rewards),
    };
    for (ep, adv) in finished.iter().zip(advantages) {
        for &(s, a) in &ep.steps {
            out.add(s, a, adv, 1.0);
        }
    }
}

/// `R_i − mean of the others`; empty for fewer than two episodes.
fn leave_one_out(rewards: &[f64]) -> Vec<f64> {
    let n = rewards.len();
    if n < 2 {
        return Vec::new();
    }
    let total: f64 = rewards.iter().sum();
    rewards
        .iter()
        .map(|r| r - (total - r) / (n - 1) as f64)
        .collect()
}

/// The mean return of up to `k` finished episodes from `state`; `None` when
/// the budget finished none.
fn mc_value(mdp: &Mdp, state: usize, k: usize, budget: &mut Budget, rng: &mut Rng) -> Option<f64> {
    let returns: Vec<f64> = (0..k)
        .filter_map(|_| mdp.episode(state, budget, rng))
        .filter(|e| !e.truncated)
        .map(|e| e.reward)
        .collect();
    (!returns.is_empty()).then(|| returns.iter().sum::<f64>() / returns.len() as f64)
}

fn vine(mdp: &Mdp, k: usize, budget: &mut Budget, rng: &mut Rng, out: &mut Estimates) {
    while let Some(traj) = mdp.episode(0, budget, rng) {
        if traj.truncated {
            break;
        }
        let mut values = Vec::with_capacity(traj.steps.len());
        for &(s, _) in &traj.steps {
            match mc_value(mdp, s, k, budget, rng) {
                Some(v) => values.push(v),
                None => break,
            }
        }
        for (t, (&(s, a), v)) in traj.steps.iter().zip(&values).enumerate() {
            let next = if t + 1 == traj.steps.len() {
                Some(traj.reward)
            } else {
                values.get(t + 1).copied()
            };
            if let Some(next) = next {
                out.add(s, a, next - v, 1.0);
            }
        }
    }
}

fn rtmc(mdp: &Mdp, budget: &mut Budget, rng: &mut Rng, out: &mut Estimates) {
    let mut v: BTreeMap<usize, (f64, f64)> = BTreeMap::new();
    let mut q: BTreeMap<(usize, usize), (f64, f64)> = BTreeMap::new();
    for ep in episodes(mdp, budget, rng).iter().filter(|e| !e.truncated) {
        for &(s, a) in &ep.steps {
            let vs = v.entry(s).or_default();
            vs.0 += ep.reward;
            vs.1 += 1.0;
            let qs = q.entry((s, a)).or_default();
            qs.0 += ep.reward;
            qs.1 += 1.0;
        }
    }
    for (&(s, a), &(sum, n)) in &q {
        let (vsum, vn) = v.get(&s).copied().unwrap_or((sum, n));
        out.add(s, a, sum / n - vsum / vn, n);
    }
}
