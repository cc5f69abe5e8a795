//! Benchmark: prefill and decode tokens/s of our GGUF reader (candle, `read::generative`)
//! against llama.cpp on the same GGUF files, the same prompt token ids and the same thread
//! count, interleaved in one run. Two llama.cpp peers: the `xllamacpp` wheel (compiled for a
//! generic x86-64: AVX2, FMA, F16C) and, with `--native-server`, a `llama-server` built from
//! source for this CPU by `scripts/python/build_llamacpp.py` (`-march=native`). Each ratio's
//! denominator is the faster of the two on that measurement.
//!
//! ```text
//! cargo run --release --bin bench_llm [-- --models qwen2.5-coder-1.5b-instruct-gguf --rounds 5 --threads 2 \
//!     --native-server ~/.cache/rag-workbench/llamacpp-native/KEY/llama-server]
//! ```
//!
//! Prompts (built once per model with its chat template, tokenised by us; llama.cpp gets the
//! same ids, used as is): a RAG prompt of about `--long-tokens` tokens — a system message,
//! RAG-Mini-Wikipedia passages (the first passage holding the answer of question q4, then
//! the following passages of the same article in file order, as many as fit) and the
//! question — and a short prompt of about `--short-tokens` tokens (a question without
//! passages). Both ask for a detailed answer so that decoding runs for a while; generation is
//! greedy, at most `--new-tokens` tokens, ending early at end-of-generation on both sides.
//!
//! Each model: every system loads, one untimed warm-up generation per prompt on each side,
//! then `--rounds` rounds; in a round each prompt is run by every system, the order of the
//! systems rotating from round to round. Reported: the median over rounds of
//!
//! - prefill tokens/s = prompt tokens / prompt time (ours: [`Generation::prefill_secs`];
//!   llama.cpp: its server's `prompt_ms`),
//! - decode tokens/s = decode forward passes / decode time, where the passes are generated
//!   tokens − 1 (the first token comes from the prompt's logits) on both sides (ours:
//!   [`Generation::decode_steps`] / `decode_secs`; llama.cpp: (`predicted_n` − 1) /
//!   `predicted_ms`, llama.cpp's own generation timer, which starts when the first token is
//!   sampled),
//!
//! and the ratio ours / llama.cpp of the medians (the faster peer's). The machine's ceilings
//! beside them: decode at the measured read bandwidth over the GGUF's bytes (decode streams
//! every weight once per token) and prefill at the measured peak int8 multiply-add rate
//! (`workbench::machine::measure_peak`) over the layers' weight multiply-adds per token.
//! Besides: how many leading generated tokens
//! agree between the two (same greedy ids expected up to quantised-arithmetic differences),
//! the in-process memory bandwidth (a `--threads`-thread sequential read and a memcpy of
//! 512 MiB, best of 3) and the decode bound it implies, bandwidth / GGUF file bytes (decode
//! streams every weight once per token), and the load average before and after.
//!
//! llama.cpp's configuration is its fastest documented one for one CPU sequence (see
//! `scripts/python/llamacpp_peer.py`): `--threads` threads for prompt and generation (= the
//! physical cores by default, 2 here), n_batch 2048 / n_ubatch 512, flash attention `auto`
//! (on for CPU; `--flash-attn`), REPACK weight layouts, mmap'd weights paged in by the
//! warm-up, no prompt cache. Ours: `--threads` for candle's pool (RAYON_NUM_THREADS /
//! CANDLE_NUM_THREADS), prefill batch `--prefill-batch` (512, llama.cpp's ubatch),
//! `--requantize` as [`LoadOptions`] (default: the library's).
//!
//! Needs the peers venv (`bash scripts/bench` makes it). Writes `data/results/bench_llm/`:
//! `config.json` (arguments, inputs and the machine, `workbench::machine::Machine`),
//! `rounds.csv` (every timed generation), `bench.md` / `bench.csv` (the table),
//! `summary.json`.

#[path = "../common/llama_peer.rs"]
mod llama_peer;

use anyhow::{ensure, Context, Result};
use clap::Parser;
use llama_peer::{Peer, PEER};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;
use workbench::assets::Assets;
use workbench::bench::{median, BenchRun, PythonPeers};
use workbench::display::Table;
use workbench::machine::{load_average, measure_peak};
use workbench::read::generative::{
    ChatMessage, GenerateParams, Llm, LoadOptions, Requantize, Sampling,
};

const NAME: &str = "bench_llm";
const SUMMARY_FILE: &str = "bench.md";
const PASSAGES: &str = "rag-mini-wikipedia";
/// The question of the RAG prompt: q4 "When did Lincoln begin his political career?" (1832).
const QUESTION_ROW: usize = 4;
const SYSTEM: &str = "You answer questions using the passages you are given. Answer the question, \
                      then explain your answer in detail, quoting the passages that support it.";
