//! Policies: given an observation (and the candidate actions, if any), return
//! an action with its log-probability and entropy.
//!
//! Built in: [`RandomPolicy`] (uniform over the candidates), [`GoldPolicy`]
//! (the environment's reference solution), [`MixturePolicy`] (gold with
//! probability `p`, else random: trees with both successes and failures), and
//! [`CommandPolicy`] (an external program answers each decision, JSON on
//! stdin/stdout: any agent, an LLM client included). The trainer's network
//! implements [`Policy`] itself.
//!
//! [`AsyncPolicy`] is the async twin for policies that wait on something
//! else (a model behind a sampling server, [`crate::llm::OpenAiPolicy`]): the
//! driver awaits its decisions without holding a thread, and asks for all the
//! samples of a branch point in one call ([`AsyncPolicy::choose_n`]).

use std::fmt;
use std::future::Future;
use std::io::Write as _;
use std::pin::Pin;
use std::process::{Command, Stdio};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::env::{AgentAction, EnvObservation};

/// Token-level information of an action chosen by a token-level policy (an LLM).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tokens {
    /// Token ids of the action text.
    pub ids: Vec<u32>,
    /// Per-token log-probabilities under the behaviour policy.
    pub log_probs: Vec<f64>,
}

/// What a token-level policy (an LLM) sampled at one decision, beside its
/// [`Tokens`]: the prompt as the model saw it and how it was sampled, so a
/// trainer can rebuild its sample (and recompute `old_log_probs`) exactly.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    /// The prompt as chat messages (OpenAI format: system, user, assistant
    /// tool calls and tool outputs), when the policy works on messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<serde_json::Value>>,
    /// The prompt's token ids, when the server (or the external agent)
    /// returned them; never reconstructed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_ids: Option<Vec<u32>>,
    /// The tokenizer and chat template the ids belong to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    /// The model's reply as text (content, then the tool calls as JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The request's sampling parameters (temperature, top_p, max_tokens, seed, n).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<serde_json::Value>,
    /// The model that answered, as the server named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Why generation stopped (`stop`, `length`, `tool_calls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Why the reply is not a valid action (a malformed tool call, no tool
    /// call at all), when it is not: the action is then an `exec` that only
    /// prints this message, so the agent observes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid: Option<String>,
    /// Whether the context was cut to the token budget (the prompt then
    /// carries a visible mark where steps were left out).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated_context: bool,
}

/// What a policy sees at one decision.
#[derive(Clone, Copy, Debug)]
pub struct PolicyInput<'a> {
    /// The task.
    pub task: &'a str,
    /// The current observation.
    pub observation: &'a EnvObservation,
    /// The actions to choose among (the task's candidates, then
    /// [`AgentAction::Submit`]); may be empty for free-form environments.
    pub candidates: &'a [AgentAction],
    /// The actions taken so far on this path.
    pub history: &'a [AgentAction],
    /// The observation after each of them (same length as `history`): what
    /// a context builder shows after each action.
    pub observations: &'a [EnvObservation],
    /// The environment's reference solution, when it has one.
    pub reference: Option<&'a [AgentAction]>,
}

/// A [`PolicyInput`] that owns its data (what crosses an `.await`).
#[derive(Clone, Debug)]
pub struct Decision {
    /// The task.
    pub task: String,
    /// The current observation.
    pub observation: EnvObservation,
    /// The candidate actions (then `Submit`).
    pub candidates: Vec<AgentAction>,
    /// The actions taken so far.
    pub history: Vec<AgentAction>,
    /// The observation after each of them.
    pub observations: Vec<EnvObservation>,
    /// The reference solution.
    pub reference: Option<Vec<AgentAction>>,
}

impl Decision {
    /// Borrow it as a [`PolicyInput`].
    pub fn input(&self) -> PolicyInput<'_> {
        PolicyInput {
            task: &self.task,
            observation: &self.observation,
            candidates: &self.candidates,
            history: &self.history,
            observations: &self.observations,
            reference: self.reference.as_deref(),
        }
    }
}

