//! Sandbox routes: create, exec (plain and streamed), task steps, files,
//! archives, snapshot, fork, verify, close.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use futures_util::StreamExt;

use arbor_rollout::{AgentAction, Episode as VerifierEpisode};
use arbor_runtime::store::object::ExitStatus;
use arbor_runtime::{AnySandbox, AnySnapshot, Backend, ExecOptions, OutputStream, StepResult};

use crate::archive;
use crate::error::{ApiError, ApiResult, ErrorBody, file_error};
use crate::extract::{ApiJson, ApiPath, ApiQuery, OptionalJson, RawBody};
use crate::metrics::Metrics;
use crate::snapshots::{blocking, ndjson_line, set_tag, snapshot_info, tokio_stream_of};
use crate::state::{AppState, Episode, Inner, Live};
use crate::tenants::View;
use crate::types::{
    CreateSandbox, DirEntry, DirListing, DirQuery, ExecEvent, ExecRequest, ExecResult, ForkRequest,
    PathQuery, SandboxFork, SandboxInfo, SandboxList, SnapshotInfo, SnapshotRequest, StepRequest,
    StepResponse, UploadResponse, VerifyResponse,
};

/// Most sandboxes one fork makes.
pub const MAX_FORK: usize = 256;

/// Largest standard input an exec takes (it travels inside the command line).
pub const MAX_STDIN: usize = 64 * 1024;

/// Longest exec timeout, in seconds.
pub const MAX_TIMEOUT_S: f64 = 86_400.0;

/// The API form of a live sandbox.
pub fn info(l: &Live) -> SandboxInfo {
    SandboxInfo {
        id: l.id.clone(),
        snapshot: l.snapshot.to_hex(),
        backend: l.backend.name().to_owned(),
        task: l.task.clone(),
        created_at: l.created_at,
        expires_at: l.expires_at,
        steps: l.steps.load(Ordering::Relaxed),
        observation: l.observation(),
    }
}

fn check_fork_n(n: usize) -> ApiResult<()> {
    if n == 0 || n > MAX_FORK {
        return Err(ApiError::bad_request(format!(
            "n = {n} must be from 1 to {MAX_FORK}"
        )));
    }
    Ok(())
}

/// Open `n` sandboxes on `snap` for the tenant (task sandboxes when
/// `episode` is given: each continues that episode).
///
/// # Errors
/// 400 for a bad `n`; 429 past the tenant's limits; runtime faults.
pub async fn fork_snapshot(
    st: &Arc<AppState>,
    view: &Arc<View>,
    snap: AnySnapshot,
    episode: Option<(Episode, String)>,
    n: usize,
    ttl_s: Option<f64>,
) -> ApiResult<Vec<Arc<Live>>> {
    check_fork_n(n)?;
    let reservation = st.reserve(&view.name, n)?;
    let made = {
        let (st, view) = (Arc::clone(st), Arc::clone(view));
        blocking(move || {
            let mut made = Vec::with_capacity(n);
            for _ in 0..n {
                let sandbox = snap.open()?;
                let (ep, obs) = episode.clone().unzip();
                made.push(st.live(&view.name, *snap.id(), sandbox, ep, obs, ttl_s)?);
            }
            Ok(made)
        })
        .await?
    };
    Metrics::add(&st.metrics.created, n as u64);
    Metrics::add(&st.metrics.forks, n as u64);
    st.admit(made.clone(), reservation);
    Ok(made)
}

