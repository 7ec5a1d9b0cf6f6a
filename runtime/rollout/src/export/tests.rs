use super::*;
use crate::env::{EnvObservation, HardConstraints, TaskOutcome, Verdict};
use crate::tree::{Budget, Edge, Leaf, Node, Origin, TreeStats};

/// A tree built edge by edge: `edge(from, count)` adds a child of
/// `from`, `leaf(node, reward, truncated)` ends a node.
struct Build(RolloutTree);

impl Build {
    fn new(strategy: &str) -> Self {
        let mut t = RolloutTree {
            task: "t".into(),
            policy: "p".into(),
            policy_info: None,
            strategy: strategy.into(),
            seed: 0,
            budget: Budget::default(),
            nodes: Vec::new(),
            edges: Vec::new(),
            stats: TreeStats::default(),
        };
        t.nodes.push(node(0, None, 0));
        Self(t)
    }

    fn edge(mut self, from: usize, count: u32) -> Self {
        let id = self.0.edges.len();
        let to = self.0.nodes.len();
        let depth = self.0.nodes[from].depth + 1;
        self.0.nodes.push(node(to, Some(id), depth));
        self.0.nodes[from].edges.push(id);
        self.0.edges.push(Edge {
            id,
            from,
            to,
            action: AgentAction::exec(format!("step {id}")),
            index: Some(id),
            log_prob: -1.0,
            target_log_prob: None,
            entropy: 1.0,
            policy_version: 0,
            tokens: None,
            generation: None,
            count,
            exit: None,
            duration_us: 0,
            reward: 0.0,
        });
        self
    }

    fn leaf(mut self, n: usize, reward: f64, truncated: bool) -> Self {
        let mut task = TaskOutcome {
            checks_total: 1,
            ..TaskOutcome::default()
        };
        task.record(
            "c".into(),
            if reward > 0.0 {
                Ok(())
            } else {
                Err("no".into())
            },
        );
        self.0.nodes[n].leaf = Some(Leaf {
            verdict: Verdict::graded(
                HardConstraints::default(),
                task,
                Default::default(),
                Default::default(),
            ),
            truncated,
        });
        self
    }
}

fn node(id: usize, parent_edge: Option<usize>, depth: usize) -> Node {
    Node {
        id,
        parent_edge,
        depth,
        snapshot: format!("s{id}"),
        observation: EnvObservation {
            task: "t".into(),
            instructions: String::new(),
            step: depth,
            last_action: None,
            output: String::new(),
            exit: None,
        },
        candidates: Vec::new(),
        edges: Vec::new(),
        leaf: None,
        origin: Origin::Step,
        fault: None,
    }
}

fn by_edge(recs: &[AdvantageRecord]) -> std::collections::HashMap<usize, &AdvantageRecord> {
    recs.iter().map(|r| (r.edge, r)).collect()
}

// 0 ─e0→ 1 (R 1)
//   ─e1→ 2 (R 0, truncated by the budget, or not)
#[test]
fn budget_truncated_leaves_are_left_out_of_credit_not_failed() {
    for truncated in [true, false] {
        let t = Build::new("uniform:2:1")
            .edge(0, 1)
            .edge(0, 1)
            .leaf(1, 1.0, false)
            .leaf(2, 0.0, truncated)
            .0;
        let recs = records(&t, &CreditConfig::default()).unwrap();
        let e = by_edge(&recs);
        if truncated {
            assert_eq!(t.success_rate(), Some(1.0));
            assert_eq!(t.truncated_leaves(), 1);
            assert!(!e.contains_key(&1), "the truncated edge got credit");
            assert_eq!(e[&0].advantage, 0.0, "a lone finished sibling has A = 0");
        } else {
            // Positive control: a finished 0 is a failure and gets A < 0.
            assert_eq!(t.success_rate(), Some(0.5));
            assert_eq!(e[&1].advantage, -0.5);
            assert_eq!(e[&0].advantage, 0.5);
        }
    }
}

// 0 ─e0 (n 2)→ 1 ─e1→ 2 ─e2→ 3 (R 1)
//                        ─e3→ 4 (R 0)
//   ─e4→ 5 ─e5→ 6 (R 0)
#[test]
fn edges_inside_chains_get_their_segment_advantage_and_merged_edges_their_count() {
    let t = Build::new("uniform:3:2")
        .edge(0, 2)
        .edge(1, 1)
        .edge(2, 1)
        .edge(2, 1)
        .edge(0, 1)
        .edge(5, 1)
        .leaf(3, 1.0, false)
        .leaf(4, 0.0, false)
        .leaf(6, 0.0, false)
        .0;
    let recs = records(&t, &CreditConfig::default()).unwrap();
    let e = by_edge(&recs);
    // V̂(2) = 1/2, V̂(0) = (2·1/2 + 0) / 3 = 1/3.
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    assert!(close(e[&0].advantage, 1.0 / 2.0 - 1.0 / 3.0));
    assert_eq!(e[&0].n, 2);
    // e1 has no sibling: A = 0, but it is part of e0's segment.
    assert_eq!(e[&1].advantage, 0.0);
    assert!(close(e[&1].segment_advantage, e[&0].advantage));
    assert!(close(e[&0].segment_advantage, e[&0].advantage));
    // Below the branch point at 2, segments start again.
    assert!(close(e[&2].segment_advantage, 0.5));
    assert!(close(e[&3].segment_advantage, -0.5));
    // e5 inside the other root segment.
    assert!(close(e[&5].segment_advantage, -1.0 / 3.0));
    assert!(close(e[&4].segment_advantage, e[&4].advantage));
    // Count-weighted, the segment advantages at the root sum to 0.
    let root: f64 = [0, 4]
        .iter()
        .map(|i| f64::from(e[i].n) * e[i].segment_advantage)
        .sum();
    assert!(root.abs() < 1e-12);
}

