//! With the `train` feature, give `arbor` an rpath to libtorch and link
//! `libtorch_cuda` explicitly (see trainer/torch_link.rs).

include!("../trainer/torch_link.rs");

fn main() {
    println!("cargo:rerun-if-changed=../trainer/torch_link.rs");
    if std::env::var_os("CARGO_FEATURE_TRAIN").is_some() {
        link_torch(&["bins"], true);
    }
}
