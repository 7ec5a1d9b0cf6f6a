//! The one error type of the API: a status, a stable code and a message,
//! sent as `{"error": {"code": CODE, "message": TEXT}}` (see `API.md`).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use arbor_runtime::{RuntimeError, SandboxError};

/// An error answer.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The stable code (`not_found`, `limit_exceeded`, …).
    pub code: &'static str,
    /// What went wrong, in words.
    pub message: String,
    /// For 429: seconds after which a retry may succeed.
    pub retry_after: Option<f64>,
}

/// The body of every error.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// The code and message of an error.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable code: `bad_request`, `unauthorized`, `not_found`,
    /// `method_not_allowed`, `conflict`, `payload_too_large`,
    /// `unsupported_media_type`, `limit_exceeded`, `internal`, `unavailable`.
    pub code: String,
    /// What went wrong.
    pub message: String,
}

/// What handlers return.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400: the request itself is wrong.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 401.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 404: no such object (or another tenant's: the same answer).
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 405.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            message,
        )
    }

    /// 409: the object's state refuses the operation.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 413.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
    }

    /// 415.
    pub fn unsupported_media(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            message,
        )
    }

    /// 429 with a `Retry-After` of `after` seconds.
    pub fn limit(message: impl Into<String>, after: f64) -> Self {
        let mut e = Self::new(StatusCode::TOO_MANY_REQUESTS, "limit_exceeded", message);
        e.retry_after = Some(after.max(0.001));
        e
    }

    /// 500: a runtime fault.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// 503: shutting down.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    /// The JSON body.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message.clone(),
            },
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, axum::Json(self.body())).into_response();
        if let Some(after) = self.retry_after {
            // Retry-After is whole seconds; round up so a client never comes back too early.
            let secs = after.ceil().max(1.0) as u64;
            if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                resp.headers_mut().insert(header::RETRY_AFTER, v);
            }
            if let Ok(v) = HeaderValue::from_str(&format!("{after:.3}")) {
                resp.headers_mut().insert("x-arbor-retry-after", v);
            }
        }
        resp
    }
}

impl From<RuntimeError> for ApiError {
    fn from(e: RuntimeError) -> Self {
        match e {
            RuntimeError::Sandbox(s) => s.into(),
            RuntimeError::NativeOnly(what) => Self::conflict(format!(
                "{what} are not available on a WebAssembly session sandbox"
            )),
            other => Self::internal(other.to_string()),
        }
    }
}

impl From<SandboxError> for ApiError {
    fn from(e: SandboxError) -> Self {
        match e {
            // The helper refused a file operation: a bad path or a missing file.
            SandboxError::File(message) => file_error(message),
            other => Self::internal(other.to_string()),
        }
    }
}

impl From<arbor_rollout::env::EnvError> for ApiError {
    fn from(e: arbor_rollout::env::EnvError) -> Self {
        match e {
            arbor_rollout::env::EnvError::Runtime(r) => r.into(),
            arbor_rollout::env::EnvError::Sandbox(s) => s.into(),
            other => Self::internal(other.to_string()),
        }
    }
}

/// A file operation the sandbox refused: missing files are 404, the rest 400.
pub fn file_error(message: String) -> ApiError {
    let lower = message.to_lowercase();
    if lower.contains("moves at most") {
        ApiError::too_large(message)
    } else if lower.contains("no such file") || lower.contains("not found") {
        ApiError::not_found(message)
    } else {
        ApiError::bad_request(message)
    }
}

/// A blocking task that panicked or was cancelled.
pub fn join_error(e: tokio::task::JoinError) -> ApiError {
    ApiError::internal(format!("the operation's worker failed: {e}"))
}
