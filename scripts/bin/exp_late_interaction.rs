//! Experiment (c): report 003's table — TF-IDF, late-interaction (MaxSim) re-rank and
//! MaxSim end-to-end retrieval — on SQuAD 2.0 dev (the CS224N half).
//!
//! ```text
//! cargo run --release --bin exp_late_interaction [-- --force]
//! ```
//! Passages: the 646 SQuAD contexts (paragraphs). Queries: the answerable questions,
//! each with one relevant passage, its own context — like report 003's FANDOM-QA,
//! where each question has a single answering passage.
//!
//! | system | what |
//! |---|---|
//! | TF-IDF | cosine over TF-IDF vectors (report 003's first stage) |
//! | MaxSim re-rank | TF-IDF top `--rerank-depth` re-scored by mean-MaxSim |
//! | MaxSim end-to-end (λ) | each query token's `k̂ = ⌈k/λ⌉` nearest passage tokens (exact FAISS inner product over every passage token), their passages ranked by exact mean-MaxSim; `k = --depth` |
//! | MaxSim end-to-end, approximate | centroid pruning (`late_interaction::approx`: FAISS k-means with `--approx-nlist` cells, `--approx-nprobe` cells per query token, the `--approx-candidates` best passages by centroid interaction), exact mean-MaxSim on those; `--approx-nlist 0` drops the row (`bench_token_index` times it against the exact row) |
//!
//! Token vectors are **raw 384-d all-MiniLM-L6-v2 last hidden states** (L2-normalised,
//! no projection, no `[Q]`/`[D]` markers): not a trained ColBERT, which is not
//! available here. Report 003 measured MRR@10 and Recall@1/10/1000 over a far larger
//! corpus; with 646 passages Recall@1000 is trivially 1, so the table reports
//! Recall@1, @10 and @50 (and MRR@10). Paired randomisation tests (`--trials`, default
//! 10,000; `--seed`, default 42) compare each system with TF-IDF.
//!
//! Also renders report 003's token-relevance views (`R_abs`, `R_acc`, Gaussian KDE,
//! k̃ = `--k-tilde`, default 2) for two query/passage pairs as HTML, chosen by the
//! **first** end-to-end system (the first λ of `--lambdas`; by default λ = 2, report
//! 003's base setting and the table's row): `token_relevance_1.html` (the first
//! question whose context it ranks first) and `token_relevance_2.html` (the first it
//! misses at rank 1), each with its gold context. The pages and the manifest summary
//! (`token_relevance_system`) name that system.
//!
//! With `--held-out --colbert-dims 24,32,64,128` (as `scripts/reproduce` runs it) only
//! the questions of the five held-out articles are asked (the trained projections never
//! saw them; the corpus stays all 646 contexts) and a re-rank row per trained ColBERT
//! projection (`train::colbert`: frozen MiniLM, no markers, trained on the other
//! articles, RAG Mini and NQ) is added, with its storage per passage;
//! `--colbert-ablation` adds diagnostic rows (the markers on raw vectors, the untrained
//! PCA head, a head trained with the markers). Results go to
//! `data/results/late-interaction-heldout/`.
//!
//! Writes `data/results/late-interaction/`: `metrics.csv`, `metrics.md`,
//! `significance.csv`, `per_query.csv`, `token_relevance_{1,2}.html`,
//! `recall_at_k.png/.svg` / `.csv` (k = 1…50), `config.json`, `manifest.json`.

use anyhow::{Context, Result};
use clap::Parser;
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;
use workbench::assets::Assets;
use workbench::chunk::{Chunker, WholeDocument};
use workbench::display::Table;
use workbench::evaluate::{evaluate, significance, Metric, MetricResult};
use workbench::load::squad;
use workbench::plot::{render, Line, Lines};
use workbench::rerank::late_interaction::{
    ApproxSearch, ApproxTokenIndex, CentroidParams, LateInteraction, MaxSimApprox, MaxSimEndToEnd,
    MaxSimReranker, Projection, RelevanceParams, TokenIndex,
};
use workbench::rerank::{PassageLookup, RerankedRetriever};
use workbench::results::Experiment;
use workbench::retrieve::analyzer::Analyzer;
use workbench::retrieve::tfidf::{TfIdf, TfIdfVariant};
use workbench::retrieve::Retriever;
use workbench::{Qrels, Query, Run};

