//! Answer metrics: SQuAD exact match and token F1, token recall, DPR-style answer recall.
//!
//! [`normalize_answer`], [`exact_match`] and [`f1`] are a port of the official
//! SQuAD v2.0 evaluation script (`evaluate-v2.0.py`: `normalize_answer`,
//! `get_tokens`, `compute_exact`, `compute_f1`, and the gold-answer handling of
//! `get_raw_scores`):
//!
//! - gold answers that normalise to the empty string are dropped; if none is
//!   left the question is unanswerable and the gold list becomes `[""]`;
//! - EM and F1 are the maximum over the gold answers.
//!
//! So for an **unanswerable** question (empty `golds`, or golds that all
//! normalise to nothing) EM = F1 = 1.0 if the prediction normalises to the empty
//! string (e.g. `""`, `"the"`, `"."`), and 0.0 otherwise.
//!
//! [`answer_recall_at_k`] measures retrieval the way DPR (Karpukhin et al. 2020)
//! reports "top-k retrieval accuracy": a question counts as answered at k if one
//! of its top-k passages contains a gold answer, under a rule chosen with
//! [`AnswerMatch`] (DPR's own string match, its regex match, or the SQuAD-normalised
//! match of [`answer_in_text`]).

use crate::evaluate::answer_match::{AnswerMatch, MatchText};
use crate::evaluate::ranking::MetricResult;
use crate::retrieve::check_k;
pub use crate::text::answer_match::{answer_tokens, is_python_space, normalize_answer};
use crate::{Error, Result, Run};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};

/// The gold list the SQuAD v2.0 script scores against: golds that normalise to
/// something, or `[""]` when none does (unanswerable).
fn effective_golds<S: AsRef<str>>(golds: &[S]) -> Vec<String> {
    let kept: Vec<String> = golds
        .iter()
        .map(|g| g.as_ref())
        .filter(|g| !normalize_answer(g).is_empty())
        .map(str::to_string)
        .collect();
    if kept.is_empty() {
        vec![String::new()]
    } else {
        kept
    }
}

/// Whether a gold answer is a yes / no answer: its first word is "yes" or "no" (any case),
/// followed by nothing, by punctuation, or by a lowercase word (`Yes.`, `no`, `Yes, in
/// 1930.`, `Yes he did`), but not by a capitalised one, which makes it a name (`No Doubt`,
/// `No Country for Old Men`). Such an answer is not a span of a passage, so whether a
/// passage "contains" it says nothing about retrieval (one passage in 3,200 of RAG Mini
/// Wikipedia holds the word "yes").
pub fn is_yes_no(gold: &str) -> bool {
    let g = gold.trim_start_matches(|c: char| !c.is_alphanumeric());
    let word_end = g.find(|c: char| !c.is_alphanumeric()).unwrap_or(g.len());
    if !matches!(g[..word_end].to_lowercase().as_str(), "yes" | "no") {
        return false;
    }
    let rest = &g[word_end..];
    match rest.chars().next() {
        None => true,
        // `No-one`, `No'ah`: one word.
        Some('-' | '\'') => false,
        Some(c) if c.is_whitespace() => rest
            .trim_start()
            .chars()
            .next()
            .is_none_or(|n| !n.is_uppercase()),
        Some(_) => true,
    }
}

/// The gold answers that can be looked for in a passage: those that are not yes / no
/// answers ([`is_yes_no`]). Empty when every gold is one: the question's misses are then
/// attributable to neither retrieval nor reading.
pub fn span_golds<S: AsRef<str>>(golds: &[S]) -> Vec<&str> {
    golds
        .iter()
        .map(|g| g.as_ref())
        .filter(|g| !is_yes_no(g))
        .collect()
}

/// Exact match: 1.0 if the normalised prediction equals some normalised gold
/// answer, else 0.0 (SQuAD v2.0 `compute_exact`, maximised over golds). Empty
/// `golds` means unanswerable: see the module docs.
pub fn exact_match<S: AsRef<str>>(pred: &str, golds: &[S]) -> f64 {
    let p = normalize_answer(pred);
    let hit = effective_golds(golds)
        .iter()
        .any(|g| normalize_answer(g) == p);
    if hit {
        1.0
    } else {
        0.0
    }
}

