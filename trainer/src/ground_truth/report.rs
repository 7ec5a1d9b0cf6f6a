//! The report of `arbor credit eval`: aggregates over seeds and tasks, the
//! Markdown tables, the chart, and the files written to the output folder.
//!
//! Aggregation: for each estimator, budget and seed, a metric is averaged
//! over the tasks where it is defined (a run that estimated no decisive pair
//! has no sign accuracy); the mean over seeds of those values gets a
//! percentile-bootstrap 95% interval over seeds. The per-task tables do the
//! same with one task. The budget to 90% decisive sign accuracy is the
//! smallest budget whose mean reaches 0.9, with its interval from
//! resampling seeds (see [`super::metrics::budget_to_reach`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::GroundTruthError;
use super::eval::{EvalConfig, RunRecord, TaskReport};
use super::metrics::{Interval, Reach, RunScore, bootstrap_mean, budget_to_reach};

/// The schema tag of `report.json`.
pub const REPORT_SCHEMA: &str = "arbor.credit-eval/1";
/// The decisive sign accuracy the budget table asks for.
pub const TARGET_ACCURACY: f64 = 0.9;

/// One estimator at one budget, over seeds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SummaryRow {
    /// The estimator.
    pub estimator: String,
    /// The budget.
    pub budget: u64,
    /// Mean squared error of `Â`.
    pub mse: Option<Interval>,
    /// Decisive sign accuracy.
    pub sign_accuracy: Option<Interval>,
    /// Sibling ranking accuracy.
    pub ranking_accuracy: Option<Interval>,
    /// Policy-gradient cosine.
    pub cosine: Option<Interval>,
    /// Decisive pairs estimated per run (mean).
    pub decisive_per_run: f64,
    /// Share of those whose estimate is not 0 (over all runs).
    pub decisive_nonzero: f64,
    /// Budget used per run (mean).
    pub budget_used: f64,
}

/// The summary rows of one task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskSummary {
    /// The task.
    pub task: String,
    /// Per estimator and budget.
    pub rows: Vec<SummaryRow>,
}

/// The budget an estimator needs for 90% decisive sign accuracy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReachRow {
    /// The estimator.
    pub estimator: String,
    /// The budget and its interval (`None`: not reached).
    pub reach: Reach,
}

/// The whole report (`report.json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EvalReport {
    /// Always [`REPORT_SCHEMA`].
    pub schema: String,
    /// The settings.
    pub config: EvalConfig,
    /// Per task: exploration cost, exact facts, runs, validation.
    pub tasks: Vec<TaskReport>,
    /// Over all tasks, per estimator and budget.
    pub summary: Vec<SummaryRow>,
    /// Per task, per estimator and budget.
    pub per_task: Vec<TaskSummary>,
    /// Budget to 90% decisive sign accuracy, over all tasks.
    pub reach: Vec<ReachRow>,
    /// Actions plus verifier runs the exact computation cost, all tasks.
    pub exact_env_steps: u64,
    /// Wall-clock seconds of the whole evaluation.
    pub wall_s: f64,
    /// The Markdown report.
    pub markdown: String,
}

/// Estimator labels in the order the tasks' runs list them.
fn estimator_order(tasks: &[TaskReport]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in tasks.iter().flat_map(|t| &t.runs) {
        if !out.contains(&r.estimator) {
            out.push(r.estimator.clone());
        }
    }
    out
}

/// Per seed: the mean over `tasks` of `metric` of the run of `estimator`
/// at `budget` (seeds where no task defines it left out).
fn per_seed(
    tasks: &[&TaskReport],
    estimator: &str,
    budget: u64,
    seeds: usize,
    metric: &dyn Fn(&RunRecord) -> Option<f64>,
) -> Vec<Option<f64>> {
    let mut sums = vec![(0.0, 0usize); seeds];
    for r in tasks.iter().flat_map(|t| &t.runs) {
        if r.estimator == estimator
            && r.budget == budget
            && let (Some(v), Some(slot)) = (metric(r), sums.get_mut(r.seed))
        {
            slot.0 += v;
            slot.1 += 1;
        }
    }
    sums.into_iter()
        .map(|(s, n)| (n > 0).then(|| s / n as f64))
        .collect()
}

fn sign(r: &RunRecord) -> Option<f64> {
    r.score.sign_accuracy
}

