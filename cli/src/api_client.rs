//! HTTP client for the manager API (`/v1/...`), with a timeout on every call and errors that
//! carry the server's `error.code`.

use std::time::Duration;

use bytes::Bytes;
use loopgate_api::{
    AnswerRequest, ApproveRequest, ContinueRequest, ErrorBody, InstructRequest, ResumeRequest,
    SubmitRequest,
};
use loopgate_common::budget::BudgetFile;
use loopgate_common::state::RunState;
use loopgate_protocol::snapshot::Manifest;
use reqwest::{Method, RequestBuilder, Response, Url};
use serde_json::Value;

use crate::exit_status::ExitStatus;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(600);
const BLOB_TIMEOUT: Duration = Duration::from_secs(300);
/// The event stream is dropped (and reopened by `watch`) after this long without a byte.
pub const EVENTS_READ_TIMEOUT: Duration = Duration::from_secs(75);

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(
        "cannot reach the manager at {server} ({detail}): is the manager running? (loopgate up)"
    )]
    Unreachable { server: String, detail: String },
    #[error("the manager at {server} did not answer {what} in time")]
    Timeout { server: String, what: String },
    #[error("{code}: {message}")]
    Server {
        status: u16,
        code: String,
        message: String,
    },
    #[error("unexpected answer to {what}: {detail}")]
    BadResponse { what: String, detail: String },
    #[error("invalid server URL '{url}': {detail}")]
    BadServerUrl { url: String, detail: String },
    #[error("{what} failed: {detail}")]
    Transport { what: String, detail: String },
}

impl ApiError {
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            ApiError::Unreachable { .. } => ExitStatus::Unreachable,
            _ => ExitStatus::Error,
        }
    }

    /// The server's stable error code, when the server answered with one.
    pub fn server_code(&self) -> Option<&str> {
        match self {
            ApiError::Server { code, .. } => Some(code),
            _ => None,
        }
    }
}

pub struct ApiClient {
    base: Url,
    token: Option<String>,
    http: reqwest::Client,
    stream_http: reqwest::Client,
}

impl ApiClient {
    pub fn new(server: &str, token: Option<String>) -> Result<ApiClient, ApiError> {
        let bad = |detail: String| ApiError::BadServerUrl {
            url: server.to_string(),
            detail,
        };
        let base = Url::parse(server).map_err(|e| bad(e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(bad("expected http://HOST:PORT".into()));
        }
        let build = |read_timeout: Option<Duration>| {
            let mut builder = reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .user_agent(concat!("loopgate-cli/", env!("CARGO_PKG_VERSION")));
            if let Some(t) = read_timeout {
                builder = builder.read_timeout(t);
            }
            builder.build().map_err(|e| bad(e.to_string()))
        };
        Ok(ApiClient {
            base,
            token: token.filter(|t| !t.is_empty()),
            http: build(None)?,
            stream_http: build(Some(EVENTS_READ_TIMEOUT))?,
        })
    }

    pub fn server(&self) -> &str {
        self.base.as_str().trim_end_matches('/')
    }

    /// `base` + path segments, each percent-encoded (a run id can't smuggle `/` or `?`).
    pub fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    fn request(&self, client: &reqwest::Client, method: Method, url: Url) -> RequestBuilder {
        let req = client.request(method, url);
        match &self.token {
            Some(token) => req.bearer_auth(token),
            None => req,
        }
    }

    /// Sends a request and turns transport failures and non-2xx answers into `ApiError`s.
    async fn send(&self, what: &str, req: RequestBuilder) -> Result<Response, ApiError> {
        let response = req
            .send()
            .await
            .map_err(|e| self.transport_error(what, e))?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status().as_u16();
        let body = response.bytes().await.unwrap_or_default();
        Err(server_error(status, &body))
    }

    pub fn transport_error(&self, what: &str, e: reqwest::Error) -> ApiError {
        if e.is_connect() {
            ApiError::Unreachable {
                server: self.server().to_string(),
                detail: innermost_cause(&e),
            }
        } else if e.is_timeout() {
            ApiError::Timeout {
                server: self.server().to_string(),
                what: what.to_string(),
            }
        } else {
            ApiError::Transport {
                what: what.to_string(),
                detail: innermost_cause(&e),
            }
        }
    }

    async fn json(&self, what: &str, req: RequestBuilder) -> Result<Value, ApiError> {
        let response = self.send(what, req).await?;
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.transport_error(what, e))?;
        serde_json::from_slice(&bytes).map_err(|e| ApiError::BadResponse {
            what: what.to_string(),
            detail: format!("not JSON: {e}"),
        })
    }

