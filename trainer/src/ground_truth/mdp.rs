//! The plain in-memory MDP that exact credit is computed on, its exact
//! solution by dynamic programming, and the episode simulator the
//! estimators replay from.
//!
//! An [`Mdp`] is what exploring a task produces (see
//! [`super::explore`]), but it is plain data: states with a step index, one
//! [`Transition`] per candidate action, the reward of grading the state as it
//! stands, and the policy's probabilities. Tests build small ones by hand.
//!
//! Episodes follow the rollout driver exactly: at a state the policy picks an
//! action; `Submit` ends the episode and the state is graded; any other action
//! is executed and leads to the next state, or, when it was the last action the
//! step limit allows, ends the episode with the reached state graded. Every
//! transition advances the step index by one, so the MDP is acyclic and
//! backward induction over the step index solves it.
//!
//! Budget accounting is the driver's (`arbor_rollout::driver`): an episode
//! starts only when two units are left and reserves one action and one
//! verification (one verification for a first `Submit`); each further action
//! reserves one more unit; an episode that cannot reserve its next action is
//! graded as it stands and marked truncated.

use arbor_rollout::policy::{Rng, sample_index};

/// Where an action leads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Next {
    /// Another decision state (an index into [`Mdp::states`]).
    State(usize),
    /// The end of the episode, with the verdict's reward.
    End(f64),
}

/// One candidate action of a state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transition {
    /// Where it leads.
    pub next: Next,
    /// Whether it executes something (costs one unit of budget); `false` only
    /// for `Submit`, which must end the episode.
    pub executes: bool,
}

/// A decision state: the agent acts here (its step index is below the
/// task's step limit).
#[derive(Clone, Debug, PartialEq)]
pub struct MdpState {
    /// Actions taken before this state (`t`).
    pub step: usize,
    /// One transition per candidate action, in the candidates' order.
    pub actions: Vec<Transition>,
    /// The reward of grading this state as it stands (what a budget-truncated
    /// episode gets, and what `Submit` gets).
    pub stop_reward: f64,
    /// `π(a|s)` for each action: positive, summing to 1.
    pub policy: Vec<f64>,
}

/// An acyclic MDP with a Markov policy; state 0 is the root.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mdp {
    /// The decision states.
    pub states: Vec<MdpState>,
}

/// Why an [`Mdp`] was rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MdpError {
    /// There is no root.
    #[error("the MDP has no states (state 0, the root, is missing)")]
    Empty,
    /// A state offers no action.
    #[error("state {state} has no actions")]
    NoActions {
        /// The state.
        state: usize,
    },
    /// The policy does not have one probability per action.
    #[error("state {state}: the policy has {got} probabilities for {actions} actions")]
    PolicyLength {
        /// The state.
        state: usize,
        /// Probabilities given.
        got: usize,
        /// Actions.
        actions: usize,
    },
    /// A probability is not in (0, 1].
    #[error("state {state}: π(action {action}) = {p} is not a positive probability")]
    BadProbability {
        /// The state.
        state: usize,
        /// The action.
        action: usize,
        /// The value.
        p: f64,
    },
    /// The probabilities do not sum to 1.
    #[error("state {state}: the policy's probabilities sum to {sum}, not 1")]
    PolicySum {
        /// The state.
        state: usize,
        /// Their sum.
        sum: f64,
    },
    /// A transition names a state that does not exist.
    #[error("state {state}: action {action} leads to state {next}, but there are {len} states")]
    NextOutOfRange {
        /// The state.
        state: usize,
        /// The action.
        action: usize,
        /// The named state.
        next: usize,
        /// Number of states.
        len: usize,
    },
    /// A transition does not advance the step index by one.
    #[error(
        "state {state} (step {step}): action {action} leads to state {next} at step {next_step}; \
         a transition must advance the step by exactly one"
    )]
    StepOrder {
        /// The state.
        state: usize,
        /// Its step.
        step: usize,
        /// The action.
        action: usize,
        /// The next state.
        next: usize,
        /// Its step.
        next_step: usize,
    },
    /// An action that executes nothing (`Submit`) does not end the episode.
    #[error("state {state}: action {action} executes nothing but does not end the episode")]
    SubmitContinues {
        /// The state.
        state: usize,
        /// The action.
        action: usize,
    },
    /// A reward is NaN or infinite.
    #[error("state {state}: reward {value} is not finite")]
    NonFiniteReward {
        /// The state.
        state: usize,
        /// The value.
        value: f64,
    },
}

/// Tolerance of [`Mdp::check`] on the policy's sum.
const SUM_TOLERANCE: f64 = 1e-6;

