//! Term-at-a-time scoring over precomputed per-posting impacts, exhaustive or with
//! safe dynamic pruning, with reusable buffers and partial top-k selection. Shared
//! by [`super::tfidf`] (exhaustive) and [`super::bm25`] (pruned).
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
//! order) with far less work when the query mixes rare and frequent terms, by safe
//! dynamic pruning in the spirit of MaxScore (Turtle & Flood 1995) with
//! term-at-a-time "quit/continue" accumulators (Moffat & Zobel 1996):
//!
//! 1. every term keeps its largest impact, so a query term adds at most
//!    `ub = query_weight · max impact` to any passage; the callers sort the query's
//!    terms by decreasing `ub / df` ([`Impacts::sort_for_search`]), so rare,
//!    high-idf terms come first, and `rem(j)` is the sum of the `ub` of the terms
//!    from `j` on;
//! 2. **phase 1** accumulates whole posting lists, as above, while keeping a
//!    histogram of the touched passages' partial scores (buckets of the float's bit
//!    pattern: exact lower edges, 32 per power of two). After term `j` it stops as
//!    soon as the histogram shows k passages above `rem(j+1)`, the most an untouched
//!    passage can still score: the k-th best final score is at least the k-th best
//!    partial score (adding impacts ≥ 0 never lowers a float sum), so no untouched
//!    passage can reach the top k;
//! 3. **phase 2** completes the touched passages one at a time in decreasing
//!    buckets of partial score, adding the remaining terms in query order (looked
//!    up in a dense impact row for terms in ≥ 1/8 of the passages, a membership
//!    bitmap with ranks for ≥ 1/64, else by binary search of the postings), and
//!    drops a passage as soon as its partial score plus the bounds of its remaining
//!    terms falls below `θ`, the k-th best completed score (before k are complete,
//!    the histogram's lower bound of the k-th best partial score). Once a whole
//!    bucket cannot reach `θ`, neither can anything below it, and the search ends.
//!
//! Each passage's score is summed in the same order (the order of the query terms)
//! on both paths, so the scores are bit-identical to exhaustive scoring. The bounds
//! are widened by the worst-case float32 rounding of a sum of that many terms, so
//! rounding never prunes a passage that exhaustive scoring would rank in the top k;
//! ties are broken by id on the surviving passages exactly as in exhaustive
//! scoring. Pruning needs impacts ≥ 0 and query weights > 0 (checked; otherwise,
//! e.g. for Robertson BM25 with negative idf, the exhaustive path runs). The extra
//! memory is the bounds (one f32 per term), dense rows (at most one f32 per
//! posting) and bitmaps (at most 1.5 times the postings of the terms that get one).
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
    /// The passages touched in this query are `touched[..n_touched]` (the buffer
    /// is as long as the largest corpus seen, so adding one needs no capacity
    /// check).
    touched: Vec<u32>,
    n_touched: usize,
    cand: Vec<(f32, u32)>,
    /// Query terms `(term id, count)`, reused by the retrievers.
    pub(crate) terms: Vec<(u32, u32)>,
    /// Query terms `(term id, query weight)`, reused by the retrievers.
    pub(crate) weights: Vec<(u32, f32)>,
    /// Pruned search: suffix sums of the terms' upper bounds.
    rem: Vec<f64>,
    /// Pruned search: the k best scores seen, for the k-th best.
    heap: BinaryHeap<Reverse<u32>>,
    /// Pruned search: histogram of the partial scores ([`bucket`]); zero outside
    /// `hist_used`, the range of buckets the last search could write.
    hist: Vec<u32>,
    hist_used: (usize, usize),
    /// Pruned search: next free position of each bucket in `order`.
    bucket_next: Vec<u32>,
    /// Pruned search: touched passages in decreasing buckets of partial score.
    order: Vec<u32>,
    /// Pruned search: the terms of phase 2 and their current limits.
    p2: Vec<Phase2Term>,
    limits: Vec<f32>,
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
    /// Of those, look-ups in a dense impact row.
    pub dense_lookups: usize,
    /// Of those, look-ups through a membership bitmap (the others are binary
    /// searches of posting lists).
    pub bitmap_lookups: usize,
    /// Passages whose score phase 2 started to complete (0 when it never ran).
    pub candidates: usize,
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
        if self.touched.len() < n {
            self.touched.resize(n, 0);
        }
        self.n_touched = 0;
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
    /// The smallest impact (when `nonnegative`).
    min_impact: f32,
    /// Per term: its row in `dense`, or `NO_ROW`.
    dense_row: Vec<u32>,
    /// Impacts of the most frequent terms as dense rows of one f32 per passage (0
    /// where the term is absent), for O(1) look-ups in phase 2 of the search.
    dense: Vec<f32>,
    /// Per term: the start of its membership bitmap in `bits` / `ranks`, or `NO_ROW`.
    bit_row: Vec<u32>,
    /// Membership bitmaps (one bit per passage, 64 per word) of the frequent terms
    /// without a dense row, and per word the number of postings before it, so
    /// that a posting's position is rank + the bits set below it.
    bits: Vec<u64>,
    ranks: Vec<u32>,
}

