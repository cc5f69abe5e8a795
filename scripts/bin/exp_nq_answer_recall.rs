//! Experiment (b): NQ-open dev questions over the Wikipedia corpora — DPR-style
//! answer recall (top-k retrieval accuracy) for BM25, dense and hybrid.
//!
//! ```text
//! cargo run --release --bin exp_nq_answer_recall [-- --force] [--max-questions N]
//! ```
//! Corpus: all three Wikipedia corpora that can be had offline (`enwiki-sample-dump`,
//! `wiki-leads-en`, `wikitext-2-raw`) in one index, cut into DPR's passage unit by
//! default: windows of `--window` words (default 100) with `--overlap` shared words
//! (default 0). As in DPR, the article title is prepended to the indexed and embedded
//! text (`title\nwindow`, `--no-title` turns it off); the answer check reads the window
//! text only, as DPR's does. Passage ids are `{corpus}:{doc id}#{window}`.
//!
//! Retrievers: BM25 (Lucene, k1 0.9, b 0.4), dense `--model` (default all-MiniLM-L6-v2)
//! with an exact FAISS inner-product index, and the min-max hybrid
//! `w·dense + (1 − w)·BM25` (`--hybrid-weight`, default 0.5) over the top `--depth` of
//! each (report 001). A question counts as answered at k when one of its top k
//! passages contains a gold answer under `--answer-match` (`evaluate::answer_match`):
//! `dpr` (default; DPR's `has_answer` string match, the rule behind the DPR numbers
//! the caption quotes), `dpr-regex` (answers as regular expressions; NQ's answers are
//! plain strings, and one of them, `)`, is not a valid pattern, so this stops with an
//! error naming it) or `squad` (SQuAD-normalised tokens). Paired t, randomisation and
//! bootstrap tests (`--trials`, default 10,000; `--seed`, default 42) compare dense and
//! hybrid with BM25 at each k. Every caption takes its facts from the run's
//! configuration and measurements ([`Facts`]).
//!
//! This corpus is ~10^3 times smaller than DPR's 21M-passage Wikipedia, so most NQ
//! answers are simply not in it: the numbers measure this corpus, not DPR's setting.
//!
//! Writes `data/results/nq-answer-recall/`: `answer_recall.csv` / `.md` (DPR's table
//! shape: retriever × top-k), `curve.csv` (k = 1…100), `significance.csv`,
//! `per_question.csv`, `corpus.csv` (every CSV but the last names the rule in an
//! `answer_match` column), `captions.json` (the table, test and figure captions),
//! `answer_recall.png/.svg`, `config.json`, `manifest.json`.

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
use workbench::evaluate::answer_match::{AnswerMatch, Golds, MatchText};
use workbench::evaluate::qa::answer_recall_at_k;
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
    /// Add a row re-ranking BM25's top `--depth` by MaxSim through the trained ColBERT
    /// projection of this dimension (`train_colbert --dim D --groups --colbert-groups`:
    /// frozen MiniLM, no markers, trained on SQuAD / RAG Mini / NQ groups; trained first if
    /// not cached). Its token store over every passage is cached in
    /// `data/cache/late-interaction/`. 0: no such row.
    #[arg(long, default_value_t = 128)]
    colbert_dim: usize,
    /// Training groups of that projection.
    #[arg(long, default_value_t = 800)]
    colbert_groups: usize,
    /// How a passage is found to hold a gold answer: `dpr` (DPR's has_answer string
    /// match), `dpr-regex` (answers are regular expressions) or `squad`
    /// (SQuAD-normalised tokens).
    #[arg(long, default_value = "dpr")]
    answer_match: AnswerMatch,
    /// Recompute even if the results are fresh.
    #[arg(long)]
    #[serde(skip)]
    force: bool,
}

