//! What can fail inside the helper, as a value that crosses the protocol
//! (it is serialised into [`super::super::protocol::Response::Error`]), so
//! the runtime can tell an overlay that cannot be mounted from any other
//! failure without reading a message.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The operation that failed: the system call (or the file operation) by
/// the name a reader finds in its man page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// `unshare(2)` of the sandbox's namespaces.
    Unshare,
    /// `open(2)` of the store root.
    OpenStore,
    /// `mount(2)`.
    Mount,
    /// The overlay mount (`fsopen`/`fsconfig`/`fsmount`/`move_mount`).
    MountOverlay,
    /// Starting the egress forwarder (binding its loopback port).
    Forwarder,
    /// `statvfs(2)` of a bind mount (for the flags a remount must keep).
    Statvfs,
    /// `umount2(2)`.
    Umount,
    /// `pivot_root(2)`.
    PivotRoot,
    /// `chdir(2)`.
    Chdir,
    /// `chroot(2)`.
    Chroot,
    /// `sethostname(2)`.
    SetHostname,
    /// Bringing the loopback interface up (`SIOCSIFFLAGS`).
    LoopbackUp,
    /// `setresgid(2)`.
    SetResGid,
    /// `setgroups(2)`.
    SetGroups,
    /// `setresuid(2)`.
    SetResUid,
    /// `setrlimit(2)`.
    SetRlimit,
    /// `PR_CAPBSET_DROP`.
    DropCapability,
    /// `PR_SET_NO_NEW_PRIVS`.
    NoNewPrivs,
    /// Building the syscall filter (seccomp-bpf).
    SyscallFilter,
    /// Writing `/proc/PID/{uid_map,gid_map,setgroups}`.
    WriteIdMap,
    /// `mkdir(2)`.
    Mkdir,
    /// Creating an empty file (a bind-mount target).
    CreateFile,
    /// Writing a file.
    WriteFile,
    /// `symlink(2)`.
    Symlink,
    /// `readlink(2)`.
    Readlink,
    /// Reading a directory.
    ReadDir,
    /// `chmod(2)`.
    Chmod,
    /// `pipe2(2)`.
    Pipe,
    /// `socketpair(2)`.
    Socketpair,
    /// `fork(2)`.
    Fork,
    /// `clone(2)` of an action's init.
    Clone,
    /// `dup(2)`, `dup2(2)` or `F_DUPFD`.
    Dup,
    /// `fcntl(2)`.
    Fcntl,
    /// `waitpid(2)`.
    Wait,
    /// `poll(2)`.
    Poll,
    /// `read(2)` of an action's output.
    Read,
    /// Reading a request or writing a response on the protocol pipes.
    Protocol,
    /// Opening, reading, writing, listing or deleting a workspace file.
    File,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Self::Unshare => "unshare",
            Self::OpenStore => "open store",
            Self::Mount => "mount",
            Self::MountOverlay => "mount overlay",
            Self::Forwarder => "start the egress forwarder",
            Self::Statvfs => "statvfs",
            Self::Umount => "umount",
            Self::PivotRoot => "pivot_root",
            Self::Chdir => "chdir",
            Self::Chroot => "chroot",
            Self::SetHostname => "sethostname",
            Self::LoopbackUp => "bring up loopback",
            Self::SetResGid => "setresgid",
            Self::SetGroups => "setgroups",
            Self::SetResUid => "setresuid",
            Self::SetRlimit => "setrlimit",
            Self::DropCapability => "drop capability",
            Self::NoNewPrivs => "no_new_privs",
            Self::SyscallFilter => "build the syscall filter",
            Self::WriteIdMap => "write id map",
            Self::Mkdir => "mkdir",
            Self::CreateFile => "create",
            Self::WriteFile => "write",
            Self::Symlink => "symlink",
            Self::Readlink => "readlink",
            Self::ReadDir => "read directory",
            Self::Chmod => "chmod",
            Self::Pipe => "pipe",
            Self::Socketpair => "socketpair",
            Self::Fork => "fork",
            Self::Clone => "clone",
            Self::Dup => "dup",
            Self::Fcntl => "fcntl",
            Self::Wait => "waitpid",
            Self::Poll => "poll",
            Self::Read => "read",
            Self::Protocol => "protocol",
            Self::File => "file",
        };
        f.write_str(name)
    }
}

