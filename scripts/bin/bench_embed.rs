//! Benchmark: all-MiniLM-L6-v2 sentences per second, our candle encoder against
//! sentence-transformers on PyTorch CPU, measured in the same run on the same texts.
//!
//! ```text
//! cargo run --release --bin bench_embed [-- --n 512 --runs 5 --threads 2]
//! ```
//!
//! Texts: the first `--n` non-empty `extract`s of `wiki-leads-en`, in file order, each
//! whole — exactly what `scripts/python/bench_st.py` reads (its `--corpus` is given the
//! file the Rust side resolved, and the sha256 of the `\n`-joined texts must agree on
//! both sides, else the run stops).
//!
//! Systems, all float32 on CPU with batch size 64, max length 256, `--threads` threads,
//! tokenisation included in the time:
//!
//! | system | forward pass |
//! |---|---|
//! | workbench `BertEncoder`, fused | `encode::fast_bert` (padding-free, fused; the default) |
//! | workbench `BertEncoder`, candle `BertModel` | candle-transformers' stock BERT on padded batches |
//! | sentence-transformers | `model.encode` on PyTorch (`bench_st.py`, one process per round) |
//!
//! Each system gets one untimed warm-up encode (the Python peer does one in every
//! process), then `--runs` rounds; in each round every system encodes all texts once,
//! in an order that rotates from round to round, so machine load falls on all alike.
//! Reported: sentences/s = n / median wall time per system, and ratios of those medians.
//! Needs the peers venv (`scripts/bench` makes it). Writes `data/results/bench-embed/`.

use anyhow::{bail, ensure, Context, Result};
use clap::Parser;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::Command;
use std::time::Instant;
use workbench::assets::{sha256_file, Assets};
use workbench::display::Table;
use workbench::encode::{dot, Backend, BertEncoder, EncoderParams};
use workbench::load::wikipedia_corpus;
use workbench::results::Experiment;

const NAME: &str = "bench-embed";
const CORPUS: &str = "wiki-leads-en";
const MODEL: &str = "all-minilm-l6-v2";
/// sentence-transformers' `max_seq_length` for the model; `bench_st.py` fixes it too.
const MAX_LENGTH: usize = 256;
const SUMMARY_FILE: &str = "bench.md";

#[derive(Parser, Serialize, Debug)]
#[command(
    about = "MiniLM sentences/s: candle encoder vs sentence-transformers (same run, same texts)"
)]
struct Args {
    /// Texts: the first N non-empty wiki-leads-en extracts, in file order.
    #[arg(long, default_value_t = 512)]
    n: usize,
    /// Texts per batch (both sides).
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    /// Threads on both sides (our rayon pool, RAYON/CANDLE_NUM_THREADS; torch.set_num_threads).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Timed rounds (each system encodes all texts once per round; medians are reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Leave out candle-transformers' stock BertModel (the slowest system).
    #[arg(long)]
    skip_candle: bool,
    /// Python of the peers venv.
    #[arg(
        long,
        env = "PEERS_PYTHON",
        default_value = "~/.cache/rag-workbench/peers-venv/bin/python"
    )]
    #[serde(skip)]
    python: String,
    /// Accepted for symmetry with the experiments; benchmarks always re-run.
    #[arg(long)]
    #[serde(skip)]
    force: bool,
}

#[derive(Serialize)]
struct Config<'a> {
    args: &'a Args,
    corpus: &'static str,
    model: &'static str,
    max_length: usize,
    inputs: Vec<(String, String)>,
    program_sha256: String,
}

/// What one `bench_st.py --runs 1` process prints (the fields used here).
#[derive(Deserialize, Serialize, Debug, Clone)]
struct PeerOut {
    num_texts: usize,
    texts_sha256: String,
    avg_tokens: f64,
    truncated_texts: usize,
    run_s: Vec<f64>,
    cpu_s: Vec<f64>,
    torch_threads: usize,
    batch_size: usize,
    max_seq_length: usize,
    sentence_transformers_version: String,
    transformers_version: String,
    torch_version: String,
    loadavg_1min: Vec<f64>,
}

/// Median (mean of the two middle values for an even count).
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

