//! Snapshot, task, rollout and server routes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::Serialize;

use arbor_envs::rollout::credit::CreditConfig;
use arbor_envs::rollout::driver::{DriverConfig, Progress, Strategy, run_tree};
use arbor_envs::rollout::export::records;
use arbor_envs::rollout::policy::{Policy, builtin};
use arbor_runtime::replay::ReplayOptions;
use arbor_runtime::store::object::SnapshotId;
use arbor_runtime::{AnySnapshot, Backend};

use crate::archive;
use crate::error::{ApiError, ApiResult, ErrorBody, join_error};
use crate::extract::{ApiJson, ApiPath, ApiQuery, OptionalJson, RawBody};
use crate::metrics::Metrics;
use crate::sandboxes::{fork_snapshot, info as sandbox_info};
use crate::state::AppState;
use crate::tenants::{View, check_tag};
use crate::types::{
    DiffQuery, DiffResponse, ForkRequest, Health, LogEntry, LogResponse, ReplayRequest,
    ReplayResponse, RolloutRequest, SandboxList, SnapshotInfo, SnapshotList, TagQuery, TaskDetail,
    TaskList, TaskSummary,
};

/// Most entries an imported archive may hold.
pub const MAX_ARCHIVE_ENTRIES: usize = 200_000;

/// Run `f` on a blocking thread.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(f).await.map_err(join_error)?
}

/// The API form of a snapshot, with the tenant's tags on it.
///
/// # Errors
/// When the store's tags cannot be read.
pub fn snapshot_info(st: &AppState, view: &View, snap: &AnySnapshot) -> ApiResult<SnapshotInfo> {
    Ok(info_with_tags(&view.tags(&st.runtime)?, snap))
}

/// The API form of a snapshot, given the tenant's tags.
fn info_with_tags(tags: &BTreeMap<String, SnapshotId>, snap: &AnySnapshot) -> SnapshotInfo {
    let tags = tags
        .iter()
        .filter(|(_, id)| *id == snap.id())
        .map(|(t, _)| t.clone())
        .collect();
    SnapshotInfo {
        id: snap.id().to_hex(),
        short: snap.id().short(),
        tags,
        backend: snap.backend().name().to_owned(),
        parent: snap.parent().map(|p| p.to_hex()),
        created_at: snap.created_at(),
        summary: snap.summary(),
    }
}

/// Tag `snap` with the tenant's `tag` (checked).
///
/// # Errors
/// 400 for a bad tag; the store's failure.
pub fn set_tag(st: &AppState, view: &View, snap: &AnySnapshot, tag: &str) -> ApiResult<()> {
    check_tag(tag)?;
    st.runtime
        .store()
        .set_tag(&view.store_tag(tag), snap.id())
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// Health.
#[utoipa::path(get, path = "/v1/health", tag = "server",
    responses((status = 200, body = Health)))]
pub async fn health(State(st): State<Arc<AppState>>) -> axum::Json<Health> {
    let mut backends = vec![Backend::Native.name().to_owned()];
    if cfg!(feature = "wasm") {
        backends.push("wasm".to_owned());
    }
    axum::Json(Health {
        status: if st.stopping.load(Ordering::SeqCst) {
            "stopping"
        } else {
            "ok"
        }
        .to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        sandboxes_live: st.live_count(),
        backends,
    })
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/v1/metrics", tag = "server",
    responses((status = 200, description = "Prometheus text exposition", content_type = "text/plain")))]
pub async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        st.metrics.render(st.live_count()),
    )
        .into_response()
}

/// Import a directory, sent as a tar stream.
#[utoipa::path(post, path = "/v1/snapshots", tag = "snapshots", params(TagQuery),
    request_body(content = Vec<u8>, content_type = "application/x-tar", description = "a tar of the directory"),
    responses((status = 201, body = SnapshotInfo), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn import(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiQuery(q): ApiQuery<TagQuery>,
    RawBody(body): RawBody,
) -> ApiResult<(StatusCode, axum::Json<SnapshotInfo>)> {
    if let Some(t) = &q.tag {
        check_tag(t)?;
    }
    let info = blocking(move || {
        let entries = archive::read_entries(&body, MAX_ARCHIVE_ENTRIES)?;
        let staging = tempfile::Builder::new()
            .prefix("import-")
            .tempdir_in(st.runtime.store().tmp_dir())
            .map_err(|e| ApiError::internal(format!("staging directory: {e}")))?;
        archive::extract(&entries, staging.path())?;
        let snap = st.runtime.import(staging.path(), None)?;
        let snap = AnySnapshot::Native(snap);
        view.adopt(snap.id())?;
        if let Some(t) = &q.tag {
            set_tag(&st, &view, &snap, t)?;
        }
        Metrics::add(&st.metrics.snapshots, 1);
        snapshot_info(&st, &view, &snap)
    })
    .await?;
    Ok((StatusCode::CREATED, axum::Json(info)))
}

/// The tenant's snapshots, newest first.
#[utoipa::path(get, path = "/v1/snapshots", tag = "snapshots",
    responses((status = 200, body = SnapshotList)))]
