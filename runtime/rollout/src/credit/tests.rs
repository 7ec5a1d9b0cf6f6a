use super::*;
use proptest::prelude::*;

const TOL: f64 = 1e-12;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()))
}

fn assert_close(actual: f64, expected: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= TOL,
        "{what}: got {actual}, expected {expected}"
    );
}

/// Builds a tree from `(parent, count, step_reward)` per node (ignored for the root),
/// terminal rewards for leaves, and potentials. Node order is the caller's.
struct Builder {
    nodes: Vec<CreditNode>,
}

impl Builder {
    fn new(n: usize) -> Self {
        Self {
            nodes: (0..n)
                .map(|_| CreditNode {
                    parent: None,
                    edges: Vec::new(),
                    terminal_reward: None,
                    potential: 0.0,
                })
                .collect(),
        }
    }
    fn edge(mut self, from: usize, to: usize, count: u32, step_reward: f64) -> Self {
        self.nodes[from].edges.push(CreditEdge {
            child: to,
            count,
            step_reward,
        });
        self.nodes[to].parent = Some(from);
        self
    }
    fn leaf(mut self, node: usize, reward: f64) -> Self {
        self.nodes[node].terminal_reward = Some(reward);
        self
    }
    fn potential(mut self, node: usize, phi: f64) -> Self {
        self.nodes[node].potential = phi;
        self
    }
    fn build(self) -> CreditTree {
        CreditTree { nodes: self.nodes }
    }
}

fn cfg(gamma: f64, shaping: bool) -> CreditConfig {
    CreditConfig {
        gamma,
        wilson_z: 1.96,
        shaping,
    }
}

// Root with two edges, one merged from two identical siblings.
#[test]
fn root_with_a_merged_edge() {
    let tree = Builder::new(3)
        .edge(0, 1, 2, 0.0)
        .edge(0, 2, 1, 0.0)
        .leaf(1, 1.0)
        .leaf(2, 0.0)
        .build();
    let credit = estimate(&tree, &CreditConfig::default()).unwrap();
    let root = &credit.nodes[0];
    assert_close(root.v, 2.0 / 3.0, "V(root)");
    assert_close(root.leaf_mean, 2.0 / 3.0, "M(root)");
    assert_eq!(root.leaves, 3);
    assert_close(root.p_var, 2.0 / 9.0, "p_var(root)");
    let [a, b] = credit.edges[0].as_slice() else {
        panic!("root should have two edges");
    };
    assert_close(a.q, 1.0, "Q(a)");
    assert_close(b.q, 0.0, "Q(b)");
    assert_close(a.advantage, 1.0 / 3.0, "A(a)");
    assert_close(b.advantage, -2.0 / 3.0, "A(b)");
    // K = 3: a's others are one copy of a (Q 1) and b (Q 0); b's others are two a's.
    assert_close(a.loo.unwrap(), 1.0 - 0.5, "loo(a)");
    assert_close(b.loo.unwrap(), 0.0 - 1.0, "loo(b)");
    assert_close(a.step_advantage, 1.0 / 3.0, "step(a)");
    assert_eq!((a.n, a.leaves, b.n, b.leaves), (2, 2, 1, 1));
    // Wilson with p̂ = 1, n = 2, z = 1.96: (1/(1 + z²/2), 1).
    let z2 = 1.96_f64 * 1.96;
    assert_close(a.interval.0, 1.0 / (1.0 + z2 / 2.0), "interval(a).lo");
    assert_close(a.interval.1, 1.0, "interval(a).hi");
    assert_close(b.interval.0, 0.0, "interval(b).lo");
    assert_close(b.interval.1, z2 / (1.0 + z2), "interval(b).hi");
    assert_eq!(credit.nodes[1].leaves, 1);
    assert_close(credit.nodes[1].v, 1.0, "V(leaf)");
    assert!(credit.edges[1].is_empty() && credit.edges[2].is_empty());
}

