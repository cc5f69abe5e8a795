//! Query transformations: turn a question into the queries that are sent to the
//! retrievers.
//!
//! - **rewrite** (report 004): one query, an LLM's expanded rewrite of the question,
//!   replaces it for retrieval and re-ranking; the reader still reads the original
//!   question;
//! - **paraphrase-and-fuse** (RAG-Fusion, report 002): `n` paraphrases (optionally
//!   with the original question), each retrieved separately, the runs fused with RRF
//!   (`k = 60`) by [`fuse_variants`].
//!
//! [`QueryTransform`] is the trait. The LLM implementation is
//! `pipeline::llm_transform::LlmTransform` (feature `llm`): the reader's own GGUF model
//! (one loaded copy, shared), prompted with `data/prompts/rewrite_004.txt`,
//! `paraphrase_list.txt` or `paraphrase_002.txt`. [`FnTransform`] wraps a closure (tests,
//! rule-based transforms).
//!
//! ## Reading an LLM's output
//!
//! Models do not answer in a fixed format, so the output is parsed leniently and every
//! repair is recorded ([`Transformed::note`], the trace's `transform_note`):
//!
//! - [`parse_rewrite`] (one query): the first line that is not a lead-in ("Here is the
//!   rewritten question:"), with a label (`Expanded question:`, `Rewritten query:`,
//!   `Query:` …), list marker, Markdown emphasis and enclosing quotes removed. Report
//!   004's own rule follows: a rewrite shorter than half the question is replaced by the
//!   question.
//! - [`parse_list`] (paraphrases): one query per line or per numbered item (`1.`, `2)`,
//!   `(3)`, `-`, `*`, `•`, `Paraphrase 4:`; several numbered items on one line are split),
//!   lead-ins ending with `:` skipped, labels, emphasis and quotes removed, duplicates
//!   (case- and space-insensitive, [`query_key`]) dropped, at most `n` kept. The
//!   one-call-per-variant mode and `include_original` drop duplicates by the same key
//!   ([`push_unique`], [`with_original`]). **Fewer than `n` is not
//!   padded**: the trace records how many were asked ([`Transformed::requested`]) and how
//!   many came back; the summary counts the questions that came back short.

use crate::read::Usage;
use crate::retrieve::fusion::{Fusion, FusionMethod};
use crate::{Error, Hit, Result};

/// The queries a transformation made for one question, with its cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transformed {
    /// The queries to retrieve with, in order (at least one).
    pub queries: Vec<String>,
    /// Token counts and times of the generation (zero for rule-based transforms).
    pub usage: Usage,
    /// How many queries were asked for (1 for a rewrite, `n` for paraphrases); 0 when the
    /// transform does not say.
    pub requested: usize,
    /// The model's raw output(s), one per generation call.
    pub raw: Vec<String>,
    /// What had to be repaired in the output (fewer variants than asked, a fallback to
    /// the question), `None` when nothing.
    pub note: Option<String>,
}

/// A query transformation. See the [module docs](self).
pub trait QueryTransform {
    /// A short name for tables and traces (`"rewrite-qwen2.5-1.5b"`).
    fn name(&self) -> String;

    /// The queries for `question`. Must return at least one non-empty query.
    fn transform(&mut self, question: &str) -> Result<Transformed>;
}

/// A transformation from a closure `question → queries`.
pub struct FnTransform<F> {
    label: String,
    f: F,
}

impl<F: FnMut(&str) -> Vec<String>> FnTransform<F> {
    /// Wrap `f` under the name `fn-{label}`.
    pub fn new(label: impl Into<String>, f: F) -> Self {
        FnTransform {
            label: label.into(),
            f,
        }
    }
}

impl<F: FnMut(&str) -> Vec<String>> QueryTransform for FnTransform<F> {
    fn name(&self) -> String {
        format!("fn-{}", self.label)
    }

    fn transform(&mut self, question: &str) -> Result<Transformed> {
        Ok(Transformed {
            queries: (self.f)(question),
            ..Default::default()
        })
    }
}

/// Check a transformation's output: at least one query, none empty.
pub fn check_queries(name: &str, question: &str, queries: &[String]) -> Result<()> {
    if queries.is_empty() {
        return Err(Error::param(
            "query_transform",
            format!("`{name}` returned no query for {question:?}"),
        ));
    }
    if queries.iter().any(|q| q.trim().is_empty()) {
        return Err(Error::param(
            "query_transform",
            format!("`{name}` returned an empty query for {question:?}"),
        ));
    }
    Ok(())
}

