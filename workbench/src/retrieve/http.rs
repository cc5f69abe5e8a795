//! A retriever on a server that speaks Search-R1's retrieval API (`kind = "http"`): the
//! workbench's own `retrieve-server` (`crate::serve`, feature `serve`), Search-R1's
//! `search_r1/search/retrieval_server.py`, or any server with the same request and response.
//!
//! The wire format, as Search-R1's `retrieval_server.py` (FastAPI, `QueryRequest` and
//! `retrieve_endpoint`) defines it and its agent (`search_r1/llm_agent/generation.py`,
//! `_batch_search`) calls it: `POST /retrieve` with
//!
//! ```json
//! {"queries": ["who wrote hamlet?", "capital of france"], "topk": 3, "return_scores": true}
//! ```
//!
//! (`topk` missing or null: the server's default; `return_scores` missing: false), answered
//! with one list per query, in the order of `queries`:
//!
//! ```json
//! {"result": [[{"document": {"id": "hamlet", "contents": "\"Hamlet\"\nHamlet was written by …"}, "score": 7.31}, …], …]}
//! ```
//!
//! and without scores, `{"result": [[{"id": …, "contents": …}, …], …]}`. A document's
//! `contents` is FlashRAG's and Search-R1's wiki-18 layout: the title in double quotes on the
//! first line, the text after the newline ([`contents`]); Search-R1's agent shows the first
//! line as the title and the rest as the text.
//!
//! The retriever asks with `return_scores: true` and turns each document into a [`Hit`]: the
//! passage id is `document.id` (a string, or a number read as its text), the score `score`,
//! in the server's order (a list with a passage twice, or a score above the one before, is
//! refused). A request the server cannot take (no connection, 502, 503, 504) is tried again
//! twice, after 0.5 s and 1 s. Search-R1's BM25 server returns documents without `id`: the
//! retriever cannot check those against its corpus and says so. A pipeline reads each hit's text from its
//! own corpus, so every id the server returns must be a passage of the corpus the retriever
//! was built over, with the same text: an unknown id, or a passage whose text differs from
//! the server's `contents`, is an error naming the passage (serve the same corpus, chunked the
//! same way, on both sides).

use super::{check_k, BuildRetriever, Retriever};

/// Tries after the first when the server cannot be reached or answers 502–504.
const RETRIES: usize = 2;
use crate::{Error, Hit, Passage, Query, Result, Run};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// A passage's `contents` in Search-R1's responses: `"{title}"\n{text}` (FlashRAG's
/// wiki-18 layout: the title quoted on the first line). A passage without a title gives
/// `""\n{text}`, so the text never moves into the title line.
pub fn contents(title: &str, text: &str) -> String {
    format!("\"{title}\"\n{text}")
}

/// The text of a `contents` field: everything after its first newline, or the whole field
/// when it has none (the inverse of [`contents`] for the text).
pub fn contents_text(contents: &str) -> &str {
    contents.split_once('\n').map_or(contents, |(_, text)| text)
}

/// A document as the server returns it: `{"id", "contents"}` (other fields kept out).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireDocument {
    /// The passage id (a JSON string, or a number read as its decimal text, as the corpus
    /// loader reads a numeric id).
    #[serde(deserialize_with = "string_or_number")]
    pub id: String,
    /// `"{title}"\n{text}` ([`contents`]).
    pub contents: String,
}

fn string_or_number<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<String, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => Ok(s),
        serde_json::Value::Number(n) => Ok(n.to_string()),
        other => Err(serde::de::Error::custom(format!(
            "`id` must be a string or a number, got {other}"
        ))),
    }
}

/// One retrieved document with its score (`return_scores: true`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredDocument {
    /// The document.
    pub document: WireDocument,
    /// Its retrieval score (higher = more relevant), as the server wrote it.
    pub score: f64,
}

/// The response body with scores: one list per query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredResponse {
    /// The ranked documents of each query, in the order of the request's `queries`.
    pub result: Vec<Vec<ScoredDocument>>,
}

/// The request the retriever sends: Search-R1's `QueryRequest` with scores asked for.
#[derive(Debug, Clone, Serialize)]
struct Request<'a> {
    queries: Vec<&'a str>,
    topk: usize,
    return_scores: bool,
}

/// A retriever that asks a server. See the [module docs](self).
pub struct HttpRetriever {
    url: String,
    agent: ureq::Agent,
    batch_size: usize,
    /// The text of every passage of the local corpus, by id, to check the server's answers.
    texts: Arc<HashMap<String, String>>,
}

