//! Waiting for a started action: capturing its (capped) output streams,
//! enforcing the wall-clock and disk limits, reaping its init, and turning
//! what the init reported into an [`ExecResult`].

use std::fs;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::error::{HelperError, Op, Result};
use super::session::{WRAPPER, parse_session, parse_status};
use crate::sandbox::protocol::{ExecRequest, ExecResult, PeerResult};
use crate::state::OutputStream;
use crate::store::object::ExitStatus;

/// One started process tree: its init (G), the pidfd that says when G
/// ended, and its four pipes (stdout, stderr, session state, G's report).
pub(super) struct RunningAction {
    pub pid: Pid,
    pub pidfd: Option<OwnedFd>,
    pub streams: [Stream; 4],
    pub status: Option<WaitStatus>,
    /// The write end of G's lifeline, held open until the tree is finished.
    pub _lifeline: OwnedFd,
}

impl RunningAction {
    fn done(&self) -> bool {
        self.status.is_some() && self.streams.iter().all(|s| s.eof)
    }

    /// Collect G's status if it has ended.
    fn reap(&mut self) -> Result<()> {
        if self.status.is_none() {
            match waitpid(self.pid, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => {}
                Ok(status) => self.status = Some(status),
                Err(e) => return Err(HelperError::sys_bare(Op::Wait, e)),
            }
        }
        Ok(())
    }

    /// Kill G, which ends the whole pid namespace (see module docs).
    pub(super) fn kill(&self) {
        if self.status.is_none() {
            let _ = nix::sys::signal::kill(self.pid, Signal::SIGKILL);
        }
    }

    /// The shell's end as G reported it, once G has (G writes its report
    /// before it exits, so a tree can have reported and not yet be reaped).
    fn reported(&self) -> Option<ExitStatus> {
        let report = &self.streams[3].data;
        let first = report.split(|&b| b == b'\n').next()?;
        parse_status(&String::from_utf8_lossy(first))
    }

    /// How the tree ended: `killed` if the helper stopped it, else what G
    /// reported (the shell's status, then leftover processes).
    fn finish(self, killed: Option<ExitStatus>) -> Result<Finished> {
        let shell_status = self.reported();
        let [stdout, stderr, state, report] = self.streams;
        let report = String::from_utf8_lossy(&report.data).into_owned();
        let killed_background: Vec<String> = report.lines().skip(1).map(str::to_owned).collect();
        let exit = match (killed, shell_status) {
            (Some(k), _) => k,
            (None, Some(s)) => s,
            (None, None) => match self.status {
                Some(WaitStatus::Signaled(_, sig, _)) => ExitStatus::Signal { signal: sig as i32 },
                Some(WaitStatus::Exited(_, code)) => {
                    return Err(HelperError::ActionInit {
                        detail: format!("exited with {code}"),
                    });
                }
                other => {
                    return Err(HelperError::ActionInit {
                        detail: format!("ended unexpectedly ({other:?})"),
                    });
                }
            },
        };
        Ok(Finished {
            stdout: stdout.finish(),
            stderr: stderr.finish(),
            state: state.data,
            exit,
            killed_background,
        })
    }
}

/// What a finished process tree left: its capped output, the session state
/// its shell reported, how it ended, and the processes that outlived it.
struct Finished {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    state: Vec<u8>,
    exit: ExitStatus,
    killed_background: Vec<String>,
}

/// One captured pipe.
pub(super) struct Stream {
    fd: OwnedFd,
    data: Vec<u8>,
    cap: u64,
    dropped: u64,
    eof: bool,
}

impl Stream {
    pub(super) fn new(fd: OwnedFd, cap: u64) -> Self {
        let _ = nix::fcntl::fcntl(
            &fd,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        );
        Self {
            fd,
            data: Vec::new(),
            cap,
            dropped: 0,
            eof: false,
        }
    }

