//! The language model a method prompts directly ([`Lm`]): a user message and the start of
//! the assistant's turn in, text with each token's log-probability out. The in-process GGUF
//! model and an OpenAI-compatible server implement it (through [`crate::read::ctx::Generator`],
//! feature `llm`); [`ScriptedLm`] replays fixed outputs, for tests and teaching.

use crate::read::Usage;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// One generation request: greedy decoding, always (a method's trace is reproducible).
#[derive(Debug, Clone, PartialEq)]
pub struct LmRequest {
    /// The user message (the method's template, filled).
    pub user: String,
    /// The start of the assistant's turn, which the model continues (a reasoning chain so
    /// far, a search loop's transcript); empty for a fresh answer.
    pub assistant_prefix: String,
    /// Most tokens to generate.
    pub max_new_tokens: usize,
    /// The text is cut before the first of these, and generation stops there.
    pub stop: Vec<String>,
}

/// What one generation gave back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The generated text, cut before a stop string (not trimmed).
    pub text: String,
    /// Each generated token's text and natural-log probability under the model (empty when
    /// the model gave none: a server that does not send `logprobs`).
    pub tokens: Vec<(String, f64)>,
    /// Token counts and times.
    pub usage: Usage,
}

impl Completion {
    /// The geometric mean of the token probabilities, `exp(mean log p)`, over the tokens
    /// that make up `text` (tokens of a stop string after it are left out); `None` without
    /// log-probabilities or tokens.
    pub fn confidence(&self) -> Option<f64> {
        let lp = self.text_logprobs();
        (!lp.is_empty()).then(|| (lp.iter().sum::<f64>() / lp.len() as f64).exp())
    }

    /// The log-probabilities of the tokens that make up `text`: tokens are taken while
    /// their texts, joined, are shorter than `text` (a stop string's tokens come after).
    pub fn text_logprobs(&self) -> Vec<f64> {
        let mut out = Vec::new();
        let mut len = 0;
        for (t, lp) in &self.tokens {
            if len >= self.text.len() {
                break;
            }
            out.push(*lp);
            len += t.len();
        }
        out
    }
}

/// A language model a method prompts directly.
pub trait Lm {
    /// A short name for traces.
    fn name(&self) -> String;

    /// Generate a continuation of `request` (greedy).
    fn complete(&mut self, request: &LmRequest) -> Result<Completion>;
}

/// An [`Lm`] that replays fixed outputs in order and records the requests it was given: a
/// method's control flow pinned without a model.
#[derive(Debug, Clone, Default)]
pub struct ScriptedLm {
    outputs: VecDeque<Completion>,
    /// The requests received, in order.
    pub requests: Vec<LmRequest>,
}

impl ScriptedLm {
    /// Outputs whose every whitespace-separated token has probability `p`.
    pub fn new<S: AsRef<str>>(outputs: &[S], p: f64) -> Self {
        ScriptedLm {
            outputs: outputs.iter().map(|o| scripted(o.as_ref(), p)).collect(),
            requests: Vec::new(),
        }
    }

    /// Outputs given whole (tokens and log-probabilities as the caller wants them).
    pub fn from_completions(outputs: Vec<Completion>) -> Self {
        ScriptedLm {
            outputs: outputs.into(),
            requests: Vec::new(),
        }
    }

    /// Outputs not yet replayed.
    pub fn remaining(&self) -> usize {
        self.outputs.len()
    }
}

/// `text` as a completion whose tokens are its words (each with the space before it) at
/// probability `p`; one token per word, usage counting them.
pub fn scripted(text: &str, p: f64) -> Completion {
    let mut tokens = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() && i > start && !text[start..i].trim().is_empty() {
            tokens.push((text[start..i].to_string(), p.ln()));
            start = i;
        }
    }
    if start < text.len() {
        tokens.push((text[start..].to_string(), p.ln()));
    }
    Completion {
        usage: Usage {
            prompt_tokens: 0,
            generated_tokens: tokens.len(),
            ..Usage::default()
        },
        text: text.to_string(),
        tokens,
    }
}

impl Lm for ScriptedLm {
    fn name(&self) -> String {
        "scripted".into()
    }

