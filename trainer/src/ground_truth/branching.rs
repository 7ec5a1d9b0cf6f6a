//! Branching trees grown on an [`Mdp`] the way the rollout driver grows them
//! (`arbor_rollout::driver`, with one worker: jobs run in the order they were
//! dispatched), and their credit.
//!
//! Mirrored from the driver: a job reserves one action and one verification
//! (one verification for `Submit`) when it is dispatched and one unit per
//! further action; a path stops at a branch point (uniform: depth a multiple
//! of `every`; entropy: the policy's entropy above the threshold), where
//! `width` samples are drawn (the pending one first), identical ones merged
//! into one edge with a count, and one job dispatched per distinct action.
//! When the queue is empty, uniform and entropy trees sample further
//! episodes through the tree (following and counting existing edges, forking
//! a new path where the sampled action is new) until 64 walks in a row find
//! nothing new; uncertainty trees run `initial` episodes and then add one
//! branch at a time at the node with the largest `p̂(1−p̂)` (up to 6 samples
//! to find a new action there). Differences: one sequential worker, and one
//! random stream for the whole tree.
//!
//! Credit ([`arbor_rollout::credit::estimate`], count-weighted and recursive:
//! `Q̂(e) = V̂(child)`, `V̂(s) = Σ n·Q̂ / Σ n`): at a branch point (a node with
//! two or more credited edges) `Â = Q̂ − V̂`; an edge inside a single-child
//! chain gets the SPO-style segment advantage `V̂(next branch point or leaf)
//! − V̂(previous branch point or root)`. Truncated leaves are left out.

use std::collections::VecDeque;

use arbor_rollout::credit::{Credit, CreditConfig, CreditEdge, CreditNode, CreditTree, estimate};
use arbor_rollout::policy::{Rng, entropy};

use super::estimators::Estimates;
use super::mdp::{Budget, Mdp, Next, PathEnd};

/// Where a tree branches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// `width` ways at the root and every `every` steps.
    Uniform {
        /// Samples per branch point.
        width: usize,
        /// Steps between branch points.
        every: usize,
    },
    /// `width` ways where the policy's entropy exceeds `threshold`.
    Entropy {
        /// Threshold in nats.
        threshold: f64,
        /// Samples per branch point.
        width: usize,
    },
    /// `initial` episodes, then the most uncertain node.
    Uncertainty {
        /// Unbranched episodes first.
        initial: usize,
    },
}

/// Walks in a row that may end on known leaves before the tree counts as explored.
const MAX_IDLE_WALKS: usize = 64;
/// Samples tried at the most uncertain node to find a new action.
const UNCERTAINTY_TRIES: usize = 6;

#[derive(Clone, Debug)]
struct Node {
    /// The decision state (`None` for a terminal node).
    state: Option<usize>,
    depth: usize,
    parent: Option<usize>,
    edges: Vec<usize>,
    /// `(reward, truncated)` on leaves.
    leaf: Option<(f64, bool)>,
}

#[derive(Clone, Copy, Debug)]
struct Edge {
    to: usize,
    action: usize,
    count: u32,
}

struct Job {
    node: usize,
    action: usize,
    count: u32,
}

struct Grower<'a> {
    mdp: &'a Mdp,
    rule: Rule,
    nodes: Vec<Node>,
    edges: Vec<Edge>,
    queue: VecDeque<Job>,
    budget: &'a mut Budget,
    rng: &'a mut Rng,
}

/// Grow one tree under `rule` with `budget` and record its credit in `out`.
pub fn grow(mdp: &Mdp, rule: Rule, budget: &mut Budget, rng: &mut Rng, out: &mut Estimates) {
    let mut g = Grower {
        mdp,
        rule,
        nodes: vec![Node {
            state: Some(0),
            depth: 0,
            parent: None,
            edges: Vec::new(),
            leaf: None,
        }],
        edges: Vec::new(),
        queue: VecDeque::new(),
        budget,
        rng,
    };
    g.start();
    let mut idle = 0;
    let mut started = 0;
    let mut exhausted: Vec<bool> = Vec::new();
    loop {
        if let Some(job) = g.queue.pop_front() {
            if let Some((node, pending)) = g.run(job) {
                g.expand(node, g.width(), Some(pending));
            }
            continue;
        }
        if g.budget.remaining() < 2 {
            break;
        }
        let queued = match rule {
            Rule::Uniform { .. } | Rule::Entropy { .. } => g.walks(&mut idle),
            Rule::Uncertainty { initial } if started < initial => {
                started += 1;
                let c = g.mdp.sample(0, g.rng);
                g.dispatch(0, c, 1)
            }
            Rule::Uncertainty { .. } => g.uncertainty_branch(&mut exhausted),
        };
        if !queued {
            break;
        }
    }
    g.record(out);
}