const SHORT_QUESTION: &str = "Explain in detail how the Okapi BM25 ranking function scores a \
                              document for a query, and why it saturates term frequency.";
const MODELS: [&str; 3] = [
    "smollm2-135m-instruct-gguf",
    "qwen2.5-coder-0.5b-instruct-gguf",
    "qwen2.5-coder-1.5b-instruct-gguf",
];

#[derive(Parser, Serialize, Debug)]
#[command(
    about = "GGUF reader prefill/decode tokens/s vs llama.cpp (xllamacpp wheel, native build), same GGUF, same ids, same threads, interleaved"
)]
struct Args {
    /// Models (asset names), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = MODELS.map(String::from))]
    models: Vec<String>,
    /// Threads on both sides (llama.cpp n_threads and n_threads_batch; candle's pool).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Timed rounds (each runs every prompt on both systems; medians are reported).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Target length of the RAG prompt, tokens (passages are added while they fit).
    #[arg(long, default_value_t = 600)]
    long_tokens: usize,
    /// Generated tokens at most (greedy; fewer when a model ends its answer).
    #[arg(long, default_value_t = 64)]
    new_tokens: usize,
    /// Our prompt batch (tokens per prefill forward pass).
    #[arg(long, default_value_t = 512)]
    prefill_batch: usize,
    /// Our requantisation of Q4_1/Q5_0/Q5_1 weights: auto, never, always.
    #[arg(long, default_value = "auto", value_parser = parse_requantize)]
    requantize: Requantize,
    /// llama.cpp's flash attention: auto, on, off.
    #[arg(long, default_value = "auto")]
    flash_attn: String,
    /// A `llama-server` built for this CPU by `scripts/python/build_llamacpp.py`: run as a
    /// second llama.cpp peer beside the xllamacpp wheel (`scripts/bench` builds and passes it).
    #[arg(long, env = "LLAMACPP_NATIVE_SERVER")]
    native_server: Option<PathBuf>,
    /// Python of the peers venv (default: `$PEERS_VENV/bin/python`, see `PythonPeers::default_python`).
    #[arg(long, env = "PEERS_PYTHON")]
    #[serde(skip)]
    python: Option<PathBuf>,
    /// Questions of the question-set measurement (ours one at a time vs in batches of
    /// `--batch`; distinct RAG prompts of about `--long-tokens` tokens); 0 skips it.
    #[arg(long, default_value_t = 8)]
    question_set: usize,
    /// Questions decoded together in the question-set measurement.
    #[arg(long, default_value_t = 4)]
    batch: usize,
    /// Rounds of the question-set measurement (each reads the set once per system and way).
    #[arg(long, default_value_t = 2)]
    set_rounds: usize,
    /// Accepted for symmetry with the experiments; benchmarks always re-run.
    #[arg(long)]
    #[serde(skip)]
    force: bool,
}

/// One system's question-set measurement: the questions read one at a time or in batches.
#[derive(Serialize, Debug)]
struct SetLine {
    model: String,
    system: String,
    batched: bool,
    questions: usize,
    batch: usize,
    prompt_tokens_median: f64,
    generated_tokens: usize,
    wall_s: f64,
    questions_per_min: f64,
    /// Answers equal to the same system's one-at-a-time answers.
    answers_as_one_at_a_time: usize,
}

