//! [`NetPolicy`]: the trained network as an `arbor_rollout` [`Policy`], and
//! the conversion of rollout data into training [`Sample`]s.
//!
//! The actor holds its own copy of the network. The learner publishes new
//! weights into it (a copy under a lock, and a version bump), so rollout
//! workers keep acting while the learner trains, and every edge records the
//! version that chose it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use arbor_rollout::AgentAction;
use arbor_rollout::credit::CreditConfig;
use arbor_rollout::export::{AdvantageRecord, records, tree_credit};
use arbor_rollout::policy::{Choice, Policy, PolicyError, PolicyInput, Rng, entropy, sample_index};
use arbor_rollout::tree::RolloutTree;
use tch::Device;

use crate::features::features;
use crate::learner::Sample;
use crate::model::{Drrn, ModelConfig, StateFeatures};

/// The network as a behaviour policy.
#[derive(Debug)]
pub struct NetPolicy {
    net: Mutex<Drrn>,
    version: AtomicU64,
    greedy: bool,
    explore: f64,
    markov: bool,
}

impl NetPolicy {
    /// A policy acting with a fresh network of `cfg`.
    pub fn new(cfg: ModelConfig, device: Device) -> Self {
        Self {
            net: Mutex::new(Drrn::new(cfg, device)),
            version: AtomicU64::new(0),
            greedy: false,
            explore: 0.0,
            markov: false,
        }
    }

    /// Read only what a Markov policy may: the observation, the step index
    /// and the candidates (no `done:` lines, no flags from the path). Its
    /// value on a task is then computable exactly by dynamic programming
    /// over the task's states ([`crate::ground_truth`]).
    pub fn markov(mut self) -> Self {
        self.markov = true;
        self
    }

    /// A feature cache that reads states the way this policy does: the
    /// learner must see the same features the actor acted on.
    pub fn feature_cache(&self) -> FeatureCache {
        FeatureCache {
            markov: self.markov,
            ..FeatureCache::default()
        }
    }

    /// Mix the network's distribution with a uniform one: the behaviour
    /// policy is `(1 − ε)·π + ε/K`. Edges record both its log-prob (the
    /// behaviour μ) and the network's own (the target π_old, which PPO's
    /// ratio is anchored on; see [`crate::learner`]). Training rollouts use
    /// it so that a confident policy still produces siblings that differ,
    /// hence advantages.
    pub fn exploring(mut self, epsilon: f64) -> Self {
        self.explore = epsilon.clamp(0.0, 1.0);
        self
    }

    /// Take the most probable action instead of sampling.
    pub fn greedy(mut self) -> Self {
        self.greedy = true;
        self
    }

    /// Copy `src`'s weights in and set the version.
    ///
    /// # Errors
    /// When the shapes differ.
    pub fn publish(&self, src: &Drrn, version: u64) -> Result<(), String> {
        let mut net = self.net.lock().map_err(|_| "actor lock poisoned")?;
        tch::no_grad(|| net.vs.copy(&src.vs)).map_err(|e| e.to_string())?;
        self.version.store(version, Ordering::SeqCst);
        Ok(())
    }

    /// Probabilities of `candidates` at step `step` as a Markov policy reads
    /// them (whatever this policy's mode), without exploration.
    pub fn markov_probabilities(
        &self,
        cache: &mut FeatureCache,
        observation: &str,
        candidates: &[AgentAction],
        step: usize,
    ) -> Vec<f64> {
        let texts: Vec<String> = candidates.iter().map(AgentAction::text).collect();
        let state = cache.markov_state(observation, &texts, step);
        match self.net.lock() {
            Ok(net) => net.probabilities(&state),
            Err(_) => Vec::new(),
        }
    }

    /// The current version.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }

    /// Probabilities of `candidates` given the observation text and the
    /// actions taken so far.
    pub fn probabilities(
        &self,
        observation: &str,
        candidates: &[AgentAction],
        history: &[AgentAction],
    ) -> Vec<f64> {
        let state = decision_features(&mut self.feature_cache(), observation, candidates, history);
        match self.net.lock() {
            Ok(net) => net.probabilities(&state),
            Err(_) => Vec::new(),
        }
    }
}

/// Features of a state from its observation text and candidate texts.
pub fn state_features<I, S>(observation: &str, candidates: I) -> StateFeatures
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let texts: Vec<String> = candidates
        .into_iter()
        .map(|c| c.as_ref().to_owned())
        .collect();
    FeatureCache::default().state(observation, &texts, &[])
}

/// The text the network reads for the state: the observation, then the
/// episode so far in short forms (`write a.py (120 bytes)`), so it can tell
/// which steps are done.
pub fn decision_text(observation: &str, history: &[AgentAction]) -> String {
    let mut s = format!("{observation}\nstep {}\n", history.len());
    for h in history {
        s.push_str(&format!("done: {h}\n"));
    }
    s
}

