//! Advantage records in the layouts trainers read: one sample per edge
//! (prompt = the context at the edge's source, response = the action's
//! tokens), never root-to-leaf sequences, so a prefix shared by many leaves is
//! trained once, at the edge that produced it.
//!
//! - [`Format::Verl`]: Parquet (arrow-rs), one row per sample: `uid`,
//!   `prompt_ids`, `response_ids`, `response_mask`, `old_log_probs`,
//!   `token_level_advantages`, with `tree_id`, `task`, `edge`, `advantage`,
//!   `weight`, `n` and the leaf `reward` beside them.
//! - [`Format::Skyrl`]: a JSON object with SkyRL's `GeneratorOutput` fields
//!   (`prompt_token_ids`, `response_ids`, per-token `rewards`, `loss_masks`,
//!   `rollout_logprobs`, `trajectory_ids`, `stop_reasons`, `is_last_step`).
//! - [`Format::Verifiers`]: a verifiers-style message graph per tree: nodes
//!   with `parent`, `message`, `token_ids`, `mask`, `logprobs` and
//!   per-sampled-token `advantages`.
//! - [`Format::Trl`]: the dict a TRL GRPO `rollout_func` returns
//!   (`prompt_ids`, `completion_ids`, `logprobs`, `env_mask`) with
//!   `advantages` beside them.
//!
//! Every token format needs the prompt's token ids and the action's tokens;
//! a record without them is refused with an error that names the field.
//!
//! Normalisation ([`Normalise`]) scales the per-sample advantage (the step
//! advantage, which every response token carries): `none` keeps it, `state`
//! divides by the count-weighted standard deviation of the advantages of
//! the samples drawn at the same state (GRPO's per-group scale, without
//! re-centring: a tree advantage is already a baseline difference), and
//! `batch` divides by the standard deviation over the whole export.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{Float64Builder, Int8Builder, Int32Builder, ListBuilder};
use arrow_array::{ArrayRef, Float64Array, Int32Array, RecordBatch, StringArray, UInt32Array};
use arrow_schema::{DataType, Field, Schema};
use serde_json::{Value, json};

use super::AdvantageRecord;

/// An export layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Advantage records, one JSON object per line.
    Jsonl,
    /// verl: Parquet.
    Verl,
    /// SkyRL: `GeneratorOutput` as JSON.
    Skyrl,
    /// verifiers: a message graph as JSON.
    Verifiers,
    /// TRL: a GRPO `rollout_func` dict as JSON.
    Trl,
}

impl Format {
    /// Every format, by name.
    pub const ALL: [(&'static str, Format); 5] = [
        ("jsonl", Format::Jsonl),
        ("verl", Format::Verl),
        ("skyrl", Format::Skyrl),
        ("verifiers", Format::Verifiers),
        ("trl", Format::Trl),
    ];

    /// The format's name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("?", |(n, _)| n)
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, f)| *f)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|(n, _)| *n).collect();
                format!("unknown export format {s:?} (one of {})", names.join(", "))
            })
    }
}

/// How per-sample advantages are scaled (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Normalise {
    /// As estimated.
    #[default]
    None,
    /// Divided by the standard deviation at the sample's state.
    State,
    /// Divided by the standard deviation over the export.
    Batch,
}

