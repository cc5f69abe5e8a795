//! A reader that sends each question to an **OpenAI-compatible chat-completions server**:
//! llama.cpp's `llama-server`, vLLM, Ollama, a lab server or a hosted API.
//!
//! The request is `POST {base_url}/chat/completions` with the chat messages (an optional
//! system message, then the user message built from the prompt template exactly as the
//! in-process [`GenerativeReader`](crate::read::generative::GenerativeReader) builds it),
//! `model`, `temperature`, `top_p`, `max_tokens`, `stop` and `seed`. The server applies
//! its own chat template; llama.cpp's applies the GGUF's, which is the one the in-process
//! reader renders, so on the same GGUF both read the same tokens.
//!
//! - **API key**: read from the environment variable named by
//!   [`OpenAiOptions::api_key_env`] when the reader is built (never stored in options,
//!   configs or results) and sent as `Authorization: Bearer …`.
//! - **Concurrency**: [`Reader::read_many`] keeps up to [`OpenAiOptions::concurrency`]
//!   requests in flight (one thread each); answers come back in question order.
//! - **Faults**: a timeout, a refused or dropped connection, HTTP 429 or 5xx, or a body
//!   that is not the expected JSON is retried up to [`OpenAiOptions::retries`] times,
//!   waiting [`OpenAiOptions::backoff_secs`] × 2ⁿ (at most 30 s; a 429's `Retry-After`
//!   in seconds when it is longer). Other HTTP errors (400, 401, 404 …) are not retried.
//!   When the attempts run out the error ([`Error::Server`]) names the question, the URL,
//!   each attempt's failure and the server's message; an answer is never silently empty.
//! - **Usage**: `usage.prompt_tokens` / `completion_tokens` from the response; prefill and
//!   decode times from llama.cpp's `timings` (`prompt_ms`, `predicted_ms`) when the server
//!   sends them, else the request's wall time as decode time and 0 prefill.
//! - Passages are not fitted to a window here (the server's tokenizer is not known): a
//!   prompt longer than the server's context comes back as the server's error.

use super::{
    check_question, check_templates, format_passage, user_message, AbstentionRule, Answer, Context,
    Reader, Usage,
};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// An [`OpenAiReader`] shared with a query transform on the same server.
#[cfg(feature = "llm")]
pub struct SharedOpenAi(pub std::sync::Arc<OpenAiReader>);

#[cfg(feature = "llm")]
impl Reader for SharedOpenAi {
    fn name(&self) -> &str {
        Reader::name(&*self.0)
    }
    fn read(&mut self, question: &str, passages: &[Context]) -> Result<Answer> {
        self.0.answer(question, passages)
    }
    fn prompt(&self, question: &str, passages: &[Context]) -> Result<Option<String>> {
        Reader::prompt(&*self.0, question, passages)
    }
    fn concurrency(&self) -> usize {
        self.0.options().concurrency
    }
    fn read_many(&mut self, items: &[(&str, &[Context])]) -> Vec<Result<Answer>> {
        self.0.answer_many(items)
    }
}

/// Options of an [`OpenAiReader`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpenAiOptions {
    /// The API root, up to and including `/v1` (`http://127.0.0.1:8080/v1`,
    /// `https://api.openai.com/v1`). Requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// The `model` field of each request (what the server calls the model).
    pub model: String,
    /// Name of the environment variable that holds the API key; empty = send none.
    pub api_key_env: String,
    /// Name for tables and traces (empty: `model`).
    pub name: String,
    /// Optional system message.
    pub system: Option<String>,
    /// The user message: `{question}` and `{passages}` filled in one pass.
    pub prompt: String,
    /// One passage: `{rank}`, `{id}`, `{title}`, `{text}`.
    pub passage: String,
    /// Between passages.
    pub passage_separator: String,
    /// Sampling temperature (0 = greedy).
    pub temperature: f64,
    /// Nucleus mass.
    pub top_p: f64,
    /// Seed sent with each request (servers that support it sample reproducibly).
    pub seed: u64,
    /// `max_tokens` of each request.
    pub max_tokens: usize,
    /// `stop` strings.
    pub stop: Vec<String>,
    /// Requests in flight in [`Reader::read_many`], ≥ 1.
    pub concurrency: usize,
    /// Time allowed for one request (connect + response), seconds.
    pub timeout_secs: f64,
    /// Further attempts after a retryable failure.
    pub retries: usize,
    /// First wait before a retry, seconds (doubled each time, at most 30 s).
    pub backoff_secs: f64,
    /// Which answers are abstentions.
    pub abstention: AbstentionRule,
}