pub async fn list(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
) -> ApiResult<axum::Json<SnapshotList>> {
    blocking(move || {
        let tags = view.tags(&st.runtime)?;
        let mut out = Vec::new();
        for id in view.visible(&st.runtime)? {
            if let Ok(snap) = st.runtime.load_any(&id) {
                out.push(info_with_tags(&tags, &snap));
            }
        }
        out.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
        Ok(axum::Json(SnapshotList { snapshots: out }))
    })
    .await
}

/// One snapshot.
#[utoipa::path(get, path = "/v1/snapshots/{ref}", tag = "snapshots",
    params(("ref" = String, Path, description = "id, unique prefix (4+ hex) or tag")),
    responses((status = 200, body = SnapshotInfo), (status = 404, body = ErrorBody)))]
pub async fn get(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(what): ApiPath<String>,
) -> ApiResult<axum::Json<SnapshotInfo>> {
    blocking(move || {
        let snap = view.resolve(&st.runtime, &what)?;
        snapshot_info(&st, &view, &snap).map(axum::Json)
    })
    .await
}

/// Create or move a tag.
#[utoipa::path(put, path = "/v1/snapshots/{ref}/tags/{tag}", tag = "snapshots",
    params(("ref" = String, Path, description = "id, prefix or tag"), ("tag" = String, Path, description = "the tag")),
    responses((status = 200, body = SnapshotInfo), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn tag(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath((what, tag)): ApiPath<(String, String)>,
) -> ApiResult<axum::Json<SnapshotInfo>> {
    blocking(move || {
        check_tag(&tag)?;
        let snap = view.resolve(&st.runtime, &what)?;
        set_tag(&st, &view, &snap, &tag)?;
        snapshot_info(&st, &view, &snap).map(axum::Json)
    })
    .await
}

/// Unlist a snapshot and delete the tenant's tags on it.
#[utoipa::path(delete, path = "/v1/snapshots/{ref}", tag = "snapshots",
    params(("ref" = String, Path, description = "id, prefix or tag")),
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn delete(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(what): ApiPath<String>,
) -> ApiResult<StatusCode> {
    blocking(move || {
        let snap = view.resolve(&st.runtime, &what)?;
        let store = st.runtime.store();
        for (t, id) in view.tags(&st.runtime)? {
            if id == *snap.id() {
                store
                    .delete_tag(&view.store_tag(&t))
                    .map_err(|e| ApiError::internal(e.to_string()))?;
            }
        }
        // Another tenant's tags keep it listed for them: unlist only when
        // no store tag points at it any more.
        let still_tagged = store
            .tags()
            .map_err(|e| ApiError::internal(e.to_string()))?
            .values()
            .any(|id| id == snap.id());
        if view.unrestricted || !still_tagged {
            store
                .remove_snapshot(snap.id())
                .map_err(|e| ApiError::internal(e.to_string()))?;
        }
        Ok(StatusCode::NO_CONTENT)
    })
    .await
}

/// Open `n` sandboxes on a snapshot.
#[utoipa::path(post, path = "/v1/snapshots/{ref}/fork", tag = "snapshots",
    params(("ref" = String, Path, description = "id, prefix or tag")),
    request_body = ForkRequest,
    responses((status = 201, body = SandboxList), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn fork(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(what): ApiPath<String>,
    ApiJson(req): ApiJson<ForkRequest>,
) -> ApiResult<(StatusCode, axum::Json<SandboxList>)> {
    let snap = {
        let (st, view) = (Arc::clone(&st), Arc::clone(&view));
        blocking(move || view.resolve(&st.runtime, &what)).await?
    };
    let made = fork_snapshot(&st, &view, snap, None, req.n, req.ttl_s).await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(SandboxList {
            sandboxes: made.iter().map(|l| sandbox_info(l)).collect(),
        }),
    ))
}

/// A snapshot's chain, root first.
#[utoipa::path(get, path = "/v1/snapshots/{ref}/log", tag = "snapshots",
    params(("ref" = String, Path, description = "id, prefix or tag")),
    responses((status = 200, body = LogResponse), (status = 404, body = ErrorBody)))]