    fn complete(&mut self, request: &LmRequest) -> Result<Completion> {
        self.requests.push(request.clone());
        let mut out = self.outputs.pop_front().ok_or_else(|| {
            Error::param(
                "lm",
                format!(
                    "the scripted model has no output left for request {}",
                    self.requests.len()
                ),
            )
        })?;
        out.usage.prompt_tokens = request.user.split_whitespace().count()
            + request.assistant_prefix.split_whitespace().count();
        Ok(out)
    }
}

#[cfg(feature = "llm")]
mod generator {
    use super::{Completion, Lm, LmRequest};
    use crate::read::ctx::Generator;
    use crate::read::generative::{ChatMessage, GenerateParams, Sampling};
    use crate::read::openai::{ChatParams, Message};
    use crate::Result;

    impl Lm for Generator {
        fn name(&self) -> String {
            match self {
                Generator::Local(llm) => llm
                    .lock()
                    .map(|l| l.name().to_string())
                    .unwrap_or_else(|_| "gguf".into()),
                Generator::Remote(r) => r.options().model.clone(),
            }
        }

        fn complete(&mut self, request: &LmRequest) -> Result<Completion> {
            match self {
                Generator::Local(llm) => {
                    let mut llm = llm.lock()?;
                    let mut prompt =
                        llm.render_chat(&[ChatMessage::user(request.user.clone())], true)?;
                    prompt.push_str(&request.assistant_prefix);
                    let params = GenerateParams {
                        max_new_tokens: request.max_new_tokens,
                        sampling: Sampling::Greedy,
                        stop_strings: request.stop.clone(),
                        ..GenerateParams::default()
                    };
                    let g = llm.generate(&prompt, &params)?;
                    let tokens = g
                        .token_ids
                        .iter()
                        .zip(&g.token_logprobs)
                        .map(|(&id, &lp)| Ok((llm.detokenize(&[id])?, lp as f64)))
                        .collect::<Result<Vec<_>>>()?;
                    Ok(Completion {
                        usage: g.usage(),
                        text: g.text,
                        tokens,
                    })
                }
                Generator::Remote(server) => {
                    let params = ChatParams {
                        temperature: 0.0,
                        top_p: 1.0,
                        max_tokens: request.max_new_tokens,
                        seed: server.options().seed,
                        stop: request.stop.clone(),
                        top_logprobs: Some(1),
                    };
                    let mut msgs = vec![Message {
                        role: "user".into(),
                        content: request.user.clone(),
                    }];
                    // A final assistant message is continued by servers that support it
                    // (llama.cpp's server; vLLM with `continue_final_message`).
                    if !request.assistant_prefix.is_empty() {
                        msgs.push(Message {
                            role: "assistant".into(),
                            content: request.assistant_prefix.clone(),
                        });
                    }
                    let c = server.chat(&msgs, &params, "a method step")?;
                    Ok(Completion {
                        text: c.text,
                        tokens: c.token_logprobs,
                        usage: c.usage,
                    })
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confidence_is_the_geometric_mean_over_the_text_tokens() {
        let c = Completion {
            text: "Paris is".into(),
            tokens: vec![
                ("Paris".into(), 0.5f64.ln()),
                (" is".into(), 0.125f64.ln()),
                ("</s>".into(), 0.001f64.ln()),
            ],
            usage: Usage::default(),
        };
        // The stop token after the text is left out: sqrt(0.5 * 0.125) = 0.25.
        assert!((c.confidence().unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(Completion::default().confidence(), None);
    }

    #[test]
    fn scripted_outputs_replay_in_order_then_fail() {
        let mut lm = ScriptedLm::new(&["one two", "three"], 0.5);
        let req = LmRequest {
            user: "q".into(),
            assistant_prefix: String::new(),
            max_new_tokens: 8,
            stop: vec![],
        };
        let a = lm.complete(&req).unwrap();
        assert_eq!(a.text, "one two");
        assert_eq!(a.tokens.len(), 2);
        assert!((a.confidence().unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(lm.complete(&req).unwrap().text, "three");
        let e = lm.complete(&req).unwrap_err().to_string();
        assert!(e.contains("no output left for request 3"), "{e}");
        assert_eq!(lm.requests.len(), 3);
    }
}
