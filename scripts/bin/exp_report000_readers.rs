//! Report 000, Table 1 and Figure 3 with readers trained here (issue 9): the ten questions
//! of its §4 over the Wikipedia corpora, SBERT (all-MiniLM-L6-v2) + FAISS flat top-5
//! passages, read by three extractive readers built on the `train_reader` default
//! checkpoint (trained here if not cached):
//!
//! 1. **MiniLM reader**: the top-5 passages concatenated (report 000's way), best span;
//! 2. **MiniLM reader, best span per passage** (the second variant): each passage read on
//!    its own, the best span over all by raw start + end logits;
//! 3. **MiniLM reader + null threshold** (SQuAD 2.0-style): concatenated, abstaining when
//!    `null − best > threshold`, the threshold chosen for F1 on the SQuAD *training*
//!    articles' questions (answerable and unanswerable; never the held-out ones).
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
use workbench::evaluate::qa::{exact_match, f1};
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
const REPORT: [(&str, f64); 3] = [
    ("DeBERTa-v3-large-squad2", 66.7),
    ("BERT-large-WWM-squad", 66.7),
    ("RoBERTa-large-squad2", 33.3),
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
    /// Read with the latest checkpoint of the default recipe's unfinished run instead of
    /// waiting for (or doing) the training (see `train_reader --partial`).
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

/// The three readers: (name, multi-passage mode, null threshold).
fn readers(thr: f32) -> [(&'static str, MultiPassage, Option<f32>); 3] {
    [
        ("MiniLM reader", MultiPassage::Concatenate, None),
        (
            "MiniLM reader, best span per passage",
            MultiPassage::BestPerPassage,
            None,
        ),
        (
            "MiniLM reader + null threshold",
            MultiPassage::Concatenate,
            Some(thr),
        ),
    ]
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
    let recipe = ReaderRecipe::default_minilm();
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
        retrieval: "all-minilm-l6-v2 sentence embeddings, FAISS flat inner product; the ten questions over 100-word windows (title + window) of the three Wikipedia corpora, the RAG Mini test questions over the RAG Mini passages",
        inputs,
        program_sha256: workbench::results::executable_sha256()?,
    };
    let Some(exp) = Experiment::start(NAME, &config, args.force, "table1.md")? else {
        return Ok(());
    };
    let out = &exp.out;
    let root = workbench::paths::project_root()?;
    let data = reader::supervision(&assets, &recipe.supervision)?;
    let cache_root = root.join("data/cache/readers");
    let (trained, _) = if args.partial {
        let (t, l) = reader::partial_checkpoint(&assets, &recipe, &cache_root, &data)?
            .context("no checkpoint of the default recipe's run")?;
        println!(
            "reading with the checkpoint after {} updates",
            l.steps.len()
        );
        (t, None)
    } else {
        reader::train_or_load(&assets, &recipe, &cache_root, &data)?
    };
    let base = ReaderParams {
        window: recipe.windows,
        ..ReaderParams::default()
    };
    let mut qa = ExtractiveReader::load_dir(&trained.model_dir, base.clone())?;
    let with = |mode: MultiPassage, thr: Option<f32>| ReaderParams {
        mode,
        decode: DecodeParams {
            null_threshold: thr,
            ..base.decode
        },
        ..base.clone()
    };

    // Null threshold on training-article questions (answerable and unanswerable).
    let thr_set: Vec<_> = data
        .squad_train_all
        .iter()
        .take(args.threshold_questions)
        .cloned()
        .collect();
    let decoded = reader::read_gold(&qa, &thr_set)?;
    let diffs: Vec<f32> = decoded
        .iter()
        .map(|d| {
            d.nbest
                .first()
                .map(|s| d.null_score - s.score)
                .unwrap_or(f32::INFINITY)
        })
        .collect();
    let texts: Vec<String> = thr_set
        .iter()
        .zip(&decoded)
        .map(|(e, d)| {
            d.nbest
                .first()
                .map(|s| char_slice(&e.context, s.start_char, s.end_char).to_string())
                .unwrap_or_default()
        })
        .collect();
    let score_at = |t: f32| -> f64 {
        thr_set
            .iter()
            .zip(&texts)
            .zip(&diffs)
            .map(|((e, a), &d)| f1(if d > t { "" } else { a.as_str() }, &e.golds))
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
        "null threshold {thr} (training-article F1 {:.1} with it, {:.1} without, {} questions)",
        100.0 * best,
        100.0 * score_at(f32::INFINITY),
        thr_set.len()
    );
    let readers = readers(thr);

    // Honest set 1: every question of the five held-out articles, gold paragraph given.
    let mut honest = Table::new(["reader", "set", "questions", "EM", "F1"]);
    let mut honest_scores = vec![[0.0f64; 4]; 3];
    for (ri, (name, mode, t)) in readers.iter().enumerate() {
        qa.set_params(with(*mode, *t))?;
        let preds = reader::predict_gold(&qa, &data.held_out)?;
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
    let rag_passages: Vec<Passage> = docs
        .iter()
        .map(|d| Passage {
            id: d.id.clone(),
            doc_id: d.id.clone(),
            title: d.title.clone(),
            text: d.text.clone(),
            start: 0,
            end: d.text.len(),
        })
        .collect();
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
    for (ri, (name, mode, t)) in readers.iter().enumerate() {
        qa.set_params(with(*mode, *t))?;
        let (mut em, mut fs) = (0.0, 0.0);
        for (q, ctx) in data.rag_test.iter().zip(&rag_ctx) {
            let a = read(&qa, &q.question, ctx)?
                .map(|x| x.0)
                .unwrap_or_default();
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
    let mut sums = [[0.0f64; 2]; 3];
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
        for (ri, (name, mode, t)) in readers.iter().enumerate() {
            qa.set_params(with(*mode, *t))?;
            let r = read(&qa, q, &ctx)?;
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
    for (name, v) in REPORT {
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
    for (ri, (name, _, _)) in readers.iter().enumerate() {
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
    let md = format!(
        "{}\n\nReport 000's ten questions (§4) over {} Wikipedia windows, top-{} SBERT + FAISS passages; questions 6–8 expect no answer (empty = correct). Readers: the `train_reader` default checkpoint ({} windows of SQuAD training articles + RAG Mini + NQ distant supervision, key {}); null threshold {thr:.3} chosen on {} SQuAD training-article questions. Honest set: {} questions of the five held-out SQuAD articles (gold paragraph, unanswerable included), {} RAG Mini test questions.\n",
        t.to_markdown(),
        passages.len(),
        args.k,
        trained.features,
        trained.key,
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
    let mut cats: Vec<String> = REPORT
        .iter()
        .map(|(n, _)| format!("{n} (report 000)"))
        .collect();
    cats.extend(readers.iter().map(|(n, _, _)| n.to_string()));
    let mut em: Vec<f64> = REPORT.iter().map(|(_, v)| *v).collect();
    let mut f1s = em.clone();
    for s in &sums {
        em.push(100.0 * s[0] / n);
        f1s.push(100.0 * s[1] / n);
    }
    let fig = render(&Bars {
        title: "Figure 3: reader EM / F1 on report 000's ten questions (top-5 concatenated)".into(),
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
        "readers": readers.iter().map(|r| r.0).collect::<Vec<_>>(),
        "ten_em": sums.iter().map(|s| 100.0 * s[0] / n).collect::<Vec<_>>(),
        "ten_f1": sums.iter().map(|s| 100.0 * s[1] / n).collect::<Vec<_>>(),
        "honest": honest_scores,
        "reader_key": trained.key,
        "load": reader::load_average(),
    }))?;
    Ok(())
}
