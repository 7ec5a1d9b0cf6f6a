//! Rewriting a guest module once so that its whole state can be captured
//! and restored from the host, as Wizer does:
//!
//! - every mutable global the module defines is exported as
//!   `__arbor_global_<index>`, so the host can read and set it;
//! - active data segments are removed from the module (each becomes an
//!   empty passive segment, so data indices stay valid) and returned as the
//!   initial memory content, which the host maps itself — instantiating
//!   the rewritten module never writes memory, so a snapshot's image
//!   survives instantiation;
//! - a start function is no longer run at instantiation; it is exported as
//!   `__arbor_start` and run once, when the guest is booted;
//! - memory 0 is also exported, as `__arbor_memory`.
//!
//! Everything else is copied byte for byte. Modules that import their
//! memory, define more than one memory, use 64-bit or shared memory, or
//! import mutable globals are refused with a message that says so.

use wasmparser::{DataKind, ExternalKind, Operator, Parser, Payload, TypeRef};

use super::{Result, WasmError};

/// Export name prefix of the mutable globals.
pub const GLOBAL_EXPORT_PREFIX: &str = "__arbor_global_";
/// Export name of the former start function.
pub const START_EXPORT: &str = "__arbor_start";
/// Export name of the memory (added whether or not the module exports it).
pub const MEMORY_EXPORT: &str = "__arbor_memory";

/// A mutable global the host saves and restores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MutableGlobal {
    /// Its export name in the rewritten module.
    pub export: String,
}

/// The result of [`rewrite`].
#[derive(Debug)]
pub struct Rewritten {
    /// The rewritten module.
    pub module: Vec<u8>,
    /// Initial memory size in wasm pages.
    pub min_pages: u64,
    /// Maximum memory size in wasm pages, if the module declares one.
    pub max_pages: Option<u64>,
    /// Active data segments, in order: offset and bytes.
    pub data: Vec<(u64, Vec<u8>)>,
    /// The mutable globals, in index order.
    pub globals: Vec<MutableGlobal>,
    /// Whether the module had a start function (exported as [`START_EXPORT`]).
    pub has_start: bool,
}

fn bad(reason: impl Into<String>) -> WasmError {
    WasmError::UnsupportedModule(reason.into())
}

fn parse_err(e: wasmparser::BinaryReaderError) -> WasmError {
    WasmError::UnsupportedModule(format!("not a valid WebAssembly module: {e}"))
}

fn export_kind(k: ExternalKind) -> wasm_encoder::ExportKind {
    match k {
        ExternalKind::Func | ExternalKind::FuncExact => wasm_encoder::ExportKind::Func,
        ExternalKind::Table => wasm_encoder::ExportKind::Table,
        ExternalKind::Memory => wasm_encoder::ExportKind::Memory,
        ExternalKind::Global => wasm_encoder::ExportKind::Global,
        ExternalKind::Tag => wasm_encoder::ExportKind::Tag,
    }
}

/// Refuse a function that changes a table at run time: tables are not part
/// of a snapshot, so a fork or restore would silently see the initial table.
fn refuse_table_writes(body: &wasmparser::FunctionBody<'_>, func: u32) -> Result<()> {
    let mut ops = body.get_operators_reader().map_err(parse_err)?;
    while !ops.eof() {
        let what = match ops.read().map_err(parse_err)? {
            Operator::TableSet { .. } => "table.set",
            Operator::TableGrow { .. } => "table.grow",
            Operator::TableFill { .. } => "table.fill",
            Operator::TableCopy { .. } => "table.copy",
            Operator::TableInit { .. } => "table.init",
            _ => continue,
        };
        return Err(bad(format!(
            "function {func} uses {what}: tables are not snapshotted, so guests that change \
             a table at run time are not supported"
        )));
    }
    Ok(())
}