/// A failure inside the helper.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HelperError {
    /// A system call failed with an errno.
    #[error("{op}{}: {}", on(path), nix::errno::Errno::from_raw(*errno).desc())]
    Sys {
        /// The operation.
        op: Op,
        /// The path it was applied to, when there is one.
        path: Option<PathBuf>,
        /// The OS error number.
        errno: i32,
    },
    /// An operation failed without an OS error number.
    #[error("{op}{}: {message}", on(path))]
    Other {
        /// The operation.
        op: Op,
        /// The path it was applied to, when there is one.
        path: Option<PathBuf>,
        /// What went wrong.
        message: String,
    },
    /// A request that needs the sandbox came before [`super::super::protocol::Request::Setup`].
    #[error("sandbox is not set up")]
    NotSetUp,
    /// An action was requested before a workspace was mounted.
    #[error("no workspace is mounted")]
    NoWorkspace,
    /// A per-action read-only mount names no mount point of the sandbox.
    #[error(
        "read-only mount target {target:?} is not a mount point of the sandbox, or one name \
         ([A-Za-z0-9_-]) below one (the mount points are: {points})"
    )]
    MountTarget {
        /// The target asked for.
        target: String,
        /// The mount points there are.
        points: String,
    },
    /// A command, environment variable or cwd holds a NUL byte.
    #[error("{what} contains a NUL byte")]
    Nul {
        /// Which input.
        what: String,
    },
    /// A forked child of the helper ended without sending its result.
    #[error("the helper's child ended without a result ({detail})")]
    ChildLost {
        /// How it ended, or why its result could not be read.
        detail: String,
    },
    /// An action's init (G) ended without reporting how the action ended.
    #[error("action supervisor {detail} without reporting (see helper stderr)")]
    ActionInit {
        /// How it ended.
        detail: String,
    },
}

fn on(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map(|p| format!(" {}", p.display()))
        .unwrap_or_default()
}

impl HelperError {
    /// A failed system call on `path`.
    pub(crate) fn sys(op: Op, path: &Path, errno: nix::errno::Errno) -> Self {
        Self::Sys {
            op,
            path: Some(path.to_owned()),
            errno: errno as i32,
        }
    }

    /// A failed system call on nothing in particular.
    pub(crate) fn sys_bare(op: Op, errno: nix::errno::Errno) -> Self {
        Self::Sys {
            op,
            path: None,
            errno: errno as i32,
        }
    }

    /// A failed I/O operation: its errno when it has one, else its message.
    pub(crate) fn io(op: Op, path: Option<&Path>, e: &std::io::Error) -> Self {
        let path = path.map(Path::to_owned);
        match e.raw_os_error() {
            Some(errno) => Self::Sys { op, path, errno },
            None => Self::Other {
                op,
                path,
                message: e.to_string(),
            },
        }
    }

    /// Whether this is the overlay mount failing (the runtime then falls
    /// back to the copy backend).
    pub fn is_overlay_mount(&self) -> bool {
        matches!(
            self,
            Self::Sys {
                op: Op::MountOverlay,
                ..
            } | Self::Other {
                op: Op::MountOverlay,
                ..
            }
        )
    }
}

/// Result type of the helper.
pub type Result<T, E = HelperError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_op_path_and_errno_and_survive_the_wire() {
        let e = HelperError::sys(
            Op::MountOverlay,
            Path::new("/run/1/root/workspace"),
            nix::errno::Errno::EINVAL,
        );
        assert_eq!(
            e.to_string(),
            "mount overlay /run/1/root/workspace: Invalid argument"
        );
        let back: HelperError = serde_json::from_slice(&serde_json::to_vec(&e).unwrap()).unwrap();
        assert_eq!(back, e);
        assert!(back.is_overlay_mount());
        // Control: the same errno from another mount is not the overlay's.
        let other = HelperError::sys(
            Op::Mount,
            Path::new("/run/1/root/workspace"),
            nix::errno::Errno::EINVAL,
        );
        assert!(!other.is_overlay_mount());
        assert_ne!(other.to_string(), e.to_string());
    }
}
