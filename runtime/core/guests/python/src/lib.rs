//! Arbor's Python guest: a persistent RustPython session for `wasm32-wasip1`.
//!
//! The module is a WASI reactor (no `main`). The host drives it through
//! three exports, and between two calls no guest stack is live, so the
//! whole session state is the linear memory plus the mutable globals:
//!
//! - `arbor_init() -> u32`: build the interpreter (standard library frozen
//!   in), create the `__main__` namespace, `chdir("/workspace")` if it is
//!   there. Returns 0. Called once; Arbor snapshots right after it.
//! - `arbor_input(len) -> ptr`: a guest buffer of `len` bytes the host
//!   writes the next step's source code into (UTF-8).
//! - `arbor_step() -> u32`: run the buffered code in the persistent
//!   namespace. Like a notebook cell, the value of a trailing expression
//!   that is not `None` goes to `sys.displayhook` (its `repr` on stdout). Exceptions are
//!   printed as a traceback on stderr. Returns 0 (ok), 1 (an exception,
//!   `SystemExit` included), 2 (the code is not valid UTF-8), 3 (not
//!   initialised).
//! - `arbor_inspect() -> u32`: read a variable *name* from the input buffer
//!   and write the value bound to it in `__main__` to stdout as canonical
//!   JSON, natively (no Python code runs: no `__eq__`, `__repr__`,
//!   `__iter__`, no `json` module), so what the session's code did to the
//!   interpreter cannot change the answer. See [`arbor_inspect`].
//!
//! Stdout and stderr are flushed at the end of every step.

use std::cell::RefCell;

use rustpython::InterpreterBuilderExt;
use rustpython_vm::{
    AsObject, Interpreter, PyObject, PyResult, Settings, VirtualMachine,
    builtins::{PyDict, PyFloat, PyFrozenSet, PyInt, PyList, PySet, PyStr, PyTuple},
    compiler::Mode,
    scope::Scope,
};

struct Session {
    interp: Interpreter,
    scope: Scope,
}

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
    static INPUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

fn settings() -> Settings {
    let mut s = Settings::default();
    s.argv = vec!["python".to_owned()];
    s.hash_seed = Some(0);
    s.import_site = false;
    s.user_site_directory = false;
    s.isolated = true;
    s.write_bytecode = false;
    s.buffered_stdio = false;
    s.install_signal_handlers = false;
    s
}

fn flush(vm: &VirtualMachine) {
    for name in ["stdout", "stderr"] {
        if let Ok(stream) = vm.sys_module.get_attr(name, vm) {
            let _ = vm.call_method(stream.as_object(), "flush", ());
        }
    }
}

/// Build the interpreter and the persistent namespace.
#[unsafe(no_mangle)]
pub extern "C" fn arbor_init() -> u32 {
    if std::path::Path::new("/workspace").is_dir() {
        let _ = std::env::set_current_dir("/workspace");
    }
    let interp = Interpreter::builder(settings()).init_stdlib().build();
    let scope = interp.enter(|vm| -> PyResult<Scope> {
        let scope = vm.new_scope_with_main()?;
        // Warm the modules every step uses, so that the first step's
        // memory footprint is part of the root snapshot.
        vm.import("linecache", 0)?;
        vm.import("traceback", 0)?;
        flush(vm);
        Ok(scope)
    });
    let scope = match scope {
        Ok(s) => s,
        Err(_) => interp.enter(|vm| vm.new_scope_with_builtins()),
    };
    SESSION.with(|s| *s.borrow_mut() = Some(Session { interp, scope }));
    0
}

/// A buffer of `len` bytes for the next step's code.
#[unsafe(no_mangle)]
pub extern "C" fn arbor_input(len: u32) -> *mut u8 {
    INPUT.with(|b| {
        let mut b = b.borrow_mut();
        b.clear();
        b.resize(len as usize, 0);
        b.as_mut_ptr()
    })
}

