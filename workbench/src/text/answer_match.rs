//! Does a passage (or a generated answer) contain a gold answer? One rule per
//! [`AnswerMatch`] variant:
//!
//! | rule | name | what matches | reference |
//! |---|---|---|---|
//! | [`AnswerMatch::Dpr`] | `dpr` | the answer's tokens, as a contiguous run of the text's tokens | DPR `has_answer(…, "string")` |
//! | [`AnswerMatch::DprRegex`] | `dpr-regex` | the answer is a regular expression found anywhere in the text | DPR `has_answer(…, "regex")` (CuratedTREC) |
//! | [`AnswerMatch::Squad`] | `squad` | SQuAD-normalised answer tokens as a contiguous run of the text's | [`qa::answer_in_text`](crate::evaluate::qa::answer_in_text) |
//!
//! **DPR's rules** are those of DPR's evaluation code (Karpukhin et al. 2020,
//! `dpr/data/qa_validation.py` `has_answer` and `dpr/utils/tokenizers.py`
//! `SimpleTokenizer`, inherited from DrQA), written here from their definition:
//!
//! - both sides are put in Unicode canonical decomposition (NFD), so `é` and
//!   `e` + U+0301 agree, while `e` and `é` do not (accents are kept);
//! - *string mode* tokenises with the regular expression
//!   `[\p{L}\p{N}\p{M}]+|[^\p{Z}\p{C}]` (a run of letters, digits and combining
//!   marks, or else any one character that is neither a separator nor a
//!   control/format character), lowercases every token, and reports a match when
//!   the answer's token sequence occurs contiguously in the text's. So
//!   punctuation is kept as one-character tokens: `Einstein's` is
//!   `einstein ' s` (contains `einstein`), `1914–1918` is `1914 – 1918`
//!   (contains `1914`), `Paris` does not match `Parisian`, and `the beatles`
//!   is not found in a text that only says `Beatles`;
//! - *regex mode* compiles the NFD-normalised answer with DPR's flags (ignore
//!   case, Unicode, multi-line) and searches the NFD-normalised text.
//!
//! Two deliberate departures, both loud rather than silent:
//!
//! - an answer with no token (string mode: empty, or only spaces and control
//!   characters) or an empty pattern (regex mode) is **unusable**: it never
//!   matches, and a question whose answers are all unusable is not scored
//!   ([`Golds::is_empty`]). DPR's loop compares the empty token list with an
//!   empty slice of every text and so counts every passage as a hit;
//! - DPR catches a pattern that does not compile and treats it as "no match". Here
//!   it is an error naming the pattern ([`AnswerMatch::golds`]), and so is a
//!   pattern that Rust's `regex` crate reads differently from Python's `regex`
//!   module (see [`compile_dpr_pattern`]). Rust's crate has no look-around, no
//!   backreferences, no atomic groups or possessive quantifiers: such patterns are
//!   reported, never approximated.
//!
//! Unicode tables: NFD comes from the `unicode-normalization` crate and the
//! character classes from the `regex` crate, so they follow those crates' Unicode
//! version rather than the Python build DPR ran on; the two can disagree only on
//! characters assigned in between.
//!
//! ```
//! use workbench::evaluate::answer_match::AnswerMatch;
//!
//! let text = "Einstein's theory (1914–1918) changed physics.";
//! assert!(AnswerMatch::Dpr.has_answer(text, &["einstein"]).unwrap());
//! assert!(AnswerMatch::Dpr.has_answer(text, &["1914"]).unwrap());
//! assert!(!AnswerMatch::Dpr.has_answer(text, &["Einste"]).unwrap());
//! assert!(AnswerMatch::DprRegex.has_answer(text, &[r"19\d\d"]).unwrap());
//! // Prepare the golds once and each passage once when scoring many pairs:
//! let golds = AnswerMatch::Dpr.golds(&["theory"]).unwrap();
//! let passage = AnswerMatch::Dpr.prepare(text);
//! assert!(golds.found_in(&passage).unwrap());
//! ```

use crate::{Error, Result};
use regex::{Regex, RegexBuilder};
use regex_syntax::ast::{self, Ast};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;
use unicode_normalization::UnicodeNormalization;

