//! Re-rankers: the `Reranker` contract, late interaction (MaxSim against a brute-force
//! oracle, end-to-end candidate generation, token relevance), and the cross-encoder on a
//! tiny randomly initialised `BertForSequenceClassification` checkpoint written here and
//! re-computed by an independent plain-Rust BERT forward pass.
//!
//! Tests named `minilm_*` use the real all-MiniLM-L6-v2 from the project's asset cache.

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use workbench::rerank::cross_encoder::{expected_keys, CrossEncoder, CrossEncoderParams};
use workbench::rerank::late_interaction::{
    gaussian_kde, maxsim, maxsim_naive, normalize_rows, passage_set_key, relevance_scores,
    LateInteraction, MaxSimEndToEnd, MaxSimReranker, RelevanceKind, RelevanceParams, StoreKey,
    TokenIndex, TokenStore,
};
use workbench::rerank::{FnReranker, PassageLookup, RerankedRetriever, Reranker};
use workbench::retrieve::Retriever;
use workbench::{Error, Hit, Passage, Result};

// ------------------------------------------------------------------ helpers

/// splitmix64: a tiny deterministic generator (no rand dependency in the test crate).
struct Rng(u64);
impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-a, a).
    fn uniform(&mut self, a: f32) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * a
    }
}

fn random_unit_rows(rng: &mut Rng, n: usize, dim: usize) -> Vec<f32> {
    let mut m: Vec<f32> = (0..n * dim).map(|_| rng.uniform(1.0)).collect();
    normalize_rows(&mut m, dim);
    m
}

/// The kernel's definition by a plain double loop over dot products (no normalisation):
/// the oracle for scores computed from stored (f16-rounded, so not exactly unit) rows.
fn naive_dot_maxsim(q: &[f32], d: &[f32], dim: usize) -> f32 {
    let nq = q.len() / dim;
    let nd = d.len() / dim;
    let mut total = 0f64;
    for i in 0..nq {
        let mut best = f64::NEG_INFINITY;
        for j in 0..nd {
            let s: f64 = (0..dim)
                .map(|t| q[i * dim + t] as f64 * d[j * dim + t] as f64)
                .sum();
            best = best.max(s);
        }
        total += best;
    }
    (total / nq as f64) as f32
}

fn key(dim: usize) -> StoreKey {
    StoreKey {
        model_sha256: "0".repeat(64),
        encoder: "test".into(),
        projection: "none".into(),
        passages: "test".into(),
        dim,
    }
}

fn random_store(seed: u64, n_passages: usize, max_tokens: usize, dim: usize) -> TokenStore {
    let mut rng = Rng(seed);
    let mut store = TokenStore::new(key(dim));
    for p in 0..n_passages {
        let n = 1 + (rng.next_u64() as usize) % max_tokens;
        let id = format!("p{p:03}");
        store
            .push(&id, &id, &random_unit_rows(&mut rng, n, dim))
            .unwrap();
    }
    store
}

// ------------------------------------------------------------------ MaxSim oracle

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The fused single-pass kernel equals the textbook double loop.
    #[test]
    fn fused_maxsim_equals_naive(seed in any::<u64>(), nq in 1usize..8, nd in 1usize..12, dim in 1usize..40) {
        let mut rng = Rng(seed);
        let q = random_unit_rows(&mut rng, nq, dim);
        let d = random_unit_rows(&mut rng, nd, dim);
        let fused = maxsim(&q, &d, dim);
        let naive = maxsim_naive(&q, &d, dim);
        prop_assert!((fused - naive).abs() < 1e-5, "fused {} naive {}", fused, naive);
    }

    /// Scoring from the f16 store equals the oracle on the stored (rounded) vectors.
    #[test]
    fn store_maxsim_equals_naive_on_stored_values(seed in any::<u64>(), nq in 1usize..6, dim in 1usize..24) {
        let store = random_store(seed, 5, 9, dim);
        let q = random_unit_rows(&mut Rng(seed ^ 0xABCD), nq, dim);
        for i in 0..store.len() {
            let naive = naive_dot_maxsim(&q, &store.vectors_f32(i), dim);
            prop_assert!((store.score(&q, i) - naive).abs() < 1e-5);
            // and the explicit-cosine oracle agrees to f16 rounding
            prop_assert!((store.score(&q, i) - maxsim_naive(&q, &store.vectors_f32(i), dim)).abs() < 5e-3);
        }
    }

    /// R_abs counts k̃ choices per query token; with k̃ = 1, R_acc sums to the MaxSim
    /// numerator Σ_i max_j; the density is non-negative.
    #[test]
    fn relevance_invariants(seed in any::<u64>(), nq in 1usize..8, nd in 1usize..15, dim in 1usize..24, kt in 1usize..4) {
        let mut rng = Rng(seed);
        let q = random_unit_rows(&mut rng, nq, dim);
        let d = random_unit_rows(&mut rng, nd, dim);
        let one = relevance_scores(&q, &d, dim, &RelevanceParams { k_tilde: 1, bandwidth: None }).unwrap();
        prop_assert_eq!(one.r_abs.iter().sum::<u32>() as usize, nq);
        let numerator = maxsim_naive(&q, &d, dim) * nq as f32;
        prop_assert!((one.r_acc.iter().sum::<f32>() - numerator).abs() < 1e-4);
        let many = relevance_scores(&q, &d, dim, &RelevanceParams { k_tilde: kt, bandwidth: None }).unwrap();
        prop_assert_eq!(many.r_abs.iter().sum::<u32>() as usize, nq * kt.min(nd));
        prop_assert_eq!(many.chosen.len(), nq * kt.min(nd));
        prop_assert!(many.density.iter().all(|&x| x >= 0.0 && x.is_finite()));
        prop_assert!(many.bandwidth > 0.0);
    }

    /// End-to-end candidate generation through a Flat FAISS index: with k̂ = every token
    /// the ranking equals exhaustive MaxSim; with any k̂ every passage owning one of a
    /// query token's brute-force top-k̂ tokens (clear of ties) is a candidate, and the
    /// returned scores are exact MaxSim.
    #[test]
    fn end_to_end_flat_equals_exhaustive(seed in any::<u64>(), nq in 1usize..5, n_passages in 1usize..12, k_hat in 1usize..6, k in 1usize..15) {
        let dim = 8;
        let store = random_store(seed, n_passages, 6, dim);
        let q = random_unit_rows(&mut Rng(seed.rotate_left(17)), nq, dim);
        let all_tokens = store.n_vectors();
        let exhaustive = store.exhaustive(&q, k).unwrap();
        let index = TokenIndex::build(store.clone()).unwrap();
        let e2e = index.search(&q, k, all_tokens).unwrap();
        prop_assert_eq!(e2e.len(), exhaustive.len());
        for (a, b) in e2e.iter().zip(&exhaustive) {
            prop_assert_eq!(&a.id, &b.id);
            prop_assert!((a.score - b.score).abs() < 1e-6);
        }
        // Partial k̂: brute-force top-k̂ per query token.
        let cands = index.candidates(&q, k_hat).unwrap();
        let flat: Vec<f32> = (0..store.len()).flat_map(|i| store.vectors_f32(i)).collect();
        for qrow in q.chunks_exact(dim) {
            let mut sims: Vec<(usize, f32)> = flat
                .chunks_exact(dim)
                .map(|r| r.iter().zip(qrow).map(|(a, b)| a * b).sum::<f32>())
                .enumerate()
                .collect();
            sims.sort_by(|a, b| b.1.total_cmp(&a.1));
            if k_hat < sims.len() {
                let cut = sims[k_hat].1;
                for &(row, s) in &sims[..k_hat] {
                    if s > cut + 1e-4 {
                        prop_assert!(cands.contains(&store.passage_of_row(row)));
                    }
                }
            }
        }
        prop_assert!(cands.len() <= nq * k_hat);
        for h in index.search(&q, k, k_hat).unwrap() {
            let i = store.position(&h.id).unwrap();
            prop_assert!((h.score - naive_dot_maxsim(&q, &store.vectors_f32(i), dim)).abs() < 1e-5);
        }
    }
}

