//! The `arbor` command line: import host directories as snapshots, run
//! commands in forks of them, diff, log, check out, list, tag, remove,
//! collect and verify. See `arbor --help` and the README.
//!
//! The binary is also the sandbox helper: the runtime spawns it again as
//! `arbor __sandbox-helper`, which must take over before clap or any thread
//! starts (a process with threads cannot enter a new user namespace).
//!
//! Exit status: what the command says (for `exec`, the command's own), 2 for
//! usage and input errors (unknown id, bad tag name, ...), 1 for any other
//! error. Errors print `arbor: error: <message>` with their whole chain.

mod args;
mod commands;
mod credit_eval;
mod error;
mod fanout;
mod output;
mod render;
mod rollout;
mod task;
mod train;
#[cfg(feature = "wasm")]
mod wasm;

use anyhow::Result;
use arbor_runtime::{Runtime, RuntimeOptions};
use clap::Parser as _;
use clap::error::ErrorKind;

use crate::args::Cli;
use crate::commands::Ctx;
use crate::error::{EXIT_USAGE, chain_message, exit_status};

/// The first argument that turns this process into the sandbox helper.
const HELPER_ARG: &str = "__sandbox-helper";

fn main() {
    if std::env::args_os().nth(1).is_some_and(|a| a == HELPER_ARG) {
        arbor_runtime::sandbox::helper::main();
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => usage_error(&e),
    };
    let json = cli.json;
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) if output::is_broken_pipe(&e) => 0,
        Err(e) => report(&e, json),
    };
    std::process::exit(code);
}

/// Open the store and run the command.
fn run(cli: Cli) -> Result<i32> {
    let home = match cli.home {
        Some(home) => home,
        None => RuntimeOptions::default_home()?,
    };
    let mut options = RuntimeOptions::new(home)?;
    if cfg!(feature = "train") && std::env::var_os("ARBOR_SANDBOX_HELPER").is_none() {
        // This binary links libtorch, which takes about a second and 500 MB to
        // load: too slow to start once per sandbox. The small helper built
        // next to it (`cargo build -p arbor-runtime --bins`) drives sandboxes.
        let sibling = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|d| d.join("arbor-sandbox-helper")))
            .filter(|p| p.is_file());
        match sibling {
            Some(program) => {
                options.helper = Some(arbor_runtime::sandbox::HelperCommand {
                    program,
                    args: Vec::new(),
                });
            }
            None => {
                let _ = output::note(
                    cli.json,
                    "this arbor links libtorch and starts slowly as a sandbox helper; build \
                     arbor-sandbox-helper next to it (cargo build --release -p arbor-runtime --bins)",
                );
            }
        }
    }
    // One-shot commands open each sandbox when needed; fanout opens them
    // concurrently itself. A warm pool would only prepare helpers to kill.
    options.warm_helpers = 0;
    let workers = match &cli.command {
        args::Command::Rollout(r) => Some(r.workers),
        args::Command::Train(t) => Some(t.workers),
        args::Command::Credit(c) => c
            .command
            .as_ref()
            .map(|args::CreditCommand::Eval(e)| e.workers),
        _ => None,
    };
    if let Some(w) = workers {
        // Rollouts fork continually: keep helpers prepared for every worker.
        options.warm_helpers =
            w.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    }
    let runtime = Runtime::open(options)?;
    commands::run(
        &Ctx {
            runtime,
            json: cli.json,
        },
        cli.command,
    )
}

/// Print an error (and, with `--json`, an error object on stdout); return
/// its exit status.
fn report(err: &anyhow::Error, json: bool) -> i32 {
    let code = exit_status(err);
    let message = chain_message(err);
    if json {
        let _ = output::json(&serde_json::json!({ "error": message, "exit": code }));
    }
    let _ = output::stderr_bytes(format!("arbor: error: {message}\n").as_bytes());
    code
}

/// Help and version go to stdout with status 0; anything else is a usage
/// error: `arbor: error: ...` and status 2.
fn usage_error(e: &clap::Error) -> ! {
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = output::stdout_bytes(e.render().to_string().as_bytes());
        std::process::exit(0);
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let _ = output::stderr_bytes(e.render().to_string().as_bytes());
        std::process::exit(EXIT_USAGE);
    }
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    if json_requested() {
        // The message proper ends where clap's usage hint begins.
        let message = text.split("\n\n").next().unwrap_or_default();
        let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
        let _ = output::json(&serde_json::json!({ "error": message, "exit": EXIT_USAGE }));
    }
    let _ = output::stderr_bytes(format!("arbor: error: {text}").as_bytes());
    std::process::exit(EXIT_USAGE);
}

/// Whether `--json` appears among the arguments (before any `--`), for
/// errors found before the arguments could be parsed.
fn json_requested() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}
