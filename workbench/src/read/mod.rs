//! Readers: turn a question and ranked passages into an answer.
//!
//! Every reader (generative or extractive) implements [`Reader`]: a question and the
//! passages a retriever ranked for it go in, in rank order; an [`Answer`] comes out with
//! its abstention flag, the ids of the passages the reader actually saw (and of those it
//! had to drop to fit its window), optional evidence (passage and character offsets),
//! and token counts and timings.
//!
//! | module | reader | feature |
//! |---|---|---|
//! | (this module) | the [`Reader`] trait, [`Answer`], [`AbstentionRule`], [`read_all`] with progress | – |
//! | [`parse`] | [`AnswerParser`]: the scored answer taken out of a generative reader's raw output | – |
//! | [`generative`] | GGUF language models (qwen2, llama) on candle: tokenizer, chat template, decoding, [`generative::GenerativeReader`] | `llm` |
//! | [`openai`] | [`openai::OpenAiReader`]: any OpenAI-compatible chat-completions server (llama.cpp's, vLLM, a hosted API), requests in flight, retries | – |
//! | [`ctx`] | [`BuildReader`], what a reader's spec is built against (`ReaderCtx`) and gives back | builds: `llm` |
//! | [`spec`] | [`ReaderConfig`] / [`ReaderSpec`]: the `[reader]` table, one variant per reader with its own parameters, built against a `ReaderCtx` | builds: `llm` |
//! | [`extractive`] | `ExtractiveReader`: a question-answering model (BERT / DistilBERT / RoBERTa `*ForQuestionAnswering`), sliding windows, n-best spans with a null score, evidence offsets | `dense` |
//!
//! ## Contract
//!
//! Every [`Reader`]:
//! - rejects an empty (or all-whitespace) question with [`Error::InvalidParam`] naming
//!   `question`;
//! - reads the passages in the order given (rank 1 first); when they do not all fit in its
//!   window it drops the **lowest-ranked** ones first and lists them in
//!   [`Answer::dropped`];
//! - sets [`Answer::abstained`] when its answer is an abstention (for generative readers
//!   decided by an [`AbstentionRule`], for extractive ones by a null score);
//! - never panics on any input text.

pub mod ctx;
#[cfg(feature = "dense")]
pub mod extractive;
#[cfg(feature = "llm")]
pub mod generative;
pub mod openai;
pub mod parse;
pub mod spec;

pub use ctx::BuildReader;
pub use parse::AnswerParser;
pub use spec::{ReaderConfig, ReaderSpec};

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One passage handed to a reader, in rank order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Context {
    /// Passage id (as in the retriever's [`crate::Hit`]).
    pub id: String,
    /// Title of the source document (may be empty).
    pub title: String,
    /// The passage text the reader reads.
    pub text: String,
    /// First-stage (or re-ranker) score, for the record.
    pub score: f32,
}

impl Context {
    /// A context with an empty title and score 0.
    pub fn new(id: impl Into<String>, text: impl Into<String>) -> Self {
        Context {
            id: id.into(),
            title: String::new(),
            text: text.into(),
            score: 0.0,
        }
    }
}

/// Where in a passage an extractive answer was found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Id of the passage.
    pub passage_id: String,
    /// Character (not byte) offset of the answer's first character in the passage text.
    pub start_char: usize,
    /// Character offset one past the answer's last character.
    pub end_char: usize,
}

/// Token counts and times of one reader call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt (generative) or in the encoded windows (extractive).
    pub prompt_tokens: usize,
    /// Generated tokens (0 for extractive readers).
    pub generated_tokens: usize,
    /// Time to process the prompt (prefill), seconds.
    pub prefill_secs: f64,
    /// Time to generate the answer tokens (decode), seconds.
    pub decode_secs: f64,
    /// Single-token forward passes inside `decode_secs`: `generated_tokens - 1` when the
    /// generation stopped at its token limit or a stop string (the prompt's pass gave the
    /// first token), `generated_tokens` when it stopped at an end-of-generation token (whose
    /// pass produced no kept token); an OpenAI-compatible server's own count. 0 for
    /// extractive readers.
    #[serde(default)]
    pub decode_steps: usize,
}

