//! The messages between the runtime and a sandbox helper process.
//!
//! Framing on the helper's stdin/stdout: a 4-byte little-endian length, then
//! that many bytes of JSON. The runtime sends one [`Request`] and waits for one
//! [`Response`]; the helper never speaks unasked. The one exception to "one
//! reply per request" is an [`ExecRequest`] with `stream` set: the helper
//! then answers any number of [`Response::Output`] frames (the action's
//! output as it is read) before the final [`Response::Exec`]. When the helper's stdin
//! reaches end of file (the runtime died or dropped the sandbox), the helper
//! kills whatever action is running and exits, taking its namespaces and
//! mounts with it.

use std::io::{self, Read, Write};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::state::OutputStream;
use crate::store::object::{ExitStatus, SessionState};

/// The largest file the file API moves in one request (its base64 form,
/// a third larger, fits a frame with room to spare).
pub const MAX_FILE: usize = 32 << 20;

/// Bytes travel as base64 strings: a JSON array of numbers costs 2-4
/// characters a byte and is slow to parse; base64 costs 4/3 and is fast.
mod bytes_b64 {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)
    }
}

/// Largest frame either side accepts (64 MiB: two capped output streams fit easily).
pub const MAX_FRAME: usize = 64 << 20;

/// How the sandbox's `/workspace` is provided.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "backend", rename_all = "snake_case")]
pub enum WorkspaceMount {
    /// An overlay of `lowers` (topmost first) with a private `upper`.
    Overlay {
        /// Lower layer directories, topmost first.
        lowers: Vec<PathBuf>,
        /// The private upper directory.
        upper: PathBuf,
        /// Overlayfs work directory (same filesystem as `upper`, empty).
        work: PathBuf,
    },
    /// A plain directory bind-mounted read-write (the copy backend).
    Bind {
        /// The directory.
        dir: PathBuf,
    },
}

/// The system view a sandbox sees besides `/workspace` and `/tmp`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "view", rename_all = "snake_case")]
pub enum SystemView {
    /// Read-only binds of the host's `/usr`, `/bin`, `/sbin`, `/lib*` and a
    /// short list of `/etc` files; generated `passwd`, `group`, `hosts`.
    Host,
    /// Every top-level entry of this directory, read-only (except `proc`,
    /// `dev`, `tmp`, `workspace`, `sys`, which the sandbox provides itself);
    /// `/etc` likewise, with generated `hosts`, `hostname`, `resolv.conf`
    /// and `nsswitch.conf`, and `passwd` and `group` generated only where
    /// the directory has none of its own.
    Rootfs {
        /// The root filesystem directory.
        dir: PathBuf,
    },
    /// An image's root filesystem: its layers (topmost first) as a
    /// read-only overlay at `at` (one layer: that directory itself), then
    /// seen as [`SystemView::Rootfs`].
    Image {
        /// The image's layer directories, topmost first.
        lowers: Vec<PathBuf>,
        /// Where the helper mounts the overlay (in its private mount
        /// namespace); filled in when a helper is prepared.
        at: PathBuf,
    },
}

/// Per-action resource limits, applied to the action's process tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxLimits {
    /// `RLIMIT_NPROC`: processes of the sandbox's user (counted per user namespace).
    pub nproc: u64,
    /// `RLIMIT_FSIZE` in bytes: largest file an action may write.
    pub fsize: u64,
    /// `RLIMIT_NOFILE`.
    pub nofile: u64,
    /// `RLIMIT_CPU` in seconds.
    pub cpu_seconds: u64,
    /// Largest size, in bytes, of the private upper layer; checked while an
    /// action runs and after it ends.
    pub upper_bytes: u64,
    /// Bytes kept of each of stdout and stderr; the rest is dropped and a
    /// truncation mark appended.
    pub output_bytes: u64,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            nproc: 512,
            fsize: 1 << 30,
            nofile: 1024,
            cpu_seconds: 600,
            upper_bytes: 4 << 30,
            output_bytes: 1 << 20,
        }
    }
}

/// The kernel confinements every action installs on top of its namespaces,
/// capabilities and limits (both on by default). Turning one off is for
/// measuring and for the escape tests' positive controls: it is an option of
/// the host's [`crate::RuntimeOptions`], never of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confinement {
    /// The seccomp-bpf filter (the calls it refuses: the README's table).
    pub syscall_filter: bool,
    /// Landlock's write rules, where the kernel has Landlock.
    pub landlock: bool,
}