    /// Read what the pipe holds, keeping what fits under the cap; `emit`
    /// gets each kept chunk as it is read.
    fn read_available(&mut self, emit: &mut dyn FnMut(&[u8])) -> Result<()> {
        let mut buf = [0u8; 65536];
        loop {
            match nix::unistd::read(&self.fd, &mut buf) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    let room = usize::try_from(self.cap.saturating_sub(self.data.len() as u64))
                        .unwrap_or(usize::MAX);
                    let keep = n.min(room);
                    if keep > 0 {
                        emit(&buf[..keep]);
                    }
                    self.data.extend_from_slice(&buf[..keep]);
                    self.dropped += (n - keep) as u64;
                }
                Err(nix::errno::Errno::EAGAIN) => return Ok(()),
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(HelperError::sys_bare(Op::Read, e)),
            }
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if self.dropped > 0 {
            self.data.extend_from_slice(
                format!(
                    "\n[arbor: output truncated, {} bytes dropped]\n",
                    self.dropped
                )
                .as_bytes(),
            );
        }
        self.data
    }
}

/// Wait up to `wait` for output on the open streams of the main process
/// tree and its peer, or for either's init to exit (its pidfd becomes
/// readable), and read what is there; `on_output` gets what is read of the
/// main tree's stdout and stderr (never the peer's, the session state or
/// the report).
fn poll_streams(
    main: &mut RunningAction,
    peer: Option<&mut RunningAction>,
    wait: Duration,
    on_output: &mut dyn FnMut(OutputStream, &[u8]),
) -> Result<()> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut trees: Vec<&mut RunningAction> = std::iter::once(main).chain(peer).collect();
    let mut slots: Vec<(usize, Option<usize>)> = Vec::new();
    let ready: Vec<bool> = {
        let mut fds: Vec<PollFd<'_>> = Vec::new();
        for (t, tree) in trees.iter().enumerate() {
            for (i, s) in tree.streams.iter().enumerate() {
                if !s.eof {
                    fds.push(PollFd::new(s.fd.as_fd(), PollFlags::POLLIN));
                    slots.push((t, Some(i)));
                }
            }
            if let (None, Some(pidfd)) = (tree.status, tree.pidfd.as_ref()) {
                fds.push(PollFd::new(pidfd.as_fd(), PollFlags::POLLIN));
                slots.push((t, None));
            }
        }
        if fds.is_empty() {
            std::thread::sleep(wait.min(Duration::from_millis(1)));
            return Ok(());
        }
        let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(HelperError::sys_bare(Op::Poll, e)),
        }
        fds.iter()
            .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
            .collect()
    };
    for (k, &(t, stream)) in slots.iter().enumerate() {
        if let (true, Some(i)) = (ready[k], stream) {
            // Tree 0 is the main action; its streams 0 and 1 are stdout and stderr.
            let kind = match (t, i) {
                (0, 0) => Some(OutputStream::Stdout),
                (0, 1) => Some(OutputStream::Stderr),
                _ => None,
            };
            match kind {
                Some(kind) => trees[t].streams[i].read_available(&mut |d| on_output(kind, d))?,
                None => trees[t].streams[i].read_available(&mut |_| {})?,
            }
        }
    }
    Ok(())
}

