//! Extractive reading: `QaModel` against tiny checkpoints saved by transformers with their
//! reference logits (`scripts/python/qa_tiny_checkpoint.py` → `tests/data/tiny_qa*/`),
//! save/load through the hub layout, windows and span decoding on hand-made logits, the
//! `Reader` contract (evidence offsets exact, both multi-passage modes), and bad input.
//!
//! Tests named `minilm_*` use the real all-MiniLM-L6-v2 from the project's asset cache.

use std::path::{Path, PathBuf};
use workbench::encode::Backend;
use workbench::read::extractive::{
    char_slice, decode, make_windows, model::QaModel, save_pretrained, DecodeParams,
    ExtractiveReader, MultiPassage, QaConfig, QaFiles, ReaderParams, WindowParams,
};
use workbench::read::{Context, Reader};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

struct Reference {
    pairs: Vec<(String, String)>,
    ids: Vec<Vec<u32>>,
    types: Vec<Vec<u32>>,
    mask: Vec<Vec<u32>>,
    start: Vec<Vec<f32>>,
    end: Vec<Vec<f32>>,
}

fn reference(dir: &Path) -> Reference {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap())
            .unwrap();
    let m = |k: &str| -> Vec<Vec<u32>> { serde_json::from_value(v[k].clone()).unwrap() };
    let f = |k: &str| -> Vec<Vec<f32>> { serde_json::from_value(v[k].clone()).unwrap() };
    Reference {
        pairs: serde_json::from_value(v["pairs"].clone()).unwrap(),
        ids: m("input_ids"),
        types: m("token_type_ids"),
        mask: m("attention_mask"),
        start: f("start_logits"),
        end: f("end_logits"),
    }
}

/// Run the reader's model on the reference batch (through `ExtractiveReader::logits`, which
/// pads and masks like the reference) and return the largest absolute difference.
fn max_diff_on_reference(reader: &ExtractiveReader, r: &Reference) -> f32 {
    let windows: Vec<workbench::read::extractive::Window> = r
        .ids
        .iter()
        .zip(&r.types)
        .zip(&r.mask)
        .map(|((ids, types), mask)| {
            let n = mask.iter().filter(|&&m| m == 1).count();
            workbench::read::extractive::Window {
                input_ids: ids[..n].to_vec(),
                type_ids: types[..n].to_vec(),
                context_start: 1,
                sources: Vec::new(),
                cls_index: 0,
            }
        })
        .collect();
    let (s, e) = reader.logits(&windows).unwrap();
    let mut worst = 0f32;
    for (i, w) in windows.iter().enumerate() {
        assert_eq!(s[i].len(), w.len());
        for t in 0..w.len() {
            worst = worst.max((s[i][t] - r.start[i][t]).abs());
            worst = worst.max((e[i][t] - r.end[i][t]).abs());
        }
    }
    worst
}

fn tiny_reader(name: &str) -> ExtractiveReader {
    tiny_reader_at(&data(name))
}

fn tiny_reader_at(dir: &Path) -> ExtractiveReader {
    ExtractiveReader::load_dir(
        dir,
        ReaderParams {
            window: WindowParams {
                max_seq_len: 64,
                doc_stride: 16,
            },
            batch_size: 2,
            ..Default::default()
        },
    )
    .unwrap()
}

#[test]
fn bert_qa_matches_transformers_logits() {
    let r = reference(&data("tiny_qa"));
    let reader = tiny_reader("tiny_qa");
    // The logits are far from zero, so a tolerance of 1e-4 means something.
    let scale = r
        .start
        .iter()
        .flatten()
        .map(|x| x.abs())
        .fold(0f32, f32::max);
    assert!(scale > 1.0, "{scale}");
    let d = max_diff_on_reference(&reader, &r);
    assert!(d < 1e-4, "max |Δlogit| {d}");
    // The tokenizer and the pair template give transformers' ids exactly (one window).
    for (i, (q, c)) in r.pairs.iter().enumerate() {
        let w = reader.windows(q, &[c.as_str()]).unwrap();
        assert_eq!(w.len(), 1);
        let n = r.mask[i].iter().filter(|&&m| m == 1).count();
        assert_eq!(w[0].input_ids, r.ids[i][..n], "pair {i}");
        assert_eq!(w[0].type_ids, r.types[i][..n], "pair {i}");
    }
}

