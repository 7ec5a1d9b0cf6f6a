//! The HTTP server's overhead: latency per verb over the Unix socket and
//! over TCP on loopback, against the same operation in-process, in one run.
//!
//! One process holds a runtime on a temporary store (driven by the bench
//! helper), the 100-file / 1 MB workspace imported into it, and
//! `arbor_server::router` served on a tokio runtime (multi-thread, 2
//! workers) on a Unix socket and on `127.0.0.1:<free port>`. The client is a
//! minimal blocking HTTP/1.1 client (one keep-alive connection per
//! transport, `TCP_NODELAY`); the clock runs from the first byte of the
//! request written to the last byte of the answer read.
//!
//! Verbs (each sample is one request, or one call of the native API):
//! - `exec`: `exec("true")` / `POST /v1/sandboxes/{id}/exec {"command": "true"}`;
//! - `fork8`: 8 × `Snapshot::open()` / `POST /v1/snapshots/{ref}/fork {"n": 8}`
//!   on the imported snapshot; the 8 sandboxes are closed (`DELETE`) after
//!   the clock stops, and the warm pool is refilled before it starts;
//! - `snapshot`: `Sandbox::snapshot()` / `POST /v1/sandboxes/{id}/snapshot`,
//!   each after an untimed exec that changes a file;
//! - `write_1mb` / `read_1mb`: `write_file` / `read_file` of 1 MB, or
//!   `PUT` / `GET /v1/sandboxes/{id}/files?path=blob.bin`.
//!
//! Each transport has its own sandbox on the same snapshot. Samples are
//! interleaved by round (in-process, Unix, TCP, in an order that rotates
//! every round) so the three share the machine's noise. Answers are checked
//! (status codes, exit codes, the bytes read back); timings are not.
//!
//! Writes `target/arbor-bench/serve.md`, `serve.json` and
//! `serve-latency.svg` (`serve-quick.*` and `serve-latency-quick.svg` in
//! quick mode, so a smoke run never overwrites a full report);
//! `ARBOR_BENCH_OUT` sets another directory.
//!
//! Quick mode (`cargo test --benches`, or `ARBOR_BENCH_QUICK=1`): 10 samples
//! per verb after one warm-up round (5 forks; 2 samples and no warm-up for
//! the 1 MB write and read, slow in an unoptimised build); no timing is
//! asserted.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail, ensure};
use arbor_benches::compare::{report, tools};
use arbor_benches::{BenchEnv, MB, Workloads, Xorshift64, quick_mode};
use arbor_runtime::{ExecOptions, Runtime, Sandbox, Snapshot};
use arbor_server::ServeConfig;
use arbor_server::state::AppState;
use serde_json::{Value, json};

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-bench-helper");

/// The file of the write and read verbs, relative to the workspace.
const BLOB: &str = "blob.bin";
/// Sandboxes per fork.
const FORK_N: usize = 8;
/// The ratio the issue aims for (fork and exec, HTTP / in-process p50).
const TARGET_RATIO: f64 = 1.3;

/// What is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verb {
    Exec,
    Fork8,
    Snapshot,
    Write,
    Read,
}

impl Verb {
    /// In the order they run (reads follow the writes they check).
    const ALL: [Self; 5] = [
        Self::Exec,
        Self::Fork8,
        Self::Snapshot,
        Self::Write,
        Self::Read,
    ];

    fn key(self) -> &'static str {
        match self {
            Self::Exec => "exec_true",
            Self::Fork8 => "fork8",
            Self::Snapshot => "snapshot",
            Self::Write => "write_1mb",
            Self::Read => "read_1mb",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Exec => "exec `true`",
            Self::Fork8 => "fork 8",
            Self::Snapshot => "snapshot",
            Self::Write => "write 1 MB",
            Self::Read => "read 1 MB",
        }
    }

    /// The route as the server's metrics name it.
    fn route(self) -> &'static str {
        match self {
            Self::Exec => "POST /v1/sandboxes/{id}/exec",
            Self::Fork8 => "POST /v1/snapshots/{ref}/fork",
            Self::Snapshot => "POST /v1/sandboxes/{id}/snapshot",
            Self::Write => "PUT /v1/sandboxes/{id}/files",
            Self::Read => "GET /v1/sandboxes/{id}/files",
        }
    }

    /// Measured rounds. Quick mode runs unoptimised under `cargo test`,
    /// where the helper protocol's JSON encoding of file contents makes a
    /// 1 MB write or read take ~0.5-1 s, and refilling the warm pool before
    /// each fork takes ~0.1 s: fewer rounds of those keep the smoke run
    /// under 20 s on a busy 2-core machine.
    fn samples(self, quick: bool) -> usize {
        match (quick, self) {
            (true, Self::Write | Self::Read) => 2,
            (true, Self::Fork8) => 5,
            (true, _) => 10,
            (false, Self::Fork8 | Self::Snapshot) => 50,
            (false, _) => 200,
        }
    }

    /// Untimed rounds before the measured ones.
    fn warm_up(self, quick: bool) -> usize {
        match (quick, self) {
            (true, Self::Write | Self::Read) => 0,
            (true, _) => 1,
            (false, _) => 3,
        }
    }
}

