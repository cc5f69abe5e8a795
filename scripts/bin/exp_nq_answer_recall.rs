//! Experiment (b): NQ-open dev questions over the Wikipedia corpora — DPR-style
//! answer recall (top-k retrieval accuracy) for BM25, dense and hybrid.
//!
//! ```text
//! cargo run --release --bin exp_nq_answer_recall [-- --force] [--max-questions N]
//! ```
//! Corpus: all three Wikipedia corpora that can be had offline (`enwiki-sample-dump`,
//! `wiki-leads-en`, `wikitext-2-raw`) in one index, cut into DPR's passage unit:
//! 100-word windows, no overlap. As in DPR, the article title is prepended to the
//! indexed and embedded text (`title\nwindow`, `--no-title` turns it off); the answer
//! check reads the window text only. Passage ids are `{corpus}:{doc id}#{window}`.
//!
//! Retrievers: BM25 (Lucene, k1 0.9, b 0.4), dense all-MiniLM-L6-v2 with an exact
//! FAISS inner-product index, and the min-max hybrid 0.5·dense + 0.5·BM25 over the
//! top `--depth` of each (report 001). A question counts as answered at k when one of
//! its top k passages contains a gold answer after SQuAD normalisation, as whole
//! tokens (`evaluate::qa::answer_recall_at_k`, DPR's `has_answer` with the SQuAD
//! normaliser). Paired randomisation tests (10,000 trials, seed 42) compare dense and
//! hybrid with BM25 at each k.
//!
//! This corpus is ~10^3 times smaller than DPR's 21M-passage Wikipedia, so most NQ
//! answers are simply not in it: the numbers measure this corpus, not DPR's setting.
//!
//! Writes `data/results/nq-answer-recall/`: `answer_recall.csv` / `.md` (DPR's table
//! shape: retriever × top-k), `curve.csv` (k = 1…100), `significance.csv`,
//! `per_question.csv`, `corpus.csv`, `answer_recall.png/.svg`, `config.json`, `manifest.json`.

use anyhow::{Context, Result};
use clap::Parser;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;
use workbench::assets::Assets;
use workbench::chunk::{Chunker, SlidingWindowParams};
use workbench::display::Table;
use workbench::encode::{BertEncoder, EmbeddingCache, EncoderParams};
use workbench::evaluate::qa::{answer_in_text, answer_recall_at_k, normalize_answer};
use workbench::evaluate::significance;
use workbench::load::{nq_open, wikipedia_corpus, WIKIPEDIA_CORPORA};
use workbench::plot::{render, Line, Lines};
use workbench::results::Experiment;
use workbench::retrieve::analyzer::Analyzer;
use workbench::retrieve::bm25::{Bm25, Bm25Params};
use workbench::retrieve::dense::DenseRetriever;
use workbench::retrieve::faiss::IndexParams;
use workbench::retrieve::fusion::Fusion;
use workbench::retrieve::Retriever;
use workbench::{Passage, QaExample, Query, Run};

const NAME: &str = "nq-answer-recall";
/// Printed when the result is fresh and the run is skipped.
const SUMMARY_FILE: &str = "answer_recall.md";
const TOP_K: [usize; 4] = [1, 5, 20, 100];

#[derive(Parser, Serialize, Debug)]
#[command(about = "Experiment (b): NQ-open dev answer recall@{1,5,20,100} for BM25, dense, hybrid")]
struct Args {
    /// NQ-open dev questions to use, the first ones in file order (default: all 3,610).
    #[arg(long)]
    max_questions: Option<usize>,
    /// Window size in words (DPR: 100).
    #[arg(long, default_value_t = 100)]
    window: usize,
    /// Words shared by consecutive windows (DPR: 0).
    #[arg(long, default_value_t = 0)]
    overlap: usize,
    /// Do not prepend the article title to the indexed text.
    #[arg(long)]
    no_title: bool,
    /// Candidates from each side of the hybrid (and hits kept per question).
    #[arg(long, default_value_t = 100)]
    depth: usize,
    /// Dense weight of the min-max hybrid.
    #[arg(long, default_value_t = 0.5)]
    hybrid_weight: f32,
    /// Monte Carlo trials of the randomisation tests.
    #[arg(long, default_value_t = 10_000)]
    trials: usize,
    /// Seed of the randomisation tests.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Sentence encoder (asset name).
    #[arg(long, default_value = "all-minilm-l6-v2")]
    model: String,
    /// Recompute even if the results are fresh.
    #[arg(long)]
    #[serde(skip)]
    force: bool,
}

