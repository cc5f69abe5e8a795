//! Benchmark: prefill and decode tokens/s of our GGUF reader (candle, `read::generative`)
//! against llama.cpp on the same GGUF files, the same prompt token ids and the same thread
//! count, interleaved in one run. The llama.cpp peers: the `xllamacpp` wheel (compiled for a
//! generic x86-64: AVX2, FMA, F16C) and, with `--native-server`, the `llama-server` builds
//! made for this CPU by `scripts/python/build_llamacpp.py` (`-march=native`; on a CPU with
//! AMX also the same build without AMX). Each ratio's denominator is the fastest peer on that
//! measurement. With `--no-amx` the same benchmark keeps AMX out: ours with its AMX kernel
//! and candle's switched off for the whole process (`WORKBENCH_LLM_NO_AMX=1`,
//! `CANDLE_NO_AMX=1`, the workspace's patched candle), against the wheel and the native build
//! without AMX (`data/results/bench_llm_no_amx/`): the kernels measured apart from the
//! instruction set.
//!
//! ```text
//! cargo run --release --bin bench_llm [-- --models qwen2.5-coder-1.5b-instruct-gguf --rounds 5 --threads 2 \
//!     --native-server ~/.cache/rag-workbench/llamacpp-native/KEY/native/llama-server,…/native-without-amx/llama-server]
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
//! and the ratio ours / llama.cpp of the medians (the fastest peer's). The machine's ceilings
//! beside them: decode at the measured read bandwidth over the GGUF's bytes (decode streams
//! every weight once per token) and, per system, prefill at the measured peak of the kernel
//! family its prompt products run on (`workbench::machine::measure_kernels`: `amx-bf16` for
//! our AMX kernel, `amx-int8` for llama.cpp's, `avx512-vnni`, `avx2`; read from the system's
//! build) over the layers' weight multiply-adds per token.
//!
//! Per system and model (`systems.csv`): the seconds from the start of the load to a system
//! ready to answer (ours: [`Llm::load`] with its warm-up, which repacks the weights for
//! candle's kernels and, on an AMX CPU, for the AMX kernel; llama.cpp: the server's start,
//! with its weight repacking), the first RAG prompt's prefill after the load against the
//! median one, and the peak resident memory of the
//! process holding the model (ours: a fresh process of this binary that loads the model and
//! reads the RAG prompt twice; llama.cpp: the server's process after the rounds).
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
use workbench::machine::{load_average, measure_kernels};
use workbench::read::generative::{
    ChatMessage, GenerateParams, Llm, LoadOptions, Requantize, Sampling,
};

const NAME: &str = "bench_llm";
/// The result folder of `--no-amx`.
const NAME_NO_AMX: &str = "bench_llm_no_amx";
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
    /// `llama-server` builds for this CPU by `scripts/python/build_llamacpp.py`,
    /// comma-separated: each runs as a llama.cpp peer beside the xllamacpp wheel, named by
    /// the variant in the `build-info.json` beside it (`scripts/bench` builds and passes them).
    #[arg(long, env = "LLAMACPP_NATIVE_SERVER", value_delimiter = ',')]
    native_server: Vec<PathBuf>,
    /// Keep AMX out of the run: ours with its AMX kernel and candle's switched off for the
    /// process (`WORKBENCH_LLM_NO_AMX=1`, `CANDLE_NO_AMX=1`), and only the llama.cpp peers
    /// built without AMX; the results go to `data/results/bench_llm_no_amx/`. Compares the
    /// kernels on the instruction sets both sides then share.
    #[arg(long)]
    no_amx: bool,
    /// Internal: measure one load of ours in this fresh process (`MODEL:PROMPTS.json`) and
    /// print it as one JSON line.
    #[arg(long, hide = true)]
    #[serde(skip)]
    probe: Option<String>,
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
    ours_label: &str,
    llamas: &mut [(String, Peer)],
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
                ours_label.to_string()
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
const OURS_NO_AMX: &str = "workbench (candle, AMX off)";
const WHEEL: &str = "llama.cpp (xllamacpp wheel)";

/// A llama.cpp server to run as a peer.
struct Server {
    /// The system's name in the tables.
    label: String,
    /// Its short name in column headers (`wheel`, `native`, `native-without-amx`).
    short: String,
    /// The binary; `None` for the xllamacpp wheel.
    bin: Option<PathBuf>,
    /// Whether its build compiled ggml's AMX kernels (`build-info.json`).
    amx: bool,
}

