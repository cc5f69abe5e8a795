//! Report 000, Table 1 with readers trained here (issue 9): the ten questions of its §4
//! over the Wikipedia corpora, SBERT (all-MiniLM-L6-v2) + FAISS flat top-5 passages
//! concatenated, read by the extractive readers trained by `train_reader`.
//!
//! ```text
//! cargo run --release --bin exp_report000_readers [-- --force] [--recipe minilm-all]
//! ```
//!
//! Readers: the trained MiniLM reader as is (always answers), and the same weights as a
//! SQuAD 2.0-style reader with a null threshold chosen on the SQuAD *training*
//! articles' questions (answerable and unanswerable; never the held-out ones). Scoring:
//! SQuAD EM/F1 (max over golds); the three questions report 000 expects no corpus
//! answer for (6–8) are unanswerable: an empty answer scores 1, any other 0.
//!
//! Writes `data/results/report000_readers/`: `table1.csv`/`.md` (ours beside report
//! 000's 66.7 / 66.7 / 33.3), `answers.csv`, `answers.html` (each answer highlighted
//! in its passage), `config.json`, `manifest.json`.

use anyhow::{Context, Result};
use clap::Parser;
use serde::Serialize;
use std::sync::Arc;
use workbench::assets::Assets;
use workbench::display::Table;
use workbench::encode::{BertEncoder, EmbeddingCache, EncoderParams};
use workbench::evaluate::qa::{exact_match, f1};
use workbench::read::extractive::{char_slice, ExtractiveReader, ReaderParams};
use workbench::read::Context as ReadContext;
use workbench::results::Experiment;
use workbench::retrieve::dense::DenseRetriever;
use workbench::retrieve::faiss::{IndexParams, VectorIndex};
use workbench::retrieve::Retriever;
use workbench::train::qa::SpanExample;
use workbench::train::reader::{self, ReaderRecipe};

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
const REPORT: [(&str, f64); 3] = [
    ("DeBERTa-v3-large-squad2", 66.7),
    ("BERT-large-WWM-squad", 66.7),
    ("RoBERTa-large-squad2", 33.3),
];

#[derive(Parser, Debug, Serialize)]
#[command(about = "Report 000 Table 1 with readers trained in candle")]
struct Args {
    /// Reader recipe (trained by `train_reader`; trained here if not cached).
    #[arg(long, default_value = "minilm-all")]
    recipe: String,
    /// Passages read per question (concatenated).
    #[arg(long, default_value_t = 5)]
    k: usize,
    /// SQuAD training-article questions used to choose the null threshold.
    #[arg(long, default_value_t = 400)]
    threshold_questions: usize,
    /// Redo even when fresh.
    #[arg(long)]
    force: bool,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn main() -> Result<()> {
    let args = Args::parse();
    let assets = Assets::load()?;
    let mut recipe = ReaderRecipe::default_minilm();
    recipe.name = args.recipe.clone();
    if args.recipe != "minilm-all" {
        anyhow::bail!("only `minilm-all` is wired here so far");
    }
    let encoder_name = "all-minilm-l6-v2";
    let mut inputs = assets.input_checksums(recipe.inputs())?;
    inputs.extend(assets.input_checksums([encoder_name])?);
    #[derive(Serialize)]
    struct Config<'a> {
        args: &'a Args,
        recipe: &'a ReaderRecipe,
        key: String,
        retrieval: &'static str,
        inputs: Vec<(String, String)>,
        program_sha256: String,
    }
    let config = Config {
        args: &args,
        recipe: &recipe,
        key: recipe.key(&assets)?,
        retrieval: "all-minilm-l6-v2 sentence embeddings, FAISS flat inner product, 100-word windows (title + window) of the three Wikipedia corpora",
        inputs,
        program_sha256: workbench::results::executable_sha256()?,
    };
    let Some(exp) = Experiment::start(NAME, &config, args.force, "table1.md")? else {
        return Ok(());
    };
    let out = &exp.out;
    let root = workbench::paths::project_root()?;
    let data = reader::supervision(&assets, &recipe.supervision)?;
    let (trained, _) =
        reader::train_or_load(&assets, &recipe, &root.join("data/cache/readers"), &data)?;
    let params = ReaderParams {
        window: recipe.windows,
        ..ReaderParams::default()
    };
    let qa_reader = ExtractiveReader::load_dir(&trained.model_dir, params)?;