#[test]
fn density_peaks_near_the_most_relevant_tokens() {
    // 30 passage tokens along orthogonal axes; the 4 query tokens match tokens 17–19 best
    // and (second best) their neighbours, so the chosen positions cluster at 16–20.
    let dim = 30;
    let mut d = vec![0f32; 30 * dim];
    for j in 0..30 {
        d[j * dim + j] = 1.0;
    }
    let mut q = Vec::new();
    for (best, second) in [(17, 18), (18, 19), (19, 18), (18, 17)] {
        let mut row = vec![0.01f32; dim];
        row[best] = 1.0;
        row[second] = 0.6;
        q.extend(row);
    }
    normalize_rows(&mut q, dim);
    let r = relevance_scores(&q, &d, dim, &RelevanceParams::default()).unwrap();
    let argmax = |v: &[f32]| {
        (0..v.len())
            .reduce(|a, b| if v[b] > v[a] { b } else { a })
            .unwrap()
    };
    let top_abs = (0..30).max_by_key(|&j| r.r_abs[j]).unwrap();
    let peak = argmax(&r.density);
    assert!((17..=19).contains(&top_abs), "R_abs peak at {top_abs}");
    assert!(
        peak.abs_diff(top_abs) <= 1,
        "density peak {peak}, R_abs peak {top_abs}"
    );
    assert!(r.density[peak] > 5.0 * r.density[5], "{:?}", r.density);
    assert!(r.density.iter().all(|&x| x >= 0.0));
    // A fixed bandwidth is used as given.
    let fixed = relevance_scores(
        &q,
        &d,
        dim,
        &RelevanceParams {
            k_tilde: 2,
            bandwidth: Some(3.0),
        },
    )
    .unwrap();
    assert_eq!(fixed.bandwidth, 3.0);
    let (dens, _) = gaussian_kde(&[18.0], &[18.0], Some(3.0));
    assert!((dens[0] - 1.0 / (3.0 * (2.0 * std::f32::consts::PI).sqrt())).abs() < 1e-6);
}

#[test]
fn relevance_rejects_bad_parameters() {
    let q = [1.0f32, 0.0];
    let err = relevance_scores(
        &q,
        &q,
        2,
        &RelevanceParams {
            k_tilde: 0,
            bandwidth: None,
        },
    )
    .unwrap_err();
    assert!(matches!(
        err,
        Error::InvalidParam {
            name: "k_tilde",
            ..
        }
    ));
    let err = relevance_scores(
        &q,
        &q,
        2,
        &RelevanceParams {
            k_tilde: 1,
            bandwidth: Some(0.0),
        },
    )
    .unwrap_err();
    assert!(matches!(
        err,
        Error::InvalidParam {
            name: "bandwidth",
            ..
        }
    ));
}

#[test]
fn token_store_refuses_a_stale_file() {
    let store = random_store(3, 4, 5, 6);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.wbtok");
    store.save(&path).unwrap();
    assert_eq!(TokenStore::load(&path, store.key()).unwrap(), store);
    for (field, stale) in [
        (
            "model sha256",
            StoreKey {
                model_sha256: "1".repeat(64),
                ..key(6)
            },
        ),
        (
            "projection",
            StoreKey {
                projection: "abc:linear.weight".into(),
                ..key(6)
            },
        ),
        (
            "passage-set key",
            StoreKey {
                passages: "other".into(),
                ..key(6)
            },
        ),
    ] {
        let err = TokenStore::load(&path, &stale).unwrap_err().to_string();
        assert!(err.contains("stale") && err.contains(field), "{err}");
    }
    // A truncated file is an error, not a short store.
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    assert!(TokenStore::load(&path, store.key()).is_err());
    // The passage-set key depends on ids, texts and order.
    let p = |id: &str, t: &str| Passage {
        id: id.into(),
        doc_id: "d".into(),
        title: String::new(),
        text: t.into(),
        start: 0,
        end: t.len(),
    };
    let a = passage_set_key(&[p("1", "x"), p("2", "y")]);
    assert_ne!(a, passage_set_key(&[p("2", "y"), p("1", "x")]));
    assert_ne!(a, passage_set_key(&[p("1", "x"), p("2", "z")]));
}

/// A saved store's bytes split into the JSON header and what follows it.
fn store_parts(bytes: &[u8]) -> (serde_json::Value, Vec<u8>) {
    let len = u64::from_le_bytes(bytes[12..20].try_into().unwrap()) as usize;
    let header = serde_json::from_slice(&bytes[20..20 + len]).unwrap();
    (header, bytes[20 + len..].to_vec())
}

