//! The syscall seam of the sandbox: every namespace, mount, id, limit and
//! capability call that sets a sandbox up goes through [`Syscalls`], and every
//! `unsafe` block of the helper lives in this file, each with its reason.
//!
//! The seam exists for two reasons. Set-up logic (which mounts, in which
//! order, with which flags; which limits; which capabilities go) can be unit
//! tested without root: the tests run it against a recording fake
//! ([`super::fake::Recorder`]) and compare the calls it made, where the real
//! calls would need a user namespace. And the raw calls are in one place to
//! audit: [`Linux`] implements the trait, and the few process-plumbing calls
//! that are not set-up (`fork`, `clone`, `dup2`, `poll`, `_exit`) are the free
//! functions below it.

use std::ffi::CString;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};
use nix::sched::CloneFlags;
use nix::sys::resource::Resource;
use nix::unistd::{ForkResult, Gid, Pid, Uid};
use rustix::mount::{
    FsOpenFlags, MountAttrFlags, MoveMountFlags, fsconfig_create, fsconfig_set_flag,
    fsconfig_set_string, fsmount, fsopen, move_mount,
};
use rustix::thread::CapabilitySet;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::{HelperError, Op, Result};

/// Which id-map file of `/proc/PID` is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdMap {
    /// `uid_map`.
    Uid,
    /// `gid_map`.
    Gid,
    /// `setgroups` (written `deny` before an unprivileged `gid_map`).
    SetGroups,
}

impl IdMap {
    fn file(self) -> &'static str {
        match self {
            Self::Uid => "uid_map",
            Self::Gid => "gid_map",
            Self::SetGroups => "setgroups",
        }
    }
}

/// The calls that set a sandbox up. Set-up code is generic over this trait;
/// [`Linux`] makes the calls, the recording fake writes them down.
pub(crate) trait Syscalls {
    /// `unshare(flags)`.
    fn unshare(&mut self, flags: CloneFlags) -> Result<()>;
    /// Open `path` as an `O_PATH` directory descriptor (the store root).
    fn open_dir(&mut self, path: &Path) -> Result<OwnedFd>;
    /// `sethostname(name)`.
    fn set_hostname(&mut self, name: &str) -> Result<()>;
    /// Bring the loopback interface of the network namespace up.
    fn loopback_up(&mut self) -> Result<()>;
    /// `mount(source, target, fstype, flags, data)`.
    fn mount(
        &mut self,
        source: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: MsFlags,
        data: Option<&str>,
    ) -> Result<()>;
    /// The flags of the mount at `path` that a remount inside a user
    /// namespace must keep (noexec, noatime, nodiratime, relatime).
    fn locked_flags(&mut self, path: &Path) -> Result<MsFlags>;
    /// Mount an overlay of `lowers` (topmost first) at `target`.
    fn mount_overlay(
        &mut self,
        lowers: &[PathBuf],
        upper: &Path,
        work: &Path,
        target: &Path,
    ) -> Result<()>;
    /// A read-only overlay of `lowers` (topmost first, at least two) at
    /// `target`, `nosuid,nodev`: an image's root filesystem.
    fn mount_overlay_read_only(&mut self, lowers: &[PathBuf], target: &Path) -> Result<()>;
    /// Listen on `127.0.0.1:port` (of the sandbox's network namespace) and
    /// forward every connection to the Unix socket `socket`, in a child
    /// process that dies with the helper; `keep` are descriptors the child
    /// needs (the store's, through which `socket` is reached).
    fn start_forwarder(&mut self, socket: &Path, port: u16, keep: &[i32]) -> Result<()>;
    /// `umount2(target, flags)`.
    fn umount(&mut self, target: &Path, flags: MntFlags) -> Result<()>;
    /// `pivot_root(new_root, put_old)`.
    fn pivot_root(&mut self, new_root: &Path, put_old: &Path) -> Result<()>;
    /// `chdir(path)`.
    fn chdir(&mut self, path: &Path) -> Result<()>;
    /// `chroot(path)`.
    fn chroot(&mut self, path: &Path) -> Result<()>;
    /// `setresgid(gid, gid, gid)`.
    fn set_resgid(&mut self, gid: u32) -> Result<()>;
    /// `setgroups(groups)`.
    fn set_groups(&mut self, groups: &[u32]) -> Result<()>;
    /// `setresuid(uid, uid, uid)`.
    fn set_resuid(&mut self, uid: u32) -> Result<()>;
    /// `setrlimit(resource, soft, hard)`.
    fn set_rlimit(&mut self, resource: Resource, soft: u64, hard: u64) -> Result<()>;
    /// Remove `caps` from the bounding set.
    fn drop_bounding_caps(&mut self, caps: CapabilitySet) -> Result<()>;
    /// `PR_SET_NO_NEW_PRIVS`.
    fn set_no_new_privs(&mut self) -> Result<()>;
    /// Write `content` to `/proc/<pid>/<map>`.
    fn write_id_map(&mut self, pid: u32, map: IdMap, content: &str) -> Result<()>;
    /// Create a directory (an existing one is fine).
    fn mkdir(&mut self, path: &Path, mode: u32) -> Result<()>;
    /// Create an empty file (a bind-mount target).
    fn create_file(&mut self, path: &Path) -> Result<()>;
    /// Create or replace a file with `content`.
    fn write_file(&mut self, path: &Path, content: &str) -> Result<()>;
    /// Create a symlink at `link` pointing to `target`.
    fn symlink(&mut self, target: &Path, link: &Path) -> Result<()>;
    /// Set the permission bits of `path`.
    fn chmod(&mut self, path: &Path, mode: u32) -> Result<()>;
    /// Run `f` in a forked child (which may change its ids and root without
    /// affecting the helper) and bring its result back.
    fn in_child<T, F>(&mut self, f: F) -> Result<T>
    where
        Self: Sized,
        T: Serialize + DeserializeOwned,
        F: FnOnce(&mut Self) -> Result<T>;
}

