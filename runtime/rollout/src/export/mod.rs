//! What leaves Arbor for a trainer: one [`AdvantageRecord`] per edge (all a
//! trainer needs to recompute π(a|s)), same-state [`PreferencePair`]s for DPO,
//! an SVG drawing of a tree, and a streaming interface (a bounded channel of
//! records) for an attached trainer.
//!
//! Record schema: [`RECORD_SCHEMA`], documented field by field in
//! `runtime/rollout/SCHEMA.md` and given as JSON Schema in
//! `runtime/rollout/schema/advantage-record.v2.json`; [`validate_record`]
//! checks a record against the schema its tag names (version 1 records are
//! still read: the fields version 2 added take their defaults).
//! [`formats`] turns records into the sample layouts of verl, SkyRL,
//! verifiers and TRL.

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::credit::{Credit, CreditConfig, CreditError, estimate, grpo_advantages};
use crate::env::AgentAction;
use crate::tree::RolloutTree;

pub mod formats;

/// The schema tag of advantage records.
pub const RECORD_SCHEMA: &str = "arbor.advantage-record/2";
/// The tag of the first version, still read.
pub const RECORD_SCHEMA_V1: &str = "arbor.advantage-record/1";
/// The schema tag of preference pairs.
pub const PAIR_SCHEMA: &str = "arbor.preference-pair/1";
/// The JSON Schema of advantage records.
pub const RECORD_JSON_SCHEMA: &str = include_str!("../../schema/advantage-record.v2.json");
/// The JSON Schema of version 1 records.
pub const RECORD_JSON_SCHEMA_V1: &str = include_str!("../../schema/advantage-record.v1.json");

/// How the edge's target ended, when it is a leaf.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordLeaf {
    /// The verifier's reward (`None`: ungraded).
    pub reward: Option<f64>,
    /// Whether the verdict is a success.
    pub success: bool,
    /// Whether the budget cut the episode short.
    pub truncated: bool,
    /// The runtime fault that ended the path there, if one did.
    pub fault: Option<String>,
}

/// The prompt the action was sampled from, as a token-level policy saw it
/// (from the edge's generation record).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordContext {
    /// The prompt as chat messages, tool outputs included.
    pub messages: Option<Vec<serde_json::Value>>,
    /// The prompt's token ids, as the server returned them.
    pub prompt_ids: Option<Vec<u32>>,
    /// The tokenizer / chat template the ids belong to.
    pub tokenizer: Option<String>,
    /// The model's reply as text.
    pub response_text: Option<String>,
    /// The model that answered.
    pub model: Option<String>,
    /// The request's sampling parameters.
    pub sampling: Option<serde_json::Value>,
    /// Why generation stopped.
    pub finish_reason: Option<String>,
    /// Why the reply was not a valid action, when it was not.
    pub invalid: Option<String>,
    /// Whether the context was cut to the token budget.
    pub truncated_context: bool,
}