pub async fn log(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(what): ApiPath<String>,
) -> ApiResult<axum::Json<LogResponse>> {
    blocking(move || {
        let snap = view.resolve(&st.runtime, &what)?;
        let entries = snap
            .chain()?
            .iter()
            .map(|s| LogEntry {
                id: s.id().to_hex(),
                summary: s.summary(),
                exits: s.outcomes().iter().map(|o| o.shell_code()).collect(),
                created_at: s.created_at(),
            })
            .collect();
        Ok(axum::Json(LogResponse { entries }))
    })
    .await
}

/// How two snapshots' workspaces differ.
#[utoipa::path(get, path = "/v1/snapshots/{ref}/diff", tag = "snapshots",
    params(("ref" = String, Path, description = "id, prefix or tag"), DiffQuery),
    responses((status = 200, body = DiffResponse), (status = 404, body = ErrorBody)))]
pub async fn diff(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(what): ApiPath<String>,
    ApiQuery(q): ApiQuery<DiffQuery>,
) -> ApiResult<axum::Json<DiffResponse>> {
    blocking(move || {
        let a = view.resolve(&st.runtime, &what)?;
        let b = view.resolve(&st.runtime, &q.to)?;
        if a.backend() != b.backend() {
            return Err(ApiError::conflict(format!(
                "cannot diff a {} snapshot against a {} one",
                a.backend().name(),
                b.backend().name()
            )));
        }
        let d = a.diff(&b)?;
        Ok(axum::Json(DiffResponse {
            added: d.workspace.added,
            modified: d.workspace.modified,
            deleted: d.workspace.deleted,
        }))
    })
    .await
}

/// Replay a snapshot's chain and compare every observation.
#[utoipa::path(post, path = "/v1/snapshots/{ref}/replay", tag = "snapshots",
    params(("ref" = String, Path, description = "id, prefix or tag")),
    request_body(content = Option<ReplayRequest>, content_type = "application/json"),
    responses((status = 200, body = ReplayResponse), (status = 404, body = ErrorBody)))]
pub async fn replay(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiPath(what): ApiPath<String>,
    OptionalJson(req): OptionalJson<ReplayRequest>,
) -> ApiResult<axum::Json<ReplayResponse>> {
    blocking(move || {
        let snap = view.resolve(&st.runtime, &what)?;
        let report = st.in_flight(|| snap.replay(ReplayOptions { strict: req.strict }))?;
        // The replayed state is the tenant's too.
        view.adopt(&report.replayed)?;
        let divergence = report
            .first_divergence()
            .map(|d| serde_json::to_value(d).unwrap_or(serde_json::Value::Null));
        Ok(axum::Json(ReplayResponse {
            identical: report.identical,
            actions: report.actions,
            divergence,
            report: serde_json::to_value(&report)
                .map_err(|e| ApiError::internal(format!("encode the report: {e}")))?,
        }))
    })
    .await
}

fn task_summary(st: &AppState, t: &arbor_envs::TaskSpec) -> TaskSummary {
    TaskSummary {
        id: t.id.clone(),
        family: t.family.to_string(),
        backend: t.backend.to_string(),
        group: t.group.clone(),
        difficulty: format!("{:?}", t.difficulty).to_lowercase(),
        split: st.suite.split_of(&t.id).map(str::to_owned),
        candidates: t.candidates.len(),
        max_steps: t.limits.max_steps,
    }
}

/// The task suite.
#[utoipa::path(get, path = "/v1/tasks", tag = "tasks",
    responses((status = 200, body = TaskList)))]
pub async fn tasks(State(st): State<Arc<AppState>>) -> axum::Json<TaskList> {
    axum::Json(TaskList {
        tasks: st
            .suite
            .tasks
            .values()
            .map(|t| task_summary(&st, t))
            .collect(),
    })
}

/// One task.
#[utoipa::path(get, path = "/v1/tasks/{id}", tag = "tasks",
    params(("id" = String, Path, description = "task id")),
    responses((status = 200, body = TaskDetail), (status = 404, body = ErrorBody)))]
