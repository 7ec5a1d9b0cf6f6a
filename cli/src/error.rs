//! Errors of the binary: how an error chain is printed and which exit
//! status it gets (2 for usage and input errors, 1 for everything else).

use std::fmt::Write as _;

use arbor_runtime::RuntimeError;
use arbor_runtime::layer::LayerError;
use arbor_runtime::sandbox::SandboxError;
use arbor_runtime::store::StoreError;

/// Exit status for usage and input errors (bad arguments, unknown ids, ...).
pub const EXIT_USAGE: i32 = 2;
/// Exit status for every other failure.
pub const EXIT_FAILURE: i32 = 1;

/// A mistake in what the user asked for, found by the CLI itself.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The exit status an error deserves: [`EXIT_USAGE`] when anything in its
/// chain is an input error, else [`EXIT_FAILURE`].
pub fn exit_status(err: &anyhow::Error) -> i32 {
    let input = err.chain().any(|cause| {
        cause.is::<UsageError>()
            || cause
                .downcast_ref::<RuntimeError>()
                .is_some_and(runtime_is_input)
            || cause
                .downcast_ref::<StoreError>()
                .is_some_and(store_is_input)
            || cause
                .downcast_ref::<SandboxError>()
                .is_some_and(sandbox_is_input)
            || cause
                .downcast_ref::<LayerError>()
                .is_some_and(layer_is_input)
    });
    if input { EXIT_USAGE } else { EXIT_FAILURE }
}

fn runtime_is_input(e: &RuntimeError) -> bool {
    match e {
        RuntimeError::BadWorkspaceBackend(_)
        | RuntimeError::NoHome
        | RuntimeError::WasmUnavailable
        | RuntimeError::NoWasmBackend(_)
        | RuntimeError::BadSeed(_)
        | RuntimeError::NativeOnly(_)
        | RuntimeError::NotADirectory(_)
        | RuntimeError::Workdir(_)
        | RuntimeError::DestinationNotEmpty(_) => true,
        RuntimeError::Image(i) => matches!(**i, arbor_runtime::image::ImageError::BadRecipe { .. }),
        RuntimeError::Io { op, source, .. } => {
            *op == "import" && source.kind() == std::io::ErrorKind::NotFound
        }
        RuntimeError::Store(s) => store_is_input(s),
        RuntimeError::Sandbox(s) => sandbox_is_input(s),
        RuntimeError::Layer(l) => layer_is_input(l),
        // The WebAssembly backend's faults (feature `wasm`) are the runtime's.
        _ => false,
    }
}

fn store_is_input(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::UnknownSnapshot(_)
            | StoreError::AmbiguousPrefix { .. }
            | StoreError::InvalidTagName(_)
            | StoreError::UnknownTag(_)
            | StoreError::NotListed(_)
            | StoreError::ModeMismatch { .. }
            | StoreError::UidBaseMismatch { .. }
    )
}

fn sandbox_is_input(e: &SandboxError) -> bool {
    match e {
        SandboxError::Store(s) => store_is_input(s),
        SandboxError::Layer(l) => layer_is_input(l),
        _ => false,
    }
}

fn layer_is_input(e: &LayerError) -> bool {
    matches!(e, LayerError::DestinationNotEmpty { .. })
}

/// The whole chain on one line, `outer: cause: cause`, leaving out a cause
/// whose text the message already contains (many errors quote their source).
pub fn chain_message(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        let _ = write!(out, "{text}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;

    #[test]
    fn input_errors_exit_2_others_1() {
        let unknown = anyhow::Error::from(RuntimeError::Store(StoreError::UnknownSnapshot(
            "abcd".into(),
        )));
        assert_eq!(exit_status(&unknown), EXIT_USAGE);
        let wrapped = Err::<(), _>(StoreError::UnknownTag("t".into()))
            .context("while tagging")
            .unwrap_err();
        assert_eq!(exit_status(&wrapped), EXIT_USAGE);
        let usage = anyhow::Error::from(UsageError("missing NAME".into()));
        assert_eq!(exit_status(&usage), EXIT_USAGE);
        let helper = anyhow::Error::from(RuntimeError::Sandbox(SandboxError::WorkerFailed(
            "boom".into(),
        )));
        assert_eq!(exit_status(&helper), EXIT_FAILURE);
    }

    #[test]
    fn chains_do_not_repeat_quoted_causes() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let err = anyhow::Error::from(RuntimeError::Io {
            op: "import",
            path: "/x".into(),
            source: io,
        });
        assert_eq!(chain_message(&err), "import /x: gone");
        let err = anyhow::Error::from(std::io::Error::other("inner")).context("outer");
        assert_eq!(chain_message(&err), "outer: inner");
    }
}
