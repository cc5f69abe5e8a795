"""Cells of notebooks/04_readers.ipynb (written by notebooks/make_notebooks.py)."""

CELLS = [
    ("markdown", """
# 04 · Readers: answering from retrieved passages

The **read** stage of the pipeline. A reader takes a question and the passages a retriever
ranked for it and returns an answer, an abstention flag ("Not found"), the ids of the
passages it actually read, and token counts and timings (`workbench::read::Reader`).

This notebook answers a RAG Mini Wikipedia question with the main generative reader,
**Qwen2.5-Coder-1.5B-Instruct** (Q4_K_M GGUF, run by the workbench on candle's quantized
CPU path), over passages retrieved live with the dense retriever (all-MiniLM-L6-v2 + FAISS
flat index). It shows the prompt exactly as the model sees it: the chat template stored in
the GGUF, rendered with minijinja.

The first run embeds the 3,200 passages once (then cached in `data/cache/embeddings/`); the
cells below print the model's load and reading times of this run.

The outputs committed with this notebook come from an execution at the **quick** scale (`scripts/reproduce`'s default; the notebook's `metadata.workbench` has its commit and date). Nothing here depends on the scale: the same five questions at every scale.
"""),
    ("code", """
:dep workbench = { path = "../workbench", features = ["plot", "dense", "faiss", "tsne", "llm", "parquet"] }
// Every notebook names the same features: the kernels compile the library once for all of them.
"""),
    ("code", """
use std::sync::Arc;
use workbench::assets::Assets;
use workbench::chunk::{Chunker, WholeDocument};
use workbench::display::Table;
use workbench::encode::{BertEncoder, EmbeddingCache, EncoderParams};
use workbench::read::generative::{GenerativeReader, Llm, LoadOptions, ReaderOptions};
use workbench::read::{Context, Reader};
use workbench::retrieve::{dense::DenseRetriever, faiss::IndexParams, Retriever};

let assets = Assets::load()?;
let (docs, questions) = workbench::load::rag_mini::load_csv(
    &assets.resolve("rag-mini-wikipedia", "infos.csv")?,
    &assets.resolve("rag-mini-wikipedia", "questions.csv")?,
)?;
let mut passages = Vec::new();
for d in &docs {
    passages.extend(WholeDocument.chunk(d)?);
}
let encoder = Arc::new(BertEncoder::load(&assets, "all-minilm-l6-v2", EncoderParams::default())?);
let dense = DenseRetriever::build(encoder, &passages, IndexParams::flat_ip(), Some(&EmbeddingCache::project_default()?))?;
println!("{} passages indexed, {} questions", passages.len(), questions.len());
"""),
    ("markdown", """
## Load the reader

`Llm::from_asset` checks the GGUF (header, tensor extents, sha256 against
`data/assets.toml`) and dispatches on its `general.architecture` (`qwen2` here; `llama` for
SmolLM2). The default reader instructions ask for a short phrase, or exactly "Not found".
The reader is loaded once here and used by the cells below.
"""),
    ("code", """
/// The retrieved passages as reader contexts, in rank order.
fn contexts_for(hits: &[workbench::Hit], passages: &[workbench::Passage]) -> Vec<Context> {
    hits.iter()
        .filter_map(|h| passages.iter().find(|p| p.id == h.id).map(|p| Context {
            id: p.id.clone(), title: p.title.clone(), text: p.text.clone(), score: h.score }))
        .collect()
}
let t0 = std::time::Instant::now();
let llm = Llm::from_asset("qwen2.5-coder-1.5b-instruct-gguf", &LoadOptions::default())?;
let (arch, ctx) = (llm.architecture().to_string(), llm.context_len());
let mut reader = GenerativeReader::new(llm, ReaderOptions::default())?;
println!("loaded {} ({arch}), context {ctx} tokens, in {:.1} s", reader.name(), t0.elapsed().as_secs_f64());
"""),
    ("markdown", """
## The prompt the model sees

The top 3 passages go to the reader, rank 1 first; if they did not fit in the model's window,
the lowest-ranked would be dropped first and listed in `Answer::dropped`. The prompt is the
GGUF's own chat template (`tokenizer.chat_template`), rendered with minijinja:
"""),
    ("code", """
let q = questions[0].clone();
let contexts = contexts_for(&dense.retrieve(&q.question, 3)?, &passages);
let prompt = reader.build_prompt(&q.question, &contexts)?.text;
println!("{prompt}");
"""),
    ("markdown", """
The passages are the text of the data set's files as the loader reads them (the CSV export of
`rag-datasets/rag-mini-wikipedia` that `data/assets.toml` names), and some of it is
double-encoded: UTF-8 bytes read as Latin-1, so an en dash shows as `â` followed by two
invisible control characters and `é` as `Ã©`. The loader keeps the text as it is, so the
model reads what every other tool reading these files reads. The next cell counts the
passages that carry such a sequence: a character of U+00C2–U+00F4 followed by one of
U+0080–U+00BF, a UTF-8 lead byte and continuation byte each read as one character.
"""),
    ("code", """
/// A UTF-8 lead byte and a continuation byte, each read as one Latin-1 character.
fn double_encoded(t: &str) -> bool {
    let cs: Vec<char> = t.chars().collect();
    cs.windows(2).any(|w| ('\\u{c2}'..='\\u{f4}').contains(&w[0]) && ('\\u{80}'..='\\u{bf}').contains(&w[1]))
}
let n = passages.iter().filter(|p| double_encoded(&p.text)).count();
println!("{n} of {} passages carry double-encoded UTF-8 in the data set's files", passages.len());
"""),
    ("markdown", """
## The answer
"""),
    ("code", """
let answer = reader.read(&q.question, &contexts)?;
let u = answer.usage.clone();
/// Decode time, with a rate only for two decode passes or more (one pass is its time alone).
fn decode(u: &workbench::read::Usage) -> String {
    if u.decode_steps < 2 {
        format!("{:.2} s ({} pass)", u.decode_secs, u.decode_steps)
    } else {
        format!("{:.2} s ({} passes, {:.1} passes/s)", u.decode_secs, u.decode_steps, u.decode_tokens_per_sec())
    }
}
let mut t = Table::new(["", "value"]).caption("Qwen2.5-Coder-1.5B-Instruct over the dense top 3");
t.push(["question".to_string(), q.question.clone()])?;
t.push(["gold answers".to_string(), q.answers.join(" | ")])?;
t.push(["answer".to_string(), answer.text.clone()])?;
t.push(["abstained".to_string(), answer.abstained.to_string()])?;
t.push(["passages read".to_string(), answer.passage_ids.join(", ")])?;
t.push(["prompt tokens".to_string(), u.prompt_tokens.to_string()])?;
t.push(["generated tokens".to_string(), u.generated_tokens.to_string()])?;
t.push(["prefill (first question after the load)".to_string(), format!("{:.2} s ({:.0} tok/s)", u.prefill_secs, u.prefill_tokens_per_sec())])?;
t.push(["decode (first question after the load)".to_string(), decode(&u)])?;
// The same question again. The load's warm-up (`LoadOptions::warm_up`) prepared the weights
// before the first question.
let again = reader.read(&q.question, &contexts)?.usage;
t.push(["prefill (the same question again)".to_string(), format!("{:.2} s ({:.0} tok/s)", again.prefill_secs, again.prefill_tokens_per_sec())])?;
t.push(["decode (the same question again)".to_string(), decode(&again)])?;
t
"""),
    ("markdown", """
## Abstention

Over two passages that cannot answer (the lowest-ranked of 200), the reader should say
"Not found", which the `AbstentionRule` turns into `abstained = true`:
"""),
    ("code", """
let far = dense.retrieve(&q.question, 200)?;
let last_two: Vec<workbench::Hit> = far.iter().rev().take(2).cloned().collect();
let unanswerable = reader.read(&q.question, &contexts_for(&last_two, &passages))?;
println!("answer: {:?}  abstained: {}", unanswerable.text, unanswerable.abstained);
"""),
    ("markdown", """
## A few questions

`read_all` answers the first five questions with a progress bar showing tokens/s. EM/F1 use
SQuAD's normalisation (`workbench::evaluate::qa`).
"""),
    ("code", """
let items: Vec<(String, Vec<Context>)> = questions.iter().take(5).map(|q| {
    Ok((q.question.clone(), contexts_for(&dense.retrieve(&q.question, 3)?, &passages)))
}).collect::<workbench::Result<_>>()?;
let answers = workbench::read::read_all(&mut reader, &items)?;
let mut t = Table::new(["question", "gold", "answer", "EM", "F1", "s"]).caption("First 5 RAG Mini Wikipedia questions, dense top 3, Qwen 1.5B");
for (q, a) in questions.iter().zip(&answers) {
    let em = workbench::evaluate::qa::exact_match(&a.text, &q.answers);
    let f1 = workbench::evaluate::qa::f1(&a.text, &q.answers);
    t.push([q.question.clone(), q.answers.join(" | "), a.text.clone(), format!("{em:.0}"), format!("{f1:.2}"),
            format!("{:.1}", a.usage.total().as_secs_f64())])?;
}
t
"""),
]
