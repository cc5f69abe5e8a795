//! The trained cross-encoder on tiny fixtures: transformers' reference logits
//! (`tests/data/tiny_ce`, written by `scripts/python/ce_tiny_checkpoint.py`) reproduced by
//! both the inference `CrossEncoder` and the trainable model; identical logits after
//! save and load through the hub path; overfitting a tiny set of groups; bad input.

use candle_core::Tensor;
use std::path::{Path, PathBuf};
use workbench::rerank::cross_encoder::{CrossEncoder, PairTokenizer};
use workbench::rerank::{PassageLookup, Reranker};
use workbench::train::cross::{encode_groups, CrossTrainModel, PairGroups};
use workbench::train::groups::{Group, GroupPassage};
use workbench::train::{train, AdamWParams, Stop, TrainConfig};
use workbench::Hit;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("data")
        .join(name)
}

fn group(id: &str, q: &str, pos: &str, negs: &[&str]) -> Group {
    let p = |i: usize, t: &str| GroupPassage {
        id: format!("{id}-{i}"),
        text: t.to_string(),
    };
    Group {
        id: id.into(),
        source: "test".into(),
        query: q.into(),
        positive: p(0, pos),
        negatives: negs.iter().enumerate().map(|(i, t)| p(i + 1, t)).collect(),
    }
}

/// Four groups over the tiny vocabulary; every passage is the positive of one group and
/// a negative of another, so only the query–passage interaction can separate them.
fn groups() -> Vec<Group> {
    let a = "hamlet is a tragedy written by shakespeare";
    let b = "the oil crisis was in 1973";
    let c = "paris is the capital of france";
    let d = "the war and the peace of the king";
    vec![
        group("g1", "who wrote hamlet?", a, &[b, c]),
        group("g2", "when was the oil crisis?", b, &[c, d]),
        group("g3", "what is the capital of france?", c, &[d, a]),
        group("g4", "which war did the king start?", d, &[a, b]),
    ]
}

fn tiny_model(group_size: usize) -> (CrossTrainModel, PairGroups) {
    let dir = data("tiny_qa");
    let m = CrossTrainModel::from_checkpoint(
        &dir.join("config.json"),
        &dir.join("model.safetensors"),
        7,
        group_size,
    )
    .unwrap();
    let tok = PairTokenizer::from_file(&dir.join("tokenizer.json"), 64).unwrap();
    let g = encode_groups(&tok, &groups(), group_size, 0).unwrap();
    (m, g)
}

fn cfg(epochs: usize, lr: f64) -> TrainConfig {
    TrainConfig {
        epochs,
        batch_size: 2,
        lr,
        warmup_ratio: 0.0,
        adamw: AdamWParams {
            weight_decay: 0.0,
            ..AdamWParams::default()
        },
        max_grad_norm: Some(1.0),
        seed: 3,
        bucket_batches: 0,
        threads: 1,
        checkpoint_every: None,
    }
}

fn logits(m: &CrossTrainModel, g: &PairGroups, idx: &[usize]) -> Vec<f32> {
    let b = g.batch(idx).unwrap();
    m.model
        .forward(&b.ids, &b.type_ids, &b.mask)
        .unwrap()
        .to_vec1()
        .unwrap()
}

#[test]
fn transformers_reference_logits_through_inference_and_training_models() {
    let dir = data("tiny_ce");
    let raw = std::fs::read_to_string(dir.join("reference.json")).unwrap();
    let r: serde_json::Value = serde_json::from_str(&raw).unwrap();
    let pairs: Vec<(String, String)> = r["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_str().unwrap().to_string(),
                p[1].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want: Vec<f32> = r["logits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect();
    let rows = |k: &str| -> Vec<Vec<u32>> {
        r[k].as_array()
            .unwrap()
            .iter()
            .map(|row| {
                row.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_u64().unwrap() as u32)
                    .collect()
            })
            .collect()
    };
    let (ids, types, mask) = (
        rows("input_ids"),
        rows("token_type_ids"),
        rows("attention_mask"),
    );
    assert!(want.iter().any(|x| x.abs() > 0.5), "logits far from zero");

    // Inference: loads unchanged, encodes as the Python tokenizer, scores as transformers.
    let ce = CrossEncoder::load_from_dir(&dir).unwrap();
    for (i, (q, p)) in pairs.iter().enumerate() {
        let (got_ids, got_types) = ce.encode_pair(q, p).unwrap();
        let n = mask[i].iter().filter(|&&m| m == 1).count();
        assert_eq!(got_ids, ids[i][..n], "pair {i}");
        assert_eq!(got_types, types[i][..n], "pair {i}");
        let s = ce.score(q, p).unwrap();
        assert!((s - want[i]).abs() < 1e-4, "pair {i}: {s} vs {}", want[i]);
    }

    // Training model: the same checkpoint, the same padded batch.
    let m = CrossTrainModel::from_checkpoint(
        &dir.join("config.json"),
        &dir.join("model.safetensors"),
        0,
        2,
    )
    .unwrap();
    let t = |v: &Vec<Vec<u32>>| {
        let n = v.len();
        let l = v[0].len();
        Tensor::from_vec(v.concat(), (n, l), &candle_core::Device::Cpu).unwrap()
    };
    let got: Vec<f32> = m
        .model
        .forward(&t(&ids), &t(&types), &t(&mask))
        .unwrap()
        .to_vec1()
        .unwrap();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() < 1e-4, "training model, pair {i}: {g} vs {w}");
    }
}

