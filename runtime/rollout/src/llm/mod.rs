//! The LLM policy: a model behind an OpenAI-compatible chat-completions
//! server (vLLM, SGLang, `transformers serve`, ...) as an [`AsyncPolicy`].
//!
//! `openai:URL[?OPTION=VALUE&...][#MODEL]`, for example
//! `openai:http://127.0.0.1:8000/v1?temperature=0.8&max_tokens=256#qwen`.
//! Each decision is one chat-completions request with tool calling (tools
//! `bash`, `write_file`, `read_file`, `submit`, see [`context`]), the context
//! built from the task and every action with its observation, cut to a
//! token budget with a visible mark. A branch point's siblings are one
//! request with `n = width` (a server that returns fewer choices is asked
//! again for the rest). Requests per server are bounded, retried with
//! backoff on 429/5xx and connection failures, and time out.
//!
//! Token capture: the response tokens' ids and log-probs come from
//! `logprobs` (with vLLM's `return_tokens_as_token_ids`, tokens arrive as
//! `token_id:N`) or from vLLM's `return_token_ids` (`token_ids` per choice,
//! `prompt_token_ids` for the prompt). A server that returns no ids gives a
//! record with `tokens: null`: ids are never invented. A reply that is not a
//! valid tool call becomes an action that prints why (the agent observes it,
//! the tree records it as invalid), never a crash.
//!
//! Options: `temperature` (1.0), `top_p` (1.0), `max_tokens` (512),
//! `top_logprobs` (0), `concurrency` (8 requests in flight), `timeout_s`
//! (120), `retries` (4), `context_tokens` (8192; 0 = no limit),
//! `bytes_per_token` (3, the budget's estimate), `system` (text, or `@PATH`),
//! `tokenizer` (an id recorded with prompt ids), `extensions` (`vllm`, the
//! default, sends vLLM's token-id fields; `none` sends only OpenAI's),
//! `api_key_env` (the variable holding a bearer token; default
//! `OPENAI_API_KEY` when set).

pub mod context;
pub mod http;

use std::time::Duration;

use serde_json::{Value, json};

use crate::policy::{AsyncPolicy, Choice, Choices, Decision, Generation, PolicyError, Tokens};
use context::{ContextBudget, Parsed};
use http::{HttpSettings, JsonClient};

/// Which non-OpenAI request fields to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extensions {
    /// vLLM's `return_tokens_as_token_ids` and `return_token_ids`.
    Vllm,
    /// Only OpenAI's own fields.
    None,
}

/// The LLM policy's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenAiConfig {
    /// The API base (`http://host:port/v1`).
    pub base: String,
    /// The model id (`None`: the server's first model).
    pub model: Option<String>,
    /// Sampling temperature.
    pub temperature: f64,
    /// Nucleus sampling.
    pub top_p: f64,
    /// Tokens per reply.
    pub max_tokens: u32,
    /// Alternatives per token in `top_logprobs` (0: none).
    pub top_logprobs: u32,
    /// The system prompt.
    pub system: String,
    /// The prompt's budget.
    pub budget: ContextBudget,
    /// The tokenizer id recorded with prompt ids.
    pub tokenizer: Option<String>,
    /// Extension fields sent.
    pub extensions: Extensions,
    /// Transport.
    pub http: HttpSettings,
}