/// A line's list marker (`1.`, `2)`, `(3)`, `-`, `*`, `•`), label (`Paraphrase 2:`,
/// `Expanded question:`, `Query:` …), Markdown emphasis and enclosing quotes removed.
fn clean_item(line: &str) -> String {
    static MARKER: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    static LABEL: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let marker = MARKER.get_or_init(|| {
        regex::Regex::new(r"^\s*(?:\(?\d{1,2}[.):]|[-*•‣–]|#+)\s+").expect("valid regex")
    });
    let label = LABEL.get_or_init(|| {
        regex::Regex::new(
            r"(?i)^\s*(?:(?:the\s+)?(?:expanded|rewritten|rephrased|revised|improved|new|alternative|alternate|paraphrased|original)\s+)?(?:question|query|paraphrase|version|rewrite|variant|q)\s*\d{0,2}\s*[:.)-]\s+",
        )
        .expect("valid regex")
    });
    let mut s = line.trim().to_string();
    for _ in 0..3 {
        let before = s.clone();
        s = marker.replace(&s, "").into_owned();
        s = label.replace(&s, "").into_owned();
        s = s
            .trim_matches(|c: char| c == '*' || c == '_' || c.is_whitespace())
            .to_string();
        for (open, close) in [('"', '"'), ('“', '”'), ('\'', '\''), ('`', '`')] {
            if s.len() >= 2 && s.starts_with(open) && s.ends_with(close) {
                s = s[open.len_utf8()..s.len() - close.len_utf8()]
                    .trim()
                    .to_string();
            }
        }
        if s == before {
            break;
        }
    }
    s
}

/// A lead-in such as "Here are 5 paraphrases:" (no list marker, ends with `:`).
fn is_lead_in(raw_line: &str, cleaned: &str) -> bool {
    let t = raw_line.trim();
    t.ends_with(':') && cleaned.ends_with(':')
}

/// Split a line holding several numbered items ("1. A? 2. B?") before each number that
/// follows the end of a sentence.
fn split_inline_items(line: &str) -> Vec<String> {
    static INLINE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = INLINE
        .get_or_init(|| regex::Regex::new(r"([?.!])\s+(\d{1,2}[.)]\s)").expect("valid regex"));
    re.replace_all(line, "$1\n$2")
        .lines()
        .map(str::to_string)
        .collect()
}