#[derive(Serialize)]
struct Config<'a> {
    args: &'a Args,
    corpora: [&'static str; 3],
    questions_file: &'static str,
    bm25: Bm25Params,
    encoder: EncoderParams,
    inputs: Vec<(String, String)>,
    program_sha256: String,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let assets = Assets::load()?;
    let inputs = assets.input_checksums(
        WIKIPEDIA_CORPORA
            .iter()
            .copied()
            .chain(["nq-open", args.model.as_str()]),
    )?;
    let config = Config {
        args: &args,
        corpora: WIKIPEDIA_CORPORA,
        questions_file: "NQ-open.dev.jsonl",
        bm25: Bm25Params::default(),
        encoder: EncoderParams::default(),
        inputs,
        program_sha256: workbench::results::executable_sha256()?,
    };
    let Some(exp) = Experiment::start(NAME, &config, args.force, SUMMARY_FILE)? else {
        return Ok(());
    };
    let out = &exp.out;

    // Passages: 100-word windows of every article of the three corpora.
    let chunker = SlidingWindowParams::default()
        .window(args.window)
        .overlap(args.overlap)
        .check()?;
    let mut passages: Vec<Passage> = Vec::new();
    let mut window_text: HashMap<String, String> = HashMap::new();
    let mut corpus_t = Table::new(["corpus", "articles", "passages", "words"]);
    for c in WIKIPEDIA_CORPORA {
        let docs = wikipedia_corpus(&assets, c).with_context(|| format!("loading corpus `{c}`"))?;
        let ps = chunker.chunk_all(&docs)?;
        let words: usize = ps
            .iter()
            .map(|p| workbench::text::word_count(&p.text))
            .sum();
        corpus_t.push([
            c.to_string(),
            docs.len().to_string(),
            ps.len().to_string(),
            words.to_string(),
        ])?;
        for mut p in ps {
            p.id = format!("{c}:{}", p.id);
            window_text.insert(p.id.clone(), p.text.clone());
            if !args.no_title && !p.title.is_empty() {
                p.text = format!("{}\n{}", p.title, p.text);
            }
            passages.push(p);
        }
    }
    let total_words: usize = corpus_t
        .rows
        .iter()
        .map(|r| r[3].parse::<usize>().unwrap_or(0))
        .sum();
    corpus_t.push([
        "all".to_string(),
        corpus_t
            .rows
            .iter()
            .map(|r| r[1].parse::<usize>().unwrap_or(0))
            .sum::<usize>()
            .to_string(),
        passages.len().to_string(),
        total_words.to_string(),
    ])?;
    if window_text.len() != passages.len() {
        anyhow::bail!("passage ids are not unique across corpora");
    }
    let all_q = nq_open::load(&assets.resolve("nq-open", "NQ-open.dev.jsonl")?)?;
    let n_all = all_q.len();
    let questions: Vec<_> = all_q
        .into_iter()
        .take(args.max_questions.unwrap_or(usize::MAX))
        .collect();
    let queries: Vec<Query> = questions.iter().map(QaExample::to_query).collect();
    let answers: BTreeMap<String, Vec<String>> = questions
        .iter()
        .map(|q| (q.id.clone(), q.answers.clone()))
        .collect();
    println!(
        "{} passages ({}-word windows, overlap {}); {} of {n_all} NQ-open dev questions",
        passages.len(),
        args.window,
        args.overlap,
        questions.len()
    );
    println!("{}", corpus_t.to_markdown());

    // Retrieval.
    let depth = args.depth.max(*TOP_K.iter().max().unwrap_or(&100));
    let t0 = Instant::now();
    let bm25 = Bm25::build(&passages, &Analyzer::default(), Bm25Params::default())?;
    let bm25_run = bm25.retrieve_all(&queries, depth)?;
    let bm25_s = t0.elapsed().as_secs_f64();
    println!("BM25: index + {} queries in {bm25_s:.1} s", queries.len());
    let encoder = Arc::new(BertEncoder::load(
        &assets,
        &args.model,
        EncoderParams::default(),
    )?);
    let cache = EmbeddingCache::project_default()?;
    let t0 = Instant::now();
    let (vectors, status) = cache.get_or_compute_with_status(&encoder, &passages)?;
    let embed_s = t0.elapsed().as_secs_f64();
    println!(
        "passage embeddings ({} × {}): {status:?} in {embed_s:.1} s",
        vectors.len(),
        encoder.dim()
    );
    let t0 = Instant::now();
    let index = workbench::retrieve::faiss::VectorIndex::build(
        IndexParams::flat_ip(),
        encoder.dim(),
        &vectors,
    )?;
    drop(vectors);
    let dense = DenseRetriever::from_parts(
        encoder.clone(),
        index,
        passages.iter().map(|p| p.id.clone()).collect(),
    )?;
    let dense_run = dense.retrieve_all(&queries, depth)?;
    let dense_s = t0.elapsed().as_secs_f64();
    println!("dense: index + {} queries in {dense_s:.1} s", queries.len());
    let fusion = Fusion::hybrid(args.hybrid_weight)?;
    let mut hybrid_run = Run::new();
    for q in &queries {
        let empty = Vec::new();
        let lists = [
            dense_run.get(&q.id).unwrap_or(&empty).clone(),
            bm25_run.get(&q.id).unwrap_or(&empty).clone(),
        ];
        let mut fused = fusion.fuse(&lists)?;
        fused.truncate(depth);
        hybrid_run.insert(q.id.clone(), fused);
    }

    // Answer recall.
    let systems: [(&str, String, &Run); 3] = [
        ("BM25", bm25.name(), &bm25_run),
        ("dense", dense.name(), &dense_run),
        (
            "hybrid",
            format!("minmax-w_{}-depth_{depth}(dense,bm25)", args.hybrid_weight),
            &hybrid_run,
        ),
    ];
    // Questions whose gold answers all normalise to nothing cannot be scored (DPR skips them).
    let evaluated = questions
        .iter()
        .filter(|q| q.answers.iter().any(|a| !normalize_answer(a).is_empty()))
        .count();
    let mut table = Table::new(
        std::iter::once("retriever".to_string()).chain(TOP_K.iter().map(|k| format!("Top-{k}"))),
    )
    .caption(format!(
        "NQ-open dev ({evaluated} of {} questions; answers that normalise to nothing are skipped): answer recall \
         (% of questions with a gold answer in the top k passages) over {} 100-word passages of three small Wikipedia \
         corpora. DPR (21M passages): BM25 Top-20 59.1, Top-100 73.7; DPR Top-20 78.4, Top-100 85.4.",
        questions.len(),
        passages.len()
    ));
    let mut curve = Table::new(["retriever", "k", "answer_recall"]);
    let mut lines: Vec<Line> = systems
        .iter()
        .map(|s| Line {
            label: s.0.to_string(),
            points: Vec::new(),
        })
        .collect();
    let mut per_k: Vec<Vec<workbench::evaluate::MetricResult>> = Vec::new();
    let mut summary = serde_json::Map::new();
    for (si, (label, _, run)) in systems.iter().enumerate() {
        // The curve from the rank of each question's first answering passage (one
        // `answer_in_text` per question and hit); the table's columns from the library's
        // `answer_recall_at_k`, which must agree.
        let first_hit: Vec<Option<usize>> = questions
            .iter()
            .map(|q| {
                run.get(&q.id).and_then(|hits| {
                    hits.iter()
                        .position(|h| answer_in_text(&window_text[&h.id], &q.answers))
                        .map(|i| i + 1)
                })
            })
            .collect();
        for k in 1..=depth {
            let found = first_hit
                .iter()
                .filter(|r| r.is_some_and(|r| r <= k))
                .count();
            let recall = found as f64 / evaluated as f64;
            curve.push([label.to_string(), k.to_string(), format!("{recall:.4}")])?;
            lines[si].points.push((k as f64, 100.0 * recall));
        }
        let mut row = vec![label.to_string()];
        let mut res = Vec::new();
        for &k in &TOP_K {
            let m = answer_recall_at_k(run, &window_text, &answers, k)?;
            let from_curve = first_hit
                .iter()
                .filter(|r| r.is_some_and(|r| r <= k))
                .count() as f64
                / evaluated as f64;
            anyhow::ensure!(
                (m.mean - from_curve).abs() < 1e-12,
                "{label}@{k}: answer_recall_at_k {} vs first-hit ranks {from_curve}",
                m.mean
            );
            row.push(format!("{:.1}", 100.0 * m.mean));
            summary.insert(format!("{label}@{k}"), m.mean.into());
            res.push(m);
        }
        table.push(row)?;
        per_k.push(res);
    }
    let mut sig = Table::new(
        ["retriever", "vs", "k"]
            .into_iter()
            .chain(significance::Comparison::COLUMNS),
    );
    for si in 1..systems.len() {
        for (ki, k) in TOP_K.iter().enumerate() {
            let (a, b) = (&per_k[si][ki], &per_k[0][ki]);
            let c = significance::compare(&a.per_query, &b.per_query, args.trials, args.seed)?;
            sig.push(
                [systems[si].0.to_string(), "BM25".to_string(), k.to_string()]
                    .into_iter()
                    .chain(c.cells()),
            )?;
        }
    }
    let mut per_question = Table::new(
        ["question_id", "question"]
            .into_iter()
            .map(String::from)
            .chain(
                systems
                    .iter()
                    .flat_map(|s| TOP_K.iter().map(move |k| format!("{}@{k}", s.0))),
            ),
    );
    for q in &questions {
        let mut row = vec![q.id.clone(), q.question.clone()];
        for res in &per_k {
            for m in res {
                row.push(
                    m.per_query
                        .get(&q.id)
                        .map(|v| format!("{v:.0}"))
                        .unwrap_or_default(),
                );
            }
        }
        per_question.push(row)?;
    }
    let figure = Lines {
        title: format!(
            "NQ-open dev ({} questions): answer recall@k over {} Wikipedia passages",
            questions.len(),
            passages.len()
        ),
        x_label: "k (passages retrieved)".into(),
        y_label: "questions with an answer in the top k (%)".into(),
        lines,
        log_x: true,
        y_range: None,
        size: (1100, 650),
    };
    render(&figure)?.save(out.out_dir(), "answer_recall")?;
    table.write_csv(&out.path("answer_recall.csv"))?;
    curve.write_csv(&out.path("curve.csv"))?;
    sig.write_csv(&out.path("significance.csv"))?;
    per_question.write_csv(&out.path("per_question.csv"))?;
    corpus_t.write_csv(&out.path("corpus.csv"))?;
    let md = format!(
        "{}\n\n{}\nPaired t, randomisation and bootstrap tests against BM25:\n\n{}\nCorpus:\n\n{}",
        table.caption.as_deref().unwrap_or(""),
        table.to_markdown(),
        sig.to_markdown(),
        corpus_t.to_markdown()
    );
    std::fs::write(out.path("answer_recall.md"), &md)?;
    summary.insert("questions".into(), questions.len().into());
    summary.insert("questions_evaluated".into(), evaluated.into());
    summary.insert("questions_available".into(), n_all.into());
    summary.insert("passages".into(), passages.len().into());
    summary.insert("embedding_cache".into(), format!("{status:?}").into());
    summary.insert("embed_seconds".into(), embed_s.into());
    summary.insert("bm25_seconds".into(), bm25_s.into());
    summary.insert("dense_seconds".into(), dense_s.into());
    println!("{md}");
    exp.finish(serde_json::Value::Object(summary))?;
    Ok(())
}
