//! A small JSON-over-HTTP/1.1 client for OpenAI-compatible servers (hyper):
//! a per-request timeout, retries with exponential backoff and jitter on 429,
//! 5xx and connection failures, and a bound on the requests in flight.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio::sync::Semaphore;

/// How the client talks to the server.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpSettings {
    /// Requests in flight at once (per server).
    pub concurrency: usize,
    /// Limit of one request (connect, send, receive).
    pub timeout: Duration,
    /// Retries after the first try (429, 5xx, connection failures).
    pub retries: u32,
    /// The first backoff; doubled per retry, capped at 8 s, with jitter.
    pub backoff: Duration,
    /// A bearer token, if the server wants one.
    pub api_key: Option<String>,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            concurrency: 8,
            timeout: Duration::from_secs(120),
            retries: 4,
            backoff: Duration::from_millis(250),
            api_key: None,
        }
    }
}

/// A failed request, after its retries.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The server answered with an error status that retrying does not fix
    /// (or that stayed after every retry).
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        /// The URL.
        url: String,
        /// The status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// No answer (connection refused, reset, timed out) after every retry.
    #[error("{url}: {message} (after {tries} tries)")]
    Transport {
        /// The URL.
        url: String,
        /// What happened last.
        message: String,
        /// Tries made.
        tries: u32,
    },
    /// The answer is not JSON.
    #[error("{url}: the answer is not JSON ({message}): {body}")]
    NotJson {
        /// The URL.
        url: String,
        /// The parse error.
        message: String,
        /// The start of the body.
        body: String,
    },
}

/// The client: one per server.
#[derive(Debug)]
pub struct JsonClient {
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
    limit: Semaphore,
    settings: HttpSettings,
}

fn snippet(b: &[u8]) -> String {
    super::context::truncate_chars(String::from_utf8_lossy(b).trim(), 400)
}

impl JsonClient {
    /// A client for the server at `base` (`http://host:port/v1`).
    ///
    /// # Errors
    /// A URL that is not plain `http://` (TLS is not built in: run the model
    /// server locally or behind a TLS-terminating proxy).
    pub fn new(base: &str, settings: HttpSettings) -> Result<Self, String> {
        let base = base.trim_end_matches('/').to_owned();
        if base.starts_with("https://") {
            return Err(format!(
                "{base}: https is not supported by the built-in client (serve the model on plain http, e.g. on loopback, or put a TLS-terminating proxy in front)"
            ));
        }
        let uri: Uri = base
            .parse()
            .map_err(|e| format!("{base:?} is not a URL: {e}"))?;
        if uri.scheme_str() != Some("http") || uri.host().is_none() {
            return Err(format!("{base:?} is not an http://HOST[:PORT]/PATH URL"));
        }
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(settings.timeout));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Ok(Self {
            base,
            client,
            limit: Semaphore::new(settings.concurrency.max(1)),
            settings,
        })
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `GET base/path`.
    ///
    /// # Errors
    /// See [`HttpError`].
    pub async fn get(&self, path: &str, jitter: u64) -> Result<Value, HttpError> {
        self.call(Method::GET, path, None, jitter).await
    }

    /// `POST base/path` with a JSON body.
    ///
    /// # Errors
    /// See [`HttpError`].
    pub async fn post(&self, path: &str, body: &Value, jitter: u64) -> Result<Value, HttpError> {
        self.call(Method::POST, path, Some(body), jitter).await
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        jitter: u64,
    ) -> Result<Value, HttpError> {
        let mut rng = crate::policy::Rng::new(jitter);
        let url = format!("{}{path}", self.base);
        let payload = Bytes::from(body.map(Value::to_string).unwrap_or_default());
        let _permit = self
            .limit
            .acquire()
            .await
            .map_err(|_| HttpError::Transport {
                url: url.clone(),
                message: "the client is closed".to_owned(),
                tries: 0,
            })?;
        let mut tries = 0;
        loop {
            tries += 1;
            let last = tries > self.settings.retries;
            let mut req = Request::builder().method(method.clone()).uri(&url);
            if body.is_some() {
                req = req.header("content-type", "application/json");
            }
            if let Some(key) = &self.settings.api_key {
                req = req.header("authorization", format!("Bearer {key}"));
            }
            let req = req
                .body(Full::new(payload.clone()))
                .map_err(|e| HttpError::Transport {
                    url: url.clone(),
                    message: e.to_string(),
                    tries,
                })?;
            let attempt = async {
                let resp = self.client.request(req).await.map_err(|e| {
                    let mut m = e.to_string();
                    if let Some(src) = std::error::Error::source(&e) {
                        m.push_str(&format!(": {src}"));
                    }
                    m
                })?;
                let status = resp.status();
                let bytes = resp
                    .into_body()
                    .collect()
                    .await
                    .map_err(|e| e.to_string())?
                    .to_bytes();
                Ok::<_, String>((status, bytes))
            };
            let outcome = match tokio::time::timeout(self.settings.timeout, attempt).await {
                Ok(r) => r,
                Err(_) => Err(format!("no answer within {:?}", self.settings.timeout)),
            };
            let retryable = match &outcome {
                Ok((status, bytes)) if status.is_success() => {
                    return serde_json::from_slice(bytes).map_err(|e| HttpError::NotJson {
                        url: url.clone(),
                        message: e.to_string(),
                        body: snippet(bytes),
                    });
                }
                Ok((status, _)) => {
                    *status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
                }
                Err(_) => true,
            };
            if !retryable || last {
                return Err(match outcome {
                    Ok((status, bytes)) => HttpError::Status {
                        url,
                        status: status.as_u16(),
                        body: snippet(&bytes),
                    },
                    Err(message) => HttpError::Transport {
                        url,
                        message,
                        tries,
                    },
                });
            }
            // Exponential backoff with ±50% jitter.
            let frac = 0.5 + rng.next_f64();
            let base = self.settings.backoff.as_secs_f64() * f64::from(1u32 << (tries - 1).min(5));
            tokio::time::sleep(Duration::from_secs_f64((base * frac).min(8.0))).await;
        }
    }
}