/// Summary rows of `tasks`.
fn summarise(tasks: &[&TaskReport], cfg: &EvalConfig, estimators: &[String]) -> Vec<SummaryRow> {
    let interval = |est: &str, budget: u64, metric: &dyn Fn(&RunRecord) -> Option<f64>| {
        let vals: Vec<f64> = per_seed(tasks, est, budget, cfg.seeds, metric)
            .into_iter()
            .flatten()
            .collect();
        bootstrap_mean(&vals, cfg.bootstrap_rounds, budget)
    };
    let mean_of = |est: &str, budget: u64, f: &dyn Fn(&RunScore, &RunRecord) -> f64| {
        let v: Vec<f64> = tasks
            .iter()
            .flat_map(|t| &t.runs)
            .filter(|r| r.estimator == est && r.budget == budget)
            .map(|r| f(&r.score, r))
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let mut rows = Vec::new();
    for est in estimators {
        for &budget in &cfg.budgets {
            rows.push(SummaryRow {
                estimator: est.clone(),
                budget,
                mse: interval(est, budget, &|r| r.score.mse),
                sign_accuracy: interval(est, budget, &sign),
                ranking_accuracy: interval(est, budget, &|r| r.score.ranking_accuracy),
                cosine: interval(est, budget, &|r| Some(r.cosine)),
                decisive_per_run: mean_of(est, budget, &|s, _| s.decisive as f64),
                decisive_nonzero: mean_of(est, budget, &|s, _| s.decisive_nonzero as f64)
                    / mean_of(est, budget, &|s, _| s.decisive as f64).max(1e-12),
                budget_used: mean_of(est, budget, &|_, r| r.budget_used as f64),
            });
        }
    }
    rows
}

fn reach_rows(tasks: &[&TaskReport], cfg: &EvalConfig, estimators: &[String]) -> Vec<ReachRow> {
    estimators
        .iter()
        .map(|est| {
            let curves: Vec<Vec<Option<f64>>> = {
                let by_budget: Vec<Vec<Option<f64>>> = cfg
                    .budgets
                    .iter()
                    .map(|&b| per_seed(tasks, est, b, cfg.seeds, &sign))
                    .collect();
                (0..cfg.seeds)
                    .map(|k| by_budget.iter().map(|col| col[k]).collect())
                    .collect()
            };
            ReachRow {
                estimator: est.clone(),
                reach: budget_to_reach(
                    &curves,
                    &cfg.budgets,
                    TARGET_ACCURACY,
                    cfg.bootstrap_rounds,
                    7,
                ),
            }
        })
        .collect()
}

/// Aggregate the task reports into the report (and its Markdown).
pub fn build_report(cfg: EvalConfig, tasks: Vec<TaskReport>, wall_s: f64) -> EvalReport {
    let estimators = estimator_order(&tasks);
    let all: Vec<&TaskReport> = tasks.iter().collect();
    let summary = summarise(&all, &cfg, &estimators);
    let per_task = tasks
        .iter()
        .map(|t| TaskSummary {
            task: t.task.clone(),
            rows: summarise(&[t], &cfg, &estimators),
        })
        .collect();
    let reach = reach_rows(&all, &cfg, &estimators);
    let mut report = EvalReport {
        schema: REPORT_SCHEMA.to_owned(),
        exact_env_steps: tasks.iter().map(|t| t.cost.env_steps()).sum(),
        config: cfg,
        tasks,
        summary,
        per_task,
        reach,
        wall_s,
        markdown: String::new(),
    };
    report.markdown = markdown(&report);
    report
}

fn iv(i: Option<&Interval>, digits: usize) -> String {
    match i {
        Some(i) => format!("{:.d$} [{:.d$}, {:.d$}]", i.mean, i.lo, i.hi, d = digits),
        None => "—".to_owned(),
    }
}

fn reached(b: Option<u64>) -> String {
    b.map_or_else(|| "not reached".to_owned(), |b| b.to_string())
}

/// The table of summary rows.
pub fn summary_table(rows: &[SummaryRow]) -> String {
    let mut s = String::from(
        "| estimator | budget | MSE of Â | decisive sign acc. | sibling ranking acc. | PG cosine | decisive (s,a)/run | of which Â ≠ 0 | budget used |\n\
         |---|---:|---|---|---|---|---:|---:|---:|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.1} | {:.0}% | {:.0} |\n",
            r.estimator,
            r.budget,
            iv(r.mse.as_ref(), 4),
            iv(r.sign_accuracy.as_ref(), 3),
            iv(r.ranking_accuracy.as_ref(), 3),
            iv(r.cosine.as_ref(), 3),
            r.decisive_per_run,
            r.decisive_nonzero * 100.0,
            r.budget_used
        ));
    }
    s
}

/// The exploration-cost table.
pub fn cost_table(tasks: &[TaskReport]) -> String {
    let mut s = String::from(
        "| task | content states | DP states | transitions | actions | verifier runs | env steps | wall | V^π(root) | Monte Carlo (95% CI) | max abs Σπ·A | decisive (s,a) |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n",
    );
    for t in tasks {
        let c = &t.cost;
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.0} s | {:.3} | {} | {:.1e} | {} |\n",
            t.task,
            c.content_states,
            c.dp_states,
            c.transitions,
            c.actions,
            c.verifier_runs,
            c.env_steps(),
            c.wall_s,
            t.root_value,
            iv(t.monte_carlo.as_ref(), 3),
            t.max_weighted_advantage,
            t.decisive_pairs
        ));
    }
    s
}

