//! Arbor side by side with the alternatives users have today (issue 7):
//! `cp -a`, `tar`, git worktrees, a hand-made `unshare` + overlay mount,
//! bubblewrap and podman, on the same generated workspaces (small: 100
//! files / 1 MB; medium: 2,000 files / 50 MB; large: 20,000 files / 500 MB)
//! in the same run. See `arbor_benches::compare` for what each method does.
//!
//! Writes `target/arbor-bench/compare.md`, `compare.json` and
//! `fork-latency.svg` (`compare-quick.*` and `fork-latency-quick.svg` in
//! quick mode, so a smoke run never overwrites a full report).
//! `ARBOR_BENCH_OUT` sets another directory; `ARBOR_COMPARE_WORKLOADS` picks
//! workloads (`small,medium`); `ARBOR_COMPARE_BUDGET_S` sets the soft time
//! budget after which each remaining case takes a single sample.
//!
//! Quick mode (`cargo test --benches`, or `ARBOR_BENCH_QUICK=1`): the small
//! workspace, N = 1 and 8, one sample each; no timing is asserted.

use std::path::Path;

use anyhow::{Context, Result};
use arbor_benches::compare::{self, Plan, report};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-bench-helper");

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("compare: bench");
        return Ok(());
    }
    // Like criterion's filters: `cargo bench -p arbor-benches -- fork` runs
    // only the benches whose names match, and this one is `compare`.
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !filters.is_empty() && !filters.iter().any(|f| "compare".contains(f.as_str())) {
        eprintln!("compare: skipped (no filter matches `compare`)");
        return Ok(());
    }
    let plan = Plan::from_env()?;
    eprintln!(
        "compare: {} mode, workloads {}",
        if plan.quick { "quick" } else { "full" },
        plan.workloads
            .iter()
            .map(|w| w.name)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let report_data = compare::run(&plan, Path::new(HELPER))?;
    let out = arbor_benches::output_dir()?;
    std::fs::create_dir_all(&out).with_context(|| format!("create {}", out.display()))?;
    let suffix = if plan.quick { "-quick" } else { "" };
    let files = [
        (
            format!("compare{suffix}.md"),
            report::to_markdown(&report_data),
        ),
        (
            format!("compare{suffix}.json"),
            report::to_json(&report_data),
        ),
        (
            format!("fork-latency{suffix}.svg"),
            report::fork_chart_svg(&report_data),
        ),
    ];
    for (name, text) in files {
        let path = out.join(name);
        std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
        eprintln!("compare: wrote {}", path.display());
    }
    eprintln!("compare: done in {:.1} s", report_data.wall.as_secs_f64());
    Ok(())
}
