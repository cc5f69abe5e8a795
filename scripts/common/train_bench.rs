//! Training throughput against PyTorch on the same batches, shared by `train_reader --bench`
//! and `train_reranker --bench`. A binary includes it with
//! `#[path = "../common/train_bench.rs"] mod train_bench;`.
//!
//! The binary writes the examples (JSONL), the first `warmup + timed` batches of epoch 0
//! and their learning rates (JSON), and candle's initial model in Hugging Face layout into
//! the result folder; [`rounds`] then runs candle and two PyTorch peers
//! (`scripts/python/train_torch_peer.py`, float32 and bf16 autocast) `rounds` times, in an
//! order that turns round by round, checks that every side did the same updates with the
//! same arithmetic, and writes `bench.md`, `bench.csv`, `ratios.csv` and `bench.json`.
//!
//! Timing: on every side and in every round the first `warmup` updates run untimed; the
//! next `timed` ones are timed one by one, from the collation of the batch to reading the
//! loss back. Model loading, the optimizer's construction and a peer's process start-up
//! are outside every timing.
//!
//! Ratios are candle's examples per second over a peer's. Per peer: the ratio of each
//! round, their median, their range, the ratio of the two sides' median rates and the
//! ratio of their fastest rounds (best against best). The reading counts the rounds in
//! which each side was faster.

use anyhow::{bail, ensure, Context, Result};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use workbench::bench::{median, PythonPeers};
use workbench::display::Table;
use workbench::machine::load_average;
use workbench::train::{batching, LinearSchedule, TrainConfig, TrainLog};

/// `--bench`, `--warmup`, `--rounds`, `--python`: flattened into the binary's clap `Args`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchFlags {
    /// Benchmark instead: time this many updates (`--bench` alone: 32) of candle and of the
    /// PyTorch peers (float32 and bf16 autocast) on the same batches (no training run;
    /// results in `data/results/bench-train-*`).
    #[arg(long, num_args = 0..=1, default_missing_value = "32")]
    pub bench: Option<usize>,
    /// Untimed updates before the timed ones, on every side in every round (the first
    /// batches of epoch 0; the timed updates take the batches after them).
    #[arg(long, default_value_t = 4)]
    pub warmup: usize,
    /// Rounds of the benchmark; the order of the three systems rotates from round to round
    /// (see `round_order`), so that 3 or 6 rounds put every system in every position equally.
    #[arg(long, default_value_t = 6)]
    pub rounds: usize,
    /// Python of the peers venv (default: `$PEERS_PYTHON`, else `$PEERS_VENV/bin/python`,
    /// see `PythonPeers::default_python`).
    #[arg(long, env = "WORKBENCH_PEERS_PYTHON")]
    pub python: Option<PathBuf>,
}

/// A benchmark run's sizes and peers.
pub struct Plan {
    /// Timed updates per side and round.
    pub timed: usize,
    /// Untimed updates before them.
    pub warmup: usize,
    /// Rounds.
    pub rounds: usize,
    /// The PyTorch peers' Python.
    pub peers: PythonPeers,
}

impl BenchFlags {
    /// The plan of a benchmark run, checked before any work (a missing peers venv is an
    /// error naming it); `None` without `--bench`.
    pub fn plan(&self, root: &Path) -> Result<Option<Plan>> {
        let Some(timed) = self.bench else {
            return Ok(None);
        };
        ensure!(timed >= 1, "--bench {timed}: at least one timed update");
        ensure!(
            self.rounds >= 1,
            "--rounds {}: at least one round",
            self.rounds
        );
        let peers = PythonPeers::new(root, self.python.clone());
        peers.command(PEER)?;
        Ok(Some(Plan {
            timed,
            warmup: self.warmup,
            rounds: self.rounds,
            peers,
        }))
    }
}

/// The PyTorch peer: the reader's and the cross-encoder's training loops.
pub const PEER: &str = "train_torch_peer.py";

/// The peers, in the order the first round runs them, before candle.
const PRECISIONS: [&str; 2] = ["f32", "bf16-autocast"];

/// A system of the benchmark: candle or a PyTorch peer of one precision.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum System {
    Candle,
    Torch(&'static str),
}

impl System {
    fn label(self) -> String {
        match self {
            System::Candle => "candle f32 (workbench)".into(),
            System::Torch(p) => format!("PyTorch {}", p.replace('-', " ")),
        }
    }
}

/// The updates both sides run: batches of epoch 0 and their learning rates.
pub struct Inputs {
    /// The first `warmup + timed` batches of epoch 0 (indices of the training items).
    pub batches: Vec<Vec<usize>>,
    /// `batches.json` in the result folder.
    pub batches_path: PathBuf,
    /// The learning rate of each of those updates (the training run's schedule).
    pub lrs: Vec<f64>,
    /// `lrs.json` in the result folder.
    pub lrs_path: PathBuf,
}

/// The first `warmup + timed` batches of epoch 0, length-grouped as training groups them
/// (items of `lengths`), and the learning rate the training loop gives each update
/// (linear warm-up and decay over the whole run of `train`), written to `dir/batches.json`
/// and `dir/lrs.json`.
pub fn inputs(dir: &Path, lengths: &[usize], train: &TrainConfig, plan: &Plan) -> Result<Inputs> {
    let n = plan.warmup + plan.timed;
    let mut batches = batching::length_grouped_batches(
        lengths,
        train.batch_size,
        train.bucket_batches,
        train.seed,
        0,
    )?;
    let per_epoch =
        batching::batches_per_epoch(lengths.len(), train.batch_size, train.bucket_batches);
    ensure!(
        batches.len() == per_epoch,
        "{} batches in epoch 0 where the loop counts {per_epoch}",
        batches.len()
    );
    if batches.len() < n {
        bail!(
            "only {} batches in an epoch, fewer than --warmup {} + --bench {}",
            batches.len(),
            plan.warmup,
            plan.timed
        );
    }
    batches.truncate(n);
    let schedule =
        LinearSchedule::with_warmup_ratio(train.lr, train.warmup_ratio, per_epoch * train.epochs);
    let lrs: Vec<f64> = (0..n).map(|s| schedule.lr(s)).collect();
    let batches_path = dir.join("batches.json");
    std::fs::write(&batches_path, serde_json::to_vec(&batches)?)?;
    let lrs_path = dir.join("lrs.json");
    std::fs::write(&lrs_path, serde_json::to_vec(&lrs)?)?;
    Ok(Inputs {
        batches,
        batches_path,
        lrs,
        lrs_path,
    })
}

/// One comparison.
pub struct TrainBench {
    /// What is counted per second ("features", "pairs").
    pub unit: &'static str,
    /// Examples (of `unit`) per training item of a batch (1 for features; the group size
    /// for groups of pairs).
    pub per_item: usize,
    /// Untimed updates, then timed ones, per side and round; rounds.
    pub warmup: usize,
    /// Timed updates.
    pub timed: usize,
    /// Rounds.
    pub rounds: usize,
    /// Rows (examples of `unit`) of every update, warm-up included.
    pub rows: Vec<usize>,
    /// Padded length (tokens) of every update, warm-up included.
    pub padded: Vec<usize>,
    /// The learning rate of every update, warm-up included.
    pub lrs: Vec<f64>,
    /// Threads of both sides.
    pub threads: usize,
    /// Trained parameters (elements of every variable) of candle's model.
    pub parameters: usize,
    /// The peer's arguments (the examples, the batches, the model, the task…), without the
    /// precision and the warm-up.
    pub peer_args: Vec<OsString>,
    /// What the batches are, for the sentence under the table.
    pub batches: String,
    /// Multiply-adds of the encoder's matrix products in the timed updates (forward and
    /// backward), see [`encoder_macs`]: with the measured f32 peak, the ceiling.
    pub macs: f64,
    /// The shape a feed-forward product is timed alone at on both sides ([`ffn_product`]).
    pub product: (usize, usize, usize),
}

