//! A retrieval server speaking Search-R1's `/retrieve` API (feature `serve`): any first
//! stage a pipeline config describes (BM25, TF-IDF, dense, several fused), over HTTP/1.1,
//! for Search-R1's agent, the workbench's `kind = "http"` retriever
//! ([`crate::retrieve::http`]) or `curl`. The binary is `retrieve-server CONFIG --port N`.
//!
//! | route | answer |
//! |---|---|
//! | `POST /retrieve` | `{"queries": [...], "topk": k, "return_scores": bool}` → `{"result": [...]}`, the shape of Search-R1's `search_r1/search/retrieval_server.py` ([`crate::retrieve::http`] shows it) |
//! | `GET /` | `{"retriever": name, "passages": n, "topk": default}` |
//!
//! The request takes the fields of Search-R1's `QueryRequest`, more strictly than its
//! FastAPI (pydantic) model: `queries` a list of strings (required), `topk` a JSON integer
//! (missing or null: the server's default; pydantic would also take `"3"` or `2.0`),
//! `return_scores` a JSON boolean (missing: false; pydantic would also take `1` or
//! `"yes"`), other fields ignored (the log line names them). Unlike Search-R1, whose server
//! replaces `topk: 0` by its default, `topk` 0 or negative is refused, and so are a `topk`
//! above [`ServeParams::max_topk`] and more queries than [`ServeParams::max_queries`]. A
//! refused request is answered `400` with `{"error": "..."}` naming the field
//! (`queries[3]`, `topk`, …); a body larger than the limit `413`; a body that does not arrive
//! in time `408`; a retrieval error `500`. Without scores the answer lists the documents
//! alone: the workbench's shape (Search-R1's own server fails on `return_scores: false`).
//!
//! A request's queries are retrieved together, with the retriever's batch path
//! ([`Retriever::retrieve_all`]: rayon across queries for the lexical retrievers and fusion,
//! one encoder batch and one FAISS search for dense), on tokio's blocking pool, at most
//! [`ServeParams::max_in_flight`] requests at once (the others wait their turn; the
//! retrievers already use every core). The HTTP layer itself does not block: every
//! connection is a task of its own, a client that connects and sends nothing is dropped
//! after the header timeout, one that sends half a body is answered 408 after the body
//! timeout. A retrieval that has started runs to its end even if its client has gone.

use crate::pipeline::{first_stage, PipelineConfig};
use crate::retrieve::http::contents;
use crate::retrieve::Retriever;
use crate::{Error, Passage, Query, Result};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the server answers.
#[derive(Debug, Clone)]
pub struct ServeParams {
    /// Hits per query when a request has no `topk` (Search-R1's `--topk`, default 3).
    pub default_topk: usize,
    /// A connection that has not sent a request's headers in this time is closed. Default 10 s.
    pub header_timeout: Duration,
    /// A request whose body has not arrived in this time is answered 408. Default 30 s.
    pub body_timeout: Duration,
    /// Largest request body in bytes (413 above). Default 64 MiB.
    pub max_body_bytes: usize,
    /// Largest `topk` a request may ask for (400 above). Default 1,000.
    pub max_topk: usize,
    /// Most queries in one request (400 above). Default 4,096.
    pub max_queries: usize,
    /// Most requests retrieved at once; the others wait their turn (the retrievers already
    /// use every core: more at once only adds memory and contention). Default 2.
    pub max_in_flight: usize,
    /// Tokio worker threads (HTTP parsing; retrieval runs on the blocking pool and rayon's
    /// threads). Default 2.
    pub worker_threads: usize,
    /// One line per request on stderr. Default true.
    pub log: bool,
}

impl Default for ServeParams {
    fn default() -> Self {
        ServeParams {
            default_topk: 3,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_body_bytes: 64 << 20,
            max_topk: 1000,
            max_queries: 4096,
            max_in_flight: 2,
            worker_threads: 2,
            log: true,
        }
    }
}

/// A request as the server reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRequest {
    /// The query texts.
    pub queries: Vec<String>,
    /// Hits per query (the server's default when the request has none).
    pub topk: usize,
    /// Whether each document comes with its score.
    pub return_scores: bool,
    /// Fields of the request the API does not know, ignored (as Search-R1's server does).
    pub ignored: Vec<String>,
}

