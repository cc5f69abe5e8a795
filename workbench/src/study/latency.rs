//! Report 000, Figure 4: per-query retrieval latency, one histogram panel per retriever.
//!
//! Corpus: Wikipedia paragraphs cut by report 000's paragraph filter (21–199 words).
//! Queries: the first `queries` NQ-open dev questions. Each retriever answers every query
//! one at a time (top `k`), after `warmup` unmeasured queries; the wall-clock time of each
//! call is recorded:
//!
//! | retriever | what one query costs |
//! |---|---|
//! | TF-IDF (cosine) | analyse + term-at-a-time scoring + top-k |
//! | BM25 (Lucene, k1 0.9, b 0.4) | same |
//! | dense flat | MiniLM query encoding + exact FAISS inner-product search |
//! | dense HNSW | MiniLM query encoding + FAISS HNSW32 (efSearch 64) search |
//! | hybrid | dense flat + BM25 (each `hybrid_depth` deep), min-max fusion |
//! | FAISS flat search only | the search part of "dense flat" (what report 000's 32.2 ms measured) |
//!
//! The machine may be shared: the cores available to the process and the load average at
//! the start and end are part of the result and of its caption; latencies include that
//! noise.
//!
//! | scale | corpus | questions |
//! |---|---|---|
//! | quick | `wikitext-2-raw` paragraphs | 100 |
//! | default, paper | `wiki-leads-en` paragraphs (~10k) | 500 |

use super::{Env, Scale};
use crate::chunk::{Chunker, ParagraphParams};
use crate::display::Table;
use crate::encode::{BertEncoder, CacheStatus, EmbeddingCache, EncoderParams};
use crate::evaluate::quantile;
use crate::load::{nq_open, wikipedia_corpus};
use crate::results::ResultDir;
use crate::retrieve::analyzer::Analyzer;
use crate::retrieve::bm25::{Bm25, Bm25Params};
use crate::retrieve::dense::DenseRetriever;
use crate::retrieve::faiss::{IndexKind, IndexParams, VectorIndex};
use crate::retrieve::fusion::Fused;
use crate::retrieve::tfidf::{TfIdf, TfIdfVariant};
use crate::retrieve::Retriever;
use crate::{Error, QaExample, Result};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Instant;

/// The study's result folder at the default scale.
pub const NAME: &str = "fig4-latency";
/// Report 000's FAISS latency: mean over its queries, 184,051 paragraph vectors.
pub const REPORT_FAISS_MEAN_MS: f64 = 32.2;

/// The study's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyParams {
    /// Sizes; part of the result's name.
    pub scale: Scale,
    /// The Wikipedia corpus asset whose filtered paragraphs are searched.
    pub corpus: String,
    /// The first this many NQ-open dev questions.
    pub queries: usize,
    /// Unmeasured queries run through each retriever first.
    pub warmup: usize,
    /// Hits per query.
    pub k: usize,
    /// Candidates from each side of the hybrid.
    pub hybrid_depth: usize,
    /// Dense weight of the hybrid (min-max fusion).
    pub hybrid_weight: f32,
    /// Sentence encoder (asset name).
    pub model: String,
    /// Regular histogram bins per panel (plus one overflow bin from a round 1.5 × p99 up).
    pub bins: usize,
}

impl LatencyParams {
    /// The published parameters at `scale`.
    pub fn at_scale(scale: Scale) -> Self {
        LatencyParams {
            scale,
            corpus: scale
                .pick("wikitext-2-raw", "wiki-leads-en", "wiki-leads-en")
                .into(),
            queries: scale.pick(100, 500, 500),
            warmup: 20,
            k: 10,
            hybrid_depth: 100,
            hybrid_weight: 0.5,
            model: "all-minilm-l6-v2".into(),
            bins: 60,
        }
    }

