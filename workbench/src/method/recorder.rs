//! What a method works with ([`Tools`]) and how its calls become the steps of a trace
//! ([`Recorder`], [`Step`]), with the text helpers the methods share.

use super::lm::{Completion, Lm, LmRequest};
use crate::read::{Answer, Context, Reader, Usage};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::time::Instant;

/// Retrieval for one query: the passages a method is given, best first.
pub trait Search {
    /// The passages for `query`.
    fn search(&mut self, query: &str) -> Result<Vec<Context>>;
}

impl<F: FnMut(&str) -> Result<Vec<Context>>> Search for F {
    fn search(&mut self, query: &str) -> Result<Vec<Context>> {
        self(query)
    }
}

/// What a method works with.
pub struct Tools<'a> {
    /// The pipeline's retrieval.
    pub search: &'a mut dyn Search,
    /// The pipeline's reader (its prompt, passages and parsing).
    pub reader: &'a mut dyn Reader,
    /// The reader's model prompted directly (`None` for a reader that does not generate,
    /// e.g. an extractive one).
    pub lm: Option<&'a mut dyn Lm>,
    /// Whether a reader's answer is an abstention (the pipeline's rule on the parsed text).
    pub abstains: &'a dyn Fn(&Answer) -> bool,
}

/// What kind of call a step was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepKind {
    /// A retrieval.
    Retrieve,
    /// The model prompted directly.
    Generate,
    /// The reader given passages.
    Read,
}

/// One call of a method's trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Retrieve, generate or read.
    pub kind: StepKind,
    /// What the step was for (`closed-book`, `query`, `reason`, `follow-up`, `answer`, …).
    pub purpose: String,
    /// The query (retrieve), or the question the reader was asked (read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// The passages returned (retrieve) or given (read), best first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passage_ids: Vec<String>,
    /// The generated text or the reader's answer.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// The generation's confidence ([`Completion::confidence`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// The lowest token probability of the sentence a method judged the generation by
    /// (FLARE's look-ahead: below its threshold, the sentence is retrieved for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lowest_probability: Option<f64>,
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Generated tokens.
    pub generated_tokens: usize,
    /// Seconds.
    pub secs: f64,
}

/// A method's answer to one question.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodAnswer {
    /// The final answer: its text and abstention, `passage_ids` every passage the model
    /// was shown or the reader kept at any step (first-seen order), usage summed over every
    /// model and reader call.
    pub answer: Answer,
    /// Every passage the model was shown or the reader kept at any step, in the order
    /// first seen (a retrieved passage cut by `topk` or `max_passages`, or dropped by the
    /// reader to fit its window, is not among them).
    pub passages: Vec<Context>,
    /// Every call, in order.
    pub steps: Vec<Step>,
}

impl MethodAnswer {
    /// Retrieval calls made.
    pub fn retrieval_calls(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| s.kind == StepKind::Retrieve)
            .count()
    }
}

/// Records a method's calls as [`Step`]s while making them.
pub struct Recorder<'a> {
    tools: Tools<'a>,
    steps: Vec<Step>,
    /// Passages given to the model or kept by the reader at any step, first-seen order.
    seen: Vec<Context>,
    seen_ids: HashSet<String>,
    usage: Usage,
}

impl<'a> Recorder<'a> {
    pub(crate) fn new(tools: Tools<'a>) -> Self {
        Recorder {
            tools,
            steps: Vec::new(),
            seen: Vec::new(),
            seen_ids: HashSet::new(),
            usage: Usage::default(),
        }
    }

    /// Retrieve for `query`.
    pub fn search(&mut self, query: &str, purpose: &str) -> Result<Vec<Context>> {
        let t0 = Instant::now();
        let found = self.tools.search.search(query)?;
        self.steps.push(Step {
            kind: StepKind::Retrieve,
            purpose: purpose.into(),
            query: Some(query.into()),
            passage_ids: found.iter().map(|c| c.id.clone()).collect(),
            text: String::new(),
            confidence: None,
            lowest_probability: None,
            prompt_tokens: 0,
            generated_tokens: 0,
            secs: t0.elapsed().as_secs_f64(),
        });
        Ok(found)
    }

