//! What the server holds between requests: the runtime, the live
//! sandboxes (each behind its own lock, used only on blocking threads), the
//! tenants' views and limits, the task environments, the metrics.

use std::collections::{HashMap, VecDeque};
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arbor_envs::Suite;
use arbor_rollout::{Environment, EpisodeStep};
use arbor_runtime::store::object::SnapshotId;
use arbor_runtime::{AnySandbox, AnySnapshot, Backend, Runtime};

use crate::ServeConfig;
use crate::error::{ApiError, ApiResult, join_error};
use crate::metrics::Metrics;
use crate::tenants::{LOCAL, Tokens, View, Views};

/// Seconds since the epoch, with fractions.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A task sandbox's episode: the environment, its root, the steps so far
/// (cloned for each fork, which continues it).
#[derive(Clone)]
pub struct Episode {
    /// The task's environment.
    pub env: Arc<dyn Environment>,
    /// The snapshot the episode started from.
    pub root: AnySnapshot,
    /// The steps taken, in order.
    pub steps: Vec<EpisodeStep>,
    /// Whether the episode is over (submitted or out of steps).
    pub done: bool,
}

impl std::fmt::Debug for Episode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Episode")
            .field("task", &self.env.id())
            .field("root", &self.root.id())
            .field("steps", &self.steps.len())
            .field("done", &self.done)
            .finish()
    }
}

/// What a live sandbox's lock guards.
#[derive(Debug)]
pub struct Inner {
    /// The sandbox.
    pub sandbox: AnySandbox,
    /// Its episode, for a task sandbox.
    pub episode: Option<Episode>,
}

/// One open sandbox.
#[derive(Debug)]
pub struct Live {
    /// `sb-` and 16 hex digits.
    pub id: String,
    /// The tenant that made it.
    pub tenant: String,
    /// The snapshot it was opened on.
    pub snapshot: SnapshotId,
    /// Its backend.
    pub backend: Backend,
    /// The task, for a task sandbox.
    pub task: Option<String>,
    /// When it was made (epoch seconds).
    pub created_at: f64,
    /// When its TTL ends (epoch seconds).
    pub expires_at: f64,
    /// The same, as a monotonic instant.
    pub deadline: Instant,
    /// Steps taken (execs, file writes and deletes, task steps).
    pub steps: AtomicU64,
    /// The helper process (native), killed to cancel a running action.
    pub helper_pid: Option<u32>,
    observation: Mutex<Option<String>>,
    /// Set when it leaves the table (why it is gone): requests that were
    /// already waiting for its lock then get the same 404 as later ones.
    gone: Mutex<Option<String>>,
    inner: Mutex<Option<Inner>>,
}

impl Live {
    /// A task sandbox's latest observation text.
    pub fn observation(&self) -> Option<String> {
        self.observation.lock().ok().and_then(|o| o.clone())
    }

    /// Note a task sandbox's latest observation.
    pub fn set_observation(&self, text: &str) {
        if let Ok(mut o) = self.observation.lock() {
            *o = Some(text.to_owned());
        }
    }

    /// Run `f` on the sandbox (on the calling, blocking thread).
    ///
    /// # Errors
    /// 404 when it was closed meanwhile; `f`'s error.
    pub fn with<T>(&self, f: impl FnOnce(&mut Inner) -> ApiResult<T>) -> ApiResult<T> {
        let mut guard = self
            .inner
            .lock()
            .map_err(|_| ApiError::internal(format!("sandbox {} lock poisoned", self.id)))?;
        if let Some(why) = self.gone.lock().ok().and_then(|g| g.clone()) {
            return Err(ApiError::not_found(format!("sandbox {} {why}", self.id)));
        }
        let result = match guard.as_mut() {
            Some(inner) => f(inner),
            None => Err(ApiError::not_found(format!(
                "sandbox {} was closed",
                self.id
            ))),
        };
        // An action cut short because the sandbox was closed under it (TTL,
        // shutdown) is reported as that, not as a runtime fault.
        match (result, self.gone.lock().ok().and_then(|g| g.clone())) {
            (Err(e), Some(why)) if e.code == "internal" => Err(ApiError::not_found(format!(
                "sandbox {} {why} while the request ran",
                self.id
            ))),
            (result, _) => result,
        }
    }