/// No dense row for this term.
const NO_ROW: u32 = u32::MAX;

/// Terms in at least 1/`DENSE_DF_DIVISOR` of the passages get a dense impact row,
/// most frequent first, while the rows hold no more cells than there are postings
/// (so they add at most one f32 per posting to the memory).
const DENSE_DF_DIVISOR: usize = 8;

/// Other terms in at least 1/`BITS_DF_DIVISOR` of the passages get a membership
/// bitmap with ranks: 12 bytes per 64 passages, at most 1.5 times the 8 bytes per
/// posting of their posting list and impacts.
const BITS_DF_DIVISOR: usize = 64;

/// Histogram buckets of non-negative f32 scores by bit pattern (for non-negative
/// floats the bit order is the value order): bucket = the bits shifted right by
/// `BUCKET_SHIFT`, i.e. 2^5 buckets per power of two, so [`HIST_LEN`] buckets cover
/// every non-negative finite f32. A score in bucket `i` is ≥ [`lower_edge`]`(i)`,
/// exactly, and below `lower_edge(i + 1)`.
const BUCKET_SHIFT: u32 = 23 - 5;

/// Number of histogram buckets.
const HIST_LEN: usize = 1 << (31 - BUCKET_SHIFT);

/// The histogram bucket of a non-negative, finite score.
fn bucket(score: f32) -> usize {
    (score.to_bits() >> BUCKET_SHIFT) as usize & (HIST_LEN - 1)
}

/// The smallest score in bucket `i` (`i ≤ HIST_LEN`).
fn lower_edge(i: usize) -> f32 {
    f32::from_bits((i as u32) << BUCKET_SHIFT)
}

/// A term left for phase 2 of the pruned search, with how to look it up.
#[derive(Debug, Clone, Copy)]
struct Phase2Term {
    how: Lookup,
    qw: f32,
}