impl Mdp {
    /// Check the invariants every function here relies on (named in [`MdpError`]).
    ///
    /// # Errors
    /// The first violation found.
    pub fn check(&self) -> Result<(), MdpError> {
        if self.states.is_empty() {
            return Err(MdpError::Empty);
        }
        for (s, st) in self.states.iter().enumerate() {
            self.check_state(s, st)?;
        }
        Ok(())
    }

    fn check_state(&self, s: usize, st: &MdpState) -> Result<(), MdpError> {
        if st.actions.is_empty() {
            return Err(MdpError::NoActions { state: s });
        }
        if st.policy.len() != st.actions.len() {
            return Err(MdpError::PolicyLength {
                state: s,
                got: st.policy.len(),
                actions: st.actions.len(),
            });
        }
        if let Some((a, &p)) = st
            .policy
            .iter()
            .enumerate()
            .find(|(_, p)| !(p.is_finite() && **p > 0.0 && **p <= 1.0))
        {
            return Err(MdpError::BadProbability {
                state: s,
                action: a,
                p,
            });
        }
        let sum: f64 = st.policy.iter().sum();
        if (sum - 1.0).abs() > SUM_TOLERANCE {
            return Err(MdpError::PolicySum { state: s, sum });
        }
        if !st.stop_reward.is_finite() {
            return Err(MdpError::NonFiniteReward {
                state: s,
                value: st.stop_reward,
            });
        }
        for (a, tr) in st.actions.iter().enumerate() {
            match tr.next {
                Next::End(r) if !r.is_finite() => {
                    return Err(MdpError::NonFiniteReward { state: s, value: r });
                }
                Next::End(_) => {}
                Next::State(_) if !tr.executes => {
                    return Err(MdpError::SubmitContinues {
                        state: s,
                        action: a,
                    });
                }
                Next::State(j) => {
                    let next = self.states.get(j).ok_or(MdpError::NextOutOfRange {
                        state: s,
                        action: a,
                        next: j,
                        len: self.states.len(),
                    })?;
                    if next.step != st.step + 1 {
                        return Err(MdpError::StepOrder {
                            state: s,
                            step: st.step,
                            action: a,
                            next: j,
                            next_step: next.step,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// State indices ordered by step, earliest first.
    fn by_step(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.states.len()).collect();
        order.sort_by_key(|&s| self.states[s].step);
        order
    }

    /// The exact `V^π`, `Q^π`, `A^π` and state-visitation distribution.
    ///
    /// # Errors
    /// The MDP is malformed ([`Mdp::check`]).
    pub fn exact(&self) -> Result<Exact, MdpError> {
        self.check()?;
        let order = self.by_step();
        let n = self.states.len();
        let mut v = vec![0.0; n];
        let mut q: Vec<Vec<f64>> = vec![Vec::new(); n];
        for &s in order.iter().rev() {
            let st = &self.states[s];
            q[s] = st
                .actions
                .iter()
                .map(|tr| match tr.next {
                    Next::End(r) => r,
                    Next::State(j) => v[j],
                })
                .collect();
            v[s] = st.policy.iter().zip(&q[s]).map(|(p, q)| p * q).sum();
        }
        let advantage = q
            .iter()
            .zip(&v)
            .map(|(qs, vs)| qs.iter().map(|x| x - vs).collect())
            .collect();
        let mut visitation = vec![0.0; n];
        visitation[0] = 1.0;
        for &s in &order {
            let st = &self.states[s];
            for (tr, p) in st.actions.iter().zip(&st.policy) {
                if let Next::State(j) = tr.next {
                    visitation[j] += visitation[s] * p;
                }
            }
        }
        Ok(Exact {
            v,
            q,
            advantage,
            visitation,
        })
    }

    /// Sample an action of state `s` from the policy.
    pub fn sample(&self, s: usize, rng: &mut Rng) -> usize {
        sample_index(&self.states[s].policy, rng)
    }

    /// Run one path from state `start` taking `first` there, as a driver
    /// job does: the first action (and the final verification) were reserved
    /// by the caller; every further action takes one unit from `budget`, and
    /// the path stops at a branch point when `branch(state, action)` says so
    /// (the pending choice is returned, and the verification it no longer
    /// needs is given back).
    pub fn run_path(
        &self,
        start: usize,
        first: usize,
        budget: &mut Budget,
        rng: &mut Rng,
        branch: &dyn Fn(usize, usize) -> bool,
    ) -> Path {
        let mut steps = Vec::new();
        let (mut s, mut a) = (start, first);
        let mut reserved = true;
        loop {
            let tr = self.states[s].actions[a];
            if !tr.executes {
                steps.push((s, a));
                let reward = match tr.next {
                    Next::End(r) => r,
                    Next::State(_) => self.states[s].stop_reward,
                };
                return Path {
                    steps,
                    end: PathEnd::Leaf {
                        reward,
                        truncated: false,
                    },
                };
            }
            if !reserved && !budget.take(1) {
                let reward = self.states[s].stop_reward;
                return Path {
                    steps,
                    end: PathEnd::Leaf {
                        reward,
                        truncated: true,
                    },
                };
            }
            reserved = false;
            steps.push((s, a));
            match tr.next {
                Next::End(reward) => {
                    return Path {
                        steps,
                        end: PathEnd::Leaf {
                            reward,
                            truncated: false,
                        },
                    };
                }
                Next::State(j) => {
                    let next = self.sample(j, rng);
                    if branch(j, next) {
                        budget.give_back(1);
                        return Path {
                            steps,
                            end: PathEnd::Branch {
                                state: j,
                                pending: next,
                            },
                        };
                    }
                    (s, a) = (j, next);
                }
            }
        }
    }

    /// One unbranched episode from state `start` under `budget`, started the
    /// way the driver starts one (at least two units left; one action and one
    /// verification reserved, or one verification for a first `Submit`).
    /// `None` when the budget cannot start it.
    pub fn episode(&self, start: usize, budget: &mut Budget, rng: &mut Rng) -> Option<Episode> {
        if budget.remaining() < 2 {
            return None;
        }
        let first = self.sample(start, rng);
        if !budget.take(self.reservation(start, first)) {
            return None;
        }
        let path = self.run_path(start, first, budget, rng, &|_, _| false);
        let PathEnd::Leaf { reward, truncated } = path.end else {
            return None;
        };
        Some(Episode {
            steps: path.steps,
            reward,
            truncated,
        })
    }

    /// Units a driver reserves to dispatch `action` at `state`: one action and
    /// one verification, or one verification for `Submit`.
    pub fn reservation(&self, state: usize, action: usize) -> u64 {
        if self.states[state].actions[action].executes {
            2
        } else {
            1
        }
    }
}

/// The exact solution of an [`Mdp`] (γ = 1, the reward at the episode's end).
#[derive(Clone, Debug, PartialEq)]
pub struct Exact {
    /// `V^π(s)`.
    pub v: Vec<f64>,
    /// `Q^π(s, a)`.
    pub q: Vec<Vec<f64>>,
    /// `A^π(s, a) = Q^π(s, a) − V^π(s)`.
    pub advantage: Vec<Vec<f64>>,
    /// `d^π(s)`: the probability that an episode from the root visits `s`
    /// (undiscounted; every state has one step index, so it is visited at
    /// most once per episode).
    pub visitation: Vec<f64>,
}

impl Exact {
    /// The largest `|Σ_a π(a|s)·A^π(s, a)|` over the states (0 up to rounding).
    pub fn max_weighted_advantage(&self, mdp: &Mdp) -> f64 {
        mdp.states
            .iter()
            .zip(&self.advantage)
            .map(|(st, a)| {
                st.policy
                    .iter()
                    .zip(a)
                    .map(|(p, a)| p * a)
                    .sum::<f64>()
                    .abs()
            })
            .fold(0.0, f64::max)
    }
}

/// A path a job ran.
#[derive(Clone, Debug, PartialEq)]
pub struct Path {
    /// `(state, action)` of every action taken, in order (a closing `Submit` included).
    pub steps: Vec<(usize, usize)>,
    /// How it ended.
    pub end: PathEnd,
}

/// How a [`Path`] ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PathEnd {
    /// Graded: after `Submit`, at the step limit, or (truncated) when the
    /// budget could not pay for the next action.
    Leaf {
        /// The verdict's reward.
        reward: f64,
        /// Cut short by the budget.
        truncated: bool,
    },
    /// Stopped at a branch point: `pending` was sampled at `state`.
    Branch {
        /// The branch point.
        state: usize,
        /// The action sampled there.
        pending: usize,
    },
}

/// An unbranched episode.
#[derive(Clone, Debug, PartialEq)]
pub struct Episode {
    /// `(state, action)` of every decision.
    pub steps: Vec<(usize, usize)>,
    /// The verdict's reward.
    pub reward: f64,
    /// Cut short by the budget (its reward is not an on-policy return).
    pub truncated: bool,
}

/// The budget of one run: executed actions plus verifier runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    limit: u64,
    remaining: u64,
}

impl Budget {
    /// A budget of `limit` units.
    pub fn new(limit: u64) -> Self {
        Self {
            limit,
            remaining: limit,
        }
    }

    /// Take `n` units if there are that many left.
    pub fn take(&mut self, n: u64) -> bool {
        match self.remaining.checked_sub(n) {
            Some(r) => {
                self.remaining = r;
                true
            }
            None => false,
        }
    }

    /// Return `n` reserved units.
    pub fn give_back(&mut self, n: u64) {
        self.remaining = (self.remaining + n).min(self.limit);
    }

    /// Units left.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Units used.
    pub fn used(&self) -> u64 {
        self.limit - self.remaining
    }
}
