//! The `trainer` test links libtorch: give the test binaries an rpath to the
//! venv's libtorch (harmless for those that do not link it). Only the rpath:
//! forcing libtorch_cuda in would make every test binary load it.

include!("../trainer/torch_link.rs");

fn main() {
    println!("cargo:rerun-if-changed=../trainer/torch_link.rs");
    link_torch(&["tests"], false);
}
