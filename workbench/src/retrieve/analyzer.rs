//! Text analysis for the lexical retrievers: split into tokens, lowercase, drop
//! stopwords, stem.
//!
//! The chain mirrors Lucene's `EnglishAnalyzer` (tokenizer → `LowerCaseFilter` →
//! `StopFilter` → stemmer), which is also what Anserini/Pyserini and `bm25s`
//! (`stopwords="en"`, `stemmer=Stemmer("english")`) use by default:
//!
//! 1. **tokenise**: a token is a maximal run of characters for which
//!    [`char::is_alphanumeric`] holds (Unicode `Alphabetic` or `Numeric`), so every
//!    other character (space, punctuation, symbols, combining marks) separates tokens:
//!    `"Dogs. Dogs-obey"` → `Dogs`, `Dogs`, `obey`; `"don't"` → `don`, `t`;
//!    `"naïve Straße 42"` → `naïve`, `Straße`, `42`;
//! 2. **lowercase** ([`str::to_lowercase`], Unicode-aware) when
//!    [`AnalyzerParams::lowercase`] is set;
//! 3. **length filter**: drop tokens shorter than [`AnalyzerParams::min_token_len`]
//!    characters (Unicode scalar values, counted before stemming);
//! 4. **stopwords**: drop tokens found in the stopword set; the lookup ignores case,
//!    so it works with `lowercase = false` too;
//! 5. **stem** with the Snowball English stemmer (Porter2, via `rust-stemmers`; the
//!    same algorithm as PyStemmer's `"english"` used by `bm25s`; Lucene's
//!    `PorterStemFilter` implements the original 1980 Porter algorithm, which differs
//!    on a few suffixes).
//!
//! Parameters are a plain struct ([`AnalyzerParams`]) that is validated once by
//! [`AnalyzerParams::build`] / [`Analyzer::new`] (linfa style), so an [`Analyzer`]
//! always holds checked settings. The parameters are stored with every saved index
//! (see [`crate::retrieve::index`]) so that an index is never queried with a
//! different analysis than the one it was built with.

use crate::{Error, Result};
use rust_stemmers::{Algorithm, Stemmer};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fmt;

/// Lucene's default English stopword set, `EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`
/// (33 words; `org.apache.lucene.analysis.en.EnglishAnalyzer`, Lucene 9). It is also
/// Anserini's default, Elasticsearch's `_english_` list and `bm25s`'s `STOPWORDS_EN`
/// (`bm25s/stopwords.py`).
pub const LUCENE_ENGLISH_STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// Which stopwords to drop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stopwords {
    /// [`LUCENE_ENGLISH_STOPWORDS`] (Lucene / Anserini / `bm25s` English default).
    English,
    /// A custom list. Entries are matched case-insensitively against whole tokens, so
    /// each entry must itself be a single token (alphanumeric characters only).
    Custom(Vec<String>),
}

/// Analyzer settings, validated by [`AnalyzerParams::build`].
///
/// Defaults ([`AnalyzerParams::default`]) follow Anserini's English analyzer in lowercasing,
/// Lucene English stopwords and tokens of any length; the stemmer is Snowball English
/// (Porter2), where Anserini uses the original Porter.
///
/// ```
/// use workbench::retrieve::analyzer::{AnalyzerParams, Stopwords};
/// let analyzer = AnalyzerParams::default().stem(false).min_token_len(2).build().unwrap();
/// assert_eq!(analyzer.analyze("The Dogs ran; a cat sat."), ["dogs", "ran", "cat", "sat"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnalyzerParams {
    /// Lowercase every token (Unicode-aware). Default `true`.
    pub lowercase: bool,
    /// Stopwords to drop; `None` keeps every token. Default `Some(Stopwords::English)`.
    pub stopwords: Option<Stopwords>,
    /// Stem with the Snowball English (Porter2) stemmer. Default `true`.
    pub stem: bool,
    /// Minimum token length in characters, checked before stemming; must be ≥ 1.
    /// Default `1` (keep every token).
    pub min_token_len: usize,
}