impl Default for OpenAiOptions {
    fn default() -> Self {
        OpenAiOptions {
            base_url: "http://127.0.0.1:8080/v1".into(),
            model: String::new(),
            api_key_env: String::new(),
            name: String::new(),
            system: None,
            prompt: "Passages:\n{passages}\n\nQuestion: {question}\nAnswer:".into(),
            passage: "[{rank}] {text}".into(),
            passage_separator: "\n\n".into(),
            temperature: 0.0,
            top_p: 1.0,
            seed: 42,
            max_tokens: 64,
            stop: Vec::new(),
            concurrency: 1,
            timeout_secs: 120.0,
            retries: 3,
            backoff_secs: 1.0,
            abstention: AbstentionRule::default(),
        }
    }
}

/// Decoding settings of one request ([`OpenAiReader::chat`]); the reader's own come from
/// its options ([`OpenAiReader::params`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ChatParams {
    /// Sampling temperature (0 = greedy).
    pub temperature: f64,
    /// Nucleus mass.
    pub top_p: f64,
    /// `max_tokens`.
    pub max_tokens: usize,
    /// `seed`.
    pub seed: u64,
    /// `stop` strings.
    pub stop: Vec<String>,
    /// Ask for the log-probabilities of this many most likely tokens at each position
    /// (`logprobs: true`, `top_logprobs: N`); `None`: none.
    pub top_logprobs: Option<usize>,
}

/// One chat message of a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

/// What a chat-completions call returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// `choices[0].message.content`, trimmed.
    pub text: String,
    /// `choices[0].finish_reason` (`stop`, `length`, …), empty when absent.
    pub finish_reason: String,
    /// Token counts and times.
    pub usage: Usage,
    /// Attempts it took (1 = no retry).
    pub attempts: usize,
    /// The first generated token's most likely alternatives (token text, natural-log
    /// probability), as the server lists them in `choices[0].logprobs.content[0]
    /// .top_logprobs`; empty when not asked for or not sent.
    pub first_top_logprobs: Vec<(String, f64)>,
    /// Each generated token's text and natural-log probability
    /// (`choices[0].logprobs.content[i].token` / `.logprob`); empty when not asked for or
    /// not sent.
    pub token_logprobs: Vec<(String, f64)>,
}

/// A [`Reader`] over an OpenAI-compatible chat-completions endpoint. See the
/// [module docs](self).
pub struct OpenAiReader {
    opts: OpenAiOptions,
    name: String,
    url: String,
    key: Option<String>,
    agent: ureq::Agent,
}

