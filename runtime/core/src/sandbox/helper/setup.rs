//! Set-up logic, generic over [`Syscalls`]: the sandbox's namespaces, its
//! read-only root and system view, the workspace mount, the mounts an
//! action's init makes before `pivot_root`, and the limits, ids and
//! capabilities of the action itself.

use std::fs;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};
use nix::sched::CloneFlags;
use nix::sys::resource::Resource;
use rustix::thread::CapabilitySet;

use super::error::{HelperError, Op, Result};
use super::sys::{IdMap, Syscalls};
use crate::sandbox::protocol::{MOUNT_POINTS, SandboxLimits, SystemView, WorkspaceMount};

/// The namespaces the helper creates for the sandbox (pid namespaces come
/// per action).
pub(super) const NAMESPACES: CloneFlags = CloneFlags::CLONE_NEWUSER
    .union(CloneFlags::CLONE_NEWNS)
    .union(CloneFlags::CLONE_NEWNET)
    .union(CloneFlags::CLONE_NEWUTS)
    .union(CloneFlags::CLONE_NEWIPC);

/// Options of the sandbox root's tmpfs.
pub(super) const ROOT_TMPFS: &str = "mode=0755,size=16m";

/// Options of an action's `/tmp`.
pub(super) const TMP_TMPFS: &str = "mode=1777,uid=0,gid=0,size=1g";

/// Capabilities removed from the bounding set before the action runs, so the
/// action (root inside its user namespace) can neither undo the read-only
/// system view, nor mount, nor touch the network configuration.
pub(super) const DROPPED_CAPS: CapabilitySet = {
    use rustix::thread::CapabilitySet as C;
    C::SYS_ADMIN
        .union(C::SYS_MODULE)
        .union(C::SYS_BOOT)
        .union(C::SYS_TIME)
        .union(C::SYS_RAWIO)
        .union(C::SYS_RESOURCE)
        .union(C::SYS_PACCT)
        .union(C::SYS_TTY_CONFIG)
        .union(C::NET_ADMIN)
        .union(C::NET_RAW)
        .union(C::SETPCAP)
        .union(C::SETFCAP)
        .union(C::LINUX_IMMUTABLE)
        .union(C::AUDIT_CONTROL)
        .union(C::AUDIT_WRITE)
        .union(C::AUDIT_READ)
        .union(C::SYSLOG)
        .union(C::WAKE_ALARM)
        .union(C::BLOCK_SUSPEND)
        .union(C::MAC_OVERRIDE)
        .union(C::MAC_ADMIN)
        .union(C::BPF)
        .union(C::PERFMON)
        .union(C::CHECKPOINT_RESTORE)
        .union(C::LEASE)
        .union(C::MKNOD)
};

/// uid and gid 0 inside the user namespace, no supplementary groups (where
/// setgroups is allowed: not in rootless mode).
pub(super) fn become_sandbox_root<S: Syscalls>(sys: &mut S) -> Result<()> {
    sys.set_resgid(0)?;
    let _ = sys.set_groups(&[]);
    sys.set_resuid(0)
}

/// Mount a fresh tmpfs at `target`.
pub(super) fn mount_tmpfs<S: Syscalls>(
    sys: &mut S,
    target: &Path,
    flags: MsFlags,
    options: &str,
) -> Result<()> {
    sys.mount(
        Some(Path::new("tmpfs")),
        target,
        Some("tmpfs"),
        flags,
        Some(options),
    )
}

/// Bind `src` onto `dst` and make the bind read-only, nosuid and nodev,
/// keeping whatever flags the source mount has locked (a remount inside a
/// user namespace must not clear them).
pub(super) fn bind_read_only<S: Syscalls>(sys: &mut S, src: &Path, dst: &Path) -> Result<()> {
    sys.mount(Some(src), dst, None, MsFlags::MS_BIND, None)?;
    let flags = MsFlags::MS_BIND
        | MsFlags::MS_REMOUNT
        | MsFlags::MS_RDONLY
        | MsFlags::MS_NOSUID
        | MsFlags::MS_NODEV
        | sys.locked_flags(dst)?;
    sys.mount(None, dst, None, flags, None)
}

