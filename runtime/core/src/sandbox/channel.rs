//! The runtime's side of the conversation with a sandbox helper, as a trait:
//! send one request frame, receive the reply.
//!
//! [`Sandbox`](super::Sandbox) holds a `Box<dyn HelperChannel>`. In
//! production it is a [`HelperProcess`](super::process::HelperProcess); in
//! unit tests it is a scripted helper that answers from a list of raw reply
//! frames, so what a `Sandbox` makes of a helper that dies, or answers
//! garbage, is tested without spawning anything.

use std::io::{self, Read, Write};
use std::path::PathBuf;

use super::SandboxError;
use super::protocol::{Request, Response, read_frame, write_frame};
use crate::state::OutputStream;

/// Where the chunks of a streamed action's output go.
pub(crate) type OutputSink<'a> = &'a mut dyn FnMut(OutputStream, &[u8]);

/// A helper the runtime can talk to.
pub(crate) trait HelperChannel: Send + std::fmt::Debug {
    /// Send one request and wait for its reply. A reply of
    /// [`Response::Error`] is [`SandboxError::Helper`].
    fn request(&mut self, req: &Request) -> Result<Response, SandboxError>;

    /// Send one request whose reply may be preceded by
    /// [`Response::Output`] frames (an exec with `stream` set); each goes to
    /// `on_output` as it arrives, and the final reply is returned.
    fn request_streaming(
        &mut self,
        req: &Request,
        on_output: OutputSink<'_>,
    ) -> Result<Response, SandboxError>;

    /// Add what the helper logged to a helper-reported error.
    fn with_log(&self, e: SandboxError) -> SandboxError {
        e
    }

    /// The helper's pid.
    fn pid(&self) -> u32;

    /// Cgroup directories the helper (and so every action) was placed in.
    fn cgroups(&self) -> &[PathBuf] {
        &[]
    }

    /// Stop the helper (and with it every process and mount of the sandbox).
    fn kill(&mut self);

    /// Turn a reply the request does not expect into an error.
    fn unexpected(&self, resp: Response) -> SandboxError {
        SandboxError::Protocol {
            what: format!("unexpected response from helper: {resp:?}"),
        }
    }
}

/// How one exchange failed.
#[derive(Debug)]
pub(crate) enum ExchangeError {
    /// The helper is gone: the pipe broke or its output ended (mid-frame
    /// too); the text says what the runtime was doing.
    Gone(String),
    /// The helper answered, but not with a valid reply, or with an error.
    Failed(SandboxError),
}

/// Write `req` to `input`, read one reply from `output`. With `on_output`,
/// [`Response::Output`] frames before the reply go to it; without, such a
/// frame is a protocol error.
pub(crate) fn exchange<W: Write, R: Read>(
    input: &mut W,
    output: &mut R,
    req: &Request,
    mut on_output: Option<OutputSink<'_>>,
) -> Result<Response, ExchangeError> {
    if let Err(e) = write_frame(input, req) {
        return Err(ExchangeError::Gone(format!("write request: {e}")));
    }
    loop {
        match read_frame::<_, Response>(output) {
            Ok(Some(Response::Output { stream, data })) => match on_output.as_mut() {
                Some(sink) => sink(stream, &data),
                None => {
                    return Err(ExchangeError::Failed(SandboxError::Protocol {
                        what: "an output frame answered a request that did not stream".to_owned(),
                    }));
                }
            },
            other => return reply(other),
        }
    }
}

/// What one read reply frame means.
fn reply(read: io::Result<Option<Response>>) -> Result<Response, ExchangeError> {
    match read {
        Ok(Some(Response::Error { error })) => Err(ExchangeError::Failed(SandboxError::Helper {
            error,
            log: String::new(),
        })),
        Ok(Some(resp)) => Ok(resp),
        Ok(None) => Err(ExchangeError::Gone("it closed its output".to_owned())),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            Err(ExchangeError::Failed(SandboxError::Protocol {
                what: format!("malformed reply: {e}"),
            }))
        }
        Err(e) => Err(ExchangeError::Gone(format!("read reply: {e}"))),
    }
}

/// An in-process helper that answers from a script of raw reply bytes (and
/// records the requests it was sent). When the script runs out mid-frame or
/// at a frame boundary, the helper has "died".
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct ScriptedHelper {
    replies: io::Cursor<Vec<u8>>,
    /// The requests received, in order (shared, so a test keeps a handle).
    pub requests: std::sync::Arc<std::sync::Mutex<Vec<Request>>>,
}

#[cfg(test)]
impl ScriptedHelper {
    /// A helper that answers with these raw bytes.
    pub fn new(replies: Vec<u8>) -> Self {
        Self {
            replies: io::Cursor::new(replies),
            requests: Default::default(),
        }
    }

