//! Dense retrieval: the BERT encoder (agreement with sentence-transformers and
//! with candle's reference BERT, determinism, order invariance, norms, token
//! offsets), the embedding cache, FAISS indexes against exact search, and the
//! dense retriever.
//!
//! Needs the `all-minilm-l6-v2` asset in the cache (`scripts/test` fetches it;
//! by hand: `cargo run --release --bin assets -- fetch all-minilm-l6-v2`). A
//! missing asset fails with the crate's AssetMissing message naming that command.
//!
//! Throughput (not run by default):
//! `cargo test --release --test dense throughput -- --ignored --nocapture`.

use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use workbench::assets::Assets;
use workbench::encode::cache::CacheStatus;
use workbench::encode::{dot, Backend, BertEncoder, EmbeddingCache, EncoderParams};
use workbench::retrieve::dense::DenseRetriever;
use workbench::retrieve::faiss::{IndexKind, IndexParams, Metric, VectorIndex};
use workbench::retrieve::Retriever;
use workbench::{Error, Passage, Query};

const MODEL: &str = "all-minilm-l6-v2";

fn load(params: EncoderParams) -> BertEncoder {
    let assets = Assets::load().unwrap_or_else(|e| panic!("{e}"));
    BertEncoder::load(&assets, MODEL, params).unwrap_or_else(|e| panic!("{e}"))
}

/// The default encoder, loaded once for all tests.
fn encoder() -> Arc<BertEncoder> {
    static ENC: OnceLock<std::result::Result<Arc<BertEncoder>, String>> = OnceLock::new();
    ENC.get_or_init(|| {
        let assets = Assets::load().map_err(|e| e.to_string())?;
        BertEncoder::load(&assets, MODEL, EncoderParams::default())
            .map(Arc::new)
            .map_err(|e| e.to_string())
    })
    .clone()
    .unwrap_or_else(|e| panic!("{e}"))
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt())
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Sentences of very different lengths (1 word … a long paragraph past 256 tokens).
fn sentences() -> Vec<String> {
    let long = "The history of the city stretches back to a small fishing village on the river, \
                which grew into a market town, a regional capital and finally a sprawling metropolis. "
        .repeat(12);
    vec![
        "Who wrote Hamlet?".into(),
        "Hamlet is a tragedy written by William Shakespeare around 1600.".into(),
        "The Big Apple is a nickname for New York City.".into(),
        "Paris".into(),
        "".into(),
        "Photosynthesis converts light energy into chemical energy stored in glucose, releasing \
         oxygen as a by-product; it takes place in the chloroplasts of plant cells."
            .into(),
        "Éléphant, naïve café — Zürich's 3.14 % rise (¥500) in 2024!".into(),
        long,
        "a b c d e f g".into(),
        "The mitochondria is the powerhouse of the cell.".into(),
    ]
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(|s| s.as_str()).collect()
}

// ---------------------------------------------------------------- encoder