#[test]
fn distilbert_qa_matches_transformers_logits() {
    let r = reference(&data("tiny_qa_distilbert"));
    let d = max_diff_on_reference(&tiny_reader("tiny_qa_distilbert"), &r);
    assert!(d < 1e-4, "max |Δlogit| {d}");
}

#[test]
fn roberta_qa_matches_transformers_logits() {
    let r = reference(&data("tiny_qa_roberta"));
    let d = max_diff_on_reference(&tiny_reader("tiny_qa_roberta"), &r);
    assert!(d < 1e-4, "max |Δlogit| {d}");
}

#[test]
fn trainable_copy_saved_and_loaded_gives_identical_logits() {
    let files = QaFiles::in_dir(data("tiny_qa"));
    let config = QaConfig::from_file(&files.config).unwrap();
    let (varmap, model) = QaModel::trainable(&config, &files.weights, 1).unwrap();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("saved");
    save_pretrained(&varmap, &config, &files.tokenizer, &dir).unwrap();
    for f in ["model.safetensors", "config.json", "tokenizer.json"] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    assert_eq!(cfg["architectures"][0], "BertForQuestionAnswering");

    let params = ReaderParams {
        window: WindowParams {
            max_seq_len: 64,
            doc_stride: 16,
        },
        ..Default::default()
    };
    let trained =
        ExtractiveReader::new("mem", model, config, &files.tokenizer, params.clone()).unwrap();
    let loaded = ExtractiveReader::load_dir(&dir, params).unwrap();
    let r = reference(&data("tiny_qa"));
    let w = trained
        .windows(&r.pairs[1].0, &[r.pairs[1].1.as_str()])
        .unwrap();
    let (s1, e1) = trained.logits(&w).unwrap();
    let (s2, e2) = loaded.logits(&w).unwrap();
    // Each is deterministic; the two agree to float rounding only: the same weights in
    // buffers at other addresses (VarMap variables vs tensors read from the file) take
    // other blocking paths in candle's CPU matmul (observed: max 1.1e-6 apart).
    assert_eq!(trained.logits(&w).unwrap().0, s1);
    assert_eq!(loaded.logits(&w).unwrap().0, s2);
    let worst = s1
        .iter()
        .flatten()
        .zip(s2.iter().flatten())
        .chain(e1.iter().flatten().zip(e2.iter().flatten()))
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(worst < 1e-5, "trained vs loaded: max |Δlogit| {worst}");
    // Loaded twice from the saved folder: bit-identical.
    let again = ExtractiveReader::load_dir(&dir, loaded.params().clone()).unwrap();
    assert_eq!(again.logits(&w).unwrap(), (s2.clone(), e2.clone()));
    // And both are still transformers' model.
    assert!(max_diff_on_reference(&loaded, &r) < 1e-4);
    let fused = tiny_reader_at(&dir);
    assert!(fused.is_fused());
    assert!(max_diff_on_reference(&fused, &r) < 1e-4);
}

#[test]
fn candle_and_fused_passes_both_match_transformers() {
    let r = reference(&data("tiny_qa"));
    let fused = tiny_reader("tiny_qa");
    assert!(fused.is_fused());
    let mut candle = tiny_reader("tiny_qa");
    let mut p = candle.params().clone();
    p.backend = Backend::Candle;
    candle.set_params(p).unwrap();
    let d = max_diff_on_reference(&candle, &r);
    assert!(d < 1e-4, "candle: max |Δlogit| {d}");
    let d = max_diff_on_reference(&fused, &r);
    assert!(d < 1e-4, "fused: max |Δlogit| {d}");
}