    /// Kill the helper, which ends whatever action is running.
    pub fn kill(&self) {
        if let Some(pid) = self.helper_pid.and_then(|p| i32::try_from(p).ok()) {
            // SAFETY: kill(2) with a pid the runtime spawned and has not yet
            // reaped (it is reaped when the sandbox is dropped, after this),
            // so the pid cannot have been reused.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }

    /// Close it: the sandbox is dropped, its helper, processes and mounts end.
    /// Blocks until a running action has ended; call [`kill`](Self::kill)
    /// first to cut it short.
    pub fn close(&self) {
        let taken = self.inner.lock().ok().and_then(|mut g| g.take());
        drop(taken);
    }
}

/// A token bucket: `rate` creations per second, bursts of `rate` (at least 1).
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Per-tenant bookkeeping of limits.
#[derive(Debug, Default)]
struct Quota {
    reserved: usize,
    bucket: Option<Bucket>,
}

/// A reservation of sandbox slots, released on drop.
#[derive(Debug)]
pub struct Reservation {
    state: Arc<AppState>,
    tenant: String,
    n: usize,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Ok(mut q) = self.state.quotas.lock()
            && let Some(q) = q.get_mut(&self.tenant)
        {
            q.reserved = q.reserved.saturating_sub(self.n);
        }
    }
}

/// How many closed sandbox ids keep their reason (oldest forgotten first).
const GONE_KEPT: usize = 100_000;

/// Closed sandboxes: id → (tenant, why), and the ids in closing order.
#[derive(Debug, Default)]
struct Gone {
    why: HashMap<String, (String, String)>,
    order: VecDeque<String>,
}

/// A task's environment, prepared once (its own lock, so preparing one
/// task does not hold up another).
type EnvSlot = Arc<Mutex<Option<Arc<dyn Environment>>>>;

/// The server's state.
pub struct AppState {
    /// The runtime over the store.
    pub runtime: Runtime,
    /// The configuration.
    pub cfg: ServeConfig,
    /// The tenants' tokens; `None`: one unrestricted `local` tenant.
    pub tokens: RwLock<Option<Tokens>>,
    /// The tenants' views.
    pub views: Views,
    /// Live sandboxes by id.
    pub sandboxes: Mutex<HashMap<String, Arc<Live>>>,
    gone: Mutex<Gone>,
    quotas: Mutex<HashMap<String, Quota>>,
    /// The task suite.
    pub suite: Suite,
    envs: Mutex<HashMap<String, EnvSlot>>,
    /// Metrics.
    pub metrics: Metrics,
    /// Set when shutdown begins: new requests get 503.
    pub stopping: AtomicBool,
    /// Actions in flight (execs, steps, verifications).
    pub in_flight: AtomicU64,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("home", &self.runtime.store().root())
            .field("live", &self.live_count())
            .field("stopping", &self.stopping)
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// The state over `runtime`.
    ///
    /// # Errors
    /// When the tokens file or the task suite cannot be loaded.
    pub fn new(runtime: Runtime, cfg: ServeConfig) -> Result<Self, String> {
        let tokens = cfg.tokens.as_deref().map(Tokens::load).transpose()?;
        let suite_dir = cfg
            .tasks
            .clone()
            .unwrap_or_else(arbor_envs::suite::bundled_dir);
        let suite = Suite::load(&suite_dir)
            .map_err(|e| format!("load the tasks in {}: {e}", suite_dir.display()))?;
        let views = Views::new(runtime.store().root().join("server").join("tenants"));
        Ok(Self {
            runtime,
            cfg,
            tokens: RwLock::new(tokens),
            views,
            sandboxes: Mutex::default(),
            gone: Mutex::default(),
            quotas: Mutex::default(),
            suite,
            envs: Mutex::default(),
            metrics: Metrics::default(),
            stopping: AtomicBool::new(false),
            in_flight: AtomicU64::new(0),
        })
    }

    /// Re-read the tokens file (SIGHUP).
    ///
    /// # Errors
    /// When it cannot be read or parsed: the old tokens stay.
    pub fn reload_tokens(&self) -> Result<usize, String> {
        let Some(path) = &self.cfg.tokens else {
            return Ok(0);
        };
        let t = Tokens::load(path)?;
        let n = t.len();
        if let Ok(mut tokens) = self.tokens.write() {
            *tokens = Some(t);
        }
        Ok(n)
    }