impl std::str::FromStr for Normalise {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Self::None),
            "state" => Ok(Self::State),
            "batch" => Ok(Self::Batch),
            _ => Err(format!(
                "unknown normalisation {s:?} (one of none, state, batch)"
            )),
        }
    }
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// A record lacks a field the format needs.
    #[error(
        "the {format} export needs `{field}`, and edge {edge} of tree {tree_id} (task {task}) has none: \
         record it with an openai: policy whose server returns token ids, or a command: policy whose \
         replies carry `prompt_tokens`, `tokens` and `token_log_probs`"
    )]
    Missing {
        /// The format.
        format: &'static str,
        /// The missing field, as the record names it.
        field: &'static str,
        /// The edge.
        edge: usize,
        /// Its tree.
        tree_id: String,
        /// Its task.
        task: String,
    },
    /// Tokens and their log-probs disagree in length.
    #[error("edge {edge} of tree {tree_id}: {tokens} tokens but {log_probs} log-probs")]
    Ragged {
        /// The edge.
        edge: usize,
        /// Its tree.
        tree_id: String,
        /// Token count.
        tokens: usize,
        /// Log-prob count.
        log_probs: usize,
    },
    /// Writing failed.
    #[error("write {path}: {message}")]
    Write {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

/// One training sample: an edge, its prompt and its response.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The state group: `TREE_ID/root` or `TREE_ID/e<parent edge>` (samples
    /// with one uid share their prompt).
    pub uid: String,
    /// The tree.
    pub tree_id: String,
    /// The task.
    pub task: String,
    /// The edge.
    pub edge: usize,
    /// The edge into the source node.
    pub parent_edge: Option<usize>,
    /// The prompt's token ids.
    pub prompt_ids: Vec<u32>,
    /// The response's token ids.
    pub response_ids: Vec<u32>,
    /// Per response token: 1 for a model-sampled token (all of them: one
    /// sample is one model turn; observations are in the prompt).
    pub response_mask: Vec<u8>,
    /// Per response token: the behaviour log-prob.
    pub old_log_probs: Vec<f64>,
    /// Per response token: the (normalised) advantage.
    pub token_advantages: Vec<f64>,
    /// The (normalised) per-sample advantage.
    pub advantage: f64,
    /// `n / Σn` at the state.
    pub weight: f64,
    /// Samples merged into the edge.
    pub n: u32,
    /// The leaf reward when the edge ends in a leaf.
    pub reward: Option<f64>,
    /// Why generation stopped.
    pub stop_reason: Option<String>,
    /// The prompt's messages, when recorded.
    pub messages: Option<Vec<Value>>,
    /// The reply's text.
    pub response_text: String,
}

/// Records to samples, with `norm` applied.
///
/// # Errors
/// [`ExportError::Missing`] for a record without prompt ids or tokens,
/// [`ExportError::Ragged`] when tokens and log-probs disagree.
pub fn samples(
    records: &[AdvantageRecord],
    format: Format,
    norm: Normalise,
) -> Result<Vec<Sample>, ExportError> {
    let missing = |r: &AdvantageRecord, field| ExportError::Missing {
        format: format.name(),
        field,
        edge: r.edge,
        tree_id: r.tree_id.clone(),
        task: r.task.clone(),
    };
    let mut out = Vec::with_capacity(records.len());
    for r in records {
        let ctx = r.context.as_ref();
        let prompt_ids = ctx
            .and_then(|c| c.prompt_ids.clone())
            .ok_or_else(|| missing(r, "context.prompt_ids"))?;
        let response_ids = r.tokens.clone().ok_or_else(|| missing(r, "tokens"))?;
        let old_log_probs = r
            .token_log_probs
            .clone()
            .ok_or_else(|| missing(r, "token_log_probs"))?;
        if old_log_probs.len() != response_ids.len() {
            return Err(ExportError::Ragged {
                edge: r.edge,
                tree_id: r.tree_id.clone(),
                tokens: response_ids.len(),
                log_probs: old_log_probs.len(),
            });
        }
        out.push(Sample {
            uid: uid(&r.tree_id, r.parent_edge),
            tree_id: r.tree_id.clone(),
            task: r.task.clone(),
            edge: r.edge,
            parent_edge: r.parent_edge,
            response_mask: vec![1; response_ids.len()],
            token_advantages: Vec::new(),
            advantage: r.step_advantage,
            weight: r.weight,
            n: r.n,
            reward: r.leaf.as_ref().and_then(|l| l.reward),
            stop_reason: ctx.and_then(|c| c.finish_reason.clone()),
            messages: ctx.and_then(|c| c.messages.clone()),
            response_text: ctx
                .and_then(|c| c.response_text.clone())
                .unwrap_or_else(|| r.action_text.clone()),
            prompt_ids,
            response_ids,
            old_log_probs,
        });
    }
    normalise(&mut out, norm);
    for s in &mut out {
        s.token_advantages = vec![s.advantage; s.response_ids.len()];
    }
    Ok(out)
}