/// A boxed future of `n` choices.
pub type Choices<'a> = Pin<Box<dyn Future<Output = Result<Vec<Choice>, PolicyError>> + Send + 'a>>;

/// The async twin of [`Policy`]: for policies that wait on a server.
pub trait AsyncPolicy: Send + Sync {
    /// A short name (`openai(http://…#model)`).
    fn name(&self) -> String;

    /// What the tree records about the policy (model id, revision, prompt
    /// settings), once per tree.
    fn describe(&self) -> Option<serde_json::Value> {
        None
    }

    /// `n` independent samples at one decision (siblings of a branch point
    /// share the prompt: one request with `n`). `seed` makes a server that
    /// honours seeds reproducible.
    fn choose_n(&self, decision: Decision, n: usize, seed: u64) -> Choices<'_>;
}

/// Either kind of policy, as the driver runs it.
#[derive(Clone)]
pub enum AnyPolicy {
    /// A synchronous policy (called on a blocking thread inside paths).
    Sync(Arc<dyn Policy>),
    /// An async policy (awaited; no thread held while it waits).
    Async(Arc<dyn AsyncPolicy>),
}

impl fmt::Debug for AnyPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AnyPolicy({})", self.name())
    }
}

impl AnyPolicy {
    /// The policy's name.
    pub fn name(&self) -> String {
        match self {
            Self::Sync(p) => p.name(),
            Self::Async(p) => p.name(),
        }
    }

    /// What the tree records about it.
    pub fn describe(&self) -> Option<serde_json::Value> {
        match self {
            Self::Sync(_) => None,
            Self::Async(p) => p.describe(),
        }
    }

    /// Whether decisions are awaited (an [`AsyncPolicy`]).
    pub fn is_async(&self) -> bool {
        matches!(self, Self::Async(_))
    }
}

impl From<Arc<dyn Policy>> for AnyPolicy {
    fn from(p: Arc<dyn Policy>) -> Self {
        Self::Sync(p)
    }
}

impl From<Arc<dyn AsyncPolicy>> for AnyPolicy {
    fn from(p: Arc<dyn AsyncPolicy>) -> Self {
        Self::Async(p)
    }
}

/// A policy's decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// The action.
    pub action: AgentAction,
    /// Its index among the candidates, when it is one.
    pub index: Option<usize>,
    /// log μ(a|s) under the behaviour policy (what sampled the action).
    pub log_prob: f64,
    /// log π(a|s) under the policy being trained, when the behaviour policy
    /// is not that policy itself (an exploring mixture `(1 − ε)·π + ε/K`):
    /// PPO anchors its ratio on this and weights by the truncated `π/μ`.
    /// `None` when behaviour and target are the same policy.
    pub target_log_prob: Option<f64>,
    /// Entropy of π(·|s) in nats.
    pub entropy: f64,
    /// The policy's version (weights generation) that made the choice.
    pub version: u64,
    /// Token ids and per-token log-probs, for token-level policies.
    pub tokens: Option<Tokens>,
    /// The prompt and sampling of a token-level policy's decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<Box<Generation>>,
}

/// Why a policy could not decide.
#[derive(Debug, thiserror::Error)]
#[error("policy {policy}: {message}")]
pub struct PolicyError {
    /// The policy's name.
    pub policy: String,
    /// What went wrong.
    pub message: String,
}

/// A behaviour policy.
pub trait Policy: Send + Sync {
    /// A short name (`random`, `gold`, `mixture(0.5)`, ...).
    fn name(&self) -> String;

    /// Choose an action.
    ///
    /// # Errors
    /// When the policy cannot act here (no candidates for `random`, the
    /// external program failed, ...).
    fn choose(&self, input: &PolicyInput<'_>, rng: &mut Rng) -> Result<Choice, PolicyError>;
}

/// A small deterministic generator (SplitMix64): reproducible sampling from a seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_f64() * n as f64) as usize % n.max(1)
    }

    /// A generator for a sub-task, derived from this seed and `stream`.
    pub fn derive(seed: u64, stream: u64) -> Self {
        let mut r = Self::new(seed ^ stream.wrapping_mul(0xd1b5_4a32_d192_ed03));
        r.next_u64();
        r
    }
}

