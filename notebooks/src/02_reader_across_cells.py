"""Cells of notebooks/02_reader_across_cells.ipynb (written by notebooks/make_notebooks.py)."""

CELLS = [
    ("markdown", """
# 02 · A reader loaded in one cell, used in the next

A notebook loads a model once and uses it in the cells that follow. This one loads a
**Qwen2.5-Coder-0.5B-Instruct** generative reader (Q4_K_M GGUF, `qwen2` architecture) in one
cell and asks it two questions about a passage in the next two; each reading cell asserts
the answer, so `scripts/test` fails if a later cell cannot use the reader.

The reader's tokenizer splits text with Qwen2's pre-tokenizer regex (`\\p{L}`, `\\p{N}`, a
`(?!\\S)` lookahead) before byte-level BPE. The workbench runs that regex on the `tokenizers`
crate's pure-Rust backend (fancy-regex), which keeps no per-library static tables, so the
tokenizer works in whichever evcxr cell calls it.

The outputs committed with this notebook come from an execution at the **quick** scale (`scripts/reproduce`'s default; the notebook's `metadata.workbench` has its commit and date). Nothing here depends on the scale.
"""),
    ("code", """
:dep workbench = { path = "../workbench", features = ["plot", "dense", "faiss", "tsne", "llm", "parquet"] }
// Every notebook names the same features: the kernels compile the library once for all of them.
:dep serde_json = "1"
"""),
    ("code", """
use workbench::read::generative::{GenerativeReader, Llm, LoadOptions, ReaderOptions};
use workbench::read::{Context, Reader};
let model = "qwen2.5-coder-0.5b-instruct-gguf"; // an asset name (configs/assets.toml)
let t0 = std::time::Instant::now();
let llm = Llm::from_asset(model, &LoadOptions::default())?;
assert_eq!(llm.architecture(), "qwen2");
let mut options = ReaderOptions::default();
options.params.max_new_tokens = 16;
let mut reader = GenerativeReader::new(llm, options)?;
println!("loaded {model} ({}) in {:.1} s", reader.name(), t0.elapsed().as_secs_f64());
"""),
    ("markdown", """
Two questions about one passage, each in its own cell, with the reader built above.
"""),
    ("code", """
let passage = Context::new("eiffel", "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. \\
It was built by Gustave Eiffel's company for the 1889 World's Fair.");
let a = reader.read("In which city is the Eiffel Tower?", std::slice::from_ref(&passage))?;
println!("{:?}: {} prompt tokens, {} generated, {:.2} s", a.text, a.usage.prompt_tokens, a.usage.generated_tokens, a.usage.total().as_secs_f64());
assert!(a.text.contains("Paris"), "answer {:?}", a.text);
"""),
    ("code", """
let b = reader.read("For which event was the Eiffel Tower built?", std::slice::from_ref(&passage))?;
println!("{:?}: {} prompt tokens, {} generated, {:.2} s", b.text, b.usage.prompt_tokens, b.usage.generated_tokens, b.usage.total().as_secs_f64());
assert!(b.text.to_lowercase().contains("fair") || b.text.contains("1889"), "answer {:?}", b.text);
"""),
    ("markdown", """
evcxr compiles every cell into a library of its own, and each carries its own copy of the
workbench and candle, with candle's thread pool among their statics. The reader runs its
forward passes through the code of the cell that loaded it, so the reads in the cells above
used that cell's pool and started no other. The next cell counts the pools (their first
worker thread, `candle-bp-0`) in this kernel's process.
"""),
    ("code", """
if std::path::Path::new("/proc/self/task").is_dir() {
    let mut pools = 0;
    for task in std::fs::read_dir("/proc/self/task")? {
        if std::fs::read_to_string(task?.path().join("comm")).is_ok_and(|c| c.trim() == "candle-bp-0") {
            pools += 1;
        }
    }
    println!("candle thread pools in this kernel: {pools}");
    assert!(pools <= 1, "{pools} thread pools: a read in a later cell started its own");
} else {
    println!("not counted: this system has no /proc/self/task");
}
"""),
    ("markdown", """
## `reader.read` against the benchmark's call, in this kernel

`bench_llm` times the model through `Llm::generate_ids`; a user calls `reader.read`, which
also renders the chat template and tokenises the prompt. The next cell times both on one
prompt with the same generation parameters (so both produce the same tokens): one untimed
call of each, then five rounds in alternating order, each call timed by the wall clock
around it. It fails when the median per-round ratio of wall time, prefill tokens/s or decode
passes/s says the user's call is more than 1.3× slower, so `scripts/test`, which executes
this notebook, fails too. Both calls run in this kernel's build of the library; the first
row is the first question above, read right after the load (which warms the model up,
`LoadOptions::warm_up`).
"""),
    ("code", """
use workbench::display::Table;
use std::time::Instant;
/// The three load averages of /proc/loadavg, for the captions.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")).unwrap_or_else(|_| "not read".into())
}
let speeds = {
    let load_before = loadavg();
    // A question whose answer takes more than a few tokens, so that decoding can be timed.
    let question = "Who built the Eiffel Tower, and for which event?";
    let ctx = std::slice::from_ref(&passage);
    let ids = reader.build_prompt(question, ctx)?.ids;
    let params = reader.options().params.clone();
    type Run = (f64, f64, f64, usize); // wall s, prefill tok/s, decode passes/s, tokens
    let run_user = |r: &mut GenerativeReader| -> Result<Run, Box<dyn std::error::Error>> {
        let t = Instant::now();
        let u = r.read(question, ctx)?.usage;
        Ok((t.elapsed().as_secs_f64(), u.prefill_tokens_per_sec(), u.decode_tokens_per_sec(), u.generated_tokens))
    };
    let run_bench = |r: &GenerativeReader| -> Result<Run, Box<dyn std::error::Error>> {
        let t = Instant::now();
        let g = r.llm().lock().map_err(|_| "the model's lock is poisoned")?.generate_ids(&ids, &params)?;
        Ok((t.elapsed().as_secs_f64(), g.prefill_tokens_per_sec(), g.decode_tokens_per_sec(), g.generated_tokens))
    };
    run_user(&mut reader)?;
    run_bench(&reader)?;
    let (mut user, mut bench) = (Vec::new(), Vec::new());
    for round in 0..5 {
        if round % 2 == 0 { user.push(run_user(&mut reader)?); bench.push(run_bench(&reader)?); }
        else { bench.push(run_bench(&reader)?); user.push(run_user(&mut reader)?); }
    }
    if user.iter().chain(&bench).any(|r| r.3 != user[0].3 || r.3 < 5) {
        return Err(format!("the calls generated different or too few tokens to compare: {:?}", user.iter().chain(&bench).map(|r| r.3).collect::<Vec<_>>()).into());
    }
    let median = |mut v: Vec<f64>| { v.sort_by(f64::total_cmp); v[v.len() / 2] };
    // Each ratio as "how many times slower the user's call is": median (min–max of the rounds).
    let ratio = |v: Vec<f64>| (median(v.clone()), v.iter().cloned().fold(f64::INFINITY, f64::min), v.iter().cloned().fold(0.0, f64::max));
    let wall = ratio(user.iter().zip(&bench).map(|(u, b)| u.0 / b.0).collect());
    let prefill = ratio(user.iter().zip(&bench).map(|(u, b)| b.1 / u.1).collect());
    let decode = ratio(user.iter().zip(&bench).map(|(u, b)| b.2 / u.2).collect());
    let show = |r: (f64, f64, f64)| format!("{:.2}× ({:.2}–{:.2})", r.0, r.1, r.2);
    let mut t = Table::new(["call", "prompt tokens", "generated", "wall s", "prefill tok/s", "decode passes/s"])
        .caption(format!("{model}: the user's call against the benchmark's, per-round ratios, median (min–max of 5): wall {}, prefill {}, decode {} (above 1: the user's is slower); load average {load_before} before, {} after", show(wall), show(prefill), show(decode), loadavg()));
    // One generated token is no decode rate (the first pass only).
    let first_decode = if a.usage.generated_tokens < 2 { "–".to_string() } else { format!("{:.1}", a.usage.decode_tokens_per_sec()) };
    t.push(["first question after the load (cell above; another question)".to_string(), a.usage.prompt_tokens.to_string(), a.usage.generated_tokens.to_string(),
        format!("{:.2}", a.usage.total().as_secs_f64()), format!("{:.0}", a.usage.prefill_tokens_per_sec()), first_decode])?;
    for (name, runs) in [("reader.read (median of 5)", &user), ("generate_ids, same prompt ids (median of 5)", &bench)] {
        t.push([name.to_string(), ids.len().to_string(), runs[0].3.to_string(),
            format!("{:.2}", median(runs.iter().map(|r| r.0).collect())),
            format!("{:.0}", median(runs.iter().map(|r| r.1).collect())),
            format!("{:.1}", median(runs.iter().map(|r| r.2).collect()))])?;
    }
    assert!(wall.0 <= 1.3 && prefill.0 <= 1.3 && decode.0 <= 1.3, "the user's call is slower than the benchmark's: wall {}, prefill {}, decode {}", show(wall), show(prefill), show(decode));
    t
};
speeds
"""),
    ("markdown", """
## This kernel's build against the release build

The library in this kernel is built by evcxr (its own profile, the workspace's patched
candle-core declared by the kernel); `ask`, `rag` and `bench_llm` are the release build that
the scripts make. The next cell reads the same question in both: here with `reader.read`,
there by running `target/release/ask` with the same model, passage and generation
parameters, which loads the model (with the same warm-up), reads once untimed and once
timed (`--repeat 1 --json`). Five rounds in alternating order; the cell fails when the
median per-round ratio of wall time, prefill tokens/s or decode passes/s says the kernel is
more than 1.3× slower.

The reader was loaded near the top of this notebook and reads here. As the pool count above showed, one
thread pool serves every read, whichever cell asks.
"""),
    ("code", """
let builds = {
    let load_before = loadavg();
    let question = "Who built the Eiffel Tower, and for which event?";
    let ctx = std::slice::from_ref(&passage);
    let ask = workbench::paths::project_root()?.join("target/release/ask");
    if !ask.is_file() {
        return Err(format!("{} is missing: build it with `cargo build --release --bin ask` (scripts/test and scripts/reproduce do)", ask.display()).into());
    }
    let max_new = reader.options().params.max_new_tokens.to_string();
    type Run = (f64, f64, f64, usize); // wall s, prefill tok/s, decode passes/s, tokens
    let run_kernel = |r: &mut GenerativeReader| -> Result<Run, Box<dyn std::error::Error>> {
        let t = Instant::now();
        let u = r.read(question, ctx)?.usage;
        Ok((t.elapsed().as_secs_f64(), u.prefill_tokens_per_sec(), u.decode_tokens_per_sec(), u.generated_tokens))
    };
    let run_release = || -> Result<Run, Box<dyn std::error::Error>> {
        let out = std::process::Command::new(&ask)
            .args(["--model", model, "--question", question, "--passage", passage.text.as_str(),
                   "--max-new-tokens", max_new.as_str(), "--repeat", "1", "--json"])
            .output()?;
        if !out.status.success() {
            return Err(format!("{} failed: {}", ask.display(), String::from_utf8_lossy(&out.stderr)).into());
        }
        let stdout = String::from_utf8(out.stdout)?;
        let v: serde_json::Value = serde_json::from_str(stdout.lines().last().ok_or("ask printed nothing")?)?;
        let r = &v["reads"][1];
        let num = |k: &str| r[k].as_f64().ok_or_else(|| format!("ask's JSON has no reads[1].{k}: {v}"));
        Ok((num("wall_s")?, num("prefill_tok_s")?, num("decode_passes_s")?, num("generated_tokens")? as usize))
    };
    run_kernel(&mut reader)?;
    let (mut kernel, mut release) = (Vec::new(), Vec::new());
    for round in 0..5 {
        if round % 2 == 0 { kernel.push(run_kernel(&mut reader)?); release.push(run_release()?); }
        else { release.push(run_release()?); kernel.push(run_kernel(&mut reader)?); }
    }
    if kernel.iter().chain(&release).any(|r| r.3 != kernel[0].3 || r.3 < 5) {
        return Err(format!("the builds generated different or too few tokens to compare: {:?}", kernel.iter().chain(&release).map(|r| r.3).collect::<Vec<_>>()).into());
    }
    let median = |mut v: Vec<f64>| { v.sort_by(f64::total_cmp); v[v.len() / 2] };
    let ratio = |v: Vec<f64>| (median(v.clone()), v.iter().cloned().fold(f64::INFINITY, f64::min), v.iter().cloned().fold(0.0, f64::max));
    let wall = ratio(kernel.iter().zip(&release).map(|(k, r)| k.0 / r.0).collect());
    let prefill = ratio(kernel.iter().zip(&release).map(|(k, r)| r.1 / k.1).collect());
    let decode = ratio(kernel.iter().zip(&release).map(|(k, r)| r.2 / k.2).collect());
    let show = |r: (f64, f64, f64)| format!("{:.2}× ({:.2}–{:.2})", r.0, r.1, r.2);
    let mut t = Table::new(["build", "generated", "wall s", "prefill tok/s", "decode passes/s"])
        .caption(format!("{model}: this kernel's reader.read against the release ask, per-round ratios, median (min–max of 5): wall {}, prefill {}, decode {} (above 1: the kernel is slower); load average {load_before} before, {} after", show(wall), show(prefill), show(decode), loadavg()));
    for (name, runs) in [("this kernel (evcxr build), median of 5", &kernel), ("target/release/ask, median of 5", &release)] {
        t.push([name.to_string(), runs[0].3.to_string(),
            format!("{:.2}", median(runs.iter().map(|r| r.0).collect())),
            format!("{:.0}", median(runs.iter().map(|r| r.1).collect())),
            format!("{:.1}", median(runs.iter().map(|r| r.2).collect()))])?;
    }
    assert!(wall.0 <= 1.3 && prefill.0 <= 1.3 && decode.0 <= 1.3, "this kernel's read is slower than the release build's: wall {}, prefill {}, decode {}", show(wall), show(prefill), show(decode));
    t
};
builds
"""),
]