fn uid(tree_id: &str, parent_edge: Option<usize>) -> String {
    match parent_edge {
        None => format!("{tree_id}/root"),
        Some(e) => format!("{tree_id}/e{e}"),
    }
}

/// The count-weighted standard deviation of `(value, n)` pairs.
fn weighted_std(values: impl Iterator<Item = (f64, u32)> + Clone) -> f64 {
    let total: f64 = values.clone().map(|(_, n)| f64::from(n)).sum();
    if total <= 0.0 {
        return 0.0;
    }
    let mean = values.clone().map(|(v, n)| v * f64::from(n)).sum::<f64>() / total;
    let var = values
        .map(|(v, n)| f64::from(n) * (v - mean).powi(2))
        .sum::<f64>()
        / total;
    var.sqrt()
}

/// Divide by a standard deviation, leaving values alone where it is ~0
/// (then every advantage in the group is equal, and usually 0).
fn normalise(samples: &mut [Sample], norm: Normalise) {
    const EPS: f64 = 1e-9;
    match norm {
        Normalise::None => {}
        Normalise::Batch => {
            let sd = weighted_std(samples.iter().map(|s| (s.advantage, s.n)));
            if sd > EPS {
                for s in samples.iter_mut() {
                    s.advantage /= sd;
                }
            }
        }
        Normalise::State => {
            let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
            for (i, s) in samples.iter().enumerate() {
                groups.entry(s.uid.clone()).or_default().push(i);
            }
            for idx in groups.values() {
                let sd = weighted_std(idx.iter().map(|&i| (samples[i].advantage, samples[i].n)));
                if sd > EPS {
                    for &i in idx {
                        samples[i].advantage /= sd;
                    }
                }
            }
        }
    }
}

/// What [`write`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// Samples (or records, for JSON lines).
    pub rows: usize,
    /// Bytes on disk.
    pub bytes: u64,
}

/// Write `records` to `path` in `format`. The file appears whole or not at
/// all (written beside it, then renamed).
///
/// # Errors
/// As [`samples`], or when the file cannot be written.
pub fn write(
    records: &[AdvantageRecord],
    format: Format,
    norm: Normalise,
    path: &Path,
) -> Result<Written, ExportError> {
    let fail = |e: &dyn std::fmt::Display| ExportError::Write {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let (bytes, rows) = match format {
        Format::Jsonl => {
            let mut buf = Vec::new();
            for r in records {
                serde_json::to_writer(&mut buf, r).map_err(|e| fail(&e))?;
                buf.push(b'\n');
            }
            (buf, records.len())
        }
        _ => {
            let s = samples(records, format, norm)?;
            let bytes = match format {
                Format::Verl => verl_parquet(&s).map_err(|e| fail(&e))?,
                Format::Skyrl => json_bytes(&skyrl(&s)),
                Format::Verifiers => json_bytes(&verifiers(&s)),
                Format::Trl => json_bytes(&trl(&s)),
                Format::Jsonl => unreachable!("handled above"),
            };
            (bytes, s.len())
        }
    };
    let tmp = path.with_extension(format!(
        "{}.tmp-{}",
        path.extension().and_then(|e| e.to_str()).unwrap_or(""),
        std::process::id()
    ));
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(&e));
    }
    Ok(Written {
        rows,
        bytes: bytes.len() as u64,
    })
}

fn json_bytes(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    b
}

