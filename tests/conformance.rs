//! Retriever conformance: every retriever in [`cases`] is run against
//! `tests/data/retrieval_conformance.toml` and checked against the [`Retriever`]
//! contract (k = 0 is an error, k beyond the corpus returns every scoreable passage,
//! empty query → no hits for lexical retrievers, descending scores with ties by id).
//! Plus property-based oracle tests for BM25's top-k selection and for index
//! save / load.
//!
//! To add a retriever (e.g. a dense one), add one line to [`cases`].

use proptest::prelude::*;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use workbench::retrieve::analyzer::Analyzer;
use workbench::retrieve::bm25::{Bm25, Bm25Params, Bm25Variant};
use workbench::retrieve::conformance::Suite;
use workbench::retrieve::fusion::{Fused, Fusion, FusionMethod};
use workbench::retrieve::index::InvertedIndex;
use workbench::retrieve::tfidf::{TfIdf, TfIdfVariant};
use workbench::retrieve::Retriever;
use workbench::{Error, Hit, Passage, Result};

/// Builds a retriever over a corpus.
type Build = fn(&[Passage]) -> Result<Box<dyn Retriever>>;

/// One retriever under test.
struct Case {
    /// Label for failure messages.
    label: &'static str,
    /// Lexical retrievers score only passages sharing a query term, and return
    /// nothing for an empty query; others (dense) score every passage.
    lexical: bool,
    build: Build,
}

impl Case {
    /// A lexical retriever.
    fn lexical(label: &'static str, build: Build) -> Self {
        Case {
            label,
            lexical: true,
            build,
        }
    }

    /// A retriever that scores every passage (e.g. dense).
    #[allow(dead_code)]
    fn dense(label: &'static str, build: Build) -> Self {
        Case {
            label,
            lexical: false,
            build,
        }
    }
}

fn boxed<R: Retriever + 'static>(r: Result<R>) -> Result<Box<dyn Retriever>> {
    Ok(Box::new(r?))
}

fn bm25(p: &[Passage], variant: Bm25Variant) -> Result<Bm25> {
    Bm25::build(p, &Analyzer::default(), Bm25Params::new().variant(variant))
}

fn tfidf(p: &[Passage], variant: TfIdfVariant) -> Result<TfIdf> {
    TfIdf::build(p, &Analyzer::default(), variant)
}

/// BM25 (Lucene) and TF-IDF (cosine), the two inner retrievers of the fused cases.
fn bm25_and_tfidf(p: &[Passage]) -> Result<Vec<Box<dyn Retriever>>> {
    Ok(vec![
        boxed(bm25(p, Bm25Variant::Lucene))?,
        boxed(tfidf(p, TfIdfVariant::cosine()))?,
    ])
}

fn fused(p: &[Passage], method: FusionMethod) -> Result<Fused> {
    Fused::new(bm25_and_tfidf(p)?, Fusion::new(method, None)?, 100)
}

/// `inner` served by the retrieval server on a free loopback port, asked through the
/// `http` retriever (the server stops when it is dropped).
struct OverHttp {
    client: workbench::retrieve::http::HttpRetriever,
    _server: workbench::serve::ServerHandle,
}

impl Retriever for OverHttp {
    fn name(&self) -> String {
        self.client.name()
    }
    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        self.client.retrieve(query, k)
    }
}

fn over_http(p: &[Passage], inner: Box<dyn Retriever>) -> Result<OverHttp> {
    use workbench::serve::{ServeParams, Served, Server};
    let served = Served::new(Arc::from(inner), p.to_vec())?;
    let params = ServeParams {
        log: false,
        ..ServeParams::default()
    };
    let server = Server::bind("127.0.0.1:0", served, params)?.spawn()?;
    let client = workbench::retrieve::http::HttpRetriever::new(
        &server.url(),
        std::time::Duration::from_secs(30),
        64,
        p,
    )?;
    Ok(OverHttp {
        client,
        _server: server,
    })
}

