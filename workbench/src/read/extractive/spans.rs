//! Windows over long contexts and n-best span decoding with a null score.
//!
//! **Windows** ([`make_windows`]) follow the Hugging Face question-answering pipeline:
//! the question and the context are tokenised as a pair by the checkpoint's own fast
//! tokenizer (its post-processor adds `[CLS] q [SEP] … [SEP]` or `<s> q </s></s> … </s>`),
//! with character offsets; the context tokens are cut into windows of at most
//! `max_seq_len` tokens in all, consecutive windows **overlapping by `doc_stride` tokens**
//! (the tokenizer's `stride`, as the pipeline passes `doc_stride`). When the context part
//! of a window is not longer than `doc_stride`, the overlap is cut to half of it so the
//! windows still advance. The question is never truncated: a question that leaves no room
//! for context is an error.
//!
//! A context may be made of several **segments** (passages joined by a separator, report
//! 000's concatenated top-5): every context token records its segment and its character
//! offsets **inside that segment's text**, so an answer maps back to its passage exactly.
//!
//! **Decoding** ([`decode`]) scores spans by raw logits, `start_logit + end_logit`, over
//! the top `n_best` start and top `n_best` end tokens of each window's context part, with
//! `end ≥ start`, at most `max_answer_len` tokens and both ends in the same segment. The
//! null score is `start_logit[CLS] + end_logit[CLS]`, the minimum over the windows (as
//! transformers' SQuAD 2.0 post-processing does). With a `null_threshold`, the answer is
//! null when `null_score − best_span_score > null_threshold`.

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use tokenizers::Tokenizer;

/// How contexts are cut into encoder inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WindowParams {
    /// Tokens per window, special tokens and question included (default 384).
    pub max_seq_len: usize,
    /// Context tokens shared by consecutive windows (default 128).
    pub doc_stride: usize,
}

impl Default for WindowParams {
    fn default() -> Self {
        WindowParams {
            max_seq_len: 384,
            doc_stride: 128,
        }
    }
}

/// How spans are decoded.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DecodeParams {
    /// Start and end candidates per window (default 20).
    pub n_best: usize,
    /// Longest answer in tokens (default 30).
    pub max_answer_len: usize,
    /// SQuAD 2.0 abstention: null when `null_score − best_span_score > null_threshold`.
    /// `None` (default): never abstain while a span exists.
    pub null_threshold: Option<f32>,
}

impl Default for DecodeParams {
    fn default() -> Self {
        DecodeParams {
            n_best: 20,
            max_answer_len: 30,
            null_threshold: None,
        }
    }
}

/// Where a context token comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenSource {
    /// Index of the segment (passage) in the context.
    pub segment: usize,
    /// Character offset of the token's first character in the segment text.
    pub start_char: usize,
    /// Character offset one past its last character.
    pub end_char: usize,
}

/// One encoder input: the question, a slice of the context, special tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// Token ids (no padding).
    pub input_ids: Vec<u32>,
    /// Token type ids.
    pub type_ids: Vec<u32>,
    /// Position of the first context token.
    pub context_start: usize,
    /// Source of each context token, in order: `sources[i]` is token `context_start + i`.
    pub sources: Vec<TokenSource>,
    /// Position of the classification token (the null answer), 0.
    pub cls_index: usize,
}

impl Window {
    /// Tokens in the window.
    pub fn len(&self) -> usize {
        self.input_ids.len()
    }

    /// Whether the window holds no token.
    pub fn is_empty(&self) -> bool {
        self.input_ids.is_empty()
    }

    /// The token positions `(start, end)` (inclusive) of the answer at characters
    /// `start_char..end_char` of `segment`, when the window holds it whole; `None`
    /// otherwise (training then points both at [`Window::cls_index`]). Tokens are those
    /// overlapping the character range.
    pub fn token_span(
        &self,
        segment: usize,
        start_char: usize,
        end_char: usize,
    ) -> Option<(usize, usize)> {
        let inside: Vec<usize> = self
            .sources
            .iter()
            .enumerate()
            .filter(|(_, s)| s.segment == segment)
            .map(|(i, _)| i)
            .collect();
        let first = *inside.first()?;
        let last = *inside.last()?;
        // The window must cover the whole answer.
        if self.sources[first].start_char > start_char || self.sources[last].end_char < end_char {
            return None;
        }
        let s = inside
            .iter()
            .find(|&&i| self.sources[i].end_char > start_char)?;
        let e = inside
            .iter()
            .rev()
            .find(|&&i| self.sources[i].start_char < end_char)?;
        (s <= e).then_some((self.context_start + s, self.context_start + e))
    }
}

