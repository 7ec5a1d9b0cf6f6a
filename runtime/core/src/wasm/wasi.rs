//! The guest-visible WASI state, made deterministic: virtual clocks the
//! runtime advances, a seeded random generator whose position is part of a
//! snapshot, fixed arguments and environment, `/workspace` as the only
//! preopened directory, no network, and capped stdout/stderr pipes.
//!
//! A fresh WASI context is built for every step from [`WasiState`], so the
//! guest sees exactly the state a snapshot records. (Descriptors the guest
//! opened in one step and left open are therefore closed at the step's end:
//! a fork could not have them either.)

use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtxBuilder};

use super::{Result, WasmError};

/// The virtual wall clock at a session's start: 2000-01-01T00:00:00Z, the
/// native backend's `SOURCE_DATE_EPOCH`.
pub const EPOCH_NS: u64 = 946_684_800_000_000_000;
/// How far both clocks move on every read (1 µs), so timing loops end.
pub const TICK_PER_READ_NS: u64 = 1_000;
/// How far both clocks move at the start of every step (1 ms).
pub const TICK_PER_STEP_NS: u64 = 1_000_000;

/// Guest-visible WASI state, saved in every snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WasiState {
    /// `argv`.
    pub args: Vec<String>,
    /// The environment, sorted by name.
    pub env: Vec<(String, String)>,
    /// Guest paths of the preopened directories (`/workspace` or none).
    pub preopens: Vec<String>,
    /// The working directory the guest starts in (`PWD`).
    pub cwd: String,
    /// Virtual wall clock, nanoseconds since the Unix epoch.
    pub wall_ns: u64,
    /// Virtual monotonic clock, nanoseconds.
    pub monotonic_ns: u64,
    /// The random generator's seed (hex of 32 bytes).
    pub rng_seed: String,
    /// Bytes drawn from the generator so far.
    pub rng_position: u64,
}

impl WasiState {
    /// The state of a freshly booted guest.
    pub fn new(
        args: Vec<String>,
        env: Vec<(String, String)>,
        seed: [u8; 32],
        workspace: bool,
    ) -> Self {
        let mut env = env;
        env.sort();
        Self {
            args,
            env,
            preopens: if workspace {
                vec!["/workspace".to_owned()]
            } else {
                Vec::new()
            },
            cwd: if workspace { "/workspace" } else { "/" }.to_owned(),
            wall_ns: EPOCH_NS,
            monotonic_ns: 0,
            rng_seed: hex::encode(seed),
            rng_position: 0,
        }
    }

    fn seed(&self) -> Result<[u8; 32]> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(&self.rng_seed, &mut out)
            .map_err(|_| WasmError::BadSnapshot(format!("bad RNG seed {:?}", self.rng_seed)))?;
        Ok(out)
    }
}

/// The clocks and generator of one running step, shared with the WASI
/// context; read back into a [`WasiState`] when the step ends.
#[derive(Clone, Debug)]
pub struct LiveState(Arc<Mutex<Counters>>);

#[derive(Debug)]
struct Counters {
    wall_ns: u64,
    monotonic_ns: u64,
    seed: [u8; 32],
    rng_position: u64,
}

impl LiveState {
    fn lock(&self) -> std::sync::MutexGuard<'_, Counters> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Write the counters back into `state`.
    pub fn store_into(&self, state: &mut WasiState) {
        let c = self.lock();
        state.wall_ns = c.wall_ns;
        state.monotonic_ns = c.monotonic_ns;
        state.rng_position = c.rng_position;
    }
}

struct VirtualWall(LiveState);
struct VirtualMonotonic(LiveState);

impl HostWallClock for VirtualWall {
    fn resolution(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(TICK_PER_READ_NS)
    }
    fn now(&self) -> std::time::Duration {
        let mut c = self.0.lock();
        c.wall_ns += TICK_PER_READ_NS;
        c.monotonic_ns += TICK_PER_READ_NS;
        std::time::Duration::from_nanos(c.wall_ns)
    }
}

impl HostMonotonicClock for VirtualMonotonic {
    fn resolution(&self) -> u64 {
        TICK_PER_READ_NS
    }
    fn now(&self) -> u64 {
        let mut c = self.0.lock();
        c.wall_ns += TICK_PER_READ_NS;
        c.monotonic_ns += TICK_PER_READ_NS;
        c.monotonic_ns
    }
}

/// A deterministic generator: the blake3 extendable output keyed by the
/// seed, read from the recorded position.
struct SeededRng(LiveState);

