//! Exhaustive term-at-a-time scoring over precomputed per-posting impacts, with
//! reusable buffers and partial top-k selection. Shared by [`super::tfidf`] and
//! [`super::bm25`].
//!
//! A lexical score that is a sum over query terms of `query_weight(t) ·
//! impact(t, d)` can precompute `impact(t, d)` for every posting when the retriever
//! is built (this is `bm25s`'s "eager sparse scoring", Lù 2024, arXiv:2407.03618).
//! A query then costs one multiply-add per posting of its terms:
//!
//! 1. **accumulate**: for each query term, walk its postings and add
//!    `query_weight · impact` into a score accumulator sized to the corpus (one
//!    `(epoch stamp, f32 score)` cell per passage, interleaved for cache locality).
//!    The stamp marks which passages were touched in this query, so the accumulator
//!    is never cleared (no O(N) work per query) and
//!    "scoreable" (contains at least one query term) is tracked exactly even when a
//!    score is 0 or negative;
//! 2. **select**: copy the touched passages into a bounded candidate buffer,
//!    partially select the best `k` with `select_nth_unstable_by` (whenever the
//!    buffer fills, which also raises an admission threshold, and once at the end;
//!    O(touched) overall), then sort those `k`.
//!    The order is descending score, ties by ascending passage id (precomputed id
//!    ranks, so no string comparisons).
//!
//! All buffers live in a [`Scratch`], either passed explicitly (`retrieve_with`) or
//! taken from a per-thread pool ([`with_thread_scratch`]), so a query allocates only
//! its analysed tokens and the returned hits.

use super::index::InvertedIndex;
use super::{check_k, Retriever};
use crate::{Hit, Query, Result, Run};
use rayon::prelude::*;
use std::cell::RefCell;
use std::sync::Arc;

/// Reusable per-query buffers. One scratch serves any number of indexes of any size
/// (it grows to the largest corpus it has seen; about 8 bytes per passage).
#[derive(Debug, Default)]
pub struct Scratch {
    /// Per passage: the epoch of the query that last touched it, and its score.
    /// Interleaved so that a posting costs one random memory access, not two.
    slots: Vec<Slot>,
    epoch: u32,
    touched: Vec<u32>,
    cand: Vec<(f32, u32)>,
    /// Query terms `(term id, count)`, reused by the retrievers.
    pub(crate) terms: Vec<(u32, u32)>,
    /// Query terms `(term id, query weight)`, reused by the retrievers.
    pub(crate) weights: Vec<(u32, f32)>,
}

impl Scratch {
    /// Empty buffers (they grow on first use).
    pub fn new() -> Self {
        Self::default()
    }

    /// Start a new query over a corpus of `n` passages.
    fn begin(&mut self, n: usize) {
        if self.slots.len() < n {
            self.slots.resize(n, Slot::default());
        }
        self.touched.clear();
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            // Wrapped after 2^32 queries: forget every old stamp.
            self.slots.iter_mut().for_each(|s| s.stamp = 0);
            self.epoch = 1;
        }
    }
}

/// Accumulator cell of one passage.
#[derive(Debug, Default, Clone, Copy)]
struct Slot {
    stamp: u32,
    acc: f32,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::new());
}

/// Run `f` with this thread's scratch buffers (a fresh one if they are already in
/// use further up the stack).
pub fn with_thread_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut s) => f(&mut s),
        Err(_) => f(&mut Scratch::new()),
    })
}

/// An index plus one precomputed impact per posting.
#[derive(Debug, Clone)]
pub struct Impacts {
    index: Arc<InvertedIndex>,
    weights: Vec<f32>,
}

impl Impacts {
    /// Precompute `impact(term id, passage index, tf)` for every posting.
    pub fn new(index: Arc<InvertedIndex>, impact: impl Fn(u32, u32, u32) -> f32) -> Self {
        let mut weights = Vec::with_capacity(index.num_postings());
        for t in 0..index.num_terms() as u32 {
            let p = index.postings(t);
            weights.extend(p.docs.iter().zip(p.tfs).map(|(&d, &tf)| impact(t, d, tf)));
        }
        Impacts { index, weights }
    }

    /// The underlying index.
    pub fn index(&self) -> &Arc<InvertedIndex> {
        &self.index
    }

    /// The impacts, parallel to the index's flat posting arrays.
    pub fn weights(&self) -> &[f32] {
        &self.weights
    }

    /// Score one query: clear the accumulator (logically) and add
    /// `query weight · impact` over the postings of every `(term id, query weight)`.
    pub fn accumulate(&self, terms: &[(u32, f32)], scratch: &mut Scratch) {
        scratch.begin(self.index.len());
        let epoch = scratch.epoch;
        let slots = &mut scratch.slots[..self.index.len()];
        let touched = &mut scratch.touched;
        for &(t, qw) in terms {
            let docs = self.index.postings(t).docs;
            let imp = &self.weights[self.index.posting_range(t)];
            for (&d, &w) in docs.iter().zip(imp) {
                let slot = &mut slots[d as usize];
                let s = qw * w;
                if slot.stamp == epoch {
                    slot.acc += s;
                } else {
                    *slot = Slot {
                        stamp: epoch,
                        acc: s,
                    };
                    touched.push(d);
                }
            }
        }
    }