    /// Like `json`, but an empty body is fine (cancel/answer may answer 202/204).
    async fn json_or_empty(
        &self,
        what: &str,
        req: RequestBuilder,
    ) -> Result<Option<Value>, ApiError> {
        let response = self.send(what, req).await?;
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.transport_error(what, e))?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        Ok(serde_json::from_slice(&bytes).ok())
    }

    pub async fn create_run(&self, body: &SubmitRequest) -> Result<Value, ApiError> {
        let req = self
            .request(&self.http, Method::POST, self.url(&["v1", "runs"]))
            .timeout(UPLOAD_TIMEOUT)
            .json(body);
        self.json("POST /v1/runs", req).await
    }

    pub async fn get_run(&self, run: &str) -> Result<Value, ApiError> {
        let req = self
            .request(&self.http, Method::GET, self.url(&["v1", "runs", run]))
            .timeout(REQUEST_TIMEOUT);
        self.json("GET /v1/runs/{id}", req).await
    }

    pub async fn list_runs(&self, state: Option<RunState>) -> Result<Value, ApiError> {
        self.list_runs_page(state, 0, None).await
    }

    /// One page of runs, newest first: `offset` runs skipped, at most `limit` (the server's
    /// default when None). The answer says `has_more` and `next_offset`.
    pub async fn list_runs_page(
        &self,
        state: Option<RunState>,
        offset: usize,
        limit: Option<usize>,
    ) -> Result<Value, ApiError> {
        let mut url = self.url(&["v1", "runs"]);
        {
            let mut q = url.query_pairs_mut();
            if let Some(state) = state {
                q.append_pair("state", state.as_str());
            }
            if offset > 0 {
                q.append_pair("offset", &offset.to_string());
            }
            if let Some(limit) = limit {
                q.append_pair("limit", &limit.to_string());
            }
        }
        let req = self
            .request(&self.http, Method::GET, url)
            .timeout(REQUEST_TIMEOUT);
        self.json("GET /v1/runs", req).await
    }

    /// The runs whose id starts with `prefix` (at most two: enough to tell one from many).
    pub async fn runs_with_prefix(&self, prefix: &str) -> Result<Value, ApiError> {
        let mut url = self.url(&["v1", "runs"]);
        url.query_pairs_mut()
            .append_pair("id_prefix", prefix)
            .append_pair("limit", "2");
        let req = self
            .request(&self.http, Method::GET, url)
            .timeout(REQUEST_TIMEOUT);
        self.json("GET /v1/runs?id_prefix=", req).await
    }

    pub async fn run_log(&self, run: &str) -> Result<Value, ApiError> {
        let req = self
            .request(
                &self.http,
                Method::GET,
                self.url(&["v1", "runs", run, "log"]),
            )
            .timeout(REQUEST_TIMEOUT);
        self.json("GET /v1/runs/{id}/log", req).await
    }

    /// `GET /v1/runs/{id}/rounds/{n}/transcript`: round `n`'s episode transcript.
    pub async fn round_transcript(&self, run: &str, round: u32) -> Result<Value, ApiError> {
        let n = round.to_string();
        let req = self
            .request(
                &self.http,
                Method::GET,
                self.url(&["v1", "runs", run, "rounds", &n, "transcript"]),
            )
            .timeout(REQUEST_TIMEOUT);
        self.json("GET /v1/runs/{id}/rounds/{n}/transcript", req)
            .await
    }

    /// `GET /v1/runs/{id}/rounds`: each round's base and candidate snapshots.
    pub async fn run_rounds(&self, run: &str) -> Result<Value, ApiError> {
        let req = self
            .request(
                &self.http,
                Method::GET,
                self.url(&["v1", "runs", run, "rounds"]),
            )
            .timeout(REQUEST_TIMEOUT);
        self.json("GET /v1/runs/{id}/rounds", req).await
    }

    pub async fn cancel(&self, run: &str) -> Result<Option<Value>, ApiError> {
        let req = self
            .request(
                &self.http,
                Method::POST,
                self.url(&["v1", "runs", run, "cancel"]),
            )
            .timeout(REQUEST_TIMEOUT);
        self.json_or_empty("POST /v1/runs/{id}/cancel", req).await
    }

    pub async fn answer(&self, run: &str, text: &str) -> Result<Option<Value>, ApiError> {
        let req = self
            .request(
                &self.http,
                Method::POST,
                self.url(&["v1", "runs", run, "answer"]),
            )
            .timeout(REQUEST_TIMEOUT)
            .json(&AnswerRequest {
                text: text.to_string(),
            });
        self.json_or_empty("POST /v1/runs/{id}/answer", req).await
    }

    /// `POST /v1/runs/{id}/instructions`.
    pub async fn instruct(&self, run: &str, text: &str) -> Result<Option<Value>, ApiError> {
        let req = self
            .request(
                &self.http,
                Method::POST,
                self.url(&["v1", "runs", run, "instructions"]),
            )
            .timeout(REQUEST_TIMEOUT)
            .json(&InstructRequest {
                text: text.to_string(),
            });
        self.json_or_empty("POST /v1/runs/{id}/instructions", req)
            .await
    }

    /// `POST /v1/runs/{id}/pause` or `.../unpause` (`action`).
    pub async fn pause_or_unpause(
        &self,
        run: &str,
        action: &'static str,
    ) -> Result<Option<Value>, ApiError> {
        let req = self
            .request(
                &self.http,
                Method::POST,
                self.url(&["v1", "runs", run, action]),
            )
            .timeout(REQUEST_TIMEOUT);
        let what = if action == "pause" {
            "POST /v1/runs/{id}/pause"
        } else {
            "POST /v1/runs/{id}/unpause"
        };
        self.json_or_empty(what, req).await
    }

    /// `POST /v1/runs/{id}/continue`.
    pub async fn continue_run(
        &self,
        run: &str,
        body: &ContinueRequest,
    ) -> Result<Option<Value>, ApiError> {
        let req = self
            .request(
                &self.http,
                Method::POST,
                self.url(&["v1", "runs", run, "continue"]),
            )
            .timeout(REQUEST_TIMEOUT)
            .json(body);
        self.json_or_empty("POST /v1/runs/{id}/continue", req).await
    }

    /// `GET /v1/runs/{id}/contract`: the contract (planning, proposed or frozen).
    pub async fn run_contract(&self, run: &str) -> Result<Value, ApiError> {
        let req = self
            .request(
                &self.http,
                Method::GET,
                self.url(&["v1", "runs", run, "contract"]),
            )
            .timeout(REQUEST_TIMEOUT);
        self.json("GET /v1/runs/{id}/contract", req).await
    }

    /// `POST /v1/runs/{id}/approve`, with an edited contract file's text to replace the proposal.
    pub async fn approve(
        &self,
        run: &str,
        edited: Option<&str>,
    ) -> Result<Option<Value>, ApiError> {
        let body = ApproveRequest {
            contract: edited.map(str::to_string),
        };
        let req = self
            .request(
                &self.http,
                Method::POST,
                self.url(&["v1", "runs", run, "approve"]),
            )
            .timeout(REQUEST_TIMEOUT)
            .json(&body);
        self.json_or_empty("POST /v1/runs/{id}/approve", req).await
    }

    /// Resume an ended run as a new generation; `budget` holds the `[budget]` keys to change.
    pub async fn resume(&self, run: &str, budget: BudgetFile) -> Result<Option<Value>, ApiError> {
        let req = self
            .request(
                &self.http,
                Method::POST,
                self.url(&["v1", "runs", run, "resume"]),
            )
            .timeout(REQUEST_TIMEOUT)
            .json(&ResumeRequest {
                budget: Some(budget),
            });
        self.json_or_empty("POST /v1/runs/{id}/resume", req).await
    }

    /// `GET /v1/runs/{id}/certificate`: a completed run's certificate, as the server sent it.
    pub async fn run_certificate(&self, run: &str) -> Result<Value, ApiError> {
        let req = self
            .request(
                &self.http,
                Method::GET,
                self.url(&["v1", "runs", run, "certificate"]),
            )
            .timeout(REQUEST_TIMEOUT);
        self.json("GET /v1/runs/{id}/certificate", req).await
    }

    pub async fn snapshot_manifest(&self, snapshot: &str) -> Result<Manifest, ApiError> {
        let what = "GET /v1/snapshots/{id}";
        let req = self
            .request(
                &self.http,
                Method::GET,
                self.url(&["v1", "snapshots", snapshot]),
            )
            .timeout(REQUEST_TIMEOUT);
        let value = self.json(what, req).await?;
        serde_json::from_value(value).map_err(|e| ApiError::BadResponse {
            what: what.to_string(),
            detail: format!("not a manifest: {e}"),
        })
    }

    pub async fn blob(&self, sha256: &str) -> Result<Bytes, ApiError> {
        let what = "GET /v1/blobs/{sha256}";
        let req = self
            .request(&self.http, Method::GET, self.url(&["v1", "blobs", sha256]))
            .timeout(BLOB_TIMEOUT);
        let response = self.send(what, req).await?;
        response
            .bytes()
            .await
            .map_err(|e| self.transport_error(what, e))
    }

    /// Opens the SSE stream of a run. `last_event_id` is sent as `Last-Event-ID` on reconnects.
    pub async fn open_events(
        &self,
        run: &str,
        last_event_id: Option<&str>,
    ) -> Result<Response, ApiError> {
        let mut req = self
            .request(
                &self.stream_http,
                Method::GET,
                self.url(&["v1", "runs", run, "events"]),
            )
            .header(reqwest::header::ACCEPT, "text/event-stream");
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id);
        }
        self.send("GET /v1/runs/{id}/events", req).await
    }

    /// `GET /readyz`: true on 2xx. Used by `loopgate up`.
    pub async fn ready(&self) -> bool {
        let req = self
            .request(&self.http, Method::GET, self.url(&["readyz"]))
            .timeout(Duration::from_secs(2));
        matches!(req.send().await, Ok(r) if r.status().is_success())
    }
}