/// The real calls.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Linux;

impl Syscalls for Linux {
    fn unshare(&mut self, flags: CloneFlags) -> Result<()> {
        nix::sched::unshare(flags).map_err(|e| HelperError::sys_bare(Op::Unshare, e))
    }

    fn open_dir(&mut self, path: &Path) -> Result<OwnedFd> {
        nix::fcntl::open(
            path,
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| HelperError::sys(Op::OpenStore, path, e))
    }

    fn set_hostname(&mut self, name: &str) -> Result<()> {
        nix::unistd::sethostname(name).map_err(|e| HelperError::sys_bare(Op::SetHostname, e))
    }

    fn loopback_up(&mut self) -> Result<()> {
        loopback_up().map_err(|e| HelperError::io(Op::LoopbackUp, None, &e))
    }

    fn mount(
        &mut self,
        source: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: MsFlags,
        data: Option<&str>,
    ) -> Result<()> {
        nix::mount::mount(source, target, fstype, flags, data)
            .map_err(|e| HelperError::sys(Op::Mount, target, e))
    }

    fn locked_flags(&mut self, path: &Path) -> Result<MsFlags> {
        use nix::sys::statvfs::FsFlags;
        let st =
            nix::sys::statvfs::statvfs(path).map_err(|e| HelperError::sys(Op::Statvfs, path, e))?;
        let f = st.flags();
        let mut flags = MsFlags::empty();
        for (fs, ms) in [
            (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
            (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
            (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
            (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
        ] {
            if f.contains(fs) {
                flags |= ms;
            }
        }
        Ok(flags)
    }

    /// With the new mount API: `lowers` passed one `lowerdir+` at a time so
    /// the chain length is not limited by the 4 KiB option page (overlayfs
    /// itself stacks at most 500 lowers). Always `userxattr`: the helper
    /// mounts inside a user namespace.
    fn mount_overlay(
        &mut self,
        lowers: &[PathBuf],
        upper: &Path,
        work: &Path,
        target: &Path,
    ) -> Result<()> {
        overlay(lowers, Some((upper, work)), target, MountAttrFlags::empty())
    }

    fn mount_overlay_read_only(&mut self, lowers: &[PathBuf], target: &Path) -> Result<()> {
        overlay(
            lowers,
            None,
            target,
            MountAttrFlags::MOUNT_ATTR_RDONLY
                | MountAttrFlags::MOUNT_ATTR_NOSUID
                | MountAttrFlags::MOUNT_ATTR_NODEV,
        )
    }

    fn start_forwarder(&mut self, socket: &Path, port: u16, keep: &[i32]) -> Result<()> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", port))
            .map_err(|e| HelperError::io(Op::Forwarder, None, &e))?;
        match fork()? {
            ForkResult::Child => {
                let _ = rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ));
                let mut k = keep.to_vec();
                k.extend([2, listener.as_raw_fd()]);
                let _ = close_all_except(&k);
                forward(&listener, socket);
                exit_now(0)
            }
            ForkResult::Parent { .. } => Ok(()),
        }
    }

    fn umount(&mut self, target: &Path, flags: MntFlags) -> Result<()> {
        nix::mount::umount2(target, flags).map_err(|e| HelperError::sys(Op::Umount, target, e))
    }

    fn pivot_root(&mut self, new_root: &Path, put_old: &Path) -> Result<()> {
        nix::unistd::pivot_root(new_root, put_old)
            .map_err(|e| HelperError::sys(Op::PivotRoot, new_root, e))
    }

    fn chdir(&mut self, path: &Path) -> Result<()> {
        nix::unistd::chdir(path).map_err(|e| HelperError::sys(Op::Chdir, path, e))
    }

    fn chroot(&mut self, path: &Path) -> Result<()> {
        nix::unistd::chroot(path).map_err(|e| HelperError::sys(Op::Chroot, path, e))
    }

    fn set_resgid(&mut self, gid: u32) -> Result<()> {
        let g = Gid::from_raw(gid);
        nix::unistd::setresgid(g, g, g).map_err(|e| HelperError::sys_bare(Op::SetResGid, e))
    }

    fn set_groups(&mut self, groups: &[u32]) -> Result<()> {
        let groups: Vec<Gid> = groups.iter().map(|&g| Gid::from_raw(g)).collect();
        nix::unistd::setgroups(&groups).map_err(|e| HelperError::sys_bare(Op::SetGroups, e))
    }

    fn set_resuid(&mut self, uid: u32) -> Result<()> {
        let u = Uid::from_raw(uid);
        nix::unistd::setresuid(u, u, u).map_err(|e| HelperError::sys_bare(Op::SetResUid, e))
    }

    fn set_rlimit(&mut self, resource: Resource, soft: u64, hard: u64) -> Result<()> {
        nix::sys::resource::setrlimit(resource, soft, hard)
            .map_err(|e| HelperError::sys_bare(Op::SetRlimit, e))
    }

    fn drop_bounding_caps(&mut self, caps: CapabilitySet) -> Result<()> {
        for cap in caps.iter() {
            rustix::thread::remove_capability_from_bounding_set(cap).map_err(|e| {
                HelperError::sys_bare(
                    Op::DropCapability,
                    nix::errno::Errno::from_raw(e.raw_os_error()),
                )
            })?;
        }
        Ok(())
    }

    fn set_no_new_privs(&mut self) -> Result<()> {
        rustix::thread::set_no_new_privs(true).map_err(|e| {
            HelperError::sys_bare(
                Op::NoNewPrivs,
                nix::errno::Errno::from_raw(e.raw_os_error()),
            )
        })
    }

    fn write_id_map(&mut self, pid: u32, map: IdMap, content: &str) -> Result<()> {
        let path = PathBuf::from(format!("/proc/{pid}/{}", map.file()));
        fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut f| f.write_all(content.as_bytes()))
            .map_err(|e| HelperError::io(Op::WriteIdMap, Some(&path), &e))
    }