/// SQuAD answer normalisation, as the official `evaluate-v2.0.py` computes it in
/// Python: lowercase (`str.lower`), remove ASCII punctuation (`string.punctuation`),
/// replace the articles `a`, `an`, `the` by a space where they are whole words
/// (`re.sub(r'\b(a|an|the)\b', ' ', text)`), and join the whitespace-separated
/// tokens with single spaces (`' '.join(text.split())`).
///
/// The steps run in the script's order: `white_space_fix(remove_articles(remove_punc(lower(s))))`.
///
/// Word boundaries are Python's, not the `regex` crate's `\b`: Python's `re` counts a
/// character as a word character (`\w`, str patterns) when it is a letter or a number
/// (general categories L* and N*, so `²`, `½` and `ⅱ` are) or `_`. Combining marks
/// (`é` written as `e` + U+0301), joiners and connector punctuation other than `_` are
/// not, so `"the\u{301}"` loses its article here as in Python (Rust's `\w` would keep
/// it). Whitespace is what Python's `str.split()` splits on (see [`is_python_space`]).
/// `tests/data/squad_normalize.json`, written by real Python
/// (`scripts/python/squad_normalize_fixture.py`), holds the reference outputs the
/// tests compare against.
pub fn normalize_answer(s: &str) -> String {
    static WORDS: OnceLock<Regex> = OnceLock::new();
    // A maximal run of Python `\w` characters: an article matches `\b(a|an|the)\b`
    // exactly when it is a whole run.
    let words = WORDS.get_or_init(|| Regex::new(r"[\p{L}\p{N}_]+").expect("valid regex"));
    let lower = s.to_lowercase();
    let no_punc: String = lower
        .chars()
        .filter(|c| !c.is_ascii_punctuation())
        .collect();
    let no_articles = words.replace_all(&no_punc, |m: &regex::Captures| match &m[0] {
        "a" | "an" | "the" => " ".to_string(),
        w => w.to_string(),
    });
    tokens_of_normalized(&no_articles).join(" ")
}

/// Whether Python's `str.split()` (and `str.isspace()`) treats `c` as whitespace: the
/// Unicode White_Space characters plus the ASCII separators U+001C..U+001F (Python's
/// bidirectional classes B and S). U+200B (zero width space) and U+180E are not.
pub fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Split on whitespace as Python's `str.split()` does ([`is_python_space`]).
fn tokens_of_normalized(s: &str) -> Vec<&str> {
    s.split(is_python_space).filter(|t| !t.is_empty()).collect()
}

/// The tokens of a normalised answer (the script's `get_tokens`).
pub fn answer_tokens(s: &str) -> Vec<String> {
    normalize_answer(s)
        .split(' ')
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// How a gold answer is looked for in a text: see the [module docs](self).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnswerMatch {
    /// DPR's string match: NFD, DPR's regex tokenizer, uncased, the answer's
    /// tokens as a contiguous run of the text's tokens.
    #[default]
    Dpr,
    /// DPR's regex match: every answer is a regular expression, searched in the
    /// NFD-normalised text ignoring case (as in DPR's CuratedTREC files).
    DprRegex,
    /// SQuAD normalisation (lowercase, no ASCII punctuation, no articles) on
    /// both sides, the answer's tokens as a contiguous run of the text's
    /// ([`qa::answer_in_text`](crate::evaluate::qa::answer_in_text)).
    Squad,
}

impl AnswerMatch {
    /// Every rule, in the order of the command-line choices.
    pub const ALL: [AnswerMatch; 3] = [AnswerMatch::Dpr, AnswerMatch::DprRegex, AnswerMatch::Squad];

