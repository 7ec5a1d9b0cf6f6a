//! The vocabulary both backends share: which backend ([`Backend`]), how a
//! step ended ([`Outcome`]), what it printed ([`StepResult`]), what
//! produced a snapshot ([`Record`], [`AnyManifest`]), how two states differ
//! ([`StateDiff`]).

use std::time::Duration;

use serde::Serialize;

use crate::layer::Diff;
use crate::store::object::{Action, ExitStatus, Manifest, ObservationDigest, SnapshotId};

#[cfg(feature = "wasm")]
use crate::wasm::{StepOutcome, WasmAction, WasmManifest};

/// Which backend runs a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Linux namespaces over a copy-on-write workspace; steps are shell commands.
    Native,
    /// A WebAssembly interpreter session; steps are its input (Python source).
    Wasm,
}

impl Backend {
    /// The step text that command-line words stand for. Native: one word is
    /// a shell string as given (`make && make test`); several are an argv,
    /// each word quoted so the shell passes it through unchanged, as
    /// `docker exec` does. A session: the words joined by spaces are one
    /// program text (Python source).
    pub fn step_text(self, words: &[String]) -> String {
        match (self, words) {
            (Self::Wasm, _) => words.join(" "),
            (Self::Native, [one]) => one.clone(),
            (Self::Native, _) => words
                .iter()
                .map(|w| shell_quote(w))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// `native` or `wasm`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Wasm => "wasm",
        }
    }
}

/// Which of an action's output streams a chunk came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// How one step ended, on either backend.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Outcome {
    /// A native action's exit status.
    Exit(ExitStatus),
    /// A session step's outcome.
    #[cfg(feature = "wasm")]
    Session(StepOutcome),
}

impl Outcome {
    /// The status in the native vocabulary (the one mapping onto exit codes).
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            Self::Exit(e) => *e,
            #[cfg(feature = "wasm")]
            Self::Session(o) => o.exit_status(),
        }
    }

    /// The shell-style exit code (124 timeout, 125 disk/memory limit, 128+N signal N).
    pub fn shell_code(&self) -> i32 {
        self.exit_status().shell_code()
    }

    /// A short label (`0`, `timeout`, `signal 9`; `ok`, `exception`, `out of fuel`…).
    pub fn label(&self) -> String {
        match self {
            Self::Exit(e) => e.label(),
            #[cfg(feature = "wasm")]
            Self::Session(o) => o.label(),
        }
    }

    /// Why the step stopped, when that deserves a sentence (`None` for a
    /// normal exit, an ok step or an exception). `timeout` is the step's
    /// wall-clock limit, named in a native timeout's note.
    pub fn note(&self, timeout: Duration) -> Option<String> {
        match self {
            Self::Exit(ExitStatus::Code { .. }) => None,
            Self::Exit(ExitStatus::Timeout) => Some(format!(
                "timed out after {} s; its process tree was killed",
                timeout.as_secs_f64()
            )),
            Self::Exit(ExitStatus::DiskLimit) => {
                Some("stopped: the workspace grew past its disk limit".into())
            }
            Self::Exit(ExitStatus::Signal { signal }) => Some(format!("killed by signal {signal}")),
            #[cfg(feature = "wasm")]
            Self::Session(o) => match o {
                StepOutcome::Ok | StepOutcome::Exception | StepOutcome::Status { .. } => None,
                StepOutcome::Exited { code } => Some(format!(
                    "the guest exited with code {code}; the session has ended"
                )),
                StepOutcome::Trap { message } => Some(format!(
                    "the guest trapped ({message}); the session has ended"
                )),
                StepOutcome::OutOfFuel => {
                    Some("the step ran out of fuel (its CPU budget); the session has ended".into())
                }
                StepOutcome::Timeout => {
                    Some("the step passed its wall-clock limit; the session has ended".into())
                }
                StepOutcome::MemoryLimit => Some(
                    "the guest tried to grow its memory past the cap; the session has ended".into(),
                ),
                StepOutcome::Ended => Some("this session had already ended; nothing ran".into()),
            },
        }
    }
}

/// What one step printed and how it ended, on either backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepResult {
    /// Stdout (capped).
    pub stdout: Vec<u8>,
    /// Stderr (capped).
    pub stderr: Vec<u8>,
    /// How it ended.
    pub outcome: Outcome,
    /// Wall-clock time (not part of any digest).
    pub duration: Duration,
    /// Background processes still running when a native action's shell
    /// exited, which were killed (always empty for a session).
    pub killed_background: Vec<String>,
    /// Fuel a session step used (deterministic); `None` on native.
    pub fuel: Option<u64>,
    /// Bytes of stdout and stderr dropped past a session's output cap
    /// (native output carries its own truncation mark).
    pub dropped: [u64; 2],
    /// Connections through the egress proxy (native sandboxes with an allowlist).
    pub egress: Vec<crate::sandbox::egress::EgressEvent>,
}