// A chain from the root without any branch point carries no credit.
#[test]
fn a_single_chain_has_zero_segment_advantage() {
    let t = Build::new("independent:1")
        .edge(0, 1)
        .edge(1, 1)
        .leaf(2, 1.0, false)
        .0;
    let recs = records(&t, &CreditConfig::default()).unwrap();
    assert!(recs.iter().all(|r| r.segment_advantage == 0.0));
    assert_eq!(recs.len(), 2);
}

// The fields version 2 added, on the tree of the chain test above.
#[test]
fn version_2_records_carry_tree_id_parent_visits_weight_leaf_and_token_advantages() {
    let mut t = Build::new("uniform:3:2")
        .edge(0, 2)
        .edge(1, 1)
        .edge(2, 1)
        .edge(2, 1)
        .edge(0, 1)
        .edge(5, 1)
        .leaf(3, 1.0, false)
        .leaf(4, 0.0, false)
        .leaf(6, 0.0, false)
        .0;
    t.edges[2].tokens = Some(crate::policy::Tokens {
        ids: vec![7, 8, 9],
        log_probs: vec![-0.1, -0.2, -0.3],
    });
    t.edges[2].generation = Some(Box::new(crate::policy::Generation {
        prompt_ids: Some(vec![1, 2]),
        tokenizer: Some("tok".into()),
        ..Default::default()
    }));
    let recs = records(&t, &CreditConfig::default()).unwrap();
    let e = by_edge(&recs);
    let id = tree_id(&t);
    assert_eq!(id.len(), 32);
    assert!(
        recs.iter()
            .all(|r| r.tree_id == id && r.schema == RECORD_SCHEMA)
    );
    let mut other = t.clone();
    other.seed = 1;
    assert_ne!(tree_id(&other), id, "a different tree gets a different id");
    // At the root: e0 carries 2 samples, e4 one.
    assert_eq!((e[&0].visits, e[&4].visits), (3, 3));
    assert!((e[&0].weight - 2.0 / 3.0).abs() < 1e-12);
    assert_eq!(e[&0].parent_edge, None);
    assert_eq!(e[&2].parent_edge, Some(1));
    assert_eq!((e[&2].visits, e[&2].weight), (2, 0.5));
    assert_eq!(e[&1].leaf, None);
    let leaf = e[&2].leaf.as_ref().unwrap();
    assert_eq!(
        (leaf.reward, leaf.success, leaf.truncated),
        (Some(1.0), true, false)
    );
    assert_eq!(e[&3].leaf.as_ref().unwrap().reward, Some(0.0));
    assert_eq!(e[&2].token_advantages, Some(vec![e[&2].step_advantage; 3]));
    assert_eq!(e[&3].token_advantages, None);
    let ctx = e[&2].context.as_ref().unwrap();
    assert_eq!(ctx.prompt_ids, Some(vec![1, 2]));
    assert!(e[&3].context.is_none());
    for r in &recs {
        validate_record(&serde_json::to_value(r).unwrap()).unwrap();
    }
}

#[test]
fn version_1_records_still_read_and_unknown_versions_are_refused() {
    let t = Build::new("uniform:2:1")
        .edge(0, 1)
        .edge(0, 1)
        .leaf(1, 1.0, false)
        .leaf(2, 0.0, false)
        .0;
    let rec = records(&t, &CreditConfig::default()).unwrap().remove(0);
    let mut obj = serde_json::to_value(&rec)
        .unwrap()
        .as_object()
        .unwrap()
        .clone();
    for k in [
        "tree_id",
        "parent_edge",
        "visits",
        "weight",
        "leaf",
        "context",
        "token_advantages",
    ] {
        obj.remove(k);
    }
    obj.insert("schema".into(), RECORD_SCHEMA_V1.into());
    let line = |o: &serde_json::Map<String, serde_json::Value>| {
        serde_json::Value::Object(o.clone()).to_string()
    };
    let back = parse_record(&line(&obj)).unwrap();
    assert_eq!(back.schema, RECORD_SCHEMA_V1);
    assert_eq!((back.q, back.edge, back.visits), (rec.q, rec.edge, 0));
    assert!(back.context.is_none());
    // The same object tagged version 2 lacks what version 2 requires.
    obj.insert("schema".into(), RECORD_SCHEMA.into());
    let e = parse_record(&line(&obj)).unwrap_err();
    assert!(e.contains("missing field \"tree_id\""), "{e}");
    obj.insert("schema".into(), "arbor.advantage-record/9".into());
    let e = parse_record(&line(&obj)).unwrap_err();
    assert!(e.contains("advantage-record/9"), "{e}");
    // Positive control: the current record reads back whole.
    assert_eq!(
        parse_record(&serde_json::to_string(&rec).unwrap()).unwrap(),
        rec
    );
}
