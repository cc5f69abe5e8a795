//! Chunker invariants: offsets slice back to the source, overlaps are exact,
//! filter bounds hold, bad parameters are rejected before any work.

use proptest::prelude::*;
use workbench::chunk::{paragraph_lengths, Chunker, ParagraphParams, SlidingWindowParams};
use workbench::text::{word_count, word_spans};
use workbench::{Document, Error};

fn text_strategy() -> impl Strategy<Value = String> {
    // Words (ASCII and non-ASCII) joined by spaces, tabs and newlines.
    let word = prop_oneof![
        "[a-z]{1,8}",
        "[A-Z][a-z]{0,6}",
        Just("café".to_string()),
        Just("naïve".to_string()),
        Just("東京".to_string()),
        "[0-9]{1,4}",
    ];
    let sep = prop_oneof![
        Just(" "),
        Just("  "),
        Just("\t"),
        Just("\n"),
        Just("\n\n"),
        Just(" \n ")
    ];
    prop::collection::vec((word, sep), 0..400).prop_map(|v| {
        v.into_iter()
            .map(|(w, s)| format!("{w}{s}"))
            .collect::<String>()
    })
}

proptest! {
    #[test]
    fn sliding_windows_slice_back_and_overlap_exactly(
        text in text_strategy(),
        window in 1usize..60,
        overlap_frac in 0.0f64..1.0,
    ) {
        let overlap = ((window as f64) * overlap_frac) as usize % window;
        let c = SlidingWindowParams::default().window(window).overlap(overlap).check().unwrap();
        let doc = Document::new("d", "T", text.clone());
        let ps = c.chunk(&doc).unwrap();
        let words = word_spans(&text);
        if words.is_empty() { prop_assert!(ps.is_empty()); }
        // Offsets slice back exactly, and every window starts/ends on a word boundary.
        let mut starts = Vec::new();
        for p in &ps {
            prop_assert_eq!(&text[p.start..p.end], p.text.as_str());
            let a = words.iter().position(|w| w.0 == p.start).expect("window starts on a word");
            let b = words.iter().position(|w| w.1 == p.end).expect("window ends on a word");
            prop_assert!(b + 1 - a <= window);
            prop_assert_eq!(p.doc_id.as_str(), "d");
            starts.push((a, b + 1));
        }
        // Consecutive windows share exactly `overlap` words; non-final windows are full.
        for pair in starts.windows(2) {
            let ((a0, b0), (a1, _)) = (pair[0], pair[1]);
            prop_assert_eq!(b0 - a0, window);
            prop_assert_eq!(b0 - a1, overlap);
        }
        // Coverage: first window starts at word 0, last ends at the last word.
        if let (Some(f), Some(l)) = (starts.first(), starts.last()) {
            prop_assert_eq!(f.0, 0);
            prop_assert_eq!(l.1, words.len());
        }
    }

    #[test]
    fn paragraph_filter_bounds_hold(text in text_strategy(), lo in 1usize..10, span in 0usize..20) {
        let hi = lo + span;
        let c = ParagraphParams::default().min_words(lo).max_words(hi).lowercase(false).check().unwrap();
        let doc = Document::new("d", "T", text.clone());
        let (ps, stats) = c.chunk_with_stats(std::slice::from_ref(&doc)).unwrap();
        prop_assert_eq!(stats.total, paragraph_lengths(std::slice::from_ref(&doc)).len());
        prop_assert_eq!(stats.kept + stats.too_short + stats.too_long, stats.total);
        prop_assert_eq!(ps.len(), stats.kept);
        prop_assert_eq!(c.chunk(&doc).unwrap(), ps.clone());
        for p in &ps {
            let n = word_count(&p.text);
            prop_assert!(n >= lo && n <= hi, "{} words outside [{}, {}]", n, lo, hi);
            prop_assert_eq!(&text[p.start..p.end], p.text.as_str());
            prop_assert!(!p.text.contains('\n'));
        }
    }
}

#[test]
fn lowercasing_keeps_offsets_into_the_original() {
    let doc = Document::new(
        "a",
        "A",
        "Short.\nThe Quick Brown Fox Jumps Over The Lazy Dog Again And Again\n",
    );
    let c = ParagraphParams::default()
        .min_words(3)
        .max_words(50)
        .check()
        .unwrap();
    let ps = c.chunk(&doc).unwrap();
    assert_eq!(ps.len(), 1);
    assert_eq!(
        ps[0].text,
        "the quick brown fox jumps over the lazy dog again and again"
    );
    assert_eq!(
        &doc.text[ps[0].start..ps[0].end],
        "The Quick Brown Fox Jumps Over The Lazy Dog Again And Again"
    );
    assert_eq!(ps[0].id, "a#1");
}

