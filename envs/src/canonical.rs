//! [`Canonical`]: the one value format graded Python values take, for both
//! kinds of task, and its comparator.
//!
//! The format is the canonical JSON of the WebAssembly guest's native
//! inspector (`arbor_inspect`, documented in `runtime/core/src/wasm/inspect.rs`),
//! which is the reference: `None` → `null`, `bool` → `true`/`false`, `int` →
//! a number when it fits in i64, else `{"int": "<decimal>"}`, `float`
//! (finite) → a number with a `.` or an exponent, `str` → a string, `list`
//! → an array, `tuple` → `{"tuple": [...]}`, `dict` with `str` keys → an
//! object (keys sorted; a dict whose only key is `dict`, `int`, `set` or
//! `tuple` is wrapped as `{"dict": {...}}`), `set`/`frozenset` of scalars →
//! `{"set": [...]}` (sorted by the elements' JSON text). Anything else
//! (bytes, other key types, sets of containers, NaN and infinities,
//! subclasses, user objects) is refused by both producers.
//!
//! Session tasks read values with the inspector; native tasks' strict
//! checks record the operands of every assertion in the same format
//! (`verifier/strict.py`, `canon`), and the arbor process re-evaluates them
//! with [`Canonical`] (`verifier/recheck.rs`). Expected values of session
//! checks are written in the same format (`envs/TASKS.md`).

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

/// Keys of the one-key objects that stand for non-JSON values.
pub const MARKERS: &[&str] = &["dict", "int", "set", "tuple"];

/// A JSON value that is not canonical data.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CanonicalError {
    /// A marker object (`{"tuple": ...}`, ...) whose payload has the wrong shape.
    #[error("{at}: `{marker}` wants {wants}, got {got}")]
    Marker {
        /// Where in the value (`value[1].k`).
        at: String,
        /// The marker key.
        marker: &'static str,
        /// What its payload must be.
        wants: &'static str,
        /// The payload, shortened.
        got: String,
    },
    /// `{"int": "..."}` whose text is not a decimal integer.
    #[error("{at}: {text:?} is not a decimal integer")]
    IntText {
        /// Where in the value.
        at: String,
        /// The text.
        text: String,
    },
    /// A set element that is a container.
    #[error("{at}: a set holds scalars only")]
    SetElement {
        /// Where in the value.
        at: String,
    },
    /// A JSON number that is neither an integer nor a finite float.
    #[error("{at}: {text} is not a canonical number")]
    Number {
        /// Where in the value.
        at: String,
        /// The number as JSON text.
        text: String,
    },
}

/// A plain Python value in the canonical format.
#[derive(Clone, Debug, PartialEq)]
pub enum Canonical {
    /// `None`.
    None,
    /// `True` or `False`.
    Bool(bool),
    /// An `int`, as its normalised decimal text (any size).
    Int(String),
    /// A finite `float`.
    Float(f64),
    /// A `str`.
    Str(String),
    /// A `list`.
    List(Vec<Canonical>),
    /// A `tuple`.
    Tuple(Vec<Canonical>),
    /// A `dict` with `str` keys.
    Dict(BTreeMap<String, Canonical>),
    /// A `set` or `frozenset` of scalars (in canonical order when produced
    /// by a serialiser; compared as a multiset).
    Set(Vec<Canonical>),
}

/// Why two canonical values differ: where, and how.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {what}")]
pub struct Mismatch {
    /// Where in the value (`value[1].k`).
    pub at: String,
    /// How they differ.
    pub what: String,
}

impl Canonical {
    /// Parse canonical JSON (marker objects read as their values).
    ///
    /// # Errors
    /// [`CanonicalError`] naming where the value is not canonical.
    pub fn from_json(v: &Value) -> Result<Self, CanonicalError> {
        Self::parse(v, "value", true)
    }

    /// Read plain JSON (a JSON file's content) as data: objects are dicts
    /// and arrays lists, with no marker objects.
    ///
    /// # Errors
    /// [`CanonicalError::Number`] for a number that is neither an i64/u64
    /// nor a finite float.
    pub fn from_plain_json(v: &Value) -> Result<Self, CanonicalError> {
        Self::parse(v, "value", false)
    }

