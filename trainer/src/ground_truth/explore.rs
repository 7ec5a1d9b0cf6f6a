//! Exploration: every state a native task can reach from `reset()` under its
//! candidate actions, as an [`Mdp`], with the memoised transitions and
//! verdicts that built it.
//!
//! (~620 lines: exploration and its memo of transitions are one algorithm.)
//!
//! The candidates at a state are exactly what the rollout driver offers a
//! discrete policy: the environment's candidates for the observation, then
//! `Submit`. An episode ends with `Submit` (the state is graded) or when the
//! step limit is reached (the state after the last allowed action is graded).
//!
//! **Content key.** A state's workspace is the merge of its snapshot's layer
//! chain; its content key is the blake3 of the merged entries (paths, kinds,
//! modes, owners, content hashes) and the session state (cwd, environment),
//! with by-products left out: `__pycache__` and `*.pyc`, the files replay
//! digests leave out (`.git/index`), and the task's `paths.byproducts`.
//! Transitions are memoised by (content key, action) and computed once, by
//! running `Environment::step` in a fork of one snapshot with that content
//! (Arbor's replay determinism is the assumption; [`super::validate`] checks
//! it against the real driver). The observation's `step` field is the only
//! part of an observation that depends on the step index; it is set on reuse.
//!
//! **Observation key.** Arbor does not control output that prints durations
//! (`arbor replay --explain`: unittest's `Ran 3 tests in 0.004s`, pytest's
//! `in 0.12s`), so the observation text the policy reads and DP states are
//! keyed by has every `in <decimal>s` masked to `in <t>s`
//! ([`observation_key`]); nothing else is masked (live validation reports
//! any other difference).
//!
//! **DP state.** (content key, the observation key, step index, tainted),
//! where *tainted* records that an earlier action of the episode timed out
//! or hit the disk limit: the verifier's hard constraints read those from
//! the episode's steps (`AgentTimeout`, `AgentDiskLimit`), not from the
//! state. Verdicts are memoised by (content key, tainted). Assumed, not
//! modelled: the total-time limit (`TimeLimit`, a sum of wall-clock
//! durations) is never reached, and the verifier reads nothing else from
//! the path (the step limit cannot be exceeded: episodes stop at it).
//! **Caveat:** a task whose by-products are state the checks read (`.git` in
//! the git-ops tasks) merges states that differ; live validation reports it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use arbor_rollout::env::{AgentAction, EnvObservation, Environment, Episode, EpisodeStep};
use arbor_rollout::runtime::AnySnapshot;
use arbor_rollout::runtime::Runtime;
use arbor_rollout::runtime::digest::is_excluded;
use arbor_rollout::runtime::layer::merge_layers;
use arbor_rollout::runtime::store::object::{ExitStatus, Manifest, ObjectId, TreeEntry};
use serde::{Deserialize, Serialize};

use super::GroundTruthError;
use super::mdp::{Mdp, MdpState, Next, Transition};

/// The content key of a state: blake3 of its merged workspace (by-products
/// left out) and session state.
pub type ContentKey = ObjectId;

/// Whether a workspace path is one of the task's by-products.
pub type ByProducts = dyn Fn(&str) -> bool + Send + Sync;

/// The identity of a DP state: (content, [`observation_key`], step, tainted).
pub type StateKey = (ContentKey, String, usize, bool);

