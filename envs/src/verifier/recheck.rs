//! The arbor process's own re-evaluation of a strict check's recorded
//! assertions (defence in depth behind the trusted runner): the runner
//! serialises each comparison's operands as canonical plain data, and a
//! passing test stands only if every comparison holds here too.
//!
//! Canonical values are `[tag, payload]`: `["none"]`, `["bool", b]`,
//! `["int", "digits"]`, `["float", "repr"]`, `["str", s]`, `["bytes", hex]`,
//! `["list"|"tuple"|"set"|"frozenset", [items]]`, `["dict", [[k, v], ...]]`.

/// Re-evaluate a passing test's recorded assertions here, in the verifier
/// process: the runner only serialises the values (canonical plain data), so
/// a passing test stands only if every comparison it made holds here too,
/// whatever the agent's code did to the interpreter. A passing test must
/// have recorded at least one assertion.
pub fn recheck(asserts: &[serde_json::Value]) -> Result<(), String> {
    if asserts.is_empty() {
        return Err("the test recorded no assertion".to_owned());
    }
    for (i, a) in asserts.iter().enumerate() {
        let ok = eval_assert(a).map_err(|e| format!("assertion {i}: {e}"))?;
        if !ok {
            let text = a.to_string();
            let short: String = text.chars().take(200).collect();
            return Err(format!("assertion {i} does not hold: {short}"));
        }
    }
    Ok(())
}

fn eval_assert(a: &serde_json::Value) -> Result<bool, String> {
    use serde_json::Value;
    let parts = a.as_array().ok_or("not an array")?;
    let op = parts
        .first()
        .and_then(Value::as_str)
        .ok_or("no operation")?;
    let arg = |i: usize| {
        parts
            .get(i)
            .ok_or_else(|| format!("{op}: missing operand {i}"))
    };
    Ok(match op {
        "eq" => canon_eq(arg(1)?, arg(2)?)?,
        "ne" => !canon_eq(arg(1)?, arg(2)?)?,
        "true" => canon_eq(arg(1)?, &serde_json::json!(["bool", true]))?,
        "false" => canon_eq(arg(1)?, &serde_json::json!(["bool", false]))?,
        "in" | "notin" => {
            let found = canon_contains(arg(2)?, arg(1)?)?;
            if op == "in" { found } else { !found }
        }
        "near" => {
            let (x, y) = (canon_number(arg(1)?)?, canon_number(arg(2)?)?);
            let tol = canon_number(arg(3)?)?;
            x == y || (x - y).abs() <= tol
        }
        "lt" | "le" | "gt" | "ge" => {
            let (x, y) = (canon_number(arg(1)?)?, canon_number(arg(2)?)?);
            match op {
                "lt" => x < y,
                "le" => x <= y,
                "gt" => x > y,
                _ => x >= y,
            }
        }
        "raises" => true,
        "overflow" => return Err("too much recorded data to verify".to_owned()),
        other => return Err(format!("unknown operation {other:?}")),
    })
}

/// A canonical value's tag and payload.
fn canon_parts(v: &serde_json::Value) -> Result<(&str, Option<&serde_json::Value>), String> {
    let arr = v
        .as_array()
        .ok_or_else(|| format!("not a canonical value: {v}"))?;
    let tag = arr
        .first()
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| format!("not a canonical value: {v}"))?;
    Ok((tag, arr.get(1)))
}

fn canon_number(v: &serde_json::Value) -> Result<f64, String> {
    match canon_parts(v)? {
        ("int" | "float", Some(serde_json::Value::String(s))) => {
            s.parse::<f64>().map_err(|e| format!("{s:?}: {e}"))
        }
        _ => Err(format!("not a number: {v}")),
    }
}

