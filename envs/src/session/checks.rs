//! The session task's hidden checks: a session check runs in its own
//! fresh fork of the final snapshot and reads a value with the guest's
//! native inspector; a workspace check reads a file on the host. Both
//! compare in Rust, in the canonical format; a failing check is a
//! [`CheckFailure`] (a verdict), a runtime fault an [`EnvError`].

use std::time::Duration;

use arbor_rollout::EnvError;
use arbor_runtime::wasm::inspect::Inspected;
use arbor_runtime::wasm::{StepOutcome, WasmSandbox, WasmSnapshot};

use super::{SessionEnv, wasm_err};
use crate::canonical::Canonical;
use crate::failure::CheckFailure;
use crate::task::{SessionCheck, SessionTarget, WorkspaceCheck, WorkspaceExpect};
use crate::verifier::{nonce_bytes, tail};

impl SessionEnv {
    /// Run one session check in a fresh fork of `last`. `Ok(Err(why))`: the
    /// check failed (a verdict); `Err`: a runtime fault.
    pub(super) fn session_check(
        &self,
        last: &WasmSnapshot,
        check: &SessionCheck,
    ) -> Result<Result<(), CheckFailure>, EnvError> {
        if let Some(ended) = &last.manifest().ended {
            return Ok(Err(CheckFailure::SessionEnded(format!("{ended:?}"))));
        }
        let mut sb = last.open().map_err(wasm_err)?;
        let mut limits = sb.step_limits();
        limits.fuel_per_step = self.spec.check_fuel;
        limits.timeout = Duration::from_millis(self.spec.checks_timeout_ms);
        sb.set_step_limits(limits);
        let name = match &check.target {
            SessionTarget::Name(n) => n.clone(),
            SessionTarget::Expr(_) => format!("_arbor_check_{}", hex::encode(nonce_bytes())),
        };
        let mut code = check.run.clone().unwrap_or_default();
        if let SessionTarget::Expr(e) = &check.target {
            code.push_str(&format!("\n{name} = (\n{e}\n)\n"));
        }
        if !code.trim().is_empty() {
            let r = sb.step(&code).map_err(wasm_err)?;
            if r.outcome != StepOutcome::Ok {
                return Ok(Err(CheckFailure::CheckCode {
                    outcome: format!("{:?}", r.outcome),
                    stderr: tail(&r.stderr_text(), 300),
                }));
            }
        }
        Ok(match sb.inspect(&name).map_err(wasm_err)? {
            Inspected::Value(v) => compare_canonical(&v, &check.expect, check.tolerance),
            Inspected::Refused(why) => Err(CheckFailure::NotPlainData(tail(&why, 300))),
            Inspected::Undefined => Err(CheckFailure::Undefined(name)),
            Inspected::Failed(o) => Err(CheckFailure::Inspector(format!("{o:?}"))),
        })
    }
}

/// Check one workspace file, read on the host through the sandbox's
/// capability handle.
pub(super) fn workspace_check(
    sb: &WasmSandbox,
    check: &WorkspaceCheck,
) -> Result<(), CheckFailure> {
    let bytes = sb
        .read_file(&check.path)
        .map_err(|e| CheckFailure::Unreadable {
            path: check.path.clone(),
            error: e.to_string(),
        })?;
    match &check.expect {
        WorkspaceExpect::Text(t) => {
            if bytes == t.as_bytes() {
                Ok(())
            } else {
                Err(CheckFailure::TextDiffers {
                    path: check.path.clone(),
                    got: bytes.len(),
                    want: t.len(),
                })
            }
        }
        WorkspaceExpect::Json(expect) => {
            let v: serde_json::Value =
                serde_json::from_slice(&bytes).map_err(|e| CheckFailure::NotJson {
                    path: check.path.clone(),
                    error: e.to_string(),
                })?;
            let got = Canonical::from_plain_json(&v).map_err(CheckFailure::NotPlainJson)?;
            let want = Canonical::from_plain_json(expect).map_err(CheckFailure::NotPlainJson)?;
            got.compare(&want, None, &check.path)
                .map_err(CheckFailure::Mismatch)
        }
    }
}

/// Compare a value the inspector read with a check's expected canonical
/// JSON.
fn compare_canonical(
    got: &serde_json::Value,
    want: &serde_json::Value,
    tolerance: Option<f64>,
) -> Result<(), CheckFailure> {
    let got = Canonical::from_json(got).map_err(CheckFailure::InspectorOutput)?;
    let want = Canonical::from_json(want).map_err(CheckFailure::Expected)?;
    got.compare(&want, tolerance, "value")
        .map_err(CheckFailure::Mismatch)
}
