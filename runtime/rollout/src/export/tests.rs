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
