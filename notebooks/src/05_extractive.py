"""Cells of notebooks/05_extractive.ipynb (written by notebooks/make_notebooks.py)."""

CELLS = [
    ("markdown", """
# 05 · Extractive readers trained on this CPU (report 000, Table 1 and Figure 3)

Report 000 compared three SQuAD-trained extractive readers (DeBERTa-v3-large-squad2,
BERT-large-WWM-squad, RoBERTa-large-squad2) on ten questions over the top-5 SBERT + FAISS
passages, concatenated (Table 1: EM = F1 = 66.7 / 66.7 / 33.3). None of those checkpoints
can be had here, so the workbench fine-tunes a question-answering head (and the whole
encoder) on all-MiniLM-L6-v2 in candle, on two CPU cores:

* supervision: the SQuAD 2.0 dev half's **training articles** (1,998 answerable questions;
  the five held-out articles are never trained on), RAG Mini Wikipedia's training
  questions located in their passages (216), NQ-open dev distant supervision (646
  questions whose BM25 top-20 Wikipedia windows hold a gold answer);
* the model: `QaModel` (`workbench::read::extractive`), the same one that reads;
  checkpoints are in Hugging Face layout and load through the hub path.

This notebook reads the results `scripts/reproduce` wrote (`data/results/reader-minilm-all/`
and `data/results/report000_readers/`, with `-quick` at the quick scale, where each reader
trains one epoch of 200 updates of 16 windows, `minilm-squad2` two epochs of them (400
updates), where the default recipes train two epochs, 416 updates for `minilm-all`) and reads one question
live with the trained reader, its evidence highlighted in the passage.

The outputs committed with this notebook come from an execution at the **quick** scale (`scripts/reproduce`'s default; the notebook's `metadata.workbench` has its commit and date): the tables show the quick readers (200 updates, 400 for `minilm-squad2`), whose held-out scores are below the
default-scale readers' of `docs/report000.md` and `docs/readers.md`. Every run also reads
eight one-fact probes (`probes.csv` in the reader's folder, e.g. "What is the capital of
France?" with a passage that says so), a sanity floor graded in
`data/expected.toml`.
"""),
    ("code", """
:dep workbench = { path = "../workbench", features = ["plot", "dense", "faiss", "tsne", "llm", "parquet"] }
// Every notebook names the same features: the kernels compile the library once for all of them.
:dep serde_json = "1"
"""),
    ("code", """
use workbench::display::emit;
let root = workbench::paths::project_root()?;
let res = root.join("data/results");
// The scale whose results are read: `WORKBENCH_SCALE` when set (as `scripts/reproduce
// --scale S` sets it), else quick, `scripts/reproduce`'s default (`-quick` folders).
let scale = workbench::study::Scale::from_env_or(workbench::study::Scale::Quick)?;
let held = std::fs::read_to_string(res.join(scale.result_name("reader-minilm-all")).join("metrics.md"))?;
emit("text/markdown", &held);
"""),
    ("markdown", """
## Table 1: our three readers beside report 000's

Three trained models (`train_reader` recipes, all from all-MiniLM-L6-v2, none trained on
the held-out articles), each reading the five passages concatenated (report 000's way):

1. **MiniLM reader** (`minilm-all`, the default recipe): SQuAD training articles + RAG Mini
   + NQ distant supervision;
2. **MiniLM reader, SQuAD only** (`minilm-squad`): the second trained variant, the SQuAD
   training articles' answerable questions only;
3. **SQuAD 2.0-style reader + null threshold** (`minilm-squad2`): `minilm-all`'s data plus
   the training articles' unanswerable questions; abstains when the null score beats the
   best span by more than a threshold chosen on the SQuAD *training* articles' questions.

An extra row reads with the `minilm-all` model **best span per passage** (each passage alone,
the best span over all by raw start + end logits). If a recipe's training had not finished
when the table was made, its description below says after how many updates it was read.

Questions 6–8 expect no answer from the corpus (an empty answer scores 1). At the quick
scale the ten questions are asked over the WikiText-2 windows instead of report 000's
Wikipedia articles, and those windows hold few of their answers: the answers below show which
passage each reader read from (the last section reads the capital question from a passage
that does hold its answer). The honest set
columns: every question of the five held-out SQuAD articles (gold paragraph given) and
the RAG Mini Wikipedia test questions (never trained on).
"""),
    ("code", """
let t1 = std::fs::read_to_string(res.join(scale.result_name("report000_readers")).join("table1.md"))?;
emit("text/markdown", &t1);
"""),
    ("markdown", """
## Figure 3
"""),
    ("code", """
let svg = std::fs::read_to_string(res.join(scale.result_name("report000_readers")).join("figure3.svg"))?;
emit("image/svg+xml", &svg);
"""),
    ("markdown", """
## The answers with their evidence

Each answer is shown in the passage it was taken from (`<mark>` = the span).
"""),
    ("code", """
let html = std::fs::read_to_string(res.join(scale.result_name("report000_readers")).join("answers.html"))?;
emit("text/html", &html);
"""),
    ("markdown", """
## Reading live with the trained checkpoint

The checkpoint folder (`model.safetensors`, `config.json`, `tokenizer.json`) loads like any
hub QA model; `Reader::read` returns the answer with its passage id and character offsets.
"""),
    ("code", """
use workbench::read::extractive::{ExtractiveReader, ReaderParams};
use workbench::read::{Context, Reader};
let m: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(res.join(scale.result_name("reader-minilm-all")).join("metrics.json"))?)?;
let dir = std::path::PathBuf::from(m["model_dir"].as_str().ok_or("no model_dir")?);
let mut reader = ExtractiveReader::load_dir(&dir, ReaderParams::default())?;
let passages = vec![
    Context::new("p1", "The Eiffel Tower was built for the 1889 World's Fair in Paris."),
    Context::new("p2", "Penicillin was discovered in 1928 by Alexander Fleming, a Scottish physician."),
];
// A block: `p` borrows `passages`, and evcxr cannot persist a borrowed value between cells.
let capital = reader.read("What is the capital of France?", &[Context::new("p3", "Paris is the capital and largest city of France, on the river Seine.")])?;
println!("What is the capital of France? -> {:?}", capital.text);
{
    let a = reader.read("Who discovered penicillin?", &passages)?;
    let ev = a.evidence.clone().ok_or("no evidence")?;
    let p = passages.iter().find(|p| p.id == ev.passage_id).ok_or("passage")?;
    let chars: Vec<char> = p.text.chars().collect();
    let s: String = chars[..ev.start_char].iter().collect();
    let mid: String = chars[ev.start_char..ev.end_char].iter().collect();
    let e: String = chars[ev.end_char..].iter().collect();
    emit("text/html", &format!("<p><b>{}</b> (passage {})</p><blockquote>{}<mark>{}</mark>{}</blockquote>", a.text, ev.passage_id, s, mid, e));
}
"""),
    ("markdown", """
## The probes, reader by reader

Each training run ends by reading the eight one-fact probes, each from a passage that
states its answer (`workbench::study::reader::PROBES`). The tables below are those runs'
`probes.csv`: a reader trained on SQuAD alone sees neither NQ's nor RAG Mini's questions,
and its misses show which question types its few updates did not cover.
`data/expected.toml` grades at least six of the eight for every quick reader, and "Paris"
for `minilm-all`, the reader this notebook reads with.
"""),
    ("code", """
use workbench::display::Table;
// One display: evcxr keeps one output per MIME type and cell (the last `emit` of each), so the
// three tables go out as one.
let mut md = String::new();
for r in ["reader-minilm-all", "reader-minilm-squad", "reader-minilm-squad2"] {
    let name = scale.result_name(r);
    let path = res.join(&name).join("probes.csv");
    if path.is_file() {
        md += &format!("**{name}**\n\n{}\n\n", Table::read_csv(&path)?.to_markdown());
    } else {
        // A result folder from before the probes existed: it is kept while its parameters
        // are unchanged.
        md += &format!("**{name}**: no `probes.csv` in this folder; `cargo run --release --bin train_reader -- --recipe {} --scale {} --force` writes it (the trained model is cached).\n\n", r.trim_start_matches("reader-"), scale);
    }
}
emit("text/markdown", &md);
"""),
]