/// The verl table as Parquet bytes.
///
/// # Errors
/// When arrow or parquet refuse the data (a bug).
pub fn verl_parquet(samples: &[Sample]) -> Result<Vec<u8>, String> {
    fn ids(rows: impl Iterator<Item = Vec<i32>>) -> ArrayRef {
        let mut b = ListBuilder::new(Int32Builder::new()).with_field(item(DataType::Int32));
        for r in rows {
            b.values().append_slice(&r);
            b.append(true);
        }
        Arc::new(b.finish())
    }
    fn floats<'a>(rows: impl Iterator<Item = &'a [f64]>) -> ArrayRef {
        let mut b = ListBuilder::new(Float64Builder::new()).with_field(item(DataType::Float64));
        for r in rows {
            b.values().append_slice(r);
            b.append(true);
        }
        Arc::new(b.finish())
    }
    fn item(t: DataType) -> Arc<Field> {
        Arc::new(Field::new("item", t, false))
    }
    let as_i32 = |v: &[u32]| -> Vec<i32> { v.iter().map(|&x| x as i32).collect() };
    let mut mask = ListBuilder::new(Int8Builder::new()).with_field(item(DataType::Int8));
    for s in samples {
        for &m in &s.response_mask {
            mask.values().append_value(m as i8);
        }
        mask.append(true);
    }
    let list = |t: DataType| DataType::List(item(t));
    let schema = Arc::new(Schema::new(vec![
        Field::new("uid", DataType::Utf8, false),
        Field::new("tree_id", DataType::Utf8, false),
        Field::new("task", DataType::Utf8, false),
        Field::new("edge", DataType::UInt32, false),
        Field::new("prompt_ids", list(DataType::Int32), false),
        Field::new("response_ids", list(DataType::Int32), false),
        Field::new("response_mask", list(DataType::Int8), false),
        Field::new("old_log_probs", list(DataType::Float64), false),
        Field::new("token_level_advantages", list(DataType::Float64), false),
        Field::new("advantage", DataType::Float64, false),
        Field::new("weight", DataType::Float64, false),
        Field::new("n", DataType::Int32, false),
        Field::new("reward", DataType::Float64, true),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            samples.iter().map(|s| s.uid.as_str()),
        )),
        Arc::new(StringArray::from_iter_values(
            samples.iter().map(|s| s.tree_id.as_str()),
        )),
        Arc::new(StringArray::from_iter_values(
            samples.iter().map(|s| s.task.as_str()),
        )),
        Arc::new(UInt32Array::from_iter_values(
            samples.iter().map(|s| s.edge as u32),
        )),
        ids(samples.iter().map(|s| as_i32(&s.prompt_ids))),
        ids(samples.iter().map(|s| as_i32(&s.response_ids))),
        Arc::new(mask.finish()),
        floats(samples.iter().map(|s| s.old_log_probs.as_slice())),
        floats(samples.iter().map(|s| s.token_advantages.as_slice())),
        Arc::new(Float64Array::from_iter_values(
            samples.iter().map(|s| s.advantage),
        )),
        Arc::new(Float64Array::from_iter_values(
            samples.iter().map(|s| s.weight),
        )),
        Arc::new(Int32Array::from_iter_values(
            samples.iter().map(|s| s.n as i32),
        )),
        Arc::new(Float64Array::from_iter(samples.iter().map(|s| s.reward))),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(&mut out, schema, None).map_err(|e| e.to_string())?;
    w.write(&batch).map_err(|e| e.to_string())?;
    w.close().map_err(|e| e.to_string())?;
    Ok(out)
}

