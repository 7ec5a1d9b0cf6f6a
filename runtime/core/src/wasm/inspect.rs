//! Tamper-proof reads of a session's variables: [`WasmSandbox::inspect`]
//! calls the guest's native `arbor_inspect` export, which looks a name up in
//! `__main__`'s globals and serialises the value as canonical JSON without
//! running any Python code (no `__eq__`, `__repr__`, `__iter__`, no `json`
//! module), accepting only values whose type is exactly a plain built-in
//! type. A verifier compares the parsed JSON on the host.
//!
//! The canonical JSON (documented with `arbor_inspect` in the guest):
//! `None` → `null`, `bool` → `true`/`false`, `int` → a number when it fits
//! in i64 else `{"int": "<decimal>"}`, `float` (finite) → a number that
//! always has a `.` or an exponent, `str` → a string, `list` → an array,
//! `tuple` → `{"tuple": [...]}`, `dict` with `str` keys → an object (keys
//! sorted; a dict whose only key is `dict`, `int`, `set` or `tuple` is
//! wrapped as `{"dict": {...}}`), `set`/`frozenset` of scalars → `{"set": [...]}` (sorted by the
//! elements' JSON text).
//!
//! An inspection is *not* recorded as an action (it is not part of the
//! session's history), but it runs guest code, so the sandbox's memory
//! changes: inspect throw-away forks, and do not snapshot a sandbox after
//! inspecting it (its snapshot would not replay).

use super::{Result, StepOutcome, WasmError, WasmLimits, WasmSandbox};

/// Name of the guest's inspector export.
pub const INSPECT_EXPORT: &str = "arbor_inspect";

/// Status `arbor_inspect` returns for a refused value.
const REFUSED: u32 = 4;
/// Status `arbor_inspect` returns for an unbound name.
const UNDEFINED: u32 = 5;

/// The result of [`WasmSandbox::inspect`].
#[derive(Clone, Debug, PartialEq)]
pub enum Inspected {
    /// The value, as canonical JSON.
    Value(serde_json::Value),
    /// The value is not plain data (a subclass, a user object, a function,
    /// too deep, too large, a non-finite float) or a trace/profile hook is
    /// installed; the guest's reason.
    Refused(String),
    /// The name is not bound in `__main__`.
    Undefined,
    /// The inspector did not complete: the session had ended, or the call
    /// trapped or hit a limit (the outcome says which), or it returned an
    /// unknown status.
    Failed(StepOutcome),
}

impl Inspected {
    /// The value, if there is one.
    pub fn value(&self) -> Option<&serde_json::Value> {
        match self {
            Inspected::Value(v) => Some(v),
            _ => None,
        }
    }
}

impl WasmSandbox {
    /// This sandbox's per-step limits (the runtime's when it opened).
    pub fn step_limits(&self) -> WasmLimits {
        self.limits
    }

    /// Replace this sandbox's per-step limits (e.g. a smaller fuel budget
    /// for a verifier's calls than for the agent's steps). Limits are not
    /// part of a snapshot: a sandbox opened later gets the runtime's.
    pub fn set_step_limits(&mut self, limits: WasmLimits) {
        self.limits = limits;
    }

    /// Read the value bound to `name` in the session's `__main__` through
    /// the guest's native inspector (see the module documentation). Not
    /// recorded as an action; the session's memory and clocks change, so
    /// an inspected sandbox refuses to be snapshotted (inspect a fork).
    ///
    /// # Errors
    /// [`WasmError::GuestProtocol`] when the guest has no inspector;
    /// [`WasmError::InvalidInput`] for an empty or over-long name; engine
    /// faults. Guest behaviour is an [`Inspected`] value, never an error.
    pub fn inspect(&mut self, name: &str) -> Result<Inspected> {
        if name.is_empty() || name.len() > 4096 {
            return Err(WasmError::InvalidInput(format!(
                "bad variable name for inspection ({} bytes)",
                name.len()
            )));
        }
        if self.ended.is_some() {
            return Ok(Inspected::Failed(StepOutcome::Ended));
        }
        let input = self
            .input
            .clone()
            .ok_or_else(|| WasmError::GuestProtocol("the guest exports no arbor_input".into()))?;
        let inspect = self
            .instance
            .get_typed_func::<(), u32>(&mut self.store, INSPECT_EXPORT)
            .map_err(|_| {
                WasmError::GuestProtocol(format!(
                    "the guest exports no {INSPECT_EXPORT} (rebuild it with .ci/build-guests)"
                ))
            })?;
        self.inspected = true;
        let sc = self.install_context()?;
        let memory = self.memory;
        let (outcome, _fuel) = self.run_guarded(|store| {
            let ptr = input.call(&mut *store, name.len() as u32)?;
            memory.write(&mut *store, ptr as usize, name.as_bytes())?;
            inspect.call(&mut *store, ())
        })?;
        sc.live.store_into(&mut self.wasi);
        let (stdout, dropped_out) = sc.stdout.take();
        let (stderr, _) = sc.stderr.take();
        let stderr = String::from_utf8_lossy(&stderr).trim().to_owned();
        Ok(match outcome {
            StepOutcome::Ok => {
                if dropped_out > 0 {
                    return Ok(Inspected::Refused(format!(
                        "the value's JSON is larger than the output cap ({} bytes)",
                        self.limits.output_bytes
                    )));
                }
                match serde_json::from_slice(&stdout) {
                    Ok(v) => Inspected::Value(v),
                    Err(e) => {
                        Inspected::Refused(format!("the inspector's output is not JSON: {e}"))
                    }
                }
            }
            StepOutcome::Status { status: REFUSED } => Inspected::Refused(stderr),
            StepOutcome::Status { status: UNDEFINED } => Inspected::Undefined,
            other => {
                if !other.is_alive() {
                    self.ended = Some(other.clone());
                }
                Inspected::Failed(other)
            }
        })
    }
}