impl Default for AnalyzerParams {
    fn default() -> Self {
        AnalyzerParams {
            lowercase: true,
            stopwords: Some(Stopwords::English),
            stem: true,
            min_token_len: 1,
        }
    }
}

impl AnalyzerParams {
    /// The defaults: lowercase, Lucene English stopwords, Snowball English stemming,
    /// `min_token_len = 1` (same as [`AnalyzerParams::default`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Lowercase only: no stopwords, no stemming, `min_token_len = 1`. Every word
    /// counts towards the document length, which is the convention of report 002's
    /// worked TF-IDF example (d1 = "cats and dogs are pets." has 5 words).
    pub fn plain() -> Self {
        AnalyzerParams {
            lowercase: true,
            stopwords: None,
            stem: false,
            min_token_len: 1,
        }
    }

    /// Set lowercasing. Default `true`.
    pub fn lowercase(mut self, lowercase: bool) -> Self {
        self.lowercase = lowercase;
        self
    }

    /// Set the stopword list (`None` keeps every token). Default
    /// `Some(Stopwords::English)` ([`LUCENE_ENGLISH_STOPWORDS`]).
    pub fn stopwords(mut self, stopwords: Option<Stopwords>) -> Self {
        self.stopwords = stopwords;
        self
    }

    /// Set Snowball English stemming. Default `true`.
    pub fn stem(mut self, stem: bool) -> Self {
        self.stem = stem;
        self
    }

    /// Set the minimum token length in characters (≥ 1). Default `1`.
    pub fn min_token_len(mut self, min_token_len: usize) -> Self {
        self.min_token_len = min_token_len;
        self
    }

