//! Images: import time of an image archive and of a large root filesystem,
//! bytes stored for two images that share a base, fork + `true` on an
//! image-backed sandbox against a host-view sandbox (and on a small image
//! against the large one: forks must be flat in image size), and the egress
//! proxy's throughput against a direct download from the host — all in one
//! run.
//!
//! The images are real: a root filesystem of the host's bash and coreutils
//! with their libraries (`rootfs_of_host_tools`), plus a filler layer of
//! incompressible files up to the size asked (500 MB full, 20 MB quick),
//! written as an OCI layout (zstd base, plain filler) and as an oci-archive.
//! Forks are timed from `Snapshot::open()` to the exit of `true`, with the
//! warm pool refilled before each round; host-view, small-image and
//! large-image samples are interleaved. The proxy measure downloads one
//! wheel from the package index (its URL read from the index's simple page at
//! run time) inside a sandbox allowed exactly that host, and the same file
//! directly on the host; it is skipped, and says so, when the index cannot
//! be reached.
//!
//! Writes `target/arbor-bench/images.md`, `images.json` and
//! `images-fork.svg` (`-quick` suffixes in quick mode). Quick mode
//! (`cargo test --benches`, or `ARBOR_BENCH_QUICK=1`) uses the 20 MB image,
//! 6 fork samples per kind and no download; no timing is asserted.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use arbor_benches::{BenchEnv, Xorshift64, quick_mode};
use arbor_runtime::image::write::{LayoutLayer, rootfs_of_host_tools, tar_dir, write_oci_layout};
use arbor_runtime::image::{Compression, ImageImport};
use arbor_runtime::store::ImageConfig;
use arbor_runtime::{ExecOptions, Snapshot};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-bench-helper");
const TOOLS: &[&str] = &["bash", "cat", "env", "ls", "true"];

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Incompressible files totalling `bytes` under `dir/opt/filler`.
fn filler(dir: &Path, bytes: u64, rng: &mut Xorshift64) -> Result<()> {
    let d = dir.join("opt/filler");
    std::fs::create_dir_all(&d)?;
    let per = 1u64 << 20;
    let mut buf = vec![0u8; per as usize];
    for i in 0..bytes.div_ceil(per) {
        for c in buf.chunks_mut(8) {
            let x = rng.next_u64().to_le_bytes();
            c.copy_from_slice(&x[..c.len()]);
        }
        std::fs::write(d.join(format!("f{i:05}")), &buf)?;
    }
    Ok(())
}

fn du(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                total += m.len();
            }
        }
    }
    total
}