/// Read a request body as Search-R1's `QueryRequest`, within `params`' limits (`topk` at
/// most `max_topk`, at most `max_queries` queries). The error is the message a `400`
/// carries, naming the field.
pub fn parse_request(
    body: &[u8],
    params: &ServeParams,
) -> std::result::Result<SearchRequest, String> {
    let default_topk = params.default_topk;
    let v: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let Value::Object(mut obj) = v else {
        return Err(format!(
            "the body must be a JSON object {{\"queries\": [...], \"topk\": k, \"return_scores\": bool}}, got {}",
            kind(&v)
        ));
    };
    let queries = match obj.remove("queries") {
        None => return Err("`queries` is missing: a list of query strings".into()),
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .map(|(i, q)| match q {
                Value::String(s) => Ok(s),
                other => Err(format!(
                    "`queries[{i}]` must be a string, got {}",
                    kind(&other)
                )),
            })
            .collect::<std::result::Result<Vec<_>, _>>()?,
        Some(other) => {
            return Err(format!(
                "`queries` must be a list of strings, got {}",
                kind(&other)
            ))
        }
    };
    if queries.len() > params.max_queries {
        return Err(format!(
            "`queries` has {} queries, more than this server's limit of {} per request",
            queries.len(),
            params.max_queries
        ));
    }
    let topk = match obj.remove("topk") {
        None | Some(Value::Null) => default_topk,
        Some(Value::Number(n)) => match n.as_u64() {
            Some(0) => return Err("`topk` must be at least 1, got 0".into()),
            Some(k) if k > params.max_topk as u64 => {
                return Err(format!(
                    "`topk` {k} is above this server's limit of {}",
                    params.max_topk
                ))
            }
            Some(k) => usize::try_from(k).map_err(|_| format!("`topk` {k} is too large"))?,
            None => return Err(format!("`topk` must be a positive integer, got {n}")),
        },
        Some(other) => {
            return Err(format!(
                "`topk` must be a positive integer, got {}",
                kind(&other)
            ))
        }
    };
    let return_scores = match obj.remove("return_scores") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => b,
        Some(other) => {
            return Err(format!(
                "`return_scores` must be true or false, got {}",
                kind(&other)
            ))
        }
    };
    Ok(SearchRequest {
        queries,
        topk,
        return_scores,
        ignored: obj.keys().cloned().collect(),
    })
}

/// A JSON value's kind and a short view of it, for error messages.
fn kind(v: &Value) -> String {
    let text = v.to_string();
    let short: String = text.chars().take(40).collect();
    let what = match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    };
    if short.len() < text.len() {
        format!("{what} ({short}…)")
    } else {
        format!("{what} ({short})")
    }
}

/// A retriever and the passages it ranks, ready to answer requests.
pub struct Served {
    retriever: Arc<dyn Retriever>,
    passages: Vec<Passage>,
    position: HashMap<String, usize>,
}

impl Served {
    /// Serve `retriever` over `passages` (the corpus it was built over).
    ///
    /// Errors: a passage id given twice ([`Error::InvalidParam`] naming it).
    pub fn new(retriever: Arc<dyn Retriever>, passages: Vec<Passage>) -> Result<Self> {
        let position = crate::pipeline::passage_positions(&passages)?;
        Ok(Served {
            retriever,
            passages,
            position,
        })
    }

    /// The first stage of a pipeline config ([`first_stage`]).
    pub fn from_config(config: &PipelineConfig) -> Result<Self> {
        let stage = first_stage(config)?;
        Self::new(stage.retriever, stage.passages)
    }

    /// The retriever's name.
    pub fn name(&self) -> String {
        self.retriever.name()
    }

    /// The number of passages.
    pub fn len(&self) -> usize {
        self.passages.len()
    }

    /// Whether there is no passage.
    pub fn is_empty(&self) -> bool {
        self.passages.is_empty()
    }