/// SkyRL's `GeneratorOutput` (JSON): `rewards` are per token and carry the
/// token advantages, for a pass-through advantage estimator;
/// `trajectory_ids` group the samples of one state (`instance_id` = uid,
/// `repetition_id` = the sample's index in its group).
pub fn skyrl(samples: &[Sample]) -> Value {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let trajectory_ids: Vec<Value> = samples
        .iter()
        .map(|s| {
            let k = seen.entry(s.uid.as_str()).or_insert(0);
            let id = json!({"instance_id": s.uid, "repetition_id": *k});
            *k += 1;
            id
        })
        .collect();
    json!({
        "prompt_token_ids": samples.iter().map(|s| &s.prompt_ids).collect::<Vec<_>>(),
        "response_ids": samples.iter().map(|s| &s.response_ids).collect::<Vec<_>>(),
        "rewards": samples.iter().map(|s| &s.token_advantages).collect::<Vec<_>>(),
        "loss_masks": samples.iter().map(|s| &s.response_mask).collect::<Vec<_>>(),
        "rollout_logprobs": samples.iter().map(|s| &s.old_log_probs).collect::<Vec<_>>(),
        "stop_reasons": samples
            .iter()
            .map(|s| s.stop_reason.clone().unwrap_or_else(|| "stop".to_owned()))
            .collect::<Vec<_>>(),
        "trajectory_ids": trajectory_ids,
        "is_last_step": samples.iter().map(|s| s.reward.is_some()).collect::<Vec<_>>(),
        "rollout_metrics": null,
        "arbor": {
            "tree_ids": samples.iter().map(|s| &s.tree_id).collect::<Vec<_>>(),
            "edges": samples.iter().map(|s| s.edge).collect::<Vec<_>>(),
            "weights": samples.iter().map(|s| s.weight).collect::<Vec<_>>(),
            "leaf_rewards": samples.iter().map(|s| s.reward).collect::<Vec<_>>(),
        },
    })
}

/// TRL's GRPO `rollout_func` dict (JSON): `prompt_ids`, `completion_ids`,
/// `logprobs`, `env_mask` (1 on every completion token), and `advantages`
/// (per sample) with `token_advantages`, `uids` and `weights` as extra
/// keys (TRL hands extra keys to reward functions; its GRPO trainer
/// recomputes advantages from group rewards, so using Arbor's needs a
/// trainer that reads them).
pub fn trl(samples: &[Sample]) -> Value {
    json!({
        "prompt_ids": samples.iter().map(|s| &s.prompt_ids).collect::<Vec<_>>(),
        "completion_ids": samples.iter().map(|s| &s.response_ids).collect::<Vec<_>>(),
        "logprobs": samples.iter().map(|s| &s.old_log_probs).collect::<Vec<_>>(),
        "env_mask": samples.iter().map(|s| &s.response_mask).collect::<Vec<_>>(),
        "advantages": samples.iter().map(|s| s.advantage).collect::<Vec<_>>(),
        "token_advantages": samples.iter().map(|s| &s.token_advantages).collect::<Vec<_>>(),
        "uids": samples.iter().map(|s| &s.uid).collect::<Vec<_>>(),
        "weights": samples.iter().map(|s| s.weight).collect::<Vec<_>>(),
    })
}