/// Build the sandbox: become root inside, make mounts private, set the
/// hostname, bring up loopback, then (in a child that is the sandbox's root,
/// since creating inodes on a filesystem mounted inside the user namespace
/// needs an id mapped there) mount the root tmpfs and build the system view
/// on it, and finally remount the root read-only.
pub(super) fn build_sandbox<S: Syscalls>(
    sys: &mut S,
    root: &Path,
    system: &SystemView,
    hostname: &str,
) -> Result<()> {
    become_sandbox_root(sys)?;
    sys.mount(
        None,
        Path::new("/"),
        None,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None,
    )?;
    sys.set_hostname(hostname)?;
    sys.loopback_up()?;
    sys.in_child(|sys| {
        become_sandbox_root(sys)?;
        mount_tmpfs(sys, root, MsFlags::MS_NOSUID, ROOT_TMPFS)?;
        build_system_view(sys, root, system, hostname)?;
        for dir in ["workspace", "tmp", "proc", "dev/shm"]
            .into_iter()
            .chain(MOUNT_POINTS.iter().copied())
        {
            sys.mkdir(&root.join(dir), 0o755)?;
        }
        sys.chmod(&root.join("tmp"), 0o1777)
    })?;
    sys.mount(
        None,
        root,
        None,
        MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID,
        Some(ROOT_TMPFS),
    )
}

/// Mount the workspace at `target`: an overlay, or a bind of the copy.
pub(super) fn mount_workspace<S: Syscalls>(
    sys: &mut S,
    target: &Path,
    ws: &WorkspaceMount,
) -> Result<()> {
    match ws {
        WorkspaceMount::Overlay {
            lowers,
            upper,
            work,
        } => sys.mount_overlay(lowers, upper, work, target),
        WorkspaceMount::Bind { dir } => sys.mount(Some(dir), target, None, MsFlags::MS_BIND, None),
    }
}

/// Unmount the workspace at `target`.
pub(super) fn unmount_workspace<S: Syscalls>(sys: &mut S, target: &Path) -> Result<()> {
    sys.umount(target, MntFlags::empty())
}

/// The mounts of an action's init (G), whose cwd is the sandbox root in its
/// fresh mount namespace: `/tmp` (unless the helper mounted a shared one),
/// `/dev/shm`, `/proc`, then `pivot_root` into the root and detach the old one.
///
/// With `workspace_root` (an image build step), the root is the workspace
/// instead: the sandbox's `/proc`, `/dev` (with its `shm`) and `/tmp` are
/// bound recursively onto the workspace's mount points (created when the
/// root filesystem lacks them), `/run` is a fresh tmpfs (as on a booted
/// system) with the per-action read-only mount points at
/// `/run/arbor/<point>`, and then the init `pivot_root`s into `workspace`.
///
/// With `workdir` (an absolute path of the system view: the image's
/// `WorkingDir`), the workspace is bound there too before the pivot.
pub(super) fn enter_action_root<S: Syscalls>(
    sys: &mut S,
    mount_tmp: bool,
    workspace_root: bool,
    workdir: Option<&str>,
) -> Result<()> {
    let root = Path::new(".");
    let nosuid_nodev = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if mount_tmp {
        mount_tmpfs(sys, &root.join("tmp"), nosuid_nodev, TMP_TMPFS)?;
    }
    mount_tmpfs(
        sys,
        &root.join("dev/shm"),
        nosuid_nodev,
        "mode=1777,uid=0,gid=0,size=64m",
    )?;
    sys.mount(
        Some(Path::new("proc")),
        &root.join("proc"),
        Some("proc"),
        nosuid_nodev | MsFlags::MS_NOEXEC,
        None,
    )?;
    if workspace_root {
        let ws = root.join("workspace");
        for dir in ["proc", "dev", "tmp"] {
            sys.mkdir(&ws.join(dir), 0o755)?;
            sys.mount(
                Some(&root.join(dir)),
                &ws.join(dir),
                None,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None,
            )?;
        }
        let run = ws.join("run");
        sys.mkdir(&run, 0o755)?;
        mount_tmpfs(sys, &run, nosuid_nodev, "mode=0755,size=16m")?;
        sys.mkdir(&run.join("arbor"), 0o755)?;
        for point in MOUNT_POINTS {
            let dst = run.join("arbor").join(point);
            sys.mkdir(&dst, 0o755)?;
            sys.mount(
                Some(&root.join(point)),
                &dst,
                None,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None,
            )?;
        }
        sys.chdir(&ws)?;
    } else if let Some(dir) = workdir {
        let rel = dir.trim_start_matches('/');
        if rel.is_empty()
            || !Path::new(rel)
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)))
        {
            return Err(HelperError::MountTarget {
                target: dir.to_owned(),
                points: "an absolute path of the system view".to_owned(),
            });
        }
        sys.mount(
            Some(&root.join("workspace")),
            &root.join(rel),
            None,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None,
        )?;
    }
    sys.pivot_root(root, root)?;
    sys.umount(root, MntFlags::MNT_DETACH)?;
    sys.chdir(Path::new("/"))
}

