//! Benchmark: all-MiniLM-L6-v2 sentences per second, our candle encoder against the fastest
//! float32 CPU peers — ONNX Runtime and OpenVINO running an O2-optimised ONNX export of the
//! same checkpoint — and sentence-transformers on PyTorch, measured in the same run on the
//! same texts.
//!
//! ```text
//! cargo run --release --bin bench_embed [-- --n 512 --runs 5 --threads 2]
//! ```
//!
//! Texts: the first `--n` non-empty `extract`s of `wiki-leads-en`, in file order, each
//! whole — exactly what `scripts/python/bench_st.py` and `bench_onnx.py` read (their
//! `--corpus` is given the file the Rust side resolved, and the sha256 of the `\n`-joined
//! texts must agree on every side, else the run stops).
//!
//! Systems, all float32 on CPU with batch size 64, max length 256, `--threads` threads,
//! tokenisation, mean pooling and L2 normalisation included in the time:
//!
//! | system | forward pass |
//! |---|---|
//! | workbench `BertEncoder`, fused | `encode::fast_bert` (padding-free, fused; the default) |
//! | workbench `BertEncoder`, candle `BertModel` | candle-transformers' stock BERT on padded batches |
//! | ONNX Runtime | O2-optimised ONNX export, `ORT_ENABLE_ALL`, intra-op `--threads`, inter-op 1 (`bench_onnx.py`) |
//! | ONNX Runtime, one batch per thread | the same session run on `--threads` batches at a time, intra-op 1 |
//! | OpenVINO, LATENCY / THROUGHPUT hint | the same ONNX file, CPU plugin, `--threads` inference threads, f32 precision (`bench_onnx.py`) |
//! | sentence-transformers | `model.encode` on PyTorch (`bench_st.py`) |
//!
//! Each Python peer runs as one process per round (one untimed warm-up encode, then one
//! timed encode); the ONNX export is made (and cached) before the first round. Each
//! workbench system gets one untimed warm-up encode, then `--runs` rounds; in each round
//! every system encodes all texts once, in an order that rotates from round to round, so
//! machine load falls on all alike. Reported: sentences/s = n / median wall time per
//! system; the ratio of medians against the **fastest peer** (the one with the smallest
//! median), and the median of the per-round ratios; CPU use (process CPU seconds / wall
//! seconds over the timed encodes, a system's own process only); and the cosine between each
//! system's vectors and the fused encoder's, text by text (minimum over the texts).
//! Needs the peers venv (`bash scripts/bench` makes it). Writes `data/results/bench-embed/`;
//! its `config.json` records the arguments and the machine (`workbench::machine::Machine`).

use anyhow::{bail, ensure, Context, Result};
use clap::Parser;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;
use workbench::assets::{sha256_file, Assets};
use workbench::bench::{median, process_cpu_seconds, BenchRun, PythonPeers};
use workbench::display::Table;
use workbench::encode::{dot, Backend, BertEncoder, EncoderParams};
use workbench::load::wikipedia_corpus;
use workbench::machine::load_average;

const NAME: &str = "bench-embed";
const CORPUS: &str = "wiki-leads-en";
const MODEL: &str = "all-minilm-l6-v2";
/// sentence-transformers' `max_seq_length` for the model; the peer scripts fix it too.
const MAX_LENGTH: usize = 256;
const SUMMARY_FILE: &str = "bench.md";

/// The Python peers, by key: (key, label, script, extra arguments).
const PEERS: &[(&str, &str, &str, &[&str])] = &[
    (
        "onnxruntime",
        "ONNX Runtime (O2 ONNX export)",
        "bench_onnx.py",
        &["--engine", "onnxruntime"],
    ),
    (
        "onnxruntime-per-thread",
        "ONNX Runtime, one batch per thread (O2 ONNX export)",
        "bench_onnx.py",
        &["--engine", "onnxruntime", "--ort-mode", "per-thread"],
    ),
    (
        "openvino-latency",
        "OpenVINO, LATENCY hint (O2 ONNX export)",
        "bench_onnx.py",
        &["--engine", "openvino", "--ov-hint", "latency"],
    ),
    (
        "openvino-throughput",
        "OpenVINO, THROUGHPUT hint (O2 ONNX export)",
        "bench_onnx.py",
        &["--engine", "openvino", "--ov-hint", "throughput"],
    ),
    (
        "sentence-transformers",
        "sentence-transformers (PyTorch)",
        "bench_st.py",
        &[],
    ),
];