/// Store bytes with `header` in place of the original one (magic and version kept).
fn store_with_header(bytes: &[u8], header: &serde_json::Value, rest: &[u8]) -> Vec<u8> {
    let h = serde_json::to_vec(header).unwrap();
    let mut out = bytes[..12].to_vec();
    out.extend_from_slice(&(h.len() as u64).to_le_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(rest);
    out
}

/// A store whose magic bytes match but whose lengths lie must be an error naming the
/// file, checked against the file size before anything is allocated (a lie used to
/// abort the process: capacity overflow or out of memory).
#[test]
fn token_store_with_lying_lengths_is_an_error_not_an_abort() {
    let store = random_store(5, 3, 4, 6);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lying.wbtok");
    store.save(&path).unwrap();
    let good = std::fs::read(&path).unwrap();
    let check = |bytes: &[u8], what: &str| {
        std::fs::write(&path, bytes).unwrap();
        let err = TokenStore::load(&path, store.key())
            .unwrap_err()
            .to_string();
        assert!(err.contains("lying.wbtok"), "{what}: {err}");
    };
    // The header length field.
    for lie in [u64::MAX, 1 << 40, good.len() as u64] {
        let mut bad = good.clone();
        bad[12..20].copy_from_slice(&lie.to_le_bytes());
        check(&bad, &format!("header length {lie}"));
        let err = TokenStore::read_key(&path).unwrap_err().to_string();
        assert!(err.contains("lying.wbtok"), "{err}");
    }
    // A vector count and last offset that agree with each other but not with the file.
    let (header, rest) = store_parts(&good);
    let n = header["ids"].as_array().unwrap().len();
    for huge in [1u64 << 40, u64::MAX / 2, (usize::MAX / 6 + 1) as u64] {
        let mut h = header.clone();
        h["n_vectors"] = huge.into();
        let mut r = rest.clone();
        r[n * 8..n * 8 + 8].copy_from_slice(&huge.to_le_bytes());
        check(
            &store_with_header(&good, &h, &r),
            &format!("n_vectors {huge}"),
        );
    }
    // A dimension of zero, and offsets that point past the vectors.
    let mut h = header.clone();
    h["key"]["dim"] = 0.into();
    check(&store_with_header(&good, &h, &rest), "dim 0");
    let mut r = rest.clone();
    r[8..16].copy_from_slice(&(1u64 << 62).to_le_bytes());
    check(
        &store_with_header(&good, &header, &r),
        "offset past the end",
    );
    // Untouched, it still loads.
    std::fs::write(&path, &good).unwrap();
    assert_eq!(TokenStore::load(&path, store.key()).unwrap(), store);
}

// ------------------------------------------------------------------ Reranker contract

fn lookup() -> PassageLookup {
    PassageLookup::from_pairs([
        ("a", "the cat sat"),
        ("b", "who wrote hamlet"),
        ("c", "shakespeare wrote plays"),
        ("d", "dog"),
    ])
    .unwrap()
}

/// Checks every re-ranker must pass, on the ids of `lookup()`.
fn check_contract(r: &dyn Reranker) {
    let cands = [Hit::new("a", 3.0), Hit::new("b", 2.0), Hit::new("c", 1.0)];
    let err = r
        .rerank("who wrote hamlet", &cands, &lookup(), 0)
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidParam { name: "k", .. }),
        "{}: {err}",
        r.name()
    );
    let bad = [Hit::new("a", 1.0), Hit::new("nope", 1.0)];
    let err = r.rerank("q", &bad, &lookup(), 2).unwrap_err();
    assert!(err.to_string().contains("`nope`"), "{}: {err}", r.name());
    let all = r
        .rerank("who wrote hamlet", &cands, &lookup(), 100)
        .unwrap();
    assert_eq!(all.len(), 3, "{}", r.name());
    for w in all.windows(2) {
        assert!(
            w[0].score > w[1].score || (w[0].score == w[1].score && w[0].id < w[1].id),
            "{}: not sorted: {all:?}",
            r.name()
        );
    }
    let two = r.rerank("who wrote hamlet", &cands, &lookup(), 2).unwrap();
    assert_eq!(two, all[..2].to_vec(), "{}", r.name());
    assert!(r.rerank("q", &[], &lookup(), 3).unwrap().is_empty());
}

#[test]
fn fn_reranker_meets_the_contract() {
    let overlap = FnReranker::new("overlap", |q: &str, p: &str| {
        p.split(' ')
            .filter(|w| q.split(' ').any(|x| x == *w))
            .count() as f32
    });
    check_contract(&overlap);
}

struct Fixed(Vec<&'static str>);
impl Retriever for Fixed {
    fn name(&self) -> String {
        "fixed".into()
    }
    fn retrieve(&self, _q: &str, k: usize) -> Result<Vec<Hit>> {
        workbench::retrieve::check_k(k)?;
        Ok(self
            .0
            .iter()
            .take(k)
            .enumerate()
            .map(|(i, id)| Hit::new(*id, -(i as f32)))
            .collect())
    }
}

#[test]
fn reranked_retriever_two_stage() {
    let by_len = FnReranker::new("len", |_q: &str, p: &str| p.len() as f32);
    let two = RerankedRetriever::new(
        Box::new(Fixed(vec!["d", "a", "b", "c"])),
        Box::new(by_len),
        lookup(),
        2,
    )
    .unwrap();
    assert_eq!(two.name(), "fixed__rerank-d2-fn-len");
    // depth 2: only d and a are candidates; a is longer.
    let hits = two.retrieve("q", 1).unwrap();
    assert_eq!(hits, vec![Hit::new("a", 11.0)]);
    // k > depth widens the candidate list to k.
    assert_eq!(two.retrieve("q", 4).unwrap()[0].id, "c");
    assert!(matches!(
        two.retrieve("q", 0),
        Err(Error::InvalidParam { .. })
    ));
    let by_len = FnReranker::new("len", |_q: &str, p: &str| p.len() as f32);
    assert!(
        RerankedRetriever::new(Box::new(Fixed(vec![])), Box::new(by_len), lookup(), 0).is_err()
    );
}

// ------------------------------------------------------------------ tiny cross-encoder

const H: usize = 32;
const LAYERS: usize = 2;
const HEADS: usize = 2;
const INTER: usize = 37;
const MAX_POS: usize = 64;
const SPECIALS: [&str; 5] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
const WORDS: [&str; 15] = [
    "the",
    "cat",
    "sat",
    "on",
    "mat",
    "who",
    "wrote",
    "hamlet",
    "shakespeare",
    "a",
    "play",
    "##s",
    "dog",
    "?",
    "plays",
];

fn vocab() -> Vec<&'static str> {
    SPECIALS.iter().chain(WORDS.iter()).copied().collect()
}

fn id(tok: &str) -> u32 {
    vocab().iter().position(|t| *t == tok).unwrap() as u32
}

type Weights = BTreeMap<String, (Vec<usize>, Vec<f32>)>;

fn shape_of(key: &str) -> Vec<usize> {
    let n_vocab = vocab().len();
    let wb = |w: Vec<usize>, b: Vec<usize>| if key.ends_with("weight") { w } else { b };
    if key.contains("word_embeddings") {
        vec![n_vocab, H]
    } else if key.contains("position_embeddings") {
        vec![MAX_POS, H]
    } else if key.contains("token_type_embeddings") {
        vec![2, H]
    } else if key.starts_with("classifier") {
        wb(vec![1, H], vec![1])
    } else if key.contains("intermediate.dense") {
        wb(vec![INTER, H], vec![INTER])
    } else if key.contains("layer.") && key.contains(".output.dense") && !key.contains("attention")
    {
        wb(vec![H, INTER], vec![H])
    } else if key.contains("LayerNorm") {
        vec![H]
    } else {
        wb(vec![H, H], vec![H])
    }
}

fn random_weights(seed: u64) -> Weights {
    let mut rng = Rng(seed);
    expected_keys(LAYERS)
        .into_iter()
        .map(|k| {
            let shape = shape_of(&k);
            let n: usize = shape.iter().product();
            let base = if k.ends_with("LayerNorm.weight") {
                1.0
            } else {
                0.0
            };
            let v = (0..n).map(|_| base + rng.uniform(0.3)).collect();
            (k, (shape, v))
        })
        .collect()
}

/// The safetensors format by hand: u64 header length, JSON header, little-endian data.
fn write_safetensors(path: &Path, weights: &Weights) {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, (shape, values)) in weights {
        let start = data.len();
        for v in values {
            data.extend_from_slice(&v.to_le_bytes());
        }
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let mut h = serde_json::Value::Object(header).to_string().into_bytes();
    h.resize(h.len().div_ceil(8) * 8, b' '); // pad the header to 8 bytes, as the spec advises
    let mut bytes = (h.len() as u64).to_le_bytes().to_vec();
    bytes.extend(h);
    bytes.extend(data);
    std::fs::write(path, bytes).unwrap();
}