/// `text` with every duration `in <digits>.<digits>s` written `in <t>s`.
pub fn mask_durations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("in ") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
        let int = digits(tail);
        let frac = tail[int..].strip_prefix('.').map_or(0, digits);
        let end = int + 1 + frac;
        if int > 0 && frac > 0 && tail[end..].starts_with('s') {
            out.push_str("<t>");
            rest = &tail[end..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// The text of an observation as DP states are keyed by and the Markov
/// policy reads it: [`EnvObservation::text`] with durations masked.
pub fn observation_key(observation: &EnvObservation) -> String {
    mask_durations(&observation.text())
}

/// By-products of every task: Python's bytecode caches.
pub fn is_default_byproduct(path: &str) -> bool {
    path.split('/').any(|c| c == "__pycache__") || path.ends_with(".pyc")
}

/// The content key of the snapshot with `manifest`.
///
/// # Errors
/// The layers cannot be read or merged.
pub fn content_key(
    runtime: &Runtime,
    manifest: &Manifest,
    byproducts: &ByProducts,
) -> Result<ContentKey, String> {
    let view = merge_layers(runtime.store(), &manifest.layers).map_err(|e| e.to_string())?;
    let entries: Vec<&TreeEntry> = view
        .entries
        .values()
        .filter(|e| !is_excluded(&e.path) && !is_default_byproduct(&e.path) && !byproducts(&e.path))
        .collect();
    let bytes = serde_json::to_vec(&(entries, &manifest.session))
        .map_err(|e| format!("encode the merged view: {e}"))?;
    Ok(ObjectId::hash(&bytes))
}

/// A decision state found by exploration (index-aligned with [`Mdp::states`]).
#[derive(Clone, Debug)]
pub struct DpState {
    /// Its content key.
    pub content: ContentKey,
    /// What the policy sees here.
    pub observation: EnvObservation,
    /// Actions taken before it.
    pub step: usize,
    /// An earlier action timed out or hit the disk limit.
    pub tainted: bool,
    /// The candidates offered here (the environment's, then `Submit`).
    pub candidates: Arc<[AgentAction]>,
    /// The state and candidate it was first reached from (`None` at the root).
    pub parent: Option<(usize, usize)>,
}

/// A memoised transition.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedStep {
    /// The content key after the action.
    pub next: ContentKey,
    /// The observation after it (its `step` is that of the first run).
    pub observation: EnvObservation,
    /// The episode record (action, exit status, duration of the first run).
    pub record: EpisodeStep,
}

/// What exploring a task cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExploreCost {
    /// Actions executed.
    pub actions: u64,
    /// Verifier runs.
    pub verifier_runs: u64,
    /// Distinct content keys.
    pub content_states: usize,
    /// Memoised transitions.
    pub transitions: usize,
    /// DP states.
    pub dp_states: usize,
    /// Wall-clock seconds.
    pub wall_s: f64,
}

impl ExploreCost {
    /// Actions plus verifier runs (the driver's budget units).
    pub fn env_steps(&self) -> u64 {
        self.actions + self.verifier_runs
    }
}

/// Settings of [`explore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExploreConfig {
    /// Sandboxes running at once.
    pub workers: usize,
    /// Stop with an error past this many DP states.
    pub max_states: usize,
}

/// The result of [`explore`].
#[derive(Clone, Debug)]
pub struct Exploration {
    /// The task.
    pub task: String,
    /// Its step limit.
    pub max_steps: usize,
    /// The root snapshot.
    pub root: AnySnapshot,
    /// The DP states; state 0 is the root.
    pub states: Vec<DpState>,
    /// DP state by identity.
    pub index: HashMap<StateKey, usize>,
    /// The MDP (with a uniform policy until one is set).
    pub mdp: Mdp,
    /// (content key, action) → transition.
    pub transitions: HashMap<(ContentKey, AgentAction), CachedStep>,
    /// (content key, tainted) → the verdict's reward.
    pub verdicts: HashMap<(ContentKey, bool), f64>,
    /// What it cost.
    pub cost: ExploreCost,
    /// The environment's reference solution.
    pub reference: Option<Vec<AgentAction>>,
}

impl Exploration {
    /// The DP state with this identity, if exploration found it.
    pub fn state_of(&self, key: &StateKey) -> Option<usize> {
        self.index.get(key).copied()
    }
}

/// Where a candidate leads, before the verdicts are known.
#[derive(Clone, Copy, Debug)]
enum Pending {
    State(usize),
    /// Graded (content, tainted), first reached from (state, candidate taken
    /// there, if any).
    Verdict(ContentKey, bool, usize, Option<usize>),
}

fn is_taint(exit: ExitStatus) -> bool {
    matches!(exit, ExitStatus::Timeout | ExitStatus::DiskLimit)
}

/// Run `f` on every item with `workers` threads; results in item order.
fn parallel<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    f: &(dyn Fn(&T) -> R + Sync),
) -> Vec<Option<R>> {
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..workers.clamp(1, items.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else {
                        break;
                    };
                    let r = f(item);
                    if let Ok(mut slot) = slots[i].lock() {
                        *slot = Some(r);
                    }
                }
            });
        }
    });
    slots
        .into_iter()
        .map(|m| m.into_inner().ok().flatten())
        .collect()
}

