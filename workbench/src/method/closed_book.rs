//! Closed-book: the model answers from what it knows, with no retrieval. Its one turn is
//! exactly [`adaptive`](super::adaptive)'s first turn (same prompt, same decoding), so a
//! study that runs both compares them like for like: the adaptive answer differs from this
//! one only on the questions where it retrieved.

use super::lm::{Completion, LmRequest};
use super::recorder::at_least_one;
use super::recorder::Recorder;
use crate::text::fill_placeholders;
use crate::Result;
use serde::{Deserialize, Serialize};

/// The built-in closed-book prompt (also [`adaptive`](super::adaptive)'s first turn).
pub const PROMPT: &str = "Answer the question with a short phrase (a name, a date, a number), \
not a sentence. If you do not know, answer \"Not found\".\n\nQuestion: {question}";

/// Parameters of `kind = "closed-book"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClosedBook {
    /// The prompt file (`{question}`); empty = the built-in one. Default empty.
    pub prompt: String,
    /// Most tokens of the answer. Default 32.
    pub max_new_tokens: usize,
}

impl Default for ClosedBook {
    fn default() -> Self {
        ClosedBook {
            prompt: String::new(),
            max_new_tokens: 32,
        }
    }
}

impl ClosedBook {
    pub(crate) fn check(&self) -> Result<()> {
        at_least_one("method.max_new_tokens", self.max_new_tokens)
    }
}

/// The closed-book turn: `template` filled with the question, greedy, up to the first
/// newline; `method` names the method in errors and the trace.
pub(crate) fn turn(
    method: &str,
    max_new_tokens: usize,
    template: &str,
    question: &str,
    rec: &mut Recorder<'_>,
) -> Result<Completion> {
    rec.generate(
        method,
        &LmRequest {
            user: fill_placeholders(template, &[("question", question)]),
            assistant_prefix: String::new(),
            max_new_tokens,
            stop: vec!["\n".into()],
        },
        "closed-book",
    )
}

/// Run the method; returns the answer and its abstention.
pub(crate) fn run(
    p: &ClosedBook,
    template: &str,
    question: &str,
    rec: &mut Recorder<'_>,
) -> Result<(String, bool)> {
    let text = turn("closed-book", p.max_new_tokens, template, question, rec)?
        .text
        .trim()
        .to_string();
    let abstained = text.is_empty() || rec.abstains_text(&text);
    Ok((text, abstained))
}

#[cfg(test)]
mod tests {
    use super::super::lm::ScriptedLm;
    use super::super::recorder::StepKind;
    use super::super::testing::*;
    use super::*;

    #[test]
    fn one_turn_no_retrieval_and_the_same_turn_as_adaptive() {
        let p = ClosedBook::default();
        let q = "What is the capital of Austria?";
        let mut search = corpus_search(&[("austria", "capital of austria = Vienna")]);
        let mut lm = ScriptedLm::new(&[" Vienna "], 0.9);
        let out = run_scripted(&mut search, Some(&mut lm), |rec| run(&p, PROMPT, q, rec)).unwrap();
        assert_eq!(out.answer.text, "Vienna");
        assert!(!out.answer.abstained);
        assert_eq!(out.retrieval_calls(), 0);
        let kinds: Vec<StepKind> = out.steps.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, [StepKind::Generate]);
        assert_eq!(lm.requests[0].user, PROMPT.replace("{question}", q));
        // Adaptive's first turn sends the same request.
        let mut lm2 = ScriptedLm::new(&["Vienna"], 0.9);
        run_scripted(&mut search, Some(&mut lm2), |rec| {
            super::super::adaptive::run(&Default::default(), PROMPT, q, rec)
        })
        .unwrap();
        assert_eq!(lm2.requests[0], lm.requests[0]);
        // "Not found" and an empty turn are abstentions.
        for said in ["Not found", ""] {
            let mut lm = ScriptedLm::new(&[said], 0.9);
            let out =
                run_scripted(&mut search, Some(&mut lm), |rec| run(&p, PROMPT, "q?", rec)).unwrap();
            assert!(out.answer.abstained, "{said:?}");
        }
    }
}
