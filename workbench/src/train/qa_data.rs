//! Supervision for the extractive reader, with a strict split by article:
//!
//! * [`squad_examples`]: the mirrored SQuAD 2.0 dev half, split by article title into
//!   training articles and held-out ones ([`HELD_OUT_ARTICLES`], never trained on);
//! * [`locate_rag_mini`]: RAG Mini Wikipedia QA pairs located in a passage that holds the
//!   answer string (the best-ranked by BM25 for the question), split by a seeded hash
//!   of the question id into training and test questions;
//! * [`nq_distant`]: NQ-open dev questions paired with the best BM25 passage (of the top
//!   k) holding a gold answer under DPR's match, as DrQA's distant supervision.
//!
//! Every function returns its counts (located, unlocated, why) so that nothing is
//! dropped silently.

use super::qa::SpanExample;
use crate::evaluate::answer_match::AnswerMatch;
use crate::retrieve::analyzer::Analyzer;
use crate::retrieve::bm25::{Bm25, Bm25Params};
use crate::retrieve::Retriever;
use crate::{Document, Error, Passage, QaExample, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// The five SQuAD articles held out for evaluation.
pub const HELD_OUT_ARTICLES: [&str; 5] = [
    "1973_oil_crisis",
    "French_and_Indian_War",
    "Huguenot",
    "Scottish_Parliament",
    "Yuan_dynasty",
];

/// Counts of one supervision source.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceCounts {
    /// Source name.
    pub source: String,
    /// Questions considered.
    pub questions: usize,
    /// Questions turned into training examples.
    pub located: usize,
    /// Questions not used, by reason.
    pub unlocated: BTreeMap<String, usize>,
}

/// The SQuAD examples split by article.
#[derive(Debug, Clone)]
pub struct SquadSplit {
    /// Questions of the training articles (answerable and unanswerable).
    pub train: Vec<SpanExample>,
    /// Questions of the held-out articles (answerable and unanswerable).
    pub held_out: Vec<SpanExample>,
    /// Training article titles.
    pub train_articles: Vec<String>,
}

/// Read a SQuAD 2.0 file into span examples split by article: `held_out` titles go to
/// `held_out`, every other article to `train`. Answer positions are the first gold
/// answer's `answer_start` (a character offset, converted to bytes). The file is first
/// loaded by [`crate::load::squad::load`], which checks every answer against its context.
pub fn squad_examples(path: &Path, held_out: &[&str]) -> Result<SquadSplit> {
    let set = crate::load::squad::load(path)?;
    let gold: HashMap<&str, &QaExample> = set.examples.iter().map(|e| (e.id.as_str(), e)).collect();
    let raw = crate::load::read_to_string(path)?;
    let root: serde_json::Value = serde_json::from_str(&raw)?;
    let mut split = SquadSplit {
        train: Vec::new(),
        held_out: Vec::new(),
        train_articles: Vec::new(),
    };
    let titles: Vec<&str> = set
        .contexts
        .iter()
        .filter_map(|d| d.id.split_once('#').map(|x| x.0))
        .collect();
    for h in held_out {
        if !titles.contains(h) {
            return Err(Error::bad_input(
                path,
                format!("held-out article `{h}` is not in the file"),
            ));
        }
    }
    let empty = Vec::new();
    for article in root["data"].as_array().unwrap_or(&empty) {
        let title = article["title"].as_str().unwrap_or_default();
        let is_held = held_out.contains(&title);
        if !is_held {
            split.train_articles.push(title.to_string());
        }
        for para in article["paragraphs"].as_array().unwrap_or(&empty) {
            let context = para["context"].as_str().unwrap_or_default();
            for qa in para["qas"].as_array().unwrap_or(&empty) {
                let id = qa["id"].as_str().unwrap_or_default();
                let Some(g) = gold.get(id) else {
                    return Err(Error::bad_input(
                        path,
                        format!("question `{id}` not loaded"),
                    ));
                };
                let answer = match qa["answers"].as_array().and_then(|a| a.first()) {
                    Some(a) if !g.answers.is_empty() => {
                        let start_char = a["answer_start"].as_u64().unwrap_or(0) as usize;
                        let text = a["text"].as_str().unwrap_or_default();
                        let b0 = context
                            .char_indices()
                            .nth(start_char)
                            .map(|x| x.0)
                            .unwrap_or(context.len());
                        Some((b0, b0 + text.len()))
                    }
                    _ => None,
                };
                let ex = SpanExample {
                    id: id.to_string(),
                    source: "squad".into(),
                    question: g.question.clone(),
                    context: context.to_string(),
                    answer,
                    golds: g.answers.clone(),
                };
                if is_held {
                    split.held_out.push(ex);
                } else {
                    split.train.push(ex);
                }
            }
        }
    }
    Ok(split)
}

/// Where `answer` occurs in `text` (case-insensitive, on word boundaries where the answer
/// starts / ends with a word character): the first occurrence as a byte range.
pub fn find_answer(text: &str, answer: &str) -> Option<(usize, usize)> {
    let a = answer.trim();
    if a.is_empty() {
        return None;
    }
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let pre = if a.starts_with(word) { r"\b" } else { "" };
    let post = if a.ends_with(word) { r"\b" } else { "" };
    let re = regex::RegexBuilder::new(&format!("{pre}{}{post}", regex::escape(a)))
        .case_insensitive(true)
        .build()
        .ok()?;
    re.find(text).map(|m| (m.start(), m.end()))
}