/// Open a sandbox on a snapshot or a task.
#[utoipa::path(post, path = "/v1/sandboxes", tag = "sandboxes", request_body = CreateSandbox,
    responses((status = 201, body = SandboxInfo), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn create(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiJson(req): ApiJson<CreateSandbox>,
) -> ApiResult<(StatusCode, axum::Json<SandboxInfo>)> {
    let live = match (req.snapshot, req.task) {
        (Some(what), None) => {
            let snap = {
                let (st, view) = (Arc::clone(&st), Arc::clone(&view));
                blocking(move || view.resolve(&st.runtime, &what)).await?
            };
            let reservation = st.reserve(&view.name, 1)?;
            let (st2, view2) = (Arc::clone(&st), Arc::clone(&view));
            let allow = req.allow_hosts;
            let live = blocking(move || {
                let mut sandbox = snap.open()?;
                if !allow.is_empty() {
                    sandbox
                        .native_mut()
                        .ok_or_else(|| {
                            ApiError::conflict("a WebAssembly session has no network (allow_hosts)")
                        })?
                        .allow_egress(&allow)
                        .map_err(|e| ApiError::bad_request(e.to_string()))?;
                }
                st2.live(&view2.name, *snap.id(), sandbox, None, None, req.ttl_s)
            })
            .await?;
            st.admit(vec![Arc::clone(&live)], reservation);
            live
        }
        (None, Some(_)) if !req.allow_hosts.is_empty() => {
            return Err(ApiError::bad_request(
                "allow_hosts is for snapshot sandboxes; a task's network is the task's",
            ));
        }
        (None, Some(task)) => {
            let reservation = st.reserve(&view.name, 1)?;
            let (st2, view2) = (Arc::clone(&st), Arc::clone(&view));
            let live = blocking(move || {
                let env = st2.environment(&task)?;
                let (root, obs) = env.reset()?;
                view2.adopt(root.id())?;
                let sandbox = root.open()?;
                let episode = Episode {
                    env,
                    root: root.clone(),
                    steps: Vec::new(),
                    done: false,
                };
                st2.live(
                    &view2.name,
                    *root.id(),
                    sandbox,
                    Some(episode),
                    Some(obs.text()),
                    req.ttl_s,
                )
            })
            .await?;
            st.admit(vec![Arc::clone(&live)], reservation);
            live
        }
        _ => {
            return Err(ApiError::bad_request(
                "give exactly one of `snapshot` and `task`",
            ));
        }
    };
    Metrics::add(&st.metrics.created, 1);
    Ok((StatusCode::CREATED, axum::Json(info(&live))))
}

/// The tenant's sandboxes.
#[utoipa::path(get, path = "/v1/sandboxes", tag = "sandboxes",
    responses((status = 200, body = SandboxList)))]
pub async fn list(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
) -> ApiResult<axum::Json<SandboxList>> {
    let mut sandboxes: Vec<SandboxInfo> = st
        .sandboxes
        .lock()
        .map_err(|_| ApiError::internal("sandbox table lock poisoned"))?
        .values()
        .filter(|l| l.tenant == view.name)
        .map(|l| info(l))
        .collect();
    sandboxes.sort_by(|a, b| a.created_at.total_cmp(&b.created_at));
    Ok(axum::Json(SandboxList { sandboxes }))
}

/// One sandbox.
#[utoipa::path(get, path = "/v1/sandboxes/{id}", tag = "sandboxes",
    params(("id" = String, Path, description = "sandbox id")),
    responses((status = 200, body = SandboxInfo), (status = 404, body = ErrorBody)))]
pub async fn get(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<SandboxInfo>> {
    let live = st.sandbox(&view, &id)?;
    Ok(axum::Json(info(&live)))
}

/// Close a sandbox: its processes end, its mounts go.
#[utoipa::path(delete, path = "/v1/sandboxes/{id}", tag = "sandboxes",
    params(("id" = String, Path, description = "sandbox id")),
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn close(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    st.sandbox(&view, &id)?;
    let live = st
        .remove(&id, "was closed")
        .ok_or_else(|| ApiError::not_found(format!("no sandbox {id:?}")))?;
    live.kill();
    blocking(move || {
        live.close();
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

fn check_env_name(k: &str) -> ApiResult<()> {
    let mut chars = k.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "environment variable name {k:?} must be letters, digits and `_`, not starting with a digit"
        )))
    }
}