impl Default for Confinement {
    fn default() -> Self {
        Self {
            syscall_filter: true,
            landlock: true,
        }
    }
}

/// Everything the helper needs to build the sandbox.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setup {
    /// The store's root directory; every other path below it is reached
    /// through a descriptor the helper opens before it drops its host ids.
    pub store_root: PathBuf,
    /// A directory (on the host) the helper mounts the sandbox root on; only
    /// visible inside the helper's private mount namespace.
    pub root_dir: PathBuf,
    /// The read-only system view.
    pub system: SystemView,
    /// The hostname inside.
    pub hostname: String,
    /// Resource limits.
    pub limits: SandboxLimits,
    /// The kernel confinements of every action.
    #[serde(default)]
    pub confinement: Confinement,
}

/// A request from the runtime.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// Sent first: build the namespaces (user, mount, net, uts, ipc) and reply
    /// [`Response::Unshared`]; the runtime then writes the id maps.
    Unshare,
    /// Sent after the id maps are written: become root inside and build the
    /// system view described by `Setup` (the workspace comes later, with
    /// [`Request::MountWorkspace`], so helpers can be prepared in advance).
    Setup(Box<Setup>),
    /// Run one action.
    Exec(Box<ExecRequest>),
    /// Unmount the workspace (before its upper directory is sealed).
    UnmountWorkspace,
    /// Mount the workspace (when a prepared helper is claimed, and after
    /// sealing: the new lower chain and a fresh upper).
    MountWorkspace(WorkspaceMount),
    /// A host-side file operation on `/workspace`, performed as the
    /// sandbox's root through a capability handle rooted at the workspace.
    File(FileOp),
    /// Forward `127.0.0.1:port` inside the sandbox to the egress proxy's
    /// Unix socket `socket` (outside); see `sandbox::egress`.
    Egress {
        /// The proxy's socket (below the store root).
        socket: PathBuf,
        /// The port inside.
        port: u16,
    },
    /// Exit cleanly.
    Shutdown,
}

/// A file operation of the host-side file API. Paths are relative to
/// `/workspace`; they are resolved beneath it (no absolute symlinks, no `..`
/// escapes), by a child of the helper that has also `chroot`ed into the
/// sandbox root, so a symlink planted by the agent never reaches a host path.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum FileOp {
    /// Read a whole file.
    Read {
        /// Relative path.
        path: String,
    },
    /// Create or replace a file (parents are created).
    Write {
        /// Relative path.
        path: String,
        /// Content.
        #[serde(with = "bytes_b64")]
        data: Vec<u8>,
        /// Permission bits.
        mode: u32,
    },
    /// Delete a file or symlink (not a directory).
    Delete {
        /// Relative path.
        path: String,
    },
    /// List a directory.
    List {
        /// Relative path (`""` or `"."` for the workspace root).
        path: String,
    },
}

/// One entry of a directory listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListEntry {
    /// File name.
    pub name: String,
    /// `file`, `dir`, `symlink` or `other`.
    pub kind: String,
    /// Size in bytes (files).
    pub size: u64,
}

/// The outcome of a [`FileOp`].
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum FileResult {
    /// File content.
    Data {
        /// The bytes.
        #[serde(with = "bytes_b64")]
        data: Vec<u8>,
    },
    /// Directory entries, sorted by name.
    Entries {
        /// The entries.
        entries: Vec<ListEntry>,
    },
    /// Done (write, delete).
    Done,
    /// The operation failed; the message names the path and the reason.
    Failed {
        /// What went wrong.
        message: String,
    },
}

/// One action to run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExecRequest {
    /// Shell text, run by `/bin/bash -c` in the session.
    pub command: String,
    /// The session state to start from.
    pub session: SessionState,
    /// The full environment to start from (fixed environment with the session applied).
    pub env: Vec<(String, String)>,
    /// Wall-clock limit in milliseconds.
    pub timeout_ms: u64,
    /// Resource limits.
    pub limits: SandboxLimits,
    /// Names of fixed-environment variables, so the helper can report unsets.
    pub fixed_env: Vec<(String, String)>,
    /// Directories bound read-only into the sandbox for this action only.
    #[serde(default)]
    pub mounts: Vec<MountSpec>,
    /// A second action started beside this one (see [`PeerRequest`]).
    #[serde(default)]
    pub peer: Option<PeerRequest>,
    /// Send the main action's stdout and stderr as [`Response::Output`]
    /// frames while it runs (only the bytes kept under the output cap),
    /// before the final [`Response::Exec`].
    #[serde(default)]
    pub stream: bool,
    /// The root the action sees (see [`ActionRoot`]).
    #[serde(default)]
    pub root: ActionRoot,
    /// An absolute path of the system view where the workspace is bound
    /// too (the image's `WorkingDir`); the directory must exist there.
    #[serde(default)]
    pub workdir: Option<String>,
    /// The ids the action (and its peer) run as, in a user namespace of
    /// their own where the sandbox's root is mapped to them (the image's
    /// `User`, see [`crate::image::user`]); `None`: the sandbox's root.
    #[serde(default)]
    pub user: Option<crate::image::user::ImageUser>,
}