impl std::fmt::Debug for OpenAiReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiReader")
            .field("url", &self.url)
            .field("model", &self.opts.model)
            .field("api_key", &self.key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

/// Why one attempt failed, and whether another may succeed.
struct Failure {
    message: String,
    retry: bool,
    wait: Option<Duration>,
}

impl OpenAiReader {
    /// Check the options and read the API key from the environment.
    ///
    /// Errors ([`Error::InvalidParam`]): an empty `base_url` or one not starting with
    /// `http://` / `https://`, an empty `model`, a prompt without `{question}` or
    /// `{passages}`, a passage format without `{text}`, `concurrency` 0, `max_tokens` 0,
    /// a temperature or top-p out of range, a timeout ≤ 0, an `api_key_env` variable
    /// that is not set.
    pub fn new(opts: OpenAiOptions) -> Result<Self> {
        let base = opts.base_url.trim().trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Error::param(
                "base_url",
                format!("{:?} is not an http:// or https:// URL", opts.base_url),
            ));
        }
        if opts.model.trim().is_empty() {
            return Err(Error::param(
                "model",
                "name the model the server should use (its `model` field)",
            ));
        }
        check_templates(&opts.prompt, &opts.passage)?;
        if opts.concurrency == 0 {
            return Err(Error::param("concurrency", "must be at least 1"));
        }
        if opts.max_tokens == 0 {
            return Err(Error::param("max_tokens", "must be at least 1"));
        }
        if !(opts.temperature.is_finite() && opts.temperature >= 0.0) {
            return Err(Error::param("temperature", "must be finite and ≥ 0"));
        }
        if !(opts.top_p > 0.0 && opts.top_p <= 1.0) {
            return Err(Error::param("top_p", "must be in (0, 1]"));
        }
        if !(opts.timeout_secs.is_finite() && opts.timeout_secs > 0.0) {
            return Err(Error::param("timeout_secs", "must be a positive number"));
        }
        if !(opts.backoff_secs.is_finite() && opts.backoff_secs >= 0.0) {
            return Err(Error::param("backoff_secs", "must be finite and ≥ 0"));
        }
        let key = if opts.api_key_env.trim().is_empty() {
            None
        } else {
            match std::env::var(opts.api_key_env.trim()) {
                Ok(k) if !k.trim().is_empty() => Some(k.trim().to_string()),
                _ => {
                    return Err(Error::param(
                        "api_key_env",
                        format!(
                            "the environment variable `{}` is not set (it should hold the API key)",
                            opts.api_key_env.trim()
                        ),
                    ))
                }
            }
        };
        let agent = ureq::AgentBuilder::new()
            .try_proxy_from_env(true)
            .timeout(Duration::from_secs_f64(opts.timeout_secs))
            .build();
        let name = if opts.name.is_empty() {
            opts.model.clone()
        } else {
            opts.name.clone()
        };
        Ok(OpenAiReader {
            url: format!("{base}/chat/completions"),
            name,
            key,
            agent,
            opts,
        })
    }

    /// The options.
    pub fn options(&self) -> &OpenAiOptions {
        &self.opts
    }

    /// The URL requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The chat messages for `question` over `passages` (rank order): the optional system
    /// message, then the user message.
    pub fn messages(&self, question: &str, passages: &[Context]) -> Result<Vec<Message>> {
        let question = check_question(question)?;
        let joined = passages
            .iter()
            .enumerate()
            .map(|(i, p)| format_passage(&self.opts.passage, i + 1, p))
            .collect::<Vec<_>>()
            .join(&self.opts.passage_separator);
        let mut msgs = Vec::with_capacity(2);
        if let Some(s) = &self.opts.system {
            msgs.push(Message {
                role: "system".into(),
                content: s.clone(),
            });
        }
        msgs.push(Message {
            role: "user".into(),
            content: user_message(&self.opts.prompt, question, &joined),
        });
        Ok(msgs)
    }

    /// The reader's own decoding settings.
    pub fn params(&self) -> ChatParams {
        ChatParams {
            temperature: self.opts.temperature,
            top_p: self.opts.top_p,
            max_tokens: self.opts.max_tokens,
            seed: self.opts.seed,
            stop: self.opts.stop.clone(),
            top_logprobs: None,
        }
    }

    /// One chat completion, retried as the module docs say. `what` names the request in
    /// errors (a question).
    pub fn chat(
        &self,
        messages: &[Message],
        params: &ChatParams,
        what: &str,
    ) -> Result<Completion> {
        let o = &self.opts;
        let mut body = json!({
            "model": o.model,
            "messages": messages,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "seed": params.seed,
            "stream": false,
        });
        if !params.stop.is_empty() {
            body["stop"] = json!(params.stop);
        }
        if let Some(n) = params.top_logprobs {
            body["logprobs"] = json!(true);
            body["top_logprobs"] = json!(n);
        }
        let mut failures: Vec<String> = Vec::new();
        for attempt in 0..=o.retries {
            let t0 = Instant::now();
            match self.attempt(&body) {
                Ok(mut c) => {
                    if c.usage.prefill_secs == 0.0 && c.usage.decode_secs == 0.0 {
                        c.usage.decode_secs = t0.elapsed().as_secs_f64();
                    }
                    c.attempts = attempt + 1;
                    return Ok(c);
                }
                Err(f) => {
                    failures.push(format!("attempt {}: {}", attempt + 1, f.message));
                    if !f.retry || attempt == o.retries {
                        break;
                    }
                    let backoff = Duration::from_secs_f64(
                        (o.backoff_secs * 2f64.powi(attempt as i32)).min(30.0),
                    );
                    std::thread::sleep(f.wait.map_or(backoff, |w| w.max(backoff)));
                }
            }
        }
        Err(Error::Server {
            url: self.url.clone(),
            message: format!("{what}: {}", failures.join("; ")),
        })
    }

    fn attempt(&self, body: &Value) -> std::result::Result<Completion, Failure> {
        let mut req = self
            .agent
            .post(&self.url)
            .set("Content-Type", "application/json");
        if let Some(k) = &self.key {
            req = req.set("Authorization", &format!("Bearer {k}"));
        }
        let resp = match req.send_json(body) {
            Ok(r) => r,
            Err(ureq::Error::Status(code, r)) => {
                let wait = r
                    .header("Retry-After")
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(|s| Duration::from_secs_f64(s.min(300.0)));
                let text = r.into_string().unwrap_or_default();
                return Err(Failure {
                    message: format!("HTTP {code}: {}", server_message(&text)),
                    retry: code == 429 || code >= 500,
                    wait,
                });
            }
            Err(ureq::Error::Transport(t)) => {
                return Err(Failure {
                    message: format!("no response ({t})"),
                    retry: true,
                    wait: None,
                })
            }
        };
        let text = resp.into_string().map_err(|e| Failure {
            message: format!("the response broke off ({e})"),
            retry: true,
            wait: None,
        })?;
        parse_completion(&text).map_err(|message| Failure {
            message,
            retry: true,
            wait: None,
        })
    }

    /// [`Reader::read`] without `&mut`: the reader can be shared (a query transform on
    /// the same server).
    pub fn answer(&self, question: &str, passages: &[Context]) -> Result<Answer> {
        let msgs = self.messages(question, passages)?;
        let what = format!("question {:?}", short(question));
        let c = self.chat(&msgs, &self.params(), &what)?;
        Ok(Answer {
            abstained: self.opts.abstention.is_abstention(&c.text),
            text: c.text,
            passage_ids: passages.iter().map(|p| p.id.clone()).collect(),
            dropped: Vec::new(),
            evidence: None,
            score: None,
            usage: c.usage,
        })
    }

    /// Up to `concurrency` requests in flight; results in the order of `items`.
    pub fn answer_many(&self, items: &[(&str, &[Context])]) -> Vec<Result<Answer>> {
        let workers = self.opts.concurrency.min(items.len()).max(1);
        if workers == 1 {
            return items.iter().map(|(q, p)| self.answer(q, p)).collect();
        }
        let next = AtomicUsize::new(0);
        let slots: Vec<Mutex<Option<Result<Answer>>>> =
            items.iter().map(|_| Mutex::new(None)).collect();
        let this = self;
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((q, p)) = items.get(i) else { break };
                    let r = this.answer(q, p);
                    if let Ok(mut slot) = slots[i].lock() {
                        *slot = Some(r);
                    }
                });
            }
        });
        slots
            .into_iter()
            .map(|m| {
                m.into_inner().ok().flatten().unwrap_or_else(|| {
                    Err(Error::Server {
                        url: this.url.clone(),
                        message: "a request thread ended without an answer".into(),
                    })
                })
            })
            .collect()
    }
}

