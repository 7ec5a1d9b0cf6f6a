use super::*;
use crate::env::AgentAction;
use crate::export::{RECORD_SCHEMA, RecordContext, RecordLeaf};

/// A token-level record: `edge` below `parent_edge`, with its prompt and
/// response ids and its step advantage.
fn rec(
    edge: usize,
    parent_edge: Option<usize>,
    prompt: &[u32],
    resp: &[u32],
    adv: f64,
) -> AdvantageRecord {
    AdvantageRecord {
        schema: RECORD_SCHEMA.to_owned(),
        task: "t".into(),
        tree_id: "tree".into(),
        edge,
        parent_edge,
        depth: 0,
        state: "s".into(),
        next_state: "s2".into(),
        observation: "obs".into(),
        candidates: Vec::new(),
        history: Vec::new(),
        chosen: None,
        action: AgentAction::exec("true"),
        action_text: "true".into(),
        tokens: Some(resp.to_vec()),
        token_log_probs: Some(resp.iter().map(|&t| -f64::from(t) / 10.0).collect()),
        behaviour_log_prob: -1.0,
        target_log_prob: None,
        entropy: 0.5,
        policy_version: 0,
        q: 0.5,
        v: 0.5,
        advantage: adv,
        loo: None,
        step_advantage: adv,
        segment_advantage: adv,
        interval: [0.0, 1.0],
        n: 1,
        visits: 2,
        weight: 0.5,
        leaves: 1,
        siblings: 2,
        grpo: None,
        leaf: Some(RecordLeaf {
            reward: Some(1.0),
            success: true,
            truncated: false,
            fault: None,
        }),
        context: Some(RecordContext {
            messages: Some(vec![json!({"role": "user", "content": "do it"})]),
            prompt_ids: Some(prompt.to_vec()),
            tokenizer: Some("tok".into()),
            response_text: Some(format!("reply {edge}")),
            finish_reason: Some("stop".into()),
            ..RecordContext::default()
        }),
        token_advantages: Some(vec![adv; resp.len()]),
    }
}

#[test]
fn a_record_without_prompt_ids_is_refused_by_name_and_one_with_them_is_not() {
    let good = rec(0, None, &[1, 2], &[3], 0.5);
    assert!(samples(std::slice::from_ref(&good), Format::Verl, Normalise::None).is_ok());
    let mut bad = good.clone();
    bad.context.as_mut().unwrap().prompt_ids = None;
    let e = samples(&[bad], Format::Verl, Normalise::None).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("`context.prompt_ids`") && msg.contains("verl"),
        "{msg}"
    );
    let mut no_tokens = good.clone();
    no_tokens.tokens = None;
    let msg = samples(&[no_tokens], Format::Skyrl, Normalise::None)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("`tokens`") && msg.contains("skyrl"), "{msg}");
    let mut ragged = good;
    ragged.token_log_probs = Some(vec![-1.0, -2.0]);
    let msg = samples(&[ragged], Format::Trl, Normalise::None)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("1 tokens but 2 log-probs"), "{msg}");
}

#[test]
fn normalisation_scales_by_the_state_or_batch_deviation() {
    let recs = vec![
        rec(0, None, &[1], &[2, 3], 0.25),
        rec(1, None, &[1], &[4], -0.25),
        rec(2, Some(0), &[1, 2, 3, 9], &[5], 2.0),
        rec(3, Some(0), &[1, 2, 3, 9], &[6], -2.0),
    ];
    let none = samples(&recs, Format::Verl, Normalise::None).unwrap();
    assert_eq!(none[0].token_advantages, vec![0.25, 0.25]);
    let state = samples(&recs, Format::Verl, Normalise::State).unwrap();
    // Each state's deviation is its |A|: every sample becomes ±1.
    let got: Vec<f64> = state.iter().map(|s| s.advantage).collect();
    assert_eq!(got, vec![1.0, -1.0, 1.0, -1.0]);
    assert_eq!(state[0].token_advantages, vec![1.0, 1.0]);
    let batch = samples(&recs, Format::Verl, Normalise::Batch).unwrap();
    let sd = ((2.0 * 0.0625 + 2.0 * 4.0) / 4.0f64).sqrt();
    assert!((batch[2].advantage - 2.0 / sd).abs() < 1e-12);
    assert_eq!(batch[0].uid, "tree/root");
    assert_eq!(batch[2].uid, "tree/e0");
}

#[test]
fn verl_parquet_reads_back_with_every_column() {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let recs = vec![
        rec(0, None, &[1, 2], &[3, 4, 5], 0.5),
        rec(1, None, &[1, 2], &[6], -0.5),
    ];
    let s = samples(&recs, Format::Verl, Normalise::None).unwrap();
    let bytes = verl_parquet(&s).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
    let b = &batches[0];
    assert_eq!(b.num_rows(), 2);
    for col in [
        "uid",
        "prompt_ids",
        "response_ids",
        "response_mask",
        "old_log_probs",
        "token_level_advantages",
    ] {
        assert!(b.column_by_name(col).is_some(), "no column {col}");
    }
    let resp = b
        .column_by_name("response_ids")
        .unwrap()
        .as_any()
        .downcast_ref::<arrow_array::ListArray>()
        .unwrap();
    let first = resp.value(0);
    let first = first.as_any().downcast_ref::<Int32Array>().unwrap();
    assert_eq!(first.values().to_vec(), vec![3, 4, 5]);
    assert_eq!(resp.value(1).len(), 1);
}

