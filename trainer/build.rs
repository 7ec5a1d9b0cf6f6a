//! Link the trainer's tests against libtorch with an rpath (no LD_LIBRARY_PATH needed).

include!("torch_link.rs");

fn main() {
    link_torch(&["tests", "benches"], false);
}