/// Sample an index from probabilities `p` (summing to 1).
pub fn sample_index(p: &[f64], rng: &mut Rng) -> usize {
    let u = rng.next_f64();
    let mut acc = 0.0;
    for (i, pi) in p.iter().enumerate() {
        acc += pi;
        if u < acc {
            return i;
        }
    }
    p.len().saturating_sub(1)
}

/// Entropy (nats) of a distribution.
pub fn entropy(p: &[f64]) -> f64 {
    -p.iter()
        .filter(|x| **x > 0.0)
        .map(|x| x * x.ln())
        .sum::<f64>()
}

fn index_of(candidates: &[AgentAction], a: &AgentAction) -> Option<usize> {
    candidates.iter().position(|c| c == a)
}

/// The reference action at this point of the path: the next gold action, or
/// `Submit` once the gold solution is exhausted.
fn gold_action(input: &PolicyInput<'_>) -> Option<AgentAction> {
    let gold = input.reference?;
    Some(
        gold.get(input.history.len())
            .cloned()
            .unwrap_or(AgentAction::Submit),
    )
}

/// Uniform over the candidates.
#[derive(Clone, Copy, Debug, Default)]
pub struct RandomPolicy;

impl Policy for RandomPolicy {
    fn name(&self) -> String {
        "random".to_owned()
    }

    fn choose(&self, input: &PolicyInput<'_>, rng: &mut Rng) -> Result<Choice, PolicyError> {
        let k = input.candidates.len();
        if k == 0 {
            return Err(PolicyError {
                policy: self.name(),
                message: format!("task {} lists no candidate actions", input.task),
            });
        }
        let i = rng.below(k);
        Ok(Choice {
            action: input.candidates[i].clone(),
            index: Some(i),
            log_prob: -(k as f64).ln(),
            entropy: (k as f64).ln(),
            version: 0,
            tokens: None,
            target_log_prob: None,
            generation: None,
        })
    }
}

/// The environment's reference solution, then `Submit`.
#[derive(Clone, Copy, Debug, Default)]
pub struct GoldPolicy;

impl Policy for GoldPolicy {
    fn name(&self) -> String {
        "gold".to_owned()
    }

    fn choose(&self, input: &PolicyInput<'_>, _rng: &mut Rng) -> Result<Choice, PolicyError> {
        let action = gold_action(input).ok_or_else(|| PolicyError {
            policy: self.name(),
            message: format!("task {} has no reference solution", input.task),
        })?;
        Ok(Choice {
            index: index_of(input.candidates, &action),
            action,
            log_prob: 0.0,
            entropy: 0.0,
            version: 0,
            tokens: None,
            target_log_prob: None,
            generation: None,
        })
    }
}

/// The gold action with probability `p`, else uniform over the candidates.
/// Its log-probabilities are those of the mixture distribution.
#[derive(Clone, Copy, Debug)]
pub struct MixturePolicy {
    /// Probability of the gold action.
    pub p: f64,
}

impl MixturePolicy {
    /// The mixture's distribution over `candidates ∪ {gold}`: (actions, probabilities).
    fn distribution(&self, input: &PolicyInput<'_>) -> Option<(Vec<AgentAction>, Vec<f64>)> {
        let gold = gold_action(input)?;
        let k = input.candidates.len();
        let mut actions: Vec<AgentAction> = input.candidates.to_vec();
        let mut probs = vec![
            if k == 0 {
                0.0
            } else {
                (1.0 - self.p) / k as f64
            };
            k
        ];
        let p_gold = if k == 0 { 1.0 } else { self.p };
        match index_of(&actions, &gold) {
            Some(i) => probs[i] += p_gold,
            None => {
                actions.push(gold);
                probs.push(p_gold);
            }
        }
        Some((actions, probs))
    }
}

impl Policy for MixturePolicy {
    fn name(&self) -> String {
        format!("mixture({})", self.p)
    }