    /// Mark `passages` as given to the model (they count for the answer's
    /// [`MethodAnswer::passages`]); a read marks the passages the reader kept itself.
    pub fn show(&mut self, passages: &[Context]) {
        for c in passages {
            if self.seen_ids.insert(c.id.clone()) {
                self.seen.push(c.clone());
            }
        }
    }

    /// Ask the reader `question` over `passages`.
    pub fn read(&mut self, question: &str, passages: &[Context], purpose: &str) -> Result<Answer> {
        let t0 = Instant::now();
        let a = self.tools.reader.read(question, passages)?;
        self.usage += &a.usage;
        let kept: Vec<Context> = passages
            .iter()
            .filter(|c| a.passage_ids.contains(&c.id))
            .cloned()
            .collect();
        self.show(&kept);
        self.steps.push(Step {
            kind: StepKind::Read,
            purpose: purpose.into(),
            query: Some(question.into()),
            passage_ids: a.passage_ids.clone(),
            text: a.text.clone(),
            confidence: None,
            lowest_probability: None,
            prompt_tokens: a.usage.prompt_tokens,
            generated_tokens: a.usage.generated_tokens,
            secs: t0.elapsed().as_secs_f64(),
        });
        Ok(a)
    }

    /// Whether the reader's answer `a` is an abstention.
    pub fn abstains(&self, a: &Answer) -> bool {
        (self.tools.abstains)(a)
    }

    /// Whether `text`, as an answer, is an abstention.
    pub fn abstains_text(&self, text: &str) -> bool {
        let a = Answer {
            text: text.to_string(),
            ..Answer::default()
        };
        (self.tools.abstains)(&a)
    }

    /// Prompt the model; `method` names the method for the error when there is none.
    pub fn generate(
        &mut self,
        method: &str,
        request: &LmRequest,
        purpose: &str,
    ) -> Result<Completion> {
        let Some(lm) = self.tools.lm.as_mut() else {
            return Err(Error::param(
                "method.kind",
                format!(
                    "`{method}` prompts the reader's model directly: it needs a reader that \
                     generates (kind = \"generative\" or \"openai\")"
                ),
            ));
        };
        let t0 = Instant::now();
        let c = lm.complete(request)?;
        self.usage += &c.usage;
        self.steps.push(Step {
            kind: StepKind::Generate,
            purpose: purpose.into(),
            query: None,
            passage_ids: Vec::new(),
            text: c.text.clone(),
            confidence: c.confidence(),
            lowest_probability: None,
            prompt_tokens: c.usage.prompt_tokens,
            generated_tokens: c.usage.generated_tokens,
            secs: t0.elapsed().as_secs_f64(),
        });
        Ok(c)
    }

    /// Record on the last step the lowest token probability of the sentence it was
    /// judged by ([`Step::lowest_probability`]).
    pub(crate) fn mark_lowest_probability(&mut self, p: f64) {
        if let Some(s) = self.steps.last_mut() {
            s.lowest_probability = Some(p);
        }
    }

    /// Passages given to the model or kept by the reader so far, first-seen order.
    pub fn seen(&self) -> &[Context] {
        &self.seen
    }

    pub(crate) fn finish(self, text: String, abstained: bool) -> MethodAnswer {
        MethodAnswer {
            answer: Answer {
                text: text.trim().to_string(),
                abstained,
                passage_ids: self.seen.iter().map(|c| c.id.clone()).collect(),
                dropped: Vec::new(),
                evidence: None,
                score: None,
                usage: self.usage,
            },
            passages: self.seen,
            steps: self.steps,
        }
    }
}

