//! The OpenAI-compatible reader (`workbench::read::openai`):
//!
//! - **faults**, against a scripted HTTP server on the loopback interface: HTTP 500 and
//!   429 (with `Retry-After`), a body that is not JSON, a missing answer, a stalled
//!   response, a dropped connection, a 400 that must not be retried. Each gives a retry
//!   that succeeds, or an error naming the question and every attempt; never an empty
//!   answer. The API key goes in the `Authorization` header and nowhere else. Requests
//!   are in flight together up to `concurrency`.
//! - **llama.cpp's real server** (`scripts/python/llamacpp_server.py`, the `xllamacpp`
//!   wheel that `scripts/test` installs into the test venv) on SmolLM2: where the server's
//!   chat template renders the same prompt as ours, its greedy answers must equal the
//!   in-process reader's, except where llama.cpp's own margin between its two best
//!   tokens at the first difference is under 1 nat (a near tie that quantised arithmetic
//!   may flip, as in `tests/llm_reference.rs`).

mod common;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use workbench::read::openai::{OpenAiOptions, OpenAiReader};
use workbench::read::{Context, Reader};

/// What the scripted server does with one request.
#[derive(Clone, Debug)]
enum Act {
    /// 200 with this answer.
    Answer(&'static str),
    /// This status and body, with an optional `Retry-After`.
    Status(u16, &'static str, Option<&'static str>),
    /// 200 with this raw body.
    Body(&'static str),
    /// Wait this long, then close without a response.
    Stall(Duration),
    /// Close the connection without a response.
    Drop,
    /// Wait, then answer with the question's last word (echo).
    SlowEcho(Duration),
}

struct Fake {
    base: String,
    hits: Arc<AtomicUsize>,
    /// Every request body, in arrival order.
    bodies: Arc<Mutex<Vec<Value>>>,
    max_in_flight: Arc<AtomicUsize>,
    auth: Arc<Mutex<Vec<String>>>,
}

/// A server that plays `script` (request n gets `script[n]`, the last act repeats).
fn fake(script: Vec<Act>) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let max_in_flight = Arc::new(AtomicUsize::new(0));
    let auth = Arc::new(Mutex::new(Vec::new()));
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let script = Arc::new(script);
    {
        let (hits, in_flight, max_in_flight, auth, bodies) = (
            hits.clone(),
            in_flight.clone(),
            max_in_flight.clone(),
            auth.clone(),
            bodies.clone(),
        );
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (hits, in_flight, max_in_flight, auth, script, bodies) = (
                    hits.clone(),
                    in_flight.clone(),
                    max_in_flight.clone(),
                    auth.clone(),
                    script.clone(),
                    bodies.clone(),
                );
                std::thread::spawn(move || {
                    serve(
                        stream,
                        &script,
                        &hits,
                        &in_flight,
                        &max_in_flight,
                        &auth,
                        &bodies,
                    )
                });
            }
        });
    }
    Fake {
        base,
        hits,
        bodies,
        max_in_flight,
        auth,
    }
}