/// Token-level F1 between the prediction and the best gold answer (SQuAD v2.0
/// `compute_f1`): with `common` the multiset intersection of the normalised
/// tokens, `P = |common| / |pred|`, `R = |common| / |gold|`, `F1 = 2PR / (P + R)`;
/// 0 when nothing is shared; if either side has no tokens, 1.0 when both have none
/// and 0.0 otherwise. Empty `golds` means unanswerable: see the module docs.
pub fn f1<S: AsRef<str>>(pred: &str, golds: &[S]) -> f64 {
    let pred_toks = answer_tokens(pred);
    effective_golds(golds)
        .iter()
        .map(|g| f1_one(&pred_toks, &answer_tokens(g)))
        .fold(0.0, f64::max)
}

/// Token recall: the share of the best gold answer's normalised tokens that the
/// prediction holds (multiset intersection, as in [`f1`]), maximised over golds: BERGEN's
/// `Recall`, a lenient score for sentence answers, where F1's precision punishes every
/// extra word. A gold with no tokens (unanswerable) scores 1.0 for a prediction with none
/// and 0.0 otherwise, as in [`f1`].
pub fn token_recall<S: AsRef<str>>(pred: &str, golds: &[S]) -> f64 {
    let pred_toks = answer_tokens(pred);
    effective_golds(golds)
        .iter()
        .map(|g| {
            let gold = answer_tokens(g);
            if gold.is_empty() || pred_toks.is_empty() {
                return if pred_toks == gold { 1.0 } else { 0.0 };
            }
            common_tokens(&pred_toks, &gold).len() as f64 / gold.len() as f64
        })
        .fold(0.0, f64::max)
}

fn f1_one(pred: &[String], gold: &[String]) -> f64 {
    if pred.is_empty() || gold.is_empty() {
        return if pred == gold { 1.0 } else { 0.0 };
    }
    let same = common_tokens(pred, gold).len();
    if same == 0 {
        return 0.0;
    }
    let precision = same as f64 / pred.len() as f64;
    let recall = same as f64 / gold.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// The multiset intersection of two token lists, in `pred`'s order (the script's
/// `Counter(gold) & Counter(pred)`).
fn common_tokens(pred: &[String], gold: &[String]) -> Vec<String> {
    let mut gold_counts: HashMap<&str, usize> = HashMap::new();
    for t in gold {
        *gold_counts.entry(t.as_str()).or_default() += 1;
    }
    let mut same = Vec::new();
    for t in pred {
        if let Some(c) = gold_counts.get_mut(t.as_str()) {
            if *c > 0 {
                *c -= 1;
                same.push(t.clone());
            }
        }
    }
    same
}

/// EM and F1 of a prediction against one gold answer, with every intermediate step
/// (see [`explain_answer`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AnswerScore {
    /// The gold answer as given (`""` for an unanswerable question).
    pub gold: String,
    /// [`normalize_answer`] of the prediction.
    pub pred_normalized: String,
    /// [`normalize_answer`] of the gold answer.
    pub gold_normalized: String,
    /// The prediction's tokens ([`answer_tokens`]).
    pub pred_tokens: Vec<String>,
    /// The gold answer's tokens.
    pub gold_tokens: Vec<String>,
    /// Tokens in both (multiset intersection, in the prediction's order).
    pub common: Vec<String>,
    /// `|common| / |pred_tokens|` (0 when the prediction has no tokens).
    pub precision: f64,
    /// `|common| / |gold_tokens|` (0 when the gold answer has no tokens).
    pub recall: f64,
    /// Token F1 against this gold answer (as [`f1`] scores it).
    pub f1: f64,
    /// 1.0 when the normalised strings are equal (as [`exact_match`] scores it).
    pub exact: f64,
}

/// [`exact_match`] and [`f1`] step by step: one [`AnswerScore`] per gold answer the
/// SQuAD script scores against (golds that normalise to nothing are dropped; none
/// left means unanswerable and one empty gold). The question's EM and F1 are the
/// maxima over the returned scores.
pub fn explain_answer<S: AsRef<str>>(pred: &str, golds: &[S]) -> Vec<AnswerScore> {
    let pred_tokens = answer_tokens(pred);
    let pred_normalized = normalize_answer(pred);
    effective_golds(golds)
        .into_iter()
        .map(|gold| {
            let gold_tokens = answer_tokens(&gold);
            let common = common_tokens(&pred_tokens, &gold_tokens);
            let ratio = |n: usize| {
                if n == 0 {
                    0.0
                } else {
                    common.len() as f64 / n as f64
                }
            };
            let gold_normalized = normalize_answer(&gold);
            AnswerScore {
                precision: ratio(pred_tokens.len()),
                recall: ratio(gold_tokens.len()),
                f1: f1_one(&pred_tokens, &gold_tokens),
                exact: if gold_normalized == pred_normalized {
                    1.0
                } else {
                    0.0
                },
                pred_normalized: pred_normalized.clone(),
                gold_normalized,
                pred_tokens: pred_tokens.clone(),
                gold_tokens,
                common,
                gold,
            }
        })
        .collect()
}

