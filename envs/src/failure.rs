//! [`CheckFailure`]: why one hidden check failed. A failing check is a
//! verdict on the agent's work, not a fault of the verifier: it is kept
//! typed until the verdict's report is written, where it becomes text
//! ([`CheckFailure::into_detail`]). Faults of the verifier itself stay
//! errors (`EnvError`), and become fault verdicts without a reward.

use std::fmt;

use crate::canonical::{CanonicalError, Mismatch};
use crate::verifier::RecheckError;

/// Why one hidden check failed (of either backend).
#[derive(Clone, Debug, PartialEq)]
pub enum CheckFailure {
    /// The trusted runner reported the check as failed or in error, with
    /// this text (an assertion's message, an exception, a module's import
    /// error).
    Reported(String),
    /// The runner skipped the check, for this reason.
    Skipped(String),
    /// The check is marked as an expected failure and passed.
    UnexpectedPass,
    /// The check failed as expected (which is not a pass here), with this text.
    ExpectedFailure(String),
    /// A strict check passed in the runner, but a comparison it recorded
    /// does not hold when the verifier makes it.
    Recheck(RecheckError),
    /// The runner did not report the check; with why the subject process
    /// became unusable, if it did.
    NotReported {
        /// Why the subject process became unusable.
        subject: Option<String>,
    },
    /// Session check: the final session had ended (`{0}` is how).
    SessionEnded(String),
    /// Session check: the check's own code did not complete.
    CheckCode {
        /// How it ended (`{:?}` of the step outcome).
        outcome: String,
        /// The tail of its standard error.
        stderr: String,
    },
    /// Session check: the value read is not plain data (the inspector's reason).
    NotPlainData(String),
    /// Session check: the name read is not defined.
    Undefined(String),
    /// Session check: the inspector did not complete (`{:?}` of how it ended).
    Inspector(String),
    /// Session check: the inspector's output is not canonical data.
    InspectorOutput(CanonicalError),
    /// The check's expected value is not canonical data.
    Expected(CanonicalError),
    /// The value read differs from the expected one.
    Mismatch(Mismatch),
    /// Workspace check: the file could not be read.
    Unreadable {
        /// The file, relative to `/workspace`.
        path: String,
        /// Why.
        error: String,
    },
    /// Workspace check: the file's bytes differ from the expected text.
    TextDiffers {
        /// The file, relative to `/workspace`.
        path: String,
        /// Its length in bytes.
        got: usize,
        /// The expected text's length in bytes.
        want: usize,
    },
    /// Workspace check: the file is not JSON.
    NotJson {
        /// The file, relative to `/workspace`.
        path: String,
        /// The parser's message.
        error: String,
    },
    /// Workspace check: the file's JSON is not plain data.
    NotPlainJson(CanonicalError),
}

impl CheckFailure {
    /// The failure as the verdict reports it.
    pub fn into_detail(self) -> String {
        match self {
            Self::Reported(text) => text,
            other => other.to_string(),
        }
    }
}

impl fmt::Display for CheckFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Reported(text) => f.write_str(text),
            Self::Skipped(why) => write!(f, "skipped: {why}"),
            Self::UnexpectedPass => {
                f.write_str("passed unexpectedly (marked as an expected failure)")
            }
            Self::ExpectedFailure(text) => {
                write!(f, "failed as expected (not a pass here): {text}")
            }
            Self::Recheck(why) => write!(f, "the verifier's own comparison failed: {why}"),
            Self::NotReported { subject: Some(why) } => {
                write!(f, "not reported by the runner ({why})")
            }
            Self::NotReported { subject: None } => f.write_str("not reported by the runner"),
            Self::SessionEnded(how) => write!(f, "the session had ended ({how})"),
            Self::CheckCode { outcome, stderr } => {
                write!(f, "the check's code did not complete ({outcome}): {stderr}")
            }
            Self::NotPlainData(why) => write!(f, "not plain data: {why}"),
            Self::Undefined(name) => write!(f, "{name} is not defined"),
            Self::Inspector(how) => write!(f, "the inspector did not complete ({how})"),
            Self::InspectorOutput(e) => write!(f, "the inspector's output: {e}"),
            Self::Expected(e) => write!(f, "the expected value: {e}"),
            Self::Mismatch(m) => write!(f, "{m}"),
            Self::Unreadable { path, error } => write!(f, "{path}: {error}"),
            Self::TextDiffers { path, got, want } => write!(
                f,
                "{path} holds {got} bytes that differ from the expected {want}"
            ),
            Self::NotJson { path, error } => write!(f, "{path} is not JSON: {error}"),
            Self::NotPlainJson(e) => write!(f, "{e}"),
        }
    }
}

/// Record one check's result in a verdict's task outcome (the failure
/// becomes the report's text here).
pub(crate) fn record(
    outcome: &mut arbor_rollout::env::TaskOutcome,
    id: String,
    result: Result<(), CheckFailure>,
) {
    outcome.record(id, result.map_err(CheckFailure::into_detail));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_render_as_the_verdict_reports_them() {
        assert_eq!(
            CheckFailure::Reported("AssertionError: 1 != 2".into()).into_detail(),
            "AssertionError: 1 != 2"
        );
        assert_eq!(
            CheckFailure::Skipped("no network".into()).into_detail(),
            "skipped: no network"
        );
        assert_eq!(
            CheckFailure::NotReported {
                subject: Some("the subject process ended: killed".into())
            }
            .into_detail(),
            "not reported by the runner (the subject process ended: killed)"
        );
        assert_eq!(
            CheckFailure::NotReported { subject: None }.into_detail(),
            "not reported by the runner"
        );
        assert_eq!(
            CheckFailure::TextDiffers {
                path: "out.txt".into(),
                got: 3,
                want: 4
            }
            .into_detail(),
            "out.txt holds 3 bytes that differ from the expected 4"
        );
    }
}
