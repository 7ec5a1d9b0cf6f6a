//! `arbor-train`: `arbor train` and `arbor credit eval`, the commands that
//! need the trainer and so libtorch. `arbor` execs this binary for them with
//! the same arguments; everything else (parsing, the store, output, errors)
//! is `arbor`'s own library, so the two behave as one command.

mod credit_eval;
mod train;

use anyhow::Result;
use arbor_cli::args::{Command, CreditCommand};
use arbor_cli::commands::Ctx;
use arbor_cli::entry::{Binary, main as entry};
use arbor_cli::error::UsageError;

fn main() {
    entry(Binary::Train(dispatch));
}

/// The trainer's commands (the entry point lets no other through).
fn dispatch(ctx: &Ctx, command: Command) -> Result<i32> {
    match command {
        Command::Train(args) => train::train(ctx, &args),
        Command::Credit(args) => {
            args.check().map_err(UsageError)?;
            match args.command {
                Some(CreditCommand::Eval(eval)) => credit_eval::eval(ctx, &eval),
                None => Err(UsageError("arbor-train runs `credit eval` only".into()).into()),
            }
        }
        _ => Err(UsageError("arbor-train runs only `train` and `credit eval`".into()).into()),
    }
}