    fn parse(v: &Value, at: &str, markers: bool) -> Result<Self, CanonicalError> {
        let items = |xs: &[Value], at: &str| -> Result<Vec<Canonical>, CanonicalError> {
            xs.iter()
                .enumerate()
                .map(|(i, x)| Self::parse(x, &format!("{at}[{i}]"), markers))
                .collect()
        };
        let marker_err =
            |marker: &'static str, wants: &'static str, got: &Value| CanonicalError::Marker {
                at: at.to_owned(),
                marker,
                wants,
                got: short(&got.to_string(), 80),
            };
        Ok(match v {
            Value::Null => Self::None,
            Value::Bool(b) => Self::Bool(*b),
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Self::Int(i.to_string())
                } else if let Some(u) = n.as_u64() {
                    Self::Int(u.to_string())
                } else {
                    match n.as_f64() {
                        Some(f) if f.is_finite() => Self::Float(f),
                        _ => {
                            return Err(CanonicalError::Number {
                                at: at.to_owned(),
                                text: n.to_string(),
                            });
                        }
                    }
                }
            }
            Value::String(s) => Self::Str(s.clone()),
            Value::Array(xs) => Self::List(items(xs, at)?),
            Value::Object(m) => {
                let only = if markers && m.len() == 1 {
                    m.iter().next()
                } else {
                    None
                };
                match only {
                    Some((k, payload)) if k == "tuple" => match payload {
                        Value::Array(xs) => Self::Tuple(items(xs, at)?),
                        other => return Err(marker_err("tuple", "an array", other)),
                    },
                    Some((k, payload)) if k == "set" => match payload {
                        Value::Array(xs) => {
                            let elems = items(xs, at)?;
                            if elems.iter().any(|e| !e.is_scalar()) {
                                return Err(CanonicalError::SetElement { at: at.to_owned() });
                            }
                            Self::Set(elems)
                        }
                        other => return Err(marker_err("set", "an array of scalars", other)),
                    },
                    Some((k, payload)) if k == "int" => match payload {
                        Value::String(s) => {
                            Self::Int(normalise_int(s).ok_or_else(|| CanonicalError::IntText {
                                at: at.to_owned(),
                                text: short(s, 80),
                            })?)
                        }
                        other => return Err(marker_err("int", "a decimal string", other)),
                    },
                    Some((k, payload)) if k == "dict" => match payload {
                        Value::Object(inner) => Self::Dict(entries(inner, at, markers)?),
                        other => return Err(marker_err("dict", "an object", other)),
                    },
                    _ => Self::Dict(entries(m, at, markers)?),
                }
            }
        })
    }

    /// The canonical JSON of this value (what the inspector writes).
    pub fn to_json(&self) -> Value {
        match self {
            Self::None => Value::Null,
            Self::Bool(b) => Value::Bool(*b),
            Self::Int(s) => match s.parse::<i64>() {
                Ok(i) => Value::from(i),
                Err(_) => serde_json::json!({ "int": s }),
            },
            Self::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Self::Str(s) => Value::String(s.clone()),
            Self::List(xs) => Value::Array(xs.iter().map(Self::to_json).collect()),
            Self::Tuple(xs) => {
                serde_json::json!({ "tuple": xs.iter().map(Self::to_json).collect::<Vec<_>>() })
            }
            Self::Dict(m) => {
                let obj: serde_json::Map<String, Value> =
                    m.iter().map(|(k, v)| (k.clone(), v.to_json())).collect();
                if m.len() == 1 && m.keys().all(|k| MARKERS.contains(&k.as_str())) {
                    serde_json::json!({ "dict": obj })
                } else {
                    Value::Object(obj)
                }
            }
            Self::Set(xs) => {
                let mut texts: Vec<(String, Value)> = xs
                    .iter()
                    .map(|x| {
                        let j = x.to_json();
                        (j.to_string(), j)
                    })
                    .collect();
                texts.sort_by(|a, b| a.0.cmp(&b.0));
                serde_json::json!({ "set": texts.into_iter().map(|t| t.1).collect::<Vec<_>>() })
            }
        }
    }

    /// Whether this is a scalar (`None`, bool, int, float, str).
    pub fn is_scalar(&self) -> bool {
        matches!(
            self,
            Self::None | Self::Bool(_) | Self::Int(_) | Self::Float(_) | Self::Str(_)
        )
    }

    /// The Python type's name (`int`, `tuple`, ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::None => "NoneType",
            Self::Bool(_) => "bool",
            Self::Int(_) => "int",
            Self::Float(_) => "float",
            Self::Str(_) => "str",
            Self::List(_) => "list",
            Self::Tuple(_) => "tuple",
            Self::Dict(_) => "dict",
            Self::Set(_) => "set",
        }
    }

    /// An int or float as f64 (big ints rounded).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Self::Int(s) => s.parse().ok(),
            Self::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// Whether `self` equals `want` exactly (floats numerically: `0.0 ==
    /// -0.0`).
    pub fn equals(&self, want: &Self) -> bool {
        self.compare(want, None, "value").is_ok()
    }

    /// Compare `self` (what was read) with `want`: same types (an int never
    /// equals a float, nor a bool an int, nor a list a tuple), dicts by key,
    /// sets as multisets, floats within `tolerance` (exact without one).
    ///
    /// # Errors
    /// The first [`Mismatch`], naming where (`at` is the root's name).
    pub fn compare(&self, want: &Self, tolerance: Option<f64>, at: &str) -> Result<(), Mismatch> {
        let differ = || {
            Err(Mismatch {
                at: at.to_owned(),
                what: format!(
                    "got {}, expected {}",
                    short(&self.to_json().to_string(), 160),
                    short(&want.to_json().to_string(), 160)
                ),
            })
        };
        match (self, want) {
            (Self::None, Self::None) => Ok(()),
            (Self::Bool(a), Self::Bool(b)) if a == b => Ok(()),
            (Self::Int(a), Self::Int(b)) if a == b => Ok(()),
            (Self::Str(a), Self::Str(b)) if a == b => Ok(()),
            (Self::Float(x), Self::Float(y)) => {
                if x == y || tolerance.is_some_and(|t| (x - y).abs() <= t) {
                    Ok(())
                } else {
                    differ()
                }
            }
            (Self::Int(_), Self::Float(_)) | (Self::Float(_), Self::Int(_)) => Err(Mismatch {
                at: at.to_owned(),
                what: format!(
                    "got {}, expected {} (an int and a float differ)",
                    self.to_json(),
                    want.to_json()
                ),
            }),
            (Self::List(a), Self::List(b)) | (Self::Tuple(a), Self::Tuple(b)) => {
                if a.len() != b.len() {
                    return Err(Mismatch {
                        at: at.to_owned(),
                        what: format!(
                            "got {} items, expected {} (got {})",
                            a.len(),
                            b.len(),
                            short(&self.to_json().to_string(), 160)
                        ),
                    });
                }
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    x.compare(y, tolerance, &format!("{at}[{i}]"))?;
                }
                Ok(())
            }
            (Self::Set(xs), Self::Set(ys)) => {
                if xs.len() != ys.len() {
                    return differ();
                }
                let mut used = vec![false; xs.len()];
                for y in ys {
                    let hit = xs
                        .iter()
                        .enumerate()
                        .position(|(i, x)| !used[i] && x.compare(y, tolerance, at).is_ok());
                    match hit {
                        Some(i) => used[i] = true,
                        None => return differ(),
                    }
                }
                Ok(())
            }
            (Self::Dict(a), Self::Dict(b)) => {
                if a.len() != b.len() || a.keys().any(|k| !b.contains_key(k)) {
                    return Err(Mismatch {
                        at: at.to_owned(),
                        what: format!(
                            "got keys {:?}, expected {:?}",
                            a.keys().take(20).collect::<Vec<_>>(),
                            b.keys().take(20).collect::<Vec<_>>()
                        ),
                    });
                }
                for (k, y) in b {
                    if let Some(x) = a.get(k) {
                        x.compare(y, tolerance, &format!("{at}.{k}"))?;
                    }
                }
                Ok(())
            }
            _ => differ(),
        }
    }

    /// Python's `member in self` for plain data: a substring of a `str`,
    /// a key of a `dict`, an element of a list, tuple or set.
    ///
    /// # Errors
    /// A text container with a member that is not text, or a scalar
    /// container (Python raises `TypeError` for both).
    pub fn contains(&self, member: &Self) -> Result<bool, Mismatch> {
        match self {
            Self::Str(hay) => match member {
                Self::Str(needle) => Ok(hay.contains(needle.as_str())),
                other => Err(Mismatch {
                    at: "value".into(),
                    what: format!("a substring test needs text, got a {}", other.type_name()),
                }),
            },
            Self::Dict(m) => Ok(matches!(member, Self::Str(k) if m.contains_key(k))),
            Self::List(xs) | Self::Tuple(xs) | Self::Set(xs) => {
                Ok(xs.iter().any(|x| x.equals(member)))
            }
            other => Err(Mismatch {
                at: "value".into(),
                what: format!("a {} is not a container", other.type_name()),
            }),
        }
    }
}

