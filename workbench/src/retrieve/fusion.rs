//! Fusion of several ranked lists into one, and [`Fused`], a retriever that fuses
//! the results of several retrievers (hybrid dense + sparse, RRF, CombSUM, …).
//!
//! Every method takes ranked lists `L_1 … L_m` (each a `Vec<Hit>`, best first, as
//! [`Retriever::retrieve`] returns them) and per-list weights `w_i` (default 1 each),
//! and scores every passage that appears in at least one list:
//!
//! | method | fused score of passage `d` | source |
//! |---|---|---|
//! | [`FusionMethod::MinMax`] | `Σ_i w_i · mm_i(d)` | report 001's hybrid: `w·norm(dense) + (1−w)·norm(sparse)` ([`Fusion::hybrid`]) |
//! | [`FusionMethod::ZScore`] | `Σ_i w_i · z_i(d)` | same, with z-score normalisation |
//! | [`FusionMethod::Rrf`] | `Σ_{i: d∈L_i} w_i / (k + rank_i(d))`, rank 1-based, `k = 60` | report 002; Cormack, Clarke & Büttcher, SIGIR 2009 |
//! | [`FusionMethod::CombSum`] | `Σ_i w_i · mm_i(d)` | Fox & Shaw, TREC-2 (1994), on min-max scores |
//! | [`FusionMethod::CombMnz`] | `|{i: d∈L_i}| · Σ_i w_i · mm_i(d)` | Fox & Shaw (1994), on min-max scores |
//!
//! Normalisation, per list, over the scores in that list:
//! - min-max `mm_i(d) = (s − min) / (max − min)`; when all scores are equal
//!   (including a single hit) every hit gets 1;
//! - z-score `z_i(d) = (s − mean) / std` with the population standard deviation
//!   (`ddof = 0`, like `numpy.std`); when `std = 0` every hit gets 0.
//!
//! **Missing passages.** A passage absent from list `i` gets that list's *normalised
//! minimum*: 0 for min-max (so [`FusionMethod::MinMax`] with unit weights is exactly
//! CombSUM), the lowest z-score of the list for z-score (an empty list contributes
//! 0). RRF and CombMNZ simply skip lists that do not contain the passage.
//!
//! The fused list holds every passage of every input list, sorted by descending fused
//! score, ties by ascending id. If a list repeats an id, only its first (best)
//! occurrence counts.

use super::impact::par_retrieve_all;
use super::{check_k, top_k, Retriever};
use crate::{Error, Hit, Query, Result, Run};
use std::collections::HashMap;

/// RRF's rank constant `k` from Cormack et al. (2009) and report 002.
pub const RRF_K: f32 = 60.0;

/// How to combine the lists (see the [module docs](self) for formulas).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FusionMethod {
    /// Weighted sum of min-max normalised scores (report 001's hybrid).
    MinMax,
    /// Weighted sum of z-score normalised scores.
    ZScore,
    /// Reciprocal Rank Fusion.
    Rrf {
        /// The constant `k` in `1 / (k + rank)`, finite and ≥ 0 (default [`RRF_K`] = 60;
        /// Elasticsearch calls it `rank_constant`).
        rank_constant: f32,
    },
    /// CombSUM of min-max normalised scores.
    CombSum,
    /// CombMNZ of min-max normalised scores.
    CombMnz,
}

impl FusionMethod {
    /// RRF with `k = 60`.
    pub fn rrf() -> Self {
        FusionMethod::Rrf {
            rank_constant: RRF_K,
        }
    }

    /// Tag used in names, e.g. `minmax`, `rrf-k_60`.
    pub fn tag(&self) -> String {
        match self {
            FusionMethod::MinMax => "minmax".into(),
            FusionMethod::ZScore => "zscore".into(),
            FusionMethod::Rrf { rank_constant } => format!("rrf-k_{rank_constant}"),
            FusionMethod::CombSum => "combsum".into(),
            FusionMethod::CombMnz => "combmnz".into(),
        }
    }
}

/// A validated fusion method with optional per-list weights.
#[derive(Debug, Clone, PartialEq)]
pub struct Fusion {
    method: FusionMethod,
    weights: Option<Vec<f32>>,
}