struct Explorer<'a> {
    env: &'a dyn Environment,
    runtime: &'a Runtime,
    byproducts: &'a ByProducts,
    cfg: ExploreConfig,
    progress: &'a (dyn Fn(&ExploreCost) + Sync),
    started: Instant,
    root: AnySnapshot,
    snapshots: HashMap<ContentKey, AnySnapshot>,
    transitions: HashMap<(ContentKey, AgentAction), CachedStep>,
    verdicts: HashMap<(ContentKey, bool), f64>,
    states: Vec<DpState>,
    index: HashMap<StateKey, usize>,
    pending: Vec<Vec<Pending>>,
    candidate_lists: Vec<Arc<[AgentAction]>>,
    actions: AtomicU64,
    verifier_runs: AtomicU64,
}

/// Explore `env` from its root (see the module docs).
///
/// # Errors
/// The environment fails, the task is not native, a verdict is a runtime
/// fault, or there are more than `cfg.max_states` DP states.
pub fn explore(
    env: &dyn Environment,
    runtime: &Runtime,
    byproducts: &ByProducts,
    cfg: ExploreConfig,
    progress: &(dyn Fn(&ExploreCost) + Sync),
) -> Result<Exploration, GroundTruthError> {
    let task = env.id().to_owned();
    let err = |message: String| GroundTruthError::Task {
        task: task.clone(),
        message,
    };
    let max_steps = env.limits().max_steps;
    if max_steps == 0 {
        return Err(err("its step limit is 0: no episode takes an action".into()));
    }
    let started = Instant::now();
    let (root, obs) = env.reset().map_err(|source| GroundTruthError::Env {
        task: task.clone(),
        source: Box::new(source),
    })?;
    let mut ex = Explorer {
        env,
        runtime,
        byproducts,
        cfg,
        progress,
        started,
        root: root.clone(),
        snapshots: HashMap::new(),
        transitions: HashMap::new(),
        verdicts: HashMap::new(),
        states: Vec::new(),
        index: HashMap::new(),
        pending: Vec::new(),
        candidate_lists: Vec::new(),
        actions: AtomicU64::new(0),
        verifier_runs: AtomicU64::new(0),
    };
    let root_key = ex.key_of(&root).map_err(&err)?;
    ex.snapshots.insert(root_key, root);
    ex.add_state(root_key, obs, 0, false, None);
    let mut level = vec![0];
    for t in 0..max_steps {
        ex.run_transitions(&level, t)?;
        level = ex.expand_level(&level, t, max_steps)?;
        if ex.states.len() > cfg.max_states {
            return Err(err(format!(
                "more than {} reachable states under its candidate actions (step {}): \
                 too large for exact ground truth (raise --max-states or choose smaller tasks)",
                cfg.max_states,
                t + 1
            )));
        }
        if level.is_empty() {
            break;
        }
    }
    ex.run_verdicts()?;
    ex.finish(task, max_steps)
}

