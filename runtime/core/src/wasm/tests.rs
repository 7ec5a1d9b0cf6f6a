use super::memory::PAGE;
use super::*;
use crate::store::{OwnerMode, Store};
use wasm_encoder::{
    BlockType, CodeSection, ConstExpr, ExportKind, ExportSection, Function, FunctionSection,
    GlobalSection, GlobalType, Instruction as I, MemArg, MemorySection, MemoryType, TypeSection,
    ValType,
};

/// A tiny guest speaking the protocol without WASI: the input buffer is
/// at 1024; `arbor_step` looks at its first byte:
/// `c` bumps a mutable global and stores it at address 0;
/// `g` grows memory by the second byte's pages, writing 1 into each;
/// `l` loops forever; `t` traps; anything else returns 7.
fn tiny_guest() -> Vec<u8> {
    let mut m = wasm_encoder::Module::new();
    let mut types = TypeSection::new();
    types.ty().function([ValType::I32], [ValType::I32]);
    types.ty().function([], [ValType::I32]);
    m.section(&types);
    let mut funcs = FunctionSection::new();
    funcs.function(0);
    funcs.function(1);
    m.section(&funcs);
    let mut mem = MemorySection::new();
    mem.memory(MemoryType {
        minimum: 1,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    m.section(&mem);
    let mut globals = GlobalSection::new();
    globals.global(
        GlobalType {
            val_type: ValType::I32,
            mutable: true,
            shared: false,
        },
        &ConstExpr::i32_const(100),
    );
    m.section(&globals);
    let mut exports = ExportSection::new();
    exports.export("arbor_input", ExportKind::Func, 0);
    exports.export("arbor_step", ExportKind::Func, 1);
    m.section(&exports);
    let mut code = CodeSection::new();
    let mut input = Function::new([]);
    input.instruction(&I::I32Const(1024)).instruction(&I::End);
    code.function(&input);
    let ma = |offset| MemArg {
        offset,
        align: 0,
        memory_index: 0,
    };
    let mut step = Function::new([(2, ValType::I32)]);
    let s = &mut step;
    // local 0: command byte; local 1: loop counter / old size
    s.instruction(&I::I32Const(1024))
        .instruction(&I::I32Load8U(ma(0)))
        .instruction(&I::LocalSet(0));
    // 'c'
    s.instruction(&I::LocalGet(0))
        .instruction(&I::I32Const(b'c' as i32))
        .instruction(&I::I32Eq)
        .instruction(&I::If(BlockType::Empty))
        .instruction(&I::GlobalGet(0))
        .instruction(&I::I32Const(1))
        .instruction(&I::I32Add)
        .instruction(&I::GlobalSet(0))
        .instruction(&I::I32Const(0))
        .instruction(&I::GlobalGet(0))
        .instruction(&I::I32Store(MemArg {
            offset: 0,
            align: 2,
            memory_index: 0,
        }))
        .instruction(&I::I32Const(0))
        .instruction(&I::Return)
        .instruction(&I::End);
    // 'g'
    s.instruction(&I::LocalGet(0))
        .instruction(&I::I32Const(b'g' as i32))
        .instruction(&I::I32Eq)
        .instruction(&I::If(BlockType::Empty))
        .instruction(&I::I32Const(1025))
        .instruction(&I::I32Load8U(ma(0)))
        .instruction(&I::MemoryGrow(0))
        .instruction(&I::LocalTee(1))
        .instruction(&I::I32Const(-1))
        .instruction(&I::I32Eq)
        .instruction(&I::If(BlockType::Empty))
        .instruction(&I::Unreachable)
        .instruction(&I::End)
        .instruction(&I::Block(BlockType::Empty))
        .instruction(&I::Loop(BlockType::Empty))
        .instruction(&I::LocalGet(1))
        .instruction(&I::MemorySize(0))
        .instruction(&I::I32GeU)
        .instruction(&I::BrIf(1))
        .instruction(&I::LocalGet(1))
        .instruction(&I::I32Const(16))
        .instruction(&I::I32Shl)
        .instruction(&I::I32Const(1))
        .instruction(&I::I32Store8(ma(0)))
        .instruction(&I::LocalGet(1))
        .instruction(&I::I32Const(1))
        .instruction(&I::I32Add)
        .instruction(&I::LocalSet(1))
        .instruction(&I::Br(0))
        .instruction(&I::End)
        .instruction(&I::End)
        .instruction(&I::I32Const(0))
        .instruction(&I::Return)
        .instruction(&I::End);
    // 'l'
    s.instruction(&I::LocalGet(0))
        .instruction(&I::I32Const(b'l' as i32))
        .instruction(&I::I32Eq)
        .instruction(&I::If(BlockType::Empty))
        .instruction(&I::Loop(BlockType::Empty))
        .instruction(&I::Br(0))
        .instruction(&I::End)
        .instruction(&I::End);
    // 't'
    s.instruction(&I::LocalGet(0))
        .instruction(&I::I32Const(b't' as i32))
        .instruction(&I::I32Eq)
        .instruction(&I::If(BlockType::Empty))
        .instruction(&I::Unreachable)
        .instruction(&I::End);
    s.instruction(&I::I32Const(7)).instruction(&I::End);
    code.function(&step);
    m.section(&code);
    m.finish()
}

fn rt(dir: &Path, limits: WasmLimits) -> WasmRuntime {
    let store = Store::open(dir, OwnerMode::Rootless).unwrap();
    WasmRuntime::open(
        store,
        WasmOptions {
            no_cache: true,
            limits,
            ..WasmOptions::default()
        },
    )
    .unwrap()
}

fn boot() -> BootSpec {
    BootSpec {
        workspace: false,
        ..BootSpec::python()
    }
}

fn word0(sb: &WasmSandbox) -> u32 {
    let r = sb.region.lock();
    // SAFETY: no guest call runs while the test holds `&sb`.
    let b = unsafe { r.bytes() };
    u32::from_le_bytes(b[..4].try_into().unwrap())
}

#[test]
fn tiny_guest_forks_snapshots_globals_and_memory() {
    let d = tempfile::tempdir().unwrap();
    let rt = rt(d.path(), WasmLimits::default());
    let root = rt.import(&tiny_guest(), &boot()).unwrap();
    assert_eq!(
        root.manifest().globals,
        vec![("__arbor_global_0".into(), GlobalValue::I32(100))]
    );
    let mut sb = root.open().unwrap();
    assert_eq!(sb.step("c").unwrap().outcome, StepOutcome::Ok);
    assert_eq!(word0(&sb), 101);
    assert_eq!(sb.step("g\u{10}").unwrap().outcome, StepOutcome::Ok);
    assert_eq!(sb.memory_bytes(), 17 * PAGE);
    assert_eq!(
        sb.step("x").unwrap().outcome,
        StepOutcome::Status { status: 7 }
    );
    let s1 = sb.snapshot().unwrap();
    assert_eq!(s1.manifest().memory_pages, 17);
    assert_eq!(s1.manifest().globals[0].1, GlobalValue::I32(101));
    assert_eq!(sb.memory_hash(), s1.memory_hash());
    // Forks see the snapshot's memory and globals, independently.
    let mut a = s1.open().unwrap();
    let mut b = s1.open().unwrap();
    assert_eq!(a.memory_bytes(), 17 * PAGE);
    a.step("c").unwrap();
    a.step("c").unwrap();
    b.step("c").unwrap();
    assert_eq!((word0(&a), word0(&b), word0(&sb)), (103, 102, 101));
    assert_ne!(a.memory_hash(), b.memory_hash());
    // Snapshot cost: only the changed page is new.
    let sa = a.snapshot().unwrap();
    let index_a =
        pages::decode_index(&rt.store().get_blob(&sa.manifest().memory).unwrap()).unwrap();
    let index_1 =
        pages::decode_index(&rt.store().get_blob(&s1.manifest().memory).unwrap()).unwrap();
    let differing = index_a.iter().zip(&index_1).filter(|(x, y)| x != y).count();
    assert_eq!(differing, 1);
    // A fresh runtime restores from the store.
    let rt2 = self::rt(d.path(), WasmLimits::default());
    let again = rt2.snapshot(sa.id()).unwrap();
    let mut c = again.open().unwrap();
    assert_eq!(word0(&c), 103);
    c.step("c").unwrap();
    assert_eq!(word0(&c), 104);
    // Replay is exact.
    let rep = rt.replay(&sa).unwrap();
    assert!(rep.identical && rep.steps.len() == 3, "{rep:?}");
    assert!(rt.store().fsck().unwrap().is_clean());
}

#[test]
fn tiny_guest_limits_end_the_session() {
    let d = tempfile::tempdir().unwrap();
    let rt = rt(
        d.path(),
        WasmLimits {
            fuel_per_step: 10_000_000,
            memory_bytes: 8 * PAGE,
            ..WasmLimits::default()
        },
    );
    let root = rt.import(&tiny_guest(), &boot()).unwrap();
    let mut sb = root.open().unwrap();
    let r = sb.step("l").unwrap();
    assert_eq!(r.outcome, StepOutcome::OutOfFuel);
    assert_eq!(r.fuel, 10_000_000);
    assert_eq!(sb.step("c").unwrap().outcome, StepOutcome::Ended);
    let mut sb = root.open().unwrap();
    assert_eq!(
        sb.step("g\u{20}").unwrap().outcome,
        StepOutcome::MemoryLimit
    );
    let mut sb = root.open().unwrap();
    assert!(matches!(
        sb.step("t").unwrap().outcome,
        StepOutcome::Trap { .. }
    ));
    let s = sb.snapshot().unwrap();
    assert!(matches!(s.manifest().ended, Some(StepOutcome::Trap { .. })));
    let mut sb = root.open().unwrap();
    assert_eq!(sb.step("c").unwrap().outcome, StepOutcome::Ok);
    let rt_slow = self::rt(
        d.path(),
        WasmLimits {
            fuel_per_step: u64::MAX / 4,
            timeout: Duration::from_millis(50),
            ..WasmLimits::default()
        },
    );
    let root = rt_slow.snapshot(root.id()).unwrap();
    let mut sb = root.open().unwrap();
    // Fuel would last for ages: only the epoch deadline can stop it.
    assert_eq!(sb.step("l").unwrap().outcome, StepOutcome::Timeout);
    assert_eq!(sb.step("c").unwrap().outcome, StepOutcome::Ended);
}

#[test]
fn strict_session_replay_stops_at_the_first_divergent_snapshot() {
    use crate::replay::ReplayOptions;
    let d = tempfile::tempdir().unwrap();
    let rt = rt(d.path(), WasmLimits::default());
    let mut last = rt.import(&tiny_guest(), &boot()).unwrap();
    for _ in 0..3 {
        let mut sb = last.open().unwrap();
        sb.step("c").unwrap();
        last = sb.snapshot().unwrap();
    }
    let strict = ReplayOptions { strict: true };
    // Control: an unedited chain replays whole and identical, strict or not.
    let rep = rt.replay_with_options(&last, strict).unwrap();
    assert!(
        rep.identical && !rep.stopped_early && rep.steps.len() == 4,
        "{rep:?}"
    );
    // Step 1 edited: strict stops right after it, the default goes on.
    let edit = |step: usize, _: &str| (step == 1).then(|| "x".to_owned());
    let rep = rt.replay_edited(&last, strict, edit).unwrap();
    assert!(!rep.identical && rep.stopped_early, "{rep:?}");
    assert_eq!(rep.steps.len(), 2, "{rep:?}");
    assert_eq!(rep.first_divergence().map(|s| s.step), Some(1));
    let rep = rt
        .replay_edited(&last, ReplayOptions::default(), edit)
        .unwrap();
    assert!(
        !rep.identical && !rep.stopped_early && rep.steps.len() == 4,
        "{rep:?}"
    );
}