impl Fusion {
    /// Validate and build. `weights = None` means weight 1 for every list.
    ///
    /// Errors ([`Error::InvalidParam`]): `rank_constant` negative or not finite;
    /// `weights` empty, with a negative or non-finite entry, or all zero. The number
    /// of weights is checked against the number of lists when fusing (and by
    /// [`Fused::new`] against the number of retrievers).
    pub fn new(method: FusionMethod, weights: Option<Vec<f32>>) -> Result<Self> {
        if let FusionMethod::Rrf { rank_constant } = method {
            if !(rank_constant.is_finite() && rank_constant >= 0.0) {
                return Err(Error::param(
                    "rank_constant",
                    format!("must be finite and ≥ 0, got {rank_constant}"),
                ));
            }
        }
        if let Some(w) = &weights {
            validate_weights(w)?;
        }
        Ok(Fusion { method, weights })
    }

    /// Report 001's hybrid: `dense_weight · minmax(dense) + (1 − dense_weight) ·
    /// minmax(sparse)`, for lists given in the order `[dense, sparse]`.
    /// `dense_weight` must be in `[0, 1]`.
    pub fn hybrid(dense_weight: f32) -> Result<Self> {
        if !(0.0..=1.0).contains(&dense_weight) {
            return Err(Error::param(
                "dense_weight",
                format!("must be in [0, 1], got {dense_weight}"),
            ));
        }
        Fusion::new(
            FusionMethod::MinMax,
            Some(vec![dense_weight, 1.0 - dense_weight]),
        )
    }

    /// Unweighted RRF with `k = 60`.
    pub fn rrf() -> Self {
        Fusion {
            method: FusionMethod::rrf(),
            weights: None,
        }
    }

    /// The method.
    pub fn method(&self) -> FusionMethod {
        self.method
    }

    /// The explicit weights, if any (`None` = 1 per list).
    pub fn weights(&self) -> Option<&[f32]> {
        self.weights.as_deref()
    }

    /// Tag used in names: the method tag plus `-w_{w1}_{w2}…` when weighted.
    pub fn tag(&self) -> String {
        match &self.weights {
            None => self.method.tag(),
            Some(w) => {
                let ws: Vec<String> = w.iter().map(|x| x.to_string()).collect();
                format!("{}-w_{}", self.method.tag(), ws.join("_"))
            }
        }
    }

    fn resolved_weights(&self, n: usize) -> Result<Vec<f64>> {
        match &self.weights {
            None => Ok(vec![1.0; n]),
            Some(w) if w.len() == n => Ok(w.iter().map(|&x| x as f64).collect()),
            Some(w) => Err(Error::param(
                "weights",
                format!("{} weights for {} ranked lists", w.len(), n),
            )),
        }
    }

    /// Fuse `lists` into one list of every passage they contain, best first (ties by
    /// id). Errors when the number of weights differs from the number of lists.
    pub fn fuse(&self, lists: &[Vec<Hit>]) -> Result<Vec<Hit>> {
        let w = self.resolved_weights(lists.len())?;
        struct Acc {
            sum: f64,
            count: u32,
            last_list: usize,
        }
        let mut acc: HashMap<&str, Acc> = HashMap::new();
        let mut baseline = 0.0f64;
        for (i, list) in lists.iter().enumerate() {
            // Per-hit contribution for list i, relative to the list's floor (the
            // value a missing passage gets), which is added to everyone via `baseline`.
            let contrib: Vec<f64> = match self.method {
                FusionMethod::Rrf { rank_constant } => (1..=list.len())
                    .map(|r| w[i] / (rank_constant as f64 + r as f64))
                    .collect(),
                FusionMethod::ZScore => {
                    let z = z_score(list);
                    let floor = z.iter().copied().fold(f64::INFINITY, f64::min);
                    let floor = if floor.is_finite() { floor } else { 0.0 };
                    baseline += w[i] * floor;
                    z.iter().map(|&x| w[i] * (x - floor)).collect()
                }
                FusionMethod::MinMax | FusionMethod::CombSum | FusionMethod::CombMnz => {
                    min_max(list).iter().map(|&x| w[i] * x).collect()
                }
            };
            for (h, c) in list.iter().zip(contrib) {
                let e = acc.entry(h.id.as_str()).or_insert(Acc {
                    sum: 0.0,
                    count: 0,
                    last_list: usize::MAX,
                });
                if e.last_list == i {
                    continue; // repeated id within one list: keep the first
                }
                e.last_list = i;
                e.sum += c;
                e.count += 1;
            }
        }
        let hits: Vec<Hit> = acc
            .into_iter()
            .map(|(id, a)| {
                let s = match self.method {
                    FusionMethod::CombMnz => a.count as f64 * a.sum,
                    _ => baseline + a.sum,
                };
                Hit::new(id, s as f32)
            })
            .collect();
        top_k(hits, usize::MAX)
    }
}

