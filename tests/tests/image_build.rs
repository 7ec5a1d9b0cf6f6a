//! `arbor image build` end to end: a Debian base from Debian's package
//! registry (mmdebstrap), a pip step through the egress proxy to pip's own
//! index, run steps as sandbox actions whose root is the image being built;
//! each step one layer, cached by the recipe up to it; a failed step names
//! itself and names nothing.
//!
//! Needs the registries (as CI has) and root: mmdebstrap's unshare mode maps
//! the build's ids through subordinate ids, which an unprivileged test user
//! does not have (the unprivileged phase says so and skips).

use std::path::Path;

use arbor_runtime::image::{BuildEvent, ImageRecipe};
use arbor_runtime::{ExecOptions, RuntimeError};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");

fn sh(sb: &mut arbor_runtime::Sandbox, cmd: &str) -> String {
    let obs = sb.exec(cmd, &ExecOptions::default()).unwrap();
    assert_eq!(
        obs.code(),
        Some(0),
        "{cmd}: {}",
        String::from_utf8_lossy(&obs.stderr)
    );
    obs.stdout_text()
}

fn recipe(store_root: &Path) -> ImageRecipe {
    ImageRecipe {
        debian: "bookworm".into(),
        packages: vec!["python3-pip".into(), "python3".into()],
        pip: vec!["six==1.16.0".into()],
        run: vec![
            // The step's root is the image: the host (the store, say) is not there.
            format!(
                "test ! -e {} && test \"$(id -u)\" = 0 && grep -q '^NoNewPrivs:[[:space:]]1' /proc/self/status && echo built-by-arbor > /etc/arbor-marker",
                store_root.display()
            ),
            // A deletion in a later step hides the file from the image.
            "rm /usr/bin/pydoc3 && mkdir -p /opt/tool && echo 1 > /opt/tool/v".into(),
        ],
        allow_hosts: Vec::new(),
    }
}

#[test]
fn a_debian_image_is_built_in_cached_layers_and_sandboxes_run_on_it() {
    if !arbor_tests::is_root() {
        eprintln!(
            "skipped: mmdebstrap's unshare mode needs subordinate ids this user lacks (run as root)"
        );
        return;
    }
    let t = arbor_tests::runtime(Path::new(HELPER));
    let rt = &t.runtime;
    let r = recipe(&t.home());
    let mut events = Vec::new();
    let built = rt
        .build_image(&r, Some("py"), &mut |e| events.push(e.clone()))
        .unwrap();
    assert_eq!(built.steps.len(), 4, "base, pip, two runs");
    assert!(
        built.steps.iter().all(|s| !s.cached),
        "a fresh store builds"
    );
    assert_eq!(built.image.record.layers.len(), 4, "one layer per step");
    assert_eq!(built.image.record.source.format, "debian");
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, BuildEvent::Started(_)))
            .count(),
        4
    );
    assert!(built.steps.iter().all(|s| s.layer_bytes > 0));

    // A sandbox on the image sees what every step did.
    let ws = t.scratch("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    let image = rt.image("py").unwrap();
    let snap = rt.import_on(&ws, None, Some(&image)).unwrap();
    let mut sb = snap.open().unwrap();
    assert_eq!(sh(&mut sb, "cat /etc/arbor-marker"), "built-by-arbor\n");
    assert_eq!(
        sh(
            &mut sb,
            "python3 -c 'import six; print(six.__version__, six.__file__)'"
        ),
        "1.16.0 /usr/local/lib/python3.11/dist-packages/six.py\n"
    );
    assert_eq!(
        sh(
            &mut sb,
            "test -e /usr/bin/pydoc3 && echo there || echo gone; cat /opt/tool/v"
        ),
        "gone\n1\n"
    );
    assert!(sh(&mut sb, "cat /etc/debian_version").starts_with("12."));
    assert_eq!(sh(&mut sb, "cat a.txt"), "a\n");
    drop(sb);
    // Control: the host view has none of it.
    let host = rt.import(&ws, None).unwrap();
    let mut hsb = host.open().unwrap();
    assert_eq!(
        sh(
            &mut hsb,
            "test -e /etc/arbor-marker && echo there || echo absent"
        ),
        "absent\n"
    );
    drop(hsb);

    // The same recipe again is a lookup; one more step reuses every step before it.
    let again = rt.build_image(&r, Some("py2"), &mut |_| {}).unwrap();
    assert!(again.cached());
    assert_eq!(again.image.id, built.image.id);
    let mut longer = r.clone();
    longer.run.push("echo 2 > /opt/tool/v".into());
    let more = rt.build_image(&longer, None, &mut |_| {}).unwrap();
    let cached: Vec<bool> = more.steps.iter().map(|s| s.cached).collect();
    assert_eq!(cached, [true, true, true, true, false]);
    assert_eq!(
        more.image.record.layers[..4],
        built.image.record.layers[..],
        "the first four layers are shared"
    );

    // A run step has no egress unless the recipe allows hosts: the proxy
    // port is closed (the pip step above reached pip's index through it).
    let mut offline = r.clone();
    offline.run.push(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', 3128), 3)\"".into(),
    );
    let err = rt
        .build_image(&offline, Some("offline"), &mut |_| {})
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("image build step") && text.contains("create_connection"),
        "{text}"
    );
    assert!(rt.image("offline").is_err(), "a failed build names nothing");

    // Build steps leave no listed snapshot behind, and the store is clean.
    let listed = rt.store().snapshots().unwrap();
    assert_eq!(listed.len(), 2, "only the two imports: {listed:?}");
    let report = rt.store().fsck().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);

    // Cache entries are not roots: once the images are unnamed and unused,
    // gc takes them and their entries (base, pip, three runs).
    for name in ["py", "py2"] {
        rt.remove_image(name).unwrap();
    }
    let gc = rt.store().gc().unwrap();
    assert_eq!(gc.build_cache_removed, 5, "{gc:?}");
    assert!(gc.layers_removed >= 5, "{gc:?}");
    assert_eq!(
        std::fs::read_dir(t.home().join("refs/image-builds"))
            .unwrap()
            .count(),
        0
    );
    assert!(rt.store().fsck().unwrap().is_clean());
}

#[test]
fn a_bad_recipe_is_refused_before_anything_runs() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let mut r = recipe(&t.home());
    r.pip.push("--index-url=http://elsewhere/simple".into());
    match t.runtime.build_image(&r, Some("bad"), &mut |_| {}) {
        Err(RuntimeError::Image(e)) => {
            assert!(e.to_string().contains("pip"), "{e}");
        }
        other => panic!("expected a refused recipe, got {other:?}"),
    }
    assert!(t.runtime.images().unwrap().is_empty());
    // Control: the same recipe without the bad requirement passes the check.
    r.pip.pop();
    r.validate().unwrap();
}