const NAME: &str = "late-interaction";
/// Printed when the result is fresh and the run is skipped.
const SUMMARY_FILE: &str = "metrics.md";
const DATA: &str = "squad-v2-dev-half";

#[derive(Parser, Serialize, Debug)]
#[command(about = "Experiment (c): report 003's table — TF-IDF, MaxSim re-rank, MaxSim end-to-end")]
struct Args {
    /// quick: the first 300 questions (unless `--max-questions` says otherwise) and
    /// results in `<name>-quick/`; default and paper: every question.
    #[arg(long, default_value = "default")]
    scale: workbench::study::Scale,
    /// Passages ranked per query (the `k` of k̂ = k/λ for end-to-end).
    #[arg(long, default_value_t = 100)]
    depth: usize,
    /// TF-IDF candidates re-ranked by MaxSim.
    #[arg(long, default_value_t = 100)]
    rerank_depth: usize,
    /// λ values for end-to-end retrieval (k̂ = ⌈k/λ⌉); report 003's best was 2.
    #[arg(long, value_delimiter = ',', default_value = "2")]
    lambdas: Vec<f32>,
    /// k-means cells of the approximate end-to-end row (0: no such row).
    #[arg(long, default_value_t = 1024)]
    approx_nlist: usize,
    /// Cells probed per query token by the approximate row.
    #[arg(long, default_value_t = 1)]
    approx_nprobe: usize,
    /// Passages the approximate row scores exactly (the best by centroid interaction).
    #[arg(long, default_value_t = 64)]
    approx_candidates: usize,
    /// Questions over which end-to-end candidate counts are measured.
    #[arg(long, default_value_t = 200)]
    candidate_sample: usize,
    /// k̃ of the token-relevance views (report 003: 2).
    #[arg(long, default_value_t = 2)]
    k_tilde: usize,
    /// Use only the first N answerable questions (default: all).
    #[arg(long)]
    max_questions: Option<usize>,
    /// Only the questions of the five held-out articles (`train::qa_data::HELD_OUT_ARTICLES`,
    /// never trained on); the corpus stays all 646 contexts. Needed for trained rows.
    #[arg(long)]
    held_out: bool,
    /// Add a re-rank row per trained ColBERT projection of these dimensions
    /// (`train::colbert`, trained first if not cached; e.g. `24,32,64,128`).
    #[arg(long, value_delimiter = ',')]
    colbert_dims: Vec<usize>,
    /// Add diagnostic re-rank rows that separate the parts of the trained projection
    /// (needs `--held-out`): raw 384-d vectors encoded with ColBERT's markers and
    /// `[MASK]` padding, and the d = 128 PCA head before any update, with and without
    /// the markers.
    #[arg(long)]
    colbert_ablation: bool,
    /// Training groups of the trained projections (`train_colbert --groups`; 0 = all).
    #[arg(long, default_value_t = 800)]
    colbert_groups: usize,
    /// Monte Carlo trials of the randomisation tests.
    #[arg(long, default_value_t = 10_000)]
    trials: usize,
    /// Seed of the randomisation tests.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Recompute even if the results are fresh.
    #[arg(long)]
    #[serde(skip)]
    force: bool,
}

#[derive(Serialize)]
struct Config<'a> {
    args: &'a Args,
    data: &'static str,
    metrics: Vec<String>,
    token_encoder: &'static str,
    inputs: Vec<(String, String)>,
    program_sha256: String,
}

struct System {
    label: String,
    /// How many passages the system scores per query.
    scored: String,
    name: String,
    run: Run,
    seconds: f64,
}