/// A verifiers-style message graph per tree (`{"graphs": [{tree_id, task,
/// nodes}]}`). Each node adds tokens to the sequence of its path:
/// a prompt node (mask all false) holds a whole prompt; where a sample's
/// prompt extends its parent sample's prompt and response, an observation
/// node (mask false) holds only the tokens added in between, below the
/// parent's response node; a response node (mask all true) holds the
/// sampled tokens with their `logprobs` and `advantages`. Concatenating
/// `token_ids` along a path gives exactly `prompt_ids + response_ids` of the
/// sample whose response ends it. Siblings share their prompt node.
pub fn verifiers(samples: &[Sample]) -> Value {
    let mut graphs: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        graphs.entry(s.tree_id.as_str()).or_default().push(s);
    }
    let mut out = Vec::new();
    for (tree_id, mut list) in graphs {
        // Parents before children: an edge id is assigned when it is added,
        // so a parent edge's id is below its children's.
        list.sort_by_key(|s| s.edge);
        let by_edge: BTreeMap<usize, &Sample> = list.iter().map(|s| (s.edge, *s)).collect();
        let mut nodes: Vec<Value> = Vec::new();
        let mut response_node: BTreeMap<usize, usize> = BTreeMap::new();
        // (parent node, the prompt tokens it adds) -> node, so siblings share it
        let mut prompt_node: BTreeMap<(Option<usize>, Vec<u32>), usize> = BTreeMap::new();
        for s in &list {
            let message = s
                .messages
                .as_ref()
                .and_then(|m| m.last())
                .map(graph_message)
                .unwrap_or_else(|| json!({"role": "user", "content": ""}));
            let extends = s.parent_edge.and_then(|p| {
                let parent = by_edge.get(&p)?;
                let node = *response_node.get(&p)?;
                let base = parent.prompt_ids.len() + parent.response_ids.len();
                let prefix = s.prompt_ids.get(..base)?;
                (prefix[..parent.prompt_ids.len()] == parent.prompt_ids[..]
                    && prefix[parent.prompt_ids.len()..] == parent.response_ids[..])
                    .then_some((node, base))
            });
            let (parent, added) = match extends {
                Some((node, base)) => (Some(node), s.prompt_ids[base..].to_vec()),
                None => (None, s.prompt_ids.clone()),
            };
            let key = (parent, added.clone());
            let prompt = match prompt_node.get(&key) {
                Some(&i) => i,
                None => {
                    nodes.push(json!({
                        "parent": parent,
                        "message": message,
                        "sampled": false,
                        "token_ids": added,
                        "mask": vec![false; added.len()],
                        "logprobs": [],
                    }));
                    prompt_node.insert(key, nodes.len() - 1);
                    nodes.len() - 1
                }
            };
            nodes.push(json!({
                "parent": prompt,
                "message": {"role": "assistant", "content": s.response_text},
                "sampled": true,
                "token_ids": s.response_ids,
                "mask": vec![true; s.response_ids.len()],
                "logprobs": s.old_log_probs,
                "advantages": s.token_advantages,
                "loss_weights": {"arbor_weight": vec![s.weight; s.response_ids.len()]},
            }));
            response_node.insert(s.edge, nodes.len() - 1);
        }
        let task = list.first().map_or("", |s| s.task.as_str());
        out.push(json!({"tree_id": tree_id, "task": task, "nodes": nodes}));
    }
    json!({"schema": "arbor.verifiers-graph/1", "graphs": out})
}

/// An OpenAI chat message as a verifiers message: tool calls flattened to
/// `{id, type, name, arguments}`, content as text.
fn graph_message(m: &Value) -> Value {
    let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
    let content = match m.get("content") {
        Some(Value::String(s)) => Value::String(s.clone()),
        Some(Value::Null) | None => Value::String(String::new()),
        Some(other) => Value::String(other.to_string()),
    };
    match role {
        "tool" => json!({
            "role": "tool",
            "tool_call_id": m.get("tool_call_id").and_then(Value::as_str).unwrap_or(""),
            "content": content,
        }),
        "assistant" => {
            let calls: Vec<Value> = m
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(|calls| {
                    calls
                        .iter()
                        .map(|c| {
                            let f = c.get("function").unwrap_or(c);
                            json!({
                                "id": c.get("id").and_then(Value::as_str).unwrap_or(""),
                                "type": "function",
                                "name": f.get("name").and_then(Value::as_str).unwrap_or(""),
                                "arguments": match f.get("arguments") {
                                    Some(Value::String(s)) => s.clone(),
                                    Some(v) => v.to_string(),
                                    None => "{}".to_owned(),
                                },
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            json!({"role": "assistant", "content": content, "tool_calls": if calls.is_empty() { Value::Null } else { Value::Array(calls) }})
        }
        "system" => json!({"role": "system", "content": content}),
        _ => json!({"role": "user", "content": content}),
    }
}

#[cfg(test)]
mod tests;
