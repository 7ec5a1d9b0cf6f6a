//! The sandbox helper binary: see `arbor_runtime::sandbox::helper`.
fn main() {
    arbor_runtime::sandbox::helper::main()
}