/// The Markdown report: [`summary_markdown`], then a table per task.
pub fn markdown(r: &EvalReport) -> String {
    let mut s = summary_markdown(r);
    for t in &r.per_task {
        s.push_str(&format!("\n## {}\n\n", t.task));
        s.push_str(&summary_table(&t.rows));
    }
    s
}

/// The report without the per-task tables: settings, exact computation
/// cost, the table over all tasks, budgets to 90%, live validation.
pub fn summary_markdown(r: &EvalReport) -> String {
    let cfg = &r.config;
    let mut s = format!(
        "# Credit against exact ground truth ({} run)\n\n\
         {} task(s), budgets {:?} (actions + verifier runs), {} seeds per estimator and budget; \
         Markov DRRN policy (seed {}, {} BC epochs, τ {}, ε {}); intervals: 95% percentile \
         bootstrap over seeds ({} resamples).\n\n## Exact computation\n\n{}\n\
         The exact computation cost {} env steps (actions + verifier runs) in all.\n\n",
        cfg.label,
        r.tasks.len(),
        cfg.budgets,
        cfg.seeds,
        cfg.policy.seed,
        cfg.policy.bc_epochs,
        cfg.policy.temperature,
        cfg.policy.epsilon,
        cfg.bootstrap_rounds,
        cost_table(&r.tasks),
        r.exact_env_steps
    );
    s.push_str("## Credit against exact A^π, all tasks\n\n");
    s.push_str(&summary_table(&r.summary));
    s.push_str(&format!(
        "\n## Budget to {:.0}% decisive sign accuracy (|A^π| > 0.1), all tasks\n\n\
         | estimator | budget [95% CI] |\n|---|---|\n",
        TARGET_ACCURACY * 100.0
    ));
    for row in &r.reach {
        s.push_str(&format!(
            "| {} | {} [{}, {}] |\n",
            row.estimator,
            reached(row.reach.budget),
            reached(row.reach.lo),
            reached(row.reach.hi)
        ));
    }
    s.push_str("\n## Live validation\n\n");
    let validated: Vec<_> = r
        .tasks
        .iter()
        .filter_map(|t| t.validation.as_ref())
        .collect();
    if validated.is_empty() {
        s.push_str("No task was validated live.\n");
    }
    for v in validated {
        s.push_str(&format!(
            "- {}: live tree of budget {}: {} edges, {} states, {} leaves checked, {} mismatches\n",
            v.task,
            v.budget,
            v.edges,
            v.states,
            v.leaves,
            v.mismatches.len()
        ));
    }
    s
}

/// Where [`write_outputs`] put the files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Outputs {
    /// `report.json`.
    pub json: PathBuf,
    /// `report.md`.
    pub markdown: PathBuf,
    /// `sign-accuracy.png`.
    pub plot: PathBuf,
}

/// Write `report.json`, `report.md` and the chart into `dir` (created).
///
/// # Errors
/// A file could not be written, or the chart could not be drawn (no font).
pub fn write_outputs(report: &EvalReport, dir: &Path) -> Result<Outputs, GroundTruthError> {
    let out_err = |what: &Path, e: &dyn std::fmt::Display| GroundTruthError::Output {
        path: what.to_owned(),
        message: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(|e| out_err(dir, &e))?;
    let outputs = Outputs {
        json: dir.join("report.json"),
        markdown: dir.join("report.md"),
        plot: dir.join("sign-accuracy.png"),
    };
    let json = serde_json::to_vec_pretty(report).map_err(|e| out_err(&outputs.json, &e))?;
    std::fs::write(&outputs.json, json).map_err(|e| out_err(&outputs.json, &e))?;
    std::fs::write(&outputs.markdown, &report.markdown)
        .map_err(|e| out_err(&outputs.markdown, &e))?;
    let series: Vec<(String, Vec<(f64, f64)>)> = report
        .reach
        .iter()
        .map(|row| {
            let pts = report
                .summary
                .iter()
                .filter(|s| s.estimator == row.estimator)
                .filter_map(|s| Some((s.budget as f64, s.sign_accuracy?.mean)))
                .collect();
            (row.estimator.clone(), pts)
        })
        .collect();
    super::chart::log2_curves(
        &series,
        "Decisive sign accuracy of Â against exact A^π",
        "budget (actions + verifier runs, log2 scale)",
        "decisive sign accuracy (|A^π| > 0.1)",
        &outputs.plot,
    )
    .map_err(|e| out_err(&outputs.plot, &e))?;
    Ok(outputs)
}