    // Null threshold on training-article questions (answerable and unanswerable).
    let thr_set: Vec<SpanExample> = data
        .squad_train_all
        .iter()
        .take(args.threshold_questions)
        .cloned()
        .collect();
    let decoded = reader::read_gold(&qa_reader, &thr_set)?;
    let preds: Vec<Option<String>> = thr_set
        .iter()
        .zip(&decoded)
        .map(|(e, d)| {
            d.nbest
                .first()
                .map(|s| char_slice(&e.context, s.start_char, s.end_char).to_string())
        })
        .collect();
    let diffs: Vec<f32> = decoded
        .iter()
        .map(|d| {
            d.nbest
                .first()
                .map(|s| d.null_score - s.score)
                .unwrap_or(f32::INFINITY)
        })
        .collect();
    let score_at = |t: f32| -> f64 {
        thr_set
            .iter()
            .zip(&preds)
            .zip(&diffs)
            .map(|((e, p), &d)| {
                let a = if d > t {
                    String::new()
                } else {
                    p.clone().unwrap_or_default()
                };
                f1(&a, &e.golds)
            })
            .sum::<f64>()
            / thr_set.len().max(1) as f64
    };
    let mut cands: Vec<f32> = diffs.iter().copied().filter(|d| d.is_finite()).collect();
    cands.push(f32::INFINITY);
    cands.sort_by(f32::total_cmp);
    let (mut thr, mut best) = (f32::INFINITY, f64::MIN);
    for &t in &cands {
        let s = score_at(t);
        if s > best {
            best = s;
            thr = t;
        }
    }
    println!(
        "null threshold {thr} (training-article F1 {:.1} on {} questions)",
        100.0 * best,
        thr_set.len()
    );

    // Retrieval: the NQ experiment's passages (same embedding cache key).
    let mut passages = reader::wikipedia_windows(&assets)?;
    let window_text: Vec<String> = passages.iter().map(|p| p.text.clone()).collect();
    for p in &mut passages {
        if !p.title.is_empty() {
            p.text = format!("{}\n{}", p.title, p.text);
        }
    }
    let encoder = Arc::new(BertEncoder::load(
        &assets,
        encoder_name,
        EncoderParams::default(),
    )?);
    let vectors = EmbeddingCache::project_default()?.get_or_compute(&encoder, &passages)?;
    let index = VectorIndex::build(IndexParams::flat_ip(), encoder.dim(), &vectors)?;
    drop(vectors);
    let dense = DenseRetriever::from_parts(
        encoder.clone(),
        index,
        passages.iter().map(|p| p.id.clone()).collect(),
    )?;
    let pos: std::collections::HashMap<&str, usize> = passages
        .iter()
        .enumerate()
        .map(|(i, p)| (p.id.as_str(), i))
        .collect();