/// Read `set` with ours and each llama.cpp peer (started with `batch` slots), one at a
/// time and in batches of `batch`, `rounds` times with the order of the systems rotating;
/// median wall times.
#[allow(clippy::too_many_arguments)]
fn measure_set(
    llm: &mut Llm,
    llamas: &mut [(&str, Peer)],
    key: &str,
    set: &[Vec<u32>],
    batch: usize,
    rounds: usize,
    params: &GenerateParams,
) -> Result<Vec<SetLine>> {
    let n_sys = 2 * (1 + llamas.len());
    let mut walls: Vec<Vec<f64>> = vec![Vec::new(); n_sys];
    let mut outs: Vec<Vec<Vec<u32>>> = vec![Vec::new(); n_sys];
    for round in 0..rounds {
        for slot in 0..n_sys {
            let sys = (slot + round) % n_sys;
            let batched = sys % 2 == 1;
            let t = Instant::now();
            let mut out = Vec::new();
            let mut peer_wall = 0.0;
            if sys < 2 {
                if batched {
                    for group in set.chunks(batch) {
                        let refs: Vec<&[u32]> = group.iter().map(|p| p.as_slice()).collect();
                        out.extend(
                            llm.generate_batch(&refs, params)?
                                .into_iter()
                                .map(|g| g.token_ids),
                        );
                    }
                } else {
                    for p in set {
                        out.push(llm.generate_ids(p, params)?.token_ids);
                    }
                }
            } else {
                let (_, peer) = &mut llamas[sys / 2 - 1];
                if batched {
                    for group in set.chunks(batch) {
                        let (w, toks) = peer.generate_batch(group, params.max_new_tokens)?;
                        peer_wall += w;
                        out.extend(toks);
                    }
                } else {
                    for p in set {
                        let g = peer.generate(p, params.max_new_tokens)?;
                        peer_wall += g.wall_ms / 1e3;
                        out.push(g.tokens);
                    }
                }
            }
            walls[sys].push(if sys < 2 {
                t.elapsed().as_secs_f64()
            } else {
                peer_wall
            });
            outs[sys] = out;
        }
        println!(
            "  question set: round {} done (load {})",
            round + 1,
            load_average()
        );
    }
    let mut lens: Vec<f64> = set.iter().map(|p| p.len() as f64).collect();
    lens.sort_by(f64::total_cmp);
    let mut lines = Vec::new();
    for sys in 0..n_sys {
        let wall = median(&walls[sys]);
        let one = &outs[sys - sys % 2];
        lines.push(SetLine {
            model: key.to_string(),
            system: if sys < 2 {
                OURS.to_string()
            } else {
                llamas[sys / 2 - 1].0.to_string()
            },
            batched: sys % 2 == 1,
            questions: set.len(),
            batch: if sys % 2 == 1 { batch } else { 1 },
            prompt_tokens_median: median(&lens),
            generated_tokens: outs[sys].iter().map(Vec::len).sum(),
            wall_s: wall,
            questions_per_min: set.len() as f64 * 60.0 / wall,
            answers_as_one_at_a_time: outs[sys].iter().zip(one).filter(|(x, y)| x == y).count(),
        });
    }
    Ok(lines)
}

fn parse_requantize(s: &str) -> std::result::Result<Requantize, String> {
    match s {
        "auto" => Ok(Requantize::Auto),
        "never" => Ok(Requantize::Never),
        "always" => Ok(Requantize::Always),
        _ => Err(format!("`{s}`: expected auto, never or always")),
    }
}

#[derive(Serialize)]
struct Config<'a> {
    args: &'a Args,
    inputs: Vec<(String, String)>,
    program_sha256: String,
}

/// The median of the finite values of `v`: a generation that decoded no token has a
/// NaN decode rate, which says nothing about speed and is left out of the median.
fn median_finite(v: &[f64]) -> f64 {
    median(
        &v.iter()
            .copied()
            .filter(|x| x.is_finite())
            .collect::<Vec<_>>(),
    )
}

// ---------------------------------------------------------------- memory bandwidth

/// Bytes per second of a `threads`-thread sequential read and of a single memcpy, best of 3
/// over `bytes` bytes.
#[derive(Serialize, Clone, Copy, Debug)]
struct Bandwidth {
    buffer_bytes: usize,
    read_threads: usize,
    read_bytes_per_s: f64,
    memcpy_bytes_per_s: f64,
}

/// A wrapping sum of `v` in eight independent lanes: no dependency chain between loads, so
/// the loop runs at the speed memory delivers (a single running accumulator that mixes
/// each value into the next would time the adder's latency instead).
fn read_sum(v: &[u64]) -> u64 {
    let mut lanes = [0u64; 8];
    let chunks = v.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l = l.wrapping_add(x);
        }
    }
    lanes
        .iter()
        .chain(rest)
        .fold(0u64, |a, &x| a.wrapping_add(x))
}

fn bandwidth(bytes: usize, threads: usize) -> Bandwidth {
    let n = bytes / 8;
    let src: Vec<u64> = (0..n as u64).collect();
    let mut dst = vec![0u64; n];
    let mut best_read = f64::INFINITY;
    let mut best_copy = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        let chunk = n.div_ceil(threads);
        let total: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = src
                .chunks(chunk)
                .map(|c| s.spawn(move || read_sum(c)))
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or(0))
                .fold(0, u64::wrapping_add)
        });
        std::hint::black_box(total);
        best_read = best_read.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        dst.copy_from_slice(&src);
        std::hint::black_box(&dst);
        best_copy = best_copy.min(t.elapsed().as_secs_f64());
    }
    Bandwidth {
        buffer_bytes: n * 8,
        read_threads: threads,
        read_bytes_per_s: (n * 8) as f64 / best_read,
        memcpy_bytes_per_s: (n * 8) as f64 / best_copy,
    }
}

// ---------------------------------------------------------------- prompts

