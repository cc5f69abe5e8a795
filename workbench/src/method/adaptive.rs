//! Adaptive retrieval: answer closed-book first and retrieve only when that answer is
//! unsure (the FLARE / SKR family's decision, made on the model's own token
//! probabilities), then fall back to the closed-book answer when the reader, given
//! passages, abstains.
//!
//! 1. The model answers the question with [`PROMPT`] (or `prompt`), no passages.
//! 2. That answer is kept when it is not an abstention and its confidence (the geometric
//!    mean of its token probabilities) is at least `threshold`: no retrieval.
//! 3. Otherwise the question is retrieved for and the reader answers over the passages.
//! 4. When that answer is an abstention ("Not found") and `fallback` is on, the
//!    closed-book answer is the answer (unless it abstained too).
//!
//! `threshold = 0` retrieves only when the closed-book answer abstains; `threshold = 1`
//! always retrieves, which with `fallback` is "RAG, and the closed-book answer where RAG
//! finds nothing".

use super::recorder::Recorder;
use super::recorder::{at_least_one, probability};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// The built-in closed-book prompt: [`closed_book::PROMPT`](super::closed_book::PROMPT).
pub use super::closed_book::PROMPT;

/// Parameters of `kind = "adaptive"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Adaptive {
    /// Retrieve when the closed-book answer's confidence is below this (0–1; 1 = always).
    /// Default 0.5.
    pub threshold: f64,
    /// Answer closed-book when the reader abstains over the passages. Default true.
    pub fallback: bool,
    /// The closed-book prompt file (`{question}`); empty = the built-in one. Default empty.
    pub prompt: String,
    /// Most tokens of the closed-book answer. Default 32.
    pub max_new_tokens: usize,
}

impl Default for Adaptive {
    fn default() -> Self {
        Adaptive {
            threshold: 0.5,
            fallback: true,
            prompt: String::new(),
            max_new_tokens: 32,
        }
    }
}

impl Adaptive {
    pub(crate) fn check(&self) -> Result<()> {
        probability("method.threshold", self.threshold)?;
        at_least_one("method.max_new_tokens", self.max_new_tokens)
    }
}

/// Run the method (see the [module docs](self)); returns the answer and its abstention.
pub(crate) fn run(
    p: &Adaptive,
    template: &str,
    question: &str,
    rec: &mut Recorder<'_>,
) -> Result<(String, bool)> {
    let closed = super::closed_book::turn("adaptive", p.max_new_tokens, template, question, rec)?;
    let closed_text = closed.text.trim().to_string();
    let closed_abstains = rec.abstains_text(&closed_text);
    let sure = if p.threshold >= 1.0 || closed_text.is_empty() {
        // Always retrieve; or nothing was answered (a turn cut at its first token).
        false
    } else {
        match closed.confidence() {
            Some(c) => c >= p.threshold,
            None => {
                return Err(Error::param(
                    "method.threshold",
                    "the model gave no token log-probabilities to decide on (a server that \
                     does not send `logprobs`); set threshold = 1 to always retrieve",
                ))
            }
        }
    };
    if sure && !closed_abstains {
        return Ok((closed_text, false));
    }
    let passages = rec.search(question, "question")?;
    let read = rec.read(question, &passages, "answer")?;
    if rec.abstains(&read) {
        if p.fallback && !closed_abstains && !closed_text.is_empty() {
            return Ok((closed_text, false));
        }
        return Ok((read.text, true));
    }
    Ok((read.text, false))
}

#[cfg(test)]
mod tests {
    use super::super::lm::ScriptedLm;
    use super::super::recorder::StepKind;
    use super::super::testing::*;
    use super::*;

    fn adaptive(
        threshold: f64,
        fallback: bool,
        closed: &str,
        p: f64,
    ) -> (super::super::recorder::MethodAnswer, ScriptedLm) {
        let mut search = corpus_search(&[
            ("austria", "capital of austria = Vienna"),
            ("atlantis", "a legend with no capital"),
        ]);
        let mut lm = ScriptedLm::new(&[closed], p);
        let params = Adaptive {
            threshold,
            fallback,
            ..Adaptive::default()
        };
        let q = if closed.contains("Atlantis") || closed == "Poseidonia" {
            "What is the capital of Atlantis?"
        } else {
            "What is the capital of Austria?"
        };
        let out = run_scripted(&mut search, Some(&mut lm), |rec| {
            run(&params, PROMPT, q, rec)
        })
        .unwrap();
        (out, lm)
    }

    fn kinds(out: &super::super::recorder::MethodAnswer) -> Vec<StepKind> {
        out.steps.iter().map(|s| s.kind).collect()
    }

    #[test]
    fn a_confident_closed_book_answer_is_kept_without_retrieval() {
        let (out, lm) = adaptive(0.5, true, "Salzburg", 0.9);
        assert_eq!(out.answer.text, "Salzburg");
        assert_eq!(kinds(&out), [StepKind::Generate]);
        assert_eq!(out.retrieval_calls(), 0);
        assert!(lm.requests[0].user.contains("capital of Austria"));
        assert!((out.steps[0].confidence.unwrap() - 0.9).abs() < 1e-9);
    }

    #[test]
    fn an_unsure_answer_is_retrieved_for_and_read() {
        let (out, _) = adaptive(0.5, true, "Salzburg", 0.3);
        assert_eq!(out.answer.text, "Vienna");
        assert_eq!(
            kinds(&out),
            [StepKind::Generate, StepKind::Retrieve, StepKind::Read]
        );
        assert_eq!(out.answer.passage_ids, ["austria"]);
    }

    #[test]
    fn a_closed_book_abstention_is_retrieved_for_however_sure() {
        let (out, _) = adaptive(0.0, true, "Not found", 1.0);
        assert_eq!(out.answer.text, "Vienna");
        assert_eq!(out.retrieval_calls(), 1);
    }

    #[test]
    fn an_empty_closed_book_turn_is_retrieved_for_and_never_a_fallback() {
        // The stop string came first: no text, one token.
        let mut search = corpus_search(&[("austria", "capital of austria = Vienna")]);
        let empty = crate::method::Completion {
            text: String::new(),
            tokens: vec![("\n".into(), -0.1)],
            usage: Default::default(),
        };
        let mut lm = ScriptedLm::from_completions(vec![empty]);
        let out = run_scripted(&mut search, Some(&mut lm), |rec| {
            run(&Adaptive::default(), PROMPT, "Capital of Austria?", rec)
        })
        .unwrap();
        assert_eq!(out.answer.text, "Vienna");
        assert_eq!(out.retrieval_calls(), 1);
    }

    #[test]
    fn a_confidence_equal_to_the_threshold_is_sure() {
        let (out, _) = adaptive(0.5, true, "Salzburg", 0.5);
        assert_eq!(out.retrieval_calls(), 0);
        // threshold = 1 always retrieves, even at probability 1.
        let (out, _) = adaptive(1.0, true, "Salzburg", 1.0);
        assert_eq!(out.retrieval_calls(), 1);
    }

    #[test]
    fn the_reader_abstaining_falls_back_to_the_closed_book_answer() {
        let (out, _) = adaptive(1.0, true, "Poseidonia", 0.99);
        assert_eq!(out.answer.text, "Poseidonia");
        assert!(!out.answer.abstained);
        assert_eq!(
            kinds(&out),
            [StepKind::Generate, StepKind::Retrieve, StepKind::Read]
        );
        // Without the fallback the abstention stands.
        let (out, _) = adaptive(1.0, false, "Poseidonia", 0.99);
        assert_eq!(out.answer.text, "Not found");
        assert!(out.answer.abstained);
    }
}
