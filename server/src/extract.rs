//! Extractors whose rejections are the API's JSON errors with a named
//! reason (axum's own answer in plain text otherwise).

use std::sync::Arc;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use bytes::Bytes;
use futures_util::StreamExt;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::state::AppState;

/// A JSON body.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

/// A JSON body that may be absent (an empty body is `T::default()`).
#[derive(Debug)]
pub struct OptionalJson<T>(pub T);

/// The query string.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

/// The path parameters.
#[derive(Debug)]
pub struct ApiPath<T>(pub T);

/// A raw body (files, archives), under the body limit.
#[derive(Debug)]
pub struct RawBody(pub Bytes);

/// How much of an over-limit body is read (and dropped) before the 413, so
/// the client sees the answer instead of a connection reset.
const DRAIN_FACTOR: usize = 4;

/// Read a body of at most `limit` bytes. An over-limit body is drained (up
/// to a bound) before the 413 so the client reads the answer.
async fn read_body(req: Request, limit: usize) -> Result<Bytes, ApiError> {
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut stream = req.into_body().into_data_stream();
    let mut buf = bytes::BytesMut::new();
    let mut seen = 0usize;
    let mut over = declared.is_some_and(|n| n > limit as u64);
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::bad_request(format!("the body could not be read: {e}")))?;
        seen = seen.saturating_add(chunk.len());
        if over {
            if seen > limit.saturating_mul(DRAIN_FACTOR) {
                break;
            }
            continue;
        }
        if buf.len() + chunk.len() > limit {
            over = true;
            buf = bytes::BytesMut::new();
            continue;
        }
        buf.extend_from_slice(&chunk);
    }
    if over {
        return Err(ApiError::too_large(format!(
            "the body is over the server's limit of {limit} bytes (--max-body)"
        )));
    }
    Ok(buf.freeze())
}

fn is_json(req: &Request) -> bool {
    req.headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| {
            let m = m.trim().to_ascii_lowercase();
            m == "application/json" || (m.starts_with("application/") && m.ends_with("+json"))
        })
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => ApiError::bad_request(format!("wrong fields: {e}")),
        _ => ApiError::bad_request(format!("malformed JSON: {e}")),
    })
}

impl<T: DeserializeOwned> FromRequest<Arc<AppState>> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, st: &Arc<AppState>) -> Result<Self, ApiError> {
        if !is_json(&req) {
            let _ = read_body(req, st.cfg.max_body).await;
            return Err(ApiError::unsupported_media(
                "this route takes `Content-Type: application/json`",
            ));
        }
        let bytes = read_body(req, st.cfg.max_body).await?;
        decode(&bytes).map(Self)
    }
}

impl<T: DeserializeOwned + Default> FromRequest<Arc<AppState>> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, st: &Arc<AppState>) -> Result<Self, ApiError> {
        let json = is_json(&req);
        let bytes = read_body(req, st.cfg.max_body).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self(T::default()));
        }
        if !json {
            return Err(ApiError::unsupported_media(
                "a body on this route must be `Content-Type: application/json`",
            ));
        }
        decode(&bytes).map(Self)
    }
}

impl FromRequest<Arc<AppState>> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, st: &Arc<AppState>) -> Result<Self, ApiError> {
        read_body(req, st.cfg.max_body).await.map(Self)
    }
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Self(q.0))
            .map_err(|e: QueryRejection| {
                ApiError::bad_request(format!("bad query string: {}", e.body_text()))
            })
    }
}

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Self(p.0))
            .map_err(|e: PathRejection| {
                ApiError::bad_request(format!("bad path parameter: {}", e.body_text()))
            })
    }
}