pub async fn task(
    State(st): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<TaskDetail>> {
    let t = st
        .suite
        .get(&id)
        .ok_or_else(|| ApiError::not_found(format!("no task {id:?}")))?;
    let s = task_summary(&st, t);
    Ok(axum::Json(TaskDetail {
        id: s.id,
        family: s.family,
        backend: s.backend,
        group: s.group,
        difficulty: s.difficulty,
        split: s.split,
        instructions: t.instructions.clone(),
        limits: t.limits.value(),
        candidates: t.candidates.iter().map(|c| c.action.value()).collect(),
        gold: t.gold.iter().map(ToValue::value).collect(),
    }))
}

/// Serialize to a JSON value (a value that does not serialize is `null`).
trait ToValue {
    fn value(&self) -> serde_json::Value;
}

impl<T: Serialize> ToValue for T {
    fn value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// One line of a rollout stream.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum RolloutEvent {
    Progress {
        actions: u64,
        verifier_runs: u64,
        forks: u64,
        leaves: u64,
        successes: u64,
    },
    Record {
        record: serde_json::Value,
    },
    Done {
        tree: serde_json::Value,
    },
    Error {
        error: crate::error::ErrorDetail,
    },
}

/// An NDJSON line.
pub fn ndjson_line(v: &impl Serialize) -> bytes::Bytes {
    let mut line = serde_json::to_vec(v).unwrap_or_else(|_| b"{}".to_vec());
    line.push(b'\n');
    bytes::Bytes::from(line)
}

/// Grow a rollout tree and stream its advantage records.
#[utoipa::path(post, path = "/v1/rollouts", tag = "rollouts", request_body = RolloutRequest,
    responses((status = 200, description = "NDJSON: progress lines, one record per edge, then done", content_type = "application/x-ndjson"),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn rollout(
    State(st): State<Arc<AppState>>,
    Extension(view): Extension<Arc<View>>,
    ApiJson(req): ApiJson<RolloutRequest>,
) -> ApiResult<Response> {
    if req.budget == 0 || req.budget > 5000 {
        return Err(ApiError::bad_request(format!(
            "budget = {} must be from 1 to 5000",
            req.budget
        )));
    }
    if req.policy.starts_with("command:") {
        return Err(ApiError::bad_request(
            "`command:` policies run host processes and are refused by the server; drive the sandboxes from your own process instead",
        ));
    }
    if req.policy.starts_with("openai:") {
        return Err(ApiError::bad_request(
            "`openai:` policies make the server call a URL of the request's choosing and are refused by the server; run `arbor rollout --policy openai:...` on the machine that can reach the model",
        ));
    }
    let strategy: Strategy = req.strategy.parse().map_err(ApiError::bad_request)?;
    let policy: Arc<dyn Policy> = Arc::from(builtin(&req.policy).map_err(ApiError::bad_request)?);
    let env = {
        let (st, task) = (Arc::clone(&st), req.task.clone());
        blocking(move || st.environment(&task)).await?
    };
    let mut cfg = DriverConfig::new(req.budget, strategy);
    cfg.seed = req.seed;
    let progress = Arc::new(Progress::default());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<bytes::Bytes>();
    let ticker = {
        let (progress, tx) = (Arc::clone(&progress), tx.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                let line = ndjson_line(&RolloutEvent::Progress {
                    actions: progress.actions.load(Ordering::Relaxed),
                    verifier_runs: progress.verifier_runs.load(Ordering::Relaxed),
                    forks: progress.forks.load(Ordering::Relaxed),
                    leaves: progress.leaves.load(Ordering::Relaxed),
                    successes: progress.successes.load(Ordering::Relaxed),
                });
                if tx.send(line).is_err() {
                    break;
                }
            }
        })
    };
    tokio::spawn(async move {
        let result = run_tree(env, policy, &cfg, progress).await;
        ticker.abort();
        match result {
            Ok(tree) => {
                for n in &tree.nodes {
                    if let Ok(id) = n.snapshot.parse() {
                        let _ = view.adopt(&id);
                    }
                }
                match records(&tree, &CreditConfig::default()) {
                    Ok(recs) => {
                        for r in &recs {
                            let _ =
                                tx.send(ndjson_line(&RolloutEvent::Record { record: r.value() }));
                        }
                        let summary = serde_json::json!({
                            "task": tree.task,
                            "policy": tree.policy,
                            "strategy": tree.strategy,
                            "seed": tree.seed,
                            "nodes": tree.nodes.len(),
                            "edges": tree.edges.len(),
                            "leaves": tree.graded_leaves().count(),
                            "root": tree.nodes.first().map(|n| n.snapshot.clone()),
                            "stats": tree.stats.value(),
                        });
                        let _ = tx.send(ndjson_line(&RolloutEvent::Done { tree: summary }));
                    }
                    Err(e) => {
                        let _ = tx.send(ndjson_line(&RolloutEvent::Error {
                            error: ApiError::internal(e.to_string()).body().error,
                        }));
                    }
                }
            }
            Err(e) => {
                let _ = tx.send(ndjson_line(&RolloutEvent::Error {
                    error: ApiError::internal(e.to_string()).body().error,
                }));
            }
        }
    });
    let stream = tokio_stream_of(rx).map(Ok::<_, std::convert::Infallible>);
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(stream),
    )
        .into_response())
}

/// A stream over an unbounded receiver.
pub fn tokio_stream_of<T: Send + 'static>(
    rx: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> impl futures_util::Stream<Item = T> + Send {
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) })
}
