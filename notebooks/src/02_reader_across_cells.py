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
"""),
    ("code", """
use workbench::read::generative::{GenerativeReader, Llm, LoadOptions, ReaderOptions};
use workbench::read::{Context, Reader};
let t0 = std::time::Instant::now();
let llm = Llm::from_asset("qwen2.5-coder-0.5b-instruct-gguf", &LoadOptions::default())?;
assert_eq!(llm.architecture(), "qwen2");
let mut options = ReaderOptions::default();
options.params.max_new_tokens = 16;
let mut reader = GenerativeReader::new(llm, options)?;
println!("loaded {} in {:.1} s", reader.name(), t0.elapsed().as_secs_f64());
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
## A notebook's read runs at the benchmark's speed

`bench_llm` times the model through `Llm::generate_ids` with fixed parameters; a user calls
`reader.read`. The next cell times both on one prompt, alternating, four rounds each, in this kernel's build, and fails when the median ratio says the user's path is
more than 1.3× slower (so `scripts/test`, which executes this notebook, fails too). The
first row is the first question above, read right after the load (the load warms the model
up, `LoadOptions::warm_up`).
"""),
    ("code", """
use workbench::read::generative::{GenerateParams, Sampling};
use workbench::display::Table;
let speeds = {
    // A question whose answer takes more than a few tokens, so that decoding can be timed.
    let question = "Who built the Eiffel Tower, and for which event?";
    let ctx = std::slice::from_ref(&passage);
    let ids = reader.build_prompt(question, ctx)?.ids;
    let bench = GenerateParams { max_new_tokens: 16, sampling: Sampling::Greedy, stop_strings: Vec::new(), prefill_batch: 512 };
    // (prefill, decode) tokens/s; decode counts the steps after the first token, as the benchmark does.
    let user_rate = |u: &workbench::read::Usage| (u.prefill_tokens_per_sec(), u.generated_tokens.saturating_sub(1) as f64 / u.decode_secs);
    let (mut user, mut bench_runs) = (Vec::new(), Vec::new());
    let run_user = |r: &mut GenerativeReader| -> Result<(f64, f64), Box<dyn std::error::Error>> {
        let u = r.read(question, ctx)?.usage;
        if u.generated_tokens < 5 { return Err(format!("{} tokens generated: too few to time decoding", u.generated_tokens).into()); }
        Ok(user_rate(&u))
    };
    let run_bench = |r: &GenerativeReader| -> Result<(f64, f64), Box<dyn std::error::Error>> {
        let g = r.llm().lock().map_err(|_| "the model's lock is poisoned")?.generate_ids(&ids, &bench)?;
        Ok((g.prefill_tokens_per_sec(), g.decode_tokens_per_sec()))
    };
    for round in 0..4 {
        if round % 2 == 0 { user.push(run_user(&mut reader)?); bench_runs.push(run_bench(&reader)?); }
        else { bench_runs.push(run_bench(&reader)?); user.push(run_user(&mut reader)?); }
    }
    let median = |mut v: Vec<f64>| { v.sort_by(f64::total_cmp); (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0 };
    let ratio = |f: fn(&(f64, f64)) -> f64| median(bench_runs.iter().zip(&user).map(|(b, u)| f(b) / f(u)).collect());
    let (prefill_ratio, decode_ratio) = (ratio(|r| r.0), ratio(|r| r.1));
    let mut t = Table::new(["read", "prompt tokens", "prefill tok/s", "decode tok/s"])
        .caption(format!("{}: benchmark / user, median of the per-round ratios: prefill {prefill_ratio:.2}, decode {decode_ratio:.2}", reader.name()));
    t.push(["first question after load (cell above)".to_string(), a.usage.prompt_tokens.to_string(), format!("{:.0}", user_rate(&a.usage).0),
        if a.usage.generated_tokens > 1 { format!("{:.1}", user_rate(&a.usage).1) } else { "– (one token)".to_string() }])?;
    t.push(["another question, user's path (median of 4)".to_string(), ids.len().to_string(), format!("{:.0}", median(user.iter().map(|r| r.0).collect())), format!("{:.1}", median(user.iter().map(|r| r.1).collect()))])?;
    t.push(["its prompt, benchmark's path (median of 4)".to_string(), ids.len().to_string(), format!("{:.0}", median(bench_runs.iter().map(|r| r.0).collect())), format!("{:.1}", median(bench_runs.iter().map(|r| r.1).collect()))])?;
    assert!(prefill_ratio <= 1.3 && decode_ratio <= 1.3, "the user's path is slower than the benchmark's: prefill {prefill_ratio:.2}×, decode {decode_ratio:.2}×");
    t
};
speeds
"""),
]
