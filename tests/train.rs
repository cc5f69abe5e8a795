//! The training loop and the extractive-QA training pieces on tiny fixtures:
//! overfitting a tiny set, a finite-difference check of the span loss, resume ==
//! uninterrupted, the schedule, length grouping, save → load through the hub layout,
//! features whose targets map back to the exact answer characters.

use candle_core::{DType, Device, Tensor, Var};
use candle_nn::{VarBuilder, VarMap};
use std::path::Path;
use workbench::encode::Backend;
use workbench::read::extractive::{
    ExtractiveReader, QaConfig, QaFiles, QaModel, ReaderParams, WindowParams,
};
use workbench::train::batching::{batches_per_epoch, length_grouped_batches};
use workbench::train::qa::{self, QaFeatures, QaTrainModel, SpanExample};
use workbench::train::{train, LinearSchedule, Stop, TrainConfig, TrainData, Trainable};

const WORDS: &[&str] = &[
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "who", "what", "where", "built", "the", "tower", "in",
    "paris", "eiffel", "gustave", "1889", "river", "seine", "flows", "through", "city", "london",
    "thames", "is", "a", "bridge", "was", "when", "opened", "name", "of",
];

/// A word-level tokenizer over `WORDS` (whitespace pre-tokenizer, offsets in bytes).
fn tokenizer_json(dir: &Path) -> std::path::PathBuf {
    let vocab: serde_json::Map<String, serde_json::Value> = WORDS
        .iter()
        .enumerate()
        .map(|(i, w)| (w.to_string(), serde_json::json!(i)))
        .collect();
    let t = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": {"type": "Lowercase"},
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
    });
    let p = dir.join("tokenizer.json");
    std::fs::write(&p, serde_json::to_string(&t).unwrap()).unwrap();
    p
}

/// A tiny randomly initialised BERT QA checkpoint (`bert.…` + `qa_outputs.…`).
fn tiny_checkpoint(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let cfg = serde_json::json!({
        "vocab_size": WORDS.len(), "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 64, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0, "max_position_embeddings": 64, "type_vocab_size": 2,
        "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0,
        "model_type": "bert"
    });
    let c = dir.join("config.json");
    std::fs::write(&c, cfg.to_string()).unwrap();
    let config = QaConfig::from_base_file(&c).unwrap();
    let vars = VarMap::new();
    let vb = VarBuilder::from_varmap(&vars, DType::F32, &Device::Cpu);
    QaModel::new(vb, &config).unwrap();
    let m = dir.join("model.safetensors");
    vars.save(&m).unwrap();
    (c, m)
}

fn examples() -> Vec<SpanExample> {
    let mk = |id: &str, q: &str, c: &str, a: &str| {
        let s = c.find(a).unwrap();
        SpanExample {
            id: id.into(),
            source: "test".into(),
            question: q.into(),
            context: c.into(),
            answer: Some((s, s + a.len())),
            golds: vec![a.into()],
        }
    };
    vec![
        mk(
            "a",
            "who built the tower",
            "the eiffel tower in paris was built by gustave eiffel in 1889",
            "gustave eiffel",
        ),
        mk(
            "b",
            "when was the tower built",
            "the eiffel tower in paris was built by gustave eiffel in 1889",
            "1889",
        ),
        mk(
            "c",
            "what river flows through paris",
            "the river seine flows through the city of paris",
            "seine",
        ),
        mk(
            "d",
            "what river flows through london",
            "the thames flows through london a city",
            "thames",
        ),
        mk(
            "e",
            "where is the tower",
            "the eiffel tower is in paris",
            "paris",
        ),
        mk(
            "f",
            "what is the name of the bridge",
            "the name of the bridge is london bridge",
            "london bridge",
        ),
    ]
}

fn cfg(epochs: usize) -> TrainConfig {
    TrainConfig {
        epochs,
        batch_size: 2,
        lr: 3e-3,
        warmup_ratio: 0.1,
        seed: 7,
        bucket_batches: 2,
        threads: 1,
        max_grad_norm: Some(1.0),
        checkpoint_every: Some(4),
        ..TrainConfig::default()
    }
}

fn setup(dir: &Path) -> (QaTrainModel, QaFeatures, std::path::PathBuf) {
    let tok_path = tokenizer_json(dir);
    let (c, m) = tiny_checkpoint(dir);
    let tok = workbench::train::reader::load_tokenizer(&tok_path).unwrap();
    let p = WindowParams {
        max_seq_len: 64,
        doc_stride: 8,
    };
    let feats = qa::make_features(&tok, &examples(), &p).unwrap();
    let model = QaTrainModel::from_checkpoint(&c, &m, 1).unwrap();
    (model, QaFeatures(feats), tok_path)
}