/// Every retriever under test: one line each.
#[rustfmt::skip]
fn cases() -> Vec<Case> {
    vec![
        Case::lexical("tfidf-raw", |p| boxed(tfidf(p, TfIdfVariant::Raw))),
        Case::lexical("tfidf-lennorm", |p| boxed(tfidf(p, TfIdfVariant::LengthNormalized))),
        Case::lexical("tfidf-cosine", |p| boxed(tfidf(p, TfIdfVariant::cosine()))),
        Case::lexical("tfidf-cosine-sublinear", |p| boxed(tfidf(p, TfIdfVariant::Cosine { sublinear_tf: true }))),
        Case::lexical("bm25-robertson", |p| boxed(bm25(p, Bm25Variant::Robertson))),
        Case::lexical("bm25-atire", |p| boxed(bm25(p, Bm25Variant::Atire))),
        Case::lexical("bm25-lucene", |p| boxed(bm25(p, Bm25Variant::Lucene))),
        Case::lexical("rrf(bm25,tfidf)", |p| boxed(fused(p, FusionMethod::rrf()))),
        Case::lexical("hybrid(tfidf,bm25)", |p| boxed(Fused::hybrid(boxed(tfidf(p, TfIdfVariant::cosine()))?, boxed(bm25(p, Bm25Variant::Lucene))?, 0.5, 100))),
        Case::lexical("zscore(bm25,tfidf)", |p| boxed(fused(p, FusionMethod::ZScore))),
        Case::lexical("combsum(bm25,tfidf)", |p| boxed(fused(p, FusionMethod::CombSum))),
        Case::lexical("combmnz(bm25,tfidf)", |p| boxed(fused(p, FusionMethod::CombMnz))),
        Case::lexical("http(bm25-lucene)", |p| boxed(over_http(p, boxed(bm25(p, Bm25Variant::Lucene))?))),
        // Case::dense("dense-minilm", |p| boxed(Dense::build(p, ...))),
    ]
}

