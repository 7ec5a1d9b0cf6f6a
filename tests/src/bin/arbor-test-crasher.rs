//! Runs the import → exec → snapshot → tag protocol on a store, for the crash
//! tests: with `ARBOR_FAILPOINT` set, the process dies at that step.
//!
//! Usage: `arbor-test-crasher HOME HELPER SOURCE_DIR`. Prints `helper <pid>`
//! once a sandbox is running.

use std::io::Write;
use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1).map(PathBuf::from);
    let (Some(home), Some(helper), Some(src)) = (args.next(), args.next(), args.next()) else {
        anyhow::bail!("usage: arbor-test-crasher HOME HELPER SOURCE_DIR");
    };
    let runtime = arbor_runtime::Runtime::open(arbor_tests::options(&home, &helper))?;
    let base = match runtime.store().get_tag("base")? {
        Some(id) => runtime.snapshot(&id)?,
        None => runtime.import(&src, Some("base"))?,
    };
    let mut sb = base.open()?;
    println!("helper {}", sb.helper_pid());
    std::io::stdout().flush()?;
    sb.exec(
        "echo changed >> README.md; mkdir -p out && echo 1 > out/x",
        &arbor_runtime::ExecOptions::default(),
    )?;
    let snap = sb.snapshot()?;
    runtime.store().set_tag("latest", snap.id())?;
    let _ = runtime.store().gc()?;
    Ok(())
}
