//! Benchmark: prefill and decode tokens/s of our GGUF reader and of llama.cpp (the
//! `xllamacpp` wheel) on a machine shared with other work: with no busy process added, then beside 1, 2, …
//! busy-looping processes started by this program, in one run.
//!
//! ```text
//! cargo run --release --bin bench_llm_shared [-- --models smollm2-135m-instruct-gguf \
//!     --busy 0,1,2 --rounds 3 --threads 2]
//! ```
//!
//! Each model: both systems load and run the RAG prompt once untimed; then `--rounds`
//! rounds, each of which goes through the `--busy` levels (their order rotating from round
//! to round): start that many busy-looping processes (this program run with `--spin`, one
//! thread each, a plain integer loop), wait one second, run the prompt on each system (their
//! order rotating too), stop the busy processes. The prompt is a RAG prompt of about
//! `--long-tokens` tokens built with the generative reader's default template from
//! RAG-Mini-Wikipedia passages (those of question q4's article, from the first one holding
//! the answer on), greedy, at most `--new-tokens` tokens, the same ids on both sides.
//! Threads: `--threads` on both sides (candle's pools through CANDLE_NUM_THREADS /
//! RAYON_NUM_THREADS, llama.cpp's n_threads and n_threads_batch).
//!
//! Reported per model, busy level and system: the median over rounds of prefill tokens/s
//! and decode tokens/s (as `bench_llm` counts them: ours from [`Generation`]'s timers,
//! llama.cpp from its server's), their lowest and highest, the share kept of the rate with no busy process added,
//! and the CPU the system used per second of its generation (user + system CPU time of its
//! process over the generation's wall time; 2.00 = both cores busy the whole time). The
//! 1-minute load average is recorded with every generation.
//!
//! Needs the peers venv (`bash scripts/bench` makes it). Writes
//! `data/results/bench_llm_shared/`: `config.json`, `rounds.csv` (every timed generation),
//! `bench.md` / `bench.csv` (the table), `summary.json`.

#[path = "../common/llama_peer.rs"]
mod llama_peer;

use anyhow::{ensure, Context, Result};
use clap::Parser;
use llama_peer::{Peer, PEER};
use serde::Serialize;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use workbench::assets::Assets;
use workbench::bench::{median, process_cpu_seconds, BenchRun, PythonPeers};
use workbench::display::Table;
use workbench::machine::{load_average, load_average_1min};
use workbench::read::generative::{
    GenerateParams, GenerativeReader, Llm, LoadOptions, ReaderOptions, Sampling, SharedLlm,
};
use workbench::read::Context as Passage;

const NAME: &str = "bench_llm_shared";
const SUMMARY_FILE: &str = "bench.md";
const PASSAGES: &str = "rag-mini-wikipedia";
/// q4 "When did Lincoln begin his political career?", as in `bench_llm`.
const QUESTION_ROW: usize = 4;
const OURS: &str = "workbench (candle)";
const WHEEL: &str = "llama.cpp (xllamacpp wheel)";

#[derive(Parser, Serialize, Debug)]
#[command(
    about = "GGUF reader and llama.cpp prefill/decode tokens/s, with and without busy-looping processes added, in one run"
)]
struct Args {
    /// Models (asset names), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [
        "smollm2-135m-instruct-gguf".to_string(),
        "qwen2.5-coder-0.5b-instruct-gguf".to_string(),
    ])]
    models: Vec<String>,
    /// Threads on both sides.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Busy-looping processes beside the measurement, one level per entry.
    #[arg(long, value_delimiter = ',', default_values_t = [0usize, 1, 2])]
    busy: Vec<usize>,
    /// Timed rounds (each runs every busy level on both systems).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Target length of the RAG prompt, tokens.
    #[arg(long, default_value_t = 550)]
    long_tokens: usize,
    /// Generated tokens at most (greedy).
    #[arg(long, default_value_t = 32)]
    new_tokens: usize,
    /// Python of the peers venv (default: `$PEERS_VENV/bin/python`).
    #[arg(long, env = "PEERS_PYTHON")]
    #[serde(skip)]
    python: Option<PathBuf>,
    /// Run as one busy-looping process (used by the benchmark itself).
    #[arg(long, hide = true)]
    #[serde(skip)]
    spin: bool,
    /// Accepted for symmetry with the experiments; benchmarks always re-run.
    #[arg(long)]
    #[serde(skip)]
    force: bool,
}