#[derive(Parser, Serialize, Debug)]
#[command(
    about = "MiniLM sentences/s: candle encoder vs ONNX Runtime, OpenVINO and sentence-transformers (same run, same texts)"
)]
struct Args {
    /// Texts: the first N non-empty wiki-leads-en extracts, in file order.
    #[arg(long, default_value_t = 512)]
    n: usize,
    /// Texts per batch (every side).
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    /// Threads on every side (our rayon pool; ORT intra-op; OpenVINO inference threads; torch).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Timed rounds (each system encodes all texts once per round; medians are reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Leave out candle-transformers' stock BertModel (the slowest system).
    #[arg(long)]
    skip_candle: bool,
    /// Python peers to run, comma-separated (onnxruntime, onnxruntime-per-thread,
    /// openvino-latency, openvino-throughput, sentence-transformers).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "onnxruntime,onnxruntime-per-thread,openvino-latency,openvino-throughput,sentence-transformers"
    )]
    peers: Vec<String>,
    /// Python of the peers venv (default: `$PEERS_VENV/bin/python`, see `PythonPeers::default_python`).
    #[arg(long, env = "PEERS_PYTHON")]
    #[serde(skip)]
    python: Option<PathBuf>,
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

/// What one peer process (`--runs 1`) prints: the fields used here (the rest is kept raw).
#[derive(Deserialize, Serialize, Debug, Clone)]
struct PeerOut {
    num_texts: usize,
    texts_sha256: String,
    avg_tokens: f64,
    truncated_texts: usize,
    run_s: Vec<f64>,
    cpu_s: Vec<f64>,
}

/// Run one peer script with `extra` arguments, the common ones and `more`; its last JSON line.
fn run_python(
    peers: &PythonPeers,
    args: &Args,
    script: &str,
    extra: &[&str],
    corpus: &Path,
    more: &[OsString],
) -> Result<serde_json::Value> {
    let mut argv: Vec<OsString> = extra.iter().map(OsString::from).collect();
    argv.extend([
        "--corpus".into(),
        corpus.into(),
        "--n".into(),
        args.n.to_string().into(),
        "--batch-size".into(),
        args.batch_size.to_string().into(),
        "--threads".into(),
        args.threads.to_string().into(),
    ]);
    argv.extend_from_slice(more);
    let out = peers
        .run(script, argv)
        .with_context(|| format!("peer {script} {extra:?}"))?;
    Ok(out.json()?)
}

/// Little-endian float32 vectors, `n × dim` row-major, as the peer scripts write them.
fn read_vectors(path: &Path, n: usize, dim: usize) -> Result<Vec<Vec<f32>>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    ensure!(
        bytes.len() == n * dim * 4,
        "{}: {} bytes, expected {n} × {dim} float32 = {}",
        path.display(),
        bytes.len(),
        n * dim * 4
    );
    Ok(bytes
        .chunks_exact(dim * 4)
        .map(|row| {
            row.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        })
        .collect())
}

/// Cosine of each pair of vectors: (min, mean).
fn agreement(a: &[Vec<f32>], b: &[Vec<f32>]) -> (f64, f64) {
    let cos: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(x, y)| {
            let d = dot(x, y) as f64;
            d / ((dot(x, x) as f64).sqrt() * (dot(y, y) as f64).sqrt()).max(1e-30)
        })
        .collect();
    (
        cos.iter().copied().fold(f64::INFINITY, f64::min),
        cos.iter().sum::<f64>() / cos.len() as f64,
    )
}

/// What runs a system.
enum Runner<'a> {
    Ours(&'a BertEncoder),
    Peer {
        key: &'static str,
        script: &'static str,
        extra: &'static [&'static str],
    },
}