impl OpenAiConfig {
    /// Parse `URL[?OPTIONS][#MODEL]` (what follows `openai:`).
    ///
    /// # Errors
    /// A bad URL or option, named.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let (rest, model) = match spec.split_once('#') {
            Some((r, m)) if !m.trim().is_empty() => (r, Some(m.trim().to_owned())),
            Some((r, _)) => (r, None),
            None => (spec, None),
        };
        let (url, query) = rest.split_once('?').unwrap_or((rest, ""));
        let url = url.trim().trim_end_matches('/');
        if url.is_empty() {
            return Err("`openai:` needs a URL (openai:http://HOST:PORT/v1[#MODEL])".to_owned());
        }
        // `http://host:port` means its `/v1`.
        let base = match url.split_once("://") {
            Some((_, after)) if !after.contains('/') => format!("{url}/v1"),
            _ => url.to_owned(),
        };
        let mut cfg = Self {
            base,
            model,
            temperature: 1.0,
            top_p: 1.0,
            max_tokens: 512,
            top_logprobs: 0,
            system: context::DEFAULT_SYSTEM.to_owned(),
            budget: ContextBudget {
                tokens: 8192,
                bytes_per_token: 3,
            },
            tokenizer: None,
            extensions: Extensions::Vllm,
            http: HttpSettings {
                api_key: std::env::var("OPENAI_API_KEY")
                    .ok()
                    .filter(|k| !k.is_empty()),
                ..HttpSettings::default()
            },
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("option {pair:?} is not KEY=VALUE"))?;
            let num = |v: &str| -> Result<f64, String> {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| format!("option {k}={v:?} is not a non-negative number"))
            };
            let int = |v: &str| -> Result<u64, String> {
                v.parse::<u64>()
                    .map_err(|_| format!("option {k}={v:?} is not a whole number"))
            };
            match k {
                "temperature" => cfg.temperature = num(v)?,
                "top_p" => {
                    cfg.top_p = num(v)?;
                    if cfg.top_p == 0.0 || cfg.top_p > 1.0 {
                        return Err(format!("option top_p={v} is not in (0, 1]"));
                    }
                }
                "max_tokens" => {
                    cfg.max_tokens = u32::try_from(int(v)?.max(1)).unwrap_or(u32::MAX);
                }
                "top_logprobs" => {
                    cfg.top_logprobs = u32::try_from(int(v)?.min(20)).unwrap_or(20);
                }
                "concurrency" => {
                    cfg.http.concurrency = usize::try_from(int(v)?.max(1)).unwrap_or(1)
                }
                "timeout_s" => {
                    let s = num(v)?;
                    if s == 0.0 {
                        return Err("option timeout_s must be positive".to_owned());
                    }
                    cfg.http.timeout = Duration::from_secs_f64(s);
                }
                "retries" => cfg.http.retries = u32::try_from(int(v)?).unwrap_or(u32::MAX),
                "context_tokens" => cfg.budget.tokens = usize::try_from(int(v)?).unwrap_or(0),
                "bytes_per_token" => {
                    cfg.budget.bytes_per_token = usize::try_from(int(v)?.max(1)).unwrap_or(1);
                }
                "system" => {
                    cfg.system = match v.strip_prefix('@') {
                        Some(path) => std::fs::read_to_string(path)
                            .map_err(|e| format!("option system=@{path}: {e}"))?,
                        None => v.replace('+', " "),
                    };
                }
                "tokenizer" => cfg.tokenizer = Some(v.to_owned()),
                "extensions" => {
                    cfg.extensions = match v {
                        "vllm" => Extensions::Vllm,
                        "none" => Extensions::None,
                        _ => return Err(format!("option extensions={v:?} is not vllm or none")),
                    };
                }
                "api_key_env" => {
                    cfg.http.api_key =
                        Some(std::env::var(v).map_err(|_| {
                            format!("option api_key_env={v}: the variable is not set")
                        })?);
                }
                _ => {
                    return Err(format!(
                        "unknown option {k:?} (temperature, top_p, max_tokens, top_logprobs, concurrency, timeout_s, retries, context_tokens, bytes_per_token, system, tokenizer, extensions, api_key_env)"
                    ));
                }
            }
        }
        Ok(cfg)
    }
}

/// The LLM policy.
#[derive(Debug)]
pub struct OpenAiPolicy {
    cfg: OpenAiConfig,
    client: JsonClient,
    model: String,
    /// The server's `/models` entry for the model, when it listed one.
    served: Option<Value>,
}