/// How phase 2 finds a term's impact for a passage.
#[derive(Debug, Clone, Copy)]
enum Lookup {
    /// In its dense row, which starts here in `Impacts::dense`.
    Dense(usize),
    /// Through its bitmap (starting at this word of `Impacts::bits`) into its
    /// impacts (starting at this posting).
    Bits(usize, usize),
    /// Binary search of its postings.
    Search(u32),
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
            // `+ 0.0` turns an impact of -0.0 into +0.0 (bit order = value order for
            // the non-negative scores of the pruned search).
            weights.extend(
                p.docs
                    .iter()
                    .zip(p.tfs)
                    .map(|(&d, &tf)| impact(t, d, tf) + 0.0),
            );
            max_impact.push(
                weights[start..]
                    .iter()
                    .copied()
                    .fold(f32::NEG_INFINITY, f32::max),
            );
        }
        let nonnegative = weights.iter().all(|&w| w >= 0.0);
        let min_impact = weights.iter().copied().fold(f32::INFINITY, f32::min);
        let n = index.len();
        let mut frequent: Vec<u32> = (0..index.num_terms() as u32)
            .filter(|&t| index.df(t) * DENSE_DF_DIVISOR >= n)
            .collect();
        frequent.sort_by_key(|&t| (std::cmp::Reverse(index.df(t)), t));
        frequent.truncate(weights.len() / n.max(1));
        let mut dense_row = vec![NO_ROW; index.num_terms()];
        let mut dense = vec![0.0f32; frequent.len() * n];
        for (row, &t) in frequent.iter().enumerate() {
            dense_row[t as usize] = row as u32;
            let cells = &mut dense[row * n..(row + 1) * n];
            let imp = &weights[index.posting_range(t)];
            for (&d, &w) in index.postings(t).docs.iter().zip(imp) {
                cells[d as usize] = w;
            }
        }
        let words = n.div_ceil(64);
        let mut bit_row = vec![NO_ROW; index.num_terms()];
        let (mut bits, mut ranks) = (Vec::new(), Vec::new());
        for t in 0..index.num_terms() as u32 {
            if dense_row[t as usize] != NO_ROW || index.df(t) * BITS_DF_DIVISOR < n {
                continue;
            }
            let Ok(start) = u32::try_from(bits.len()) else {
                break; // more than 2^32 words: the remaining terms use binary search
            };
            bit_row[t as usize] = start;
            let row = bits.len();
            bits.resize(row + words, 0u64);
            for &d in index.postings(t).docs {
                bits[row + d as usize / 64] |= 1u64 << (d % 64);
            }
            let mut before = 0u32;
            for w in 0..words {
                ranks.push(before);
                before += bits[row + w].count_ones();
            }
        }
        Impacts {
            index,
            weights,
            max_impact,
            nonnegative,
            min_impact,
            dense_row,
            dense,
            bit_row,
            bits,
            ranks,
        }
    }

    /// Drop the dense impact rows (tests: exercise the posting-search path).
    #[cfg(test)]
    pub(crate) fn clear_dense_rows(&mut self) {
        self.dense_row.iter_mut().for_each(|r| *r = NO_ROW);
        self.dense.clear();
    }

    /// Drop the membership bitmaps (tests: exercise the binary-search path).
    #[cfg(test)]
    pub(crate) fn clear_bit_rows(&mut self) {
        self.bit_row.iter_mut().for_each(|r| *r = NO_ROW);
        self.bits.clear();
        self.ranks.clear();
    }

    /// Number of terms with a dense impact row.
    pub fn dense_rows(&self) -> usize {
        self.dense.len() / self.index.len().max(1)
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
    /// prunes best: decreasing upper bound per posting (`ub / df`: terms that can add
    /// much while touching few passages first), ties by term id. Any fixed order
    /// gives the same top k; use the same order for every path that must agree bit
    /// for bit.
    pub fn sort_for_search(&self, terms: &mut [(u32, f32)]) {
        let order =
            |a: &(f32, u32, f32), b: &(f32, u32, f32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        let key = |t: u32, qw: f32| self.upper_bound(t, qw) / self.index.df(t) as f32;
        // Keys computed once per term (on the stack for usual query lengths).
        const STACK: usize = 64;
        if terms.len() <= STACK {
            let mut keyed = [(0.0f32, 0u32, 0.0f32); STACK];
            for (k, &(t, qw)) in keyed.iter_mut().zip(terms.iter()) {
                *k = (key(t, qw), t, qw);
            }
            let keyed = &mut keyed[..terms.len()];
            keyed.sort_unstable_by(order);
            for (out, &(_, t, qw)) in terms.iter_mut().zip(keyed.iter()) {
                *out = (t, qw);
            }
        } else {
            let mut keyed: Vec<_> = terms.iter().map(|&(t, qw)| (key(t, qw), t, qw)).collect();
            keyed.sort_unstable_by(order);
            for (out, (_, t, qw)) in terms.iter_mut().zip(keyed) {
                *out = (t, qw);
            }
        }
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
        let n = self.index.len();
        for &(t, qw) in terms {
            add_postings(
                self.index.postings(t).docs,
                &self.weights[self.index.posting_range(t)],
                qw,
                scratch.epoch,
                &mut scratch.slots[..n],
                &mut scratch.touched,
                &mut scratch.n_touched,
                None,
            );
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
        let n_terms = terms.len();
        let prunable = self.nonnegative
            && k > 0
            && n_terms >= SEARCH_MIN_TERMS
            && terms.iter().all(|&(_, qw)| qw > 0.0 && qw.is_finite());
        // rem[j] = Σ_{i ≥ j} ub_i, exact enough in f64.
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
        // Every score is at most `top` (0 when every impact of these terms is 0:
        // nothing to prune then).
        let top = scratch.rem.first().copied().unwrap_or(0.0) * slack;
        if !(prunable && top > 0.0 && top < f32::MAX as f64) {
            self.accumulate(terms, scratch);
            scratch.stats.terms_exhaustive = n_terms;
            scratch.stats.postings_scored = terms.iter().map(|&(t, _)| self.index.df(t)).sum();
            return self.top_k(scratch, k);
        }
        let n = self.index.len();
        scratch.begin(n);
        // Every partial score is in a bucket ≤ top_bucket. Zeroing those buckets (and
        // any a previous query used above) costs less than tracking the dirty ones.
        // Every partial score is a sum of products qw·impact ≥ min qw · min impact
        // (rounding is monotone), so its bucket is in low_bucket..=top_bucket.
        let top_bucket = bucket(f32_at_least(top));
        let min_qw = terms
            .iter()
            .map(|&(_, qw)| qw)
            .fold(f32::INFINITY, f32::min);
        let low_bucket = bucket(min_qw * self.min_impact).min(top_bucket);
        if scratch.hist.len() != HIST_LEN {
            scratch.hist = vec![0; HIST_LEN];
        } else {
            let (lo, hi) = scratch.hist_used;
            scratch.hist[lo.min(low_bucket)..=hi.max(top_bucket)].fill(0);
        }
        scratch.hist_used = (low_bucket, top_bucket);
        self.search_pruned(terms, k, slack, scratch)
    }

    /// [`Impacts::search`] once pruning is possible (see the module docs).
    fn search_pruned(
        &self,
        terms: &[(u32, f32)],
        k: usize,
        slack: f64,
        scratch: &mut Scratch,
    ) -> Vec<Hit> {
        let n = self.index.len();
        let n_terms = terms.len();
        // Phase 1: whole posting lists, until the histogram of partial scores shows k
        // touched passages above r = rem[j+1]·slack, the most an untouched passage
        // can score. Then θ_lb (the histogram's lower bound of the k-th best partial
        // score, itself a lower bound of the k-th best final score, since adding
        // impacts ≥ 0 never lowers a float sum) is above every untouched passage's
        // final score.
        let top_bucket = bucket(f32_at_least(scratch.rem[0] * slack));
        let mut stop = None;
        // Locals, not fields behind `scratch`, in the hot loop (fewer reloads).
        let mut touched = std::mem::take(&mut scratch.touched);
        let mut n_touched = 0;
        let mut hist = std::mem::take(&mut scratch.hist);
        for (j, &(t, qw)) in terms.iter().enumerate() {
            add_postings(
                self.index.postings(t).docs,
                &self.weights[self.index.posting_range(t)],
                qw,
                scratch.epoch,
                &mut scratch.slots[..n],
                &mut touched,
                &mut n_touched,
                Some(&mut hist),
            );
            scratch.stats.postings_scored += self.index.df(t);
            if j + 1 == n_terms || n_touched < k {
                continue;
            }
            // Buckets from `first` up hold only partial scores > r.
            let first = bucket(f32_at_least(scratch.rem[j + 1] * slack)) + 1;
            let hist = &hist[..HIST_LEN];
            if first <= top_bucket && hist[first..=top_bucket].iter().sum::<u32>() as usize >= k {
                let (mut count, mut i) = (0, top_bucket + 1);
                while count < k {
                    i -= 1;
                    count += hist[i] as usize;
                }
                stop = Some((j + 1, lower_edge(i)));
                break;
            }
        }
        scratch.touched = touched;
        scratch.n_touched = n_touched;
        scratch.hist = hist;
        let Some((next, theta_lb)) = stop else {
            scratch.stats.terms_exhaustive = n_terms;
            return self.top_k(scratch, k);
        };
        scratch.stats.terms_exhaustive = next;

        // Phase 2, passage at a time, in decreasing order of partial score (by
        // histogram bucket): complete a passage's score term by term (in the query's
        // order) and drop it as soon as its partial score p has (p + rem)·slack < θ;
        // θ is the k-th best of the completed scores once there are k, before that
        // θ_lb. Both are lower bounds of the k-th best final score, so no passage of
        // the top k is dropped, and once a bucket's highest possible score cannot
        // reach θ, no passage in it or below can.
        let rem_next = scratch.rem[next];
        let b_min = bucket(keep_limit(theta_lb as f64, rem_next, slack).max(0.0));
        bucket_order(
            &scratch.touched[..scratch.n_touched],
            &scratch.slots[..n],
            b_min,
            top_bucket,
            &scratch.hist,
            &mut scratch.bucket_next,
            &mut scratch.order,
        );
        // The terms left, with how to look them up, and for each the limit below
        // which a partial score (after adding it) cannot reach θ any more.
        scratch.p2.clear();
        for &(t, qw) in &terms[next..] {
            let (row, bits) = (self.dense_row[t as usize], self.bit_row[t as usize]);
            let how = if row != NO_ROW {
                Lookup::Dense(row as usize * n)
            } else if bits != NO_ROW {
                Lookup::Bits(bits as usize, self.index.posting_range(t).start)
            } else {
                Lookup::Search(t)
            };
            scratch.p2.push(Phase2Term { how, qw });
        }
        let mut theta = theta_lb as f64;
        let set_limits = |limits: &mut Vec<f32>, rem: &[f64], theta: f64| {
            limits.clear();
            limits.extend(rem[next + 1..].iter().map(|&r| keep_limit(theta, r, slack)));
        };
        set_limits(&mut scratch.limits, &scratch.rem, theta);
        let mut entry_limit = keep_limit(theta, rem_next, slack);
        scratch.heap.clear();
        scratch.cand.clear();
        let (mut visited, mut lookups, mut dense_lookups, mut bitmap_lookups) = (0, 0, 0, 0);
        let mut pos = 0;
        for b in (b_min..=top_bucket).rev() {
            let (start, end) = (pos, pos + scratch.hist[b] as usize);
            pos = end;
            // Every partial score in bucket b is below lower_edge(b + 1).
            if lower_edge(b + 1) <= entry_limit {
                break;
            }
            for &d in &scratch.order[start..end] {
                let mut p = scratch.slots[d as usize].acc;
                if p < entry_limit {
                    continue;
                }
                visited += 1;
                let mut alive = true;
                for (pt, &limit) in scratch.p2.iter().zip(&scratch.limits) {
                    lookups += 1;
                    match pt.how {
                        Lookup::Dense(base) => {
                            dense_lookups += 1;
                            // An absent term adds qw·0 = +0: a score ≥ +0 is unchanged.
                            p += pt.qw * self.dense[base + d as usize];
                        }
                        Lookup::Bits(base, start) => {
                            bitmap_lookups += 1;
                            let w = base + d as usize / 64;
                            let word = self.bits[w];
                            let bit = 1u64 << (d % 64);
                            if word & bit != 0 {
                                let i = self.ranks[w] + (word & (bit - 1)).count_ones();
                                let s = pt.qw * self.weights[start + i as usize];
                                p += s;
                            }
                        }
                        Lookup::Search(t) => {
                            if let Ok(i) = self.index.postings(t).docs.binary_search(&d) {
                                let s = pt.qw * self.weights[self.index.posting_range(t).start + i];
                                p += s;
                            }
                        }
                    }
                    if p < limit {
                        alive = false;
                        break;
                    }
                }
                if alive {
                    scratch.cand.push((p + 0.0, d));
                    push_bounded(&mut scratch.heap, p, k);
                    if scratch.heap.len() == k {
                        let kth = heap_min(&scratch.heap) as f64;
                        if kth > theta {
                            theta = kth;
                            set_limits(&mut scratch.limits, &scratch.rem, theta);
                            entry_limit = keep_limit(theta, rem_next, slack);
                        }
                    }
                }
            }
        }
        scratch.stats.candidates = visited;
        scratch.stats.lookups = lookups;
        scratch.stats.dense_lookups = dense_lookups;
        scratch.stats.bitmap_lookups = bitmap_lookups;
        let mut cand = std::mem::take(&mut scratch.cand);
        self.select_and_sort(&mut cand, k);
        let ids = self.index.ids();
        let hits = cand
            .iter()
            .map(|&(s, d)| Hit::new(ids[d as usize].clone(), s))
            .collect();
        scratch.cand = cand;
        hits
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
        for &d in &scratch.touched[..scratch.n_touched] {
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
        for &d in &scratch.touched[..scratch.n_touched] {
            out[d as usize] = scratch.slots[d as usize].acc;
        }
        out
    }

    /// Passage indices that contain at least one term of the last accumulated query,
    /// in the order they were first touched.
    pub fn touched<'s>(&self, scratch: &'s Scratch) -> &'s [u32] {
        &scratch.touched[..scratch.n_touched]
    }
}

/// Add `qw · impact` over one posting list (`docs`, `imp`) to the accumulator
/// `slots`, stamping and listing in `touched` the passages seen first in this query
/// (`epoch`). With `hist`, also keep the count of touched passages per [`bucket`]
/// of their partial score.
// The accumulator's parts are separate arguments so that the hot loop keeps them
// in registers (a struct behind a reference would be reloaded after every store).
#[allow(clippy::too_many_arguments)]
fn add_postings(
    docs: &[u32],
    imp: &[f32],
    qw: f32,
    epoch: u32,
    slots: &mut [Slot],
    touched: &mut [u32],
    n_touched: &mut usize,
    hist: Option<&mut Vec<u32>>,
) {
    let mut nt = *n_touched;
    match hist {
        None => {
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
                    touched[nt] = d;
                    nt += 1;
                }
            }
        }
        Some(hist) => {
            let hist = &mut hist[..HIST_LEN];
            for (&d, &w) in docs.iter().zip(imp) {
                let slot = &mut slots[d as usize];
                let s = qw * w;
                if slot.stamp == epoch {
                    hist[bucket(slot.acc)] -= 1;
                    slot.acc += s;
                } else {
                    *slot = Slot {
                        stamp: epoch,
                        acc: s,
                    };
                    touched[nt] = d;
                    nt += 1;
                }
                hist[bucket(slot.acc)] += 1;
            }
        }
    }
    *n_touched = nt;
}

