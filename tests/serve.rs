//! The retrieval server (`workbench::serve`, Search-R1's `/retrieve` API) and the `http`
//! retriever (`workbench::retrieve::http`) on the loopback interface, over the pipeline
//! fixture's corpus (`tests/data/pipeline/`, 8 documents):
//!
//! - results and scores over HTTP equal the in-process retriever's, bit for bit: BM25,
//!   BM25 + TF-IDF fused (RRF and min-max) and BM25 + dense (MiniLM; needs the
//!   `all-minilm-l6-v2` asset, which `scripts/test` fetches; a missing asset fails naming
//!   the command that fetches it);
//! - 8 clients at once each get their own answers;
//! - bad requests are answered 400 (405, 404, 413) with a message naming the field;
//! - a client that connects and sends nothing, and one that sends half a body, do not hold
//!   up another client; the half body is answered 408 and the silent one closed;
//! - a slow retrieval does not hold up another request while a slot is free
//!   (`max_in_flight`), and with one slot the second request waits for it;
//! - a request exactly as Search-R1's agent sends it (`_batch_search` in
//!   `search_r1/llm_agent/generation.py`) is answered with exactly Search-R1's keys, and its
//!   `_passages2string` reads titles and texts from the answer;
//! - a pipeline with `kind = "http"` gives the same run as the same pipeline in process; a
//!   server whose corpus differs from the pipeline's is an error naming the passage.

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use workbench::pipeline::{first_stage, Pipeline, PipelineConfig};
use workbench::read::{Answer, Context, Reader};
use workbench::retrieve::http::HttpRetriever;
use workbench::retrieve::Retriever;
use workbench::serve::{ServeParams, Served, Server, ServerHandle};
use workbench::{Passage, Query};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A pipeline config over the fixture corpus and questions with `retrieval` as its
/// `[retrieval]` section (TOML), retrieval cache off.
fn config(retrieval: &str) -> PipelineConfig {
    let text = format!(
        r#"name = "serve-test"
[corpus]
kind = "jsonl"
path = "tests/data/pipeline/corpus.jsonl"
[chunker]
kind = "whole"
{retrieval}
[reader]
prompt = "data/prompts/rag_001.txt"
passages = 2
[questions]
kind = "jsonl"
path = "tests/data/pipeline/questions.jsonl"
[cache]
retrieval = false
"#
    );
    PipelineConfig::from_toml(&text, Path::new("serve-test.toml"), &root())
        .unwrap_or_else(|e| panic!("{e}"))
}

const BM25: &str = "[retrieval]\ndepth = 5\n[[retrieval.retrievers]]\nkind = \"bm25\"\n";
const BM25_TFIDF_RRF: &str = "[retrieval]\ndepth = 5\nfusion = \"rrf\"\n[[retrieval.retrievers]]\nkind = \"bm25\"\n[[retrieval.retrievers]]\nkind = \"tfidf\"\n";
const BM25_TFIDF_MINMAX: &str = "[retrieval]\ndepth = 6\nfusion = \"minmax\"\nweights = [0.3, 0.7]\n[[retrieval.retrievers]]\nkind = \"bm25\"\nk1 = 1.2\nb = 0.75\n[[retrieval.retrievers]]\nkind = \"tfidf\"\n";
const BM25_DENSE: &str = "[retrieval]\ndepth = 5\nfusion = \"minmax\"\n[[retrieval.retrievers]]\nkind = \"dense\"\n[[retrieval.retrievers]]\nkind = \"bm25\"\n";

