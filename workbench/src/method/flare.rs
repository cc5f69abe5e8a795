//! FLARE (Jiang et al., 2023), the direct variant: generate the answer a sentence at a
//! time; when a sentence holds a token the model was unsure of, retrieve with that
//! sentence's confident words and generate the sentence again over the new passages.
//!
//! 1. Retrieve with the question.
//! 2. The model writes the next sentence ([`PROMPT`]: the current passages, the question,
//!    the answer so far as the start of its turn). Unlike the paper, whose look-ahead is
//!    generated without documents, the look-ahead here sees the current passages (the
//!    question's at first).
//! 3. When a token of that sentence has probability below `threshold` (the paper's θ; the
//!    same value masks the query's tokens, its β), the query is the sentence without its
//!    unsure tokens, with the question in front for the first sentence (the question alone
//!    when no token is left); the passages are replaced by what it retrieves and the
//!    sentence is generated again. A model that gives no token probabilities is an error.
//! 4. The sentence is added; the loop ends when the model stops or after `max_steps`
//!    sentences. The sentences are the answer.

use super::lm::{Completion, LmRequest};
use super::recorder::{at_least_one, probability};
use super::recorder::{first_sentence, format_docs, Recorder};
use crate::text::fill_placeholders;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// The built-in prompt.
pub const PROMPT: &str = "Answer the question using the documents. Give a short answer (a \
name, a date, a number) first.\n\n{passages}\n\nQuestion: {question}";

/// Parameters of `kind = "flare"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Flare {
    /// A token below this probability makes its sentence retrieved for (0–1). Default 0.4.
    pub threshold: f64,
    /// Most sentences. Default 3.
    pub max_steps: usize,
    /// The prompt file (`{passages}`, `{question}`); empty = the built-in one.
    pub prompt: String,
    /// Most tokens per sentence (the look-ahead). Default 48.
    pub max_new_tokens: usize,
}

impl Default for Flare {
    fn default() -> Self {
        Flare {
            threshold: 0.4,
            max_steps: 3,
            prompt: String::new(),
            max_new_tokens: 48,
        }
    }
}

impl Flare {
    pub(crate) fn check(&self) -> Result<()> {
        probability("method.threshold", self.threshold)?;
        at_least_one("method.max_steps", self.max_steps)?;
        at_least_one("method.max_new_tokens", self.max_new_tokens)
    }
}

/// The first sentence of `c` and its tokens (token text, log-probability), the tokens
/// taken while their joined text does not yet cover the sentence.
fn sentence_tokens(c: &Completion) -> (String, Vec<(String, f64)>) {
    let sentence = first_sentence(&c.text).to_string();
    let lead = c.text.len() - c.text.trim_start().len();
    let need = lead + sentence.len();
    let mut len = 0;
    let mut toks = Vec::new();
    for t in &c.tokens {
        if len >= need {
            break;
        }
        len += t.0.len();
        toks.push(t.clone());
    }
    (sentence, toks)
}

/// Run the method (see the [module docs](self)); returns the answer and its abstention.
pub(crate) fn run(
    p: &Flare,
    template: &str,
    question: &str,
    rec: &mut Recorder<'_>,
) -> Result<(String, bool)> {
    let ln_threshold = p.threshold.ln();
    let mut passages = rec.search(question, "question")?;
    let mut answer: Vec<String> = Vec::new();
    for _ in 0..p.max_steps {
        let request = |passages: &[crate::read::Context], answer: &[String]| LmRequest {
            user: fill_placeholders(
                template,
                &[("passages", &format_docs(passages)), ("question", question)],
            ),
            // No trailing space: the model's next word brings its own.
            assistant_prefix: answer.join(" "),
            max_new_tokens: p.max_new_tokens,
            stop: vec![],
        };
        rec.show(&passages);
        let mut last = rec.generate("flare", &request(&passages, &answer), "look ahead")?;
        let (mut sentence, toks) = sentence_tokens(&last);
        if sentence.is_empty() {
            break;
        }
        if toks.is_empty() {
            return Err(Error::param(
                "method.threshold",
                "the model gave no token log-probabilities to judge a sentence by (a server \
                 that does not send `logprobs`)",
            ));
        }
        let lowest = toks.iter().map(|(_, lp)| *lp).fold(f64::INFINITY, f64::min);
        rec.mark_lowest_probability(lowest.exp());
        let unsure = lowest < ln_threshold;
        if unsure {
            let confident: Vec<&str> = toks
                .iter()
                .filter(|(_, lp)| *lp >= ln_threshold)
                .map(|(t, _)| t.as_str())
                .collect();
            let masked = confident.concat().trim().to_string();
            let query = if answer.is_empty() || masked.is_empty() {
                if masked.is_empty() {
                    question.to_string()
                } else {
                    format!("{question} {masked}")
                }
            } else {
                masked
            };
            passages = rec.search(&query, "unsure sentence")?;
            rec.show(&passages);
            last = rec.generate("flare", &request(&passages, &answer), "regenerate")?;
            sentence = first_sentence(&last.text).to_string();
            if sentence.is_empty() {
                break;
            }
        }
        // The model wrote nothing after this sentence: the answer is complete.
        let done = first_sentence(&last.text).len() + 1 >= last.text.trim().len();
        answer.push(sentence);
        if done {
            break;
        }
    }
    let text = answer.join(" ");
    let abstained = text.trim().is_empty() || rec.abstains_text(&text);
    Ok((text, abstained))
}