    /// Check the values: at least one query, `k ≥ 1`, a hybrid at least `k` deep with a
    /// weight in [0, 1], at least one bin.
    pub fn check(self) -> Result<LatencyValid> {
        if self.queries == 0 {
            return Err(Error::param("queries", "measure at least one query"));
        }
        if self.k == 0 {
            return Err(Error::param("k", "ask for at least one hit"));
        }
        if self.hybrid_depth < self.k {
            return Err(Error::param(
                "hybrid_depth",
                format!("{} is below k = {}", self.hybrid_depth, self.k),
            ));
        }
        if !(0.0..=1.0).contains(&self.hybrid_weight) {
            return Err(Error::param(
                "hybrid_weight",
                format!("{} is not in [0, 1]", self.hybrid_weight),
            ));
        }
        if self.bins == 0 {
            return Err(Error::param("bins", "at least one bin"));
        }
        Ok(LatencyValid(self))
    }
}

crate::env::checked_params!(LatencyValid, LatencyParams, "Checked [`LatencyParams`].");

impl LatencyValid {
    /// What `config.json` records: the parameters, the paragraph filter, encoder, BM25
    /// and HNSW parameters, the sha256 of the corpus', questions' and encoder's files
    /// and the program's sha256.
    pub fn resolved(&self, env: &Env) -> Result<super::Resolved<'_, LatencyParams>> {
        super::Resolved::new(
            env,
            &self.0,
            [self.corpus.as_str(), "nq-open", self.model.as_str()],
            serde_json::json!({
                "filter": ParagraphParams::default(),
                "encoder": EncoderParams::default(),
                "bm25": Bm25Params::default(),
                "hnsw": IndexKind::hnsw(),
            }),
        )
    }
}

/// One retriever's latencies.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Row and panel label.
    pub label: String,
    /// The retriever's own name.
    pub name: String,
    /// Per query: total, encode, search (ms); encode/search are NaN for lexical retrievers.
    pub times: Vec<(f64, f64, f64)>,
}

impl Measured {
    /// Totals, sorted.
    fn sorted_totals(&self) -> Vec<f64> {
        let mut t: Vec<f64> = self.times.iter().map(|t| t.0).collect();
        t.sort_by(f64::total_cmp);
        t
    }

    /// Median of a finite component, if any.
    fn median_of(&self, f: fn(&(f64, f64, f64)) -> f64) -> Option<f64> {
        let mut v: Vec<f64> = self.times.iter().map(f).filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        (!v.is_empty()).then(|| quantile(&v, 0.5))
    }
}

/// What the study measured.
#[derive(Debug, Clone)]
pub struct LatencyStudy {
    /// The parameters it ran with.
    pub params: LatencyParams,
    /// Paragraphs searched.
    pub passages: usize,
    /// Ids of the measured questions.
    pub questions: Vec<String>,
    /// Warm-up queries per retriever.
    pub warmup: usize,
    /// Every retriever's latencies, in table order.
    pub measured: Vec<Measured>,
    /// Load average (1/5/15 min) at the start and at the end.
    pub load: (String, String),
    /// CPU cores available to the process.
    pub cores: String,
    /// Seconds to embed the passages (or read them from the cache) and the cache status.
    pub embed: (f64, CacheStatus),
    /// Seconds to build the lexical indexes, the FAISS flat and the HNSW index.
    pub build_seconds: (f64, f64, f64),
}

/// `BM25 (Lucene, k1 0.9, b 0.4)` from the parameters in use.
fn bm25_label(p: &Bm25Params) -> String {
    format!("BM25 ({:?}, k1 {}, b {})", p.variant, p.k1, p.b)
}

/// `dense HNSW32 (encode + search)` from the index kind in use.
fn hnsw_label(kind: &IndexKind) -> String {
    match kind {
        IndexKind::Hnsw { m, .. } => format!("dense HNSW{m} (encode + search)"),
        other => format!("dense {} (encode + search)", other.tag()),
    }
}

