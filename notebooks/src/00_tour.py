"""Cells of notebooks/00_tour.ipynb (written by notebooks/make_notebooks.py)."""

CELLS = [
    ("markdown", """
# 00 · Tour of the workbench

This notebook walks the first stages of the pipeline, **load → chunk**, on the Wikipedia
corpora, and draws Figure 1 of report 000 (paragraph lengths before and after the
length filter).

Every model and data set resolves through the Hugging Face hub cache
(`data/cache/huggingface/hub`), filled offline by `scripts/reproduce` or
`cargo run --release --bin assets -- fetch NAME`. A missing or corrupt file stops with
an error that names the asset, its sha256 and that command.

The outputs committed with this notebook come from an execution at the **quick** scale (`scripts/reproduce`'s default; the notebook's `metadata.workbench` has its commit and date). Nothing here depends on the scale: the corpora are read whole.
"""),
    ("code", """
:dep workbench = { path = "../workbench", features = ["plot", "dense", "faiss", "tsne", "llm", "parquet"] }
// Every notebook names the same features: the kernels compile the library once for all of them.
"""),
    ("code", """
use std::collections::BTreeMap;
use workbench::assets::Assets;
use workbench::chunk::{ParagraphParams, Chunker};
use workbench::display::Table;
use workbench::load::{self, wikipedia_corpus, WIKIPEDIA_CORPORA};
use workbench::plot::{render, Bins, ParagraphLengths};
use workbench::text::word_count;

let assets = Assets::load()?;
// Relative to the project root when it is inside it (it is, unless WORKBENCH_HF_CACHE moved it).
let shown: String = {
    let root = workbench::paths::project_root()?;
    assets.cache_dir.strip_prefix(&root).unwrap_or(&assets.cache_dir).display().to_string()
};
println!("hub cache: {shown}");
"""),
    ("markdown", """
## The corpora

Three Wikipedia corpora can be had offline (full articles from a MediaWiki dump, the
WikiText-2 test split, and 10,033 lead sections with a topic label), plus the QA / IR
sets the later notebooks use.
"""),
    ("code", """
let mut wiki: BTreeMap<&str, Vec<workbench::Document>> = BTreeMap::new();
let mut sizes = Table::new(["asset", "hub id (cache)", "records", "paragraphs", "words", "license"])
    .caption("Corpora and their sizes");
for name in WIKIPEDIA_CORPORA {
    let docs = wikipedia_corpus(&assets, name)?;
    let paras = workbench::chunk::paragraph_lengths(&docs);
    let spec = assets.spec(name)?;
    sizes.push([name.to_string(), spec.hf_id.clone(), format!("{} articles", docs.len()),
                paras.len().to_string(), paras.iter().sum::<usize>().to_string(), spec.license.clone()])?;
    wiki.insert(name, docs);
}
let squad = load::squad::load(&assets.resolve("squad-v2-dev-half", "dev-v2.0.json")?)?;
let squad_words: usize = squad.contexts.iter().map(|d| word_count(&d.text)).sum();
sizes.push(["squad-v2-dev-half".to_string(), assets.spec("squad-v2-dev-half")?.hf_id.clone(),
            format!("{} questions ({} unanswerable)", squad.examples.len(),
                    squad.examples.iter().filter(|q| q.is_unanswerable()).count()),
            squad.contexts.len().to_string(), squad_words.to_string(), assets.spec("squad-v2-dev-half")?.license.clone()])?;
let nq = load::nq_open::load(&assets.resolve("nq-open", "NQ-open.dev.jsonl")?, load::question_set::BadRecords::Skip)?;
sizes.push(["nq-open".to_string(), assets.spec("nq-open")?.hf_id.clone(),
            format!("{} questions ({} without a gold answer that normalises to something left out)",
                    nq.questions.len(), nq.skipped.len()),
            "–".to_string(), "–".to_string(), assets.spec("nq-open")?.license.clone()])?;
let dir = assets.resolve_all("msmarco-dl19-subset")?;
let beir = load::beir::load(&dir, "test")?;
let beir_words: usize = beir.corpus.iter().map(|d| word_count(&d.text)).sum();
sizes.push(["msmarco-dl19-subset".to_string(), assets.spec("msmarco-dl19-subset")?.hf_id.clone(),
            format!("{} queries, {} judged", beir.queries.len(), beir.qrels.len()),
            beir.corpus.len().to_string(), beir_words.to_string(), assets.spec("msmarco-dl19-subset")?.license.clone()])?;
let (mini_passages, mini_qa) = load::rag_mini::load_csv(
    &assets.resolve("rag-mini-wikipedia", "infos.csv")?, &assets.resolve("rag-mini-wikipedia", "questions.csv")?)?;
let mini_words: usize = mini_passages.iter().map(|d| word_count(&d.text)).sum();
sizes.push(["rag-mini-wikipedia".to_string(), assets.spec("rag-mini-wikipedia")?.hf_id.clone(),
            format!("{} questions", mini_qa.len()), mini_passages.len().to_string(), mini_words.to_string(),
            assets.spec("rag-mini-wikipedia")?.license.clone()])?;
sizes
"""),
    ("markdown", """
## The length filter (report 000)

Report 000 split articles on newlines and removed paragraphs of ≤ 20 or ≥ 200 words,
then lowercased them. `ParagraphParams` holds those defaults; `check()` rejects bad bounds
before any work. Each passage keeps its document id, title and byte offsets.
"""),
    ("code", """
let chunker = ParagraphParams::default().check()?;
let mut filt = Table::new(["corpus", "paragraphs", "kept", "≤ 20 words", "≥ 200 words", "kept %"])
    .caption("Report 000: 525,665 → 184,051 paragraphs (35.0%) over 5,000 articles");
let mut measured = Vec::new();
for (name, docs) in &wiki {
    let m = ParagraphLengths::compute(name, docs, &chunker)?;
    let s = m.stats;
    filt.push([name.to_string(), s.total.to_string(), s.kept.to_string(), s.too_short.to_string(),
               s.too_long.to_string(), format!("{:.1}", m.kept_percent())])?;
    measured.push(m);
}
filt
"""),
    ("code", """
// A few passages of the full-article corpus, with their offsets into the source article.
// (evcxr keeps variables between cells, so they own their data rather than borrow it.)
let passages = chunker.chunk_all(&wiki["enwiki-sample-dump"])?;
let mut sample = Table::new(["passage id", "title", "bytes", "words", "text (first 100 chars)"]);
for p in passages.iter().step_by(passages.len() / 5 + 1) {
    let head: String = p.text.chars().take(100).collect();
    sample.push([p.id.clone(), p.title.clone(), format!("{}..{}", p.start, p.end),
                 word_count(&p.text).to_string(), head])?;
}
sample
"""),
    ("markdown", """
## Figure 1

Words per paragraph before (grey) and after (blue) the filter; dashed lines mark the bounds.
The same figure is written by `scripts/reproduce` to `data/results/fig1-paragraph-lengths/`.
"""),
    ("code", """
let bins = Bins::new(0.0, 400.0, 10.0, true)?;
let i = measured.iter().position(|m| m.corpus == "enwiki-sample-dump")
    .ok_or(workbench::Error::Empty("enwiki-sample-dump was not measured".into()))?;
render(&measured[i].histogram(bins))?
""", "figure"),
]