impl std::ops::AddAssign<&Usage> for Usage {
    /// Add another call's counts and times (a multi-call answer's totals).
    fn add_assign(&mut self, u: &Usage) {
        self.prompt_tokens += u.prompt_tokens;
        self.generated_tokens += u.generated_tokens;
        self.prefill_secs += u.prefill_secs;
        self.decode_secs += u.decode_secs;
        self.decode_steps += u.decode_steps;
    }
}

impl Usage {
    /// Prefill plus decode time.
    pub fn total(&self) -> Duration {
        Duration::from_secs_f64(self.prefill_secs + self.decode_secs)
    }

    /// Decode forward passes per second (`decode_steps / decode_secs`, llama.cpp's "eval"
    /// rate and [`crate::read::generative::Generation::decode_tokens_per_sec`]'s; 0 when
    /// nothing was decoded).
    pub fn decode_tokens_per_sec(&self) -> f64 {
        if self.decode_secs > 0.0 {
            self.decode_steps as f64 / self.decode_secs
        } else {
            0.0
        }
    }

    /// Prompt tokens per second of prefill time (0 when there was no prefill).
    pub fn prefill_tokens_per_sec(&self) -> f64 {
        if self.prefill_secs > 0.0 {
            self.prompt_tokens as f64 / self.prefill_secs
        } else {
            0.0
        }
    }
}

/// A reader's answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The answer text as the reader produced it (trimmed). For an abstention, the
    /// reader's own words ("Not found"), or empty for an extractive null answer.
    pub text: String,
    /// Whether the answer is an abstention.
    pub abstained: bool,
    /// Ids of the passages the reader was given, in rank order, after truncation.
    pub passage_ids: Vec<String>,
    /// Ids of the lowest-ranked passages dropped because they did not fit the window.
    pub dropped: Vec<String>,
    /// Where the answer was found (extractive readers).
    pub evidence: Option<Evidence>,
    /// Reader confidence, when it has one (span score, mean log-probability…).
    pub score: Option<f32>,
    /// Token counts and times.
    pub usage: Usage,
}

/// A question-answering reader.
pub trait Reader {
    /// A short name for tables and traces (`"qwen2.5-1.5b"`, `"minilm-squad"`).
    fn name(&self) -> &str;

    /// Answer `question` from `passages` (rank 1 first). See the module contract.
    fn read(&mut self, question: &str, passages: &[Context]) -> Result<Answer>;

    /// The exact prompt text this reader builds for `question` and `passages` (the
    /// passages it kept, [`Answer::passage_ids`]), for traces. `Ok(None)` (the default)
    /// for readers without a text prompt.
    fn prompt(&self, question: &str, passages: &[Context]) -> Result<Option<String>> {
        let _ = (question, passages);
        Ok(None)
    }

    /// How many questions [`Reader::read_many`] works on at once (1, the default: one
    /// at a time). Callers give it batches of this size.
    fn concurrency(&self) -> usize {
        1
    }

    /// Answer several questions; the results are in the order of `items`. The default
    /// reads them one after the other with [`Reader::read`]; a reader with
    /// [`Reader::concurrency`] > 1 works on them together.
    fn read_many(&mut self, items: &[(&str, &[Context])]) -> Vec<Result<Answer>> {
        items.iter().map(|(q, p)| self.read(q, p)).collect()
    }
}

/// Check a generative reader's templates: the prompt has `{question}` and `{passages}`,
/// the passage format `{text}` ([`Error::InvalidParam`] naming `prompt` or `passage`).
pub fn check_templates(prompt: &str, passage: &str) -> Result<()> {
    for key in ["{question}", "{passages}"] {
        if !prompt.contains(key) {
            return Err(Error::param(
                "prompt",
                format!("the prompt template has no {key}"),
            ));
        }
    }
    if !passage.contains("{text}") {
        return Err(Error::param(
            "passage",
            "the passage template has no {text}",
        ));
    }
    Ok(())
}