/// The smallest of 1, 2, 2.5, 5 × 10^e that is ≥ x.
fn nice_ceil(x: f64) -> f64 {
    let e = x.log10().floor();
    let base = 10f64.powf(e);
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * base >= x * (1.0 - 1e-12) {
            return m * base;
        }
    }
    10.0 * base
}

impl super::Study for LatencyValid {
    type Output = LatencyStudy;

    fn name(&self) -> String {
        NAME.to_string()
    }

    fn scale(&self) -> Scale {
        self.scale
    }

    fn summary_file(&self) -> &'static str {
        "latency_summary.md"
    }

    fn resolved(&self, env: &Env) -> Result<impl serde::Serialize + '_> {
        LatencyValid::resolved(self, env)
    }

    fn run(&self, env: &Env) -> Result<LatencyStudy> {
        run(env, self)
    }
}

/// Build the indexes and time every retriever, one query at a time.
pub fn run(env: &Env, params: &LatencyValid) -> Result<LatencyStudy> {
    let p = &params.0;
    let load_start = crate::machine::load_average();
    let cores = std::thread::available_parallelism()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "unknown".into());
    let docs = wikipedia_corpus(&env.assets, &p.corpus)?;
    let passages = ParagraphParams::default().check()?.chunk_all(&docs)?;
    let nq = nq_open::load(
        &env.assets.resolve("nq-open", "NQ-open.dev.jsonl")?,
        crate::load::question_set::BadRecords::Skip,
    )?;
    println!("NQ-open dev: {}", nq_open::dropped_note(&nq));
    let questions: Vec<QaExample> = nq.questions.into_iter().take(p.queries).collect();
    let warm: Vec<&QaExample> = questions.iter().take(p.warmup).collect();

    let t0 = Instant::now();
    let analyzer = Analyzer::default();
    let tfidf = TfIdf::build(&passages, &analyzer, TfIdfVariant::cosine())?;
    let bm25_params = Bm25Params::default();
    let bm25 = Arc::new(Bm25::build(&passages, &analyzer, bm25_params)?);
    let lexical_s = t0.elapsed().as_secs_f64();
    let encoder = Arc::new(BertEncoder::load(
        &env.assets,
        &p.model,
        EncoderParams::default(),
    )?);
    let t0 = Instant::now();
    let (vectors, status) = EmbeddingCache::new(env.cache_dir("embeddings"))
        .get_or_compute_with_status(&encoder, &passages)?;
    let embed_s = t0.elapsed().as_secs_f64();
    let ids: Vec<String> = passages.iter().map(|p| p.id.clone()).collect();
    let t0 = Instant::now();
    let flat_index = VectorIndex::build(IndexParams::flat_ip(), encoder.dim(), &vectors)?;
    let flat = Arc::new(DenseRetriever::from_parts(
        encoder.clone(),
        flat_index,
        ids.clone(),
    )?);
    let flat_s = t0.elapsed().as_secs_f64();
    let hnsw = IndexKind::hnsw();
    let t0 = Instant::now();
    let hnsw_index = VectorIndex::build(IndexParams::ip(hnsw), encoder.dim(), &vectors)?;
    let hnsw_r = DenseRetriever::from_parts(encoder.clone(), hnsw_index, ids)?;
    let hnsw_s = t0.elapsed().as_secs_f64();
    let hybrid = Fused::hybrid(
        Box::new(flat.clone()),
        Box::new(bm25.clone()),
        p.hybrid_weight,
        p.hybrid_depth,
    )?;

    let k = p.k;
    let nan = f64::NAN;
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let time_plain = |r: &dyn Retriever| -> Result<Vec<(f64, f64, f64)>> {
        for q in &warm {
            r.retrieve(&q.question, k)?;
        }
        let mut v = Vec::with_capacity(questions.len());
        for q in &questions {
            let t = Instant::now();
            let hits = r.retrieve(&q.question, k)?;
            v.push((ms(t.elapsed()), nan, nan));
            std::hint::black_box(hits);
        }
        Ok(v)
    };
    let time_dense = |r: &DenseRetriever| -> Result<Vec<(f64, f64, f64)>> {
        for q in &warm {
            r.retrieve_with_timing(&q.question, k)?;
        }
        let mut v = Vec::with_capacity(questions.len());
        for q in &questions {
            let t = Instant::now();
            let (hits, timing) = r.retrieve_with_timing(&q.question, k)?;
            v.push((ms(t.elapsed()), ms(timing.encode), ms(timing.search)));
            std::hint::black_box(hits);
        }
        Ok(v)
    };
    let mut measured = Vec::new();
    let lexical: [(String, &dyn Retriever); 2] = [
        ("TF-IDF (cosine)".into(), &tfidf),
        (bm25_label(&bm25_params), bm25.as_ref()),
    ];
    for (label, r) in lexical {
        measured.push(Measured {
            label,
            name: r.name(),
            times: time_plain(r)?,
        });
    }
    let flat_times = time_dense(&flat)?;
    measured.push(Measured {
        label: "dense flat (encode + search)".into(),
        name: flat.name(),
        times: flat_times.clone(),
    });
    measured.push(Measured {
        label: hnsw_label(&hnsw),
        name: hnsw_r.name(),
        times: time_dense(&hnsw_r)?,
    });
    measured.push(Measured {
        label: format!(
            "hybrid (dense flat + BM25, min-max w = {})",
            p.hybrid_weight
        ),
        name: hybrid.name(),
        times: time_plain(&hybrid)?,
    });
    measured.push(Measured {
        label: "FAISS flat search only (no encoding)".into(),
        name: format!("{}:search-only", flat.name()),
        times: flat_times.iter().map(|t| (t.2, nan, t.2)).collect(),
    });
    Ok(LatencyStudy {
        params: p.clone(),
        passages: passages.len(),
        questions: questions.iter().map(|q| q.id.clone()).collect(),
        warmup: warm.len(),
        measured,
        load: (load_start, crate::machine::load_average()),
        cores,
        embed: (embed_s, status),
        build_seconds: (lexical_s, flat_s, hnsw_s),
    })
}

