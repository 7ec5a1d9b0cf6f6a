//! The LLM policy's side of the conversation: the tools it offers (`bash`,
//! `write_file`, `read_file`, `submit`) and how they map to Arbor actions, the
//! context builder (system prompt, the task, every action *and its
//! observation*, cut to a token budget with a visible mark), and the parser
//! that turns a reply into an action or into a named reason it is not one.

use serde_json::{Value, json};

use crate::env::{AgentAction, EnvObservation};

/// What every `exec` that stands for an invalid reply starts with (so the
/// context builder can show it as what it was, not as a shell command).
const INVALID_MARK: &str = ": arbor-invalid-reply; ";

/// The shell text that stands for `cat -- PATH` of a `read_file` call.
const READ_PREFIX: &str = "cat -- ";

/// The default system prompt.
pub const DEFAULT_SYSTEM: &str = "You are a software agent working in a sandbox. The task's files are \
in /workspace, the current directory. Act only through the tools: `bash` runs a shell command, \
`write_file` replaces a file, `read_file` prints one, and `submit` ends the episode for grading. \
Call exactly one tool per reply.";

/// The tools, in the chat-completions `tools` format.
pub fn tools() -> Value {
    let f = |name: &str, description: &str, properties: Value, required: &[&str]| {
        json!({
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {
                    "type": "object",
                    "properties": properties,
                    "required": required,
                    "additionalProperties": false,
                },
            },
        })
    };
    json!([
        f(
            "bash",
            "Run a shell command in /workspace and see its output and exit status.",
            json!({
                "command": {"type": "string", "description": "The command, run by bash -c."},
                "timeout_s": {"type": "number", "description": "A time limit in seconds (optional)."},
            }),
            &["command"],
        ),
        f(
            "write_file",
            "Create or replace a file under /workspace with the given content.",
            json!({
                "path": {"type": "string", "description": "Path relative to /workspace."},
                "content": {"type": "string", "description": "The whole new content."},
            }),
            &["path", "content"],
        ),
        f(
            "read_file",
            "Print a file under /workspace.",
            json!({"path": {"type": "string", "description": "Path relative to /workspace."}}),
            &["path"],
        ),
        f(
            "submit",
            "End the episode: the workspace as it stands is graded.",
            json!({}),
            &[],
        ),
    ])
}

/// Single-quote `s` for a POSIX shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Undo [`shell_quote`] (`None` when `s` is not exactly one quoted word).
fn shell_unquote(s: &str) -> Option<String> {
    let inner = s.strip_prefix('\'')?.strip_suffix('\'')?;
    let mut out = String::new();
    let mut rest = inner;
    while let Some(i) = rest.find('\'') {
        out.push_str(&rest[..i]);
        rest = rest[i..].strip_prefix(r"'\''")?;
        out.push('\'');
    }
    out.push_str(rest);
    Some(out)
}

/// The action that stands for an invalid reply: it runs nothing but print
/// `reason` on stderr and exit 2, so the agent observes why (and the budget
/// counts the turn it spent).
pub fn invalid_action(reason: &str) -> AgentAction {
    AgentAction::exec(format!(
        "{INVALID_MARK}printf '%s\\n' {} >&2; exit 2",
        shell_quote(&format!("invalid reply: {reason}"))
    ))
}