impl HttpRetriever {
    /// A retriever on the endpoint `url` (`http://HOST:PORT/retrieve`), each request
    /// waiting at most `timeout`, `batch_size` queries per request in
    /// [`Retriever::retrieve_all`], checking the server's ids and texts against `passages`.
    ///
    /// Errors: an empty `url`, a zero `batch_size` or `timeout` ([`Error::InvalidParam`]).
    pub fn new(
        url: &str,
        timeout: Duration,
        batch_size: usize,
        passages: &[Passage],
    ) -> Result<Self> {
        HttpSpec {
            url: url.to_string(),
            timeout_secs: timeout.as_secs_f64(),
            batch_size,
        }
        .check()?;
        let texts = passages
            .iter()
            .map(|p| (p.id.clone(), p.text.clone()))
            .collect();
        Ok(HttpRetriever {
            url: url.to_string(),
            agent: ureq::AgentBuilder::new().timeout(timeout).build(),
            batch_size,
            texts: Arc::new(texts),
        })
    }

    /// The endpoint.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn server_error(&self, message: impl Into<String>) -> Error {
        Error::Server {
            url: self.url.clone(),
            message: message.into(),
        }
    }

    /// POST `body`, trying again after 0.5 s and 1 s when the server cannot be reached or
    /// answers 502, 503 or 504 (a restart, a proxy, a full queue).
    fn post(&self, body: &Request<'_>) -> std::result::Result<ureq::Response, Box<ureq::Error>> {
        let mut wait = Duration::from_millis(500);
        for _ in 0..RETRIES {
            match self.agent.post(&self.url).send_json(body) {
                Err(ureq::Error::Transport(_)) | Err(ureq::Error::Status(502..=504, _)) => {
                    std::thread::sleep(wait);
                    wait *= 2;
                }
                other => return other.map_err(Box::new),
            }
        }
        self.agent.post(&self.url).send_json(body).map_err(Box::new)
    }

    /// One request: the top `k` hits of each of `queries`, in order.
    fn ask(&self, queries: &[&str], k: usize) -> Result<Vec<Vec<Hit>>> {
        check_k(k)?;
        let body = Request {
            queries: queries.to_vec(),
            // No list can be longer than the local corpus (Search-R1's dense server pads a
            // larger `topk` with repeats of its last passage).
            topk: k.min(self.texts.len().max(1)),
            return_scores: true,
        };
        let response = match self.post(&body).map_err(|e| *e) {
            Ok(r) => r,
            Err(ureq::Error::Status(code, r)) => {
                let text = r.into_string().unwrap_or_default();
                // The workbench's server answers `{"error": "..."}`; FastAPI `{"detail": ...}`.
                let message = serde_json::from_str::<serde_json::Value>(&text)
                    .ok()
                    .and_then(|v| {
                        v.get("error")
                            .or_else(|| v.get("detail"))
                            .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_string))
                    })
                    .unwrap_or(text);
                return Err(self.server_error(format!("HTTP {code}: {message}")));
            }
            Err(ureq::Error::Transport(t)) => {
                return Err(self.server_error(format!("no answer: {t}")))
            }
        };
        let parsed: ScoredResponse = serde_json::from_reader(response.into_reader())
            .map_err(|e| {
                let hint = if e.to_string().contains("missing field `id`") {
                    " (a server whose documents carry no `id`, such as Search-R1's BM25 server, cannot be checked against the local corpus: serve it with the workbench's retrieve-server)"
                } else {
                    ""
                };
                self.server_error(format!(
                    "the response is not Search-R1's {{\"result\": [[{{\"document\": {{\"id\", \"contents\"}}, \"score\"}}, …], …]}}: {e}{hint}"
                ))
            })?;
        if parsed.result.len() != queries.len() {
            return Err(self.server_error(format!(
                "answered {} lists for {} queries",
                parsed.result.len(),
                queries.len()
            )));
        }
        parsed
            .result
            .into_iter()
            .map(|docs| {
                let hits = docs
                    .into_iter()
                    .map(|d| self.hit(d))
                    .collect::<Result<Vec<_>>>()?;
                self.ranked(hits, k)
            })
            .collect()
    }

    /// The server's list as it ranked it, cut to `k`: refused when a passage comes twice
    /// or a score is above the one before (the list is not a ranking).
    fn ranked(&self, mut hits: Vec<Hit>, k: usize) -> Result<Vec<Hit>> {
        let mut seen = std::collections::HashSet::new();
        for (i, h) in hits.iter().enumerate() {
            if !seen.insert(h.id.as_str()) {
                return Err(
                    self.server_error(format!("returned passage `{}` twice in one list", h.id))
                );
            }
            if i > 0 && h.score > hits[i - 1].score {
                return Err(self.server_error(format!(
                    "the list is not ranked: `{}` ({}) comes after `{}` ({})",
                    h.id,
                    h.score,
                    hits[i - 1].id,
                    hits[i - 1].score
                )));
            }
        }
        hits.truncate(k);
        Ok(hits)
    }

    /// A returned document as a hit, after checking it is the local corpus' passage.
    fn hit(&self, d: ScoredDocument) -> Result<Hit> {
        let Some(text) = self.texts.get(&d.document.id) else {
            return Err(self.server_error(format!(
                "returned passage `{}`, which is not in the local corpus: the pipeline reads \
                 passages from its own [corpus], so it must hold the corpus the server serves, \
                 chunked the same way",
                d.document.id
            )));
        };
        if contents_text(&d.document.contents) != text {
            return Err(self.server_error(format!(
                "passage `{}` has another text on the server than in the local corpus \
                 (server: {:?}): serve the same corpus, chunked the same way",
                d.document.id,
                contents_text(&d.document.contents)
                    .chars()
                    .take(80)
                    .collect::<String>()
            )));
        }
        Ok(Hit::new(d.document.id, d.score as f32))
    }
}