#[test]
fn agrees_with_sentence_transformers_reference() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/st_reference.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}. This file holds sentence-transformers' embeddings of a fixed sentence list \
             and is required (no silent skip). Generate it with \
             `python3 scripts/python/st_reference.py` in a venv with sentence-transformers \
             (see scripts/python/requirements-peers.txt), then rerun this test.",
            path.display()
        )
    });
    let v: serde_json::Value = serde_json::from_str(&text).expect("st_reference.json is not JSON");
    let model = v["model"].as_str().expect("`model` missing");
    assert!(
        model.to_lowercase().contains("minilm-l6-v2"),
        "reference was made with {model}, not all-MiniLM-L6-v2"
    );
    let sents: Vec<String> = v["sentences"]
        .as_array()
        .expect("`sentences` missing")
        .iter()
        .map(|s| s.as_str().expect("sentence is not a string").to_string())
        .collect();
    let want: Vec<Vec<f32>> = v["embeddings"]
        .as_array()
        .expect("`embeddings` missing")
        .iter()
        .map(|row| {
            row.as_array()
                .expect("embedding is not a list")
                .iter()
                .map(|x| x.as_f64().expect("not a number") as f32)
                .collect()
        })
        .collect();
    assert!(!sents.is_empty(), "no sentences in {}", path.display());
    assert_eq!(
        sents.len(),
        want.len(),
        "sentences and embeddings differ in count"
    );
    let enc = encoder();
    // Same tokens as sentence-transformers (truncation 256, [CLS] … [SEP]), when recorded.
    if let Some(ids) = v.get("input_ids").and_then(|x| x.as_array()) {
        for (i, (s, want_ids)) in sents.iter().zip(ids).enumerate() {
            let want_ids: Vec<u32> = want_ids
                .as_array()
                .expect("input_ids row is not a list")
                .iter()
                .map(|x| x.as_u64().expect("token id") as u32)
                .collect();
            let got_ids = enc.tokenizer().encode(s.as_str(), true).unwrap();
            assert_eq!(
                got_ids.get_ids(),
                &want_ids[..],
                "sentence {i} {s:?}: token ids differ"
            );
        }
    }
    let got = enc.embed(&refs(&sents)).unwrap();
    let mut worst = (f32::INFINITY, 0.0f32);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(w.len(), 384, "reference embedding {i} is not 384-d");
        let c = cosine(g, w);
        worst = (worst.0.min(c), worst.1.max(max_abs_diff(g, w)));
        assert!(c > 0.999, "sentence {i} {:?}: cosine {c}", sents[i]);
    }
    eprintln!(
        "st_reference: {} sentences, min cosine {:.7}, max |diff| {:.2e}",
        sents.len(),
        worst.0,
        worst.1
    );
}

#[test]
fn fused_forward_matches_candle_reference_bert() {
    let fused = encoder();
    let reference = load(EncoderParams::default().backend(Backend::Candle));
    let s = sentences();
    let a = fused.embed(&refs(&s)).unwrap();
    let b = reference.embed(&refs(&s)).unwrap();
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let d = max_abs_diff(x, y);
        assert!(d < 1e-5, "sentence {i}: max |fused − candle| = {d:e}");
    }
    let t = "Hamlet is a tragedy written by William Shakespeare.";
    let ta = fused.token_embeddings(t).unwrap();
    let tb = reference.token_embeddings(t).unwrap();
    assert_eq!(ta.tokens, tb.tokens);
    for (x, y) in ta.vectors.iter().zip(&tb.vectors) {
        assert!(max_abs_diff(x, y) < 1e-4);
    }
}

#[test]
fn embeddings_are_unit_norm_and_384_d() {
    let enc = encoder();
    assert_eq!(enc.dim(), 384);
    assert_eq!(enc.model_sha256().len(), 64);
    for (i, v) in enc.embed(&refs(&sentences())).unwrap().iter().enumerate() {
        assert_eq!(v.len(), 384);
        let n = dot(v, v).sqrt();
        assert!((n - 1.0).abs() < 1e-5, "sentence {i}: norm {n}");
    }
    let raw = load(EncoderParams::default().normalize(false));
    let v = raw.embed_one("Who wrote Hamlet?").unwrap();
    assert!(
        (dot(&v, &v).sqrt() - 1.0).abs() > 1e-3,
        "unnormalised vector has norm 1"
    );
}