// Depth 3, unbalanced: branch mean and leaf mean differ.
//   0 ─1→ 1 ─1→ 3 ─1→ 5 (R 1), ─1→ 6 (R 0), ─1→ 7 (R 0)
//              ─2→ 4 (R 1)
//     ─1→ 2 (R 0)
#[test]
fn depth_three_unbalanced() {
    let tree = Builder::new(8)
        .edge(0, 1, 1, 0.0)
        .edge(0, 2, 1, 0.0)
        .edge(1, 3, 1, 0.0)
        .edge(1, 4, 2, 0.0)
        .edge(3, 5, 1, 0.0)
        .edge(3, 6, 1, 0.0)
        .edge(3, 7, 1, 0.0)
        .leaf(2, 0.0)
        .leaf(4, 1.0)
        .leaf(5, 1.0)
        .leaf(6, 0.0)
        .leaf(7, 0.0)
        .build();
    let c = estimate(&tree, &CreditConfig::default()).unwrap();
    let expect_nodes = [
        (0, 7.0 / 18.0, 1.0 / 2.0, 6),
        (1, 7.0 / 9.0, 3.0 / 5.0, 5),
        (3, 1.0 / 3.0, 1.0 / 3.0, 3),
    ];
    for (s, v, m, leaves) in expect_nodes {
        assert_close(c.nodes[s].v, v, &format!("V({s})"));
        assert_close(c.nodes[s].leaf_mean, m, &format!("M({s})"));
        assert_eq!(c.nodes[s].leaves, leaves, "leaves({s})");
    }
    assert_close(c.nodes[0].p_var, 77.0 / 324.0, "p_var(0)");
    // (node, edge, Q, A, loo, step advantage, leaves)
    let expect_edges = [
        (0, 0, 7.0 / 9.0, 7.0 / 18.0, 7.0 / 9.0, 7.0 / 18.0, 5),
        (0, 1, 0.0, -7.0 / 18.0, -7.0 / 9.0, -7.0 / 18.0, 1),
        (1, 0, 1.0 / 3.0, -4.0 / 9.0, -2.0 / 3.0, -4.0 / 9.0, 3),
        (1, 1, 1.0, 2.0 / 9.0, 1.0 / 3.0, 2.0 / 9.0, 2),
        (3, 0, 1.0, 2.0 / 3.0, 1.0, 2.0 / 3.0, 1),
        (3, 1, 0.0, -1.0 / 3.0, -1.0 / 2.0, -1.0 / 3.0, 1),
        (3, 2, 0.0, -1.0 / 3.0, -1.0 / 2.0, -1.0 / 3.0, 1),
    ];
    for (s, i, q, a, loo, step, leaves) in expect_edges {
        let e = &c.edges[s][i];
        assert_close(e.q, q, &format!("Q({s},{i})"));
        assert_close(e.v, c.nodes[s].v, &format!("v({s},{i})"));
        assert_close(e.advantage, a, &format!("A({s},{i})"));
        assert_close(e.loo.unwrap(), loo, &format!("loo({s},{i})"));
        assert_close(e.step_advantage, step, &format!("step({s},{i})"));
        assert_eq!(e.leaves, leaves, "leaves({s},{i})");
    }
    // 0→1 leads to an unbalanced node: Q̂ is its value, not its leaf mean.
    assert!((c.edges[0][0].q - c.nodes[1].leaf_mean).abs() > 0.1);
}