impl OpenAiPolicy {
    /// Connect: list the server's models (so a wrong URL or model fails
    /// here, by name, not at the first decision) and pick the model.
    ///
    /// # Errors
    /// A bad spec, an unreachable server, or a model it does not serve.
    pub async fn connect(spec: &str) -> Result<Self, String> {
        let cfg = OpenAiConfig::parse(spec)?;
        let client = JsonClient::new(&cfg.base, cfg.http.clone())?;
        let models = client
            .get("/models", 0)
            .await
            .map_err(|e| format!("the model server: {e}"))?;
        let list: Vec<Value> = models
            .get("data")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let id = |m: &Value| m.get("id").and_then(Value::as_str).map(str::to_owned);
        let (model, served) = match &cfg.model {
            Some(want) => {
                let entry = list
                    .iter()
                    .find(|m| id(m).as_deref() == Some(want))
                    .cloned();
                // Some servers (transformers serve) load any model on
                // request and list only some: keep the name as given.
                (want.clone(), entry)
            }
            None => {
                let first = list.first().ok_or_else(|| {
                    format!(
                        "{}/models lists no model: name one (openai:URL#MODEL)",
                        client.base()
                    )
                })?;
                (
                    id(first).ok_or_else(|| {
                        format!("{}/models: an entry without an id", client.base())
                    })?,
                    Some(first.clone()),
                )
            }
        };
        Ok(Self {
            cfg,
            client,
            model,
            served,
        })
    }

    /// The model id requests name.
    pub fn model(&self) -> &str {
        &self.model
    }

    fn sampling(&self, n: usize, seed: u64) -> Value {
        let mut s = json!({
            "temperature": self.cfg.temperature,
            "top_p": self.cfg.top_p,
            "max_tokens": self.cfg.max_tokens,
            "n": n,
            // Servers take a signed 64-bit (or smaller) seed.
            "seed": seed >> 33,
            "logprobs": true,
        });
        if self.cfg.top_logprobs > 0 {
            s["top_logprobs"] = json!(self.cfg.top_logprobs);
        }
        s
    }

    async fn request(
        &self,
        messages: &[Value],
        n: usize,
        seed: u64,
    ) -> Result<(Value, Value), PolicyError> {
        let sampling = self.sampling(n, seed);
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "tools": context::tools(),
            "tool_choice": "auto",
        });
        for (k, v) in sampling.as_object().into_iter().flatten() {
            body[k] = v.clone();
        }
        if self.cfg.extensions == Extensions::Vllm {
            body["return_tokens_as_token_ids"] = json!(true);
            body["return_token_ids"] = json!(true);
        }
        let resp = self
            .client
            .post("/chat/completions", &body, seed)
            .await
            .map_err(|e| self.fail(e.to_string()))?;
        Ok((resp, sampling))
    }

    fn fail(&self, message: String) -> PolicyError {
        PolicyError {
            policy: AsyncPolicy::name(self),
            message,
        }
    }

    /// One response choice as a [`Choice`].
    fn choice(
        &self,
        decision: &Decision,
        resp: &Value,
        c: &Value,
        messages: &[Value],
        truncated: bool,
        sampling: &Value,
    ) -> Choice {
        let message = c.get("message").cloned().unwrap_or(Value::Null);
        let (action, invalid) = match context::parse_reply(&message) {
            Parsed::Action(a) => (a, None),
            Parsed::Invalid(why) => (context::invalid_action(&why), Some(why)),
        };
        let (tokens, log_prob) = capture_tokens(c);
        let prompt_ids =
            ids_of(resp.get("prompt_token_ids")).or_else(|| ids_of(c.get("prompt_token_ids")));
        Choice {
            index: decision.candidates.iter().position(|x| *x == action),
            action,
            log_prob: log_prob.unwrap_or(0.0),
            // −log μ(y) of the sampled reply: a one-sample estimate of the
            // sequence entropy (what the entropy strategy thresholds).
            entropy: log_prob.map_or(0.0, |lp| -lp),
            version: 0,
            target_log_prob: None,
            tokens,
            generation: Some(Box::new(Generation {
                messages: Some(messages.to_vec()),
                tokenizer: prompt_ids.as_ref().map(|_| {
                    self.cfg
                        .tokenizer
                        .clone()
                        .unwrap_or_else(|| format!("{}#chat-template", self.model))
                }),
                prompt_ids,
                text: message
                    .get("content")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                sampling: Some(sampling.clone()),
                model: resp.get("model").and_then(Value::as_str).map(str::to_owned),
                finish_reason: c
                    .get("finish_reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                invalid,
                truncated_context: truncated,
            })),
        }
    }
}