    /// Who a bearer token is.
    ///
    /// # Errors
    /// 401 when tokens are required and this one is missing or unknown.
    pub fn authenticate(&self, token: Option<&str>) -> ApiResult<Arc<View>> {
        let tokens = self
            .tokens
            .read()
            .map_err(|_| ApiError::internal("tokens lock poisoned"))?;
        match tokens.as_ref() {
            None => self.views.get(LOCAL, true),
            Some(t) => {
                let token = token.ok_or_else(|| {
                    ApiError::unauthorized("this server needs `Authorization: Bearer TOKEN`")
                })?;
                let name = t
                    .tenant(token)
                    .ok_or_else(|| ApiError::unauthorized("unknown bearer token"))?;
                self.views.get(name, false)
            }
        }
    }

    /// How many sandboxes are open.
    pub fn live_count(&self) -> usize {
        self.sandboxes.lock().map_or(0, |s| s.len())
    }

    /// Reserve `n` new sandboxes for `tenant` against its cap and rate.
    ///
    /// # Errors
    /// 429 with a Retry-After when either would be passed.
    pub fn reserve(self: &Arc<Self>, tenant: &str, n: usize) -> ApiResult<Reservation> {
        let live: Vec<f64> = {
            let s = self
                .sandboxes
                .lock()
                .map_err(|_| ApiError::internal("sandbox table lock poisoned"))?;
            s.values()
                .filter(|l| l.tenant == tenant)
                .map(|l| l.expires_at)
                .collect()
        };
        let mut quotas = self
            .quotas
            .lock()
            .map_err(|_| ApiError::internal("quota lock poisoned"))?;
        let q = quotas.entry(tenant.to_owned()).or_default();
        let max = self.cfg.max_sandboxes;
        if live.len() + q.reserved + n > max {
            // A slot frees when the tenant closes a sandbox (any moment) or
            // at the earliest expiry: come back within a second.
            let soonest = live.iter().copied().fold(f64::INFINITY, f64::min);
            let after = (soonest - now()).clamp(0.1, 1.0);
            return Err(ApiError::limit(
                format!(
                    "tenant {tenant} may hold at most {max} live sandboxes ({} open, {} being made, {n} asked for); close some or wait",
                    live.len(),
                    q.reserved
                ),
                after,
            ));
        }
        if let Some(rate) = self.cfg.creates_per_second {
            let burst = rate.max(1.0);
            let now = Instant::now();
            let b = q.bucket.get_or_insert(Bucket {
                tokens: burst,
                at: now,
            });
            b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * rate).min(burst);
            b.at = now;
            let need = n as f64;
            // A request larger than the burst may go when the bucket is full,
            // leaving a debt that later requests wait out.
            if b.tokens < need.min(burst) {
                let after = (need.min(burst) - b.tokens) / rate;
                return Err(ApiError::limit(
                    format!("tenant {tenant} may create {rate} sandboxes per second"),
                    after,
                ));
            }
            b.tokens -= need;
        }
        q.reserved += n;
        Ok(Reservation {
            state: Arc::clone(self),
            tenant: tenant.to_owned(),
            n,
        })
    }

    /// Register sandboxes made under `reservation` (consumed).
    pub fn admit(&self, made: Vec<Arc<Live>>, reservation: Reservation) {
        if let Ok(mut s) = self.sandboxes.lock() {
            for l in made {
                s.insert(l.id.clone(), l);
            }
        }
        drop(reservation);
    }

    /// The tenant's live sandbox `id`.
    ///
    /// # Errors
    /// 404 when there is none (or it is another tenant's); the message says
    /// when it expired or the server closed it.
    pub fn sandbox(&self, view: &View, id: &str) -> ApiResult<Arc<Live>> {
        if let Ok(s) = self.sandboxes.lock()
            && let Some(l) = s.get(id)
            && l.tenant == view.name
        {
            return Ok(Arc::clone(l));
        }
        if let Ok(g) = self.gone.lock()
            && let Some((tenant, why)) = g.why.get(id)
            && *tenant == view.name
        {
            return Err(ApiError::not_found(format!("sandbox {id} {why}")));
        }
        Err(ApiError::not_found(format!("no sandbox {id:?}")))
    }

    /// Take `id` out of the table, noting why; the caller closes it.
    pub fn remove(&self, id: &str, why: &str) -> Option<Arc<Live>> {
        let live = self.sandboxes.lock().ok()?.remove(id)?;
        if let Ok(mut g) = live.gone.lock() {
            *g = Some(why.to_owned());
        }
        if let Ok(mut g) = self.gone.lock() {
            g.why
                .insert(id.to_owned(), (live.tenant.clone(), why.to_owned()));
            g.order.push_back(id.to_owned());
            while g.order.len() > GONE_KEPT {
                if let Some(old) = g.order.pop_front() {
                    g.why.remove(&old);
                }
            }
        }
        Some(live)
    }