/// Byte range of the code's last statement if it is an expression
/// statement (its value is displayed, as in a notebook cell); `None` if it
/// is not, or if the code does not parse (compiling it then reports the
/// syntax error).
///
/// RustPython's own `Mode::BlockExpr` is not used: in 0.5.0 it drops a
/// trailing constant expression (`1`, `"text"`) and then pops an unrelated
/// instruction, which panics the interpreter.
fn trailing_expression(code: &str) -> Option<(usize, usize)> {
    let parsed = rustpython_vm::compiler::parser::parse_module(code).ok()?;
    match parsed.syntax().body.last()? {
        rustpython_vm::compiler::ast::Stmt::Expr(e) => {
            Some((usize::from(e.range.start()), usize::from(e.range.end())))
        }
        _ => None,
    }
}

/// Take the input buffer as text and run `f` in the session's interpreter:
/// 2 if the input is not UTF-8, 3 if the session is not initialised, else
/// what `f` returns.
fn in_session(f: impl FnOnce(&Session, &VirtualMachine, String) -> u32) -> u32 {
    let input = INPUT.with(|b| std::mem::take(&mut *b.borrow_mut()));
    let Ok(input) = String::from_utf8(input) else {
        return 2;
    };
    SESSION.with(|s| {
        let s = s.borrow();
        let Some(session) = s.as_ref() else {
            return 3;
        };
        session.interp.enter(|vm| f(session, vm, input))
    })
}

/// Run the buffered code in the session's namespace.
#[unsafe(no_mangle)]
pub extern "C" fn arbor_step() -> u32 {
    in_session(|session, vm, code| {
        let run = |src: &str, mode: Mode| {
            vm.compile(src, mode, "<step>".to_owned())
                .map_err(|err| vm.new_syntax_error(&err, Some(src)))
                .and_then(|code_obj| vm.run_code_obj(code_obj, session.scope.clone()))
        };
        let result = match trailing_expression(&code) {
            // The statements before it, then the expression alone, on
            // the line it was on (for tracebacks).
            Some((start, end)) => {
                let line = code[..start].matches('\n').count();
                let expr = format!("({}{}\n)", "\n".repeat(line), &code[start..end]);
                run(&code[..start], Mode::Exec).and_then(|_| run(&expr, Mode::Eval))
            }
            None => run(&code, Mode::Exec).map(|_| vm.ctx.none()),
        };
        let status = match result {
            Ok(value) => {
                let shown = if vm.is_none(&value) {
                    Ok(())
                } else {
                    vm.sys_module
                        .get_attr("displayhook", vm)
                        .and_then(|hook| hook.call((value,), vm))
                        .map(drop)
                };
                match shown {
                    Ok(()) => 0,
                    Err(exc) => {
                        vm.print_exception(exc);
                        1
                    }
                }
            }
            Err(exc) => {
                vm.print_exception(exc);
                1
            }
        };
        flush(vm);
        status
    })
}

/// Deepest nesting [`arbor_inspect`] accepts.
const INSPECT_MAX_DEPTH: usize = 64;
/// Largest JSON text [`arbor_inspect`] writes.
const INSPECT_MAX_BYTES: usize = 1 << 20;
/// Keys of the one-key objects that stand for non-JSON values.
const MARKERS: &[&str] = &["dict", "int", "set", "tuple"];

/// Why a value cannot be inspected.
enum Refusal {
    /// A value of this type (named) is not plain data.
    Type(String),
    /// Nested deeper than [`INSPECT_MAX_DEPTH`] (or cyclic).
    Depth,
    /// The JSON would exceed [`INSPECT_MAX_BYTES`].
    Size,
    /// A float that is NaN or infinite.
    NonFinite,
    /// A string with lone surrogates.
    Surrogates,
}