/// Equality of canonical values: same type, same value (floats numerically).
fn canon_eq(a: &serde_json::Value, b: &serde_json::Value) -> Result<bool, String> {
    let (ta, pa) = canon_parts(a)?;
    let (tb, pb) = canon_parts(b)?;
    if ta != tb {
        return Ok(false);
    }
    match ta {
        "float" => {
            let (x, y) = (canon_number(a)?, canon_number(b)?);
            Ok(x == y || (x.is_nan() && y.is_nan()))
        }
        "list" | "tuple" | "set" | "frozenset" => {
            let (xs, ys) = (as_items(pa)?, as_items(pb)?);
            if xs.len() != ys.len() {
                return Ok(false);
            }
            for (x, y) in xs.iter().zip(ys) {
                if !canon_eq(x, y)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        "dict" => {
            let (xs, ys) = (as_items(pa)?, as_items(pb)?);
            if xs.len() != ys.len() {
                return Ok(false);
            }
            for (x, y) in xs.iter().zip(ys) {
                let (kx, ky) = (as_items(Some(x))?, as_items(Some(y))?);
                if kx.len() != 2 || ky.len() != 2 {
                    return Err("a dict entry is not a pair".to_owned());
                }
                if !canon_eq(&kx[0], &ky[0])? || !canon_eq(&kx[1], &ky[1])? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        _ => Ok(pa == pb),
    }
}

fn as_items(v: Option<&serde_json::Value>) -> Result<&Vec<serde_json::Value>, String> {
    v.and_then(serde_json::Value::as_array)
        .ok_or_else(|| "a container without items".to_owned())
}

fn canon_contains(
    container: &serde_json::Value,
    member: &serde_json::Value,
) -> Result<bool, String> {
    let (tag, payload) = canon_parts(container)?;
    match tag {
        "str" | "bytes" => {
            let (mt, mp) = canon_parts(member)?;
            if mt != tag {
                return Err("substring test needs text on both sides".to_owned());
            }
            let hay = payload
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default();
            let needle = mp.and_then(serde_json::Value::as_str).unwrap_or_default();
            if tag == "bytes" {
                // Hex pairs: search on byte boundaries.
                Ok(hay.len() >= needle.len()
                    && (0..=hay.len() - needle.len())
                        .step_by(2)
                        .any(|i| &hay[i..i + needle.len()] == needle))
            } else {
                Ok(hay.contains(needle))
            }
        }
        "dict" => {
            for pair in as_items(payload)? {
                if canon_eq(&as_items(Some(pair))?[0], member)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        _ => {
            for item in as_items(payload)? {
                if canon_eq(item, member)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_assertions_are_rechecked_here() {
        use serde_json::json;
        let i = |n: i64| json!(["int", n.to_string()]);
        let f = |x: &str| json!(["float", x]);
        let ok = |a: serde_json::Value| recheck(&[a]).is_ok();
        assert!(ok(json!(["eq", i(3), i(3)])));
        assert!(!ok(json!(["eq", i(3), i(4)])));
        assert!(
            !ok(json!(["eq", i(1), f("1.0")])),
            "int and float differ, as in the runner"
        );
        assert!(ok(json!(["eq", f("0.0"), f("-0.0")])));
        assert!(ok(json!(["eq", f("nan"), f("nan")])));
        assert!(ok(json!([
            "near",
            f("0.30000000000000004"),
            f("0.3"),
            f("5e-08")
        ])));
        assert!(!ok(json!(["near", f("0.31"), f("0.3"), f("5e-08")])));
        assert!(ok(json!(["lt", i(2), f("2.5")])));
        assert!(!ok(json!(["ge", i(2), f("2.5")])));
        let list = json!(["list", [i(1), ["str", "a"]]]);
        assert!(ok(json!(["eq", list, list])));
        assert!(ok(json!(["in", ["str", "a"], list])));
        assert!(ok(json!(["notin", ["str", "b"], list])));
        assert!(ok(json!(["in", ["str", "ell"], ["str", "hello"]])));
        assert!(ok(json!([
            "in",
            ["bytes", "6c6c"],
            ["bytes", "68656c6c6f"]
        ])));
        assert!(
            !ok(json!(["in", ["bytes", "56"], ["bytes", "6565"]])),
            "byte boundaries"
        );
        let d = json!(["dict", [[["str", "k"], i(1)]]]);
        assert!(ok(json!(["in", ["str", "k"], d])));
        assert!(ok(json!(["true", ["bool", true]])));
        assert!(!ok(json!(["true", i(1)])));
        assert!(
            recheck(&[]).is_err(),
            "a passing test must have asserted something"
        );
        assert!(recheck(&[json!(["overflow"])]).is_err());
        assert!(recheck(&[json!(["eq", "junk", i(1)])]).is_err());
    }
}