impl LatencyStudy {
    /// Mean, median, p95, p99, min, max and the encode / search medians per retriever,
    /// captioned with the machine's cores and load.
    pub fn table(&self) -> Result<Table> {
        let mut t = Table::new([
            "retriever",
            "name",
            "queries",
            "mean_ms",
            "median_ms",
            "p95_ms",
            "p99_ms",
            "min_ms",
            "max_ms",
            "encode_median_ms",
            "search_median_ms",
        ])
        .caption(format!(
            "Per-query latency, {} NQ-open dev questions over {} {} paragraphs, top {}, one query at a time \
             after {} warm-up queries; {} CPU cores available to the process, load average (1/5/15 min) \
             {} at the start and {} at the end. Report 000: FAISS mean {REPORT_FAISS_MEAN_MS} ms \
             over 184,051 vectors.",
            self.questions.len(),
            self.passages,
            self.params.corpus,
            self.params.k,
            self.warmup,
            self.cores,
            self.load.0,
            self.load.1
        ));
        let fmt = |x: f64| format!("{x:.3}");
        for m in &self.measured {
            let tot = m.sorted_totals();
            if tot.is_empty() {
                return Err(Error::Empty(format!("no latency of {}", m.label)));
            }
            let mean = tot.iter().sum::<f64>() / tot.len() as f64;
            t.push([
                m.label.clone(),
                m.name.clone(),
                tot.len().to_string(),
                fmt(mean),
                fmt(quantile(&tot, 0.5)),
                fmt(quantile(&tot, 0.95)),
                fmt(quantile(&tot, 0.99)),
                fmt(tot[0]),
                fmt(tot[tot.len() - 1]),
                m.median_of(|t| t.1).map(fmt).unwrap_or_else(|| "–".into()),
                m.median_of(|t| t.2).map(fmt).unwrap_or_else(|| "–".into()),
            ])?;
        }
        Ok(t)
    }