#[test]
fn report_000_defaults_drop_20_and_200_word_paragraphs() {
    let para = |n: usize| vec!["w"; n].join(" ");
    let text = [20, 21, 199, 200].map(para).join("\n");
    let (ps, stats) = ParagraphParams::default()
        .check()
        .unwrap()
        .chunk_with_stats(&[Document::new("x", "X", text)])
        .unwrap();
    assert_eq!(
        (stats.total, stats.kept, stats.too_short, stats.too_long),
        (4, 2, 1, 1)
    );
    assert_eq!(
        ps.iter().map(|p| word_count(&p.text)).collect::<Vec<_>>(),
        vec![21, 199]
    );
}

#[test]
fn report_001_window_300_overlap_100() {
    let text = (0..1000)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    let c = SlidingWindowParams::default().check().unwrap();
    let ps = c.chunk(&Document::new("p", "P", text)).unwrap();
    // starts at 0, 200, 400, 600 (ends at 900), 800 (ends at 1000)
    let firsts: Vec<&str> = ps
        .iter()
        .map(|p| p.text.split(' ').next().unwrap())
        .collect();
    assert_eq!(firsts, vec!["w0", "w200", "w400", "w600", "w800"]);
    assert!(ps.last().unwrap().text.ends_with("w999"));
}

#[test]
fn bad_parameters_are_rejected_before_work() {
    let e = SlidingWindowParams::default()
        .window(100)
        .overlap(100)
        .check()
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidParam {
                name: "overlap",
                ..
            }
        ),
        "{e}"
    );
    let e = SlidingWindowParams::default()
        .window(0)
        .overlap(0)
        .check()
        .unwrap_err();
    assert!(
        matches!(e, Error::InvalidParam { name: "window", .. }),
        "{e}"
    );
    let e = ParagraphParams::default()
        .min_words(50)
        .max_words(10)
        .check()
        .unwrap_err();
    assert!(e.to_string().contains("min_words"), "{e}");
    let e = ParagraphParams::default().min_words(0).check().unwrap_err();
    assert!(e.to_string().contains("min_words"), "{e}");
}

#[test]
fn empty_corpus_is_an_error() {
    let c = ParagraphParams::default().check().unwrap();
    assert!(matches!(c.chunk_all(&[]), Err(Error::Empty(_))));
    assert!(matches!(c.chunk_with_stats(&[]), Err(Error::Empty(_))));
}

#[test]
fn token_windows_with_a_wordpiece_tokenizer() {
    // A tiny WordPiece tokenizer.json written in the test: "playing" → "play", "##ing".
    let vocab: serde_json::Map<String, serde_json::Value> = [
        "[UNK]", "the", "cat", "play", "##ing", "dog", "##s", ".", "and",
    ]
    .iter()
    .enumerate()
    .map(|(i, t)| (t.to_string(), serde_json::json!(i)))
    .collect();
    let json = serde_json::json!({
        "version": "1.0", "truncation": {"direction": "Right", "max_length": 3, "strategy": "LongestFirst", "stride": 0},
        "padding": null, "added_tokens": [], "normalizer": null,
        "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab}
    });
    let tok = tokenizers::Tokenizer::from_bytes(serde_json::to_vec(&json).unwrap()).unwrap();
    let text = "the cat playing and the dogs playing.";
    // tokens: the cat play ##ing and the dog ##s play ##ing . → 11 (the tokenizer's own
    // truncation to 3 tokens is switched off for chunking)
    let c = SlidingWindowParams::default()
        .window(4)
        .overlap(1)
        .tokens(tok)
        .unwrap()
        .check()
        .unwrap();
    let spans = c.unit_spans(text).unwrap();
    assert_eq!(spans.len(), 11);
    let ps = c.chunk(&Document::new("t", "T", text)).unwrap();
    let got: Vec<&str> = ps.iter().map(|p| &text[p.start..p.end]).collect();
    // windows over tokens [0,4) [3,7) [6,10) [9,11); a token window may start inside a word ("##ing")
    assert_eq!(
        got,
        vec!["the cat playing", "ing and the dog", "dogs playing", "ing."]
    );
}
