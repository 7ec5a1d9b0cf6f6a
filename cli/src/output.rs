//! Writing results: one JSON object with `--json`, text otherwise. Output
//! goes through these functions so that a closed pipe (`arbor ls | head`)
//! ends the program quietly instead of panicking.

use std::io::Write as _;

use anyhow::{Context as _, Result};
use serde::Serialize;

/// Write bytes to stdout and flush.
pub fn stdout_bytes(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .context("write to stdout")
}

/// Write bytes to stderr and flush.
pub fn stderr_bytes(bytes: &[u8]) -> Result<()> {
    let mut err = std::io::stderr().lock();
    err.write_all(bytes)
        .and_then(|()| err.flush())
        .context("write to stderr")
}

/// Print `value` as one JSON object (and a newline) on stdout.
pub fn json<T: Serialize>(value: &T) -> Result<()> {
    let mut text = serde_json::to_string(value).context("encode the result as JSON")?;
    text.push('\n');
    stdout_bytes(text.as_bytes())
}

/// With `--json`, print `value`; otherwise print the text `human` builds.
pub fn emit<T: Serialize>(as_json: bool, value: &T, human: impl FnOnce() -> String) -> Result<()> {
    if as_json {
        json(value)
    } else {
        stdout_bytes(human().as_bytes())
    }
}

/// A note for the user on stderr (`arbor: ...`), in text mode only.
pub fn note(as_json: bool, text: &str) -> Result<()> {
    if as_json {
        return Ok(());
    }
    stderr_bytes(format!("arbor: {text}\n").as_bytes())
}

/// Whether an error (anywhere in its chain) is a closed stdout or stderr pipe.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}

/// A progress bar on stderr (hidden with `--json` or when stderr is not a terminal).
pub fn progress_bar(as_json: bool, len: u64, what: &str) -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    use std::io::IsTerminal as _;
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if as_json || !std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
        return bar;
    }
    let template = format!("{{spinner}} {what} [{{bar:30}}] {{pos}}/{{len}} {{elapsed}} {{msg}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    bar
}