/// `[1, 2, 3]` as ids.
fn ids_of(v: Option<&Value>) -> Option<Vec<u32>> {
    v?.as_array()?
        .iter()
        .map(|x| x.as_u64().and_then(|n| u32::try_from(n).ok()))
        .collect()
}

/// The reply's tokens: ids with log-probs when the server gave both
/// (`token_id:N` tokens or a `token_ids` list of the same length), and the
/// reply's total log-prob when it gave log-probs at all.
fn capture_tokens(c: &Value) -> (Option<Tokens>, Option<f64>) {
    let Some(content) = c
        .get("logprobs")
        .and_then(|l| l.get("content"))
        .and_then(Value::as_array)
    else {
        return (None, None);
    };
    let lps: Option<Vec<f64>> = content
        .iter()
        .map(|t| t.get("logprob").and_then(Value::as_f64))
        .collect();
    let Some(lps) = lps else {
        return (None, None);
    };
    let total = lps.iter().sum::<f64>();
    let from_tokens: Option<Vec<u32>> = content
        .iter()
        .map(|t| {
            t.get("token")
                .and_then(Value::as_str)
                .and_then(|s| s.strip_prefix("token_id:"))
                .and_then(|n| n.parse().ok())
        })
        .collect();
    let ids = from_tokens
        .or_else(|| ids_of(c.get("token_ids")))
        .filter(|ids| ids.len() == lps.len());
    (
        ids.map(|ids| Tokens {
            ids,
            log_probs: lps,
        }),
        Some(total),
    )
}

impl AsyncPolicy for OpenAiPolicy {
    fn name(&self) -> String {
        format!("openai({}#{})", self.cfg.base, self.model)
    }

    fn describe(&self) -> Option<Value> {
        Some(json!({
            "kind": "openai",
            "base": self.cfg.base,
            "model": self.model,
            // What the server said about the model (vLLM: `root`, the
            // weights' path or hub id and revision; `created`).
            "served": self.served,
            "revision": self.served.as_ref().and_then(|m| m.get("revision").or_else(|| m.get("root"))).cloned(),
            "system": self.cfg.system,
            "context_tokens": self.cfg.budget.tokens,
            "bytes_per_token": self.cfg.budget.bytes_per_token,
            "tokenizer": self.cfg.tokenizer,
            "temperature": self.cfg.temperature,
            "top_p": self.cfg.top_p,
            "max_tokens": self.cfg.max_tokens,
            "extensions": match self.cfg.extensions { Extensions::Vllm => "vllm", Extensions::None => "none" },
            "tools": context::tools(),
        }))
    }

    fn choose_n(&self, decision: Decision, n: usize, seed: u64) -> Choices<'_> {
        Box::pin(async move {
            let (messages, truncated) = context::build_messages(
                &self.cfg.system,
                &decision.observation,
                &decision.history,
                &decision.observations,
                &self.cfg.budget,
            );
            let mut out = Vec::with_capacity(n);
            let mut round = 0u64;
            while out.len() < n {
                let want = n - out.len();
                let (resp, sampling) = self
                    // Each round its own seed on the wire, which keeps the top 31 bits.
                    .request(&messages, want, seed.wrapping_add(round << 33))
                    .await?;
                let choices = resp
                    .get("choices")
                    .and_then(Value::as_array)
                    .filter(|c| !c.is_empty())
                    .ok_or_else(|| {
                        self.fail(format!(
                            "the answer has no choices: {}",
                            context::truncate_chars(&resp.to_string(), 300)
                        ))
                    })?;
                // A server that ignores `n` answers one choice: ask again for the rest.
                for c in choices.iter().take(want) {
                    out.push(self.choice(&decision, &resp, c, &messages, truncated, &sampling));
                }
                round += 1;
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests;