#[test]
fn embedding_is_deterministic_and_order_and_batch_invariant() {
    let enc = encoder();
    let s = sentences();
    let a = enc.embed(&refs(&s)).unwrap();
    let again = enc.embed(&refs(&s)).unwrap();
    assert_eq!(a, again, "two runs differ");

    // Reversed and shuffled input order: same vector for each text.
    let mut perm: Vec<usize> = (0..s.len()).collect();
    perm.reverse();
    perm.swap(1, 4);
    let shuffled: Vec<&str> = perm.iter().map(|&i| s[i].as_str()).collect();
    let b = enc.embed(&shuffled).unwrap();
    for (j, &i) in perm.iter().enumerate() {
        let d = max_abs_diff(&a[i], &b[j]);
        assert!(d <= 1e-5, "sentence {i} moved to {j}: max diff {d:e}");
    }
    // Alone, one per batch, and odd batch sizes.
    for bs in [1, 3] {
        let small = load(EncoderParams::default().batch_size(bs).threads(1));
        let c = small.embed(&refs(&s)).unwrap();
        for i in 0..s.len() {
            let d = max_abs_diff(&a[i], &c[i]);
            assert!(d <= 1e-5, "batch_size {bs}, sentence {i}: max diff {d:e}");
        }
    }
    for (i, t) in s.iter().enumerate() {
        let d = max_abs_diff(&a[i], &enc.embed_one(t).unwrap());
        assert!(d <= 1e-5, "sentence {i} alone: max diff {d:e}");
    }
    assert!(enc.embed(&[]).unwrap().is_empty());
}

#[test]
fn truncation_at_max_length() {
    let enc = encoder();
    let long = sentences()[7].clone();
    assert_eq!(enc.token_counts(&[&long]).unwrap(), vec![256]);
    // Anything after the 256th token cannot change the vector.
    let longer = format!("{long} completely different trailing words about volcanoes");
    let v = enc.embed(&[&long, &longer]).unwrap();
    assert!(max_abs_diff(&v[0], &v[1]) <= 1e-6);
}

#[test]
fn token_embeddings_offsets_slice_back_to_the_words() {
    let enc = encoder();
    let text = "The quick brown fox jumps over the lazy dog near Paris, unbelievably.";
    let te = enc.token_embeddings(text).unwrap();
    assert!(!te.tokens.is_empty());
    assert_eq!(te.tokens.len(), te.offsets.len());
    assert_eq!(te.tokens.len(), te.vectors.len());
    assert!(!te
        .tokens
        .iter()
        .any(|t| t == "[CLS]" || t == "[SEP]" || t == "[PAD]"));
    for ((tok, &(s, e)), v) in te.tokens.iter().zip(&te.offsets).zip(&te.vectors) {
        assert_eq!(
            text[s..e].to_lowercase(),
            tok.trim_start_matches("##"),
            "token {tok} at {s}..{e}"
        );
        assert_eq!(v.len(), 384);
        assert!((dot(v, v).sqrt() - 1.0).abs() < 1e-5);
    }
    // "unbelievably" is split into word pieces that tile it.
    assert!(te.tokens.iter().any(|t| t.starts_with("##")));
    // Offsets are bytes, also after multi-byte characters.
    let text = "Zürich café opened";
    let te = enc.token_embeddings(text).unwrap();
    let last = te.offsets.last().unwrap();
    assert_eq!(&text[last.0..last.1], "opened");
    assert!(enc.token_embeddings("").unwrap().tokens.is_empty());
}

#[test]
fn bad_parameters_are_rejected() {
    for (p, name) in [
        (EncoderParams::default().batch_size(0), "batch_size"),
        (EncoderParams::default().max_length(1), "max_length"),
        (EncoderParams::default().threads(0), "threads"),
    ] {
        match p.check() {
            Err(Error::InvalidParam { name: n, .. }) => assert_eq!(n, name),
            other => panic!("{name}: expected InvalidParam, got {other:?}"),
        }
    }
    let assets = Assets::load().unwrap();
    match BertEncoder::load(&assets, MODEL, EncoderParams::default().max_length(513)) {
        Err(Error::InvalidParam { name, .. }) => assert_eq!(name, "max_length"),
        other => panic!("expected InvalidParam, got {other:?}"),
    }
}

#[test]
fn missing_model_is_asset_missing_with_fetch_command() {
    let real = Assets::load().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut assets = Assets::from_manifest(
        &real.manifest_path,
        tmp.path().join("hub"),
        tmp.path().join("mirror"),
        tmp.path().join("wheels"),
    )
    .unwrap();
    assets.offline = true;
    let err = BertEncoder::load(&assets, MODEL, EncoderParams::default()).unwrap_err();
    assert!(matches!(err, Error::AssetMissing(_)), "{err}");
    assert!(
        err.to_string().contains("assets -- fetch all-minilm-l6-v2"),
        "{err}"
    );
}