/// A short window batched with a longer one gives the logits it gives alone. On the
/// candle path the short window is padded to the longer one's length with an attention
/// mask, so this checks that padding changes nothing; the fused path packs windows
/// without padding and is checked the same way.
#[test]
fn padding_does_not_change_logits() {
    for backend in [Backend::Candle, Backend::Fused] {
        let mut reader = tiny_reader("tiny_qa");
        let mut p = reader.params().clone();
        p.backend = backend;
        p.batch_size = 2;
        reader.set_params(p).unwrap();
        assert_eq!(reader.is_fused(), backend == Backend::Fused, "{backend:?}");
        let short = reader.windows("who wrote hamlet?", &["hamlet ."]).unwrap();
        let long = reader
            .windows(
                "who wrote hamlet?",
                &["the first king of france was born in paris"],
            )
            .unwrap();
        assert_eq!((short.len(), long.len()), (1, 1));
        // The short window is padded by this many positions in the batch of two.
        let pad = long[0].len() - short[0].len();
        assert!(pad >= 5, "{backend:?}: only {pad} padding positions");
        let (alone, _) = reader.logits(&short).unwrap();
        let (long_alone, _) = reader.logits(&long).unwrap();
        let both: Vec<_> = short.iter().chain(&long).cloned().collect();
        let (batched, _) = reader.logits(&both).unwrap();
        assert_eq!(batched[0].len(), short[0].len(), "{backend:?}");
        for (a, b) in alone[0].iter().zip(&batched[0]) {
            assert!((a - b).abs() < 1e-5, "{backend:?} short window: {a} vs {b}");
        }
        for (a, b) in long_alone[0].iter().zip(&batched[1]) {
            assert!((a - b).abs() < 1e-5, "{backend:?} long window: {a} vs {b}");
        }
    }
}

// ------------------------------------------------------------ windows and decoding

fn tokenizer() -> tokenizers::Tokenizer {
    workbench::read::extractive::load_tokenizer(&data("tiny_qa/tokenizer.json")).unwrap()
}

#[test]
fn windows_overlap_by_the_stride_and_cover_the_context() {
    let tok = tokenizer();
    let ctx = (0..40)
        .map(|i| ["the", "king", "of", "france"][i % 4])
        .collect::<Vec<_>>()
        .join(" ");
    let p = WindowParams {
        max_seq_len: 20,
        doc_stride: 4,
    };
    let ws = make_windows(&tok, "who?", &[ctx.as_str()], " ", &p).unwrap();
    // [CLS] who ? [SEP] … [SEP]: 5 special/question tokens, 15 context tokens per window,
    // advancing by 11.
    assert!(ws.iter().all(|w| w.len() <= 20));
    assert_eq!(ws[0].sources.len(), 15);
    assert_eq!(ws.len(), 1 + (40usize - 15).div_ceil(11));
    for pair in ws.windows(2) {
        let (a, b) = (&pair[0].sources, &pair[1].sources);
        assert_eq!(a[a.len() - 4..], b[..4], "overlap of doc_stride tokens");
    }
    assert_eq!(
        ws.last().unwrap().sources.last().unwrap().end_char,
        ctx.chars().count()
    );
}

#[test]
fn answer_across_a_window_boundary_is_found_in_the_other_window() {
    let tok = tokenizer();
    let words: Vec<String> = (0..30)
        .map(|i| ["the", "king", "of", "paris"][i % 4].to_string())
        .collect();
    let ctx = words.join(" ");
    let p = WindowParams {
        max_seq_len: 20,
        doc_stride: 6,
    };
    let ws = make_windows(&tok, "who?", &[ctx.as_str()], " ", &p).unwrap();
    assert!(ws.len() >= 2);
    // The answer: context tokens 13..=16, which straddle the end of window 0 (tokens
    // 0..15) and lie whole in window 1 (tokens 9..24).
    let (first, last) = (13usize, 16usize);
    let mut start = Vec::new();
    let mut end = Vec::new();
    for (wi, w) in ws.iter().enumerate() {
        let offset = wi * (15 - 6); // context token index of the window's first context token
        let mut s = vec![0f32; w.len()];
        let mut e = vec![0f32; w.len()];
        for (i, _) in w.sources.iter().enumerate() {
            let tok_idx = offset + i;
            if tok_idx == first {
                s[w.context_start + i] = 8.0;
            }
            if tok_idx == last {
                e[w.context_start + i] = 8.0;
            }
            // A decoy end inside window 0 only, weaker.
            if tok_idx == 14 {
                e[w.context_start + i] = 1.0;
            }
        }
        start.push(s);
        end.push(e);
    }
    let d = decode(&ws, &start, &end, &DecodeParams::default()).unwrap();
    let best = d.answer().unwrap();
    assert_eq!(best.window, 1);
    assert_eq!(best.score, 16.0);
    let want: String = words[first..=last].join(" ");
    assert_eq!(char_slice(&ctx, best.start_char, best.end_char), want);
}