/// A native build, named by the `variant` of the `build-info.json` beside it.
fn native_server(bin: &Path) -> Result<Server> {
    ensure!(
        bin.is_file(),
        "--native-server: {} is not a file (build it with scripts/python/build_llamacpp.py)",
        bin.display()
    );
    let info = bin.with_file_name("build-info.json");
    let text = std::fs::read_to_string(&info).with_context(|| {
        format!(
            "--native-server {}: no {} beside it (build it with scripts/python/build_llamacpp.py)",
            bin.display(),
            info.display()
        )
    })?;
    let build: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", info.display()))?;
    let variant = build["variant"]
        .as_str()
        .with_context(|| format!("{}: no `variant`", info.display()))?;
    let amx = build["instruction_sets"]
        .as_array()
        .is_some_and(|v| v.iter().any(|x| x == "AMX_INT8"))
        || build["system_info"]
            .as_str()
            .is_some_and(|s| s.contains("AMX_INT8 = 1"));
    Ok(Server {
        label: format!("llama.cpp ({variant})"),
        short: variant.to_string(),
        bin: Some(bin.to_path_buf()),
        amx,
    })
}

/// The kernel family (as in `workbench::machine::ceiling`) a llama.cpp build multiplies
/// prompts with, from its `system_info` line (`AMX_INT8 = 1`, …) or, for a build that prints
/// none, the options `bench_llamacpp.py` lists in its place.
fn llama_prefill_kernel(system_info: &str) -> &'static str {
    // `FLAG = 1` in a system_info line; a bare word in a list of options.
    let listed = !system_info.contains(" = ");
    let on = |flag: &str| {
        system_info.contains(&format!("{flag} = 1"))
            || (listed && system_info.split(' ').any(|w| w == flag))
    };
    if on("AMX_INT8") {
        "amx-int8"
    } else if on("AVX512_VNNI") {
        "avx512-vnni"
    } else if on("AVX_VNNI") {
        "avx-vnni"
    } else if on("AVX2") {
        "avx2"
    } else {
        "unknown"
    }
}

/// The widest kernel family candle's quantised prompt products may use on this CPU, as its
/// x86 level picks it (`repack_x86::level`): `vpdpbusd zmm` with AVX-512 F and VNNI,
/// `vpdpbusd ymm` with AVX-VNNI, else AVX2 (its repacked tiles take Q4_K and Q6_K weights
/// whose rows are a multiple of 256 long and, with the workspace's patch, Q8_0 weights whose
/// rows are a multiple of 64; other weights use its per-block dot products); with `amx`, its
/// Q4_K products of 32 rows or more run on AMX-INT8 tiles.
fn candle_prefill_kernel(features: &[String], amx: bool) -> &'static str {
    let has = |f: &str| features.iter().any(|x| x == f);
    if has("avx512f") && has("avx512_vnni") {
        if amx && has("amx_int8") {
            "amx-int8"
        } else {
            "avx512-vnni"
        }
    } else if has("avx_vnni") && has("avx2") {
        "avx-vnni"
    } else if has("avx2") {
        "avx2"
    } else {
        "unknown"
    }
}