/// Whether a path that reached `state` stops there to branch.
fn is_branch_point(mdp: &Mdp, rule: Rule, state: usize) -> bool {
    let st = &mdp.states[state];
    match rule {
        Rule::Uniform { every, .. } => st.step.is_multiple_of(every.max(1)),
        Rule::Entropy { threshold, .. } => entropy(&st.policy) > threshold,
        Rule::Uncertainty { .. } => false,
    }
}

impl Grower<'_> {
    fn width(&self) -> usize {
        match self.rule {
            Rule::Uniform { width, .. } | Rule::Entropy { width, .. } => width,
            Rule::Uncertainty { .. } => 1,
        }
    }

    /// The root's expansion (uniform: `width` ways; entropy: `width` ways
    /// when the root's entropy is above the threshold, else one).
    fn start(&mut self) {
        match self.rule {
            Rule::Uniform { width, .. } => self.expand(0, width, None),
            Rule::Entropy { width, .. } => {
                let w = if is_branch_point(self.mdp, self.rule, 0) {
                    width
                } else {
                    1
                };
                self.expand(0, w, None);
            }
            Rule::Uncertainty { .. } => {}
        }
    }

    fn dispatch(&mut self, node: usize, action: usize, count: u32) -> bool {
        let Some(state) = self.nodes[node].state else {
            return false;
        };
        if !self.budget.take(self.mdp.reservation(state, action)) {
            return false;
        }
        self.queue.push_back(Job {
            node,
            action,
            count,
        });
        true
    }

    fn expand(&mut self, node: usize, width: usize, pending: Option<usize>) {
        let Some(state) = self.nodes[node].state else {
            return;
        };
        let mut pending = pending;
        let mut samples: Vec<(usize, u32)> = Vec::new();
        for _ in 0..width.max(1) {
            let c = pending
                .take()
                .unwrap_or_else(|| self.mdp.sample(state, self.rng));
            match samples.iter_mut().find(|(a, _)| *a == c) {
                Some((_, n)) => *n += 1,
                None => samples.push((c, 1)),
            }
        }
        let mut any = false;
        for (a, n) in samples {
            any |= self.dispatch(node, a, n);
        }
        if !any && self.nodes[node].edges.is_empty() && self.budget.take(1) {
            self.nodes[node].leaf = Some((self.mdp.states[state].stop_reward, true));
        }
    }

    fn add_child(&mut self, from: usize, action: usize, count: u32, state: Option<usize>) -> usize {
        let to = self.nodes.len();
        self.nodes.push(Node {
            state,
            depth: self.nodes[from].depth + 1,
            parent: Some(from),
            edges: Vec::new(),
            leaf: None,
        });
        self.nodes[from].edges.push(self.edges.len());
        self.edges.push(Edge { to, action, count });
        to
    }

    /// Run a job; returns the branch node and its pending action, if it stopped at one.
    fn run(&mut self, job: Job) -> Option<(usize, usize)> {
        let start = self.nodes[job.node].state?;
        let (mdp, rule) = (self.mdp, self.rule);
        let branch = |s: usize, _a: usize| is_branch_point(mdp, rule, s);
        let path = mdp.run_path(start, job.action, self.budget, self.rng, &branch);
        let mut at = job.node;
        for (i, &(s, a)) in path.steps.iter().enumerate() {
            let next = match mdp.states[s].actions[a].next {
                Next::State(j) if mdp.states[s].actions[a].executes => Some(j),
                _ => None,
            };
            let count = if i == 0 { job.count } else { 1 };
            at = self.add_child(at, a, count, next);
        }
        match path.end {
            PathEnd::Leaf { reward, truncated } => {
                self.nodes[at].leaf = Some((reward, truncated));
                None
            }
            PathEnd::Branch { pending, .. } => Some((at, pending)),
        }
    }

    /// Sample episodes through the tree until one queues a new path (true)
    /// or `MAX_IDLE_WALKS` in a row end on known leaves (false).
    fn walks(&mut self, idle: &mut usize) -> bool {
        while *idle < MAX_IDLE_WALKS {
            match self.walk() {
                Some(true) => {
                    *idle = 0;
                    return true;
                }
                Some(false) => *idle += 1,
                None => return false,
            }
        }
        false
    }

    /// One walk: `Some(true)` queued a new path, `Some(false)` ended on a
    /// known leaf, `None` reached a node with nothing below it yet.
    fn walk(&mut self) -> Option<bool> {
        let mut node = 0;
        let mut path: Vec<usize> = Vec::new();
        loop {
            let n = &self.nodes[node];
            let Some(state) = n.state.filter(|_| n.leaf.is_none()) else {
                if n.leaf.is_some() {
                    for &e in &path {
                        self.edges[e].count += 1;
                    }
                }
                return Some(false);
            };
            let c = self.mdp.sample(state, self.rng);
            match n.edges.iter().copied().find(|&e| self.edges[e].action == c) {
                Some(e) => {
                    path.push(e);
                    node = self.edges[e].to;
                }
                None if n.edges.is_empty() => return None,
                None => {
                    if !self.dispatch(node, c, 1) {
                        return Some(false);
                    }
                    for &e in &path {
                        self.edges[e].count += 1;
                    }
                    return Some(true);
                }
            }
        }
    }

    /// Queue a new action at the node with the largest `p̂(1−p̂)`.
    fn uncertainty_branch(&mut self, exhausted: &mut Vec<bool>) -> bool {
        exhausted.resize(self.nodes.len(), false);
        let Some((credit, map)) = self.credit() else {
            return false;
        };
        let mut ranked: Vec<(f64, usize)> = map
            .iter()
            .enumerate()
            .filter(|(_, n)| {
                let node = &self.nodes[**n];
                !exhausted[**n] && node.leaf.is_none() && node.state.is_some()
            })
            .filter(|(_, n)| !self.nodes[**n].edges.is_empty())
            .map(|(ci, n)| (credit.nodes[ci].p_var, *n))
            .collect();
        ranked.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then(self.nodes[a.1].depth.cmp(&self.nodes[b.1].depth))
        });
        for (_, node) in ranked {
            let Some(state) = self.nodes[node].state else {
                continue;
            };
            for _ in 0..UNCERTAINTY_TRIES {
                let c = self.mdp.sample(state, self.rng);
                let known = self.nodes[node]
                    .edges
                    .iter()
                    .any(|&e| self.edges[e].action == c);
                if !known {
                    return self.dispatch(node, c, 1);
                }
            }
            exhausted[node] = true;
        }
        false
    }

    /// The tree reduced to its finished episodes (truncated leaves and
    /// branches without a graded leaf left out) and its credit: `(credit,
    /// map)`, `map[i]` being the tree node of credit node `i`.
    fn credit(&self) -> Option<(Credit, Vec<usize>)> {
        let mut alive = vec![false; self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            if matches!(n.leaf, Some((_, false))) {
                let mut cur = Some(i);
                while let Some(c) = cur.filter(|c| !alive[*c]) {
                    alive[c] = true;
                    cur = self.nodes[c].parent;
                }
            }
        }
        if !alive[0] {
            return None;
        }
        let mut map = Vec::new();
        let mut index = vec![usize::MAX; self.nodes.len()];
        let mut stack = vec![0usize];
        while let Some(n) = stack.pop() {
            index[n] = map.len();
            map.push(n);
            for &e in self.nodes[n].edges.iter().rev() {
                if alive[self.edges[e].to] {
                    stack.push(self.edges[e].to);
                }
            }
        }
        let nodes = map
            .iter()
            .map(|&n| {
                let node = &self.nodes[n];
                CreditNode {
                    parent: node.parent.map(|p| index[p]),
                    edges: node
                        .edges
                        .iter()
                        .filter(|&&e| alive[self.edges[e].to])
                        .map(|&e| CreditEdge {
                            child: index[self.edges[e].to],
                            count: self.edges[e].count,
                            step_reward: 0.0,
                        })
                        .collect(),
                    terminal_reward: node.leaf.map(|(r, _)| r),
                    potential: 0.0,
                }
            })
            .collect();
        let credit = estimate(&CreditTree { nodes }, &CreditConfig::default()).ok()?;
        Some((credit, map))
    }

    /// Record every credited edge's advantage: `Q̂ − V̂` at branch points,
    /// the segment advantage inside single-child chains.
    fn record(&self, out: &mut Estimates) {
        let Some((credit, map)) = self.credit() else {
            return;
        };
        let mut index = vec![usize::MAX; self.nodes.len()];
        for (ci, &n) in map.iter().enumerate() {
            index[n] = ci;
        }
        let live = |n: usize| -> Vec<usize> {
            self.nodes[n]
                .edges
                .iter()
                .copied()
                .filter(|&e| index[self.edges[e].to] != usize::MAX)
                .collect()
        };
        let v = |n: usize| credit.nodes[index[n]].v;
        // (node, the start of the chain it is inside, if it is inside one)
        let mut stack: Vec<(usize, Option<usize>)> = vec![(0, None)];
        while let Some((n, inside)) = stack.pop() {
            let edges = live(n);
            let start = match inside {
                Some(s) if edges.len() == 1 => s,
                _ => n,
            };
            let Some(state) = self.nodes[n].state else {
                continue;
            };
            for e in edges {
                let mut end = self.edges[e].to;
                loop {
                    let below = live(end);
                    if below.len() != 1 {
                        break;
                    }
                    end = self.edges[below[0]].to;
                }
                let edge = self.edges[e];
                out.add(state, edge.action, v(end) - v(start), f64::from(edge.count));
                stack.push((edge.to, Some(start)));
            }
        }
    }
}