/// The step text and timeout of an exec request on `backend`.
///
/// # Errors
/// 400 for a malformed request; 409 for options a session cannot take.
pub fn compose(backend: Backend, req: &ExecRequest) -> ApiResult<(String, u64)> {
    let base = match (&req.command, &req.argv) {
        (Some(c), None) => c.clone(),
        (None, Some(argv)) if !argv.is_empty() => backend.step_text(argv),
        (None, Some(_)) => return Err(ApiError::bad_request("`argv` is empty")),
        _ => {
            return Err(ApiError::bad_request(
                "give exactly one of `command` and `argv`",
            ));
        }
    };
    if base.contains('\0') {
        return Err(ApiError::bad_request("the command contains a NUL byte"));
    }
    let timeout_s = req.timeout_s.unwrap_or(60.0);
    if !(timeout_s.is_finite() && timeout_s > 0.0 && timeout_s <= MAX_TIMEOUT_S) {
        return Err(ApiError::bad_request(format!(
            "timeout_s = {timeout_s} must be in (0, {MAX_TIMEOUT_S}]"
        )));
    }
    let timeout_ms = ((timeout_s * 1000.0).ceil() as u64).max(1);
    let stdin = match (&req.stdin, &req.stdin_b64) {
        (Some(s), None) => Some(s.as_bytes().to_vec()),
        (None, Some(b)) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|e| ApiError::bad_request(format!("stdin_b64 is not base64: {e}")))?,
        ),
        (None, None) => None,
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "give at most one of `stdin` and `stdin_b64`",
            ));
        }
    };
    let env = req.env.clone().unwrap_or_default();
    let wrapped = req.cwd.is_some() || !env.is_empty() || stdin.is_some();
    if !wrapped {
        return Ok((base, timeout_ms));
    }
    if backend == Backend::Wasm {
        return Err(ApiError::conflict(
            "cwd, env and stdin are not available on a WebAssembly session sandbox (its step is Python source)",
        ));
    }
    // The command runs in a subshell with the variables, in the directory,
    // reading the input: recorded as one step, so replay repeats it exactly.
    let mut inner = String::new();
    for (k, v) in &env {
        check_env_name(k)?;
        inner.push_str(&format!(
            "export {k}={}; ",
            arbor_runtime::state::shell_quote(v)
        ));
    }
    if let Some(cwd) = &req.cwd {
        let rel = archive::workspace_path(cwd)?;
        let dir = if rel.is_empty() {
            "/workspace".to_owned()
        } else {
            format!("/workspace/{rel}")
        };
        inner.push_str(&format!(
            "cd -- {} || exit 1; ",
            arbor_runtime::state::shell_quote(&dir)
        ));
    }
    let mut text = format!("( {inner}{{\n{base}\n}} )");
    if let Some(input) = stdin {
        if input.len() > MAX_STDIN {
            return Err(ApiError::too_large(format!(
                "stdin is {} bytes; at most {MAX_STDIN} go with an exec (write a file for more)",
                input.len()
            )));
        }
        let b64 = base64::engine::general_purpose::STANDARD.encode(&input);
        text = format!("printf '%s' '{b64}' | base64 -d | {text}");
    }
    Ok((text, timeout_ms))
}

fn exec_result(r: &StepResult) -> ExecResult {
    ExecResult {
        exit_code: r.outcome.shell_code(),
        stdout: r.stdout_text(),
        stderr: r.stderr_text(),
        duration_s: r.duration.as_secs_f64(),
        timed_out: r.outcome.exit_status() == ExitStatus::Timeout,
        outcome: r.outcome.label(),
        killed_background: r.killed_background.clone(),
        egress: r.egress.clone(),
    }
}

/// Run a step text in a sandbox: a plain one directly (its output to
/// `sink` as it comes), a task one as the task's exec action (counted
/// against its limits; its output to `sink` once it is over).
fn run(
    live: &Live,
    inner: &mut Inner,
    text: String,
    timeout_ms: u64,
    sink: &mut dyn FnMut(OutputStream, &[u8]),
) -> ApiResult<ExecResult> {
    let result = match inner.episode.as_mut() {
        None => {
            let opts = ExecOptions {
                timeout_ms,
                ..ExecOptions::default()
            };
            let r = inner.sandbox.run_streaming(&text, &opts, sink)?;
            exec_result(&r)
        }
        Some(ep) => {
            let action = AgentAction::Exec {
                command: text,
                timeout_ms: Some(timeout_ms),
            };
            let t = task_step(live, &mut inner.sandbox, ep, &action)?;
            sink(OutputStream::Stdout, t.output.as_bytes());
            ExecResult {
                exit_code: t.exit_code.unwrap_or(0),
                stdout: t.output,
                stderr: String::new(),
                duration_s: t.duration_s,
                timed_out: t.timed_out,
                outcome: t.outcome,
                killed_background: Vec::new(),
                egress: Vec::new(),
            }
        }
    };
    live.steps.fetch_add(1, Ordering::Relaxed);
    Ok(result)
}

/// What one task step produced.
struct TaskStep {
    observation: String,
    output: String,
    exit_code: Option<i32>,
    duration_s: f64,
    timed_out: bool,
    outcome: String,
    done: bool,
}