/// What the action (S) does to itself before `exec`: its rlimits, the
/// sandbox's root ids, the bounding set without [`DROPPED_CAPS`], no_new_privs.
pub(super) fn confine_action<S: Syscalls>(sys: &mut S, limits: &SandboxLimits) -> Result<()> {
    for (res, value) in [
        (Resource::RLIMIT_NPROC, limits.nproc),
        (Resource::RLIMIT_FSIZE, limits.fsize),
        (Resource::RLIMIT_NOFILE, limits.nofile),
        (Resource::RLIMIT_CPU, limits.cpu_seconds),
        (Resource::RLIMIT_CORE, 0),
    ] {
        sys.set_rlimit(res, value, value)?;
    }
    become_sandbox_root(sys)?;
    sys.drop_bounding_caps(DROPPED_CAPS)?;
    sys.set_no_new_privs()
}

/// Run as the image's user from here on (see [`crate::image::user`]): a
/// user namespace of this process's own, nested in the sandbox's, where the
/// sandbox's root (this process's ids, after [`confine_action`]) is mapped to
/// `user`'s uid and gid and nothing else is. A non-root uid there keeps no
/// capability across `exec`; `setgroups` is denied first (an unprivileged
/// `gid_map` needs it), so no supplementary group is kept either.
pub(super) fn become_image_user<S: Syscalls>(
    sys: &mut S,
    user: crate::image::user::ImageUser,
    pid: u32,
) -> Result<()> {
    sys.unshare(CloneFlags::CLONE_NEWUSER)?;
    sys.write_id_map(pid, IdMap::SetGroups, "deny\n")?;
    sys.write_id_map(pid, IdMap::Uid, &format!("{} 0 1\n", user.uid))?;
    sys.write_id_map(pid, IdMap::Gid, &format!("{} 0 1\n", user.gid))
}

/// A read-only mount's target: one of the empty, read-only mount points
/// every sandbox root has (`verifier`), optionally with one more path
/// component below it (`verifier/3f9a0c`). Returns the mount point and the
/// component.
pub(super) fn check_mount_target(target: &str) -> Result<(&str, Option<&str>)> {
    let (point, below) = match target.split_once('/') {
        Some((p, b)) => (p, Some(b)),
        None => (target, None),
    };
    let name_ok = |b: &str| {
        !b.is_empty()
            && b.len() <= 64
            && b.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
    };
    if MOUNT_POINTS.contains(&point) && below.is_none_or(name_ok) {
        Ok((point, below))
    } else {
        Err(HelperError::MountTarget {
            target: target.to_owned(),
            points: MOUNT_POINTS.join(", "),
        })
    }
}

/// Bind one per-action read-only mount (`source` at `target`, see
/// [`check_mount_target`]) into the sandbox root; every mount made is pushed
/// on `mounted` (so it is taken down even when a later one fails).
pub(super) fn mount_read_only<S: Syscalls>(
    sys: &mut S,
    root: &Path,
    source: &Path,
    target: &str,
    mounted: &mut Vec<PathBuf>,
) -> Result<()> {
    let (point, below) = check_mount_target(target)?;
    let mut dst = root.join(point);
    if let Some(below) = below {
        // A private directory of this action's own under the mount point:
        // its name is not visible from any other mount namespace (the
        // peer's, the agent's).
        if !mounted.contains(&dst) {
            mount_tmpfs(
                sys,
                &dst,
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                "mode=0755,size=64k",
            )?;
            mounted.push(dst.clone());
        }
        dst = dst.join(below);
        sys.mkdir(&dst, 0o755)?;
    }
    bind_read_only(sys, source, &dst)?;
    mounted.push(dst);
    Ok(())
}

/// `/etc` entries bound read-only from the host (when present).
const HOST_ETC: &[&str] = &[
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "mime.types",
    "protocols",
    "services",
    "os-release",
    "debian_version",
    "perl",
    "python3",
    "python3.11",
    "bash.bashrc",
    "inputrc",
    "localtime",
];

/// Top-level host directories bound read-only (or recreated as symlinks).
const HOST_TOP: &[&str] = &["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"];

/// Recreate `src` at `dst`: a symlink as the same symlink, a directory or
/// file as a read-only bind; anything else (or nothing) is skipped.
fn replicate<S: Syscalls>(sys: &mut S, src: &Path, dst: &Path) -> Result<()> {
    let Ok(meta) = fs::symlink_metadata(src) else {
        return Ok(());
    };
    if meta.file_type().is_symlink() {
        let target =
            fs::read_link(src).map_err(|e| HelperError::io(Op::Readlink, Some(src), &e))?;
        sys.symlink(&target, dst)
    } else if meta.is_dir() {
        sys.mkdir(dst, 0o755)?;
        bind_read_only(sys, src, dst)
    } else if meta.is_file() {
        sys.create_file(dst)?;
        bind_read_only(sys, src, dst)
    } else {
        Ok(())
    }
}