#[test]
fn the_message_graph_shares_prefixes_and_rebuilds_every_sample() {
    // Root prompt [1,2]; two siblings; the first's child prompt extends
    // [1,2] + [3] with an observation [7,8]; an unrelated prompt (cut
    // context) starts a new root.
    let recs = vec![
        rec(0, None, &[1, 2], &[3], 0.5),
        rec(1, None, &[1, 2], &[4], -0.5),
        rec(2, Some(0), &[1, 2, 3, 7, 8], &[5, 6], 0.0),
        rec(3, Some(1), &[9, 9], &[6], 0.0),
    ];
    let s = samples(&recs, Format::Verifiers, Normalise::None).unwrap();
    let g = verifiers(&s);
    let nodes = g["graphs"][0]["nodes"].as_array().unwrap();
    // prompt, resp0, resp1, obs, resp2, prompt', resp3
    assert_eq!(nodes.len(), 7, "{nodes:#?}");
    let path_tokens = |mut i: usize| {
        let mut parts = Vec::new();
        loop {
            parts.push(nodes[i]["token_ids"].as_array().unwrap().clone());
            match nodes[i]["parent"].as_u64() {
                Some(p) => i = p as usize,
                None => break,
            }
        }
        parts.reverse();
        parts
            .concat()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect::<Vec<u32>>()
    };
    let responses: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i]["sampled"] == true)
        .collect();
    assert_eq!(responses.len(), 4);
    for (k, &i) in responses.iter().enumerate() {
        let want = [
            recs[k]
                .context
                .as_ref()
                .unwrap()
                .prompt_ids
                .clone()
                .unwrap(),
            recs[k].tokens.clone().unwrap(),
        ]
        .concat();
        assert_eq!(path_tokens(i), want, "sample {k}");
        let mask = nodes[i]["mask"].as_array().unwrap();
        assert_eq!(nodes[i]["advantages"].as_array().unwrap().len(), mask.len());
    }
    // The observation node adds only [7, 8], and is not trainable.
    let obs = nodes[responses[2]]["parent"].as_u64().unwrap() as usize;
    assert_eq!(nodes[obs]["token_ids"], json!([7, 8]));
    assert_eq!(nodes[obs]["mask"], json!([false, false]));
    // Siblings share the root prompt.
    assert_eq!(nodes[responses[0]]["parent"], nodes[responses[1]]["parent"]);
    assert!(nodes[responses[3]]["parent"] != nodes[responses[0]]["parent"]);
}

#[test]
fn skyrl_groups_samples_of_a_state() {
    let recs = vec![
        rec(0, None, &[1], &[3], 0.5),
        rec(1, None, &[1], &[4], -0.5),
        rec(2, Some(0), &[1, 3], &[5], 0.0),
    ];
    let v = skyrl(&samples(&recs, Format::Skyrl, Normalise::None).unwrap());
    assert_eq!(
        v["trajectory_ids"][0],
        json!({"instance_id": "tree/root", "repetition_id": 0})
    );
    assert_eq!(
        v["trajectory_ids"][1],
        json!({"instance_id": "tree/root", "repetition_id": 1})
    );
    assert_eq!(
        v["trajectory_ids"][2],
        json!({"instance_id": "tree/e0", "repetition_id": 0})
    );
    assert_eq!(v["rewards"][0], json!([0.5]));
    assert_eq!(v["loss_masks"][0], json!([1]));
}

#[test]
fn a_refused_export_leaves_an_existing_file_alone() {
    let dir = tempfile_dir();
    let path = dir.join("out.parquet");
    std::fs::write(&path, b"keep me").unwrap();
    let mut bad = rec(0, None, &[1], &[2], 0.0);
    bad.context = None;
    assert!(write(&[bad], Format::Verl, Normalise::None, &path).is_err());
    assert_eq!(std::fs::read(&path).unwrap(), b"keep me");
    // Positive control: a good export replaces it.
    let w = write(
        &[rec(0, None, &[1], &[2], 0.0)],
        Format::Verl,
        Normalise::None,
        &path,
    )
    .unwrap();
    assert_eq!(w.rows, 1);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), w.bytes);
    assert_eq!(&std::fs::read(&path).unwrap()[..4], b"PAR1");
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(left.len(), 1, "no temporary file left behind");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "arbor-formats-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn format_names_parse_and_unknown_ones_list_the_options() {
    for (name, f) in Format::ALL {
        assert_eq!(name.parse::<Format>().unwrap(), f);
        assert_eq!(f.name(), name);
    }
    let e = "parquet".parse::<Format>().unwrap_err();
    assert!(e.contains("verl") && e.contains("\"parquet\""), "{e}");
    assert!("bogus".parse::<Normalise>().is_err());
    assert_eq!("state".parse::<Normalise>().unwrap(), Normalise::State);
}