/// One edge of a rollout tree with its credit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdvantageRecord {
    /// [`RECORD_SCHEMA`] (or [`RECORD_SCHEMA_V1`] in a record read back).
    pub schema: String,
    /// The task.
    pub task: String,
    /// The tree's id: a digest of its task, policy, strategy, seed and root
    /// state (equal for the same tree exported twice, distinct across trees).
    #[serde(default)]
    pub tree_id: String,
    /// The edge's index in its tree.
    pub edge: usize,
    /// The edge into the source node (`None` at the root).
    #[serde(default)]
    pub parent_edge: Option<usize>,
    /// Depth of the source node.
    pub depth: usize,
    /// Snapshot id of the source node (the state).
    pub state: String,
    /// Snapshot id of the target node.
    pub next_state: String,
    /// The observation at the source node, as the policy read it.
    pub observation: String,
    /// The candidate actions offered there, as text (the last is `submit`).
    pub candidates: Vec<String>,
    /// The actions taken from the root to the state: policies that look at
    /// the episode so far need them to recompute π(a|s).
    pub history: Vec<AgentAction>,
    /// The index of the chosen action among them (`None` for a free-form action).
    pub chosen: Option<usize>,
    /// The action taken.
    pub action: AgentAction,
    /// Its text.
    pub action_text: String,
    /// Token ids of the action (token-level policies).
    pub tokens: Option<Vec<u32>>,
    /// Per-token behaviour log-probs (token-level policies).
    pub token_log_probs: Option<Vec<f64>>,
    /// Behaviour log μ(a|s) (what sampled the action).
    pub behaviour_log_prob: f64,
    /// log π(a|s) under the policy being trained, when the behaviour was an
    /// exploring mixture of it (`None`: the same policy). PPO's ratio is
    /// anchored on it; `exp(target − behaviour)` is the importance weight.
    #[serde(default)]
    pub target_log_prob: Option<f64>,
    /// Behaviour entropy at the state.
    pub entropy: f64,
    /// The policy version that chose it.
    pub policy_version: u64,
    /// Q̂(s, a).
    pub q: f64,
    /// V̂(s).
    pub v: f64,
    /// A(s, a) = Q̂ − V̂.
    pub advantage: f64,
    /// Leave-one-out advantage (`None` without siblings).
    pub loo: Option<f64>,
    /// r + γV̂(s') − V̂(s).
    pub step_advantage: f64,
    /// SPO-style segment advantage: V̂ at the end of the edge's segment (the
    /// next branch point or leaf) minus V̂ at its start (the previous branch
    /// point, or the root). Equal to `advantage` on an edge that leaves a
    /// branch point; on an edge inside a single-child chain it carries the
    /// credit of the segment it belongs to instead of 0.
    #[serde(default)]
    pub segment_advantage: f64,
    /// Wilson interval of Q̂.
    pub interval: [f64; 2],
    /// Identical samples merged into this edge.
    pub n: u32,
    /// Σn over the credited edges at the source: the samples drawn there.
    #[serde(default)]
    pub visits: u32,
    /// `n / visits`: this edge's share of the samples at its state.
    #[serde(default)]
    pub weight: f64,
    /// Count-weighted leaves under the edge.
    pub leaves: u32,
    /// Sibling edges at the state (distinct actions).
    pub siblings: usize,
    /// The GRPO advantage of the episode this edge starts, when the tree is an
    /// unbranched group (`independent` strategy) and the edge leaves the root.
    pub grpo: Option<f64>,
    /// How the target ended, when it is a leaf.
    #[serde(default)]
    pub leaf: Option<RecordLeaf>,
    /// The prompt of a token-level policy (`None` for discrete policies:
    /// `observation`, `candidates` and `history` are their context).
    #[serde(default)]
    pub context: Option<RecordContext>,
    /// The step advantage on every token of the action (VinePPO's mapping),
    /// when the action has tokens.
    #[serde(default)]
    pub token_advantages: Option<Vec<f64>>,
}

/// A same-state preference pair: two sibling actions whose Q̂ differ by more
/// than a margin (only the action differs), in the layout DPO trainers read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreferencePair {
    /// Always [`PAIR_SCHEMA`].
    pub schema: String,
    /// The task.
    pub task: String,
    /// The shared state's snapshot id.
    pub state: String,
    /// The observation (the prompt).
    pub prompt: String,
    /// The better action's text.
    pub chosen: String,
    /// The worse action's text.
    pub rejected: String,
    /// Q̂ of the chosen action.
    pub chosen_q: f64,
    /// Q̂ of the rejected action.
    pub rejected_q: f64,
}

/// A tree's credit with its node maps: `(credit, map, inverse)`, where
/// `map[credit node] = rollout node` and `inverse[rollout node] = credit node`
/// (`usize::MAX` for nodes left out).
pub type TreeCredit = (Credit, Vec<usize>, Vec<usize>);