impl TrainBench {
    /// Examples (of `unit`) in the timed updates.
    pub fn examples(&self) -> usize {
        self.rows[self.warmup..].iter().sum()
    }
}

/// What the candle closure of [`rounds`] returns ([`measure`]): the log of a fresh model's
/// `warmup + timed` updates, and the minor page faults, CPU seconds and wall seconds of
/// the training call (all its updates, the optimizer's construction included).
pub struct CandleRun {
    /// The loop's log.
    pub log: TrainLog,
    /// Minor page faults of this process during the call ([`minor_faults`]).
    pub minor_faults: f64,
    /// CPU seconds of this process during the call (all threads).
    pub cpu_seconds: f64,
    /// Wall seconds of the call.
    pub wall_seconds: f64,
}

/// Run `train` (candle's training call) and measure it for [`CandleRun`].
pub fn measure(train: impl FnOnce() -> Result<TrainLog>) -> Result<CandleRun> {
    let (faults, cpu, t0) = (
        minor_faults(),
        workbench::bench::process_cpu_seconds(),
        std::time::Instant::now(),
    );
    let log = train()?;
    Ok(CandleRun {
        wall_seconds: t0.elapsed().as_secs_f64(),
        cpu_seconds: workbench::bench::process_cpu_seconds() - cpu,
        minor_faults: minor_faults() - faults,
        log,
    })
}

/// Minor page faults of this process so far (`/proc/self/stat`), NaN where unreadable.
pub fn minor_faults() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let (_, rest) = s.rsplit_once(')')?;
            // After the name: state is field 3, minflt field 10.
            rest.split_whitespace().nth(7)?.parse::<f64>().ok()
        })
        .unwrap_or(f64::NAN)
}

/// Allocator libraries that would replace glibc's malloc if mapped into the process.
const OTHER_MALLOCS: [&str; 5] = ["jemalloc", "tcmalloc", "mimalloc", "tbbmalloc", "hoard"];

/// `glibc malloc` unless a known replacement is mapped into this process (the peer script
/// checks its own process the same way).
fn malloc_in_process() -> String {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return "unknown (no /proc/self/maps)".into();
    };
    let mut found: Vec<&str> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| {
            let p = p.to_lowercase();
            OTHER_MALLOCS.iter().any(|m| p.contains(m))
        })
        .collect();
    found.sort_unstable();
    found.dedup();
    if found.is_empty() {
        "glibc malloc".into()
    } else {
        found.join(", ")
    }
}

/// Whether this CPU has the AVX-512 subsets the gemm crate's x86-v4 kernels need.
fn gemm_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512cd")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `hidden_size`, `num_hidden_layers` and `intermediate_size` of a model's `config.json`.
fn dims(base_config: &Path) -> Result<(usize, usize, usize)> {
    let text = std::fs::read_to_string(base_config)
        .with_context(|| format!("{}", base_config.display()))?;
    let c: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: not JSON", base_config.display()))?;
    let field = |name: &str| {
        c[name]
            .as_u64()
            .map(|v| v as usize)
            .with_context(|| format!("{}: no `{name}`", base_config.display()))
    };
    Ok((
        field("hidden_size")?,
        field("num_hidden_layers")?,
        field("intermediate_size")?,
    ))
}

/// Multiply-adds of a BERT encoder's matrix products (query/key/value, output, the two
/// feed-forward layers, the two attention products) for batches of `(rows, len)` padded
/// sequences, forward and backward (the backward pass twice the forward's: the gradients
/// of the inputs and of the weights). `base_config` is the model's `config.json`.
pub fn encoder_macs(base_config: &Path, batches: &[(usize, usize)]) -> Result<f64> {
    let (h, layers, inter) = dims(base_config)?;
    let (h, layers, inter) = (h as f64, layers as f64, inter as f64);
    let forward: f64 = batches
        .iter()
        .map(|&(rows, len)| {
            let (rows, len) = (rows as f64, len as f64);
            rows * layers * (len * h * (4.0 * h + 2.0 * inter) + 2.0 * len * len * h)
        })
        .sum();
    Ok(3.0 * forward)
}

/// The first feed-forward product of the largest of `batches` (`(rows, len)`): (tokens,
/// `hidden_size`, `intermediate_size`), the shape both sides' products are timed alone at.
pub fn ffn_product(
    base_config: &Path,
    batches: &[(usize, usize)],
) -> Result<(usize, usize, usize)> {
    let (h, _, inter) = dims(base_config)?;
    let tokens = batches.iter().map(|&(r, l)| r * l).max().unwrap_or(0);
    Ok((tokens, h, inter))
}

