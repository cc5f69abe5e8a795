"""Cells of notebooks/01_learn_rag.ipynb (written by notebooks/make_notebooks.py)."""

CELLS = [
    ("markdown", """
# 01 · Learn RAG step by step

Retrieval-augmented generation (RAG) answers a question in three steps:

1. **retrieve**: score every passage of a corpus against the question and keep the best few;
2. **read**: give those passages and the question to a language model, which writes the answer;
3. **evaluate**: compare the answer with the gold answers (exact match and token F1).

This notebook runs each step live on a handful of passages and prints every intermediate
number, so you can check them by hand. It follows the reports the workbench reproduces:

| section | what | report |
|---|---|---|
| 1 | TF-IDF on three toy documents, the slide's numbers reproduced | 002 (TF-IDF worked example) |
| 2 | BM25: each query term's contribution to a score; saturation | 002 (BM25 formula) |
| 3 | dense embeddings (all-MiniLM-L6-v2) and nearest neighbours | 000, 001 |
| 4 | fusing two ranked lists: RRF (k = 60) and normalised weighted sum | 002 (RRF), 001 (hybrid) |
| 5 | MaxSim late interaction and token relevance | 003 |
| 6 | the prompt the reader sees and its answer (SmolLM2-135M-Instruct) | 001, 004 |
| 7 | EM and F1 worked out on that answer | 001, 002, 004 |
| 8 | deciding when to retrieve: each question's loop with the adaptive method, step by step | adaptive retrieval (a confidence trigger, as FLARE's) |

Everything runs on the CPU. The first code cell warms the kernel up (it compiles the
workbench the first time, then evcxr's first compile against it); the last cell prints how
long the cells after it took on this run, and the README's notebook table has the last
recorded execution time with its date and load. The models come from the local Hugging Face
cache (`data/cache/huggingface/hub`); `scripts/test` fetches them.

The outputs committed with this notebook come from an execution at the **quick** scale (`scripts/reproduce`'s default; the notebook's `metadata.workbench` has its commit and date). Nothing here depends on the scale: every example is a fixed handful of passages.
"""),
    ("code", """
:dep workbench = { path = "../workbench", features = ["plot", "dense", "faiss", "tsne", "llm", "parquet"] }
// Every notebook names the same features: the kernels compile the library once for all of them.
// Warm-up: the first code evcxr compiles against the library costs about 10 s whatever it
// holds (measured: a bare `let` took 9-12 s), so this cell pays it together with the build.
let warmed_up = workbench::display::Table::new(["kernel"]);
"""),
    ("markdown", """
## 1 · TF-IDF: report 002's worked example

Report 002 scores three documents for the query **"dogs"**:

* d1 = "cats and dogs are pets."
* d2 = "cats and dogs are pet animals though I prefer dogs. Dogs obey our commands, can be trained easily and play with us all the time."
* d3 = "Horses are also pets."

**Term frequency** `tf(t, d)` counts the term in the document; **inverse document frequency**
`idf(t) = log10(N / df(t))` is high for rare terms (`N` = 3 documents, `df` = documents
containing the term). First, the tokens: the report counts every word, lowercased, so we
index with `Analyzer::plain()` (lowercase only, no stopword removal, no stemming).
"""),
    ("code", """
use std::sync::Arc;
use workbench::display::Table;
use workbench::retrieve::analyzer::Analyzer;
use workbench::retrieve::bm25::{Bm25, Bm25Params, Bm25Variant};
use workbench::retrieve::tfidf::{TfIdf, TfIdfVariant};
use workbench::retrieve::Retriever;
use workbench::Passage;

/// A passage from a bit of text (the toy corpus has no source document).
fn toy(id: &str, text: &str) -> Passage {
    Passage { id: id.into(), doc_id: id.into(), title: String::new(), text: text.into(), start: 0, end: text.len() }
}
let started = std::time::Instant::now();

let toy_docs = vec![
    toy("d1", "cats and dogs are pets."),
    toy("d2", "cats and dogs are pet animals though I prefer dogs. Dogs obey our commands, can be trained easily and play with us all the time."),
    toy("d3", "Horses are also pets."),
];
let plain = Analyzer::plain();
let mut t = Table::new(["doc", "tokens (plain analyzer)", "|d|", "tf(dogs)"]).caption("The documents as the index sees them");
for d in &toy_docs {
    let toks = plain.analyze(&d.text);
    let tf = toks.iter().filter(|w| *w == "dogs").count();
    t.push([d.id.clone(), toks.join(" "), toks.len().to_string(), tf.to_string()])?;
}
t
"""),
    ("markdown", """
The report's lengths (5, 25 and 4 words) and counts (1, 3, 0) come out as printed: "Dogs"
and "dogs." both become `dogs`. Now the scores. `TfIdf::explain` shows, for one document,
each query term's tf, df, idf and weight, read from the same weights the retriever adds up.
"""),
    ("code", """
let raw = TfIdf::build(&toy_docs, &plain, TfIdfVariant::Raw)?;
let norm = TfIdf::new(raw.index().clone(), TfIdfVariant::LengthNormalized);
let report_raw = ["0.176", "0.528", "0"];
let report_norm = ["0.0352", "0.0212", "0"];
let mut t = Table::new(["doc", "tf", "df", "idf = log10(3/2)", "tf·idf (ours)", "report", "tf/|d|·idf (ours)", "report"])
    .caption("TF-IDF(\\"dogs\\", d): raw and normalised by document length");
for (i, d) in ["d1", "d2", "d3"].iter().enumerate() {
    let r = raw.explain("dogs", d)?;
    let n = norm.explain("dogs", d)?;
    let x = &r.terms[0];
    t.push([d.to_string(), x.tf.to_string(), x.df.to_string(), format!("{:.4}", x.idf),
            format!("{:.4}", r.score), report_raw[i].to_string(), format!("{:.5}", n.score), report_norm[i].to_string()])?;
}
t
"""),
    ("markdown", """
**Where we differ, and why.** Every number matches the slide except d2's normalised score:
we get 3 · 0.17609 / 25 = **0.02113**, the slide prints **0.0212**. The slide rounds the idf
to 0.176 first (3 · 0.176 / 25 = 0.02112) and then prints a digit that neither value rounds
to; it still ranks d1 (0.0352) above d2, as we do. The raw ranking is d2 > d1 (three
"dogs"); dividing by length flips it to d1 > d2, which is the slide's point.

The score of a document is a sum over query terms, so a longer query just adds rows.
Here is "cats and dogs" against d2, with `explain` showing each term's share.
A term in many documents gets a small idf (`and`, in two of three: 0.176):
"""),
    ("code", """
raw.explain("cats and dogs", "d2")?
"""),
    ("markdown", """
A document's whole TF-IDF vector (`TfIdf::passage_weights`): one weight per term it contains.
Rows are terms, columns the three documents (blank = the term is absent, weight 0).
`are` is in all three documents, so `log10(3/3) = 0` and it weighs nothing anywhere.
"""),
    ("code", """
let mut weights: std::collections::BTreeMap<String, [String; 3]> = Default::default();
for (j, d) in ["d1", "d2", "d3"].iter().enumerate() {
    for w in raw.passage_weights(d)? {
        weights.entry(w.term.clone()).or_default()[j] = format!("{} × {:.3} = {:.3}", w.tf, w.idf, w.weight);
    }
}
let mut t = Table::new(["term", "d1: tf × idf = weight", "d2", "d3"]).caption("Raw TF-IDF vectors of the three documents");
for (term, cells) in &weights {
    t.push([term.clone(), cells[0].clone(), cells[1].clone(), cells[2].clone()])?;
}
t
"""),
    ("markdown", """
**Analysis changes the numbers.** Search engines usually drop stopwords ("and", "are", …)
and stem ("pets" → "pet", "dogs" → "dog"). With the workbench's default analyzer (Lucene's
English stopwords, Snowball stemming) d2 has 19 tokens, not 25, so its length-normalised
score changes, and "pet" now matches all three documents. The cosine form (report 003,
scikit-learn's `TfidfVectorizer` weights: smooth idf `ln((1+N)/(1+df)) + 1`, L2-normalised
vectors) puts every score between 0 and 1:
"""),
    ("code", """
let stemmed = Analyzer::default();
let mut t = Table::new(["doc", "tokens (default analyzer)", "|d|", "raw", "length-normalised", "cosine"])
    .caption("\\"dogs\\" with stopwords removed and Snowball stemming");
let r = TfIdf::build(&toy_docs, &stemmed, TfIdfVariant::Raw)?;
let n = TfIdf::new(r.index().clone(), TfIdfVariant::LengthNormalized);
let c = TfIdf::new(r.index().clone(), TfIdfVariant::cosine());
for d in &toy_docs {
    let toks = stemmed.analyze(&d.text);
    t.push([d.id.clone(), toks.join(" "), toks.len().to_string(), format!("{:.4}", r.explain("dogs", &d.id)?.score),
            format!("{:.4}", n.explain("dogs", &d.id)?.score), format!("{:.4}", c.explain("dogs", &d.id)?.score)])?;
}
t
"""),
    ("markdown", """
## 2 · BM25: each term's contribution

From here on the corpus is real: the first eight paragraphs of the "Normans" article in
SQuAD 2.0 (the data set of report 002), and report 002's example question,
**"In what country is Normandy located?"** (gold answer: France).

BM25 refines TF-IDF in two ways. Term frequency **saturates**: the 3rd occurrence of a
word adds less than the 1st. And length is normalised softly, against the corpus's average
length. For one term, with `K(d) = k1 · (1 − b + b · dl/avgdl)`:

`score(t, d) = idf(t) · tf / (K(d) + tf)` (Lucene's form, the workbench default: `k1 = 0.9`, `b = 0.4`,
`idf = ln(1 + (N − df + 0.5)/(df + 0.5))`); report 002 prints the ATIRE form, `ln(N/df)` and a `(k1 + 1)` factor.
"""),
    ("code", """
use workbench::assets::Assets;
use workbench::chunk::{Chunker, WholeDocument};
let assets = Assets::load()?;
let squad = workbench::load::squad::load(&assets.resolve("squad-v2-dev-half", "dev-v2.0.json")?)?;
let mut passages: Vec<Passage> = Vec::new();
for doc in squad.contexts.iter().filter(|d| d.title == "Normans").take(8) {
    passages.extend(WholeDocument.chunk(doc)?);
}
let question = squad.examples.iter().find(|q| q.question == "In what country is Normandy located?")
    .ok_or(workbench::Error::Empty("the example question is not in the SQuAD file".into()))?.clone();
let mut t = Table::new(["passage", "words", "text (first 110 characters)"]).caption("The corpus: 8 SQuAD 2.0 paragraphs");
for p in &passages {
    t.push([p.id.clone(), workbench::text::word_count(&p.text).to_string(), p.text.chars().take(110).collect::<String>() + "…"])?;
}
println!("question: {}\\ngold answers: {}\\ngold paragraph: {}", question.question, question.answers.join(" | "),
         question.context_id.as_deref().unwrap_or("(none)"));
t
"""),
    ("code", """
let bm25 = Bm25::build(&passages, &Analyzer::default(), Bm25Params::default())?;
println!("query tokens after analysis: {:?}", Analyzer::default().analyze(&question.question));
println!("N = {} passages, avgdl = {:.1} tokens", bm25.index().len(), bm25.index().avg_doc_len());
let bm25_hits = bm25.retrieve(&question.question, 5)?;
let mut t = Table::new(["rank", "passage", "BM25 score"]).caption(bm25.name());
for (i, h) in bm25_hits.iter().enumerate() {
    t.push([(i + 1).to_string(), h.id.clone(), format!("{:.4}", h.score)])?;
}
t
"""),
    ("markdown", """
Why does the top passage win? `Bm25::explain` splits its score into one row per query term:
`idf` (rarity), `tf part` (the saturated frequency, at most 1 in Lucene's form) and their
product, the term's **contribution**. The contributions add up to the score above.
The first and the second passage, one table each:
"""),
    ("code", """
bm25.explain(&question.question, &bm25_hits[0].id)?.evcxr_display();
bm25.explain(&question.question, &bm25_hits[1].id)?
"""),
    ("markdown", """
Only `normandi` counts: "what", "countri" and "locat" occur in none of the eight passages
(they say "France", "region", "situated"), so they are left out of the explanation and
every passage is ranked by how often (and in how long a text) it uses the one word
"Normandy"; the gold paragraph, `Normans#0`, is not first. This **vocabulary mismatch** is
what dense retrieval (section 3) and MaxSim (section 5) address.

A question that shares more words with the corpus shows the sum at work: each term adds its
own contribution, rare terms (small df, large idf) the most.
"""),
    ("code", """
let q2 = "Who was the Norse leader who agreed to swear fealty to the king?";
let top2 = bm25.retrieve(q2, 1)?[0].id.clone();
bm25.explain(q2, &top2)?
"""),
    ("markdown", """
The first question's top passage with report 002's printed formula (ATIRE: idf `ln(N/df)`, numerator
`k1 + 1`). A term in every passage gets idf `ln(1) = 0`; rarer terms weigh more.
"""),
    ("code", """
let atire = Bm25::new(bm25.index().clone(), Bm25Params::default().variant(Bm25Variant::Atire))?;
atire.explain(&question.question, &bm25_hits[0].id)?
"""),
    ("markdown", """
**Saturation.** The tf part for a passage of average length, as tf grows, for a few `k1`
(Lucene form, so it approaches 1). With small `k1` the first occurrence earns almost
everything; in raw TF-IDF the same curve would be a straight line that keeps growing.
"""),
    ("code", """
use workbench::plot::{render, Line, Lines};
let lines: Vec<Line> = [0.5f32, 0.9, 1.5, 3.0].iter().map(|&k1| {
    let p = Bm25Params::default().k1(k1);
    Line { label: format!("k1 = {k1}"), points: (0..=10).map(|tf| (tf as f64, p.saturation(tf as f64, 100.0, 100.0))).collect() }
}).collect();
let saturation = Lines { title: "BM25 term-frequency saturation (dl = avgdl)".into(), x_label: "tf (occurrences in the passage)".into(),
                         y_label: "tf part = tf / (K + tf)".into(), lines, log_x: false, y_range: Some((0.0, 1.0)), size: (640, 360) };
// Bound to a name first: evcxr shows a final `render(..)?` as plain text with these features.
let figure = render(&saturation)?;
figure
""", "figure"),
    ("markdown", """
## 3 · Dense embeddings and nearest neighbours

A dense retriever maps every text to one vector, here with **all-MiniLM-L6-v2**
(384 dimensions, mean of the last layer's token vectors, L2-normalised, so the dot
product of two vectors is their cosine). Similar meaning → nearby vectors, even with no
word in common.
"""),
    ("code", """
use workbench::encode::{BertEncoder, EncoderParams};
let encoder = Arc::new(BertEncoder::load(&assets, "all-minilm-l6-v2", EncoderParams::default())?);
let q_vec = encoder.embed_one(&question.question)?;
let p_vecs = encoder.embed(&passages.iter().map(|p| p.text.as_str()).collect::<Vec<_>>())?;
let norm2: f32 = q_vec.iter().map(|x| x * x).sum();
println!("query vector: {} dimensions, norm {:.4}, first 8: {:?}", q_vec.len(), norm2.sqrt(),
         q_vec[..8].iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>());
/// Dot product = cosine for L2-normalised vectors.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
let mut t = Table::new(["passage", "cosine(query, passage)"]).caption("Query–passage cosines (the dense retriever's scores)");
for (p, v) in passages.iter().zip(&p_vecs) {
    t.push([p.id.clone(), format!("{:.4}", dot(&q_vec, v))])?;
}
t
"""),
    ("markdown", """
The dense retriever does the same search with a FAISS index (exact inner product here;
HNSW or IVF for millions of passages). Its ranking is the cosine column sorted:
"""),
    ("code", """
use workbench::retrieve::{dense::DenseRetriever, faiss::IndexParams};
let dense = DenseRetriever::build(encoder.clone(), &passages, IndexParams::flat_ip(), None)?;
let dense_hits = dense.retrieve(&question.question, 5)?;
let mut t = Table::new(["rank", "dense", "score", "BM25", "score"]).caption("Top 5 of each retriever");
for i in 0..5 {
    t.push([(i + 1).to_string(), dense_hits[i].id.clone(), format!("{:.4}", dense_hits[i].score),
            bm25_hits[i].id.clone(), format!("{:.4}", bm25_hits[i].score)])?;
}
t
"""),
    ("markdown", """
**Nearest neighbours among the passages.** Each passage's closest other passage by cosine:
paragraphs on the same sub-topic pull together.
"""),
    ("code", """
let mut t = Table::new(["passage", "nearest other passage", "cosine", "farthest", "cosine"]).caption("Passage–passage neighbours in the embedding space");
for (i, p) in passages.iter().enumerate() {
    let mut sims: Vec<(usize, f32)> = (0..passages.len()).filter(|&j| j != i).map(|j| (j, dot(&p_vecs[i], &p_vecs[j]))).collect();
    sims.sort_by(|a, b| b.1.total_cmp(&a.1));
    let (near, far) = (sims[0], sims[sims.len() - 1]);
    t.push([p.id.clone(), passages[near.0].id.clone(), format!("{:.3}", near.1), passages[far.0].id.clone(), format!("{:.3}", far.1)])?;
}
t
"""),
    ("markdown", """
## 4 · Fusing two ranked lists

BM25 and the dense retriever make different mistakes, so combining them often helps.
Two ways (`workbench::retrieve::fusion`):

* **Reciprocal Rank Fusion** (report 002, k = 60): `RRF(d) = Σ_lists 1 / (k + rank(d))`. Only
  ranks count, so the lists' score scales do not matter.
* **Normalised weighted sum** (report 001's hybrid): min-max normalise each list's scores to
  [0, 1], then `w · dense + (1 − w) · sparse` (w = 0.5 here); a passage missing from a list gets 0 there.
"""),
    ("code", """
use workbench::retrieve::fusion::{min_max, Fusion, RRF_K};
let lists = vec![dense_hits.clone(), bm25_hits.clone()];
let rrf = Fusion::rrf().fuse(&lists)?;
let hybrid = Fusion::hybrid(0.5)?.fuse(&lists)?;
/// 1-based rank of a passage in a list, if it is there.
fn rank_in(list: &[workbench::Hit], id: &str) -> Option<usize> {
    list.iter().position(|h| h.id == id).map(|r| r + 1)
}
/// A rank for a table ("–" when absent).
fn show(r: Option<usize>) -> String {
    r.map_or("–".to_string(), |r| r.to_string())
}
/// RRF's term for one list: 1 / (k + rank), 0 when the passage is not in the list.
fn rrf_term(r: Option<usize>) -> String {
    r.map_or("0".to_string(), |r| format!("1/{} = {:.5}", RRF_K as usize + r, 1.0 / (RRF_K as f64 + r as f64)))
}
// Min-max normalised scores of each list (what the weighted sum adds); 0 when absent.
let mm: Vec<Vec<f64>> = lists.iter().map(|l| min_max(l)).collect();
let mut t = Table::new(["passage", "dense rank", "BM25 rank", "RRF: dense term", "RRF: BM25 term", "RRF score", "RRF rank",
                        "dense min-max", "BM25 min-max", "hybrid 0.5·d + 0.5·s", "hybrid rank"])
    .caption("Fusion of the dense and BM25 top 5, term by term (scores from Fusion::fuse)");
for (i, h) in rrf.iter().enumerate() {
    let (rd, rs) = (rank_in(&dense_hits, &h.id), rank_in(&bm25_hits, &h.id));
    let hy = hybrid.iter().position(|x| x.id == h.id).unwrap();
    t.push([h.id.clone(), show(rd), show(rs), rrf_term(rd), rrf_term(rs), format!("{:.5}", h.score), (i + 1).to_string(),
            format!("{:.3}", rd.map_or(0.0, |r| mm[0][r - 1])), format!("{:.3}", rs.map_or(0.0, |r| mm[1][r - 1])), format!("{:.3}", hybrid[hy].score), (hy + 1).to_string()])?;
}
t
"""),
    ("markdown", """
## 5 · MaxSim (late interaction) and token relevance

A single vector per passage squeezes all its meaning into 384 numbers. **Late interaction**
(ColBERT; report 003) keeps one vector per token instead. Each query token finds its most
similar passage token; the score is the mean of those maxima:

`MaxSim(q, d) = (1/|q|) · Σ_i max_j cos(q_i, d_j)`

No trained ColBERT model is available offline, so the token vectors are all-MiniLM-L6-v2's
raw last-layer states (the same encoder as above): good enough to see how it works, not a
ColBERT. First, each query token's best match in the top fused passage:
"""),
    ("code", """
use workbench::rerank::late_interaction::{relevance_scores, LateInteraction, MaxSimReranker, RelevanceParams};
use workbench::rerank::{PassageLookup, Reranker};
let li = Arc::new(LateInteraction::new(encoder.clone()));
let top_id = rrf[0].id.clone();
let top_text = passages.iter().find(|p| p.id == top_id).unwrap().text.clone();
let q_tok = li.encode_query(&question.question)?;
let d_tok = li.encode(&top_text)?;
let dim = li.dim();
let one = RelevanceParams { k_tilde: 1, bandwidth: None };
let mut t = Table::new(["query token", "best passage token", "position", "cosine"]).caption(format!("MaxSim of the question against {top_id}"));
let mut sum = 0.0f32;
for (i, tok) in q_tok.tokens.iter().enumerate() {
    // One query row against every passage row: its best match (k̃ = 1) and that cosine.
    let r = relevance_scores(&q_tok.vectors[i * dim..(i + 1) * dim], &d_tok.vectors, dim, &one)?;
    let j = r.chosen[0];
    sum += r.score;
    t.push([tok.clone(), d_tok.tokens[j].clone(), j.to_string(), format!("{:.4}", r.score)])?;
}
println!("{} query tokens, {} passage tokens; mean of the maxima = {:.4}; LateInteraction::score = {:.4}",
         q_tok.tokens.len(), d_tok.tokens.len(), sum / q_tok.tokens.len() as f32, li.score(&question.question, &top_text)?);
t
"""),
    ("markdown", """
**Re-ranking.** MaxSim is too slow to score millions of passages one by one, so it usually
re-ranks a first stage's candidates: here the RRF list.
"""),
    ("code", """
let lookup = PassageLookup::from_passages(&passages)?;
let reranker = MaxSimReranker::new(li.clone());
let reranked = reranker.rerank(&question.question, &rrf, &lookup, rrf.len())?;
let mut t = Table::new(["rank", "passage", "MaxSim", "RRF rank before"]).caption(reranker.name());
for (i, h) in reranked.iter().enumerate() {
    t.push([(i + 1).to_string(), h.id.clone(), format!("{:.4}", h.score), show(rank_in(&rrf, &h.id))])?;
}
t
"""),
    ("markdown", """
**Token relevance** (report 003 §5): which passage tokens the query "looked at". Each query
token credits its k̃ = 2 best passage tokens; `R_abs` counts the credits a token gets,
`R_acc` sums their cosines, and a kernel density smooths the credited positions. Darker =
more relevant; hover a token for its numbers.
"""),
    ("code", """
li.token_relevance(&question.question, &top_text, &RelevanceParams::default())?
"""),
    ("markdown", """
## 6 · The reader: prompt and answer

The reader is **SmolLM2-135M-Instruct** (a 135M-parameter chat model, 4-bit GGUF, run on
the CPU by the workbench on candle). It gets the top 3 passages of the MaxSim re-ranking
and the question, in the model's own chat template, with instructions to answer with a
short phrase or "Not found".

First the model is loaded, and the passages become the reader's contexts:
"""),
    ("code", """
use workbench::read::generative::{GenerativeReader, Llm, LoadOptions, ReaderOptions};
use workbench::read::{Context, Reader};
let contexts: Vec<Context> = reranked.iter().take(3).filter_map(|h| {
    passages.iter().find(|p| p.id == h.id)
        .map(|p| Context { id: p.id.clone(), title: p.title.clone(), text: p.text.clone(), score: h.score })
}).collect();
let t0 = std::time::Instant::now();
// f32_prefill: the prompt goes through f32 copies of the weights (gemm), faster than the
// quantised kernels for this small model at the cost of those copies' memory (docs/readers.md
// says why); decoding stays quantised.
let load = LoadOptions { f32_prefill: true, ..LoadOptions::default() };
let mut reader = GenerativeReader::new(Llm::from_asset("smollm2-135m-instruct-gguf", &load)?, ReaderOptions::default())?;
let load_secs = t0.elapsed().as_secs_f64();
"""),
    ("markdown", """
The next cell prints the prompt exactly as the model reads it (special tokens such as
`<|im_start|>` come from the GGUF's chat template), then the answer with its token counts
and timings:
"""),
    ("code", """
let built = reader.build_prompt(&question.question, &contexts)?;
let (prompt, prompt_ids) = (built.text.clone(), built.ids.len());
let answer = reader.read(&question.question, &contexts)?;
let reader_name = reader.name().to_string();
println!("{reader_name}: loaded in {load_secs:.1} s; prompt {prompt_ids} tokens\n");
println!("{prompt}");
let u = answer.usage.clone();
let mut t = Table::new(["", "value"]).caption(format!("{reader_name} over the MaxSim top 3"));
t.push(["question".to_string(), question.question.clone()])?;
t.push(["answer".to_string(), answer.text.clone()])?;
t.push(["abstained (\\"Not found\\")".to_string(), answer.abstained.to_string()])?;
t.push(["passages read".to_string(), answer.passage_ids.join(", ")])?;
t.push(["gold answers".to_string(), question.answers.join(" | ")])?;
t.push(["prompt tokens / generated tokens".to_string(), format!("{} / {}", u.prompt_tokens, u.generated_tokens)])?;
// The first question after the load (which warmed the model up). A decode rate needs two
// passes or more.
let decode = if u.decode_steps < 2 { format!("{:.2} s ({} pass)", u.decode_secs, u.decode_steps) }
    else { format!("{:.2} s ({} passes, {:.1} passes/s)", u.decode_secs, u.decode_steps, u.decode_tokens_per_sec()) };
t.push(["prefill / decode (first question)".to_string(), format!("{:.2} s ({:.0} tok/s) / {decode}", u.prefill_secs, u.prefill_tokens_per_sec())])?;
t
"""),
    ("markdown", """
## 7 · Scoring the answer: EM and F1

SQuAD's metrics (used by reports 001, 002 and 004) compare **normalised** strings:
lowercase, drop punctuation and the articles a/an/the, collapse spaces.

* **Exact match (EM)**: 1 if the normalised answer equals a normalised gold answer, else 0.
* **F1**: split both into tokens; `common` = tokens in both (as a multiset);
  precision `P = |common| / |answer|`, recall `R = |common| / |gold|`, `F1 = 2PR / (P + R)`.

Both take the best over the gold answers. `evaluate::qa::explain_answer` shows every step
for the reader's answer. A 135M-parameter model often ignores "answer with a short phrase"
and writes a sentence: then EM is 0 even when the sentence holds the right answer, and F1
gives partial credit, diluted by every extra word (low precision, full recall).
"""),
    ("code", """
use workbench::evaluate::qa::{exact_match, explain_answer, f1};
fn steps(pred: &str, golds: &[String]) -> workbench::Result<Table> {
    let mut t = Table::new(["answer", "gold", "normalised answer", "normalised gold", "common tokens", "P", "R", "F1", "EM"]);
    for s in explain_answer(pred, golds) {
        t.push([pred.to_string(), s.gold.clone(), s.pred_normalized.clone(), s.gold_normalized.clone(), s.common.join(" "),
                format!("{:.3}", s.precision), format!("{:.3}", s.recall), format!("{:.3}", s.f1), format!("{:.0}", s.exact)])?;
    }
    Ok(t)
}
let golds = question.answers.clone();
println!("the reader's answer {:?}: EM = {:.0}, F1 = {:.3}", answer.text, exact_match(&answer.text, &golds), f1(&answer.text, &golds));
steps(&answer.text, &golds)?
"""),
    ("markdown", """
Some other answers the same question could have received, to see how the two metrics
differ: F1 gives partial credit for overlapping words, EM does not; articles and
punctuation do not count; an abstention scores 0 on an answerable question.
"""),
    ("code", """
let mut t = Table::new(["answer", "normalised", "common with \\"France\\"", "P", "R", "F1", "EM"]).caption("EM and F1 of other answers against the gold \\"France\\"");
for pred in ["France", "the France.", "in France", "Normandy, France", "northern France", "French", "Not found"] {
    let s = &explain_answer(pred, &golds)[0];
    t.push([pred.to_string(), s.pred_normalized.clone(), s.common.join(" "), format!("{:.3}", s.precision),
            format!("{:.3}", s.recall), format!("{:.3}", f1(pred, &golds)), format!("{:.0}", exact_match(pred, &golds))])?;
}
t.evcxr_display();
"""),
    ("markdown", """
## 8 · Deciding when to retrieve: a method's loop

So far every question was retrieved for once and read once. A **method** changes that
control flow (`[method]` in a pipeline config, docs/pipelines.md). The **adaptive** method
first lets the model answer closed-book; it keeps that answer when the model was sure of it
(the geometric mean of its token probabilities is at least `threshold` = 0.5) and it is not
"Not found"; otherwise it retrieves and reads; and when the read over the passages says
"Not found", it falls back to the closed-book answer.

The next cell runs `configs/examples/adaptive.toml` (BM25 over twelve example passages,
SmolLM2 as reader and model) on four of its questions:
"""),
    ("code", """
use workbench::pipeline::{study::{run_config, scaled, ModelPool}, PipelineConfig};
let config = PipelineConfig::from_file("../configs/examples/adaptive.toml".as_ref())?;
let run = run_config(&mut ModelPool::default(), scaled(config, Some(4), None))?;
run.summary().to_table()
"""),
    ("markdown", """
Every call the method made is a **step** of the question's trace: the closed-book
generation with its confidence, then (when it was unsure) the retrieval with the passages it
found and the read. The questions answered without a retrieval have one step:
"""),
    ("code", """
let mut t = Table::new(["question", "step", "purpose", "query", "passages", "text", "confidence", "tokens in / out", "s"])
    .caption("adaptive method: every call, per question");
for r in &run.records {
    for (i, s) in r.steps.iter().enumerate() {
        t.push([if i == 0 { r.question.clone() } else { String::new() }, format!("{:?}", s.kind), s.purpose.clone(),
                s.query.clone().unwrap_or_default(), s.passage_ids.join(", "), s.text.clone(),
                s.confidence.map_or(String::new(), |c| format!("{c:.3}")),
                format!("{} / {}", s.prompt_tokens, s.generated_tokens), format!("{:.2}", s.secs)])?;
    }
}
t
"""),
    ("markdown", """
Each question is then scored as any run's is. The passages retrieved at any step count for
context precision and for the outcome: a wrong answer is a retrieval miss only when no
step found a passage holding a gold answer; a question answered closed-book has no passage
to judge, so a wrong answer there counts as the reader's miss.
"""),
    ("code", """
let mut scores = Table::new(["question", "gold", "prediction", "retrieval calls", "EM", "F1", "outcome"]);
for r in &run.records {
    scores.push([r.question.clone(), r.gold_answers.join(" | "), r.prediction.clone(), r.retrieval_calls().to_string(),
                 format!("{:.0}", r.em), format!("{:.2}", r.f1), format!("{:?}", r.outcome)])?;
}
scores
"""),
    ("markdown", """
### A loop, step by step: IRCoT

Adaptive retrieves once at most. **IRCoT** interleaves retrieval with reasoning: it
retrieves with the question, lets the model write one sentence of reasoning over the
passages found so far, retrieves again with that sentence, and repeats (at most
`max_steps` sentences). A sentence holding "So the answer is" ends the loop with the text
after it as the answer; so does an empty one (the model wrote nothing more), and then the
reader answers over every passage found. The same config with its `[method]` replaced by
IRCoT's, on one question; each retrieval after the first has the sentence before it as its
query, and a 135M model's sentence may find nothing new (an empty passages cell):
"""),
    ("code", """
use workbench::method::{ircot::Ircot, MethodSpec};
let mut pool = ModelPool::default();
let mut config = PipelineConfig::from_file("../configs/examples/adaptive.toml".as_ref())?;
config.method = Some(MethodSpec::Ircot(Ircot { max_steps: 3, ..Ircot::default() }));
let ircot = run_config(&mut pool, scaled(config, Some(1), None))?;
let r = ircot.records[0].clone();
let mut t = Table::new(["step", "purpose", "query", "passages", "text", "tokens in / out"])
    .caption(format!("IRCoT on {:?} (gold {:?}): every call", r.question, r.gold_answers.join(" | ")));
for s in &r.steps {
    t.push([format!("{:?}", s.kind), s.purpose.clone(), s.query.clone().unwrap_or_default(), s.passage_ids.join(", "),
            s.text.clone(), format!("{} / {}", s.prompt_tokens, s.generated_tokens)])?;
}
println!("answer {:?}: EM {:.0}, {} retrieval calls", r.prediction, r.em, r.retrieval_calls());
t
"""),
    ("markdown", """
Every method of `workbench::method` on that question, the same corpus, retriever and model
(docs/methods.md compares them on whole question sets, with paired tests). The steps column
is each method's control flow as it ran. Self-Ask and agentic search only when the model
writes a follow-up question or a `<search>` tag; a model this small often answers at once,
and then they make no retrieval at all:
"""),
    ("code", """
use workbench::method::{adaptive::Adaptive, agentic::Agentic, closed_book::ClosedBook, flare::Flare,
                        iter_retgen::IterRetgen, self_ask::SelfAsk};
let specs = [MethodSpec::ClosedBook(ClosedBook::default()), MethodSpec::Naive, MethodSpec::Adaptive(Adaptive::default()),
             MethodSpec::IterRetgen(IterRetgen::default()), MethodSpec::Ircot(Ircot::default()),
             MethodSpec::SelfAsk(SelfAsk::default()), MethodSpec::Flare(Flare::default()), MethodSpec::Agentic(Agentic::default())];
let mut t = Table::new(["method", "steps", "retrieval calls", "tokens in / out", "answer", "EM"])
    .caption(format!("every method on {:?}", r.question));
for spec in specs {
    let mut c = PipelineConfig::from_file("../configs/examples/adaptive.toml".as_ref())?;
    c.method = Some(spec.clone());
    let run = run_config(&mut pool, scaled(c, Some(1), None))?;
    let q = &run.records[0];
    let steps: Vec<String> = q.steps.iter().map(|s| format!("{:?}", s.kind)).collect();
    t.push([spec.kind().to_string(), steps.join(" → "), q.retrieval_calls().to_string(),
            format!("{} / {}", q.prompt_tokens, q.generated_tokens), q.prediction.clone(), format!("{:.0}", q.em)])?;
}
t.evcxr_display();
println!("notebook cells ran in {:.1} s (wall clock since the first code cell after :dep, evcxr's per-cell compilation included)",
         started.elapsed().as_secs_f64());
"""),
]