    /// The rule's name as written in configs and on the command line:
    /// `dpr`, `dpr-regex` or `squad`.
    pub fn name(self) -> &'static str {
        match self {
            AnswerMatch::Dpr => "dpr",
            AnswerMatch::DprRegex => "dpr-regex",
            AnswerMatch::Squad => "squad",
        }
    }

    /// One phrase saying what the rule does, for captions and table notes.
    pub fn description(self) -> &'static str {
        match self {
            AnswerMatch::Dpr => {
                "DPR's has_answer string match (NFD, DPR's regex tokenizer, uncased, \
                 the answer's tokens as a contiguous run of the passage's)"
            }
            AnswerMatch::DprRegex => {
                "DPR's has_answer regex match (each answer a regular expression, \
                 searched case-insensitively in the NFD-normalised passage)"
            }
            AnswerMatch::Squad => {
                "SQuAD-normalised match (lowercase, ASCII punctuation and articles removed, \
                 the answer's tokens as a contiguous run of the passage's)"
            }
        }
    }

    /// Prepare a question's gold answers for this rule: tokenise them (string
    /// rules) or compile them (regex rule). Unusable answers (see the
    /// [module docs](self)) are dropped; [`Golds::is_empty`] tells whether any is
    /// left.
    ///
    /// Errors ([`Error::InvalidParam`] `answer`), regex rule only: a pattern that
    /// does not compile or that Rust's `regex` crate would read differently from
    /// Python's `regex` module; the message quotes the pattern.
    pub fn golds<S: AsRef<str>>(self, answers: &[S]) -> Result<Golds> {
        let repr = match self {
            AnswerMatch::Dpr => GoldRepr::Tokens(
                answers
                    .iter()
                    .map(|a| dpr_tokens(a.as_ref()))
                    .filter(|t| !t.is_empty())
                    .collect(),
            ),
            AnswerMatch::Squad => GoldRepr::Tokens(
                answers
                    .iter()
                    .map(|a| answer_tokens(a.as_ref()))
                    .filter(|t| !t.is_empty())
                    .collect(),
            ),
            AnswerMatch::DprRegex => GoldRepr::Patterns(
                answers
                    .iter()
                    .map(|a| a.as_ref())
                    .filter(|a| !a.is_empty())
                    .map(compile_dpr_pattern)
                    .collect::<Result<_>>()?,
            ),
        };
        Ok(Golds { rule: self, repr })
    }

    /// Prepare a text (a passage, a generated answer) for this rule: its tokens
    /// (string rules) or its NFD form (regex rule). Prepare each passage once
    /// when it is checked against many questions.
    pub fn prepare(self, text: &str) -> MatchText {
        let repr = match self {
            AnswerMatch::Dpr => TextRepr::Tokens(dpr_tokens(text)),
            AnswerMatch::Squad => TextRepr::Tokens(
                normalize_answer(text)
                    .split(' ')
                    .filter(|t| !t.is_empty())
                    .map(str::to_string)
                    .collect(),
            ),
            AnswerMatch::DprRegex => TextRepr::Nfd(nfd(text).into_owned()),
        };
        MatchText { rule: self, repr }
    }

    /// Does `text` contain one of `answers` under this rule? A convenience for one
    /// pair; use [`golds`](Self::golds) and [`prepare`](Self::prepare) for many.
    ///
    /// Errors: as [`golds`](Self::golds).
    pub fn has_answer<S: AsRef<str>>(self, text: &str, answers: &[S]) -> Result<bool> {
        self.golds(answers)?.found_in(&self.prepare(text))
    }
}

impl fmt::Display for AnswerMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AnswerMatch {
    type Err = Error;

    /// Parse `dpr`, `dpr-regex` or `squad` (the [`name`](AnswerMatch::name)s).
    fn from_str(s: &str) -> Result<Self> {
        AnswerMatch::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                Error::param(
                    "answer_match",
                    format!("unknown answer-matching rule `{s}`; expected dpr, dpr-regex or squad"),
                )
            })
    }
}

/// A question's gold answers prepared for one [`AnswerMatch`] rule.
#[derive(Clone, Debug)]
pub struct Golds {
    rule: AnswerMatch,
    repr: GoldRepr,
}

#[derive(Clone, Debug)]
enum GoldRepr {
    Tokens(Vec<Vec<String>>),
    Patterns(Vec<Regex>),
}

impl Golds {
    /// The rule these answers were prepared for.
    pub fn rule(&self) -> AnswerMatch {
        self.rule
    }