// Counts that are episode counts (4 episodes sampled through shared
// prefixes): V̂ is the plain mean of the episodes' returns at every node.
//   0 ─3→ 1 ─2→ 2 ─1→ 4 (R 1)
//                 ─1→ 5 (R 0)
//           ─1→ 3 (R 1)
//     ─1→ 6 (R 0)
#[test]
fn episode_counts_give_the_monte_carlo_mean() {
    let tree = Builder::new(7)
        .edge(0, 1, 3, 0.0)
        .edge(0, 6, 1, 0.0)
        .edge(1, 2, 2, 0.0)
        .edge(1, 3, 1, 0.0)
        .edge(2, 4, 1, 0.0)
        .edge(2, 5, 1, 0.0)
        .leaf(3, 1.0)
        .leaf(4, 1.0)
        .leaf(5, 0.0)
        .leaf(6, 0.0)
        .build();
    let c = estimate(&tree, &CreditConfig::default()).unwrap();
    // Episodes: (1,2,4) R 1, (1,2,5) R 0, (1,3) R 1, (6) R 0.
    assert_close(c.nodes[0].v, 2.0 / 4.0, "V(0): the mean of the 4 episodes");
    assert_close(c.nodes[1].v, 2.0 / 3.0, "V(1): the mean of its 3 episodes");
    assert_close(c.nodes[2].v, 1.0 / 2.0, "V(2)");
    // The product-of-counts leaf mean is biased towards the deeper path.
    assert_close(c.nodes[1].leaf_mean, 3.0 / 5.0, "M(1)");
    assert_close(c.nodes[0].leaf_mean, 9.0 / 16.0, "M(0)");
    assert_close(c.edges[0][0].q, 2.0 / 3.0, "Q(0→1)");
}

// Step rewards, γ = 0.9, and shaping.
//   0 ─(r .5)→ 1 ─(r .2)→ 3 (R 1)
//                ─(r 0)→  4 (R 0)
//     ─(r 0)→  2 (R 1)
#[test]
fn step_rewards_with_discount_and_shaping() {
    let tree = Builder::new(5)
        .edge(0, 1, 1, 0.5)
        .edge(0, 2, 1, 0.0)
        .edge(1, 3, 1, 0.2)
        .edge(1, 4, 1, 0.0)
        .leaf(2, 1.0)
        .leaf(3, 1.0)
        .leaf(4, 0.0)
        .potential(0, 0.1)
        .potential(1, 0.4)
        .potential(3, 1.0)
        .potential(4, 0.3)
        .build();
    let c = estimate(&tree, &cfg(0.9, true)).unwrap();
    // Q(1→3) = .2 + .9·1, Q(1→4) = 0; V(1) = .55.
    assert_close(c.edges[1][0].q, 1.1, "Q(1,0)");
    assert_close(c.edges[1][1].q, 0.0, "Q(1,1)");
    assert_close(c.nodes[1].v, 0.55, "V(1)");
    // Returns from the root: leaf 3: .5 + .9·.2 + .81·1 = 1.49; leaf 4: .5; mean .995.
    assert_close(c.edges[0][0].q, 0.995, "Q(0,0)");
    assert_close(c.edges[0][1].q, 0.9, "Q(0,1)");
    assert_close(c.nodes[0].v, 0.9475, "V(0)");
    assert_close(c.edges[0][0].advantage, 0.0475, "A(0,0)");
    assert_close(c.edges[0][1].advantage, -0.0475, "A(0,1)");
    assert_close(
        c.edges[0][0].step_advantage,
        0.5 + 0.9 * 0.55 - 0.9475,
        "step(0,0)",
    );
    assert_close(c.edges[1][0].step_advantage, 0.2 + 0.9 - 0.55, "step(1,0)");
    assert_close(c.edges[0][1].step_advantage, 0.9 - 0.9475, "step(0,1)");
    // Shaped rewards r + .9·Φ(s') − Φ(s).
    assert_close(c.edges[0][0].shaped_reward, 0.5 + 0.36 - 0.1, "r'(0,0)");
    assert_close(c.edges[0][1].shaped_reward, -0.1, "r'(0,1)");
    assert_close(c.edges[1][0].shaped_reward, 0.2 + 0.9 - 0.4, "r'(1,0)");
    assert_close(c.edges[1][1].shaped_reward, 0.27 - 0.4, "r'(1,1)");
    // Q above 1 is clamped to p̂ = 1 for the interval.
    assert_close(c.edges[1][0].interval.1, 1.0, "interval(1,0).hi");
    // Without shaping the shaped reward is the step reward, and nothing else changes.
    let plain = estimate(&tree, &cfg(0.9, false)).unwrap();
    assert_close(plain.edges[0][0].shaped_reward, 0.5, "r'(0,0) unshaped");
    assert_close(plain.edges[1][1].shaped_reward, 0.0, "r'(1,1) unshaped");
    assert_eq!(plain.nodes, c.nodes);
    // shaped_return along 0 → 1 → 3.
    let along = shaped_return(&[0.1, 0.4, 1.0], &[0.5, 0.2], 0.9);
    assert_close(along, 0.76 + 0.9 * 0.7, "shaped_return");
    assert_close(along, 0.5 + 0.9 * 0.2 + 0.81 * 1.0 - 0.1, "telescoped");
}