/// The key under which two queries are the same query: whitespace runs collapsed to one
/// space, no leading or trailing whitespace, Unicode lowercase. The one rule for every
/// paraphrase de-duplication ([`parse_list`], the one-call-per-variant mode of the LLM
/// transform, [`with_original`]).
pub fn query_key(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Append `query` to `queries` unless one with the same [`query_key`] is there already;
/// whether it was added.
pub fn push_unique(queries: &mut Vec<String>, query: String) -> bool {
    let key = query_key(&query);
    if queries.iter().any(|q| query_key(q) == key) {
        return false;
    }
    queries.push(query);
    true
}

/// The queries to retrieve with when the original question is included: the question
/// first, then the paraphrases in order without those that are the question itself
/// under [`query_key`] (so the question is never retrieved, and fused, twice).
pub fn with_original(question: &str, paraphrases: Vec<String>) -> Vec<String> {
    let mut out = vec![question.to_string()];
    for p in paraphrases {
        push_unique(&mut out, p);
    }
    out
}

/// Up to `n` queries from an LLM's list output (see the [module docs](self#reading-an-llms-output)):
/// in order, cleaned, without duplicates ([`push_unique`]). May return fewer than `n`, or
/// none.
pub fn parse_list(text: &str, n: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for raw in text.lines().flat_map(split_inline_items) {
        if out.len() == n {
            break;
        }
        let item = clean_item(&raw);
        if item.is_empty() || is_lead_in(&raw, &item) {
            continue;
        }
        push_unique(&mut out, item);
    }
    out
}

/// One query from an LLM's rewrite of `question` (see the
/// [module docs](self#reading-an-llms-output)), and a note when the question itself had
/// to be used: the output had no usable line, or (report 004's rule) the rewrite is
/// shorter than half the question.
pub fn parse_rewrite(text: &str, question: &str) -> (String, Option<String>) {
    let first = text.lines().find_map(|raw| {
        let item = clean_item(raw);
        (!item.is_empty() && !is_lead_in(raw, &item)).then_some(item)
    });
    match first {
        None => (
            question.to_string(),
            Some("no rewrite in the output: the question is used".into()),
        ),
        Some(r) if r.chars().count() * 2 < question.chars().count() => (
            question.to_string(),
            Some(format!(
                "rewrite {r:?} is shorter than half the question (report 004's rule): the question is used"
            )),
        ),
        Some(r) => (r, None),
    }
}

/// RAG-Fusion: fuse the runs of the query variants with unweighted RRF,
/// `score(d) = Σ_{v : d ∈ L_v} 1 / (rank_constant + rank_v(d))`, every passage of every
/// run kept, best first (ties by ascending id). One run is returned as it is.
pub fn fuse_variants(runs: &[Vec<Hit>], rank_constant: f32) -> Result<Vec<Hit>> {
    match runs {
        [] => Err(Error::Empty("no query variants to fuse".into())),
        [one] => Ok(one.clone()),
        _ => Fusion::new(FusionMethod::Rrf { rank_constant }, None)?.fuse(runs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_over_variants_by_hand() {
        // Variant 1: a, b, c. Variant 2: b, d. With k = 60:
        // a = 1/61, b = 1/62 + 1/61, c = 1/63, d = 1/62.
        let v1 = vec![Hit::new("a", 9.0), Hit::new("b", 8.0), Hit::new("c", 7.0)];
        let v2 = vec![Hit::new("b", 0.3), Hit::new("d", 0.2)];
        let fused = fuse_variants(&[v1.clone(), v2], 60.0).unwrap();
        let ids: Vec<&str> = fused.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, ["b", "a", "d", "c"]);
        assert!((fused[0].score as f64 - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-6);
        assert!((fused[3].score as f64 - 1.0 / 63.0).abs() < 1e-6);
        assert_eq!(fuse_variants(std::slice::from_ref(&v1), 60.0).unwrap(), v1);
        assert!(fuse_variants(&[], 60.0).is_err());
    }

    #[test]
    fn list_parsing_numbered_bulleted_inline_and_short() {
        let text = "Here are 5 paraphrases of the question:\n\n1. Who is the author of Hamlet?\n\
                    2) **Which writer created Hamlet?**\n(3) \"Hamlet was written by whom?\"\n\
                    - Paraphrase 4: who wrote hamlet?\n* WHO WROTE  HAMLET?\n";
        assert_eq!(
            parse_list(text, 5),
            [
                "Who is the author of Hamlet?",
                "Which writer created Hamlet?",
                "Hamlet was written by whom?",
                "who wrote hamlet?"
            ],
            "the fifth item duplicates the fourth: 4 returned, not padded"
        );
        assert_eq!(
            parse_list("1. A one? 2. B two? 3. C three?", 5),
            ["A one?", "B two?", "C three?"]
        );
        assert_eq!(parse_list("a\nb\nc\nd", 2), ["a", "b"]);
        assert!(parse_list("\n  \n", 5).is_empty());
        // Numbers inside a sentence are not list markers.
        assert_eq!(
            parse_list("What happened in 1969. Apollo?", 5),
            ["What happened in 1969. Apollo?"]
        );
    }

    #[test]
    fn one_dedup_rule_for_list_and_one_call_modes_and_the_original() {
        let outputs = [
            "Who wrote Hamlet?",
            "who  wrote hamlet?",
            "WHO WROTE HAMLET?",
            "Qui a écrit Hamlet ?",
            "QUI A ÉCRIT HAMLET ?",
            "Which writer created Hamlet?",
        ];
        let want = [
            "Who wrote Hamlet?",
            "Qui a écrit Hamlet ?",
            "Which writer created Hamlet?",
        ];
        // List mode: one output, one item per line.
        assert_eq!(parse_list(&outputs.join("\n"), 6), want);
        // One call per variant: the first usable line of each output, then de-duplicated
        // as the LLM transform does.
        let mut one_call: Vec<String> = Vec::new();
        for text in outputs {
            if let Some(q) = parse_list(text, 1).into_iter().next() {
                push_unique(&mut one_call, q);
            }
        }
        assert_eq!(one_call, want);
        // include_original: the question is not retrieved twice.
        let q = "Who wrote  Hamlet?";
        assert_eq!(
            with_original(q, parse_list(&outputs.join("\n"), 6)),
            [q, "Qui a écrit Hamlet ?", "Which writer created Hamlet?"]
        );
        assert_eq!(with_original("a", vec!["b".into()]), ["a", "b"]);
    }

    #[test]
    fn rewrite_parsing_labels_lead_ins_and_report_004_fallback() {
        let q = "Who wrote Hamlet?";
        assert_eq!(
            parse_rewrite(
                "Expanded question: Who was the author of the tragedy Hamlet?\nIt was...",
                q
            ),
            (
                "Who was the author of the tragedy Hamlet?".to_string(),
                None
            )
        );
        assert_eq!(
            parse_rewrite(
                "Sure! Here is the rewritten question:\n\n\"Which playwright wrote Hamlet?\"",
                q
            )
            .0,
            "Which playwright wrote Hamlet?"
        );
        let (r, note) = parse_rewrite("Hamlet", q);
        assert_eq!(r, q);
        assert!(note.unwrap().contains("shorter than half"));
        let (r, note) = parse_rewrite("  \n", q);
        assert_eq!(r, q);
        assert!(note.unwrap().contains("no rewrite"));
    }

    #[test]
    fn fn_transform_and_checks() {
        let mut t = FnTransform::new("twice", |q: &str| vec![q.to_string(), q.to_uppercase()]);
        assert_eq!(t.name(), "fn-twice");
        assert_eq!(t.transform("who").unwrap().queries, ["who", "WHO"]);
        assert!(check_queries("x", "q", &[]).is_err());
        assert!(check_queries("x", "q", &[" ".into()]).is_err());
        assert!(check_queries("x", "q", &["a".into()]).is_ok());
    }
}