#[test]
fn no_answer_null_wins_with_the_threshold() {
    let tok = tokenizer();
    let ctx = "the oil crisis of 1973";
    let ws = make_windows(&tok, "what?", &[ctx], " ", &WindowParams::default()).unwrap();
    let n = ws[0].len();
    let mut s = vec![0f32; n];
    let mut e = vec![0f32; n];
    s[0] = 5.0;
    e[0] = 5.0; // null score 10
    s[ws[0].context_start + 1] = 3.0;
    e[ws[0].context_start + 2] = 3.0; // best span "oil crisis", 6
    let at = |t: Option<f32>| {
        decode(
            &ws,
            &[s.clone()],
            &[e.clone()],
            &DecodeParams {
                null_threshold: t,
                ..Default::default()
            },
        )
        .unwrap()
    };
    let never = at(None);
    assert_eq!(never.null_score, 10.0);
    let b = never.answer().unwrap();
    assert_eq!(char_slice(ctx, b.start_char, b.end_char), "oil crisis");
    assert!(at(Some(3.9)).is_null); // 10 − 6 = 4 > 3.9
    assert!(at(Some(0.0)).answer().is_none());
    assert!(!at(Some(4.1)).is_null);
}

#[test]
fn answers_longer_than_max_answer_len_are_excluded() {
    let tok = tokenizer();
    let ctx = "the oil crisis of 1973 was a war";
    let ws = make_windows(&tok, "what?", &[ctx], " ", &WindowParams::default()).unwrap();
    let n = ws[0].len();
    let c = ws[0].context_start;
    let mut s = vec![0f32; n];
    let mut e = vec![0f32; n];
    s[c] = 10.0; // "the"
    e[c + 7] = 10.0; // "war": an 8-token span scoring 20
    e[c + 2] = 4.0; // "crisis": a 3-token span scoring 14
    let p = |m| DecodeParams {
        max_answer_len: m,
        ..Default::default()
    };
    let d = decode(&ws, &[s.clone()], &[e.clone()], &p(8)).unwrap();
    let b = d.answer().unwrap();
    assert_eq!(char_slice(ctx, b.start_char, b.end_char), ctx);
    let d = decode(&ws, &[s], &[e], &p(7)).unwrap();
    assert!(d.nbest.iter().all(|x| x.tokens.1 - x.tokens.0 < 7));
    let b = d.answer().unwrap();
    assert_eq!(char_slice(ctx, b.start_char, b.end_char), "the oil crisis");
}

#[test]
fn offsets_map_to_the_exact_characters_of_non_ascii_passages() {
    let tok = tokenizer();
    let segs = ["Où est Zürich? — À côté.", "München, in Germany."];
    let ws = make_windows(&tok, "where?", &segs, "\n", &WindowParams::default()).unwrap();
    let w = &ws[0];
    // Every context token maps to characters of its own passage that normalise to it.
    for (i, src) in w.sources.iter().enumerate() {
        let piece = char_slice(segs[src.segment], src.start_char, src.end_char);
        assert!(!piece.is_empty(), "token {i}");
        let id = w.input_ids[w.context_start + i];
        let t = tok.id_to_token(id).unwrap();
        if t != "[UNK]" {
            let norm: String = piece
                .to_lowercase()
                .chars()
                .map(|c| match c {
                    'ü' => 'u',
                    'à' => 'a',
                    'ù' => 'u',
                    'ô' => 'o',
                    'é' => 'e',
                    x => x,
                })
                .collect();
            assert_eq!(norm, t.trim_start_matches("##"), "token {i}");
        }
    }
    // Pick "Zürich" (segment 0) and "München" would be [UNK]s; the span decodes to the
    // exact original characters.
    let z = w
        .sources
        .iter()
        .position(|s| char_slice(segs[s.segment], s.start_char, s.end_char) == "Zürich")
        .expect("a token for Zürich");
    let mut s = vec![0f32; w.len()];
    let mut e = vec![0f32; w.len()];
    s[w.context_start + z] = 9.0;
    e[w.context_start + z] = 9.0;
    let d = decode(&ws, &[s], &[e], &DecodeParams::default()).unwrap();
    let b = d.answer().unwrap();
    assert_eq!(b.segment, 0);
    assert_eq!((b.start_char, b.end_char), (7, 13));
    assert_eq!(char_slice(segs[0], b.start_char, b.end_char), "Zürich");
    // Segment 1's tokens have offsets inside segment 1 (starting at 0, not after segment 0).
    let first1 = w.sources.iter().find(|s| s.segment == 1).unwrap();
    assert_eq!(first1.start_char, 0);
}