fn task_step(
    live: &Live,
    sandbox: &mut AnySandbox,
    ep: &mut Episode,
    action: &AgentAction,
) -> ApiResult<TaskStep> {
    if ep.done {
        return Err(ApiError::conflict(format!(
            "the episode of sandbox {} is over ({} steps); verify it, or fork an earlier snapshot",
            live.id,
            ep.steps.len()
        )));
    }
    if *action == AgentAction::Submit {
        ep.done = true;
        let text = "the episode was submitted".to_owned();
        live.set_observation(&text);
        return Ok(TaskStep {
            observation: text,
            output: String::new(),
            exit_code: None,
            duration_s: 0.0,
            timed_out: false,
            outcome: "submitted".to_owned(),
            done: true,
        });
    }
    let t = ep.env.step(sandbox, ep.steps.len(), action)?;
    let exit = t.record.exit;
    let duration_s = Duration::from_micros(t.record.duration_us).as_secs_f64();
    ep.steps.push(t.record);
    if ep.steps.len() >= ep.env.limits().max_steps {
        ep.done = true;
    }
    let observation = t.observation.text();
    live.set_observation(&observation);
    Ok(TaskStep {
        observation,
        output: t.observation.output,
        exit_code: Some(exit.shell_code()),
        duration_s,
        timed_out: exit == ExitStatus::Timeout,
        outcome: exit.label(),
        done: ep.done,
    })
}

/// Run a command; a failing one is a 200 with its exit code.
#[utoipa::path(post, path = "/v1/sandboxes/{id}/exec", tag = "sandboxes",
    params(("id" = String, Path, description = "sandbox id")), request_body = ExecRequest,
    responses((status = 200, body = ExecResult), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn exec(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<ExecRequest>,
) -> ApiResult<axum::Json<ExecResult>> {
    let live = st.sandbox(&view, &id)?;
    let (text, timeout_ms) = compose(live.backend, &req)?;
    blocking(move || {
        st.in_flight(|| live.with(|inner| run(&live, inner, text, timeout_ms, &mut |_, _| {})))
    })
    .await
    .map(axum::Json)
}

/// Turns byte chunks into text without splitting a UTF-8 character.
#[derive(Debug, Default)]
struct Utf8Chunks {
    carry: Vec<u8>,
}

impl Utf8Chunks {
    fn push(&mut self, data: &[u8]) -> String {
        self.carry.extend_from_slice(data);
        let cut = match std::str::from_utf8(&self.carry) {
            Ok(_) => self.carry.len(),
            // An incomplete character at the end waits for the next chunk.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.carry.len(),
        };
        let rest = self.carry.split_off(cut);
        let text = String::from_utf8_lossy(&self.carry).into_owned();
        self.carry = rest;
        text
    }
}

/// Run a command, streaming its output as NDJSON, then its result.
#[utoipa::path(post, path = "/v1/sandboxes/{id}/exec/stream", tag = "sandboxes",
    params(("id" = String, Path, description = "sandbox id")), request_body = ExecRequest,
    responses((status = 200, description = "NDJSON lines of ExecEvent", content_type = "application/x-ndjson", body = ExecEvent),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn exec_stream(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<ExecRequest>,
) -> ApiResult<Response> {
    let live = st.sandbox(&view, &id)?;
    let (text, timeout_ms) = compose(live.backend, &req)?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<bytes::Bytes>();
    // The action goes on if the client goes away (the sandbox is its
    // client's to close, or the TTL's).
    tokio::task::spawn_blocking(move || {
        let mut out = Utf8Chunks::default();
        let mut err = Utf8Chunks::default();
        let result = st.in_flight(|| {
            live.with(|inner| {
                run(&live, inner, text, timeout_ms, &mut |s, d| {
                    let event = match s {
                        OutputStream::Stdout => ExecEvent::Stdout { data: out.push(d) },
                        OutputStream::Stderr => ExecEvent::Stderr { data: err.push(d) },
                    };
                    let _ = tx.send(ndjson_line(&event));
                })
            })
        });
        let last = match result {
            Ok(result) => ExecEvent::Exit { result },
            Err(e) => ExecEvent::Error {
                error: e.body().error,
            },
        };
        let _ = tx.send(ndjson_line(&last));
    });
    let stream = tokio_stream_of(rx).map(Ok::<_, std::convert::Infallible>);
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(stream),
    )
        .into_response())
}

