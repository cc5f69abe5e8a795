//! Training throughput against PyTorch on the same batches, shared by `train_reader --bench`
//! and `train_reranker --bench`. A binary includes it with
//! `#[path = "../common/train_bench.rs"] mod train_bench;`.
//!
//! The binary writes the examples (JSONL) and the first `steps` batches of epoch 0 (JSON)
//! into the result folder; [`rounds`] then alternates a candle run and a run of the peer
//! (`scripts/python/train_torch_peer.py`) `rounds` times, and writes `bench.md`,
//! `bench.csv` and `bench.json` with the ratio of the medians.

use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use workbench::bench::{median, PythonPeers};
use workbench::display::Table;
use workbench::machine::load_average;
use workbench::train::{batching, TrainConfig};

/// `--bench`, `--rounds`, `--python`: flattened into the binary's clap `Args`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchFlags {
    /// Benchmark instead: this many updates of candle and of the PyTorch peer on the same
    /// batches (no training run; results in `data/results/bench-train-*`).
    #[arg(long)]
    pub bench: Option<usize>,
    /// Interleaved rounds of the benchmark.
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// Python of the peers venv (default: `$PEERS_PYTHON`, else `$PEERS_VENV/bin/python`,
    /// see `PythonPeers::default_python`).
    #[arg(long, env = "WORKBENCH_PEERS_PYTHON")]
    pub python: Option<PathBuf>,
}

impl BenchFlags {
    /// The peers of a benchmark run, checked before any work (a missing peers venv is an
    /// error naming it); `None` without `--bench`.
    pub fn peers(&self, root: &Path) -> Result<Option<(usize, PythonPeers)>> {
        let Some(steps) = self.bench else {
            return Ok(None);
        };
        let peers = PythonPeers::new(root, self.python.clone());
        peers.command(PEER)?;
        Ok(Some((steps, peers)))
    }
}

/// The PyTorch peer: the reader's and the cross-encoder's training loops.
pub const PEER: &str = "train_torch_peer.py";

/// One comparison.
pub struct TrainBench {
    /// What is counted per second ("features", "pairs").
    pub unit: &'static str,
    /// Updates per round.
    pub steps: usize,
    /// Interleaved rounds.
    pub rounds: usize,
    /// Examples (of `unit`) in the `steps` batches.
    pub examples: usize,
    /// Threads of both sides.
    pub threads: usize,
    /// The peer's arguments (the examples, the batches, the model, the task…).
    pub peer_args: Vec<OsString>,
    /// What the batches are, for the sentence under the table.
    pub batches: String,
    /// Multiply-adds of the encoder's matrix products in the `steps` updates (forward and
    /// backward), see [`encoder_macs`]: with the measured f32 peak, the ceiling.
    pub macs: f64,
}