// ---------------------------------------------------------------- cache

fn passage(id: &str, text: &str) -> Passage {
    Passage {
        id: id.into(),
        doc_id: id.split('#').next().unwrap().into(),
        title: String::new(),
        text: text.into(),
        start: 0,
        end: text.len(),
    }
}

fn corpus() -> Vec<Passage> {
    vec![
        passage("shakespeare#0", "Hamlet is a tragedy written by William Shakespeare, the English playwright."),
        passage("nyc#0", "New York City is often called the Big Apple, a nickname popularised by jazz musicians."),
        passage("photo#0", "Photosynthesis lets plants turn sunlight, water and carbon dioxide into sugar and oxygen."),
        passage("everest#0", "Mount Everest is Earth's highest mountain above sea level, in the Himalayas."),
        passage("python#0", "Python is a programming language that emphasises code readability."),
        passage("football#0", "The FIFA World Cup is an international football competition held every four years."),
    ]
}

#[test]
fn cache_hits_misses_and_never_reads_stale_or_truncated_entries() {
    let enc = encoder();
    let tmp = tempfile::tempdir().unwrap();
    let cache = EmbeddingCache::new(tmp.path().join("embeddings"));
    let mut ps = corpus();

    let (v1, s1) = cache.get_or_compute_with_status(&enc, &ps).unwrap();
    assert_eq!(s1, CacheStatus::Miss);
    let (v2, s2) = cache.get_or_compute_with_status(&enc, &ps).unwrap();
    assert_eq!(s2, CacheStatus::Hit);
    assert_eq!(v1, v2, "a hit must return the stored vectors bit for bit");
    let key = EmbeddingCache::key(&enc, &ps).unwrap();
    assert_eq!(
        std::fs::metadata(cache.data_path(&key)).unwrap().len(),
        (ps.len() * 384 * 4) as u64
    );
    let header: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cache.header_path(&key)).unwrap()).unwrap();
    assert_eq!(header["key"], key.as_str());
    assert_eq!(header["n"], ps.len());
    assert_eq!(header["dim"], 384);
    assert_eq!(header["model"], MODEL);

    // Changing one passage's text changes the key: recomputed, never the old vectors.
    ps[2].text = "Photosynthesis happens in chloroplasts.".into();
    let key2 = EmbeddingCache::key(&enc, &ps).unwrap();
    assert_ne!(key, key2);
    let (v3, s3) = cache.get_or_compute_with_status(&enc, &ps).unwrap();
    assert_eq!(s3, CacheStatus::Miss);
    assert_ne!(v3[2], v1[2]);
    assert_eq!(v3[0], v1[0]);
    // Ids and order are part of the key too; so are the encoder parameters.
    let mut reordered = ps.clone();
    reordered.swap(0, 1);
    assert_ne!(EmbeddingCache::key(&enc, &reordered).unwrap(), key2);
    let raw = load(EncoderParams::default().normalize(false));
    assert_ne!(EmbeddingCache::key(&raw, &ps).unwrap(), key2);

    // A truncated data file is detected and rebuilt.
    let data = cache.data_path(&key2);
    let bytes = std::fs::read(&data).unwrap();
    std::fs::write(&data, &bytes[..bytes.len() - 7]).unwrap();
    let (v4, s4) = cache.get_or_compute_with_status(&enc, &ps).unwrap();
    match s4 {
        CacheStatus::Rebuilt(reason) => {
            assert!(reason.contains(&format!("{key2}.f32")), "{reason}");
            assert!(reason.contains("truncated"), "{reason}");
        }
        other => panic!("expected Rebuilt, got {other:?}"),
    }
    assert_eq!(v4, v3);
    assert_eq!(std::fs::read(&data).unwrap(), bytes);
    // A header that records another key is not trusted either.
    let hp = cache.header_path(&key2);
    let h = std::fs::read_to_string(&hp).unwrap().replace(&key2, &key);
    std::fs::write(&hp, h).unwrap();
    let (_, s5) = cache.get_or_compute_with_status(&enc, &ps).unwrap();
    assert!(matches!(s5, CacheStatus::Rebuilt(_)), "{s5:?}");
    assert_eq!(
        cache.get_or_compute_with_status(&enc, &ps).unwrap().1,
        CacheStatus::Hit
    );
}