/// Rewrite `wasm` (see the module docs).
pub fn rewrite(wasm: &[u8]) -> Result<Rewritten> {
    wasmparser::Validator::new()
        .validate_all(wasm)
        .map_err(parse_err)?;
    let mut out = wasm_encoder::Module::new();
    let mut imported_globals = 0u32;
    let mut imported_funcs = 0u32;
    let mut code_index = 0u32;
    let mut globals = Vec::new();
    let mut memory: Option<(u64, Option<u64>)> = None;
    let mut start: Option<u32> = None;
    let mut exports: Vec<(String, wasm_encoder::ExportKind, u32)> = Vec::new();
    let mut exports_written = false;
    let mut data = Vec::new();
    let mut defined_globals: Vec<(u32, String)> = Vec::new();

    // The export section is buffered and written just before the first
    // section that must follow it (start sections are dropped, and their
    // function is exported), or at the end.
    let write_exports = |out: &mut wasm_encoder::Module,
                         exports: &[(String, wasm_encoder::ExportKind, u32)],
                         globals: &[(u32, String)],
                         start: Option<u32>| {
        let mut sec = wasm_encoder::ExportSection::new();
        for (name, kind, index) in exports {
            sec.export(name, *kind, *index);
        }
        for (index, name) in globals {
            sec.export(name, wasm_encoder::ExportKind::Global, *index);
        }
        if let Some(f) = start {
            sec.export(START_EXPORT, wasm_encoder::ExportKind::Func, f);
        }
        sec.export(MEMORY_EXPORT, wasm_encoder::ExportKind::Memory, 0);
        out.section(&sec);
    };

    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload.map_err(parse_err)?;
        let follows_exports = matches!(
            payload,
            Payload::ElementSection(_)
                | Payload::DataCountSection { .. }
                | Payload::CodeSectionStart { .. }
                | Payload::DataSection(_)
        );
        if follows_exports && !exports_written {
            write_exports(&mut out, &exports, &defined_globals, start);
            exports_written = true;
        }
        match payload {
            Payload::Version { encoding, .. } => {
                if encoding != wasmparser::Encoding::Module {
                    return Err(bad("a component, not a core module"));
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.clone().into_imports() {
                    let import = import.map_err(parse_err)?;
                    match import.ty {
                        TypeRef::Memory(_) => {
                            return Err(bad(format!(
                                "imports its memory ({}::{}); the guest must define it",
                                import.module, import.name
                            )));
                        }
                        TypeRef::Global(g) => {
                            if g.mutable {
                                return Err(bad(format!(
                                    "imports the mutable global {}::{}",
                                    import.module, import.name
                                )));
                            }
                            imported_globals += 1;
                        }
                        TypeRef::Table(_) => {
                            return Err(bad(format!(
                                "imports a table ({}::{}); tables are not snapshotted",
                                import.module, import.name
                            )));
                        }
                        TypeRef::Func(_) | TypeRef::FuncExact(_) => imported_funcs += 1,
                        _ => {}
                    }
                }
                copy_raw(&mut out, wasm, &Payload::ImportSection(reader));
            }
            Payload::MemorySection(reader) => {
                for m in reader.clone() {
                    let m = m.map_err(parse_err)?;
                    if memory.is_some() {
                        return Err(bad("defines more than one memory"));
                    }
                    if m.memory64 || m.shared {
                        return Err(bad("uses a 64-bit or shared memory"));
                    }
                    memory = Some((m.initial, m.maximum));
                }
                copy_raw(&mut out, wasm, &Payload::MemorySection(reader));
            }
            Payload::GlobalSection(reader) => {
                for (i, g) in reader.clone().into_iter().enumerate() {
                    let g = g.map_err(parse_err)?;
                    if g.ty.mutable {
                        let index = imported_globals + i as u32;
                        let export = format!("{GLOBAL_EXPORT_PREFIX}{index}");
                        globals.push(MutableGlobal {
                            export: export.clone(),
                        });
                        defined_globals.push((index, export));
                    }
                }
                copy_raw(&mut out, wasm, &Payload::GlobalSection(reader));
            }
            Payload::ExportSection(reader) => {
                for e in reader {
                    let e = e.map_err(parse_err)?;
                    if e.name.starts_with("__arbor_") {
                        return Err(bad(format!("already exports the reserved name {}", e.name)));
                    }
                    exports.push((e.name.to_owned(), export_kind(e.kind), e.index));
                }
            }
            Payload::StartSection { func, .. } => start = Some(func),
            Payload::DataSection(reader) => {
                let mut sec = wasm_encoder::DataSection::new();
                for d in reader {
                    let d = d.map_err(parse_err)?;
                    match d.kind {
                        DataKind::Passive => {
                            sec.passive(d.data.iter().copied());
                        }
                        DataKind::Active {
                            memory_index,
                            offset_expr,
                        } => {
                            if memory_index != 0 {
                                return Err(bad("a data segment targets a second memory"));
                            }
                            let offset = const_offset(&offset_expr)?;
                            data.push((offset, d.data.to_vec()));
                            sec.passive(std::iter::empty::<u8>());
                        }
                    }
                }
                out.section(&sec);
            }
            Payload::CodeSectionEntry(body) => {
                code_index += 1;
                refuse_table_writes(&body, imported_funcs + code_index - 1)?;
            }
            Payload::End(_) => {}
            other => copy_raw(&mut out, wasm, &other),
        }
    }
    if !exports_written {
        write_exports(&mut out, &exports, &defined_globals, start);
    }
    let (min_pages, max_pages) = memory.ok_or_else(|| bad("defines no memory"))?;
    let module = out.finish();
    wasmparser::Validator::new()
        .validate_all(&module)
        .map_err(|e| bad(format!("the rewritten module does not validate: {e}")))?;
    Ok(Rewritten {
        module,
        min_pages,
        max_pages,
        data,
        globals,
        has_start: start.is_some(),
    })
}