    /// The response body of `request`, JSON: `{"result": [...]}`, Search-R1's shape.
    ///
    /// Errors: the retriever's; a hit whose id is no passage ([`Error::InvalidParam`]).
    pub fn answer(&self, request: &SearchRequest) -> Result<Vec<u8>> {
        let queries: Vec<Query> = request
            .queries
            .iter()
            .enumerate()
            .map(|(i, q)| Query {
                id: i.to_string(),
                text: q.clone(),
            })
            .collect();
        // No list is longer than the corpus; a `topk` beyond it asks for every passage
        // (the retriever contract) without sizing anything by the request's number.
        let k = request.topk.min(self.passages.len().max(1));
        let mut run = if queries.is_empty() {
            Default::default()
        } else {
            self.retriever.retrieve_all(&queries, k)?
        };
        let mut result = Vec::with_capacity(queries.len());
        for q in &queries {
            let hits = run.remove(&q.id).unwrap_or_default();
            let docs = hits
                .into_iter()
                .map(|h| {
                    let p = self
                        .position
                        .get(&h.id)
                        .map(|&i| &self.passages[i])
                        .ok_or_else(|| {
                            Error::param(
                                "hits",
                                format!("the retriever returned `{}`, which is no passage", h.id),
                            )
                        })?;
                    if !h.score.is_finite() {
                        return Err(Error::param(
                            "hits",
                            format!(
                                "the retriever scored `{}` {}, which JSON cannot carry",
                                h.id, h.score
                            ),
                        ));
                    }
                    let document = Doc {
                        id: &p.id,
                        contents: contents(&p.title, &p.text),
                    };
                    Ok(if request.return_scores {
                        Item::Scored {
                            document,
                            score: h.score,
                        }
                    } else {
                        Item::Plain(document)
                    })
                })
                .collect::<Result<Vec<Item<'_>>>>()?;
            result.push(docs);
        }
        Ok(serde_json::to_vec(&Body { result })?)
    }
}

/// A document of a response (borrowing the passage's id): `{"id", "contents"}`.
#[derive(serde::Serialize)]
struct Doc<'a> {
    id: &'a str,
    contents: String,
}

/// One item of a hit list: with its score, or the document alone.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Item<'a> {
    Scored { document: Doc<'a>, score: f32 },
    Plain(Doc<'a>),
}

/// A response body.
#[derive(serde::Serialize)]
struct Body<'a> {
    result: Vec<Vec<Item<'a>>>,
}

struct AppState {
    served: Arc<Served>,
    params: ServeParams,
    /// One permit per retrieval allowed at once ([`ServeParams::max_in_flight`]).
    in_flight: Arc<tokio::sync::Semaphore>,
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    json_response(status, &json!({ "error": message.into() }))
}

/// `value` as a JSON response (axum's `json` feature is left out: it turns on serde_json's
/// `raw_value`, which would rebuild every crate above serde_json).
fn json_response(status: StatusCode, value: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

async fn info(State(state): State<Arc<AppState>>) -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "retriever": state.served.name(),
            "passages": state.served.len(),
            "topk": state.params.default_topk,
        }),
    )
}