/// The first 80 characters of a question, for error messages.
fn short(q: &str) -> String {
    let q = q.trim();
    match q.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &q[..i]),
        None => q.to_string(),
    }
}

/// The server's own error message out of an error body (`{"error": {"message"}}` or
/// `{"error": "…"}`), else the body's first 300 characters.
fn server_message(body: &str) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        let e = v.get("error")?;
        e.get("message")
            .and_then(Value::as_str)
            .or_else(|| e.as_str())
            .map(str::to_string)
    });
    from_json.unwrap_or_else(|| {
        let b = body.trim();
        if b.is_empty() {
            "(empty body)".into()
        } else {
            b.chars().take(300).collect()
        }
    })
}

/// Parse a chat-completions response body.
fn parse_completion(body: &str) -> std::result::Result<Completion, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| {
        format!(
            "the response is not JSON ({e}): {:?}",
            body.chars().take(120).collect::<String>()
        )
    })?;
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| format!("the response has no `choices`: {}", server_message(body)))?;
    let text = choice
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str)
        .ok_or_else(|| "the response's `choices[0].message.content` is missing".to_string())?;
    let count = |k: &str| {
        v.get("usage")
            .and_then(|u| u.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0) as usize
    };
    let ms = |k: &str| {
        v.get("timings")
            .and_then(|t| t.get(k))
            .and_then(Value::as_f64)
            .unwrap_or(0.0)
            / 1000.0
    };
    Ok(Completion {
        text: text.trim().to_string(),
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        usage: Usage {
            prompt_tokens: count("prompt_tokens"),
            generated_tokens: count("completion_tokens"),
            prefill_secs: ms("prompt_ms"),
            decode_secs: ms("predicted_ms"),
            decode_steps: count("completion_tokens"),
        },
        attempts: 1,
        first_top_logprobs: choice
            .get("logprobs")
            .and_then(|l| l.get("content"))
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .and_then(|t| t.get("top_logprobs"))
            .and_then(Value::as_array)
            .map(|alts| {
                alts.iter()
                    .filter_map(|a| {
                        Some((
                            a.get("token")?.as_str()?.to_string(),
                            a.get("logprob")?.as_f64()?,
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default(),
        token_logprobs: choice
            .get("logprobs")
            .and_then(|l| l.get("content"))
            .and_then(Value::as_array)
            .map(|c| {
                c.iter()
                    .filter_map(|t| {
                        Some((
                            t.get("token")?.as_str()?.to_string(),
                            t.get("logprob")?.as_f64()?,
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default(),
    })
}

impl Reader for OpenAiReader {
    fn name(&self) -> &str {
        &self.name
    }

    fn read(&mut self, question: &str, passages: &[Context]) -> Result<Answer> {
        self.answer(question, passages)
    }

    /// The chat messages sent, as JSON (`[{"role", "content"}, …]`).
    fn prompt(&self, question: &str, passages: &[Context]) -> Result<Option<String>> {
        Ok(Some(serde_json::to_string(
            &self.messages(question, passages)?,
        )?))
    }

    fn concurrency(&self) -> usize {
        self.opts.concurrency
    }

    /// Up to `concurrency` requests in flight; results in the order of `items`.
    fn read_many(&mut self, items: &[(&str, &[Context])]) -> Vec<Result<Answer>> {
        self.answer_many(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_log_probabilities_are_read_from_logprobs_content() {
        let body = r#"{"choices":[{"message":{"content":"Paris."},"finish_reason":"stop",
            "logprobs":{"content":[{"token":"Paris","logprob":-0.25,"top_logprobs":[]},
                                   {"token":".","logprob":-1.5,"top_logprobs":[]}]}}]}"#;
        let c = parse_completion(body).unwrap();
        assert_eq!(
            c.token_logprobs,
            [("Paris".to_string(), -0.25), (".".to_string(), -1.5)]
        );
    }

    #[test]
    fn completion_bodies_parse_or_say_why() {
        let ok = r#"{"choices":[{"message":{"role":"assistant","content":" Paris \n"},"finish_reason":"stop"}],
                     "usage":{"prompt_tokens":37,"completion_tokens":2},
                     "timings":{"prompt_ms":250.0,"predicted_ms":20.0}}"#;
        let c = parse_completion(ok).unwrap();
        assert!(c.token_logprobs.is_empty());
        assert_eq!(c.text, "Paris");
        assert_eq!(c.finish_reason, "stop");
        assert_eq!((c.usage.prompt_tokens, c.usage.generated_tokens), (37, 2));
        assert!((c.usage.prefill_secs - 0.25).abs() < 1e-9);
        assert!(parse_completion("{\"choices\": [")
            .unwrap_err()
            .contains("not JSON"));
        assert!(
            parse_completion(r#"{"error":{"message":"model not loaded"}}"#)
                .unwrap_err()
                .contains("model not loaded")
        );
        assert!(parse_completion(
            r#"{"choices":[{"message":{"role":"assistant","content":null}}]}"#
        )
        .unwrap_err()
        .contains("content"));
    }

    #[test]
    fn options_are_checked() {
        let base = OpenAiOptions {
            model: "m".into(),
            ..OpenAiOptions::default()
        };
        assert!(OpenAiReader::new(base.clone()).is_ok());
        let bad = [
            OpenAiOptions {
                base_url: "localhost:8080".into(),
                ..base.clone()
            },
            OpenAiOptions {
                model: " ".into(),
                ..base.clone()
            },
            OpenAiOptions {
                prompt: "{question}".into(),
                ..base.clone()
            },
            OpenAiOptions {
                concurrency: 0,
                ..base.clone()
            },
            OpenAiOptions {
                api_key_env: "WORKBENCH_TEST_SURELY_UNSET_KEY".into(),
                ..base.clone()
            },
        ];
        for o in bad {
            assert!(OpenAiReader::new(o.clone()).is_err(), "{o:?}");
        }
    }

    #[test]
    fn messages_fill_the_template_like_the_in_process_reader() {
        let r = OpenAiReader::new(OpenAiOptions {
            model: "m".into(),
            system: Some("Be brief.".into()),
            prompt: "Q: {question}\n{passages}".into(),
            passage: "[{rank}] {text}".into(),
            ..OpenAiOptions::default()
        })
        .unwrap();
        let m = r
            .messages(
                " Who? ",
                &[Context::new("a", "A {question}"), Context::new("b", "B")],
            )
            .unwrap();
        assert_eq!(m[0].content, "Be brief.");
        assert_eq!(m[1].content, "Q: Who?\n[1] A {question}\n\n[2] B");
        assert!(r.messages("  ", &[]).is_err());
    }
}