fn copy_raw(out: &mut wasm_encoder::Module, wasm: &[u8], payload: &Payload<'_>) {
    if let Payload::CustomSection(c) = payload {
        out.section(&wasm_encoder::CustomSection {
            name: c.name().into(),
            data: c.data().into(),
        });
    } else if let Some((id, range)) = payload.as_section() {
        out.section(&wasm_encoder::RawSection {
            id,
            data: &wasm[range],
        });
    }
}

fn const_offset(expr: &wasmparser::ConstExpr<'_>) -> Result<u64> {
    let mut ops = expr.get_operators_reader();
    let first = ops.read().map_err(parse_err)?;
    let value = match first {
        Operator::I32Const { value } => u64::from(value as u32),
        other => {
            return Err(bad(format!(
                "a data segment's offset is not a constant ({other:?})"
            )));
        }
    };
    match ops.read().map_err(parse_err)? {
        Operator::End => Ok(value),
        other => Err(bad(format!(
            "a data segment's offset is not a single constant ({other:?})"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-written module: memory 1, a mutable global, an exported
    /// function that bumps it, a data segment and a start function.
    fn sample() -> Vec<u8> {
        let mut m = wasm_encoder::Module::new();
        let mut types = wasm_encoder::TypeSection::new();
        types.ty().function([], []);
        types.ty().function([], [wasm_encoder::ValType::I32]);
        m.section(&types);
        let mut funcs = wasm_encoder::FunctionSection::new();
        funcs.function(0);
        funcs.function(1);
        m.section(&funcs);
        let mut mem = wasm_encoder::MemorySection::new();
        mem.memory(wasm_encoder::MemoryType {
            minimum: 1,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
        m.section(&mem);
        let mut globals = wasm_encoder::GlobalSection::new();
        globals.global(
            wasm_encoder::GlobalType {
                val_type: wasm_encoder::ValType::I32,
                mutable: true,
                shared: false,
            },
            &wasm_encoder::ConstExpr::i32_const(5),
        );
        m.section(&globals);
        let mut exports = wasm_encoder::ExportSection::new();
        exports.export("bump", wasm_encoder::ExportKind::Func, 1);
        exports.export("memory", wasm_encoder::ExportKind::Memory, 0);
        m.section(&exports);
        m.section(&wasm_encoder::StartSection { function_index: 0 });
        let mut code = wasm_encoder::CodeSection::new();
        let mut f0 = wasm_encoder::Function::new([]);
        f0.instructions().end();
        code.function(&f0);
        let mut f1 = wasm_encoder::Function::new([]);
        f1.instructions()
            .global_get(0)
            .i32_const(1)
            .i32_add()
            .global_set(0)
            .global_get(0)
            .end();
        code.function(&f1);
        m.section(&code);
        let mut data = wasm_encoder::DataSection::new();
        data.active(
            0,
            &wasm_encoder::ConstExpr::i32_const(16),
            b"hello".iter().copied(),
        );
        m.section(&data);
        m.finish()
    }

    #[test]
    fn rewrite_exports_globals_and_moves_data_and_start() {
        let r = rewrite(&sample()).unwrap();
        assert_eq!(r.min_pages, 1);
        assert_eq!(r.data, vec![(16, b"hello".to_vec())]);
        assert_eq!(
            r.globals,
            vec![MutableGlobal {
                export: "__arbor_global_0".into()
            }]
        );
        assert!(r.has_start);
        let mut names = Vec::new();
        let mut has_start_section = false;
        for p in Parser::new(0).parse_all(&r.module) {
            match p.unwrap() {
                Payload::ExportSection(s) => {
                    for e in s {
                        names.push(e.unwrap().name.to_owned());
                    }
                }
                Payload::StartSection { .. } => has_start_section = true,
                Payload::DataSection(s) => {
                    for d in s {
                        assert!(matches!(d.unwrap().kind, DataKind::Passive));
                    }
                }
                _ => {}
            }
        }
        assert!(!has_start_section);
        assert_eq!(
            names,
            [
                "bump",
                "memory",
                "__arbor_global_0",
                "__arbor_start",
                "__arbor_memory"
            ]
        );
    }

    #[test]
    fn rewrite_refuses_garbage() {
        assert!(matches!(
            rewrite(b"not wasm"),
            Err(WasmError::UnsupportedModule(_))
        ));
    }

    #[test]
    fn rewrite_refuses_guests_that_change_a_table() {
        let module = |grow: bool| {
            let mut m = wasm_encoder::Module::new();
            let mut types = wasm_encoder::TypeSection::new();
            types.ty().function([], []);
            m.section(&types);
            let mut funcs = wasm_encoder::FunctionSection::new();
            funcs.function(0);
            m.section(&funcs);
            let mut tables = wasm_encoder::TableSection::new();
            tables.table(wasm_encoder::TableType {
                element_type: wasm_encoder::RefType::FUNCREF,
                minimum: 1,
                maximum: None,
                table64: false,
                shared: false,
            });
            m.section(&tables);
            let mut mem = wasm_encoder::MemorySection::new();
            mem.memory(wasm_encoder::MemoryType {
                minimum: 1,
                maximum: None,
                memory64: false,
                shared: false,
                page_size_log2: None,
            });
            m.section(&mem);
            let mut code = wasm_encoder::CodeSection::new();
            let mut f = wasm_encoder::Function::new([]);
            if grow {
                f.instructions()
                    .ref_null(wasm_encoder::HeapType::Abstract {
                        shared: false,
                        ty: wasm_encoder::AbstractHeapType::Func,
                    })
                    .i32_const(1)
                    .table_grow(0)
                    .drop();
            }
            f.instructions().end();
            code.function(&f);
            m.section(&code);
            m.finish()
        };
        assert!(rewrite(&module(false)).is_ok());
        let err = rewrite(&module(true)).unwrap_err().to_string();
        assert!(
            err.contains("table.grow") && err.contains("function 0"),
            "{err}"
        );
    }
}