fn serve(
    stream: TcpStream,
    script: &[Act],
    hits: &AtomicUsize,
    in_flight: &AtomicUsize,
    max_in_flight: &AtomicUsize,
    auth: &Mutex<Vec<String>>,
    bodies: &Mutex<Vec<Value>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    loop {
        // One request: headers, then Content-Length bytes of body.
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let lower = l.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
            if lower.starts_with("authorization:") {
                auth.lock()
                    .unwrap()
                    .push(l["authorization:".len()..].trim().to_string());
            }
        }
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let n = hits.fetch_add(1, Ordering::SeqCst);
        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        max_in_flight.fetch_max(now, Ordering::SeqCst);
        let act = script[n.min(script.len() - 1)].clone();
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        bodies.lock().unwrap().push(request.clone());
        let respond = |stream: &mut TcpStream, code: u16, body: &str, extra: &str| {
            let msg = format!(
                "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}\r\n{body}",
                body.len()
            );
            stream.write_all(msg.as_bytes()).is_ok()
        };
        let answer = |text: &str| {
            json!({"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 11, "completion_tokens": 2}})
            .to_string()
        };
        let keep = match act {
            Act::Answer(t) => respond(&mut stream, 200, &answer(t), ""),
            Act::Status(code, b, retry) => {
                let extra = retry.map_or(String::new(), |r| format!("Retry-After: {r}\r\n"));
                respond(&mut stream, code, b, &extra)
            }
            Act::Body(b) => respond(&mut stream, 200, b, ""),
            Act::Stall(d) => {
                std::thread::sleep(d);
                false
            }
            Act::Drop => false,
            Act::SlowEcho(d) => {
                std::thread::sleep(d);
                let user = request["messages"]
                    .as_array()
                    .and_then(|m| m.last())
                    .and_then(|m| m["content"].as_str())
                    .unwrap_or("")
                    .to_string();
                let last = user.split_whitespace().last().unwrap_or("").to_string();
                respond(&mut stream, 200, &answer(&last), "")
            }
        };
        in_flight.fetch_sub(1, Ordering::SeqCst);
        if !keep {
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

fn reader(base: &str, f: impl FnOnce(&mut OpenAiOptions)) -> OpenAiReader {
    let mut o = OpenAiOptions {
        base_url: base.to_string(),
        model: "test-model".into(),
        prompt: "{passages}\nQ: {question}".into(),
        timeout_secs: 2.0,
        retries: 2,
        backoff_secs: 0.01,
        ..OpenAiOptions::default()
    };
    f(&mut o);
    OpenAiReader::new(o).unwrap()
}

fn passages() -> Vec<Context> {
    vec![Context::new("p1", "Paris is the capital of France.")]
}

#[test]
fn server_errors_and_rate_limits_are_retried() {
    let s = fake(vec![
        Act::Status(500, "{\"error\": {\"message\": \"overloaded\"}}", None),
        Act::Status(429, "slow down", Some("0")),
        Act::Answer("Paris"),
    ]);
    let a = reader(&s.base, |_| {})
        .read("What is the capital of France?", &passages())
        .unwrap();
    assert_eq!(a.text, "Paris");
    assert!(!a.abstained);
    assert_eq!(a.passage_ids, ["p1"]);
    assert_eq!((a.usage.prompt_tokens, a.usage.generated_tokens), (11, 2));
    assert_eq!(s.hits.load(Ordering::SeqCst), 3);
}

#[test]
fn a_server_that_keeps_failing_gives_an_error_naming_the_question() {
    let s = fake(vec![Act::Status(
        503,
        "{\"error\": {\"message\": \"model is loading\"}}",
        None,
    )]);
    let e = reader(&s.base, |_| {})
        .read("Who wrote Hamlet?", &passages())
        .unwrap_err()
        .to_string();
    assert!(e.contains("Who wrote Hamlet?"), "{e}");
    assert!(
        e.contains("HTTP 503") && e.contains("model is loading"),
        "{e}"
    );
    assert!(e.contains("attempt 3"), "{e}");
    assert!(e.contains(&s.base), "{e}");
    assert_eq!(s.hits.load(Ordering::SeqCst), 3, "1 try + 2 retries");
}

#[test]
fn client_errors_are_not_retried() {
    let s = fake(vec![Act::Status(
        400,
        "{\"error\": {\"message\": \"unknown model\"}}",
        None,
    )]);
    let e = reader(&s.base, |_| {})
        .read("Q?", &passages())
        .unwrap_err()
        .to_string();
    assert!(e.contains("HTTP 400") && e.contains("unknown model"), "{e}");
    assert_eq!(s.hits.load(Ordering::SeqCst), 1);
}

#[test]
fn malformed_and_empty_responses_are_retried_then_named() {
    let s = fake(vec![
        Act::Body("{\"choices\": [ not json"),
        Act::Answer("Paris"),
    ]);
    assert_eq!(
        reader(&s.base, |_| {})
            .read("Q?", &passages())
            .unwrap()
            .text,
        "Paris"
    );
    let s = fake(vec![Act::Body("{\"choices\": [ not json")]);
    let e = reader(&s.base, |_| {})
        .read("Q?", &passages())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not JSON"), "{e}");
    let s = fake(vec![Act::Body(
        "{\"choices\": [{\"message\": {\"role\": \"assistant\", \"content\": null}}]}",
    )]);
    let e = reader(&s.base, |_| {})
        .read("Q?", &passages())
        .unwrap_err()
        .to_string();
    assert!(e.contains("content"), "{e}");
}

#[test]
fn stalls_time_out_and_dropped_connections_are_retried() {
    let stall = Duration::from_millis(1500);
    let s = fake(vec![Act::Stall(stall), Act::Answer("Paris")]);
    let r = reader(&s.base, |o| o.timeout_secs = 0.3);
    assert_eq!(r.answer("Q?", &passages()).unwrap().text, "Paris");
    assert_eq!(s.hits.load(Ordering::SeqCst), 2);

    let s = fake(vec![Act::Stall(stall)]);
    let e = reader(&s.base, |o| {
        o.timeout_secs = 0.3;
        o.retries = 1;
    })
    .answer("Q?", &passages())
    .unwrap_err()
    .to_string();
    assert!(e.contains("attempt 2") && e.contains("no response"), "{e}");

    let s = fake(vec![Act::Drop, Act::Answer("Paris")]);
    assert_eq!(
        reader(&s.base, |_| {})
            .answer("Q?", &passages())
            .unwrap()
            .text,
        "Paris"
    );
    let s = fake(vec![Act::Drop]);
    let e = reader(&s.base, |_| {})
        .answer("Q?", &passages())
        .unwrap_err()
        .to_string();
    assert!(e.contains("attempt 3"), "{e}");
}

#[test]
fn a_refused_connection_is_an_error() {
    // A port nothing listens on: bind, read the port, close.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = reader(&format!("http://127.0.0.1:{port}/v1"), |_| {})
        .answer("Q?", &passages())
        .unwrap_err()
        .to_string();
    assert!(e.contains("no response") && e.contains("attempt 3"), "{e}");
}

#[test]
fn the_api_key_is_sent_but_never_shown() {
    std::env::set_var("WORKBENCH_TEST_OPENAI_KEY", "sk-test-secret");
    let s = fake(vec![Act::Answer("Paris")]);
    let r = reader(&s.base, |o| {
        o.api_key_env = "WORKBENCH_TEST_OPENAI_KEY".into()
    });
    r.answer("Q?", &passages()).unwrap();
    assert_eq!(*s.auth.lock().unwrap(), ["Bearer sk-test-secret"]);
    assert!(!format!("{r:?}").contains("secret"));
    assert!(!serde_json::to_string(r.options())
        .unwrap()
        .contains("secret"));
}

#[test]
fn requests_are_in_flight_together_and_answers_keep_their_order() {
    let s = fake(vec![Act::SlowEcho(Duration::from_millis(300))]);
    let mut r = reader(&s.base, |o| o.concurrency = 4);
    let qs: Vec<String> = (0..8).map(|i| format!("question number q{i}")).collect();
    let p = passages();
    let items: Vec<(&str, &[Context])> = qs.iter().map(|q| (q.as_str(), p.as_slice())).collect();
    let answers: Vec<String> = r
        .read_many(&items)
        .into_iter()
        .map(|a| a.unwrap().text)
        .collect();
    let want: Vec<String> = (0..8).map(|i| format!("q{i}")).collect();
    assert_eq!(answers, want);
    let most = s.max_in_flight.load(Ordering::SeqCst);
    assert!((2..=4).contains(&most), "{most} requests in flight at most");
}

// ---------------------------------------------------------------------------------------
// llama.cpp's own server

/// SmolLM2's GGUF in the asset cache.
fn smollm2_path() -> PathBuf {
    workbench::assets::Assets::load()
        .and_then(|a| {
            a.resolve(
                "smollm2-135m-instruct-gguf",
                "SmolLM2-135M-Instruct.Q4_1.gguf",
            )
        })
        .expect("SmolLM2 GGUF in the asset cache (scripts/test fetches it)")
}

fn python() -> PathBuf {
    common::venv_python("the llama.cpp server test (xllamacpp)")
}

/// llama.cpp's server on a GGUF, stopped when dropped.
struct LlamaServer {
    child: std::process::Child,
    base: String,
}

impl LlamaServer {
    fn start(model: &std::path::Path) -> Self {
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/python/llamacpp_server.py");
        let mut child = std::process::Command::new(python())
            .arg(&script)
            .arg(model)
            .args(["--threads", "2", "--ctx", "4096"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start scripts/python/llamacpp_server.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(
            line.starts_with("http://127.0.0.1:"),
            "llama.cpp server did not start (is xllamacpp in the test venv? scripts/test installs it): {line:?}"
        );
        LlamaServer {
            child,
            base: line.trim().to_string(),
        }
    }

    /// The server's root (without `/v1`), for llama.cpp's own endpoints.
    fn root(&self) -> &str {
        self.base.trim_end_matches("/v1")
    }

    fn post(&self, path: &str, body: Value) -> Value {
        ureq::post(&format!("{}{path}", self.root()))
            .send_json(body)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .into_json()
            .unwrap()
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn llamacpp_server_answers_like_the_in_process_reader() {
    use workbench::read::generative::{
        GenerateParams, GenerativeReader, Llm, LoadOptions, ReaderOptions,
    };
    let path = smollm2_path();
    let server = LlamaServer::start(&path);
    let prompt = "Passages:\n{passages}\n\nQuestion: {question}\nAnswer in a few words:";
    let stop = vec!["\n\n".to_string()];
    let max_tokens = 24;
    let mut ours = GenerativeReader::new(
        Llm::load(&path, &LoadOptions::default()).unwrap(),
        ReaderOptions {
            system: None,
            prompt: prompt.into(),
            passage: "[{rank}] {text}".into(),
            params: GenerateParams {
                max_new_tokens: max_tokens,
                stop_strings: stop.clone(),
                ..GenerateParams::default()
            },
            ..ReaderOptions::default()
        },
    )
    .unwrap();
    let mut remote = OpenAiReader::new(OpenAiOptions {
        base_url: server.base.clone(),
        model: "smollm2".into(),
        prompt: prompt.into(),
        passage: "[{rank}] {text}".into(),
        max_tokens,
        stop,
        temperature: 0.0,
        ..OpenAiOptions::default()
    })
    .unwrap();
    let cases: [(&str, &[&str]); 6] = [
        (
            "What is the capital of France?",
            &["Paris is the capital and largest city of France."],
        ),
        (
            "Who wrote Hamlet?",
            &["Hamlet is a tragedy written by William Shakespeare around 1600."],
        ),
        (
            "What colour is the sky on a clear day?",
            &["On a clear day the sky is blue because air scatters blue light."],
        ),
        (
            "How many legs does a spider have?",
            &["Spiders are arachnids with eight legs and two body segments."],
        ),
        (
            "Which planet is the largest?",
            &["Jupiter is the largest planet in the Solar System."],
        ),
        (
            "What do bees make?",
            &[
                "Bees collect nectar and make honey in their hives.",
                "Wasps do not make honey.",
            ],
        ),
    ];
    let (mut same_prompt, mut equal, mut near_ties) = (0, 0, Vec::new());
    for (q, texts) in cases {
        let ps: Vec<Context> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| Context::new(format!("p{i}"), *t))
            .collect();
        let a = ours.read(q, &ps).unwrap();
        let b = remote.read(q, &ps).unwrap();
        assert!(
            b.usage.prompt_tokens > 0 && b.usage.generated_tokens > 0,
            "{b:?}"
        );
        let msgs = remote.messages(q, &ps).unwrap();
        let theirs = server.post("/apply-template", json!({ "messages": msgs }))["prompt"]
            .as_str()
            .unwrap()
            .to_string();
        if theirs != ours.last_prompt() {
            eprintln!(
                "{q}: the server renders another prompt:\n{theirs:?}\nvs ours\n{:?}",
                ours.last_prompt()
            );
            continue;
        }
        same_prompt += 1;
        if a.text == b.text {
            equal += 1;
            continue;
        }
        // Where do they part? llama.cpp's own top-2 margin there.
        let c = server.post(
            "/completion",
            json!({"prompt": theirs, "n_predict": max_tokens, "temperature": 0.0, "top_k": 1,
                   "samplers": ["top_k"], "n_probs": 2, "cache_prompt": false}),
        );
        let mut text = String::new();
        let mut margin = None;
        for p in c["completion_probabilities"].as_array().unwrap() {
            let next = text.clone() + p["token"].as_str().unwrap_or("");
            if !a.text.starts_with(next.trim_start()) && !next.trim().is_empty() {
                let top = p["top_logprobs"].as_array().unwrap();
                margin =
                    Some(top[0]["logprob"].as_f64().unwrap() - top[1]["logprob"].as_f64().unwrap());
                break;
            }
            text = next;
        }
        let m = margin.unwrap_or(0.0);
        eprintln!("{q}: ours {:?} vs llama.cpp {:?} (llama.cpp's margin at the first difference {m:.3} nats)", a.text, b.text);
        assert!(
            m < 1.0,
            "{q}: ours {:?} vs llama.cpp's server {:?} part where llama.cpp's margin is {m:.3} nats",
            a.text,
            b.text
        );
        near_ties.push(q);
    }
    eprintln!(
        "{same_prompt} of 6 prompts rendered alike; {equal} answers equal; near ties: {near_ties:?}"
    );
    assert!(
        same_prompt >= 5,
        "only {same_prompt} of 6 prompts rendered alike"
    );
    assert!(equal >= 4, "only {equal} of {same_prompt} answers equal");
}

// The LLM judge on a server (`evaluate::judge::ServerJudge`)

fn logprobs_body(alternatives: &[(&str, f64)]) -> String {
    let top: Vec<Value> = alternatives
        .iter()
        .map(|(t, lp)| json!({"token": t, "logprob": lp}))
        .collect();
    json!({"choices": [{"message": {"role": "assistant", "content": alternatives.first().map_or("", |a| a.0)},
                        "finish_reason": "length",
                        "logprobs": {"content": [{"token": "x", "logprob": -0.1, "top_logprobs": top}]}}]})
    .to_string()
}

#[test]
fn a_server_judge_reads_p_yes_from_the_first_tokens_log_probabilities() {
    use workbench::evaluate::judge::{Judge, ServerJudge};
    let both: &'static str =
        Box::leak(logprobs_body(&[("No", -2.0), ("Yes", -1.0), ("The", -3.0)]).into_boxed_str());
    let only_no: &'static str =
        Box::leak(logprobs_body(&[("No", -0.1), ("Paris", -2.5)]).into_boxed_str());
    let neither: &'static str =
        Box::leak(logprobs_body(&[("Paris", -0.2), ("The", -2.0)]).into_boxed_str());
    let f = fake(vec![
        Act::Body(both),
        Act::Body(only_no),
        Act::Body(neither),
        Act::Answer("Yes"),
    ]);
    let j = ServerJudge::new(
        &f.base,
        "judge-model",
        "",
        "Q {question} G {gold} A {answer}",
    )
    .unwrap();
    let golds = vec!["Paris".to_string()];
    // e^-1 / (e^-1 + e^-2): the two log-probabilities, renormalised.
    let p = j.p_yes("Capital of France?", &golds, "Paris").unwrap();
    let want = 1.0 / (1.0 + (-1.0f64).exp());
    assert!((p - want).abs() < 1e-12, "{p} vs {want}");
    // `Yes` not among the alternatives: bounded by the smallest listed value.
    let p = j.p_yes("Capital of France?", &golds, "Lyon").unwrap();
    let want = 1.0 / (1.0 + (2.5f64 - 0.1).exp());
    assert!((p - want).abs() < 1e-12, "{p} vs {want}");
    // Each request asked for one token and the first token's alternatives.
    let bodies = f.bodies.lock().unwrap().clone();
    for b in &bodies {
        assert_eq!(b["max_tokens"], 1, "{b}");
        assert_eq!(b["logprobs"], true, "{b}");
        assert_eq!(b["top_logprobs"], 20, "{b}");
        assert_eq!(b["model"], "judge-model", "{b}");
    }
    // Neither: an error naming what the server listed.
    let e = j
        .p_yes("Capital of France?", &golds, "Nice")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("neither") && e.contains("Paris") && e.contains("The"),
        "{e}"
    );
    // No log-probabilities at all (a server that ignores `logprobs`).
    let e = j
        .p_yes("Capital of France?", &golds, "Nice")
        .unwrap_err()
        .to_string();
    assert!(e.contains("log-probabilities"), "{e}");
    // An abstention is 0 without a request.
    let hits = f.hits.load(Ordering::SeqCst);
    assert_eq!(j.p_yes("Capital of France?", &golds, "  ").unwrap(), 0.0);
    assert_eq!(f.hits.load(Ordering::SeqCst), hits);
    assert!(ServerJudge::new(&f.base, "m", "", "no placeholders").is_err());
}

#[test]
fn a_server_judge_agrees_with_the_in_process_judge_on_the_same_gguf() {
    use workbench::evaluate::judge::{Judge, LlmJudge, ServerJudge};
    use workbench::read::generative::{Llm, LoadOptions, SharedLlm};
    let path = smollm2_path();
    let template = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/prompts/judge.txt"),
    )
    .unwrap();
    let server = LlamaServer::start(&path);
    let remote = ServerJudge::new(&server.base, "smollm2", "", &template).unwrap();
    let local = LlmJudge::new(
        SharedLlm::new(Llm::load(&path, &LoadOptions::default()).unwrap()),
        &template,
    )
    .unwrap();
    let g = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let cases = [
        ("What is the capital of France?", g(&["Paris"]), "Paris"),
        ("What is the capital of France?", g(&["Paris"]), "Berlin"),
        (
            "Who wrote Hamlet?",
            g(&["William Shakespeare"]),
            "Charles Dickens",
        ),
        (
            "How many legs does a spider have?",
            g(&["eight", "8"]),
            "It has 8 legs.",
        ),
    ];
    for (q, golds, a) in &cases {
        let (pr, pl) = (
            remote.p_yes(q, golds, a).unwrap(),
            local.p_yes(q, golds, a).unwrap(),
        );
        eprintln!("{q} / {a:?}: server {pr:.4}, in process {pl:.4}");
        // Same GGUF and chat template; llama.cpp's and candle's quantised kernels differ
        // in their low bits.
        assert!((pr - pl).abs() < 0.05, "{q} / {a:?}: server {pr} vs {pl}");
    }
}