/// The RAG prompt of `qa`: the passages from the first one holding its answer on, as many
/// as keep the prompt within `long_tokens` (at least one); `None` when no passage holds the
/// answer.
fn rag_prompt(
    llm: &Llm,
    docs: &[workbench::Document],
    qa: &workbench::QaExample,
    long_tokens: usize,
) -> Result<Option<String>> {
    let Some(answer) = qa.answers.first() else {
        return Ok(None);
    };
    let Some(first) = docs.iter().position(|d| d.text.contains(answer.as_str())) else {
        return Ok(None);
    };
    let render = |n: usize| -> Result<String> {
        let body: Vec<String> = docs[first..first + n]
            .iter()
            .enumerate()
            .map(|(i, d)| format!("[{}] {}", i + 1, d.text.trim()))
            .collect();
        let user = format!(
            "Passages:\n{}\n\nQuestion: {}\nAnswer:",
            body.join("\n\n"),
            qa.question
        );
        Ok(llm.render_chat(
            &[ChatMessage::system(SYSTEM), ChatMessage::user(user)],
            true,
        )?)
    };
    let mut n = 1;
    while first + n < docs.len() && llm.tokenize(&render(n + 1)?, true)?.len() <= long_tokens {
        n += 1;
    }
    render(n).map(Some)
}

/// The benchmark's prompts for one model: (name, text, ids).
fn prompts(
    llm: &Llm,
    assets: &Assets,
    long_tokens: usize,
) -> Result<Vec<(String, String, Vec<u32>)>> {
    let passages = assets.resolve(PASSAGES, "infos.csv")?;
    let questions = assets.resolve(PASSAGES, "questions.csv")?;
    let (docs, qas) = workbench::load::rag_mini::load_csv(&passages, &questions)?;
    let qa = qas
        .get(QUESTION_ROW)
        .with_context(|| format!("{PASSAGES}: no question row {QUESTION_ROW}"))?;
    let long = rag_prompt(llm, &docs, qa, long_tokens)?.with_context(|| {
        format!("{PASSAGES}: no passage holds the answer of row {QUESTION_ROW}")
    })?;
    let short = llm.render_chat(
        &[
            ChatMessage::system(SYSTEM),
            ChatMessage::user(SHORT_QUESTION),
        ],
        true,
    )?;
    let mut out = Vec::new();
    for (name, text) in [("rag", long), ("short", short)] {
        let ids = llm.tokenize(&text, true)?;
        out.push((name.to_string(), text, ids));
    }
    Ok(out)
}

/// `n` RAG prompts of different questions (the first rows whose answer some passage holds),
/// each of about `long_tokens` tokens: a question set for batched reading.
fn question_set(llm: &Llm, assets: &Assets, long_tokens: usize, n: usize) -> Result<Vec<Vec<u32>>> {
    let passages = assets.resolve(PASSAGES, "infos.csv")?;
    let questions = assets.resolve(PASSAGES, "questions.csv")?;
    let (docs, qas) = workbench::load::rag_mini::load_csv(&passages, &questions)?;
    let mut out = Vec::new();
    for qa in &qas {
        if out.len() == n {
            break;
        }
        if let Some(text) = rag_prompt(llm, &docs, qa, long_tokens)? {
            out.push(llm.tokenize(&text, true)?);
        }
    }
    ensure!(
        out.len() == n,
        "{PASSAGES}: only {} questions have their answer in a passage",
        out.len()
    );
    Ok(out)
}

// ---------------------------------------------------------------- runs

/// One timed generation.
#[derive(Serialize, Clone, Debug)]
struct Run {
    model: String,
    prompt: String,
    round: usize,
    system: String,
    /// Position of this system in the round (0 first).
    order: usize,
    prompt_tokens: usize,
    generated_tokens: usize,
    decode_steps: usize,
    prefill_s: f64,
    decode_s: f64,
    prefill_tok_s: f64,
    decode_tok_s: f64,
    wall_s: f64,
}

const OURS: &str = "workbench (candle)";
const WHEEL: &str = "llama.cpp (xllamacpp wheel)";
const NATIVE: &str = "llama.cpp (native build)";

fn run_ours(llm: &mut Llm, ids: &[u32], params: &GenerateParams) -> Result<(Run, Vec<u32>)> {
    let t = Instant::now();
    let g = llm.generate_ids(ids, params)?;
    let wall = t.elapsed().as_secs_f64();
    let r = Run {
        model: String::new(),
        prompt: String::new(),
        round: 0,
        system: OURS.to_string(),
        order: 0,
        prompt_tokens: g.prompt_tokens,
        generated_tokens: g.generated_tokens,
        decode_steps: g.decode_steps,
        prefill_s: g.prefill_secs,
        decode_s: g.decode_secs,
        prefill_tok_s: g.prompt_tokens as f64 / g.prefill_secs,
        decode_tok_s: if g.decode_steps > 0 {
            g.decode_steps as f64 / g.decode_secs
        } else {
            f64::NAN
        },
        wall_s: wall,
    };
    Ok((r, g.token_ids))
}

