//! The sandbox helper, built inside the test package so that its integration
//! tests can name it through `CARGO_BIN_EXE_arbor-test-helper`.
fn main() {
    arbor_runtime::sandbox::helper::main()
}