impl Refusal {
    fn message(&self) -> String {
        match self {
            Refusal::Type(t) => format!("a value of type {t} is not plain data"),
            Refusal::Depth => format!("nested deeper than {INSPECT_MAX_DEPTH} (or cyclic)"),
            Refusal::Size => format!("the value's JSON exceeds {INSPECT_MAX_BYTES} bytes"),
            Refusal::NonFinite => "a float that is not finite".to_owned(),
            Refusal::Surrogates => "a string with lone surrogates".to_owned(),
        }
    }
}

fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The type's name, read natively.
fn type_name(obj: &PyObject) -> String {
    obj.class().name().to_string()
}

/// Append the canonical JSON of `obj` to `out`. Only values whose type is
/// exactly one of the plain built-in types are accepted (a subclass is
/// refused, whatever its methods do); nothing is called.
fn encode(
    vm: &VirtualMachine,
    obj: &PyObject,
    depth: usize,
    scalar_only: bool,
    out: &mut String,
) -> Result<(), Refusal> {
    if depth > INSPECT_MAX_DEPTH {
        return Err(Refusal::Depth);
    }
    if out.len() > INSPECT_MAX_BYTES {
        return Err(Refusal::Size);
    }
    if vm.is_none(obj) {
        out.push_str("null");
        return Ok(());
    }
    if obj.is(&vm.ctx.true_value) {
        out.push_str("true");
        return Ok(());
    }
    if obj.is(&vm.ctx.false_value) {
        out.push_str("false");
        return Ok(());
    }
    if let Some(i) = obj.downcast_ref_if_exact::<PyInt>(vm) {
        let big = i.as_bigint();
        match i64::try_from(big) {
            Ok(v) => out.push_str(&v.to_string()),
            Err(_) => {
                out.push_str("{\"int\":\"");
                out.push_str(&big.to_string());
                out.push_str("\"}");
            }
        }
        return Ok(());
    }
    if let Some(f) = obj.downcast_ref_if_exact::<PyFloat>(vm) {
        let v = f.to_f64();
        if !v.is_finite() {
            return Err(Refusal::NonFinite);
        }
        // `{:?}` always has a `.` or an exponent: a JSON float, never an int.
        out.push_str(&format!("{v:?}"));
        return Ok(());
    }
    if let Some(s) = obj.downcast_ref_if_exact::<PyStr>(vm) {
        let s = s.to_str().ok_or(Refusal::Surrogates)?;
        json_string(out, s);
        return Ok(());
    }
    if scalar_only {
        return Err(Refusal::Type(type_name(obj)));
    }
    let seq = |items: &[rustpython_vm::PyObjectRef], out: &mut String| -> Result<(), Refusal> {
        out.push('[');
        for (n, item) in items.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            encode(vm, item, depth + 1, false, out)?;
        }
        out.push(']');
        Ok(())
    };
    if let Some(l) = obj.downcast_ref_if_exact::<PyList>(vm) {
        let items: Vec<_> = l.borrow_vec().to_vec();
        return seq(&items, out);
    }
    if let Some(t) = obj.downcast_ref_if_exact::<PyTuple>(vm) {
        out.push_str("{\"tuple\":");
        seq(t, out)?;
        out.push('}');
        return Ok(());
    }
    if let Some(d) = obj.downcast_ref_if_exact::<PyDict>(vm) {
        let mut entries = Vec::new();
        for (k, v) in d.items_vec() {
            let key = k
                .downcast_ref_if_exact::<PyStr>(vm)
                .ok_or_else(|| Refusal::Type(format!("dict key {}", type_name(&k))))?
                .to_str()
                .ok_or(Refusal::Surrogates)?
                .to_owned();
            entries.push((key, v));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        // A dict that could be read as a marker object is wrapped.
        let wrap = entries.len() == 1 && MARKERS.contains(&entries[0].0.as_str());
        if wrap {
            out.push_str("{\"dict\":");
        }
        out.push('{');
        for (n, (k, v)) in entries.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            json_string(out, k);
            out.push(':');
            encode(vm, v, depth + 1, false, out)?;
        }
        out.push('}');
        if wrap {
            out.push('}');
        }
        return Ok(());
    }
    let elements = if let Some(s) = obj.downcast_ref_if_exact::<PySet>(vm) {
        s.elements()
    } else if let Some(s) = obj.downcast_ref_if_exact::<PyFrozenSet>(vm) {
        s.elements()
    } else {
        return Err(Refusal::Type(type_name(obj)));
    };
    let mut texts = Vec::with_capacity(elements.len());
    for e in &elements {
        let mut t = String::new();
        encode(vm, e, depth + 1, true, &mut t)?;
        texts.push(t);
        if texts.len() > INSPECT_MAX_BYTES / 2 {
            return Err(Refusal::Size);
        }
    }
    texts.sort();
    out.push_str("{\"set\":[");
    out.push_str(&texts.join(","));
    out.push_str("]}");
    Ok(())
}