/// The root directory an action sees.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionRoot {
    /// The sandbox root: the system view read-only, the workspace at
    /// `/workspace` (every ordinary action).
    #[default]
    System,
    /// The workspace itself is the root: a root filesystem being built (an
    /// image build step). The sandbox's fresh `/proc`, `/dev` and `/tmp` are
    /// bound onto the workspace's own mount points (created when missing);
    /// everything else the action sees, and every write it makes, is the
    /// workspace's, so sealing the workspace seals the step.
    Workspace,
}

/// The descriptor number at which a paired action and its peer find their
/// end of the channel between them (a connected `AF_UNIX` stream socket).
pub const CHANNEL_FD: i32 = 3;

/// A *peer* of an action: a second process tree started beside it in the
/// same sandbox, connected to it by a socket at [`CHANNEL_FD`] in both. The
/// two trees have separate pid and mount namespaces (neither can see,
/// signal or trace the other), share `/workspace` and one fresh `/tmp`, and
/// the per-action read-only mounts (`/verifier`) exist only in the main
/// action's mount namespace. The peer is stopped when the main action ends.
/// This is the verifier's process boundary: the trusted check runner is the
/// main action, the code under test runs in the peer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerRequest {
    /// Shell text, run by `/bin/bash -c` with `/workspace` as its cwd.
    pub command: String,
    /// The full environment of the peer (the fixed environment plus extras;
    /// nothing of the session).
    pub env: Vec<(String, String)>,
}

/// How a peer ended (see [`PeerRequest`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerResult {
    /// Captured stdout (capped like an action's).
    #[serde(with = "bytes_b64")]
    pub stdout: Vec<u8>,
    /// Captured stderr (capped like an action's).
    #[serde(with = "bytes_b64")]
    pub stderr: Vec<u8>,
    /// How the peer ended.
    pub exit: ExitStatus,
    /// Whether the peer was still running when the main action ended (and
    /// was stopped then).
    pub stopped: bool,
}

/// Empty directories at the top of every sandbox root where per-action
/// read-only mounts ([`MountSpec`]) may go. The root itself is read-only, so
/// they exist from the start (and stay empty for the agent).
pub const MOUNT_POINTS: &[&str] = &["verifier"];

/// A host directory (below the store) bound read-only at a top-level path of
/// the sandbox for one action, then unmounted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountSpec {
    /// The directory on the host (a layer directory of the store).
    pub source: PathBuf,
    /// A top-level name inside the sandbox, e.g. `verifier` for `/verifier`.
    pub target: String,
}

/// The result of an action.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExecResult {
    /// Captured stdout (capped, with a truncation mark when capped).
    #[serde(with = "bytes_b64")]
    pub stdout: Vec<u8>,
    /// Captured stderr (capped, with a truncation mark when capped).
    #[serde(with = "bytes_b64")]
    pub stderr: Vec<u8>,
    /// How the action ended.
    pub exit: ExitStatus,
    /// Wall-clock duration in microseconds.
    pub duration_us: u64,
    /// The session state after the action, when the shell reported it (it
    /// does not when the command replaced the shell with `exec` or was killed).
    pub session: Option<SessionState>,
    /// Command lines of processes still running when the action's shell
    /// exited; they were killed.
    pub killed_background: Vec<String>,
    /// How the peer ended, when the action had one.
    #[serde(default)]
    pub peer: Option<PeerResult>,
}

/// A reply from the helper.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Response {
    /// Namespaces created; write the id maps for this process now.
    Unshared,
    /// The request succeeded with nothing to report.
    Ok,
    /// An action finished.
    Exec(Box<ExecResult>),
    /// A chunk of a running action's output (only for an [`ExecRequest`]
    /// with `stream` set; any number precede its [`Response::Exec`]).
    Output {
        /// Which stream it came from.
        stream: OutputStream,
        /// The bytes, as read (and kept under the cap).
        #[serde(with = "bytes_b64")]
        data: Vec<u8>,
    },
    /// A file operation finished (successfully or not).
    File(FileResult),
    /// The request failed inside the helper.
    Error {
        /// What failed: the operation, the path and the errno.
        error: super::helper::HelperError,
    },
}

