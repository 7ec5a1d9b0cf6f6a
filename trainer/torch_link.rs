// Shared by trainer/build.rs and cli/build.rs (included, not a module): find
// the libtorch library directory the way torch-sys does with
// LIBTORCH_USE_PYTORCH=1 (the Python `torch` package on PATH), or $LIBTORCH,
// then give the linked binaries an rpath to it and link `libtorch_cuda`
// explicitly (with --no-as-needed): PyPI's libtorch registers CUDA from that
// library's static initialisers, and as-needed linking would drop it, so
// `tch::Cuda::is_available()` would say false on a GPU machine.

fn torch_lib_dir() -> Option<std::path::PathBuf> {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=LIBTORCH_USE_PYTORCH");
    println!("cargo:rerun-if-env-changed=PATH");
    if let Some(dir) = std::env::var_os("LIBTORCH") {
        return Some(std::path::PathBuf::from(dir).join("lib"));
    }
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'lib'))",
        ])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let dir = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    Some(std::path::PathBuf::from(dir))
}

/// Emit the link arguments for `targets` (`bins`, `tests`, ...): an rpath,
/// and with `cuda` the explicit `libtorch_cuda`.
fn link_torch(targets: &[&str], cuda: bool) {
    let Some(dir) = torch_lib_dir() else {
        println!("cargo:warning=libtorch not found (set LIBTORCH_USE_PYTORCH=1 with torch on PATH, or LIBTORCH)");
        return;
    };
    let cuda = cuda && dir.join("libtorch_cuda.so").exists();
    for t in targets {
        println!("cargo:rustc-link-arg-{t}=-Wl,-rpath,{}", dir.display());
        if cuda {
            println!("cargo:rustc-link-arg-{t}=-L{}", dir.display());
            println!("cargo:rustc-link-arg-{t}=-Wl,--no-as-needed,-ltorch_cuda,--as-needed");
        }
    }
}