/// The path of a write, from its text form (`write PATH:\n...`).
fn written_path(text: &str) -> Option<&str> {
    text.strip_prefix("write ")?
        .split_once(":\n")
        .map(|(p, _)| p)
}

/// The network's view of one state: the decision text, and each candidate
/// (marked when already taken on this path).
pub fn decision_features(
    cache: &mut FeatureCache,
    observation: &str,
    candidates: &[AgentAction],
    history: &[AgentAction],
) -> StateFeatures {
    let texts: Vec<String> = candidates.iter().map(AgentAction::text).collect();
    cache.decision(observation, &texts, history)
}

impl Policy for NetPolicy {
    fn name(&self) -> String {
        let net = self.net.lock().map(|n| n.cfg);
        match net {
            Ok(cfg) if cfg.action_only => "drrn(action-only)".to_owned(),
            _ => "drrn".to_owned(),
        }
    }

    fn choose(&self, input: &PolicyInput<'_>, rng: &mut Rng) -> Result<Choice, PolicyError> {
        if input.candidates.is_empty() {
            return Err(PolicyError {
                policy: self.name(),
                message: format!("task {} lists no candidate actions", input.task),
            });
        }
        let version = self.version();
        let pi = self.probabilities(&input.observation.text(), input.candidates, input.history);
        let mut p = pi.clone();
        if self.explore > 0.0 {
            let k = p.len() as f64;
            for x in &mut p {
                *x = (1.0 - self.explore) * *x + self.explore / k;
            }
        }
        if p.len() != input.candidates.len() {
            return Err(PolicyError {
                policy: self.name(),
                message: "the network gave no distribution".to_owned(),
            });
        }
        let i = if self.greedy {
            p.iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map_or(0, |(i, _)| i)
        } else {
            sample_index(&p, rng)
        };
        Ok(Choice {
            action: input.candidates[i].clone(),
            index: Some(i),
            log_prob: p[i].max(1e-12).ln(),
            entropy: entropy(&p),
            version,
            tokens: None,
            generation: None,
            target_log_prob: (self.explore > 0.0).then(|| pi[i].max(1e-12).ln()),
        })
    }
}

/// Caches text features (observations and candidates repeat a lot), and
/// knows whether the policy reading them is Markov (see [`NetPolicy::markov`]).
#[derive(Debug, Default)]
pub struct FeatureCache {
    map: HashMap<String, Vec<i64>>,
    markov: bool,
}

impl FeatureCache {
    /// Features of `text`.
    pub fn get(&mut self, text: &str) -> Vec<i64> {
        if let Some(f) = self.map.get(text) {
            return f.clone();
        }
        let f = features(text);
        if self.map.len() > 50_000 {
            self.map.clear();
        }
        self.map.insert(text.to_owned(), f.clone());
        f
    }

    /// Features of a state: the decision text and the candidate texts,
    /// with structural flags per candidate (see [`crate::model::FLAGS`]):
    /// already taken on this path (`done` holds the texts of the actions
    /// taken; repeating one rarely helps), writes a file this path already
    /// wrote (a second version of a file is rarely the next step), and its kind.
    pub fn state(
        &mut self,
        decision: &str,
        candidates: &[String],
        done: &[String],
    ) -> StateFeatures {
        let written: Vec<&str> = done.iter().filter_map(|d| written_path(d)).collect();
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        StateFeatures {
            obs: self.get(decision),
            candidates: candidates.iter().map(|c| self.get(c)).collect(),
            flags: candidates
                .iter()
                .map(|c| {
                    let taken = done.iter().any(|d| d == c);
                    [
                        flag(taken),
                        flag(!taken && written_path(c).is_some_and(|p| written.contains(&p))),
                        flag(c == "submit"),
                        flag(c.starts_with("write ")),
                        flag(c.starts_with("delete ")),
                        flag(c.starts_with("exec: ")),
                    ]
                })
                .collect(),
            progress: done.len() as f32 / 10.0,
        }
    }

    /// Features of a decision: the observation, the candidates' texts and
    /// the actions taken so far (of which a Markov cache reads the number only).
    pub fn decision(
        &mut self,
        observation: &str,
        candidates: &[String],
        history: &[AgentAction],
    ) -> StateFeatures {
        if self.markov {
            return self.markov_state(observation, candidates, history.len());
        }
        let done: Vec<String> = history.iter().map(AgentAction::text).collect();
        self.state(&decision_text(observation, history), candidates, &done)
    }

    /// What a Markov policy reads at step `step`: the observation (with
    /// durations masked, which differ from run to run of the same state) and
    /// the step index, the candidates with their kind flags only.
    pub fn markov_state(
        &mut self,
        observation: &str,
        candidates: &[String],
        step: usize,
    ) -> StateFeatures {
        let text = format!(
            "{}\nstep {step}\n",
            crate::ground_truth::explore::mask_durations(observation)
        );
        let mut s = self.state(&text, candidates, &[]);
        s.progress = step as f32 / 10.0;
        s
    }