/// How an operation reaches the runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    InProcess,
    Unix,
    Tcp,
}

impl Via {
    const ALL: [Self; 3] = [Self::InProcess, Self::Unix, Self::Tcp];

    fn key(self) -> &'static str {
        match self {
            Self::InProcess => "in_process",
            Self::Unix => "unix",
            Self::Tcp => "tcp",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::InProcess => "in-process",
            Self::Unix => "Unix socket",
            Self::Tcp => "TCP loopback",
        }
    }

    fn color(self) -> &'static str {
        match self {
            Self::InProcess => "#7f7f7f",
            Self::Unix => "#1b7f3b",
            Self::Tcp => "#1f77b4",
        }
    }

    /// The three in the order of round `round`.
    fn order(round: usize) -> [Self; 3] {
        let mut all = Self::ALL;
        all.rotate_left(round % 3);
        all
    }
}

// ---------------------------------------------------------------------------
// A minimal blocking HTTP/1.1 client (keep-alive, Content-Length or chunked
// answers).

#[derive(Debug)]
enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn try_clone(&self) -> std::io::Result<Self> {
        Ok(match self {
            Self::Unix(s) => Self::Unix(s.try_clone()?),
            Self::Tcp(s) => Self::Tcp(s.try_clone()?),
        })
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Unix(s) => s.read(buf),
            Self::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Self::Unix(s) => s.write(buf),
            Self::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Self::Unix(s) => s.flush(),
            Self::Tcp(s) => s.flush(),
        }
    }
}

/// An answer.
#[derive(Debug)]
struct Reply {
    status: u16,
    body: Vec<u8>,
}

impl Reply {
    /// This answer if its status is `want`, else an error with its body.
    fn expect(self, want: u16, what: &str) -> Result<Self> {
        ensure!(
            self.status == want,
            "{what}: HTTP {} (expected {want}): {}",
            self.status,
            String::from_utf8_lossy(&self.body[..self.body.len().min(400)])
        );
        Ok(self)
    }

    fn json(&self) -> Result<Value> {
        serde_json::from_slice(&self.body).context("parse the JSON answer")
    }
}

/// One keep-alive connection.
#[derive(Debug)]
struct Client {
    reader: BufReader<Stream>,
    writer: Stream,
    line: String,
}

impl Client {
    fn connect(via: Via, socket: &Path, addr: SocketAddr) -> Result<Self> {
        let stream = match via {
            Via::Unix => Stream::Unix(
                UnixStream::connect(socket)
                    .with_context(|| format!("connect to {}", socket.display()))?,
            ),
            Via::Tcp => {
                let s = TcpStream::connect(addr).with_context(|| format!("connect to {addr}"))?;
                s.set_nodelay(true).context("set TCP_NODELAY")?;
                Stream::Tcp(s)
            }
            Via::InProcess => bail!("no connection in-process"),
        };
        Ok(Self {
            reader: BufReader::with_capacity(64 << 10, stream.try_clone()?),
            writer: stream,
            line: String::new(),
        })
    }

    /// Send a request and read its whole answer.
    fn request(
        &mut self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Result<Reply> {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n",
            body.len()
        );
        if let Some(t) = content_type {
            let _ = write!(head, "Content-Type: {t}\r\n");
        }
        head.push_str("\r\n");
        if body.len() <= 16 << 10 {
            let mut buf = head.into_bytes();
            buf.extend_from_slice(body);
            self.writer.write_all(&buf)
        } else {
            self.writer
                .write_all(head.as_bytes())
                .and_then(|()| self.writer.write_all(body))
        }
        .with_context(|| format!("send {method} {path}"))?;
        self.read_reply()
            .with_context(|| format!("read the answer to {method} {path}"))
    }

    fn read_line(&mut self) -> Result<&str> {
        self.line.clear();
        let n = self.reader.read_line(&mut self.line)?;
        ensure!(n > 0, "the server closed the connection");
        Ok(self.line.trim_end_matches(['\r', '\n']))
    }