/// Cut `question` + the context made of `segments` (joined by `separator`) into windows.
/// An empty (or all-whitespace) context gives no window. Errors: a question that leaves
/// no room for context in `max_seq_len` tokens ([`Error::InvalidParam`] naming
/// `question`), a `max_seq_len` of 0, a tokenizer failure.
pub fn make_windows(
    tokenizer: &Tokenizer,
    question: &str,
    segments: &[&str],
    separator: &str,
    params: &WindowParams,
) -> Result<Vec<Window>> {
    if params.max_seq_len == 0 {
        return Err(Error::param("max_seq_len", "must be at least 1"));
    }
    // Character ranges of the segments in the joined context.
    let mut context = String::new();
    let mut ranges = Vec::with_capacity(segments.len());
    let mut at = 0usize;
    let sep_chars = separator.chars().count();
    for (i, s) in segments.iter().enumerate() {
        if i > 0 {
            context.push_str(separator);
            at += sep_chars;
        }
        let n = s.chars().count();
        ranges.push((at, at + n));
        context.push_str(s);
        at += n;
    }
    let enc = tokenizer
        .encode_char_offsets((question, context.as_str()), true)
        .map_err(|e| Error::Tokenizer(format!("encoding a question–context pair: {e}")))?;
    let seq = enc.get_sequence_ids();
    let ids = enc.get_ids();
    let types = enc.get_type_ids();
    let offsets = enc.get_offsets();
    let ctx: Vec<usize> = (0..ids.len()).filter(|&i| seq[i] == Some(1)).collect();
    let q_tokens = seq.iter().filter(|s| **s == Some(0)).count();
    let (c0, c1) = match (ctx.first(), ctx.last()) {
        (Some(&a), Some(&b)) => (a, b + 1),
        // No context token: the special tokens around an empty second sequence.
        _ => (ids.len(), ids.len()),
    };
    let (prefix, suffix) = (c0, ids.len() - c1);
    let specials = ids.len() - q_tokens - ctx.len();
    if q_tokens + specials >= params.max_seq_len {
        return Err(Error::param(
            "question",
            format!(
                "the question is {q_tokens} tokens; with {specials} special tokens it leaves \
                 no room for context in a window of max_seq_len {} tokens",
                params.max_seq_len
            ),
        ));
    }
    if ctx.is_empty() {
        return Ok(Vec::new());
    }
    // Sources of the context tokens.
    let mut sources = Vec::with_capacity(ctx.len());
    let mut seg = 0usize;
    for &t in &ctx {
        let (s, e) = offsets[t];
        while seg + 1 < ranges.len() && s >= ranges[seg].1 {
            seg += 1;
        }
        let (lo, hi) = ranges[seg];
        let s = s.clamp(lo, hi);
        let e = e.clamp(s, hi);
        sources.push(TokenSource {
            segment: seg,
            start_char: s - lo,
            end_char: e - lo,
        });
    }
    let budget = params.max_seq_len - prefix - suffix;
    let overlap = if params.doc_stride < budget {
        params.doc_stride
    } else {
        budget / 2
    };
    let mut out = Vec::new();
    let mut start = 0usize;
    loop {
        let end = (start + budget).min(ctx.len());
        let mut input_ids = ids[..c0].to_vec();
        let mut type_ids = types[..c0].to_vec();
        input_ids.extend_from_slice(&ids[c0 + start..c0 + end]);
        type_ids.extend_from_slice(&types[c0 + start..c0 + end]);
        input_ids.extend_from_slice(&ids[c1..]);
        type_ids.extend_from_slice(&types[c1..]);
        out.push(Window {
            input_ids,
            type_ids,
            context_start: c0,
            sources: sources[start..end].to_vec(),
            cls_index: 0,
        });
        if end == ctx.len() {
            break;
        }
        start = end - overlap;
    }
    Ok(out)
}

