//! Scores of one estimator run against the exact advantages, and the
//! statistics over seeds: bootstrap intervals of means and of the smallest
//! budget that reaches a target.
//!
//! Per run, over the pairs `(s, a)` the run estimated (each with its weighted
//! mean estimate `Â`):
//!
//! - **MSE** `mean (Â − A^π)²`;
//! - **decisive sign accuracy**: among pairs with `|A^π| > 0.1`, the share
//!   whose `Â` has the sign of `A^π` (`Â = 0` counts as wrong);
//! - **sibling ranking accuracy**: among pairs of actions estimated at the
//!   same state whose `A^π` differ (exact ties left out), the share that `Â`
//!   orders as `A^π` does, equal estimates counting one half (so an
//!   estimator without information scores 0.5, whatever its ties).
//!
//! The policy-gradient cosine needs the network and lives in
//! [`super::markov`].

use arbor_rollout::policy::Rng;
use serde::{Deserialize, Serialize};

use super::estimators::Estimates;
use super::mdp::Exact;

/// `|A^π|` above which a pair is decisive.
pub const DECISIVE: f64 = 0.1;
/// `|A^π(s,a) − A^π(s,b)|` at or below which two siblings count as tied.
pub const TIE: f64 = 1e-9;

/// The scores of one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunScore {
    /// Pairs estimated.
    pub pairs: usize,
    /// Mean squared error over them (`None` when there are none).
    pub mse: Option<f64>,
    /// Decisive pairs estimated.
    pub decisive: usize,
    /// Share of them with the right sign.
    pub sign_accuracy: Option<f64>,
    /// Decisive pairs whose estimate is not 0 (the estimator had information).
    pub decisive_nonzero: usize,
    /// Sibling pairs with different `A^π` estimated.
    pub ranked: usize,
    /// Share of them ordered right (ties in `Â` count one half).
    pub ranking_accuracy: Option<f64>,
}

/// Score `est` against `exact`.
pub fn score(exact: &Exact, est: &Estimates) -> RunScore {
    let truth = |s: usize, a: usize| exact.advantage[s][a];
    let pairs: Vec<((usize, usize), f64)> = est.pairs.iter().map(|(&k, e)| (k, e.mean())).collect();
    let n = pairs.len();
    let mse = (n > 0).then(|| {
        pairs
            .iter()
            .map(|&((s, a), e)| (e - truth(s, a)).powi(2))
            .sum::<f64>()
            / n as f64
    });
    let decisive: Vec<f64> = pairs
        .iter()
        .filter(|((s, a), _)| truth(*s, *a).abs() > DECISIVE)
        .map(|&((s, a), e)| f64::from(u8::from(e != 0.0 && e.signum() == truth(s, a).signum())))
        .collect();
    let mut ranked = Vec::new();
    for (i, &((s, a), ea)) in pairs.iter().enumerate() {
        for &((_, b), eb) in pairs[i + 1..].iter().take_while(|((s2, _), _)| *s2 == s) {
            let d = truth(s, a) - truth(s, b);
            if d.abs() > TIE {
                let de = ea - eb;
                ranked.push(if de == 0.0 {
                    0.5
                } else {
                    f64::from(u8::from(de.signum() == d.signum()))
                });
            }
        }
    }
    let decisive_nonzero = pairs
        .iter()
        .filter(|&&((s, a), e)| truth(s, a).abs() > DECISIVE && e != 0.0)
        .count();
    RunScore {
        pairs: n,
        mse,
        decisive: decisive.len(),
        decisive_nonzero,
        sign_accuracy: share(&decisive),
        ranked: ranked.len(),
        ranking_accuracy: share(&ranked),
    }
}

/// The mean of per-pair credits in [0, 1]; `None` for no pair.
fn share(credits: &[f64]) -> Option<f64> {
    (!credits.is_empty()).then(|| credits.iter().sum::<f64>() / credits.len() as f64)
}

/// A mean with a percentile-bootstrap 95% interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// The mean.
    pub mean: f64,
    /// 2.5th percentile of the resampled means.
    pub lo: f64,
    /// 97.5th percentile.
    pub hi: f64,
    /// Values the mean is over.
    pub n: usize,
}

/// The `q`-quantile of sorted values (nearest rank).
pub(crate) fn quantile<T: Copy>(sorted: &[T], q: f64) -> T {
    let i = (q * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Mean of `values` and its bootstrap interval (`rounds` resamples); `None` when empty.
pub fn bootstrap_mean(values: &[f64], rounds: usize, seed: u64) -> Option<Interval> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let mut rng = Rng::new(seed);
    let mut means: Vec<f64> = (0..rounds.max(1))
        .map(|_| (0..n).map(|_| values[rng.below(n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    Some(Interval {
        mean,
        lo: quantile(&means, 0.025),
        hi: quantile(&means, 0.975),
        n,
    })
}

/// The smallest budget at which a metric's mean reaches a target, with a
/// bootstrap interval over seeds; `None` stands for "not reached".
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reach {
    /// On all seeds.
    pub budget: Option<u64>,
    /// 2.5th percentile over resampled seed sets.
    pub lo: Option<u64>,
    /// 97.5th percentile.
    pub hi: Option<u64>,
}

/// The smallest of `budgets` whose mean over `seeds` reaches `target`;
/// `per_seed[i][b]` is seed `i`'s value at budget `b` (`None`: undefined,
/// left out of that budget's mean).
fn first_reaching(per_seed: &[&Vec<Option<f64>>], budgets: &[u64], target: f64) -> Option<u64> {
    budgets.iter().enumerate().find_map(|(b, &budget)| {
        let vals: Vec<f64> = per_seed.iter().filter_map(|s| s[b]).collect();
        let mean = vals.iter().sum::<f64>() / vals.len().max(1) as f64;
        (!vals.is_empty() && mean >= target).then_some(budget)
    })
}

/// [`Reach`] of `target` by the per-seed curves `per_seed` over `budgets`
/// (ascending), resampling seeds `rounds` times.
pub fn budget_to_reach(
    per_seed: &[Vec<Option<f64>>],
    budgets: &[u64],
    target: f64,
    rounds: usize,
    seed: u64,
) -> Reach {
    let all: Vec<&Vec<Option<f64>>> = per_seed.iter().collect();
    let budget = first_reaching(&all, budgets, target);
    let n = per_seed.len();
    if n == 0 {
        return Reach {
            budget,
            lo: None,
            hi: None,
        };
    }
    let mut rng = Rng::new(seed);
    // Not reached sorts after every budget.
    let mut draws: Vec<u64> = (0..rounds.max(1))
        .map(|_| {
            let pick: Vec<&Vec<Option<f64>>> = (0..n).map(|_| &per_seed[rng.below(n)]).collect();
            first_reaching(&pick, budgets, target).unwrap_or(u64::MAX)
        })
        .collect();
    draws.sort_unstable();
    let open = |b: u64| (b != u64::MAX).then_some(b);
    Reach {
        budget,
        lo: open(quantile(&draws, 0.025)),
        hi: open(quantile(&draws, 0.975)),
    }
}