/// A prompt's user message: `prompt` with `{passages}` and `{question}` filled in one
/// pass ([`crate::text::fill_placeholders`]: a passage holding `{question}` keeps it).
pub fn user_message(prompt: &str, question: &str, passages: &str) -> String {
    crate::text::fill_placeholders(prompt, &[("passages", passages), ("question", question)])
}

/// One passage: `format` with `{rank}`, `{id}`, `{title}` and `{text}` filled in one pass.
pub fn format_passage(format: &str, rank: usize, p: &Context) -> String {
    crate::text::fill_placeholders(
        format,
        &[
            ("rank", &rank.to_string()),
            ("id", &p.id),
            ("title", &p.title),
            ("text", &p.text),
        ],
    )
}

/// Check a question against the [`Reader`] contract: non-empty after trimming.
pub fn check_question(question: &str) -> Result<&str> {
    let q = question.trim();
    if q.is_empty() {
        return Err(Error::InvalidParam {
            name: "question",
            message: "the question is empty".into(),
        });
    }
    Ok(q)
}

/// Decides whether a generated answer is an abstention ("Not found", "I don't know").
///
/// The answer is first trimmed (whitespace and trailing ASCII punctuation; leading
/// quotes and `*`), with curly apostrophes and quotes (`’ ‘ ʼ “ ” „`) read as `'` and
/// `"`. It is an abstention when it is then empty (if
/// [`AbstentionRule::empty_is_abstention`]) or it **starts with** one of the phrases,
/// compared case-insensitively and **as whole words**, either at its start or right after
/// a lead-in "the answer is" / "final answer" / "answer is" / "answer" (also whole words,
/// with an optional colon):
///
/// - whole words: the phrase must end at a word boundary, so "the answer is not" does
///   not match "The answer is Notre Dame" or "… notably …", nor "unknown" "Unknownness";
/// - a phrase followed by a capitalised word is part of a name and does not count
///   ("Unknown Pleasures", "No Answer Required"), unless the phrase itself is written in
///   capitals with no lowercase letter ("NOT FOUND IN THE PASSAGES" is an abstention).
///   So a title-cased refusal ("Not Found In The Passages") is not recognised.
///
/// The default phrases cover report 001's "Not found" and the usual refusals of
/// instruction-tuned models.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AbstentionRule {
    /// Lowercase phrases an abstaining answer starts with.
    pub phrases: Vec<String>,
    /// Whether an empty answer counts as an abstention.
    pub empty_is_abstention: bool,
}

impl Default for AbstentionRule {
    fn default() -> Self {
        AbstentionRule {
            phrases: [
                "not found",
                "i don't know",
                "i do not know",
                "unknown",
                "no answer",
                "the answer is not",
                "the passages do not",
                "the context does not",
                "cannot be answered",
                "i cannot answer",
                "i can't answer",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            empty_is_abstention: true,
        }
    }
}

impl AbstentionRule {
    /// A rule with the given phrases (lowercased), empty answers counting as abstentions.
    pub fn with_phrases<I: IntoIterator<Item = S>, S: AsRef<str>>(phrases: I) -> Self {
        AbstentionRule {
            phrases: phrases
                .into_iter()
                .map(|s| s.as_ref().to_lowercase())
                .collect(),
            empty_is_abstention: true,
        }
    }