fn run_llama(
    peer: &mut Peer,
    label: &str,
    ids: &[u32],
    n_predict: usize,
) -> Result<(Run, Vec<u32>)> {
    let g = peer.generate(ids, n_predict)?;
    let steps = g.predicted_n.saturating_sub(1);
    let mut tokens = g.tokens.clone();
    if g.stop_type.as_deref() == Some("eos") {
        tokens.pop(); // the end-of-generation id; ours leaves it out too
    }
    let r = Run {
        model: String::new(),
        prompt: String::new(),
        round: 0,
        system: label.to_string(),
        order: 0,
        prompt_tokens: g.prompt_n,
        generated_tokens: tokens.len(),
        decode_steps: steps,
        prefill_s: g.prompt_ms / 1e3,
        decode_s: g.predicted_ms / 1e3,
        prefill_tok_s: g.prompt_n as f64 / (g.prompt_ms / 1e3),
        decode_tok_s: if steps > 0 {
            steps as f64 / (g.predicted_ms / 1e3)
        } else {
            f64::NAN
        },
        wall_s: g.wall_ms / 1e3,
    };
    Ok((r, tokens))
}

/// One llama.cpp peer's medians on one (model, prompt).
#[derive(Serialize, Clone, Debug)]
struct PeerLine {
    system: String,
    generated: usize,
    /// Leading generated tokens equal to ours (first timed round).
    agree: usize,
    prefill_tok_s: f64,
    decode_tok_s: f64,
}

/// One (model, prompt) line of the table.
#[derive(Serialize, Clone, Debug)]
struct Line {
    model: String,
    prompt: String,
    prompt_tokens: usize,
    generated_ours: usize,
    ours_prefill_tok_s: f64,
    ours_decode_tok_s: f64,
    /// Every llama.cpp peer that ran (the wheel; the native build when given).
    peers: Vec<PeerLine>,
    /// The faster peer's prefill and decode rates: each ratio's denominator.
    best_prefill_peer: String,
    prefill_ratio: f64,
    best_decode_peer: String,
    decode_ratio: f64,
    file_bytes: u64,
    /// Read bandwidth / file bytes.
    decode_bound_tok_s: f64,
    /// Multiply-adds of the layers' weight matrices per token ([`LlmInfo::layer_macs_per_token`]).
    weight_macs_per_token: u64,
    /// Peak int8 multiply-add rate / weight multiply-adds per token.
    prefill_bound_tok_s: f64,
}

/// The median rates of `system` on (model, prompt): (prefill, decode, most tokens generated).
fn medians(runs: &[Run], model: &str, prompt: &str, system: &str) -> (f64, f64, usize) {
    let sel: Vec<&Run> = runs
        .iter()
        .filter(|r| r.model == model && r.prompt == prompt && r.system == system)
        .collect();
    let p: Vec<f64> = sel.iter().map(|r| r.prefill_tok_s).collect();
    let d: Vec<f64> = sel.iter().map(|r| r.decode_tok_s).collect();
    let g = sel.iter().map(|r| r.generated_tokens).max().unwrap_or(0);
    (median_finite(&p), median_finite(&d), g)
}

