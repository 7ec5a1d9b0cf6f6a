//! A recording [`Syscalls`]: each call is written down as a typed [`Call`]
//! and succeeds, so tests can compare the exact sequence set-up code makes
//! without root and without touching the host.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};
use nix::sched::CloneFlags;
use nix::sys::resource::Resource;
use rustix::thread::CapabilitySet;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::{HelperError, Op, Result};
use super::sys::{IdMap, Syscalls};

/// One recorded call, with its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    Unshare {
        flags: CloneFlags,
    },
    OpenDir {
        path: PathBuf,
    },
    SetHostname {
        name: String,
    },
    LoopbackUp,
    Mount {
        source: Option<PathBuf>,
        target: PathBuf,
        fstype: Option<String>,
        flags: MsFlags,
        data: Option<String>,
    },
    MountOverlay {
        lowers: Vec<PathBuf>,
        upper: PathBuf,
        work: PathBuf,
        target: PathBuf,
    },
    MountOverlayReadOnly {
        lowers: Vec<PathBuf>,
        target: PathBuf,
    },
    Forwarder {
        socket: PathBuf,
        port: u16,
    },
    Umount {
        target: PathBuf,
        flags: MntFlags,
    },
    PivotRoot {
        new_root: PathBuf,
        put_old: PathBuf,
    },
    Chdir {
        path: PathBuf,
    },
    Chroot {
        path: PathBuf,
    },
    SetResGid {
        gid: u32,
    },
    SetGroups {
        groups: Vec<u32>,
    },
    SetResUid {
        uid: u32,
    },
    SetRlimit {
        resource: Resource,
        soft: u64,
        hard: u64,
    },
    Capabilities {
        dropped: CapabilitySet,
    },
    NoNewPrivs,
    WriteIdMap {
        pid: u32,
        map: IdMap,
        content: String,
    },
    Mkdir {
        path: PathBuf,
        mode: u32,
    },
    CreateFile {
        path: PathBuf,
    },
    WriteFile {
        path: PathBuf,
        content: String,
    },
    Symlink {
        target: PathBuf,
        link: PathBuf,
    },
    Chmod {
        path: PathBuf,
        mode: u32,
    },
    /// The start of [`Syscalls::in_child`]: the calls up to the matching
    /// [`Call::ChildEnd`] happen in a forked child.
    ChildStart,
    /// The end of [`Syscalls::in_child`].
    ChildEnd,
}

impl Call {
    /// The same call with every path argument passed through `f`.
    pub fn map_paths(&self, f: &dyn Fn(&Path) -> PathBuf) -> Call {
        let g = |p: &PathBuf| f(p);
        match self {
            Self::Mount {
                source,
                target,
                fstype,
                flags,
                data,
            } => Self::Mount {
                source: source.as_ref().map(g),
                target: g(target),
                fstype: fstype.clone(),
                flags: *flags,
                data: data.clone(),
            },
            Self::MountOverlay {
                lowers,
                upper,
                work,
                target,
            } => Self::MountOverlay {
                lowers: lowers.iter().map(g).collect(),
                upper: g(upper),
                work: g(work),
                target: g(target),
            },
            Self::Forwarder { socket, port } => Self::Forwarder {
                socket: g(socket),
                port: *port,
            },
            Self::MountOverlayReadOnly { lowers, target } => Self::MountOverlayReadOnly {
                lowers: lowers.iter().map(g).collect(),
                target: g(target),
            },
            Self::Umount { target, flags } => Self::Umount {
                target: g(target),
                flags: *flags,
            },
            Self::Mkdir { path, mode } => Self::Mkdir {
                path: g(path),
                mode: *mode,
            },
            Self::CreateFile { path } => Self::CreateFile { path: g(path) },
            Self::WriteFile { path, content } => Self::WriteFile {
                path: g(path),
                content: content.clone(),
            },
            Self::Symlink { target, link } => Self::Symlink {
                target: g(target),
                link: g(link),
            },
            Self::Chmod { path, mode } => Self::Chmod {
                path: g(path),
                mode: *mode,
            },
            other => other.clone(),
        }
    }
}

/// Records every call; all succeed, except a mount of [`Recorder::fail_on`].
#[derive(Debug)]
pub(crate) struct Recorder {
    pub calls: Vec<Call>,
    /// Flags [`Syscalls::locked_flags`] reports for every path.
    pub locked: MsFlags,
    /// A target whose mount (plain or overlay) fails with `EPERM`.
    pub fail_on: Option<PathBuf>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self {
            calls: Vec::new(),
            locked: MsFlags::empty(),
            fail_on: None,
        }
    }
}

impl Recorder {
    fn fails(&self, op: Op, target: &Path) -> Result<()> {
        match &self.fail_on {
            Some(t) if t == target => Err(HelperError::sys(op, target, nix::errno::Errno::EPERM)),
            _ => Ok(()),
        }
    }

    /// The mounts, binds and unmounts among the calls, in order.
    pub fn mounts(&self) -> Vec<&Call> {
        self.calls
            .iter()
            .filter(|c| {
                matches!(
                    c,
                    Call::Mount { .. } | Call::MountOverlay { .. } | Call::Umount { .. }
                )
            })
            .collect()
    }
}

impl Syscalls for Recorder {
    fn unshare(&mut self, flags: CloneFlags) -> Result<()> {
        self.calls.push(Call::Unshare { flags });
        Ok(())
    }

