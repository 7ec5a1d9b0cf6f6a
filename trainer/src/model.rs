//! The default policy network (DRRN-style): it scores (observation,
//! candidate action) pairs and takes a softmax over a state's candidates.
//!
//! Each text is a bag of hashed n-gram features ([`crate::features`]); an
//! embedding bag (mean) and a layer encode the observation and each
//! candidate separately, and an MLP scores `[h_obs, h_act, h_obs ⊙ h_act]`.
//! With `action_only` the observation is ignored (the control that shows
//! whether candidate texts alone give the answer away).

use tch::nn::{self, Module as _};
use tch::{Device, Kind, Tensor};

use crate::features::BUCKETS;

/// Shape and seed of a [`Drrn`].
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelConfig {
    /// Embedding width.
    pub embed: i64,
    /// Hidden width.
    pub hidden: i64,
    /// Ignore the observation (control).
    pub action_only: bool,
    /// Initialisation seed.
    pub seed: u64,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            embed: 32,
            hidden: 64,
            action_only: false,
            seed: 0,
        }
    }
}

/// Structural flags per candidate, fed to the scorer directly (a marker
/// inside a mean-pooled bag of hundreds of features would be diluted away):
/// already taken on this path, writes a file this path already wrote, is
/// `submit`, is a write, is a delete, is a shell command.
pub const FLAGS: usize = 6;

/// One decision as the network sees it: features of the observation and of
/// every candidate.
#[derive(Clone, Debug, PartialEq)]
pub struct StateFeatures {
    /// Observation features.
    pub obs: Vec<i64>,
    /// One feature bag per candidate.
    pub candidates: Vec<Vec<i64>>,
    /// [`FLAGS`] structural flags per candidate (0 or 1).
    pub flags: Vec<[f32; FLAGS]>,
    /// Actions taken so far, scaled (steps / 10).
    pub progress: f32,
}

/// The network.
#[derive(Debug)]
pub struct Drrn {
    /// Its variables (saved and loaded as a whole).
    pub vs: nn::VarStore,
    obs_emb: Tensor,
    act_emb: Tensor,
    obs_in: nn::Linear,
    act_in: nn::Linear,
    mix: nn::Linear,
    out: nn::Linear,
    /// Its configuration.
    pub cfg: ModelConfig,
}

/// Per-state outputs of a forward pass.
#[derive(Debug)]
pub struct Forward {
    /// Log-probabilities of each state's candidates, concatenated (one entry per candidate).
    pub log_probs: Tensor,
    /// Where each state's candidates start in `log_probs`, and how many there are.
    pub spans: Vec<(i64, i64)>,
}

impl Forward {
    /// Log-probability of candidate `i` of state `s`.
    pub fn log_prob_of(&self, s: usize, i: usize) -> Tensor {
        let (start, _) = self.spans[s];
        self.log_probs.get(start + i as i64)
    }

    /// Entropy of each state's distribution, as a `(states,)` tensor.
    pub fn entropies(&self) -> Tensor {
        let parts: Vec<Tensor> = self
            .spans
            .iter()
            .map(|&(start, len)| {
                let lp = self.log_probs.narrow(0, start, len);
                -(lp.exp() * &lp).sum(Kind::Float)
            })
            .collect();
        Tensor::stack(&parts, 0)
    }
}

fn bag(weight: &Tensor, bags: &[&[i64]], device: Device) -> Tensor {
    let mut offsets = Vec::with_capacity(bags.len());
    let mut flat = Vec::new();
    for b in bags {
        offsets.push(flat.len() as i64);
        flat.extend_from_slice(b);
    }
    let indices = Tensor::from_slice(&flat).to_device(device);
    let offsets = Tensor::from_slice(&offsets).to_device(device);
    let (out, _, _, _) =
        Tensor::embedding_bag::<Tensor>(weight, &indices, &offsets, false, 1, false, None, false);
    out
}

