//! Report 000, Table 1 and Figure 3 with readers trained here (issue 9): the ten questions
//! of its §4 over the Wikipedia corpora, SBERT (all-MiniLM-L6-v2) + FAISS flat top-5
//! passages, read by three extractive readers, three models trained by `train_reader`
//! (each trained here if not cached):
//!
//! 1. **MiniLM reader** (`minilm-all`, the default recipe): the top-5 passages concatenated
//!    (report 000's way), best span;
//! 2. **MiniLM reader, SQuAD only** (`minilm-squad`, the second trained variant: the SQuAD
//!    training articles' answerable questions only), concatenated;
//! 3. **MiniLM SQuAD 2.0-style reader + null threshold** (`minilm-squad2`: `minilm-all`'s
//!    supervision plus the training articles' unanswerable questions), concatenated,
//!    abstaining when `null − best > threshold`, the threshold chosen for F1 on the SQuAD
//!    *training* articles' questions (answerable and unanswerable; never the held-out ones)
//!    by the official SQuAD 2.0 search (`evaluate::qa::best_null_threshold`: all-null
//!    start, `-inf` when abstaining on every question is best);
//!
//! and an extra row: the `minilm-all` model reading **best span per passage** (each passage
//! on its own, the best span over all by raw start + end logits).
//!
//! Scoring: SQuAD EM/F1 (max over golds); questions 6–8, which report 000 expects no
//! corpus answer for, are unanswerable (an empty answer scores 1). The honest set: every
//! question of the five held-out SQuAD articles (gold paragraph given; unanswerable ones
//! included) and the RAG Mini Wikipedia test questions (never trained on; top-5 dense
//! passages of the RAG Mini corpus).
//!
//! ```text
//! cargo run --release --bin exp_report000_readers [-- --force]
//! ```
//!
//! Writes `data/results/report000_readers/`: `table1.csv`/`.md` (ours beside report
//! 000's 66.7 / 66.7 / 33.3), `figure3.png`/`.svg`, `answers.csv`, `answers.html` (each
//! answer highlighted in its passage), `honest.csv`, `config.json`, `manifest.json`.

use anyhow::{Context, Result};
use clap::Parser;
use serde::Serialize;
use std::sync::Arc;
use workbench::assets::Assets;
use workbench::display::Table;
use workbench::encode::{BertEncoder, EmbeddingCache, EncoderParams};
use workbench::evaluate::qa::{best_null_threshold, exact_match, f1, NullCandidate};
use workbench::load::rag_mini;
use workbench::plot::{render, Bars};
use workbench::read::extractive::{
    char_slice, DecodeParams, ExtractiveReader, MultiPassage, ReaderParams,
};
use workbench::read::Context as ReadContext;
use workbench::results::Experiment;
use workbench::retrieve::dense::DenseRetriever;
use workbench::retrieve::faiss::{IndexParams, VectorIndex};
use workbench::retrieve::Retriever;
use workbench::train::reader::{self, ReaderRecipe};
use workbench::Passage;

const NAME: &str = "report000_readers";

/// Report 000 §4's ten questions and their answers (empty: no answer expected).
const QUESTIONS: [(&str, &[&str]); 10] = [
    ("What is the capital of France?", &["Paris"]),
    ("Who wrote Hamlet?", &["William Shakespeare", "Shakespeare"]),
    (
        "\u{201c}The Big Apple\u{201d} is a nickname for which city?",
        &["New York City", "New York"],
    ),
    (
        "In what year did the first human land on the Moon?",
        &["1969"],
    ),
    ("Who discovered penicillin?", &["Alexander Fleming"]),
    ("What is Retrieval-Augmented Generation?", &[]),
    ("Explain FAISS in one sentence.", &[]),
    ("How do you generate embeddings?", &[]),
    ("Which is the largest continent on Earth?", &["Asia"]),
    (
        "What is the fastest land animal?",
        &["cheetah", "The cheetah"],
    ),
];