    fn mkdir(&mut self, path: &Path, mode: u32) -> Result<()> {
        match fs::DirBuilder::new().mode(mode).create(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(HelperError::io(Op::Mkdir, Some(path), &e)),
        }
    }

    fn create_file(&mut self, path: &Path) -> Result<()> {
        File::create(path)
            .map(drop)
            .map_err(|e| HelperError::io(Op::CreateFile, Some(path), &e))
    }

    fn write_file(&mut self, path: &Path, content: &str) -> Result<()> {
        fs::write(path, content).map_err(|e| HelperError::io(Op::WriteFile, Some(path), &e))
    }

    fn symlink(&mut self, target: &Path, link: &Path) -> Result<()> {
        symlink(target, link).map_err(|e| HelperError::io(Op::Symlink, Some(link), &e))
    }

    fn chmod(&mut self, path: &Path, mode: u32) -> Result<()> {
        fs::set_permissions(path, fs::Permissions::from_mode(mode))
            .map_err(|e| HelperError::io(Op::Chmod, Some(path), &e))
    }

    fn in_child<T, F>(&mut self, f: F) -> Result<T>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce(&mut Self) -> Result<T>,
    {
        let (rd, wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| HelperError::sys_bare(Op::Pipe, e))?;
        let pid = match fork()? {
            ForkResult::Child => {
                drop(rd);
                let result: Result<T> = f(&mut Linux);
                let mut out = File::from(wr);
                let code =
                    i32::from(crate::sandbox::protocol::write_frame(&mut out, &result).is_err());
                exit_now(code)
            }
            ForkResult::Parent { child } => child,
        };
        drop(wr);
        let mut input = File::from(rd);
        let result = crate::sandbox::protocol::read_frame::<_, Result<T>>(&mut input);
        // Close the pipe before waiting: a child still writing a frame the
        // read refused then fails with EPIPE and exits instead of blocking.
        drop(input);
        let _ = nix::sys::wait::waitpid(pid, None);
        match result {
            Ok(Some(r)) => r,
            Ok(None) => Err(HelperError::ChildLost {
                detail: "it exited without writing one".to_owned(),
            }),
            Err(e) => Err(HelperError::ChildLost {
                detail: e.to_string(),
            }),
        }
    }
}