impl Drrn {
    /// A freshly initialised network on `device`.
    pub fn new(cfg: ModelConfig, device: Device) -> Self {
        // libtorch's generator is process-wide: seeding it and drawing the
        // initial weights must not interleave with another thread's, or the
        // same seed gives different weights (seen as a flaky test when two
        // learners were built at once).
        static INIT: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _init = INIT.lock().unwrap_or_else(|p| p.into_inner());
        tch::manual_seed(cfg.seed as i64);
        let vs = nn::VarStore::new(device);
        let root = vs.root();
        let init = nn::Init::Randn {
            mean: 0.0,
            stdev: 0.1,
        };
        let obs_emb = root.var("obs_emb", &[BUCKETS, cfg.embed], init);
        let act_emb = root.var("act_emb", &[BUCKETS, cfg.embed], init);
        let obs_in = nn::linear(&root / "obs_in", cfg.embed, cfg.hidden, Default::default());
        let act_in = nn::linear(&root / "act_in", cfg.embed, cfg.hidden, Default::default());
        let mix = nn::linear(
            &root / "mix",
            3 * cfg.hidden + FLAGS as i64 + 1,
            cfg.hidden,
            Default::default(),
        );
        let out = nn::linear(&root / "out", cfg.hidden, 1, Default::default());
        Self {
            vs,
            obs_emb,
            act_emb,
            obs_in,
            act_in,
            mix,
            out,
            cfg,
        }
    }

    /// The device it lives on.
    pub fn device(&self) -> Device {
        self.vs.device()
    }

    /// Log-probabilities over each state's candidates (with gradients).
    pub fn forward(&self, states: &[&StateFeatures]) -> Forward {
        let device = self.device();
        let obs_bags: Vec<&[i64]> = states.iter().map(|s| s.obs.as_slice()).collect();
        let mut owner = Vec::new();
        let mut cand_bags: Vec<&[i64]> = Vec::new();
        let mut extra: Vec<f32> = Vec::new();
        let mut spans = Vec::with_capacity(states.len());
        for (i, s) in states.iter().enumerate() {
            spans.push((cand_bags.len() as i64, s.candidates.len() as i64));
            for (k, c) in s.candidates.iter().enumerate() {
                cand_bags.push(c.as_slice());
                owner.push(i as i64);
                extra.extend_from_slice(s.flags.get(k).unwrap_or(&[0.0; FLAGS]));
                extra.push(s.progress);
            }
        }
        let h_obs = self
            .obs_in
            .forward(&bag(&self.obs_emb, &obs_bags, device))
            .relu();
        let h_obs = if self.cfg.action_only {
            h_obs.zeros_like()
        } else {
            h_obs
        };
        let h_act = self
            .act_in
            .forward(&bag(&self.act_emb, &cand_bags, device))
            .relu();
        let owner = Tensor::from_slice(&owner).to_device(device);
        let h_o = h_obs.index_select(0, &owner);
        let extra = Tensor::from_slice(&extra)
            .reshape([cand_bags.len() as i64, FLAGS as i64 + 1])
            .to_device(device);
        let x = Tensor::cat(&[&h_o, &h_act, &(&h_o * &h_act), &extra], 1);
        let scores = self
            .out
            .forward(&self.mix.forward(&x).relu())
            .squeeze_dim(1);
        let parts: Vec<Tensor> = spans
            .iter()
            .map(|&(start, len)| scores.narrow(0, start, len).log_softmax(0, Kind::Float))
            .collect();
        Forward {
            log_probs: Tensor::cat(&parts, 0),
            spans,
        }
    }

    /// The probabilities of one state's candidates (no gradients).
    pub fn probabilities(&self, state: &StateFeatures) -> Vec<f64> {
        tch::no_grad(|| {
            let f = self.forward(&[state]);
            let p = f
                .log_probs
                .exp()
                .to_device(Device::Cpu)
                .to_kind(Kind::Double);
            Vec::<f64>::try_from(&p).unwrap_or_default()
        })
    }
}
