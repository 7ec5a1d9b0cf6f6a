//! `arbor serve`: Arbor's sandboxes, snapshots, forks, tasks and rollouts
//! over HTTP/1.1 + JSON (NDJSON for streams), on a Unix socket and/or TCP.
//! The contract is `server/API.md`; the OpenAPI document generated from
//! the handlers' types is served at `/v1/openapi.json`.
//!
//! Every runtime operation runs on a blocking thread; each live sandbox has
//! its own lock, so requests on different sandboxes run in parallel and
//! requests on one sandbox run in order.

#![deny(missing_docs)]

pub mod archive;
pub mod error;
mod extract;
pub mod metrics;
mod sandboxes;
mod snapshots;
pub mod state;
pub mod tenants;
pub mod types;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use utoipa::OpenApi;

use arbor_runtime::Runtime;

pub use error::ApiError;
use state::AppState;

/// How `arbor serve` runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Listen on this Unix socket.
    pub unix: Option<PathBuf>,
    /// Listen on this TCP address (port 0: any free port).
    pub listen: Option<SocketAddr>,
    /// Tenants' tokens (`name token` per line); none: one `local` tenant.
    pub tokens: Option<PathBuf>,
    /// The task suite (default: the bundled one).
    pub tasks: Option<PathBuf>,
    /// Live sandboxes per tenant.
    pub max_sandboxes: usize,
    /// Sandbox creations per second per tenant.
    pub creates_per_second: Option<f64>,
    /// Default sandbox TTL.
    pub ttl: Duration,
    /// Longest TTL a client may ask for.
    pub max_ttl: Duration,
    /// Largest request body.
    pub max_body: usize,
    /// How long in-flight requests get to finish on SIGTERM.
    pub grace: Duration,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            unix: None,
            listen: None,
            tokens: None,
            tasks: None,
            max_sandboxes: 256,
            creates_per_second: None,
            ttl: Duration::from_secs(3600),
            max_ttl: Duration::from_secs(24 * 3600),
            max_body: 64 << 20,
            grace: Duration::from_secs(10),
        }
    }
}

/// The OpenAPI document.
#[derive(Debug, OpenApi)]
#[openapi(
    info(title = "Arbor", description = "Copy-on-write sandboxes, snapshots, forks, replay, tasks and rollouts for agent environments. See server/API.md."),
    paths(
        snapshots::health, snapshots::metrics,
        snapshots::import, snapshots::list, snapshots::get, snapshots::tag, snapshots::delete,
        snapshots::fork, snapshots::log, snapshots::diff, snapshots::replay,
        sandboxes::create, sandboxes::list, sandboxes::get, sandboxes::close,
        sandboxes::exec, sandboxes::exec_stream, sandboxes::step, sandboxes::verify,
        sandboxes::read, sandboxes::write, sandboxes::remove, sandboxes::listdir,
        sandboxes::upload, sandboxes::download, sandboxes::snapshot, sandboxes::fork,
        snapshots::tasks, snapshots::task, snapshots::rollout,
    ),
    components(schemas(error::ErrorBody, error::ErrorDetail)),
    modifiers(&BearerAuth),
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        openapi.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new(
            "bearer",
            Vec::<String>::new(),
        )]);
    }
}

async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        ApiDoc::openapi().to_json().unwrap_or_default(),
    )
        .into_response()
}

async fn not_found(req: Request) -> ApiError {
    ApiError::not_found(format!("no route {} {}", req.method(), req.uri().path()))
}

async fn method_not_allowed(req: Request) -> ApiError {
    ApiError::method_not_allowed(format!(
        "{} is not a method of {}",
        req.method(),
        req.uri().path()
    ))
}