impl rand_core::TryRng for SeededRng {
    type Error = std::convert::Infallible;
    fn try_next_u32(&mut self) -> std::result::Result<u32, Self::Error> {
        let mut b = [0u8; 4];
        self.try_fill_bytes(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    fn try_next_u64(&mut self) -> std::result::Result<u64, Self::Error> {
        let mut b = [0u8; 8];
        self.try_fill_bytes(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> std::result::Result<(), Self::Error> {
        let mut c = self.0.lock();
        let mut reader = blake3::Hasher::new_keyed(&c.seed).finalize_xof();
        reader.set_position(c.rng_position);
        reader.fill(dst);
        c.rng_position += dst.len() as u64;
        Ok(())
    }
}

/// A stdout/stderr pipe that keeps the first `cap` bytes and counts the
/// rest; the guest never sees an error for output past the cap.
#[derive(Clone, Debug)]
pub struct CappedPipe {
    inner: Arc<Mutex<(Vec<u8>, u64)>>,
    cap: usize,
}

impl CappedPipe {
    /// A pipe keeping at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new((Vec::new(), 0))),
            cap,
        }
    }

    fn push(&self, bytes: &[u8]) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let room = self.cap.saturating_sub(g.0.len());
        let keep = room.min(bytes.len());
        g.0.extend_from_slice(&bytes[..keep]);
        g.1 += (bytes.len() - keep) as u64;
    }

    /// The kept bytes and the number dropped.
    pub fn take(&self) -> (Vec<u8>, u64) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (std::mem::take(&mut g.0), std::mem::take(&mut g.1))
    }
}

impl IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for CappedPipe {
    fn write(&mut self, bytes: Bytes) -> std::result::Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }
    fn flush(&mut self) -> std::result::Result<(), StreamError> {
        Ok(())
    }
    fn check_write(&mut self) -> std::result::Result<usize, StreamError> {
        Ok(1 << 20)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedPipe {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CappedPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// One step's WASI context and the handles to read back what it did.
pub struct StepContext {
    /// The context to install in the store.
    pub ctx: wasmtime_wasi::p1::WasiP1Ctx,
    /// Clocks and generator.
    pub live: LiveState,
    /// Captured stdout.
    pub stdout: CappedPipe,
    /// Captured stderr.
    pub stderr: CappedPipe,
}

/// The read-back handles of a [`StepContext`] once its context is installed.
#[derive(Debug)]
pub struct StepHandles {
    /// Clocks and generator.
    pub live: LiveState,
    /// Captured stdout.
    pub stdout: CappedPipe,
    /// Captured stderr.
    pub stderr: CappedPipe,
}

impl std::fmt::Debug for StepContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepContext").finish_non_exhaustive()
    }
}

/// Build a step's context from `state` (clocks already advanced by the
/// caller), with `workspace` as `/workspace` when the state preopens it.
pub fn step_context(
    state: &WasiState,
    workspace: Option<&Path>,
    output_cap: usize,
) -> Result<StepContext> {
    let live = LiveState(Arc::new(Mutex::new(Counters {
        wall_ns: state.wall_ns,
        monotonic_ns: state.monotonic_ns,
        seed: state.seed()?,
        rng_position: state.rng_position,
    })));
    let stdout = CappedPipe::new(output_cap);
    let stderr = CappedPipe::new(output_cap);
    let mut b = WasiCtxBuilder::new();
    b.args(&state.args)
        .envs(&state.env)
        .stdin(wasmtime_wasi::p2::pipe::ClosedInputStream)
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .wall_clock(VirtualWall(live.clone()))
        .monotonic_clock(VirtualMonotonic(live.clone()))
        .secure_random(SeededRng(live.clone()))
        .insecure_random(SeededRng(live.clone()))
        .insecure_random_seed(0)
        .max_random_size(1 << 30)
        .allow_blocking_current_thread(true);
    for guest in &state.preopens {
        let host = workspace.ok_or_else(|| {
            WasmError::BadSnapshot(format!(
                "the snapshot preopens {guest} but the sandbox has no workspace"
            ))
        })?;
        b.preopened_dir(host, guest, wasmtime_wasi::FsPerms::ReadWrite)
            .map_err(|e| WasmError::Workspace(format!("cannot preopen {}: {e}", host.display())))?;
    }
    Ok(StepContext {
        ctx: b.build_p1(),
        live,
        stdout,
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::TryRng;

    #[test]
    fn seeded_rng_is_a_pure_function_of_seed_and_position() {
        let state = WasiState::new(vec![], vec![], [7; 32], false);
        let ctx = step_context(&state, None, 16).unwrap();
        let mut rng = SeededRng(ctx.live.clone());
        let mut a = [0u8; 40];
        rng.try_fill_bytes(&mut a).unwrap();
        let mut again = SeededRng(step_context(&state, None, 16).unwrap().live);
        let mut first = [0u8; 16];
        let mut rest = [0u8; 24];
        again.try_fill_bytes(&mut first).unwrap();
        again.try_fill_bytes(&mut rest).unwrap();
        assert_eq!(&a[..16], &first);
        assert_eq!(&a[16..], &rest);
        let mut s2 = state.clone();
        ctx.live.store_into(&mut s2);
        assert_eq!(s2.rng_position, 40);
    }

    #[test]
    fn capped_pipe_counts_what_it_drops() {
        let p = CappedPipe::new(4);
        p.push(b"abcdef");
        p.push(b"gh");
        assert_eq!(p.take(), (b"abcd".to_vec(), 4));
    }
}
