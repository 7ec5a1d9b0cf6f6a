//! The request and response bodies of the API (their schemas are the
//! OpenAPI document's components).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// A stored state.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SnapshotInfo {
    /// Full id (64 hex digits).
    pub id: String,
    /// Short id (12 hex digits).
    pub short: String,
    /// The tenant's tags on it.
    pub tags: Vec<String>,
    /// `native` or `wasm`.
    pub backend: String,
    /// The snapshot it was taken from.
    pub parent: Option<String>,
    /// Creation time (epoch seconds).
    pub created_at: u64,
    /// One line on how it was made.
    pub summary: String,
}

/// An open sandbox.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SandboxInfo {
    /// `sb-` and 16 hex digits.
    pub id: String,
    /// The snapshot it was opened on.
    pub snapshot: String,
    /// `native` or `wasm`.
    pub backend: String,
    /// The task, for a task sandbox.
    pub task: Option<String>,
    /// Creation time (epoch seconds).
    pub created_at: f64,
    /// When its TTL ends and it is closed (epoch seconds).
    pub expires_at: f64,
    /// Steps taken in it.
    pub steps: u64,
    /// A task sandbox's latest observation (the task's instructions at first).
    pub observation: Option<String>,
}

/// How an exec ended.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ExecResult {
    /// Shell-style code: 124 timeout, 125 disk or memory limit, 128+N signal N.
    pub exit_code: i32,
    /// Standard output (UTF-8, invalid bytes replaced; capped by the runtime).
    pub stdout: String,
    /// Standard error (likewise).
    pub stderr: String,
    /// Wall-clock duration.
    pub duration_s: f64,
    /// Whether the timeout ended it.
    pub timed_out: bool,
    /// The backend's label of the outcome (`0`, `timeout`, `signal 9`, …).
    pub outcome: String,
    /// Background processes killed when it ended.
    pub killed_background: Vec<String>,
    /// Connections through the egress proxy (sandboxes with `allow_hosts`):
    /// `method`, `host`, `port`, `allowed`, `reason`, `bytes_out`, `bytes_in`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<Object>)]
    pub egress: Vec<arbor_runtime::sandbox::egress::EgressEvent>,
}

/// An exec request: `command` (a shell string) or `argv`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecRequest {
    /// A shell string, run by `bash -c` (Python source on a wasm session).
    pub command: Option<String>,
    /// Or an argv, quoted word by word.
    pub argv: Option<Vec<String>>,
    /// Wall-clock limit in seconds (default 60).
    #[schema(exclusive_minimum = 0.0, maximum = 86400.0)]
    pub timeout_s: Option<f64>,
    /// Working directory, relative to /workspace or absolute inside it; the
    /// command then runs in a subshell there.
    pub cwd: Option<String>,
    /// Variables for this exec only (the command runs in a subshell).
    pub env: Option<BTreeMap<String, String>>,
    /// Standard input, as text.
    pub stdin: Option<String>,
    /// Standard input, base64.
    pub stdin_b64: Option<String>,
}

/// One line of an exec stream.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExecEvent {
    /// A chunk of standard output.
    Stdout {
        /// The text.
        data: String,
    },
    /// A chunk of standard error.
    Stderr {
        /// The text.
        data: String,
    },
    /// The end.
    Exit {
        /// How it ended.
        result: ExecResult,
    },
    /// A runtime fault ended the stream.
    Error {
        /// The error.
        error: crate::error::ErrorDetail,
    },
}

/// `POST /v1/sandboxes`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSandbox {
    /// A snapshot reference (id, prefix or tag).
    pub snapshot: Option<String>,
    /// Or a task id.
    pub task: Option<String>,
    /// Seconds until it is closed (default: the server's `--ttl`).
    pub ttl_s: Option<f64>,
    /// Host names the sandbox may reach through Arbor's egress proxy
    /// (`HTTP(S)_PROXY` is set inside; IP literals are refused). Without
    /// it the sandbox has loopback only. Snapshot sandboxes only.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
}

/// A fork request.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkRequest {
    /// How many sandboxes (1-256).
    #[schema(minimum = 1, maximum = 256)]
    pub n: usize,
    /// Their TTL in seconds.
    pub ttl_s: Option<f64>,
}

/// `POST /v1/sandboxes/{id}/snapshot`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRequest {
    /// Tag the new snapshot.
    pub tag: Option<String>,
}

/// `POST /v1/snapshots/{ref}/replay`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    /// Stop at the first divergent step.
    #[serde(default)]
    pub strict: bool,
}

/// `POST /v1/sandboxes/{id}/step`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StepRequest {
    /// The task's action JSON: `{"exec": "ls"}`, `{"write": "a.py", "content": "…"}`,
    /// `{"delete": "a.py"}`, `{"submit": true}`.
    #[schema(value_type = Object)]
    pub action: serde_json::Value,
}

/// What a step observed.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StepResponse {
    /// The whole observation as text (what a text policy reads).
    pub observation: String,
    /// The action's output.
    pub output: String,
    /// Its shell-style exit code (`null` after a submit).
    pub exit_code: Option<i32>,
    /// Actions taken so far.
    pub step: u64,
    /// Whether the episode is over (submitted, or out of steps).
    pub done: bool,
}