    /// A training sample from an exported advantage record (`None` for a
    /// free-form action, which has no candidate index), weighted by the
    /// number of merged samples the record's edge stands for.
    pub fn sample(&mut self, r: &AdvantageRecord, advantage: f64) -> Option<Sample> {
        let chosen = r.chosen?;
        Some(Sample {
            state: self.decision(&r.observation, &r.candidates, &r.history),
            chosen,
            behaviour_log_prob: r.behaviour_log_prob,
            target_log_prob: r.target_log_prob.unwrap_or(r.behaviour_log_prob),
            weight: f64::from(r.n),
            advantage,
            version: r.policy_version,
        })
    }
}

/// PPO samples of a branched tree: every edge with its segment advantage
/// (SPO: V̂ at the next branch point or leaf minus V̂ at the previous branch
/// point; at a branch point that is A(s, a) = Q̂ − V̂, and decisions inside
/// a chain between branch points carry their segment's credit instead of
/// being dropped), weighted by its count. Edges whose advantage is 0 give no
/// policy gradient and are left out.
pub fn branch_samples(tree: &RolloutTree, cache: &mut FeatureCache) -> Vec<Sample> {
    let Ok(recs) = records(tree, &CreditConfig::default()) else {
        return Vec::new();
    };
    recs.iter()
        .filter(|r| r.segment_advantage.abs() > 1e-9)
        .filter_map(|r| cache.sample(r, r.segment_advantage))
        .collect()
}

/// VinePPO samples of a `vine` tree: the main episode's steps (the first
/// edges from the root down), each with `V̂(s_{t+1}) − V̂(s_t)`, both
/// Monte-Carlo means over the continuations from those states.
pub fn vine_samples(tree: &RolloutTree, cache: &mut FeatureCache) -> Vec<Sample> {
    let Ok(recs) = records(tree, &CreditConfig::default()) else {
        return Vec::new();
    };
    let by_edge: HashMap<usize, &AdvantageRecord> = recs.iter().map(|r| (r.edge, r)).collect();
    let mut out = Vec::new();
    let mut node = 0;
    while let Some(&e) = tree.nodes[node].edges.first() {
        if let Some(r) = by_edge.get(&e).filter(|r| r.advantage.abs() > 1e-9)
            && let Some(mut s) = cache.sample(r, r.advantage)
        {
            // One episode: its steps weigh 1 each.
            s.weight = 1.0;
            out.push(s);
        }
        node = tree.edges[e].to;
    }
    out
}

/// GRPO samples of an unbranched group (an `independent` tree): every step of
/// episode i gets A_i = (R_i − mean R) / (std R + ε).
pub fn grpo_samples(tree: &RolloutTree, cache: &mut FeatureCache) -> Vec<Sample> {
    let cfg = CreditConfig::default();
    let Ok(recs) = records(tree, &cfg) else {
        return Vec::new();
    };
    let Ok(Some((credit, _, inverse))) = tree_credit(tree, &cfg) else {
        return Vec::new();
    };
    let _ = credit;
    // The episode of each edge: the root edge above it.
    let mut episode_of = vec![usize::MAX; tree.edges.len()];
    for e in &tree.edges {
        let mut cur = e.id;
        while tree.edges[cur].from != 0 {
            match tree.nodes[tree.edges[cur].from].parent_edge {
                Some(p) => cur = p,
                None => break,
            }
        }
        episode_of[e.id] = cur;
    }
    let grpo: HashMap<usize, f64> = recs
        .iter()
        .filter_map(|r| r.grpo.map(|g| (r.edge, g)))
        .collect();
    let _ = inverse;
    recs.iter()
        .filter_map(|r| {
            let a = *grpo.get(&episode_of[r.edge])?;
            if a.abs() < 1e-9 {
                return None;
            }
            cache.sample(r, a)
        })
        .collect()
}

/// Behaviour-cloning samples of a gold tree: each gold decision with a
/// candidate index.
pub fn bc_samples(tree: &RolloutTree, cache: &mut FeatureCache) -> Vec<Sample> {
    tree.edges
        .iter()
        .filter_map(|e| {
            let chosen = e.index?;
            let node = &tree.nodes[e.from];
            let history = tree.actions_to(e.from);
            Some(Sample {
                state: decision_features(
                    cache,
                    &node.observation.text(),
                    &node.candidates,
                    &history,
                ),
                chosen,
                behaviour_log_prob: 0.0,
                target_log_prob: 0.0,
                weight: 1.0,
                advantage: 1.0,
                version: 0,
            })
        })
        .collect()
}