/// Diagnostic rows for the trained projection (`--colbert-ablation`): what ColBERT's
/// markers and `[MASK]` padding do to raw MiniLM vectors, the d = 128 PCA head before any
/// update (computed exactly as `train::colbert::train_or_load` starts it: same seeded
/// sample of groups, same cached token vectors), and a d = 128 head trained with the
/// markers (the recipe's switch on, trained and cached like the others).
fn ablation_rows(
    assets: &Assets,
    groups: usize,
    mut row: impl FnMut(Arc<LateInteraction>, String) -> Result<System>,
) -> Result<Vec<System>> {
    use workbench::train::colbert::{self, ColbertHead, ColbertRecipe, WEIGHT_NAME};
    let mut recipe = ColbertRecipe::default_minilm(128);
    recipe.max_groups = (groups > 0).then_some(groups);
    let cache = colbert::default_cache_root()?;
    let plain = colbert::recipe_encoder(assets, &recipe)?;
    let set = colbert::sampled_groups(assets, &recipe)?;
    let data = colbert::group_vectors(&plain, &set.groups, recipe.negatives, &cache)?;
    let head = ColbertHead::pca(recipe.dim, &[&data.queries, &data.passages])?;
    let path = cache.join(format!(
        "pca-untrained-d{}-{}.safetensors",
        recipe.dim,
        recipe.key(assets)?
    ));
    head.save(&path)?;
    let pca = Projection::load(&path, Some(WEIGHT_NAME))?;
    let mut marked = recipe.clone();
    marked.markers = true;
    marked.name.push_str("-markers");
    let (trained_marked, _) = colbert::train_or_load(assets, &marked, &cache)?;
    Ok(vec![
        row(
            Arc::new(LateInteraction::load_minilm(assets)?.with_markers(recipe.n_q)?),
            format!(
                "MaxSim raw 384-d with [Q]/[D] markers and [MASK] padding to {} (no projection)",
                recipe.n_q
            ),
        )?,
        row(
            Arc::new(plain.with_projection(pca)?),
            "MaxSim d = 128 PCA head, no update".into(),
        )?,
        row(
            Arc::new(
                colbert::recipe_encoder(assets, &marked)?
                    .with_projection(trained_marked.projection()?)?,
            ),
            "trained MaxSim d = 128 with markers, pca init".into(),
        )?,
    ])
}

/// A legend-sized label: `MaxSim end-to-end (k = 100, λ = 2, k̂ = 50)` → `MaxSim end-to-end (λ = 2)`.
fn short_label(label: &str) -> String {
    match (label.split_once(" (k = "), label.split_once("λ = ")) {
        (Some((head, _)), Some((_, rest))) => {
            format!("{head} (λ = {})", rest.split(',').next().unwrap_or(rest))
        }
        _ => label.to_string(),
    }
}

