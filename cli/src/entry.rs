//! The `main` of both binaries: the sandbox-helper check, argument parsing,
//! opening the store, dispatch, and the exit status.
//!
//! Exit status: what the command says (for `exec`, the command's own), 2 for
//! usage and input errors (unknown id, bad tag name, ...), 1 for any other
//! error. Errors print `arbor: error: <message>` with their whole chain.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use arbor_runtime::{Runtime, RuntimeOptions};
use clap::Parser as _;
use clap::error::ErrorKind;

use crate::args::{self, Cli, Command, CreditCommand};
use crate::commands::Ctx;
use crate::error::{EXIT_USAGE, UsageError, chain_message, exit_status};
use crate::output;

/// The first argument that turns this process into the sandbox helper.
pub const HELPER_ARG: &str = "__sandbox-helper";

/// The trainer binary's name.
pub const TRAINER: &str = "arbor-train";

/// Runs the trainer's commands in `arbor-train`.
pub type Dispatch = fn(&Ctx, Command) -> Result<i32>;

/// Which binary is running.
#[derive(Clone, Copy, Debug)]
pub enum Binary {
    /// `arbor`: every command; the trainer's are handed to `arbor-train`.
    Arbor,
    /// `arbor-train`: only the trainer's commands, run by this function.
    Train(Dispatch),
}

/// Whether `command` needs the trainer (libtorch): `train` and `credit eval`.
pub fn needs_trainer(command: &Command) -> bool {
    match command {
        Command::Train(_) => true,
        Command::Credit(c) => matches!(c.command, Some(CreditCommand::Eval(_))),
        _ => false,
    }
}

/// Parse, run and exit. The sandbox helper takes over before clap or any
/// thread starts (a process with threads cannot enter a new user namespace).
pub fn main(binary: Binary) -> ! {
    if std::env::args_os().nth(1).is_some_and(|a| a == HELPER_ARG) {
        arbor_runtime::sandbox::helper::main();
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => usage_error(&e),
    };
    let json = cli.json;
    let code = match run(cli, binary) {
        Ok(code) => code,
        Err(e) if output::is_broken_pipe(&e) => 0,
        Err(e) => report(&e, json),
    };
    std::process::exit(code);
}

/// Where `arbor-train` is: `$ARBOR_TRAIN`, else next to this executable,
/// else on `$PATH`.
pub fn locate_trainer() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("ARBOR_TRAIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("find the arbor executable")?;
    let sibling = exe.parent().map(|d| d.join(TRAINER));
    if let Some(s) = sibling.as_ref().filter(|p| p.is_file()) {
        return Ok(s.clone());
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(TRAINER))
            .find(|p| p.is_file())
    });
    on_path.ok_or_else(|| {
        anyhow::Error::new(UsageError(format!(
            "`train` and `credit eval` run in the {TRAINER} binary (it links libtorch, which \
             arbor does not), and there is none next to {} or on PATH: build it with \
             `cargo build --release -p {TRAINER}` (make demo does), or set ARBOR_TRAIN",
            exe.display()
        )))
    })
}

/// Replace this process by `arbor-train` with the same arguments.
pub(crate) fn exec_trainer() -> Result<i32> {
    use std::os::unix::process::CommandExt as _;
    let program = locate_trainer()?;
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let err = std::process::Command::new(&program).args(args).exec();
    Err(anyhow::Error::new(err).context(format!("run {}", program.display())))
}

/// Open the store and run the command.
fn run(cli: Cli, binary: Binary) -> Result<i32> {
    let trainer = needs_trainer(&cli.command);
    let dispatch = match binary {
        Binary::Arbor if trainer => return exec_trainer(),
        Binary::Arbor => crate::commands::run,
        Binary::Train(d) if trainer => d,
        Binary::Train(_) => {
            return Err(UsageError(format!(
                "{TRAINER} runs only `train` and `credit eval`; every other command is `arbor`'s"
            ))
            .into());
        }
    };
    let home = match cli.home {
        Some(home) => home,
        None => RuntimeOptions::default_home()?,
    };
    let mut options = RuntimeOptions::new(home)?;
    // One-shot commands open each sandbox when needed; fanout opens them
    // concurrently itself. A warm pool would only prepare helpers to kill.
    options.warm_helpers = 0;
    let workers = match &cli.command {
        Command::Rollout(r) => Some(r.workers),
        Command::Train(t) => Some(t.workers),
        Command::Credit(c) => c
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
    dispatch(
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