#[cfg(test)]
mod tests {
    use super::super::lm::scripted;
    use super::super::lm::ScriptedLm;
    use super::super::recorder::StepKind;
    use super::super::testing::*;
    use super::*;

    #[test]
    fn an_unsure_sentence_is_retrieved_for_with_its_confident_words_and_regenerated() {
        let mut search = corpus_search(&[
            ("austria", "capital of austria = Vienna"),
            ("vienna", "river of vienna = Danube"),
        ]);
        // "Salzburg" is unsure (p = 0.1): the query drops it.
        let mut unsure = scripted("Vienna lies on the Salzburg.", 0.9);
        unsure.tokens[4].1 = 0.1f64.ln();
        let mut lm =
            ScriptedLm::from_completions(vec![unsure, scripted("Vienna lies on the Danube.", 0.9)]);
        let out = run_scripted(&mut search, Some(&mut lm), |rec| {
            run(
                &Flare::default(),
                PROMPT,
                "Which river flows through the capital of Austria?",
                rec,
            )
        })
        .unwrap();
        use StepKind::*;
        let kinds: Vec<StepKind> = out.steps.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, [Retrieve, Generate, Retrieve, Generate]);
        // The look-ahead records the lowest probability it judged by; the regeneration is
        // not judged.
        assert!((out.steps[1].lowest_probability.unwrap() - 0.1).abs() < 1e-9);
        assert_eq!(out.steps[3].lowest_probability, None);
        // First sentence: the question plus the confident words.
        assert_eq!(
            out.steps[2].query.as_deref(),
            Some("Which river flows through the capital of Austria? Vienna lies on the")
        );
        assert!(lm.requests[1].user.contains("river of vienna = Danube"));
        assert_eq!(out.answer.text, "Vienna lies on the Danube.");
    }

    #[test]
    fn a_later_unsure_sentence_is_retrieved_for_with_its_own_words_only() {
        let mut search = corpus_search(&[
            ("austria", "capital of austria = Vienna"),
            ("lies", "vienna lies on = Danube"),
        ]);
        let mut second = scripted(" It lies on the Salzburg.", 0.9);
        second.tokens[4].1 = 0.1f64.ln();
        // An unsure token after the first sentence does not count: only the sentence is
        // judged.
        let mut first = scripted("Vienna is the capital. It lies on", 0.9);
        first.tokens[5].1 = 0.05f64.ln();
        let mut lm = ScriptedLm::from_completions(vec![
            first,
            second,
            scripted(" It lies on the Danube.", 0.9),
        ]);
        let out = run_scripted(&mut search, Some(&mut lm), |rec| {
            run(
                &Flare::default(),
                PROMPT,
                "What is the capital of Austria?",
                rec,
            )
        })
        .unwrap();
        use StepKind::*;
        let kinds: Vec<StepKind> = out.steps.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, [Retrieve, Generate, Generate, Retrieve, Generate]);
        // Both look-aheads record the lowest probability of the sentence they judged (the
        // first sentence's own tokens only); the regeneration records none.
        let lowest: Vec<Option<f64>> = out.steps.iter().map(|s| s.lowest_probability).collect();
        assert!((lowest[1].unwrap() - 0.9).abs() < 1e-9, "{lowest:?}");
        assert!((lowest[2].unwrap() - 0.1).abs() < 1e-9, "{lowest:?}");
        assert_eq!([lowest[0], lowest[3], lowest[4]], [None, None, None]);
        // A look-ahead is followed by a retrieval exactly when it is below the threshold.
        for (i, s) in out.steps.iter().enumerate() {
            if let Some(p) = s.lowest_probability {
                let retrieved = out.steps.get(i + 1).is_some_and(|n| n.kind == Retrieve);
                assert_eq!(retrieved, p < Flare::default().threshold, "step {i}");
            }
        }
        // The second sentence's query is its confident words, without the question.
        assert_eq!(out.steps[3].query.as_deref(), Some("It lies on the"));
        assert_eq!(lm.requests[1].assistant_prefix, "Vienna is the capital.");
        assert_eq!(
            out.answer.text,
            "Vienna is the capital. It lies on the Danube."
        );
        assert_eq!(out.answer.passage_ids, ["austria", "lies"]);
    }

    #[test]
    fn a_confident_answer_is_kept_without_retrieving_again() {
        let mut search = corpus_search(&[("austria", "capital of austria = Vienna")]);
        let mut lm = ScriptedLm::new(&["Vienna."], 0.95);
        let out = run_scripted(&mut search, Some(&mut lm), |rec| {
            run(
                &Flare::default(),
                PROMPT,
                "What is the capital of Austria?",
                rec,
            )
        })
        .unwrap();
        assert_eq!(out.retrieval_calls(), 1);
        assert_eq!(out.answer.text, "Vienna.");
    }
}
