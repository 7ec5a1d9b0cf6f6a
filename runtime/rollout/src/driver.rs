//! The concurrent rollout driver: grows one [`RolloutTree`] per task on tokio,
//! with at most `workers` paths running at once (blocking tasks), under a
//! budget counted as executed actions plus verifier runs.
//!
//! (One file, ~1,000 lines: the strategies, the segment runner and the
//! coordinator are one state machine over the private `Shared` and
//! `Coordinator` state, reviewed top to bottom; it has no tests of its own —
//! they are in `tests/tests/rollout.rs`.)
//!
//! Every branch starts from the *real snapshot* of its branch node: a worker
//! forks that snapshot and continues, it never re-runs the prefix. A path
//! runs in one sandbox and snapshots after every action (so any node can be
//! branched later), until the policy submits, the step limit is reached, the
//! budget runs out (the leaf is then marked truncated), or the next branch
//! point; there the coordinator samples `width` choices, merges identical
//! ones into one edge with a count, and dispatches one job per distinct action.
//!
//! Budget accounting is exact: a job is dispatched only with one action and
//! one verification reserved; every further action reserves one more, and a
//! path that cannot reserve is verified as it stands. So the budget used never
//! exceeds the limit. Runtime faults end their path, are recorded on the node
//! and counted, and are excluded from statistics (no reward).

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use arbor_runtime::{AnySandbox, AnySnapshot};
use serde::{Deserialize, Serialize};

use crate::credit::{CreditConfig, estimate};
use crate::env::{
    AgentAction, EnvError, EnvObservation, Environment, Episode, EpisodeStep, Transition, Verdict,
};
use crate::policy::{AnyPolicy, Choice, Decision, Policy, PolicyError, Rng};
use crate::tree::{Budget, Edge, Leaf, Node, Origin, RolloutTree, TreeStats};

/// Where to branch.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Strategy {
    /// `width` ways at the root and every `every` steps.
    Uniform {
        /// Steps between branch points.
        every: usize,
        /// Samples per branch point.
        width: usize,
    },
    /// `width` ways wherever the policy's entropy exceeds `threshold` (and at the root).
    Entropy {
        /// Entropy threshold in nats.
        threshold: f64,
        /// Samples per branch point.
        width: usize,
    },
    /// `initial` unbranched episodes, then one extra branch at a time where
    /// p̂(1−p̂) of the value estimate is highest.
    Uncertainty {
        /// Unbranched episodes first.
        initial: usize,
    },
    /// `episodes` independent, unbranched episodes from the root (the GRPO
    /// baseline's groups): nothing shared, nothing merged.
    Independent {
        /// Episodes.
        episodes: usize,
    },
    /// VinePPO-style Monte Carlo values: one on-policy episode (the main
    /// path), then `k` independent on-policy continuations from every state
    /// on it (round by round, so a short budget spreads evenly over the
    /// states). V̂ at each state of the main path is then a Monte-Carlo
    /// mean, and a main-path edge's advantage is `V̂(s_{t+1}) − V̂(s_t)`.
    Vine {
        /// Continuations per state of the main path.
        k: usize,
    },
    /// `episodes` on-policy episodes sampled through one shared tree: an
    /// episode follows (and counts) existing edges while its actions match
    /// and forks where they differ, so repeated prefixes cost nothing. The
    /// root's V̂ is then the Monte-Carlo success estimate (evaluation).
    Sample {
        /// Episodes.
        episodes: usize,
    },
}

impl FromStr for Strategy {
    type Err = String;

    /// `uniform[:WIDTH[:EVERY]]` (default 3 ways every 2 steps),
    /// `entropy[:THRESHOLD[:WIDTH]]` (default 1.0 nats, 3 ways),
    /// `uncertainty[:INITIAL]` (default 4), `independent[:EPISODES]` (default 8),
    /// `vine[:K]` (default 4), `sample[:EPISODES]` (default 20).
    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = s.split(':');
        let kind = parts.next().unwrap_or_default();
        let args: Vec<&str> = parts.collect();
        let num = |i: usize, default: usize| -> Result<usize, String> {
            match args.get(i) {
                None => Ok(default),
                Some(a) => match a.parse::<usize>() {
                    Ok(n) if n >= 1 => Ok(n),
                    _ => Err(format!("{s:?}: {a:?} is not a positive integer")),
                },
            }
        };
        let too_many = |n: usize| {
            if args.len() > n {
                Err(format!("{s:?}: too many parameters"))
            } else {
                Ok(())
            }
        };
        match kind {
            "uniform" => {
                too_many(2)?;
                Ok(Self::Uniform {
                    width: num(0, 3)?,
                    every: num(1, 2)?,
                })
            }
            "entropy" => {
                too_many(2)?;
                let threshold = match args.first() {
                    None => 1.0,
                    Some(a) => a
                        .parse::<f64>()
                        .ok()
                        .filter(|t| t.is_finite() && *t >= 0.0)
                        .ok_or_else(|| format!("{s:?}: {a:?} is not an entropy in nats"))?,
                };
                Ok(Self::Entropy {
                    threshold,
                    width: num(1, 3)?,
                })
            }
            "uncertainty" => {
                too_many(1)?;
                Ok(Self::Uncertainty {
                    initial: num(0, 4)?,
                })
            }
            "independent" => {
                too_many(1)?;
                Ok(Self::Independent {
                    episodes: num(0, 8)?,
                })
            }
            "vine" => {
                too_many(1)?;
                Ok(Self::Vine { k: num(0, 4)? })
            }
            "sample" => {
                too_many(1)?;
                Ok(Self::Sample {
                    episodes: num(0, 20)?,
                })
            }
            _ => Err(format!(
                "unknown branching strategy {s:?} (uniform[:W[:K]], entropy[:T[:W]], uncertainty[:N], independent[:N], vine[:K], sample[:N])"
            )),
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Uniform { every, width } => write!(f, "uniform:{width}:{every}"),
            Self::Entropy { threshold, width } => write!(f, "entropy:{threshold}:{width}"),
            Self::Uncertainty { initial } => write!(f, "uncertainty:{initial}"),
            Self::Independent { episodes } => write!(f, "independent:{episodes}"),
            Self::Vine { k } => write!(f, "vine:{k}"),
            Self::Sample { episodes } => write!(f, "sample:{episodes}"),
        }
    }
}