fn html_page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head>\
         <body style=\"max-width:60em;margin:1em auto;font-family:sans-serif\">{body}</body></html>\n"
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn main() -> Result<()> {
    let mut args = Args::parse();
    if args.scale == workbench::study::Scale::Quick && args.max_questions.is_none() {
        args.max_questions = Some(300);
    }
    let assets = Assets::load()?;
    let metrics = [
        Metric::Mrr(10),
        Metric::Recall(1),
        Metric::Recall(10),
        Metric::Recall(50),
    ];
    let inputs = assets.input_checksums([DATA, "all-minilm-l6-v2"])?;
    let config = Config {
        args: &args,
        data: DATA,
        metrics: metrics.iter().map(Metric::name).collect(),
        token_encoder: "all-minilm-l6-v2 last hidden states, raw 384-d, L2-normalised (LateInteraction::load_minilm)",
        inputs,
        program_sha256: workbench::results::executable_sha256()?,
    };
    // The held-out table (with the trained rows) is its own result folder.
    let name = if args.held_out {
        format!("{NAME}-heldout")
    } else {
        NAME.to_string()
    };
    let Some(exp) = Experiment::start(
        &args.scale.result_name(&name),
        &config,
        args.force,
        SUMMARY_FILE,
    )?
    else {
        return Ok(());
    };
    let out = &exp.out;

    let set = squad::load(&assets.resolve(DATA, "dev-v2.0.json")?)
        .with_context(|| format!("loading `{DATA}`"))?;
    let passages = WholeDocument.chunk_all(&set.contexts)?;
    let held_ctx: std::collections::HashSet<&str> = set
        .contexts
        .iter()
        .filter(|d| workbench::train::qa_data::HELD_OUT_ARTICLES.contains(&d.title.as_str()))
        .map(|d| d.id.as_str())
        .collect();
    if args.held_out && held_ctx.is_empty() {
        anyhow::bail!("no context of `{DATA}` belongs to the held-out articles");
    }
    if (!args.colbert_dims.is_empty() || args.colbert_ablation) && !args.held_out {
        anyhow::bail!(
            "trained rows (--colbert-dims, --colbert-ablation) need --held-out: the other questions are training data"
        );
    }
    let answerable: Vec<_> = set
        .examples
        .iter()
        .filter(|q| !q.is_unanswerable())
        .filter(|q| {
            !args.held_out
                || q.context_id
                    .as_deref()
                    .is_some_and(|c| held_ctx.contains(c))
        })
        .take(args.max_questions.unwrap_or(usize::MAX))
        .collect();
    let queries: Vec<Query> = answerable.iter().map(|q| q.to_query()).collect();
    let mut qrels = Qrels::new();
    for q in &answerable {
        let ctx = q
            .context_id
            .clone()
            .context("SQuAD question without a context id")?;
        qrels.entry(q.id.clone()).or_default().insert(ctx, 1);
    }
    println!(
        "{DATA}: {} contexts, {} questions, {} answerable used",
        passages.len(),
        set.examples.len(),
        queries.len()
    );

    // Models and indexes.
    let late = Arc::new(LateInteraction::load_minilm(&assets)?);
    let token_vectors = format!(
        "raw {}-d all-MiniLM-L6-v2 last hidden states, L2-normalised, no projection",
        late.dim()
    );
    let t0 = Instant::now();
    let store_path = workbench::paths::project_cache_dir("late-interaction")?
        .join(format!("{DATA}-{}.tok", late.label()));
    std::fs::create_dir_all(store_path.parent().expect("has a parent"))?;
    let store = late.load_or_build_store(&passages, &store_path)?;
    let store_s = t0.elapsed().as_secs_f64();
    println!(
        "token store: {} passages, {} token vectors × {} in {store_s:.1} s ({})",
        store.len(),
        store.n_vectors(),
        store.dim(),
        store_path.display()
    );
    let n_vectors = store.n_vectors();
    let store = Arc::new(store);
    let tfidf = Arc::new(TfIdf::build(
        &passages,
        &Analyzer::default(),
        TfIdfVariant::cosine(),
    )?);

    let mut systems: Vec<System> = Vec::new();
    let time = |label: String, r: &dyn Retriever, k: usize| -> Result<System> {
        let t0 = Instant::now();
        let mut run = Run::new();
        let mut bar = workbench::progress::bar(queries.len(), &label);
        for q in &queries {
            run.insert(q.id.clone(), r.retrieve(&q.text, k)?);
            workbench::progress::tick(&mut bar, 1);
        }
        let seconds = t0.elapsed().as_secs_f64();
        eprintln!();
        println!("{label}: {} queries in {seconds:.1} s", queries.len());
        Ok(System {
            label,
            scored: String::new(),
            name: r.name(),
            run,
            seconds,
        })
    };
    let mut tf = time("TF-IDF (cosine)".into(), tfidf.as_ref(), args.depth)?;
    tf.scored = "every passage with a query term".into();
    systems.push(tf);
    // TF-IDF top-`rerank_depth` re-ranked by MaxSim with `li` over its store at `path`
    // (built if absent or stale).
    let rerank_row = |li: Arc<LateInteraction>,
                      store: Option<Arc<workbench::rerank::late_interaction::TokenStore>>,
                      label: String|
     -> Result<System> {
        let st = match store {
            Some(st) => st,
            None => {
                let path = store_path.with_file_name(format!("{DATA}-{}.tok", li.label()));
                Arc::new(li.load_or_build_store(&passages, &path)?)
            }
        };
        let reranker = MaxSimReranker::new(li).with_store(st)?;
        let reranked = RerankedRetriever::new(
            Box::new(tfidf.clone()),
            Box::new(reranker),
            PassageLookup::from_passages(&passages)?,
            args.rerank_depth,
        )?;
        let mut rr = time(label, &reranked, args.depth.min(args.rerank_depth))?;
        rr.scored = args.rerank_depth.to_string();
        Ok(rr)
    };
    systems.push(rerank_row(
        late.clone(),
        Some(store.clone()),
        format!("TF-IDF top-{} → MaxSim re-rank", args.rerank_depth),
    )?);
    let per_passage_kb = |n_vectors: usize, dim: usize| {
        n_vectors as f64 / passages.len().max(1) as f64 * dim as f64 * 2.0 / 1024.0
    };
    println!(
        "raw {}-d: {:.1} KB per passage (f16)",
        late.dim(),
        per_passage_kb(n_vectors, late.dim())
    );
    for &d in &args.colbert_dims {
        use workbench::train::colbert;
        let trained = colbert::default_trained(&assets, d, args.colbert_groups)?;
        let recipe = &trained.recipe;
        let li = Arc::new(
            colbert::recipe_encoder(&assets, recipe)?.with_projection(trained.projection()?)?,
        );
        let path = store_path.with_file_name(format!("{DATA}-{}.tok", li.label()));
        let st = Arc::new(li.load_or_build_store(&passages, &path)?);
        let kb = per_passage_kb(st.n_vectors(), st.dim());
        systems.push(rerank_row(
            li,
            Some(st),
            format!(
                "TF-IDF top-{} → trained MaxSim d = {d}, {} init{} ({kb:.1} KB/passage)",
                args.rerank_depth,
                format!("{:?}", recipe.init).to_lowercase(),
                if recipe.markers { ", markers" } else { "" }
            ),
        )?);
    }
    if args.colbert_ablation {
        systems.extend(ablation_rows(&assets, args.colbert_groups, |li, label| {
            rerank_row(
                li,
                None,
                format!("TF-IDF top-{} → {label}", args.rerank_depth),
            )
        })?);
    }
    let t0 = Instant::now();
    let store = Arc::try_unwrap(store).unwrap_or_else(|shared| (*shared).clone());
    let first_e2e = systems.len();
    let mut e2e = MaxSimEndToEnd::from_index(late.clone(), TokenIndex::build(store)?)?;
    println!(
        "token index (exact inner product, {n_vectors} vectors) in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    for &lambda in &args.lambdas {
        e2e = e2e.with_lambda(lambda)?;
        let k_hat = e2e.k_hat(args.depth);
        let mut sys = time(
            format!(
                "MaxSim end-to-end (k = {}, λ = {lambda}, k̂ = {k_hat})",
                args.depth
            ),
            &e2e,
            args.depth,
        )?;
        // Candidate passages (exactly MaxSim-scored) per query, over the first questions.
        let sample = &queries[..queries.len().min(args.candidate_sample)];
        let mut counts = Vec::with_capacity(sample.len());
        for q in sample {
            let qv = late.encode_query(&q.text)?;
            counts.push(e2e.index().candidates(&qv.vectors, k_hat)?.len());
        }
        let mean = counts.iter().sum::<usize>() as f64 / counts.len().max(1) as f64;
        println!(
            "λ = {lambda}: {mean:.1} candidate passages per query (of {}; first {} questions)",
            passages.len(),
            sample.len()
        );
        sys.scored = format!("{mean:.0} (mean, first {} questions)", sample.len());
        systems.push(sys);
    }

    if args.approx_nlist > 0 {
        let params = CentroidParams::new(args.approx_nlist);
        let path = ApproxTokenIndex::path_next_to(&store_path, &params);
        let t0 = Instant::now();
        let index =
            ApproxTokenIndex::load_or_build(Arc::new(e2e.index().store().clone()), params, &path)?;
        println!(
            "centroid index {} in {:.1} s ({})",
            params.tag(),
            t0.elapsed().as_secs_f64(),
            path.display()
        );
        let search = ApproxSearch {
            nprobe: args.approx_nprobe,
            candidates: args.approx_candidates,
        };
        let approx = MaxSimApprox::new(late.clone(), Arc::new(index), search)?;
        let mut sys = time(
            format!(
                "MaxSim end-to-end, approximate (nlist {}, nprobe {}, {} candidates)",
                args.approx_nlist, args.approx_nprobe, args.approx_candidates
            ),
            &approx,
            args.depth,
        )?;
        sys.scored = args.approx_candidates.min(passages.len()).to_string();
        systems.push(sys);
    }

    // Metrics and significance against TF-IDF.
    let results: Vec<Vec<MetricResult>> = systems
        .iter()
        .map(|s| evaluate(&s.run, &qrels, &metrics))
        .collect::<workbench::Result<_>>()?;
    let mut table = Table::new(["system", "MRR@10", "Recall@1", "Recall@10", "Recall@50", "passages scored/query", "ms/query"]).caption(format!(
        "SQuAD 2.0 dev (CS224N half): {} answerable questions, {} passages, one relevant passage each. \
         Token vectors: {} (`{}`; not a trained ColBERT). † / †† : randomisation test against TF-IDF \
         ({} trials, seed {}), p < 0.05 / p < 0.01.",
        queries.len(),
        passages.len(),
        token_vectors,
        late.label(),
        args.trials,
        args.seed
    ));
    let mut sig = Table::new(
        ["system", "metric"]
            .into_iter()
            .chain(significance::Comparison::COLUMNS),
    );
    for (si, s) in systems.iter().enumerate() {
        let mut row = vec![s.label.clone()];
        for (mi, m) in results[si].iter().enumerate() {
            let mut mark = "";
            if si > 0 {
                let b = &results[0][mi];
                let c = significance::compare(&m.per_query, &b.per_query, args.trials, args.seed)?;
                sig.push(
                    [s.label.clone(), m.name.clone()]
                        .into_iter()
                        .chain(c.cells()),
                )?;
                mark = c.marker();
            }
            row.push(format!("{:.4}{mark}", m.mean));
        }
        row.push(s.scored.clone());
        row.push(format!("{:.2}", 1e3 * s.seconds / queries.len() as f64));
        table.push(row)?;
    }

    // Rank of the gold passage per query, and its histogram.
    let rank_of = |run: &Run, qid: &str| -> Option<usize> {
        let gold = qrels[qid].keys().next()?;
        run.get(qid)?
            .iter()
            .position(|h| &h.id == gold)
            .map(|i| i + 1)
    };
    let mut per_query = Table::new(
        ["query_id", "question", "gold_passage"]
            .into_iter()
            .map(String::from)
            .chain(systems.iter().map(|s| format!("rank: {}", s.label))),
    );
    for q in &answerable {
        let mut row = vec![
            q.id.clone(),
            q.question.clone(),
            q.context_id.clone().unwrap_or_default(),
        ];
        for s in &systems {
            row.push(
                rank_of(&s.run, &q.id)
                    .map(|r| r.to_string())
                    .unwrap_or_else(|| format!(">{}", args.depth)),
            );
        }
        per_query.push(row)?;
    }
    // Figure: Recall@k (= share of questions whose passage is in the top k), k = 1…50.
    let curve_k = 50.min(args.depth);
    let mut curve = Table::new(["system", "k", "recall"]);
    let mut lines = Vec::new();
    for s in &systems {
        let mut points = Vec::new();
        let ranks: Vec<Option<usize>> = queries.iter().map(|q| rank_of(&s.run, &q.id)).collect();
        for k in 1..=curve_k {
            let r = ranks.iter().filter(|x| x.is_some_and(|x| x <= k)).count() as f64
                / ranks.len() as f64;
            curve.push([s.label.clone(), k.to_string(), format!("{r:.4}")])?;
            points.push((k as f64, 100.0 * r));
        }
        lines.push(Line {
            label: short_label(&s.label),
            points,
        });
    }
    let figure = Lines {
        title: format!(
            "{}: Recall@k, {} questions, {} passages",
            if args.held_out {
                "SQuAD 2.0 dev half, five held-out articles' questions"
            } else {
                "SQuAD 2.0 dev half"
            },
            queries.len(),
            passages.len()
        ),
        x_label: "k".into(),
        y_label: "questions whose passage is in the top k (%)".into(),
        lines,
        log_x: true,
        y_range: None,
        size: (1100, 650),
    };
    render(&figure)?.save(out.out_dir(), "recall_at_k")?;
    curve.write_csv(&out.path("recall_at_k.csv"))?;

    // Token relevance for two pairs: one hit and one miss at rank 1 of the first
    // end-to-end system (systems[0] is TF-IDF, [1] the re-ranker, then one per λ).
    let e2e_system = systems
        .get(first_e2e)
        .context("no end-to-end system: --lambdas is empty")?;
    let e2e_run = &e2e_system.run;
    let hit = answerable
        .iter()
        .find(|q| rank_of(e2e_run, &q.id) == Some(1));
    let miss = answerable
        .iter()
        .find(|q| rank_of(e2e_run, &q.id).is_some_and(|r| r > 1));
    let lookup = PassageLookup::from_passages(&passages)?;
    let params = RelevanceParams {
        k_tilde: args.k_tilde,
        bandwidth: None,
    };
    let mut examples = Vec::new();
    for (i, q) in [hit, miss].into_iter().flatten().enumerate() {
        let gold = q.context_id.clone().unwrap_or_default();
        let text = lookup.require(&gold)?;
        let tr = late.token_relevance(&q.question, text, &params)?;
        let ranks: Vec<String> = systems
            .iter()
            .map(|s| {
                format!(
                    "{}: {}",
                    escape(&s.label),
                    rank_of(&s.run, &q.id)
                        .map(|r| r.to_string())
                        .unwrap_or_else(|| format!(">{}", args.depth))
                )
            })
            .collect();
        let top1 = e2e_run
            .get(&q.id)
            .and_then(|h| h.first())
            .map(|h| h.id.clone())
            .unwrap_or_default();
        let body = format!(
            "<h2>Token relevance, example {} (report 003 §5)</h2>\
             <p><b>Question</b> ({}): {}<br><b>Gold answers</b>: {}<br><b>Gold passage</b>: {}<br>\
             <b>Rank of the gold passage</b>: {}<br><b>Chosen by</b>: {} (example 1: its first \
             question answered at rank 1; example 2: its first miss at rank 1)<br>\
             <b>Its top 1</b>: {}</p>\
             <p style=\"color:#555\">Token vectors: {} (not a trained ColBERT); k̃ = {}; \
             query wordpieces: {}</p>{}",
            i + 1,
            escape(&q.id),
            escape(&q.question),
            escape(&q.answers.join(" | ")),
            escape(&gold),
            ranks.join("; "),
            escape(&e2e_system.label),
            escape(&top1),
            escape(&token_vectors),
            args.k_tilde,
            escape(&tr.query_tokens.join(" ")),
            tr.to_html_all()
        );
        std::fs::write(
            out.path(&format!("token_relevance_{}.html", i + 1)),
            html_page(&format!("Token relevance {}", i + 1), &body),
        )?;
        examples.push(serde_json::json!({"query_id": q.id, "question": q.question, "gold": gold, "maxsim": tr.score}));
    }

    table.write_csv(&out.path("metrics.csv"))?;
    sig.write_csv(&out.path("significance.csv"))?;
    per_query.write_csv(&out.path("per_query.csv"))?;
    let md = format!(
        "{}\n\n{}\nSignificance against TF-IDF:\n\n{}",
        table.caption.as_deref().unwrap_or(""),
        table.to_markdown(),
        sig.to_markdown()
    );
    std::fs::write(out.path("metrics.md"), &md)?;
    let mut summary = serde_json::Map::new();
    for (si, s) in systems.iter().enumerate() {
        let mut m = serde_json::Map::new();
        m.insert("name".into(), s.name.clone().into());
        for r in &results[si] {
            m.insert(r.name.clone(), r.mean.into());
        }
        m.insert("seconds".into(), s.seconds.into());
        summary.insert(s.label.clone(), serde_json::Value::Object(m));
    }
    summary.insert("queries".into(), queries.len().into());
    summary.insert("passages".into(), passages.len().into());
    summary.insert("token_vectors".into(), n_vectors.into());
    summary.insert("token_relevance_examples".into(), examples.into());
    summary.insert(
        "token_relevance_system".into(),
        e2e_system.label.clone().into(),
    );
    println!("{md}");
    exp.finish(serde_json::Value::Object(summary))?;
    Ok(())
}