    /// One well-formed frame holding `resp`.
    pub fn frame(resp: &Response) -> Vec<u8> {
        let mut out = Vec::new();
        write_frame(&mut out, resp).expect("encode a response");
        out
    }
}

#[cfg(test)]
impl HelperChannel for ScriptedHelper {
    fn request(&mut self, req: &Request) -> Result<Response, SandboxError> {
        self.scripted(req, None)
    }

    fn request_streaming(
        &mut self,
        req: &Request,
        on_output: OutputSink<'_>,
    ) -> Result<Response, SandboxError> {
        self.scripted(req, Some(on_output))
    }

    fn pid(&self) -> u32 {
        0
    }

    fn kill(&mut self) {}
}

#[cfg(test)]
impl ScriptedHelper {
    fn scripted(
        &mut self,
        req: &Request,
        on_output: Option<OutputSink<'_>>,
    ) -> Result<Response, SandboxError> {
        let mut sent = Vec::new();
        let result = exchange(&mut sent, &mut self.replies, req, on_output);
        if let (Ok(Some(decoded)), Ok(mut requests)) = (
            read_frame::<_, Request>(&mut &sent[..]),
            self.requests.lock(),
        ) {
            requests.push(decoded);
        }
        result.map_err(|e| match e {
            ExchangeError::Gone(what) => SandboxError::HelperDied {
                what,
                status: None,
                log: String::new(),
            },
            ExchangeError::Failed(e) => e,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::protocol::ExecResult;
    use super::super::workspace::Private;
    use super::super::{ExecOptions, Sandbox, SandboxError};
    use super::*;
    use crate::store::object::{ExitStatus, SessionState};

    /// A sandbox over an empty overlay upper whose helper is `helper`.
    fn sandbox(home: &std::path::Path, helper: ScriptedHelper) -> Sandbox {
        let runtime = crate::Runtime::open_at(home.join("home")).unwrap();
        let run_dir = home.join("run");
        let upper = run_dir.join("upper-0");
        let work = run_dir.join("work-0");
        std::fs::create_dir_all(&upper).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        Sandbox {
            runtime,
            helper: Box::new(helper),
            run_dir,
            private: Private::Overlay { upper, work },
            generation: 0,
            base: None,
            layers: Vec::new(),
            session: SessionState {
                cwd: "/workspace".to_owned(),
                ..SessionState::default()
            },
            pending: Vec::new(),
            killed_background: Vec::new(),
            image: None,
            user: None,
            workdir: None,
            egress: None,
            delta_cache: None,
            unwritten: Vec::new(),
        }
    }

    fn exec_result(stdout: &[u8], code: i32) -> Response {
        Response::Exec(Box::new(ExecResult {
            stdout: stdout.to_vec(),
            stderr: Vec::new(),
            exit: ExitStatus::Code { code },
            duration_us: 7,
            session: Some(SessionState {
                cwd: "/workspace/src".to_owned(),
                ..SessionState::default()
            }),
            killed_background: Vec::new(),
            peer: None,
        }))
    }

    #[test]
    fn a_scripted_exec_returns_its_observation() {
        let dir = tempfile::tempdir().unwrap();
        let reply = ScriptedHelper::frame(&exec_result(b"hello\n", 3));
        let helper = ScriptedHelper::new(reply);
        let requests = std::sync::Arc::clone(&helper.requests);
        let mut sb = sandbox(dir.path(), helper);
        let obs = sb
            .exec("echo hello; cd src; exit 3", &ExecOptions::default())
            .unwrap();
        assert_eq!(obs.stdout, b"hello\n");
        assert_eq!(obs.exit, ExitStatus::Code { code: 3 });
        assert_eq!(obs.duration_us, 7);
        // The session moved on, and the action is recorded.
        assert_eq!(sb.session().cwd, "/workspace/src");
        assert!(sb.has_pending());
        assert_eq!(obs.digest.exit, ExitStatus::Code { code: 3 });
        let sent = requests.lock().unwrap();
        assert!(
            matches!(sent.as_slice(), [Request::Exec(req)] if req.command == "echo hello; cd src; exit 3"),
            "{sent:?}"
        );
    }

    fn output(stream: OutputStream, data: &[u8]) -> Vec<u8> {
        ScriptedHelper::frame(&Response::Output {
            stream,
            data: data.to_vec(),
        })
    }

    #[test]
    fn streamed_output_frames_reach_the_sink_before_the_exec_reply() {
        let dir = tempfile::tempdir().unwrap();
        let mut reply = output(OutputStream::Stdout, b"hel");
        reply.extend(output(OutputStream::Stderr, b"oops"));
        reply.extend(output(OutputStream::Stdout, b"lo\n"));
        reply.extend(ScriptedHelper::frame(&exec_result(b"hello\n", 0)));
        let helper = ScriptedHelper::new(reply);
        let requests = std::sync::Arc::clone(&helper.requests);
        let mut sb = sandbox(dir.path(), helper);
        let mut seen = Vec::new();
        let obs = sb
            .exec_streaming("echo hello", &ExecOptions::default(), &mut |s, d| {
                seen.push((s, d.to_vec()));
            })
            .unwrap();
        assert_eq!(obs.stdout, b"hello\n");
        assert_eq!(
            seen,
            vec![
                (OutputStream::Stdout, b"hel".to_vec()),
                (OutputStream::Stderr, b"oops".to_vec()),
                (OutputStream::Stdout, b"lo\n".to_vec()),
            ]
        );
        // The request asked for streaming.
        let sent = requests.lock().unwrap();
        assert!(matches!(&sent[0], Request::Exec(r) if r.stream), "{sent:?}");
    }

    #[test]
    fn an_output_frame_to_a_plain_exec_is_a_protocol_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut reply = output(OutputStream::Stdout, b"x");
        reply.extend(ScriptedHelper::frame(&exec_result(b"x", 0)));
        let mut sb = sandbox(dir.path(), ScriptedHelper::new(reply));
        let err = sb.exec("echo x", &ExecOptions::default()).unwrap_err();
        assert!(matches!(err, SandboxError::Protocol { .. }), "{err}");
        // Positive control: the same frames with streaming asked for succeed.
        let mut reply = output(OutputStream::Stdout, b"x");
        reply.extend(ScriptedHelper::frame(&exec_result(b"x", 0)));
        let mut sb = sandbox(dir.path(), ScriptedHelper::new(reply));
        sb.exec_streaming("echo x", &ExecOptions::default(), &mut |_, _| {})
            .unwrap();
    }

    #[test]
    fn a_helper_that_dies_after_streaming_output_is_helper_died() {
        let dir = tempfile::tempdir().unwrap();
        let reply = output(OutputStream::Stdout, b"partial");
        let mut sb = sandbox(dir.path(), ScriptedHelper::new(reply));
        let mut seen = 0;
        let err = sb
            .exec_streaming("echo partial", &ExecOptions::default(), &mut |_, _| {
                seen += 1;
            })
            .unwrap_err();
        assert_eq!(seen, 1);
        assert!(matches!(err, SandboxError::HelperDied { .. }), "{err}");
        assert!(!sb.has_pending());
    }

    #[test]
    fn a_helper_that_dies_mid_exec_is_helper_died() {
        let dir = tempfile::tempdir().unwrap();
        // The reply is cut off inside its frame: the helper died writing it.
        let mut reply = ScriptedHelper::frame(&exec_result(b"hello\n", 0));
        reply.truncate(reply.len() / 2);
        let mut sb = sandbox(dir.path(), ScriptedHelper::new(reply));
        let err = sb.exec("echo hello", &ExecOptions::default()).unwrap_err();
        assert!(matches!(err, SandboxError::HelperDied { .. }), "{err}");
        // Nothing is recorded for an action whose outcome is unknown.
        assert!(!sb.has_pending());
        // And one that says nothing at all has died too.
        let mut silent = sandbox(dir.path(), ScriptedHelper::new(Vec::new()));
        let err = silent.exec("true", &ExecOptions::default()).unwrap_err();
        assert!(matches!(err, SandboxError::HelperDied { .. }), "{err}");
    }

    #[test]
    fn a_malformed_reply_is_a_protocol_error() {
        let dir = tempfile::tempdir().unwrap();
        let body = b"{\"type\":\"exec\",\"stdout\":";
        let mut reply = u32::try_from(body.len()).unwrap().to_le_bytes().to_vec();
        reply.extend_from_slice(body);
        let mut sb = sandbox(dir.path(), ScriptedHelper::new(reply));
        let err = sb.exec("true", &ExecOptions::default()).unwrap_err();
        assert!(matches!(err, SandboxError::Protocol { .. }), "{err}");
        // A well-formed reply of the wrong kind is a protocol error as well.
        let reply = ScriptedHelper::frame(&Response::Unshared);
        let mut sb = sandbox(dir.path(), ScriptedHelper::new(reply));
        let err = sb.exec("true", &ExecOptions::default()).unwrap_err();
        assert!(matches!(err, SandboxError::Protocol { .. }), "{err}");
        assert!(!sb.has_pending());
    }
}