/// One question of a null-threshold search ([`best_null_threshold`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NullCandidate {
    /// The reader's null score minus its best span's score; the answer is null when
    /// `null_margin > threshold` (`f32::INFINITY` when there is no span: always null).
    pub null_margin: f32,
    /// The question's score (EM or F1) when the best span is the answer.
    pub answered: f64,
    /// The question's score when the answer is null (`f1("", golds)`: 1 for an
    /// unanswerable question, 0 otherwise).
    pub null: f64,
}

/// The result of [`best_null_threshold`]: scores are means over the questions (0–1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NullThreshold {
    /// The chosen threshold: `f32::NEG_INFINITY` when predicting null for every
    /// question is best, else the `null_margin` of the last question still answered.
    pub threshold: f32,
    /// The mean score at `threshold`.
    pub score: f64,
    /// The mean score when every question is null (`threshold = -∞`).
    pub all_null: f64,
    /// The mean score when no question is null (`threshold = +∞`).
    pub never_null: f64,
}

/// The null threshold that maximises the mean score, as the official SQuAD 2.0
/// `evaluate-v2.0.py`'s `find_best_thresh` searches it: start from the score of
/// predicting null for **every** question, then answer the questions in ascending
/// order of `null_margin` (the script's ascending `na_prob`), keeping a threshold only
/// when the running score is **strictly** higher than the best so far (so among equal
/// scores the lowest threshold, the most abstentions, wins, and all-null wins ties).
///
/// A question's gain when answered is `answered - null`: the script's `scores[qid]` for
/// an answerable question, and for an unanswerable one `-1` when the prediction is a
/// non-empty string, else `0`; here the prediction's own score decides, so a prediction
/// that normalises to nothing (`"the"`) counts as empty.
///
/// Two differences from the script, neither changing its choice on distinct margins:
/// questions with equal margins are answered together (a threshold cannot separate
/// them, so the returned score is always the score at the returned threshold), and the
/// all-null start is `threshold = -∞` rather than the script's `0.0` (margins are logit
/// differences, not probabilities in `[0, 1]`). A question whose margin is `-∞` is
/// answered at every threshold and counted so in the all-null start.
///
/// Errors: no questions ([`Error::Empty`]); a NaN margin or score
/// ([`Error::InvalidParam`] naming the question's 1-based number).
pub fn best_null_threshold(items: &[NullCandidate]) -> Result<NullThreshold> {
    if items.is_empty() {
        return Err(Error::Empty(
            "no questions to choose a null threshold on".into(),
        ));
    }
    if let Some(i) = items
        .iter()
        .position(|c| c.null_margin.is_nan() || c.answered.is_nan() || c.null.is_nan())
    {
        return Err(Error::param(
            "null_margin",
            format!("question {} has a NaN margin or score", i + 1),
        ));
    }
    let n = items.len() as f64;
    let mut order: Vec<&NullCandidate> = items.iter().collect();
    order.sort_by(|a, b| a.null_margin.total_cmp(&b.null_margin));
    let start: f64 = order
        .iter()
        .map(|c| {
            if c.null_margin == f32::NEG_INFINITY {
                c.answered
            } else {
                c.null
            }
        })
        .sum();
    let (mut cur, mut best, mut threshold) = (start, start, f32::NEG_INFINITY);
    let mut i = order.partition_point(|c| c.null_margin == f32::NEG_INFINITY);
    while i < order.len() {
        let margin = order[i].null_margin;
        while i < order.len() && order[i].null_margin == margin {
            cur += order[i].answered - order[i].null;
            i += 1;
        }
        if cur > best {
            best = cur;
            threshold = margin;
        }
    }
    Ok(NullThreshold {
        threshold,
        score: best / n,
        all_null: start / n,
        never_null: items.iter().map(|c| c.answered).sum::<f64>() / n,
    })
}

/// Does `text` contain a gold answer? Both sides go through [`normalize_answer`]
/// and an answer matches when its tokens occur as a contiguous run of whole tokens
/// of the text (so `"art"` does not match `"party"`). Answers that normalise to
/// nothing never match.
///
/// This is DPR's `has_answer` check (Karpukhin et al. 2020) with the SQuAD
/// normaliser in place of DPR's regex tokenizer, so it drops articles and
/// punctuation where DPR keeps them as tokens: [`AnswerMatch::Squad`]. DPR's own
/// rule is [`AnswerMatch::Dpr`].
pub fn answer_in_text<S: AsRef<str>>(text: &str, answers: &[S]) -> bool {
    let norm = normalize_answer(text);
    let text_toks: Vec<&str> = norm.split(' ').filter(|t| !t.is_empty()).collect();
    answers.iter().any(|a| {
        let ans = answer_tokens(a.as_ref());
        !ans.is_empty()
            && ans.len() <= text_toks.len()
            && text_toks
                .windows(ans.len())
                .any(|w| w.iter().zip(&ans).all(|(x, y)| *x == y.as_str()))
    })
}