    fn read_reply(&mut self) -> Result<Reply> {
        let status_line = self.read_line()?;
        let status: u16 = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("bad status line {status_line:?}"))?;
        let (mut length, mut chunked) = (None, false);
        loop {
            let line = self.read_line()?;
            if line.is_empty() {
                break;
            }
            let Some((name, value)) = line.split_once(':') else {
                bail!("bad header line {line:?}");
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(value.parse::<usize>().context("bad Content-Length")?);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.eq_ignore_ascii_case("chunked");
            } else if name.eq_ignore_ascii_case("connection") {
                ensure!(
                    !value.eq_ignore_ascii_case("close"),
                    "the server closes the connection (HTTP {status})"
                );
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                let line = self.read_line()?;
                let size = line.split(';').next().unwrap_or("").trim();
                let size = usize::from_str_radix(size, 16)
                    .with_context(|| format!("bad chunk size {line:?}"))?;
                if size == 0 {
                    while !self.read_line()?.is_empty() {}
                    break;
                }
                let start = body.len();
                body.resize(start + size, 0);
                self.reader.read_exact(&mut body[start..])?;
                ensure!(self.read_line()?.is_empty(), "a chunk without its CRLF");
            }
        } else if let Some(n) = length {
            body.resize(n, 0);
            self.reader.read_exact(&mut body)?;
        } else {
            ensure!(
                status == 204 || status == 304 || status < 200,
                "an answer (HTTP {status}) with neither Content-Length nor chunks"
            );
        }
        Ok(Reply { status, body })
    }

    /// `POST path` with a JSON body; the answer if its status is `want`.
    fn post_json(&mut self, path: &str, body: &Value, want: u16) -> Result<Reply> {
        let bytes = serde_json::to_vec(body)?;
        self.request("POST", path, Some("application/json"), &bytes)?
            .expect(want, &format!("POST {path}"))
    }
}

// ---------------------------------------------------------------------------
// The server, in-process.

/// `arbor_server::router` on a Unix socket and on TCP loopback.
struct Server {
    rt: tokio::runtime::Runtime,
    state: Arc<AppState>,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<std::io::Result<()>>>,
    socket: PathBuf,
    addr: SocketAddr,
}