/// One system's timed encodes.
struct System<'a> {
    label: String,
    runner: Runner<'a>,
    wall_s: Vec<f64>,
    cpu_s: Vec<f64>,
    /// Cosine against the fused encoder's vectors: (min, mean).
    cosine: Option<(f64, f64)>,
    /// The peer's first JSON output.
    peer: Option<serde_json::Value>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    ensure!(
        args.n > 0 && args.runs > 0 && args.threads > 0 && args.batch_size > 0,
        "--n, --runs, --threads and --batch-size must be at least 1"
    );
    for p in &args.peers {
        ensure!(
            PEERS.iter().any(|(k, ..)| k == p),
            "--peers: unknown peer `{p}` (known: {})",
            PEERS
                .iter()
                .map(|(k, ..)| *k)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    ensure!(!args.peers.is_empty(), "--peers: name at least one peer");
    // candle's matrix products size their rayon split by RAYON_NUM_THREADS and its
    // element-wise ops use a pool of CANDLE_NUM_THREADS (read on first use): pin both.
    std::env::set_var("RAYON_NUM_THREADS", args.threads.to_string());
    std::env::set_var("CANDLE_NUM_THREADS", args.threads.to_string());
    // No progress bars inside the timed encodes.
    std::env::set_var("WORKBENCH_PROGRESS", "0");

    let root = workbench::paths::project_root()?;
    let peers = PythonPeers::new(&root, args.python.clone());
    // A missing peers venv stops the run before any work.
    for &(key, _, script, _) in PEERS {
        if args.peers.iter().any(|p| p == key) {
            peers.command(script)?;
        }
    }
    let assets = Assets::load()?;
    let config = Config {
        args: &args,
        corpus: CORPUS,
        model: MODEL,
        max_length: MAX_LENGTH,
        inputs: assets.input_checksums([CORPUS, MODEL])?,
        program_sha256: workbench::results::executable_sha256()?,
    };
    let BenchRun { exp, machine } = BenchRun::start(NAME, &config, SUMMARY_FILE)?;
    let out = &exp.out;
    let load_start = machine.load_before.clone();
    println!("{}", machine.summary());

    // The texts the peer scripts document: first N non-empty extracts, file order, whole.
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
    // Same digest as the peer scripts: sha256 of the texts joined by "\n".
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
    let dim = encoders[0].1.dim();
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

    // The ONNX export (cached by the model's sha256) before any timing.
    if args
        .peers
        .iter()
        .any(|p| p.starts_with("onnx") || p.starts_with("openvino"))
    {
        let t = Instant::now();
        let v = run_python(
            &peers,
            &args,
            "bench_onnx.py",
            &["--engine", "onnxruntime", "--export-only"],
            &corpus_file,
            &[],
        )?;
        println!(
            "ONNX export ready in {:.1} s: {}",
            t.elapsed().as_secs_f64(),
            v["onnx"].as_str().unwrap_or("?")
        );
    }

    // Warm-up (untimed), and the reference vectors for the agreement checks.
    let mut systems: Vec<System> = Vec::new();
    let mut reference: Vec<Vec<f32>> = Vec::new();
    for (label, enc) in &encoders {
        let t = Instant::now();
        let v = enc.embed(&texts)?;
        println!("warm-up {label}: {:.1} s", t.elapsed().as_secs_f64());
        let cosine = if reference.is_empty() {
            reference = v;
            None
        } else {
            Some(agreement(&reference, &v))
        };
        systems.push(System {
            label: label.clone(),
            runner: Runner::Ours(enc),
            wall_s: Vec::new(),
            cpu_s: Vec::new(),
            cosine,
            peer: None,
        });
    }
    for &(key, label, script, extra) in PEERS {
        if args.peers.iter().any(|p| p == key) {
            systems.push(System {
                label: label.to_string(),
                runner: Runner::Peer { key, script, extra },
                wall_s: Vec::new(),
                cpu_s: Vec::new(),
                cosine: None,
                peer: None,
            });
        }
    }

    // Rounds: every system once per round, starting position rotating.
    let mut peer_runs: Vec<serde_json::Value> = Vec::new();
    let k = systems.len();
    for round in 0..args.runs {
        for j in 0..k {
            let s = (round + j) % k;
            let sys = &mut systems[s];
            match sys.runner {
                Runner::Ours(enc) => {
                    let (c0, t) = (process_cpu_seconds(), Instant::now());
                    std::hint::black_box(enc.embed(&texts)?);
                    sys.wall_s.push(t.elapsed().as_secs_f64());
                    sys.cpu_s.push(process_cpu_seconds() - c0);
                }
                Runner::Peer { key, script, extra } => {
                    let vectors: PathBuf = out.path(&format!("vectors_{key}.f32"));
                    let mut more: Vec<OsString> = vec!["--runs".into(), "1".into()];
                    if round == 0 {
                        more.extend(["--vectors".into(), vectors.clone().into_os_string()]);
                    }
                    let raw = run_python(&peers, &args, script, extra, &corpus_file, &more)?;
                    let p: PeerOut = serde_json::from_value(raw.clone())
                        .with_context(|| format!("output of the peer {key}"))?;
                    if p.texts_sha256 != texts_sha256 || p.num_texts != texts.len() {
                        bail!(
                            "text mismatch: the peer {key} encoded {} texts with sha256 {}, ours are {} with {}",
                            p.num_texts,
                            p.texts_sha256,
                            texts.len(),
                            texts_sha256
                        );
                    }
                    ensure!(
                        p.run_s.len() == 1 && p.cpu_s.len() == 1,
                        "peer {key}: expected one timed run, got {:?}",
                        p.run_s
                    );
                    sys.wall_s.push(p.run_s[0]);
                    sys.cpu_s.push(p.cpu_s[0]);
                    if round == 0 {
                        let v = read_vectors(&vectors, texts.len(), dim)?;
                        sys.cosine = Some(agreement(&reference, &v));
                        std::fs::remove_file(&vectors)
                            .with_context(|| format!("removing {}", vectors.display()))?;
                    }
                    sys.peer.get_or_insert(raw.clone());
                    peer_runs.push(serde_json::json!({"peer": key, "round": round, "output": raw}));
                }
            }
            let last = sys.wall_s.last().copied().unwrap_or(f64::NAN);
            println!(
                "round {}/{}: {:<55} {last:7.2} s  ({:.1} sentences/s, CPU {:.2})",
                round + 1,
                args.runs,
                sys.label,
                texts.len() as f64 / last,
                sys.cpu_s.last().copied().unwrap_or(f64::NAN) / last
            );
        }
    }
    let load_end = load_average();

    // The fastest peer (smallest median wall time) is the ratios' denominator.
    let n = texts.len() as f64;
    let med = |s: &System| median(&s.wall_s);
    let is_peer = |s: &System| matches!(s.runner, Runner::Peer { .. });
    let fastest = (0..k)
        .filter(|&i| is_peer(&systems[i]))
        .min_by(|&a, &b| med(&systems[a]).total_cmp(&med(&systems[b])))
        .context("no peer ran")?;
    let fastest_label = systems[fastest].label.clone();
    let fastest_med = med(&systems[fastest]);

    let mut peer_versions: Vec<String> = Vec::new();
    for p in systems.iter().filter_map(|s| s.peer.as_ref()) {
        let get = |k: &str| p.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
        let v = match get("peer").as_str() {
            "sentence-transformers" => format!(
                "sentence-transformers {} / torch {}",
                get("sentence_transformers_version"),
                get("torch_version")
            ),
            _ => format!(
                "{} {}",
                get("engine"),
                get("engine_version").split('-').next().unwrap_or("")
            ),
        };
        if !peer_versions.contains(&v) {
            peer_versions.push(v);
        }
    }
    let mut t = Table::new([
        "system",
        "sentences/s (median)",
        "× fastest peer",
        "median of per-round ratios",
        "median wall (s)",
        "wall range (s)",
        "CPU s / wall s",
        "cosine vs fused (min)",
    ])
    .caption(format!(
        "all-MiniLM-L6-v2, {} wiki-leads-en extracts ({avg_tokens:.1} tokens avg, {truncated} truncated at {MAX_LENGTH}), \
         batch {}, float32 CPU, {} threads, tokenisation, mean pooling and L2 normalisation included; \
         median of {} interleaved rounds after a warm-up. Ratios against the fastest peer, {fastest_label}. \
         Peers: {}.",
        texts.len(),
        args.batch_size,
        args.threads,
        args.runs,
        peer_versions.join(", "),
    ));
    let mut summary = serde_json::Map::new();
    let mut rows = serde_json::Map::new();
    for s in &systems {
        let m = med(s);
        let lo = s.wall_s.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = s.wall_s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let cpu_ratio = s.cpu_s.iter().sum::<f64>() / s.wall_s.iter().sum::<f64>();
        // Rounds are interleaved, so each round's ratio compares runs made under
        // the same machine load: steadier than the ratio of medians.
        let round_ratios: Vec<f64> = systems[fastest]
            .wall_s
            .iter()
            .zip(&s.wall_s)
            .map(|(p, o)| p / o)
            .collect();
        let round_ratio = median(&round_ratios);
        t.push([
            s.label.clone(),
            format!("{:.1}", n / m),
            format!("{:.2}", fastest_med / m),
            format!("{round_ratio:.2}"),
            format!("{m:.2}"),
            format!("{lo:.2}–{hi:.2}"),
            format!("{cpu_ratio:.2}"),
            s.cosine
                .map(|(min, _)| format!("{min:.7}"))
                .unwrap_or_else(|| "(reference)".into()),
        ])?;
        rows.insert(
            s.label.clone(),
            serde_json::json!({
                "sentences_per_s": n / m,
                "tokens_per_s": total_tokens / m,
                "ratio_vs_fastest_peer": fastest_med / m,
                "median_round_ratio_vs_fastest_peer": round_ratio,
                "median_wall_s": m,
                "wall_s": s.wall_s,
                "cpu_s": s.cpu_s,
                "cpu_per_wall": cpu_ratio,
                "cosine_vs_fused_min": s.cosine.map(|c| c.0),
                "cosine_vs_fused_mean": s.cosine.map(|c| c.1),
                "peer": s.peer,
            }),
        );
    }
    t.write_csv(&out.path("bench.csv"))?;
    let peer_tokens: Vec<String> = systems
        .iter()
        .filter_map(|s| {
            let p = s.peer.as_ref()?;
            Some(format!(
                "{} {:.2} / {}",
                s.label,
                p.get("avg_tokens")?.as_f64()?,
                p.get("truncated_texts")?.as_u64()?
            ))
        })
        .collect();
    let notes = [
        format!(
            "Same texts on every side: sha256 {texts_sha256}. Tokens (average / truncated): ours {avg_tokens:.2} / {truncated}; {}.",
            peer_tokens.join("; ")
        ),
        "Cosine: each system's vectors against the fused encoder's, text by text, all texts.".to_string(),
        "CPU s / wall s: the system's own process, summed over its timed encodes (2 = both cores busy).".to_string(),
        format!("Load average (1/5/15 min): start {load_start}, end {load_end}."),
    ];
    let md = format!(
        "{}\n{}\n{}\n",
        machine.summary(),
        t.to_markdown(),
        notes.iter().map(|l| format!("\n{l}")).collect::<String>()
    );
    std::fs::write(out.path(SUMMARY_FILE), &md)?;
    std::fs::write(
        out.path("peer_runs.json"),
        serde_json::to_string_pretty(&peer_runs)?,
    )?;

    let fused_med = med(&systems[0]);
    summary.insert("systems".into(), rows.into());
    summary.insert("fastest_peer".into(), fastest_label.into());
    summary.insert(
        "ratio_fused_vs_fastest_peer".into(),
        (fastest_med / fused_med).into(),
    );
    summary.insert("texts".into(), texts.len().into());
    summary.insert("texts_sha256".into(), texts_sha256.into());
    summary.insert("avg_tokens".into(), avg_tokens.into());
    summary.insert("load_avg_start".into(), load_start.into());
    summary.insert("load_avg_end".into(), load_end.into());
    exp.finish(serde_json::Value::Object(summary))?;
    println!("\n{md}");
    Ok(())
}