    fn open_dir(&mut self, path: &Path) -> Result<OwnedFd> {
        self.calls.push(Call::OpenDir {
            path: path.to_owned(),
        });
        std::fs::File::open("/dev/null")
            .map(OwnedFd::from)
            .map_err(|e| HelperError::io(Op::OpenStore, Some(path), &e))
    }

    fn set_hostname(&mut self, name: &str) -> Result<()> {
        self.calls.push(Call::SetHostname {
            name: name.to_owned(),
        });
        Ok(())
    }

    fn loopback_up(&mut self) -> Result<()> {
        self.calls.push(Call::LoopbackUp);
        Ok(())
    }

    fn mount(
        &mut self,
        source: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: MsFlags,
        data: Option<&str>,
    ) -> Result<()> {
        self.calls.push(Call::Mount {
            source: source.map(Path::to_owned),
            target: target.to_owned(),
            fstype: fstype.map(str::to_owned),
            flags,
            data: data.map(str::to_owned),
        });
        self.fails(Op::Mount, target)
    }

    fn locked_flags(&mut self, _path: &Path) -> Result<MsFlags> {
        Ok(self.locked)
    }

    fn mount_overlay(
        &mut self,
        lowers: &[PathBuf],
        upper: &Path,
        work: &Path,
        target: &Path,
    ) -> Result<()> {
        self.calls.push(Call::MountOverlay {
            lowers: lowers.to_vec(),
            upper: upper.to_owned(),
            work: work.to_owned(),
            target: target.to_owned(),
        });
        self.fails(Op::MountOverlay, target)
    }

    fn mount_overlay_read_only(&mut self, lowers: &[PathBuf], target: &Path) -> Result<()> {
        self.calls.push(Call::MountOverlayReadOnly {
            lowers: lowers.to_vec(),
            target: target.to_owned(),
        });
        self.fails(Op::MountOverlay, target)
    }

    fn start_forwarder(&mut self, socket: &Path, port: u16, _keep: &[i32]) -> Result<()> {
        self.calls.push(Call::Forwarder {
            socket: socket.to_owned(),
            port,
        });
        self.fails(Op::Forwarder, socket)
    }

    fn umount(&mut self, target: &Path, flags: MntFlags) -> Result<()> {
        self.calls.push(Call::Umount {
            target: target.to_owned(),
            flags,
        });
        Ok(())
    }

    fn pivot_root(&mut self, new_root: &Path, put_old: &Path) -> Result<()> {
        self.calls.push(Call::PivotRoot {
            new_root: new_root.to_owned(),
            put_old: put_old.to_owned(),
        });
        Ok(())
    }

    fn chdir(&mut self, path: &Path) -> Result<()> {
        self.calls.push(Call::Chdir {
            path: path.to_owned(),
        });
        Ok(())
    }

    fn chroot(&mut self, path: &Path) -> Result<()> {
        self.calls.push(Call::Chroot {
            path: path.to_owned(),
        });
        Ok(())
    }

    fn set_resgid(&mut self, gid: u32) -> Result<()> {
        self.calls.push(Call::SetResGid { gid });
        Ok(())
    }

    fn set_groups(&mut self, groups: &[u32]) -> Result<()> {
        self.calls.push(Call::SetGroups {
            groups: groups.to_vec(),
        });
        Ok(())
    }

    fn set_resuid(&mut self, uid: u32) -> Result<()> {
        self.calls.push(Call::SetResUid { uid });
        Ok(())
    }

    fn set_rlimit(&mut self, resource: Resource, soft: u64, hard: u64) -> Result<()> {
        self.calls.push(Call::SetRlimit {
            resource,
            soft,
            hard,
        });
        Ok(())
    }

    fn drop_bounding_caps(&mut self, caps: CapabilitySet) -> Result<()> {
        self.calls.push(Call::Capabilities { dropped: caps });
        Ok(())
    }

    fn set_no_new_privs(&mut self) -> Result<()> {
        self.calls.push(Call::NoNewPrivs);
        Ok(())
    }

    fn write_id_map(&mut self, pid: u32, map: IdMap, content: &str) -> Result<()> {
        self.calls.push(Call::WriteIdMap {
            pid,
            map,
            content: content.to_owned(),
        });
        Ok(())
    }

    fn mkdir(&mut self, path: &Path, mode: u32) -> Result<()> {
        self.calls.push(Call::Mkdir {
            path: path.to_owned(),
            mode,
        });
        Ok(())
    }

    fn create_file(&mut self, path: &Path) -> Result<()> {
        self.calls.push(Call::CreateFile {
            path: path.to_owned(),
        });
        Ok(())
    }

    fn write_file(&mut self, path: &Path, content: &str) -> Result<()> {
        self.calls.push(Call::WriteFile {
            path: path.to_owned(),
            content: content.to_owned(),
        });
        Ok(())
    }

    fn symlink(&mut self, target: &Path, link: &Path) -> Result<()> {
        self.calls.push(Call::Symlink {
            target: target.to_owned(),
            link: link.to_owned(),
        });
        Ok(())
    }

    fn chmod(&mut self, path: &Path, mode: u32) -> Result<()> {
        self.calls.push(Call::Chmod {
            path: path.to_owned(),
            mode,
        });
        Ok(())
    }

    fn in_child<T, F>(&mut self, f: F) -> Result<T>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce(&mut Self) -> Result<T>,
    {
        self.calls.push(Call::ChildStart);
        let result = f(self);
        self.calls.push(Call::ChildEnd);
        result
    }
}
