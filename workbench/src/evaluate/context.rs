//! Context precision: how much of what the reader was given holds a gold answer.
//!
//! For one question, let `p_1 … p_n` be the passages **given to the reader**, in the
//! order it read them (after any re-ranking and after the reader dropped what did not
//! fit its window: [`crate::read::Answer::passage_ids`]), and let `rel_i = 1` when
//! passage `p_i` contains a gold answer under the [`AnswerMatch`] rule the caller passes
//! (the pipeline passes its run's `evaluation.answer_match`, else the question set's own
//! rule, `squad` for every set the workbench loads; `dpr`, or `dpr-regex` for regex
//! answers, when the config chooses it), else 0. Let `R = Σ_i rel_i`.
//!
//! - **Context precision** (report 004's metric): the share of
//!   the passages given to the reader that contain a gold answer,
//!   `CP = R / n`.
//! - **Rank-aware context precision** (average precision over the reader's passages,
//!   the RAGAS form of the metric): `AP = (1 / R) · Σ_{i : rel_i = 1} P@i` with
//!   `P@i = (Σ_{j ≤ i} rel_j) / i`, and `AP = 0` when `R = 0`. It is 1 when every
//!   answer-bearing passage comes before every other one, and falls as they move down
//!   the list; unlike `CP` it does not penalise passages without an answer placed
//!   *after* all answer-bearing ones.
//!
//! A question is **not scored** (both metrics `None`) when the reader was given no
//! passage (`n = 0`: closed-book, or everything dropped) or when it has no usable
//! gold answer under the rule (SQuAD 2.0 unanswerable questions). A system's value is
//! the mean over its scored questions; tables give that count beside it.
//!
//! Note that "contains a gold answer" is a string match, not a judgement: a passage
//! can mention the answer string without supporting it, and a paraphrased answer is
//! missed.

use super::answer_match::AnswerMatch;
use crate::Result;
use serde::{Deserialize, Serialize};

/// Context precision of one question. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextPrecision {
    /// Number of passages given to the reader (`n`).
    pub passages: usize,
    /// `rel_i` for each passage, in reading order.
    pub relevant: Vec<bool>,
    /// `CP = R / n`.
    pub precision: f64,
    /// `AP = (1/R) Σ_{rel_i} P@i`, 0 when `R = 0`.
    pub average_precision: f64,
}

/// The two metrics from the relevance flags of the passages in reading order; `None`
/// when there is no passage.
pub fn from_flags(relevant: &[bool]) -> Option<ContextPrecision> {
    if relevant.is_empty() {
        return None;
    }
    let n = relevant.len();
    let mut hits = 0usize;
    let mut sum_p = 0.0f64;
    for (i, &r) in relevant.iter().enumerate() {
        if r {
            hits += 1;
            sum_p += hits as f64 / (i + 1) as f64;
        }
    }
    Some(ContextPrecision {
        passages: n,
        relevant: relevant.to_vec(),
        precision: hits as f64 / n as f64,
        average_precision: if hits == 0 { 0.0 } else { sum_p / hits as f64 },
    })
}

/// Context precision of one question: `passages` are the texts given to the reader,
/// in reading order; `golds` its gold answers, matched with `rule`.
///
/// `Ok(None)` when the question is not scored (no passage, or no usable gold answer).
/// Errors: a regex answer that cannot be matched as DPR matches it (`dpr-regex`),
/// naming the pattern.
pub fn context_precision<P: AsRef<str>, S: AsRef<str>>(
    passages: &[P],
    golds: &[S],
    rule: AnswerMatch,
) -> Result<Option<ContextPrecision>> {
    let golds = rule.golds(golds)?;
    if golds.is_empty() || passages.is_empty() {
        return Ok(None);
    }
    let flags = passages
        .iter()
        .map(|p| golds.found_in(&rule.prepare(p.as_ref())))
        .collect::<Result<Vec<bool>>>()?;
    Ok(from_flags(&flags))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_worked_flags() {
        // [1, 0, 1, 0]: CP = 2/4 = 0.5; AP = (1/1 + 2/3) / 2 = 5/6.
        let c = from_flags(&[true, false, true, false]).unwrap();
        assert_eq!(c.precision, 0.5);
        assert!((c.average_precision - 5.0 / 6.0).abs() < 1e-12);
        // [0, 0, 1]: CP = 1/3; AP = (1/3) / 1 = 1/3.
        let c = from_flags(&[false, false, true]).unwrap();
        assert!((c.precision - 1.0 / 3.0).abs() < 1e-12);
        assert!((c.average_precision - 1.0 / 3.0).abs() < 1e-12);
        // [1, 1, 0]: CP = 2/3; AP = (1 + 1) / 2 = 1 (the answer-bearing ones come first).
        let c = from_flags(&[true, true, false]).unwrap();
        assert!((c.precision - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(c.average_precision, 1.0);
        // None relevant.
        let c = from_flags(&[false, false]).unwrap();
        assert_eq!((c.precision, c.average_precision), (0.0, 0.0));
        assert!(from_flags(&[]).is_none());
    }

    #[test]
    fn from_texts_under_each_rule() {
        let ps = [
            "Berlin is the capital of Germany.",
            "Paris is the capital of France.",
            "The Parisian metro.",
        ];
        // DPR match: only passage 2 holds "Paris" as a token ("Parisian" does not).
        let c = context_precision(&ps, &["Paris"], AnswerMatch::Dpr)
            .unwrap()
            .unwrap();
        assert_eq!(c.relevant, [false, true, false]);
        assert!((c.precision - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(c.average_precision, 0.5);
        // Regex answers.
        let c = context_precision(&ps, &[r"pari\w*"], AnswerMatch::DprRegex)
            .unwrap()
            .unwrap();
        assert_eq!(c.relevant, [false, true, true]);
        // Not scored: no passages, no gold answer.
        let none: [&str; 0] = [];
        assert!(context_precision(&none, &["Paris"], AnswerMatch::Dpr)
            .unwrap()
            .is_none());
        assert!(context_precision(&ps, &none, AnswerMatch::Squad)
            .unwrap()
            .is_none());
        // A bad pattern is an error naming it.
        let e = context_precision(&ps, &["("], AnswerMatch::DprRegex).unwrap_err();
        assert!(e.to_string().contains('('), "{e}");
    }
}