    /// A new live sandbox over `sandbox`.
    pub fn live(
        &self,
        tenant: &str,
        snapshot: SnapshotId,
        sandbox: AnySandbox,
        episode: Option<Episode>,
        observation: Option<String>,
        ttl_s: Option<f64>,
    ) -> ApiResult<Arc<Live>> {
        let ttl = match ttl_s {
            None => self.cfg.ttl,
            Some(t) if t.is_finite() && t > 0.0 => {
                Duration::from_secs_f64(t.min(self.cfg.max_ttl.as_secs_f64()))
            }
            Some(t) => {
                return Err(ApiError::bad_request(format!(
                    "ttl_s = {t} must be a positive number of seconds"
                )));
            }
        };
        let mut sandbox = sandbox;
        let helper_pid = sandbox.native_mut().map(|s| s.helper_pid());
        let created_at = now();
        Ok(Arc::new(Live {
            id: new_id()?,
            tenant: tenant.to_owned(),
            snapshot,
            backend: sandbox.backend(),
            task: episode.as_ref().map(|e| e.env.id().to_owned()),
            created_at,
            expires_at: created_at + ttl.as_secs_f64(),
            deadline: Instant::now() + ttl,
            steps: AtomicU64::new(0),
            helper_pid,
            observation: Mutex::new(observation),
            gone: Mutex::new(None),
            inner: Mutex::new(Some(Inner { sandbox, episode })),
        }))
    }

    /// The environment of task `id` (prepared on first use, then shared).
    ///
    /// # Errors
    /// 404 for an unknown task; the task's preparation failure.
    pub fn environment(&self, id: &str) -> ApiResult<Arc<dyn Environment>> {
        let spec = self
            .suite
            .get(id)
            .ok_or_else(|| ApiError::not_found(format!("no task {id:?}")))?
            .clone();
        let slot = {
            let mut envs = self
                .envs
                .lock()
                .map_err(|_| ApiError::internal("task table lock poisoned"))?;
            Arc::clone(envs.entry(id.to_owned()).or_default())
        };
        let mut slot = slot
            .lock()
            .map_err(|_| ApiError::internal("task lock poisoned"))?;
        if let Some(env) = slot.as_ref() {
            return Ok(Arc::clone(env));
        }
        let env = arbor_envs::environment(&self.runtime, spec)?;
        *slot = Some(Arc::clone(&env));
        Ok(env)
    }

    /// Close every sandbox past its TTL; returns how many.
    pub async fn reap_expired(self: &Arc<Self>) -> usize {
        let now = Instant::now();
        let expired: Vec<String> = self.sandboxes.lock().map_or_else(
            |_| Vec::new(),
            |s| {
                s.values()
                    .filter(|l| l.deadline <= now)
                    .map(|l| l.id.clone())
                    .collect()
            },
        );
        let mut closed = Vec::new();
        for id in &expired {
            if let Some(l) = self.remove(id, "expired (its TTL passed) and was closed") {
                l.kill();
                closed.push(l);
            }
        }
        let n = closed.len();
        Metrics::add(&self.metrics.expired, n as u64);
        if n > 0 {
            let ids: Vec<&str> = closed.iter().map(|l| l.id.as_str()).collect();
            eprintln!(
                "arbor serve: closed {n} sandboxes past their TTL: {}",
                ids.join(" ")
            );
            let _ = tokio::task::spawn_blocking(move || closed.iter().for_each(|l| l.close()))
                .await
                .map_err(join_error);
        }
        n
    }

    /// Close every sandbox (shutdown): kill their helpers, then drop them.
    pub fn close_all(&self, why: &str) -> usize {
        let ids: Vec<String> = self
            .sandboxes
            .lock()
            .map_or_else(|_| Vec::new(), |s| s.keys().cloned().collect());
        let lives: Vec<Arc<Live>> = ids.iter().filter_map(|id| self.remove(id, why)).collect();
        for l in &lives {
            l.kill();
        }
        for l in &lives {
            l.close();
        }
        lives.len()
    }

    /// Count an action in flight while `f` runs.
    pub fn in_flight<T>(&self, f: impl FnOnce() -> T) -> T {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let out = f();
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        out
    }
}

/// `sb-` and 16 random hex digits.
fn new_id() -> ApiResult<String> {
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| ApiError::internal(format!("read /dev/urandom: {e}")))?;
    Ok(format!("sb-{}", hex::encode(bytes)))
}