/// Authentication, shutdown refusal and metrics around every request.
async fn around(State(st): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    let start = Instant::now();
    let verb = format!(
        "{} {}",
        req.method(),
        req.extensions()
            .get::<MatchedPath>()
            .map_or("unmatched", |p| p.as_str())
    );
    let path = req.uri().path().to_owned();
    let open = path == "/v1/health" || path == "/v1/openapi.json";
    // An error may leave the body unread (a refusal before the handler, an
    // extractor's rejection, an over-limit body): such a connection is
    // closed by the server after the answer, so the answer says so and the
    // client does not send its next request into a reset.
    let has_body = req.headers().contains_key(header::TRANSFER_ENCODING)
        || req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() != "0");
    let mut resp = if st.stopping.load(Ordering::SeqCst) && path != "/v1/health" {
        ApiError::unavailable("the server is shutting down").into_response()
    } else if open {
        next.run(req).await
    } else {
        let token = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        match st.authenticate(token) {
            Ok(view) => {
                req.extensions_mut().insert(view);
                next.run(req).await
            }
            Err(e) => e.into_response(),
        }
    };
    if has_body && (resp.status().is_client_error() || resp.status().is_server_error()) {
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    st.metrics
        .observe(&verb, resp.status().as_u16(), start.elapsed().as_secs_f64());
    resp
}

/// The routes over `state`.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/health", get(snapshots::health))
        .route("/v1/metrics", get(snapshots::metrics))
        .route("/v1/openapi.json", get(openapi))
        .route(
            "/v1/snapshots",
            post(snapshots::import).get(snapshots::list),
        )
        .route(
            "/v1/snapshots/{ref}",
            get(snapshots::get).delete(snapshots::delete),
        )
        .route("/v1/snapshots/{ref}/tags/{tag}", put(snapshots::tag))
        .route("/v1/snapshots/{ref}/fork", post(snapshots::fork))
        .route("/v1/snapshots/{ref}/log", get(snapshots::log))
        .route("/v1/snapshots/{ref}/diff", get(snapshots::diff))
        .route("/v1/snapshots/{ref}/replay", post(snapshots::replay))
        .route(
            "/v1/sandboxes",
            post(sandboxes::create).get(sandboxes::list),
        )
        .route(
            "/v1/sandboxes/{id}",
            get(sandboxes::get).delete(sandboxes::close),
        )
        .route("/v1/sandboxes/{id}/exec", post(sandboxes::exec))
        .route(
            "/v1/sandboxes/{id}/exec/stream",
            post(sandboxes::exec_stream),
        )
        .route("/v1/sandboxes/{id}/step", post(sandboxes::step))
        .route("/v1/sandboxes/{id}/verify", post(sandboxes::verify))
        .route(
            "/v1/sandboxes/{id}/files",
            get(sandboxes::read)
                .put(sandboxes::write)
                .delete(sandboxes::remove),
        )
        .route("/v1/sandboxes/{id}/dir", get(sandboxes::listdir))
        .route(
            "/v1/sandboxes/{id}/archive",
            get(sandboxes::download).put(sandboxes::upload),
        )
        .route("/v1/sandboxes/{id}/snapshot", post(sandboxes::snapshot))
        .route("/v1/sandboxes/{id}/fork", post(sandboxes::fork))
        .route("/v1/tasks", get(snapshots::tasks))
        .route("/v1/tasks/{id}", get(snapshots::task))
        .route("/v1/rollouts", post(snapshots::rollout))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .route_layer(middleware::from_fn_with_state(Arc::clone(&state), around))
        .layer(DefaultBodyLimit::disable())
        .with_state(state)
}

/// Serve `app` on `listener` until `stop` turns true, then finish the
/// connections gracefully.
async fn serve_until<L>(
    listener: L,
    app: Router,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<()>
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await
}

/// Why `serve` failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Bad configuration (no listener, an unreadable tokens file, …).
    #[error("{0}")]
    Config(String),
    /// A listener could not be bound or failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Serve until SIGTERM or SIGINT; then stop accepting, give in-flight