/// Report 000's Table 1 (EM = F1 for each reader).
/// (reader, Figure 3 label, EM = F1): report 000's Table 1.
const REPORT: [(&str, &str, f64); 3] = [
    ("DeBERTa-v3-large-squad2", "DeBERTa-v3-L (report)", 66.7),
    ("BERT-large-WWM-squad", "BERT-L-WWM (report)", 66.7),
    ("RoBERTa-large-squad2", "RoBERTa-L (report)", 33.3),
];

#[derive(Parser, Debug, Serialize)]
#[command(about = "Report 000 Table 1 and Figure 3 with readers trained in candle")]
struct Args {
    /// Passages read per question.
    #[arg(long, default_value_t = 5)]
    k: usize,
    /// SQuAD training-article questions used to choose the null threshold (the first N).
    #[arg(long, default_value_t = 1000)]
    threshold_questions: usize,
    /// For each recipe whose training has not finished, read with the latest checkpoint of
    /// its unfinished run instead of waiting for (or doing) the training (see
    /// `train_reader --partial`); finished recipes read their final checkpoint.
    #[arg(long)]
    partial: bool,
    /// Redo even when fresh.
    #[arg(long)]
    force: bool,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One row of Table 1: a trained recipe read in one way.
struct ReaderRow {
    name: &'static str,
    /// Its short label in Figure 3.
    label: &'static str,
    /// Index into the trained models ([`RECIPES`]).
    model: usize,
    mode: MultiPassage,
    /// Abstain with the null threshold chosen on the training articles.
    null_threshold: bool,
}

/// The recipes Table 1 reads with (`ReaderRecipe::named`).
const RECIPES: [&str; 3] = ["minilm-all", "minilm-squad", "minilm-squad2"];

/// The three readers of Table 1, then the extra reading mode.
fn readers() -> [ReaderRow; 4] {
    [
        ReaderRow {
            name: "MiniLM reader (minilm-all)",
            label: "minilm-all",
            model: 0,
            mode: MultiPassage::Concatenate,
            null_threshold: false,
        },
        ReaderRow {
            name: "MiniLM reader, SQuAD only (minilm-squad)",
            label: "minilm-squad",
            model: 1,
            mode: MultiPassage::Concatenate,
            null_threshold: false,
        },
        ReaderRow {
            name: "MiniLM SQuAD 2.0-style reader + null threshold (minilm-squad2)",
            label: "minilm-squad2 + null",
            model: 2,
            mode: MultiPassage::Concatenate,
            null_threshold: true,
        },
        ReaderRow {
            name: "extra: minilm-all, best span per passage",
            label: "minilm-all per passage",
            model: 0,
            mode: MultiPassage::BestPerPassage,
            null_threshold: false,
        },
    ]
}

/// The null threshold maximising mean F1 on `set` (gold paragraph given) for `qa`
/// (`evaluate::qa::best_null_threshold`: the official SQuAD 2.0 search, all-null start
/// included), with that F1 and the F1 without abstaining.
fn choose_threshold(
    qa: &ExtractiveReader,
    set: &[workbench::train::qa::SpanExample],
) -> Result<(f32, f64, f64)> {
    let decoded = reader::read_gold(qa, set)?;
    let items: Vec<NullCandidate> = set
        .iter()
        .zip(&decoded)
        .map(|(e, d)| {
            let (null_margin, text) = d
                .nbest
                .first()
                .map(|s| {
                    (
                        d.null_score - s.score,
                        char_slice(&e.context, s.start_char, s.end_char),
                    )
                })
                .unwrap_or((f32::INFINITY, ""));
            NullCandidate {
                null_margin,
                answered: f1(text, &e.golds),
                null: f1("", &e.golds),
            }
        })
        .collect();
    let t = best_null_threshold(&items)?;
    Ok((t.threshold, t.score, t.never_null))
}

/// A dense retriever over `passages` (title + text embedded; the embedding cache reused).
fn dense_over(encoder: &Arc<BertEncoder>, passages: &[Passage]) -> Result<DenseRetriever> {
    let vectors = EmbeddingCache::project_default()?.get_or_compute(encoder, passages)?;
    let index = VectorIndex::build(IndexParams::flat_ip(), encoder.dim(), &vectors)?;
    Ok(DenseRetriever::from_parts(
        encoder.clone(),
        index,
        passages.iter().map(|p| p.id.clone()).collect(),
    )?)
}

/// Answer text, evidence passage index and char range, or `None` (null answer).
type Read = Option<(String, usize, usize, usize)>;

fn read(r: &ExtractiveReader, q: &str, ctx: &[ReadContext]) -> Result<Read> {
    let (d, _) = r.read_spans(q, ctx)?;
    Ok(d.answer().map(|s| {
        let t = &ctx[s.segment].text;
        (
            char_slice(t, s.start_char, s.end_char).to_string(),
            s.segment,
            s.start_char,
            s.end_char,
        )
    }))
}

fn main() -> Result<()> {
    let args = Args::parse();
    let assets = Assets::load()?;
    let recipes: Vec<ReaderRecipe> = RECIPES
        .iter()
        .map(|n| ReaderRecipe::named(n, false))
        .collect::<workbench::Result<_>>()?;
    let encoder_name = "all-minilm-l6-v2";
    let mut inputs = Vec::new();
    for r in &recipes {
        for x in assets.input_checksums(r.inputs())? {
            if !inputs.contains(&x) {
                inputs.push(x);
            }
        }
    }
    inputs.extend(assets.input_checksums([encoder_name])?);
    #[derive(Serialize)]
    struct Config<'a> {
        args: &'a Args,
        recipes: &'a [ReaderRecipe],
        keys: Vec<String>,
        retrieval: &'static str,
        inputs: Vec<(String, String)>,
        program_sha256: String,
    }
    let config = Config {
        args: &args,
        recipes: &recipes,
        keys: recipes
            .iter()
            .map(|r| r.key(&assets))
            .collect::<workbench::Result<_>>()?,
        retrieval: "all-minilm-l6-v2 sentence embeddings, FAISS flat inner product; the ten questions over 100-word windows (title + window) of the three Wikipedia corpora, the RAG Mini test questions over the RAG Mini passages",
        inputs,
        program_sha256: workbench::results::executable_sha256()?,
    };
    let Some(exp) = Experiment::start(NAME, &config, args.force, "table1.md")? else {
        return Ok(());
    };
    let out = &exp.out;
    let root = workbench::paths::project_root()?;
    let cache_root = workbench::paths::cache_dir(&root, "readers");
    // Each recipe's final checkpoint (trained here if missing), or with --partial the
    // latest checkpoint of a run still going.
    let mut trained = Vec::new();
    let mut data = None;
    for recipe in &recipes {
        let d = reader::supervision(&assets, &recipe.supervision)?;
        let t = if args.partial && !reader::is_trained(&assets, recipe, &cache_root)? {
            let (t, l) = reader::partial_checkpoint(&assets, recipe, &cache_root, &d)?
                .with_context(|| {
                    format!(
                        "no checkpoint of recipe `{}` yet: run `train_reader --recipe {}`",
                        recipe.name, recipe.name
                    )
                })?;
            println!(
                "{}: reading with the checkpoint after {} updates (training unfinished)",
                recipe.name,
                l.steps.len()
            );
            (t, Some(l.steps.len()))
        } else {
            (
                reader::train_or_load(&assets, recipe, &cache_root, &d)?.0,
                None,
            )
        };
        trained.push(t);
        // The evaluation sets (held-out SQuAD, RAG Mini test, training-article questions
        // for the threshold) do not depend on the recipe; the default recipe's are used.
        data.get_or_insert(d);
    }
    let data = data.context("no recipe")?;
    let base = ReaderParams {
        window: recipes[0].windows,
        ..ReaderParams::default()
    };
    let mut models = trained
        .iter()
        .map(|(t, _)| ExtractiveReader::load_dir(&t.model_dir, base.clone()))
        .collect::<workbench::Result<Vec<_>>>()?;
    let with = |mode: MultiPassage, thr: Option<f32>| ReaderParams {
        mode,
        decode: DecodeParams {
            null_threshold: thr,
            ..base.decode
        },
        ..base.clone()
    };