/// Counting sort of the touched passages in buckets `b_min..=b_max` by their
/// partial score, into `order`: bucket `b_max` first, then down to `b_min`, each
/// bucket's passages in touch order (`hist[b]` of them).
fn bucket_order(
    touched: &[u32],
    slots: &[Slot],
    b_min: usize,
    b_max: usize,
    hist: &[u32],
    next: &mut Vec<u32>,
    order: &mut Vec<u32>,
) {
    if next.len() < HIST_LEN {
        next.resize(HIST_LEN, 0);
    }
    // Slices, not `&mut Vec`s, in the loop: their bounds stay in registers.
    let next = &mut next[..HIST_LEN];
    let mut total = 0;
    for b in (b_min..=b_max).rev() {
        next[b] = total;
        total += hist[b];
    }
    order.clear();
    order.resize(total as usize, 0);
    let order = &mut order[..];
    for &d in touched {
        let b = bucket(slots[d as usize].acc);
        if b >= b_min {
            order[next[b] as usize] = d;
            next[b] += 1;
        }
    }
}

/// Add a non-negative score to a min-heap that keeps the `k` largest. Scores are
/// kept as bit patterns: for non-negative floats the bit order is the value order
/// (`+ 0.0` turns -0.0 into +0.0).
fn push_bounded(heap: &mut BinaryHeap<Reverse<u32>>, score: f32, k: usize) {
    let b = (score + 0.0).to_bits();
    if heap.len() < k {
        heap.push(Reverse(b));
    } else if let Some(mut top) = heap.peek_mut() {
        if b > top.0 {
            *top = Reverse(b);
        }
    }
}

/// The smallest score in a non-empty [`push_bounded`] heap.
fn heap_min(heap: &BinaryHeap<Reverse<u32>>) -> f32 {
    heap.peek().map_or(0.0, |r| f32::from_bits(r.0))
}

/// An f32 ≥ `x` (for finite `x` ≥ 0): `x` raised by a relative 2^-22 before the
/// conversion, which rounds by at most a relative 2^-24.
fn f32_at_least(x: f64) -> f32 {
    (x * (1.0 + 2f64.powi(-22))) as f32
}

/// An f32 `limit` such that every partial score `p < limit` has
/// `(p + rem)·slack < theta`, i.e. cannot reach the top k: θ/slack − rem, lowered
/// by a margin relative to the operands (covering the f64 rounding of the
/// subtraction) and by a relative 2^-22 before the conversion to f32 (covering its
/// rounding). `-∞` when nothing can be ruled out.
fn keep_limit(theta: f64, rem: f64, slack: f64) -> f32 {
    let limit = theta / slack - rem - (theta + rem) * 2f64.powi(-22);
    if limit <= 0.0 {
        f32::NEG_INFINITY
    } else {
        (limit * (1.0 - 2f64.powi(-22))) as f32
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