// ------------------------------------------------------------ the Reader

fn passages() -> Vec<Context> {
    vec![
        Context::new("p-zh", "Zürich is a city; München is in Germany."),
        Context::new("p-hamlet", "Hamlet is a tragedy written by Shakespeare."),
        Context::new("p-oil", "The oil crisis of 1973 — not a war."),
    ]
}

#[test]
fn reader_evidence_is_exact_in_both_modes() {
    let ps = passages();
    for mode in [MultiPassage::Concatenate, MultiPassage::BestPerPassage] {
        let mut reader = tiny_reader("tiny_qa");
        let mut p = reader.params().clone();
        p.mode = mode;
        p.window.max_seq_len = 24; // several windows
        p.window.doc_stride = 8;
        reader.set_params(p).unwrap();
        for q in ["who wrote hamlet?", "where is zurich?", "what crisis?"] {
            let a = reader.read(q, &ps).unwrap();
            assert!(!a.abstained, "{mode:?} {q}");
            let ev = a.evidence.as_ref().unwrap();
            let passage = ps.iter().find(|p| p.id == ev.passage_id).unwrap();
            let got: String = passage
                .text
                .chars()
                .skip(ev.start_char)
                .take(ev.end_char - ev.start_char)
                .collect();
            assert_eq!(got, a.text, "{mode:?} {q}");
            assert!(!a.text.is_empty());
            assert_eq!(a.passage_ids.len(), 3);
            assert!(a.usage.prompt_tokens > 0);
        }
    }
}

#[test]
fn best_per_passage_scores_are_comparable_across_passages() {
    let ps = passages();
    let mut reader = tiny_reader("tiny_qa");
    let mut p = reader.params().clone();
    p.mode = MultiPassage::BestPerPassage;
    reader.set_params(p).unwrap();
    let q = "who wrote hamlet?";
    let all = reader.read(q, &ps).unwrap();
    // Each passage alone; the winner is the passage with the highest raw span score.
    let alone: Vec<_> = ps
        .iter()
        .map(|c| reader.read(q, std::slice::from_ref(c)).unwrap())
        .collect();
    let best = alone
        .iter()
        .max_by(|a, b| a.score.unwrap().total_cmp(&b.score.unwrap()))
        .unwrap();
    assert_eq!(all.score, best.score);
    assert_eq!(all.evidence, best.evidence);
}

#[test]
fn reader_contract_empty_question_and_empty_context() {
    let mut reader = tiny_reader("tiny_qa");
    let e = reader.read("  ", &passages()).unwrap_err().to_string();
    assert!(e.contains("question"), "{e}");
    let a = reader.read("who?", &[Context::new("p", "   ")]).unwrap();
    assert!(a.abstained);
    assert!(a.text.is_empty() && a.evidence.is_none());
    let a = reader.read("who?", &[]).unwrap();
    assert!(a.abstained);
}

// ------------------------------------------------------------ bad input

fn copy_tiny(to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for f in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::copy(data("tiny_qa").join(f), to.join(f)).unwrap();
    }
}