#[derive(Serialize)]
struct Config<'a> {
    args: &'a Args,
    /// What `args.answer_match` means, spelled out.
    answer_match_rule: &'static str,
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
        answer_match_rule: args.answer_match.description(),
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

    // Passages: `--window`-word windows of every article of the corpora.
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
    // Each question's answers prepared for the rule once (a regex that cannot be
    // matched as DPR matches it stops the run here, naming the question).
    let rule = args.answer_match;
    let golds: Vec<Golds> = questions
        .iter()
        .map(|q| {
            rule.golds(&q.answers).with_context(|| {
                format!(
                    "NQ-open question `{}` under the `{rule}` answer match",
                    q.id
                )
            })
        })
        .collect::<Result<_>>()?;
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
    let bm25 = Arc::new(Bm25::build(
        &passages,
        &Analyzer::default(),
        Bm25Params::default(),
    )?);
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

    // BM25's top `depth` re-ranked by the trained ColBERT projection (issue 11).
    let colbert = if args.colbert_dim == 0 {
        None
    } else {
        use workbench::rerank::late_interaction::MaxSimReranker;
        use workbench::rerank::{PassageLookup, RerankedRetriever};
        let trained = workbench::train::colbert::default_trained(
            &assets,
            args.colbert_dim,
            args.colbert_groups,
        )?;
        let li = Arc::new(trained.late_interaction(encoder.clone())?);
        let t0 = Instant::now();
        let dir = workbench::paths::project_cache_dir("late-interaction")?;
        std::fs::create_dir_all(&dir)?;
        let store = li.load_or_build_store(
            &passages,
            &dir.join(format!("nq-wikipedia-{}.tok", li.label())),
        )?;
        println!(
            "token store ({}, {} vectors × {}) in {:.1} s",
            li.label(),
            store.n_vectors(),
            store.dim(),
            t0.elapsed().as_secs_f64()
        );
        let reranked = RerankedRetriever::new(
            Box::new(bm25.clone()),
            Box::new(MaxSimReranker::new(li.clone()).with_store(Arc::new(store))?),
            PassageLookup::from_passages(&passages)?,
            depth,
        )?;
        let t0 = Instant::now();
        let run = reranked.retrieve_all(&queries, depth)?;
        println!(
            "BM25 top-{depth} → trained MaxSim: {} queries in {:.1} s",
            queries.len(),
            t0.elapsed().as_secs_f64()
        );
        Some((li.label(), run))
    };

    // Answer recall.
    let mut systems: Vec<(&str, String, &Run)> = vec![
        ("BM25", bm25.name(), &bm25_run),
        ("dense", dense.name(), &dense_run),
        (
            "hybrid",
            format!("minmax-w_{}-depth_{depth}(dense,bm25)", args.hybrid_weight),
            &hybrid_run,
        ),
    ];
    if let Some((label, run)) = &colbert {
        systems.push((
            "BM25+ColBERT",
            format!("bm25-top{depth}-maxsim-{label}"),
            run,
        ));
    }
    // Questions without an answer usable under the rule cannot be scored (with
    // `dpr` none in NQ-open dev; with `squad`, answers such as `)` normalise to nothing).
    let evaluated = golds.iter().filter(|g| !g.is_empty()).count();
    let facts = Facts {
        rule,
        questions_available: n_all,
        questions: questions.len(),
        evaluated,
        passages: passages.len(),
        mean_words: total_words as f64 / passages.len().max(1) as f64,
        window: args.window,
        overlap: args.overlap,
        corpora: WIKIPEDIA_CORPORA.to_vec(),
        titles: !args.no_title,
        bm25: Bm25Params::default(),
        model: args.model.clone(),
        hybrid_weight: args.hybrid_weight,
        depth,
        colbert_dim: colbert.as_ref().map(|_| args.colbert_dim),
        trials: args.trials,
        seed: args.seed,
    };
    // Every table names the rule in its last column (the CSVs carry no caption).
    let mut table = Table::new(
        std::iter::once("retriever".to_string())
            .chain(TOP_K.iter().map(|k| format!("Top-{k}")))
            .chain(["answer_match".to_string()]),
    )
    .caption(facts.table_caption());
    let mut curve = Table::new(["retriever", "k", "answer_recall", "answer_match"]);
    let mut lines: Vec<Line> = systems
        .iter()
        .map(|s| Line {
            label: s.0.to_string(),
            points: Vec::new(),
        })
        .collect();
    let mut per_k: Vec<Vec<workbench::evaluate::MetricResult>> = Vec::new();
    let mut summary = serde_json::Map::new();
    // Each retrieved window prepared for the rule once, shared by the three systems.
    let mut prepared: HashMap<&str, MatchText> = HashMap::new();
    for (si, (label, _, run)) in systems.iter().enumerate() {
        // The curve from the rank of each question's first answering passage (one
        // `Golds::found_in` per question and hit); the table's columns from the library's
        // `answer_recall_at_k`, which must agree.
        let mut first_hit: Vec<Option<usize>> = Vec::with_capacity(questions.len());
        for (q, g) in questions.iter().zip(&golds) {
            let mut rank = None;
            if !g.is_empty() {
                for (i, h) in run
                    .get(&q.id)
                    .map(Vec::as_slice)
                    .unwrap_or(&[])
                    .iter()
                    .enumerate()
                {
                    let text = window_text
                        .get(&h.id)
                        .with_context(|| format!("{label}: unknown passage id `{}`", h.id))?;
                    let t = prepared
                        .entry(h.id.as_str())
                        .or_insert_with(|| rule.prepare(text));
                    if g.found_in(t)? {
                        rank = Some(i + 1);
                        break;
                    }
                }
            }
            first_hit.push(rank);
        }
        for k in 1..=depth {
            let found = first_hit
                .iter()
                .filter(|r| r.is_some_and(|r| r <= k))
                .count();
            let recall = found as f64 / evaluated as f64;
            curve.push([
                label.to_string(),
                k.to_string(),
                format!("{recall:.4}"),
                rule.name().to_string(),
            ])?;
            lines[si].points.push((k as f64, 100.0 * recall));
        }
        let mut row = vec![label.to_string()];
        let mut res = Vec::new();
        for &k in &TOP_K {
            let m = answer_recall_at_k(run, &window_text, &answers, k, rule)?;
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
        row.push(rule.name().to_string());
        table.push(row)?;
        per_k.push(res);
    }
    let mut sig = Table::new(
        ["retriever", "vs", "k"]
            .into_iter()
            .chain(significance::Comparison::COLUMNS)
            .chain(["answer_match"]),
    );
    for si in 1..systems.len() {
        for (ki, k) in TOP_K.iter().enumerate() {
            let (a, b) = (&per_k[si][ki], &per_k[0][ki]);
            let c = significance::compare(&a.per_query, &b.per_query, args.trials, args.seed)?;
            sig.push(
                [systems[si].0.to_string(), "BM25".to_string(), k.to_string()]
                    .into_iter()
                    .chain(c.cells())
                    .chain([rule.name().to_string()]),
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
            )
            .chain(["answer_match".to_string()]),
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
        row.push(rule.name().to_string());
        per_question.push(row)?;
    }
    let figure = Lines {
        title: facts.figure_title(),
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
        "{}\n\n{}\n{}\n\n{}\nCorpus:\n\n{}",
        table.caption.as_deref().unwrap_or(""),
        table.to_markdown(),
        facts.significance_heading(),
        sig.to_markdown(),
        corpus_t.to_markdown()
    );
    std::fs::write(out.path("answer_recall.md"), &md)?;
    // The captions on their own, for readers of the CSVs (the notebook).
    let captions = serde_json::json!({
        "answer_recall": facts.table_caption(),
        "significance": facts.significance_heading(),
        "figure": facts.figure_title(),
    });
    std::fs::write(
        out.path("captions.json"),
        serde_json::to_string_pretty(&captions)? + "\n",
    )?;
    summary.insert("questions".into(), questions.len().into());
    summary.insert("questions_evaluated".into(), evaluated.into());
    summary.insert("answer_match".into(), rule.name().into());
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

/// What the captions say, every item taken from the run's configuration or
/// measured in the run (never a constant an argument can change).
#[derive(Debug, Clone)]
struct Facts {
    rule: AnswerMatch,
    /// Questions in the NQ-open dev file.
    questions_available: usize,
    /// Questions used (`--max-questions`).
    questions: usize,
    /// Questions with an answer usable under the rule.
    evaluated: usize,
    passages: usize,
    /// Mean words per passage window (title excluded), measured.
    mean_words: f64,
    window: usize,
    overlap: usize,
    corpora: Vec<&'static str>,
    /// Article titles prepended to the indexed text.
    titles: bool,
    bm25: Bm25Params,
    model: String,
    hybrid_weight: f32,
    /// Hits per question and per side of the hybrid (after raising to max k).
    depth: usize,
    /// Dimension of the trained ColBERT projection re-ranking BM25, if that row is on.
    colbert_dim: Option<usize>,
    trials: usize,
    seed: u64,
}

impl Facts {
    /// The answer-recall table's caption.
    fn table_caption(&self) -> String {
        let skipped = self.questions - self.evaluated;
        let used = if self.questions == self.questions_available {
            format!("all {} questions", thousands(self.questions))
        } else {
            format!(
                "the first {} of {} questions",
                thousands(self.questions),
                thousands(self.questions_available)
            )
        };
        let scored = if skipped == 0 {
            "every one with an answer usable under the rule".to_string()
        } else {
            format!(
                "{} scored, {} without an answer usable under the rule skipped",
                thousands(self.evaluated),
                thousands(skipped)
            )
        };
        let dpr_note = if self.rule == AnswerMatch::Dpr {
            "the same matching rule"
        } else {
            "DPR's string match, not the rule used here"
        };
        format!(
            "NQ-open dev, {used} ({scored}): answer recall, the % of questions with a gold answer in \
             the top k passages. Answer match `{rule}`: {desc}. Passages: {passages} windows of at most \
             {window} words (overlap {overlap}; {mean:.1} words on average) from {nc} Wikipedia corpora \
             ({corpora}){titles}. Retrievers: BM25 (k1 {k1}, b {b}); dense {model}, exact inner product; \
             hybrid min-max {w}·dense + (1 − {w})·BM25 over the top {depth} of each{colbert}. For scale, DPR on 21M \
             passages with {dpr_note}: BM25 Top-20 59.1, Top-100 73.7; DPR Top-20 78.4, Top-100 85.4.",
            colbert = match self.colbert_dim {
                Some(d) => format!(
                    "; BM25+ColBERT: BM25's top {} re-ranked by MaxSim through a d = {d} projection trained on this CPU (frozen {}, no markers)",
                    self.depth, self.model
                ),
                None => String::new(),
            },
            rule = self.rule,
            desc = self.rule.description(),
            passages = thousands(self.passages),
            window = self.window,
            overlap = self.overlap,
            mean = self.mean_words,
            nc = self.corpora.len(),
            corpora = self.corpora.join(", "),
            titles = if self.titles {
                ", titles prepended for retrieval, not for matching"
            } else {
                ", no titles"
            },
            k1 = self.bm25.k1,
            b = self.bm25.b,
            model = self.model,
            w = self.hybrid_weight,
            depth = self.depth,
        )
    }

    /// The heading of the significance table.
    fn significance_heading(&self) -> String {
        format!(
            "Paired t, randomisation and bootstrap tests ({} trials each, seed {}) against BM25, \
             per question, answer match `{}`:",
            thousands(self.trials),
            self.seed,
            self.rule,
        )
    }

    /// The figure's title.
    fn figure_title(&self) -> String {
        format!(
            "NQ-open dev ({} questions, answer match {}): answer recall@k over {} passages of ≤ {} words",
            thousands(self.evaluated),
            self.rule,
            thousands(self.passages),
            self.window
        )
    }
}

/// `n` with a comma every three digits (`10000` → `10,000`).
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let head = digits.len() % 3;
    let mut out = digits[..head].to_string();
    for group in digits.as_bytes()[head..].chunks(3) {
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(&String::from_utf8_lossy(group));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        Facts {
            rule: AnswerMatch::Dpr,
            questions_available: 3610,
            questions: 3610,
            evaluated: 3610,
            passages: 19227,
            mean_words: 97.25,
            window: 100,
            overlap: 0,
            corpora: WIKIPEDIA_CORPORA.to_vec(),
            titles: true,
            bm25: Bm25Params::default(),
            model: "all-minilm-l6-v2".into(),
            hybrid_weight: 0.5,
            depth: 100,
            colbert_dim: None,
            trials: 10_000,
            seed: 42,
        }
    }

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(19227), "19,227");
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn captions_follow_the_arguments() {
        let d = facts();
        let c = d.table_caption();
        assert!(c.contains("all 3,610 questions (every one"), "{c}");
        assert!(
            c.contains("19,227 windows of at most 100 words (overlap 0; 97.2 words"),
            "{c}"
        );
        assert!(
            c.contains("`dpr`") && c.contains("with the same matching rule"),
            "{c}"
        );
        assert!(
            c.contains("3 Wikipedia corpora") && c.contains("titles prepended"),
            "{c}"
        );
        assert!(d
            .significance_heading()
            .contains("10,000 trials each, seed 42"));

        // Non-default arguments: nothing of the defaults may survive.
        let o = Facts {
            rule: AnswerMatch::Squad,
            questions: 500,
            evaluated: 499,
            passages: 12345,
            mean_words: 141.5,
            window: 150,
            overlap: 25,
            titles: false,
            model: "all-mpnet-base-v2".into(),
            hybrid_weight: 0.3,
            depth: 200,
            trials: 500,
            seed: 7,
            ..facts()
        };
        let c = o.table_caption();
        for want in [
            "the first 500 of 3,610 questions (499 scored, 1 without",
            "12,345 windows of at most 150 words (overlap 25; 141.5 words",
            "Answer match `squad`: SQuAD-normalised",
            "not the rule used here",
            "no titles",
            "dense all-mpnet-base-v2",
            "0.3·dense + (1 − 0.3)·BM25 over the top 200",
        ] {
            assert!(c.contains(want), "missing {want:?} in {c}");
        }
        for stale in [
            "100-word",
            "100 words",
            "19,227",
            "all-minilm",
            "0.5",
            "all 3,610",
        ] {
            assert!(!c.contains(stale), "stale {stale:?} in {c}");
        }
        let h = o.significance_heading();
        assert!(
            h.contains("500 trials each, seed 7") && h.contains("`squad`"),
            "{h}"
        );
        assert!(!h.contains("10,000") && !h.contains("42"), "{h}");
        let f = o.figure_title();
        assert!(
            f.contains("499 questions, answer match squad")
                && f.contains("12,345 passages of ≤ 150 words"),
            "{f}"
        );
    }
}