/// A decoded answer span.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// Segment (passage index in the context given to [`make_windows`]).
    pub segment: usize,
    /// Character offset of the first character in the segment text.
    pub start_char: usize,
    /// Character offset one past the last character.
    pub end_char: usize,
    /// `start_logit + end_logit`.
    pub score: f32,
    /// Start logit.
    pub start_logit: f32,
    /// End logit.
    pub end_logit: f32,
    /// Index of the window it was found in.
    pub window: usize,
    /// Token positions (inclusive) in that window.
    pub tokens: (usize, usize),
}

/// The result of [`decode`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decoded {
    /// Best spans, best first, one per distinct `(segment, start_char, end_char)`, at most
    /// `n_best`.
    pub nbest: Vec<Span>,
    /// Null score: `start[CLS] + end[CLS]`, the minimum over the windows (`-inf` without
    /// windows).
    pub null_score: f32,
    /// Whether the null answer wins (the threshold rule, or no span at all).
    pub is_null: bool,
}

impl Decoded {
    /// The best span, unless the answer is null.
    pub fn answer(&self) -> Option<&Span> {
        if self.is_null {
            None
        } else {
            self.nbest.first()
        }
    }
}

/// Indices of the `n` largest values among `idx` (ties: lower index first).
fn top_n(values: &[f32], idx: std::ops::Range<usize>, n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = idx.collect();
    v.sort_by(|&a, &b| values[b].total_cmp(&values[a]).then(a.cmp(&b)));
    v.truncate(n);
    v
}

/// Decode spans from per-window logits (`start_logits[w]`, `end_logits[w]` may be longer
/// than window `w`, e.g. padded rows; the extra positions are ignored). Errors when the
/// counts disagree or a row is shorter than its window.
pub fn decode(
    windows: &[Window],
    start_logits: &[Vec<f32>],
    end_logits: &[Vec<f32>],
    params: &DecodeParams,
) -> Result<Decoded> {
    if start_logits.len() != windows.len() || end_logits.len() != windows.len() {
        return Err(Error::param(
            "logits",
            format!(
                "{} start and {} end rows for {} windows",
                start_logits.len(),
                end_logits.len(),
                windows.len()
            ),
        ));
    }
    let mut null_score = f32::INFINITY;
    let mut all: Vec<Span> = Vec::new();
    for (w, win) in windows.iter().enumerate() {
        let (st, en) = (&start_logits[w], &end_logits[w]);
        if st.len() < win.len() || en.len() < win.len() {
            return Err(Error::param(
                "logits",
                format!(
                    "window {w} has {} tokens but {} start / {} end logits",
                    win.len(),
                    st.len(),
                    en.len()
                ),
            ));
        }
        null_score = null_score.min(st[win.cls_index] + en[win.cls_index]);
        let c = win.context_start..win.context_start + win.sources.len();
        let starts = top_n(st, c.clone(), params.n_best);
        let ends = top_n(en, c, params.n_best);
        for &s in &starts {
            for &e in &ends {
                if e < s || e - s + 1 > params.max_answer_len {
                    continue;
                }
                let (a, b) = (
                    win.sources[s - win.context_start],
                    win.sources[e - win.context_start],
                );
                if a.segment != b.segment || b.end_char <= a.start_char {
                    continue;
                }
                all.push(Span {
                    segment: a.segment,
                    start_char: a.start_char,
                    end_char: b.end_char,
                    score: st[s] + en[e],
                    start_logit: st[s],
                    end_logit: en[e],
                    window: w,
                    tokens: (s, e),
                });
            }
        }
    }
    if windows.is_empty() {
        null_score = f32::NEG_INFINITY;
    }
    // Best first; ties: earlier window, earlier start, shorter.
    all.sort_by(|x, y| {
        y.score
            .total_cmp(&x.score)
            .then(x.window.cmp(&y.window))
            .then(x.tokens.cmp(&y.tokens))
    });
    let mut seen = std::collections::HashSet::new();
    let nbest: Vec<Span> = all
        .into_iter()
        .filter(|s| seen.insert((s.segment, s.start_char, s.end_char)))
        .take(params.n_best.max(1))
        .collect();
    let is_null = match (nbest.first(), params.null_threshold) {
        (None, _) => true,
        (Some(b), Some(t)) => null_score - b.score > t,
        (Some(_), None) => false,
    };
    Ok(Decoded {
        nbest,
        null_score,
        is_null,
    })
}