    /// How many usable answers there are.
    pub fn len(&self) -> usize {
        match &self.repr {
            GoldRepr::Tokens(t) => t.len(),
            GoldRepr::Patterns(p) => p.len(),
        }
    }

    /// No usable answer: the question cannot be scored under this rule.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Does the prepared `text` contain one of the answers?
    ///
    /// Errors: `text` was prepared for another rule ([`Error::InvalidParam`]).
    pub fn found_in(&self, text: &MatchText) -> Result<bool> {
        if text.rule != self.rule {
            return Err(Error::param(
                "text",
                format!(
                    "text prepared for the `{}` rule, answers for `{}`",
                    text.rule, self.rule
                ),
            ));
        }
        Ok(match (&self.repr, &text.repr) {
            (GoldRepr::Tokens(answers), TextRepr::Tokens(toks)) => {
                answers.iter().any(|a| contains_run(toks, a))
            }
            (GoldRepr::Patterns(patterns), TextRepr::Nfd(s)) => {
                patterns.iter().any(|p| p.is_match(s))
            }
            // Same rule, so the representations always pair up as above.
            _ => false,
        })
    }
}

/// A text prepared for one [`AnswerMatch`] rule ([`AnswerMatch::prepare`]).
#[derive(Clone, Debug)]
pub struct MatchText {
    rule: AnswerMatch,
    repr: TextRepr,
}

#[derive(Clone, Debug)]
enum TextRepr {
    Tokens(Vec<String>),
    Nfd(String),
}

impl MatchText {
    /// The rule this text was prepared for.
    pub fn rule(&self) -> AnswerMatch {
        self.rule
    }

    /// The text's tokens (string rules), `None` under the regex rule.
    pub fn tokens(&self) -> Option<&[String]> {
        match &self.repr {
            TextRepr::Tokens(t) => Some(t),
            TextRepr::Nfd(_) => None,
        }
    }
}

/// `needle` occurs as a contiguous run of `hay`; an empty needle never does.
fn contains_run(hay: &[String], needle: &[String]) -> bool {
    !needle.is_empty()
        && needle.len() <= hay.len()
        && hay.windows(needle.len()).any(|w| w == needle)
}

/// Canonical decomposition (NFD), borrowing when the text is ASCII (already NFD).
fn nfd(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(text.nfd().collect())
    }
}

/// DPR's `SimpleTokenizer` expression, with the flags DPR compiles it with
/// (ignore case, Unicode, multi-line; only the first can change a character
/// class, and it is kept so the classes close under case folding as in Python).
fn dpr_tokenizer() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        RegexBuilder::new(r"[\p{L}\p{N}\p{M}]+|[^\p{Z}\p{C}]")
            .case_insensitive(true)
            .multi_line(true)
            .build()
            .expect("DPR's tokenizer expression is a valid Rust regex")
    })
}

/// The tokens DPR's string match compares: the NFD form of `text`, split by
/// DPR's `SimpleTokenizer` (runs of letters, digits and combining marks, or one
/// character that is neither a separator nor a control/format character), each
/// lowercased (Unicode full lowercase mapping, as Python's `str.lower`).
///
/// ```
/// use workbench::evaluate::answer_match::dpr_tokens;
/// assert_eq!(dpr_tokens("Einstein's 1914–1918!"), ["einstein", "'", "s", "1914", "–", "1918", "!"]);
/// ```
pub fn dpr_tokens(text: &str) -> Vec<String> {
    let text = nfd(text);
    dpr_tokenizer()
        .find_iter(&text)
        .map(|m| m.as_str().to_lowercase())
        .collect()
}