    // Null threshold of the SQuAD 2.0-style reader, on training-article questions
    // (answerable and unanswerable).
    let thr_set: Vec<_> = data
        .squad_train_all
        .iter()
        .take(args.threshold_questions)
        .cloned()
        .collect();
    let readers = readers();
    let thr_model = readers
        .iter()
        .find(|r| r.null_threshold)
        .map(|r| r.model)
        .context("a reader with a null threshold")?;
    let (thr, best, without) = choose_threshold(&models[thr_model], &thr_set)?;
    println!(
        "null threshold {thr} for {} (training-article F1 {:.1} with it, {:.1} without, {} questions)",
        recipes[thr_model].name,
        100.0 * best,
        100.0 * without,
        thr_set.len()
    );
    let params_of = |r: &ReaderRow| with(r.mode, r.null_threshold.then_some(thr));

    // Honest set 1: every question of the five held-out articles, gold paragraph given.
    let mut honest = Table::new(["reader", "set", "questions", "EM", "F1"]);
    let mut honest_scores = vec![[0.0f64; 4]; readers.len()];
    for (ri, r) in readers.iter().enumerate() {
        let name = r.name;
        let qa = &mut models[r.model];
        qa.set_params(params_of(r))?;
        let preds = reader::predict_gold(qa, &data.held_out)?;
        let (em, f) = reader::em_f1(&data.held_out, &preds);
        honest_scores[ri][0] = em;
        honest_scores[ri][1] = f;
        honest.push([
            name.to_string(),
            "SQuAD held-out articles (all questions, gold paragraph)".into(),
            data.held_out.len().to_string(),
            format!("{em:.1}"),
            format!("{f:.1}"),
        ])?;
    }