fn weights(vars: &VarMap) -> Vec<(String, Vec<f32>)> {
    let data = vars.data().lock().unwrap();
    let mut v: Vec<(String, Vec<f32>)> = data
        .iter()
        .map(|(k, var)| {
            (
                k.clone(),
                var.as_tensor().flatten_all().unwrap().to_vec1().unwrap(),
            )
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn tiny_model_overfits_tiny_set() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, data, tok) = setup(tmp.path());
    let first = {
        let b = data.collate(&(0..data.len()).collect::<Vec<_>>()).unwrap();
        model.loss(&b).unwrap().to_scalar::<f32>().unwrap()
    };
    let mut c = cfg(300);
    c.checkpoint_every = None;
    c.lr = 5e-3;
    c.max_grad_norm = None;
    c.adamw.weight_decay = 0.0;
    train(&model, &model.vars, &data, &c, None, Stop::End).unwrap();
    let b = data.collate(&(0..data.len()).collect::<Vec<_>>()).unwrap();
    let last = model.loss(&b).unwrap().to_scalar::<f32>().unwrap();
    assert!(first > 1.0, "initial loss {first}");
    assert!(last < 0.05, "loss after overfitting: {last} (from {first})");
    // And the reader over the trained model (its windows and span decoding) reads the
    // gold answers.
    let params = ReaderParams {
        window: WindowParams {
            max_seq_len: 64,
            doc_stride: 8,
        },
        backend: Backend::Candle,
        ..ReaderParams::default()
    };
    let reader = ExtractiveReader::new(
        "tiny",
        model.model.clone(),
        model.config.clone(),
        &tok,
        params,
    )
    .unwrap();
    let preds = workbench::train::reader::predict_gold(&reader, &examples()).unwrap();
    for (p, e) in preds.iter().zip(examples()) {
        assert_eq!(p.as_deref(), Some(e.golds[0].as_str()));
    }
}

#[test]
fn span_loss_gradient_matches_finite_differences() {
    let dev = Device::Cpu;
    let s0: Vec<f64> = vec![0.3, -1.2, 0.8, 0.1, -0.4, 1.5, 0.0, -0.7, 0.2, 0.9];
    let e0: Vec<f64> = vec![-0.5, 0.4, 1.1, -0.2, 0.6, 0.3, -1.0, 0.7, 0.05, -0.3];
    let sp = Tensor::new(&[2u32, 4], &dev).unwrap();
    let ep = Tensor::new(&[3u32, 0], &dev).unwrap();
    let loss_of = |s: &[f64], e: &[f64]| -> f64 {
        let s = Tensor::from_slice(s, (2, 5), &dev).unwrap();
        let e = Tensor::from_slice(e, (2, 5), &dev).unwrap();
        workbench::read::extractive::span_loss(&s, &e, &sp, &ep)
            .unwrap()
            .to_scalar::<f64>()
            .unwrap()
    };
    let sv = Var::from_tensor(&Tensor::from_slice(&s0, (2, 5), &dev).unwrap()).unwrap();
    let ev = Var::from_tensor(&Tensor::from_slice(&e0, (2, 5), &dev).unwrap()).unwrap();
    let loss =
        workbench::read::extractive::span_loss(sv.as_tensor(), ev.as_tensor(), &sp, &ep).unwrap();
    let grads = loss.backward().unwrap();
    let gs: Vec<f64> = grads
        .get(&sv)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let ge: Vec<f64> = grads
        .get(&ev)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let h = 1e-6;
    for i in 0..10 {
        let (mut a, mut b) = (s0.clone(), s0.clone());
        a[i] += h;
        b[i] -= h;
        let fd = (loss_of(&a, &e0) - loss_of(&b, &e0)) / (2.0 * h);
        assert!(
            (fd - gs[i]).abs() < 1e-6,
            "start logit {i}: analytic {} vs numeric {fd}",
            gs[i]
        );
        let (mut a, mut b) = (e0.clone(), e0.clone());
        a[i] += h;
        b[i] -= h;
        let fd = (loss_of(&s0, &a) - loss_of(&s0, &b)) / (2.0 * h);
        assert!(
            (fd - ge[i]).abs() < 1e-6,
            "end logit {i}: analytic {} vs numeric {fd}",
            ge[i]
        );
    }
    // The analytic form too: d/ds_j = (softmax_j − [j = target]) / (2 · batch).
    let row: Vec<f64> = s0[..5].to_vec();
    let z: f64 = row.iter().map(|x| x.exp()).sum();
    let want = (row[2].exp() / z - 1.0) / 4.0;
    assert!((gs[2] - want).abs() < 1e-9);
}

#[test]
fn resume_gives_the_uninterrupted_result() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, data, _) = setup(tmp.path());
    let init = tmp.path().join("init.safetensors");
    model.vars.save(&init).unwrap();
    let c = cfg(3);
    let total = batches_per_epoch(data.len(), c.batch_size, c.bucket_batches) * c.epochs;
    assert!(total > 6, "need several updates, have {total}");
    let log_a = train(&model, &model.vars, &data, &c, None, Stop::End).unwrap();
    let wa = weights(&model.vars);

    // Interrupted at update 5 (mid-epoch, after a checkpoint at 4), then resumed by a
    // fresh model from the checkpoint directory.
    let state = tmp.path().join("state");
    let (m2, _, _) = setup(&tmp.path().join("b").tap_mkdir());
    load_into(&m2.vars, &init);
    let part = train(&m2, &m2.vars, &data, &c, Some(&state), Stop::AfterSteps(5)).unwrap();
    assert_eq!(part.steps.len(), 5);
    let (m3, _, _) = setup(&tmp.path().join("c").tap_mkdir());
    let log_b = train(&m3, &m3.vars, &data, &c, Some(&state), Stop::End).unwrap();
    assert_eq!(log_b.steps.len(), total);
    let wb = weights(&m3.vars);
    for ((ka, va), (kb, vb)) in wa.iter().zip(&wb) {
        assert_eq!(ka, kb);
        assert_eq!(va, vb, "weights of `{ka}` differ after resuming");
    }
    // Losses are f32 values; the log's JSON round trip may change the last f64 digit.
    let la: Vec<f32> = log_a.steps.iter().map(|s| s.loss as f32).collect();
    let lb: Vec<f32> = log_b.steps.iter().map(|s| s.loss as f32).collect();
    assert_eq!(la, lb);
    // A checkpoint of another config is refused, naming it.
    let mut other = c.clone();
    other.lr *= 2.0;
    let err = train(&m3, &m3.vars, &data, &other, Some(&state), Stop::End).unwrap_err();
    assert!(err.to_string().contains("another config"), "{err}");
}

trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}
impl TapMkdir for std::path::PathBuf {
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}

fn load_into(vars: &VarMap, path: &Path) {
    let saved = candle_core::safetensors::load(path, &Device::Cpu).unwrap();
    for (k, v) in vars.data().lock().unwrap().iter() {
        v.set(&saved[k]).unwrap();
    }
}

#[test]
fn schedule_values_at_known_steps() {
    let s = LinearSchedule {
        peak: 1e-4,
        warmup_steps: 10,
        total_steps: 110,
    };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-15;
    assert!(close(s.lr(0), 0.0));
    assert!(close(s.lr(5), 5e-5));
    assert!(close(s.lr(10), 1e-4));
    assert!(close(s.lr(60), 5e-5));
    assert!(close(s.lr(110), 0.0));
    assert!(close(s.lr(200), 0.0));
    let r = LinearSchedule::with_warmup_ratio(2e-5, 0.1, 95);
    assert_eq!(r.warmup_steps, 10);
}

#[test]
fn length_grouping_keeps_every_example_once() {
    let lengths: Vec<usize> = (0..103).map(|i| (i * 37) % 91 + 5).collect();
    for bucket in [0, 1, 4, 50] {
        let b = length_grouped_batches(&lengths, 8, bucket, 3, 0).unwrap();
        assert_eq!(b.len(), batches_per_epoch(lengths.len(), 8, bucket));
        let mut all: Vec<usize> = b.iter().flatten().copied().collect();
        all.sort();
        assert_eq!(all, (0..103).collect::<Vec<_>>(), "bucket {bucket}");
        assert!(b.iter().all(|x| !x.is_empty() && x.len() <= 8));
        // Same seed and epoch → same batches; another epoch → another order.
        assert_eq!(
            b,
            length_grouped_batches(&lengths, 8, bucket, 3, 0).unwrap()
        );
        assert_ne!(
            b,
            length_grouped_batches(&lengths, 8, bucket, 3, 1).unwrap()
        );
    }
    // Grouping cuts padding: total padded length is far below random batches'.
    let pad = |b: &[Vec<usize>]| -> usize {
        b.iter()
            .map(|x| x.iter().map(|&i| lengths[i]).max().unwrap() * x.len())
            .sum()
    };
    let grouped = pad(&length_grouped_batches(&lengths, 8, 4, 3, 0).unwrap());
    let random = pad(&length_grouped_batches(&lengths, 8, 0, 3, 0).unwrap());
    assert!(grouped < random, "grouped {grouped} vs random {random}");
}