/// Driver settings.
#[derive(Clone, Debug)]
pub struct DriverConfig {
    /// Paths running at once (default: one per core).
    pub workers: usize,
    /// Executed actions plus verifier runs, per tree.
    pub budget: u64,
    /// Where to branch.
    pub strategy: Strategy,
    /// Seed of every sampling decision.
    pub seed: u64,
}

impl DriverConfig {
    /// One worker per core, the given budget and strategy, seed 0.
    pub fn new(budget: u64, strategy: Strategy) -> Self {
        Self {
            workers: std::thread::available_parallelism().map_or(1, usize::from),
            budget,
            strategy,
            seed: 0,
        }
    }
}

/// Live counters for a progress display (shared across trees).
#[derive(Debug, Default)]
pub struct Progress {
    /// Actions executed.
    pub actions: AtomicU64,
    /// Verifier runs.
    pub verifier_runs: AtomicU64,
    /// Forks opened.
    pub forks: AtomicU64,
    /// Graded leaves.
    pub leaves: AtomicU64,
    /// Successful leaves.
    pub successes: AtomicU64,
    /// Runtime faults.
    pub faults: AtomicU64,
}

/// Errors that stop a whole tree (not a path: those are faults).
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The environment could not be reset.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// The policy cannot act at the root.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// A worker panicked or the tokio runtime failed.
    #[error("rollout worker failed: {0}")]
    Worker(String),
    /// The budget cannot pay for even one action and its verification.
    #[error("a budget of {0} cannot pay for one action and one verification")]
    BudgetTooSmall(u64),
}

struct Shared {
    env: Arc<dyn Environment>,
    policy: AnyPolicy,
    strategy: Strategy,
    remaining: AtomicU64,
    actions: AtomicU64,
    verifier_runs: AtomicU64,
    forks: AtomicU64,
    snapshots: AtomicU64,
    fork_us: AtomicU64,
    snapshot_us: AtomicU64,
    action_us: AtomicU64,
    verify_us: AtomicU64,
    /// Time spent waiting on the policy (summed over concurrent decisions).
    policy_us: AtomicU64,
    progress: Arc<Progress>,
    root: AnySnapshot,
    reference: Option<Vec<AgentAction>>,
    max_steps: usize,
}

