//! Studies: the reports' experiments as library code.
//!
//! A study is parameters with defaults ([`serde`], one set per [`Scale`]), a `check()`
//! that validates them once, and a `run(&Env, &Valid)` that returns numbers (runs,
//! metric results, comparisons). Tables, figures and files are made from the returned
//! value at the edge (`table()`, `figure()`, `write(dir)`), so a notebook can run a
//! study in one call, change a parameter and run it again, and a binary is a few lines
//! of flag parsing around the same calls.
//!
//! | module | what |
//! |---|---|
//! | (this module) | re-exports [`Scale`] (quick / default / paper) and [`Env`] (where the project's assets, caches and results live) from [`crate::env`] |
//! | [`retrieval`] | the shared retrieval study: systems as data ([`retrieval::SystemSpec`], a TOML list), scored runs, comparisons against a baseline, tables |
//! | `pipeline::systems` (feature `dense`) | builds a [`retrieval::SystemSpec`] into a retriever (shared first stages, encoders and trained re-rankers) |
//! | `colbert` (feature `dense`) | a ColBERT projection trained on frozen MiniLM token vectors: its groups, loss and speed |
//! | `dl19` (features `dense` + `faiss`) | MS MARCO passage, TREC DL19 subset: eight systems, significance against BM25 |
//! | `late_interaction` (features `dense` + `faiss`) | report 003's table: TF-IDF, MaxSim re-rank and end-to-end on SQuAD 2.0, token-relevance views; the held-out variant adds the trained ColBERT projections |
//! | `latency` (features `dense` + `faiss`) | report 000's Figure 4: per-query latency of TF-IDF, BM25, dense flat / HNSW and hybrid retrieval |
//! | `reranker` (features `dense` + `faiss`) | the trained cross-encoder: its recipe trained (cached) and evaluated on the held-out SQuAD articles against TF-IDF and dense retrieval |
//! | `tsne` (features `dense` + `tsne`) | report 000's Figure 2: t-SNE of paragraph embeddings by topic, with the clustering measured against chance |
//! | `lengths` (feature `plot`) | report 000's Figure 1: paragraph lengths before and after its length filter |
//! | `nq` (features `dense` + `faiss`) | NQ-open dev answer recall@k over the Wikipedia corpora, DPR's table shape |
//! | `reader` (feature `dense`) | an extractive reader recipe trained (cached) and scored on the held-out SQuAD articles |
//! | `report001` (features `llm` + `parquet`) | report 001's Tables 2–4 and paired tests: dense, sparse, hybrid and closed-book RAG with an LLM reader on RAG Mini Wikipedia |
//! | `report002` (feature `llm`) | report 002: baseline RAG vs RAG-Fusion (paraphrases + RRF k = 60) on SQuAD 2.0 |
//! | `report004` (feature `llm`) | report 004: naive RAG vs query rewrite + cross-encoder re-rank: EM, F1, time per query, context precision |
//! | `report000` (features `dense` + `faiss`) | report 000's Table 1 and Figure 3: three extractive readers trained here, SBERT + FAISS top-5 passages, the ten questions and an honest set |
//!
//! ```no_run
//! # #[cfg(all(feature = "dense", feature = "faiss"))]
//! # fn main() -> workbench::Result<()> {
//! use workbench::study::{dl19, Env, Scale};
//! let env = Env::project()?;
//! let params = dl19::Dl19Params::at_scale(&env, Scale::Quick)?.check()?;
//! let study = dl19::run(&env, &params)?;
//! println!("{}", study.table().to_markdown());
//! # Ok(()) }
//! # #[cfg(not(all(feature = "dense", feature = "faiss")))] fn main() {}
//! ```

#[cfg(feature = "dense")]
pub mod colbert;
#[cfg(all(feature = "dense", feature = "faiss"))]
pub mod dl19;
#[cfg(all(feature = "dense", feature = "faiss"))]
pub mod late_interaction;
#[cfg(all(feature = "dense", feature = "faiss"))]
pub mod latency;
#[cfg(feature = "plot")]
pub mod lengths;
#[cfg(all(feature = "dense", feature = "faiss"))]
pub mod nq;
#[cfg(feature = "dense")]
pub mod reader;
#[cfg(all(feature = "dense", feature = "faiss"))]
pub mod report000;
#[cfg(all(feature = "llm", feature = "parquet"))]
pub mod report001;
#[cfg(feature = "llm")]
pub mod report002;
#[cfg(feature = "llm")]
pub mod report004;
#[cfg(all(feature = "dense", feature = "faiss"))]
pub mod reranker;
pub mod retrieval;
#[cfg(all(feature = "dense", feature = "tsne"))]
pub mod tsne;

pub use crate::env::{execute, start, Env, Outputs, Resolved, Scale};

/// The loss curve of `log` (per-update loss and its running mean over `window` updates)
/// as a line plot.
#[cfg(feature = "plot")]
pub fn loss_lines(log: &crate::train::TrainLog, title: &str, window: usize) -> crate::plot::Lines {
    use crate::plot::{Line, Lines};
    let raw: Vec<(f64, f64)> = log.steps.iter().map(|s| (s.step as f64, s.loss)).collect();
    let mut smooth = Vec::with_capacity(raw.len());
    for i in 0..log.steps.len() {
        let lo = (i + 1).saturating_sub(window.max(1));
        let sl = &log.steps[lo..=i];
        smooth.push((
            log.steps[i].step as f64,
            sl.iter().map(|s| s.loss).sum::<f64>() / sl.len() as f64,
        ));
    }
    Lines {
        title: title.to_string(),
        x_label: "update".into(),
        y_label: "loss".into(),
        lines: vec![
            Line {
                label: "batch loss".into(),
                points: raw,
            },
            Line {
                label: format!("running mean ({window} updates)"),
                points: smooth,
            },
        ],
        log_x: false,
        y_range: None,
        size: (900, 500),
    }
}

/// A training run's log in `out`: `loss.csv` and (feature `plot`) `loss.png`/`.svg`, the loss
/// curve titled `title` with a running mean over `window` updates. Shared by the studies that
/// train (`reader`, `reranker`, `colbert`).
#[cfg(feature = "dense")]
pub(crate) fn write_loss(
    out: &crate::results::ResultDir,
    log: &crate::train::TrainLog,
    title: &str,
    window: usize,
) -> crate::Result<()> {
    log.write_csv(&out.path("loss.csv"))?;
    #[cfg(feature = "plot")]
    crate::plot::render(&loss_lines(log, title, window))?.save(out.out_dir(), "loss")?;
    #[cfg(not(feature = "plot"))]
    let _ = (title, window);
    Ok(())
}