fn run_ours(
    llm: &mut Llm,
    label: &str,
    ids: &[u32],
    params: &GenerateParams,
) -> Result<(Run, Vec<u32>)> {
    let t = Instant::now();
    let g = llm.generate_ids(ids, params)?;
    let wall = t.elapsed().as_secs_f64();
    let r = Run {
        model: String::new(),
        prompt: String::new(),
        round: 0,
        system: label.to_string(),
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
    /// Short name in column headers.
    short: String,
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
    /// Every llama.cpp peer that ran (the wheel; the native builds when given).
    peers: Vec<PeerLine>,
    /// The fastest llama.cpp peer's prefill and decode rates: each ratio's denominator.
    best_prefill_peer: String,
    prefill_ratio: f64,
    best_decode_peer: String,
    decode_ratio: f64,
    /// The fastest peer's rates (the ratios' denominators).
    best_prefill_tok_s: f64,
    best_decode_tok_s: f64,
    file_bytes: u64,
    /// Read bandwidth / file bytes.
    decode_bound_tok_s: f64,
    /// Multiply-adds of the layers' weight matrices per token ([`LlmInfo::layer_macs_per_token`]).
    weight_macs_per_token: u64,
}

/// One system on one model: its prompt kernel and ceiling, load, first prompt and memory.
#[derive(Serialize, Clone, Debug)]
struct SystemLine {
    model: String,
    system: String,
    /// Kernel family of its prompt products (`workbench::machine::ceiling`'s names).
    prefill_kernel: String,
    /// That family's measured peak, multiply-adds/s (NaN when not measured on this CPU).
    kernel_peak_macs_per_s: f64,
    /// Peak / weight multiply-adds per token.
    prefill_bound_tok_s: f64,
    /// Median prefill tok/s on the RAG prompt.
    rag_prefill_tok_s: f64,
    load_s: f64,
    /// Of which ours' warm-up (packing the weights for the prompt kernels); NaN for llama.cpp.
    warm_up_s: f64,
    /// The RAG prompt's prefill right after the load, and its median over the rounds.
    first_rag_prefill_s: f64,
    median_rag_prefill_s: f64,
    peak_rss_bytes: u64,
    /// Of the process's resident memory at the end, the part that maps files (llama.cpp's
    /// memory-mapped GGUF pages; ours reads the file into its own memory).
    file_rss_bytes: u64,
    /// Whose peak: `bench_llm --probe` (ours), `llama-server`, `python + xllamacpp`.
    process: String,
}

/// What `--probe` prints: one load of ours in a fresh process.
#[derive(Serialize, serde::Deserialize, Debug)]
struct Probe {
    load_s: f64,
    warm_up_s: f64,
    first_rag_prefill_s: f64,
    second_rag_prefill_s: f64,
    peak_rss_bytes: u64,
    file_rss_bytes: u64,
    amx_tensors: usize,
    /// Decoding after the second read: single-token steps and their seconds (for profiling
    /// one system alone: `bench_llm --probe MODEL:PROMPTS.json`).
    #[serde(default)]
    second_decode_steps: usize,
    #[serde(default)]
    second_decode_s: f64,
    /// The ids the second read generated (to compare two builds' outputs).
    #[serde(default)]
    second_token_ids: Vec<u32>,
}

/// `--probe MODEL:PROMPTS.json`: load MODEL, read the RAG prompt of PROMPTS.json twice,
/// print a [`Probe`] line.
fn probe(spec: &str, args: &Args) -> Result<()> {
    let Some((key, prompts)) = spec.split_once(':') else {
        anyhow::bail!("--probe {spec}: expected MODEL:PROMPTS.json");
    };
    let ps: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(prompts).with_context(|| format!("--probe: reading {prompts}"))?,
    )?;
    let rag: Vec<u32> = ps
        .iter()
        .find(|p| p["name"] == "rag")
        .and_then(|p| serde_json::from_value(p["ids"].clone()).ok())
        .with_context(|| format!("--probe: {prompts} has no rag prompt ids"))?;
    let opts = LoadOptions {
        requantize: args.requantize,
        ..LoadOptions::default()
    };
    ensure!(
        workbench::machine::reset_peak_resident(),
        "--probe: this kernel does not let a process reset its peak resident memory (/proc/self/clear_refs)"
    );
    let mut llm = Llm::from_asset(key, &opts)?;
    let params = generate_params(args);
    let first = llm.generate_ids(&rag, &params)?;
    let second = llm.generate_ids(&rag, &params)?;
    let info = llm.info();
    let p = Probe {
        load_s: info.load_secs,
        warm_up_s: info.warm_up_secs,
        first_rag_prefill_s: first.prefill_secs,
        second_rag_prefill_s: second.prefill_secs,
        peak_rss_bytes: workbench::machine::peak_resident_bytes(None)
            .context("--probe: no VmHWM in /proc/self/status")?,
        file_rss_bytes: file_rss_bytes(None).context("--probe: no RssFile in /proc/self/status")?,
        amx_tensors: info.amx_tensors,
        second_decode_steps: second.decode_steps,
        second_decode_s: second.decode_secs,
        second_token_ids: second.token_ids.clone(),
    };
    println!("{}", serde_json::to_string(&p)?);
    Ok(())
}