impl Shared {
    fn take(&self, n: u64) -> bool {
        self.remaining
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |r| r.checked_sub(n))
            .is_ok()
    }

    fn give_back(&self, n: u64) {
        self.remaining.fetch_add(n, Ordering::SeqCst);
    }

    fn candidates(&self, obs: &EnvObservation) -> Vec<AgentAction> {
        let mut c = self.env.candidates(obs);
        c.push(AgentAction::Submit);
        c
    }

    /// The owned input of one decision.
    fn decision(
        &self,
        obs: &EnvObservation,
        candidates: &[AgentAction],
        history: &[EpisodeStep],
        trail: &[EnvObservation],
    ) -> Decision {
        Decision {
            task: self.env.id().to_owned(),
            observation: obs.clone(),
            candidates: candidates.to_vec(),
            history: history.iter().map(|s| s.action.clone()).collect(),
            observations: trail.to_vec(),
            reference: self.reference.clone(),
        }
    }

    /// `n` samples in the coordinator: a sync policy inline, in order, from
    /// `rng` (deterministic); an async one in one request seeded from `rng`.
    async fn sample(
        &self,
        decision: Decision,
        n: usize,
        rng: &mut Rng,
    ) -> Result<Vec<Choice>, PolicyError> {
        let t = Instant::now();
        let out = match &self.policy {
            AnyPolicy::Sync(p) => {
                let input = decision.input();
                (0..n).map(|_| p.choose(&input, rng)).collect()
            }
            AnyPolicy::Async(p) => {
                let seed = rng.next_u64();
                checked(p.choose_n(decision, n, seed).await, n, &p.name())
            }
        };
        self.policy_us.fetch_add(micros(t), Ordering::Relaxed);
        out
    }

    /// One decision inside a path: a sync policy on a blocking thread (an
    /// external command may take seconds), an async one awaited.
    async fn decide_on_path(&self, decision: Decision, rng: &mut Rng) -> Result<Choice, String> {
        let t = Instant::now();
        let out = self.decide_inner(decision, rng).await;
        self.policy_us.fetch_add(micros(t), Ordering::Relaxed);
        out
    }

    async fn decide_inner(&self, decision: Decision, rng: &mut Rng) -> Result<Choice, String> {
        match &self.policy {
            AnyPolicy::Sync(p) => {
                let (p, mut r) = (Arc::clone(p), rng.clone());
                let (choice, r) = blocking(move || {
                    let c = p.choose(&decision.input(), &mut r);
                    (c, r)
                })
                .await?;
                *rng = r;
                choice.map_err(|e| e.to_string())
            }
            AnyPolicy::Async(p) => {
                let seed = rng.next_u64();
                checked(p.choose_n(decision, 1, seed).await, 1, &p.name())
                    .map(|mut v| v.remove(0))
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// Grade on a blocking thread.
    async fn verify_blocking(
        self: &Arc<Self>,
        history: &[EpisodeStep],
        last: &AnySnapshot,
    ) -> Result<Verdict, String> {
        let (sh, history, last) = (Arc::clone(self), history.to_vec(), last.clone());
        blocking(move || sh.verify(&history, &last)).await
    }

    fn verify(&self, history: &[EpisodeStep], last: &AnySnapshot) -> Verdict {
        let t = Instant::now();
        let v = self.env.verify(&Episode {
            task: self.env.id().to_owned(),
            root: self.root.clone(),
            steps: history.to_vec(),
            last: last.clone(),
        });
        self.verify_us.fetch_add(micros(t), Ordering::Relaxed);
        self.verifier_runs.fetch_add(1, Ordering::Relaxed);
        self.progress.verifier_runs.fetch_add(1, Ordering::Relaxed);
        if v.is_fault() {
            self.progress.faults.fetch_add(1, Ordering::Relaxed);
        } else {
            self.progress.leaves.fetch_add(1, Ordering::Relaxed);
            if v.success() {
                self.progress.successes.fetch_add(1, Ordering::Relaxed);
            }
        }
        v
    }
}

/// An async policy must answer with exactly the samples asked for.
fn checked(
    got: Result<Vec<Choice>, PolicyError>,
    n: usize,
    policy: &str,
) -> Result<Vec<Choice>, PolicyError> {
    let got = got?;
    if got.len() != n {
        return Err(PolicyError {
            policy: policy.to_owned(),
            message: format!("asked for {n} samples, got {}", got.len()),
        });
    }
    Ok(got)
}

fn micros(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// A path to run: take `first` (reserved: one action unless it is `Submit`,
/// plus one verification) at node `start`, then continue.
struct Job {
    start: usize,
    snapshot: AnySnapshot,
    history: Vec<EpisodeStep>,
    /// The observation after each step of `history`.
    trail: Vec<EnvObservation>,
    first: Choice,
    count: u32,
    seed: u64,
}

/// One step of a finished path.
struct SegStep {
    choice: Choice,
    count: u32,
    exit: Option<arbor_runtime::store::object::ExitStatus>,
    duration_us: u64,
    snapshot: AnySnapshot,
    observation: EnvObservation,
    candidates: Vec<AgentAction>,
    origin: Origin,
}

enum SegEnd {
    Leaf(Box<Verdict>, bool),
    /// A branch point, with the path's own first sample there.
    Branch(Box<Choice>),
    /// A branch point whose samples are all still to be drawn (an async
    /// policy's one request with `n = width`).
    BranchAt,
    Fault(String),
}

struct Segment {
    start: usize,
    steps: Vec<SegStep>,
    end: SegEnd,
}

/// Whether `depth` is a branch point whatever the choice (uniform strategies).
fn is_branch_depth(strategy: Strategy, depth: usize) -> bool {
    matches!(strategy, Strategy::Uniform { every, .. } if depth.is_multiple_of(every))
}

fn is_branch_point(strategy: Strategy, depth: usize, choice: &Choice) -> bool {
    match strategy {
        Strategy::Uniform { .. } => is_branch_depth(strategy, depth),
        Strategy::Entropy { threshold, .. } => choice.entropy > threshold,
        Strategy::Uncertainty { .. }
        | Strategy::Independent { .. }
        | Strategy::Vine { .. }
        | Strategy::Sample { .. } => false,
    }
}

/// Run a blocking closure (sandboxes, actions, verification) off the async threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("worker: {e}"))
}

/// What one step of a path produced on its blocking thread.
struct Stepped {
    sandbox: Option<AnySandbox>,
    outcome: Result<(Transition, AnySnapshot, Vec<AgentAction>), String>,
    fork_us: Option<u64>,
    action_us: u64,
    snapshot_us: u64,
}

/// Open the sandbox if needed, take the action, snapshot (blocking). The
/// sandbox comes back whatever happened, so the path can close it.
fn step_blocking(
    sh: &Shared,
    mut sandbox: Option<AnySandbox>,
    current: &AnySnapshot,
    depth: usize,
    action: &AgentAction,
) -> Stepped {
    let (mut fork_us, mut action_us, mut snapshot_us) = (None, 0, 0);
    let mut run = || {
        if sandbox.is_none() {
            let t = Instant::now();
            sandbox = Some(current.open().map_err(|e| format!("fork: {e}"))?);
            fork_us = Some(micros(t));
        }
        let sb = sandbox.as_mut().ok_or("no sandbox")?;
        let t = Instant::now();
        let result = sh
            .env
            .step(sb, depth, action)
            .map_err(|e| format!("step {depth}: {e}"))?;
        action_us = micros(t);
        let t = Instant::now();
        let snap = sb.snapshot().map_err(|e| format!("snapshot: {e}"))?;
        snapshot_us = micros(t);
        let candidates = sh.candidates(&result.observation);
        Ok((result, snap, candidates))
    };
    let outcome = run();
    Stepped {
        sandbox,
        outcome,
        fork_us,
        action_us,
        snapshot_us,
    }
}

/// Run one path: env work on blocking threads, decisions awaited (an async
/// policy holds no thread while its model call is in flight).
async fn run_job(sh: Arc<Shared>, job: Job) -> Segment {
    let mut rng = Rng::derive(job.seed, job.start as u64);
    let mut steps: Vec<SegStep> = Vec::new();
    let mut history = job.history;
    let mut trail = job.trail;
    let mut current = job.snapshot;
    let mut choice = job.first;
    let mut count = job.count;
    let mut reserved_action = choice.action != AgentAction::Submit;
    let mut sandbox: Option<AnySandbox> = None;
    let end = loop {
        if choice.action == AgentAction::Submit {
            let verdict = match sh.verify_blocking(&history, &current).await {
                Ok(v) => v,
                Err(e) => break SegEnd::Fault(e),
            };
            steps.push(SegStep {
                observation: steps.last().map_or_else(
                    || submitted_observation(&sh, &history),
                    |s: &SegStep| s.observation.clone(),
                ),
                candidates: Vec::new(),
                choice,
                count,
                exit: None,
                duration_us: 0,
                snapshot: current.clone(),
                origin: Origin::Terminal,
            });
            break SegEnd::Leaf(Box::new(verdict), false);
        }
        if !reserved_action && !sh.take(1) {
            match sh.verify_blocking(&history, &current).await {
                Ok(verdict) => break SegEnd::Leaf(Box::new(verdict), true),
                Err(e) => break SegEnd::Fault(e),
            }
        }
        reserved_action = false;
        let depth = history.len();
        let stepped = {
            let (sh2, cur, action) = (Arc::clone(&sh), current.clone(), choice.action.clone());
            let sb = sandbox.take();
            match blocking(move || step_blocking(&sh2, sb, &cur, depth, &action)).await {
                Ok(s) => s,
                Err(e) => break SegEnd::Fault(e),
            }
        };
        sandbox = stepped.sandbox;
        if let Some(us) = stepped.fork_us {
            sh.fork_us.fetch_add(us, Ordering::Relaxed);
            sh.forks.fetch_add(1, Ordering::Relaxed);
            sh.progress.forks.fetch_add(1, Ordering::Relaxed);
        }
        let (result, snap, candidates) = match stepped.outcome {
            Ok(o) => o,
            Err(e) => break SegEnd::Fault(e),
        };
        sh.action_us.fetch_add(stepped.action_us, Ordering::Relaxed);
        sh.actions.fetch_add(1, Ordering::Relaxed);
        sh.progress.actions.fetch_add(1, Ordering::Relaxed);
        sh.snapshot_us
            .fetch_add(stepped.snapshot_us, Ordering::Relaxed);
        sh.snapshots.fetch_add(1, Ordering::Relaxed);
        history.push(result.record.clone());
        trail.push(result.observation.clone());
        steps.push(SegStep {
            choice,
            count,
            exit: Some(result.record.exit),
            duration_us: result.record.duration_us,
            snapshot: snap.clone(),
            observation: result.observation.clone(),
            candidates: candidates.clone(),
            origin: Origin::Step,
        });
        count = 1;
        current = snap;
        if history.len() >= sh.max_steps {
            match sh.verify_blocking(&history, &current).await {
                Ok(verdict) => break SegEnd::Leaf(Box::new(verdict), false),
                Err(e) => break SegEnd::Fault(e),
            }
        }
        // An async policy samples a uniform branch point's siblings in one
        // request: the path ends here and the coordinator asks for all of them.
        if sh.policy.is_async() && is_branch_depth(sh.strategy, history.len()) {
            sh.give_back(1); // the verification this path no longer needs
            break SegEnd::BranchAt;
        }
        let decision = sh.decision(&result.observation, &candidates, &history, &trail);
        let next = match sh.decide_on_path(decision, &mut rng).await {
            Ok(c) => c,
            Err(e) => break SegEnd::Fault(e),
        };
        if is_branch_point(sh.strategy, history.len(), &next) {
            sh.give_back(1); // the verification this path no longer needs
            break SegEnd::Branch(Box::new(next));
        }
        choice = next;
    };
    if let Some(sb) = sandbox {
        // Closing a sandbox tears down its helper: off the async threads.
        let _ = blocking(move || drop(sb)).await;
    }
    if matches!(end, SegEnd::Fault(_)) {
        sh.give_back(1);
        sh.progress.faults.fetch_add(1, Ordering::Relaxed);
    }
    Segment {
        start: job.start,
        steps,
        end,
    }
}

fn submitted_observation(sh: &Shared, history: &[EpisodeStep]) -> EnvObservation {
    EnvObservation {
        task: sh.env.id().to_owned(),
        instructions: String::new(),
        step: history.len(),
        last_action: Some("submit".to_owned()),
        output: String::new(),
        exit: None,
    }
}

struct Coordinator {
    sh: Arc<Shared>,
    tree: RolloutTree,
    /// The snapshot of each node, by node id.
    snapshots: Vec<AnySnapshot>,
    queue: VecDeque<Job>,
    jobs: u64,
    seed: u64,
    rng: Rng,
}

impl Coordinator {
    fn add_node(
        &mut self,
        parent_edge: Option<usize>,
        depth: usize,
        snapshot: &AnySnapshot,
        observation: EnvObservation,
        candidates: Vec<AgentAction>,
        origin: Origin,
    ) -> usize {
        let id = self.tree.nodes.len();
        self.snapshots.push(snapshot.clone());
        self.tree.nodes.push(Node {
            id,
            parent_edge,
            depth,
            snapshot: snapshot.id().to_string(),
            observation,
            candidates,
            edges: Vec::new(),
            leaf: None,
            origin,
            fault: None,
        });
        id
    }

    /// The episode steps from the root to `node`.
    fn history(&self, node: usize) -> Vec<EpisodeStep> {
        self.tree
            .path_to(node)
            .into_iter()
            .map(|e| {
                let e = &self.tree.edges[e];
                EpisodeStep {
                    action: e.action.clone(),
                    exit: e
                        .exit
                        .unwrap_or(arbor_runtime::store::object::ExitStatus::Code { code: 0 }),
                    duration_us: e.duration_us,
                }
            })
            .filter(|s| s.action != AgentAction::Submit)
            .collect()
    }

    /// The observation after each step from the root to `node` (the
    /// context an LLM policy shows), aligned with [`Self::history`].
    fn trail(&self, node: usize) -> Vec<EnvObservation> {
        self.tree
            .path_to(node)
            .into_iter()
            .filter(|&e| self.tree.edges[e].action != AgentAction::Submit)
            .map(|e| self.tree.nodes[self.tree.edges[e].to].observation.clone())
            .collect()
    }

    /// The owned input of a decision at `node`.
    fn decision_at(&self, node: usize) -> Decision {
        let n = &self.tree.nodes[node];
        self.sh.decision(
            &n.observation,
            &n.candidates,
            &self.history(node),
            &self.trail(node),
        )
    }

    /// One sample at `node` from the coordinator's generator.
    async fn sample_one(&mut self, node: usize) -> Result<Choice, PolicyError> {
        let d = self.decision_at(node);
        let mut v = self.sh.sample(d, 1, &mut self.rng).await?;
        Ok(v.remove(0))
    }

    /// Queue a job taking `choice` (standing for `count` samples) at `node`,
    /// if the budget pays for it. Returns whether it was queued.
    fn dispatch(
        &mut self,
        node: usize,
        snapshot: &AnySnapshot,
        choice: Choice,
        count: u32,
    ) -> bool {
        let cost = if choice.action == AgentAction::Submit {
            1
        } else {
            2
        };
        if !self.sh.take(cost) {
            return false;
        }
        self.jobs += 1;
        let history = self.history(node);
        self.queue.push_back(Job {
            start: node,
            snapshot: snapshot.clone(),
            history,
            trail: self.trail(node),
            first: choice,
            count,
            seed: self.seed ^ self.jobs.wrapping_mul(0x2545_f491_4f6c_dd1d),
        });
        true
    }

    /// Sample `width` choices at `node` (starting with `pending`), merge
    /// identical ones (unless `merge` is off), and dispatch them.
    async fn expand(
        &mut self,
        node: usize,
        width: usize,
        pending: Option<Choice>,
        merge: bool,
    ) -> Result<(), PolicyError> {
        let want = width.max(1) - usize::from(pending.is_some());
        let mut samples: Vec<Choice> = pending.into_iter().collect();
        if want > 0 {
            let d = self.decision_at(node);
            samples.extend(self.sh.sample(d, want, &mut self.rng).await?);
        }
        self.expand_with(node, samples, merge);
        Ok(())
    }

    /// Merge identical `samples` at `node` (unless `merge` is off) into
    /// edges with counts, and dispatch one job per distinct action.
    fn expand_with(&mut self, node: usize, samples: Vec<Choice>, merge: bool) {
        let snapshot = self.snapshot_of(node);
        let mut merged: Vec<(Choice, u32)> = Vec::new();
        for c in samples {
            match merged
                .iter_mut()
                .find(|(s, _)| merge && s.action == c.action)
            {
                Some((_, n)) => {
                    *n += 1;
                    self.tree.stats.merged += 1;
                }
                None => merged.push((c, 1)),
            }
        }
        let mut any = false;
        for (c, n) in merged {
            any |= self.dispatch(node, &snapshot, c, n);
        }
        if !any && self.tree.nodes[node].edges.is_empty() && self.sh.take(1) {
            // Nothing could be paid for: grade the node as it stands.
            let verdict = self.sh.verify(&self.history(node), &snapshot);
            self.tree.nodes[node].leaf = Some(Leaf {
                verdict,
                truncated: true,
            });
        }
    }

    fn snapshot_of(&self, node: usize) -> AnySnapshot {
        self.snapshots[node].clone()
    }

    /// Add a finished path to the tree; returns the branch node it ended
    /// at and its pending choice (if the path drew one), if any.
    fn integrate(&mut self, seg: Segment) -> Option<(usize, Option<Choice>)> {
        let mut at = seg.start;
        for s in seg.steps {
            let edge = self.tree.edges.len();
            let depth = self.tree.nodes[at].depth + usize::from(s.origin == Origin::Step);
            let to = self.add_node(
                Some(edge),
                depth,
                &s.snapshot,
                s.observation,
                s.candidates,
                s.origin,
            );
            self.tree.edges.push(Edge {
                id: edge,
                from: at,
                to,
                index: s.choice.index,
                log_prob: s.choice.log_prob,
                target_log_prob: s.choice.target_log_prob,
                entropy: s.choice.entropy,
                policy_version: s.choice.version,
                tokens: s.choice.tokens,
                generation: s.choice.generation,
                action: s.choice.action,
                count: s.count,
                exit: s.exit,
                duration_us: s.duration_us,
                reward: 0.0,
            });
            self.tree.nodes[at].edges.push(edge);
            at = to;
        }
        match seg.end {
            SegEnd::Leaf(verdict, truncated) => {
                self.tree.nodes[at].leaf = Some(Leaf {
                    verdict: *verdict,
                    truncated,
                });
                None
            }
            SegEnd::Branch(choice) => Some((at, Some(*choice))),
            SegEnd::BranchAt => Some((at, None)),
            SegEnd::Fault(message) => {
                self.tree.stats.faults += 1;
                self.tree.nodes[at].fault = Some(message);
                None
            }
        }
    }
}

/// What a driver task finished: a path, or the samples of a branch point an
/// async policy was asked for while the paths went on.
enum Done {
    Path(Segment),
    Expansion {
        node: usize,
        pending: Option<Choice>,
        samples: Result<Vec<Choice>, PolicyError>,
    },
}

/// Grow one tree for `env` under a synchronous `policy`.
///
/// # Errors
/// The environment cannot be reset, the policy cannot act at the root, the
/// budget is too small, or a worker panicked.
pub async fn run_tree(
    env: Arc<dyn Environment>,
    policy: Arc<dyn Policy>,
    cfg: &DriverConfig,
    progress: Arc<Progress>,
) -> Result<RolloutTree, DriverError> {
    run_tree_with(env, AnyPolicy::Sync(policy), cfg, progress).await
}

/// Grow one tree for `env` under either kind of policy. With an async
/// policy (an LLM behind a server) every decision is awaited without a
/// thread, a branch point's siblings come from one request with `n =
/// width`, and those requests run while other paths take env steps.
///
/// # Errors
/// The environment cannot be reset, the policy cannot act at the root, the
/// budget is too small, or a worker panicked.
pub async fn run_tree_with(
    env: Arc<dyn Environment>,
    policy: AnyPolicy,
    cfg: &DriverConfig,
    progress: Arc<Progress>,
) -> Result<RolloutTree, DriverError> {
    if cfg.budget < 2 {
        return Err(DriverError::BudgetTooSmall(cfg.budget));
    }
    let started = Instant::now();
    let reset_env = Arc::clone(&env);
    let (root, obs) = tokio::task::spawn_blocking(move || reset_env.reset())
        .await
        .map_err(|e| DriverError::Worker(e.to_string()))??;
    let sh = Arc::new(Shared {
        reference: env.reference_solution(),
        max_steps: env.limits().max_steps,
        env: Arc::clone(&env),
        policy: policy.clone(),
        strategy: cfg.strategy,
        remaining: AtomicU64::new(cfg.budget),
        actions: AtomicU64::new(0),
        verifier_runs: AtomicU64::new(0),
        forks: AtomicU64::new(0),
        snapshots: AtomicU64::new(0),
        fork_us: AtomicU64::new(0),
        snapshot_us: AtomicU64::new(0),
        action_us: AtomicU64::new(0),
        verify_us: AtomicU64::new(0),
        policy_us: AtomicU64::new(0),
        progress,
        root: root.clone(),
    });
    let mut co = Coordinator {
        tree: RolloutTree {
            task: env.id().to_owned(),
            policy: policy.name(),
            policy_info: policy.describe(),
            strategy: cfg.strategy.to_string(),
            seed: cfg.seed,
            budget: Budget {
                limit: cfg.budget,
                ..Budget::default()
            },
            nodes: Vec::new(),
            edges: Vec::new(),
            stats: TreeStats::default(),
        },
        sh: Arc::clone(&sh),
        snapshots: Vec::new(),
        queue: VecDeque::new(),
        jobs: 0,
        seed: cfg.seed,
        rng: Rng::derive(cfg.seed, u64::MAX),
    };
    let candidates = sh.candidates(&obs);
    co.add_node(None, 0, &root, obs, candidates, Origin::Root);
    match cfg.strategy {
        Strategy::Uniform { width, .. } => co.expand(0, width, None, true).await?,
        Strategy::Entropy { threshold, width } => {
            let first = co.sample_one(0).await?;
            let w = if first.entropy > threshold { width } else { 1 };
            co.expand(0, w, Some(first), true).await?;
        }
        // Unbranched episodes start lazily, one per free worker (see `next_job`).
        Strategy::Uncertainty { .. }
        | Strategy::Independent { .. }
        | Strategy::Vine { .. }
        | Strategy::Sample { .. } => {}
    }
    let workers = cfg.workers.max(1);
    let width = match cfg.strategy {
        Strategy::Uniform { width, .. } | Strategy::Entropy { width, .. } => width,
        _ => 1,
    };
    let mut running: tokio::task::JoinSet<Done> = tokio::task::JoinSet::new();
    let mut paths = 0usize;
    let mut lazy = Lazy::default();
    loop {
        while paths < workers {
            let job = match co.queue.pop_front() {
                Some(job) => job,
                None => {
                    if !co.next_job(cfg.strategy, &mut lazy, workers).await? {
                        break;
                    }
                    continue;
                }
            };
            paths += 1;
            let sh = Arc::clone(&sh);
            running.spawn(async move { Done::Path(run_job(sh, job).await) });
        }
        if running.is_empty() {
            break;
        }
        let done = match running.join_next().await {
            Some(Ok(done)) => done,
            Some(Err(e)) => return Err(DriverError::Worker(e.to_string())),
            None => continue,
        };
        match done {
            Done::Path(seg) => {
                paths -= 1;
                let Some((node, pending)) = co.integrate(seg) else {
                    continue;
                };
                match &sh.policy {
                    AnyPolicy::Sync(_) => co.expand(node, width, pending, true).await?,
                    AnyPolicy::Async(p) => {
                        // The branch point's samples in one request, while
                        // the other paths go on.
                        let want = width.max(1) - usize::from(pending.is_some());
                        let d = co.decision_at(node);
                        let seed = Rng::derive(cfg.seed, node as u64).next_u64();
                        let (p, sh) = (Arc::clone(p), Arc::clone(&sh));
                        running.spawn(async move {
                            let t = Instant::now();
                            let samples = checked(p.choose_n(d, want, seed).await, want, &p.name());
                            sh.policy_us.fetch_add(micros(t), Ordering::Relaxed);
                            Done::Expansion {
                                node,
                                pending,
                                samples,
                            }
                        });
                    }
                }
            }
            Done::Expansion {
                node,
                pending,
                samples,
            } => {
                let mut all: Vec<Choice> = pending.into_iter().collect();
                match samples {
                    Ok(s) => all.extend(s),
                    Err(e) => {
                        // The model failed here: the node is a fault (its
                        // path ends), not the whole tree.
                        co.tree.stats.faults += 1;
                        co.tree.nodes[node].fault = Some(e.to_string());
                        sh.progress.faults.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                }
                co.expand_with(node, all, true);
            }
        }
    }
    let mut tree = co.tree;
    tree.budget.actions = sh.actions.load(Ordering::SeqCst);
    tree.budget.verifier_runs = sh.verifier_runs.load(Ordering::SeqCst);
    let secs = |a: &AtomicU64| a.load(Ordering::SeqCst) as f64 / 1e6;
    tree.stats.wall_s = started.elapsed().as_secs_f64();
    tree.stats.forks = sh.forks.load(Ordering::SeqCst);
    tree.stats.snapshots = sh.snapshots.load(Ordering::SeqCst);
    tree.stats.fork_s = secs(&sh.fork_us);
    tree.stats.snapshot_s = secs(&sh.snapshot_us);
    tree.stats.action_s = secs(&sh.action_us);
    tree.stats.verify_s = secs(&sh.verify_us);
    tree.stats.policy_s = secs(&sh.policy_us);
    Ok(tree)
}

/// State of the strategies' lazy job generators.
#[derive(Debug, Default)]
struct Lazy {
    /// Unbranched episodes started (independent, uncertainty's first phase).
    started: usize,
    /// Nodes where no new action could be sampled (uncertainty).
    exhausted: Vec<bool>,
    /// Consecutive walks that found nothing new (uniform, entropy).
    idle_walks: usize,
    /// Continuations dispatched so far (vine).
    continuations: usize,
}

/// How a walk through the tree ended.
enum Walk {
    /// It forked a new path (queued).
    Queued,
    /// It ended on a known leaf.
    Known,
    /// It reached a node whose paths are still running.
    Busy,
}

/// Walks that may end on known leaves in a row before the tree counts as explored.
const MAX_IDLE_WALKS: usize = 64;

impl Coordinator {
    /// Queue the strategy's next job when nothing else is queued; returns
    /// whether one was queued.
    async fn next_job(
        &mut self,
        strategy: Strategy,
        lazy: &mut Lazy,
        workers: usize,
    ) -> Result<bool, PolicyError> {
        if self.sh.remaining.load(Ordering::SeqCst) < 2 {
            return Ok(false);
        }
        match strategy {
            Strategy::Independent { episodes } => self.fresh_episode(lazy, episodes).await,
            Strategy::Vine { k } => {
                if lazy.started == 0 {
                    return self.fresh_episode(lazy, 1).await;
                }
                self.vine_continuation(&mut lazy.continuations, k).await
            }
            Strategy::Uncertainty { initial } => {
                if lazy.started < initial {
                    return self.fresh_episode(lazy, initial).await;
                }
                self.uncertainty_branch(&mut lazy.exhausted, workers).await
            }
            Strategy::Sample { episodes } => {
                if lazy.started == 0 {
                    return self.fresh_episode(lazy, episodes).await;
                }
                while lazy.started < episodes {
                    match self.walk().await? {
                        Walk::Queued => {
                            lazy.started += 1;
                            return Ok(true);
                        }
                        Walk::Known => lazy.started += 1,
                        Walk::Busy => return Ok(false),
                    }
                }
                Ok(false)
            }
            Strategy::Uniform { .. } | Strategy::Entropy { .. } => {
                while lazy.idle_walks < MAX_IDLE_WALKS {
                    match self.walk().await? {
                        Walk::Queued => {
                            lazy.idle_walks = 0;
                            return Ok(true);
                        }
                        Walk::Known => lazy.idle_walks += 1,
                        // Wait for the running paths before sampling through them.
                        Walk::Busy => return Ok(false),
                    }
                }
                Ok(false)
            }
        }
    }

    /// Start one more independent episode at the root (no merging).
    async fn fresh_episode(&mut self, lazy: &mut Lazy, limit: usize) -> Result<bool, PolicyError> {
        if lazy.started >= limit {
            return Ok(false);
        }
        let c = self.sample_one(0).await?;
        lazy.started += 1;
        let snapshot = self.snapshot_of(0);
        Ok(self.dispatch(0, &snapshot, c, 1))
    }

    /// Sample one more episode through the tree: follow (and count) existing
    /// edges while the sampled action matches one, and fork a new path at the
    /// first node where it does not. A walk that ends on a known leaf is a
    /// sampled episode too: its edges' counts go up, so that every edge's
    /// count is the number of on-policy episodes through it and V̂ stays an
    /// on-policy mean (a walk that only counted when it found something new
    /// would weight the tree towards its unexplored parts).
    async fn walk(&mut self) -> Result<Walk, PolicyError> {
        let mut node = 0;
        let mut path: Vec<usize> = Vec::new();
        loop {
            let n = &self.tree.nodes[node];
            if n.leaf.is_some() || n.fault.is_some() || n.depth >= self.sh.max_steps {
                if n.leaf.is_some() {
                    for e in path {
                        self.tree.edges[e].count += 1;
                    }
                }
                return Ok(Walk::Known);
            }
            let c = self.sample_one(node).await?;
            let n = &self.tree.nodes[node];
            match n
                .edges
                .iter()
                .copied()
                .find(|&e| self.tree.edges[e].action == c.action)
            {
                Some(e) => {
                    path.push(e);
                    node = self.tree.edges[e].to;
                }
                None if n.edges.is_empty() => return Ok(Walk::Busy),
                None => {
                    let snapshot = self.snapshot_of(node);
                    if !self.dispatch(node, &snapshot, c, 1) {
                        return Ok(Walk::Known);
                    }
                    // The walk sampled these edges once more from their states.
                    for e in path {
                        self.tree.edges[e].count += 1;
                    }
                    return Ok(Walk::Queued);
                }
            }
        }
    }

    /// The nodes of the main path (the first episode: first edges from the
    /// root) that are not leaves; empty while that episode is still running.
    fn main_path(&self) -> Vec<usize> {
        let mut out = Vec::new();
        let mut node = 0;
        loop {
            let n = &self.tree.nodes[node];
            if n.leaf.is_some() || n.fault.is_some() {
                return out;
            }
            let Some(&e) = n.edges.first() else {
                // Still running (or nothing could be paid for).
                return Vec::new();
            };
            if n.depth < self.sh.max_steps {
                out.push(node);
            }
            node = self.tree.edges[e].to;
        }
    }

    /// Queue the next continuation of a vine: round `r` samples one fresh
    /// action at every state of the main path, in order, then round `r + 1`.
    async fn vine_continuation(&mut self, done: &mut usize, k: usize) -> Result<bool, PolicyError> {
        let states = self.main_path();
        if states.is_empty() || *done >= states.len() * k.max(1) {
            return Ok(false);
        }
        let node = states[*done % states.len()];
        *done += 1;
        let c = self.sample_one(node).await?;
        let snapshot = self.snapshot_of(node);
        Ok(self.dispatch(node, &snapshot, c, 1))
    }

    /// Queue a new branch at the node with the highest p̂(1−p̂); returns
    /// whether anything was queued.
    async fn uncertainty_branch(
        &mut self,
        exhausted: &mut Vec<bool>,
        workers: usize,
    ) -> Result<bool, PolicyError> {
        let _ = workers;
        exhausted.resize(self.tree.nodes.len(), false);
        let Some((ct, map)) = self.tree.credit_tree() else {
            return Ok(false);
        };
        let Ok(credit) = estimate(&ct, &CreditConfig::default()) else {
            return Ok(false);
        };
        let max_steps = self.sh.max_steps;
        let mut ranked: Vec<(f64, usize)> = map
            .iter()
            .enumerate()
            .filter(|(_, n)| {
                let node = &self.tree.nodes[**n];
                !exhausted[**n]
                    && node.leaf.is_none()
                    && node.depth < max_steps
                    && !node.edges.is_empty()
            })
            .map(|(ci, n)| (credit.nodes[ci].p_var, *n))
            .collect();
        ranked.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then(self.tree.nodes[a.1].depth.cmp(&self.tree.nodes[b.1].depth))
        });
        for (_, node) in ranked {
            for _ in 0..6 {
                let c = self.sample_one(node).await?;
                let known = self.tree.nodes[node]
                    .edges
                    .iter()
                    .any(|&e| self.tree.edges[e].action == c.action);
                if !known {
                    let snapshot = self.snapshot_of(node);
                    return Ok(self.dispatch(node, &snapshot, c, 1));
                }
            }
            exhausted[node] = true;
        }
        Ok(false)
    }
}
