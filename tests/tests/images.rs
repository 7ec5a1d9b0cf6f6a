//! Sandboxes on an image: the system view is the image's root filesystem
//! (not the host's), the image's environment applies, snapshots and forks
//! stay on the image, and the warm pool prepares helpers for it.

use std::path::Path;
use std::time::Duration;

use arbor_runtime::ExecOptions;
use arbor_runtime::image::write::{LayoutLayer, rootfs_of_host_tools, tar_dir, write_oci_layout};
use arbor_runtime::image::{Compression, ImageImport};
use arbor_runtime::store::ImageConfig;

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");

/// A minimal root filesystem of the host's bash and a few coreutils with
/// their libraries — and nothing else (no python).
fn minimal_rootfs(dir: &Path) {
    rootfs_of_host_tools(
        dir,
        &["bash", "cat", "env", "ls", "id", "wc", "sort", "head"],
    )
    .unwrap();
}

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

#[test]
fn a_sandbox_on_an_image_sees_the_image_not_the_host() {
    let t = arbor_tests::runtime_with(Path::new(HELPER), |o| o.warm_helpers = 2);
    let rootfs = t.scratch("rootfs");
    minimal_rootfs(&rootfs);
    let top = t.scratch("top");
    std::fs::create_dir_all(top.join("etc")).unwrap();
    std::fs::write(top.join("etc/image-id"), "arbor-test-image\n").unwrap();
    let layout = t.scratch("layout");
    write_oci_layout(
        &layout,
        &[
            LayoutLayer {
                tar: tar_dir(&rootfs).unwrap(),
                compression: Compression::Gzip,
            },
            LayoutLayer {
                tar: tar_dir(&top).unwrap(),
                compression: Compression::Zstd,
            },
        ],
        &ImageConfig {
            env: vec!["IMAGE_VAR=from-the-image".into(), "TZ=Europe/Paris".into()],
            ..ImageConfig::default()
        },
        Some("mini:1"),
    )
    .unwrap();
    let img = t
        .runtime
        .import_image(&layout, &ImageImport::default())
        .unwrap();
    let image = t.runtime.image(&img.name).unwrap();
    let ws = t.scratch("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("task.txt"), "do it\n").unwrap();
    let snap = t
        .runtime
        .import_on(&ws, Some("on-image"), Some(&image))
        .unwrap();
    assert_eq!(snap.manifest().image, Some(image.id));

    // Control: on the host view, python3 is there (the host has it).
    let host_snap = t.runtime.import(&ws, None).unwrap();
    let mut host_sb = host_snap.open().unwrap();
    assert_eq!(
        sh(
            &mut host_sb,
            "test -e /usr/bin/python3 && echo yes || echo no"
        ),
        "yes\n"
    );
    assert_eq!(sh(&mut host_sb, "echo ${IMAGE_VAR:-unset}"), "unset\n");
    drop(host_sb);

    let mut sb = snap.open().unwrap();
    assert_eq!(sh(&mut sb, "cat /etc/image-id"), "arbor-test-image\n");
    assert_eq!(
        sh(&mut sb, "test -e /usr/bin/python3 && echo yes || echo no"),
        "no\n"
    );
    assert_eq!(
        sh(&mut sb, "ls /usr/bin | sort | head -3"),
        "bash\ncat\nenv\n"
    );
    assert_eq!(
        sh(&mut sb, "echo $IMAGE_VAR $TZ"),
        "from-the-image Europe/Paris\n"
    );
    assert_eq!(sh(&mut sb, "cat task.txt; id -u"), "do it\n0\n");
    // The image is read-only; the workspace is not.
    let obs = sb
        .exec("echo x > /etc/image-id", &ExecOptions::default())
        .unwrap();
    assert_ne!(obs.code(), Some(0), "the image's files are read-only");
    sh(&mut sb, "echo done > out.txt");
    let child = sb.snapshot().unwrap();
    assert_eq!(
        child.manifest().image,
        Some(image.id),
        "snapshots stay on the image"
    );
    drop(sb);

    // Forks of the child are on the image, and the pool prepares their helpers.
    assert_eq!(
        t.runtime
            .warm_up_image(&image, Duration::from_secs(30))
            .unwrap(),
        2
    );
    let mut forks = child.fork(3).unwrap();
    for f in &mut forks {
        assert_eq!(
            sh(f, "cat out.txt /etc/image-id"),
            "done\narbor-test-image\n"
        );
    }
    drop(forks);
    // The image and the snapshots on it survive gc; fsck checks its layers.
    t.runtime.store().gc().unwrap();
    let f = t.runtime.store().fsck().unwrap();
    assert!(f.is_clean(), "{:?}", f.problems);
    // Removing the name keeps what a snapshot still uses (gc unlisted the
    // untagged child: the tagged root is the one user left).
    let (_, users) = t.runtime.remove_image("mini:1").unwrap();
    assert_eq!(users, 1);
    t.runtime.store().gc().unwrap();
    let mut again = t.runtime.resolve("on-image").unwrap().open().unwrap();
    assert_eq!(sh(&mut again, "cat /etc/image-id"), "arbor-test-image\n");
}

#[test]
fn a_workspace_at_the_images_working_dir_is_the_same_workspace() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let rootfs = t.scratch("rootfs");
    minimal_rootfs(&rootfs);
    std::fs::create_dir_all(rootfs.join("srv/app")).unwrap();
    let layout = t.scratch("layout");
    let config = |dir: Option<&str>| ImageConfig {
        working_dir: dir.map(str::to_owned),
        ..ImageConfig::default()
    };
    write_oci_layout(
        &layout,
        &[LayoutLayer {
            tar: tar_dir(&rootfs).unwrap(),
            compression: Compression::None,
        }],
        &config(Some("/srv/app")),
        Some("wd:1"),
    )
    .unwrap();
    t.runtime
        .import_image(&layout, &ImageImport::default())
        .unwrap();
    let image = t.runtime.image("wd:1").unwrap();
    let ws = t.scratch("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("task.txt"), "do it\n").unwrap();

    let snap = t
        .runtime
        .import_with(&ws, None, Some(&image), true)
        .unwrap();
    assert_eq!(snap.manifest().workdir.as_deref(), Some("/srv/app"));
    let mut sb = snap.open().unwrap();
    assert_eq!(sh(&mut sb, "pwd; cat task.txt"), "/srv/app\ndo it\n");
    // One workspace at two paths: a write at the WorkingDir is in /workspace,
    // in the file API and in the snapshot.
    sh(&mut sb, "echo made-here > out.txt");
    assert_eq!(sh(&mut sb, "cat /workspace/out.txt"), "made-here\n");
    assert_eq!(sb.read_file("out.txt").unwrap(), b"made-here\n");
    let child = sb.snapshot().unwrap();
    drop(sb);
    assert_eq!(child.manifest().workdir.as_deref(), Some("/srv/app"));
    let mut fork = child.fork(1).unwrap().pop().unwrap();
    assert_eq!(
        sh(&mut fork, "pwd; cat /srv/app/out.txt"),
        "/srv/app\nmade-here\n"
    );
    drop(fork);

    // Control: imported without it, /srv/app is the image's read-only directory.
    let plain = t.runtime.import_on(&ws, None, Some(&image)).unwrap();
    assert_eq!(plain.manifest().workdir, None);
    let mut psb = plain.open().unwrap();
    assert_eq!(
        sh(&mut psb, "pwd; ls -A /srv/app | wc -l"),
        "/workspace\n0\n"
    );
    let obs = psb
        .exec("echo x > /srv/app/out.txt", &ExecOptions::default())
        .unwrap();
    assert_ne!(obs.code(), Some(0), "the image's directory is read-only");
    drop(psb);

    // Refused by name: no image, an image without a WorkingDir, a WorkingDir
    // the image lacks.
    let err = t.runtime.import_with(&ws, None, None, true).unwrap_err();
    assert!(err.to_string().contains("needs an image"), "{err}");
    for (name, dir, want) in [
        ("nowd:1", None, "names no WorkingDir"),
        (
            "missing:1",
            Some("/opt/absent"),
            "not a directory of the image",
        ),
        ("proc:1", Some("/proc/self"), "not a plain absolute path"),
    ] {
        let layout = t.scratch(name);
        write_oci_layout(
            &layout,
            &[LayoutLayer {
                tar: tar_dir(&rootfs).unwrap(),
                compression: Compression::None,
            }],
            &config(dir),
            Some(name),
        )
        .unwrap();
        t.runtime
            .import_image(&layout, &ImageImport::default())
            .unwrap();
        let img = t.runtime.image(name).unwrap();
        let err = t
            .runtime
            .import_with(&ws, None, Some(&img), true)
            .unwrap_err();
        assert!(err.to_string().contains(want), "{name}: {err}");
    }
}

/// An image's `User` applies: actions run as its uid and gid (from the
/// image's own /etc/passwd and /etc/group), hold no capability, and meet
/// permission checks as that user, while the workspace stays theirs to
/// write; snapshots and forks keep it. Control: the same root filesystem
/// without a `User` runs as root, which reads a mode-000 file.
#[test]
fn actions_on_an_image_with_a_user_run_as_that_user() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let rootfs = t.scratch("rootfs");
    rootfs_of_host_tools(&rootfs, &["bash", "cat", "id", "chmod", "stat"]).unwrap();
    std::fs::create_dir_all(rootfs.join("etc")).unwrap();
    std::fs::write(
        rootfs.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/bash\napp:x:1000:1001::/home/app:/bin/bash\n",
    )
    .unwrap();
    std::fs::write(
        rootfs.join("etc/group"),
        "root:x:0:\nwheel:x:10:\napp:x:1001:\n",
    )
    .unwrap();
    let tar = tar_dir(&rootfs).unwrap();
    let image_with = |name: &str, user: Option<&str>| {
        let layout = t.scratch(name);
        write_oci_layout(
            &layout,
            &[LayoutLayer {
                tar: tar.clone(),
                compression: Compression::None,
            }],
            &ImageConfig {
                user: user.map(str::to_owned),
                ..ImageConfig::default()
            },
            Some(name),
        )
        .unwrap();
        t.runtime
            .import_image(&layout, &ImageImport::default())
            .unwrap();
        t.runtime.image(name).unwrap()
    };
    let ws = t.scratch("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("task.txt"), "do it\n").unwrap();
    // `id -un` prints the number (and fails) where the image names no user.
    const PROBE: &str = "id -u; id -g; id -un 2>/dev/null; id -gn 2>/dev/null; \
        while read -r k v; do [ \"$k\" = CapEff: ] && echo \"$v\"; done < /proc/self/status; \
        echo secret > s.txt; chmod 000 s.txt; cat s.txt 2>/dev/null || echo denied; \
        echo mine > out.txt && stat -c %u:%g out.txt";

    // Control: no User, root (every capability the sandbox keeps; mode 000 is no barrier).
    let root_img = image_with("noone:1", None);
    assert_eq!(root_img.user, Ok(None));
    let mut sb = t
        .runtime
        .import_on(&ws, None, Some(&root_img))
        .unwrap()
        .open()
        .unwrap();
    let out = sh(&mut sb, PROBE);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(&lines[..4], ["0", "0", "root", "root"], "{out}");
    assert_ne!(lines[4], "0000000000000000", "{out}");
    assert_eq!(&lines[5..], ["secret", "0:0"], "{out}");
    drop(sb);

    for (name, user, ids, names) in [
        ("app:1", "app", (1000, 1001), ("app", "app")),
        ("appwheel:1", "app:wheel", (1000, 10), ("app", "wheel")),
        ("numeric:1", "4242:7", (4242, 7), ("4242", "7")),
    ] {
        let img = image_with(name, Some(user));
        let got = img.user.clone().unwrap().unwrap();
        assert_eq!((got.uid, got.gid), ids, "{user}");
        let snap = t.runtime.import_on(&ws, None, Some(&img)).unwrap();
        let mut sb = snap.open().unwrap();
        let out = sh(&mut sb, PROBE);
        let lines: Vec<&str> = out.lines().collect();
        let (uid, gid) = (ids.0.to_string(), ids.1.to_string());
        assert_eq!(
            lines,
            [
                uid.as_str(),
                gid.as_str(),
                names.0,
                names.1,
                "0000000000000000",
                "denied",
                &format!("{uid}:{gid}"),
            ],
            "{user}: {out}"
        );
        // What the user wrote is in the snapshot, and a fork runs as the user too.
        let child = sb.snapshot().unwrap();
        drop(sb);
        let mut fork = child.fork(1).unwrap().pop().unwrap();
        assert_eq!(
            sh(&mut fork, "cat out.txt; id -u"),
            format!("mine\n{uid}\n")
        );
    }

    // A user the image does not have: named, and no sandbox opens; the
    // image itself is still listed and shown.
    for (name, user, want) in [
        ("ghost:1", "ghost", "no user \"ghost\" in its /etc/passwd"),
        (
            "nogroup:1",
            "app:staff",
            "no group \"staff\" in its /etc/group",
        ),
    ] {
        let img = image_with(name, Some(user));
        assert!(
            img.user.as_ref().unwrap_err().contains(want),
            "{:?}",
            img.user
        );
        let snap = t.runtime.import_on(&ws, None, Some(&img)).unwrap();
        let err = snap.open().unwrap_err().to_string();
        assert!(err.contains(want) && err.contains(&img.id.short()), "{err}");
    }
}