/// `POST /v1/sandboxes/{id}/verify`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VerifyResponse {
    /// 1.0 or 0.0; `null` on a runtime fault.
    pub reward: Option<f64>,
    /// The verifier's full verdict.
    #[schema(value_type = Object)]
    pub verdict: serde_json::Value,
    /// The state that was graded.
    pub snapshot: SnapshotInfo,
}

/// A list of snapshots.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SnapshotList {
    /// Newest first.
    pub snapshots: Vec<SnapshotInfo>,
}

/// A list of sandboxes.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SandboxList {
    /// The sandboxes.
    pub sandboxes: Vec<SandboxInfo>,
}

/// The result of forking a sandbox.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SandboxFork {
    /// The snapshot the forks were made from.
    pub snapshot: SnapshotInfo,
    /// The forks.
    pub sandboxes: Vec<SandboxInfo>,
}

/// One snapshot of a chain.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LogEntry {
    /// Its id.
    pub id: String,
    /// How it was made.
    pub summary: String,
    /// The shell-style exit codes of its recorded steps.
    pub exits: Vec<i32>,
    /// Creation time (epoch seconds).
    pub created_at: u64,
}

/// A snapshot's chain, root first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LogResponse {
    /// The chain.
    pub entries: Vec<LogEntry>,
}

/// How two states' workspaces differ.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DiffResponse {
    /// Paths only in `to`.
    pub added: Vec<String>,
    /// Paths in both that differ.
    pub modified: Vec<String>,
    /// Paths only in the first.
    pub deleted: Vec<String>,
}

/// What a replay found.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReplayResponse {
    /// Whether every replayed observation matched its record.
    pub identical: bool,
    /// Actions executed.
    pub actions: usize,
    /// The first divergent step, if any.
    #[schema(value_type = Option<Object>)]
    pub divergence: Option<serde_json::Value>,
    /// The whole report.
    #[schema(value_type = Object)]
    pub report: serde_json::Value,
}

/// A directory entry.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DirEntry {
    /// File name.
    pub name: String,
    /// `file`, `dir`, `symlink` or `other`.
    pub kind: String,
    /// Size in bytes (files).
    pub size: u64,
}

/// A directory listing.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DirListing {
    /// Sorted by name.
    pub entries: Vec<DirEntry>,
}

/// What an upload wrote.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UploadResponse {
    /// Files and symlinks written.
    pub files: usize,
}

/// `GET /v1/health`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Health {
    /// `ok`, or `stopping` during shutdown.
    pub status: String,
    /// The server's version.
    pub version: String,
    /// Sandboxes open now.
    pub sandboxes_live: usize,
    /// Backends this build serves.
    pub backends: Vec<String>,
}

/// A task, in a list.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaskSummary {
    /// Its id.
    pub id: String,
    /// Its family.
    pub family: String,
    /// `native` or `wasm`.
    pub backend: String,
    /// Its group.
    pub group: String,
    /// `easy`, `medium` or `hard`.
    pub difficulty: String,
    /// Its split.
    pub split: Option<String>,
    /// How many candidate actions it offers.
    pub candidates: usize,
    /// Actions per episode.
    pub max_steps: usize,
}

/// The tasks.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaskList {
    /// Sorted by id.
    pub tasks: Vec<TaskSummary>,
}

/// One task in full.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaskDetail {
    /// Its id.
    pub id: String,
    /// Its family.
    pub family: String,
    /// `native` or `wasm`.
    pub backend: String,
    /// Its group.
    pub group: String,
    /// `easy`, `medium` or `hard`.
    pub difficulty: String,
    /// Its split.
    pub split: Option<String>,
    /// What the agent is asked to do.
    pub instructions: String,
    /// Steps, per-action and total time limits.
    #[schema(value_type = Object)]
    pub limits: serde_json::Value,
    /// Candidate actions (task action JSON).
    #[schema(value_type = Vec<Object>)]
    pub candidates: Vec<serde_json::Value>,
    /// A known solution (task action JSON), for gold and mixture policies and tests.
    #[schema(value_type = Vec<Object>)]
    pub gold: Vec<serde_json::Value>,
}

/// `POST /v1/rollouts`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RolloutRequest {
    /// The task.
    pub task: String,
    /// Actions plus verifier runs to spend (1-5000).
    #[schema(minimum = 1, maximum = 5000)]
    pub budget: u64,
    /// `uniform:W:K`, `entropy:…` (as `arbor rollout --strategy`).
    #[serde(default = "default_strategy")]
    pub strategy: String,
    /// `random`, `gold`, `mixture`, `mixture:P`.
    #[serde(default = "default_policy")]
    pub policy: String,
    /// The seed.
    #[serde(default)]
    pub seed: u64,
}

fn default_strategy() -> String {
    "uniform:2:2".to_owned()
}

fn default_policy() -> String {
    "random".to_owned()
}

/// `?path=` of the file routes.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct PathQuery {
    /// Relative to /workspace, or absolute inside it.
    pub path: String,
    /// Permission bits for a write (decimal, e.g. 420 = 0o644).
    pub mode: Option<u32>,
}

/// `?path=` of the directory routes (default: the workspace root).
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct DirQuery {
    /// Relative to /workspace, or absolute inside it.
    pub path: Option<String>,
}

/// `?tag=` of an import.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct TagQuery {
    /// Tag the imported snapshot.
    pub tag: Option<String>,
}

/// `?to=` of a diff.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct DiffQuery {
    /// The other snapshot.
    pub to: String,
}