fn load_avg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// CPU seconds (user + system, all threads) of this process so far, from
/// `/proc/self/stat` (clock ticks of 1/100 s, Linux' USER_HZ); NaN elsewhere.
fn process_cpu_s() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    // Fields after the parenthesised command name start at field 3 (state).
    let rest: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    let tick = |i: usize| {
        rest.get(i)
            .and_then(|x| x.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (tick(11) + tick(12)) / 100.0 // utime (field 14) + stime (field 15)
}

fn expand_home(p: &str) -> String {
    if let Some(rest) = p.strip_prefix('~') {
        format!("{}{rest}", std::env::var("HOME").unwrap_or_default())
    } else {
        p.to_string()
    }
}

fn run_peer(
    args: &Args,
    root: &Path,
    corpus: &Path,
    out: &Path,
) -> Result<(PeerOut, serde_json::Value)> {
    let python = expand_home(&args.python);
    let o = Command::new(&python)
        .arg(root.join("scripts/python/bench_st.py"))
        .args(["--corpus".as_ref(), corpus.as_os_str()])
        .args(["--n", &args.n.to_string()])
        .args(["--batch-size", &args.batch_size.to_string()])
        .args(["--threads", &args.threads.to_string()])
        .args(["--runs", "1"])
        .args(["--out".as_ref(), out.as_os_str()])
        .output()
        .with_context(|| {
            format!(
                "running the sentence-transformers peer with {python} (make it with scripts/bench)"
            )
        })?;
    if !o.status.success() {
        bail!(
            "sentence-transformers peer failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&o.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .context("no JSON line from the peer")?;
    let raw: serde_json::Value = serde_json::from_str(line)?;
    Ok((serde_json::from_value(raw.clone())?, raw))
}

/// One system's timed encodes.
struct System {
    label: String,
    wall_s: Vec<f64>,
    cpu_s: Vec<f64>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    ensure!(
        args.n > 0 && args.runs > 0 && args.threads > 0 && args.batch_size > 0,
        "--n, --runs, --threads and --batch-size must be at least 1"
    );
    // candle's matrix products size their rayon split by RAYON_NUM_THREADS and its
    // element-wise ops use a pool of CANDLE_NUM_THREADS (read on first use): pin both.
    std::env::set_var("RAYON_NUM_THREADS", args.threads.to_string());
    std::env::set_var("CANDLE_NUM_THREADS", args.threads.to_string());
    // No progress bars inside the timed encodes.
    std::env::set_var("WORKBENCH_PROGRESS", "0");

    let root = workbench::paths::project_root()?;
    let assets = Assets::load()?;
    let config = Config {
        args: &args,
        corpus: CORPUS,
        model: MODEL,
        max_length: MAX_LENGTH,
        inputs: assets.input_checksums([CORPUS, MODEL])?,
        program_sha256: workbench::results::executable_sha256()?,
    };
    let Some(exp) = Experiment::start(NAME, &config, true, SUMMARY_FILE)? else {
        return Ok(());
    };
    let out = &exp.out;
    let load_start = load_avg();

    // The texts bench_st.py documents: first N non-empty extracts, file order, whole.
    let corpus_file = assets.resolve(CORPUS, "summaries_en-us.json")?;
    let docs =
        wikipedia_corpus(&assets, CORPUS).with_context(|| format!("loading corpus `{CORPUS}`"))?;
    let texts: Vec<&str> = docs
        .iter()
        .map(|d| d.text.as_str())
        .filter(|t| !t.trim().is_empty())
        .take(args.n)
        .collect();
    ensure!(
        texts.len() == args.n,
        "{CORPUS}: only {} non-empty extracts, asked for {}",
        texts.len(),
        args.n
    );
    // Same digest as bench_st.py: sha256 of the texts joined by "\n".
    let texts_file = out.path("texts.txt");
    std::fs::write(&texts_file, texts.join("\n"))?;
    let texts_sha256 = sha256_file(&texts_file)?;

    let params = EncoderParams::default()
        .batch_size(args.batch_size)
        .max_length(MAX_LENGTH)
        .threads(args.threads);
    let mut encoders = vec![(
        "workbench BertEncoder (fused, padding-free)".to_string(),
        BertEncoder::load(&assets, MODEL, params.clone().backend(Backend::Fused))?,
    )];
    if !args.skip_candle {
        encoders.push((
            "workbench BertEncoder (candle-transformers BertModel)".to_string(),
            BertEncoder::load(&assets, MODEL, params.clone().backend(Backend::Candle))?,
        ));
    }
    let counts = encoders[0].1.token_counts(&texts)?;
    let avg_tokens = counts.iter().sum::<usize>() as f64 / counts.len() as f64;
    let truncated = counts.iter().filter(|&&c| c >= MAX_LENGTH).count();
    let total_tokens = counts.iter().sum::<usize>() as f64;
    println!(
        "{} texts (sha256 {}…), {avg_tokens:.1} tokens on average, {truncated} truncated at {MAX_LENGTH}; \
         {} threads, batch {}, {} rounds",
        texts.len(),
        &texts_sha256[..12],
        args.threads,
        args.batch_size,
        args.runs
    );

    // Warm-up (untimed), and the vectors for the fused-vs-candle agreement check.
    let mut vectors = Vec::new();
    for (label, enc) in &encoders {
        let t = Instant::now();
        vectors.push(enc.embed(&texts)?);
        println!("warm-up {label}: {:.1} s", t.elapsed().as_secs_f64());
    }
    let agreement = (vectors.len() > 1).then(|| {
        let cos: Vec<f64> = vectors[0]
            .iter()
            .zip(&vectors[1])
            .map(|(a, b)| dot(a, b) as f64)
            .collect();
        (
            cos.iter().copied().fold(f64::INFINITY, f64::min),
            cos.iter().sum::<f64>() / cos.len() as f64,
        )
    });
    drop(vectors);

    // Rounds: every system once per round, starting position rotating.
    let peer_label = "sentence-transformers (PyTorch CPU)".to_string();
    let mut systems: Vec<System> = encoders
        .iter()
        .map(|(l, _)| l.clone())
        .chain([peer_label])
        .map(|label| System {
            label,
            wall_s: Vec::new(),
            cpu_s: Vec::new(),
        })
        .collect();
    let peer_idx = systems.len() - 1;
    let mut peers: Vec<serde_json::Value> = Vec::new();
    let mut peer_first: Option<PeerOut> = None;
    let mut peer_process_s = Vec::new();
    for round in 0..args.runs {
        let k = systems.len();
        for j in 0..k {
            let s = (round + j) % k;
            if s == peer_idx {
                let t = Instant::now();
                let (p, raw) = run_peer(
                    &args,
                    &root,
                    &corpus_file,
                    &out.path(&format!("peer_round{round}.json")),
                )?;
                peer_process_s.push(t.elapsed().as_secs_f64());
                if p.texts_sha256 != texts_sha256 || p.num_texts != texts.len() {
                    bail!(
                        "text mismatch: the peer encoded {} texts with sha256 {}, ours are {} with {}",
                        p.num_texts,
                        p.texts_sha256,
                        texts.len(),
                        texts_sha256
                    );
                }
                systems[s].wall_s.push(p.run_s[0]);
                systems[s].cpu_s.push(p.cpu_s[0]);
                peers.push(raw);
                peer_first.get_or_insert(p);
            } else {
                let enc = &encoders[s].1;
                let (c0, t) = (process_cpu_s(), Instant::now());
                std::hint::black_box(enc.embed(&texts)?);
                systems[s].wall_s.push(t.elapsed().as_secs_f64());
                systems[s].cpu_s.push(process_cpu_s() - c0);
            }
            let last = systems[s].wall_s.last().copied().unwrap_or(f64::NAN);
            println!(
                "round {}/{}: {:<55} {last:7.2} s  ({:.1} sentences/s)",
                round + 1,
                args.runs,
                systems[s].label,
                texts.len() as f64 / last
            );
        }
    }
    let peer = peer_first.context("no peer run")?;
    let load_end = load_avg();

    // Table.
    let n = texts.len() as f64;
    let med = |s: &System| median(&s.wall_s);
    let peer_med = med(&systems[peer_idx]);
    let fused_med = med(&systems[0]);
    let mut t = Table::new([
        "system",
        "sentences/s (median)",
        "ratio vs sentence-transformers",
        "median of per-round ratios",
        "median wall (s)",
        "wall range (s)",
        "CPU s / wall s",
    ])
    .caption(format!(
        "all-MiniLM-L6-v2, {} wiki-leads-en extracts ({avg_tokens:.1} tokens avg, {truncated} truncated at {MAX_LENGTH}), \
         batch {}, float32 CPU, {} threads, tokenisation included; median of {} interleaved rounds after a warm-up. \
         sentence-transformers {} / torch {} ({} torch threads).",
        texts.len(),
        args.batch_size,
        args.threads,
        args.runs,
        peer.sentence_transformers_version,
        peer.torch_version,
        peer.torch_threads,
    ));
    let mut summary = serde_json::Map::new();
    for s in &systems {
        let m = med(s);
        let lo = s.wall_s.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = s.wall_s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let cpu_ratio = median(&s.cpu_s) / m;
        // Rounds are interleaved, so each round's ratio compares runs made under
        // the same machine load: steadier than the ratio of medians.
        let round_ratios: Vec<f64> = systems[peer_idx]
            .wall_s
            .iter()
            .zip(&s.wall_s)
            .map(|(p, o)| p / o)
            .collect();
        let round_ratio = median(&round_ratios);
        t.push([
            s.label.clone(),
            format!("{:.1}", n / m),
            format!("{:.2}", peer_med / m),
            format!("{round_ratio:.2}"),
            format!("{m:.2}"),
            format!("{lo:.2}–{hi:.2}"),
            format!("{cpu_ratio:.2}"),
        ])?;
        summary.insert(
            s.label.clone(),
            serde_json::json!({
                "sentences_per_s": n / m,
                "tokens_per_s": total_tokens / m,
                "ratio_vs_sentence_transformers": peer_med / m,
                "median_round_ratio_vs_sentence_transformers": round_ratio,
                "median_wall_s": m,
                "wall_s": s.wall_s,
                "cpu_s": s.cpu_s,
            }),
        );
    }
    t.write_csv(&out.path("bench.csv"))?;
    let mut notes = vec![format!(
        "Same texts on both sides: sha256 {texts_sha256}. Tokens: ours {avg_tokens:.2} avg / {truncated} truncated, \
         sentence-transformers {:.2} / {}.",
        peer.avg_tokens, peer.truncated_texts
    )];
    if let Some((min_cos, mean_cos)) = agreement {
        notes.push(format!(
            "Fused vs candle BertModel vectors: cosine min {min_cos:.6}, mean {mean_cos:.6} over all {} texts.",
            texts.len()
        ));
        summary.insert("fused_vs_candle_min_cosine".into(), min_cos.into());
    }
    notes.push(
        "No cosine agreement with the peer: bench_st.py does not output its embeddings.".into(),
    );
    notes.push(format!(
        "Load average (1/5/15 min): start {load_start}, end {load_end}."
    ));
    let md = format!(
        "{}\n\n{}\n{}\n",
        t.caption.as_deref().unwrap_or(""),
        t.to_markdown(),
        notes.iter().map(|l| format!("\n{l}")).collect::<String>()
    );
    std::fs::write(out.path(SUMMARY_FILE), &md)?;
    std::fs::write(
        out.path("peer_runs.json"),
        serde_json::to_string_pretty(&peers)?,
    )?;
    for r in 0..args.runs {
        let _ = std::fs::remove_file(out.path(&format!("peer_round{r}.json")));
    }

    summary.insert(
        "ratio_fused_vs_sentence_transformers".into(),
        (peer_med / fused_med).into(),
    );
    summary.insert("texts".into(), texts.len().into());
    summary.insert("texts_sha256".into(), texts_sha256.into());
    summary.insert("avg_tokens".into(), avg_tokens.into());
    summary.insert("peer_avg_tokens".into(), peer.avg_tokens.into());
    summary.insert("peer_process_s".into(), peer_process_s.into());
    summary.insert("peer".into(), serde_json::to_value(&peer)?);
    summary.insert("load_avg_start".into(), load_start.into());
    summary.insert("load_avg_end".into(), load_end.into());
    exp.finish(serde_json::Value::Object(summary))?;
    println!("\n{md}");
    Ok(())
}
