//! Studies: the reports' experiments as library code.
//!
//! A study is parameters with defaults ([`serde`], one set per [`Scale`]), a `check()`
//! that validates them once into a checked value implementing [`Study`], whose `run(&Env)`
//! returns numbers (runs, metric results, comparisons). Tables, figures and files are made
//! from the returned value at the edge (`table()`, `figure()`, `write(dir)`), so a notebook
//! can run a study in one call, change a parameter and run it again, and a binary is a few
//! lines of flag parsing around [`execute`].
//!
//! | module | what |
//! |---|---|
//! | (this module) | re-exports [`Scale`] (quick / default / paper) and [`Env`] (where the project's assets, caches and results live) from [`crate::env`] |
//! | [`repro`] (feature `llm`) | what the LLM-read reproductions (reports 001, 002, 004) share: parameters, configs at a scale, the runs of every config on one model pool, paired tests, tables |
//! | [`retrieval`] | the shared retrieval study: systems as data ([`retrieval::SystemSpec`], a TOML list), scored runs, comparisons against a baseline, tables |
//! | `pipeline::systems` (feature `dense`) | builds a [`retrieval::SystemSpec`] into a retriever (shared first stages, encoders and trained re-rankers) |
//! | `colbert` (feature `dense`) | a ColBERT projection trained on frozen MiniLM token vectors: its groups, loss and speed |
//! | `dl19` (features `dense` + `faiss`) | MS MARCO passage, TREC DL19 subset: eight systems, significance against BM25 |
//! | `late_interaction` (features `dense` + `faiss`) | report 003's table: TF-IDF, MaxSim re-rank and end-to-end on SQuAD 2.0, token-relevance views; the held-out variant adds the trained ColBERT projections |
//! | `latency` (features `dense` + `faiss`) | report 000's Figure 4: per-query latency of TF-IDF, BM25, dense flat / HNSW and hybrid retrieval |
//! | `reranker` (features `dense` + `faiss`) | the trained cross-encoder: its recipe trained (cached) and evaluated on the held-out SQuAD articles against TF-IDF and dense retrieval |
//! | `tsne` (features `dense` + `tsne`) | report 000's Figure 2: t-SNE of paragraph embeddings by topic, with the clustering measured against chance |
//! | `lengths` (feature `plot`) | report 000's Figure 1: paragraph lengths before and after its length filter |
//! | `methods` (feature `llm`) | every RAG method (closed-book, naive, adaptive, iterative, agentic) on the same questions, against naive and closed-book, split by whether the corpus holds the answer |
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
//! use workbench::study::{dl19, Env, Scale, Study};
//! let env = Env::project()?;
//! let params = dl19::Dl19Params::at_scale(&env, Scale::Quick)?.check()?;
//! let study = params.run(&env)?; // or study::execute(&env, &params, false) into its folder
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
#[cfg(feature = "llm")]
pub mod methods;
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
#[cfg(feature = "llm")]
pub mod repro;
#[cfg(all(feature = "dense", feature = "faiss"))]
pub mod reranker;
pub mod retrieval;
#[cfg(all(feature = "dense", feature = "tsne"))]
pub mod tsne;

pub use crate::env::{start, Env, Outputs, Resolved, Scale};
use crate::Result;

/// A study, checked: what its result folder is called, what decides its numbers, and how
/// it runs. Every study implements it on its checked parameters (`Dl19Valid`, …), so one
/// runner ([`execute`]) serves every binary and notebook:
///
/// ```text
/// params (serde, per-scale defaults) → check() → impl Study → execute(&env, &study, force)
///                                                              → Output (tables, figures, write)
/// ```
///
/// To add a study: a module here with its parameters (`Serialize + Deserialize`, an
/// `at_scale` constructor), a `check()` returning the checked type, an `Output` that
/// implements [`Outputs`], and this trait on the checked type; its binary is flag parsing
/// around [`execute`] (see `scripts/bin/exp_dl19.rs`).
pub trait Study {
    /// What a run returns: the numbers, which write their own tables, figures and files.
    type Output: Outputs;

    /// The result folder's name at the default scale (`data/results/<name>/`); the scale
    /// adds its suffix ([`Scale::result_name`]).
    fn name(&self) -> String;

    /// The scale the result folder is named for.
    fn scale(&self) -> Scale;

    /// The file printed when a fresh result is reused instead of run again.
    fn summary_file(&self) -> &'static str;

    /// What `config.json` records: the parameters and every input that decides the
    /// numbers (asset checksums, trained-model keys, the program's sha256). A result whose
    /// record differs is stale.
    fn resolved(&self, env: &Env) -> Result<impl serde::Serialize + '_>;

    /// Run the study.
    fn run(&self, env: &Env) -> Result<Self::Output>;
}

/// Run `study` into its result folder, the one runner of every study binary: when the
/// folder of [`Study::name`] at [`Study::scale`] is fresh for [`Study::resolved`] and
/// `force` is false, print its [`Study::summary_file`] and return `None`; otherwise run
/// it, write its outputs, print its Markdown, finish the folder and return the result.
pub fn execute<S: Study>(env: &Env, study: &S, force: bool) -> Result<Option<S::Output>> {
    let resolved = study.resolved(env)?;
    crate::env::execute(
        env,
        &study.name(),
        study.scale(),
        &resolved,
        force,
        study.summary_file(),
        || study.run(env),
    )
}