/// Turns an error answer into `ApiError::Server`, reading `{"error":{"code","message"}}` when
/// the body has that shape.
pub fn server_error(status: u16, body: &[u8]) -> ApiError {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(ErrorBody { error }) => ApiError::Server {
            status,
            code: error.code,
            message: error.message,
        },
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            let excerpt: String = text.trim().chars().take(300).collect();
            ApiError::Server {
                status,
                code: format!("http_{status}"),
                message: if excerpt.is_empty() {
                    "no error body".to_string()
                } else {
                    excerpt
                },
            }
        }
    }
}

fn innermost_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut current = e;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn server_errors_keep_the_stable_code() {
        let cases: &[(&[u8], &str, &str)] = &[
            (
                br#"{"error":{"code":"invalid_task","message":"task field `goal`: must not be empty"}}"#,
                "invalid_task",
                "task field `goal`: must not be empty",
            ),
            (b"upstream exploded", "http_502", "upstream exploded"),
            (b"", "http_502", "no error body"),
            (br#"{"other":1}"#, "http_502", r#"{"other":1}"#),
        ];
        for (body, code, message) in cases {
            match server_error(502, body) {
                ApiError::Server {
                    code: c,
                    message: m,
                    ..
                } => {
                    assert_eq!((c.as_str(), m.as_str()), (*code, *message));
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn urls_escape_segments_and_keep_prefixes() {
        let client = ApiClient::new("http://127.0.0.1:7600", None).unwrap();
        assert_eq!(
            client.url(&["v1", "runs", "a/b?c"]).as_str(),
            "http://127.0.0.1:7600/v1/runs/a%2Fb%3Fc"
        );
        let prefixed = ApiClient::new("http://host:1/api/", None).unwrap();
        assert_eq!(
            prefixed.url(&["v1", "runs"]).as_str(),
            "http://host:1/api/v1/runs"
        );
        assert!(matches!(
            ApiClient::new("ftp://x", None),
            Err(ApiError::BadServerUrl { .. })
        ));
        assert!(matches!(
            ApiClient::new("not a url", None),
            Err(ApiError::BadServerUrl { .. })
        ));
    }
}