/// The characters `start_char..end_char` of `text` (character, not byte, offsets).
pub fn char_slice(text: &str, start_char: usize, end_char: usize) -> &str {
    let mut it = text.char_indices().map(|(b, _)| b).chain([text.len()]);
    let b0 = it.nth(start_char).unwrap_or(text.len());
    let b1 = if end_char > start_char {
        it.nth(end_char - start_char - 1).unwrap_or(text.len())
    } else {
        b0
    };
    &text[b0..b1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn win(n_ctx: usize, segs: &[(usize, usize, usize)]) -> Window {
        // [CLS] q [SEP] ctx… [SEP]
        let sources = segs
            .iter()
            .map(|&(segment, start_char, end_char)| TokenSource {
                segment,
                start_char,
                end_char,
            })
            .collect::<Vec<_>>();
        assert_eq!(sources.len(), n_ctx);
        Window {
            input_ids: vec![1; 3 + n_ctx + 1],
            type_ids: vec![0; 3 + n_ctx + 1],
            context_start: 3,
            sources,
            cls_index: 0,
        }
    }

    #[test]
    fn char_slice_counts_characters() {
        assert_eq!(char_slice("Zürich ist schön", 0, 6), "Zürich");
        assert_eq!(char_slice("Zürich ist schön", 11, 16), "schön");
        assert_eq!(char_slice("abc", 1, 1), "");
        assert_eq!(char_slice("abc", 2, 3), "c");
    }

    #[test]
    fn best_span_and_length_limit() {
        let w = win(4, &[(0, 0, 3), (0, 4, 7), (0, 8, 11), (0, 12, 15)]);
        let mut st = vec![0.0; 8];
        let mut en = vec![0.0; 8];
        st[3] = 5.0; // token 0 of the context
        en[6] = 5.0; // token 3: a 4-token span
        en[4] = 3.0; // token 1: a 2-token span
        let p = DecodeParams::default();
        let d = decode(std::slice::from_ref(&w), &[st.clone()], &[en.clone()], &p).unwrap();
        let b = d.answer().unwrap();
        assert_eq!((b.start_char, b.end_char, b.score), (0, 15, 10.0));
        let short = DecodeParams {
            max_answer_len: 3,
            ..p
        };
        let d = decode(&[w], &[st], &[en], &short).unwrap();
        let b = d.answer().unwrap();
        assert_eq!((b.start_char, b.end_char, b.score), (0, 7, 8.0));
    }

    #[test]
    fn spans_never_cross_segments_and_null_threshold() {
        let w = win(2, &[(0, 0, 4), (1, 0, 5)]);
        let mut st = vec![0.0; 6];
        let mut en = vec![0.0; 6];
        st[3] = 4.0;
        en[4] = 4.0;
        st[0] = 6.0;
        en[0] = 6.0; // null 12
        let d = decode(
            std::slice::from_ref(&w),
            &[st.clone()],
            &[en.clone()],
            &DecodeParams::default(),
        )
        .unwrap();
        // The cross-segment span (3,4) is excluded.
        assert!(d.nbest.iter().all(|s| s.tokens != (3, 4)));
        assert_eq!(d.null_score, 12.0);
        assert!(!d.is_null);
        let best = d.nbest[0].score;
        let t = DecodeParams {
            null_threshold: Some(12.0 - best - 0.5),
            ..Default::default()
        };
        assert!(
            decode(std::slice::from_ref(&w), &[st.clone()], &[en.clone()], &t)
                .unwrap()
                .is_null
        );
        let t = DecodeParams {
            null_threshold: Some(12.0 - best + 0.5),
            ..Default::default()
        };
        assert!(!decode(&[w], &[st], &[en], &t).unwrap().is_null);
    }

    #[test]
    fn token_span_requires_the_whole_answer() {
        let w = win(3, &[(0, 10, 13), (0, 14, 18), (0, 19, 22)]);
        assert_eq!(w.token_span(0, 14, 18), Some((4, 4)));
        assert_eq!(w.token_span(0, 10, 22), Some((3, 5)));
        assert_eq!(w.token_span(0, 15, 20), Some((4, 5)));
        assert_eq!(w.token_span(0, 0, 12), None); // starts before the window
        assert_eq!(w.token_span(0, 19, 30), None); // ends after it
        assert_eq!(w.token_span(1, 10, 13), None); // another segment
    }
}