// ---------------------------------------------------------------- FAISS

/// `n` unit vectors in `dim` dimensions around `clusters` random centres
/// (embeddings are clustered; uniform random vectors are the worst case for IVF).
fn clustered(seed: u64, n: usize, dim: usize, clusters: usize, spread: f32) -> Vec<Vec<f32>> {
    // SplitMix64: a tiny seeded generator, so the test needs no rand dependency.
    let mut state = seed;
    let mut uniform = move || -> f32 {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z >> 40) as f32 + 0.5) / (1u64 << 24) as f32 // in (0, 1)
    };
    let mut gauss = move || -> f32 {
        // Box–Muller
        let (u, v) = (uniform(), uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f32::consts::PI * v).cos()
    };
    let centres: Vec<Vec<f32>> = (0..clusters)
        .map(|_| (0..dim).map(|_| gauss()).collect())
        .collect();
    (0..n)
        .map(|i| {
            let c = &centres[i % clusters];
            let mut v: Vec<f32> = c.iter().map(|x| x + spread * gauss()).collect();
            workbench::encode::l2_normalize(&mut v);
            v
        })
        .collect()
}

/// Exact ranking by brute force (f64 dot products / squared distances), best first.
fn brute_force(data: &[Vec<f32>], q: &[f32], metric: Metric) -> Vec<(usize, f64)> {
    let mut all: Vec<(usize, f64)> = data
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let s = match metric {
                Metric::InnerProduct => v.iter().zip(q).map(|(a, b)| *a as f64 * *b as f64).sum(),
                Metric::L2 => -v
                    .iter()
                    .zip(q)
                    .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
                    .sum::<f64>(),
            };
            (i, s)
        })
        .collect();
    all.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(a.0.cmp(&b.0)));
    all
}

fn recall(approx: &[Vec<(usize, f32)>], exact: &[Vec<(usize, f32)>]) -> f64 {
    let mut hit = 0usize;
    let mut total = 0usize;
    for (a, e) in approx.iter().zip(exact) {
        total += e.len();
        hit += a
            .iter()
            .filter(|(p, _)| e.iter().any(|(q, _)| q == p))
            .count();
    }
    hit as f64 / total as f64
}