fn write_checkpoint(dir: &Path, weights: &Weights) {
    let vocab_map: serde_json::Map<String, serde_json::Value> = vocab()
        .iter()
        .enumerate()
        .map(|(i, w)| (w.to_string(), serde_json::json!(i)))
        .collect();
    let special = |t: &str| serde_json::json!({"id": t, "ids": [id(t)], "tokens": [t]});
    let tokenizer = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": SPECIALS.iter().enumerate().map(|(i, t)| serde_json::json!({
            "id": i, "content": t, "single_word": false, "lstrip": false, "rstrip": false,
            "normalized": false, "special": true})).collect::<Vec<_>>(),
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {"[CLS]": special("[CLS]"), "[SEP]": special("[SEP]")}
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab_map}
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
    let config = serde_json::json!({
        "architectures": ["BertForSequenceClassification"], "model_type": "bert",
        "vocab_size": vocab().len(), "hidden_size": H, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "intermediate_size": INTER, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": MAX_POS, "type_vocab_size": 2, "initializer_range": 0.02,
        "layer_norm_eps": 1e-12, "pad_token_id": 0, "id2label": {"0": "LABEL_0"},
        "label2id": {"LABEL_0": 0}
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    write_safetensors(&dir.join("model.safetensors"), weights);
}

// --- an independent forward pass in plain Rust (f64), straight from HF's modeling_bert.

/// erf by Abramowitz & Stegun 7.1.26 (|error| ≤ 1.5e-7).
fn erf(x: f64) -> f64 {
    let s = x.signum();
    let x = x.abs();
    let t = 1.0 / (1.0 + 0.3275911 * x);
    let y = 1.0
        - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
            + 0.254829592)
            * t
            * (-x * x).exp();
    s * y
}

fn w<'a>(weights: &'a Weights, key: &str) -> &'a [f32] {
    &weights[key].1
}

/// y = x Wᵀ + b for a row.
fn linear(x: &[f64], weight: &[f32], bias: &[f32]) -> Vec<f64> {
    let inp = x.len();
    bias.iter()
        .enumerate()
        .map(|(o, &b)| {
            b as f64
                + (0..inp)
                    .map(|i| weight[o * inp + i] as f64 * x[i])
                    .sum::<f64>()
        })
        .collect()
}

fn layer_norm(x: &[f64], g: &[f32], b: &[f32]) -> Vec<f64> {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    x.iter()
        .enumerate()
        .map(|(i, v)| (v - mean) / (var + 1e-12).sqrt() * g[i] as f64 + b[i] as f64)
        .collect()
}

fn oracle_logit(weights: &Weights, ids: &[u32], types: &[u32]) -> f64 {
    let n = ids.len();
    let we = w(weights, "bert.embeddings.word_embeddings.weight");
    let pe = w(weights, "bert.embeddings.position_embeddings.weight");
    let te = w(weights, "bert.embeddings.token_type_embeddings.weight");
    let mut x: Vec<Vec<f64>> = (0..n)
        .map(|t| {
            let e: Vec<f64> = (0..H)
                .map(|i| {
                    (we[ids[t] as usize * H + i] + pe[t * H + i] + te[types[t] as usize * H + i])
                        as f64
                })
                .collect();
            layer_norm(
                &e,
                w(weights, "bert.embeddings.LayerNorm.weight"),
                w(weights, "bert.embeddings.LayerNorm.bias"),
            )
        })
        .collect();
    let dh = H / HEADS;
    for l in 0..LAYERS {
        let p = |s: &str| format!("bert.encoder.layer.{l}.{s}");
        let lin = |x: &[f64], s: &str| {
            linear(
                x,
                w(weights, &p(&format!("{s}.weight"))),
                w(weights, &p(&format!("{s}.bias"))),
            )
        };
        let q: Vec<Vec<f64>> = x.iter().map(|r| lin(r, "attention.self.query")).collect();
        let k: Vec<Vec<f64>> = x.iter().map(|r| lin(r, "attention.self.key")).collect();
        let v: Vec<Vec<f64>> = x.iter().map(|r| lin(r, "attention.self.value")).collect();
        let mut ctx = vec![vec![0f64; H]; n];
        for h in 0..HEADS {
            let r = h * dh..(h + 1) * dh;
            for i in 0..n {
                let s: Vec<f64> = (0..n)
                    .map(|j| r.clone().map(|c| q[i][c] * k[j][c]).sum::<f64>() / (dh as f64).sqrt())
                    .collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
                let z: f64 = e.iter().sum();
                for c in r.clone() {
                    ctx[i][c] = (0..n).map(|j| e[j] / z * v[j][c]).sum();
                }
            }
        }
        let attn: Vec<Vec<f64>> = (0..n)
            .map(|i| {
                let o = lin(&ctx[i], "attention.output.dense");
                let res: Vec<f64> = o.iter().zip(&x[i]).map(|(a, b)| a + b).collect();
                layer_norm(
                    &res,
                    w(weights, &p("attention.output.LayerNorm.weight")),
                    w(weights, &p("attention.output.LayerNorm.bias")),
                )
            })
            .collect();
        x = attn
            .iter()
            .map(|a| {
                let inter: Vec<f64> = lin(a, "intermediate.dense")
                    .iter()
                    .map(|&u| 0.5 * u * (1.0 + erf(u / std::f64::consts::SQRT_2)))
                    .collect();
                let o = lin(&inter, "output.dense");
                let res: Vec<f64> = o.iter().zip(a).map(|(u, v)| u + v).collect();
                layer_norm(
                    &res,
                    w(weights, &p("output.LayerNorm.weight")),
                    w(weights, &p("output.LayerNorm.bias")),
                )
            })
            .collect();
    }
    let pooled: Vec<f64> = linear(
        &x[0],
        w(weights, "bert.pooler.dense.weight"),
        w(weights, "bert.pooler.dense.bias"),
    )
    .iter()
    .map(|v| v.tanh())
    .collect();
    linear(
        &pooled,
        w(weights, "classifier.weight"),
        w(weights, "classifier.bias"),
    )[0]
}

fn tiny_dir(seed: u64) -> (tempfile::TempDir, Weights) {
    let dir = tempfile::tempdir().unwrap();
    let weights = random_weights(seed);
    write_checkpoint(dir.path(), &weights);
    (dir, weights)
}

