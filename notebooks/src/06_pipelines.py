"""Cells of notebooks/06_pipelines.ipynb (written by notebooks/make_notebooks.py)."""

CELLS = [
    ("markdown", """
# 06 · RAG pipelines: reports 001, 002 and 004 reproduced

A RAG pipeline here is one TOML file (`configs/*.toml`, schema in
`workbench::pipeline::config`): corpus and chunker → retriever(s) and fusion → optional
query transformation (LLM rewrite, RAG-Fusion paraphrases) → optional re-ranker → reader
with a prompt template → evaluation. Every run leaves a trace per question (JSONL), SQuAD
predictions and its resolved config.

| report | binary | configs | result folder |
|---|---|---|---|
| 001: Tables 2–4, significance (dense / sparse / hybrid / closed-book) | `exp_report001` | `report001_*.toml` | `data/results/report001/` |
| 002: baseline RAG vs RAG-Fusion on SQuAD 2.0 | `exp_report002` | `report002_*.toml` | `data/results/report002/` |
| 004: naive vs enhanced RAG (rewrite, top-10, re-rank to 3) | `exp_report004` | `report004_*.toml` | `data/results/report004/` |

The binaries run from `scripts/reproduce` at a scale: `quick` (its default) and `default` on
seeded samples of the questions, `--scale paper` on the reports' question counts
(`docs/pipelines.md` lists the counts). This notebook reads their results, rebuilds report
001's tables with polars from the traces, works report 002's TF-IDF example live, and runs
one config in one call.

The outputs committed with this notebook come from an execution at the **quick** scale (`scripts/reproduce`'s default; the notebook's `metadata.workbench` has its commit and date): the tables show the quick-scale samples, smaller than the default-scale runs of
`docs/report001.md`, `docs/report002.md` and `docs/report004.md`.
"""),
    ("code", """
:dep workbench = { path = "../workbench", features = ["plot", "dense", "faiss", "tsne", "llm", "parquet"] }
// Every notebook names the same features: the kernels compile the library once for all of them.
"""),
    ("code", """
use std::path::PathBuf;
use workbench::display::{DataFrameDisplay, Table};
use workbench::evaluate::groups;
use workbench::pipeline::trace::read_traces;

use workbench::study::Scale;

/// The scale whose results this notebook reads: `WORKBENCH_SCALE` when set (as
/// `scripts/reproduce --scale S` sets it), else quick, `scripts/reproduce`'s default.
let scale = Scale::from_env_or(Scale::Quick)?;

/// `data/results/<name>` at `scale` (`<name>-quick` at the quick scale), or an error
/// naming the command that writes it.
fn results(name: &str, scale: Scale) -> workbench::Result<PathBuf> {
    let root = workbench::paths::project_root()?;
    let dir = workbench::paths::results_dir(&root, &scale.result_name(name));
    if !dir.join("manifest.json").exists() {
        return Err(workbench::Error::Empty(format!(
            "{} has no finished result: run `cargo run --release --bin exp_{name} -- --scale {scale}`",
            dir.display(),
        )));
    }
    Ok(dir)
}
// Relative to the checkout, so the output reads the same on every machine.
let dir = results("report001", scale)?;
println!("reading {}", dir.strip_prefix(workbench::paths::project_root()?).unwrap_or(&dir).display());
"""),
    ("markdown", """
## Report 001: Table 2, our numbers beside the report's

Four systems on RAG Mini Wikipedia, passages cut into sliding windows of 300 words with
overlap 100, top 5 chunks, report 001's Appendix A prompts, temperature 0.4. The
substitutions (corpus, model, question count) are listed under the tables.
"""),
    ("code", """
let dir = results("report001", scale)?;
Table::read_csv(&dir.join("table2.csv"))?
"""),
    ("markdown", """
### Per-question table → Tables 2–4 with polars

Every table below is a polars query over one per-question frame built from the traces
(`traces.jsonl` of each system): `groups::overall` (abstentions counted apart: "Not found"
answers score as empty predictions, and `em_answered` / `f1_answered` cover the questions the
system did answer), `groups::by_group` (report 001's eight question groups) and
`groups::winners` (Table 4).
"""),
    ("code", """
let dir = results("report001", scale)?;
let mut rows: Vec<groups::QuestionScore> = Vec::new();
for reader in std::fs::read_dir(&dir).map_err(|e| workbench::Error::io(&dir, e))? {
    let reader = reader.map_err(|e| workbench::Error::io(&dir, e))?.path();
    if !reader.is_dir() { continue; }
    for system in ["dense", "sparse", "hybrid", "closed-book"] {
        let f = reader.join(system).join("traces.jsonl");
        if !f.exists() { continue; }
        for t in read_traces(&f)? {
            rows.push(groups::QuestionScore {
                system: system.to_string(), question_id: t.id, group: t.group,
                em: t.em, f1: t.f1, abstained: t.abstained,
            });
        }
    }
}
println!("{} per-question rows", rows.len());
groups::overall(&groups::per_question_frame(&rows)?)?
"""),
    ("code", """
groups::by_group(&groups::per_question_frame(&rows)?)?
"""),
    ("code", """
groups::winners(&groups::per_question_frame(&rows)?, 2)?
"""),
    ("code", """
Table::read_csv(&results("report001", scale)?.join("table4.csv"))?
"""),
    ("markdown", """
### Paired significance

Per-question EM (0/1) and F1 (0–1) of two systems on the same questions: paired t-test,
randomisation test, paired bootstrap (95% interval of the mean difference) and the
studentised bootstrap. Report 001 found dense vs sparse significant and hybrid vs dense not.
"""),
    ("code", """
Table::read_csv(&results("report001", scale)?.join("significance.csv"))?
"""),
    ("code", """
println!("{}", std::fs::read_to_string(results("report001", scale)?.join("substitutions.md")).map_err(|e| workbench::Error::io("substitutions.md", e))?);
"""),
    ("markdown", """
## Report 002: baseline RAG vs RAG-Fusion

First report 002's TF-IDF worked example, live: three documents, the term "dogs",
IDF = log10(3 / 2) = 0.176; raw TF favours d2 (three "dogs"), TF divided by the document's
length favours d1.
"""),
    ("code", """
{
let docs = [
    ("d1", "cats and dogs are pets."),
    ("d2", "cats and dogs are pet animals though I prefer dogs. Dogs obey our commands, can be trained easily and play with us all the time."),
    ("d3", "Horses are also pets."),
];
let words = |s: &str| -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(|w| w.to_lowercase()).collect()
};
let term = "dogs";
let df = docs.iter().filter(|(_, t)| words(t).iter().any(|w| w == term)).count();
let idf = (docs.len() as f64 / df as f64).log10();
let mut t = Table::new(["doc", "words", "tf(dogs)", "tf × idf", "tf × idf / words"])
    .caption(format!("IDF(dogs) = log10({} / {df}) = {idf:.3}", docs.len()));
for (id, text) in docs {
    let w = words(text);
    let tf = w.iter().filter(|x| *x == term).count() as f64;
    t.push([id.to_string(), w.len().to_string(), tf.to_string(), format!("{:.4}", tf * idf), format!("{:.4}", tf * idf / w.len() as f64)])?;
}
t
}
"""),
    ("markdown", """
The word counts (5, 25, 4) and the scores are the report's: 0.176 / 0.528 / 0 raw,
0.0352 / 0.0211 / 0 length-normalised (the report prints 0.0212 for d2; 3 × 0.176 / 25 =
0.0211), so d1 ranks first once lengths count.

RAG-Fusion asks the reader's own model for 5 paraphrases of the question, retrieves each,
and fuses the 5 runs with RRF (k = 60). The paraphrases and the model's raw output are in
each trace; a question whose output held fewer than 5 usable paraphrases is counted (never
padded).
"""),
    ("code", """
Table::read_csv(&results("report002", scale)?.join("table.csv"))?
"""),
    ("code", """
Table::read_csv(&results("report002", scale)?.join("details.csv"))?
"""),
    ("code", """
let dir = results("report002", scale)?;
let mut t = Table::new(["question", "paraphrases", "note"]).caption("The first three questions' RAG-Fusion queries");
for reader in std::fs::read_dir(&dir).map_err(|e| workbench::Error::io(&dir, e))? {
    let f = reader.map_err(|e| workbench::Error::io(&dir, e))?.path().join("fusion/traces.jsonl");
    if !f.exists() { continue; }
    for r in read_traces(&f)?.into_iter().take(3) {
        t.push([r.question, r.queries.join(" | "), r.transform_note.unwrap_or_default()])?;
    }
    break;
}
t
"""),
    ("code", """
Table::read_csv(&results("report002", scale)?.join("significance.csv"))?
"""),
    ("markdown", """
## Report 004: naive vs enhanced RAG

Naive: dense top 3. Enhanced: the reader's model rewrites the question (report 004's prompt),
dense top 10 for the rewrite, re-ranked to the top 3 with the workbench's own cross-encoder
(`trained:minilm-ce`, all-MiniLM-L6-v2 fine-tuned on this CPU by `train_reranker`; the
report's ms-marco-MiniLM-L-6-v2 is not available offline). It trained on RAG Mini's
training-side questions, so both systems answer only test-side ones
(`questions.split = "test"`). **Context precision** is
the share of the passages given to the reader that contain a gold answer; the rank-aware
variant is their average precision (`workbench::evaluate::context`).
"""),
    ("code", """
Table::read_csv(&results("report004", scale)?.join("table.csv"))?
"""),
    ("code", """
Table::read_csv(&results("report004", scale)?.join("details.csv"))?
"""),
    ("code", """
println!("{}", std::fs::read_to_string(results("report004", scale)?.join("substitutions.md")).map_err(|e| workbench::Error::io("substitutions.md", e))?);
"""),
    ("markdown", """
## One config, one call

`study::run_config` builds a config's pipeline, loads its reader (and shares that model with
its query transform, if any), runs every question and returns the run: its summary, traces
and predictions. Here the tiny fixture config with the SmolLM2 reader, which takes seconds;
any `configs/*.toml` runs the same way (`scaled` sets the question count and the reader).
"""),
    ("code", """
use workbench::pipeline::study::{run_config, scaled, ModelPool};
use workbench::pipeline::PipelineConfig;
let config = PipelineConfig::from_file(&workbench::paths::project_root()?.join("configs/tiny.toml"))?;
let run = run_config(&mut ModelPool::default(), scaled(config, Some(3), None))?;
let mut t = Table::new(["question", "passages read", "answer", "abstained", "EM", "F1"]).caption(run.retrieval.clone());
for r in &run.records {
    t.push([r.question.clone(), r.passage_ids.join(", "), r.answer.clone(), r.abstained.to_string(), r.em.to_string(), format!("{:.2}", r.f1)])?;
}
t.evcxr_display();
run.summary().to_table()
"""),
]