proptest! {
    // A fixed seed: the recall bounds below are statistical (IVF at nprobe 12 of 32 lists
    // fell to 0.894 on one random draw), so every run checks the same 12 cases.
    #![proptest_config(ProptestConfig {
        cases: 12,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed_2026),
        ..ProptestConfig::default()
    })]

    #[test]
    fn flat_search_equals_brute_force(seed in any::<u64>(), n in 50usize..400, dim in 4usize..48, k in 1usize..20,
                                      l2 in any::<bool>()) {
        let data = clustered(seed, n, dim, 7, 0.5);
        let queries = clustered(seed ^ 0xABCD, 15, dim, 7, 0.5);
        let params = if l2 { IndexParams::flat_l2() } else { IndexParams::flat_ip() };
        let index = VectorIndex::build(params, dim, &data).unwrap();
        prop_assert_eq!(index.len(), n);
        let found = index.search(&queries, k).unwrap();
        for (q, got) in queries.iter().zip(&found) {
            let want = brute_force(&data, q, params.metric);
            prop_assert_eq!(got.len(), k.min(n));
            for (r, &(pos, value)) in got.iter().enumerate() {
                let exact = match params.metric {
                    Metric::InnerProduct => want.iter().find(|w| w.0 == pos).unwrap().1,
                    Metric::L2 => -want.iter().find(|w| w.0 == pos).unwrap().1,
                };
                prop_assert!((value as f64 - exact).abs() < 1e-5, "value {} vs exact {}", value, exact);
                // Same ranking as brute force; positions may only swap within float noise.
                if want[r].0 != pos {
                    prop_assert!((want[r].1 - want.iter().find(|w| w.0 == pos).unwrap().1).abs() < 1e-5,
                        "rank {}: faiss {} vs exact {}", r, pos, want[r].0);
                }
            }
        }
    }

    #[test]
    fn approximate_indexes_recall_flat_results(seed in any::<u64>(), dim in 16usize..64) {
        let n = 2000;
        let k = 10;
        let data = clustered(seed, n, dim, 40, 0.35);
        let queries = clustered(seed.wrapping_add(1), 50, dim, 40, 0.35);
        let exact = VectorIndex::build(IndexParams::flat_ip(), dim, &data).unwrap().search(&queries, k).unwrap();
        let hnsw = VectorIndex::build(IndexParams::ip(IndexKind::hnsw()), dim, &data).unwrap();
        let r = recall(&hnsw.search(&queries, k).unwrap(), &exact);
        prop_assert!(r >= 0.9, "HNSW recall@{} = {}", k, r);
        let ivf = VectorIndex::build(IndexParams::ip(IndexKind::IvfFlat { nlist: 32, nprobe: 12 }), dim, &data).unwrap();
        let r = recall(&ivf.search(&queries, k).unwrap(), &exact);
        prop_assert!(r >= 0.9, "IVF recall@{} = {}", k, r);
    }
}

#[test]
fn save_and_load_round_trip_every_kind() {
    let dim = 24;
    let data = clustered(7, 3000, dim, 30, 0.4);
    let queries = clustered(8, 40, dim, 30, 0.4);
    let tmp = tempfile::tempdir().unwrap();
    for params in [
        IndexParams::flat_ip(),
        IndexParams::flat_l2(),
        IndexParams::ip(IndexKind::IvfFlat {
            nlist: 20,
            nprobe: 3,
        }),
        IndexParams::ip(IndexKind::hnsw()),
    ] {
        let index = VectorIndex::build(params, dim, &data)
            .unwrap()
            .with_embedding_key("key-a");
        let before = index.search(&queries, 10).unwrap();
        let path = tmp.path().join(format!("{}.faiss", params.tag()));
        index.save(&path).unwrap();
        let loaded = VectorIndex::load(&path, Some("key-a")).unwrap();
        assert_eq!(loaded.params(), &params);
        assert_eq!(loaded.len(), 3000);
        assert_eq!(loaded.embedding_key(), Some("key-a"));
        assert_eq!(
            loaded.search(&queries, 10).unwrap(),
            before,
            "{}",
            params.tag()
        );
        // Built from other embeddings: rejected, naming the header.
        let err = VectorIndex::load(&path, Some("key-b")).unwrap_err();
        assert!(err.to_string().contains("key-a"), "{err}");
        assert!(err.to_string().contains(".faiss.json"), "{err}");
    }
    // A header that does not describe the FAISS file is rejected.
    let a = tmp.path().join("flat-ip.faiss");
    let b = tmp.path().join("flat-l2.faiss");
    std::fs::copy(VectorIndex::header_path(&b), VectorIndex::header_path(&a)).unwrap();
    assert!(VectorIndex::load(&a, None).is_err());
    // No header at all: an I/O error naming it.
    std::fs::remove_file(VectorIndex::header_path(&a)).unwrap();
    let err = VectorIndex::load(&a, None).unwrap_err();
    assert!(err.to_string().contains("flat-ip.faiss.json"), "{err}");
}