/// Take one of the task's actions.
#[utoipa::path(post, path = "/v1/sandboxes/{id}/step", tag = "tasks",
    params(("id" = String, Path, description = "sandbox id")), request_body = StepRequest,
    responses((status = 200, body = StepResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn step(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<StepRequest>,
) -> ApiResult<axum::Json<StepResponse>> {
    let live = st.sandbox(&view, &id)?;
    let action: AgentAction = serde_json::from_value(req.action)
        .map_err(|e| ApiError::bad_request(format!("not a task action: {e}")))?;
    blocking(move || {
        st.in_flight(|| {
            live.with(|inner| {
                let Some(ep) = inner.episode.as_mut() else {
                    return Err(ApiError::conflict(format!(
                        "sandbox {} is not a task sandbox; use exec and the file routes",
                        live.id
                    )));
                };
                let t = task_step(&live, &mut inner.sandbox, ep, &action)?;
                live.steps.fetch_add(1, Ordering::Relaxed);
                Ok(StepResponse {
                    observation: t.observation,
                    output: t.output,
                    exit_code: t.exit_code,
                    step: ep.steps.len() as u64,
                    done: t.done,
                })
            })
        })
    })
    .await
    .map(axum::Json)
}

/// Grade the episode so far with the task's hidden verifier.
#[utoipa::path(post, path = "/v1/sandboxes/{id}/verify", tag = "tasks",
    params(("id" = String, Path, description = "sandbox id")),
    responses((status = 200, body = VerifyResponse), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn verify(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<VerifyResponse>> {
    let live = st.sandbox(&view, &id)?;
    blocking(move || {
        st.in_flight(|| {
            live.with(|inner| {
                let Some(ep) = inner.episode.as_ref() else {
                    return Err(ApiError::conflict(format!(
                        "sandbox {} is not a task sandbox: there is no verifier to run",
                        live.id
                    )));
                };
                let last = inner.sandbox.snapshot()?;
                view.adopt(last.id())?;
                Metrics::add(&st.metrics.snapshots, 1);
                let verdict = ep.env.verify(&VerifierEpisode {
                    task: ep.env.id().to_owned(),
                    root: ep.root.clone(),
                    steps: ep.steps.clone(),
                    last: last.clone(),
                });
                Ok(VerifyResponse {
                    reward: verdict.reward,
                    verdict: serde_json::to_value(&verdict)
                        .map_err(|e| ApiError::internal(format!("encode the verdict: {e}")))?,
                    snapshot: snapshot_info(&st, &view, &last)?,
                })
            })
        })
    })
    .await
    .map(axum::Json)
}

/// The file a file route names (not the workspace root).
fn file_path(q: &PathQuery) -> ApiResult<String> {
    let path = archive::workspace_path(&q.path)?;
    if path.is_empty() {
        return Err(ApiError::bad_request(
            "path names the workspace root, not a file",
        ));
    }
    Ok(path)
}

#[cfg(feature = "wasm")]
fn wasm_file_error(e: impl std::fmt::Display) -> ApiError {
    file_error(e.to_string())
}

/// Read a file.
#[utoipa::path(get, path = "/v1/sandboxes/{id}/files", tag = "files",
    params(("id" = String, Path, description = "sandbox id"), PathQuery),
    responses((status = 200, description = "the bytes", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn read(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<PathQuery>,
) -> ApiResult<Response> {
    let live = st.sandbox(&view, &id)?;
    let path = file_path(&q)?;
    let data = blocking(move || live.with(|inner| read_in(&mut inner.sandbox, &path))).await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], data).into_response())
}

fn read_in(sandbox: &mut AnySandbox, path: &str) -> ApiResult<Vec<u8>> {
    if let Some(s) = sandbox.native_mut() {
        return Ok(s.read_file(path)?);
    }
    #[cfg(feature = "wasm")]
    if let Some(s) = sandbox.wasm_mut() {
        return s.read_file(path).map_err(wasm_file_error);
    }
    Err(ApiError::conflict("this sandbox has no file API"))
}

/// Write a file (parents created).
#[utoipa::path(put, path = "/v1/sandboxes/{id}/files", tag = "files",
    params(("id" = String, Path, description = "sandbox id"), PathQuery),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn write(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<PathQuery>,
    RawBody(body): RawBody,
) -> ApiResult<StatusCode> {
    let live = st.sandbox(&view, &id)?;
    let path = file_path(&q)?;
    if body.len() > arbor_runtime::sandbox::protocol::MAX_FILE {
        return Err(ApiError::too_large(format!(
            "the file is {} bytes; one write moves at most {} (upload an archive of smaller files)",
            body.len(),
            arbor_runtime::sandbox::protocol::MAX_FILE
        )));
    }
    let mode = q.mode.unwrap_or(0o644);
    if mode > 0o7777 {
        return Err(ApiError::bad_request(format!(
            "mode = {mode} is not a permission value (0 to 4095)"
        )));
    }
    blocking(move || {
        live.with(|inner| {
            write_in(&live, inner, &path, &body, mode)?;
            live.steps.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

fn write_in(live: &Live, inner: &mut Inner, path: &str, data: &[u8], mode: u32) -> ApiResult<()> {
    if let Some(ep) = inner.episode.as_mut() {
        let content = String::from_utf8(data.to_vec()).map_err(|_| {
            ApiError::conflict("a task sandbox's writes are task actions and take UTF-8 text")
        })?;
        let t = task_step(
            live,
            &mut inner.sandbox,
            ep,
            &AgentAction::Write {
                path: path.to_owned(),
                content,
                mode,
            },
        )?;
        return match t.exit_code {
            Some(0) => Ok(()),
            _ => Err(file_error(t.output)),
        };
    }
    if let Some(s) = inner.sandbox.native_mut() {
        return Ok(s.write_file(path, data, mode)?);
    }
    #[cfg(feature = "wasm")]
    if let Some(s) = inner.sandbox.wasm_mut() {
        return s.write_file(path, data).map_err(wasm_file_error);
    }
    Err(ApiError::conflict("this sandbox has no file API"))
}

/// Delete a file or symlink.
#[utoipa::path(delete, path = "/v1/sandboxes/{id}/files", tag = "files",
    params(("id" = String, Path, description = "sandbox id"), PathQuery),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn remove(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<PathQuery>,
) -> ApiResult<StatusCode> {
    let live = st.sandbox(&view, &id)?;
    let path = file_path(&q)?;
    blocking(move || {
        live.with(|inner| {
            if let Some(ep) = inner.episode.as_mut() {
                let t = task_step(
                    &live,
                    &mut inner.sandbox,
                    ep,
                    &AgentAction::Delete { path: path.clone() },
                )?;
                if t.exit_code != Some(0) {
                    return Err(file_error(t.output));
                }
            } else if let Some(s) = inner.sandbox.native_mut() {
                s.delete_file(&path)?;
            } else {
                #[cfg(feature = "wasm")]
                if let Some(s) = inner.sandbox.wasm_mut() {
                    s.delete_file(&path).map_err(wasm_file_error)?;
                }
            }
            live.steps.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// List a directory.
#[utoipa::path(get, path = "/v1/sandboxes/{id}/dir", tag = "files",
    params(("id" = String, Path, description = "sandbox id"), DirQuery),
    responses((status = 200, body = DirListing), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn listdir(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<DirQuery>,
) -> ApiResult<axum::Json<DirListing>> {
    let live = st.sandbox(&view, &id)?;
    let path = archive::workspace_path(q.path.as_deref().unwrap_or(""))?;
    blocking(move || {
        live.with(|inner| {
            let s = inner.sandbox.native_mut().ok_or_else(|| {
                ApiError::conflict(
                    "a WebAssembly session has no directory listing; read files by name",
                )
            })?;
            let entries = s
                .list_dir(&path)?
                .into_iter()
                .map(|e| DirEntry {
                    name: e.name,
                    kind: e.kind,
                    size: e.size,
                })
                .collect();
            Ok(DirListing { entries })
        })
    })
    .await
    .map(axum::Json)
}

/// Upload a directory as a tar stream.
#[utoipa::path(put, path = "/v1/sandboxes/{id}/archive", tag = "files",
    params(("id" = String, Path, description = "sandbox id"), DirQuery),
    request_body(content = Vec<u8>, content_type = "application/x-tar"),
    responses((status = 200, body = UploadResponse), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn upload(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<DirQuery>,
    RawBody(body): RawBody,
) -> ApiResult<axum::Json<UploadResponse>> {
    let live = st.sandbox(&view, &id)?;
    let dir = archive::workspace_path(q.path.as_deref().unwrap_or(""))?;
    blocking(move || {
        let entries = archive::read_entries(&body, crate::snapshots::MAX_ARCHIVE_ENTRIES)?;
        let join = |p: &str| {
            if dir.is_empty() {
                p.to_owned()
            } else {
                format!("{dir}/{p}")
            }
        };
        live.with(|inner| {
            if inner.episode.is_some() {
                return Err(ApiError::conflict(
                    "a task sandbox changes only through task actions; write files one by one",
                ));
            }
            let s = inner.sandbox.native_mut().ok_or_else(|| {
                ApiError::conflict("a WebAssembly session takes files one by one")
            })?;
            let mut files = 0;
            for e in &entries {
                match e {
                    archive::Entry::Dir(_) => {}
                    archive::Entry::File { path, mode, data } => {
                        s.write_file(&join(path), data, *mode)?;
                        files += 1;
                    }
                    archive::Entry::Symlink { path, target } => {
                        let q = arbor_runtime::state::shell_quote;
                        let p = join(path);
                        let cmd = format!(
                            "mkdir -p -- \"$(dirname -- {})\" && ln -sfn -- {} {}",
                            q(&p),
                            q(target),
                            q(&p)
                        );
                        let r =
                            s.exec(&format!("cd /workspace && {cmd}"), &ExecOptions::default())?;
                        if r.code() != Some(0) {
                            return Err(ApiError::bad_request(format!(
                                "archive: symlink {path:?}: {}",
                                String::from_utf8_lossy(&r.stderr).trim()
                            )));
                        }
                        files += 1;
                    }
                }
            }
            live.steps.fetch_add(1, Ordering::Relaxed);
            Ok(UploadResponse { files })
        })
    })
    .await
    .map(axum::Json)
}

/// Download a directory as a tar stream of its files (symlinks are left
/// out and counted in `x-arbor-skipped-symlinks`).
#[utoipa::path(get, path = "/v1/sandboxes/{id}/archive", tag = "files",
    params(("id" = String, Path, description = "sandbox id"), DirQuery),
    responses((status = 200, description = "a tar stream", content_type = "application/x-tar", body = Vec<u8>),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn download(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<DirQuery>,
) -> ApiResult<Response> {
    let live = st.sandbox(&view, &id)?;
    let dir = archive::workspace_path(q.path.as_deref().unwrap_or(""))?;
    let cap = st.cfg.max_body;
    let (tar, skipped) = blocking(move || {
        live.with(|inner| {
            let s = inner.sandbox.native_mut().ok_or_else(|| {
                ApiError::conflict("a WebAssembly session has no directory listing")
            })?;
            let mut files = Vec::new();
            let mut skipped = 0usize;
            let mut total = 0usize;
            let mut stack = vec![String::new()];
            while let Some(rel) = stack.pop() {
                let here = match (dir.is_empty(), rel.is_empty()) {
                    (true, _) => rel.clone(),
                    (false, true) => dir.clone(),
                    (false, false) => format!("{dir}/{rel}"),
                };
                for e in s.list_dir(&here)? {
                    let child = if rel.is_empty() {
                        e.name.clone()
                    } else {
                        format!("{rel}/{}", e.name)
                    };
                    let full = if here.is_empty() {
                        e.name.clone()
                    } else {
                        format!("{here}/{}", e.name)
                    };
                    match e.kind.as_str() {
                        "dir" => stack.push(child),
                        "file" => {
                            let data = s.read_file(&full)?;
                            total += data.len();
                            if total > cap {
                                return Err(ApiError::too_large(format!(
                                    "the directory holds more than {cap} bytes (the server's --max-body); download a subdirectory"
                                )));
                            }
                            files.push((child, 0o644, data));
                        }
                        _ => skipped += 1,
                    }
                }
            }
            files.sort_by(|a, b| a.0.cmp(&b.0));
            Ok((archive::build(&files)?, skipped))
        })
    })
    .await?;
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-tar".to_owned()),
            (
                header::HeaderName::from_static("x-arbor-skipped-symlinks"),
                skipped.to_string(),
            ),
        ],
        tar,
    )
        .into_response())
}

/// Snapshot a sandbox (it goes on from the new snapshot).
#[utoipa::path(post, path = "/v1/sandboxes/{id}/snapshot", tag = "sandboxes",
    params(("id" = String, Path, description = "sandbox id")),
    request_body(content = Option<SnapshotRequest>, content_type = "application/json"),
    responses((status = 201, body = SnapshotInfo), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn snapshot(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(id): ApiPath<String>,
    OptionalJson(req): OptionalJson<SnapshotRequest>,
) -> ApiResult<(StatusCode, axum::Json<SnapshotInfo>)> {
    let live = st.sandbox(&view, &id)?;
    if let Some(t) = &req.tag {
        crate::tenants::check_tag(t)?;
    }
    let info = blocking(move || {
        let snap = live.with(|inner| Ok(inner.sandbox.snapshot()?))?;
        view.adopt(snap.id())?;
        if let Some(t) = &req.tag {
            set_tag(&st, &view, &snap, t)?;
        }
        Metrics::add(&st.metrics.snapshots, 1);
        snapshot_info(&st, &view, &snap)
    })
    .await?;
    Ok((StatusCode::CREATED, axum::Json(info)))
}

/// Snapshot a sandbox and open `n` sandboxes on that snapshot (a task
/// sandbox's forks continue its episode).
#[utoipa::path(post, path = "/v1/sandboxes/{id}/fork", tag = "sandboxes",
    params(("id" = String, Path, description = "sandbox id")), request_body = ForkRequest,
    responses((status = 201, body = SandboxFork), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn fork(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<ForkRequest>,
) -> ApiResult<(StatusCode, axum::Json<SandboxFork>)> {
    let live = st.sandbox(&view, &id)?;
    // Checked before the snapshot, so a bad `n` changes nothing.
    check_fork_n(req.n)?;
    let (snap, episode, info) = {
        let (st, view) = (Arc::clone(&st), Arc::clone(&view));
        blocking(move || {
            let (snap, episode) = live.with(|inner| {
                let snap = inner.sandbox.snapshot()?;
                let episode = inner
                    .episode
                    .clone()
                    .map(|e| (e, live.observation().unwrap_or_default()));
                Ok((snap, episode))
            })?;
            view.adopt(snap.id())?;
            Metrics::add(&st.metrics.snapshots, 1);
            let info = snapshot_info(&st, &view, &snap)?;
            Ok((snap, episode, info))
        })
        .await?
    };
    let made = fork_snapshot(&st, &view, snap, episode, req.n, req.ttl_s).await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(SandboxFork {
            snapshot: info,
            sandboxes: made.iter().map(|l| self::info(l)).collect(),
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(v: serde_json::Value) -> ExecRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn exec_requests_compose_into_one_recorded_step() {
        let (t, ms) = compose(Backend::Native, &req(serde_json::json!({"command": "ls"}))).unwrap();
        assert_eq!((t.as_str(), ms), ("ls", 60_000));
        let (t, _) = compose(
            Backend::Native,
            &req(serde_json::json!({"argv": ["echo", "a b", "it's"]})),
        )
        .unwrap();
        assert_eq!(
            t,
            Backend::Native.step_text(&["echo".into(), "a b".into(), "it's".into()])
        );
        let (t, ms) = compose(
            Backend::Native,
            &req(serde_json::json!({"command": "pwd", "cwd": "src", "env": {"K": "v w"}, "stdin": "hi", "timeout_s": 1.5})),
        )
        .unwrap();
        assert_eq!(ms, 1500);
        assert!(t.starts_with("printf '%s' 'aGk=' | base64 -d | ( export K='v w'; cd -- /workspace/src || exit 1; {\npwd\n} )"), "{t}");
        for (bad, code) in [
            (serde_json::json!({}), "bad_request"),
            (
                serde_json::json!({"command": "a", "argv": ["b"]}),
                "bad_request",
            ),
            (serde_json::json!({"argv": []}), "bad_request"),
            (
                serde_json::json!({"command": "a", "cwd": "../x"}),
                "bad_request",
            ),
            (
                serde_json::json!({"command": "a", "env": {"1A": "x"}}),
                "bad_request",
            ),
            (
                serde_json::json!({"command": "a", "timeout_s": -1}),
                "bad_request",
            ),
            (
                serde_json::json!({"command": "a", "stdin_b64": "!!"}),
                "bad_request",
            ),
            (
                serde_json::json!({"command": "a", "stdin": "x".repeat(MAX_STDIN + 1)}),
                "payload_too_large",
            ),
        ] {
            let e = compose(Backend::Native, &req(bad.clone())).unwrap_err();
            assert_eq!(e.code, code, "{bad}: {e}");
        }
        let e = compose(
            Backend::Wasm,
            &req(serde_json::json!({"command": "1", "cwd": "a"})),
        )
        .unwrap_err();
        assert_eq!(e.code, "conflict");
    }

    #[test]
    fn utf8_chunks_never_split_a_character() {
        let mut u = Utf8Chunks::default();
        let bytes = "aé€".as_bytes();
        let mut text = String::new();
        for b in bytes {
            text.push_str(&u.push(std::slice::from_ref(b)));
        }
        assert_eq!(text, "aé€");
        assert_eq!(u.push(&[0xff, b'x']), "\u{fffd}x");
    }
}