fn validate_weights(w: &[f32]) -> Result<()> {
    if w.is_empty() {
        return Err(Error::param("weights", "no weights given"));
    }
    if let Some(x) = w.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
        return Err(Error::param(
            "weights",
            format!("every weight must be finite and ≥ 0, got {x}"),
        ));
    }
    if w.iter().all(|&x| x == 0.0) {
        return Err(Error::param("weights", "all weights are zero"));
    }
    Ok(())
}

/// Min-max normalised scores of `hits`, in the same order: `(s − min)/(max − min)`,
/// or 1 for every hit when all scores are equal.
pub fn min_max(hits: &[Hit]) -> Vec<f64> {
    let (lo, hi) = hits
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| {
            (l.min(x.score as f64), h.max(x.score as f64))
        });
    let range = hi - lo;
    hits.iter()
        .map(|h| {
            if range > 0.0 {
                (h.score as f64 - lo) / range
            } else {
                1.0
            }
        })
        .collect()
}

/// Z-score normalised scores of `hits`, in the same order: `(s − mean)/std` with the
/// population standard deviation, or 0 for every hit when `std = 0`.
pub fn z_score(hits: &[Hit]) -> Vec<f64> {
    if hits.is_empty() {
        return Vec::new();
    }
    let n = hits.len() as f64;
    let mean = hits.iter().map(|h| h.score as f64).sum::<f64>() / n;
    let var = hits
        .iter()
        .map(|h| (h.score as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    let std = var.sqrt();
    hits.iter()
        .map(|h| {
            if std > 0.0 {
                (h.score as f64 - mean) / std
            } else {
                0.0
            }
        })
        .collect()
}

/// A retriever that fuses several retrievers: it asks each for `max(depth, k)`
/// candidates, fuses the lists with a [`Fusion`] and keeps the top `k`.
///
/// Taking `max(depth, k)` keeps the [`Retriever`] contract: a `k` beyond the corpus
/// returns every passage any inner retriever can score.
pub struct Fused {
    retrievers: Vec<Box<dyn Retriever>>,
    fusion: Fusion,
    depth: usize,
}

impl Fused {
    /// Validate and build: at least one retriever ([`Error::Empty`]), `depth ≥ 1`,
    /// and as many weights as retrievers when weights are given.
    pub fn new(retrievers: Vec<Box<dyn Retriever>>, fusion: Fusion, depth: usize) -> Result<Self> {
        if retrievers.is_empty() {
            return Err(Error::Empty(
                "fused retriever: no retrievers to fuse".into(),
            ));
        }
        if depth == 0 {
            return Err(Error::param("depth", "must be at least 1"));
        }
        if let Some(w) = fusion.weights() {
            if w.len() != retrievers.len() {
                return Err(Error::param(
                    "weights",
                    format!("{} weights for {} retrievers", w.len(), retrievers.len()),
                ));
            }
        }
        Ok(Fused {
            retrievers,
            fusion,
            depth,
        })
    }

    /// Report 001's hybrid: `w · minmax(dense) + (1 − w) · minmax(sparse)` over
    /// `depth` candidates from each.
    pub fn hybrid(
        dense: Box<dyn Retriever>,
        sparse: Box<dyn Retriever>,
        dense_weight: f32,
        depth: usize,
    ) -> Result<Self> {
        Fused::new(vec![dense, sparse], Fusion::hybrid(dense_weight)?, depth)
    }

    /// The inner retrievers, in list order.
    pub fn retrievers(&self) -> &[Box<dyn Retriever>] {
        &self.retrievers
    }

    /// The fusion method.
    pub fn fusion(&self) -> &Fusion {
        &self.fusion
    }

    /// Candidates asked from each retriever (at least `k`).
    pub fn depth(&self) -> usize {
        self.depth
    }
}

impl Retriever for Fused {
    /// `{fusion tag}-depth_{depth}({name1},{name2},…)`, e.g.
    /// `rrf-k_60-depth_100(bm25-k1_0.9-b_0.4-lucene,tfidf-cosine)`.
    fn name(&self) -> String {
        let names: Vec<String> = self.retrievers.iter().map(|r| r.name()).collect();
        format!(
            "{}-depth_{}({})",
            self.fusion.tag(),
            self.depth,
            names.join(",")
        )
    }

    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        check_k(k)?;
        let depth = self.depth.max(k);
        let lists = self
            .retrievers
            .iter()
            .map(|r| r.retrieve(query, depth))
            .collect::<Result<Vec<_>>>()?;
        let mut fused = self.fusion.fuse(&lists)?;
        fused.truncate(k);
        Ok(fused)
    }

    /// Queries in parallel (rayon).
    fn retrieve_all(&self, queries: &[Query], k: usize) -> Result<Run> {
        par_retrieve_all(self, queries, k)
    }
}

#[cfg(test)]
mod tests {
    use super::super::analyzer::Analyzer;
    use super::super::bm25::{Bm25, Bm25Params};
    use super::super::index::tests::passage;
    use super::super::tfidf::{TfIdf, TfIdfVariant};
    use super::*;

    fn list(items: &[(&str, f32)]) -> Vec<Hit> {
        items.iter().map(|&(id, s)| Hit::new(id, s)).collect()
    }

    fn ranked(hits: &[Hit]) -> Vec<(&str, f32)> {
        hits.iter().map(|h| (h.id.as_str(), h.score)).collect()
    }

    fn close(hits: &[Hit], want: &[(&str, f64)]) {
        assert_eq!(hits.len(), want.len(), "{hits:?}");
        for (h, (id, s)) in hits.iter().zip(want) {
            assert_eq!(h.id, *id, "{hits:?}");
            assert!((h.score as f64 - s).abs() < 1e-5, "{hits:?} vs {want:?}");
        }
    }

    /// dense: a 0.9, b 0.5, c 0.1 → min-max a 1, b 0.5, c 0.
    /// sparse: c 12, d 6, a 3 → min-max c 1, d (6−3)/9 = 0.333333, a 0.
    fn dense_sparse() -> Vec<Vec<Hit>> {
        vec![
            list(&[("a", 0.9), ("b", 0.5), ("c", 0.1)]),
            list(&[("c", 12.0), ("d", 6.0), ("a", 3.0)]),
        ]
    }

    #[test]
    fn normalisations() {
        let l = list(&[("x", 3.0), ("y", 2.0), ("z", 1.0)]);
        assert_eq!(min_max(&l), vec![1.0, 0.5, 0.0]);
        // mean 2, population std sqrt(2/3) = 0.816497 → ±1/0.816497 = ±1.224745.
        let z = z_score(&l);
        assert!((z[0] - 1.224745).abs() < 1e-6 && z[1] == 0.0 && (z[2] + 1.224745).abs() < 1e-6);
        assert_eq!(min_max(&list(&[("x", 4.0), ("y", 4.0)])), vec![1.0, 1.0]);
        assert_eq!(z_score(&list(&[("x", 4.0)])), vec![0.0]);
        assert!(min_max(&[]).is_empty() && z_score(&[]).is_empty());
    }

    /// hybrid w = 0.7: a = 0.7·1 + 0.3·0 = 0.7; b = 0.7·0.5 + 0.3·0 (missing) = 0.35;
    /// c = 0.7·0 + 0.3·1 = 0.3; d = 0.7·0 (missing) + 0.3·0.333333 = 0.1.
    #[test]
    fn report_001_hybrid_min_max() {
        let f = Fusion::hybrid(0.7).unwrap();
        close(
            &f.fuse(&dense_sparse()).unwrap(),
            &[("a", 0.7), ("b", 0.35), ("c", 0.3), ("d", 0.1)],
        );
        assert_eq!(f.tag(), "minmax-w_0.7_0.3");
    }

    /// dense z: mean 0.5, std sqrt(0.32/3) = 0.326599 → a 1.224745, b 0, c −1.224745
    /// (floor −1.224745). sparse z: mean 7, std sqrt(42/3) = 3.741657 → c 1.336306,
    /// d −0.267261, a −1.069045 (floor −1.069045). Unit weights:
    /// a = 1.224745 − 1.069045 = 0.155700; c = −1.224745 + 1.336306 = 0.111561;
    /// b = 0 + (−1.069045) = −1.069045; d = −1.224745 − 0.267261 = −1.492006.
    #[test]
    fn z_score_fusion_missing_gets_list_minimum() {
        let f = Fusion::new(FusionMethod::ZScore, None).unwrap();
        close(
            &f.fuse(&dense_sparse()).unwrap(),
            &[
                ("a", 0.155700),
                ("c", 0.111561),
                ("b", -1.069045),
                ("d", -1.492006),
            ],
        );
    }

    /// A = [a, b, c], B = [c, a, d], k = 60:
    /// a = 1/61 + 1/62 = 0.016393 + 0.016129 = 0.032522;
    /// c = 1/63 + 1/61 = 0.015873 + 0.016393 = 0.032266;
    /// b = 1/62 = 0.016129; d = 1/63 = 0.015873.
    #[test]
    fn rrf_k60() {
        let lists = vec![
            list(&[("a", 9.0), ("b", 8.0), ("c", 7.0)]),
            list(&[("c", 0.3), ("a", 0.2), ("d", 0.1)]),
        ];
        close(
            &Fusion::rrf().fuse(&lists).unwrap(),
            &[
                ("a", 0.032522),
                ("c", 0.032266),
                ("b", 0.016129),
                ("d", 0.015873),
            ],
        );
        // Weighted: w = (2, 1): a = 2/61 + 1/62 = 0.048916.
        let w = Fusion::new(FusionMethod::rrf(), Some(vec![2.0, 1.0])).unwrap();
        assert!((w.fuse(&lists).unwrap()[0].score as f64 - 0.048916).abs() < 1e-6);
        // k = 0 is plain reciprocal rank: a = 1 + 1/2.
        let k0 = Fusion::new(FusionMethod::Rrf { rank_constant: 0.0 }, None).unwrap();
        assert_eq!(k0.fuse(&lists).unwrap()[0].score, 1.5);
    }

    /// min-max as in `dense_sparse`: CombSUM a = 1 + 0 = 1, c = 0 + 1 = 1 (tie → id
    /// order a, c), b = 0.5, d = 0.333333. CombMNZ multiplies by the number of lists
    /// holding the passage: a = 2, c = 2, b = 0.5, d = 0.333333.
    #[test]
    fn comb_sum_and_mnz() {
        let sum = Fusion::new(FusionMethod::CombSum, None).unwrap();
        close(
            &sum.fuse(&dense_sparse()).unwrap(),
            &[("a", 1.0), ("c", 1.0), ("b", 0.5), ("d", 0.333333)],
        );
        let mnz = Fusion::new(FusionMethod::CombMnz, None).unwrap();
        close(
            &mnz.fuse(&dense_sparse()).unwrap(),
            &[("a", 2.0), ("c", 2.0), ("b", 0.5), ("d", 0.333333)],
        );
        // Unit-weight MinMax is CombSUM.
        let mm = Fusion::new(FusionMethod::MinMax, None).unwrap();
        assert_eq!(
            ranked(&mm.fuse(&dense_sparse()).unwrap()),
            ranked(&sum.fuse(&dense_sparse()).unwrap())
        );
    }

    #[test]
    fn edge_lists() {
        let f = Fusion::hybrid(0.5).unwrap();
        assert!(f.fuse(&[vec![], vec![]]).unwrap().is_empty());
        // One empty list: the other decides; single hit normalises to 1.
        close(
            &f.fuse(&[vec![], list(&[("x", 3.0)])]).unwrap(),
            &[("x", 0.5)],
        );
        // A repeated id counts once per list (its best rank).
        let rrf = Fusion::rrf()
            .fuse(&[list(&[("x", 2.0), ("x", 1.0)])])
            .unwrap();
        close(&rrf, &[("x", 1.0 / 61.0)]);
    }

    #[test]
    fn weights_and_constants_are_validated() {
        let bad: Vec<(Option<Vec<f32>>, FusionMethod, &str)> = vec![
            (Some(vec![]), FusionMethod::MinMax, "weights"),
            (Some(vec![1.0, -0.5]), FusionMethod::MinMax, "weights"),
            (Some(vec![f32::NAN, 1.0]), FusionMethod::CombSum, "weights"),
            (
                Some(vec![f32::INFINITY, 1.0]),
                FusionMethod::ZScore,
                "weights",
            ),
            (Some(vec![0.0, 0.0]), FusionMethod::MinMax, "weights"),
            (
                None,
                FusionMethod::Rrf {
                    rank_constant: -1.0,
                },
                "rank_constant",
            ),
            (
                None,
                FusionMethod::Rrf {
                    rank_constant: f32::NAN,
                },
                "rank_constant",
            ),
        ];
        for (w, m, field) in bad {
            match Fusion::new(m, w.clone()) {
                Err(Error::InvalidParam { name, .. }) => assert_eq!(name, field),
                other => panic!("{m:?} {w:?}: {other:?}"),
            }
        }
        for w in [-0.1, 1.1, f32::NAN] {
            assert!(matches!(
                Fusion::hybrid(w),
                Err(Error::InvalidParam {
                    name: "dense_weight",
                    ..
                })
            ));
        }
        let f = Fusion::new(FusionMethod::MinMax, Some(vec![1.0, 0.0])).unwrap();
        let e = f.fuse(&[vec![]]).unwrap_err();
        assert!(
            matches!(
                e,
                Error::InvalidParam {
                    name: "weights",
                    ..
                }
            ),
            "{e}"
        );
    }

    fn corpus() -> Vec<crate::Passage> {
        vec![
            passage("p1", "the quick brown fox"),
            passage("p2", "the lazy dog sleeps"),
            passage("p3", "a quick dog jumps over the fox"),
        ]
    }

    fn inner() -> Vec<Box<dyn Retriever>> {
        let a = Analyzer::default();
        vec![
            Box::new(Bm25::build(&corpus(), &a, Bm25Params::default()).unwrap()),
            Box::new(TfIdf::build(&corpus(), &a, TfIdfVariant::cosine()).unwrap()),
        ]
    }

    #[test]
    fn fused_retriever() {
        let f = Fused::new(inner(), Fusion::rrf(), 2).unwrap();
        assert_eq!(
            f.name(),
            "rrf-k_60-depth_2(bm25-k1_0.9-b_0.4-lucene,tfidf-cosine)"
        );
        // k beyond depth and corpus: every scoreable passage.
        let hits = f.retrieve("quick fox", 10).unwrap();
        let mut ids: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
        ids.sort();
        assert_eq!(ids, ["p1", "p3"]);
        assert_eq!(f.retrieve("quick fox", 1).unwrap().len(), 1);
        assert!(f.retrieve("", 3).unwrap().is_empty());
        assert!(matches!(
            f.retrieve("fox", 0),
            Err(Error::InvalidParam { name: "k", .. })
        ));

        let h = Fused::hybrid(inner().remove(1), inner().remove(0), 0.5, 10).unwrap();
        assert!(h.name().starts_with("minmax-w_0.5_0.5-depth_10("));
        assert_eq!(h.retrieve("lazy dog", 1).unwrap()[0].id, "p2");

        assert!(matches!(
            Fused::new(vec![], Fusion::rrf(), 10),
            Err(Error::Empty(_))
        ));
        assert!(matches!(
            Fused::new(inner(), Fusion::rrf(), 0),
            Err(Error::InvalidParam { name: "depth", .. })
        ));
        let three = Fusion::new(FusionMethod::MinMax, Some(vec![1.0, 1.0, 1.0])).unwrap();
        assert!(matches!(
            Fused::new(inner(), three, 10),
            Err(Error::InvalidParam {
                name: "weights",
                ..
            })
        ));
    }
}