    /// Whether `answer` is an abstention under this rule.
    pub fn is_abstention(&self, answer: &str) -> bool {
        let straight: String = answer.chars().map(straighten_quote).collect();
        let a = straight
            .trim()
            .trim_end_matches(|c: char| c.is_ascii_punctuation() || c.is_whitespace())
            .trim_start_matches(['"', '\'', '*', '_'])
            .trim_start();
        if a.is_empty() {
            return self.empty_is_abstention;
        }
        let phrases: Vec<String> = self
            .phrases
            .iter()
            .map(|p| {
                p.chars()
                    .map(straighten_quote)
                    .collect::<String>()
                    .to_lowercase()
            })
            .collect();
        let starts_with_phrase = |text: &str| phrases.iter().any(|p| phrase_starts(text, p));
        if starts_with_phrase(a) {
            return true;
        }
        // "The answer is: Not found." / "Answer: not found" / "Final answer: Not found.":
        // look past the lead-in too.
        ["the answer is", "final answer", "answer is", "answer"]
            .iter()
            .find_map(|lead| strip_words(a, lead))
            .map(|rest| rest.trim_start_matches([':', ' ', '"', '\'', '*']))
            .filter(|rest| !rest.is_empty())
            .is_some_and(starts_with_phrase)
    }
}

/// Curly apostrophes and quotes as their ASCII forms.
fn straighten_quote(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{02BC}' | '\u{2032}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' => '"',
        c => c,
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `text` after its prefix `prefix` (lowercase), compared case-insensitively, when the
/// prefix ends at a word boundary of `text`.
pub(crate) fn strip_words<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let mut want = prefix.chars();
    let mut last = None;
    for (i, c) in text.char_indices() {
        if want.as_str().is_empty() {
            let boundary = !(last.is_some_and(is_word_char) && is_word_char(c));
            return boundary.then_some(&text[i..]);
        }
        for l in c.to_lowercase() {
            if want.next() != Some(l) {
                return None;
            }
        }
        last = Some(c);
    }
    want.as_str().is_empty().then_some("")
}

/// Whether `text` starts with the whole-word phrase `phrase` (lowercase) and the phrase
/// is not the start of a name (see [`AbstentionRule`]).
fn phrase_starts(text: &str, phrase: &str) -> bool {
    let Some(rest) = strip_words(text, phrase) else {
        return false;
    };
    let written = &text[..text.len() - rest.len()];
    let shouted = !written.chars().any(char::is_lowercase);
    let next_capitalised = rest
        .trim_start()
        .chars()
        .next()
        .is_some_and(char::is_uppercase);
    shouted || !next_capitalised
}

/// Keep the longest rank-order prefix of `passages` whose cost fits `budget`.
///
/// `cost(p)` is what passage `p` adds (tokens). Returns `(kept, dropped)` ids; passages
/// are dropped from the lowest rank up, so `kept` is always a prefix.
pub fn fit_passages<F: FnMut(&Context) -> usize>(
    passages: &[Context],
    budget: usize,
    mut cost: F,
) -> (usize, Vec<String>) {
    let mut used = 0usize;
    let mut n = 0;
    for p in passages {
        let c = cost(p);
        if used + c > budget {
            break;
        }
        used += c;
        n += 1;
    }
    let dropped = passages[n..].iter().map(|p| p.id.clone()).collect();
    (n, dropped)
}

/// Run `reader` over `(question, passages)` items with a kdam progress bar that shows the
/// decode speed (tokens/s) and the abstention count as it goes. Stops at the first error,
/// naming the item's 1-based number.
pub fn read_all<R: Reader + ?Sized>(
    reader: &mut R,
    items: &[(String, Vec<Context>)],
) -> Result<Vec<Answer>> {
    let mut bar = crate::progress::bar(items.len(), &format!("read ({})", reader.name()));
    let mut out = Vec::with_capacity(items.len());
    let (mut steps, mut secs, mut abst) = (0usize, 0f64, 0usize);
    for (i, (q, ps)) in items.iter().enumerate() {
        let a = reader.read(q, ps).map_err(|e| Error::AtItem {
            what: "question",
            number: i + 1,
            source: Box::new(e),
        })?;
        // Decode passes per second, the rate `Usage::decode_tokens_per_sec` reports.
        steps += a.usage.decode_steps;
        secs += a.usage.decode_secs;
        abst += a.abstained as usize;
        let tps = if secs > 0.0 { steps as f64 / secs } else { 0.0 };
        bar.set_postfix(format!("{tps:.1} tok/s, {abst} abstained"));
        crate::progress::tick(&mut bar, 1);
        out.push(a);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abstention_rule_default() {
        let r = AbstentionRule::default();
        assert!(r.is_abstention("Not found."));
        assert!(r.is_abstention("  not found"));
        assert!(r.is_abstention("\"Not Found\""));
        assert!(r.is_abstention("I don't know."));
        assert!(r.is_abstention(""));
        assert!(!r.is_abstention("Paris"));
        assert!(!r.is_abstention("The answer is Paris."));
        assert!(r.is_abstention("The answer is: Not found."));
        assert!(r.is_abstention("Answer: not found"));
        assert!(!r.is_abstention("Answer: Paris"));
        assert!(!r.is_abstention("The answer is"));
        let custom = AbstentionRule::with_phrases(["N/A"]);
        assert!(custom.is_abstention("n/a"));
        assert!(!custom.is_abstention("Not found"));
    }

    #[test]
    fn abstentions_behind_markers_and_markdown() {
        let r = AbstentionRule::default();
        for a in [
            "Final answer: Not found.",
            "FINAL ANSWER: not found",
            "** Not found.",
            "_Not found_",
            "The answer is not in the passages.",
        ] {
            assert!(r.is_abstention(a), "{a:?}");
        }
        for a in ["Final answer: Paris", "No", "** Paris"] {
            assert!(!r.is_abstention(a), "{a:?}");
        }
    }

    #[test]
    fn abstention_phrases_match_whole_words_only() {
        let r = AbstentionRule::default();
        // A phrase that is the start of a longer word is not the phrase.
        for answer in [
            "The answer is Notre Dame.",
            "The answer is Nottingham",
            "the answer is notably Paris",
            "Unknownness",
            "Answered: Paris",
        ] {
            assert!(!r.is_abstention(answer), "{answer:?}");
        }
        // A phrase followed by a capitalised word is part of a name (an album, a film).
        assert!(!r.is_abstention("Unknown Pleasures"));
        assert!(!r.is_abstention("No Answer Required"));
        // Real abstentions, with curly apostrophes and quotes as models write them.
        for answer in [
            "I don\u{2019}t know.",
            "\u{201c}Not found\u{201d}",
            "\u{2018}I don\u{2019}t know\u{2019}",
            "The answer is not in the passages.",
            "The answer is not provided.",
            "Not found in the passages",
            "Unknown",
            "Unknown, the passages do not say.",
            "The passages do not mention it.",
            "The context does not say",
            "I cannot answer this question.",
            "I can\u{2019}t answer that",
            "Answer: I don't know",
            "No answer.",
            "Cannot be answered from the passages",
            "NOT FOUND IN THE PASSAGES",
        ] {
            assert!(r.is_abstention(answer), "{answer:?}");
        }
    }

    #[test]
    fn fit_drops_lowest_ranked() {
        let ps: Vec<Context> = (0..4)
            .map(|i| Context::new(format!("p{i}"), "x".repeat(10 * (i + 1))))
            .collect();
        let (n, dropped) = fit_passages(&ps, 35, |p| p.text.len());
        assert_eq!(n, 2);
        assert_eq!(dropped, vec!["p2".to_string(), "p3".to_string()]);
        let (n, dropped) = fit_passages(&ps, 1000, |p| p.text.len());
        assert_eq!((n, dropped.len()), (4, 0));
        // A first passage that does not fit drops everything rather than skipping to a
        // shorter lower-ranked one.
        let (n, _) = fit_passages(&ps[1..], 15, |p| p.text.len());
        assert_eq!(n, 0);
    }

    #[test]
    fn empty_question_is_an_error() {
        let e = check_question("  \n").unwrap_err().to_string();
        assert!(e.contains("question"), "{e}");
        assert_eq!(check_question(" Who? ").unwrap(), "Who?");
    }
}