impl Server {
    fn start(runtime: Runtime, socket: &Path) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .context("start the tokio runtime")?;
        let addr: SocketAddr = "127.0.0.1:0".parse()?;
        let cfg = ServeConfig {
            unix: Some(socket.to_owned()),
            listen: Some(addr),
            ..ServeConfig::default()
        };
        let state = Arc::new(AppState::new(runtime, cfg).map_err(anyhow::Error::msg)?);
        let app = arbor_server::router(Arc::clone(&state));
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let (unix, tcp) = rt.block_on(async {
            let unix = tokio::net::UnixListener::bind(socket)
                .with_context(|| format!("bind {}", socket.display()))?;
            let tcp = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("bind {addr}"))?;
            Ok::<_, anyhow::Error>((unix, tcp))
        })?;
        let addr = tcp.local_addr().context("read the bound TCP address")?;
        let shutdown = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let tasks = vec![
            rt.spawn(
                axum::serve(unix, app.clone())
                    .with_graceful_shutdown(shutdown(stop_rx.clone()))
                    .into_future(),
            ),
            rt.spawn(
                axum::serve(tcp, app)
                    .with_graceful_shutdown(shutdown(stop_rx))
                    .into_future(),
            ),
        ];
        Ok(Self {
            rt,
            state,
            stop,
            tasks,
            socket: socket.to_owned(),
            addr,
        })
    }

    fn connect(&self, via: Via) -> Result<Client> {
        Client::connect(via, &self.socket, self.addr)
    }

    /// Wait until `/v1/health` answers on both transports.
    fn wait_healthy(&self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        for via in [Via::Unix, Via::Tcp] {
            loop {
                let answer = self
                    .connect(via)
                    .and_then(|mut c| c.request("GET", "/v1/health", None, b""));
                match answer {
                    Ok(r) if r.status == 200 => break,
                    Ok(r) if Instant::now() > deadline => {
                        bail!("/v1/health over {}: HTTP {}", via.label(), r.status)
                    }
                    Err(e) if Instant::now() > deadline => {
                        return Err(e.context(format!("/v1/health over {}", via.label())));
                    }
                    _ => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
        Ok(())
    }

    /// Stop accepting, let the connections end, close every sandbox.
    fn stop(self) -> Result<usize> {
        let _ = self.stop.send(true);
        let tasks = self.tasks;
        self.rt.block_on(async {
            for t in tasks {
                match tokio::time::timeout(Duration::from_secs(5), t).await {
                    Ok(Ok(Ok(()))) => {}
                    Ok(Ok(Err(e))) => bail!("a listener failed: {e}"),
                    Ok(Err(e)) => bail!("a listener panicked: {e}"),
                    Err(_) => bail!("a listener did not stop within 5 s"),
                }
            }
            Ok(())
        })?;
        let closed = self.state.close_all("the bench is over");
        self.rt.shutdown_timeout(Duration::from_secs(5));
        let _ = std::fs::remove_file(&self.socket);
        Ok(closed)
    }
}

/// `arbor_request_seconds` `(sum, count)` of `route` from the server's metrics.
fn route_seconds(client: &mut Client, route: &str) -> Result<(f64, u64)> {
    let text = client
        .request("GET", "/v1/metrics", None, b"")?
        .expect(200, "GET /v1/metrics")?
        .body;
    let text = String::from_utf8(text).context("the metrics are not UTF-8")?;
    let find = |name: &str| {
        let prefix = format!("{name}{{verb=\"{route}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .map(str::to_owned)
    };
    let sum = find("arbor_request_seconds_sum").map_or(Ok(0.0), |v| v.parse::<f64>())?;
    let count = find("arbor_request_seconds_count").map_or(Ok(0), |v| v.parse::<u64>())?;
    Ok((sum, count))
}

// ---------------------------------------------------------------------------
// The benchmark.

/// A remote sandbox and the connection that drives it.
#[derive(Debug)]
struct Remote {
    client: Client,
    sandbox: String,
}

/// Everything one sample needs. Fields drop in order: the sandbox before the
/// store it lives in.
struct Bench {
    local: Sandbox,
    remotes: [Remote; 2],
    base: Snapshot,
    runtime: Runtime,
    blob: Vec<u8>,
    exec_body: Vec<u8>,
    fork_body: Vec<u8>,
}

impl Bench {
    fn remote(&mut self, via: Via) -> &mut Remote {
        match via {
            Via::Tcp => &mut self.remotes[1],
            _ => &mut self.remotes[0],
        }
    }

    /// One timed sample of `verb` through `via` in round `round`.
    fn sample(&mut self, verb: Verb, via: Via, round: usize) -> Result<Duration> {
        match verb {
            Verb::Exec => self.exec(via),
            Verb::Fork8 => self.fork8(via),
            Verb::Snapshot => self.snapshot(via, round),
            Verb::Write => self.write(via, round),
            Verb::Read => self.read(via),
        }
    }

    fn exec(&mut self, via: Via) -> Result<Duration> {
        if via == Via::InProcess {
            let start = Instant::now();
            let obs = self.local.exec("true", &ExecOptions::default())?;
            let elapsed = start.elapsed();
            ensure!(obs.code() == Some(0), "true exited with {:?}", obs.code());
            return Ok(elapsed);
        }
        let body = std::mem::take(&mut self.exec_body);
        let r = self.remote(via);
        let path = format!("/v1/sandboxes/{}/exec", r.sandbox);
        let start = Instant::now();
        let reply = r
            .client
            .request("POST", &path, Some("application/json"), &body);
        let elapsed = start.elapsed();
        self.exec_body = body;
        let result = reply?.expect(200, "exec true")?.json()?;
        ensure!(result["exit_code"] == 0, "exec true answered {result}");
        Ok(elapsed)
    }

    fn fork8(&mut self, via: Via) -> Result<Duration> {
        // The warm pool refills between bursts, as in real use.
        let _ = self.runtime.warm_up(Duration::from_secs(5));
        if via == Via::InProcess {
            let start = Instant::now();
            let forks = (0..FORK_N)
                .map(|_| self.base.open())
                .collect::<Result<Vec<_>, _>>()?;
            let elapsed = start.elapsed();
            ensure!(forks.len() == FORK_N);
            drop(forks);
            return Ok(elapsed);
        }
        let body = std::mem::take(&mut self.fork_body);
        let path = format!("/v1/snapshots/{}/fork", self.base.id().to_hex());
        let client = &mut self.remote(via).client;
        let start = Instant::now();
        let reply = client.request("POST", &path, Some("application/json"), &body);
        let elapsed = start.elapsed();
        let made = reply?.expect(201, "fork 8")?.json()?;
        let ids: Vec<&str> = made["sandboxes"]
            .as_array()
            .context("a fork answer without sandboxes")?
            .iter()
            .filter_map(|s| s["id"].as_str())
            .collect();
        ensure!(ids.len() == FORK_N, "fork 8 made {} sandboxes", ids.len());
        for id in ids {
            client
                .request("DELETE", &format!("/v1/sandboxes/{id}"), None, b"")?
                .expect(204, "close a fork")?;
        }
        self.fork_body = body;
        Ok(elapsed)
    }

    fn snapshot(&mut self, via: Via, round: usize) -> Result<Duration> {
        // Unique content per transport: no snapshot reuses another's layer.
        let change = format!("echo '{} {round}' > change.txt", via.key());
        if via == Via::InProcess {
            let obs = self.local.exec(&change, &ExecOptions::default())?;
            ensure!(
                obs.code() == Some(0),
                "{change} exited with {:?}",
                obs.code()
            );
            let start = Instant::now();
            let snap = self.local.snapshot()?;
            let elapsed = start.elapsed();
            ensure!(snap.id() != self.base.id());
            return Ok(elapsed);
        }
        let r = self.remote(via);
        let result = r.client.post_json(
            &format!("/v1/sandboxes/{}/exec", r.sandbox),
            &json!({ "command": change }),
            200,
        )?;
        ensure!(result.json()?["exit_code"] == 0, "{change} failed");
        let path = format!("/v1/sandboxes/{}/snapshot", r.sandbox);
        let start = Instant::now();
        let reply = r.client.request("POST", &path, None, b"");
        let elapsed = start.elapsed();
        let snap = reply?.expect(201, "snapshot")?.json()?;
        ensure!(
            snap["id"].as_str().is_some_and(|id| id.len() == 64),
            "snapshot answered {snap}"
        );
        Ok(elapsed)
    }

    fn write(&mut self, via: Via, round: usize) -> Result<Duration> {
        // A stamp per round, so that the reads check the last write.
        let stamp = format!("round {round:012}\n");
        self.blob[..stamp.len()].copy_from_slice(stamp.as_bytes());
        let blob = std::mem::take(&mut self.blob);
        let elapsed = if via == Via::InProcess {
            let start = Instant::now();
            let done = self.local.write_file(BLOB, &blob, 0o644);
            let elapsed = start.elapsed();
            done?;
            elapsed
        } else {
            let r = self.remote(via);
            let path = format!("/v1/sandboxes/{}/files?path={BLOB}", r.sandbox);
            let start = Instant::now();
            let reply = r
                .client
                .request("PUT", &path, Some("application/octet-stream"), &blob);
            let elapsed = start.elapsed();
            reply?.expect(204, "write 1 MB")?;
            elapsed
        };
        self.blob = blob;
        Ok(elapsed)
    }

    fn read(&mut self, via: Via) -> Result<Duration> {
        let (elapsed, data) = if via == Via::InProcess {
            let start = Instant::now();
            let data = self.local.read_file(BLOB);
            (start.elapsed(), data?)
        } else {
            let r = self.remote(via);
            let path = format!("/v1/sandboxes/{}/files?path={BLOB}", r.sandbox);
            let start = Instant::now();
            let reply = r.client.request("GET", &path, None, b"");
            (start.elapsed(), reply?.expect(200, "read 1 MB")?.body)
        };
        ensure!(
            data == self.blob,
            "read {} bytes over {} that differ from the {} written",
            data.len(),
            via.label(),
            self.blob.len()
        );
        Ok(elapsed)
    }
}

// ---------------------------------------------------------------------------
// Statistics and the report.

/// Latencies of one verb through one transport, in seconds.
#[derive(Clone, Copy, Debug)]
struct Stats {
    n: usize,
    p50: f64,
    p99: f64,
    mean: f64,
    min: f64,
    max: f64,
}

impl Stats {
    /// Nearest-rank percentiles (with 50 samples, p99 is the maximum).
    fn of(samples: &[Duration]) -> Self {
        let mut v: Vec<f64> = samples.iter().map(Duration::as_secs_f64).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len().max(1);
        let rank = |p: f64| v[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        Self {
            n: v.len(),
            p50: rank(0.50),
            p99: rank(0.99),
            mean: v.iter().sum::<f64>() / n as f64,
            min: v[0],
            max: v[n - 1],
        }
    }

    fn json(&self) -> Value {
        json!({
            "n": self.n,
            "p50_ms": ms(self.p50),
            "p99_ms": ms(self.p99),
            "mean_ms": ms(self.mean),
            "min_ms": ms(self.min),
            "max_ms": ms(self.max),
        })
    }
}

fn ms(seconds: f64) -> f64 {
    (seconds * 1e6).round() / 1e3
}

/// One verb's results.
#[derive(Debug)]
struct VerbResult {
    verb: Verb,
    /// By [`Via::ALL`].
    stats: [Stats; 3],
    /// Mean handler time the server's metrics saw over the measured
    /// requests of both transports (`arbor_request_seconds`), if any.
    server_mean: Option<f64>,
}

impl VerbResult {
    fn ratio(&self, via: Via) -> f64 {
        self.stats[via as usize].p50 / self.stats[Via::InProcess as usize].p50
    }
}

/// The run's results.
#[derive(Debug)]
struct Results {
    quick: bool,
    started_unix: u64,
    wall: Duration,
    load_start: String,
    load_end: String,
    verbs: Vec<VerbResult>,
}

fn host_line() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "?".to_owned(), |s| s.trim().to_owned());
    let uid = tools::effective_uid();
    format!(
        "{cpus} CPUs, Linux {kernel}, {}",
        if uid == 0 {
            "as root".to_owned()
        } else {
            format!("as uid {uid}")
        }
    )
}

fn fmt_ms(seconds: f64) -> String {
    let v = seconds * 1e3;
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The table: verb × transport p50 / p99 (ms), ratios of the p50s.
fn table(res: &Results) -> String {
    let mut t = String::from(
        "| verb | n | in-process p50 | p99 | Unix p50 | p99 | TCP p50 | p99 | Unix / in-process | TCP / in-process | server handler mean |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for v in &res.verbs {
        let [a, u, c] = v.stats;
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.2}× | {:.2}× | {} |",
            v.verb.label(),
            a.n,
            fmt_ms(a.p50),
            fmt_ms(a.p99),
            fmt_ms(u.p50),
            fmt_ms(u.p99),
            fmt_ms(c.p50),
            fmt_ms(c.p99),
            v.ratio(Via::Unix),
            v.ratio(Via::Tcp),
            v.server_mean.map_or_else(|| "–".to_owned(), fmt_ms),
        );
    }
    t
}

fn to_markdown(res: &Results) -> String {
    let mut md = String::from("# `arbor serve`: HTTP overhead per verb\n\n");
    let _ = writeln!(
        md,
        "Generated by `cargo bench -p arbor-benches --bench serve` on {}{}, in {:.1} s. Host: {}; \
         load average {} at the start, {} at the end.\n",
        report::format_utc(res.started_unix),
        if res.quick {
            " — **quick smoke mode: a few samples per verb, not a measurement**"
        } else {
            ""
        },
        res.wall.as_secs_f64(),
        host_line(),
        res.load_start,
        res.load_end,
    );
    md.push_str(
        "Latency in milliseconds of one operation on the 100-file / 1 MB workspace: the native \
         `arbor_runtime` API in-process, and the same operation as one HTTP/1.1 request to \
         `arbor_server::router` in the same process (tokio, 2 workers) over a Unix socket and over \
         TCP on 127.0.0.1 (one keep-alive connection each, `TCP_NODELAY`; timed from the first byte \
         sent to the last byte of the answer read). Samples are interleaved by round. Ratios are of \
         the p50s. Percentiles are nearest-rank (with 50 samples, p99 is the maximum). \
         *Server handler mean* is `arbor_request_seconds` (sum / count) from `/v1/metrics` over the \
         measured requests of both transports: the time from routing to the answer, without the \
         connection's reading and writing.\n\n",
    );
    md.push_str(&table(res));
    md.push('\n');
    md.push_str(
        "- exec `true`: `Sandbox::exec(\"true\")` / `POST /v1/sandboxes/{id}/exec {\"command\": \"true\"}` \
         in a sandbox already open;\n\
         - fork 8: 8 × `Snapshot::open()` / `POST /v1/snapshots/{ref}/fork {\"n\": 8}` (the 8 \
         sandboxes are closed untimed; the warm pool is refilled before each sample);\n\
         - snapshot: `Sandbox::snapshot()` / `POST /v1/sandboxes/{id}/snapshot`, each after an \
         untimed exec that changes a file;\n\
         - write / read 1 MB: `write_file` / `read_file` / `PUT` and `GET \
         /v1/sandboxes/{id}/files?path=blob.bin` (every read is checked against the bytes written).\n\n",
    );
    for verb in [Verb::Exec, Verb::Fork8] {
        if let Some(v) = res.verbs.iter().find(|v| v.verb == verb) {
            let (u, c) = (v.ratio(Via::Unix), v.ratio(Via::Tcp));
            let _ = writeln!(
                md,
                "Target for {} (within {TARGET_RATIO}× of in-process): Unix {u:.2}×, TCP {c:.2}× — {}.",
                v.verb.label(),
                if u <= TARGET_RATIO && c <= TARGET_RATIO {
                    "met"
                } else {
                    "not met"
                }
            );
        }
    }
    md.push_str("\n![Latency per verb](serve-latency.svg)\n");
    md
}

fn to_json(res: &Results) -> Result<String> {
    let verbs: Vec<Value> = res
        .verbs
        .iter()
        .map(|v| {
            let mut by: serde_json::Map<String, Value> = Via::ALL
                .iter()
                .map(|&via| (via.key().to_owned(), v.stats[via as usize].json()))
                .collect();
            by.insert(
                "ratio_p50".to_owned(),
                json!({
                    "unix_over_in_process": (v.ratio(Via::Unix) * 1e3).round() / 1e3,
                    "tcp_over_in_process": (v.ratio(Via::Tcp) * 1e3).round() / 1e3,
                }),
            );
            by.insert(
                "server_handler_mean_ms".to_owned(),
                json!(v.server_mean.map(ms)),
            );
            by.insert("verb".to_owned(), json!(v.verb.key()));
            by.insert("route".to_owned(), json!(v.verb.route()));
            Value::Object(by)
        })
        .collect();
    let doc = json!({
        "schema": "arbor-bench-serve/1",
        "command": "cargo bench -p arbor-benches --bench serve",
        "quick": res.quick,
        "started_unix": res.started_unix,
        "wall_s": (res.wall.as_secs_f64() * 10.0).round() / 10.0,
        "host": host_line(),
        "load_average": { "start": res.load_start, "end": res.load_end },
        "workspace": Workloads::current().small.label(),
        "server": "arbor_server::router in-process, tokio multi-thread (2 workers); blocking HTTP/1.1 client, keep-alive",
        "target_ratio": TARGET_RATIO,
        "verbs": verbs,
    });
    Ok(serde_json::to_string_pretty(&doc)? + "\n")
}

/// Escape text for SVG.
fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A grouped bar chart: p50 per verb and transport (log scale), with a
/// whisker up to the p99.
fn chart_svg(res: &Results) -> String {
    const W: f64 = 760.0;
    const H: f64 = 440.0;
    const LEFT: f64 = 70.0;
    const RIGHT: f64 = 150.0;
    const TOP: f64 = 50.0;
    const BOTTOM: f64 = 50.0;
    let all: Vec<f64> = res
        .verbs
        .iter()
        .flat_map(|v| v.stats.iter().flat_map(|s| [s.p50, s.p99]))
        .filter(|v| *v > 0.0)
        .collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(0.0, f64::max);
    let (lo_exp, hi_exp) = if all.is_empty() {
        (-4, -1)
    } else {
        let lo_exp = lo.log10().floor() as i32;
        (lo_exp, (hi.log10().ceil() as i32).max(lo_exp + 1))
    };
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let y_of = |v: f64| {
        let t = (v.max(1e-9).log10() - f64::from(lo_exp)) / f64::from(hi_exp - lo_exp);
        TOP + plot_h * (1.0 - t.clamp(0.0, 1.0))
    };
    let base = TOP + plot_h;
    let group_w = plot_w / res.verbs.len().max(1) as f64;
    let bar_w = group_w * 0.8 / 3.0;

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect x=\"0\" y=\"0\" width=\"{W}\" height=\"{H}\" fill=\"white\"/>"
    );
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"24\" font-size=\"15\" font-weight=\"bold\" text-anchor=\"middle\">{}</text>",
        LEFT + plot_w / 2.0,
        xml(&format!(
            "Latency per verb: in-process, Unix socket, TCP loopback{}",
            if res.quick { " (quick mode)" } else { "" }
        ))
    );
    for e in lo_exp..=hi_exp {
        let v = 10f64.powi(e);
        let y = y_of(v);
        let label = if v >= 1e-3 {
            format!("{} ms", v * 1e3)
        } else {
            format!("{} µs", v * 1e6)
        };
        let _ = writeln!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#dddddd\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT + plot_w,
            LEFT - 8.0,
            y + 4.0,
            xml(&label)
        );
    }
    let _ = writeln!(
        svg,
        "<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{base:.1}\" stroke=\"black\"/>\n\
         <line x1=\"{LEFT}\" y1=\"{base:.1}\" x2=\"{:.1}\" y2=\"{base:.1}\" stroke=\"black\"/>\n\
         <text x=\"16\" y=\"{:.1}\" transform=\"rotate(-90 16 {:.1})\" text-anchor=\"middle\">p50 (labelled, ms), log scale; whisker: p99</text>",
        LEFT + plot_w,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    );
    for (i, v) in res.verbs.iter().enumerate() {
        let gx = LEFT + group_w * i as f64 + group_w * 0.1;
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-weight=\"bold\">{}</text>",
            gx + bar_w * 1.5,
            base + 20.0,
            xml(v.verb.label())
        );
        for via in Via::ALL {
            let s = v.stats[via as usize];
            let x = gx + bar_w * via as usize as f64;
            let (y50, y99) = (y_of(s.p50), y_of(s.p99));
            let cx = x + bar_w / 2.0;
            let _ = writeln!(
                svg,
                "<rect x=\"{:.1}\" y=\"{y50:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}</title></rect>\n\
                 <line x1=\"{cx:.1}\" y1=\"{y50:.1}\" x2=\"{cx:.1}\" y2=\"{y99:.1}\" stroke=\"black\"/>\n\
                 <line x1=\"{:.1}\" y1=\"{y99:.1}\" x2=\"{:.1}\" y2=\"{y99:.1}\" stroke=\"black\"/>",
                x + 1.0,
                bar_w - 2.0,
                (base - y50).max(0.0),
                via.color(),
                xml(&format!(
                    "{} over {}: p50 {} ms, p99 {} ms (n={})",
                    v.verb.label(),
                    via.label(),
                    fmt_ms(s.p50),
                    fmt_ms(s.p99),
                    s.n
                )),
                cx - bar_w / 4.0,
                cx + bar_w / 4.0,
            );
            let _ = writeln!(
                svg,
                "<text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"9\">{}</text>",
                y99 - 4.0,
                fmt_ms(s.p50)
            );
        }
    }
    for (k, via) in Via::ALL.iter().enumerate() {
        let (lx, ly) = (LEFT + plot_w + 20.0, TOP + 10.0 + 22.0 * k as f64);
        let _ = writeln!(
            svg,
            "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"16\" height=\"12\" fill=\"{}\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            ly - 8.0,
            via.color(),
            lx + 22.0,
            ly + 2.0,
            xml(via.label())
        );
    }
    svg.push_str("</svg>\n");
    svg
}