impl Explorer<'_> {
    fn key_of(&self, snapshot: &AnySnapshot) -> Result<ContentKey, String> {
        let native = snapshot.native().ok_or_else(|| {
            "it is not a native task: exact ground truth needs native snapshots".to_owned()
        })?;
        content_key(self.runtime, native.manifest(), self.byproducts)
    }

    fn cost(&self) -> ExploreCost {
        ExploreCost {
            actions: self.actions.load(Ordering::Relaxed),
            verifier_runs: self.verifier_runs.load(Ordering::Relaxed),
            content_states: self.snapshots.len(),
            transitions: self.transitions.len(),
            dp_states: self.states.len(),
            wall_s: self.started.elapsed().as_secs_f64(),
        }
    }

    fn candidates(&mut self, obs: &EnvObservation) -> Arc<[AgentAction]> {
        let mut c = self.env.candidates(obs);
        c.push(AgentAction::Submit);
        if let Some(known) = self.candidate_lists.iter().find(|k| ***k == *c) {
            return Arc::clone(known);
        }
        let list: Arc<[AgentAction]> = c.into();
        self.candidate_lists.push(Arc::clone(&list));
        list
    }

    fn add_state(
        &mut self,
        content: ContentKey,
        observation: EnvObservation,
        step: usize,
        tainted: bool,
        parent: Option<(usize, usize)>,
    ) -> usize {
        let id = self.states.len();
        let candidates = self.candidates(&observation);
        self.index
            .insert((content, observation_key(&observation), step, tainted), id);
        self.states.push(DpState {
            content,
            observation,
            step,
            tainted,
            candidates,
            parent,
        });
        self.pending.push(Vec::new());
        id
    }

    /// Compute the transitions the states of `level` (at step `t`) need.
    fn run_transitions(&mut self, level: &[usize], t: usize) -> Result<(), GroundTruthError> {
        let mut todo: Vec<(ContentKey, AgentAction)> = Vec::new();
        let mut seen: HashSet<(ContentKey, AgentAction)> = HashSet::new();
        for &s in level {
            let st = &self.states[s];
            for a in st.candidates.iter().filter(|a| **a != AgentAction::Submit) {
                let k = (st.content, a.clone());
                if !self.transitions.contains_key(&k) && seen.insert(k.clone()) {
                    todo.push(k);
                }
            }
        }
        let jobs: Vec<(AnySnapshot, AgentAction)> = todo
            .iter()
            .filter_map(|(c, a)| self.snapshots.get(c).map(|s| (s.clone(), a.clone())))
            .collect();
        let this = &*self;
        let results = parallel(&jobs, self.cfg.workers, &|(snap, action)| {
            let r = this.step(snap, t, action);
            (this.progress)(&this.cost());
            r
        });
        for ((content, action), r) in todo.into_iter().zip(results) {
            let (step, snapshot) = r
                .ok_or_else(|| self.fail("a worker stopped without a result".into()))?
                .map_err(|e| self.fail(format!("{action} at step {t}: {e}")))?;
            self.snapshots.entry(step.next).or_insert(snapshot);
            self.transitions.insert((content, action), step);
        }
        Ok(())
    }

    fn fail(&self, message: String) -> GroundTruthError {
        GroundTruthError::Task {
            task: self.env.id().to_owned(),
            message,
        }
    }

    /// Fork `snapshot`, take `action` as step `t`, snapshot the result.
    fn step(
        &self,
        snapshot: &AnySnapshot,
        t: usize,
        action: &AgentAction,
    ) -> Result<(CachedStep, AnySnapshot), String> {
        let mut sb = snapshot.open().map_err(|e| format!("fork: {e}"))?;
        let result = self
            .env
            .step(&mut sb, t, action)
            .map_err(|e| e.to_string())?;
        self.actions.fetch_add(1, Ordering::Relaxed);
        let next = sb.snapshot().map_err(|e| format!("snapshot: {e}"))?;
        drop(sb);
        let key = self.key_of(&next)?;
        Ok((
            CachedStep {
                next: key,
                observation: result.observation,
                record: result.record,
            },
            next,
        ))
    }

    /// Resolve every candidate of the states of `level` (at step `t`);
    /// returns the new states one step later.
    fn expand_level(
        &mut self,
        level: &[usize],
        t: usize,
        max_steps: usize,
    ) -> Result<Vec<usize>, GroundTruthError> {
        let mut next_level = Vec::new();
        for &s in level {
            let (content, tainted) = (self.states[s].content, self.states[s].tainted);
            let candidates = Arc::clone(&self.states[s].candidates);
            let mut row = Vec::with_capacity(candidates.len());
            for (i, a) in candidates.iter().enumerate() {
                if *a == AgentAction::Submit {
                    row.push(Pending::Verdict(content, tainted, s, None));
                    continue;
                }
                let cached = self
                    .transitions
                    .get(&(content, a.clone()))
                    .cloned()
                    .ok_or_else(|| self.fail(format!("no transition was computed for {a}")))?;
                let tainted = tainted || is_taint(cached.record.exit);
                if t + 1 >= max_steps {
                    row.push(Pending::Verdict(cached.next, tainted, s, Some(i)));
                    continue;
                }
                let mut obs = cached.observation;
                obs.step = t + 1;
                let key = (cached.next, observation_key(&obs), t + 1, tainted);
                let j = match self.index.get(&key) {
                    Some(&j) => j,
                    None => {
                        let j = self.add_state(cached.next, obs, t + 1, tainted, Some((s, i)));
                        next_level.push(j);
                        j
                    }
                };
                row.push(Pending::State(j));
            }
            self.pending[s] = row;
        }
        Ok(next_level)
    }

    /// The episode steps from the root to state `s` (then candidate `then`).
    fn history(&self, s: usize, then: Option<usize>) -> Vec<EpisodeStep> {
        let mut edges: Vec<(usize, usize)> = then.map(|i| (s, i)).into_iter().collect();
        let mut cur = s;
        while let Some((p, i)) = self.states[cur].parent {
            edges.push((p, i));
            cur = p;
        }
        edges.reverse();
        edges
            .iter()
            .filter_map(|&(p, i)| {
                let st = &self.states[p];
                let key = (st.content, st.candidates[i].clone());
                self.transitions.get(&key).map(|c| c.record.clone())
            })
            .collect()
    }

    /// Grade every (content, tainted) an episode can end in.
    fn run_verdicts(&mut self) -> Result<(), GroundTruthError> {
        let mut needed: BTreeMap<(ContentKey, bool), (usize, Option<usize>)> = BTreeMap::new();
        for row in &self.pending {
            for p in row {
                if let Pending::Verdict(c, tainted, s, then) = *p {
                    needed.entry((c, tainted)).or_insert((s, then));
                }
            }
        }
        for (s, st) in self.states.iter().enumerate() {
            needed.entry((st.content, st.tainted)).or_insert((s, None));
        }
        let jobs: Vec<((ContentKey, bool), Episode)> = needed
            .iter()
            .filter(|(k, _)| !self.verdicts.contains_key(k))
            .filter_map(|(&(c, tainted), &(s, then))| {
                Some((
                    (c, tainted),
                    Episode {
                        task: self.env.id().to_owned(),
                        root: self.root.clone(),
                        steps: self.history(s, then),
                        last: self.snapshots.get(&c)?.clone(),
                    },
                ))
            })
            .collect();
        let this = &*self;
        let results = parallel(&jobs, self.cfg.workers, &|(_, episode)| {
            let v = this.env.verify(episode);
            this.verifier_runs.fetch_add(1, Ordering::Relaxed);
            (this.progress)(&this.cost());
            v
        });
        for ((key, episode), v) in jobs.iter().zip(results) {
            let v =
                v.ok_or_else(|| self.fail("a verifier worker stopped without a result".into()))?;
            let reward = v.reward.ok_or_else(|| {
                self.fail(format!(
                    "grading the state after {} action(s) failed: {}",
                    episode.steps.len(),
                    v.summary()
                ))
            })?;
            self.verdicts.insert(*key, reward);
        }
        Ok(())
    }

    fn finish(self, task: String, max_steps: usize) -> Result<Exploration, GroundTruthError> {
        let verdict = |c: ContentKey, tainted: bool| {
            self.verdicts
                .get(&(c, tainted))
                .copied()
                .ok_or_else(|| self.fail("a state was never graded".into()))
        };
        let mut states = Vec::with_capacity(self.states.len());
        for (s, st) in self.states.iter().enumerate() {
            let actions = self.pending[s]
                .iter()
                .zip(st.candidates.iter())
                .map(|(p, a)| {
                    let next = match *p {
                        Pending::State(j) => Next::State(j),
                        Pending::Verdict(c, tainted, _, _) => Next::End(verdict(c, tainted)?),
                    };
                    Ok(Transition {
                        next,
                        executes: *a != AgentAction::Submit,
                    })
                })
                .collect::<Result<Vec<_>, GroundTruthError>>()?;
            let k = actions.len().max(1);
            states.push(MdpState {
                step: st.step,
                actions,
                stop_reward: verdict(st.content, st.tainted)?,
                policy: vec![1.0 / k as f64; k],
            });
        }
        let cost = self.cost();
        (self.progress)(&cost);
        Ok(Exploration {
            task,
            max_steps,
            root: self.root,
            reference: self.env.reference_solution(),
            states: self.states,
            index: self.index,
            mdp: Mdp { states },
            transitions: self.transitions,
            verdicts: self.verdicts,
            cost,
        })
    }
}