/// True when `id` goes to the test side of a seeded hash split with `test_percent`.
pub fn hash_test_side(id: &str, seed: u64, test_percent: u8) -> bool {
    let mut h = Sha256::new();
    h.update(seed.to_le_bytes());
    h.update(id.as_bytes());
    let d = h.finalize();
    (u16::from_le_bytes([d[0], d[1]]) % 100) < test_percent as u16
}

/// RAG Mini Wikipedia questions split into training and test ones.
#[derive(Debug, Clone)]
pub struct RagMiniSplit {
    /// Training examples: each located in a passage.
    pub train: Vec<SpanExample>,
    /// Test questions (never trained on), as loaded.
    pub test: Vec<QaExample>,
    /// Counts of the training side.
    pub counts: SourceCounts,
}

/// Split RAG Mini Wikipedia's questions by a seeded hash of the id (`test_percent` to
/// test) and locate each training question in the best-ranked of BM25's top `k`
/// passages that holds the answer string ([`find_answer`]). Yes/no answers are not
/// extractable and are counted apart.
pub fn locate_rag_mini(
    passages: &[Document],
    questions: &[QaExample],
    seed: u64,
    test_percent: u8,
    k: usize,
) -> Result<RagMiniSplit> {
    let ps: Vec<Passage> = passages.iter().map(Passage::whole).collect();
    let by_id: HashMap<&str, &Document> = passages.iter().map(|d| (d.id.as_str(), d)).collect();
    let bm25 = Bm25::build(&ps, &Analyzer::default(), Bm25Params::default())?;
    let mut out = RagMiniSplit {
        train: Vec::new(),
        test: Vec::new(),
        counts: SourceCounts {
            source: "rag-mini-wikipedia".into(),
            ..Default::default()
        },
    };
    for q in questions {
        if hash_test_side(&q.id, seed, test_percent) {
            out.test.push(q.clone());
            continue;
        }
        out.counts.questions += 1;
        let answer = q.answers.first().map(|a| a.trim()).unwrap_or_default();
        let lower = answer.to_lowercase();
        let reason = if answer.is_empty() {
            Some("no answer")
        } else if matches!(lower.trim_end_matches('.'), "yes" | "no") {
            Some("yes/no answer (not extractable)")
        } else {
            let hits = bm25.retrieve(&q.question, k)?;
            let found = hits.iter().find_map(|h| {
                let d = by_id.get(h.id.as_str())?;
                find_answer(&d.text, answer).map(|r| (d, r))
            });
            match found {
                Some((d, r)) => {
                    out.train.push(SpanExample {
                        id: format!("rag-mini:{}", q.id),
                        source: "rag-mini".into(),
                        question: q.question.clone(),
                        context: d.text.clone(),
                        answer: Some(r),
                        golds: q.answers.clone(),
                    });
                    None
                }
                None => Some("answer string in none of the BM25 top k"),
            }
        };
        match reason {
            None => out.counts.located += 1,
            Some(r) => *out.counts.unlocated.entry(r.to_string()).or_default() += 1,
        }
    }
    Ok(out)
}

/// NQ-open distant supervision: for each question, the best-ranked of BM25's top `k`
/// `passages` holding a gold answer under DPR's match, with the answer located by
/// [`find_answer`] in the passage text (DPR's match tokenises and may match where the
/// string search does not: counted as unlocated). Returns the examples (ids = NQ question
/// ids, prefixed `nq:`) and the counts.
pub fn nq_distant(
    passages: &[Passage],
    questions: &[QaExample],
    k: usize,
) -> Result<(Vec<SpanExample>, SourceCounts)> {
    let bm25 = Bm25::build(passages, &Analyzer::default(), Bm25Params::default())?;
    let by_id: HashMap<&str, &Passage> = passages.iter().map(|p| (p.id.as_str(), p)).collect();
    let rule = AnswerMatch::Dpr;
    let mut counts = SourceCounts {
        source: "nq-open-dev distant".into(),
        ..Default::default()
    };
    let mut out = Vec::new();
    for q in questions {
        counts.questions += 1;
        let golds = rule.golds(&q.answers)?;
        let hits = bm25.retrieve(&q.question, k)?;
        let mut matched = false;
        let mut located = None;
        for h in &hits {
            let Some(p) = by_id.get(h.id.as_str()) else {
                continue;
            };
            if !golds.found_in(&rule.prepare(&p.text))? {
                continue;
            }
            matched = true;
            if let Some((a, r)) = q
                .answers
                .iter()
                .find_map(|a| find_answer(&p.text, a).map(|r| (a, r)))
            {
                let _ = a;
                located = Some((p, r));
                break;
            }
        }
        match (matched, located) {
            (_, Some((p, r))) => {
                counts.located += 1;
                out.push(SpanExample {
                    id: format!("nq:{}", q.id),
                    source: "nq".into(),
                    question: q.question.clone(),
                    context: p.text.clone(),
                    answer: Some(r),
                    golds: q.answers.clone(),
                });
            }
            (true, None) => {
                *counts
                    .unlocated
                    .entry("DPR match but no string occurrence".into())
                    .or_default() += 1
            }
            (false, None) => {
                *counts
                    .unlocated
                    .entry("no gold answer in the BM25 top k".into())
                    .or_default() += 1
            }
        }
    }
    Ok((out, counts))
}

/// sha256 of a file, hex.
pub fn file_sha256(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}