/// Credit of a tree (faulted and unfinished branches excluded), with the
/// credit-node → rollout-node map. `None` when no graded leaf is left.
///
/// # Errors
/// When the tree is malformed (a bug in whatever built it).
pub fn tree_credit(
    tree: &RolloutTree,
    cfg: &CreditConfig,
) -> Result<Option<TreeCredit>, CreditError> {
    let Some((ct, map)) = tree.credit_tree() else {
        return Ok(None);
    };
    let credit = estimate(&ct, cfg)?;
    let mut inverse = vec![usize::MAX; tree.nodes.len()];
    for (ci, &n) in map.iter().enumerate() {
        inverse[n] = ci;
    }
    Ok(Some((credit, map, inverse)))
}

/// One record per edge of `tree` that leads to a graded leaf.
///
/// # Errors
/// When the tree is malformed.
pub fn records(
    tree: &RolloutTree,
    cfg: &CreditConfig,
) -> Result<Vec<AdvantageRecord>, CreditError> {
    let Some((credit, map, inverse)) = tree_credit(tree, cfg)? else {
        return Ok(Vec::new());
    };
    let segment = segment_advantages(tree, &credit, &inverse);
    let id = tree_id(tree);
    let independent = tree.strategy.starts_with("independent");
    let root_edges: Vec<usize> = tree.nodes[0]
        .edges
        .iter()
        .copied()
        .filter(|&e| inverse[tree.edges[e].to] != usize::MAX)
        .collect();
    let grpo: Vec<f64> = if independent {
        let rewards: Vec<f64> = root_edges
            .iter()
            .map(|&e| {
                let ci = inverse[tree.edges[e].to];
                credit.nodes[ci].leaf_mean
            })
            .collect();
        grpo_advantages(&rewards, 1e-6, true)
    } else {
        Vec::new()
    };
    let mut out = Vec::new();
    for (ci, &n) in map.iter().enumerate() {
        let node = &tree.nodes[n];
        let live: Vec<usize> = node
            .edges
            .iter()
            .copied()
            .filter(|&e| inverse[tree.edges[e].to] != usize::MAX)
            .collect();
        let visits: u32 = credit.edges[ci].iter().map(|ec| ec.n).sum();
        for (k, &e) in live.iter().enumerate() {
            let edge = &tree.edges[e];
            let ec = &credit.edges[ci][k];
            let target = &tree.nodes[edge.to];
            out.push(AdvantageRecord {
                schema: RECORD_SCHEMA.to_owned(),
                task: tree.task.clone(),
                tree_id: id.clone(),
                edge: e,
                parent_edge: node.parent_edge,
                depth: node.depth,
                state: node.snapshot.clone(),
                next_state: tree.nodes[edge.to].snapshot.clone(),
                observation: node.observation.text(),
                candidates: node.candidates.iter().map(AgentAction::text).collect(),
                history: tree.actions_to(n),
                chosen: edge.index,
                action_text: edge.action.text(),
                action: edge.action.clone(),
                tokens: edge.tokens.as_ref().map(|t| t.ids.clone()),
                token_log_probs: edge.tokens.as_ref().map(|t| t.log_probs.clone()),
                behaviour_log_prob: edge.log_prob,
                target_log_prob: edge.target_log_prob,
                entropy: edge.entropy,
                policy_version: edge.policy_version,
                q: ec.q,
                v: ec.v,
                advantage: ec.advantage,
                loo: ec.loo,
                step_advantage: ec.step_advantage,
                segment_advantage: segment[e],
                interval: [ec.interval.0, ec.interval.1],
                n: ec.n,
                visits,
                weight: if visits == 0 {
                    0.0
                } else {
                    f64::from(ec.n) / f64::from(visits)
                },
                leaves: ec.leaves,
                siblings: live.len(),
                grpo: (independent && n == 0)
                    .then(|| root_edges.iter().position(|&r| r == e).map(|i| grpo[i]))
                    .flatten(),
                leaf: target.leaf.as_ref().map(|l| RecordLeaf {
                    reward: l.verdict.reward,
                    success: l.verdict.success(),
                    truncated: l.truncated,
                    fault: target.fault.clone(),
                }),
                context: edge.generation.as_deref().map(|g| RecordContext {
                    messages: g.messages.clone(),
                    prompt_ids: g.prompt_ids.clone(),
                    tokenizer: g.tokenizer.clone(),
                    response_text: g.text.clone(),
                    model: g.model.clone(),
                    sampling: g.sampling.clone(),
                    finish_reason: g.finish_reason.clone(),
                    invalid: g.invalid.clone(),
                    truncated_context: g.truncated_context,
                }),
                token_advantages: edge
                    .tokens
                    .as_ref()
                    .map(|t| vec![ec.step_advantage; t.ids.len()]),
            });
        }
    }
    Ok(out)
}