#[derive(Serialize)]
struct Config<'a> {
    args: &'a Args,
    inputs: Vec<(String, String)>,
    program_sha256: String,
}

/// Busy-looping child processes, stopped when dropped.
struct Busy(Vec<Child>);

impl Busy {
    fn start(n: usize) -> Result<Busy> {
        let exe = std::env::current_exe()?;
        let mut kids = Busy(Vec::new());
        for _ in 0..n {
            kids.0.push(
                Command::new(&exe)
                    .arg("--spin")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .spawn()
                    .context("starting a busy-looping process")?,
            );
        }
        Ok(kids)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// User + system CPU seconds of process `pid` (from `/proc/PID/stat`, 1/100 s ticks).
fn pid_cpu_seconds(pid: u32) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return f64::NAN;
    };
    // Fields after the command name (which may hold spaces) end at the last ')'.
    let Some(rest) = s.rsplit_once(')').map(|(_, r)| r) else {
        return f64::NAN;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime and stime are fields 14 and 15.
    let tick = |i: usize| f.get(i - 3).and_then(|v| v.parse::<f64>().ok());
    match (tick(14), tick(15)) {
        (Some(u), Some(s)) => (u + s) / 100.0,
        _ => f64::NAN,
    }
}

/// One timed generation.
#[derive(Serialize, Clone, Debug)]
struct Run {
    model: String,
    busy: usize,
    round: usize,
    system: String,
    prompt_tokens: usize,
    generated_tokens: usize,
    prefill_tok_s: f64,
    decode_tok_s: f64,
    wall_s: f64,
    /// CPU seconds of the system's process per second of wall time.
    cpu_per_s: f64,
    load_1min: f64,
}

/// The RAG prompt's token ids: the reader's default template over the passages of q4's
/// article from the first one holding the answer, as many as keep it within `long_tokens`.
fn prompt_ids(llm: &SharedLlm, assets: &Assets, long_tokens: usize) -> Result<Vec<u32>> {
    let passages = assets.resolve(PASSAGES, "infos.csv")?;
    let questions = assets.resolve(PASSAGES, "questions.csv")?;
    let (docs, qas) = workbench::load::rag_mini::load_csv(&passages, &questions)?;
    let qa = qas
        .get(QUESTION_ROW)
        .with_context(|| format!("{PASSAGES}: no question row {QUESTION_ROW}"))?;
    let answer = qa.answers.first().context("q4 has no answer")?;
    let first = docs
        .iter()
        .position(|d| d.text.contains(answer.as_str()))
        .context("no passage holds q4's answer")?;
    let reader = GenerativeReader::with_shared(llm.clone(), ReaderOptions::default())?;
    let ctx = |n: usize| -> Vec<Passage> {
        docs[first..first + n]
            .iter()
            .enumerate()
            .map(|(i, d)| Passage::new(format!("p{}", i + 1), d.text.trim().to_string()))
            .collect()
    };
    let mut n = 1;
    while first + n < docs.len()
        && reader.build_prompt(&qa.question, &ctx(n + 1))?.ids.len() <= long_tokens
    {
        n += 1;
    }
    Ok(reader.build_prompt(&qa.question, &ctx(n))?.ids)
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.spin {
        // Busy until the benchmark stops it, or ends without doing so (this process is
        // then handed to another parent).
        let parent = std::os::unix::process::parent_id();
        let mut x = 0u64;
        while std::os::unix::process::parent_id() == parent {
            for _ in 0..10_000_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        return Ok(());
    }
    ensure!(
        args.rounds > 0 && args.threads > 0 && args.new_tokens > 1 && !args.busy.is_empty(),
        "--rounds, --threads must be at least 1, --new-tokens at least 2, --busy non-empty"
    );
    std::env::set_var("RAYON_NUM_THREADS", args.threads.to_string());
    std::env::set_var("CANDLE_NUM_THREADS", args.threads.to_string());
    std::env::set_var("WORKBENCH_PROGRESS", "0");
    let root = workbench::paths::project_root()?;
    let peers = PythonPeers::new(&root, args.python.clone());
    peers.command(PEER)?;
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
    println!("{}", machine.summary());
    let params = GenerateParams {
        max_new_tokens: args.new_tokens,
        sampling: Sampling::Greedy,
        stop_strings: Vec::new(),
        prefill_batch: GenerateParams::default().prefill_batch,
    };
    let mut runs: Vec<Run> = Vec::new();
    for key in &args.models {
        let spec = assets.spec(key)?;
        let file = spec
            .files
            .keys()
            .find(|f| f.ends_with(".gguf"))
            .with_context(|| format!("asset {key} has no .gguf file"))?
            .clone();
        let path = assets.resolve(key, &file)?;
        let shared = SharedLlm::new(Llm::from_asset(key, &LoadOptions::default())?);
        let ids = prompt_ids(&shared, &assets, args.long_tokens)?;
        let mut llm = shared.lock()?;
        let mut peer = Peer::start(&peers, &path, args.threads, "auto", None, 1)?;
        println!("\n{key}: prompt {} tokens", ids.len());
        llm.generate_ids(&ids, &params)?;
        peer.generate(&ids, args.new_tokens)?;
        let levels = args.busy.len();
        for round in 0..args.rounds {
            for li in 0..levels {
                let busy = args.busy[(li + round) % levels];
                let guard = Busy::start(busy)?;
                std::thread::sleep(Duration::from_secs(1));
                for slot in 0..2 {
                    let ours = (slot + round) % 2 == 0;
                    let load = load_average_1min();
                    let r = if ours {
                        let (c0, t) = (process_cpu_seconds(), Instant::now());
                        let g = llm.generate_ids(&ids, &params)?;
                        let wall = t.elapsed().as_secs_f64();
                        Run {
                            model: key.clone(),
                            busy,
                            round,
                            system: OURS.into(),
                            prompt_tokens: g.prompt_tokens,
                            generated_tokens: g.generated_tokens,
                            prefill_tok_s: g.prefill_tokens_per_sec(),
                            decode_tok_s: if g.decode_steps > 0 {
                                g.decode_tokens_per_sec()
                            } else {
                                f64::NAN
                            },
                            wall_s: wall,
                            cpu_per_s: (process_cpu_seconds() - c0) / wall,
                            load_1min: load,
                        }
                    } else {
                        let pid = peer.pid();
                        let (c0, t) = (pid_cpu_seconds(pid), Instant::now());
                        let g = peer.generate(&ids, args.new_tokens)?;
                        let wall = t.elapsed().as_secs_f64();
                        let steps = g.predicted_n.saturating_sub(1);
                        Run {
                            model: key.clone(),
                            busy,
                            round,
                            system: WHEEL.into(),
                            prompt_tokens: g.prompt_n,
                            generated_tokens: g.predicted_n,
                            prefill_tok_s: g.prompt_n as f64 / (g.prompt_ms / 1e3),
                            decode_tok_s: if steps > 0 {
                                steps as f64 / (g.predicted_ms / 1e3)
                            } else {
                                f64::NAN
                            },
                            wall_s: wall,
                            cpu_per_s: (pid_cpu_seconds(pid) - c0) / wall,
                            load_1min: load,
                        }
                    };
                    println!(
                        "  round {} busy {busy} {:<28} prefill {:8.1} tok/s  decode {:6.1} tok/s  cpu {:.2}/s  load {:.2}",
                        round + 1,
                        r.system,
                        r.prefill_tok_s,
                        r.decode_tok_s,
                        r.cpu_per_s,
                        r.load_1min
                    );
                    runs.push(r);
                }
                drop(guard);
            }
        }
        drop(llm);
        peer.stop()?;
    }
    let load_end = load_average();
    let mut t = Table::new([
        "model",
        "busy processes",
        "system",
        "prefill tok/s (median)",
        "prefill lowest–highest",
        "prefill vs no busy process",
        "decode tok/s (median)",
        "decode lowest–highest",
        "decode vs no busy process",
        "CPU per second (median)",
        "1-min load (median)",
    ])
    .caption(format!(
        "bench_llm_shared: {} threads each side, RAG prompt, greedy, ≤ {} new tokens, median of {} rounds with the busy levels and the systems in rotating order; load {} → {}",
        args.threads, args.new_tokens, args.rounds, machine.load_before, load_end
    ));
    let finite = |v: Vec<f64>| -> Vec<f64> { v.into_iter().filter(|x| x.is_finite()).collect() };
    let stats = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (median(v), lo, hi)
    };
    for key in &args.models {
        for sys in [OURS, WHEEL] {
            let sel = |busy: usize| -> Vec<&Run> {
                runs.iter()
                    .filter(|r| &r.model == key && r.system == sys && r.busy == busy)
                    .collect()
            };
            let idle_p = median(&finite(sel(0).iter().map(|r| r.prefill_tok_s).collect()));
            let idle_d = median(&finite(sel(0).iter().map(|r| r.decode_tok_s).collect()));
            let mut levels = args.busy.clone();
            levels.sort_unstable();
            levels.dedup();
            for busy in levels {
                let rs = sel(busy);
                let (p, plo, phi) = stats(&finite(rs.iter().map(|r| r.prefill_tok_s).collect()));
                let (d, dlo, dhi) = stats(&finite(rs.iter().map(|r| r.decode_tok_s).collect()));
                let cpu = median(&finite(rs.iter().map(|r| r.cpu_per_s).collect()));
                let load = median(&rs.iter().map(|r| r.load_1min).collect::<Vec<_>>());
                t.push([
                    key.clone(),
                    busy.to_string(),
                    sys.to_string(),
                    format!("{p:.1}"),
                    format!("{plo:.1}–{phi:.1}"),
                    format!("{:.2}", p / idle_p),
                    format!("{d:.1}"),
                    format!("{dlo:.1}–{dhi:.1}"),
                    format!("{:.2}", d / idle_d),
                    format!("{cpu:.2}"),
                    format!("{load:.2}"),
                ])?;
            }
        }
    }
    let md = format!("{}\n{}", machine.summary(), t.to_markdown());
    println!("\n{md}");
    std::fs::write(out.path(SUMMARY_FILE), &md)?;
    t.write_csv(&out.path("bench.csv"))?;
    let mut rt = Table::new([
        "model",
        "busy",
        "round",
        "system",
        "prompt_tokens",
        "generated_tokens",
        "prefill_tok_s",
        "decode_tok_s",
        "wall_s",
        "cpu_per_s",
        "load_1min",
    ]);
    for r in &runs {
        rt.push([
            r.model.clone(),
            r.busy.to_string(),
            r.round.to_string(),
            r.system.clone(),
            r.prompt_tokens.to_string(),
            r.generated_tokens.to_string(),
            format!("{:.3}", r.prefill_tok_s),
            format!("{:.3}", r.decode_tok_s),
            format!("{:.4}", r.wall_s),
            format!("{:.3}", r.cpu_per_s),
            format!("{:.2}", r.load_1min),
        ])?;
    }
    rt.write_csv(&out.path("rounds.csv"))?;
    exp.finish(serde_json::json!({ "runs": runs, "load_end": load_end }))?;
    Ok(())
}