/// The error of one step of the overlay mount, on `path`.
fn overlay_err(path: &Path) -> impl Fn(rustix::io::Errno) -> HelperError + '_ {
    move |e| {
        HelperError::sys(
            Op::MountOverlay,
            path,
            nix::errno::Errno::from_raw(e.raw_os_error()),
        )
    }
}

/// Bring the loopback interface of the current network namespace up.
fn loopback_up() -> io::Result<()> {
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

// ---- Process plumbing: not set-up, but raw, so it lives here too. ----

/// `fork()` the single-threaded helper (or an action's init).
pub(super) fn fork() -> Result<ForkResult> {
    // SAFETY: the helper and an action's init are single-threaded, and
    // every child forked here ends in `_exit` (or `execve`).
    unsafe { nix::unistd::fork() }.map_err(|e| HelperError::sys_bare(Op::Fork, e))
}

/// Clone an action's init into fresh mount and pid namespaces, running `init`
/// on `stack`; returns its pid.
pub(super) fn clone_action_init(init: &mut dyn FnMut() -> isize, stack: &mut [u8]) -> Result<Pid> {
    // SAFETY: the helper is single-threaded, and the child (which gets a
    // copy of the address space, not a shared one: no CLONE_VM) runs
    // only the callback on its own stack and ends in `_exit`.
    unsafe {
        nix::sched::clone(
            Box::new(init),
            stack,
            CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID,
            Some(libc::SIGCHLD),
        )
    }
    .map_err(|e| HelperError::sys_bare(Op::Clone, e))
}

/// `dup2(src, dst)`.
pub(super) fn dup2(src: i32, dst: i32) -> io::Result<()> {
    // SAFETY: dup2 onto a fixed descriptor number; callers replace only
    // descriptors they own (0-2, the state and channel numbers) and use
    // none of the old ones again.
    if unsafe { libc::dup2(src, dst) } < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Close `fd`, a raw descriptor inherited across `fork` that the caller
/// owns and never uses again.
pub(super) fn close(fd: i32) {
    // SAFETY: the caller owns `fd` (an inherited copy) and nothing in this
    // process uses it afterwards.
    unsafe { libc::close(fd) };
}

/// Whether `fd` is readable or hung up right now (a zero-timeout poll).
pub(super) fn ready_now(fd: i32) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pfd` is a valid pollfd array of length 1.
    unsafe { libc::poll(&mut pfd, 1, 0) != 0 }
}

/// Take ownership of `fd`, a pipe end inherited from the helper that no
/// other handle in this process owns.
pub(super) fn file_from_inherited(fd: i32) -> File {
    // SAFETY: `fd` is a pipe write end inherited from the helper and owned
    // by this process alone from here on (see callers).
    unsafe { File::from_raw_fd(fd) }
}

/// Duplicate `fd` to the lowest free number at or above `min`, close-on-exec.
pub(super) fn dup_above(fd: impl AsFd, min: i32) -> Result<OwnedFd> {
    let raw = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(min))
        .map_err(|e| HelperError::sys_bare(Op::Dup, e))?;
    // SAFETY: F_DUPFD_CLOEXEC just returned this new descriptor, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Clear close-on-exec on `fd` (so it survives `execve`).
pub(super) fn keep_across_exec(fd: i32) -> io::Result<()> {
    // SAFETY: F_SETFD only changes the flags of `fd`, which the caller
    // just created with dup2.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Close every descriptor except those in `keep`.
///
/// For a process that forked but does not exec (an action's init): what it
/// inherited from the helper (the protocol pipes, the store's directory) must
/// not stay reachable, even through `/proc/PID/fd`.
pub(super) fn close_all_except(keep: &[i32]) -> io::Result<()> {
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
pub(super) fn set_not_dumpable() -> io::Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(io::Error::from)
}

/// The Landlock ABI of the running kernel (`None`: unavailable or disabled).
pub(super) fn landlock_abi() -> Option<u32> {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    // reads no memory and returns the ABI version or -1.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    u32::try_from(v).ok().filter(|&v| v >= 1)
}

/// Mark the calling process dumpable again (as its `execve` would): its
/// `/proc/PID` files are then its own, not the host root's, so it can write
/// its own id maps (see [`super::setup::become_image_user`]).
pub(super) fn set_dumpable() -> io::Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::Dumpable)
        .map_err(io::Error::from)
}

/// Mark every descriptor from `first` upwards close-on-exec.
pub(super) fn cloexec_from(first: u32) -> io::Result<()> {
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
pub(super) fn exec(path: &str, argv: &[CString], env: &[CString]) -> io::Error {
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
pub(super) fn exit_now(code: i32) -> ! {
    // SAFETY: `_exit` is async-signal-safe and never returns.
    unsafe { libc::_exit(code) }
}

/// Mount an overlay of `lowers` (topmost first) with an optional upper and
/// work directory at `target`.
fn overlay(
    lowers: &[PathBuf],
    upper_work: Option<(&Path, &Path)>,
    target: &Path,
    attrs: MountAttrFlags,
) -> Result<()> {
    let fs = fsopen("overlay", FsOpenFlags::FSOPEN_CLOEXEC).map_err(overlay_err(target))?;
    fsconfig_set_string(&fs, "source", "arbor").map_err(overlay_err(target))?;
    fsconfig_set_flag(&fs, "userxattr").map_err(overlay_err(target))?;
    for lower in lowers {
        fsconfig_set_string(&fs, "lowerdir+", lower).map_err(overlay_err(lower))?;
    }
    if let Some((upper, work)) = upper_work {
        fsconfig_set_string(&fs, "upperdir", upper).map_err(overlay_err(upper))?;
        fsconfig_set_string(&fs, "workdir", work).map_err(overlay_err(work))?;
    }
    fsconfig_create(&fs).map_err(overlay_err(target))?;
    let mnt: OwnedFd = fsmount(&fs, rustix::mount::FsMountFlags::FSMOUNT_CLOEXEC, attrs)
        .map_err(overlay_err(target))?;
    move_mount(
        &mnt,
        "",
        rustix::fs::CWD,
        target,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
    .map_err(overlay_err(target))
}

/// The forwarder's loop: each connection to `listener` is spliced to a new
/// connection to the Unix socket `socket` (the proxy outside).
fn forward(listener: &std::net::TcpListener, socket: &Path) {
    for conn in listener.incoming() {
        let Ok(tcp) = conn else { continue };
        let socket = socket.to_owned();
        // This process never forks, so threads are safe here.
        let _ = std::thread::Builder::new().spawn(move || {
            let Ok(unix) = std::os::unix::net::UnixStream::connect(&socket) else {
                return;
            };
            let (Ok(mut t2), Ok(mut u2)) = (tcp.try_clone(), unix.try_clone()) else {
                return;
            };
            let up = std::thread::spawn(move || {
                let _ = io::copy(&mut t2, &mut u2);
                let _ = u2.shutdown(std::net::Shutdown::Write);
            });
            let (mut t, mut u) = (tcp, unix);
            let _ = io::copy(&mut u, &mut t);
            let _ = t.shutdown(std::net::Shutdown::Write);
            let _ = up.join();
        });
    }
}