#[test]
fn cross_encoder_loads_unchanged_and_matches_an_independent_forward_pass() {
    let (dir, weights) = tiny_dir(42);
    let ce = CrossEncoder::load_from_dir(dir.path()).unwrap();
    assert_eq!(ce.num_labels(), 1);
    assert_eq!(ce.score_label(), (0, "LABEL_0"));
    // [CLS] q [SEP] p [SEP] with token types 0…0 1…1, by hand.
    let (ids, types) = ce
        .encode_pair("Who wrote Hamlet?", "Shakespeare wrote plays")
        .unwrap();
    let want: Vec<u32> = [
        "[CLS]",
        "who",
        "wrote",
        "hamlet",
        "?",
        "[SEP]",
        "shakespeare",
        "wrote",
        "plays",
        "[SEP]",
    ]
    .iter()
    .map(|t| id(t))
    .collect();
    assert_eq!(ids, want);
    assert_eq!(types, vec![0, 0, 0, 0, 0, 0, 1, 1, 1, 1]);
    let pairs = [
        ("Who wrote Hamlet?", "Shakespeare wrote plays"),
        ("the cat", "the cat sat on the mat"),
        ("dog?", "a play"),
        ("who", "the dog sat on a mat ? the cat wrote hamlet"),
    ];
    let mut scores = Vec::new();
    for (q, p) in pairs {
        let (ids, types) = ce.encode_pair(q, p).unwrap();
        let oracle = oracle_logit(&weights, &ids, &types);
        let got = ce.score(q, p).unwrap();
        assert!(got.is_finite());
        assert!(
            (got as f64 - oracle).abs() < 1e-4,
            "{q:?}/{p:?}: {got} vs oracle {oracle}"
        );
        scores.push(got);
    }
    // The 1e-4 agreement is meaningful only if the scores themselves differ by far more.
    let spread = scores.iter().cloned().fold(f32::MIN, f32::max)
        - scores.iter().cloned().fold(f32::MAX, f32::min);
    assert!(spread > 0.05, "scores barely differ: {scores:?}");
}

#[test]
fn cross_encoder_is_deterministic_and_batch_equals_single() {
    let (dir, _) = tiny_dir(7);
    let q = "who wrote hamlet";
    let passages = [
        "shakespeare wrote plays",
        "the cat sat on the mat",
        "dog",
        "a play",
        "the dog sat on a mat ? the cat wrote hamlet and plays",
        "",
    ];
    let a = CrossEncoder::load_from_dir(dir.path()).unwrap();
    let b = CrossEncoder::load_from_dir_with(
        dir.path(),
        CrossEncoderParams {
            batch_size: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let batch = a.score_pairs(q, &passages).unwrap();
    assert_eq!(
        batch,
        a.score_pairs(q, &passages).unwrap(),
        "not deterministic"
    );
    let small_batches = b.score_pairs(q, &passages).unwrap();
    for (i, p) in passages.iter().enumerate() {
        let single = a.score(q, p).unwrap();
        assert!(batch[i].is_finite());
        assert!(
            (batch[i] - single).abs() < 1e-5,
            "{p:?}: batch {} single {single}",
            batch[i]
        );
        assert!((small_batches[i] - single).abs() < 1e-5);
    }
    assert_eq!(
        a.name(),
        format!(
            "cross-{}-len{MAX_POS}",
            dir.path().file_name().unwrap().to_string_lossy()
        )
    );
}

#[test]
fn cross_encoder_meets_the_reranker_contract() {
    let (dir, _) = tiny_dir(11);
    let ce = CrossEncoder::load_from_dir(dir.path()).unwrap();
    check_contract(&ce);
    // Its rerank scores are its pair scores.
    let hits = ce
        .rerank("who wrote hamlet", &[Hit::new("c", 0.0)], &lookup(), 1)
        .unwrap();
    assert_eq!(
        hits[0].score,
        ce.score("who wrote hamlet", "shakespeare wrote plays")
            .unwrap()
    );
}

#[test]
fn cross_encoder_missing_key_names_key_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut weights = random_weights(5);
    weights.remove("bert.encoder.layer.1.output.dense.bias");
    write_checkpoint(dir.path(), &weights);
    let err = CrossEncoder::load_from_dir(dir.path())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("`bert.encoder.layer.1.output.dense.bias`"),
        "{err}"
    );
    assert!(err.contains("model.safetensors"), "{err}");
    let mut weights = random_weights(5);
    weights.remove("classifier.weight");
    write_checkpoint(dir.path(), &weights);
    let err = CrossEncoder::load_from_dir(dir.path())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("`classifier.weight`") && err.contains("model.safetensors"),
        "{err}"
    );
    // A missing file names the file.
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    let err = CrossEncoder::load_from_dir(dir.path())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("tokenizer.json"), "{err}");
}

#[test]
fn cross_encoder_loads_through_the_asset_manifest() {
    let (src, weights) = tiny_dir(9);
    let root = tempfile::tempdir().unwrap();
    let mirror = root.path().join("mirror");
    std::fs::create_dir_all(mirror.join("tiny-ce")).unwrap();
    let mut files = String::new();
    for f in ["config.json", "tokenizer.json", "model.safetensors"] {
        let bytes = std::fs::read(src.path().join(f)).unwrap();
        std::fs::write(mirror.join("tiny-ce").join(f), &bytes).unwrap();
        let sha = workbench::assets::sha256_file(&src.path().join(f)).unwrap();
        files += &format!("\"{f}\" = {{ sha256 = \"{sha}\", from = \"{f}\" }}\n");
    }
    let manifest = root.path().join("assets.toml");
    std::fs::write(
        &manifest,
        format!(
            "[asset.tiny-ce]\nkind = \"model\"\nhf_id = \"test-org/tiny-ce\"\non_hub = false\n\
             snapshot = \"fixture\"\nlicense = \"test\"\ndescription = \"fixture\"\n\
             source = {{ type = \"mirror\", folder = \"tiny-ce\" }}\n[asset.tiny-ce.files]\n{files}"
        ),
    )
    .unwrap();
    let mut assets = workbench::assets::Assets::from_manifest(
        &manifest,
        root.path().join("cache"),
        mirror,
        root.path().join("wheels"),
    )
    .unwrap();
    assets.offline = true;
    assets.fetch("tiny-ce").unwrap();
    let ce = CrossEncoder::load(&assets, "tiny-ce").unwrap();
    assert_eq!(ce.name(), format!("cross-tiny-ce-len{MAX_POS}"));
    let (ids, types) = ce.encode_pair("the cat", "sat").unwrap();
    let got = ce.score("the cat", "sat").unwrap() as f64;
    assert!((got - oracle_logit(&weights, &ids, &types)).abs() < 1e-4);
}

// ------------------------------------------------------------------ real MiniLM

fn minilm() -> Arc<LateInteraction> {
    let assets = workbench::assets::Assets::load().expect("project manifest");
    Arc::new(LateInteraction::load_minilm(&assets).expect("all-minilm-l6-v2 in the asset cache"))
}

fn passages() -> Vec<Passage> {
    [
        "The football championship in the year 2006 was a great sports event that was won by Italy.",
        "Hamlet is a tragedy written by William Shakespeare around 1600.",
        "The cat sat on the mat and looked out of the window.",
        "Photosynthesis converts light energy into chemical energy in plants.",
        "Germany hosted the 2006 FIFA World Cup, which Italy won on penalties.",
        "The Eiffel Tower is a wrought-iron lattice tower in Paris.",
    ]
    .iter()
    .enumerate()
    .map(|(i, t)| Passage {
        id: format!("p{i}"),
        doc_id: format!("d{i}"),
        title: String::new(),
        text: t.to_string(),
        start: 0,
        end: t.len(),
    })
    .collect()
}