async fn retrieve(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let t0 = Instant::now();
    let params = &state.params;
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > params.max_body_bytes as u64) {
        return logged(
            params,
            t0,
            None,
            error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the body is larger than {} bytes", params.max_body_bytes),
            ),
        );
    }
    let read = axum::body::to_bytes(request.into_body(), params.max_body_bytes);
    let body = match tokio::time::timeout(params.body_timeout, read).await {
        Err(_) => {
            let message = format!(
                "the request body did not arrive within {:.0} s",
                params.body_timeout.as_secs_f64()
            );
            return logged(
                params,
                t0,
                None,
                error(StatusCode::REQUEST_TIMEOUT, message),
            );
        }
        Ok(Err(e)) => {
            // A body sent in chunks has no Content-Length to refuse it by: its limit shows here.
            // (axum wraps http-body-util's LengthLimitError; its message names the limit.)
            let too_large =
                std::iter::successors(Some(&e as &(dyn std::error::Error + 'static)), |x| {
                    x.source()
                })
                .any(|x| x.to_string().contains("length limit"));
            let (status, message) = if too_large {
                (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the body is larger than {} bytes", params.max_body_bytes),
                )
            } else {
                (
                    StatusCode::BAD_REQUEST,
                    format!("could not read the request body: {e}"),
                )
            };
            return logged(params, t0, None, error(status, message));
        }
        Ok(Ok(b)) => b,
    };
    let parsed = match parse_request(&body, params) {
        Ok(p) => p,
        Err(message) => {
            return logged(params, t0, None, error(StatusCode::BAD_REQUEST, message));
        }
    };
    let served = state.served.clone();
    // Wait for a turn: at most `max_in_flight` retrievals run at once.
    let Ok(permit) = state.in_flight.clone().acquire_owned().await else {
        let response = error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is shutting down",
        );
        return logged(params, t0, Some(&parsed), response);
    };
    let answer = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let out = served.answer(&parsed);
        (parsed, out)
    })
    .await;
    let (parsed, response) = match answer {
        Ok((parsed, Ok(body))) => (
            parsed,
            ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        ),
        Ok((parsed, Err(e))) => (
            parsed,
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("retrieval failed: {e}"),
            ),
        ),
        Err(e) => {
            let message = format!("retrieval failed: {e}");
            let response = error(StatusCode::INTERNAL_SERVER_ERROR, message);
            return logged(params, t0, None, response);
        }
    };
    logged(params, t0, Some(&parsed), response)
}

/// Log one line for a request (when `params.log`) and pass its response on.
fn logged(
    params: &ServeParams,
    t0: Instant,
    request: Option<&SearchRequest>,
    response: Response,
) -> Response {
    if params.log {
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let status = response.status().as_u16();
        match request {
            Some(r) => {
                let ignored = if r.ignored.is_empty() {
                    String::new()
                } else {
                    format!(", ignored fields {}", r.ignored.join(", "))
                };
                eprintln!(
                    "POST /retrieve {status}: {} queries, topk {}{ignored}, {ms:.1} ms",
                    r.queries.len(),
                    r.topk
                );
            }
            None => eprintln!("POST /retrieve {status}, {ms:.1} ms"),
        }
    }
    response
}

/// The routes, over `served`.
fn router(served: Arc<Served>, params: ServeParams) -> Router {
    let in_flight = Arc::new(tokio::sync::Semaphore::new(params.max_in_flight.max(1)));
    let state = Arc::new(AppState {
        served,
        params,
        in_flight,
    });
    Router::new()
        .route(
            "/retrieve",
            post(retrieve).fallback(|| async {
                error(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "use POST /retrieve with a JSON body",
                )
            }),
        )
        .route("/", get(info))
        .fallback(|| async {
            error(
                StatusCode::NOT_FOUND,
                "no such route: POST /retrieve, or GET / for the server's retriever",
            )
        })
        .with_state(state)
}

/// A bound server, not yet answering. [`Server::run`] answers in this thread, forever;
/// [`Server::spawn`] in a thread of its own, until the handle is dropped.
pub struct Server {
    listener: std::net::TcpListener,
    served: Arc<Served>,
    params: ServeParams,
}