/// requests `grace` to finish, cancel the rest (their helpers are killed),
/// close every sandbox and return. Snapshots are durable as they are made,
/// so nothing is half-written.
///
/// # Errors
/// Configuration and listener failures.
pub async fn serve(runtime: Runtime, cfg: ServeConfig) -> Result<(), ServeError> {
    if cfg.unix.is_none() && cfg.listen.is_none() {
        return Err(ServeError::Config(
            "give --unix PATH and/or --listen ADDR".to_owned(),
        ));
    }
    if cfg.max_sandboxes == 0 {
        return Err(ServeError::Config(
            "--max-sandboxes must be at least 1".to_owned(),
        ));
    }
    if let Some(r) = cfg.creates_per_second
        && !(r.is_finite() && r > 0.0)
    {
        return Err(ServeError::Config(format!(
            "--creates-per-second {r} must be a positive number"
        )));
    }
    let grace = cfg.grace;
    let state = Arc::new(AppState::new(runtime, cfg.clone()).map_err(ServeError::Config)?);
    let app = router(Arc::clone(&state));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut servers = tokio::task::JoinSet::new();
    let mut addrs = Vec::new();
    if let Some(path) = &cfg.unix {
        if path.exists() {
            // A socket left by a server that is gone; a live one answers.
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(ServeError::Config(format!(
                    "{} is in use by a running server",
                    path.display()
                )));
            }
            let _ = std::fs::remove_file(path);
        }
        let l = tokio::net::UnixListener::bind(path).map_err(|source| ServeError::Io {
            what: format!("bind {}", path.display()),
            source,
        })?;
        addrs.push(format!("unix:{}", path.display()));
        servers.spawn(serve_until(l, app.clone(), stop_rx.clone()));
    }
    if let Some(addr) = cfg.listen {
        let l = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Io {
                what: format!("bind {addr}"),
                source,
            })?;
        let local = l.local_addr().map_err(|source| ServeError::Io {
            what: "read the bound address".to_owned(),
            source,
        })?;
        addrs.push(format!("http://{local}"));
        servers.spawn(serve_until(l, app.clone(), stop_rx.clone()));
    }
    // Where the kernel lacks Landlock, say so once (actions still run).
    eprintln!(
        "arbor serve: {}",
        arbor_runtime::sandbox::helper::landlock::describe()
    );
    eprintln!("arbor serve: listening on {}", addrs.join(", "));
    let reaper = {
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                state.reap_expired().await;
            }
        })
    };
    let signals = {
        let state = Arc::clone(&state);
        async move {
            use tokio::signal::unix::{SignalKind, signal};
            let mut term = signal(SignalKind::terminate())?;
            let mut int = signal(SignalKind::interrupt())?;
            let mut hup = signal(SignalKind::hangup())?;
            loop {
                tokio::select! {
                    _ = term.recv() => return Ok::<&str, std::io::Error>("SIGTERM"),
                    _ = int.recv() => return Ok("SIGINT"),
                    _ = hup.recv() => match state.reload_tokens() {
                        Ok(n) => eprintln!("arbor serve: SIGHUP: {n} tenants"),
                        Err(e) => eprintln!("arbor serve: SIGHUP: kept the old tokens: {e}"),
                    },
                }
            }
        }
    };
    let why = signals.await.map_err(|source| ServeError::Io {
        what: "install the signal handlers".to_owned(),
        source,
    })?;
    eprintln!(
        "arbor serve: {why}: stopping (grace {:.0}s, {} in flight, {} sandboxes)",
        grace.as_secs_f64(),
        state.in_flight.load(Ordering::SeqCst),
        state.live_count()
    );
    state.stopping.store(true, Ordering::SeqCst);
    let _ = stop_tx.send(true);
    let deadline = Instant::now() + grace;
    while state.in_flight.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    reaper.abort();
    // Whatever still runs is cancelled: killing the helpers ends the actions.
    let closed = {
        let state = Arc::clone(&state);
        tokio::task::spawn_blocking(move || state.close_all("was closed when the server stopped"))
            .await
            .unwrap_or(0)
    };
    // Connections still open (streams of cancelled actions) end now.
    let drain = tokio::time::timeout(Duration::from_secs(2), async {
        while servers.join_next().await.is_some() {}
    });
    let _ = drain.await;
    servers.abort_all();
    if let Some(path) = &cfg.unix {
        let _ = std::fs::remove_file(path);
    }
    eprintln!("arbor serve: stopped; closed {closed} sandboxes");
    Ok(())
}