#[test]
fn minilm_late_interaction_rerank_relevance_and_store() {
    let model = minilm();
    assert_eq!(model.label(), "minilm-raw384");
    assert_eq!(model.dim(), 384);
    let ps = passages();
    let look = PassageLookup::from_passages(&ps).unwrap();
    let reranker = MaxSimReranker::new(model.clone());
    assert_eq!(reranker.name(), "maxsim-rerank-minilm-raw384");
    check_contract(&MaxSimReranker::new(model.clone()));
    let cands: Vec<Hit> = ps.iter().map(|p| Hit::new(p.id.clone(), 0.0)).collect();
    let hits = reranker
        .rerank("Who wrote Hamlet?", &cands, &look, 3)
        .unwrap();
    assert_eq!(hits[0].id, "p1", "{hits:?}");
    let hits = reranker
        .rerank(
            "Who won the football championship in 2006?",
            &cands,
            &look,
            2,
        )
        .unwrap();
    assert!(
        hits.iter().any(|h| h.id == "p0") && hits.iter().any(|h| h.id == "p4"),
        "{hits:?}"
    );
    // Scores are mean cosines.
    assert!(hits
        .iter()
        .all(|h| h.score <= 1.0 + 1e-5 && h.score >= -1.0));

    // A store gives the same scores (to f16 rounding) and round-trips with its key.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("minilm.wbtok");
    let store = model.load_or_build_store(&ps, &path).unwrap();
    assert_eq!(store.key(), &model.store_key(&ps));
    assert_eq!(store.key().model_sha256.len(), 64);
    let again = TokenStore::load(&path, &model.store_key(&ps)).unwrap();
    assert_eq!(again, store);
    let err = TokenStore::load(&path, &model.store_key(&ps[..3])).unwrap_err();
    assert!(err.to_string().contains("stale"), "{err}");
    let with_store = MaxSimReranker::new(model.clone())
        .with_store(Arc::new(store))
        .unwrap();
    let a = reranker
        .rerank("Who wrote Hamlet?", &cands, &look, 6)
        .unwrap();
    let b = with_store
        .rerank("Who wrote Hamlet?", &cands, &look, 6)
        .unwrap();
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.id, y.id);
        assert!((x.score - y.score).abs() < 2e-3, "{x:?} {y:?}");
    }

    // Token relevance on report 003's Figure 9 example.
    let q = "Who won the football championship in 2006?";
    let text = &ps[0].text;
    let one = model
        .token_relevance(
            q,
            text,
            &RelevanceParams {
                k_tilde: 1,
                bandwidth: None,
            },
        )
        .unwrap();
    let nq = one.query_tokens.len();
    assert_eq!(one.r_abs.iter().sum::<u32>() as usize, nq);
    assert!((one.r_acc.iter().sum::<f32>() - one.score * nq as f32).abs() < 1e-4);
    assert!((one.score - model.score(q, text).unwrap()).abs() < 1e-6);
    let rel = model
        .token_relevance(q, text, &RelevanceParams::default())
        .unwrap();
    assert_eq!(rel.k_tilde, 2);
    assert_eq!(rel.r_abs.iter().sum::<u32>() as usize, 2 * nq);
    assert!(rel.density.iter().all(|&d| d >= 0.0));
    assert_eq!(rel.tokens.len(), rel.offsets.len());
    let credited: Vec<&str> = (0..rel.tokens.len())
        .filter(|&j| rel.r_abs[j] > 0)
        .map(|j| rel.tokens[j].as_str())
        .collect();
    for word in ["football", "championship", "2006"] {
        assert!(
            credited.contains(&word),
            "{word} not credited: {credited:?}"
        );
    }
    let html = rel.to_html(RelevanceKind::Accumulated);
    assert!(
        html.contains("football") && html.contains("linear-gradient"),
        "{html}"
    );
}

#[test]
fn minilm_end_to_end_equals_exhaustive_with_wide_k_hat() {
    let model = minilm();
    let ps = passages();
    let e2e = MaxSimEndToEnd::build(model.clone(), &ps, None).unwrap();
    assert_eq!(e2e.name(), "maxsim-e2e-minilm-raw384-khat_k_over_2");
    assert_eq!(e2e.k_hat(10), 5);
    assert!(matches!(
        e2e.retrieve("q", 0),
        Err(Error::InvalidParam { .. })
    ));
    let q = "Who won the football championship in 2006?";
    let qv = model.encode_query(q).unwrap().vectors;
    let exhaustive = e2e.index().store().exhaustive(&qv, 6).unwrap();
    let wide = MaxSimEndToEnd::build(model.clone(), &ps, None)
        .unwrap()
        .with_lambda(1e-3)
        .unwrap();
    assert_eq!(wide.retrieve(q, 6).unwrap(), exhaustive);
    let top = e2e.retrieve(q, 2).unwrap();
    assert!(top.len() <= 2 && !top.is_empty());
    assert_eq!(top[0], exhaustive[0]);
}

#[test]
fn minilm_bi_encoder_reranker() {
    use workbench::encode::{BertEncoder, EncoderParams};
    use workbench::rerank::bi_encoder::BiEncoderReranker;
    let assets = workbench::assets::Assets::load().unwrap();
    let enc =
        Arc::new(BertEncoder::load(&assets, "all-minilm-l6-v2", EncoderParams::default()).unwrap());
    let r = BiEncoderReranker::new(enc.clone());
    assert_eq!(r.name(), "biencoder-all-minilm-l6-v2-len256");
    check_contract(&r);
    let ps = passages();
    let look = PassageLookup::from_passages(&ps).unwrap();
    let cands: Vec<Hit> = ps.iter().map(|p| Hit::new(p.id.clone(), 0.0)).collect();
    let hits = r.rerank("Who wrote Hamlet?", &cands, &look, 1).unwrap();
    assert_eq!(hits[0].id, "p1");
    let v = enc.embed(&["Who wrote Hamlet?", &ps[1].text]).unwrap();
    let cos: f32 = v[0].iter().zip(&v[1]).map(|(a, b)| a * b).sum();
    assert!((hits[0].score - cos).abs() < 1e-5);
}

/// A corrupt store whose magic bytes still match is rebuilt by `load_or_build_store`
/// (it used to abort the process before the fallback could run).
#[test]
fn minilm_corrupt_token_store_is_rebuilt() {
    let model = minilm();
    let ps = passages();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("minilm.wbtok");
    let fresh = model.load_or_build_store(&ps, &path).unwrap();
    let good = std::fs::read(&path).unwrap();
    let truncated = good[..good.len() / 2].to_vec();
    let mut lying = good.clone();
    lying[12..20].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let mut flipped = good.clone();
    let last_vector_byte = flipped.len() - 33; // before the 32-byte checksum trailer
    flipped[last_vector_byte] ^= 0x40;
    // A flipped bit in the last vector leaves every length intact; the file's
    // checksum catches it.
    for (what, bytes) in [
        ("truncated", truncated),
        ("header length", lying),
        ("flipped bit", flipped),
    ] {
        std::fs::write(&path, &bytes).unwrap();
        let err = TokenStore::load(&path, &model.store_key(&ps)).unwrap_err();
        assert!(err.to_string().contains("minilm.wbtok"), "{what}: {err}");
        let store = model.load_or_build_store(&ps, &path).unwrap();
        assert_eq!(store, fresh, "{what}");
        assert_eq!(std::fs::read(&path).unwrap(), good, "{what}: rewritten");
    }
}