fn suite() -> Suite {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/retrieval_conformance.toml");
    Suite::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn build_all(corpus: &[Passage]) -> Vec<(&'static str, bool, Box<dyn Retriever>)> {
    cases()
        .into_iter()
        .map(|c| {
            let r = (c.build)(corpus).unwrap_or_else(|e| panic!("{}: build failed: {e}", c.label));
            (c.label, c.lexical, r)
        })
        .collect()
}

/// Ids of the passages that share at least one analysed term with `query`.
fn scoreable(corpus: &[Passage], query: &str) -> BTreeSet<String> {
    let a = Analyzer::default();
    let q: BTreeSet<String> = a.analyze(query).into_iter().collect();
    corpus
        .iter()
        .filter(|p| a.analyze(&p.text).iter().any(|t| q.contains(t)))
        .map(|p| p.id.clone())
        .collect()
}

/// Descending score, ties by ascending id, no NaN.
fn check_order(label: &str, query: &str, hits: &[Hit]) {
    for h in hits {
        assert!(
            !h.score.is_nan(),
            "{label} / {query:?}: NaN score for {}",
            h.id
        );
    }
    for w in hits.windows(2) {
        let ok = w[0].score > w[1].score || (w[0].score == w[1].score && w[0].id < w[1].id);
        assert!(ok, "{label} / {query:?}: {:?} before {:?}", w[0], w[1]);
    }
}

#[test]
fn expected_rankings() {
    let suite = suite();
    let corpus = suite.corpus();
    let mut failures = Vec::new();
    for (label, _, r) in build_all(&corpus) {
        for q in &suite.queries {
            let hits = r.retrieve(&q.text, 10).unwrap();
            let got: Vec<&str> = hits
                .iter()
                .take(q.expected_top.len())
                .map(|h| h.id.as_str())
                .collect();
            if got != q.expected_top {
                failures.push(format!(
                    "{label} ({}) on {} {:?}: expected {:?}, got {:?}",
                    r.name(),
                    q.id,
                    q.text,
                    q.expected_top,
                    hits.iter()
                        .map(|h| (h.id.as_str(), h.score))
                        .collect::<Vec<_>>()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn k_zero_is_an_invalid_param() {
    let corpus = suite().corpus();
    for (label, _, r) in build_all(&corpus) {
        match r.retrieve("eiffel tower", 0) {
            Err(Error::InvalidParam { name: "k", .. }) => {}
            other => panic!("{label}: k = 0 gave {other:?}"),
        }
    }
}

#[test]
fn k_beyond_corpus_returns_every_scoreable_passage() {
    let suite = suite();
    let corpus = suite.corpus();
    let n = corpus.len();
    for (label, lexical, r) in build_all(&corpus) {
        for q in suite
            .queries
            .iter()
            .map(|q| q.text.as_str())
            .chain(["tower", "plants honey river"])
        {
            for k in [n, n + 1, 1000, usize::MAX] {
                let hits = r
                    .retrieve(q, k)
                    .unwrap_or_else(|e| panic!("{label} / {q:?} / k={k}: {e}"));
                let got: BTreeSet<String> = hits.iter().map(|h| h.id.clone()).collect();
                assert_eq!(got.len(), hits.len(), "{label} / {q:?}: duplicate ids");
                if lexical {
                    assert_eq!(got, scoreable(&corpus, q), "{label} / {q:?} / k={k}");
                } else {
                    assert_eq!(hits.len(), n, "{label} / {q:?} / k={k}");
                }
            }
        }
    }
}

#[test]
fn empty_or_stopword_query_returns_nothing_for_lexical_retrievers() {
    let corpus = suite().corpus();
    for (label, lexical, r) in build_all(&corpus) {
        if !lexical {
            continue;
        }
        for q in ["", "   ", "?!.,", "the of and is", "zzz unknownword"] {
            let hits = r
                .retrieve(q, 5)
                .unwrap_or_else(|e| panic!("{label} / {q:?}: {e}"));
            assert!(hits.is_empty(), "{label} / {q:?}: {hits:?}");
        }
    }
}

#[test]
fn sorted_by_descending_score_with_ties_by_id() {
    let suite = suite();
    let corpus = suite.corpus();
    for (label, _, r) in build_all(&corpus) {
        for q in &suite.queries {
            check_order(label, &q.text, &r.retrieve(&q.text, 100).unwrap());
        }
    }
    // Identical texts under ids listed out of order must tie and come back by id.
    let p = |id: &str, text: &str| Passage {
        id: id.into(),
        doc_id: id.into(),
        title: String::new(),
        text: text.into(),
        start: 0,
        end: text.len(),
    };
    let ties = vec![
        p("t3", "red apples and green pears"),
        p("t1", "red apples and green pears"),
        p("t2", "red apples and green pears"),
        p("t0", "blue sky over the sea"),
        p("t4", "red wine"),
    ];
    for (label, lexical, r) in build_all(&ties) {
        let hits = r.retrieve("green apples", 10).unwrap();
        check_order(label, "green apples", &hits);
        let top: Vec<&str> = hits.iter().take(3).map(|h| h.id.as_str()).collect();
        assert_eq!(top, ["t1", "t2", "t3"], "{label}: {hits:?}");
        // Score-based retrievers must tie exactly. RRF is rank-based: tied inputs hold
        // consecutive ranks (already ordered by id), so their fused scores differ
        // slightly while the order still follows the ids.
        if !r.name().starts_with("rrf") {
            assert!(
                hits[0].score == hits[1].score && hits[1].score == hits[2].score,
                "{label}: {hits:?}"
            );
        }
        if lexical {
            assert_eq!(hits.len(), 3, "{label}: {hits:?}");
        }
    }
}

#[test]
fn retrieve_all_matches_retrieve_and_names_are_distinct() {
    let suite = suite();
    let corpus = suite.corpus();
    let queries = suite.queries();
    let mut names = BTreeSet::new();
    for (label, _, r) in build_all(&corpus) {
        assert!(
            names.insert(r.name()),
            "{label}: duplicate name {}",
            r.name()
        );
        let run = r.retrieve_all(&queries, 3).unwrap();
        assert_eq!(run.len(), queries.len());
        for q in &queries {
            assert_eq!(
                run[&q.id],
                r.retrieve(&q.text, 3).unwrap(),
                "{label} / {}",
                q.id
            );
        }
        assert!(r.retrieve_all(&queries, 0).is_err(), "{label}");
    }
    assert!(names.contains("bm25-k1_0.9-b_0.4-lucene"), "{names:?}");
}

// ---------------------------------------------------------------------------
// Property-based oracle tests.

/// A random corpus over a small vocabulary (so terms repeat and collide) and a query.
fn corpus_and_query() -> impl Strategy<Value = (Vec<Passage>, String)> {
    let doc = prop::collection::vec(0usize..12, 0..15);
    (
        prop::collection::vec(doc, 1..40),
        prop::collection::vec(0usize..14, 0..6),
    )
        .prop_map(|(docs, q)| {
            let word = |i: &usize| format!("w{i}");
            let passages = docs
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let text = d.iter().map(word).collect::<Vec<_>>().join(" ");
                    // Ids in an order unrelated to corpus order, to exercise tie-breaks.
                    let id = format!("p{:02}", (i * 7) % 97);
                    Passage {
                        id: id.clone(),
                        doc_id: id,
                        title: String::new(),
                        end: text.len(),
                        text,
                        start: 0,
                    }
                })
                .collect();
            (passages, q.iter().map(word).collect::<Vec<_>>().join(" "))
        })
}

/// Full sort of `scores` over the passages that contain a query term, cut at `k`.
fn full_sort(index: &InvertedIndex, scores: &[f32], query: &str, k: usize) -> Vec<Hit> {
    let mut matched = BTreeSet::new();
    for (t, _) in index.query_terms(query) {
        matched.extend(index.postings(t).docs.iter().map(|&d| d as usize));
    }
    let mut hits: Vec<Hit> = matched
        .into_iter()
        .map(|d| Hit::new(index.ids()[d].clone(), scores[d]))
        .collect();
    hits.sort_by(|a, b| {
        b.score
            .partial_cmp(&a.score)
            .unwrap()
            .then_with(|| a.id.cmp(&b.id))
    });
    hits.truncate(k);
    hits
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// BM25's top-k (partial selection over the accumulator) equals a full sort of
    /// `score_all`, for every variant and any k.
    #[test]
    fn bm25_top_k_equals_full_sort_of_score_all(
        (corpus, query) in corpus_and_query(),
        k in 1usize..50,
        k1 in 0.0f32..3.0,
        b in 0.0f32..=1.0,
        v in 0usize..3,
    ) {
        let variant = [Bm25Variant::Robertson, Bm25Variant::Atire, Bm25Variant::Lucene][v];
        let r = Bm25::build(&corpus, &Analyzer::plain(), Bm25Params::new().k1(k1).b(b).variant(variant)).unwrap();
        let want = full_sort(r.index(), &r.score_all(&query), &query, k);
        let got = r.retrieve(&query, k).unwrap();
        prop_assert_eq!(got, want);
    }

    /// Saving and loading an index gives bit-identical scores (BM25 and TF-IDF).
    #[test]
    fn index_save_load_round_trip_gives_identical_scores((corpus, query) in corpus_and_query()) {
        let analyzer = Analyzer::default();
        let index = Arc::new(InvertedIndex::build(&corpus, &analyzer).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.bin");
        index.save(&path).unwrap();
        let loaded = Arc::new(InvertedIndex::load(&path, &analyzer).unwrap());
        for variant in [Bm25Variant::Robertson, Bm25Variant::Atire, Bm25Variant::Lucene] {
            let p = Bm25Params::new().variant(variant);
            let a = Bm25::new(index.clone(), p).unwrap().score_all(&query);
            let b = Bm25::new(loaded.clone(), p).unwrap().score_all(&query);
            prop_assert_eq!(a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), b.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
        }
        for variant in [TfIdfVariant::Raw, TfIdfVariant::LengthNormalized, TfIdfVariant::cosine()] {
            let a = TfIdf::new(index.clone(), variant).retrieve(&query, 1000);
            let b = TfIdf::new(loaded.clone(), variant).retrieve(&query, 1000);
            prop_assert_eq!(a.unwrap(), b.unwrap());
        }
    }
}

#[test]
fn loading_with_other_analyzer_settings_names_the_file() {
    let corpus = suite().corpus();
    let index = InvertedIndex::build(&corpus, &Analyzer::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("suite-index.bin");
    index.save(&path).unwrap();
    let err = InvertedIndex::load(&path, &Analyzer::plain())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("suite-index.bin") && err.contains("analyzer"),
        "{err}"
    );
}
