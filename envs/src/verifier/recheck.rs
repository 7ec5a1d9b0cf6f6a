//! The arbor process's own re-evaluation of a strict check's recorded
//! assertions (defence in depth behind the trusted runner): the runner
//! records each comparison's operands as [`Canonical`] JSON (the inspector's
//! format, see [`crate::canonical`]), and a passing test stands only if
//! every comparison holds here too.
//!
//! A recorded assertion is `[op, operand...]`: `["eq", a, b]`, `["ne", a,
//! b]`, `["true", a]`, `["false", a]`, `["in", member, container]`,
//! `["notin", member, container]`, `["near", a, b, tolerance]`, `["lt"|"le"|
//! "gt"|"ge", a, b]`, `["raises"]`, or `["overflow"]` when the runner
//! recorded too much to send.

use crate::canonical::{Canonical, CanonicalError, Mismatch};

/// Why a passing test's recorded assertions do not stand.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecheckError {
    /// The test recorded no assertion (a strict test must assert something).
    #[error("the test recorded no assertion")]
    Nothing,
    /// The runner recorded more than it could send.
    #[error("too much recorded data to verify")]
    Overflow,
    /// A recorded assertion that is not `[op, operands...]`.
    #[error("assertion {index}: {problem}")]
    Malformed {
        /// Its position.
        index: usize,
        /// What is wrong with it.
        problem: String,
    },
    /// An operand that is not canonical data.
    #[error("assertion {index}: {source}")]
    Operand {
        /// The assertion's position.
        index: usize,
        /// Why.
        source: CanonicalError,
    },
    /// An operation that does not apply to its operands (`in` on a number).
    #[error("assertion {index}: {source}")]
    Operation {
        /// The assertion's position.
        index: usize,
        /// Why.
        source: Mismatch,
    },
    /// The comparison does not hold here.
    #[error("assertion {index} does not hold: {text}")]
    Fails {
        /// Its position.
        index: usize,
        /// The assertion, shortened.
        text: String,
    },
}

/// Re-evaluate a passing test's recorded assertions here, in the verifier
/// process: the runner only serialises the values (canonical plain data), so
/// a passing test stands only if every comparison it made holds here too,
/// whatever the agent's code did to the interpreter. A passing test must
/// have recorded at least one assertion.
///
/// # Errors
/// [`RecheckError`]: no assertion, an overflow, a malformed record, or the
/// first comparison that does not hold.
pub fn recheck(asserts: &[serde_json::Value]) -> Result<(), RecheckError> {
    if asserts.is_empty() {
        return Err(RecheckError::Nothing);
    }
    for (index, a) in asserts.iter().enumerate() {
        if !eval_assert(index, a)? {
            let text: String = a.to_string().chars().take(200).collect();
            return Err(RecheckError::Fails { index, text });
        }
    }
    Ok(())
}

fn eval_assert(index: usize, a: &serde_json::Value) -> Result<bool, RecheckError> {
    let malformed = |problem: String| RecheckError::Malformed { index, problem };
    let parts = a
        .as_array()
        .ok_or_else(|| malformed("not an array".into()))?;
    let op = parts
        .first()
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| malformed("no operation".into()))?;
    let arg = |i: usize| -> Result<Canonical, RecheckError> {
        let v = parts
            .get(i)
            .ok_or_else(|| malformed(format!("{op}: missing operand {i}")))?;
        Canonical::from_json(v).map_err(|source| RecheckError::Operand { index, source })
    };
    let number = |i: usize| -> Result<f64, RecheckError> {
        let v = arg(i)?;
        v.as_f64()
            .ok_or_else(|| malformed(format!("{op}: operand {i} is a {}", v.type_name())))
    };
    let operation = |source: Mismatch| RecheckError::Operation { index, source };
    Ok(match op {
        "eq" => arg(1)?.equals(&arg(2)?),
        "ne" => !arg(1)?.equals(&arg(2)?),
        "true" => arg(1)? == Canonical::Bool(true),
        "false" => arg(1)? == Canonical::Bool(false),
        "in" => arg(2)?.contains(&arg(1)?).map_err(operation)?,
        "notin" => !arg(2)?.contains(&arg(1)?).map_err(operation)?,
        "near" => {
            let (x, y, tol) = (number(1)?, number(2)?, number(3)?);
            x == y || (x - y).abs() <= tol
        }
        "lt" | "le" | "gt" | "ge" => {
            let (x, y) = (number(1)?, number(2)?);
            match op {
                "lt" => x < y,
                "le" => x <= y,
                "gt" => x > y,
                _ => x >= y,
            }
        }
        "raises" => true,
        "overflow" => return Err(RecheckError::Overflow),
        other => return Err(malformed(format!("unknown operation {other:?}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_assertions_are_rechecked_here() {
        use serde_json::json;
        let ok = |a: serde_json::Value| recheck(&[a]).is_ok();
        assert!(ok(json!(["eq", 3, 3])));
        assert!(!ok(json!(["eq", 3, 4])));
        assert!(
            !ok(json!(["eq", 1, 1.0])),
            "int and float differ, as in the runner"
        );
        assert!(ok(json!(["eq", 0.0, -0.0])));
        assert!(ok(json!([
            "eq",
            {"int": "123456789012345678901234567890"},
            {"int": "123456789012345678901234567890"}
        ])));
        assert!(!ok(json!([
            "eq",
            {"int": "123456789012345678901234567890"},
            {"int": "123456789012345678901234567891"}
        ])));
        assert!(ok(json!(["near", 0.30000000000000004, 0.3, 5e-08])));
        assert!(!ok(json!(["near", 0.31, 0.3, 5e-08])));
        assert!(ok(json!(["lt", 2, 2.5])));
        assert!(!ok(json!(["ge", 2, 2.5])));
        let list = json!([1, "a"]);
        assert!(ok(json!(["eq", list, list])));
        assert!(
            !ok(json!(["eq", list, {"tuple": [1, "a"]}])),
            "list vs tuple"
        );
        assert!(ok(json!(["eq", {"set": [1, 2]}, {"set": [2, 1]}])));
        assert!(ok(json!(["in", "a", list])));
        assert!(ok(json!(["notin", "b", list])));
        assert!(ok(json!(["in", "ell", "hello"])));
        assert!(ok(json!(["in", "k", {"k": 1}])));
        assert!(ok(json!(["true", true])));
        assert!(!ok(json!(["true", 1])));
        assert_eq!(recheck(&[]), Err(RecheckError::Nothing));
        assert_eq!(recheck(&[json!(["overflow"])]), Err(RecheckError::Overflow));
        assert!(matches!(
            recheck(&[json!(["eq", {"tuple": 1}, 1])]),
            Err(RecheckError::Operand { index: 0, .. })
        ));
        assert!(matches!(
            recheck(&[json!(["in", 1, 2])]),
            Err(RecheckError::Operation { index: 0, .. })
        ));
        assert!(matches!(
            recheck(&[json!(["eq", 1, 1]), json!(["eq", 1, 2])]),
            Err(RecheckError::Fails { index: 1, .. })
        ));
    }
}