fn fork_true(snap: &Snapshot) -> Result<f64> {
    let t = Instant::now();
    let mut sb = snap.open()?;
    let o = sb.exec("true", &ExecOptions::default())?;
    let us = t.elapsed().as_secs_f64() * 1e6;
    ensure!(
        o.code() == Some(0),
        "true failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Ok(us)
}

struct Results {
    quick: bool,
    import_layout_s: f64,
    import_archive_s: f64,
    base_bytes: u64,
    store_after_one: u64,
    store_after_two: u64,
    fork_us: [(String, f64, usize); 3],
    proxy: Option<(f64, f64, u64)>,
}

fn run(quick: bool) -> Result<Results> {
    let env = BenchEnv::open(Path::new(HELPER))?;
    let rt = &env.runtime;
    let image_bytes: u64 = if quick { 20 << 20 } else { 500 << 20 };
    let samples = if quick { 6 } else { 60 };
    let mut rng = Xorshift64::new(7);
    // The base: tools; the large image adds the filler; a second image adds
    // a different small layer on the same base.
    let base = env.scratch("base");
    rootfs_of_host_tools(&base, TOOLS)?;
    let big = env.scratch("big");
    filler(&big, image_bytes, &mut rng)?;
    let small = env.scratch("small");
    std::fs::create_dir_all(small.join("etc"))?;
    std::fs::write(small.join("etc/variant"), "small\n")?;
    let base_tar = tar_dir(&base)?;
    let layer = |tar: Vec<u8>, compression| LayoutLayer { tar, compression };
    let big_layout = env.scratch("big-layout");
    write_oci_layout(
        &big_layout,
        &[
            layer(base_tar.clone(), Compression::Zstd),
            layer(tar_dir(&big)?, Compression::None),
        ],
        &ImageConfig::default(),
        Some("big"),
    )?;
    let small_tar = tar_dir(&small)?;
    // A second image on the large one as its base: shares both its layers.
    let derived_layout = env.scratch("derived-layout");
    write_oci_layout(
        &derived_layout,
        &[
            layer(base_tar.clone(), Compression::Zstd),
            layer(tar_dir(&big)?, Compression::None),
            layer(small_tar.clone(), Compression::Gzip),
        ],
        &ImageConfig::default(),
        Some("derived"),
    )?;
    let small_layout = env.scratch("small-layout");
    write_oci_layout(
        &small_layout,
        &[
            layer(base_tar, Compression::Zstd),
            layer(small_tar, Compression::Gzip),
        ],
        &ImageConfig::default(),
        Some("small"),
    )?;
    let archive = env.scratch("big.oci.tar");
    std::fs::write(&archive, tar_dir(&big_layout)?)?;
    arbor_benches::sync_all()?;
    let layers_dir = rt.store().root().join("layers");
    let before = du(&layers_dir);
    let t = Instant::now();
    let big_img = rt.import_image(&big_layout, &ImageImport::default())?;
    let import_layout_s = t.elapsed().as_secs_f64();
    let store_after_one = du(&layers_dir) - before;
    let derived = rt.import_image(&derived_layout, &ImageImport::default())?;
    ensure!(
        derived.layers_shared == 2 && derived.layers_new == 1,
        "the base layers were not shared"
    );
    let store_after_two = du(&layers_dir) - before;
    let base_bytes = big_img.record.bytes;
    let small_img = rt.import_image(&small_layout, &ImageImport::default())?;
    // The archive of the same image: unpacked and verified again, stored once.
    let t = Instant::now();
    let again = rt.import_image(
        &archive,
        &ImageImport {
            name: Some("big-archive".into()),
            ..Default::default()
        },
    )?;
    let import_archive_s = t.elapsed().as_secs_f64();
    ensure!(
        again.record.layers == big_img.record.layers && again.layers_new == 0,
        "the archive gave other layers"
    );

    let ws = env.scratch("ws");
    std::fs::create_dir_all(&ws)?;
    std::fs::write(ws.join("main.py"), "print(1)\n")?;
    let host_snap = rt.import(&ws, None)?;
    let big_snap = rt.import_on(&ws, None, Some(&rt.image(&big_img.name)?))?;
    let small_snap = rt.import_on(&ws, None, Some(&rt.image(&small_img.name)?))?;
    let kinds: [(&str, &Snapshot); 3] = [
        ("host view", &host_snap),
        ("small image", &small_snap),
        ("large image", &big_snap),
    ];
    let mut times: [Vec<f64>; 3] = Default::default();
    for (_, s) in &kinds {
        fork_true(s)?; // warm up each pool
    }
    for round in 0..samples {
        for k in 0..3 {
            let i = (k + round) % 3;
            rt.warm_up(Duration::from_secs(10))?;
            if i > 0 {
                let img = rt.image(if i == 1 {
                    &small_img.name
                } else {
                    &big_img.name
                })?;
                rt.warm_up_image(&img, Duration::from_secs(10))?;
            }
            times[i].push(fork_true(kinds[i].1)?);
        }
    }
    let fork_us = [0, 1, 2].map(|i| (kinds[i].0.to_owned(), median(&mut times[i]), times[i].len()));
    let proxy = if quick {
        None
    } else {
        proxy_measure(&host_snap).unwrap_or_else(|e| {
            eprintln!("images: the proxy measure is skipped: {e:#}");
            None
        })
    };
    Ok(Results {
        quick,
        import_layout_s,
        import_archive_s,
        base_bytes,
        store_after_one,
        store_after_two,
        fork_us,
        proxy,
    })
}

const FETCH: &str = "import os, sys, time, urllib.request\nt = time.monotonic()\nn = len(urllib.request.urlopen(sys.argv[1], timeout=120).read())\nprint(n, time.monotonic() - t)\n";

/// (direct MB/s, proxied MB/s, bytes) for one wheel from the index.
fn proxy_measure(snap: &Snapshot) -> Result<Option<(f64, f64, u64)>> {
    let meta = std::process::Command::new("python3")
        .args([
            "-c",
            "import re, urllib.request\n\
             h = urllib.request.urlopen('https://pypi.org/simple/numpy/', timeout=30).read().decode()\n\
             print([u for u in re.findall(r'href=\"([^\"]+)\"', h) \
             if 'numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64' in u][0].split('#')[0])",
        ])
        .output()?;
    ensure!(
        meta.status.success(),
        "the index's simple page: {}",
        String::from_utf8_lossy(&meta.stderr)
    );
    let url = String::from_utf8(meta.stdout)?.trim().to_owned();
    let host = url
        .split('/')
        .nth(2)
        .context("a URL without a host")?
        .to_owned();
    let parse = |out: &str| -> Result<(u64, f64)> {
        let mut it = out.split_whitespace();
        Ok((
            it.next().context("no size")?.parse()?,
            it.next().context("no time")?.parse()?,
        ))
    };
    let direct = std::process::Command::new("python3")
        .args(["-c", FETCH, &url])
        .output()?;
    ensure!(direct.status.success(), "direct download failed");
    let (bytes, direct_s) = parse(&String::from_utf8_lossy(&direct.stdout))?;
    let mut sb = snap.open()?;
    sb.allow_egress(std::slice::from_ref(&host))?;
    sb.write_file("fetch.py", FETCH.as_bytes(), 0o644)?;
    let o = sb.exec(
        &format!("python3 fetch.py '{url}'"),
        &ExecOptions::with_timeout_ms(300_000),
    )?;
    ensure!(
        o.code() == Some(0),
        "proxied download failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (pbytes, proxy_s) = parse(&o.stdout_text())?;
    ensure!(pbytes == bytes, "sizes differ");
    let mbps = |s: f64| bytes as f64 / 1e6 / s;
    Ok(Some((mbps(direct_s), mbps(proxy_s), bytes)))
}

fn table(r: &Results) -> String {
    let mb = |b: u64| b as f64 / 1e6;
    let mut s = String::new();
    let _ = writeln!(s, "| measure | value |\n|---|---|");
    let _ = writeln!(s, "| image size (files) | {:.0} MB |", mb(r.base_bytes));
    let _ = writeln!(
        s,
        "| import, OCI layout (2 layers, every digest verified) | {:.2} s ({:.0} MB/s) |",
        r.import_layout_s,
        mb(r.base_bytes) / r.import_layout_s
    );
    let _ = writeln!(
        s,
        "| import, the same image as an oci-archive (unpacked, verified, nothing new stored) | {:.2} s |",
        r.import_archive_s
    );
    let _ = writeln!(
        s,
        "| layer bytes stored: the large image | {:.1} MB |",
        mb(r.store_after_one)
    );
    let _ = writeln!(
        s,
        "| layer bytes stored: plus a second image built on it (its {:.1} MB as the base) | {:.1} MB (+{} B: its own layer only) |",
        mb(r.base_bytes),
        mb(r.store_after_two),
        r.store_after_two - r.store_after_one
    );
    let host = r.fork_us[0].1;
    for (label, us, n) in &r.fork_us {
        let _ = writeln!(
            s,
            "| fork + `true`, {label} (median of {n}) | {:.2} ms (×{:.2} of the host view) |",
            us / 1e3,
            us / host
        );
    }
    match r.proxy {
        Some((direct, proxied, bytes)) => {
            let _ = writeln!(
                s,
                "| download of {:.1} MB from the index: direct on the host | {direct:.1} MB/s |",
                mb(bytes)
            );
            let _ = writeln!(
                s,
                "| the same through the egress proxy, in a sandbox | {proxied:.1} MB/s (×{:.2}) |",
                proxied / direct
            );
        }
        None => {
            let _ = writeln!(
                s,
                "| egress proxy throughput | not measured ({}) |",
                if r.quick {
                    "quick mode"
                } else {
                    "the index was not reachable"
                }
            );
        }
    }
    s
}

fn svg(r: &Results) -> String {
    let max = r.fork_us.iter().map(|f| f.1).fold(1.0, f64::max);
    let mut s = String::from(
        "<svg xmlns='http://www.w3.org/2000/svg' width='560' height='170' font-family='sans-serif' font-size='12'>\n<text x='10' y='18'>fork + true, median (ms)</text>\n",
    );
    for (i, (label, us, _)) in r.fork_us.iter().enumerate() {
        let y = 35 + i * 42;
        let w = 360.0 * us / max;
        let _ = writeln!(
            s,
            "<text x='10' y='{}'>{label}</text><rect x='120' y='{}' width='{w:.1}' height='24' fill='#4a7ab5'/><text x='{:.1}' y='{}'>{:.2}</text>",
            y + 16,
            y,
            126.0 + w,
            y + 16,
            us / 1e3
        );
    }
    s.push_str("</svg>\n");
    s
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("images: bench");
        return Ok(());
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !filters.is_empty() && !filters.iter().any(|f| "images".contains(f.as_str())) {
        eprintln!("images: skipped (no filter matches `images`)");
        return Ok(());
    }
    let quick = quick_mode();
    eprintln!("images: {} mode", if quick { "quick" } else { "full" });
    let res = run(quick)?;
    let md = table(&res);
    println!("{md}");
    let out = arbor_benches::output_dir()?;
    std::fs::create_dir_all(&out)?;
    let suffix = if quick { "-quick" } else { "" };
    let json = serde_json::json!({
        "quick": res.quick,
        "image_bytes": res.base_bytes,
        "import_layout_s": res.import_layout_s,
        "import_archive_s": res.import_archive_s,
        "base_bytes": res.base_bytes,
        "layer_bytes_after_one": res.store_after_one,
        "layer_bytes_after_two": res.store_after_two,
        "fork_true_median_us": res.fork_us.iter().map(|(l, us, n)| serde_json::json!({"kind": l, "median_us": us, "samples": n})).collect::<Vec<_>>(),
        "proxy_mb_s": res.proxy.map(|(d, p, b)| serde_json::json!({"direct": d, "proxied": p, "bytes": b})),
    });
    for (name, text) in [
        (format!("images{suffix}.md"), md),
        (
            format!("images{suffix}.json"),
            serde_json::to_string_pretty(&json)?,
        ),
        (format!("images-fork{suffix}.svg"), svg(&res)),
    ] {
        let path = out.join(name);
        std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
        eprintln!("images: wrote {}", path.display());
    }
    Ok(())
}