    /// Check the settings without building anything.
    ///
    /// Errors: `min_token_len == 0` (tokens are never empty, so 0 is almost certainly
    /// a mistake for 1), or a custom stopword that is empty or contains a character
    /// the tokenizer splits on (it could never match a token).
    pub fn validate(&self) -> Result<()> {
        if self.min_token_len == 0 {
            return Err(Error::param(
                "min_token_len",
                "must be at least 1 (tokens are never empty)",
            ));
        }
        if let Some(Stopwords::Custom(words)) = &self.stopwords {
            for w in words {
                if w.is_empty() || !w.chars().all(char::is_alphanumeric) {
                    return Err(Error::param(
                        "stopwords",
                        format!(
                            "custom stopword {w:?} is not a single token (alphanumeric characters only), so it could never match"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Validate and build the [`Analyzer`].
    pub fn build(self) -> Result<Analyzer> {
        Analyzer::new(self)
    }
}

/// A validated text analyzer (see the [module docs](self) for the exact chain).
pub struct Analyzer {
    params: AnalyzerParams,
    stopwords: HashSet<String>,
    stemmer: Option<Stemmer>,
}

impl Analyzer {
    /// Validate `params` and build the analyzer.
    pub fn new(params: AnalyzerParams) -> Result<Self> {
        params.validate()?;
        let stopwords = match &params.stopwords {
            None => HashSet::new(),
            Some(Stopwords::English) => LUCENE_ENGLISH_STOPWORDS
                .iter()
                .map(|w| (*w).to_owned())
                .collect(),
            Some(Stopwords::Custom(words)) => words.iter().map(|w| w.to_lowercase()).collect(),
        };
        let stemmer = params.stem.then(|| Stemmer::create(Algorithm::English));
        Ok(Analyzer {
            params,
            stopwords,
            stemmer,
        })
    }

    /// Lowercase-only analyzer ([`AnalyzerParams::plain`]).
    pub fn plain() -> Self {
        Analyzer::new(AnalyzerParams::plain()).expect("plain analyzer parameters are valid")
    }

    /// The (validated) settings.
    pub fn params(&self) -> &AnalyzerParams {
        &self.params
    }

    /// The tokens of `text`, in order, duplicates kept.
    pub fn analyze(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.for_each_token(text, |t| out.push(t.to_owned()));
        out
    }

    /// Call `f` on every token of `text`, in order, without collecting them. Tokens
    /// that need no lowercasing or stemming are passed as slices of `text`; ASCII
    /// tokens are lowercased in a buffer reused for the whole text, so ASCII text
    /// costs at most one allocation.
    pub fn for_each_token(&self, text: &str, mut f: impl FnMut(&str)) {
        let mut buf = String::new();
        if text.is_ascii() {
            // Same tokens as the general loop below: for ASCII characters
            // `char::is_alphanumeric` is `u8::is_ascii_alphanumeric`.
            let bytes = text.as_bytes();
            let mut i = 0;
            while i < bytes.len() {
                while i < bytes.len() && !bytes[i].is_ascii_alphanumeric() {
                    i += 1;
                }
                let start = i;
                while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
                    i += 1;
                }
                if i > start {
                    self.emit(&text[start..i], &mut buf, &mut f);
                }
            }
            return;
        }
        let mut start: Option<usize> = None;
        for (i, c) in text.char_indices() {
            if c.is_alphanumeric() {
                if start.is_none() {
                    start = Some(i);
                }
            } else if let Some(s) = start.take() {
                self.emit(&text[s..i], &mut buf, &mut f);
            }
        }
        if let Some(s) = start {
            self.emit(&text[s..], &mut buf, &mut f);
        }
    }

    /// Lowercase / filter / stem one raw token and pass it on (`buf`: scratch space
    /// for the lowercased token).
    fn emit(&self, raw: &str, buf: &mut String, f: &mut impl FnMut(&str)) {
        let ascii = raw.is_ascii();
        if self.params.min_token_len > 1 {
            let len = if ascii {
                raw.len()
            } else {
                raw.chars().count()
            };
            if len < self.params.min_token_len {
                return;
            }
        }
        let has_upper = if ascii {
            raw.bytes().any(|b| b.is_ascii_uppercase())
        } else {
            raw.chars().any(char::is_uppercase)
        };
        let token: &str = if self.params.lowercase && has_upper {
            buf.clear();
            if ascii {
                buf.push_str(raw);
                buf.make_ascii_lowercase();
            } else {
                // `str::to_lowercase`, not per-char mapping: it knows final sigma.
                buf.push_str(&raw.to_lowercase());
            }
            buf
        } else {
            raw
        };
        if !self.stopwords.is_empty() {
            let is_stop = if has_upper && !self.params.lowercase {
                self.stopwords.contains(&raw.to_lowercase())
            } else {
                self.stopwords.contains(token)
            };
            if is_stop {
                return;
            }
        }
        match &self.stemmer {
            Some(stemmer) => f(stemmer.stem(token).as_ref()),
            None => f(token),
        }
    }
}

impl Default for Analyzer {
    /// [`AnalyzerParams::default`]: lowercase, Lucene English stopwords, stemming.
    fn default() -> Self {
        Analyzer::new(AnalyzerParams::default()).expect("default analyzer parameters are valid")
    }
}

impl Clone for Analyzer {
    fn clone(&self) -> Self {
        Analyzer::new(self.params.clone()).expect("parameters were validated on construction")
    }
}

impl fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Analyzer")
            .field("params", &self.params)
            .finish()
    }
}

impl PartialEq for Analyzer {
    fn eq(&self, other: &Self) -> bool {
        self.params == other.params
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_splits_on_non_alphanumerics_and_lowercases() {
        let a = Analyzer::plain();
        assert_eq!(
            a.analyze("Cats and dogs are pets. Dogs-obey! don't"),
            ["cats", "and", "dogs", "are", "pets", "dogs", "obey", "don", "t"]
        );
        assert!(a.analyze("").is_empty());
        assert!(a.analyze("  ... --- !!").is_empty());
    }

    /// The ASCII fast path gives the tokens of the general (char-by-char) path: the
    /// same text with one non-ASCII character appended takes the general path.
    #[test]
    fn ascii_fast_path_matches_the_general_path() {
        let text = "The CAT's 3 dogs, e.g. X-ray_Tube42 and   don't STOP-words! A1b2";
        for a in [
            Analyzer::plain(),
            Analyzer::default(),
            AnalyzerParams::plain().lowercase(false).build().unwrap(),
            AnalyzerParams::plain()
                .lowercase(false)
                .stopwords(Some(Stopwords::English))
                .build()
                .unwrap(),
            AnalyzerParams::default().min_token_len(3).build().unwrap(),
        ] {
            let fast = a.analyze(text);
            let mut general = a.analyze(&format!("{text} Üüüü"));
            let tail = a.analyze("Üüüü");
            assert_eq!(tail.len(), 1);
            assert_eq!(general.pop(), tail.into_iter().next());
            assert_eq!(fast, general, "{:?}", a.params());
            assert!(!fast.is_empty());
        }
        assert_eq!(
            Analyzer::plain().analyze("ΣΊΣΥΦΟΣ Όλα"),
            ["σίσυφος", "όλα"],
            "final sigma, as str::to_lowercase"
        );
    }

    #[test]
    fn unicode_letters_and_digits_are_token_characters() {
        let a = Analyzer::plain();
        assert_eq!(
            a.analyze("Naïve STRASSE Straße, 42km; Ωmega—東京"),
            ["naïve", "strasse", "straße", "42km", "ωmega", "東京"]
        );
    }

    #[test]
    fn defaults_drop_lucene_stopwords_and_stem() {
        let a = Analyzer::default();
        assert_eq!(
            a.analyze("The dogs are running into the gardens"),
            ["dog", "run", "garden"]
        );
        assert_eq!(LUCENE_ENGLISH_STOPWORDS.len(), 33);
    }

    #[test]
    fn stopword_lookup_ignores_case_even_without_lowercasing() {
        let a = AnalyzerParams::plain()
            .lowercase(false)
            .stopwords(Some(Stopwords::English))
            .build()
            .unwrap();
        assert_eq!(a.analyze("The Dogs AND cats"), ["Dogs", "cats"]);
        let c = AnalyzerParams::plain()
            .stopwords(Some(Stopwords::Custom(vec!["Dogs".into()])))
            .build()
            .unwrap();
        assert_eq!(c.analyze("dogs and DOGS and cats"), ["and", "and", "cats"]);
    }

    #[test]
    fn min_token_len_counts_characters_before_stemming() {
        let a = AnalyzerParams::plain().min_token_len(3).build().unwrap();
        assert_eq!(a.analyze("I am an ox éé été cat"), ["été", "cat"]);
    }

    #[test]
    fn invalid_params_are_rejected_before_use() {
        let e = AnalyzerParams::default()
            .min_token_len(0)
            .build()
            .unwrap_err();
        assert!(matches!(
            e,
            Error::InvalidParam {
                name: "min_token_len",
                ..
            }
        ));
        let e = AnalyzerParams::default()
            .stopwords(Some(Stopwords::Custom(vec!["don't".into()])))
            .build()
            .unwrap_err();
        assert!(matches!(
            e,
            Error::InvalidParam {
                name: "stopwords",
                ..
            }
        ));
    }

    #[test]
    fn clone_and_params_round_trip() {
        let a = AnalyzerParams::new().stem(false).build().unwrap();
        let b = a.clone();
        assert_eq!(a, b);
        assert_eq!(b.params(), &AnalyzerParams::new().stem(false));
        assert_eq!(b.analyze("Running dogs"), ["running", "dogs"]);
    }
}