#[test]
fn single_leaf_tree() {
    let tree = Builder::new(1).leaf(0, 0.25).build();
    let c = estimate(&tree, &CreditConfig::default()).unwrap();
    assert_eq!(c.nodes.len(), 1);
    assert_close(c.nodes[0].v, 0.25, "V");
    assert_close(c.nodes[0].p_var, 0.1875, "p_var");
    assert_eq!(c.nodes[0].leaves, 1);
    assert_eq!(c.edges, vec![Vec::<EdgeCredit>::new()]);
}

#[test]
fn only_child_has_no_leave_one_out() {
    let tree = Builder::new(3)
        .edge(0, 1, 1, 0.0)
        .edge(1, 2, 3, 0.0)
        .leaf(2, 1.0)
        .build();
    let c = estimate(&tree, &CreditConfig::default()).unwrap();
    assert_eq!(c.edges[0][0].loo, None);
    // Count 3 means three identical siblings: leave-one-out exists and is 0.
    assert_eq!(c.edges[1][0].loo, Some(0.0));
    assert_eq!(c.nodes[0].leaves, 3);
}

#[test]
fn grpo_hand_computed() {
    let a = grpo_advantages(&[1.0, 0.0, 0.0, 1.0], 0.0, true);
    assert_eq!(a, vec![1.0, -1.0, -1.0, 1.0]);
    let b = grpo_advantages(&[1.0, 0.0, 0.0, 1.0], 0.0, false);
    assert_eq!(b, vec![0.5, -0.5, -0.5, 0.5]);
    let c = grpo_advantages(&[1.0, 0.0, 0.0, 1.0], 0.5, true);
    assert_eq!(c, vec![0.5, -0.5, -0.5, 0.5]);
    assert!(grpo_advantages(&[], 1e-6, true).is_empty());
    assert_eq!(grpo_advantages(&[0.1; 3], 0.0, true), vec![0.0; 3]);
    assert_eq!(grpo_advantages(&[0.7], 1e-6, true), vec![0.0]);
    assert!(grpo_advantages(&[1.0, f64::NAN], 0.0, true)[0].is_nan());
}

#[test]
fn wilson_edge_cases() {
    assert_eq!(wilson_interval(0.0, 0.0, 1.96), (0.0, 1.0));
    assert_eq!(wilson_interval(1.0, f64::NAN, 1.96), (0.0, 1.0));
    assert_eq!(wilson_interval(3.0, 10.0, 0.0), (0.3, 0.3));
    // 5 of 10 at z = 1.96: centre .5, half-width 1.96·√(.025 + .0096)/1.38416.
    let (lo, hi) = wilson_interval(5.0, 10.0, 1.96);
    let half = 1.96 * (0.025_f64 + 1.96 * 1.96 / 400.0).sqrt() / (1.0 + 1.96 * 1.96 / 10.0);
    assert_close(lo, 0.5 - half, "lo");
    assert_close(hi, 0.5 + half, "hi");
    assert!((lo - 0.2366).abs() < 1e-4 && (hi - 0.7634).abs() < 1e-4);
}

#[test]
#[should_panic(expected = "needs 3 potentials")]
fn shaped_return_checks_lengths() {
    shaped_return(&[0.0, 1.0], &[1.0, 1.0], 1.0);
}

fn two_leaves() -> CreditTree {
    Builder::new(3)
        .edge(0, 1, 1, 0.0)
        .edge(0, 2, 1, 0.0)
        .leaf(1, 1.0)
        .leaf(2, 0.0)
        .build()
}

