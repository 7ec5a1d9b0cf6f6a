//! The sandbox helper, built inside the trainer package so that its tests
//! can name it through `CARGO_BIN_EXE_arbor-trainer-helper`.
fn main() {
    arbor_rollout::runtime::sandbox::helper::main()
}