#[test]
fn identical_logits_after_save_and_load_through_the_hub_path() {
    let (m, g) = tiny_model(3);
    // A few updates, so the weights (the new classifier and pooler included) moved.
    train(&m, &m.vars, &g, &cfg(2, 1e-3), None, Stop::End).unwrap();
    let out = tempfile::tempdir().unwrap();
    m.save_pretrained(out.path(), &data("tiny_qa").join("tokenizer.json"))
        .unwrap();
    let before = logits(&m, &g, &[0, 1, 2, 3]);

    // The hub path: CrossEncoder reads the folder unchanged.
    let ce = CrossEncoder::load_from_dir(out.path()).unwrap();
    assert_eq!(ce.num_labels(), 1);
    let mut k = 0;
    for grp in groups() {
        let texts: Vec<&str> = std::iter::once(grp.positive.text.as_str())
            .chain(grp.negatives.iter().map(|n| n.text.as_str()))
            .collect();
        for s in ce.score_pairs(&grp.query, &texts).unwrap() {
            assert!(
                (s - before[k]).abs() < 1e-4,
                "pair {k}: {s} vs {}",
                before[k]
            );
            k += 1;
        }
    }
    // And reloaded for training, the classifier is copied, not re-initialised.
    let cfg_path = out.path().join("config.json");
    let again =
        CrossTrainModel::from_checkpoint(&cfg_path, &out.path().join("model.safetensors"), 99, 3)
            .unwrap();
    assert_eq!(logits(&again, &g, &[0, 1, 2, 3]), before);
    let c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg_path).unwrap()).unwrap();
    assert_eq!(c["architectures"][0], "BertForSequenceClassification");
}

#[test]
fn tiny_model_overfits_tiny_groups_and_reranks_them() {
    let (m, g) = tiny_model(3);
    let before = logits(&m, &g, &[0, 1, 2, 3]);
    let log = train(&m, &m.vars, &g, &cfg(60, 2e-3), None, Stop::End).unwrap();
    let first = log.steps[0].loss;
    let last = log.running_loss(4);
    assert!(last < 0.05 && last < first / 10.0, "loss {first} → {last}");
    let after = logits(&m, &g, &[0, 1, 2, 3]);
    for i in 0..4 {
        let row = &after[3 * i..3 * i + 3];
        assert!(row[0] > row[1] && row[0] > row[2], "group {i}: {row:?}");
    }
    // Before training the positives were not all first (the test can fail).
    let all_first = (0..4).all(|i| {
        let r = &before[3 * i..3 * i + 3];
        r[0] > r[1] && r[0] > r[2]
    });
    assert!(!all_first, "{before:?}");

    // Saved and loaded as a Reranker, it puts each group's positive first.
    let out = tempfile::tempdir().unwrap();
    m.save_pretrained(out.path(), &data("tiny_qa").join("tokenizer.json"))
        .unwrap();
    let ce = CrossEncoder::load_from_dir(out.path()).unwrap();
    for grp in groups() {
        let mut lookup = PassageLookup::new();
        let mut cands = Vec::new();
        let all: Vec<&GroupPassage> = std::iter::once(&grp.positive)
            .chain(&grp.negatives)
            .collect();
        // The positive enters last with the lowest first-stage score.
        for (i, p) in all.iter().enumerate().rev() {
            lookup.insert(p.id.clone(), p.text.clone()).unwrap();
            cands.push(Hit {
                id: p.id.clone(),
                score: i as f32,
            });
        }
        let hits = ce.rerank(&grp.query, &cands, &lookup, 3).unwrap();
        assert_eq!(hits[0].id, grp.positive.id, "{}", grp.query);
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    let src = data("tiny_ce");
    let tmp = tempfile::tempdir().unwrap();
    for f in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::copy(src.join(f), tmp.path().join(f)).unwrap();
    }
    // A truncated (corrupt) weights file: both loaders name it, neither panics.
    let w = tmp.path().join("model.safetensors");
    let bytes = std::fs::read(&w).unwrap();
    std::fs::write(&w, &bytes[..bytes.len() / 2]).unwrap();
    let e = CrossEncoder::load_from_dir(tmp.path())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("model.safetensors"), "{e}");
    let e = CrossTrainModel::from_checkpoint(&tmp.path().join("config.json"), &w, 0, 2)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("model.safetensors"), "{e}");
    // A config that is not JSON.
    std::fs::write(tmp.path().join("config.json"), "{ not json").unwrap();
    let e = CrossTrainModel::from_checkpoint(&tmp.path().join("config.json"), &w, 0, 2)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("config.json"), "{e}");
    // A missing weights file.
    let e = CrossTrainModel::from_checkpoint(
        &src.join("config.json"),
        &tmp.path().join("nope.safetensors"),
        0,
        2,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("nope.safetensors"), "{e}");
    // A group size without a negative, and groups with too few negatives.
    assert!(CrossTrainModel::from_checkpoint(
        &src.join("config.json"),
        &src.join("model.safetensors"),
        0,
        1
    )
    .is_err());
    let tok = PairTokenizer::from_file(&src.join("tokenizer.json"), 64).unwrap();
    let e = encode_groups(&tok, &groups(), 4, 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`g1`") && e.contains("2 negatives"), "{e}");
    // A missing tokenizer file names it.
    let e = PairTokenizer::from_file(&tmp.path().join("tokenizer-missing.json"), 64)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("tokenizer-missing.json"), "{e}");
}