fn expect_error(tree: &CreditTree, expected: &CreditError, names: &str) {
    let err = estimate(tree, &CreditConfig::default()).unwrap_err();
    assert_eq!(&err, expected);
    let message = err.to_string();
    assert!(message.contains(names), "{message:?} should name {names:?}");
}

#[test]
fn malformed_trees_name_the_node() {
    let mut t = two_leaves();
    t.nodes[0].edges[1].child = 7;
    let e = CreditError::ChildOutOfRange {
        node: 0,
        edge: 1,
        child: 7,
        len: 3,
    };
    expect_error(&t, &e, "child 7");

    let mut t = two_leaves();
    t.nodes[0].edges[1].count = 0;
    expect_error(&t, &CreditError::ZeroCount { node: 0, edge: 1 }, "node 0");

    let mut t = two_leaves();
    t.nodes[2].terminal_reward = None;
    expect_error(&t, &CreditError::UnfinishedBranch { node: 2 }, "node 2");

    let mut t = two_leaves();
    t.nodes[0].terminal_reward = Some(1.0);
    expect_error(
        &t,
        &CreditError::LeafWithEdges { node: 0, edges: 2 },
        "node 0",
    );

    let mut t = two_leaves();
    t.nodes[1].terminal_reward = Some(f64::NAN);
    let err = estimate(&t, &CreditConfig::default()).unwrap_err();
    assert!(matches!(err, CreditError::NonFiniteReward { node: 1, .. }));
    assert!(err.to_string().contains("node 1"));

    let mut t = two_leaves();
    t.nodes[0].edges[0].step_reward = f64::INFINITY;
    let e = CreditError::NonFiniteStepReward {
        node: 0,
        edge: 0,
        value: f64::INFINITY,
    };
    expect_error(&t, &e, "node 0");

    let mut t = two_leaves();
    t.nodes[2].potential = f64::NEG_INFINITY;
    let e = CreditError::NonFinitePotential {
        node: 2,
        value: f64::NEG_INFINITY,
    };
    expect_error(&t, &e, "node 2");

    let mut t = two_leaves();
    t.nodes[2].parent = Some(1);
    let e = CreditError::ParentMismatch {
        node: 2,
        recorded: Some(1),
        actual: Some(0),
    };
    expect_error(
        &t,
        &e,
        "node 2: parent pointer says node 1, but the edges say node 0",
    );

    let mut t = two_leaves();
    t.nodes[2].parent = Some(9);
    let e = CreditError::ParentOutOfRange {
        node: 2,
        parent: 9,
        len: 3,
    };
    expect_error(&t, &e, "node 2");

    let mut t = two_leaves();
    t.nodes[0].parent = Some(1);
    let e = CreditError::ParentMismatch {
        node: 0,
        recorded: Some(1),
        actual: None,
    };
    expect_error(
        &t,
        &e,
        "node 0: parent pointer says node 1, but the edges say no parent",
    );

    // An orphan leaf: no edge leads to it.
    let mut t = two_leaves();
    t.nodes.push(CreditNode {
        parent: None,
        edges: Vec::new(),
        terminal_reward: Some(1.0),
        potential: 0.0,
    });
    expect_error(&t, &CreditError::Unreachable { node: 3 }, "node 3");

    // Two edges into one node.
    let mut t = two_leaves();
    t.nodes[0].edges[1].child = 1;
    let e = CreditError::MultipleParents {
        node: 1,
        first: 0,
        second: 0,
    };
    expect_error(&t, &e, "node 1");

    expect_error(
        &CreditTree { nodes: Vec::new() },
        &CreditError::EmptyTree,
        "node 0",
    );
}