/// A tree's id: the first 16 bytes (hex) of a BLAKE3 digest of its task,
/// policy, strategy, seed and root snapshot.
pub fn tree_id(tree: &RolloutTree) -> String {
    let mut h = blake3::Hasher::new();
    for part in [
        tree.task.as_str(),
        tree.policy.as_str(),
        tree.strategy.as_str(),
        &tree.seed.to_string(),
        tree.nodes.first().map_or("", |n| n.snapshot.as_str()),
    ] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().to_hex()[..32].to_owned()
}

/// The segment advantage of every edge (indexed by edge id; 0 for edges
/// left out of credit): segments run from a branch point (a node with two or
/// more credited edges, or the root) down a chain of single-child nodes to
/// the next branch point or leaf, and every edge of a segment gets
/// `V̂(end) − V̂(start)` (SPO, with the step rewards of the chain taken as 0,
/// as they are in rollout trees).
fn segment_advantages(tree: &RolloutTree, credit: &Credit, inverse: &[usize]) -> Vec<f64> {
    let live = |n: usize| -> Vec<usize> {
        tree.nodes[n]
            .edges
            .iter()
            .copied()
            .filter(|&e| inverse[tree.edges[e].to] != usize::MAX)
            .collect()
    };
    let v = |n: usize| credit.nodes[inverse[n]].v;
    let mut out = vec![0.0; tree.edges.len()];
    // (node, the start of the chain it is inside, if it is inside one)
    let mut stack: Vec<(usize, Option<usize>)> = vec![(0, None)];
    while let Some((n, inside)) = stack.pop() {
        let edges = live(n);
        let start = match inside {
            Some(s) if edges.len() == 1 => s,
            _ => n,
        };
        for e in edges {
            let mut end = tree.edges[e].to;
            loop {
                let below = live(end);
                if below.len() != 1 {
                    break;
                }
                end = tree.edges[below[0]].to;
            }
            out[e] = v(end) - v(start);
            stack.push((tree.edges[e].to, Some(start)));
        }
    }
    out
}

