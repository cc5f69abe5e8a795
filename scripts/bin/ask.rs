//! Answer one question from passages with a GGUF generative reader, printing the rendered
//! prompt, the answer, token counts, timings and peak memory.
//!
//! ```text
//! cargo run --release --bin ask -- --model qwen2.5-coder-1.5b-instruct-gguf \
//!     --question "Who wrote Hamlet?" --passage "Hamlet is a tragedy by William Shakespeare."
//! ```

use anyhow::{Context as _, Result};
use clap::Parser;
use std::path::PathBuf;
use workbench::read::generative::{GenerativeReader, Llm, LoadOptions, ReaderOptions, Requantize};
use workbench::read::{Context, Reader};

#[derive(Parser, Debug)]
#[command(about = "Answer a question from passages with a GGUF language model")]
struct Args {
    /// Asset name of the GGUF model (data/assets.toml).
    #[arg(long, default_value = "qwen2.5-coder-1.5b-instruct-gguf")]
    model: String,
    /// A GGUF file to load instead of the asset.
    #[arg(long)]
    gguf: Option<PathBuf>,
    /// The question.
    #[arg(long)]
    question: String,
    /// A passage (repeat for several, rank order).
    #[arg(long)]
    passage: Vec<String>,
    /// Read passages from a file, one per line (after any --passage).
    #[arg(long)]
    passages_file: Option<PathBuf>,
    /// Maximum generated tokens.
    #[arg(long, default_value_t = 48)]
    max_new_tokens: usize,
    /// Context window (default: the model's, capped).
    #[arg(long)]
    context_len: Option<usize>,
    /// Requantise Q4_1/Q5_0/Q5_1 weights to Q8_0: auto, never, always.
    #[arg(long, default_value = "auto")]
    requantize: String,
    /// Prefill through f32 copies of the matmul weights (LoadOptions::f32_prefill).
    #[arg(long)]
    f32_prefill: bool,
    /// Skip the warm-up at load (LoadOptions::warm_up): the first question then pays the
    /// weights' one-off preparation for the matrix kernels.
    #[arg(long)]
    no_warm_up: bool,
    /// Read the question this many more times after the first (timing: the first read is
    /// the untimed warm one, the repeats are what a warm model costs).
    #[arg(long, default_value_t = 0)]
    repeat: usize,
    /// Print, as the last line, a JSON object with every read's wall time, token counts,
    /// prefill tokens/s and decode passes/s (the first read, then the repeats).
    #[arg(long)]
    json: bool,
}

/// One read's timings, as `--json` prints them.
#[derive(serde::Serialize)]
struct ReadTiming {
    wall_s: f64,
    prompt_tokens: usize,
    generated_tokens: usize,
    prefill_tok_s: f64,
    decode_passes_s: f64,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let requantize = match args.requantize.as_str() {
        "auto" => Requantize::Auto,
        "never" => Requantize::Never,
        "always" => Requantize::Always,
        other => anyhow::bail!("--requantize {other}: expected auto, never or always"),
    };
    let opts = LoadOptions {
        requantize,
        context_len: args.context_len,
        f32_prefill: args.f32_prefill,
        warm_up: !args.no_warm_up,
        ..LoadOptions::default()
    };
    let llm = match &args.gguf {
        Some(p) => Llm::load(p, &opts)?,
        None => Llm::from_asset(&args.model, &opts)?,
    };
    let info = llm.info();
    let model_name = info.name.clone();
    println!(
        "model: {} ({}, {} layers, context {}), loaded in {:.2} s (warm-up {:.2} s), {} tensors requantised, weights {:.0} MB",
        info.name,
        info.architecture,
        info.n_layer,
        info.context_len,
        info.load_secs,
        info.warm_up_secs,
        info.requantized_tensors,
        info.weight_bytes as f64 / 1e6
    );
    let mut passages: Vec<Context> = args
        .passage
        .iter()
        .enumerate()
        .map(|(i, t)| Context::new(format!("p{}", i + 1), t.clone()))
        .collect();
    if let Some(f) = &args.passages_file {
        let text = std::fs::read_to_string(f).with_context(|| format!("{}", f.display()))?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let n = passages.len() + 1;
            passages.push(Context::new(format!("p{n}"), line.trim().to_string()));
        }
    }
    let mut ro = ReaderOptions::default();
    ro.params.max_new_tokens = args.max_new_tokens;
    let mut reader = GenerativeReader::new(llm, ro)?;
    let mut timings = Vec::with_capacity(args.repeat + 1);
    let mut timed_read = |reader: &mut GenerativeReader| -> Result<_> {
        let t = std::time::Instant::now();
        let a = reader.read(&args.question, &passages)?;
        timings.push(ReadTiming {
            wall_s: t.elapsed().as_secs_f64(),
            prompt_tokens: a.usage.prompt_tokens,
            generated_tokens: a.usage.generated_tokens,
            prefill_tok_s: a.usage.prefill_tokens_per_sec(),
            decode_passes_s: a.usage.decode_tokens_per_sec(),
        });
        Ok(a)
    };
    let a = timed_read(&mut reader)?;
    for _ in 0..args.repeat {
        timed_read(&mut reader)?;
    }
    println!(
        "---- prompt ----\n{}---- end of prompt ----",
        reader.last_prompt()
    );
    println!("answer: {}", a.text);
    println!("abstained: {}", a.abstained);
    println!(
        "passages used: {:?}; dropped: {:?}",
        a.passage_ids, a.dropped
    );
    let u = &a.usage;
    println!(
        "prompt tokens: {}, generated: {}; prefill {:.2} s ({:.1} tok/s), decode {:.2} s ({:.1} tok/s), total {:.2} s",
        u.prompt_tokens,
        u.generated_tokens,
        u.prefill_secs,
        u.prefill_tokens_per_sec(),
        u.decode_secs,
        u.decode_tokens_per_sec(),
        u.total().as_secs_f64()
    );
    for (i, t) in timings.iter().enumerate().skip(1) {
        println!(
            "repeat {i}: {:.2} s, prefill {:.1} tok/s, decode {:.1} tok/s, {} generated",
            t.wall_s, t.prefill_tok_s, t.decode_passes_s, t.generated_tokens
        );
    }
    if let Some(bytes) = workbench::machine::peak_resident_bytes(None) {
        println!(
            "peak RSS (VmHWM): {:.0} MiB",
            bytes as f64 / (1u64 << 20) as f64
        );
    }
    if args.json {
        println!(
            "{}",
            serde_json::json!({ "model": model_name, "reads": timings })
        );
    }
    Ok(())
}