impl StepResult {
    /// Stdout as (lossy) UTF-8.
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Stderr as (lossy) UTF-8.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// What produced a snapshot, as recorded: the backend's own actions and
/// their observation digests.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Record<'a> {
    /// A native snapshot's action and observations.
    Native {
        /// The action (a sequence when several ran between two snapshots).
        action: Option<&'a Action>,
        /// One digest per action.
        observations: &'a [ObservationDigest],
        /// Background processes killed when their action ended.
        killed_background: &'a [String],
    },
    /// A session snapshot's actions and memory.
    #[cfg(feature = "wasm")]
    Wasm {
        /// The steps and host file operations since the parent.
        actions: &'a [WasmAction],
        /// The outcome of each step.
        outcomes: Vec<StepOutcome>,
        /// Hash of the linear memory.
        memory_hash: SnapshotId,
        /// Size of the linear memory.
        memory_bytes: u64,
    },
}

/// A snapshot's stored manifest, for display.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(untagged)]
pub enum AnyManifest<'a> {
    /// A native manifest.
    Native(&'a Manifest),
    /// A session record.
    #[cfg(feature = "wasm")]
    Wasm(&'a WasmManifest),
}

/// What a session snapshot holds besides its workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SessionInfo {
    /// The guest module (a blob).
    pub guest_module: SnapshotId,
    /// Hash of the linear memory (equal content, equal hash).
    pub memory_hash: SnapshotId,
    /// Size of the linear memory in bytes.
    pub memory_bytes: u64,
}

/// What [`AnySnapshot::diff`] found.
#[derive(Clone, Debug, Serialize)]
pub struct StateDiff {
    /// Workspace paths added, modified and deleted.
    #[serde(flatten)]
    pub workspace: Diff,
    /// With two sessions, how their linear memories differ.
    #[serde(skip_serializing_if = "Option::is_none", flatten)]
    pub memory: Option<MemoryDiff>,
}

/// How two sessions' linear memories differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryDiff {
    /// 64 KiB pages whose content differs (or that only one side has).
    #[serde(rename = "memory_pages_changed")]
    pub pages_changed: usize,
    /// Size of each memory in bytes.
    #[serde(rename = "memory_bytes")]
    pub bytes: [u64; 2],
}

/// `word` as one shell word: as is when it is plainly safe, else in single
/// quotes (a quote inside becomes `'\\''`).
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// One line describing what produced a session snapshot.
#[cfg(feature = "wasm")]
pub(super) fn session_summary(m: &WasmManifest) -> String {
    match (m.boot.as_ref(), m.actions.as_slice()) {
        (Some(boot), _) => format!(
            "import --wasm {} (guest {})",
            boot.args.first().map_or("?", String::as_str),
            m.guest.short()
        ),
        (None, []) => "(no action)".into(),
        (None, [one]) => one.summary(),
        (None, [first, ..]) => format!("{} steps: {}, ...", m.actions.len(), first.summary()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_share_one_mapping_and_one_set_of_labels() {
        let exit = Outcome::Exit(ExitStatus::Timeout);
        assert_eq!(exit.shell_code(), 124);
        assert_eq!(exit.label(), ExitStatus::Timeout.label());
        assert!(
            exit.note(Duration::from_secs(3))
                .is_some_and(|n| n.contains("after 3 s"))
        );
        // Control: a normal exit has no note.
        assert_eq!(
            Outcome::Exit(ExitStatus::Code { code: 2 }).note(Duration::ZERO),
            None
        );
        #[cfg(feature = "wasm")]
        {
            let fuel = Outcome::Session(StepOutcome::OutOfFuel);
            assert_eq!(fuel.shell_code(), exit.shell_code());
            assert_eq!(fuel.label(), "out of fuel");
            assert!(fuel.note(Duration::ZERO).is_some());
            assert_eq!(
                Outcome::Session(StepOutcome::Exception).note(Duration::ZERO),
                None
            );
        }
    }

    #[test]
    fn several_words_are_an_argv_one_word_a_shell_string() {
        let words = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            Backend::Native.step_text(&words(&["printf", "%s", "a b", "it's", ""])),
            "printf %s 'a b' 'it'\\''s' ''"
        );
        // Control: one word passes through as a shell string.
        assert_eq!(Backend::Native.step_text(&words(&["a && b"])), "a && b");
        assert_eq!(
            Backend::Wasm.step_text(&words(&["print(1,", "2)"])),
            "print(1, 2)"
        );
    }

    #[test]
    fn summaries_are_one_line() {
        let exec = Action::Exec {
            command: "echo a\necho b\n".into(),
            timeout_ms: 1,
        };
        assert_eq!(exec.summary(), "$ echo a\\necho b");
        let seq = Action::Sequence {
            actions: vec![exec, Action::DeleteFile { path: "x".into() }],
        };
        assert_eq!(
            seq.summary(),
            "sequence of 2 actions: $ echo a\\necho b, ..."
        );
    }
}