    /// Every query's total, encode and search time per retriever.
    pub fn per_query(&self) -> Result<Table> {
        let mut t = Table::new([
            "retriever",
            "query_id",
            "total_ms",
            "encode_ms",
            "search_ms",
        ]);
        let f = |x: f64| {
            if x.is_finite() {
                format!("{x:.4}")
            } else {
                String::new()
            }
        };
        for m in &self.measured {
            for (q, x) in self.questions.iter().zip(&m.times) {
                t.push([m.label.clone(), q.clone(), f(x.0), f(x.1), f(x.2)])?;
            }
        }
        Ok(t)
    }

    /// The histogram bins of each panel: regular bins up to a round 1.5 × p99, then one
    /// overflow bin.
    #[cfg(feature = "plot")]
    fn bins(&self, m: &Measured) -> Result<crate::plot::Bins> {
        let tot = m.sorted_totals();
        let hi = nice_ceil(1.5 * quantile(&tot, 0.99));
        crate::plot::Bins::new(0.0, hi, hi / self.params.bins as f64, true)
    }

    /// Each panel's bin counts.
    #[cfg(feature = "plot")]
    pub fn bins_table(&self) -> Result<Table> {
        let mut t = Table::new(["retriever", "bin", "lo_ms", "hi_ms", "queries"]);
        for m in &self.measured {
            let bins = self.bins(m)?;
            let (counts, _) = crate::plot::bin_counts(m.times.iter().map(|t| t.0), &bins);
            for (i, c) in counts.iter().enumerate() {
                let (lo, h) = bins.edges(i);
                t.push([
                    m.label.clone(),
                    bins.label(i),
                    format!("{lo}"),
                    format!("{h}"),
                    c.to_string(),
                ])?;
            }
        }
        Ok(t)
    }

    /// Figure 4: one histogram per retriever, median and p95 marked.
    #[cfg(feature = "plot")]
    pub fn figure(&self) -> Result<crate::plot::HistogramGrid> {
        use crate::plot::{bin_counts, palette, Histogram, HistogramGrid, Series};
        let mut panels = Vec::new();
        for (mi, m) in self.measured.iter().enumerate() {
            let tot = m.sorted_totals();
            let mean = tot.iter().sum::<f64>() / tot.len().max(1) as f64;
            let (med, p95) = (quantile(&tot, 0.5), quantile(&tot, 0.95));
            let bins = self.bins(m)?;
            let hi = nice_ceil(1.5 * quantile(&tot, 0.99));
            let (counts, _) = bin_counts(tot.iter().copied(), &bins);
            let c = palette(mi);
            panels.push(Histogram {
                title: m.label.clone(),
                x_label: "latency per query (ms)".into(),
                y_label: "queries".into(),
                bins,
                series: vec![Series {
                    label: format!("{} queries, mean {mean:.2} ms", tot.len()),
                    counts,
                    color: (c.0, c.1, c.2),
                }],
                markers: vec![
                    (med, format!("median {med:.2} ms")),
                    (p95.min(hi), format!("p95 {p95:.2} ms")),
                ],
                size: (720, 360),
            });
        }
        Ok(HistogramGrid {
            caption: format!(
                "Figure 4: per-query latency, {} NQ-open questions, {} {} paragraphs (report 000: FAISS mean {REPORT_FAISS_MEAN_MS} ms, 184k vectors)",
                self.questions.len(),
                self.passages,
                self.params.corpus
            ),
            panels,
            cols: 2,
            panel_size: (720, 360),
        })
    }

