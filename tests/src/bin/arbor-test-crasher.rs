//! Runs the import → exec → snapshot → tag protocol on a store, for the crash
//! tests: with `ARBOR_FAILPOINT` set, the process dies at that step. With the
//! feature `wasm` it then does the same for a WebAssembly session whose
//! workspace starts from the native snapshot's layers: boot (tagged
//! `session-base` once), a workspace write and a step, snapshot (tagged
//! `session-latest`). Last, gc.
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
    #[cfg(feature = "wasm")]
    session(&runtime, &base)?;
    let _ = runtime.store().gc()?;
    Ok(())
}

/// The session part: every step of a session snapshot with a workspace.
#[cfg(feature = "wasm")]
fn session(runtime: &arbor_runtime::Runtime, base: &arbor_runtime::Snapshot) -> anyhow::Result<()> {
    use arbor_runtime::wasm::{BootSpec, StepOutcome, WasmLimits};
    let wasm = runtime.wasm(WasmLimits::default())?;
    let store = runtime.store();
    let root = match store.get_tag("session-base")? {
        Some(id) => wasm.snapshot(&id)?,
        None => {
            let boot = BootSpec {
                workspace_layers: base.manifest().layers.clone(),
                ..BootSpec::python()
            };
            let root = wasm.import(&arbor_tests::tiny_guest(), &boot)?;
            store.set_tag("session-base", root.id())?;
            root
        }
    };
    let mut sb = root.open()?;
    sb.write_file("out/session", b"1\n")?;
    let step = sb.step("s")?;
    anyhow::ensure!(step.outcome == StepOutcome::Ok, "{:?}", step.outcome);
    let snap = sb.snapshot()?;
    anyhow::ensure!(
        snap.manifest().layers.len() > root.manifest().layers.len(),
        "the session's workspace write made no layer"
    );
    store.set_tag("session-latest", snap.id())?;
    Ok(())
}