#[test]
fn cycles_are_reported() {
    // 0 → 1 → 2 → 1, parent pointers consistent with the edges into 1 and 2.
    let mut t = Builder::new(4)
        .edge(0, 1, 1, 0.0)
        .edge(0, 3, 1, 0.0)
        .edge(1, 2, 1, 0.0)
        .leaf(3, 0.0)
        .build();
    t.nodes[2].edges.push(CreditEdge {
        child: 1,
        count: 1,
        step_reward: 0.0,
    });
    expect_error(&t, &CreditError::Cycle { node: 1 }, "cycle through node 1");

    // A cycle detached from the root: 1 → 2 → 1, each the other's parent.
    let t = Builder::new(4)
        .edge(0, 3, 1, 0.0)
        .edge(1, 2, 1, 0.0)
        .edge(2, 1, 1, 0.0)
        .leaf(3, 0.0)
        .build();
    let err = estimate(&t, &CreditConfig::default()).unwrap_err();
    assert!(matches!(err, CreditError::Cycle { node: 1 | 2 }), "{err}");

    // A self-loop.
    let mut t = two_leaves();
    t.nodes[0].edges[0].child = 0;
    t.nodes[1].parent = None;
    expect_error(&t, &CreditError::Cycle { node: 0 }, "node 0");

    // The root as the child of an orphan (no cycle).
    let mut t = two_leaves();
    t.nodes.push(CreditNode {
        parent: None,
        edges: vec![CreditEdge {
            child: 0,
            count: 1,
            step_reward: 0.0,
        }],
        terminal_reward: None,
        potential: 0.0,
    });
    expect_error(&t, &CreditError::RootIsChild { parent: 3 }, "node 3");
}

#[test]
fn bad_config_is_rejected() {
    let t = two_leaves();
    for gamma in [-0.1, 1.5, f64::NAN] {
        let err = estimate(&t, &cfg(gamma, false)).unwrap_err();
        assert!(matches!(err, CreditError::InvalidGamma { .. }), "{err}");
    }
    let bad_z = CreditConfig {
        wilson_z: -1.0,
        ..CreditConfig::default()
    };
    assert_eq!(
        estimate(&t, &bad_z).unwrap_err(),
        CreditError::InvalidWilsonZ { z: -1.0 }
    );
}

#[test]
fn leaf_count_overflow_is_an_error() {
    // A chain of 3 edges with count 2^11 each: 2^33 leaves.
    let t = Builder::new(4)
        .edge(0, 1, 1 << 11, 0.0)
        .edge(1, 2, 1 << 11, 0.0)
        .edge(2, 3, 1 << 11, 0.0)
        .leaf(3, 1.0)
        .build();
    expect_error(&t, &CreditError::LeafCountOverflow { node: 0 }, "node 0");
}

#[test]
fn deep_chain_does_not_overflow_the_stack() {
    let depth = 200_000;
    let mut b = Builder::new(depth + 1);
    for i in 0..depth {
        b = b.edge(i, i + 1, 1, 0.0);
    }
    let t = b.leaf(depth, 1.0).build();
    let c = estimate(&t, &cfg(1.0, false)).unwrap();
    assert_eq!(c.nodes[0].v, 1.0);
}

// ---- property tests ----

/// A random valid tree: node `i ≥ 1` (in generation order) hangs under a random earlier
/// node, then the indices of nodes 1.. are shuffled so that children may precede their
/// parents in the vector.
fn arb_tree(binary: bool) -> impl Strategy<Value = (CreditTree, f64)> {
    (1_usize..28)
        .prop_flat_map(move |n| {
            (
                prop::collection::vec(any::<prop::sample::Index>(), n),
                prop::collection::vec(1_u32..=4, n),
                prop::collection::vec(any::<bool>(), n),
                prop::collection::vec(-1.0_f64..1.0, n),
                prop::collection::vec(-5.0_f64..5.0, n),
                Just((1..n).collect::<Vec<_>>()).prop_shuffle(),
                if binary {
                    Just(1.0).boxed()
                } else {
                    (0.0_f64..=1.0).boxed()
                },
            )
        })
        .prop_map(
            move |(parents, counts, wins, steps, potentials, perm, gamma)| {
                let n = counts.len();
                let label = |g: usize| if g == 0 { 0 } else { perm[g - 1] };
                let parent_of: Vec<Option<usize>> = (0..n)
                    .map(|g| (g > 0).then(|| parents[g].index(g)))
                    .collect();
                let mut b = Builder::new(n);
                for g in 1..n {
                    let p = parent_of[g].unwrap_or(0);
                    let r = if binary { 0.0 } else { steps[g] };
                    b = b.edge(label(p), label(g), counts[g], r);
                }
                for g in 0..n {
                    b = b.potential(label(g), potentials[g]);
                    if !parent_of.contains(&Some(g)) {
                        b = b.leaf(label(g), if wins[g] { 1.0 } else { 0.0 });
                    }
                }
                (b.build(), gamma)
            },
        )
}

