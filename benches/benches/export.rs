//! Export throughput per trainer format: synthetic advantage records shaped
//! like an LLM policy's (a 1,024-token prompt, a 48-token response, four
//! siblings per state, chains of depth 8), written by
//! `arbor_rollout::export::formats::write` to a scratch file.
//!
//! Group `export`: one benchmark per format (`jsonl`, `verl`, `skyrl`,
//! `verifiers`, `trl`), criterion's throughput in records. Printed after the
//! criterion output: records/s (median of criterion's samples) and the file
//! size per format, with bytes per record.

use std::time::Instant;

use arbor_benches::{Xorshift64, quick_mode};
use arbor_envs::rollout::env::AgentAction;
use arbor_envs::rollout::export::formats::{Format, Normalise, write};
use arbor_envs::rollout::export::{AdvantageRecord, RECORD_SCHEMA, RecordContext, RecordLeaf};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const PROMPT: usize = 1024;
const RESPONSE: usize = 48;
const WIDTH: usize = 4;

/// `trees` trees, each a chain of `depth` branch points with `WIDTH`
/// siblings each (one sibling continues); child prompts extend the parent's.
fn records(trees: usize, depth: usize) -> Vec<AdvantageRecord> {
    let mut rng = Xorshift64::new(7);
    let mut out = Vec::new();
    for t in 0..trees {
        let tree_id = format!("{t:032x}");
        let mut prompt: Vec<u32> = (0..PROMPT).map(|_| rng.below(50_000) as u32).collect();
        let mut parent = None;
        let mut edge = 0;
        for d in 0..depth {
            let mut first = None;
            for k in 0..WIDTH {
                let tokens: Vec<u32> = (0..RESPONSE).map(|_| rng.below(50_000) as u32).collect();
                let adv = (rng.below(1000) as f64 / 1000.0) - 0.5;
                out.push(AdvantageRecord {
                    schema: RECORD_SCHEMA.to_owned(),
                    task: "bench".into(),
                    tree_id: tree_id.clone(),
                    edge,
                    parent_edge: parent,
                    depth: d,
                    state: format!("{:064x}", d),
                    next_state: format!("{:064x}", d + 1),
                    observation: String::new(),
                    candidates: Vec::new(),
                    history: Vec::new(),
                    chosen: None,
                    action: AgentAction::exec("true"),
                    action_text: "true".into(),
                    token_log_probs: Some(vec![-0.7; tokens.len()]),
                    token_advantages: Some(vec![adv; tokens.len()]),
                    behaviour_log_prob: -33.0,
                    target_log_prob: None,
                    entropy: 1.0,
                    policy_version: 0,
                    q: 0.5 + adv,
                    v: 0.5,
                    advantage: adv,
                    loo: None,
                    step_advantage: adv,
                    segment_advantage: adv,
                    interval: [0.1, 0.9],
                    n: 1,
                    visits: WIDTH as u32,
                    weight: 1.0 / WIDTH as f64,
                    leaves: 1,
                    siblings: WIDTH,
                    grpo: None,
                    leaf: (k > 0 || d + 1 == depth).then_some(RecordLeaf {
                        reward: Some((k % 2) as f64),
                        success: k % 2 == 1,
                        truncated: false,
                        fault: None,
                    }),
                    context: Some(RecordContext {
                        prompt_ids: Some(prompt.clone()),
                        tokenizer: Some("bench".into()),
                        response_text: Some("x".repeat(RESPONSE * 4)),
                        finish_reason: Some("stop".into()),
                        ..RecordContext::default()
                    }),
                    tokens: Some(tokens),
                });
                if k == 0 {
                    first = Some(edge);
                }
                edge += 1;
            }
            // The first sibling continues: its child's prompt extends this
            // prompt with its response and an observation.
            let cont = &out[out.len() - WIDTH];
            prompt.extend(cont.tokens.as_ref().unwrap());
            prompt.extend((0..64).map(|_| rng.below(50_000) as u32));
            parent = first;
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let (trees, depth) = if quick_mode() { (2, 4) } else { (16, 8) };
    let recs = records(trees, depth);
    let dir = tempfile::tempdir().expect("scratch");
    let mut g = c.benchmark_group("export");
    g.throughput(Throughput::Elements(recs.len() as u64));
    if quick_mode() {
        g.sample_size(10);
    }
    let mut rows = Vec::new();
    for (name, format) in Format::ALL {
        let path = dir.path().join(name);
        let mut rates = Vec::new();
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    write(&recs, format, Normalise::None, &path).expect("export");
                }
                let el = start.elapsed();
                rates.push(recs.len() as f64 * iters as f64 / el.as_secs_f64());
                el
            });
        });
        let bytes = std::fs::metadata(&path).expect("written").len();
        rates.sort_by(f64::total_cmp);
        let median = rates.get(rates.len() / 2).copied().unwrap_or(0.0);
        rows.push((name, median, bytes));
    }
    g.finish();
    let mut table = format!(
        "export: {} records ({} trees, {} prompt tokens at the root, {} response tokens, {} siblings)\n\n| format | records/s (median) | file | bytes/record |\n|---|---|---|---|\n",
        recs.len(),
        trees,
        PROMPT,
        RESPONSE,
        WIDTH
    );
    for (name, rate, bytes) in &rows {
        table.push_str(&format!(
            "| {name} | {rate:.0} | {:.2} MB | {:.0} |\n",
            *bytes as f64 / 1e6,
            *bytes as f64 / recs.len() as f64
        ));
    }
    println!("\n{table}");
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/arbor-bench");
    if std::fs::create_dir_all(&out).is_ok() {
        let _ = std::fs::write(out.join("export.md"), &table);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
