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
//!
//! Stdout and stderr are flushed at the end of every step.

use std::cell::RefCell;

use rustpython::InterpreterBuilderExt;
use rustpython_vm::{
    AsObject, Interpreter, PyResult, Settings, VirtualMachine, compiler::Mode, scope::Scope,
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

/// Run the buffered code in the session's namespace.
#[unsafe(no_mangle)]
pub extern "C" fn arbor_step() -> u32 {
    let code = INPUT.with(|b| std::mem::take(&mut *b.borrow_mut()));
    let Ok(code) = String::from_utf8(code) else {
        return 2;
    };
    SESSION.with(|s| {
        let s = s.borrow();
        let Some(session) = s.as_ref() else {
            return 3;
        };
        session.interp.enter(|vm| {
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
    })
}