fn main() -> Result<()> {
    let args = Args::parse();
    ensure!(
        args.rounds > 0
            && args.threads > 0
            && args.new_tokens > 1
            && args.prefill_batch > 0
            && args.batch > 0
            && args.set_rounds > 0,
        "--rounds, --threads, --prefill-batch, --batch, --set-rounds must be at least 1 and --new-tokens at least 2"
    );
    ensure!(
        ["auto", "on", "off"].contains(&args.flash_attn.as_str()),
        "--flash-attn: `{}`: expected auto, on or off",
        args.flash_attn
    );
    for m in &args.models {
        ensure!(
            MODELS.contains(&m.as_str()),
            "--models: unknown model `{m}` (known: {})",
            MODELS.join(", ")
        );
    }
    // candle's matmuls split by RAYON_NUM_THREADS; its element-wise ops use a pool of
    // CANDLE_NUM_THREADS (read on first use): pin both before anything runs.
    std::env::set_var("RAYON_NUM_THREADS", args.threads.to_string());
    std::env::set_var("CANDLE_NUM_THREADS", args.threads.to_string());
    std::env::set_var("WORKBENCH_PROGRESS", "0");

    let root = workbench::paths::project_root()?;
    let peers = PythonPeers::new(&root, args.python.clone());
    peers.command(PEER)?; // a missing peers venv stops the run before any work
    let assets = Assets::load()?;
    let mut inputs_for: Vec<&str> = args.models.iter().map(|s| s.as_str()).collect();
    inputs_for.push(PASSAGES);
    let config = Config {
        args: &args,
        inputs: assets.input_checksums(inputs_for)?,
        program_sha256: workbench::results::executable_sha256()?,
    };
    let BenchRun { exp, machine } = BenchRun::start(NAME, &config, SUMMARY_FILE)?;
    let out = &exp.out;
    let up_start = machine.load_before.clone();
    println!("{}", machine.summary());

    let bw = bandwidth(512 << 20, args.threads);
    println!(
        "memory bandwidth (in-process, 512 MiB): read {:.2} GB/s with {} threads, memcpy {:.2} GB/s",
        bw.read_bytes_per_s / 1e9,
        bw.read_threads,
        bw.memcpy_bytes_per_s / 1e9
    );
    let peak = measure_peak(args.threads);
    println!(
        "peak multiply-add rate ({} threads): int8 {:.0} G/s ({}), f32 {:.0} G/s ({})",
        peak.threads,
        peak.int8_macs_per_s / 1e9,
        peak.int8_kernel,
        peak.f32_fmas_per_s / 1e9,
        peak.f32_kernel
    );
    let mut servers: Vec<(&str, Option<&Path>)> = vec![(WHEEL, None)];
    if let Some(bin) = &args.native_server {
        ensure!(
            bin.is_file(),
            "--native-server: {} is not a file (build it with scripts/python/build_llamacpp.py)",
            bin.display()
        );
        servers.push((NATIVE, Some(bin.as_path())));
    }

    let opts = LoadOptions {
        requantize: args.requantize,
        ..LoadOptions::default()
    };
    let params = GenerateParams {
        max_new_tokens: args.new_tokens,
        sampling: Sampling::Greedy,
        stop_strings: Vec::new(),
        prefill_batch: args.prefill_batch,
    };
    let mut runs: Vec<Run> = Vec::new();
    let mut lines: Vec<Line> = Vec::new();
    let mut models_info = serde_json::Map::new();
    let mut set_lines: Vec<SetLine> = Vec::new();
    for key in &args.models {
        let spec = assets.spec(key)?;
        let file = spec
            .files
            .keys()
            .find(|f| f.ends_with(".gguf"))
            .with_context(|| format!("asset {key} has no .gguf file"))?
            .clone();
        let path: PathBuf = assets.resolve(key, &file)?;
        let file_bytes = std::fs::metadata(&path)?.len();
        let mut llm = Llm::from_asset(key, &opts)?;
        let info = llm.info();
        let macs = info.layer_macs_per_token;
        let mut llamas: Vec<(&str, Peer)> = Vec::new();
        for (label, bin) in &servers {
            llamas.push((
                label,
                Peer::start(&peers, &path, args.threads, &args.flash_attn, *bin, 1)?,
            ));
        }
        println!(
            "\n{key}: {} ({} layers, {} MB file, {:.2} G weight multiply-adds per token), ours loaded in {:.1} s ({} tensors requantised)",
            info.architecture,
            info.n_layer,
            file_bytes / 1_000_000,
            macs as f64 / 1e9,
            info.load_secs,
            info.requantized_tensors,
        );
        let mut peer_info = serde_json::Map::new();
        for (label, peer) in &llamas {
            println!(
                "  {label}: {} · {}",
                peer.ready["xllamacpp_version"], peer.ready["settings"]["system_info"]
            );
            peer_info.insert(label.to_string(), peer.ready.clone());
        }
        models_info.insert(
            key.clone(),
            serde_json::json!({ "ours": info, "llama_cpp": peer_info, "file_bytes": file_bytes, "weight_macs_per_token": macs }),
        );
        let ps = prompts(&llm, &assets, args.long_tokens)?;
        for (name, _, ids) in &ps {
            println!("  prompt {name}: {} tokens", ids.len());
        }
        std::fs::write(
            out.path(&format!("prompts.{key}.json")),
            serde_json::to_string_pretty(
                &ps.iter()
                    .map(|(n, t, ids)| serde_json::json!({"name": n, "text": t, "ids": ids}))
                    .collect::<Vec<_>>(),
            )?,
        )?;
        // Warm-up, untimed: pages the weights in and sizes the caches on every side.
        for (_, _, ids) in &ps {
            run_ours(&mut llm, ids, &params)?;
            for (label, peer) in llamas.iter_mut() {
                run_llama(peer, label, ids, args.new_tokens)?;
            }
        }
        let n_sys = 1 + llamas.len();
        // agree[prompt][peer]: leading tokens equal to ours in the first timed round.
        let mut agree: Vec<Vec<usize>> = vec![vec![0; llamas.len()]; ps.len()];
        for round in 0..args.rounds {
            for (pi, (pname, _, ids)) in ps.iter().enumerate() {
                // System 0 is ours, 1.. the peers; the order rotates from round to round.
                let mut ours_tokens = Vec::new();
                let mut peer_tokens: Vec<Vec<u32>> = vec![Vec::new(); llamas.len()];
                for slot in 0..n_sys {
                    let sys = (slot + round) % n_sys;
                    let (mut r, toks) = if sys == 0 {
                        run_ours(&mut llm, ids, &params)?
                    } else {
                        let (label, peer) = &mut llamas[sys - 1];
                        run_llama(peer, label, ids, args.new_tokens)?
                    };
                    r.model = key.clone();
                    r.prompt = pname.clone();
                    r.round = round;
                    r.order = slot;
                    runs.push(r);
                    if sys == 0 {
                        ours_tokens = toks;
                    } else {
                        peer_tokens[sys - 1] = toks;
                    }
                }
                if round == 0 {
                    for (k, toks) in peer_tokens.iter().enumerate() {
                        agree[pi][k] = ours_tokens
                            .iter()
                            .zip(toks)
                            .take_while(|(x, y)| x == y)
                            .count();
                    }
                }
            }
            println!("  round {} done (load {})", round + 1, load_average());
        }
        for (_, peer) in llamas.drain(..) {
            peer.stop()?;
        }
        if args.question_set > 0 {
            let set = question_set(&llm, &assets, args.long_tokens, args.question_set)?;
            // The peers again, with a slot per question of a batch.
            for (label, bin) in &servers {
                llamas.push((
                    label,
                    Peer::start(
                        &peers,
                        &path,
                        args.threads,
                        &args.flash_attn,
                        *bin,
                        args.batch,
                    )?,
                ));
            }
            // Warm-up (untimed): one question and one batch on each side.
            let first = &set[..args.batch.min(set.len())];
            run_ours(&mut llm, &set[0], &params)?;
            let refs: Vec<&[u32]> = first.iter().map(|p| p.as_slice()).collect();
            llm.generate_batch(&refs, &params)?;
            for (label, peer) in llamas.iter_mut() {
                run_llama(peer, label, &set[0], args.new_tokens)?;
                peer.generate_batch(first, args.new_tokens)?;
            }
            set_lines.extend(measure_set(
                &mut llm,
                &mut llamas,
                key,
                &set,
                args.batch,
                args.set_rounds,
                &params,
            )?);
            for (_, peer) in llamas.drain(..) {
                peer.stop()?;
            }
        }
        drop(llm);
        for (pi, (pname, _, ids)) in ps.iter().enumerate() {
            let (op, od, og) = medians(&runs, key, pname, OURS);
            let peer_lines: Vec<PeerLine> = servers
                .iter()
                .enumerate()
                .map(|(k, (label, _))| {
                    let (p, d, g) = medians(&runs, key, pname, label);
                    PeerLine {
                        system: label.to_string(),
                        generated: g,
                        agree: agree[pi][k],
                        prefill_tok_s: p,
                        decode_tok_s: d,
                    }
                })
                .collect();
            let best = |f: fn(&PeerLine) -> f64| {
                peer_lines
                    .iter()
                    .filter(|l| f(l).is_finite())
                    .max_by(|a, b| f(a).total_cmp(&f(b)))
                    .map(|l| (l.system.clone(), f(l)))
                    .unwrap_or_else(|| ("none".into(), f64::NAN))
            };
            let (bp_name, bp) = best(|l| l.prefill_tok_s);
            let (bd_name, bd) = best(|l| l.decode_tok_s);
            lines.push(Line {
                model: key.clone(),
                prompt: pname.clone(),
                prompt_tokens: ids.len(),
                generated_ours: og,
                ours_prefill_tok_s: op,
                ours_decode_tok_s: od,
                peers: peer_lines,
                best_prefill_peer: bp_name,
                prefill_ratio: op / bp,
                best_decode_peer: bd_name,
                decode_ratio: od / bd,
                file_bytes,
                decode_bound_tok_s: bw.read_bytes_per_s / file_bytes as f64,
                weight_macs_per_token: macs,
                prefill_bound_tok_s: peak.int8_macs_per_s / macs as f64,
            });
        }
    }
    let up_end = load_average();
    println!("\nload at the end: {up_end}");

    // Columns per peer: the wheel, and the native build when it ran.
    let short = |label: &str| if label == NATIVE { "native" } else { "wheel" };
    let names: Vec<&str> = servers.iter().map(|(l, _)| short(l)).collect();
    let mut header: Vec<String> = vec![
        "model".into(),
        "prompt".into(),
        "prompt tokens".into(),
        format!("generated (ours / {})", names.join(" / ")),
        format!("greedy tokens agreeing ({})", names.join(" / ")),
        "prefill tok/s ours".into(),
    ];
    header.extend(names.iter().map(|n| format!("prefill tok/s llama.cpp {n}")));
    header.extend([
        "prefill ratio (vs faster llama.cpp)".into(),
        "prefill bound (int8 peak / weight MACs)".into(),
        "decode tok/s ours".into(),
    ]);
    header.extend(names.iter().map(|n| format!("decode tok/s llama.cpp {n}")));
    header.extend([
        "decode ratio (vs faster llama.cpp)".into(),
        "decode bound (read bw / file)".into(),
    ]);
    let mut t = Table::new(header).caption(format!(
        "bench_llm: {} threads, median of {} interleaved rounds, greedy, ≤ {} new tokens; read bandwidth {:.2} GB/s; peak int8 multiply-adds {:.0} G/s ({}); load {} → {}",
        args.threads,
        args.rounds,
        args.new_tokens,
        bw.read_bytes_per_s / 1e9,
        peak.int8_macs_per_s / 1e9,
        peak.int8_kernel,
        up_start,
        up_end
    ));
    for l in &lines {
        let join =
            |f: fn(&PeerLine) -> String| l.peers.iter().map(f).collect::<Vec<_>>().join(" / ");
        let mut row: Vec<String> = vec![
            l.model.clone(),
            l.prompt.clone(),
            l.prompt_tokens.to_string(),
            format!(
                "{} / {}",
                l.generated_ours,
                join(|p| p.generated.to_string())
            ),
            join(|p| p.agree.to_string()),
            format!("{:.1}", l.ours_prefill_tok_s),
        ];
        row.extend(l.peers.iter().map(|p| format!("{:.1}", p.prefill_tok_s)));
        row.extend([
            format!("{:.2}× ({})", l.prefill_ratio, short(&l.best_prefill_peer)),
            format!("{:.0}", l.prefill_bound_tok_s),
            format!("{:.1}", l.ours_decode_tok_s),
        ]);
        row.extend(l.peers.iter().map(|p| format!("{:.1}", p.decode_tok_s)));
        row.extend([
            format!("{:.2}× ({})", l.decode_ratio, short(&l.best_decode_peer)),
            format!("{:.1}", l.decode_bound_tok_s),
        ]);
        t.push(row)?;
    }
    let mut md = format!("{}\n{}", machine.summary(), t.to_markdown());
    if !set_lines.is_empty() {
        let mut st = Table::new([
            "model",
            "system",
            "reading",
            "questions",
            "prompt tokens (median)",
            "generated tokens",
            "wall (s)",
            "questions/min",
            "vs ours one at a time",
            "answers as its one-at-a-time",
        ])
        .caption(format!(
            "Question set: {} distinct RAG prompts read one at a time and in batches of {} (llama.cpp: the server with {} slots, the batch's requests sent at once), greedy, ≤ {} new tokens, {} threads, median wall time of {} rounds with the order rotating",
            args.question_set, args.batch, args.batch, args.new_tokens, args.threads, args.set_rounds
        ));
        for l in &set_lines {
            let base = set_lines
                .iter()
                .find(|b| b.model == l.model && b.system == OURS && !b.batched)
                .map_or(f64::NAN, |b| b.questions_per_min);
            st.push([
                l.model.clone(),
                l.system.clone(),
                if l.batched {
                    format!("batches of {}", l.batch)
                } else {
                    "one at a time".into()
                },
                l.questions.to_string(),
                format!("{:.0}", l.prompt_tokens_median),
                l.generated_tokens.to_string(),
                format!("{:.1}", l.wall_s),
                format!("{:.2}", l.questions_per_min),
                format!("{:.2}×", l.questions_per_min / base),
                format!("{} of {}", l.answers_as_one_at_a_time, l.questions),
            ])?;
        }
        md.push_str(&format!("\n\n{}", st.to_markdown()));
        st.write_csv(&out.path("question_set.csv"))?;
    }
    println!("\n{md}");
    std::fs::write(out.path(SUMMARY_FILE), &md)?;
    t.write_csv(&out.path("bench.csv"))?;
    let mut rt = Table::new([
        "model",
        "prompt",
        "round",
        "system",
        "order",
        "prompt_tokens",
        "generated_tokens",
        "decode_steps",
        "prefill_s",
        "decode_s",
        "prefill_tok_s",
        "decode_tok_s",
        "wall_s",
    ]);
    for r in &runs {
        rt.push([
            r.model.clone(),
            r.prompt.clone(),
            r.round.to_string(),
            r.system.clone(),
            r.order.to_string(),
            r.prompt_tokens.to_string(),
            r.generated_tokens.to_string(),
            r.decode_steps.to_string(),
            format!("{:.6}", r.prefill_s),
            format!("{:.6}", r.decode_s),
            format!("{:.3}", r.prefill_tok_s),
            format!("{:.3}", r.decode_tok_s),
            format!("{:.6}", r.wall_s),
        ])?;
    }
    rt.write_csv(&out.path("rounds.csv"))?;
    exp.finish(serde_json::json!({
        "lines": lines,
        "question_set": set_lines,
        "bandwidth": bw,
        "compute_peak": peak,
        "load_start": up_start,
        "load_end": up_end,
        "models": models_info,
    }))?;
    Ok(())
}