/// Brute force: (Σ w·G, Σ w) over the leaves under `s`, returns measured from `s`.
fn brute_leaf_sums(tree: &CreditTree, s: usize, gamma: f64) -> (f64, f64) {
    let node = &tree.nodes[s];
    if let Some(r) = node.terminal_reward {
        return (r, 1.0);
    }
    let mut sum = 0.0;
    let mut weight = 0.0;
    for e in &node.edges {
        let (cs, cw) = brute_leaf_sums(tree, e.child, gamma);
        let n = f64::from(e.count);
        sum += n * (cw * e.step_reward + gamma * cs);
        weight += n * cw;
    }
    (sum, weight)
}

/// Every root-to-leaf path as the list of (source, edge index).
fn paths(tree: &CreditTree) -> Vec<Vec<(usize, usize)>> {
    let mut out = Vec::new();
    for (leaf, node) in tree.nodes.iter().enumerate() {
        if node.terminal_reward.is_none() {
            continue;
        }
        let mut path = Vec::new();
        let mut at = leaf;
        while let Some(p) = tree.nodes[at].parent {
            let i = tree.nodes[p]
                .edges
                .iter()
                .position(|e| e.child == at)
                .unwrap();
            path.push((p, i));
            at = p;
        }
        path.reverse();
        out.push(path);
    }
    out
}