    fn choose(&self, input: &PolicyInput<'_>, rng: &mut Rng) -> Result<Choice, PolicyError> {
        let (actions, probs) = self.distribution(input).ok_or_else(|| PolicyError {
            policy: self.name(),
            message: format!("task {} has no reference solution", input.task),
        })?;
        let i = sample_index(&probs, rng);
        let action = actions[i].clone();
        Ok(Choice {
            index: index_of(input.candidates, &action),
            log_prob: probs[i].ln(),
            entropy: entropy(&probs),
            action,
            version: 0,
            tokens: None,
            target_log_prob: None,
            generation: None,
        })
    }
}

/// Asks an external program for each decision: it is run with `sh -c` and
/// gets one JSON object on stdin ([`CommandRequest`]); it prints one JSON
/// object ([`CommandReply`]) on stdout.
#[derive(Clone, Debug)]
pub struct CommandPolicy {
    /// The shell command.
    pub command: String,
}

/// What a [`CommandPolicy`] program reads.
#[derive(Debug, Serialize)]
pub struct CommandRequest<'a> {
    /// The task.
    pub task: &'a str,
    /// The observation's text (instructions, last action, its output).
    pub prompt: String,
    /// The observation.
    pub observation: &'a EnvObservation,
    /// The candidate actions (choose one by `index`, or answer with any `action`).
    pub candidates: &'a [AgentAction],
    /// The actions taken so far.
    pub history: &'a [AgentAction],
    /// The observation after each of them (the outputs an agent's context shows).
    pub observations: &'a [EnvObservation],
}

/// What a [`CommandPolicy`] program answers: an `action` or an `index`, and
/// optionally the behaviour statistics.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandReply {
    /// A free-form action.
    #[serde(default)]
    pub action: Option<AgentAction>,
    /// Or the index of a candidate.
    #[serde(default)]
    pub index: Option<usize>,
    /// log π(a|s) (default 0).
    #[serde(default)]
    pub log_prob: Option<f64>,
    /// Entropy of π(·|s) (default 0).
    #[serde(default)]
    pub entropy: Option<f64>,
    /// The policy's version.
    #[serde(default)]
    pub version: Option<u64>,
    /// Token ids of the action.
    #[serde(default)]
    pub tokens: Option<Vec<u32>>,
    /// Per-token log-probs.
    #[serde(default)]
    pub token_log_probs: Option<Vec<f64>>,
    /// Token ids of the prompt the agent's model read (token-level exports
    /// that need prompt ids, verl and SkyRL, refuse trees without them).
    #[serde(default)]
    pub prompt_tokens: Option<Vec<u32>>,
    /// The tokenizer (and chat template) both id lists belong to.
    #[serde(default)]
    pub tokenizer: Option<String>,
    /// The prompt as chat messages, if the agent works on messages.
    #[serde(default)]
    pub messages: Option<Vec<serde_json::Value>>,
}

impl Policy for CommandPolicy {
    fn name(&self) -> String {
        format!("command({})", self.command)
    }