#[test]
fn vector_index_edge_cases() {
    let data = clustered(1, 30, 8, 3, 0.5);
    let index = VectorIndex::build(IndexParams::flat_ip(), 8, &data).unwrap();
    assert!(matches!(
        index.search(&data[..1], 0),
        Err(Error::InvalidParam { .. })
    ));
    let all = index.search(&data[..1], 1000).unwrap();
    assert_eq!(all[0].len(), 30);
    assert_eq!(all[0][0].0, 0, "a vector is its own nearest neighbour");
    assert!(index.search(&[vec![0.0; 5]], 1).is_err(), "wrong dimension");
    assert!(VectorIndex::new(
        IndexParams::ip(IndexKind::IvfFlat {
            nlist: 4,
            nprobe: 5
        }),
        8
    )
    .is_err());
    let mut ivf = VectorIndex::new(
        IndexParams::ip(IndexKind::IvfFlat {
            nlist: 64,
            nprobe: 4,
        }),
        8,
    )
    .unwrap();
    assert!(matches!(ivf.add(&data), Err(Error::InvalidParam { .. })));
    let empty = VectorIndex::new(IndexParams::flat_l2(), 8).unwrap();
    assert_eq!(empty.search(&data[..2], 3).unwrap(), vec![vec![], vec![]]);
}

// ---------------------------------------------------------------- retriever

#[test]
fn dense_retriever_ranks_semantically_and_keeps_the_contract() {
    let enc = encoder();
    let ps = corpus();
    let flat = DenseRetriever::build(enc.clone(), &ps, IndexParams::flat_ip(), None).unwrap();
    assert_eq!(flat.name(), "dense-all-minilm-l6-v2-flat-ip");
    let hits = flat.retrieve("Who wrote Hamlet?", 3).unwrap();
    assert_eq!(hits[0].id, "shakespeare#0");
    assert_eq!(
        flat.retrieve("Which city is the Big Apple?", 1).unwrap()[0].id,
        "nyc#0"
    );
    assert_eq!(
        flat.retrieve("highest peak in the world", 1).unwrap()[0].id,
        "everest#0"
    );
    for w in hits.windows(2) {
        assert!(w[0].score >= w[1].score);
    }
    // Scores are cosines: equal to the dot product of the two embeddings.
    let q = enc.embed_one("Who wrote Hamlet?").unwrap();
    let p = enc.embed_one(&ps[0].text).unwrap();
    assert!((hits[0].score - dot(&q, &p)).abs() < 1e-5);

    // L2 ranks identically and reports the same cosine scores.
    let l2 = DenseRetriever::build(enc.clone(), &ps, IndexParams::flat_l2(), None).unwrap();
    assert_eq!(l2.name(), "dense-all-minilm-l6-v2-flat-l2");
    let a = flat.retrieve("photosynthesis in plants", 6).unwrap();
    let b = l2.retrieve("photosynthesis in plants", 6).unwrap();
    assert_eq!(
        a.iter().map(|h| &h.id).collect::<Vec<_>>(),
        b.iter().map(|h| &h.id).collect::<Vec<_>>()
    );
    for (x, y) in a.iter().zip(&b) {
        assert!(
            (x.score - y.score).abs() < 1e-4,
            "{} vs {}",
            x.score,
            y.score
        );
    }

    // Contract.
    assert!(matches!(
        flat.retrieve("Hamlet", 0),
        Err(Error::InvalidParam { .. })
    ));
    assert_eq!(flat.retrieve("Hamlet", 100).unwrap().len(), ps.len());
    assert!(flat.retrieve("", 5).unwrap().is_empty());
    assert!(flat.retrieve("  \n", 5).unwrap().is_empty());

    // Timing parts, and retrieve_all = retrieve per query.
    let (h, t) = flat.retrieve_with_timing("Who wrote Hamlet?", 3).unwrap();
    assert_eq!(h, hits);
    assert!(t.encode > std::time::Duration::ZERO);
    assert_eq!(t.total(), t.encode + t.search);
    let queries = vec![
        Query {
            id: "q1".into(),
            text: "Who wrote Hamlet?".into(),
        },
        Query {
            id: "q2".into(),
            text: "".into(),
        },
        Query {
            id: "q3".into(),
            text: "world cup football".into(),
        },
    ];
    let run = flat.retrieve_all(&queries, 3).unwrap();
    assert_eq!(run.len(), 3);
    for q in &queries {
        let one = flat.retrieve(&q.text, 3).unwrap();
        let all = &run[&q.id];
        assert_eq!(
            one.iter().map(|h| &h.id).collect::<Vec<_>>(),
            all.iter().map(|h| &h.id).collect::<Vec<_>>()
        );
    }

    // Through the cache and a saved index, the same answers.
    let tmp = tempfile::tempdir().unwrap();
    let cache = EmbeddingCache::new(tmp.path());
    let cached =
        DenseRetriever::build(enc.clone(), &ps, IndexParams::flat_ip(), Some(&cache)).unwrap();
    assert_eq!(cached.retrieve("Who wrote Hamlet?", 3).unwrap(), hits);
    let path = tmp.path().join("flat.faiss");
    cached.index().save(&path).unwrap();
    let key = EmbeddingCache::key(&enc, &ps).unwrap();
    let index = VectorIndex::load(&path, Some(&key)).unwrap();
    let ids = ps.iter().map(|p| p.id.clone()).collect();
    let reloaded = DenseRetriever::from_parts(enc.clone(), index, ids).unwrap();
    assert_eq!(reloaded.retrieve("Who wrote Hamlet?", 3).unwrap(), hits);
}