/// A tool call (name and parsed arguments) as an action.
///
/// # Errors
/// An unknown tool or arguments that do not fit it, named.
pub fn action_of_call(name: &str, args: &Value) -> Result<AgentAction, String> {
    let obj = match args {
        Value::Object(o) => o,
        Value::Null => &serde_json::Map::new(),
        other => {
            return Err(format!(
                "the arguments of `{name}` are not an object: {other}"
            ));
        }
    };
    let string = |key: &str| -> Result<String, String> {
        match obj.get(key) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(format!("`{name}`: `{key}` is not a string: {other}")),
            None => Err(format!("`{name}` needs `{key}`")),
        }
    };
    let allowed: &[&str] = match name {
        "bash" => &["command", "timeout_s"],
        "write_file" => &["path", "content"],
        "read_file" => &["path"],
        "submit" => &[],
        _ => {
            return Err(format!(
                "unknown tool `{name}` (bash, write_file, read_file, submit)"
            ));
        }
    };
    if let Some(k) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!("`{name}` takes no argument `{k}`"));
    }
    match name {
        "bash" => {
            let command = string("command")?;
            let timeout_ms = match obj.get("timeout_s") {
                None | Some(Value::Null) => None,
                Some(v) => match v.as_f64() {
                    Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => {
                        Some((s * 1000.0) as u64)
                    }
                    _ => return Err(format!("`bash`: `timeout_s` = {v} is not in (0, 86400]")),
                },
            };
            Ok(AgentAction::Exec {
                command,
                timeout_ms,
            })
        }
        "write_file" => Ok(AgentAction::write(string("path")?, string("content")?)),
        "read_file" => Ok(AgentAction::exec(format!(
            "{READ_PREFIX}{}",
            shell_quote(&string("path")?)
        ))),
        _ => Ok(AgentAction::Submit),
    }
}

/// An action as the tool call the model made: `(name, arguments)`, or `None`
/// for an action that stands for an invalid reply.
pub fn call_of_action(a: &AgentAction) -> Option<(&'static str, Value)> {
    Some(match a {
        AgentAction::Exec {
            command,
            timeout_ms,
        } => {
            if command.starts_with(INVALID_MARK) {
                return None;
            }
            if let Some(path) = command
                .strip_prefix(READ_PREFIX)
                .and_then(shell_unquote)
                .filter(|_| timeout_ms.is_none())
            {
                ("read_file", json!({ "path": path }))
            } else {
                let mut args = json!({ "command": command });
                if let Some(ms) = timeout_ms {
                    args["timeout_s"] = json!(*ms as f64 / 1000.0);
                }
                ("bash", args)
            }
        }
        AgentAction::Write { path, content, .. } => {
            ("write_file", json!({"path": path, "content": content}))
        }
        AgentAction::Delete { path } => (
            "bash",
            json!({ "command": format!("rm -f -- {}", shell_quote(path)) }),
        ),
        AgentAction::Submit => ("submit", json!({})),
    })
}

/// What the model said, parsed: the tool call, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// A valid tool call.
    Action(AgentAction),
    /// Not an action, and why.
    Invalid(String),
}

/// Parse a chat-completions `message`: its first `tool_calls` entry, or, for
/// servers without a tool parser, a tool call written in the content (a
/// `<tool_call>{...}</tool_call>` block or a bare `{"name", "arguments"}`
/// object).
pub fn parse_reply(message: &Value) -> Parsed {
    if let Some(Value::Array(calls)) = message.get("tool_calls")
        && let Some(call) = calls.first()
    {
        let f = call.get("function").unwrap_or(&Value::Null);
        let Some(name) = f.get("name").and_then(Value::as_str) else {
            return Parsed::Invalid("a tool call without a function name".to_owned());
        };
        let args = match f.get("arguments") {
            Some(Value::String(s)) if s.trim().is_empty() => Value::Null,
            Some(Value::String(s)) => match serde_json::from_str(s) {
                Ok(v) => v,
                Err(e) => {
                    return Parsed::Invalid(format!(
                        "the arguments of `{name}` are not JSON ({e})"
                    ));
                }
            },
            Some(v) => v.clone(),
            None => Value::Null,
        };
        return match action_of_call(name, &args) {
            Ok(a) => Parsed::Action(a),
            Err(e) => Parsed::Invalid(e),
        };
    }
    let content = message
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let body = match (content.find("<tool_call>"), content.find("</tool_call>")) {
        (Some(a), Some(b)) if b > a => &content[a + "<tool_call>".len()..b],
        _ => content,
    };
    let body = body.trim();
    if body.is_empty() {
        return Parsed::Invalid("the reply has no tool call".to_owned());
    }
    match serde_json::from_str::<Value>(body) {
        Ok(v) if v.get("name").is_some_and(Value::is_string) => {
            let name = v["name"].as_str().unwrap_or_default();
            let args = match v.get("arguments").or_else(|| v.get("parameters")) {
                Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(Value::Null),
                Some(a) => a.clone(),
                None => Value::Null,
            };
            match action_of_call(name, &args) {
                Ok(a) => Parsed::Action(a),
                Err(e) => Parsed::Invalid(e),
            }
        }
        _ => Parsed::Invalid(format!(
            "the reply has no tool call (text: {:?})",
            truncate_chars(content, 120)
        )),
    }
}