impl fmt::Display for Canonical {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_json())
    }
}

fn entries(
    m: &serde_json::Map<String, Value>,
    at: &str,
    markers: bool,
) -> Result<BTreeMap<String, Canonical>, CanonicalError> {
    m.iter()
        .map(|(k, v)| {
            Ok((
                k.clone(),
                Canonical::parse(v, &format!("{at}.{k}"), markers)?,
            ))
        })
        .collect()
}

/// `-007` → `-7`; `None` for text that is not a decimal integer.
fn normalise_int(s: &str) -> Option<String> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let trimmed = digits.trim_start_matches('0');
    Some(match (trimmed.is_empty(), neg) {
        (true, _) => "0".to_owned(),
        (false, true) => format!("-{trimmed}"),
        (false, false) => trimmed.to_owned(),
    })
}

/// The first line of `s`, at most `n` characters.
pub(crate) fn short(s: &str, n: usize) -> String {
    let first = s.lines().next().unwrap_or_default();
    let mut out: String = first.chars().take(n).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn c(v: Value) -> Canonical {
        Canonical::from_json(&v).unwrap()
    }

    #[test]
    fn comparison_is_typed_and_sets_are_unordered() {
        let ok = |a: Value, b: Value| c(a).equals(&c(b));
        assert!(ok(json!([1, "a", null]), json!([1, "a", null])));
        assert!(!ok(json!(1), json!(1.0)), "int and float differ");
        assert!(ok(json!(2.5), json!(2.5)));
        assert!(ok(json!(0.0), json!(-0.0)));
        assert!(
            c(json!(0.30000000000000004))
                .compare(&c(json!(0.3)), Some(1e-9), "v")
                .is_ok()
        );
        assert!(!ok(json!(0.30000000000000004), json!(0.3)));
        assert!(ok(json!({"set": [1, 2, 3]}), json!({"set": [3, 1, 2]})));
        assert!(!ok(json!({"set": [1, 2]}), json!({"set": [1, 1]})));
        assert!(ok(
            json!({"b": 1, "a": [true]}),
            json!({"a": [true], "b": 1})
        ));
        assert!(!ok(json!({"a": 1}), json!({"a": 1, "b": 2})));
        assert!(!ok(json!({"tuple": [1]}), json!([1])));
        assert!(!ok(json!(true), json!(1)));
        assert!(ok(json!({"int": "-0012"}), json!({"int": "-12"})));
        assert!(
            ok(json!({"int": "5"}), json!(5)),
            "small ints in either form"
        );
        assert!(!ok(
            json!({"int": "18446744073709551616"}),
            json!({"int": "18446744073709551617"})
        ));
        assert!(
            !ok(json!({"dict": {"set": 1}}), json!({"set": [1]})),
            "a wrapped dict is not a set"
        );
        assert!(ok(
            json!({"dict": {"set": [1]}}),
            json!({"dict": {"set": [1]}})
        ));
        let e = c(json!([1, [2, 3]]))
            .compare(&c(json!([1, [2, 4]])), None, "v")
            .unwrap_err();
        assert_eq!(e.at, "v[1][1]");
    }

    #[test]
    fn malformed_markers_are_refused_and_plain_json_has_none() {
        for bad in [
            json!({"tuple": 1}),
            json!({"set": [[1]]}),
            json!({"int": "1.5"}),
            json!({"int": 3}),
            json!({"dict": [1]}),
        ] {
            assert!(Canonical::from_json(&bad).is_err(), "{bad}");
        }
        // Control: in plain JSON the same objects are dicts.
        let plain = Canonical::from_plain_json(&json!({"tuple": 1})).unwrap();
        assert!(matches!(plain, Canonical::Dict(_)));
    }

    #[test]
    fn json_round_trips_in_canonical_form() {
        for v in [
            json!(null),
            json!({"int": "123456789012345678901234567890"}),
            json!({"tuple": [1, {"tuple": []}]}),
            json!({"set": ["a", -1, 2.5]}),
            json!({"dict": {"tuple": [1]}}),
            json!({"a": {"set": []}, "b": 1e300}),
        ] {
            assert_eq!(c(v.clone()).to_json(), v);
        }
        // A set out of order comes back sorted by the elements' JSON text
        // (`"` sorts before digits).
        assert_eq!(
            c(json!({"set": ["b", 2, "a"]})).to_json(),
            json!({"set": ["a", "b", 2]})
        );
    }

    #[test]
    fn membership_follows_python() {
        let list = c(json!([1, "a"]));
        assert!(list.contains(&c(json!("a"))).unwrap());
        assert!(!list.contains(&c(json!("b"))).unwrap());
        assert!(c(json!("hello")).contains(&c(json!("ell"))).unwrap());
        assert!(c(json!("hello")).contains(&c(json!(1))).is_err());
        assert!(c(json!({"k": 1})).contains(&c(json!("k"))).unwrap());
        assert!(!c(json!({"k": 1})).contains(&c(json!(1))).unwrap());
        assert!(c(json!(3)).contains(&c(json!(3))).is_err());
    }
}