/// Passages as the ircot and flare prompts show them: `Doc {i} (Title: {title}) {text}`,
/// one per line (`Doc {i} {text}` without a title).
pub fn format_docs(passages: &[Context]) -> String {
    passages
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if c.title.is_empty() {
                format!("Doc {} {}", i + 1, c.text)
            } else {
                format!("Doc {} (Title: {}) {}", i + 1, c.title, c.text)
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Words whose final `.` does not end a sentence.
const ABBREVIATIONS: [&str; 12] = [
    "mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "gen", "mt", "no", "vs",
];

/// The first sentence of `text` (trimmed): up to and including the first `.`, `?` or `!`
/// followed by whitespace or the end, or up to a line break; the whole text without one. A
/// `.` after an initial (`John F. Kennedy`), a dotted abbreviation (`U.S.`) or a title
/// (`Dr.`, `St.`, …) does not end a sentence.
pub fn first_sentence(text: &str) -> &str {
    let t = text.trim_start();
    let mut end = t.len();
    let mut it = t.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        if c == '\n' {
            end = i;
            break;
        }
        if matches!(c, '.' | '?' | '!') && it.peek().is_none_or(|&(_, n)| n.is_whitespace()) {
            let word = t[..i].rsplit(char::is_whitespace).next().unwrap_or("");
            let initial = word.chars().count() == 1 && word.chars().all(char::is_uppercase);
            let abbreviation = c == '.'
                && (initial
                    || word.contains('.')
                    || ABBREVIATIONS.contains(&word.to_lowercase().as_str()));
            if abbreviation && it.peek().is_some() {
                continue;
            }
            end = i + c.len_utf8();
            break;
        }
    }
    t[..end].trim()
}

/// The text after the last case-insensitive occurrence of `marker` in `text`, up to the end
/// of its line, trimmed of spaces and a final `.`; `None` when `marker` is absent or nothing
/// follows it.
pub fn after_marker(text: &str, marker: &str) -> Option<String> {
    // Compared character by character (lower-casing a whole text can change its byte
    // offsets outside ASCII).
    let m: Vec<char> = marker.chars().flat_map(char::to_lowercase).collect();
    let matches_at = |i: usize| -> Option<usize> {
        let mut chars = text[i..].char_indices();
        for want in &m {
            let (_, c) = chars.next()?;
            let mut low = c.to_lowercase();
            if low.next() != Some(*want) || low.next().is_some() {
                return None;
            }
        }
        Some(chars.next().map_or(text.len(), |(j, _)| i + j))
    };
    let after = text.char_indices().rev().find_map(|(i, _)| matches_at(i))?;
    let rest = &text[after..];
    let line = rest.lines().next().unwrap_or("").trim();
    let line = line.trim_end_matches('.').trim();
    (!line.is_empty()).then(|| line.to_string())
}

/// `value` ≥ 1, else an error naming `field`.
pub(crate) fn at_least_one(field: &'static str, value: usize) -> Result<()> {
    if value == 0 {
        return Err(Error::param(field, "must be at least 1"));
    }
    Ok(())
}

/// `value` in [0, 1], else an error naming `field`.
pub(crate) fn probability(field: &'static str, value: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&value) {
        return Err(Error::param(
            field,
            format!("{value} is not a probability in [0, 1]"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_and_markers() {
        assert_eq!(first_sentence(" It is Paris. Then more"), "It is Paris.");
        assert_eq!(
            first_sentence("3.5 million people live there"),
            "3.5 million people live there"
        );
        assert_eq!(first_sentence("line one\nline two."), "line one");
        assert_eq!(first_sentence("Why? Because."), "Why?");
        assert_eq!(
            after_marker("So the answer is: Vienna.\nmore", "answer is:").as_deref(),
            Some("Vienna")
        );
        assert_eq!(
            after_marker("So the ANSWER IS: x", "answer is:").as_deref(),
            Some("x")
        );
        assert_eq!(after_marker("no marker", "answer is:"), None);
        assert_eq!(after_marker("answer is: .", "answer is:"), None);
        // Non-ASCII text before the marker, whose lower case is longer or shorter in bytes.
        assert_eq!(
            after_marker("Ⱥẞ Answer is: Straße.", "answer is:").as_deref(),
            Some("Straße")
        );
        assert_eq!(
            first_sentence("So the answer is: John F. Kennedy. Next"),
            "So the answer is: John F. Kennedy."
        );
        assert_eq!(
            first_sentence("It is in the U.S. state of Ohio. Next"),
            "It is in the U.S. state of Ohio."
        );
        assert_eq!(
            first_sentence("Dr. Who lives in St. Louis. Next"),
            "Dr. Who lives in St. Louis."
        );
        assert_eq!(
            first_sentence("He was born in 1917. He died."),
            "He was born in 1917."
        );
        assert_eq!(first_sentence("Vitamin C."), "Vitamin C.");
    }
}
