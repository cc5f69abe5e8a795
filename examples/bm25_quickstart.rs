//! The workbench from Rust in a few lines, with no asset to fetch: three documents, one
//! passage each, a BM25 index, two questions, and the run scored as trec_eval scores it.
//! The README quotes this file.
//!
//! `cargo run --release --example bm25_quickstart`

use workbench::chunk::{Chunker, WholeDocument};
use workbench::evaluate::{evaluate, Metric};
use workbench::retrieve::analyzer::AnalyzerParams;
use workbench::retrieve::bm25::{Bm25, Bm25Params};
use workbench::retrieve::Retriever;
use workbench::{Document, Qrels, Query};

fn main() -> workbench::Result<()> {
    let docs = [
        Document::new("paris", "Paris", "Paris is the capital of France."),
        Document::new("berlin", "Berlin", "Berlin is the capital of Germany."),
        Document::new("hamlet", "Hamlet", "Hamlet is a tragedy by Shakespeare."),
    ];
    let passages = WholeDocument.chunk_all(&docs)?;
    // Lucene's BM25; the analyzer lowercases, drops Lucene's English stopwords and stems with
    // Snowball English (Porter2).
    let analyzer = AnalyzerParams::default().build()?;
    let bm25 = Bm25::build(&passages, &analyzer, Bm25Params::new().k1(0.9).b(0.4))?;

    let (mut queries, mut qrels) = (Vec::new(), Qrels::new());
    for (id, text, relevant) in [
        ("q1", "What is the capital of France?", "paris"),
        ("q2", "Who wrote Hamlet?", "hamlet"),
    ] {
        queries.push(Query {
            id: id.into(),
            text: text.into(),
        });
        qrels
            .entry(id.into())
            .or_default()
            .insert(relevant.into(), 1);
    }
    let run = bm25.retrieve_all(&queries, 3)?;
    for q in &queries {
        let top = &run[&q.id][0];
        println!("{} -> {} ({:.3})", q.text, top.id, top.score);
    }
    for m in evaluate(&run, &qrels, &[Metric::Ndcg(10), Metric::Mrr(10)])? {
        println!("{} = {:.4} over {} queries", m.name, m.mean, m.queries());
    }
    Ok(())
}