proptest! {
    #[test]
    fn count_weighted_advantages_sum_to_zero((tree, gamma) in arb_tree(true)) {
        let c = estimate(&tree, &cfg(gamma, false)).unwrap();
        for (s, node) in tree.nodes.iter().enumerate() {
            let (sum, weight) = brute_leaf_sums(&tree, s, gamma);
            prop_assert!(close(c.nodes[s].leaf_mean, sum / weight));
            prop_assert_eq!(f64::from(c.nodes[s].leaves), weight);
            if node.edges.is_empty() {
                continue;
            }
            let weighted: f64 = node.edges.iter().zip(&c.edges[s])
                .map(|(e, ec)| f64::from(e.count) * ec.advantage)
                .sum();
            prop_assert!(weighted.abs() <= 1e-9, "node {}: Σ n·A = {}", s, weighted);
            let k: u32 = node.edges.iter().map(|e| e.count).sum();
            for (e, ec) in node.edges.iter().zip(&c.edges[s]) {
                // Q̂ is the step reward plus the child's value.
                prop_assert!(close(ec.q, e.step_reward + gamma * c.nodes[e.child].v));
                prop_assert!((0.0..=1.0).contains(&ec.q));
                prop_assert_eq!(ec.leaves, e.count * c.nodes[e.child].leaves);
                match ec.loo {
                    None => prop_assert_eq!(k, 1),
                    Some(loo) => {
                        let kf = f64::from(k);
                        prop_assert!(k >= 2);
                        prop_assert!(close(loo, kf / (kf - 1.0) * ec.advantage));
                    }
                }
                let (lo, hi) = ec.interval;
                prop_assert!(0.0 <= lo && lo <= ec.q && ec.q <= hi && hi <= 1.0);
            }
        }
    }

    #[test]
    fn shaping_telescopes_along_every_path((tree, gamma) in arb_tree(false)) {
        let c = estimate(&tree, &cfg(gamma, true)).unwrap();
        for path in paths(&tree) {
            let mut discount = 1.0;
            let mut shaped = 0.0;
            let mut plain = 0.0;
            let mut potentials = vec![tree.nodes[0].potential];
            let mut rewards = Vec::new();
            let mut end = 0;
            for &(s, i) in &path {
                let edge = &tree.nodes[s].edges[i];
                shaped += discount * c.edges[s][i].shaped_reward;
                plain += discount * edge.step_reward;
                discount *= gamma;
                potentials.push(tree.nodes[edge.child].potential);
                rewards.push(edge.step_reward);
                end = edge.child;
            }
            let expected = plain + discount * tree.nodes[end].potential - tree.nodes[0].potential;
            prop_assert!(close(shaped, expected), "{} vs {}", shaped, expected);
            prop_assert!(close(shaped_return(&potentials, &rewards, gamma), expected));
            let undiscounted = shaped_return(&potentials, &rewards, 1.0);
            let sum_r: f64 = rewards.iter().sum();
            let telescoped = sum_r + tree.nodes[end].potential - tree.nodes[0].potential;
            prop_assert!(close(undiscounted, telescoped));
        }
    }

    #[test]
    fn step_advantage_is_a_td_error((tree, gamma) in arb_tree(false)) {
        let c = estimate(&tree, &cfg(gamma, false)).unwrap();
        for (s, node) in tree.nodes.iter().enumerate() {
            for (e, ec) in node.edges.iter().zip(&c.edges[s]) {
                let child = &c.nodes[e.child];
                prop_assert!(close(
                    ec.step_advantage,
                    e.step_reward + gamma * child.v - c.nodes[s].v
                ));
                // With Q̂ = r + γV̂(s'), the step advantage is A.
                prop_assert!(close(ec.step_advantage, ec.advantage));
                prop_assert_eq!(ec.shaped_reward, e.step_reward);
            }
        }
    }

    #[test]
    fn grpo_is_centred_with_unit_std(rewards in prop::collection::vec(-10.0_f64..10.0, 1..50)) {
        let a = grpo_advantages(&rewards, 0.0, true);
        prop_assert_eq!(a.len(), rewards.len());
        let n = a.len() as f64;
        prop_assert!(a.iter().sum::<f64>().abs() <= 1e-9);
        let distinct = rewards.iter().any(|&r| r != rewards[0]);
        let var = a.iter().map(|x| x * x).sum::<f64>() / n;
        if distinct {
            prop_assert!((var - 1.0).abs() <= 1e-9, "variance {}", var);
        } else {
            prop_assert_eq!(var, 0.0);
        }
        // Unscaled: mean-centring is (G−1)/G times the leave-one-out advantage.
        let centred = grpo_advantages(&rewards, 0.0, false);
        prop_assert!(centred.iter().sum::<f64>().abs() <= 1e-9);
        if rewards.len() >= 2 {
            let total: f64 = rewards.iter().sum();
            for (r, c) in rewards.iter().zip(&centred) {
                let loo = r - (total - r) / (n - 1.0);
                prop_assert!(close(*c, (n - 1.0) / n * loo));
            }
        }
    }

    #[test]
    fn grpo_binary_rewards(wins in prop::collection::vec(any::<bool>(), 1..64)) {
        let rewards: Vec<f64> = wins.iter().map(|&w| f64::from(u8::from(w))).collect();
        let a = grpo_advantages(&rewards, 1e-6, true);
        prop_assert!(a.iter().sum::<f64>().abs() <= 1e-9);
        for (r, x) in rewards.iter().zip(&a) {
            // Winners above, losers below (or all zero when the group is uniform).
            let right_side = if *r == 1.0 { *x >= 0.0 } else { *x <= 0.0 };
            prop_assert!(right_side, "reward {} got advantage {}", r, x);
        }
    }

    #[test]
    fn wilson_contains_p_hat(n in 1_u32..2000, frac in 0.0_f64..=1.0, z in 0.0_f64..4.0) {
        let n = f64::from(n);
        let successes = (frac * n).round();
        let p = successes / n;
        let (lo, hi) = wilson_interval(successes, n, z);
        prop_assert!(0.0 <= lo && lo <= p && p <= hi && hi <= 1.0, "({}, {}) vs {}", lo, hi, p);
        // More trials at the same rate never widen the interval.
        let (lo4, hi4) = wilson_interval(4.0 * successes, 4.0 * n, z);
        prop_assert!(hi4 - lo4 <= hi - lo + 1e-12);
    }
}
