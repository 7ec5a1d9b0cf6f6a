//! `arbor credit eval`: exact ground-truth credit (arbor-trainer's
//! `ground_truth` module does the work; its Markov policy links libtorch).

use std::sync::Arc;

use anyhow::{Context as _, Result, anyhow};
use arbor_envs::TaskEnv;
use arbor_envs::suite::{self, Suite};
use arbor_envs::task::{Backend, TaskSpec};
use arbor_trainer::ground_truth::eval::{
    DEFAULT_TASKS, EvalConfig, EvalProgress, QUICK_TASKS, TaskInput, run,
};
use arbor_trainer::ground_truth::explore::ExploreCost;
use arbor_trainer::ground_truth::report::{summary_markdown, write_outputs};
use indicatif::ProgressBar;

use arbor_cli::args::CreditEvalArgs;
use arbor_cli::commands::Ctx;
use arbor_cli::error::UsageError;
use arbor_cli::output::{emit, note, progress_bar};

/// The settings: `--quick` or the full run, then the options given.
fn config(args: &CreditEvalArgs) -> Result<EvalConfig> {
    let mut cfg = if args.quick {
        EvalConfig::quick()
    } else {
        EvalConfig::full()
    };
    if let Some(b) = &args.budgets {
        cfg.budgets.clone_from(b);
    }
    if let Some(n) = args.seeds {
        cfg.seeds = n;
    }
    if let Some(s) = args.policy_seed {
        cfg.policy.seed = s;
    }
    if let Some(e) = args.bc_epochs {
        cfg.policy.bc_epochs = e;
    }
    if let Some(t) = args.temperature {
        cfg.policy.temperature = t;
    }
    if let Some(e) = args.epsilon {
        cfg.policy.epsilon = e;
    }
    if let Some(k) = args.vine_k {
        cfg.vine_k = k.max(1);
    }
    if let Some(v) = args.validate {
        cfg.validate_tasks = v;
    }
    if let Some(m) = args.max_states {
        cfg.explore.max_states = m;
    }
    cfg.explore.workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .max(1);
    cfg.check().map_err(|e| anyhow!(UsageError(e)))?;
    Ok(cfg)
}

/// The task specs: --tasks, --split, or the default set.
fn specs(args: &CreditEvalArgs) -> Result<Vec<TaskSpec>> {
    let dir = args.task_dir.clone().unwrap_or_else(suite::bundled_dir);
    let suite = Suite::load(&dir).map_err(|e| anyhow!(UsageError(e.to_string())))?;
    let by_id = |ids: &mut dyn Iterator<Item = &str>| -> Result<Vec<TaskSpec>> {
        ids.map(|id| {
            suite
                .get(id)
                .cloned()
                .ok_or_else(|| anyhow!(UsageError(format!("no task {id:?} in {}", dir.display()))))
        })
        .collect()
    };
    let specs = match (&args.tasks, &args.split) {
        (Some(ids), _) => by_id(&mut ids.iter().map(String::as_str))?,
        (None, Some(split)) => suite
            .split(split)
            .map_err(|e| anyhow!(UsageError(e)))?
            .into_iter()
            .cloned()
            .collect(),
        (None, None) if args.quick => by_id(&mut QUICK_TASKS.iter().copied())?,
        (None, None) => by_id(&mut DEFAULT_TASKS.iter().copied())?,
    };
    if let Some(s) = specs.iter().find(|s| s.backend != Backend::Native) {
        return Err(anyhow!(UsageError(format!(
            "task {} uses the {} backend; exact ground truth explores native snapshots only",
            s.id, s.backend
        ))));
    }
    Ok(specs)
}

/// One progress bar on stderr, for exploration and then replay.
struct Bar {
    bar: ProgressBar,
    json: bool,
}

impl EvalProgress for Bar {
    fn explored(&self, task: &str, c: &ExploreCost) {
        self.bar.set_length(c.env_steps());
        self.bar.set_position(c.env_steps());
        self.bar.set_message(format!(
            "exploring {task}: {} states, {} actions + {} verifier runs",
            c.dp_states, c.actions, c.verifier_runs
        ));
    }

    fn replayed(&self, task: &str, done: u64, total: u64) {
        self.bar.set_length(total);
        self.bar.set_position(done);
        self.bar
            .set_message(format!("replaying estimators on {task}"));
    }

    fn note(&self, line: &str) {
        self.bar.suspend(|| {
            let _ = note(self.json, line);
        });
    }
}

/// Run `arbor credit eval`.
pub fn eval(ctx: &Ctx, args: &CreditEvalArgs) -> Result<i32> {
    tch::set_num_threads(1);
    let cfg = config(args)?;
    let inputs: Vec<TaskInput> = specs(args)?
        .into_iter()
        .map(|spec| {
            let globs = spec.byproducts.clone();
            let id = spec.id.clone();
            let env =
                TaskEnv::prepare(&ctx.runtime, spec).with_context(|| format!("prepare {id}"))?;
            Ok(TaskInput {
                env: Arc::new(env),
                byproducts: Arc::new(move |p: &str| globs.matches(p)),
            })
        })
        .collect::<Result<_>>()?;
    let progress = Bar {
        bar: progress_bar(ctx.json, 0, "credit eval"),
        json: ctx.json,
    };
    let report = run(&ctx.runtime, &inputs, &cfg, &progress)?;
    progress.bar.finish_and_clear();
    let outputs = write_outputs(&report, &args.out)?;
    emit(ctx.json, &report, || {
        format!(
            "{}\nper-task tables: {}\nreport: {}\nchart: {}\nwall time {:.0} s\n",
            summary_markdown(&report),
            outputs.markdown.display(),
            outputs.json.display(),
            outputs.plot.display(),
            report.wall_s
        )
    })?;
    Ok(0)
}
