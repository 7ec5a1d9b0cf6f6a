//! Prepared helpers, and a pool that keeps some ready.
//!
//! Preparing a helper — spawning it, creating its namespaces, writing its id
//! maps, moving it into its cgroups (on cgroup v1 a migration waits for an
//! RCU grace period, often 10 ms or more) and building its read-only system
//! view — is most of the cost of opening a sandbox, and none of it depends on
//! the snapshot. A [`WarmPool`] does that work ahead of time on a background
//! thread, so that claiming a sandbox only mounts its workspace.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::process::{CgroupLimits, HelperCommand, HelperProcess};
use super::protocol::{Confinement, Request, Response, SandboxLimits, Setup, SystemView};
use super::{Result, SandboxError, env};
use crate::store::Store;

/// A helper whose namespaces and system view are ready; no workspace yet.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// The helper process.
    pub helper: HelperProcess,
    /// Its private directory under the store's `run/`.
    pub run_dir: PathBuf,
}

/// Everything needed to prepare helpers for one store.
#[derive(Clone, Debug)]
pub(crate) struct PrepareConfig {
    pub store: Store,
    pub helper: HelperCommand,
    pub system: SystemView,
    pub limits: SandboxLimits,
    pub confinement: Confinement,
    pub cgroup: CgroupLimits,
}

/// A fresh, process-unique run directory (`run/<pid>-<n>`).
pub(crate) fn new_run_dir(store: &Store) -> Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = store.run_dir().join(format!("{}-{n}", std::process::id()));
    std::fs::create_dir_all(dir.join("root"))
        .map_err(|e| SandboxError::io("create run directory", &dir, e))?;
    Ok(dir)
}

/// Prepare one helper now, on the calling thread.
pub(crate) fn prepare(config: &PrepareConfig) -> Result<Prepared> {
    let run_dir = new_run_dir(&config.store)?;
    let result = (|| {
        let mut helper = HelperProcess::start(
            &config.helper,
            config.store.mode(),
            &run_dir.join("helper.log"),
            &config.cgroup,
        )?;
        let mut system = config.system.clone();
        if let SystemView::Image { at, .. } = &mut system {
            *at = run_dir.join("image");
            std::fs::create_dir_all(&*at)
                .map_err(|e| SandboxError::io("create image mount point", &*at, e))?;
        }
        let setup = Setup {
            store_root: config.store.root().to_owned(),
            root_dir: run_dir.join("root"),
            system,
            hostname: env::HOSTNAME.to_owned(),
            limits: config.limits.clone(),
            confinement: config.confinement,
        };
        match helper.request(&Request::Setup(Box::new(setup)))? {
            Response::Ok => Ok(helper),
            other => Err(helper.unexpected(other)),
        }
    })();
    match result {
        Ok(helper) => Ok(Prepared { helper, run_dir }),
        Err(e) => {
            crate::cleanup::remove_dir_forcefully(&run_dir);
            Err(e)
        }
    }
}

#[derive(Debug)]
struct PoolState {
    ready: Vec<Prepared>,
    shutdown: bool,
}

#[derive(Debug)]
struct PoolShared {
    config: PrepareConfig,
    /// How many prepared helpers to keep.
    target: usize,
    state: Mutex<PoolState>,
    wake: Condvar,
}

/// Keeps up to `target` prepared helpers, refilled by one background thread.
/// Dropping the pool ends the thread and kills the helpers it holds.
#[derive(Debug)]
pub(crate) struct WarmPool {
    shared: Arc<PoolShared>,
}

impl WarmPool {
    /// Start a pool; with `target == 0` it never prepares anything.
    pub(crate) fn new(config: PrepareConfig, target: usize) -> Self {
        let shared = Arc::new(PoolShared {
            config,
            target,
            state: Mutex::new(PoolState {
                ready: Vec::new(),
                shutdown: false,
            }),
            wake: Condvar::new(),
        });
        if target > 0 {
            let worker = Arc::clone(&shared);
            let spawned = std::thread::Builder::new()
                .name("arbor-warm-pool".into())
                .spawn(move || refill(&worker));
            if spawned.is_err() {
                // No background thread: every open prepares inline.
                if let Ok(mut state) = shared.state.lock() {
                    state.shutdown = true;
                }
            }
        }
        Self { shared }
    }

    /// Block until the pool holds its target number of prepared helpers, or
    /// `timeout` passes (or the pool has stopped). Returns how many are ready.
    pub(crate) fn wait_ready(&self, timeout: std::time::Duration) -> usize {
        let deadline = std::time::Instant::now() + timeout;
        let Ok(mut state) = self.shared.state.lock() else {
            return 0;
        };
        loop {
            let now = std::time::Instant::now();
            if state.ready.len() >= self.shared.target || state.shutdown || now >= deadline {
                return state.ready.len();
            }
            state = match self.shared.wake.wait_timeout(state, deadline - now) {
                Ok((s, _)) => s,
                Err(_) => return 0,
            };
        }
    }

    /// A prepared helper: from the pool when one is ready, else prepared now.
    pub(crate) fn claim(&self) -> Result<Prepared> {
        let ready = match self.shared.state.lock() {
            Ok(mut state) => state.ready.pop(),
            Err(_) => None,
        };
        self.shared.wake.notify_all();
        match ready {
            Some(prepared) => Ok(prepared),
            None => prepare(&self.shared.config),
        }
    }
}

impl Drop for WarmPool {
    fn drop(&mut self) {
        let ready = match self.shared.state.lock() {
            Ok(mut state) => {
                state.shutdown = true;
                std::mem::take(&mut state.ready)
            }
            Err(_) => Vec::new(),
        };
        self.shared.wake.notify_all();
        for prepared in ready {
            drop(prepared.helper);
            crate::cleanup::remove_dir_forcefully(&prepared.run_dir);
        }
    }
}

fn refill(shared: &PoolShared) {
    let mut failures = 0u32;
    loop {
        {
            let Ok(mut state) = shared.state.lock() else {
                return;
            };
            while !state.shutdown && state.ready.len() >= shared.target {
                state = match shared.wake.wait(state) {
                    Ok(s) => s,
                    Err(_) => return,
                };
            }
            if state.shutdown {
                return;
            }
        }
        match prepare(&shared.config) {
            Ok(prepared) => {
                failures = 0;
                let Ok(mut state) = shared.state.lock() else {
                    return;
                };
                if state.shutdown {
                    drop(state);
                    drop(prepared.helper);
                    crate::cleanup::remove_dir_forcefully(&prepared.run_dir);
                    return;
                }
                state.ready.push(prepared);
                drop(state);
                shared.wake.notify_all();
            }
            Err(_) => {
                // The same error reaches the caller when it prepares inline;
                // stop trying after a few in a row.
                failures += 1;
                if failures >= 3 {
                    if let Ok(mut state) = shared.state.lock() {
                        state.shutdown = true;
                    }
                    shared.wake.notify_all();
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
}
