//! Give `arbor-train` an rpath to libtorch and link `libtorch_cuda`
//! explicitly (see trainer/torch_link.rs).

include!("../../trainer/torch_link.rs");

fn main() {
    println!("cargo:rerun-if-changed=../../trainer/torch_link.rs");
    link_torch(&["bins"], true);
}
