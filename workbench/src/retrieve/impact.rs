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
//! [`Impacts::search`] returns the same top k (same ids, bit-identical scores, same
//! order) with far less work when the query has terms of very different weights, by
//! safe dynamic pruning in the spirit of MaxScore (Turtle & Flood 1995) with
//! term-at-a-time "continue" accumulators (Moffat & Zobel 1996):
//!
//! 1. every term keeps its largest impact, so a query term's contribution to any
//!    passage is at most `ub = query_weight · max impact`; the query's terms are taken
//!    in the order given (the callers sort them by decreasing `ub`, so rare,
//!    high-idf terms come first);
//! 2. **phase 1** accumulates whole posting lists, as above, until at least k touched
//!    passages have a partial score above `R`, the sum of the `ub` of the terms not
//!    yet processed: then no untouched passage can reach the top k, since its final
//!    score is at most `R`;
//! 3. **phase 2** keeps only the touched passages whose partial score plus `R` can
//!    still reach `θ`, the k-th best partial score (a lower bound of the k-th best
//!    final score, as impacts are ≥ 0), sorted by passage index; each remaining term
//!    is looked up for those candidates only (a galloping search in its posting
//!    list), and after each term `θ` rises, `R` falls and the candidates are
//!    filtered again.
//!
//! Each passage's score is summed in the same order (the order of the query terms)
//! on both paths, so the scores are bit-identical to exhaustive scoring. The bounds
//! are widened by the worst-case float32 rounding of a sum of that many terms, so
//! rounding never prunes a passage that exhaustive scoring would rank in the top k.
//! Pruning needs impacts ≥ 0 and query weights > 0 (checked; otherwise, e.g. for
//! Robertson BM25 with negative idf, the exhaustive path runs).
//!
//! All buffers live in a [`Scratch`], either passed explicitly (`retrieve_with`) or
//! taken from a per-thread pool ([`with_thread_scratch`]), so a query allocates only
//! its analysed tokens and the returned hits.

use super::index::InvertedIndex;
use super::{check_k, Retriever};
use crate::{Hit, Query, Result, Run};
use rayon::prelude::*;
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
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
    /// Pruned search: suffix sums of the terms' upper bounds.
    rem: Vec<f64>,
    /// Pruned search: candidates `(passage index, partial score)`, by passage index.
    live: Vec<(u32, f32)>,
    /// Pruned search: the k best scores seen, for the k-th best.
    heap: BinaryHeap<Reverse<u32>>,
    /// Pruned search: one bit per passage, to list candidates in passage order.
    bits: Vec<u64>,
    /// Work counters of the last [`Impacts::search`].
    stats: SearchStats,
}

/// Work done by the last [`Impacts::search`] on a [`Scratch`] (for tests and
/// profiling).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SearchStats {
    /// Postings read by whole-list accumulation (phase 1).
    pub postings_scored: usize,
    /// Query terms accumulated as whole lists before pruning started (all of them
    /// when it never did).
    pub terms_exhaustive: usize,
    /// `(candidate, term)` look-ups in phase 2.
    pub lookups: usize,
    /// Candidates when phase 2 started (0 when it never did).
    pub candidates: usize,
    /// Phase-1 scans of the touched passages for the k-th best partial score.
    pub scans: usize,
}

impl Scratch {
    /// Empty buffers (they grow on first use).
    pub fn new() -> Self {
        Self::default()
    }

    /// Work counters of the last [`Impacts::search`] run with this scratch.
    pub fn last_search(&self) -> SearchStats {
        self.stats
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
    /// Largest impact of each term.
    max_impact: Vec<f32>,
    /// Every impact is ≥ 0 (and none is NaN): [`Impacts::search`] may prune.
    nonnegative: bool,
}

/// Queries with fewer terms are scored exhaustively by [`Impacts::search`] (one
/// posting list leaves nothing to prune).
const SEARCH_MIN_TERMS: usize = 2;

impl Impacts {
    /// Precompute `impact(term id, passage index, tf)` for every posting.
    pub fn new(index: Arc<InvertedIndex>, impact: impl Fn(u32, u32, u32) -> f32) -> Self {
        let mut weights = Vec::with_capacity(index.num_postings());
        let mut max_impact = Vec::with_capacity(index.num_terms());
        for t in 0..index.num_terms() as u32 {
            let p = index.postings(t);
            let start = weights.len();
            weights.extend(p.docs.iter().zip(p.tfs).map(|(&d, &tf)| impact(t, d, tf)));
            max_impact.push(
                weights[start..]
                    .iter()
                    .copied()
                    .fold(f32::NEG_INFINITY, f32::max),
            );
        }
        let nonnegative = weights.iter().all(|&w| w >= 0.0);
        Impacts {
            index,
            weights,
            max_impact,
            nonnegative,
        }
    }

    /// Largest impact of term `t` over its postings.
    pub fn max_impact(&self, t: u32) -> f32 {
        self.max_impact[t as usize]
    }

    /// Upper bound of term `t`'s contribution to any passage's score with query
    /// weight `qw`: `qw · max impact`, rounded as the accumulation rounds it.
    pub fn upper_bound(&self, t: u32, qw: f32) -> f32 {
        qw * self.max_impact[t as usize]
    }