/// The `RssFile` of `/proc/<pid>/status` (this process for `None`), bytes.
fn file_rss_bytes(pid: Option<u32>) -> Option<u64> {
    let path = pid.map_or("/proc/self/status".to_string(), |p| {
        format!("/proc/{p}/status")
    });
    let kib: u64 = std::fs::read_to_string(path)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("RssFile:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Run [`probe`] in a fresh process of this binary with the same threads and environment
/// (`--no-amx`'s switches included).
fn run_probe(key: &str, prompts: &Path, args: &Args) -> Result<Probe> {
    let exe = std::env::current_exe()?;
    let out = std::process::Command::new(&exe)
        .arg("--probe")
        .arg(format!("{key}:{}", prompts.display()))
        .args(["--threads", &args.threads.to_string()])
        .args(["--new-tokens", &args.new_tokens.to_string()])
        .args(["--prefill-batch", &args.prefill_batch.to_string()])
        .arg("--requantize")
        .arg(match args.requantize {
            Requantize::Auto => "auto",
            Requantize::Never => "never",
            Requantize::Always => "always",
        })
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {} --probe", exe.display()))?;
    ensure!(
        out.status.success(),
        "{} --probe {key} failed ({})",
        exe.display(),
        out.status
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).with_context(|| format!("--probe printed {last:?}"))
}

fn generate_params(args: &Args) -> GenerateParams {
    GenerateParams {
        max_new_tokens: args.new_tokens,
        sampling: Sampling::Greedy,
        stop_strings: Vec::new(),
        prefill_batch: args.prefill_batch,
    }
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
    if args.no_amx {
        // Read once, on first use, by the workbench's AMX kernel and candle's.
        std::env::set_var("WORKBENCH_LLM_NO_AMX", "1");
        std::env::set_var("CANDLE_NO_AMX", "1");
    }
    if let Some(spec) = &args.probe {
        return probe(spec, &args);
    }

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
    let name = if args.no_amx { NAME_NO_AMX } else { NAME };
    let BenchRun { exp, machine } = BenchRun::start(name, &config, SUMMARY_FILE)?;
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
    let kernels = measure_kernels(args.threads);
    let kernel_peak = |name: &str| {
        kernels
            .iter()
            .find(|k| k.kernel == name)
            .and_then(|k| k.macs_per_s)
            .unwrap_or(f64::NAN)
    };
    println!(
        "peak multiply-adds per second ({} threads): {}",
        args.threads,
        kernels
            .iter()
            .filter_map(|k| k
                .macs_per_s
                .map(|r| format!("{} {:.0} G", k.kernel, r / 1e9)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut servers: Vec<Server> = vec![Server {
        label: WHEEL.into(),
        short: "wheel".into(),
        bin: None,
        amx: false,
    }];
    for bin in &args.native_server {
        let sv = native_server(bin)?;
        ensure!(
            !servers.iter().any(|x| x.label == sv.label),
            "--native-server: two builds named `{}` (the variant of their build-info.json)",
            sv.label
        );
        if args.no_amx && sv.amx {
            println!("--no-amx: leaving out {} (built with AMX)", sv.label);
            continue;
        }
        servers.push(sv);
    }
    ensure!(
        !args.no_amx || servers.iter().any(|sv| sv.bin.is_some()),
        "--no-amx: no llama.cpp build without AMX among --native-server (scripts/python/build_llamacpp.py makes one on a CPU with AMX)"
    );
    // candle's own AMX-INT8 Q4_K kernel runs unless the process switched it off.
    let candle_amx = !workbench::kernels::cpu::switched_off("CANDLE_NO_AMX");
    let ours_label = if args.no_amx { OURS_NO_AMX } else { OURS };

    let opts = LoadOptions {
        requantize: args.requantize,
        ..LoadOptions::default()
    };
    let params = generate_params(&args);
    let mut runs: Vec<Run> = Vec::new();
    let mut lines: Vec<Line> = Vec::new();
    let mut system_lines: Vec<SystemLine> = Vec::new();
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
        // Ours, with the library's defaults (its AMX kernel where the CPU has AMX-BF16).
        let mut ours: Vec<(&str, Llm)> = vec![(ours_label, Llm::from_asset(key, &opts)?)];
        let info = ours[0].1.info();
        ensure!(
            !args.no_amx || info.amx_tensors == 0,
            "--no-amx: {} weight tensors still on AMX tiles",
            info.amx_tensors
        );
        let macs = info.layer_macs_per_token;
        println!(
            "\n{key}: {} ({} layers, {} MB file, {:.2} G weight multiply-adds per token), ours loaded in {:.1} s ({} tensors requantised, {} on AMX tiles)",
            info.architecture,
            info.n_layer,
            file_bytes / 1_000_000,
            macs as f64 / 1e9,
            info.load_secs,
            info.requantized_tensors,
            info.amx_tensors,
        );
        let ps = prompts(&ours[0].1, &assets, args.long_tokens)?;
        for (name, _, ids) in &ps {
            println!("  prompt {name}: {} tokens", ids.len());
        }
        let prompts_file = out.path(&format!("prompts.{key}.json"));
        std::fs::write(
            &prompts_file,
            serde_json::to_string_pretty(
                &ps.iter()
                    .map(|(n, t, ids)| serde_json::json!({"name": n, "text": t, "ids": ids}))
                    .collect::<Vec<_>>(),
            )?,
        )?;
        // Load, first prompt and peak memory of ours, in a fresh process.
        let mut probes: Vec<(&str, Probe)> = Vec::new();
        for (label, _) in &ours {
            let p = run_probe(key, &prompts_file, &args)?;
            println!(
                "  {label}, fresh process: load {:.2} s (warm-up {:.2} s), first RAG prefill {:.3} s, second {:.3} s, peak resident {:.0} MB",
                p.load_s,
                p.warm_up_s,
                p.first_rag_prefill_s,
                p.second_rag_prefill_s,
                p.peak_rss_bytes as f64 / 1e6
            );
            probes.push((label, p));
        }
        // Every llama.cpp peer on this model, with `slots` sequences decoded together.
        let start_peers = |slots: usize| -> Result<Vec<(String, Peer)>> {
            servers
                .iter()
                .map(|sv| {
                    let peer = Peer::start(
                        &peers,
                        &path,
                        args.threads,
                        &args.flash_attn,
                        sv.bin.as_deref(),
                        slots,
                    )?;
                    Ok((sv.label.clone(), peer))
                })
                .collect()
        };
        let mut llamas = start_peers(1)?;
        let mut peer_info = serde_json::Map::new();
        for (label, peer) in &llamas {
            let info = peer.ready["settings"]["system_info"].as_str().unwrap_or("");
            ensure!(
                !args.no_amx || !info.contains("AMX_INT8 = 1"),
                "--no-amx: {label} reports AMX_INT8 = 1 ({info})"
            );
            println!(
                "  {label}: {} · {} · ready in {:.2} s",
                peer.ready["xllamacpp_version"],
                peer.ready["settings"]["system_info"],
                peer.load_secs()
            );
            peer_info.insert(label.clone(), peer.ready.clone());
        }
        models_info.insert(
            key.clone(),
            serde_json::json!({
                "ours": info,
                "ours_probes": probes.iter().map(|(l, p)| serde_json::json!({"system": l, "probe": p})).collect::<Vec<_>>(),
                "llama_cpp": peer_info,
                "file_bytes": file_bytes,
                "weight_macs_per_token": macs
            }),
        );
        // Warm-up, untimed: pages the weights in and sizes the caches on every side. The
        // peers' first RAG prefill after their load is kept for the systems table.
        let mut peer_first_rag: Vec<f64> = vec![f64::NAN; llamas.len()];
        for (pname, _, ids) in &ps {
            for (label, llm) in ours.iter_mut() {
                run_ours(llm, label, ids, &params)?;
            }
            for (k, (label, peer)) in llamas.iter_mut().enumerate() {
                let (r, _) = run_llama(peer, label, ids, args.new_tokens)?;
                if pname == "rag" {
                    peer_first_rag[k] = r.prefill_s;
                }
            }
        }
        let n_ours = ours.len();
        let n_sys = n_ours + llamas.len();
        // agree[prompt][k]: leading tokens of system 1 + k equal to ours in the first timed round.
        let mut agree: Vec<Vec<usize>> = vec![vec![0; n_sys - 1]; ps.len()];
        for round in 0..args.rounds {
            for (pi, (pname, _, ids)) in ps.iter().enumerate() {
                // Systems 0.. are ours, then the peers; the order rotates from round to round.
                let mut tokens: Vec<Vec<u32>> = vec![Vec::new(); n_sys];
                for slot in 0..n_sys {
                    let sys = (slot + round) % n_sys;
                    let (mut r, toks) = if sys < n_ours {
                        let (label, llm) = &mut ours[sys];
                        run_ours(llm, label, ids, &params)?
                    } else {
                        let (label, peer) = &mut llamas[sys - n_ours];
                        run_llama(peer, label, ids, args.new_tokens)?
                    };
                    r.model = key.clone();
                    r.prompt = pname.clone();
                    r.round = round;
                    r.order = slot;
                    runs.push(r);
                    tokens[sys] = toks;
                }
                if round == 0 {
                    for (k, toks) in tokens.iter().enumerate().skip(1) {
                        agree[pi][k - 1] = tokens[0]
                            .iter()
                            .zip(toks)
                            .take_while(|(x, y)| x == y)
                            .count();
                    }
                }
            }
            println!("  round {} done (load {})", round + 1, load_average());
        }
        let mut peer_memory: Vec<(u64, u64, String)> = Vec::new();
        for (_, mut peer) in llamas.drain(..) {
            peer_memory.push(peer.peak_rss()?);
            peer.stop()?;
        }
        // The systems table: kernel, ceiling, load, first prompt, memory.
        let rag_median_s = |system: &str| {
            let v: Vec<f64> = runs
                .iter()
                .filter(|r| r.model == *key && r.prompt == "rag" && r.system == system)
                .map(|r| r.prefill_s)
                .collect();
            median(&v)
        };
        let rag_tok_s = |system: &str| medians(&runs, key, "rag", system).0;
        for (label, p) in &probes {
            // Our AMX kernel takes every weight type it handles before candle sees it.
            let kernel = if p.amx_tensors > 0 {
                "amx-bf16"
            } else {
                candle_prefill_kernel(&machine.features, candle_amx)
            };
            let peak = kernel_peak(kernel);
            system_lines.push(SystemLine {
                model: key.clone(),
                system: label.to_string(),
                prefill_kernel: kernel.into(),
                kernel_peak_macs_per_s: peak,
                prefill_bound_tok_s: peak / macs as f64,
                rag_prefill_tok_s: rag_tok_s(label),
                load_s: p.load_s,
                warm_up_s: p.warm_up_s,
                first_rag_prefill_s: p.first_rag_prefill_s,
                median_rag_prefill_s: rag_median_s(label),
                peak_rss_bytes: p.peak_rss_bytes,
                file_rss_bytes: p.file_rss_bytes,
                process: "bench_llm --probe".into(),
            });
        }
        for (k, sv) in servers.iter().enumerate() {
            let ready = &peer_info[&sv.label];
            let kernel =
                llama_prefill_kernel(ready["settings"]["system_info"].as_str().unwrap_or(""));
            let peak = kernel_peak(kernel);
            system_lines.push(SystemLine {
                model: key.clone(),
                system: sv.label.clone(),
                prefill_kernel: kernel.into(),
                kernel_peak_macs_per_s: peak,
                prefill_bound_tok_s: peak / macs as f64,
                rag_prefill_tok_s: rag_tok_s(&sv.label),
                load_s: ready["load_s"].as_f64().unwrap_or(f64::NAN),
                warm_up_s: f64::NAN,
                first_rag_prefill_s: peer_first_rag[k],
                median_rag_prefill_s: rag_median_s(&sv.label),
                peak_rss_bytes: peer_memory[k].0,
                file_rss_bytes: peer_memory[k].1,
                process: peer_memory[k].2.clone(),
            });
        }
        if args.question_set > 0 {
            let llm = &mut ours[0].1;
            let set = question_set(llm, &assets, args.long_tokens, args.question_set)?;
            // The peers again, with a slot per question of a batch.
            llamas = start_peers(args.batch)?;
            // Warm-up (untimed): one question and one batch on each side.
            let first = &set[..args.batch.min(set.len())];
            run_ours(llm, ours_label, &set[0], &params)?;
            let refs: Vec<&[u32]> = first.iter().map(|p| p.as_slice()).collect();
            llm.generate_batch(&refs, &params)?;
            for (label, peer) in llamas.iter_mut() {
                run_llama(peer, label, &set[0], args.new_tokens)?;
                peer.generate_batch(first, args.new_tokens)?;
            }
            set_lines.extend(measure_set(
                llm,
                ours_label,
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
        let others: Vec<(String, String)> = servers
            .iter()
            .map(|sv| (sv.label.clone(), format!("llama.cpp {}", sv.short)))
            .collect();
        drop(ours);
        for (pi, (pname, _, ids)) in ps.iter().enumerate() {
            let (op, od, og) = medians(&runs, key, pname, ours_label);
            let peer_lines: Vec<PeerLine> = others
                .iter()
                .enumerate()
                .map(|(k, (label, short))| {
                    let (p, d, g) = medians(&runs, key, pname, label);
                    PeerLine {
                        system: label.clone(),
                        short: short.clone(),
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
                    .map(|l| (l.short.clone(), f(l)))
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
                best_prefill_tok_s: bp,
                best_decode_tok_s: bd,
                file_bytes,
                decode_bound_tok_s: bw.read_bytes_per_s / file_bytes as f64,
                weight_macs_per_token: macs,
            });
        }
    }
    let up_end = load_average();
    println!("\nload at the end: {up_end}");

    // Columns per llama.cpp peer, in the order they ran (the same for every model).
    let names: Vec<String> = servers
        .iter()
        .map(|sv| format!("llama.cpp {}", sv.short))
        .collect();
    let mut header: Vec<String> = vec![
        "model".into(),
        "prompt".into(),
        "prompt tokens".into(),
        format!("generated (ours / {})", names.join(" / ")),
        format!("greedy tokens agreeing with ours ({})", names.join(" / ")),
        "prefill tok/s ours".into(),
    ];
    header.extend(names.iter().map(|n| format!("prefill tok/s {n}")));
    header.extend([
        "prefill tok/s fastest llama.cpp".into(),
        "prefill ratio (vs fastest llama.cpp)".into(),
        "decode tok/s ours".into(),
    ]);
    header.extend(names.iter().map(|n| format!("decode tok/s {n}")));
    header.extend([
        "decode tok/s fastest llama.cpp".into(),
        "decode ratio (vs fastest llama.cpp)".into(),
        "decode bound (read bw / file)".into(),
    ]);
    let mut t = Table::new(header).caption(format!(
        "{name}: {}{} threads, median of {} interleaved rounds, greedy, ≤ {} new tokens; read bandwidth {:.2} GB/s; load {} → {}. Each ratio divides ours by the fastest llama.cpp build on that cell (named in brackets); the prompt kernels and their ceilings are in the table of systems",
        if args.no_amx {
            "AMX kept out (ours with its AMX kernel and candle's switched off, llama.cpp builds without AMX), "
        } else {
            ""
        },
        args.threads,
        args.rounds,
        args.new_tokens,
        bw.read_bytes_per_s / 1e9,
        up_start,
        up_end
    ));
    let short_of = |name: &str| name.trim_start_matches("llama.cpp ").to_string();
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
            format!("{:.1}", l.best_prefill_tok_s),
            format!(
                "{:.2}× ({})",
                l.prefill_ratio,
                short_of(&l.best_prefill_peer)
            ),
            format!("{:.1}", l.ours_decode_tok_s),
        ]);
        row.extend(l.peers.iter().map(|p| format!("{:.1}", p.decode_tok_s)));
        row.extend([
            format!("{:.1}", l.best_decode_tok_s),
            format!("{:.2}× ({})", l.decode_ratio, short_of(&l.best_decode_peer)),
            format!("{:.1}", l.decode_bound_tok_s),
        ]);
        t.push(row)?;
    }
    let mut md = format!("{}\n{}", machine.summary(), t.to_markdown());

    let mut syst = Table::new([
        "model",
        "system",
        "prompt kernel",
        "kernel peak (G multiply-adds/s)",
        "prefill bound (tok/s)",
        "RAG prefill tok/s (median)",
        "of the bound",
        "load (s)",
        "of which warm-up (s)",
        "first RAG prefill (s)",
        "median RAG prefill (s)",
        "peak resident memory (MB)",
        "of it mapping files at the end (MB)",
        "process measured",
    ])
    .caption(format!(
        "Systems: the widest kernel family each system's prompt products may run on (ours: AMX-BF16 tiles where its AMX kernel took the weights, else candle's kernels as its x86 level picks them; llama.cpp: read from its build's system_info; weight types or shapes a kernel does not take run on a narrower one), that family's peak measured on this CPU with {} threads over the layers' weight multiply-adds per token (an upper bound), the load (ours: in a fresh process, with the warm-up that packs the weights; llama.cpp: the server's start to ready, with its weight repacking), the RAG prompt's prefill right after the load against its median over the rounds, and the peak resident memory of the process holding the model, with the part of its resident memory that maps files at the end (llama.cpp maps the GGUF; ours reads it into its own memory)",
        args.threads
    ));
    let f = |x: f64, d: usize| {
        if x.is_finite() {
            format!("{x:.d$}")
        } else {
            "–".into()
        }
    };
    for s in &system_lines {
        syst.push([
            s.model.clone(),
            s.system.clone(),
            s.prefill_kernel.clone(),
            f(s.kernel_peak_macs_per_s / 1e9, 0),
            f(s.prefill_bound_tok_s, 0),
            f(s.rag_prefill_tok_s, 1),
            format!(
                "{}%",
                f(100.0 * s.rag_prefill_tok_s / s.prefill_bound_tok_s, 1)
            ),
            f(s.load_s, 2),
            f(s.warm_up_s, 2),
            f(s.first_rag_prefill_s, 3),
            f(s.median_rag_prefill_s, 3),
            format!("{:.0}", s.peak_rss_bytes as f64 / 1e6),
            format!("{:.0}", s.file_rss_bytes as f64 / 1e6),
            s.process.clone(),
        ])?;
    }
    md.push_str(&format!("\n\n{}", syst.to_markdown()));
    syst.write_csv(&out.path("systems.csv"))?;
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
                .find(|b| b.model == l.model && b.system == ours_label && !b.batched)
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
        "systems": system_lines,
        "question_set": set_lines,
        "bandwidth": bw,
        "kernel_peaks": kernels,
        "load_start": up_start,
        "load_end": up_end,
        "models": models_info,
    }))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel family read from what the builds print: the wheel's `system_info` line,
    /// and the instruction sets `bench_llamacpp.py` lists for a native build.
    #[test]
    fn prompt_kernels_follow_the_build() {
        let wheel = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |";
        assert_eq!(llama_prefill_kernel(wheel), "avx2");
        let no_amx = "build native-without-amx: OPENMP AVX AVX2 FMA F16C BMI2 AVX_VNNI AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16";
        assert_eq!(llama_prefill_kernel(no_amx), "avx512-vnni");
        let amx = "build native: AVX AVX2 FMA F16C BMI2 AVX_VNNI AVX512 AVX512_VNNI AVX512_BF16 AMX_TILE AMX_INT8 AMX_BF16";
        assert_eq!(llama_prefill_kernel(amx), "amx-int8");
        assert_eq!(
            llama_prefill_kernel("CPU : AVX2 = 1 | AVX512_VNNI = 0 | AMX_INT8 = 0 |"),
            "avx2"
        );
        assert_eq!(
            llama_prefill_kernel("CPU : AVX_VNNI = 1 | AVX2 = 1 |"),
            "avx-vnni"
        );
        assert_eq!(llama_prefill_kernel(""), "unknown");
        let runtime = "build native: n_threads = 2 (n_threads_batch = 2) / 2 | CPU : SSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | AVX512 = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | REPACK = 1 |";
        assert_eq!(llama_prefill_kernel(runtime), "amx-int8");
        assert_eq!(
            llama_prefill_kernel(&runtime.replace("AMX_INT8 = 1", "AMX_INT8 = 0")),
            "avx512-vnni"
        );
        // candle's x86 level: AVX-512 F + VNNI, then AVX-VNNI, then AVX2; AMX-INT8 for its
        // Q4_K prompts unless switched off.
        let f = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let xeon = f(&[
            "avx2",
            "avx512f",
            "avx512bw",
            "avx512_vnni",
            "avx_vnni",
            "amx_int8",
        ]);
        assert_eq!(candle_prefill_kernel(&xeon, true), "amx-int8");
        assert_eq!(candle_prefill_kernel(&xeon, false), "avx512-vnni");
        assert_eq!(
            candle_prefill_kernel(&f(&["avx2", "avx512f", "avx512_vnni"]), true),
            "avx512-vnni"
        );
        assert_eq!(
            candle_prefill_kernel(&f(&["avx2", "avx512_vnni", "avx_vnni"]), false),
            "avx-vnni"
        );
        assert_eq!(
            candle_prefill_kernel(&f(&["avx2", "avx512f"]), false),
            "avx2"
        );
        assert_eq!(candle_prefill_kernel(&f(&[]), false), "unknown");
    }
}