/// The first `n` characters of `s` (with `…` when cut).
pub(crate) fn truncate_chars(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// What a tool message shows of an observation.
pub fn tool_output(obs: &EnvObservation) -> String {
    let mut s = obs.output.clone();
    if let Some(exit) = &obs.exit {
        if !s.is_empty() && !s.ends_with('\n') {
            s.push('\n');
        }
        s.push_str(&format!("[{}]", crate::env::describe_exit(exit)));
    }
    s
}

/// How the context is cut to the model's budget.
#[derive(Clone, Debug, PartialEq)]
pub struct ContextBudget {
    /// The budget in tokens for the prompt (0: no limit).
    pub tokens: usize,
    /// Bytes per token of the estimate (the policy has no tokenizer: it
    /// estimates; 3 is conservative for code and English).
    pub bytes_per_token: usize,
}

impl ContextBudget {
    fn estimate(&self, messages: &[Value]) -> usize {
        let bytes: usize = messages.iter().map(|m| m.to_string().len()).sum();
        bytes.div_ceil(self.bytes_per_token.max(1))
    }
}

/// The prompt at one decision: the system prompt, the task's instructions,
/// then every action (as the tool call it was) and its observation (as the
/// tool's output). When the estimate exceeds the budget, the oldest steps are
/// left out and a user message says how many (`truncated` is then true);
/// the latest step is always kept.
pub fn build_messages(
    system: &str,
    observation: &EnvObservation,
    history: &[AgentAction],
    observations: &[EnvObservation],
    budget: &ContextBudget,
) -> (Vec<Value>, bool) {
    let head = vec![
        json!({"role": "system", "content": system}),
        json!({"role": "user", "content": format!("Task {}:\n{}", observation.task, observation.instructions.trim())}),
    ];
    let mut steps: Vec<Vec<Value>> = Vec::with_capacity(history.len());
    for (i, action) in history.iter().enumerate() {
        let out = observations.get(i).map(tool_output).unwrap_or_default();
        let id = format!("call_{i}");
        steps.push(match call_of_action(action) {
            Some((name, args)) => vec![
                json!({"role": "assistant", "content": null, "tool_calls": [{
                    "id": id, "type": "function",
                    "function": {"name": name, "arguments": args.to_string()},
                }]}),
                json!({"role": "tool", "tool_call_id": id, "content": out}),
            ],
            None => vec![
                json!({"role": "assistant", "content": "(a reply that was not a valid tool call)"}),
                json!({"role": "user", "content": out}),
            ],
        });
    }
    let flat = |skip: usize, steps: &[Vec<Value>]| -> Vec<Value> {
        let mut m = head.clone();
        if skip > 0 {
            m.push(json!({"role": "user", "content": format!(
                "[{skip} earlier step{} left out to fit the context budget]",
                if skip == 1 { "" } else { "s" }
            )}));
        }
        m.extend(steps[skip..].iter().flatten().cloned());
        m
    };
    if budget.tokens == 0 {
        return (flat(0, &steps), false);
    }
    // The fewest left out that fit (the latest step is always kept).
    let mut skip = 0;
    while skip + 1 < steps.len() && budget.estimate(&flat(skip, &steps)) > budget.tokens {
        skip += 1;
    }
    (flat(skip, &steps), skip > 0)
}