/// A store keeps the texts it was built from: the same ids with another text are
/// never scored with the old vectors (the re-ranker errs naming the passage), and
/// `load_or_build_store` rebuilds.
#[test]
fn minilm_token_store_is_keyed_on_passage_texts() {
    let model = minilm();
    let ps = passages();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("minilm.wbtok");
    let store = model.load_or_build_store(&ps, &path).unwrap();
    let mut edited = ps.clone();
    edited[1].text = "The Eiffel Tower was completed in 1889 for the World's Fair.".into();
    edited[1].end = edited[1].text.len();
    let cands: Vec<Hit> = ps.iter().map(|p| Hit::new(p.id.clone(), 0.0)).collect();
    let with_store = MaxSimReranker::new(model.clone())
        .with_store(Arc::new(store.clone()))
        .unwrap();
    // Same texts: fine.
    with_store
        .rerank(
            "Who wrote Hamlet?",
            &cands,
            &PassageLookup::from_passages(&ps).unwrap(),
            3,
        )
        .unwrap();
    // Another text under id p1: an error naming p1, not the stale vectors.
    let err = with_store
        .rerank(
            "Who wrote Hamlet?",
            &cands,
            &PassageLookup::from_passages(&edited).unwrap(),
            3,
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("`p1`") && err.contains("text"), "{err}");
    // load_or_build_store sees the change and rebuilds for the new texts.
    let rebuilt = model.load_or_build_store(&edited, &path).unwrap();
    assert_eq!(rebuilt.key(), &model.store_key(&edited));
    assert_ne!(rebuilt.vectors(1), store.vectors(1));
    assert_eq!(rebuilt.vectors(0), store.vectors(0));
    let again = TokenStore::load(&path, &model.store_key(&edited)).unwrap();
    assert_eq!(again, rebuilt);
}

// ------------------------------------------------------------------ token store: bad input

/// Every stale field is refused with an error naming the file and the field: a store from
/// another model, encoder setting, projection, dimension or passage set is never read.
#[test]
fn token_store_stale_errors_name_the_file_and_field() {
    let store = random_store(11, 4, 5, 6);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stale.wbtok");
    store.save(&path).unwrap();
    for (field, stale) in [
        (
            "model sha256",
            StoreKey {
                model_sha256: "1".repeat(64),
                ..key(6)
            },
        ),
        (
            "encoder",
            StoreKey {
                encoder: "test max_length=128".into(),
                ..key(6)
            },
        ),
        (
            "projection",
            StoreKey {
                projection: "abc:linear.weight".into(),
                ..key(6)
            },
        ),
        (
            "passage-set key",
            StoreKey {
                passages: "other passages".into(),
                ..key(6)
            },
        ),
        ("dim", key(8)),
    ] {
        let err = TokenStore::load(&path, &stale).unwrap_err().to_string();
        assert!(
            err.contains("stale.wbtok") && err.contains("stale") && err.contains(field),
            "{field}: {err}"
        );
    }
}

/// A header claiming one vector more (or fewer) than the file holds, with the last
/// offset agreeing with it, is an error naming the file, checked before the body is read.
#[test]
fn token_store_header_off_by_one_vector_count_is_an_error() {
    let store = random_store(12, 3, 4, 6);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("count.wbtok");
    store.save(&path).unwrap();
    let good = std::fs::read(&path).unwrap();
    let (header, rest) = store_parts(&good);
    let n = header["ids"].as_array().unwrap().len();
    let real = header["n_vectors"].as_u64().unwrap();
    for claimed in [real + 1, real - 1, real + 1000] {
        let mut h = header.clone();
        h["n_vectors"] = claimed.into();
        let mut r = rest.clone();
        r[n * 8..n * 8 + 8].copy_from_slice(&claimed.to_le_bytes());
        std::fs::write(&path, store_with_header(&good, &h, &r)).unwrap();
        let err = TokenStore::load(&path, store.key())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("count.wbtok") && err.contains(&format!("{claimed} vectors")),
            "claimed {claimed}: {err}"
        );
    }
}

/// Garbage, an empty file, a directory and a missing file are errors naming the path,
/// never a panic; `read_key` agrees.
#[test]
fn token_store_garbage_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = random_store(13, 2, 3, 4);
    let cases: Vec<(&str, Option<Vec<u8>>)> = vec![
        ("empty.wbtok", Some(Vec::new())),
        (
            "text.wbtok",
            Some(b"not a token store at all, just text".to_vec()),
        ),
        ("magic-only.wbtok", Some(b"WBTOKF16".to_vec())),
        ("missing.wbtok", None),
    ];
    for (name, bytes) in cases {
        let path = dir.path().join(name);
        if let Some(b) = bytes {
            std::fs::write(&path, b).unwrap();
        }
        for err in [
            TokenStore::load(&path, store.key()).unwrap_err(),
            TokenStore::read_key(&path).unwrap_err(),
        ] {
            assert!(err.to_string().contains(name), "{name}: {err}");
        }
    }
    let sub = dir.path().join("a-directory.wbtok");
    std::fs::create_dir(&sub).unwrap();
    let err = TokenStore::load(&sub, store.key()).unwrap_err().to_string();
    assert!(err.contains("a-directory.wbtok"), "{err}");
}

/// A store built by another model cannot be handed to the re-ranker or the end-to-end
/// retriever (its key names the model's weights); one built for other passages is
/// rebuilt by `load_or_build_store`.
#[test]
fn minilm_token_store_from_another_model_or_passages_is_refused() {
    let model = minilm();
    let ps = passages();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("minilm.wbtok");
    let store = model.load_or_build_store(&ps, &path).unwrap();
    // The same vectors under another model's key.
    let mut foreign = TokenStore::new(StoreKey {
        model_sha256: "f".repeat(64),
        ..model.store_key(&ps)
    });
    for (i, p) in ps.iter().enumerate() {
        foreign.push(&p.id, &p.text, &store.vectors_f32(i)).unwrap();
    }
    let err = MaxSimReranker::new(model.clone())
        .with_store(Arc::new(foreign.clone()))
        .err()
        .expect("a store of another model is refused")
        .to_string();
    assert!(
        err.contains("another encoder") && err.contains("model sha256"),
        "{err}"
    );
    let err =
        MaxSimEndToEnd::from_index(model.clone(), TokenIndex::build(foreign.clone()).unwrap())
            .err()
            .expect("a store of another model is refused")
            .to_string();
    assert!(err.contains("model sha256"), "{err}");
    // Saved to disk, it is stale for this model: named, and rebuilt by load_or_build_store.
    foreign.save(&path).unwrap();
    let err = TokenStore::load(&path, &model.store_key(&ps))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("minilm.wbtok") && err.contains("model sha256"),
        "{err}"
    );
    assert_eq!(model.load_or_build_store(&ps, &path).unwrap(), store);
    // Other passages (one fewer): the key differs, the store is rebuilt for them.
    let fewer = &ps[..ps.len() - 1];
    assert_ne!(model.store_key(fewer), model.store_key(&ps));
    let err = TokenStore::load(&path, &model.store_key(fewer))
        .unwrap_err()
        .to_string();
    assert!(err.contains("passage-set key"), "{err}");
    let rebuilt = model.load_or_build_store(fewer, &path).unwrap();
    assert_eq!(rebuilt.len(), fewer.len());
    assert_eq!(rebuilt.key(), &model.store_key(fewer));
}