// ---------------------------------------------------------------- throughput

/// Sentences per second on the first 512 wiki-leads lead sections — the texts
/// `scripts/python/bench_st.py` times sentence-transformers on (the first 512
/// non-empty `extract`s in file order, each whole).
#[test]
#[ignore = "benchmark; run with --ignored --nocapture"]
fn throughput_wiki_leads() {
    let assets = Assets::load().unwrap();
    let docs = workbench::load::wikipedia_corpus(&assets, "wiki-leads-en").unwrap();
    let texts: Vec<&str> = docs
        .iter()
        .filter(|d| !d.text.trim().is_empty())
        .take(512)
        .map(|d| d.text.as_str())
        .collect();
    assert_eq!(texts.len(), 512);
    let words: usize = texts.iter().map(|t| t.split_whitespace().count()).sum();
    let configs: Vec<(&str, EncoderParams)> = match std::env::var("DENSE_BENCH").as_deref() {
        Ok("quick") => vec![("fused bs64", EncoderParams::default())],
        _ => vec![
            ("fused bs64", EncoderParams::default()),
            ("fused bs32", EncoderParams::default().batch_size(32)),
            ("fused bs128", EncoderParams::default().batch_size(128)),
            ("fused bs64 1 thread", EncoderParams::default().threads(1)),
            (
                "candle-bert bs64",
                EncoderParams::default().backend(Backend::Candle),
            ),
        ],
    };
    let enc0 = load(EncoderParams::default());
    let tokens: usize = enc0.token_counts(&texts).unwrap().iter().sum();
    eprintln!(
        "{} paragraphs, {:.1} words and {:.1} tokens on average",
        texts.len(),
        words as f64 / texts.len() as f64,
        tokens as f64 / texts.len() as f64
    );
    for (label, params) in configs {
        let enc = load(params);
        enc.embed(&texts[..64]).unwrap(); // warm-up
        let mut best = f64::INFINITY;
        let mut best_cpu = f64::INFINITY;
        for _ in 0..3 {
            let (t, c) = (std::time::Instant::now(), cpu_seconds());
            let v = enc.embed(&texts).unwrap();
            best = best.min(t.elapsed().as_secs_f64());
            best_cpu = best_cpu.min(cpu_seconds() - c);
            assert_eq!(v.len(), texts.len());
        }
        eprintln!(
            "{label:>22}: {:7.1} sentences/s ({:.2} s for {}); {:.1} sentences per CPU-second; load {}",
            texts.len() as f64 / best,
            best,
            texts.len(),
            texts.len() as f64 / best_cpu,
            std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split(' ').next().unwrap_or("?")
        );
    }
}

/// User + system CPU time of this process so far (all threads), from /proc (Linux; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|x| x.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|x| x.parse().ok()).unwrap_or(0.0);
    ticks / 100.0 // USER_HZ is 100 on Linux
}