    // Honest set 2: RAG Mini test questions over the RAG Mini passages, top-k dense.
    let encoder = Arc::new(BertEncoder::load(
        &assets,
        encoder_name,
        EncoderParams::default(),
    )?);
    let (docs, _) = rag_mini::load_csv(
        &assets.resolve("rag-mini-wikipedia", "infos.csv")?,
        &assets.resolve("rag-mini-wikipedia", "questions.csv")?,
    )?;
    let rag_passages: Vec<Passage> = docs.iter().map(Passage::whole).collect();
    let rag_dense = dense_over(&encoder, &rag_passages)?;
    let rag_pos: std::collections::HashMap<&str, usize> = rag_passages
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id.as_str(), i))
        .collect();
    let mut rag_ctx = Vec::with_capacity(data.rag_test.len());
    for q in &data.rag_test {
        let hits = rag_dense.retrieve(&q.question, args.k)?;
        let ctx: Vec<ReadContext> = hits
            .iter()
            .map(|h| {
                let p = &rag_passages[rag_pos[h.id.as_str()]];
                ReadContext::new(p.id.clone(), p.text.clone())
            })
            .collect();
        rag_ctx.push(ctx);
    }
    for (ri, r) in readers.iter().enumerate() {
        let name = r.name;
        let qa = &mut models[r.model];
        qa.set_params(params_of(r))?;
        let (mut em, mut fs) = (0.0, 0.0);
        for (q, ctx) in data.rag_test.iter().zip(&rag_ctx) {
            let a = read(qa, &q.question, ctx)?.map(|x| x.0).unwrap_or_default();
            em += exact_match(&a, &q.answers);
            fs += f1(&a, &q.answers);
        }
        let n = data.rag_test.len().max(1) as f64;
        honest_scores[ri][2] = 100.0 * em / n;
        honest_scores[ri][3] = 100.0 * fs / n;
        honest.push([
            name.to_string(),
            format!("RAG Mini test questions (top-{} dense passages)", args.k),
            data.rag_test.len().to_string(),
            format!("{:.1}", 100.0 * em / n),
            format!("{:.1}", 100.0 * fs / n),
        ])?;
    }
    honest.write_csv(&out.path("honest.csv"))?;

    // The ten questions over the Wikipedia windows (the NQ experiment's passages and key).
    let mut passages = reader::wikipedia_windows(&assets)?;
    let window_text: Vec<String> = passages.iter().map(|p| p.text.clone()).collect();
    for p in &mut passages {
        if !p.title.is_empty() {
            p.text = format!("{}\n{}", p.title, p.text);
        }
    }
    let dense = dense_over(&encoder, &passages)?;
    let pos: std::collections::HashMap<&str, usize> = passages
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id.as_str(), i))
        .collect();
    let mut answers = Table::new([
        "q", "question", "golds", "reader", "answer", "em", "f1", "passage", "rank",
    ]);
    let mut html =
        String::from("<div class=\"report000\"><style>mark{background:#ffe066}</style>\n");
    let mut sums = vec![[0.0f64; 2]; readers.len()];
    for (qi, (q, golds)) in QUESTIONS.iter().enumerate() {
        let hits = dense.retrieve(q, args.k)?;
        let mut ctx = Vec::new();
        for h in &hits {
            let i = *pos.get(h.id.as_str()).context("hit id")?;
            ctx.push(ReadContext::new(h.id.clone(), window_text[i].clone()));
        }
        html.push_str(&format!(
            "<h3>{}. {}</h3><p>gold: {}</p>\n",
            qi + 1,
            esc(q),
            esc(&if golds.is_empty() {
                "(no answer expected)".to_string()
            } else {
                golds.join(" | ")
            })
        ));
        for (ri, row) in readers.iter().enumerate() {
            let name = row.name;
            let qa = &mut models[row.model];
            qa.set_params(params_of(row))?;
            let r = read(qa, q, &ctx)?;
            let text = r.as_ref().map(|x| x.0.clone()).unwrap_or_default();
            let (em, fs) = (exact_match(&text, golds), f1(&text, golds));
            sums[ri][0] += em;
            sums[ri][1] += fs;
            let (pid, rank, evidence) = match &r {
                Some((_, seg, a, b)) => {
                    let t = &ctx[*seg].text;
                    let n = t.chars().count();
                    let ev = format!(
                        "{}<mark>{}</mark>{}",
                        esc(char_slice(t, 0, *a)),
                        esc(char_slice(t, *a, *b)),
                        esc(char_slice(t, *b, n))
                    );
                    (ctx[*seg].id.clone(), (seg + 1).to_string(), ev)
                }
                None => (
                    String::new(),
                    String::new(),
                    "(no answer: abstained)".into(),
                ),
            };
            html.push_str(&format!(
                "<p><b>{name}</b>: “{}” (EM {em}, F1 {fs:.2}) — passage {} (rank {rank})</p><blockquote>{evidence}</blockquote>\n",
                esc(&text),
                esc(&pid)
            ));
            answers.push([
                (qi + 1).to_string(),
                q.to_string(),
                golds.join(" | "),
                name.to_string(),
                text,
                em.to_string(),
                format!("{fs:.3}"),
                pid,
                rank,
            ])?;
        }
    }
    html.push_str("</div>\n");
    let n = QUESTIONS.len() as f64;
    let mut t = Table::new([
        "reader",
        "EM (10 questions)",
        "F1 (10 questions)",
        "EM held-out SQuAD",
        "F1 held-out SQuAD",
        "EM RAG Mini test",
        "F1 RAG Mini test",
        "source",
    ]);
    for (name, _, v) in REPORT {
        t.push([
            name.to_string(),
            format!("{v:.1}"),
            format!("{v:.1}"),
            "".into(),
            "".into(),
            "".into(),
            "".into(),
            "report 000 Table 1".into(),
        ])?;
    }
    for (ri, r) in readers.iter().enumerate() {
        let name = r.name;
        let h = honest_scores[ri];
        t.push([
            name.to_string(),
            format!("{:.1}", 100.0 * sums[ri][0] / n),
            format!("{:.1}", 100.0 * sums[ri][1] / n),
            format!("{:.1}", h[0]),
            format!("{:.1}", h[1]),
            format!("{:.1}", h[2]),
            format!("{:.1}", h[3]),
            format!("this run, top-{}", args.k),
        ])?;
    }
    let models_desc: Vec<String> = trained
        .iter()
        .map(|(t, partial)| {
            format!(
                "`{}` ({} training windows, key {}{})",
                t.recipe.name,
                t.features,
                t.key,
                match partial {
                    Some(u) => format!(", UNFINISHED: checkpoint after {u} updates"),
                    None => String::new(),
                }
            )
        })
        .collect();
    let md = format!(
        "{}\n\nReport 000's ten questions (§4) over {} Wikipedia windows, top-{} SBERT + FAISS passages; questions 6–8 expect no answer (empty = correct). Readers trained by `train_reader`: {}; null threshold {thr:.3} of `{}` chosen on {} SQuAD training-article questions. Honest set: {} questions of the five held-out SQuAD articles (gold paragraph, unanswerable included), {} RAG Mini test questions.\n",
        t.to_markdown(),
        passages.len(),
        args.k,
        models_desc.join("; "),
        recipes[thr_model].name,
        thr_set.len(),
        data.held_out.len(),
        data.rag_test.len()
    );
    println!("{md}\n{}", honest.to_markdown());
    t.write_csv(&out.path("table1.csv"))?;
    std::fs::write(out.path("table1.md"), &md)?;
    answers.write_csv(&out.path("answers.csv"))?;
    std::fs::write(out.path("answers.html"), html)?;

    // Figure 3: EM and F1 on the ten questions, report 000's readers beside ours.
    let mut cats: Vec<String> = REPORT.iter().map(|(_, l, _)| l.to_string()).collect();
    cats.extend(readers.iter().map(|r| r.label.to_string()));
    let mut em: Vec<f64> = REPORT.iter().map(|(.., v)| *v).collect();
    let mut f1s = em.clone();
    for s in &sums {
        em.push(100.0 * s[0] / n);
        f1s.push(100.0 * s[1] / n);
    }
    let fig = render(&Bars {
        title: "Figure 3: reader EM / F1 on report 000's ten questions (top-5 SBERT passages; ours trained from MiniLM)".into(),
        x_label: "reader (report 000's three, then ours)".into(),
        y_label: "score (%)".into(),
        categories: cats,
        series: vec!["EM".into(), "F1".into()],
        values: vec![em, f1s],
        y_max: Some(100.0),
        size: (1400, 560),
    })?;
    fig.save(out.out_dir(), "figure3")?;
    exp.finish(serde_json::json!({
        "threshold": thr,
        "readers": readers.iter().map(|r| r.name).collect::<Vec<_>>(),
        "ten_em": sums.iter().map(|s| 100.0 * s[0] / n).collect::<Vec<_>>(),
        "ten_f1": sums.iter().map(|s| 100.0 * s[1] / n).collect::<Vec<_>>(),
        "honest": honest_scores,
        "reader_keys": trained.iter().map(|(t, _)| t.key.clone()).collect::<Vec<_>>(),
        "partial_updates": trained.iter().map(|(_, p)| *p).collect::<Vec<_>>(),
        "recipes": RECIPES,
        "load": reader::load_average(),
    }))?;
    Ok(())
}