    /// The best `k` passages touched by the last [`Impacts::accumulate`], sorted by
    /// descending score, ties by ascending id.
    pub fn top_k(&self, scratch: &mut Scratch, k: usize) -> Vec<Hit> {
        if k == 0 {
            return Vec::new();
        }
        let ranks = self.index.id_ranks();
        // Id ranks are only looked up on score ties (8-byte candidates select faster).
        let order = |a: &(f32, u32), b: &(f32, u32)| {
            b.0.total_cmp(&a.0)
                .then_with(|| ranks[a.1 as usize].cmp(&ranks[b.1 as usize]))
        };
        // Bounded buffer: collect candidates; whenever the buffer reaches `cap`, keep
        // only its best k (partial selection) and raise the admission threshold to
        // the k-th best score. Passages scoring below the threshold can no longer
        // enter the top k (a score equal to it still can, through the id tie-break),
        // so most of a large touched set is rejected with a single comparison.
        let cap = k.saturating_mul(2).max(1024);
        let cand = &mut scratch.cand;
        cand.clear();
        let mut threshold = f32::NEG_INFINITY;
        for &d in &scratch.touched {
            // `+ 0.0` turns -0.0 into +0.0 so that `total_cmp` agrees with `==`.
            let s = scratch.slots[d as usize].acc + 0.0;
            if s >= threshold {
                cand.push((s, d));
                if cand.len() >= cap {
                    cand.select_nth_unstable_by(k - 1, order);
                    cand.truncate(k);
                    threshold = cand[k - 1].0;
                }
            }
        }
        if cand.len() > k {
            cand.select_nth_unstable_by(k - 1, order);
            cand.truncate(k);
        }
        cand.sort_unstable_by(order);
        let ids = self.index.ids();
        cand.iter()
            .map(|&(s, d)| Hit::new(ids[d as usize].clone(), s))
            .collect()
    }

    /// Scores of every passage after the last [`Impacts::accumulate`] (0 for
    /// passages without any query term), by passage index.
    pub fn dense_scores(&self, scratch: &Scratch) -> Vec<f32> {
        let mut out = vec![0.0; self.index.len()];
        for &d in &scratch.touched {
            out[d as usize] = scratch.slots[d as usize].acc;
        }
        out
    }

    /// Passage indices that contain at least one term of the last accumulated query,
    /// in the order they were first touched.
    pub fn touched<'s>(&self, scratch: &'s Scratch) -> &'s [u32] {
        &scratch.touched
    }
}

/// [`Retriever::retrieve_all`] over a rayon thread pool (queries in parallel, each
/// worker thread with its own scratch). `k == 0` is rejected before any work.
pub fn par_retrieve_all<R: Retriever + ?Sized>(r: &R, queries: &[Query], k: usize) -> Result<Run> {
    check_k(k)?;
    let hits: Vec<Vec<Hit>> = queries
        .par_iter()
        .map(|q| r.retrieve(&q.text, k))
        .collect::<Result<_>>()?;
    Ok(queries.iter().map(|q| q.id.clone()).zip(hits).collect())
}

#[cfg(test)]
mod tests {
    use super::super::analyzer::Analyzer;
    use super::super::index::tests::passage;
    use super::*;

    fn impacts() -> Impacts {
        let c = vec![
            passage("c", "x y"),
            passage("a", "x"),
            passage("b", "y y"),
            passage("d", "z"),
        ];
        let idx = Arc::new(InvertedIndex::build(&c, &Analyzer::plain()).unwrap());
        // impact = tf, so a query's score is Σ qw · tf.
        Impacts::new(idx, |_, _, tf| tf as f32)
    }

    #[test]
    fn accumulate_select_and_tie_break() {
        let imp = impacts();
        let idx = imp.index().clone();
        let (x, y) = (idx.term_id("x").unwrap(), idx.term_id("y").unwrap());
        let mut s = Scratch::new();
        imp.accumulate(&[(x, 1.0), (y, 1.0)], &mut s);
        // c: 1 + 1 = 2, a: 1, b: 2 (tf 2) → b and c tie at 2 → by id: b, c; then a.
        let hits = imp.top_k(&mut s, 10);
        let got: Vec<(&str, f32)> = hits.iter().map(|h| (h.id.as_str(), h.score)).collect();
        assert_eq!(got, vec![("b", 2.0), ("c", 2.0), ("a", 1.0)]);
        assert_eq!(imp.top_k(&mut s, 1)[0].id, "b");
        assert_eq!(imp.dense_scores(&s), vec![2.0, 1.0, 2.0, 0.0]);

        // A second query on the same scratch sees nothing of the first.
        imp.accumulate(&[(x, 0.5)], &mut s);
        let got: Vec<(String, f32)> = imp
            .top_k(&mut s, 10)
            .into_iter()
            .map(|h| (h.id, h.score))
            .collect();
        assert_eq!(got, vec![("a".into(), 0.5), ("c".into(), 0.5)]);
        imp.accumulate(&[], &mut s);
        assert!(imp.top_k(&mut s, 3).is_empty());
    }

    #[test]
    fn epoch_wrap_resets_stamps() {
        let imp = impacts();
        let x = imp.index().term_id("x").unwrap();
        let mut s = Scratch::new();
        imp.accumulate(&[(x, 1.0)], &mut s);
        s.epoch = u32::MAX;
        imp.accumulate(&[(x, 1.0)], &mut s);
        assert_eq!(s.epoch, 1);
        assert_eq!(imp.top_k(&mut s, 5).len(), 2);
    }
}