/// Queries: the fixture's questions, others, a duplicate, one with no known word, an empty one.
fn queries() -> Vec<String> {
    [
        "What is the capital of France?",
        "Who wrote Hamlet?",
        "When did the Berlin Wall fall?",
        "capital city",
        "Who wrote Hamlet?",
        "zzzz qqqq",
        "",
        "Which museum is in Paris, and which tower?",
        "Is the capital Rome, Berlin or Paris, by the sea, on the Moon or on the highest mountain?",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn params() -> ServeParams {
    ServeParams {
        log: false,
        ..ServeParams::default()
    }
}

/// A server over `config`'s first stage on a free loopback port.
fn serve(config: &PipelineConfig, params: ServeParams) -> ServerHandle {
    let served = Served::from_config(config).unwrap_or_else(|e| panic!("{e}"));
    Server::bind("127.0.0.1:0", served, params)
        .unwrap()
        .spawn()
        .unwrap()
}

fn post(url: &str, body: &Value) -> (u16, Value) {
    post_raw(url, &body.to_string())
}

fn post_raw(url: &str, body: &str) -> (u16, Value) {
    let r = ureq::post(url)
        .timeout(Duration::from_secs(30))
        .set("Content-Type", "application/json")
        .send_string(body);
    let (code, resp) = match r {
        Ok(r) => (r.status(), r),
        Err(ureq::Error::Status(code, r)) => (code, r),
        Err(e) => panic!("{url}: {e}"),
    };
    let text = resp.into_string().unwrap();
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (code, v)
}

/// The (id, score bits) of each hit list of a `/retrieve` answer with scores.
fn wire_hits(v: &Value) -> Vec<Vec<(String, u32)>> {
    v["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|list| {
            list.as_array()
                .unwrap()
                .iter()
                .map(|d| {
                    let id = d["document"]["id"].as_str().unwrap().to_string();
                    let score: f32 = serde_json::from_value(d["score"].clone()).unwrap();
                    (id, score.to_bits())
                })
                .collect()
        })
        .collect()
}

fn local_hits(r: &dyn Retriever, queries: &[String], k: usize) -> Vec<Vec<(String, u32)>> {
    queries
        .iter()
        .map(|q| {
            r.retrieve(q, k)
                .unwrap()
                .into_iter()
                .map(|h| (h.id, h.score.to_bits()))
                .collect()
        })
        .collect()
}

/// Over HTTP, one batch and one query at a time, through the raw API and through the
/// `http` retriever, at several k: the in-process retriever's ids and score bits. A `topk`
/// beyond the corpus (within the server's limit) is answered with at most every passage.
fn check_same_as_in_process(retrieval: &str) {
    let config = config(retrieval);
    let local = first_stage(&config).unwrap_or_else(|e| panic!("{e}"));
    let server = serve(&config, params());
    let qs = queries();
    let (code, v) = post(
        &server.url(),
        &json!({"queries": qs, "topk": 1000, "return_scores": true}),
    );
    assert_eq!(code, 200, "{v}");
    let lists = wire_hits(&v);
    assert_eq!(
        lists,
        local_hits(local.retriever.as_ref(), &qs, 8),
        "{retrieval}"
    );
    for k in [1, 3, 5] {
        let want = local_hits(local.retriever.as_ref(), &qs, k);
        assert!(
            want.iter().any(|l| l.len() == k),
            "{retrieval}: no full list"
        );
        let (code, v) = post(
            &server.url(),
            &json!({"queries": qs, "topk": k, "return_scores": true}),
        );
        assert_eq!(code, 200, "{v}");
        assert_eq!(wire_hits(&v), want, "{retrieval} k={k}");
        for (q, w) in qs.iter().zip(&want) {
            let (_, v) = post(
                &server.url(),
                &json!({"queries": [q], "topk": k, "return_scores": true}),
            );
            assert_eq!(&wire_hits(&v)[0], w, "{retrieval} k={k} {q:?}");
        }
        // The http retriever: one request per query, and batches of 3 in retrieve_all.
        let client =
            HttpRetriever::new(&server.url(), Duration::from_secs(30), 3, &local.passages).unwrap();
        assert_eq!(local_hits(&client, &qs, k), want, "{retrieval} k={k}");
        let batch: Vec<Query> = qs
            .iter()
            .enumerate()
            .map(|(i, q)| Query {
                id: format!("q{i}"),
                text: q.clone(),
            })
            .collect();
        assert_eq!(
            client.retrieve_all(&batch, k).unwrap(),
            local.retriever.retrieve_all(&batch, k).unwrap(),
            "{retrieval} k={k}"
        );
    }
}

#[test]
fn bm25_over_http_equals_in_process() {
    check_same_as_in_process(BM25);
}

#[test]
fn fused_bm25_tfidf_over_http_equals_in_process() {
    check_same_as_in_process(BM25_TFIDF_RRF);
    check_same_as_in_process(BM25_TFIDF_MINMAX);
}

#[test]
fn dense_hybrid_over_http_equals_in_process() {
    check_same_as_in_process(BM25_DENSE);
}

#[test]
fn eight_concurrent_clients_get_their_own_answers() {
    let config = config(BM25_TFIDF_RRF);
    let local = first_stage(&config).unwrap();
    let server = serve(&config, params());
    let qs = queries();
    let url = server.url();
    let threads: Vec<_> = (0..8)
        .map(|c| {
            let url = url.clone();
            // Each client its own query list (rotated) and k.
            let mut mine = qs.clone();
            mine.rotate_left(c);
            let k = 1 + c % 4;
            let want = local_hits(local.retriever.as_ref(), &mine, k);
            std::thread::spawn(move || {
                for _ in 0..20 {
                    let (code, v) = post(
                        &url,
                        &json!({"queries": mine, "topk": k, "return_scores": true}),
                    );
                    assert_eq!(code, 200, "client {c}: {v}");
                    assert_eq!(wire_hits(&v), want, "client {c}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a client's answers differed");
    }
}

#[test]
fn bad_requests_are_answered_400_naming_the_field() {
    let config = config(BM25);
    let server = serve(
        &config,
        ServeParams {
            max_body_bytes: 4096,
            ..params()
        },
    );
    let url = server.url();
    for (body, field) in [
        ("{not json", "not JSON"),
        ("[\"a\"]", "JSON object"),
        ("{\"topk\": 3}", "`queries` is missing"),
        (
            "{\"queries\": \"Who wrote Hamlet?\"}",
            "`queries` must be a list",
        ),
        ("{\"queries\": [\"a\", 7]}", "`queries[1]`"),
        ("{\"queries\": [\"a\"], \"topk\": 0}", "`topk`"),
        ("{\"queries\": [\"a\"], \"topk\": -1}", "`topk`"),
        ("{\"queries\": [\"a\"], \"topk\": \"3\"}", "`topk`"),
        (
            "{\"queries\": [\"a\"], \"return_scores\": \"yes\"}",
            "`return_scores`",
        ),
    ] {
        let (code, v) = post_raw(&url, body);
        assert_eq!(code, 400, "{body}: {v}");
        let message = v["error"].as_str().unwrap_or_else(|| panic!("{v}"));
        assert!(message.contains(field), "{body}: {message}");
    }
    let big = json!({"queries": ["x".repeat(5000)]});
    let (code, v) = post(&url, &big);
    assert_eq!(code, 413, "{v}");
    assert!(v["error"].as_str().unwrap().contains("4096"), "{v}");
    // The same body sent in chunks (no Content-Length to refuse it by) is 413 too.
    let e = ureq::post(&url)
        .set("Content-Type", "application/json")
        .send(std::io::Cursor::new(big.to_string().into_bytes()))
        .unwrap_err();
    let ureq::Error::Status(code, r) = e else {
        panic!("{e:?}")
    };
    assert_eq!(code, 413);
    assert!(r.into_string().unwrap().contains("4096"));
    // Wrong method, wrong path: JSON errors too.
    let e = ureq::get(&url).call().unwrap_err();
    let ureq::Error::Status(405, r) = e else {
        panic!("{e:?}")
    };
    assert!(r.into_string().unwrap().contains("POST"));
    let e = ureq::post(&url.replace("/retrieve", "/search"))
        .send_string("{}")
        .unwrap_err();
    assert!(matches!(e, ureq::Error::Status(404, _)), "{e:?}");
    // The server still answers, and says what it serves.
    let (code, _) = post(&url, &json!({"queries": ["Hamlet"]}));
    assert_eq!(code, 200);
    let info: Value = ureq::get(&url.replace("/retrieve", "/"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    assert_eq!(info["passages"], 8, "{info}");
    assert_eq!(info["topk"], 3, "{info}");
    assert!(info["retriever"].as_str().unwrap().starts_with("bm25"));
}

#[test]
fn a_client_that_hangs_does_not_hold_up_another() {
    let config = config(BM25);
    let server = serve(
        &config,
        ServeParams {
            header_timeout: Duration::from_secs(2),
            body_timeout: Duration::from_secs(2),
            ..params()
        },
    );
    let addr = server.addr();
    // One client connects and sends nothing; another sends its headers and half its body.
    let mut silent = TcpStream::connect(addr).unwrap();
    let mut half = TcpStream::connect(addr).unwrap();
    let body = r#"{"queries": ["Who wrote Hamlet?"], "topk": 2}"#;
    write!(
        half,
        "POST /retrieve HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
        body.len(),
        &body[..body.len() / 2]
    )
    .unwrap();
    half.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // A third client is answered at once.
    let t0 = Instant::now();
    let (code, v) = post(
        &server.url(),
        &json!({"queries": ["Who wrote Hamlet?"], "topk": 1}),
    );
    let took = t0.elapsed();
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["result"][0][0]["id"], "hamlet", "{v}");
    assert!(took < Duration::from_secs(1), "answered after {took:?}");
    // The half body is answered 408 after the body timeout, the silent client is closed.
    half.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = Vec::new();
    let _ = half.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    assert!(answer.contains("did not arrive"), "{answer:?}");
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let t0 = Instant::now();
    let mut buf = Vec::new();
    let n = silent.read_to_end(&mut buf);
    assert!(
        t0.elapsed() < Duration::from_secs(9),
        "the silent client was kept {:?} ({n:?})",
        t0.elapsed()
    );
}

/// BM25 over the fixture, but a query containing "slow" takes `delay` first.
struct Slow {
    inner: std::sync::Arc<dyn Retriever>,
    delay: Duration,
}

impl Retriever for Slow {
    fn name(&self) -> String {
        format!("slow({})", self.inner.name())
    }
    fn retrieve(&self, query: &str, k: usize) -> workbench::Result<Vec<workbench::Hit>> {
        if query.contains("slow") {
            std::thread::sleep(self.delay);
        }
        self.inner.retrieve(query, k)
    }
}

/// How long a fast request takes while a slow one (sent first, on another connection) is
/// being retrieved, on a server with `max_in_flight` slots.
fn fast_while_slow(max_in_flight: usize) -> Duration {
    let stage = first_stage(&config(BM25)).unwrap_or_else(|e| panic!("{e}"));
    let slow = Slow {
        inner: stage.retriever.clone(),
        delay: Duration::from_secs(3),
    };
    let served = Served::new(std::sync::Arc::new(slow), stage.passages.clone())
        .unwrap_or_else(|e| panic!("{e}"));
    let server = Server::bind(
        "127.0.0.1:0",
        served,
        ServeParams {
            max_in_flight,
            ..params()
        },
    )
    .unwrap()
    .spawn()
    .unwrap();
    let url = server.url();
    let slow_url = url.clone();
    let slow_client = std::thread::spawn(move || {
        post(
            &slow_url,
            &json!({"queries": ["a slow question about Hamlet"], "topk": 1}),
        )
    });
    // Let the slow request reach the retriever first.
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    let (code, v) = post(&url, &json!({"queries": ["Who wrote Hamlet?"], "topk": 1}));
    let took = t0.elapsed();
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["result"][0][0]["id"], "hamlet", "{v}");
    let (code, v) = slow_client.join().unwrap();
    assert_eq!(code, 200, "{v}");
    took
}

#[test]
fn a_slow_retrieval_does_not_hold_up_another_request_while_a_slot_is_free() {
    let took = fast_while_slow(2);
    assert!(
        took < Duration::from_millis(1500),
        "the fast request waited {took:?} behind the slow one with two slots"
    );
    // The control: with one slot, the fast request waits for the slow one (about 2.5 s of
    // its 3 s are left when it is sent), so the test above can tell the two apart.
    let took = fast_while_slow(1);
    assert!(
        took > Duration::from_millis(1500),
        "with one slot the fast request took only {took:?}: the slot limit is not applied"
    );
}

/// Search-R1's `_passages2string` (`search_r1/llm_agent/generation.py`), in Rust.
fn passages2string(result: &Value) -> String {
    let mut out = String::new();
    for (idx, doc_item) in result.as_array().unwrap().iter().enumerate() {
        let content = doc_item["document"]["contents"].as_str().unwrap();
        let mut lines = content.split('\n');
        let title = lines.next().unwrap_or("");
        let text: Vec<&str> = lines.collect();
        out += &format!("Doc {}(Title: {}) {}\n", idx + 1, title, text.join("\n"));
    }
    out
}

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().unwrap().keys().map(|s| s.as_str()).collect();
    k.sort();
    k
}

#[test]
fn a_search_r1_request_gets_search_r1_s_response() {
    let config = config(BM25);
    let server = serve(&config, params());
    let addr = server.addr();
    // The request as Search-R1's agent sends it: requests.post(search_url, json=payload),
    // payload = {"queries": queries, "topk": self.config.topk, "return_scores": True}
    // (python-requests' headers and json.dumps' separators).
    let body = r#"{"queries": ["What is the capital of France?", "Who wrote Hamlet?"], "topk": 3, "return_scores": true}"#;
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /retrieve HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: python-requests/2.32.3\r\n\
         Accept-Encoding: gzip, deflate\r\nAccept: */*\r\nConnection: close\r\n\
         Content-Length: {}\r\nContent-Type: application/json\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, json_body) = raw.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    let v: Value = serde_json::from_str(json_body).unwrap();
    assert_eq!(keys(&v), ["result"]);
    let result = v["result"].as_array().unwrap();
    assert_eq!(result.len(), 2);
    // The capital query matches three passages or more, Hamlet one.
    assert_eq!(result[0].as_array().unwrap().len(), 3, "{v}");
    assert_eq!(result[1].as_array().unwrap().len(), 1, "{v}");
    for list in result {
        for item in list.as_array().unwrap() {
            assert_eq!(keys(item), ["document", "score"], "{item}");
            assert_eq!(keys(&item["document"]), ["contents", "id"], "{item}");
            assert!(item["score"].is_number());
        }
    }
    assert_eq!(result[0][0]["document"]["id"], "paris");
    assert_eq!(
        passages2string(&result[1]),
        "Doc 1(Title: \"Hamlet\") Hamlet was written by William Shakespeare. The tragedy is set in Denmark.\n"
    );
    let shown = passages2string(&result[0]);
    assert!(
        shown.starts_with("Doc 1(Title: \"Paris\") Paris is the capital of France.")
            && shown.contains("\nDoc 3(Title: \""),
        "{shown}"
    );
    // Without scores: the documents themselves; without topk: the server's default (3).
    let (code, v) = post(
        &server.url(),
        &json!({"queries": ["What is the capital of Italy?"], "return_scores": false}),
    );
    assert_eq!(code, 200);
    let list = v["result"][0].as_array().unwrap();
    assert_eq!(list.len(), 3);
    for d in list {
        assert_eq!(keys(d), ["contents", "id"], "{d}");
    }
    let (_, v) = post(
        &server.url(),
        &json!({"queries": ["What is the capital of Italy?"]}),
    );
    assert_eq!(v["result"][0].as_array().unwrap().len(), 3, "{v}");
    assert_eq!(keys(&v["result"][0][0]), ["contents", "id"]);
    // A topk beyond the corpus (within the server's limit): every passage that scores.
    let (code, v) = post(
        &server.url(),
        &json!({"queries": ["capital"], "topk": 1000}),
    );
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["result"][0].as_array().unwrap().len(), 3, "{v}");
    // Above the limit: refused before any work, naming it.
    let (code, v) = post(
        &server.url(),
        &json!({"queries": ["capital"], "topk": 1_000_000_000_000u64}),
    );
    assert_eq!(code, 400, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("limit of 1000"),
        "{v}"
    );
    // No queries: no lists.
    let (code, v) = post(&server.url(), &json!({"queries": []}));
    assert_eq!((code, v), (200, json!({"result": []})));
}

/// Answers with the title of the first passage, so a run depends on what was retrieved.
struct FirstTitle;

impl Reader for FirstTitle {
    fn name(&self) -> &str {
        "first-title"
    }

    fn read(&mut self, _question: &str, passages: &[Context]) -> workbench::Result<Answer> {
        Ok(Answer {
            text: passages
                .first()
                .map_or("Not found".into(), |p| p.title.clone()),
            passage_ids: passages.iter().map(|p| p.id.clone()).collect(),
            ..Default::default()
        })
    }
}

#[test]
fn the_http_retriever_in_a_pipeline_gives_the_in_process_run() {
    // Depth 3: some fixture questions fill it, so a list cut short shows.
    let bm25 = BM25.replace("depth = 5", "depth = 3");
    let fused = BM25_TFIDF_RRF.replace("depth = 5", "depth = 3");
    for retrieval in [bm25.as_str(), fused.as_str()] {
        let local = config(retrieval);
        let server = serve(&local, params());
        let remote = config(&format!(
            "[retrieval]\ndepth = 3\n[[retrieval.retrievers]]\nkind = \"http\"\nurl = \"{}\"\ntimeout_secs = 30\n",
            server.url()
        ));
        let run = |c: PipelineConfig| {
            let p = Pipeline::build(c).unwrap_or_else(|e| panic!("{e}"));
            p.run(&mut FirstTitle, None)
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let (a, b) = (run(local), run(remote));
        assert!(b.retrieval.starts_with("http-"), "{}", b.retrieval);
        assert_eq!(a.records.len(), 5);
        assert!(a.records.iter().any(|r| r.retrieved.len() == 3));
        for (x, y) in a.records.iter().zip(&b.records) {
            assert_eq!(x.id, y.id);
            assert_eq!(x.retrieved, y.retrieved, "{retrieval}: {}", x.id);
            assert_eq!(x.passage_ids, y.passage_ids);
            assert_eq!(x.answer, y.answer);
            assert_eq!(x.prediction, y.prediction);
        }
    }
}

#[test]
fn a_server_with_another_corpus_is_an_error_naming_the_passage() {
    let config = config(BM25);
    let local = first_stage(&config).unwrap();
    let server = serve(&config, params());
    // The client's corpus lacks `hamlet`.
    let fewer: Vec<Passage> = local
        .passages
        .iter()
        .filter(|p| p.id != "hamlet")
        .cloned()
        .collect();
    let client = HttpRetriever::new(&server.url(), Duration::from_secs(30), 8, &fewer).unwrap();
    let e = client
        .retrieve("Who wrote Hamlet?", 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`hamlet`") && e.contains("not in the local corpus"),
        "{e}"
    );
    assert!(e.contains(&server.url()), "{e}");
    // The client's `hamlet` has another text.
    let changed: Vec<Passage> = local
        .passages
        .iter()
        .map(|p| Passage {
            text: if p.id == "hamlet" {
                "Something else.".into()
            } else {
                p.text.clone()
            },
            ..p.clone()
        })
        .collect();
    let client = HttpRetriever::new(&server.url(), Duration::from_secs(30), 8, &changed).unwrap();
    let e = client
        .retrieve("Who wrote Hamlet?", 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`hamlet`") && e.contains("another text"), "{e}");
    // A 400 from the server reaches the caller with the server's message.
    let client =
        HttpRetriever::new(&server.url(), Duration::from_secs(30), 8, &local.passages).unwrap();
    assert!(client.retrieve("q", 0).is_err());
    let bad = HttpRetriever::new(
        &server.url().replace("/retrieve", "/nowhere"),
        Duration::from_secs(30),
        8,
        &local.passages,
    )
    .unwrap();
    let e = bad.retrieve("Hamlet", 1).unwrap_err().to_string();
    assert!(e.contains("HTTP 404") && e.contains("no such route"), "{e}");
}

#[test]
fn first_stage_refuses_what_it_cannot_serve() {
    let mut c = config(BM25);
    c.retrieval.retrievers.clear();
    let e = first_stage(&c).err().unwrap().to_string();
    assert!(e.contains("retrieval.retrievers"), "{e}");
    let served = Served::from_config(&config(BM25)).unwrap();
    let e = Server::bind(
        "127.0.0.1:0",
        served,
        ServeParams {
            default_topk: 0,
            ..params()
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("topk"), "{e}");
}

/// A server on the loopback interface that answers its connections, one each, with
/// `answers` (status, body) in order, then closes.
fn canned_server(answers: Vec<(u16, String)>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/retrieve", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for (status, body) in answers {
            let Ok((mut s, _)) = listener.accept() else {
                return;
            };
            // Read the request (headers, then the declared body) before answering.
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                let n = s.read(&mut chunk).unwrap_or(0);
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf);
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text[..end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + len {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            let reply = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = s.write_all(reply.as_bytes());
        }
    });
    url
}

fn local(ids: &[&str]) -> Vec<Passage> {
    ids.iter()
        .map(|id| Passage {
            id: id.to_string(),
            doc_id: id.to_string(),
            title: format!("T{id}"),
            text: format!("text {id}"),
            start: 0,
            end: 0,
        })
        .collect()
}

fn doc(id: &str, score: f64) -> String {
    format!("{{\"document\": {{\"id\": {id}, \"contents\": \"\\\"T\\\"\\ntext {}\"}}, \"score\": {score}}}", id.trim_matches('"'))
}

#[test]
fn the_http_retriever_reads_numeric_ids_keeps_the_order_and_refuses_what_is_no_ranking() {
    let passages = local(&["1", "2", "3"]);
    let ask = |answers: Vec<(u16, String)>| {
        let url = canned_server(answers);
        HttpRetriever::new(&url, Duration::from_secs(10), 8, &passages)
            .unwrap()
            .retrieve("q", 3)
    };
    // Numeric ids (Search-R1's dense server over a corpus with numeric ids), equal scores
    // kept in the server's order (not re-sorted by id).
    let ok = format!(
        "{{\"result\": [[{}, {}, {}]]}}",
        doc("3", 2.0),
        doc("\"1\"", 2.0),
        doc("2", 1.5)
    );
    let hits = ask(vec![(200, ok.clone())]).unwrap();
    let ids: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(ids, ["3", "1", "2"]);
    // A passage twice, or a score above the one before: refused, naming it.
    let twice = format!("{{\"result\": [[{}, {}]]}}", doc("1", 2.0), doc("1", 1.0));
    let e = ask(vec![(200, twice)]).unwrap_err().to_string();
    assert!(e.contains("`1` twice"), "{e}");
    let unranked = format!("{{\"result\": [[{}, {}]]}}", doc("1", 1.0), doc("2", 2.0));
    let e = ask(vec![(200, unranked)]).unwrap_err().to_string();
    assert!(e.contains("not ranked"), "{e}");
    // Documents without `id` (Search-R1's BM25 server): the error says why.
    let no_id = "{\"result\": [[{\"document\": {\"title\": \"T\", \"text\": \"t\", \"contents\": \"\\\"T\\\"\\nt\"}, \"score\": 1.0}]]}";
    let e = ask(vec![(200, no_id.to_string())]).unwrap_err().to_string();
    assert!(e.contains("no `id`"), "{e}");
    // A 503 (a full queue, a restart) is tried again.
    let hits = ask(vec![(503, "{\"error\": \"busy\"}".into()), (200, ok)]).unwrap();
    assert_eq!(hits.len(), 3);
    // A 400 is not: its message comes back.
    let e = ask(vec![(400, "{\"error\": \"`topk` is wrong\"}".into())])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("HTTP 400") && e.contains("`topk` is wrong"),
        "{e}"
    );
}