/// Compile one regex answer the way DPR's regex mode does: the NFD-normalised
/// pattern, ignore case, Unicode, multi-line (`^`/`$` at line breaks).
///
/// DPR compiles with Python's `regex` module; Rust's `regex` crate shares most of
/// its syntax. Errors ([`Error::InvalidParam`] `answer`, quoting the pattern):
///
/// - the pattern does not compile in Rust (a syntax error, or a feature the crate
///   lacks: look-around `(?=…)`/`(?<=…)`, backreferences `\1`, atomic groups,
///   possessive quantifiers, `\Z`, `{,n}`, a `{` that is not a repetition, …);
/// - the pattern compiles in Rust but Python reads it differently: `\<`, `\>` and
///   `\b{…}` (Rust: word-boundary assertions; Python: literal characters or an
///   error), a `[` or `&&`/`--`/`~~` inside a character class (Rust: a nested
///   class or a set operation; Python's default syntax: literal characters), the
///   `x` flag (Rust also ignores spaces inside classes, Python does not), a
///   quantifier right after a quantifier such as `a*+` (Rust: a repetition of a
///   repetition; Python: possessive), the `U` and `R` flags and `\x{…}` escapes
///   (errors in Python).
pub fn compile_dpr_pattern(pattern: &str) -> Result<Regex> {
    let norm = nfd(pattern);
    let fail = |why: String| {
        Error::param(
            "answer",
            format!("regex answer `{pattern}` cannot be matched as DPR matches it: {why}"),
        )
    };
    let parsed = ast::parse::Parser::new()
        .parse(&norm)
        .map_err(|e| fail(format!("Rust's regex crate rejects it: {e}")))?;
    if let Some(why) = python_differences(&parsed, &norm) {
        return Err(fail(why));
    }
    RegexBuilder::new(&norm)
        .case_insensitive(true)
        .unicode(true)
        .multi_line(true)
        .build()
        .map_err(|e| fail(format!("Rust's regex crate rejects it: {e}")))
}