#[test]
fn missing_checkpoint_file_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    copy_tiny(d.path());
    std::fs::remove_file(d.path().join("model.safetensors")).unwrap();
    let e = ExtractiveReader::load_dir(d.path(), ReaderParams::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("model.safetensors") && e.contains("missing"),
        "{e}"
    );
}

#[test]
fn corrupt_safetensors_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    copy_tiny(d.path());
    let w = d.path().join("model.safetensors");
    let bytes = std::fs::read(&w).unwrap();
    std::fs::write(&w, &bytes[..bytes.len() / 2]).unwrap(); // truncated
    let e = QaModel::load(&QaFiles::in_dir(d.path()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("model.safetensors") && e.contains("safetensors file"),
        "{e}"
    );
    std::fs::write(&w, b"not safetensors at all").unwrap();
    let e = ExtractiveReader::load_dir(d.path(), ReaderParams::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("model.safetensors"), "{e}");
}

#[test]
fn unsupported_architectures_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    copy_tiny(d.path());
    let c = d.path().join("config.json");
    let text = std::fs::read_to_string(&c)
        .unwrap()
        .replace("BertForQuestionAnswering", "BertForMaskedLM");
    std::fs::write(&c, text).unwrap();
    let e = ExtractiveReader::load_dir(d.path(), ReaderParams::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("config.json") && e.contains("architectures") && e.contains("BertForMaskedLM"),
        "{e}"
    );
    // A QA checkpoint without the head tensors is refused too, naming the tensor.
    let files = QaFiles::in_dir(data("tiny_qa"));
    let base = QaConfig::from_base_file(&c).unwrap();
    assert_eq!(base.architecture.class_name(), "BertForQuestionAnswering");
    assert!(QaModel::load_with(&base, &files.weights).is_ok());
}

#[test]
fn question_longer_than_the_window_is_a_clear_error() {
    let mut reader = tiny_reader("tiny_qa");
    let q = "who wrote hamlet ".repeat(30);
    let e = reader.read(&q, &passages()).unwrap_err().to_string();
    assert!(e.contains("question") && e.contains("max_seq_len"), "{e}");
    // A window larger than the model's positions is refused at construction.
    let e = ExtractiveReader::load_dir(data("tiny_qa"), ReaderParams::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("max_seq_len") && e.contains("config.json"),
        "{e}"
    );
}

// ------------------------------------------------------------ all-MiniLM-L6-v2

#[test]
fn minilm_untrained_head_reads_end_to_end_and_is_seeded() {
    let assets = workbench::assets::Assets::load().expect("project manifest");
    let files = QaFiles::from_asset(&assets, "all-minilm-l6-v2").expect("all-minilm-l6-v2 asset");
    let config = QaConfig::from_base_file(&files.config).unwrap();
    let (_, m1) = QaModel::trainable(&config, &files.weights, 7).unwrap();
    let (_, m2) = QaModel::trainable(&config, &files.weights, 7).unwrap();
    let (_, m3) = QaModel::trainable(&config, &files.weights, 8).unwrap();
    let params = ReaderParams::default();
    let mk = |m| {
        ExtractiveReader::new(
            "minilm",
            m,
            config.clone(),
            &files.tokenizer,
            params.clone(),
        )
        .unwrap()
    };
    let (mut r1, r2, r3) = (mk(m1), mk(m2), mk(m3));
    let q = "In what year did the oil crisis begin?";
    let ctx = "The 1973 oil crisis began in October 1973 when the members of the \
               Organization of Arab Petroleum Exporting Countries proclaimed an oil embargo.";
    let w = r1.windows(q, &[ctx]).unwrap();
    let (a, _) = r1.logits(&w).unwrap();
    let (b, _) = r2.logits(&w).unwrap();
    let (c, _) = r3.logits(&w).unwrap();
    assert_eq!(a, b, "same seed, same head");
    assert_ne!(a, c, "another seed, another head");
    let ans = r1.read(q, &[Context::new("oil", ctx)]).unwrap();
    let ev = ans.evidence.unwrap();
    assert_eq!(ev.passage_id, "oil");
    assert_eq!(char_slice(ctx, ev.start_char, ev.end_char), ans.text);
}