impl Retriever for HttpRetriever {
    fn name(&self) -> String {
        format!("http-{}", self.url)
    }

    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        let mut lists = self.ask(&[query], k)?;
        Ok(lists.pop().unwrap_or_default())
    }

    /// The queries in requests of `batch_size`, one after another.
    fn retrieve_all(&self, queries: &[Query], k: usize) -> Result<Run> {
        check_k(k)?;
        let mut run = Run::new();
        for batch in queries.chunks(self.batch_size) {
            let texts: Vec<&str> = batch.iter().map(|q| q.text.as_str()).collect();
            for (q, hits) in batch.iter().zip(self.ask(&texts, k)?) {
                run.insert(q.id.clone(), hits);
            }
        }
        Ok(run)
    }
}

/// The `http` retriever as configured (`kind = "http"`): a server speaking Search-R1's
/// `/retrieve` API.
///
/// ```toml
/// [[retrieval.retrievers]]
/// kind = "http"
/// url = "http://127.0.0.1:8000/retrieve"
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpSpec {
    /// The endpoint, `http://HOST:PORT/retrieve`. Required.
    pub url: String,
    /// Seconds a request may take, connecting included. Default 60.
    pub timeout_secs: f64,
    /// Queries per request when a retrieval study asks for many at once. Default 512.
    pub batch_size: usize,
}

impl Default for HttpSpec {
    fn default() -> Self {
        HttpSpec {
            url: String::new(),
            timeout_secs: 60.0,
            batch_size: 512,
        }
    }
}

impl BuildRetriever for HttpSpec {
    fn check(&self) -> Result<()> {
        if self.url.trim().is_empty() {
            return Err(Error::param(
                "retrieval.retrievers.url",
                "`http` needs the server's endpoint, e.g. url = \"http://127.0.0.1:8000/retrieve\"",
            ));
        }
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            return Err(Error::param(
                "retrieval.retrievers.url",
                format!("{:?} is not an http:// or https:// address", self.url),
            ));
        }
        if !(self.timeout_secs.is_finite() && self.timeout_secs > 0.0) {
            return Err(Error::param(
                "retrieval.retrievers.timeout_secs",
                format!("{} is not a positive number of seconds", self.timeout_secs),
            ));
        }
        if self.batch_size == 0 {
            return Err(Error::param(
                "retrieval.retrievers.batch_size",
                "must be at least 1",
            ));
        }
        Ok(())
    }

    fn build(&self, ctx: &crate::build::BuildCtx<'_>) -> Result<Arc<dyn Retriever>> {
        Ok(Arc::new(HttpRetriever::new(
            &self.url,
            Duration::from_secs_f64(self.timeout_secs),
            self.batch_size,
            ctx.passages,
        )?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contents_round_trips_the_text_and_quotes_the_title() {
        let c = contents("Hamlet", "A tragedy.\nSecond line.");
        assert_eq!(c, "\"Hamlet\"\nA tragedy.\nSecond line.");
        assert_eq!(contents_text(&c), "A tragedy.\nSecond line.");
        assert_eq!(contents_text(&contents("", "x")), "x");
        assert_eq!(contents_text("no newline"), "no newline");
    }

    #[test]
    fn checks_name_the_field() {
        let field = |spec: HttpSpec| spec.check().unwrap_err().to_string();
        assert!(field(HttpSpec::default()).contains("retrieval.retrievers.url"));
        let e = field(HttpSpec {
            url: "localhost:8000".into(),
            ..Default::default()
        });
        assert!(e.contains("retrieval.retrievers.url"), "{e}");
        let ok = HttpSpec {
            url: "http://127.0.0.1:8000/retrieve".into(),
            ..Default::default()
        };
        ok.check().unwrap();
        for t in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = field(HttpSpec {
                timeout_secs: t,
                ..ok.clone()
            });
            assert!(e.contains("retrieval.retrievers.timeout_secs"), "{e}");
        }
        let e = field(HttpSpec {
            batch_size: 0,
            ..ok
        });
        assert!(e.contains("retrieval.retrievers.batch_size"), "{e}");
    }

    #[test]
    fn a_server_that_is_down_is_an_error_naming_the_url() {
        // A port nothing listens on: bind one, note it, and close it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/retrieve");
        let r = HttpRetriever::new(&url, Duration::from_secs(5), 8, &[]).unwrap();
        let e = r.retrieve("q", 3).unwrap_err().to_string();
        assert!(e.contains(&url), "{e}");
        assert!(r.retrieve("q", 0).is_err());
    }
}