/// The loss curve of `log` (per-update loss and its running mean over `window` updates)
/// as a line plot.
#[cfg(all(feature = "plot", feature = "dense"))]
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A study that counts its runs and writes one file.
    struct Counting {
        runs: Cell<usize>,
        value: u32,
        scale: Scale,
    }

    struct Counted(u32);

    impl Outputs for Counted {
        fn write(&self, out: &crate::results::ResultDir) -> Result<()> {
            let p = out.path("value.txt");
            std::fs::write(&p, self.0.to_string()).map_err(|e| crate::Error::io(&p, e))
        }
        fn markdown(&self) -> Result<String> {
            Ok(format!("value {}", self.0))
        }
        fn summary(&self) -> Result<serde_json::Value> {
            Ok(serde_json::json!({ "value": self.0 }))
        }
    }

    impl Study for Counting {
        type Output = Counted;
        fn name(&self) -> String {
            "counting".into()
        }
        fn scale(&self) -> Scale {
            self.scale
        }
        fn summary_file(&self) -> &'static str {
            "value.txt"
        }
        fn resolved(&self, _env: &Env) -> Result<impl serde::Serialize + '_> {
            Ok(serde_json::json!({ "value": self.value }))
        }
        fn run(&self, _env: &Env) -> Result<Counted> {
            self.runs.set(self.runs.get() + 1);
            Ok(Counted(self.value))
        }
    }

    /// Every study names its result folder, scale and summary file as its binary did
    /// before the trait (the graded results are found by these names).
    #[cfg(all(
        feature = "dense",
        feature = "faiss",
        feature = "llm",
        feature = "plot"
    ))]
    #[test]
    fn studies_name_their_folders_scales_and_summaries() {
        fn of(s: &impl Study) -> (String, Scale, &'static str) {
            (s.name(), s.scale(), s.summary_file())
        }
        let q = Scale::Quick;
        let li = late_interaction::LateParams::at_scale(q, true)
            .check()
            .unwrap();
        assert_eq!(
            of(&li),
            ("late-interaction-heldout".into(), q, "metrics.md")
        );
        let li = late_interaction::LateParams::at_scale(q, false)
            .check()
            .unwrap();
        assert_eq!(of(&li), ("late-interaction".into(), q, "metrics.md"));
        let lat = latency::LatencyParams::at_scale(q).check().unwrap();
        assert_eq!(of(&lat), ("fig4-latency".into(), q, "latency_summary.md"));
        let r0 = report000::Report000Params::at_scale(q).check().unwrap();
        assert_eq!(of(&r0), ("report000_readers".into(), q, "table1.md"));
        let len = lengths::LengthsParams::default().check().unwrap();
        assert_eq!(
            of(&len),
            ("fig1-paragraph-lengths".into(), Scale::Default, "counts.md")
        );
        let ts = tsne::TsneStudyParams::default().check().unwrap();
        assert_eq!(
            of(&ts),
            ("fig2-tsne".into(), Scale::Default, "clustering.md")
        );
        let rr = reranker::RerankerParams::at_scale("minilm-ce", q)
            .check()
            .unwrap();
        assert_eq!(
            of(&rr),
            (
                "reranker-minilm-ce-quick".into(),
                Scale::Default,
                "metrics.md"
            )
        );
        let r4 = report004::study(report004::params(q)).unwrap();
        assert_eq!(of(&r4), ("report004".into(), q, "table.md"));
        let r2 = report002::study(report002::params(Scale::Default)).unwrap();
        assert_eq!(of(&r2), ("report002".into(), Scale::Default, "table.md"));
    }

    /// The runner writes the study's folder at its scale, reuses it while its record is
    /// the same, runs again when forced or when the record changes.
    #[test]
    fn execute_runs_writes_and_reuses_a_fresh_result() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("data")).unwrap();
        std::fs::write(tmp.path().join("data/assets.toml"), "[asset]\n").unwrap();
        let env = Env::at(tmp.path()).unwrap();
        let s = Counting {
            runs: Cell::new(0),
            value: 7,
            scale: Scale::Quick,
        };
        let out = execute(&env, &s, false).unwrap();
        assert_eq!(out.map(|o| o.0), Some(7));
        let dir = tmp.path().join("data/results/counting-quick");
        let file = dir.join("value.txt");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "7");
        // config.json records what `resolved` gave; manifest.json the summary.
        let config = std::fs::read_to_string(dir.join("config.json")).unwrap();
        assert!(config.contains("\"value\": 7"), "{config}");
        let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
        assert!(manifest.contains("\"value\": 7"), "{manifest}");
        assert!(
            execute(&env, &s, false).unwrap().is_none(),
            "fresh: not run"
        );
        assert_eq!(s.runs.get(), 1);
        assert!(execute(&env, &s, true).unwrap().is_some(), "forced");
        assert_eq!(s.runs.get(), 2);
        let changed = Counting {
            runs: Cell::new(0),
            value: 8,
            scale: Scale::Quick,
        };
        assert!(execute(&env, &changed, false).unwrap().is_some(), "stale");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "8");
        // Another scale is another folder.
        let default = Counting {
            runs: Cell::new(0),
            value: 8,
            scale: Scale::Default,
        };
        assert!(execute(&env, &default, false).unwrap().is_some());
        assert!(tmp.path().join("data/results/counting/value.txt").exists());
    }
}