/// Sorted entries of a directory (so the set-up order does not depend on
/// the directory's hash order).
fn sorted_entries(dir: &Path) -> Result<Vec<(std::ffi::OsString, PathBuf)>> {
    let read = |e: std::io::Error| HelperError::io(Op::ReadDir, Some(dir), &e);
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(read)? {
        let entry = entry.map_err(read)?;
        out.push((entry.file_name(), entry.path()));
    }
    out.sort();
    Ok(out)
}

fn build_system_view<S: Syscalls>(
    sys: &mut S,
    root: &Path,
    view: &SystemView,
    hostname: &str,
) -> Result<()> {
    let etc = root.join("etc");
    let mut kept: Vec<&str> = Vec::new();
    match view {
        SystemView::Host => {
            for name in HOST_TOP {
                replicate(sys, &Path::new("/").join(name), &root.join(name))?;
            }
            sys.mkdir(&etc, 0o755)?;
            for name in HOST_ETC {
                replicate(sys, &Path::new("/etc").join(name), &etc.join(name))?;
            }
        }
        SystemView::Rootfs { dir } => kept = rootfs_view(sys, root, dir)?,
        SystemView::Image { lowers, at } => match lowers.as_slice() {
            [one] => kept = rootfs_view(sys, root, one)?,
            _ => {
                sys.mount_overlay_read_only(lowers, at)?;
                kept = rootfs_view(sys, root, at)?;
            }
        },
    }
    for (name, content) in etc_files(hostname) {
        if !kept.contains(&name) {
            sys.write_file(&etc.join(name), &content)?;
        }
    }
    let dev = root.join("dev");
    sys.mkdir(&dev, 0o755)?;
    for name in super::landlock::DEVICES {
        let dst = dev.join(name);
        sys.create_file(&dst)?;
        sys.mount(
            Some(&Path::new("/dev").join(name)),
            &dst,
            None,
            MsFlags::MS_BIND,
            None,
        )?;
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        sys.symlink(Path::new(target), &dev.join(name))?;
    }
    Ok(())
}

/// The generated `/etc` files.
pub(super) fn etc_files(hostname: &str) -> [(&'static str, String); 6] {
    [
        (
            "passwd",
            "root:x:0:0:root:/tmp/home:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
                .into(),
        ),
        ("group", "root:x:0:\nnogroup:x:65534:\n".into()),
        (
            "hosts",
            format!("127.0.0.1\tlocalhost {hostname}\n::1\tlocalhost ip6-localhost\n"),
        ),
        ("hostname", format!("{hostname}\n")),
        ("resolv.conf", String::new()),
        (
            "nsswitch.conf",
            "passwd: files\ngroup: files\nshadow: files\nhosts: files\n".into(),
        ),
    ]
}

/// The generated `/etc` files a root filesystem's own replace when it has
/// them as regular files: its users and groups (an image's `User`, and the
/// names its tools look up, are in them).
const ROOTFS_KEEPS: [&str; 2] = ["passwd", "group"];

/// The system view of a root filesystem `dir`: every top-level entry
/// read-only except those the sandbox provides itself (`proc`, `dev`,
/// `tmp`, `workspace`, `sys`), and `/etc` entry by entry except the
/// generated files (but its own `passwd` and `group`, which are returned).
fn rootfs_view<S: Syscalls>(sys: &mut S, root: &Path, dir: &Path) -> Result<Vec<&'static str>> {
    let mut kept = Vec::new();
    let etc = root.join("etc");
    for (name, path) in sorted_entries(dir)? {
        if matches!(
            name.to_str(),
            Some("proc" | "dev" | "tmp" | "workspace" | "sys" | "etc")
        ) {
            continue;
        }
        replicate(sys, &path, &root.join(&name))?;
    }
    sys.mkdir(&etc, 0o755)?;
    if let Ok(entries) = sorted_entries(&dir.join("etc")) {
        for (name, path) in entries {
            if let Some(own) = ROOTFS_KEEPS.iter().find(|k| name.to_str() == Some(**k)) {
                if fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
                    replicate(sys, &path, &etc.join(&name))?;
                    kept.push(*own);
                }
                continue;
            }
            if matches!(
                name.to_str(),
                Some("hosts" | "hostname" | "resolv.conf" | "nsswitch.conf")
            ) {
                continue;
            }
            replicate(sys, &path, &etc.join(&name))?;
        }
    }
    Ok(kept)
}