/// Sibling pairs whose Q̂ differ by more than `margin`.
///
/// # Errors
/// When the tree is malformed.
pub fn pairs(
    tree: &RolloutTree,
    cfg: &CreditConfig,
    margin: f64,
) -> Result<Vec<PreferencePair>, CreditError> {
    let recs = records(tree, cfg)?;
    let mut out = Vec::new();
    let mut by_state: std::collections::BTreeMap<(&str, usize), Vec<&AdvantageRecord>> =
        std::collections::BTreeMap::new();
    for r in &recs {
        by_state
            .entry((r.state.as_str(), r.depth))
            .or_default()
            .push(r);
    }
    for group in by_state.values() {
        for a in group {
            for b in group {
                if a.q - b.q > margin && a.action != b.action {
                    out.push(PreferencePair {
                        schema: PAIR_SCHEMA.to_owned(),
                        task: a.task.clone(),
                        state: a.state.clone(),
                        prompt: a.observation.clone(),
                        chosen: a.action_text.clone(),
                        rejected: b.action_text.clone(),
                        chosen_q: a.q,
                        rejected_q: b.q,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// Distinct (state, action) pairs with a non-zero advantage.
pub fn informative_pairs(records: &[AdvantageRecord]) -> usize {
    let set: std::collections::BTreeSet<(&str, String)> = records
        .iter()
        .filter(|r| r.advantage.abs() > 1e-12)
        .map(|r| (r.state.as_str(), r.action_text.clone()))
        .collect();
    set.len()
}

/// Send every record of `tree` on a bounded channel, waiting while it is full
/// (back-pressure for an attached trainer). Returns how many were sent;
/// stops early if the receiver is gone.
///
/// # Errors
/// When the tree is malformed.
pub async fn stream_records(
    tree: &RolloutTree,
    cfg: &CreditConfig,
    tx: &mpsc::Sender<AdvantageRecord>,
) -> Result<usize, CreditError> {
    let mut sent = 0;
    for r in records(tree, cfg)? {
        if tx.send(r).await.is_err() {
            break;
        }
        sent += 1;
    }
    Ok(sent)
}

/// Check a record (as JSON) against the JSON Schema of the version its
/// `schema` tag names ([`RECORD_JSON_SCHEMA`] or [`RECORD_JSON_SCHEMA_V1`]).
///
/// # Errors
/// An unknown tag, or the first violation, with its JSON path.
pub fn validate_record(record: &serde_json::Value) -> Result<(), String> {
    let text = match record.get("schema").and_then(serde_json::Value::as_str) {
        Some(RECORD_SCHEMA) => RECORD_JSON_SCHEMA,
        Some(RECORD_SCHEMA_V1) => RECORD_JSON_SCHEMA_V1,
        Some(other) => {
            return Err(format!(
                "$.schema: {other:?} is not an advantage record version this build reads ({RECORD_SCHEMA}, {RECORD_SCHEMA_V1})"
            ));
        }
        None => return Err("$: missing field \"schema\"".to_owned()),
    };
    let schema: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("the schema itself: {e}"))?;
    check(&schema, record, "$")
}

/// Read one advantage record from a JSON line: version 2, or version 1 (the
/// fields version 2 added take their defaults).
///
/// # Errors
/// Not JSON, an unknown schema tag, or a record that does not fit its schema.
pub fn parse_record(line: &str) -> Result<AdvantageRecord, String> {
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    validate_record(&v)?;
    serde_json::from_value(v).map_err(|e| e.to_string())
}

/// A small JSON Schema subset: `type` (string or list), `required`,
/// `properties`, `additionalProperties: false`, `items`, `enum`, `const`,
/// `minimum`, `minItems`, `maxItems`.
fn check(schema: &serde_json::Value, v: &serde_json::Value, at: &str) -> Result<(), String> {
    use serde_json::Value;
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => return Err(format!("{at}: bad type in schema")),
        };
        let ok = types.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "number" => v.is_number(),
            "integer" => v.is_u64() || v.is_i64(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => false,
        });
        if !ok {
            return Err(format!("{at}: expected {}, got {v}", types.join(" or ")));
        }
    }
    if let Some(c) = schema.get("const")
        && c != v
    {
        return Err(format!("{at}: must be {c}"));
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(v)
    {
        return Err(format!("{at}: {v} is not one of {options:?}"));
    }
    if let (Some(min), Some(x)) = (schema.get("minimum").and_then(Value::as_f64), v.as_f64())
        && x < min
    {
        return Err(format!("{at}: {x} is below {min}"));
    }
    if let Value::Object(obj) = v {
        if let Some(Value::Array(req)) = schema.get("required") {
            for r in req.iter().filter_map(Value::as_str) {
                if !obj.contains_key(r) {
                    return Err(format!("{at}: missing field {r:?}"));
                }
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        for (k, val) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(s) => check(s, val, &format!("{at}.{k}"))?,
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return Err(format!("{at}: unexpected field {k:?}"));
                }
                None => {}
            }
        }
    }
    if let Value::Array(items) = v {
        let n = items.len() as u64;
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && n < min
        {
            return Err(format!("{at}: {n} items, at least {min}"));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && n > max
        {
            return Err(format!("{at}: {n} items, at most {max}"));
        }
        if let Some(s) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                check(s, item, &format!("{at}[{i}]"))?;
            }
        }
    }
    Ok(())
}

/// Draw `tree` as SVG: depth left to right, leaves top to bottom; edges
/// labelled with Q̂, leaves coloured by verdict (green success, red failure,
/// grey fault or unfinished).
///
/// # Errors
/// When the tree is malformed.
pub fn svg(tree: &RolloutTree, cfg: &CreditConfig) -> Result<String, CreditError> {
    let credit = tree_credit(tree, cfg)?;
    let n = tree.nodes.len();
    // Vertical slots: leaves in depth-first order, parents centred over children.
    let mut y = vec![0.0f64; n];
    let mut next_leaf = 0.0;
    fn place(tree: &RolloutTree, node: usize, y: &mut [f64], next: &mut f64) {
        let kids: Vec<usize> = tree.nodes[node]
            .edges
            .iter()
            .map(|&e| tree.edges[e].to)
            .collect();
        if kids.is_empty() {
            y[node] = *next;
            *next += 1.0;
            return;
        }
        for &k in &kids {
            place(tree, k, y, next);
        }
        y[node] = (y[kids[0]] + y[kids[kids.len() - 1]]) / 2.0;
    }
    if n > 0 {
        place(tree, 0, &mut y, &mut next_leaf);
    }
    let max_depth = tree.nodes.iter().map(|x| x.depth).max().unwrap_or(0) + 1;
    let (dx, dy, pad) = (120.0, 22.0, 40.0);
    let width = pad * 2.0 + dx * max_depth as f64 + 80.0;
    let height = pad * 2.0 + dy * next_leaf.max(1.0);
    let pos = |node: usize| {
        let d = tree.nodes[node].depth as f64
            + if tree.nodes[node].origin == crate::tree::Origin::Terminal {
                0.5
            } else {
                0.0
            };
        (pad + d * dx, pad + y[node] * dy)
    };
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" font-family=\"monospace\" font-size=\"10\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{pad}\" y=\"18\" font-size=\"13\">{} — {} — {} (success {})</text>\n",
        xml(&tree.task),
        xml(&tree.policy),
        xml(&tree.strategy),
        tree.success_rate()
            .map_or("n/a".to_owned(), |r| format!("{:.0}%", r * 100.0)),
    );
    for e in &tree.edges {
        let (x1, y1) = pos(e.from);
        let (x2, y2) = pos(e.to);
        s.push_str(&format!(
            "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"#888\"/>\n"
        ));
        let q = credit.as_ref().and_then(|(c, _, inv)| {
            let ci = inv[e.from];
            if ci == usize::MAX || inv[e.to] == usize::MAX {
                return None;
            }
            let k = tree.nodes[e.from]
                .edges
                .iter()
                .filter(|&&x| inv[tree.edges[x].to] != usize::MAX)
                .position(|&x| x == e.id)?;
            Some(c.edges[ci][k].q)
        });
        if let Some(q) = q {
            let label = if e.count > 1 {
                format!("{q:.2}×{}", e.count)
            } else {
                format!("{q:.2}")
            };
            s.push_str(&format!(
                "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#345\"><title>{}</title>{label}</text>\n",
                (x1 + x2) / 2.0 - 10.0,
                (y1 + y2) / 2.0 - 3.0,
                xml(&e.action.text())
            ));
        }
    }
    for node in &tree.nodes {
        let (x, yy) = pos(node.id);
        let colour = match (&node.leaf, &node.fault) {
            (_, Some(_)) => "#aaa",
            (Some(l), _) if l.verdict.success() => "#2a2",
            (Some(l), _) if l.verdict.reward.is_some() => "#d33",
            (Some(_), _) => "#aaa",
            (None, _) if node.edges.is_empty() => "#aaa",
            (None, _) => "#357",
        };
        let r = if node.leaf.is_some() { 5 } else { 3 };
        s.push_str(&format!(
            "<circle cx=\"{x:.1}\" cy=\"{yy:.1}\" r=\"{r}\" fill=\"{colour}\"><title>{} {}</title></circle>\n",
            &node.snapshot[..node.snapshot.len().min(12)],
            node.leaf.as_ref().map_or(String::new(), |l| xml(&l.verdict.summary()))
        ));
    }
    s.push_str("</svg>\n");
    Ok(s)
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests;
