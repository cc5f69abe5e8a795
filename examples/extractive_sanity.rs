//! Sanity run of the extractive reader: all-MiniLM-L6-v2 with an **untrained** (seeded)
//! QA head reads SQuAD 2.0 dev-half questions of the five held-out articles end to end,
//! (a) the gold paragraph alone and (b) five paragraphs of the article concatenated (the
//! gold one among them), and reports windows/s, EM/F1 (an untrained head: near zero) and
//! the load. Not a benchmark: a check that reading runs and how fast.
//!
//! `cargo run --release --example extractive_sanity -- [N_QUESTIONS] [THREADS]`
//! (defaults 40, 2). Threads set `RAYON_NUM_THREADS`/`CANDLE_NUM_THREADS` when unset.

use std::time::Instant;
use workbench::encode::Backend;
use workbench::evaluate::qa::{exact_match, f1};
use workbench::read::extractive::{
    save_pretrained, ExtractiveReader, MultiPassage, QaConfig, QaFiles, QaModel, ReaderParams,
};
use workbench::read::{Context, Reader};

const HELD_OUT: [&str; 5] = [
    "1973_oil_crisis",
    "French_and_Indian_War",
    "Huguenot",
    "Scottish_Parliament",
    "Yuan_dynasty",
];

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(40);
    let threads: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(2);
    for var in ["RAYON_NUM_THREADS", "CANDLE_NUM_THREADS"] {
        if std::env::var(var).is_err() {
            std::env::set_var(var, threads.to_string());
        }
    }
    let assets = workbench::assets::Assets::load()?;
    let squad =
        workbench::load::squad::load(&assets.resolve("squad-v2-dev-half", "dev-v2.0.json")?)?;
    let files = QaFiles::from_asset(&assets, "all-minilm-l6-v2")?;
    let config = QaConfig::from_base_file(&files.config)?;
    let t = Instant::now();
    let (varmap, _) = QaModel::trainable(&config, &files.weights, 0)?;
    // Through a saved checkpoint, so the fused pass can load it.
    let dir = std::env::temp_dir().join("extractive_sanity_minilm_untrained");
    save_pretrained(&varmap, &config, &files.tokenizer, &dir)?;
    let load_secs = t.elapsed().as_secs_f64();
    let texts: std::collections::HashMap<&str, &workbench::Document> =
        squad.contexts.iter().map(|d| (d.id.as_str(), d)).collect();
    let examples: Vec<_> = squad
        .examples
        .iter()
        .filter(|e| !e.is_unanswerable())
        .filter(|e| e.title.as_deref().is_some_and(|t| HELD_OUT.contains(&t)))
        .take(n)
        .collect();
    println!(
        "load {load_secs:.2}s; {} questions; threads {threads}",
        examples.len()
    );
    for (backend, mode) in [
        (Backend::Fused, "gold paragraph"),
        (Backend::Candle, "gold paragraph"),
        (Backend::Fused, "5 paragraphs concatenated"),
        (Backend::Candle, "5 paragraphs concatenated"),
    ] {
        let mut reader = ExtractiveReader::load_dir(
            &dir,
            ReaderParams {
                mode: MultiPassage::Concatenate,
                backend,
                ..Default::default()
            },
        )?;
        let (mut windows, mut tokens, mut secs, mut em, mut f) = (0usize, 0usize, 0f64, 0f64, 0f64);
        for ex in &examples {
            let cid = ex.context_id.as_deref().unwrap_or_default();
            let gold = texts[cid];
            let mut ps = vec![Context::new(cid, gold.text.clone())];
            if mode != "gold paragraph" {
                // The gold paragraph and the next four of its article (wrapping).
                let (title, k) = cid.rsplit_once('#').unwrap();
                let k: usize = k.parse()?;
                for j in 1..=4 {
                    let id = format!("{title}#{}", k + j);
                    let id = if texts.contains_key(id.as_str()) {
                        id
                    } else {
                        format!("{title}#{}", j - 1)
                    };
                    ps.push(Context::new(id.clone(), texts[id.as_str()].text.clone()));
                }
            }
            let segs: Vec<&str> = ps.iter().map(|c| c.text.as_str()).collect();
            windows += reader.windows(&ex.question, &segs)?.len();
            let a = reader.read(&ex.question, &ps)?;
            tokens += a.usage.prompt_tokens;
            secs += a.usage.prefill_secs;
            em += exact_match(&a.text, &ex.answers);
            f += f1(&a.text, &ex.answers);
            let ev = a.evidence.as_ref().expect("a span");
            let p = ps
                .iter()
                .find(|c| c.id == ev.passage_id)
                .expect("evidence passage");
            let s: String = p
                .text
                .chars()
                .skip(ev.start_char)
                .take(ev.end_char - ev.start_char)
                .collect();
            assert_eq!(s, a.text, "evidence maps back exactly");
        }
        let q = examples.len() as f64;
        println!(
            "{backend:?}, {mode}: {windows} windows, {tokens} tokens in {secs:.2}s = {:.1} windows/s, {:.0} tokens/s; EM {:.1} F1 {:.1}",
            windows as f64 / secs,
            tokens as f64 / secs,
            100.0 * em / q,
            100.0 * f / q
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average: {}", load.trim());
    Ok(())
}