impl Server {
    /// Bind `addr` (`"127.0.0.1:8000"`; port 0 picks a free one).
    ///
    /// Errors: the address cannot be bound ([`Error::Server`] naming it); a zero
    /// `default_topk` or `worker_threads` ([`Error::InvalidParam`]).
    pub fn bind(addr: &str, served: Served, params: ServeParams) -> Result<Server> {
        if params.default_topk == 0 {
            return Err(Error::param("topk", "the default topk must be at least 1"));
        }
        if params.worker_threads == 0 {
            return Err(Error::param("worker_threads", "must be at least 1"));
        }
        let listener = std::net::TcpListener::bind(addr).map_err(|e| Error::Server {
            url: format!("http://{addr}"),
            message: format!("cannot listen: {e}"),
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::io(addr, e))?;
        Ok(Server {
            listener,
            served: Arc::new(served),
            params,
        })
    }

    /// The address bound (with the port chosen when asked for port 0).
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| Error::io("listener", e))
    }

    /// Answer requests in this thread until the process ends.
    pub fn run(self) -> Result<()> {
        let (_keep, stop) = tokio::sync::oneshot::channel::<()>();
        self.run_until(stop)
    }

    /// Answer requests in a thread of its own until the handle is dropped.
    pub fn spawn(self) -> Result<ServerHandle> {
        let addr = self.local_addr()?;
        let (stop, until) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("retrieve-server".into())
            .spawn(move || self.run_until(until))
            .map_err(|e| Error::io("retrieve-server thread", e))?;
        Ok(ServerHandle {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    fn run_until(self, mut stop: tokio::sync::oneshot::Receiver<()>) -> Result<()> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(self.params.worker_threads)
            .enable_all()
            .build()
            .map_err(|e| Error::io("tokio runtime", e))?;
        let header_timeout = self.params.header_timeout;
        let app = router(self.served, self.params);
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(self.listener)
                .map_err(|e| Error::io("listener", e))?;
            loop {
                let accepted = tokio::select! {
                    _ = &mut stop => return Ok(()),
                    accepted = listener.accept() => accepted,
                };
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // Out of file descriptors and the like: wait, then accept again.
                        eprintln!("retrieve-server: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let service = hyper_util::service::TowerToHyperService::new(app.clone());
                tokio::spawn(async move {
                    let mut http = hyper::server::conn::http1::Builder::new();
                    // The header timeout runs from the connection's start: a client that
                    // connects and sends nothing is closed when it passes.
                    http.timer(hyper_util::rt::TokioTimer::new())
                        .header_read_timeout(header_timeout)
                        .keep_alive(true);
                    // A client that goes away mid-request ends only its own connection.
                    let _ = http
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        })
    }
}

/// A server answering in its own thread; dropping the handle stops it.
pub struct ServerHandle {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
}

impl ServerHandle {
    /// The address it answers on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its `/retrieve` endpoint, `http://ADDR/retrieve`.
    pub fn url(&self) -> String {
        format!("http://{}/retrieve", self.addr)
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p3() -> ServeParams {
        ServeParams {
            default_topk: 3,
            max_topk: 100,
            max_queries: 4,
            ..ServeParams::default()
        }
    }

    #[test]
    fn requests_are_read_as_search_r1_reads_them() {
        let r = parse_request(
            br#"{"queries": ["a", "b"], "topk": 5, "return_scores": true}"#,
            &p3(),
        )
        .unwrap();
        assert_eq!(r.queries, ["a", "b"]);
        assert_eq!((r.topk, r.return_scores), (5, true));
        let r = parse_request(br#"{"queries": [], "topk": null, "extra": 1}"#, &p3()).unwrap();
        assert_eq!((r.topk, r.return_scores), (3, false));
        assert_eq!(r.ignored, ["extra"]);
    }

    #[test]
    fn bad_requests_name_the_field() {
        for (body, field) in [
            (&b"not json"[..], "not JSON"),
            (b"[1]", "JSON object"),
            (b"{}", "`queries` is missing"),
            (br#"{"queries": "a"}"#, "`queries` must be a list"),
            (br#"{"queries": ["a", 3]}"#, "`queries[1]`"),
            (
                br#"{"queries": ["a"], "topk": 0}"#,
                "`topk` must be at least 1",
            ),
            (br#"{"queries": ["a"], "topk": -2}"#, "`topk`"),
            (br#"{"queries": ["a"], "topk": 2.5}"#, "`topk`"),
            (br#"{"queries": ["a"], "topk": "3"}"#, "`topk`"),
            (
                br#"{"queries": ["a"], "return_scores": 1}"#,
                "`return_scores`",
            ),
            (
                br#"{"queries": ["a"], "topk": 101}"#,
                "`topk` 101 is above this server's limit of 100",
            ),
            (
                br#"{"queries": ["a", "b", "c", "d", "e"]}"#,
                "5 queries, more than this server's limit of 4",
            ),
        ] {
            let e = parse_request(body, &p3()).unwrap_err();
            assert!(e.contains(field), "{}: {e}", String::from_utf8_lossy(body));
        }
    }
}