/// The first construct of `ast` (parsed from `pattern`) that Rust's `regex` crate
/// accepts but Python's `regex` module (DPR's) reads differently or rejects,
/// described.
fn python_differences(ast: &Ast, pattern: &str) -> Option<String> {
    struct Finder<'a> {
        pattern: &'a str,
    }

    impl ast::Visitor for Finder<'_> {
        type Output = ();
        type Err = String;

        fn finish(self) -> std::result::Result<(), String> {
            Ok(())
        }

        fn visit_pre(&mut self, ast: &Ast) -> std::result::Result<(), String> {
            use ast::AssertionKind as K;
            match ast {
                Ast::Assertion(a)
                    if matches!(
                        a.kind,
                        K::WordBoundaryStart
                            | K::WordBoundaryEnd
                            | K::WordBoundaryStartAngle
                            | K::WordBoundaryEndAngle
                            | K::WordBoundaryStartHalf
                            | K::WordBoundaryEndHalf
                    ) =>
                {
                    let src = self
                        .pattern
                        .get(a.span.start.offset..a.span.end.offset)
                        .unwrap_or("?");
                    Err(format!(
                        "Rust reads `{src}` as a word-boundary assertion, Python's regex module \
                         as literal characters or an error"
                    ))
                }
                Ast::Literal(l) if l.kind == ast::LiteralKind::HexBrace(ast::HexLiteralKind::X) => {
                    Err("Python's regex module rejects the `\\x{…}` escape".to_string())
                }
                Ast::Repetition(r) if matches!(*r.ast, Ast::Repetition(_)) => {
                    let src = self
                        .pattern
                        .get(r.span.start.offset..r.span.end.offset)
                        .unwrap_or("?");
                    Err(format!(
                        "Rust reads `{src}` as a repetition of a repetition, Python's regex module \
                         as a possessive quantifier or an error"
                    ))
                }
                Ast::Flags(f) => check_flags(&f.flags),
                Ast::Group(g) => match &g.kind {
                    ast::GroupKind::NonCapturing(flags) => check_flags(flags),
                    _ => Ok(()),
                },
                _ => Ok(()),
            }
        }

        fn visit_class_set_item_pre(
            &mut self,
            item: &ast::ClassSetItem,
        ) -> std::result::Result<(), String> {
            match item {
                ast::ClassSetItem::Bracketed(_) => Err(
                    "Rust reads a `[` inside a character class as a nested class, \
                     Python's regex module (default syntax) as a literal `[`"
                        .to_string(),
                ),
                _ => Ok(()),
            }
        }

        fn visit_class_set_binary_op_pre(
            &mut self,
            _op: &ast::ClassSetBinaryOp,
        ) -> std::result::Result<(), String> {
            Err(
                "Rust reads `&&`, `--` or `~~` inside a character class as a set operation, \
                 Python's regex module (default syntax) as literal characters"
                    .to_string(),
            )
        }
    }

    fn check_flags(flags: &ast::Flags) -> std::result::Result<(), String> {
        for item in &flags.items {
            let why = match item.kind {
                ast::FlagsItemKind::Flag(ast::Flag::IgnoreWhitespace) => {
                    "the `x` flag: Rust also ignores spaces inside character classes, Python does not"
                }
                ast::FlagsItemKind::Flag(ast::Flag::SwapGreed) => {
                    "the `U` flag: Python's regex module rejects it"
                }
                ast::FlagsItemKind::Flag(ast::Flag::CRLF) => {
                    "the `R` flag: Python's regex module rejects it"
                }
                _ => continue,
            };
            return Err(why.to_string());
        }
        Ok(())
    }

    ast::visit(ast, Finder { pattern }).err()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dpr(text: &str, answers: &[&str]) -> bool {
        AnswerMatch::Dpr.has_answer(text, answers).unwrap()
    }

    fn squad(text: &str, answers: &[&str]) -> bool {
        AnswerMatch::Squad.has_answer(text, answers).unwrap()
    }

    fn re(text: &str, patterns: &[&str]) -> bool {
        AnswerMatch::DprRegex.has_answer(text, patterns).unwrap()
    }

    #[test]
    fn tokenizer_by_hand() {
        // Letters/digits/marks runs; any other non-space, non-control character alone.
        assert_eq!(
            dpr_tokens("Einstein's theory."),
            ["einstein", "'", "s", "theory", "."]
        );
        assert_eq!(dpr_tokens("well-known"), ["well", "-", "known"]);
        assert_eq!(dpr_tokens("1914–1918"), ["1914", "–", "1918"]);
        assert_eq!(
            dpr_tokens("“Hey” ‘you’"),
            ["“", "hey", "”", "‘", "you", "’"]
        );
        // `$` and `,` are single tokens; `3.5` is three tokens.
        assert_eq!(
            dpr_tokens("$1,000 3.5"),
            ["$", "1", ",", "000", "3", ".", "5"]
        );
        // Tabs, newlines (Cc), no-break space (Zs), soft hyphen and zero-width
        // space (Cf) are dropped, and split runs.
        assert_eq!(
            dpr_tokens("a\tb\nc\u{a0}d\u{ad}e\u{200b}f"),
            ["a", "b", "c", "d", "e", "f"]
        );
        // NFD: é becomes e + U+0301, a combining mark that stays in the run.
        assert_eq!(dpr_tokens("Pelé"), ["pele\u{301}"]);
        assert_eq!(dpr_tokens("Pele\u{301}"), ["pele\u{301}"]);
        // Underscore is punctuation (Pc), not a word character here.
        assert_eq!(dpr_tokens("a_b"), ["a", "_", "b"]);
        // Lowercasing is Python's full mapping: İ → i + U+0307.
        assert_eq!(dpr_tokens("İ"), ["i\u{307}"]);
        assert!(dpr_tokens(" \t\n").is_empty());
        assert!(dpr_tokens("").is_empty());
    }

    #[test]
    fn possessives_hyphens_dashes_quotes() {
        // Possessive: "einstein ' s" holds "einstein".
        assert!(dpr("Einstein's theory of relativity", &["Einstein"]));
        // ... and an answer with the possessive needs the same three tokens.
        assert!(dpr("Einstein's theory", &["Einstein's"]));
        assert!(!dpr("Einstein theory", &["Einstein's"]));
        // SQuAD drops the apostrophe: "einsteins" ≠ "einstein".
        assert!(!squad("Einstein's theory of relativity", &["Einstein"]));
        // Curly apostrophe: also a separate token under DPR; SQuAD keeps it
        // (not ASCII punctuation), so "einstein’s" is one SQuAD token.
        assert!(dpr("Einstein’s theory", &["Einstein"]));
        assert!(!squad("Einstein’s theory", &["Einstein"]));
        // Hyphens split words under DPR; SQuAD glues them ("wellknown").
        assert!(dpr("a well-known fact", &["known"]));
        assert!(dpr("a well-known fact", &["well-known"]));
        assert!(!dpr("a well known fact", &["well-known"]));
        assert!(!squad("a well-known fact", &["known"]));
        assert!(squad("a well-known fact", &["well-known"]));
        // En dash in a year range.
        assert!(dpr("World War I (1914–1918)", &["1914"]));
        assert!(dpr("World War I (1914–1918)", &["1918"]));
        assert!(dpr("World War I (1914–1918)", &["1914–1918"]));
        assert!(!dpr("World War I (1914-1918)", &["1914–1918"])); // hyphen ≠ en dash
        assert!(!squad("World War I (1914–1918)", &["1914"])); // "1914–1918" one token
        assert!(squad("World War I (1914-1918)", &["19141918"])); // ASCII hyphen removed
                                                                  // Curly quotes are tokens of their own under DPR.
        assert!(dpr("the song “Yesterday” was", &["Yesterday"]));
        assert!(dpr("the song “Yesterday” was", &["“Yesterday”"]));
        assert!(!dpr("the song \"Yesterday\" was", &["“Yesterday”"]));
        assert!(!squad("the song “Yesterday” was", &["Yesterday"]));
    }

    #[test]
    fn articles_case_accents_partial_tokens() {
        // DPR keeps articles: "the beatles" is not in a text saying only "Beatles".
        assert!(dpr("The Beatles were a band", &["Beatles"]));
        assert!(!dpr("Beatles songs", &["The Beatles"]));
        assert!(dpr("Beatles songs", &["Beatles", "The Beatles"]));
        // SQuAD drops them on both sides.
        assert!(squad("Beatles songs", &["The Beatles"]));
        assert!(squad("The Beatles were", &["Beatles"]));
        // Case.
        assert!(dpr("PARIS is big", &["paris"]));
        assert!(dpr("paris is big", &["PARIS"]));
        // Accents: composed and decomposed agree; accents are not stripped.
        assert!(dpr("Pel\u{e9} scored", &["Pele\u{301}"]));
        assert!(dpr("Pele\u{301} scored", &["Pel\u{e9}"]));
        assert!(!dpr("Pelé scored", &["Pele"]));
        assert!(!dpr("Pele scored", &["Pelé"]));
        assert!(dpr("ÉCOLE", &["école"]));
        // Whole tokens only.
        assert!(!dpr("a Parisian cafe", &["Paris"]));
        assert!(!dpr("the party", &["art"]));
        assert!(dpr("in Paris, France", &["Paris"]));
        // Order and contiguity.
        assert!(dpr("New York City", &["new york"]));
        assert!(!dpr("New York City", &["york new"]));
        assert!(!dpr("New big York", &["new york"]));
        // Punctuation-only answers are tokens under DPR, nothing under SQuAD.
        assert!(dpr("f(x) = y", &[")"]));
        assert!(!dpr("f x = y", &[")"]));
        assert!(!squad("f(x) = y", &[")"]));
        assert!(AnswerMatch::Squad.golds(&[")"]).unwrap().is_empty());
        assert_eq!(AnswerMatch::Dpr.golds(&[")"]).unwrap().len(), 1);
        // Unusable answers never match (DPR would match everything).
        assert!(!dpr("anything", &[""]));
        assert!(!dpr("anything", &[" \t"]));
        assert!(AnswerMatch::Dpr.golds(&["", " \n"]).unwrap().is_empty());
        assert!(!dpr("", &["x"]));
        assert!(!dpr("anything", &[]));
        assert!(!re("anything", &[""]));
        assert!(AnswerMatch::DprRegex.golds(&[""]).unwrap().is_empty());
    }

    #[test]
    fn regex_answers() {
        assert!(re("He was born in 1879.", &[r"18\d\d"]));
        assert!(!re("He was born in 1979.", &[r"18\d\d"]));
        // Ignore case; alternation; any answer of the list.
        assert!(re("Leo TOLSTOY wrote", &["tolstoi|tolstoy"]));
        assert!(re("by Tolstoi", &["Dostoevsky", "Tolst(oy|oi)"]));
        // Multi-line: ^ and $ at line breaks.
        assert!(re("first line\nMount Everest\nlast", &["^mount everest$"]));
        // Not tokenised: a regex matches inside words unless it says \b.
        assert!(re("a Parisian cafe", &["paris"]));
        assert!(!re("a Parisian cafe", &[r"\bparis\b"]));
        // NFD on both sides: a composed é in the pattern matches a decomposed text.
        assert!(re("Pele\u{301}", &["pel\u{e9}"]));
        assert!(re("Pel\u{e9}", &["pele\u{301}"]));
        // Unicode \d (Arabic-Indic digits) as in Python.
        assert!(re("٣", &[r"\d"]));
        // Python escapes Rust also reads the same way.
        assert!(re("A", &[r"\u0041"]));
        assert!(re("x/y", &[r"x\/y"]));
        assert!(re("1,500", &[r"1\s*,?\s*500"]));
        // A lazy quantifier is one repetition, not two.
        assert!(re("aaa", &["a+?a"]));
        // Inline flags turn DPR's ignore-case off, as in Python.
        assert!(!re("A", &["(?-i:a)"]));
    }

    #[test]
    fn regex_answers_that_cannot_match_as_in_python_are_errors() {
        for (pattern, needle) in [
            ("(?<=a)b", "look-around"),
            ("a(?=b)", "look-around"),
            (r"(a)\1", "backreference"),
            ("(", "("),
            (")", "unopened group"),
            (r"\<word", "word-boundary assertion"),
            (r"word\>", "word-boundary assertion"),
            (r"\b{start}x", "word-boundary assertion"),
            ("[a[b]]", "nested class"),
            ("[a&&b]", "set operation"),
            ("[a~~b]", "set operation"),
            ("(?x)a b", "`x` flag"),
            ("(?U)a", "`U` flag"),
            (r"\x{41}", r"\x{…}"),
            // Python reads `{,2}` as `{0,2}` and a lone `{` as a literal; Rust rejects both.
            ("a{,2}", "repetition"),
            ("a{", "repetition"),
            // Possessive in Python (`a*+a` never matches), `(a*)+` in Rust.
            ("a*+a", "repetition of a repetition"),
        ] {
            let e = AnswerMatch::DprRegex
                .golds(&["fine", pattern])
                .expect_err(pattern)
                .to_string();
            assert!(e.contains(&format!("`{pattern}`")), "{pattern}: {e}");
            assert!(e.contains(needle), "{pattern}: {e}");
        }
        // POSIX classes and named groups are read alike.
        assert!(re("abc", &["[[:alpha:]]+"]));
        assert!(re("abc", &["(?P<x>b)"]));
    }

    #[test]
    fn rules_by_name_and_mismatched_preparation() {
        for r in AnswerMatch::ALL {
            assert_eq!(r.name().parse::<AnswerMatch>().unwrap(), r);
            assert_eq!(r.to_string(), r.name());
            assert_eq!(
                serde_json::to_value(r).unwrap(),
                serde_json::Value::String(r.name().into())
            );
        }
        assert_eq!(AnswerMatch::default(), AnswerMatch::Dpr);
        let e = "dpr_regex".parse::<AnswerMatch>().unwrap_err().to_string();
        assert!(e.contains("dpr_regex") && e.contains("dpr-regex"), "{e}");
        let golds = AnswerMatch::Dpr.golds(&["x"]).unwrap();
        let text = AnswerMatch::Squad.prepare("x");
        let e = golds.found_in(&text).unwrap_err().to_string();
        assert!(e.contains("squad") && e.contains("dpr"), "{e}");
        assert_eq!(
            AnswerMatch::Dpr.prepare("A b").tokens(),
            Some(&["a".to_string(), "b".to_string()][..])
        );
        assert_eq!(AnswerMatch::DprRegex.prepare("A b").tokens(), None);
    }
}