/// DPR top-k retrieval accuracy: for each question, 1.0 if any of its first `k`
/// hits (run order) is a passage that contains a gold answer under `rule`, else
/// 0.0.
///
/// Evaluated questions are those of `answers` with at least one answer usable
/// under `rule` ([`Golds::is_empty`](crate::evaluate::answer_match::Golds::is_empty):
/// with [`AnswerMatch::Dpr`] an answer with at least one token, with
/// [`AnswerMatch::Squad`] one that normalises to something); one missing from the
/// run scores 0; run queries without answers are ignored. The result is named
/// `answer_recall@k`. Each passage is prepared for `rule` once per call.
///
/// Errors: `k == 0` ([`Error::InvalidParam`]); a hit among the top `k` of an
/// evaluated question whose id is not in `passages` ([`Error::InvalidParam`]
/// naming the query and passage id); a regex answer that cannot be matched as DPR
/// matches it ([`Error::InvalidParam`] naming the question and the pattern); no
/// evaluated question ([`Error::Empty`]).
pub fn answer_recall_at_k(
    run: &Run,
    passages: &HashMap<String, String>,
    answers: &BTreeMap<String, Vec<String>>,
    k: usize,
    rule: AnswerMatch,
) -> Result<MetricResult> {
    check_k(k)?;
    let name = format!("answer_recall@{k}");
    let mut prepared: HashMap<&str, MatchText> = HashMap::new();
    let mut per_query = BTreeMap::new();
    for (qid, golds) in answers {
        let golds = rule
            .golds(golds)
            .map_err(|e| Error::param("answers", format!("question `{qid}`: {e}")))?;
        if golds.is_empty() {
            continue;
        }
        let mut found = false;
        for hit in run
            .get(qid)
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .take(k)
        {
            let text = match prepared.entry(hit.id.as_str()) {
                Entry::Occupied(o) => o.into_mut(),
                Entry::Vacant(v) => {
                    let text = passages.get(&hit.id).ok_or_else(|| {
                        Error::param(
                            "passages",
                            format!(
                                "query `{qid}`: run id `{}` is not in the passage map",
                                hit.id
                            ),
                        )
                    })?;
                    v.insert(rule.prepare(text))
                }
            };
            if golds.found_in(text)? {
                found = true;
                break;
            }
        }
        per_query.insert(qid.clone(), if found { 1.0 } else { 0.0 });
    }
    if per_query.is_empty() {
        return Err(Error::Empty(format!(
            "`{name}` ({rule} rule): no question has a usable gold answer"
        )));
    }
    let mean = per_query.values().sum::<f64>() / per_query.len() as f64;
    Ok(MetricResult {
        name,
        mean,
        per_query,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Hit;

    const NONE: [&str; 0] = [];

    #[test]
    fn explain_answer_shows_the_steps_and_agrees_with_em_and_f1() {
        let golds = ["The Eiffel Tower", "Eiffel Tower in Paris"];
        let pred = "the tower of Eiffel.";
        let steps = explain_answer(pred, &golds);
        assert_eq!(steps.len(), 2);
        let s = &steps[0];
        assert_eq!(s.pred_normalized, "tower of eiffel");
        assert_eq!(s.gold_normalized, "eiffel tower");
        assert_eq!(s.common, ["tower", "eiffel"]);
        // P = 2/3, R = 2/2, F1 = 2·(2/3)·1 / (2/3 + 1) = 0.8.
        assert!((s.precision - 2.0 / 3.0).abs() < 1e-12 && s.recall == 1.0);
        assert!((s.f1 - 0.8).abs() < 1e-12 && s.exact == 0.0);
        // Against the second gold: 2 common of 3 and 4 tokens: F1 = 2·(2/3)(1/2)/(7/6) = 4/7.
        assert!((steps[1].f1 - 4.0 / 7.0).abs() < 1e-12);
        let best = steps.iter().map(|s| s.f1).fold(0.0, f64::max);
        assert_eq!(best, f1(pred, &golds));
        assert_eq!(
            explain_answer("Eiffel tower!", &golds)[0].exact,
            exact_match("Eiffel tower!", &golds)
        );
        // Repeated tokens count as a multiset.
        let s = &explain_answer("paris paris", &["paris"])[0];
        assert_eq!((s.common.len(), s.precision, s.recall), (1, 0.5, 1.0));
        // Unanswerable: one empty gold; an empty prediction scores 1.
        let s = explain_answer("", &[] as &[&str]);
        assert_eq!(
            (s.len(), s[0].gold.as_str(), s[0].f1, s[0].exact),
            (1, "", 1.0, 1.0)
        );
    }

    #[test]
    fn normalisation_matches_squad_script() {
        assert_eq!(normalize_answer("The Cat!"), "cat");
        assert_eq!(
            normalize_answer("  A  quick,\tbrown\nfox. "),
            "quick brown fox"
        );
        // Punctuation is removed before articles, so "the-end" → "theend" stays.
        assert_eq!(normalize_answer("the-end"), "theend");
        // Articles only as whole words.
        assert_eq!(normalize_answer("Theatre and anthem"), "theatre and anthem");
        assert_eq!(normalize_answer("AN apple"), "apple");
        // Non-ASCII punctuation is kept (Python's string.punctuation is ASCII).
        assert_eq!(normalize_answer("«Éclair»"), "«éclair»");
        assert_eq!(normalize_answer("the . a"), "");
        assert_eq!(answer_tokens("The Eiffel tower."), ["eiffel", "tower"]);
    }

    fn python_fixture() -> serde_json::Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/data/squad_normalize.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn ranges(v: &serde_json::Value) -> Vec<(u32, u32)> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| (r[0].as_u64().unwrap() as u32, r[1].as_u64().unwrap() as u32))
            .collect()
    }

    /// Tricky strings (combining marks next to articles, `²`, `ⅱ`, `_`, `‿`, joiners,
    /// Python-only whitespace, Arabic and Devanagari marks, length-changing case maps)
    /// against the official `normalize_answer` and `get_tokens` run by Python. The
    /// fixture is written by
    /// `python3 scripts/python/squad_normalize_fixture.py > tests/data/squad_normalize.json`.
    #[test]
    fn normalisation_matches_python_on_tricky_strings() {
        let fx = python_fixture();
        let cases = fx["cases"].as_array().unwrap();
        assert!(cases.len() >= 40, "{} cases", cases.len());
        let mut bad = Vec::new();
        for case in cases {
            let input = case["input"].as_str().unwrap();
            let want = case["normalized"].as_str().unwrap();
            let got = normalize_answer(input);
            if got != want {
                bad.push(format!("{input:?}: ours {got:?}, Python {want:?}"));
            }
            let want_toks: Vec<&str> = case["tokens"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap())
                .collect();
            if answer_tokens(input) != want_toks {
                bad.push(format!(
                    "{input:?}: tokens {:?}, Python {want_toks:?}",
                    answer_tokens(input)
                ));
            }
        }
        assert!(
            bad.is_empty(),
            "{} of {}:\n{}",
            bad.len(),
            cases.len(),
            bad.join("\n")
        );
    }

    /// Every code point assigned in the fixture's Unicode version: an article followed
    /// by it keeps the article exactly when Python's `re` counts it as `\w`; and
    /// whitespace is what Python's `str.split()` splits on.
    #[test]
    fn word_boundaries_and_whitespace_are_pythons_for_every_code_point() {
        let fx = python_fixture();
        let word = ranges(&fx["word_ranges"]);
        let is_word = |cp: u32| word.iter().any(|&(a, b)| a <= cp && cp <= b);
        let mut checked = 0usize;
        let mut bad = Vec::new();
        for (first, last) in ranges(&fx["assigned_ranges"]) {
            for cp in first..=last {
                let Some(c) = char::from_u32(cp) else {
                    continue;
                };
                if c.is_ascii_punctuation() || is_python_space(c) {
                    continue; // removed or split before the article rule sees it
                }
                checked += 1;
                let kept = normalize_answer(&format!("the{c}")).starts_with("the");
                if kept != is_word(cp) {
                    bad.push(format!("U+{cp:04X} (Python \\w: {})", is_word(cp)));
                }
            }
        }
        assert!(checked > 100_000, "{checked} code points checked");
        assert!(
            bad.is_empty(),
            "{} of {checked} code points differ from Python {} (Unicode {}): {}",
            bad.len(),
            fx["python"],
            fx["unicode"],
            bad.iter().take(40).cloned().collect::<Vec<_>>().join(", ")
        );
        let space: Vec<u32> = fx["whitespace"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        assert!(space.contains(&0xa0) && space.contains(&0x1c) && space.contains(&0x85));
        for cp in 0..0x11_0000u32 {
            if let Some(c) = char::from_u32(cp) {
                assert_eq!(is_python_space(c), space.contains(&cp), "U+{cp:04X}");
            }
        }
    }

    fn cand(null_margin: f32, answered: f64, null: f64) -> NullCandidate {
        NullCandidate {
            null_margin,
            answered,
            null,
        }
    }

    #[test]
    fn null_threshold_all_null_can_win() {
        // Two unanswerable questions the reader answers wrongly (answered 0, null 1) and
        // one answerable question it gets half right but with the highest margin.
        // All null: (1 + 1 + 0)/3 = 2/3. Answering in margin order: q1 → 1/3, q2 → 0,
        // q3 → 0.5/3. The all-null start is the best.
        let items = [
            cand(1.0, 0.0, 1.0),
            cand(2.0, 0.0, 1.0),
            cand(3.0, 0.5, 0.0),
        ];
        let t = best_null_threshold(&items).unwrap();
        assert_eq!(t.threshold, f32::NEG_INFINITY);
        assert!((t.score - 2.0 / 3.0).abs() < 1e-12 && t.score == t.all_null);
        assert!((t.never_null - 0.5 / 3.0).abs() < 1e-12);
        // Every margin is `> -inf`: all null at the chosen threshold.
        assert!(items.iter().all(|c| c.null_margin > t.threshold));
    }

    #[test]
    fn null_threshold_by_hand_with_ties() {
        // Margins -1 (answered 1 / null 0), 0.5 twice (1/0 and 0/1), 2 (0/1).
        // All null: 2/4. After -1: 3/4. After both 0.5s: 3/4 (not strictly better).
        // After 2: 2/4. Best: threshold -1, 3/4.
        let items = [
            cand(0.5, 1.0, 0.0),
            cand(-1.0, 1.0, 0.0),
            cand(2.0, 0.0, 1.0),
            cand(0.5, 0.0, 1.0),
        ];
        let t = best_null_threshold(&items).unwrap();
        assert_eq!((t.threshold, t.score, t.all_null), (-1.0, 0.75, 0.5));
        assert_eq!(t.never_null, 0.5);
        // The score at the returned threshold, computed directly.
        let at = |thr: f32| {
            items
                .iter()
                .map(|c| {
                    if c.null_margin > thr {
                        c.null
                    } else {
                        c.answered
                    }
                })
                .sum::<f64>()
                / 4.0
        };
        assert_eq!(at(t.threshold), t.score);
        // Never null is best: every answer right.
        let t = best_null_threshold(&[cand(1.0, 1.0, 0.0), cand(f32::INFINITY, 0.0, 0.0)]).unwrap();
        assert_eq!((t.threshold, t.score), (1.0, 0.5));
        assert!(matches!(best_null_threshold(&[]), Err(Error::Empty(_))));
        let e = best_null_threshold(&[cand(0.0, 1.0, 0.0), cand(f32::NAN, 1.0, 0.0)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("question 2"), "{e}");
    }

    #[test]
    fn yes_no_golds_are_not_spans() {
        for g in [
            "Yes.",
            "no",
            "YES",
            "Yes, in 1930.",
            "No, the standard living was raised.",
        ] {
            assert!(is_yes_no(g), "{g:?}");
        }
        for g in [
            "Norway",
            "Yesterday",
            "Nobel Prize",
            "",
            "The Yes Men",
            "No Doubt",
            "No-one",
        ] {
            assert!(!is_yes_no(g), "{g:?}");
        }
        assert_eq!(span_golds(&["Yes", "Paris", "no"]), ["Paris"]);
        assert!(span_golds(&["Yes.", "yes"]).is_empty());
        assert!(span_golds::<&str>(&[]).is_empty());
    }

    #[test]
    fn exact_match_cases() {
        assert_eq!(exact_match("The Cat!", &["cat"]), 1.0);
        assert_eq!(exact_match("a cat", &["dog", "the  cat."]), 1.0); // max over golds
        assert_eq!(exact_match("cats", &["cat"]), 0.0);
    }

    #[test]
    fn f1_by_hand() {
        // pred tokens [eiffel, tower, paris] (3), gold [eiffel, tower] (2), common 2:
        // P = 2/3, R = 2/2 = 1, F1 = 2·(2/3)·1 / (2/3 + 1) = (4/3) / (5/3) = 0.8.
        assert!((f1("the Eiffel Tower, Paris", &["Eiffel Tower"]) - 0.8).abs() < 1e-12);
        // pred [new, york, city] vs gold [york, new, jersey]: common {new, york} = 2;
        // P = R = 2/3, F1 = 2/3.
        assert!((f1("New York City", &["York New Jersey"]) - 2.0 / 3.0).abs() < 1e-12);
        // Multiset intersection: pred [to, to, be] vs gold [to, be]:
        // common = min counts {to:1, be:1} = 2; P = 2/3, R = 1, F1 = 0.8.
        assert!((f1("to to be", &["to be"]) - 0.8).abs() < 1e-12);
        // Max over golds: 0 against "london", 0.8 against "eiffel tower".
        assert!((f1("Eiffel Tower Paris", &["London", "Eiffel Tower"]) - 0.8).abs() < 1e-12);
        assert_eq!(f1("berlin", &["paris"]), 0.0);
        // Prediction that normalises to nothing against a real answer.
        assert_eq!(f1("the", &["paris"]), 0.0);
        assert_eq!(exact_match("", &["paris"]), 0.0);
    }

    #[test]
    fn token_recall_by_hand() {
        // A sentence answer holds every gold token: recall 1, F1 only 2·(2/9)·1/(2/9+1).
        let sentence = "The Eiffel Tower is the tallest structure in Paris.";
        assert_eq!(token_recall(sentence, &["Eiffel Tower"]), 1.0);
        assert!(f1(sentence, &["Eiffel Tower"]) < 0.5);
        // Half of the gold's tokens, max over golds, multiset counts.
        assert_eq!(token_recall("New York", &["New Jersey"]), 0.5);
        assert_eq!(token_recall("New York", &["Boston", "New Jersey"]), 0.5);
        assert_eq!(token_recall("to be", &["to to be be"]), 0.5);
        assert_eq!(token_recall("", &["paris"]), 0.0);
        assert_eq!(token_recall("", &NONE), 1.0);
        assert_eq!(token_recall("paris", &NONE), 0.0);
    }

    #[test]
    fn unanswerable_questions() {
        // No gold → EM = F1 = 1 iff the prediction normalises to empty.
        assert_eq!(exact_match("", &NONE), 1.0);
        assert_eq!(f1("", &NONE), 1.0);
        assert_eq!(exact_match("The.", &NONE), 1.0);
        assert_eq!(f1("the", &NONE), 1.0);
        assert_eq!(exact_match("paris", &NONE), 0.0);
        assert_eq!(f1("paris", &NONE), 0.0);
        // Golds that normalise to nothing are dropped, as in get_raw_scores.
        assert_eq!(exact_match("", &["", "the"]), 1.0);
        assert_eq!(f1("x", &["a"]), 0.0); // gold "a" normalises to "" → unanswerable
                                          // A real gold alongside an empty one: the empty one is ignored.
        assert_eq!(exact_match("", &["", "paris"]), 0.0);
    }

    #[test]
    fn answer_in_text_whole_tokens() {
        let text = "The party was held in New York City, in 1999.";
        assert!(answer_in_text(text, &["new york"]));
        assert!(answer_in_text(text, &["1999"]));
        assert!(answer_in_text(text, &["London", "York City"]));
        assert!(!answer_in_text(text, &["art"])); // inside "party": not a token
        assert!(!answer_in_text(text, &["york new"])); // order matters
        assert!(!answer_in_text(text, &["the"])); // normalises to nothing
        assert!(!answer_in_text(text, &NONE));
        assert!(!answer_in_text("", &["x"]));
    }

    #[test]
    fn answer_recall_by_hand() {
        let passages: HashMap<String, String> = [
            ("p1", "Paris is the capital of France."),
            ("p2", "Berlin is the capital of Germany."),
            ("p3", "Rome is in Italy."),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let answers: BTreeMap<String, Vec<String>> = [
            ("q1", vec!["Paris"]),
            ("q2", vec!["Rome"]),
            ("q3", vec!["Madrid"]),
            ("q4", vec![]),         // unanswerable → skipped
            ("q5", vec!["Berlin"]), // not in the run → 0
        ]
        .into_iter()
        .map(|(q, a)| (q.to_string(), a.into_iter().map(String::from).collect()))
        .collect();
        let run: Run = [
            ("q1", vec!["p2", "p1"]),
            ("q2", vec!["p1", "p2", "p3"]),
            ("q3", vec!["p1", "p2"]),
            ("q9", vec!["nope"]), // no answers → ignored, unknown id never looked up
        ]
        .into_iter()
        .map(|(q, ids)| {
            (
                q.to_string(),
                ids.into_iter().map(|i| Hit::new(i, 1.0)).collect(),
            )
        })
        .collect();
        // k = 1: nobody answered at rank 1 → 0 / 4.
        let r1 = answer_recall_at_k(&run, &passages, &answers, 1, AnswerMatch::Squad).unwrap();
        assert_eq!(r1.name, "answer_recall@1");
        assert_eq!(
            r1.per_query.keys().collect::<Vec<_>>(),
            ["q1", "q2", "q3", "q5"]
        );
        assert_eq!(r1.mean, 0.0);
        // k = 2: q1 (p1 at rank 2) → 1/4.
        assert_eq!(
            answer_recall_at_k(&run, &passages, &answers, 2, AnswerMatch::Squad)
                .unwrap()
                .mean,
            0.25
        );
        // k = 3: q1, q2 → 2/4.
        let r3 = answer_recall_at_k(&run, &passages, &answers, 3, AnswerMatch::Squad).unwrap();
        assert_eq!(r3.mean, 0.5);
        assert_eq!(r3.per_query["q2"], 1.0);
        assert_eq!(r3.per_query["q5"], 0.0);

        assert!(matches!(
            answer_recall_at_k(&run, &passages, &answers, 0, AnswerMatch::Squad),
            Err(Error::InvalidParam { name: "k", .. })
        ));
        let mut bad = run.clone();
        bad.get_mut("q3").unwrap().insert(0, Hit::new("ghost", 9.0));
        let e = answer_recall_at_k(&bad, &passages, &answers, 1, AnswerMatch::Squad).unwrap_err();
        assert!(e.to_string().contains("ghost"), "{e}");
    }

    #[test]
    fn answer_recall_under_each_rule() {
        let passages: HashMap<String, String> = [
            ("p1", "Einstein's theory (1905) changed physics."),
            ("p2", "The Beatles were formed in Liverpool."),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let answers: BTreeMap<String, Vec<String>> = [
            ("q1", vec!["Einstein"]), // DPR: "einstein ' s" holds it; SQuAD: "einsteins"
            ("q2", vec!["The Beatles"]), // both
            ("q3", vec![")"]),        // a token for DPR, nothing for SQuAD (skipped)
            ("q4", vec!["Beatles were"]),
        ]
        .into_iter()
        .map(|(q, a)| (q.to_string(), a.into_iter().map(String::from).collect()))
        .collect();
        let run: Run = ["q1", "q2", "q3", "q4"]
            .into_iter()
            .map(|q| {
                (
                    q.to_string(),
                    vec![Hit::new("p1", 2.0), Hit::new("p2", 1.0)],
                )
            })
            .collect();
        // DPR, k = 2: q1, q2, q3, q4 all found → 4/4; k = 1: q1 and q3 (p1) → 2/4.
        let d2 = answer_recall_at_k(&run, &passages, &answers, 2, AnswerMatch::Dpr).unwrap();
        assert_eq!((d2.per_query.len(), d2.mean), (4, 1.0));
        let d1 = answer_recall_at_k(&run, &passages, &answers, 1, AnswerMatch::Dpr).unwrap();
        assert_eq!(d1.mean, 0.5);
        assert_eq!((d1.per_query["q1"], d1.per_query["q3"]), (1.0, 1.0));
        // SQuAD, k = 2: q3 skipped; q1 missed; q2, q4 found → 2/3.
        let s2 = answer_recall_at_k(&run, &passages, &answers, 2, AnswerMatch::Squad).unwrap();
        assert_eq!(s2.per_query.keys().collect::<Vec<_>>(), ["q1", "q2", "q4"]);
        assert!((s2.mean - 2.0 / 3.0).abs() < 1e-12);
        // Regex: ")" does not compile; the error names the question and the pattern.
        let e = answer_recall_at_k(&run, &passages, &answers, 2, AnswerMatch::DprRegex)
            .unwrap_err()
            .to_string();
        assert!(e.contains("q3") && e.contains("`)`"), "{e}");
        let regex_answers: BTreeMap<String, Vec<String>> =
            [("q1".to_string(), vec![r"\(19\d\d\)".to_string()])].into();
        let r1 =
            answer_recall_at_k(&run, &passages, &regex_answers, 1, AnswerMatch::DprRegex).unwrap();
        assert_eq!(r1.mean, 1.0);
        // No usable answer at all.
        let none: BTreeMap<String, Vec<String>> =
            [("q1".to_string(), vec![" ".to_string()])].into();
        assert!(matches!(
            answer_recall_at_k(&run, &passages, &none, 1, AnswerMatch::Dpr),
            Err(Error::Empty(_))
        ));
    }
}