/// Write one frame.
pub fn write_frame<W: Write, T: Serialize>(w: &mut W, msg: &T) -> io::Result<()> {
    let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
    let len = u32::try_from(body.len()).map_err(|_| io::Error::other("frame too large"))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(&body)?;
    w.flush()
}

/// Read one frame; `Ok(None)` at a clean end of file. A frame over
/// [`MAX_FRAME`] or one that does not decode is
/// [`io::ErrorKind::InvalidData`]; a stream cut inside a frame is
/// [`io::ErrorKind::UnexpectedEof`].
pub fn read_frame<R: Read, T: for<'de> Deserialize<'de>>(r: &mut R) -> io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes exceeds the {MAX_FRAME}-byte limit"),
        ));
    }
    // Grown as the bytes arrive, not allocated at the declared length: a
    // frame header alone does not cost 64 MiB.
    let mut body = Vec::with_capacity(len.min(64 << 10));
    r.take(len as u64).read_to_end(&mut body)?;
    if body.len() < len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "the stream ended {} bytes into a {len}-byte frame",
                body.len()
            ),
        ));
    }
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_and_response_round_trips() {
        let ws = WorkspaceMount::Overlay {
            lowers: vec!["/a".into()],
            upper: "/u".into(),
            work: "/w".into(),
        };
        let requests = [
            Request::MountWorkspace(ws),
            Request::File(FileOp::Read { path: "x".into() }),
            Request::UnmountWorkspace,
        ];
        for req in requests {
            let mut buf = Vec::new();
            write_frame(&mut buf, &req).unwrap();
            let back: Request = read_frame(&mut &buf[..]).unwrap().unwrap();
            assert_eq!(format!("{back:?}"), format!("{req:?}"));
        }
        let responses = [
            Response::File(FileResult::Entries { entries: vec![] }),
            Response::Output {
                stream: OutputStream::Stderr,
                data: b"two\n".to_vec(),
            },
        ];
        for resp in responses {
            let mut buf = Vec::new();
            write_frame(&mut buf, &resp).unwrap();
            let back: Response = read_frame(&mut &buf[..]).unwrap().unwrap();
            assert_eq!(format!("{back:?}"), format!("{resp:?}"));
        }
    }

    #[test]
    fn an_exec_request_without_stream_does_not_stream() {
        let req = ExecRequest {
            command: "true".into(),
            session: SessionState::default(),
            env: Vec::new(),
            timeout_ms: 1,
            limits: SandboxLimits::default(),
            fixed_env: Vec::new(),
            mounts: Vec::new(),
            peer: None,
            stream: true,
            root: ActionRoot::System,
            workdir: None,
            user: None,
        };
        let mut json = serde_json::to_value(&req).unwrap();
        assert_eq!(json["stream"], serde_json::Value::Bool(true));
        // A request from before the field existed decodes with it off.
        json.as_object_mut().unwrap().remove("stream");
        let old: ExecRequest = serde_json::from_value(json).unwrap();
        assert!(!old.stream);
    }

    #[test]
    fn frames_round_trip_and_reject_oversized() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &Request::UnmountWorkspace).unwrap();
        write_frame(&mut buf, &Request::Shutdown).unwrap();
        let mut r = &buf[..];
        assert!(matches!(
            read_frame::<_, Request>(&mut r).unwrap(),
            Some(Request::UnmountWorkspace)
        ));
        assert!(matches!(
            read_frame::<_, Request>(&mut r).unwrap(),
            Some(Request::Shutdown)
        ));
        assert!(read_frame::<_, Request>(&mut r).unwrap().is_none());

        let mut big = Vec::new();
        big.extend_from_slice(&u32::MAX.to_le_bytes());
        let err = read_frame::<_, Request>(&mut &big[..]).unwrap_err();
        assert!(err.to_string().contains("exceeds"), "{err}");

        // A frame cut short is an EOF naming how far it got (the reader
        // grows its buffer as bytes arrive, so the claim costs nothing).
        let mut cut = ((MAX_FRAME) as u32).to_le_bytes().to_vec();
        cut.extend_from_slice(b"{\"ty");
        let err = read_frame::<_, Request>(&mut &cut[..]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert!(err.to_string().contains("4 bytes into"), "{err}");
    }
}
