//! The sandbox helper, built inside the bench package so that its benches
//! can name it through `CARGO_BIN_EXE_arbor-bench-helper`.
fn main() {
    arbor_runtime::sandbox::helper::main()
}