/// Write `rows` to `path`, one JSON object per line.
pub fn write_jsonl(path: &Path, rows: impl IntoIterator<Item = serde_json::Value>) -> Result<()> {
    let file = std::fs::File::create(path).with_context(|| format!("{}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    for row in rows {
        serde_json::to_writer(&mut w, &row)?;
        writeln!(w)?;
    }
    w.flush()?;
    Ok(())
}

/// The peer's arguments: `task` (its `--task` and options), the examples, the batches and
/// their learning rates, the model folder (candle's initial model in Hugging Face layout),
/// and the threads and AdamW settings of `train`.
pub fn peer_args(
    task: &[&str],
    examples: PathBuf,
    inputs: &Inputs,
    model_dir: &Path,
    train: &TrainConfig,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = task.iter().map(OsString::from).collect();
    args.extend([
        "--features".into(),
        examples.into_os_string(),
        "--batches".into(),
        inputs.batches_path.clone().into_os_string(),
        "--lrs".into(),
        inputs.lrs_path.clone().into_os_string(),
        "--model".into(),
        model_dir.as_os_str().to_owned(),
        "--threads".into(),
        train.threads.to_string().into(),
        "--weight-decay".into(),
        train.adamw.weight_decay.to_string().into(),
        "--beta1".into(),
        train.adamw.beta1.to_string().into(),
        "--beta2".into(),
        train.adamw.beta2.to_string().into(),
        "--eps".into(),
        train.adamw.eps.to_string().into(),
        "--max-grad-norm".into(),
        train.max_grad_norm.unwrap_or(0.0).to_string().into(),
    ]);
    args
}

/// What the peer prints (its last JSON line).
#[derive(Debug, Clone, Deserialize)]
struct PeerResult {
    precision: String,
    examples_per_second: f64,
    seconds: f64,
    wall_seconds: f64,
    updates: usize,
    warmup_updates: usize,
    examples: usize,
    startup_seconds: f64,
    update_seconds: Vec<f64>,
    losses: Vec<f64>,
    grad_norms: Vec<f64>,
    rows: Vec<usize>,
    padded_len: Vec<usize>,
    minor_faults: f64,
    minor_faults_timed: f64,
    parameters: usize,
    attention: String,
    cpu_seconds: f64,
    cpu_seconds_timed: f64,
    all_wall_seconds: f64,
    torch: String,
    transformers: String,
    threads: usize,
    interop_threads: usize,
    malloc: String,
    glibc_tunables: String,
}

/// What the peer prints with `--product`.
#[derive(Debug, Clone, Deserialize)]
struct ProductRates {
    fmas_per_s: BTreeMap<String, f64>,
    threads: usize,
}

/// One side's run in one round.
#[derive(Debug, Clone, serde::Serialize)]
struct Run {
    round: usize,
    order: usize,
    system: String,
    seconds: f64,
    rate: f64,
    faults_per_update: f64,
    /// Minor faults per timed update (PyTorch only; NaN for candle).
    faults_per_timed_update: f64,
    /// CPU seconds per wall second over all updates.
    cpu_use: f64,
    /// CPU seconds per wall second over the timed updates (PyTorch only; NaN for candle).
    cpu_use_timed: f64,
    load: String,
    losses: Vec<f64>,
    grad_norms: Vec<f64>,
    update_seconds: Vec<f64>,
}

/// What one update of a peer ran on, from `MKL_VERBOSE=1` and `ONEDNN_VERBOSE=1`.
#[derive(Debug, Clone, Default, serde::Serialize)]
struct Probe {
    /// MKL's code path (its verbose header after "architecture").
    mkl_path: Option<String>,
    /// MKL calls by function.
    mkl_calls: BTreeMap<String, usize>,
    /// The largest `NThr` of MKL's calls.
    mkl_threads: Option<usize>,
    /// oneDNN's ISA line.
    onednn_isa: Option<String>,
    /// oneDNN's thread count (`nthr:`).
    onednn_threads: Option<usize>,
    /// oneDNN primitives executed, by `kind implementation`.
    onednn_kernels: BTreeMap<String, usize>,
}

impl Probe {
    fn parse(stdout: &str) -> Probe {
        let mut p = Probe::default();
        for line in stdout.lines() {
            if let Some(rest) = line.strip_prefix("MKL_VERBOSE ") {
                if rest.starts_with("oneMKL") || rest.starts_with("Intel") {
                    p.mkl_path = rest
                        .split_once("architecture ")
                        .map(|(_, t)| t.split(", Lnx").next().unwrap_or(t).trim().to_string());
                } else if let Some((f, _)) = rest.split_once('(') {
                    *p.mkl_calls.entry(f.to_string()).or_default() += 1;
                    if let Some(n) = rest
                        .split_once("NThr:")
                        .and_then(|(_, n)| n.split_whitespace().next()?.parse().ok())
                    {
                        p.mkl_threads = p.mkl_threads.max(Some(n));
                    }
                }
            } else if let Some(rest) = line.strip_prefix("onednn_verbose,") {
                let f: Vec<&str> = rest.split(',').collect();
                if let Some(isa) = f.iter().find_map(|x| x.strip_prefix("isa:")) {
                    p.onednn_isa = Some(isa.to_string());
                }
                if let Some(n) = f.iter().find_map(|x| x.strip_prefix("nthr:")?.parse().ok()) {
                    p.onednn_threads = Some(n);
                }
                // v1,primitive,exec,cpu,<kind>,<implementation>,…
                if f.len() > 5 && f[1] == "primitive" && f[2] == "exec" {
                    *p.onednn_kernels
                        .entry(format!("{} {}", f[4], f[5]))
                        .or_default() += 1;
                }
            }
        }
        p
    }

    /// Whether the matrix products may have run on AMX tiles: a oneDNN matmul
    /// implementation built for AMX, or an MKL bf16 or int8 GEMM on MKL's AMX code path.
    /// (AMX multiplies only bf16 and int8: an f32 SGEMM never runs on it, and oneDNN's
    /// element-wise kernels JIT-compiled for an AMX ISA are not matrix products.)
    fn products_on_amx(&self) -> bool {
        let onednn = self
            .onednn_kernels
            .keys()
            .any(|k| k.starts_with("matmul ") && k.contains("amx"));
        let mkl = self.mkl_path.as_deref().is_some_and(|p| p.contains("AMX"))
            && self.mkl_calls.keys().any(|f| {
                let f = f.to_ascii_uppercase();
                f.contains("BF16") || f.contains("S8") || f.contains("U8")
            });
        onednn || mkl
    }

    /// In a few words, what the matrix products ran on: MKL's functions and code path,
    /// oneDNN's matmul implementations, and whether the products may have used AMX.
    fn short(&self) -> String {
        let mut parts = Vec::new();
        let matmuls: Vec<&str> = self
            .onednn_kernels
            .keys()
            .filter_map(|k| k.strip_prefix("matmul "))
            .collect();
        if !matmuls.is_empty() {
            parts.push(format!("oneDNN {}", matmuls.join(", ")));
        }
        if !self.mkl_calls.is_empty() {
            let fns: Vec<&str> = self.mkl_calls.keys().map(String::as_str).collect();
            parts.push(format!(
                "MKL {} (its \"{}\" path)",
                fns.join(", "),
                self.mkl_path.as_deref().unwrap_or("unprinted")
            ));
        }
        if parts.is_empty() {
            parts.push("neither MKL nor oneDNN".into());
        }
        format!(
            "{}, {}",
            parts.join(" and "),
            if self.products_on_amx() {
                "AMX tiles in its products"
            } else {
                "no AMX in its products"
            }
        )
    }

    /// One sentence: MKL's path and calls, oneDNN's kernels.
    fn describe(&self) -> String {
        let counts = |m: &BTreeMap<String, usize>| {
            m.iter()
                .map(|(k, n)| format!("`{k}` ×{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mkl = match (&self.mkl_path, self.mkl_calls.is_empty()) {
            (_, true) => "no MKL call".to_string(),
            (Some(path), false) => format!(
                "MKL on its \"{path}\" code path ({}; {} threads)",
                counts(&self.mkl_calls),
                self.mkl_threads.map_or("?".into(), |n| n.to_string())
            ),
            (None, false) => format!("MKL, code path not printed ({})", counts(&self.mkl_calls)),
        };
        let onednn = if self.onednn_kernels.is_empty() {
            "no oneDNN primitive".to_string()
        } else {
            let amx: usize = self
                .onednn_kernels
                .iter()
                .filter(|(k, _)| k.starts_with("matmul ") && k.contains("amx"))
                .map(|(_, n)| n)
                .sum();
            format!(
                "oneDNN ({}, {} threads): {}; {}",
                self.onednn_isa.as_deref().unwrap_or("ISA not printed"),
                self.onednn_threads.map_or("?".into(), |n| n.to_string()),
                counts(&self.onednn_kernels),
                if amx == 0 {
                    "no matmul built for AMX".to_string()
                } else {
                    format!("{amx} matmuls built for AMX")
                }
            )
        };
        format!("{mkl}; {onednn}")
    }
}

/// The ratios of candle against one peer.
#[derive(Debug, Clone, serde::Serialize)]
struct Ratios {
    peer: String,
    precision: &'static str,
    per_round: Vec<f64>,
    median_of_rounds: f64,
    min: f64,
    max: f64,
    of_medians: f64,
    best_against_best: f64,
    candle_median: f64,
    peer_median: f64,
    candle_best: f64,
    peer_best: f64,
    reading: String,
}

impl Ratios {
    fn new(peer: String, precision: &'static str, candle: &[f64], other: &[f64]) -> Ratios {
        let per_round: Vec<f64> = candle.iter().zip(other).map(|(c, p)| c / p).collect();
        let min = per_round.iter().copied().fold(f64::INFINITY, f64::min);
        let max = per_round.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let best = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Ratios {
            reading: reading(&per_round),
            median_of_rounds: median(&per_round),
            of_medians: median(candle) / median(other),
            best_against_best: best(candle) / best(other),
            candle_median: median(candle),
            peer_median: median(other),
            candle_best: best(candle),
            peer_best: best(other),
            peer,
            precision,
            per_round,
            min,
            max,
        }
    }
}

/// The reading of per-round ratios (candle over the peer): how many rounds each side was
/// faster in, so that one outlier round shows as one round and not as a verdict.
fn reading(per_round: &[f64]) -> String {
    let n = per_round.len();
    let candle = per_round.iter().filter(|r| **r > 1.0).count();
    let peer = per_round.iter().filter(|r| **r < 1.0).count();
    let equal = n - candle - peer;
    if n > 0 && candle == n {
        format!("candle faster in all {n} rounds")
    } else if n > 0 && peer == n {
        format!("PyTorch faster in all {n} rounds")
    } else {
        let tie = if equal > 0 {
            format!(", equal in {equal}")
        } else {
            String::new()
        };
        format!("candle faster in {candle} of {n} rounds, PyTorch in {peer}{tie}")
    }
}

/// Largest relative difference of `a` and `b`, element by element (`|a − b| / max(|b|,
/// 1e-6)`); infinite when their lengths differ.
fn max_rel_diff(a: &[f64], b: &[f64]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() / y.abs().max(1e-6))
        .fold(0.0, f64::max)
}

/// How far a peer's per-update losses and gradient norms may be from candle's (relative,
/// every update of a round): float32 sums in another order; bf16 autocast rounds the
/// products' inputs to 8 significant bits. A peer that skips the backward pass or an
/// update, or trains another model, is far outside both.
fn tolerance(precision: &str) -> (f64, f64) {
    if precision == "f32" {
        (1e-3, 1e-2)
    } else {
        (2e-2, 5e-2)
    }
}

/// Check that a peer of `precision` did candle's arithmetic: its per-update losses and
/// gradient norms within [`tolerance`] of candle's; returns their largest relative
/// differences.
fn same_arithmetic(
    precision: &str,
    losses: &[f64],
    grad_norms: &[f64],
    peer_losses: &[f64],
    peer_grad_norms: &[f64],
) -> Result<(f64, f64)> {
    let (dl, dg) = (
        max_rel_diff(peer_losses, losses),
        max_rel_diff(peer_grad_norms, grad_norms),
    );
    let (tl, tg) = tolerance(precision);
    ensure!(
        dl <= tl && dg <= tg,
        "PyTorch {precision} does not do candle's arithmetic: losses differ by up to {dl:.2e}, \
         gradient norms by {dg:.2e} (relative; tolerances {tl:.0e}, {tg:.0e}):\n\
         losses     candle  {losses:?}\n           PyTorch {peer_losses:?}\n\
         grad norms candle  {grad_norms:?}\n           PyTorch {peer_grad_norms:?}"
    );
    Ok((dl, dg))
}

/// Check a peer's run: the same updates, rows, padded lengths and threads as planned, its
/// timings consistent.
fn check_peer(b: &TrainBench, precision: &str, r: &PeerResult) -> Result<()> {
    let n = b.warmup + b.timed;
    ensure!(
        r.precision == precision,
        "peer ran {} for {precision}",
        r.precision
    );
    ensure!(
        r.updates == b.timed && r.warmup_updates == b.warmup,
        "peer timed {} updates after {} warm-up ones, planned {} after {}",
        r.updates,
        r.warmup_updates,
        b.timed,
        b.warmup
    );
    ensure!(
        r.examples == b.examples(),
        "peer timed {} {}, planned {}",
        r.examples,
        b.unit,
        b.examples()
    );
    ensure!(
        r.rows == b.rows && r.padded_len == b.padded,
        "peer's batches differ: rows {:?} padded {:?}, planned {:?} {:?}",
        r.rows,
        r.padded_len,
        b.rows,
        b.padded
    );
    ensure!(
        [r.update_seconds.len(), r.losses.len(), r.grad_norms.len()] == [n; 3],
        "peer logged {} / {} / {} updates, planned {n}",
        r.update_seconds.len(),
        r.losses.len(),
        r.grad_norms.len()
    );
    ensure!(
        r.parameters == b.parameters,
        "peer trains {} parameters, candle {}",
        r.parameters,
        b.parameters
    );
    let timed: f64 = r.update_seconds[b.warmup..].iter().sum();
    // The timed updates cover the timed span: nothing of an update left out of its timing.
    ensure!(
        (timed - r.seconds).abs() <= 1e-9 * timed.max(1.0)
            && r.seconds <= r.wall_seconds
            && r.wall_seconds - r.seconds <= 0.05 * r.wall_seconds,
        "peer's seconds {} are not the sum of its timed updates {timed} covering its timed \
         span of {} s",
        r.seconds,
        r.wall_seconds
    );
    ensure!(
        (r.examples_per_second - r.examples as f64 / r.seconds).abs()
            <= 1e-9 * r.examples_per_second,
        "peer's rate {} is not its examples over its seconds",
        r.examples_per_second
    );
    ensure!(
        r.glibc_tunables == workbench::train::malloc_tunables(),
        "peer saw GLIBC_TUNABLES `{}`, not the training loop's malloc settings",
        r.glibc_tunables
    );
    ensure!(
        r.threads == b.threads && r.interop_threads == b.threads,
        "peer ran {} intra-op / {} inter-op threads, candle {}",
        r.threads,
        r.interop_threads,
        b.threads
    );
    Ok(())
}

/// Check candle's run against the plan; returns (timed seconds, rate).
fn check_candle(b: &TrainBench, log: &TrainLog) -> Result<(f64, f64)> {
    let n = b.warmup + b.timed;
    ensure!(
        log.steps.len() == n,
        "candle ran {} updates, planned {n}",
        log.steps.len()
    );
    for (i, s) in log.steps.iter().enumerate() {
        ensure!(
            s.examples * b.per_item == b.rows[i] && s.padded_len == b.padded[i],
            "candle's update {i}: {} rows of {} tokens, planned {} of {}",
            s.examples * b.per_item,
            s.padded_len,
            b.rows[i],
            b.padded[i]
        );
        ensure!(
            (s.lr - b.lrs[i]).abs() <= 1e-12 * b.lrs[i].abs().max(1e-12),
            "candle's update {i} had learning rate {}, the peer's file {}",
            s.lr,
            b.lrs[i]
        );
    }
    let seconds: f64 = log.steps[b.warmup..].iter().map(|s| s.seconds).sum();
    Ok((seconds, b.examples() as f64 / seconds))
}

/// The environment of a peer process: the training loop's malloc settings.
fn peer_env() -> [(&'static str, String); 1] {
    [("GLIBC_TUNABLES", workbench::train::malloc_tunables())]
}

/// The order of the systems in round `round` (from 1): rounds 1-3 are the rotations of
/// (PyTorch f32, PyTorch bf16 autocast, candle), rounds 4-6 those of the reverse, then again;
/// three consecutive rounds from 1 or 4 put each system once in each position, and six put
/// each system after each other one equally often.
fn round_order(round: usize) -> [System; 3] {
    let mut order = [
        System::Torch(PRECISIONS[0]),
        System::Torch(PRECISIONS[1]),
        System::Candle,
    ];
    let r = round.saturating_sub(1) % 6;
    if r >= 3 {
        order.reverse();
    }
    order.rotate_left(r % 3);
    order
}

/// Run candle (`candle()`: a fresh model trained for `warmup + timed` updates) and the two
/// PyTorch peers `b.rounds` times in the order `round_order` gives each round;
/// check every run; write the tables into `dir` and return the summary for the manifest.
pub fn rounds(
    b: &TrainBench,
    dir: &Path,
    machine: &str,
    peers: &PythonPeers,
    mut candle: impl FnMut() -> Result<CandleRun>,
) -> Result<serde_json::Value> {
    let n = b.warmup + b.timed;
    let peer_args = |precision: &str, extra: &[&str]| -> Vec<OsString> {
        let mut a = b.peer_args.clone();
        a.extend(["--precision", precision].map(OsString::from));
        a.extend(extra.iter().map(OsString::from));
        a
    };
    // What each peer's products ran on: one update with MKL's and oneDNN's verbose output.
    let mut probes = BTreeMap::new();
    for p in PRECISIONS {
        let env = peer_env()
            .into_iter()
            .chain([("MKL_VERBOSE", "1".into()), ("ONEDNN_VERBOSE", "1".into())]);
        let out = peers.run_with_env(
            PEER,
            peer_args(p, &["--limit", "1", "--warmup-updates", "0"]),
            env,
        )?;
        let probe = Probe::parse(&out.stdout);
        println!("{p}: {}", probe.describe());
        probes.insert(p, probe);
    }
    let mut runs: Vec<Run> = Vec::new();
    let mut peer_info: Option<PeerResult> = None;
    let mut startups: Vec<f64> = Vec::new();
    let mut agreement: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for round in 1..=b.rounds {
        let order = round_order(round);
        let mut this_round: Vec<(System, Run)> = Vec::new();
        for (pos, system) in order.into_iter().enumerate() {
            let run = match system {
                System::Candle => {
                    let c = candle()?;
                    // The training bar ends without a line break.
                    eprintln!();
                    let (seconds, rate) = check_candle(b, &c.log)?;
                    Run {
                        round,
                        order: pos + 1,
                        system: system.label(),
                        seconds,
                        rate,
                        faults_per_update: c.minor_faults / n as f64,
                        faults_per_timed_update: f64::NAN,
                        cpu_use: c.cpu_seconds / c.wall_seconds,
                        cpu_use_timed: f64::NAN,
                        load: load_average(),
                        losses: c.log.steps.iter().map(|s| s.loss).collect(),
                        grad_norms: c.log.steps.iter().map(|s| s.grad_norm).collect(),
                        update_seconds: c.log.steps.iter().map(|s| s.seconds).collect(),
                    }
                }
                System::Torch(p) => {
                    let r: PeerResult = peers
                        .run_with_env(
                            PEER,
                            peer_args(p, &["--warmup-updates", &b.warmup.to_string()]),
                            peer_env(),
                        )?
                        .json()?;
                    check_peer(b, p, &r)?;
                    let run = Run {
                        round,
                        order: pos + 1,
                        system: system.label(),
                        seconds: r.seconds,
                        rate: r.examples_per_second,
                        faults_per_update: r.minor_faults / n as f64,
                        faults_per_timed_update: r.minor_faults_timed / b.timed as f64,
                        cpu_use: r.cpu_seconds / r.all_wall_seconds,
                        cpu_use_timed: r.cpu_seconds_timed / r.wall_seconds,
                        load: load_average(),
                        losses: r.losses.clone(),
                        grad_norms: r.grad_norms.clone(),
                        update_seconds: r.update_seconds.clone(),
                    };
                    startups.push(r.startup_seconds);
                    peer_info = Some(r);
                    run
                }
            };
            println!(
                "round {round}.{}: {} {:.2} {}/s (load {})",
                pos + 1,
                run.system,
                run.rate,
                b.unit,
                run.load
            );
            this_round.push((system, run));
        }
        // The same arithmetic: each peer's losses and gradient norms against candle's.
        let Some((_, c)) = this_round.iter().find(|(s, _)| *s == System::Candle) else {
            bail!("round {round} ran no candle")
        };
        for (s, r) in &this_round {
            if let System::Torch(p) = s {
                let (dl, dg) =
                    same_arithmetic(p, &c.losses, &c.grad_norms, &r.losses, &r.grad_norms)
                        .with_context(|| format!("round {round}"))?;
                let e = agreement.entry(p).or_insert((0.0, 0.0));
                *e = (e.0.max(dl), e.1.max(dg));
            }
        }
        runs.extend(this_round.into_iter().map(|(_, r)| r));
    }
    let info = peer_info.context("no peer ran")?;
    let rates = |label: &str| -> Vec<f64> {
        runs.iter()
            .filter(|r| r.system == label)
            .map(|r| r.rate)
            .collect()
    };
    let ours = rates(&System::Candle.label());
    let ratios: Vec<Ratios> = PRECISIONS
        .iter()
        .map(|&p| {
            let label = System::Torch(p).label();
            let theirs = rates(&label);
            Ratios::new(label, p, &ours, &theirs)
        })
        .collect();
    let load_end = load_average();

    // bench.csv: every run.
    let per_s = format!("{}/s", b.unit);
    let mut table = Table::new([
        "round",
        "order",
        "system",
        "timed updates",
        b.unit,
        "seconds",
        per_s.as_str(),
        "minor faults per update",
        "CPU s per s",
        "load",
    ]);
    for r in &runs {
        table.push([
            r.round.to_string(),
            r.order.to_string(),
            r.system.clone(),
            b.timed.to_string(),
            b.examples().to_string(),
            format!("{:.2}", r.seconds),
            format!("{:.2}", r.rate),
            format!("{:.0}", r.faults_per_update),
            format!("{:.2}", r.cpu_use),
            r.load.clone(),
        ])?;
    }
    // ratios.csv: candle against each peer.
    let mut rt = Table::new([
        "candle against",
        "per-round ratios",
        "median of per-round ratios",
        "smallest",
        "largest",
        "ratio of medians",
        "best against best",
        "candle median",
        "peer median",
        "candle best",
        "peer best",
        "reading",
        "rounds",
        "timed updates",
        "warm-up updates",
        "versions",
        "candle products",
        "peer products",
    ]);
    let candle_products = if gemm_avx512() {
        "gemm's AVX-512 f32 kernels"
    } else {
        "gemm's AVX2/FMA f32 kernels"
    };
    let versions = format!("torch {}, transformers {}", info.torch, info.transformers);
    for q in &ratios {
        rt.push([
            q.peer.clone(),
            q.per_round
                .iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(" "),
            format!("{:.2}", q.median_of_rounds),
            format!("{:.2}", q.min),
            format!("{:.2}", q.max),
            format!("{:.2}", q.of_medians),
            format!("{:.2}", q.best_against_best),
            format!("{:.2}", q.candle_median),
            format!("{:.2}", q.peer_median),
            format!("{:.2}", q.candle_best),
            format!("{:.2}", q.peer_best),
            q.reading.clone(),
            b.rounds.to_string(),
            b.timed.to_string(),
            b.warmup.to_string(),
            versions.clone(),
            candle_products.to_string(),
            probes[&q.precision].short(),
        ])?;
    }
    let mut shown = Table::new([
        "candle against",
        "per-round ratios",
        "median of per-round ratios",
        "range",
        "ratio of medians",
        "best against best",
        "reading",
    ]);
    for q in &ratios {
        shown.push([
            q.peer.clone(),
            q.per_round
                .iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(", "),
            format!("**{:.2}×**", q.median_of_rounds),
            format!("{:.2}–{:.2}", q.min, q.max),
            format!("{:.2}×", q.of_medians),
            format!("{:.2}×", q.best_against_best),
            q.reading.clone(),
        ])?;
    }

    // The ceiling: the products' multiply-adds at the measured f32 peak.
    let peak = workbench::machine::measure_peak(b.threads);
    // One feed-forward product alone, each side's fastest of ten.
    let (pr, pi, po) = b.product;
    let candle_product = workbench::train::linear_rate(pr, pi, po, b.threads, 10)?;
    let torch_product: ProductRates = peers
        .run_with_env(
            PEER,
            peer_args(PRECISIONS[0], &["--product", &format!("{pr},{pi},{po}")]),
            peer_env(),
        )?
        .json()?;
    ensure!(
        torch_product.threads == b.threads,
        "the product's peer ran {} threads, candle {}",
        torch_product.threads,
        b.threads
    );
    let torch_f32 = torch_product
        .fmas_per_s
        .get("f32")
        .copied()
        .unwrap_or(f64::NAN);
    let torch_bf16 = torch_product
        .fmas_per_s
        .get("bf16")
        .copied()
        .unwrap_or(f64::NAN);
    let rate = |per_s: f64| b.macs * per_s / b.examples() as f64;
    let pct = |per_s: f64| 100.0 * rate(per_s) / peak.f32_fmas_per_s;
    let f32r = &ratios[0];
    let agree = |p: &str| agreement.get(p).copied().unwrap_or((f64::NAN, f64::NAN));
    let (f32_dl, f32_dg) = agree(PRECISIONS[0]);
    let (bf_dl, bf_dg) = agree(PRECISIONS[1]);
    let candle_malloc = malloc_in_process();
    let md = format!(
        "{machine}\n\n{runs}\n\n{ratios}\n\n\
Ratios are candle's {unit}/s over the peer's in the same round (above 1: candle faster). \
Ratio of medians: candle's median rate over the peer's; best against best: candle's fastest \
round over the peer's fastest. Reading: the number of rounds in which each side was faster.\n\n\
Each side, each round: {w} untimed warm-up updates on the first {w} batches, then {t} timed \
updates on the next {t} ({ex} {unit}); the same {batches}. Every update is timed from the \
collation of its batch to reading its loss back (forward, loss, backward, gradient norm and \
clipping, AdamW, gradient release); model loading, the optimizer's construction and a peer's \
process start-up and imports are outside the timing. Order within a round (column `order`): \
rounds 1-3 rotate PyTorch f32, PyTorch bf16 autocast, candle so that each system runs once in \
each position, rounds 4-6 rotate the reverse order, and round 7 starts over.\n\n\
Same model and arithmetic: the peers load candle's initial model (head included, saved in \
Hugging Face layout; every parameter from the file), no dropout on either side, the same \
learning rate per update, AdamW with the same settings and no decay on biases and LayerNorm \
weights, clipping to a global norm of {clip}; transformers' `{attention}` attention \
implementation. Checked in every round: each peer trains as many parameters as candle \
({params}), its rows and padded lengths per update equal candle's, its timed updates' seconds \
cover its timed span; its per-update losses and gradient norms (warm-up \
included) are within a relative {tl32:.0e} and {tg32:.0e} of candle's for f32, {tlbf:.0e} \
and {tgbf:.0e} for bf16 autocast. Largest differences over the rounds: f32 losses {f32_dl:.1e}, gradient norms \
{f32_dg:.1e}; bf16 autocast losses {bf_dl:.1e}, gradient norms {bf_dg:.1e}.\n\n\
Threads: candle a rayon pool of {threads} (the gemm products split over it); PyTorch \
`torch.set_num_threads({threads})` and `set_num_interop_threads({threads})` (reported back: \
{pt_threads} and {pt_interop}).\n\n\
Allocators: candle {candle_malloc} (no other allocator mapped in the process) with the \
training loop's settings (`mallopt`: {settings}); PyTorch {peer_malloc} (its CPU tensors \
through c10's allocator) with the same settings through `GLIBC_TUNABLES={tunables}` (each \
peer checked to have seen it). The table's minor page faults per update and CPU seconds per \
wall second are over all the updates of a run, warm-up included (candle's training call \
includes the optimizer's construction); over their timed updates alone the PyTorch f32 \
runs took a median {pt_faults_timed:.0} minor faults per update. CPU seconds per wall \
second below the {threads} threads are time a side's threads did not run: waiting on a serial \
part of its own work, or on another process holding a core (the load column).\n\n\
Instruction paths: candle's products use the gemm crate's f32 kernels, {gemm}. One update \
of each peer with `MKL_VERBOSE=1` and `ONEDNN_VERBOSE=1`: f32: {probe_f32}. bf16 autocast: \
{probe_bf16}.\n\n\
{versions}; a peer process took a median {startup:.1} s from its start to its first update (not timed).\n\n\
Ceiling: the {t} timed updates' matrix products are {gmacs:.1} G multiply-adds (forward and \
backward, padded batches); at the measured f32 peak of {peak:.0} G multiply-adds/s \
({kernel}, {pthreads} threads) they take {floor:.2} s, {top:.0} {unit}/s. At the median \
rates candle ran {c_rate:.0} G/s ({c_pct:.0} % of the peak), PyTorch f32 {p_rate:.0} G/s \
({p_pct:.0} %), element-wise work and the optimizer included. One feed-forward product \
alone ({pr} × {pi} activations by a {po} × {pi} weight, fastest of 10, {threads} threads): \
candle {cp:.0} G multiply-adds/s ({cp_pct:.0} % of the peak), PyTorch f32 {tp:.0} G/s \
({tp_pct:.0} %), PyTorch bf16 {tb:.0} G/s.\n\nLoad {load_end} at the end.\n",
        runs = table.to_markdown(),
        ratios = shown.to_markdown(),
        unit = b.unit,
        w = b.warmup,
        t = b.timed,
        ex = b.examples(),
        batches = b.batches,
        clip = b
            .peer_args
            .iter()
            .position(|a| a == "--max-grad-norm")
            .and_then(|i| b.peer_args.get(i + 1))
            .map_or("?".into(), |v| v.to_string_lossy().into_owned()),
        tl32 = tolerance(PRECISIONS[0]).0,
        tg32 = tolerance(PRECISIONS[0]).1,
        tlbf = tolerance(PRECISIONS[1]).0,
        tgbf = tolerance(PRECISIONS[1]).1,
        threads = b.threads,
        pt_threads = info.threads,
        pt_interop = info.interop_threads,
        settings = workbench::train::KEEP_FREED_MEMORY
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", "),
        peer_malloc = info.malloc,
        attention = info.attention,
        params = b.parameters,
        pt_faults_timed = median(
            &runs
                .iter()
                .filter(|r| r.system == System::Torch(PRECISIONS[0]).label())
                .map(|r| r.faults_per_timed_update)
                .collect::<Vec<_>>()
        ),
        tunables = workbench::train::malloc_tunables(),
        gemm = if gemm_avx512() {
            "its AVX-512 ones (x86-v4 build; this CPU has AVX-512 F/BW/CD/DQ/VL)"
        } else {
            "its AVX2/FMA ones (this CPU lacks part of AVX-512 F/BW/CD/DQ/VL)"
        },
        probe_f32 = probes[&PRECISIONS[0]].describe(),
        probe_bf16 = probes[&PRECISIONS[1]].describe(),
        startup = median(&startups),
        gmacs = b.macs / 1e9,
        peak = peak.f32_fmas_per_s / 1e9,
        kernel = peak.f32_kernel,
        pthreads = peak.threads,
        floor = b.macs / peak.f32_fmas_per_s,
        top = b.examples() as f64 * peak.f32_fmas_per_s / b.macs,
        c_rate = rate(f32r.candle_median) / 1e9,
        c_pct = pct(f32r.candle_median),
        p_rate = rate(f32r.peer_median) / 1e9,
        p_pct = pct(f32r.peer_median),
        cp = candle_product / 1e9,
        cp_pct = 100.0 * candle_product / peak.f32_fmas_per_s,
        tp = torch_f32 / 1e9,
        tp_pct = 100.0 * torch_f32 / peak.f32_fmas_per_s,
        tb = torch_bf16 / 1e9,
    );
    let summary = serde_json::json!({
        "ratio_median_of_rounds": f32r.median_of_rounds,
        "ratio_range": [f32r.min, f32r.max],
        "ratio_of_medians": f32r.of_medians,
        "best_against_best": f32r.best_against_best,
        "reading": f32r.reading,
        "bf16_autocast_ratio_median_of_rounds": ratios[1].median_of_rounds,
        "load_end": load_end,
    });
    std::fs::write(
        dir.join("bench.json"),
        serde_json::to_vec_pretty(&serde_json::json!({
            "unit": b.unit, "timed_updates": b.timed, "warmup_updates": b.warmup,
            "rounds": b.rounds, "threads": b.threads, "examples": b.examples(),
            "parameters": b.parameters,
            "rows": b.rows, "padded_len": b.padded, "lrs": b.lrs,
            "runs": runs, "ratios": ratios, "probes": probes,
            "agreement_max_rel": agreement,
            "candle_malloc": candle_malloc, "malloc_settings": workbench::train::KEEP_FREED_MEMORY,
            "peer_malloc": info.malloc, "peer_glibc_tunables": info.glibc_tunables,
            "peer_threads": info.threads, "peer_interop_threads": info.interop_threads,
            "torch": info.torch, "transformers": info.transformers, "attention": info.attention,
            "peer_startup_seconds": startups,
            "gemm_avx512": gemm_avx512(),
            "macs": b.macs, "f32_peak_fmas_per_s": peak.f32_fmas_per_s, "f32_kernel": peak.f32_kernel,
            "product": [pr, pi, po], "candle_product_fmas_per_s": candle_product,
            "pytorch_product_fmas_per_s": torch_product.fmas_per_s,
            "load_at_end": load_end, "summary": summary,
        }))?,
    )?;
    println!("{md}");
    table.write_csv(&dir.join("bench.csv"))?;
    rt.write_csv(&dir.join("ratios.csv"))?;
    std::fs::write(dir.join("bench.md"), md)?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reading_counts_the_rounds_each_side_won() {
        assert_eq!(
            reading(&[0.97, 0.98, 1.25, 1.27, 1.15]),
            "candle faster in 3 of 5 rounds, PyTorch in 2"
        );
        assert_eq!(
            reading(&[1.0, 1.2, 0.9]),
            "candle faster in 1 of 3 rounds, PyTorch in 1, equal in 1"
        );
        assert_eq!(reading(&[1.01, 1.2]), "candle faster in all 2 rounds");
        assert_eq!(
            reading(&[0.8, 0.99, 0.9, 0.85, 0.88, 0.91]),
            "PyTorch faster in all 6 rounds"
        );
        assert_eq!(
            reading(&[0.88, 0.78, 1.02, 0.72, 0.83, 0.92]),
            "candle faster in 1 of 6 rounds, PyTorch in 5"
        );
    }

    #[test]
    fn six_rounds_run_every_order_and_three_balance_the_positions() {
        let orders: Vec<[System; 3]> = (1..=6).map(round_order).collect();
        for (i, a) in orders.iter().enumerate() {
            for b in &orders[i + 1..] {
                assert_ne!(a, b, "an order repeats within six rounds");
            }
        }
        for start in [0, 3] {
            for pos in 0..3 {
                let at: Vec<System> = orders[start..start + 3].iter().map(|o| o[pos]).collect();
                for s in round_order(1) {
                    assert_eq!(at.iter().filter(|x| **x == s).count(), 1, "{s:?} at {pos}");
                }
            }
        }
        assert_eq!(round_order(7), round_order(1));
        assert_eq!(round_order(1)[2], System::Candle);
    }

    #[test]
    fn ratios_of_rounds_medians_and_bests() {
        let q = Ratios::new("p".into(), "f32", &[10.0, 10.0, 12.0], &[10.0, 8.0, 12.0]);
        assert_eq!(q.per_round, vec![1.0, 1.25, 1.0]);
        assert_eq!(q.median_of_rounds, 1.0);
        assert_eq!(q.of_medians, 1.0);
        assert_eq!(q.best_against_best, 1.0);
        assert_eq!((q.min, q.max), (1.0, 1.25));
        assert_eq!(
            q.reading,
            "candle faster in 1 of 3 rounds, PyTorch in 0, equal in 2"
        );
    }

    fn bench(warmup: usize, timed: usize) -> TrainBench {
        TrainBench {
            unit: "features",
            per_item: 2,
            warmup,
            timed,
            rounds: 1,
            rows: vec![4; warmup + timed],
            padded: vec![10; warmup + timed],
            lrs: vec![1e-5; warmup + timed],
            threads: 2,
            parameters: 1,
            peer_args: Vec::new(),
            batches: String::new(),
            macs: 0.0,
            product: (1, 1, 1),
        }
    }

    fn log(seconds: &[f64]) -> TrainLog {
        TrainLog {
            steps: seconds
                .iter()
                .enumerate()
                .map(|(step, &seconds)| workbench::train::StepLog {
                    step,
                    epoch: 0,
                    loss: 1.0,
                    lr: 1e-5,
                    grad_norm: 1.0,
                    examples: 2,
                    padded_len: 10,
                    seconds,
                })
                .collect(),
            total_steps: seconds.len(),
        }
    }

    #[test]
    fn candle_is_timed_over_the_updates_after_the_warm_up_only() {
        let b = bench(2, 3);
        // Warm-up updates of 100 s each must not count; 3 timed updates of 1 s, 4 rows each.
        let (seconds, rate) = check_candle(&b, &log(&[100.0, 100.0, 1.0, 1.0, 1.0])).unwrap();
        assert_eq!(seconds, 3.0);
        assert_eq!(rate, 4.0);
        // One update too few or too many, other rows or another learning rate: an error.
        assert!(check_candle(&b, &log(&[100.0, 1.0, 1.0, 1.0])).is_err());
        let mut other = log(&[1.0; 5]);
        other.steps[3].padded_len = 11;
        assert!(check_candle(&b, &other).is_err());
        other = log(&[1.0; 5]);
        other.steps[0].lr = 2e-5;
        assert!(check_candle(&b, &other).is_err());
    }

    fn peer(b: &TrainBench) -> PeerResult {
        let n = b.warmup + b.timed;
        let update_seconds = vec![1.0; n];
        PeerResult {
            precision: "f32".into(),
            examples_per_second: b.examples() as f64 / b.timed as f64,
            seconds: b.timed as f64,
            wall_seconds: b.timed as f64 + 0.01,
            updates: b.timed,
            warmup_updates: b.warmup,
            examples: b.examples(),
            startup_seconds: 3.0,
            update_seconds,
            losses: vec![1.0; n],
            grad_norms: vec![1.0; n],
            rows: b.rows.clone(),
            padded_len: b.padded.clone(),
            minor_faults: 0.0,
            minor_faults_timed: 0.0,
            parameters: b.parameters,
            attention: "sdpa".into(),
            cpu_seconds: 0.0,
            cpu_seconds_timed: 0.0,
            all_wall_seconds: 0.0,
            torch: "2".into(),
            transformers: "5".into(),
            threads: 2,
            interop_threads: 2,
            malloc: "glibc malloc".into(),
            glibc_tunables: workbench::train::malloc_tunables(),
        }
    }

    /// The mutations a referee tries on the peer, each caught.
    #[test]
    fn a_peer_that_times_or_trains_less_is_caught() {
        let b = bench(2, 3);
        check_peer(&b, "f32", &peer(&b)).unwrap();
        // One update fewer, run and reported.
        let mut r = peer(&b);
        r.updates -= 1;
        r.examples -= 4;
        r.rows.pop();
        assert!(check_peer(&b, "f32", &r).is_err());
        // The last update left out of the timing but still counted.
        let mut r = peer(&b);
        r.seconds -= 1.0;
        r.examples_per_second = r.examples as f64 / r.seconds;
        assert!(check_peer(&b, "f32", &r).is_err());
        // Part of every update left out of its timing.
        let mut r = peer(&b);
        r.wall_seconds = 2.0 * r.seconds;
        assert!(check_peer(&b, "f32", &r).is_err());
        // Another model, other threads, its own malloc settings.
        let mut r = peer(&b);
        r.parameters += 1;
        assert!(check_peer(&b, "f32", &r).is_err());
        let mut r = peer(&b);
        r.threads = 1;
        assert!(check_peer(&b, "f32", &r).is_err());
        let mut r = peer(&b);
        r.glibc_tunables.clear();
        assert!(check_peer(&b, "f32", &r).is_err());
        // No backward pass: gradient norms of zero.
        let c = [4.8, 5.0, 4.9];
        assert!(same_arithmetic("f32", &c, &[1.9, 1.8, 2.1], &c, &[1.9, 1.8, 2.1]).is_ok());
        assert!(same_arithmetic("f32", &c, &[1.9, 1.8, 2.1], &c, &[0.0; 3]).is_err());
        // A float32 peer within bf16's tolerance only.
        assert!(same_arithmetic("f32", &c, &[1.9, 1.8, 2.1], &c, &[1.9, 1.8, 2.15]).is_err());
        assert!(
            same_arithmetic("bf16-autocast", &c, &[1.9, 1.8, 2.1], &c, &[1.9, 1.8, 2.15]).is_ok()
        );
    }

    #[test]
    fn verbose_lines_give_the_paths() {
        let out = "MKL_VERBOSE oneMKL 2024.0 Update 2 Product build 20240605 for Intel(R) 64 architecture Intel(R) Architecture processors, Lnx 2.60GHz lp64 gnu_thread
MKL_VERBOSE SGEMM(T,N,1536,64,384,0x1,0x2,384,0x3,384,0x4,0x5,1536) 4.41ms CNR:OFF Dyn:0 FastMM:1 TID:0  NThr:2
onednn_verbose,v1,info,cpu,runtime:OpenMP,nthr:2
onednn_verbose,v1,info,cpu,isa:Intel AVX-512 with Intel DL Boost and bfloat16 support
onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core_bf16,undef,src:bf16::blocked:ab::f0,,64x384:384x1536,0.218018
onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core_bf16,undef,src:bf16::blocked:ab::f0,,64x384:384x1536,0.218018
{\"examples_per_second\": 1.0}";
        let p = Probe::parse(out);
        assert_eq!(
            p.mkl_path.as_deref(),
            Some("Intel(R) Architecture processors")
        );
        assert_eq!(p.mkl_calls["SGEMM"], 1);
        assert_eq!(p.mkl_threads, Some(2));
        assert_eq!(p.onednn_threads, Some(2));
        assert_eq!(p.onednn_kernels["matmul brg_matmul:avx512_core_bf16"], 2);
        assert!(
            p.describe().contains("no matmul built for AMX"),
            "{}",
            p.describe()
        );
        assert!(
            p.short().ends_with("no AMX in its products"),
            "{}",
            p.short()
        );
    }

    #[test]
    fn only_products_count_as_amx() {
        // An f32 SGEMM on MKL's AMX path, and element-wise kernels JIT-compiled for an AMX
        // ISA: no product on tiles (AMX has no f32).
        let f32 = "MKL_VERBOSE oneMKL 2025.0 Product build 20241031 for Intel(R) 64 architecture Intel(R) Advanced Vector Extensions 512 (Intel(R) AVX-512) with support for INT8, BF16, FP16 (limited) instructions, and Intel(R) Advanced Matrix Extensions (Intel(R) AMX) with INT8 and BF16, Lnx 2.00GHz lp64 gnu_thread
MKL_VERBOSE SGEMM(T,N,1536,64,384,0x1,0x2,384,0x3,384,0x4,0x5,1536) 4.41ms CNR:OFF Dyn:0 FastMM:1 TID:0  NThr:2
onednn_verbose,v1,info,cpu,runtime:OpenMP,nthr:2
onednn_verbose,v1,primitive,exec,cpu,eltwise,jit:avx10_1_512_amx,forward_training,src:f32::blocked:ab::f0,,64x384,0.01
{\"examples_per_second\": 1.0}";
        let p = Probe::parse(f32);
        assert!(p.mkl_path.as_deref().is_some_and(|s| s.contains("AMX")));
        assert!(!p.products_on_amx(), "{}", p.short());
        assert!(
            p.describe().contains("no matmul built for AMX"),
            "{}",
            p.describe()
        );
        // A oneDNN matmul built for AMX, or an MKL bf16 GEMM on the AMX path: on tiles.
        let bf16 = f32.replace(
            "eltwise,jit:avx10_1_512_amx",
            "matmul,brg_matmul:avx10_1_512_amx",
        );
        assert!(Probe::parse(&bf16).products_on_amx());
        assert!(Probe::parse(&bf16)
            .describe()
            .contains("1 matmuls built for AMX"));
        let mkl = f32
            .replace("SGEMM(", "GEMM_BF16BF16F32(")
            .replace("eltwise", "reorder");
        assert!(
            Probe::parse(&mkl).products_on_amx(),
            "{}",
            Probe::parse(&mkl).short()
        );
    }
}