#[test]
fn saved_checkpoint_loads_through_hub_layout_with_identical_logits() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, data, tok) = setup(tmp.path());
    let out = tmp.path().join("hf");
    model.save_pretrained(&out, &tok).unwrap();
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(cfg["architectures"][0], "BertForQuestionAnswering");
    assert!(out.join("tokenizer.json").exists());
    let (loaded, _) = QaModel::load(&QaFiles::in_dir(&out)).unwrap();
    let b = data.collate(&[0, 1, 2]).unwrap();
    let (s1, e1) = model.model.forward(&b.ids, &b.type_ids, &b.mask).unwrap();
    let (s2, e2) = loaded.forward(&b.ids, &b.type_ids, &b.mask).unwrap();
    assert_eq!(s1.to_vec2::<f32>().unwrap(), s2.to_vec2::<f32>().unwrap());
    assert_eq!(e1.to_vec2::<f32>().unwrap(), e2.to_vec2::<f32>().unwrap());
    // Missing and corrupt checkpoints are clear errors.
    let e = QaModel::load(&QaFiles::in_dir(tmp.path().join("nope")))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("config.json"), "{e}");
    std::fs::write(out.join("model.safetensors"), b"not safetensors").unwrap();
    let e = QaModel::load(&QaFiles::in_dir(&out))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("model.safetensors"), "{e}");
}

#[test]
fn feature_targets_map_back_to_the_answer_characters() {
    let tmp = tempfile::tempdir().unwrap();
    let tok = workbench::train::reader::load_tokenizer(&tokenizer_json(tmp.path())).unwrap();
    // Small windows: the context is cut into several, the answer is whole in some only.
    let p = WindowParams {
        max_seq_len: 14,
        doc_stride: 3,
    };
    let exs = examples();
    let feats = qa::make_features(&tok, &exs[..1], &p).unwrap();
    assert!(feats.len() > 1, "expected several windows");
    let ex = &exs[0];
    let (a0, a1) = ex.answer.unwrap();
    let mut with = 0;
    for f in &feats {
        if f.start == 0 {
            assert_eq!(f.end, 0);
            continue;
        }
        with += 1;
        let w = &f.window;
        let s = w.sources[f.start as usize - w.context_start].start_char;
        let e = w.sources[f.end as usize - w.context_start].end_char;
        assert_eq!((s, e), (a0, a1));
        assert_eq!(&ex.context[s..e], "gustave eiffel");
    }
    assert!(
        with >= 1 && with < feats.len(),
        "{with} of {} windows hold the answer",
        feats.len()
    );
    // A question longer than the window leaves no room: a clear error.
    let p = WindowParams {
        max_seq_len: 6,
        doc_stride: 1,
    };
    let e = qa::make_features(&tok, &exs[..1], &p)
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_seq_len") && e.contains("`a`"), "{e}");
}

/// Every weight receives a gradient (candle-nn's fused LayerNorm would stop it below
/// the last layer, and the model would train its head only).
#[test]
fn every_weight_gets_a_gradient() {
    let tmp = tempfile::tempdir().unwrap();
    let (model, data, _) = setup(tmp.path());
    let b = data.collate(&[0, 1, 2, 3]).unwrap();
    let grads = model.loss(&b).unwrap().backward().unwrap();
    let vars = model.vars.data().lock().unwrap();
    let mut missing: Vec<&String> = vars
        .iter()
        .filter(|(_, v)| {
            grads.get(v).is_none_or(|g| {
                g.abs()
                    .unwrap()
                    .sum_all()
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap()
                    == 0.0
            })
        })
        .map(|(k, _)| k)
        .collect();
    missing.sort();
    // Rows of unused vocabulary / positions have zero gradient, but every tensor has some.
    assert!(missing.is_empty(), "no gradient for {missing:?}");
    assert!(vars.len() > 30, "{} variables", vars.len());
}

#[test]
fn named_recipes_differ_in_supervision_and_unknown_names_are_clear_errors() {
    use workbench::train::reader::{self, ReaderRecipe};
    let all = ReaderRecipe::named("minilm-all", false).unwrap();
    assert_eq!(all, ReaderRecipe::default_minilm());
    let squad = ReaderRecipe::named("minilm-squad", false).unwrap();
    assert!(squad.supervision.squad_answerable);
    assert!(!squad.supervision.rag_mini && !squad.supervision.nq);
    let squad2 = ReaderRecipe::named("minilm-squad2", false).unwrap();
    assert!(squad2.supervision.squad_unanswerable && squad2.supervision.nq);
    assert_ne!(squad2.supervision, all.supervision);
    let full = ReaderRecipe::named("minilm-squad2", true).unwrap();
    assert_eq!(full.name, "minilm-squad2-full");
    assert_eq!(full.train.epochs, 2 * squad2.train.epochs);
    assert_eq!(squad2.max_features, Some(reader::SQUAD2_DEFAULT_FEATURES));
    assert_eq!(full.max_features, None);
    let err = ReaderRecipe::named("minilm-bogus", false)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("minilm-bogus") && err.contains("minilm-squad2"),
        "{err}"
    );
}