/// Multiply-adds of a BERT encoder's matrix products (query/key/value, output, the two
/// feed-forward layers, the two attention products) for batches of `(rows, len)` padded
/// sequences, forward and backward (the backward pass twice the forward's: the gradients
/// of the inputs and of the weights). `base_config` is the model's `config.json`.
pub fn encoder_macs(base_config: &Path, batches: &[(usize, usize)]) -> Result<f64> {
    let text = std::fs::read_to_string(base_config)
        .with_context(|| format!("{}", base_config.display()))?;
    let c: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: not JSON", base_config.display()))?;
    let field = |name: &str| {
        c[name]
            .as_u64()
            .map(|v| v as f64)
            .with_context(|| format!("{}: no `{name}`", base_config.display()))
    };
    let (h, layers, inter) = (
        field("hidden_size")?,
        field("num_hidden_layers")?,
        field("intermediate_size")?,
    );
    let forward: f64 = batches
        .iter()
        .map(|&(rows, len)| {
            let (rows, len) = (rows as f64, len as f64);
            rows * layers * (len * h * (4.0 * h + 2.0 * inter) + 2.0 * len * len * h)
        })
        .sum();
    Ok(3.0 * forward)
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

/// The first `steps` batches of epoch 0, length-grouped as training groups them (examples of
/// `lengths`), written to `dir/batches.json`; returns the file and the batches.
pub fn first_batches(
    dir: &Path,
    lengths: &[usize],
    train: &TrainConfig,
    steps: usize,
) -> Result<(PathBuf, Vec<Vec<usize>>)> {
    let mut batches = batching::length_grouped_batches(
        lengths,
        train.batch_size,
        train.bucket_batches,
        train.seed,
        0,
    )?;
    if batches.len() < steps {
        bail!(
            "only {} batches in an epoch, fewer than --bench {steps}",
            batches.len()
        );
    }
    batches.truncate(steps);
    let path = dir.join("batches.json");
    std::fs::write(&path, serde_json::to_vec(&batches)?)?;
    Ok((path, batches))
}

/// The peer's arguments: `task` (its `--task` and options), the examples and batches files,
/// the base model's folder (that of `base_config`, its `config.json`), threads and learning
/// rate of `train`.
pub fn peer_args(
    task: &[&str],
    examples: PathBuf,
    batches: PathBuf,
    base_config: &Path,
    train: &TrainConfig,
) -> Result<Vec<OsString>> {
    let base = base_config.parent().context("base model folder")?;
    let mut args: Vec<OsString> = task.iter().map(OsString::from).collect();
    args.extend([
        "--features".into(),
        examples.into_os_string(),
        "--batches".into(),
        batches.into_os_string(),
        "--model".into(),
        base.as_os_str().to_owned(),
        "--threads".into(),
        train.threads.to_string().into(),
        "--lr".into(),
        train.lr.to_string().into(),
    ]);
    Ok(args)
}

/// Alternate `candle()` (a fresh model trained for the `steps` batches, returning examples
/// per second and seconds) with the peer, `b.rounds` times; write the tables into `dir` and
/// return the ratio of the medians (candle / PyTorch).
pub fn rounds(
    b: &TrainBench,
    dir: &Path,
    machine: &str,
    peers: &PythonPeers,
    mut candle: impl FnMut() -> Result<(f64, f64)>,
) -> Result<f64> {
    let per_s = format!("{}_per_s", b.unit);
    let mut rows = Table::new([
        "round",
        "system",
        "updates",
        b.unit,
        "seconds",
        per_s.as_str(),
        "load",
    ]);
    let (mut ours_all, mut peer_all) = (Vec::new(), Vec::new());
    for round in 1..=b.rounds {
        let (ours, secs) = candle()?;
        ours_all.push(ours);
        rows.push([
            round.to_string(),
            "candle (workbench)".into(),
            b.steps.to_string(),
            b.examples.to_string(),
            format!("{secs:.1}"),
            format!("{ours:.2}"),
            load_average(),
        ])?;
        println!(
            "round {round}: candle {ours:.2} {}/s (load {})",
            b.unit,
            load_average()
        );
        let r: serde_json::Value = peers.run(PEER, b.peer_args.clone())?.json()?;
        let peer = r["examples_per_second"]
            .as_f64()
            .context("peer examples_per_second")?;
        peer_all.push(peer);
        rows.push([
            round.to_string(),
            format!("PyTorch {} (peer)", r["torch"].as_str().unwrap_or("?")),
            b.steps.to_string(),
            b.examples.to_string(),
            format!("{:.1}", r["seconds"].as_f64().unwrap_or(0.0)),
            format!("{peer:.2}"),
            load_average(),
        ])?;
        println!(
            "round {round}: PyTorch {peer:.2} {}/s (load {})",
            b.unit,
            load_average()
        );
    }
    let (ours_med, peer_med) = (median(&ours_all), median(&peer_all));
    let ratio = ours_med / peer_med;
    // The ceiling: the products' multiply-adds at the measured f32 peak.
    let peak = workbench::machine::measure_peak(b.threads);
    let rate = |per_s: f64| b.macs * per_s / b.examples as f64;
    let pct = |per_s: f64| 100.0 * rate(per_s) / peak.f32_fmas_per_s;
    let md = format!(
        "{machine}\n\n{}\n\ncandle / PyTorch throughput: **{ratio:.2}×** (medians of {} interleaved rounds: candle {ours_med:.2}, PyTorch {peer_med:.2} {}/s; same {} {}, {} threads; load {} at the end).\n\nCeiling: the {} updates' matrix products are {:.1} G multiply-adds (forward and backward, padded batches); at the measured f32 peak of {:.0} G multiply-adds/s ({}, {} threads) they take {:.2} s, {:.0} {}/s. candle ran {:.0} G/s ({:.0} % of the peak), PyTorch {:.0} G/s ({:.0} %), element-wise work and the optimizer included.\n",
        rows.to_markdown(),
        b.rounds,
        b.unit,
        b.steps,
        b.batches,
        b.threads,
        load_average(),
        b.steps,
        b.macs / 1e9,
        peak.f32_fmas_per_s / 1e9,
        peak.f32_kernel,
        peak.threads,
        b.macs / peak.f32_fmas_per_s,
        b.examples as f64 * peak.f32_fmas_per_s / b.macs,
        b.unit,
        rate(ours_med) / 1e9,
        pct(ours_med),
        rate(peer_med) / 1e9,
        pct(peer_med),
    );
    std::fs::write(
        dir.join("bench.json"),
        serde_json::to_vec_pretty(&serde_json::json!({
            "ratio": ratio, "candle_median": ours_med, "pytorch_median": peer_med,
            "candle": ours_all, "pytorch": peer_all, "updates": b.steps, "rounds": b.rounds,
            "threads": b.threads, "unit": b.unit, "load_at_end": load_average(),
            "macs": b.macs, "f32_peak_fmas_per_s": peak.f32_fmas_per_s, "f32_kernel": peak.f32_kernel,
        }))?,
    )?;
    println!("{md}");
    rows.write_csv(&dir.join("bench.csv"))?;
    std::fs::write(dir.join("bench.md"), md)?;
    Ok(ratio)
}