// ---------------------------------------------------------------------------

fn run(quick: bool) -> Result<Results> {
    let started = Instant::now();
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let load_start = tools::load_average();
    let env = BenchEnv::open(Path::new(HELPER)).context("open a bench runtime")?;
    let (base, _src) = env
        .import_workload(&Workloads::current().small)
        .context("generate and import the workload")?;
    let server = Server::start(env.runtime.clone(), &env.scratch("serve.sock"))?;
    server.wait_healthy()?;
    eprintln!(
        "serve: listening on unix:{} and http://{}",
        server.socket.display(),
        server.addr
    );
    let base_hex = base.id().to_hex();
    let open_remote = |via: Via| -> Result<Remote> {
        let mut client = server.connect(via)?;
        let made = client
            .post_json("/v1/sandboxes", &json!({ "snapshot": base_hex }), 201)?
            .json()?;
        let sandbox = made["id"]
            .as_str()
            .context("a sandbox answer without an id")?
            .to_owned();
        Ok(Remote { client, sandbox })
    };
    let remotes = [open_remote(Via::Unix)?, open_remote(Via::Tcp)?];
    let mut blob = vec![0u8; usize::try_from(MB)?];
    Xorshift64::new(0x5E_12E).fill_text(&mut blob);
    let mut bench = Bench {
        local: base.open().context("open the in-process sandbox")?,
        remotes,
        base,
        runtime: env.runtime.clone(),
        blob,
        exec_body: serde_json::to_vec(&json!({ "command": "true" }))?,
        fork_body: serde_json::to_vec(&json!({ "n": FORK_N }))?,
    };
    let mut metrics = server.connect(Via::Unix)?;
    let mut verbs = Vec::new();
    for verb in Verb::ALL {
        let (warm_up, n) = (verb.warm_up(quick), verb.samples(quick));
        let phase = Instant::now();
        for round in 0..warm_up {
            for via in Via::order(round) {
                bench
                    .sample(verb, via, round)
                    .with_context(|| format!("{} over {} (warm-up)", verb.label(), via.label()))?;
            }
        }
        let before = route_seconds(&mut metrics, verb.route())?;
        let mut samples: [Vec<Duration>; 3] = Default::default();
        for round in warm_up..warm_up + n {
            for via in Via::order(round) {
                let d = bench
                    .sample(verb, via, round)
                    .with_context(|| format!("{} over {}", verb.label(), via.label()))?;
                samples[via as usize].push(d);
            }
        }
        let after = route_seconds(&mut metrics, verb.route())?;
        let count = after.1.saturating_sub(before.1);
        let server_mean = (count > 0).then(|| (after.0 - before.0) / count as f64);
        let stats = samples.each_ref().map(|s| Stats::of(s));
        eprintln!(
            "serve: {:<10} p50 in-process {} ms, unix {} ms, tcp {} ms ({n} rounds, {:.1} s)",
            verb.label(),
            fmt_ms(stats[0].p50),
            fmt_ms(stats[1].p50),
            fmt_ms(stats[2].p50),
            phase.elapsed().as_secs_f64()
        );
        verbs.push(VerbResult {
            verb,
            stats,
            server_mean,
        });
    }
    let metrics_text = metrics
        .request("GET", "/v1/metrics", None, b"")?
        .expect(200, "GET /v1/metrics")?
        .body;
    let errors: Vec<String> = String::from_utf8_lossy(&metrics_text)
        .lines()
        .filter(|l| l.starts_with("arbor_requests_total{") && !l.contains("status=\"2"))
        .map(str::to_owned)
        .collect();
    ensure!(errors.is_empty(), "the server answered errors: {errors:?}");
    // The connections end before the server stops (its graceful shutdown
    // waits for them), and every runtime handle goes before the store.
    drop(metrics);
    drop(bench);
    let closed = server.stop()?;
    ensure!(
        closed == 2,
        "{closed} sandboxes were still open at the end, expected the 2 of the transports"
    );
    drop(env);
    Ok(Results {
        quick,
        started_unix,
        wall: started.elapsed(),
        load_start,
        load_end: tools::load_average(),
        verbs,
    })
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("serve: bench");
        return Ok(());
    }
    // Like criterion's filters: `cargo bench -p arbor-benches -- fork` runs
    // only the benches whose names match, and this one is `serve`.
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if !filters.is_empty() && !filters.iter().any(|f| "serve".contains(f.as_str())) {
        eprintln!("serve: skipped (no filter matches `serve`)");
        return Ok(());
    }
    let quick = quick_mode();
    eprintln!("serve: {} mode", if quick { "quick" } else { "full" });
    let res = run(quick)?;
    println!("{}", table(&res));
    let out = arbor_benches::output_dir()?;
    std::fs::create_dir_all(&out).with_context(|| format!("create {}", out.display()))?;
    let suffix = if quick { "-quick" } else { "" };
    let mut md = to_markdown(&res);
    if quick {
        md = md.replace("(serve-latency.svg)", "(serve-latency-quick.svg)");
    }
    let files = [
        (format!("serve{suffix}.md"), md),
        (format!("serve{suffix}.json"), to_json(&res)?),
        (format!("serve-latency{suffix}.svg"), chart_svg(&res)),
    ];
    for (name, text) in files {
        let path = out.join(name);
        std::fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
        eprintln!("serve: wrote {}", path.display());
    }
    eprintln!("serve: done in {:.1} s", res.wall.as_secs_f64());
    Ok(())
}