    let mut answers = Table::new([
        "q", "question", "golds", "reader", "answer", "em", "f1", "passage", "rank",
    ]);
    let mut html = String::from("<html><head><meta charset=\"utf-8\"><style>mark{background:#ffe066}</style></head><body><h1>Report 000's ten questions, trained MiniLM reader</h1>\n");
    let mut sums = [[0.0f64; 2]; 2];
    for (qi, (q, golds)) in QUESTIONS.iter().enumerate() {
        let hits = dense.retrieve(q, args.k)?;
        let mut ctx = String::new();
        let mut spans = Vec::new();
        for h in &hits {
            let i = *pos.get(h.id.as_str()).context("hit id")?;
            if !ctx.is_empty() {
                ctx.push('\n');
            }
            let s = ctx.len();
            ctx.push_str(&window_text[i]);
            spans.push((h.id.clone(), s, ctx.len()));
        }
        let ex = SpanExample {
            id: format!("q{}", qi + 1),
            source: "report000".into(),
            question: q.to_string(),
            context: ctx.clone(),
            answer: None,
            golds: golds.iter().map(|s| s.to_string()).collect(),
        };
        // One context (the five passages joined by "\n"), byte ranges as before.
        let (d, _) =
            qa_reader.read_spans(&ex.question, &[ReadContext::new("top5", ctx.clone())])?;
        struct P {
            range: (usize, usize),
            text: String,
            score: f32,
            null_score: f32,
        }
        let p = d.nbest.first().map(|s| {
            let text = char_slice(&ctx, s.start_char, s.end_char).to_string();
            let a = ctx
                .char_indices()
                .nth(s.start_char)
                .map(|(b, _)| b)
                .unwrap_or(ctx.len());
            P {
                range: (a, a + text.len()),
                text,
                score: s.score,
                null_score: d.null_score,
            }
        });
        html.push_str(&format!(
            "<h3>{}. {}</h3><p>gold: {}</p>\n",
            qi + 1,
            esc(q),
            esc(&golds.join(" | "))
        ));
        for (ri, reader_name) in ["minilm-all", "minilm-all + null threshold"]
            .iter()
            .enumerate()
        {
            let abstain = ri == 1 && p.as_ref().is_none_or(|p| p.null_score - p.score > thr);
            let text = if abstain {
                String::new()
            } else {
                p.as_ref().map(|p| p.text.clone()).unwrap_or_default()
            };
            let (em, fs) = (exact_match(&text, golds), f1(&text, golds));
            sums[ri][0] += em;
            sums[ri][1] += fs;
            let (pid, rank, evidence) = match (&p, abstain) {
                (Some(p), false) => {
                    let (r, (id, s, e)) = spans
                        .iter()
                        .enumerate()
                        .find(|(_, (_, s, e))| p.range.0 >= *s && p.range.1 <= *e)
                        .map(|(r, x)| (r, x.clone()))
                        .unwrap_or((0, (String::new(), 0, 0)));
                    let ev = if e > s {
                        format!(
                            "{}<mark>{}</mark>{}",
                            esc(&ctx[s..p.range.0]),
                            esc(&ctx[p.range.0..p.range.1]),
                            esc(&ctx[p.range.1..e])
                        )
                    } else {
                        String::new()
                    };
                    (id, (r + 1).to_string(), ev)
                }
                _ => (String::new(), String::new(), "(no answer)".into()),
            };
            html.push_str(&format!("<p><b>{reader_name}</b>: “{}” (EM {em}, F1 {fs:.2}) — passage {} (rank {rank})</p><blockquote>{evidence}</blockquote>\n", esc(&text), esc(&pid)));
            answers.push([
                (qi + 1).to_string(),
                q.to_string(),
                golds.join(" | "),
                reader_name.to_string(),
                text,
                em.to_string(),
                format!("{fs:.3}"),
                pid,
                rank,
            ])?;
        }
    }
    html.push_str("</body></html>\n");
    let n = QUESTIONS.len() as f64;
    let mut t = Table::new(["reader", "EM", "F1", "source"]);
    for (name, v) in REPORT {
        t.push([
            name.to_string(),
            format!("{v:.1}"),
            format!("{v:.1}"),
            "report 000 Table 1".into(),
        ])?;
    }
    for (ri, name) in [
        "MiniLM-L6 reader (minilm-all, trained here)",
        "MiniLM-L6 reader + null threshold (SQuAD 2.0-style)",
    ]
    .iter()
    .enumerate()
    {
        t.push([
            name.to_string(),
            format!("{:.1}", 100.0 * sums[ri][0] / n),
            format!("{:.1}", 100.0 * sums[ri][1] / n),
            format!("this run, top-{} concatenated", args.k),
        ])?;
    }
    let md = format!(
        "{}\n\nReport 000's ten questions (§4) over {} Wikipedia windows, top-{} SBERT + FAISS passages concatenated; questions 6–8 expect no answer (empty = correct). Reader trained on {} features (SQuAD training articles + RAG Mini + NQ distant), null threshold {thr:.3} chosen on {} SQuAD training-article questions.\n",
        t.to_markdown(), passages.len(), args.k, trained.features, thr_set.len()
    );
    println!("{md}");
    t.write_csv(&out.path("table1.csv"))?;
    std::fs::write(out.path("table1.md"), &md)?;
    answers.write_csv(&out.path("answers.csv"))?;
    std::fs::write(out.path("answers.html"), html)?;
    exp.finish(serde_json::json!({"threshold": thr, "em": [100.0 * sums[0][0] / n, 100.0 * sums[1][0] / n], "f1": [100.0 * sums[0][1] / n, 100.0 * sums[1][1] / n], "reader_key": trained.key}))?;
    Ok(())
}