    /// Sort query terms `(term id, query weight)` into the order [`Impacts::search`]
    /// prunes best: decreasing upper bound, ties by term id. Any fixed order gives
    /// the same top k; use the same order for every path that must agree bit for bit.
    pub fn sort_for_search(&self, terms: &mut [(u32, f32)]) {
        terms.sort_by(|a, b| {
            self.upper_bound(b.0, b.1)
                .total_cmp(&self.upper_bound(a.0, a.1))
                .then(a.0.cmp(&b.0))
        });
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
        for &(t, qw) in terms {
            self.add_term(t, qw, scratch);
        }
    }

    /// Add `qw · impact` over the postings of term `t` to the accumulator.
    fn add_term(&self, t: u32, qw: f32, scratch: &mut Scratch) {
        let epoch = scratch.epoch;
        let slots = &mut scratch.slots[..self.index.len()];
        let touched = &mut scratch.touched;
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

    /// The best `k` passages for the query terms `(term id, query weight)`: the same
    /// hits, bit for bit, as [`Impacts::accumulate`] followed by [`Impacts::top_k`]
    /// with the terms in the same order, but with safe dynamic pruning (see the
    /// [module docs](self)) when every impact is ≥ 0 and every query weight is > 0.
    /// The terms are summed in the order given; [`Impacts::sort_for_search`] gives
    /// the order that prunes best.
    ///
    /// After the call the scratch holds no accumulator for [`Impacts::dense_scores`]
    /// or [`Impacts::touched`] (use [`Impacts::accumulate`] for those).
    pub fn search(&self, terms: &[(u32, f32)], k: usize, scratch: &mut Scratch) -> Vec<Hit> {
        scratch.stats = SearchStats::default();
        let prunable = self.nonnegative
            && k > 0
            && terms.len() >= SEARCH_MIN_TERMS
            && terms.iter().all(|&(_, qw)| qw > 0.0 && qw.is_finite());
        if !prunable {
            self.accumulate(terms, scratch);
            scratch.stats.terms_exhaustive = terms.len();
            scratch.stats.postings_scored = terms.iter().map(|&(t, _)| self.index.df(t)).sum();
            return self.top_k(scratch, k);
        }
        // rem[j] = Σ_{i ≥ j} ub_i, exact enough in f64.
        let n_terms = terms.len();
        scratch.rem.clear();
        scratch.rem.resize(n_terms + 1, 0.0);
        for j in (0..n_terms).rev() {
            let (t, qw) = terms[j];
            scratch.rem[j] = scratch.rem[j + 1] + self.upper_bound(t, qw) as f64;
        }
        // A passage's float32 score is a sum of at most n_terms non-negative float32
        // products, each ≤ its term's `ub` (rounding is monotone), so it is at most
        // (exact sum of the bounds) · (1 + u)^n_terms with u = 2^-24. `slack` is
        // twice that margin (it also covers the f64 rounding of the bound sums).
        let slack = 1.0 + (n_terms as f64 + 1.0) * f32::EPSILON as f64;

        scratch.begin(self.index.len());
        // Phase 1. `theta_seen` is the k-th best partial score at the last scan of the
        // touched passages and `ub_seen` the bound of the terms added by then: since
        // no passage gains more than the bounds added since, the k-th best partial
        // score now is at most theta_seen + (ub_done − ub_seen), and a scan that
        // cannot succeed is skipped (skipping only delays pruning, never changes hits).
        let (mut theta_seen, mut ub_seen, mut ub_done) = (0.0f64, 0.0f64, 0.0f64);
        let mut stop = None;
        for (j, &(t, qw)) in terms.iter().enumerate() {
            self.add_term(t, qw, scratch);
            scratch.stats.postings_scored += self.index.df(t);
            ub_done += self.upper_bound(t, qw) as f64;
            if j + 1 == n_terms || scratch.touched.len() < k {
                continue;
            }
            // An untouched passage scores at most r = rem[j+1]·slack. Pruning can start
            // once the k-th best partial score θ is above r: the k-th best final score
            // is at least θ (adding impacts ≥ 0 never lowers a float sum).
            let r = scratch.rem[j + 1] * slack;
            if (theta_seen + (ub_done - ub_seen)) * slack <= r {
                continue;
            }
            let slots = &scratch.slots;
            let theta = kth_best(
                scratch.touched.iter().map(|&d| slots[d as usize].acc),
                k,
                &mut scratch.heap,
            ) as f64;
            scratch.stats.scans += 1;
            (theta_seen, ub_seen) = (theta, ub_done);
            if theta > r {
                stop = Some((j + 1, theta));
                break;
            }
        }
        let Some((next, theta)) = stop else {
            scratch.stats.terms_exhaustive = n_terms;
            return self.top_k(scratch, k);
        };
        scratch.stats.terms_exhaustive = next;
        let rem = scratch.rem[next];
        self.collect_candidates(scratch, |p| (p as f64 + rem) * slack >= theta);
        scratch.stats.candidates = scratch.live.len();
        // Phase 2.
        for (j, &(t, qw)) in terms.iter().enumerate().skip(next) {
            self.add_term_to_candidates(t, qw, scratch);
            if j + 1 < n_terms && scratch.live.len() > k {
                let theta = kth_best(scratch.live.iter().map(|c| c.1), k, &mut scratch.heap) as f64;
                let r = scratch.rem[j + 1];
                scratch
                    .live
                    .retain(|&(_, p)| (p as f64 + r) * slack >= theta);
            }
        }
        self.top_k_of_candidates(scratch, k)
    }

    /// Phase 2 start: the touched passages whose partial score passes `keep`, into
    /// `scratch.live` in passage order.
    fn collect_candidates(&self, scratch: &mut Scratch, keep: impl Fn(f32) -> bool) {
        let slots = &scratch.slots;
        let live = &mut scratch.live;
        live.clear();
        let n = self.index.len();
        if scratch.touched.len().saturating_mul(16) < n / 64 {
            // Few touched passages in a large corpus: sort them.
            live.extend(
                scratch
                    .touched
                    .iter()
                    .map(|&d| (d, slots[d as usize].acc))
                    .filter(|&(_, p)| keep(p)),
            );
            live.sort_unstable_by_key(|c| c.0);
        } else {
            // Mark them in a bitmap and read it in order.
            let bits = &mut scratch.bits;
            bits.clear();
            bits.resize(n.div_ceil(64), 0);
            for &d in &scratch.touched {
                if keep(slots[d as usize].acc) {
                    bits[d as usize / 64] |= 1u64 << (d % 64);
                }
            }
            for (w, &word) in bits.iter().enumerate() {
                let mut word = word;
                while word != 0 {
                    let d = (w * 64) as u32 + word.trailing_zeros();
                    live.push((d, slots[d as usize].acc));
                    word &= word - 1;
                }
            }
        }
    }

    /// Phase 2: add term `t`'s contribution to every candidate (galloping search of
    /// the candidates, in passage order, through the term's posting list).
    fn add_term_to_candidates(&self, t: u32, qw: f32, scratch: &mut Scratch) {
        let docs = self.index.postings(t).docs;
        let imp = &self.weights[self.index.posting_range(t)];
        scratch.stats.lookups += scratch.live.len();
        let mut pos = 0;
        for c in scratch.live.iter_mut() {
            pos = gallop(docs, pos, c.0);
            if pos == docs.len() {
                break;
            }
            if docs[pos] == c.0 {
                let s = qw * imp[pos];
                c.1 += s;
            }
        }
    }

    /// The best `k` candidates of phase 2, in hit order.
    fn top_k_of_candidates(&self, scratch: &mut Scratch, k: usize) -> Vec<Hit> {
        let cand = &mut scratch.cand;
        cand.clear();
        cand.extend(scratch.live.iter().map(|&(d, s)| (s + 0.0, d)));
        self.select_and_sort(cand, k);
        let ids = self.index.ids();
        cand.iter()
            .map(|&(s, d)| Hit::new(ids[d as usize].clone(), s))
            .collect()
    }

    /// Keep the best `k` of `cand` (score desc, ties by ascending id), sorted.
    fn select_and_sort(&self, cand: &mut Vec<(f32, u32)>, k: usize) {
        let ranks = self.index.id_ranks();
        let order = |a: &(f32, u32), b: &(f32, u32)| {
            b.0.total_cmp(&a.0)
                .then_with(|| ranks[a.1 as usize].cmp(&ranks[b.1 as usize]))
        };
        if cand.len() > k {
            cand.select_nth_unstable_by(k - 1, order);
            cand.truncate(k);
        }
        cand.sort_unstable_by(order);
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
        self.select_and_sort(cand, k);
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

/// The `k`-th largest of `scores` (`k ≥ 1`, at least `k` scores, all ≥ 0 or -0.0),
/// with a bounded min-heap of their bit patterns (for non-negative floats the bit
/// order is the value order; `+ 0.0` turns -0.0 into +0.0).
fn kth_best(
    scores: impl Iterator<Item = f32>,
    k: usize,
    heap: &mut BinaryHeap<Reverse<u32>>,
) -> f32 {
    heap.clear();
    for s in scores {
        let b = (s + 0.0).to_bits();
        if heap.len() < k {
            heap.push(Reverse(b));
        } else if let Some(mut top) = heap.peek_mut() {
            if b > top.0 {
                *top = Reverse(b);
            }
        }
    }
    heap.peek().map_or(0.0, |r| f32::from_bits(r.0))
}

/// First position `≥ from` in the ascending `docs` whose value is `≥ target`
/// (`docs.len()` if none): exponential then binary search.
fn gallop(docs: &[u32], from: usize, target: u32) -> usize {
    let mut lo = from;
    let mut step = 1;
    let mut hi = from;
    while hi < docs.len() && docs[hi] < target {
        lo = hi + 1;
        hi += step;
        step *= 2;
    }
    let hi = hi.min(docs.len());
    lo + docs[lo..hi].partition_point(|&x| x < target)
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
