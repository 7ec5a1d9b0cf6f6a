//! The few raw Linux calls the runtime needs that no safe wrapper covers, plus
//! small helpers around mounts and namespaces. Everything `unsafe` in the
//! sandbox lives here or in the helper's `fork` calls, each with its reason.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use nix::mount::MsFlags;
use rustix::mount::{
    FsMountFlags, FsOpenFlags, MountAttrFlags, MoveMountFlags, fsconfig_create, fsconfig_set_flag,
    fsconfig_set_string, fsmount, fsopen, move_mount,
};

fn io_err(what: &str, path: &Path, e: impl Into<io::Error>) -> io::Error {
    let e: io::Error = e.into();
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// Mount an overlay at `target` with the new mount API: `lowers` topmost
/// first, passed one `lowerdir+` at a time so the chain length is not limited
/// by the 4 KiB option page (overlayfs itself stacks at most 500 lowers).
/// Always `userxattr`: the helper mounts inside a user namespace.
pub fn mount_overlay(lowers: &[&Path], upper: &Path, work: &Path, target: &Path) -> io::Result<()> {
    let fs = fsopen("overlay", FsOpenFlags::FSOPEN_CLOEXEC)
        .map_err(|e| io_err("fsopen overlay for", target, e))?;
    fsconfig_set_string(&fs, "source", "arbor")
        .map_err(|e| io_err("fsconfig source for", target, e))?;
    fsconfig_set_flag(&fs, "userxattr").map_err(|e| io_err("fsconfig userxattr for", target, e))?;
    for lower in lowers {
        fsconfig_set_string(&fs, "lowerdir+", *lower)
            .map_err(|e| io_err("fsconfig lowerdir+", lower, e))?;
    }
    fsconfig_set_string(&fs, "upperdir", upper)
        .map_err(|e| io_err("fsconfig upperdir", upper, e))?;
    fsconfig_set_string(&fs, "workdir", work).map_err(|e| io_err("fsconfig workdir", work, e))?;
    fsconfig_create(&fs).map_err(|e| io_err("create overlay for", target, e))?;
    let mnt: OwnedFd = fsmount(
        &fs,
        rustix::mount::FsMountFlags::FSMOUNT_CLOEXEC,
        MountAttrFlags::empty(),
    )
    .map_err(|e| io_err("fsmount overlay for", target, e))?;
    let _ = FsMountFlags::empty();
    move_mount(
        &mnt,
        "",
        rustix::fs::CWD,
        target,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
    .map_err(|e| io_err("move_mount overlay to", target, e))?;
    Ok(())
}

/// Bind `src` onto `dst` and make the bind read-only, nosuid and nodev,
/// keeping whatever flags the source mount has locked (a remount inside a
/// user namespace must not clear them).
pub fn bind_read_only(src: &Path, dst: &Path) -> io::Result<()> {
    nix::mount::mount(Some(src), dst, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .map_err(|e| io_err("bind", src, e))?;
    let st = nix::sys::statvfs::statvfs(dst).map_err(|e| io_err("statvfs", dst, e))?;
    use nix::sys::statvfs::FsFlags;
    let mut flags = MsFlags::MS_BIND
        | MsFlags::MS_REMOUNT
        | MsFlags::MS_RDONLY
        | MsFlags::MS_NOSUID
        | MsFlags::MS_NODEV;
    let f = st.flags();
    if f.contains(FsFlags::ST_NOEXEC) {
        flags |= MsFlags::MS_NOEXEC;
    }
    if f.contains(FsFlags::ST_NOATIME) {
        flags |= MsFlags::MS_NOATIME;
    }
    if f.contains(FsFlags::ST_NODIRATIME) {
        flags |= MsFlags::MS_NODIRATIME;
    }
    if f.contains(FsFlags::ST_RELATIME) {
        flags |= MsFlags::MS_RELATIME;
    }
    nix::mount::mount(None::<&str>, dst, None::<&str>, flags, None::<&str>)
        .map_err(|e| io_err("remount read-only", dst, e))
}

/// Mount a fresh tmpfs at `target` with `options` (e.g. `mode=1777,size=1g`).
pub fn mount_tmpfs(target: &Path, flags: MsFlags, options: &str) -> io::Result<()> {
    nix::mount::mount(Some("tmpfs"), target, Some("tmpfs"), flags, Some(options))
        .map_err(|e| io_err("mount tmpfs on", target, e))
}

/// Bring the loopback interface of the current network namespace up.
pub fn loopback_up() -> io::Result<()> {
    let sock = rustix::net::socket(
        rustix::net::AddressFamily::INET,
        rustix::net::SocketType::DGRAM,
        None,
    )?;
    // SAFETY: `ifreq` is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the flags of the interface named in `req`
    // into `req.ifr_ifru`; `req` is a valid, exclusively borrowed ifreq.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the flags member is the active one after SIOCGIFFLAGS.
    unsafe {
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    }
    // SAFETY: SIOCSIFFLAGS reads `req`, which names "lo" and carries the flags.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Close every descriptor except those in `keep`.
///
/// For a process that forked but does not exec (an action's init): what it
/// inherited from the helper (the protocol pipes, the store's directory) must
/// not stay reachable, even through `/proc/PID/fd`.
pub fn close_all_except(keep: &[i32]) -> io::Result<()> {
    let mut keep: Vec<u32> = keep
        .iter()
        .filter_map(|&fd| u32::try_from(fd).ok())
        .collect();
    keep.sort_unstable();
    keep.dedup();
    let mut first = 0u32;
    for k in keep.into_iter().chain(std::iter::once(u32::MAX)) {
        if k > first {
            // SAFETY: close_range only closes descriptors; the caller owns
            // every descriptor outside `keep` and uses none of them again.
            let rc = unsafe { libc::syscall(libc::SYS_close_range, first, k - 1, 0u32) };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        first = k.saturating_add(1);
    }
    Ok(())
}

/// Mark the calling process not dumpable: nothing without CAP_SYS_PTRACE in
/// its original user namespace can attach to it or open its `/proc/PID/fd`,
/// `environ`, `mem`, `root` or `cwd`. (`execve` resets the flag, so an action
/// that execs is dumpable again: only the processes that never exec keep it.)
pub fn set_not_dumpable() -> io::Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(io::Error::from)
}

/// Mark every descriptor from `first` upwards close-on-exec.
pub fn cloexec_from(first: u32) -> io::Result<()> {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets flags on
    // descriptors; it does not invalidate any Rust-owned handle.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `execve` that only returns on failure.
pub fn exec(path: &str, argv: &[CString], env: &[CString]) -> io::Error {
    let path = match CString::new(path) {
        Ok(p) => p,
        Err(e) => return io::Error::other(e),
    };
    match nix::unistd::execve(&path, argv, env) {
        Ok(never) => match never {},
        Err(e) => io::Error::from(e),
    }
}

/// `_exit` without running destructors or atexit handlers (for forked children).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: `_exit` is async-signal-safe and never returns.
    unsafe { libc::_exit(code) }
}