/// Wait for the main process tree (and its peer) to end, enforcing the
/// wall-clock limit and the upper layer's size limit on both; the peer is
/// stopped when the main action is over. `on_output` gets each chunk of the
/// main action's stdout and stderr as it is read (only what is kept under
/// the cap), in the order read.
pub(super) fn supervise(
    mut main: RunningAction,
    mut peer: Option<RunningAction>,
    req: &ExecRequest,
    policed: &Path,
    on_output: &mut dyn FnMut(OutputStream, &[u8]),
) -> Result<ExecResult> {
    let start = Instant::now();
    let deadline = start + Duration::from_millis(req.timeout_ms);
    let mut killed: Option<ExitStatus> = None;
    let mut peer_stopped = false;
    let mut next_size_check = start + Duration::from_millis(100);
    loop {
        let main_done = main.done();
        if main_done && peer.as_ref().is_none_or(RunningAction::done) {
            break;
        }
        if let (true, false, Some(p)) = (main_done, peer_stopped, &peer) {
            peer_stopped = p.status.is_none();
            p.kill();
        }
        let now = Instant::now();
        let wait = if killed.is_none() {
            deadline
                .saturating_duration_since(now)
                .min(Duration::from_millis(50))
        } else {
            Duration::from_millis(50)
        };
        poll_streams(&mut main, peer.as_mut(), wait, on_output)?;
        main.reap()?;
        if let Some(p) = peer.as_mut() {
            p.reap()?;
        }
        if main.status.is_none() && killed.is_none() {
            let now = Instant::now();
            if now >= deadline {
                killed = Some(ExitStatus::Timeout);
            } else if now >= next_size_check {
                next_size_check = now + Duration::from_millis(200);
                if crate::layer::dir_size(policed).unwrap_or(0) > req.limits.upper_bytes {
                    killed = Some(ExitStatus::DiskLimit);
                }
            }
            if killed.is_some() {
                main.kill();
                if let Some(p) = &peer {
                    p.kill();
                }
            }
        }
    }
    let duration_us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    if killed.is_none() && crate::layer::dir_size(policed).unwrap_or(0) > req.limits.upper_bytes {
        killed = Some(ExitStatus::DiskLimit);
    }
    let peer = match peer {
        Some(p) => {
            // The peer may have ended on its own (a crash) and reported it
            // just before the main action ended, but not yet been reaped
            // when the kill went out: what G reported then stands, and it
            // was not stopped.
            let peer_stopped = peer_stopped && p.reported().is_none();
            let stopped_by = peer_stopped.then_some(ExitStatus::Signal { signal: 9 });
            let f = p.finish(killed.or(stopped_by))?;
            Some(PeerResult {
                stdout: f.stdout,
                stderr: f.stderr,
                exit: f.exit,
                stopped: peer_stopped,
            })
        }
        None => None,
    };
    let f = main.finish(killed)?;
    let session = if matches!(f.exit, ExitStatus::Timeout | ExitStatus::DiskLimit) {
        None
    } else {
        parse_session(&f.state, &req.fixed_env)
    };
    Ok(ExecResult {
        stdout: f.stdout,
        stderr: f.stderr,
        exit: f.exit,
        duration_us,
        session,
        killed_background: f.killed_background,
        peer,
    })
}

/// Command lines of every process in this pid namespace except pid 1.
pub(super) fn list_processes() -> Vec<String> {
    // Reap what has already exited: zombies are not running processes.
    while let Ok(status) = waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
        if matches!(status, WaitStatus::StillAlive) {
            break;
        }
    }
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|&pid| pid != 1)
        .collect();
    pids.sort_unstable();
    pids.into_iter().filter_map(describe_process).collect()
}

/// The command line of a live process. A process caught between `fork` and
/// `exec` still shows the action's own `bash -c <wrapper>`, and one inside
/// `exec` shows nothing, for a moment: wait a little for it, then name it
/// by its `comm`.
fn describe_process(pid: i32) -> Option<String> {
    let wrapper_start = WRAPPER.lines().next().unwrap_or_default();
    for _ in 0..20 {
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let text: Vec<String> = cmdline
            .split(|&b| b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect();
        let forked_shell = text.len() == 3 && text[1] == "-c" && text[2].starts_with(wrapper_start);
        if !text.is_empty() && !forked_shell {
            return Some(text.join(" "));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(format!("[{}]", comm.trim_end()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_emits_exactly_the_bytes_it_keeps() {
        let (read, write) = nix::unistd::pipe().unwrap();
        let mut stream = Stream::new(read, 5);
        nix::unistd::write(&write, b"hel").unwrap();
        let mut chunks: Vec<Vec<u8>> = Vec::new();
        stream
            .read_available(&mut |d| chunks.push(d.to_vec()))
            .unwrap();
        nix::unistd::write(&write, b"lo world").unwrap();
        drop(write);
        stream
            .read_available(&mut |d| chunks.push(d.to_vec()))
            .unwrap();
        assert!(stream.eof);
        // Two chunks, as read, and nothing past the cap.
        assert_eq!(chunks, vec![b"hel".to_vec(), b"lo".to_vec()]);
        let kept = stream.finish();
        assert!(kept.starts_with(b"hello\n[arbor: output truncated, 6 bytes dropped]"));
    }
}