    /// The table's caption and the table as Markdown.
    pub fn markdown(&self) -> Result<String> {
        let t = self.table()?;
        Ok(t.to_markdown())
    }

    /// The numbers `manifest.json` records.
    pub fn summary(&self) -> serde_json::Value {
        let mut s = serde_json::Map::new();
        for m in &self.measured {
            let tot = m.sorted_totals();
            let mean = tot.iter().sum::<f64>() / tot.len().max(1) as f64;
            s.insert(
                m.label.clone(),
                serde_json::json!({
                    "mean_ms": mean,
                    "median_ms": quantile(&tot, 0.5),
                    "p95_ms": quantile(&tot, 0.95),
                    "p99_ms": quantile(&tot, 0.99),
                }),
            );
        }
        s.insert("passages".into(), self.passages.into());
        s.insert("queries".into(), self.questions.len().into());
        s.insert("load_avg_start".into(), self.load.0.clone().into());
        s.insert("load_avg_end".into(), self.load.1.clone().into());
        s.insert("cpu_cores_available".into(), self.cores.clone().into());
        s.insert("embed_seconds".into(), self.embed.0.into());
        s.insert(
            "embedding_cache".into(),
            format!("{:?}", self.embed.1).into(),
        );
        s.insert("hnsw_build_seconds".into(), self.build_seconds.2.into());
        serde_json::Value::Object(s)
    }

    /// `latency_summary.csv`/`.md`, `latency_per_query.csv` and (feature `plot`)
    /// `bins.csv`, `fig4.png`/`.svg`.
    pub fn write(&self, out: &ResultDir) -> Result<()> {
        self.table()?.write_csv(&out.path("latency_summary.csv"))?;
        self.per_query()?
            .write_csv(&out.path("latency_per_query.csv"))?;
        let md = out.path("latency_summary.md");
        std::fs::write(&md, self.markdown()?).map_err(|e| Error::io(&md, e))?;
        #[cfg(feature = "plot")]
        {
            self.bins_table()?.write_csv(&out.path("bins.csv"))?;
            crate::plot::render(&self.figure()?)?.save(out.out_dir(), "fig4")?;
        }
        Ok(())
    }
}

impl super::Outputs for LatencyStudy {
    fn write(&self, out: &ResultDir) -> Result<()> {
        LatencyStudy::write(self, out)
    }
    fn markdown(&self) -> Result<String> {
        LatencyStudy::markdown(self)
    }
    fn summary(&self) -> Result<serde_json::Value> {
        Ok(LatencyStudy::summary(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_and_bad_values() {
        let q = LatencyParams::at_scale(Scale::Quick).check().unwrap();
        assert_eq!((q.corpus.as_str(), q.queries), ("wikitext-2-raw", 100));
        let d = LatencyParams::at_scale(Scale::Default).check().unwrap();
        assert_eq!((d.corpus.as_str(), d.queries), ("wiki-leads-en", 500));
        let mut bad = LatencyParams::at_scale(Scale::Quick);
        bad.hybrid_depth = 5;
        assert!(bad
            .check()
            .unwrap_err()
            .to_string()
            .contains("hybrid_depth"));
        let mut bad = LatencyParams::at_scale(Scale::Quick);
        bad.hybrid_weight = 1.5;
        assert!(bad
            .check()
            .unwrap_err()
            .to_string()
            .contains("hybrid_weight"));
        let mut bad = LatencyParams::at_scale(Scale::Quick);
        bad.queries = 0;
        assert!(bad.check().unwrap_err().to_string().contains("queries"));
    }

    #[test]
    fn round_bin_ends() {
        assert_eq!(nice_ceil(0.7), 1.0);
        assert_eq!(nice_ceil(1.2), 2.0);
        assert_eq!(nice_ceil(2.2), 2.5);
        assert_eq!(nice_ceil(31.0), 50.0);
        assert_eq!(nice_ceil(500.0), 500.0);
    }
}
