//! Extractors whose rejections are the API's JSON errors with a named
//! reason (axum's own answer in plain text otherwise).

use axum::extract::rejection::{BytesRejection, JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use bytes::Bytes;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

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

fn too_large_or(status: StatusCode, text: String) -> ApiError {
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::too_large(format!("the body is over the server's limit: {text}"))
    } else {
        ApiError::bad_request(text)
    }
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Self(v)),
            Err(JsonRejection::MissingJsonContentType(_)) => Err(ApiError::unsupported_media(
                "this route takes `Content-Type: application/json`",
            )),
            Err(JsonRejection::JsonSyntaxError(e)) => Err(ApiError::bad_request(format!(
                "malformed JSON: {}",
                e.body_text()
            ))),
            Err(JsonRejection::JsonDataError(e)) => Err(ApiError::bad_request(format!(
                "wrong fields: {}",
                e.body_text()
            ))),
            Err(e) => Err(too_large_or(e.status(), e.body_text())),
        }
    }
}

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let has_type = req.headers().contains_key(axum::http::header::CONTENT_TYPE);
        let bytes = RawBody::from_request(req, state).await?.0;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self(T::default()));
        }
        if !has_type {
            return Err(ApiError::unsupported_media(
                "a body on this route must be `Content-Type: application/json`",
            ));
        }
        serde_json::from_slice(&bytes)
            .map(Self)
            .map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))
    }
}

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        Bytes::from_request(req, state)
            .await
            .map(Self)
            .map_err(|e: BytesRejection| too_large_or(e.status(), e.body_text()))
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