/// Write the canonical JSON of the value bound to the name in the input
/// buffer (in `__main__`'s globals) to stdout, natively: no Python code
/// runs, so monkeypatched builtins, `__eq__`/`__repr__`/`__iter__`
/// overrides or a replaced `json` module change nothing.
///
/// Accepted: values whose type is *exactly* `None`, `bool`, `int` (a JSON
/// number if it fits in i64, else `{"int": "<decimal>"}`), `float` (finite
/// only), `str`, `list`, `tuple` (`{"tuple": [...]}`), `dict` with `str`
/// keys (keys sorted; a dict whose only key is `dict`, `int`, `set` or
/// `tuple` is wrapped as `{"dict": {...}}`, so markers are unambiguous),
/// `set`/`frozenset` of scalars (`{"set": [...]}`, the elements' JSON
/// texts sorted); nesting at most 64 deep, at most 1 MiB of
/// JSON. Returns 0 (written), 2 (the name is not UTF-8), 3 (not
/// initialised), 4 (refused: a subclass, another type, too deep, too large,
/// or a trace/profile hook is installed, which could rebind names behind
/// the caller's back; the reason is on stderr), 5 (the name is not bound).
#[unsafe(no_mangle)]
pub extern "C" fn arbor_inspect() -> u32 {
    use std::io::Write;
    /// Say why on stderr; the status.
    fn refuse(status: u32, why: std::fmt::Arguments) -> u32 {
        eprintln!("arbor_inspect: {why}");
        let _ = std::io::stderr().flush();
        status
    }
    in_session(|session, vm, name| {
        let hooked = !vm.is_none(&vm.trace_func.borrow())
            || !vm.is_none(&vm.profile_func.borrow())
            || vm.state.global_trace_func.lock().is_some()
            || vm.state.global_profile_func.lock().is_some();
        if hooked {
            return refuse(
                4,
                format_args!("refused: a trace or profile hook is installed"),
            );
        }
        // Scan the entries natively; only a key that is exactly `str`
        // counts (a str subclass with its own `__eq__`/`__hash__` is
        // never consulted).
        let value = session
            .scope
            .globals
            .items_vec()
            .into_iter()
            .find_map(|(k, v)| {
                let k = k.downcast_ref_if_exact::<PyStr>(vm)?;
                (k.to_str() == Some(name.as_str())).then_some(v)
            });
        let Some(value) = value else {
            return refuse(5, format_args!("{name:?} is not defined"));
        };
        let mut out = String::new();
        match encode(vm, &value, 0, false, &mut out) {
            Ok(()) if out.len() <= INSPECT_MAX_BYTES => {
                let mut stdout = std::io::stdout();
                let written = stdout
                    .write_all(out.as_bytes())
                    .and_then(|()| stdout.flush());
                if written.is_err() {
                    return 4;
                }
                0
            }
            Ok(()) => refuse(
                4,
                format_args!("{name}: refused: {}", Refusal::Size.message()),
            ),
            Err(r) => refuse(4, format_args!("{name}: refused: {}", r.message())),
        }
    })
}
