"""Cells of notebooks/03_retrieval.ipynb (written by notebooks/make_notebooks.py)."""

CELLS = [
    ("markdown", """
# 03 · Retrieval experiments

One section per experiment of `scripts/reproduce`. Each reproduction binary writes its
CSVs, figures, resolved `config.json` and `manifest.json` to `data/results/<name>/`;
this notebook reads those files and recomputes a few small pieces to check them. Section (a)
and section (c) run their studies live instead. Results of the quick scale are in `<name>-quick/` folders; the
notebook reads the scale `scripts/reproduce` ran (quick unless `WORKBENCH_SCALE` says
otherwise; Figure 2 has one folder for every scale).

The outputs committed with this notebook come from an execution at the **quick** scale (`scripts/reproduce`'s default; the notebook's `metadata.workbench` has its commit and date): the read sections show the `<name>-quick/` results, and the live sections run the
quick parameters, so the question counts and scores differ from the default-scale tables of
`docs/report000.md`, `docs/retrieval.md` and `docs/report003.md`. Each table's caption gives
the counts of the run it shows.

| section | binary | result folder |
|---|---|---|
| (d) Figure 2: t-SNE of paragraph embeddings by topic | `fig2_tsne` | `data/results/fig2-tsne/` |
| (e) Figure 4: per-query retrieval latency | `fig4_latency` | `data/results/fig4-latency/` |
| (a) MS MARCO DL19 subset: eight systems, significance against BM25 (run live, quick scale) | `exp_dl19` | `data/results/dl19-retrieval/` |
| (b) NQ-open answer recall@{1, 5, 20, 100} | `exp_nq_answer_recall` | `data/results/nq-answer-recall/` |
| (c) Report 003's table: TF-IDF, MaxSim re-rank, MaxSim end-to-end (run live, quick scale) | `exp_late_interaction` | `data/results/late-interaction/` |

A missing result stops with an error that names the binary to run.
"""),
    ("code", """
:dep workbench = { path = "../workbench", features = ["plot", "dense", "faiss", "tsne", "llm", "parquet"] }
// Every notebook names the same features: the kernels compile the library once for all of them.
"""),
    ("code", """
use std::path::{Path, PathBuf};
use workbench::display::Table;
use workbench::plot::{render, Figure, Scatter};

/// The scale whose results this notebook reads: `WORKBENCH_SCALE` when set (as
/// `scripts/reproduce --scale S` sets it), else quick, the scale `scripts/reproduce` runs
/// by default. After `scripts/reproduce --scale default`, put `Scale::Default` here.
let scale = workbench::study::Scale::from_env_or(workbench::study::Scale::Quick)?;

/// `data/results/<name>`, or an error naming the binary that writes it.
fn result_dir(name: &str, bin: &str) -> workbench::Result<PathBuf> {
    let dir = workbench::paths::results_dir(&workbench::paths::project_root()?, name);
    if dir.join("manifest.json").is_file() {
        Ok(dir)
    } else {
        Err(workbench::Error::Empty(format!(
            "{} is missing: run `cargo run --release --bin {bin}` (or scripts/reproduce)", dir.display())))
    }
}

/// A PNG written by a binary, as a figure that displays inline.
fn png(path: &Path) -> workbench::Result<Figure> {
    let png = std::fs::read(path).map_err(|e| workbench::Error::io(path, e))?;
    if png.len() < 24 || &png[1..4] != b"PNG" {
        return Err(workbench::Error::bad_input(path, "not a PNG file"));
    }
    let be = |o: usize| u32::from_be_bytes([png[o], png[o + 1], png[o + 2], png[o + 3]]);
    let (width, height) = (be(16), be(20));
    Ok(Figure { png, svg: String::new(), width, height })
}

/// A cell as a number (`†` significance marks dropped).
fn num(cell: &str) -> f64 {
    cell.trim_end_matches('†').parse().unwrap_or(f64::NAN)
}
"""),
    ("markdown", """
## (d) Figure 2 of report 000: t-SNE of 500 paragraph embeddings

500 lead-section paragraphs of `wiki-leads-en` (seeded sample, equal allocation over the
corpus' 12 `topic` labels), embedded with all-MiniLM-L6-v2 and projected with linfa-tsne
(exact t-SNE, θ = 0, seed 42: the Barnes-Hut path of linfa-tsne 0.8 is not reproducible).
The figure is redrawn here from `points.csv`.
"""),
    ("code", """
let dir = result_dir("fig2-tsne", "fig2_tsne")?;
let points = Table::read_csv(&dir.join("points.csv"))?;
let mut topics: Vec<String> = points.rows.iter().map(|r| r[2].clone()).collect();
topics.sort();
topics.dedup();
let xy = points.rows.iter().map(|r| {
    let c = topics.iter().position(|t| *t == r[2]).unwrap_or(0);
    match (r[3].parse::<f64>(), r[4].parse::<f64>()) {
        (Ok(x), Ok(y)) => Ok((x, y, c)),
        _ => Err(workbench::Error::bad_input(dir.join("points.csv"), format!("bad coordinates for `{}`", r[0]))),
    }
}).collect::<workbench::Result<Vec<_>>>()?;
let fig2 = render(&Scatter {
    title: format!("Figure 2: t-SNE of {} paragraph embeddings (all-MiniLM-L6-v2) by topic", xy.len()),
    x_label: "t-SNE 1".into(),
    y_label: "t-SNE 2".into(),
    points: xy,
    categories: topics,
    size: (1400, 860),
})?;
fig2
""", "figure"),
    ("markdown", """
Does the map cluster by topic, as the report's caption says? The share of each point's 10
nearest neighbours with the same topic, against the share a random neighbour would have,
and the silhouette of the topic labels:
"""),
    ("code", """
let dir = result_dir("fig2-tsne", "fig2_tsne")?;
Table::read_csv(&dir.join("clustering.csv"))?
    .caption("Topical clustering (p from 1,000 label permutations; 0.001 is the smallest p they can give)")
"""),
    ("code", """
let dir = result_dir("fig2-tsne", "fig2_tsne")?;
Table::read_csv(&dir.join("per_topic.csv"))?.caption("Per topic: Geography and Mathematics cluster best, 'Uncategorized' not at all")
"""),
    ("markdown", """
## (e) Figure 4 of report 000: per-query retrieval latency

NQ-open dev questions, one at a time, after 20 warm-up queries, on this machine's cores: at the
default scale 500 questions against the ~10k `wiki-leads-en` paragraphs, at the quick scale
100 against the 1,557 kept WikiText-2 paragraphs (the run's counts are in its manifest).
Report 000 measured a mean of **32.2 ms** for its FAISS search over 184k vectors; the last row
(search only, no query encoding) is the comparable number, over a far smaller corpus.
Encoding the question dominates dense retrieval.
"""),
    ("code", """
let dir = result_dir(&scale.result_name("fig4-latency"), "fig4_latency")?;
let t = Table::read_csv(&dir.join("latency_summary.csv"))?;
let keep = ["retriever", "mean_ms", "median_ms", "p95_ms", "p99_ms", "encode_median_ms", "search_median_ms"];
let cols: Vec<usize> = keep.iter().filter_map(|k| t.header.iter().position(|h| h == k)).collect();
let mut short = Table::new(cols.iter().map(|&c| t.header[c].clone()))
    .caption("Per-query latency (ms); report 000: FAISS mean 32.2 ms over 184,051 vectors");
for r in &t.rows {
    short.push(cols.iter().map(|&c| r[c].clone()))?;
}
short
"""),
    ("code", """
png(&result_dir(&scale.result_name("fig4-latency"), "fig4_latency")?.join("fig4.png"))?
""", "figure"),
    ("markdown", """
## (a) MS MARCO passage, TREC DL19 subset: the study, run live

This section runs the study itself (`workbench::study::dl19`) at the **quick** scale instead
of reading a result folder: the same code as `scripts/reproduce`, whose quick scale differs
only in the trained re-rankers' recipes (a cross-encoder on 400 groups, 100 updates at peak
learning rate 1e-4, where the default recipe trains 375 updates on 1,500 at 5e-5; a ColBERT
projection on 200 groups),
each trained on first use and cached in `data/cache/`. The first run
trains both and takes several times longer than a run with them cached.
The systems are data: `configs/studies/dl19.toml`, one `[[system]]` table each.

5,000 passages, 43 judged queries, grades 1–3 (no grade 0). nDCG@10 uses the grades as gains;
MRR@10 and Recall@100 count grade ≥ 2 as relevant (TREC DL's convention, `trec_eval -l 2`).
Three re-rankers score BM25's top 100: MaxSim over raw 384-d MiniLM token vectors, MaxSim
through a trained ColBERT projection, and a trained cross-encoder; none saw DL19.
† / †† : randomisation test against BM25, p < 0.05 / 0.01.
"""),
    ("code", """
use workbench::study::{dl19, Env, Scale};
let env = Env::project()?;
let params = dl19::Dl19Params::at_scale(&env, Scale::Quick)?;
params.systems.iter().map(|s| format!("{}: {}", s.key, s.label())).collect::<Vec<_>>()
"""),
    ("code", """
let study = dl19::run(&env, &params.clone().check()?)?;
study.table()
"""),
    ("code", """
render(&study.figure()?)?
""", "figure"),
    ("code", """
let t = study.significance()?;
let keep = ["system", "metric", "diff", "p_paired_t", "p_randomization", "p_bootstrap", "bootstrap_ci95_lo", "bootstrap_ci95_hi"];
let cols: Vec<usize> = keep.iter().filter_map(|k| t.header.iter().position(|h| h == k)).collect();
let mut short = Table::new(cols.iter().map(|&c| t.header[c].clone()))
    .caption("Against BM25: paired t, randomisation and bootstrap p-values; bootstrap 95% CI of the difference");
for r in &t.rows {
    short.push(cols.iter().map(|&c| r[c].clone()))?;
}
short
"""),
    ("markdown", """
The returned value holds every run and every per-query score, so a question about the
table is a few lines away. Which queries does the cross-encoder lose most on, against BM25?
"""),
    ("code", """
// A block: `ce` and `bm25` borrow `study`, and evcxr cannot keep a borrowed value between cells.
let worst = {
    let ce = &study.scored.get("bm25+ce", 0)?.per_query;
    let bm25 = &study.scored.get("bm25", 0)?.per_query;
    let mut worst: Vec<(String, f64)> = ce.iter().map(|(q, v)| (q.clone(), v - bm25[q])).collect();
    worst.sort_by(|a, b| a.1.total_cmp(&b.1));
    worst
};
let mut t = Table::new(["query", "nDCG@10 cross-encoder − BM25"]);
for (q, d) in worst.iter().take(5) {
    t.push([q.clone(), format!("{d:+.3}")])?;
}
t
"""),
    ("markdown", """
Change a parameter and run again. Here: only BM25, dense and the cross-encoder, with
grade ≥ 1 counted as relevant (almost every passage of this subset is judged at least
"related", so MRR@10 is close to 1 for every system):
"""),
    ("code", """
let mut p = params.clone();
p.rel_threshold = 1;
p.systems.retain(|s| ["bm25", "dense", "bm25+ce"].contains(&s.key.as_str()));
let fewer = dl19::run(&env, &p.check()?)?.table();
fewer
"""),
    ("markdown", """
## (b) NQ-open dev: answer recall, the shape of DPR's table

The NQ-open dev questions against every article of the three offline Wikipedia corpora, cut
into DPR's passage unit (windows of `--window` words, 100 by default, no overlap, title prepended
for indexing). A question counts at k when a gold answer occurs in one of the top-k passages,
under DPR's `has_answer` string match by default (`--answer-match`; the rule is in every table). DPR searched
21M passages; the default scale searches the ~19k windows of the three corpora and the first
1,000 questions at the quick scale only WikiText-2's windows, so most answers are not in the
corpus at all: the numbers describe this corpus, not DPR's setting.
"""),
    ("code", """
let dir = result_dir(&scale.result_name("nq-answer-recall"), "exp_nq_answer_recall")?;
Table::read_csv(&dir.join("answer_recall.csv"))?
    .caption("Answer recall (%). DPR, 21M passages: BM25 Top-20 59.1, Top-100 73.7; DPR Top-20 78.4, Top-100 85.4")
"""),
    ("code", """
let dir = result_dir(&scale.result_name("nq-answer-recall"), "exp_nq_answer_recall")?;
Table::read_csv(&dir.join("significance.csv"))?.caption("Paired t, randomisation and bootstrap tests against BM25 (trials and seed in config.json)")
"""),
    ("code", """
png(&result_dir(&scale.result_name("nq-answer-recall"), "exp_nq_answer_recall")?.join("answer_recall.png"))?
""", "figure"),
    ("markdown", """
## (c) Report 003's table: TF-IDF, MaxSim re-rank and MaxSim end-to-end

SQuAD 2.0 dev (CS224N half): the 646 contexts are the passages, the answerable questions the
queries, each with one relevant passage, its own context (like report 003's FANDOM-QA). The
late-interaction encoder is raw 384-d MiniLM token vectors, not a trained ColBERT. Report 003
used Recall@1000 on a much larger corpus; with 646 passages the table stops at Recall@50.
"""),
    ("markdown", """
This section runs the study itself (`workbench::study::late_interaction`) at the quick scale:
the first 300 answerable questions over all 646 passages. The first run embeds every
passage's tokens into a token store in `data/cache/late-interaction/` and builds the
approximate row's centroid index beside it; later runs read both. Change a parameter (a
second λ, a deeper re-rank) and run the cell again.
"""),
    ("code", """
use workbench::study::late_interaction as li;
let late_params = li::LateParams::at_scale(Scale::Quick, false);
let late = li::run(&env, &late_params.clone().check()?)?;
let (late_table, late_sig) = late.tables()?;
late_table
"""),
    ("code", """
let late_tests = late_sig.caption("Paired randomisation, t and bootstrap tests against TF-IDF");
late_tests
"""),
    ("code", """
render(&late.figure())?
""", "figure"),
    ("markdown", """
### Token relevance (report 003 §5)

Why does MaxSim rank a passage high? For the first question that end-to-end MaxSim answers
at rank 1, each passage token is shaded by the kernel density of the positions the query
tokens chose (k̃ = 2 best passage tokens per query token), by how many query tokens chose it
(`R_abs`) and by their summed similarity (`R_acc`). The study chose the pair (and a miss);
the view is recomputed here from the token encoder.
"""),
    ("code", """
use workbench::rerank::late_interaction::{LateInteraction, RelevanceParams};
let view = late.views.first().cloned().ok_or(workbench::Error::Empty("no question ranked first by end-to-end MaxSim".into()))?;
println!("chosen by: {}\nquestion: {}\ngold passage: {}", late.systems[late.first_e2e].label, view.question, view.gold);
let squad = workbench::load::squad::load(&env.assets.resolve("squad-v2-dev-half", "dev-v2.0.json")?)?;
let passage = squad.contexts.iter().find(|d| d.id == view.gold).cloned()
    .ok_or(workbench::Error::Empty(format!("context `{}` not in SQuAD", view.gold)))?;
let encoder = LateInteraction::load_minilm(&env.assets)?;
encoder.token_relevance(&view.question, &passage.text, &RelevanceParams::default())?
"""),
    ("markdown", """
## (c′) Report 003 on held-out articles, with the rerankers trained on this CPU

Only questions of the five SQuAD articles that no trained model saw: all 912 at the default
scale, 300 at the quick scale (with heads trained on fewer groups). Rows: TF-IDF,
raw 384-d MaxSim, MaxSim through a **trained ColBERT projection** at d = 24, 32, 64, 128
(`train_colbert`: a linear head on the *frozen* MiniLM, trained on SQuAD training articles,
RAG Mini and NQ groups, no `[Q]`/`[D]` markers), and three ablation rows: the markers on raw
vectors, the untrained PCA head, a head trained with the markers. Report 003 fine-tuned the
whole ColBERT on MS MARCO v2; its re-rank MRR@10 falls from 50.49 (d = 128) to 49.48
(d = 24). The quick scale trains the d = 128 head only and leaves out the other dimensions and
the ablation rows; its table keeps the end-to-end MaxSim rows.
"""),
    ("code", """
let dir = result_dir(&scale.result_name("late-interaction-heldout"), "exp_late_interaction")?;
Table::read_csv(&dir.join("metrics.csv"))?.caption("Held-out SQuAD articles, TF-IDF top-100 re-ranked; † / †† : randomisation test against TF-IDF")
"""),
    ("code", """
let dir = result_dir(&scale.result_name("reranker-minilm-ce"), "train_reranker")?;
Table::read_csv(&dir.join("metrics.csv"))?.caption("Trained cross-encoder (minilm-ce) on held-out questions of the same five articles (how many: the queries column), TF-IDF top-20 re-ranked")
"""),
    ("markdown", """
The cross-encoder was trained on SQuAD training articles, RAG Mini Wikipedia and NQ-open
groups: the held-out articles above are its own domain, MS MARCO in section (a) is not (no
MS MARCO query or passage was in its training). `data/expected.toml` grades a floor on the
table above at the quick and default scales: the re-ranked MRR@10 and Recall@1 are not below TF-IDF's, the
stage it re-ranks. The default scale's recipe trains longer (375 updates on 1,500 groups);
its tables are in `docs/retrieval.md`.
"""),
]