    fn choose(&self, input: &PolicyInput<'_>, _rng: &mut Rng) -> Result<Choice, PolicyError> {
        let fail = |message: String| PolicyError {
            policy: self.name(),
            message,
        };
        let request = CommandRequest {
            task: input.task,
            prompt: input.observation.text(),
            observation: input.observation,
            candidates: input.candidates,
            history: input.history,
            observations: input.observations,
        };
        let body = serde_json::to_vec(&request).map_err(|e| fail(e.to_string()))?;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("cannot start: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            // A program that ignores its input may close stdin early.
            let _ = stdin.write_all(&body);
        }
        let out = child
            .wait_with_output()
            .map_err(|e| fail(format!("wait: {e}")))?;
        if !out.status.success() {
            return Err(fail(format!(
                "exited with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let reply: CommandReply = serde_json::from_slice(&out.stdout).map_err(|e| {
            fail(format!(
                "its answer is not a reply object ({e}): {}",
                String::from_utf8_lossy(&out.stdout).trim()
            ))
        })?;
        let (action, index) = match (reply.action, reply.index) {
            (Some(a), None) => {
                let i = index_of(input.candidates, &a);
                (a, i)
            }
            (None, Some(i)) => (
                input.candidates.get(i).cloned().ok_or_else(|| {
                    fail(format!(
                        "index {i} is not a candidate (0..{})",
                        input.candidates.len()
                    ))
                })?,
                Some(i),
            ),
            _ => {
                return Err(fail(
                    "answer with exactly one of `action` and `index`".to_owned(),
                ));
            }
        };
        let tokens = match (reply.tokens, reply.token_log_probs) {
            (Some(ids), Some(lp)) if ids.len() == lp.len() => Some(Tokens { ids, log_probs: lp }),
            (None, None) => None,
            _ => {
                return Err(fail(
                    "`tokens` and `token_log_probs` come together, with equal lengths".to_owned(),
                ));
            }
        };
        if reply.prompt_tokens.is_some() && tokens.is_none() {
            return Err(fail(
                "`prompt_tokens` needs the response's `tokens` and `token_log_probs`".to_owned(),
            ));
        }
        let generation = (reply.prompt_tokens.is_some()
            || reply.tokenizer.is_some()
            || reply.messages.is_some())
        .then(|| {
            Box::new(Generation {
                messages: reply.messages,
                prompt_ids: reply.prompt_tokens,
                tokenizer: reply.tokenizer,
                ..Generation::default()
            })
        });
        Ok(Choice {
            action,
            index,
            log_prob: reply.log_prob.unwrap_or(0.0),
            entropy: reply.entropy.unwrap_or(0.0),
            version: reply.version.unwrap_or(0),
            tokens,
            target_log_prob: None,
            generation,
        })
    }
}

/// Any policy by name: the built-in ones ([`builtin`]) and
/// `openai:URL[?OPTIONS][#MODEL]` ([`crate::llm::OpenAiPolicy`], which
/// connects to its server here, so a wrong URL or model fails now).
///
/// # Errors
/// An unknown name, a bad parameter, or an unreachable model server.
pub async fn resolve(spec: &str) -> Result<AnyPolicy, String> {
    if let Some(rest) = spec.strip_prefix("openai:") {
        let p = crate::llm::OpenAiPolicy::connect(rest).await?;
        return Ok(AnyPolicy::Async(Arc::new(p)));
    }
    builtin(spec).map(|p| AnyPolicy::Sync(Arc::from(p)))
}

/// A built-in policy by name: `random`, `gold`, `mixture` / `mixture:P`
/// (default P = 0.5), `command:CMD`.
///
/// # Errors
/// An unknown name or a bad parameter.
pub fn builtin(spec: &str) -> Result<Box<dyn Policy>, String> {
    if spec.starts_with("openai:") {
        return Err(format!(
            "{spec:?} is an async policy (a model server): resolve it with `policy::resolve`"
        ));
    }
    if let Some(cmd) = spec.strip_prefix("command:") {
        if cmd.trim().is_empty() {
            return Err("`command:` needs a command".to_owned());
        }
        return Ok(Box::new(CommandPolicy {
            command: cmd.to_owned(),
        }));
    }
    match spec {
        "random" => Ok(Box::new(RandomPolicy)),
        "gold" => Ok(Box::new(GoldPolicy)),
        "mixture" => Ok(Box::new(MixturePolicy { p: 0.5 })),
        _ => {
            if let Some(p) = spec.strip_prefix("mixture:") {
                let p: f64 = p
                    .parse()
                    .map_err(|_| format!("mixture probability {p:?} is not a number"))?;
                if !(0.0..=1.0).contains(&p) {
                    return Err(format!("mixture probability {p} is not in [0, 1]"));
                }
                return Ok(Box::new(MixturePolicy { p }));
            }
            Err(format!(
                "unknown policy {spec:?} (random, gold, mixture, mixture:P, command:CMD, openai:URL[#MODEL])"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs() -> EnvObservation {
        EnvObservation {
            task: "t".into(),
            instructions: "do it".into(),
            step: 0,
            last_action: None,
            output: String::new(),
            exit: None,
        }
    }

    #[test]
    fn mixture_probabilities_are_a_distribution_and_match_sampling() {
        let cands = vec![
            AgentAction::exec("a"),
            AgentAction::exec("b"),
            AgentAction::Submit,
        ];
        let gold = vec![AgentAction::exec("b")];
        let o = obs();
        let input = PolicyInput {
            task: "t",
            observation: &o,
            candidates: &cands,
            history: &[],
            observations: &[],
            reference: Some(&gold),
        };
        let m = MixturePolicy { p: 0.4 };
        let (actions, probs) = m.distribution(&input).unwrap();
        assert_eq!(actions.len(), 3, "gold is a candidate: no extra entry");
        assert!((probs.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!((probs[1] - (0.4 + 0.6 / 3.0)).abs() < 1e-12);
        let mut rng = Rng::new(7);
        let n = 20_000;
        let mut hits = 0;
        for _ in 0..n {
            let c = m.choose(&input, &mut rng).unwrap();
            if c.action == AgentAction::exec("b") {
                hits += 1;
                assert!((c.log_prob - probs[1].ln()).abs() < 1e-12);
            }
        }
        let freq = hits as f64 / n as f64;
        assert!((freq - probs[1]).abs() < 0.02, "{freq} vs {}", probs[1]);
        // After the gold solution, the reference action is Submit.
        let hist = vec![AgentAction::exec("b")];
        let after = PolicyInput {
            history: &hist,
            ..input
        };
        assert_eq!(
            GoldPolicy.choose(&after, &mut rng).unwrap().action,
            AgentAction::Submit
        );
    }

    #[test]
    fn random_is_uniform_and_needs_candidates() {
        let cands = vec![AgentAction::exec("a"), AgentAction::exec("b")];
        let o = obs();
        let input = PolicyInput {
            task: "t",
            observation: &o,
            candidates: &cands,
            history: &[],
            observations: &[],
            reference: None,
        };
        let c = RandomPolicy.choose(&input, &mut Rng::new(1)).unwrap();
        assert!((c.log_prob - 0.5f64.ln()).abs() < 1e-12);
        assert!((c.entropy - 2f64.ln()).abs() < 1e-12);
        let none = PolicyInput {
            candidates: &[],
            ..input
        };
        assert!(RandomPolicy.choose(&none, &mut Rng::new(1)).is_err());
        assert!(GoldPolicy.choose(&input, &mut Rng::new(1)).is_err());
    }

    #[test]
    fn command_policy_speaks_json() {
        let cands = vec![AgentAction::exec("ls"), AgentAction::Submit];
        let o = obs();
        let input = PolicyInput {
            task: "t",
            observation: &o,
            candidates: &cands,
            history: &[],
            observations: &[],
            reference: None,
        };
        let p = CommandPolicy {
            command: r#"grep -q '"task":"t"' && echo '{"index": 1, "log_prob": -0.5, "tokens": [1,2], "token_log_probs": [-0.2,-0.3]}'"#.into(),
        };
        let c = p.choose(&input, &mut Rng::new(1)).unwrap();
        assert_eq!(c.action, AgentAction::Submit);
        assert_eq!(c.index, Some(1));
        assert_eq!(c.tokens.unwrap().ids, vec![1, 2]);
        let p = CommandPolicy {
            command: r#"echo '{"action": {"exec": "make"}}'"#.into(),
        };
        let c = p.choose(&input, &mut Rng::new(1)).unwrap();
        assert_eq!((c.action, c.index), (AgentAction::exec("make"), None));
        let bad = CommandPolicy {
            command: "echo nonsense".into(),
        };
        assert!(
            bad.choose(&input, &mut Rng::new(1))
                .unwrap_err()
                .to_string()
                .contains("not a reply")
        );
        assert!(builtin("mixture:1.5").is_err());
        assert_eq!(builtin("mixture:0.3").unwrap().name(), "mixture(0.3)");
    }
}