// ------------------------------------------------------------------ approximate token index

mod approx_index {
    use super::*;
    use workbench::rerank::late_interaction::{
        ApproxSearch, ApproxTokenIndex, CentroidParams, MaxSimApprox,
    };

    fn params(nlist: usize) -> CentroidParams {
        CentroidParams {
            nlist,
            niter: 10,
            seed: 7,
            max_points_per_centroid: 256,
        }
    }

    /// With every cell probed and no candidate limit the search is exhaustive: it returns
    /// exactly `TokenStore::exhaustive`'s hits (same ids, order and scores).
    #[test]
    fn exhaustive_search_equals_exact() {
        for seed in 0..6u64 {
            let store = Arc::new(random_store(100 + seed, 40, 12, 16));
            let nlist = 8;
            let index = ApproxTokenIndex::build(store.clone(), params(nlist)).unwrap();
            assert_eq!(index.codes().len(), store.n_vectors());
            let mut rng = Rng(seed);
            for nq in [1, 3, 7] {
                let q = random_unit_rows(&mut rng, nq, 16);
                for k in [1, 5, 40] {
                    let exact = store.exhaustive(&q, k).unwrap();
                    let approx = index
                        .search(&q, k, &ApproxSearch::exhaustive(nlist))
                        .unwrap();
                    assert_eq!(approx, exact, "seed {seed}, |q| {nq}, k {k}");
                    // Also when the candidate limit equals the number of passages.
                    let all = ApproxSearch {
                        nprobe: nlist,
                        candidates: store.len(),
                    };
                    assert_eq!(index.search(&q, k, &all).unwrap(), exact);
                }
                // A narrower search returns exact MaxSim scores of what it finds, and probes
                // no more passages with fewer cells.
                let mut last = usize::MAX;
                for nprobe in (1..=nlist).rev() {
                    let s = ApproxSearch {
                        nprobe,
                        candidates: 10,
                    };
                    let (cands, probed) = index.candidates(&q, &s).unwrap();
                    assert!(cands.len() <= 10 && probed <= last);
                    last = probed;
                    for h in index.search(&q, 5, &s).unwrap() {
                        let i = store.position(&h.id).unwrap();
                        assert_eq!(h.score, store.score(&q, i));
                    }
                }
            }
        }
    }

    #[test]
    fn bad_search_parameters_are_errors() {
        let store = Arc::new(random_store(3, 20, 6, 8));
        let index = ApproxTokenIndex::build(store.clone(), params(4)).unwrap();
        let q = vec![1.0; 8];
        for s in [
            ApproxSearch {
                nprobe: 0,
                candidates: 5,
            },
            ApproxSearch {
                nprobe: 5,
                candidates: 5,
            },
            ApproxSearch {
                nprobe: 2,
                candidates: 0,
            },
        ] {
            assert!(matches!(
                index.search(&q, 3, &s),
                Err(Error::InvalidParam { .. })
            ));
        }
        let ok = ApproxSearch {
            nprobe: 2,
            candidates: 5,
        };
        assert!(index.search(&q[..5], 3, &ok).is_err());
        assert!(index.search(&q, 0, &ok).is_err());
        // More cells than token vectors cannot be built.
        assert!(matches!(
            ApproxTokenIndex::build(store.clone(), params(store.n_vectors() + 1)),
            Err(Error::InvalidParam { .. })
        ));
    }

    /// The cached index is reused while store and parameters are unchanged; another
    /// parameter, another store, a flipped byte or a truncated file is refused with an
    /// error naming the file, and `load_or_build` rebuilds.
    #[test]
    fn cache_is_keyed_and_checked() {
        let store = Arc::new(random_store(21, 30, 10, 12));
        let dir = tempfile::tempdir().unwrap();
        let store_path = dir.path().join("s.wbtok");
        let path = ApproxTokenIndex::path_next_to(&store_path, &params(6));
        assert!(path
            .to_string_lossy()
            .ends_with("s.wbtok.centroids-nlist6-iter10-seed7-mp256"));
        let built = ApproxTokenIndex::load_or_build(store.clone(), params(6), &path).unwrap();
        let loaded = ApproxTokenIndex::load(&path, store.clone(), params(6)).unwrap();
        assert_eq!(loaded.codes(), built.codes());
        assert_eq!(loaded.key(), built.key());
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        // Another build parameter (the seed).
        let err = ApproxTokenIndex::load(
            &path,
            store.clone(),
            CentroidParams {
                seed: 8,
                ..params(6)
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(&name) && err.contains("stale") && err.contains("build parameters"),
            "{err}"
        );
        // Another store (other vectors under the same key fields).
        let other = Arc::new(random_store(22, 30, 10, 12));
        let err = ApproxTokenIndex::load(&path, other.clone(), params(6))
            .unwrap_err()
            .to_string();
        assert!(err.contains(&name) && err.contains("stale"), "{err}");
        // Corrupt bytes.
        let good = std::fs::read(&path).unwrap();
        let mut flipped = good.clone();
        let at = flipped.len() - 40;
        flipped[at] ^= 0x10;
        for (what, bytes) in [
            ("flipped", flipped),
            ("truncated", good[..good.len() - 7].to_vec()),
            ("empty", Vec::new()),
        ] {
            std::fs::write(&path, &bytes).unwrap();
            let err = ApproxTokenIndex::load(&path, store.clone(), params(6))
                .unwrap_err()
                .to_string();
            assert!(err.contains(&name), "{what}: {err}");
            let rebuilt = ApproxTokenIndex::load_or_build(store.clone(), params(6), &path).unwrap();
            assert_eq!(rebuilt.codes(), built.codes(), "{what}");
        }
    }

    /// The retriever over the real MiniLM: exhaustive search equals exhaustive MaxSim, the
    /// name carries the parameters, a store of another encoder is refused.
    #[test]
    fn minilm_approx_retriever_exhaustive_equals_exact() {
        let model = minilm();
        let ps = passages();
        let store = Arc::new(model.build_store(&ps).unwrap());
        let nlist = 4;
        let index = Arc::new(ApproxTokenIndex::build(store.clone(), params(nlist)).unwrap());
        let r = MaxSimApprox::new(
            model.clone(),
            index.clone(),
            ApproxSearch::exhaustive(nlist),
        )
        .unwrap();
        assert!(
            r.name().starts_with("maxsim-plaid-minilm-raw384-nlist4-"),
            "{}",
            r.name()
        );
        let q = "Who won the football championship in 2006?";
        let qv = model.encode_query(q).unwrap().vectors;
        assert_eq!(r.retrieve(q, 3).unwrap(), store.exhaustive(&qv, 3).unwrap());
        assert!(MaxSimApprox::new(
            model.clone(),
            index,
            ApproxSearch {
                nprobe: nlist + 1,
                candidates: 3
            }
        )
        .is_err());
    }
}
