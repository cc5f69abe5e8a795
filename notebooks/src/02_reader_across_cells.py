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
]
