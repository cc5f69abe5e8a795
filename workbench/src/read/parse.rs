//! Answer parsing: the scored answer taken out of a generative reader's raw output.
//!
//! Instruction-tuned models answer in sentences ("The answer is Paris.") where the gold
//! answers are spans ("Paris"). Toolkits that report EM for generative readers parse the
//! output before scoring and keep the raw one (FlashRAG prompts for the answer only and
//! parses it; BERGEN scores a containment match beside EM). [`AnswerParser`] is that step:
//! the pipeline keeps the raw output in its traces (`answer`) and scores the parsed one
//! (`prediction`).
//!
//! The rules apply in this order, each only when switched on:
//! 1. `final_marker`: the text after the **last** occurrence of a marker such as
//!    `"Final answer:"` (case-insensitive); unchanged when the marker does not occur;
//! 2. `lead_ins`: a leading phrase such as "The answer is" or "Answer:" (whole words,
//!    case-insensitive, an optional colon after it, and markdown emphasis around it:
//!    `**Answer:**`), removed repeatedly. It runs before the line is chosen, so a lead-in
//!    on a line of its own (`Answer:\nParis`) gives the next line;
//! 3. `first_line`: the first non-blank line, then `lead_ins` once more on that line;
//! 4. `strip_quotes`: surrounding quotes, backticks and `*` / `_` emphasis, in pairs;
//! 5. `strip_final_punctuation`: trailing `.`, `!`, `?`, `;`, `,`, `:`, except the `.`
//!    that closes a dotted abbreviation of single letters (`Washington, D.C.`, `U.S.`),
//!    whose tokens DPR's match compares one by one (4 and 5 repeat until neither changes
//!    the text, so "`42`." and "\"Paris.\"" both give the bare answer).
//!
//! Whitespace is trimmed after each rule that is on. A parse that would leave nothing
//! keeps the text before that rule (a reader that answered "Answer:" is scored on
//! "Answer:", not on an empty string that would look like an abstention).
//!
//! [`AnswerParser::default`] switches every rule off: the prediction is the raw output,
//! character for character. [`AnswerParser::short`] is the preset for short-answer prompts.

use serde::{Deserialize, Serialize};

/// Which parsing rules apply (see the [module docs](self)). Default: none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AnswerParser {
    /// Keep the text after the last occurrence of this marker (case-insensitive). Empty:
    /// off.
    pub final_marker: String,
    /// Keep the first non-blank line.
    pub first_line: bool,
    /// Leading phrases to remove (lowercase; whole words; an optional colon after them).
    pub lead_ins: Vec<String>,
    /// Remove surrounding quotes, backticks and `*` / `_` emphasis.
    pub strip_quotes: bool,
    /// Remove trailing `.`, `!`, `?`, `;`, `,`, `:`.
    pub strip_final_punctuation: bool,
}

impl AnswerParser {
    /// The short-answer preset: the text after `Final answer:` if present, its first line,
    /// without a lead-in ("the answer is", "final answer", "short answer", "answer"),
    /// surrounding quotes or final punctuation.
    pub fn short() -> Self {
        AnswerParser {
            final_marker: "final answer:".into(),
            first_line: true,
            lead_ins: ["the answer is", "final answer", "short answer", "answer"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            strip_quotes: true,
            strip_final_punctuation: true,
        }
    }

    /// Whether every rule is off (the parse is the identity).
    pub fn is_identity(&self) -> bool {
        *self == AnswerParser::default()
    }

    /// The scored answer of `raw` under these rules.
    pub fn parse(&self, raw: &str) -> String {
        if self.is_identity() {
            return raw.to_string();
        }
        let mut s = self.after_marker(raw);
        s = self.strip_lead_ins(s);
        if self.first_line {
            s = self.strip_lead_ins(first_nonblank_line(s));
        }
        // Quotes and final punctuation nest either way ("`42`." and "\"Paris.\""): strip
        // both until neither changes the text.
        loop {
            let before = s;
            if self.strip_quotes {
                s = strip_unopened_emphasis(strip_pairs(s));
            }
            if self.strip_final_punctuation {
                let t = strip_final_punctuation(s);
                if !t.is_empty() {
                    s = t;
                }
            }
            if s == before {
                break;
            }
        }
        s.to_string()
    }

    /// `raw` trimmed, after the last final marker when there is one (and emphasis that
    /// closed around the marker: `**Final answer:** Paris`).
    fn after_marker<'a>(&self, raw: &'a str) -> &'a str {
        let s = raw.trim();
        match after_last_marker(s, &self.final_marker) {
            Some(after) => {
                let after = after.trim_start_matches(['*', '_']).trim();
                if after.is_empty() {
                    s
                } else {
                    after
                }
            }
            None => s,
        }
    }

    /// The text whose abstention counts beside the parsed answer's: the rules before the
    /// lead-ins (the final marker, then the first non-blank line when `first_line` is on),
    /// so "The answer is not in the passages." is read before "the answer is" goes.
    pub fn before_lead_ins(&self, raw: &str) -> String {
        if self.is_identity() {
            return raw.to_string();
        }
        let s = self.after_marker(raw);
        if self.first_line {
            first_nonblank_line(s).to_string()
        } else {
            s.to_string()
        }
    }

    /// `s` without its leading lead-ins (see the [module docs](self)), each with an
    /// optional colon and markdown emphasis around it; unchanged when nothing would be
    /// left.
    fn strip_lead_ins<'a>(&self, mut s: &'a str) -> &'a str {
        const EMPHASIS: [char; 2] = ['*', '_'];
        loop {
            let opened = s.trim_start_matches(EMPHASIS);
            let open = &s[..s.len() - opened.len()];
            let stripped = self.lead_ins.iter().find_map(|lead| {
                let rest = super::strip_words(opened, &lead.to_lowercase())?;
                // `Answer:`, `**Answer:**`, `**Answer**:`, `Answer :`.
                let rest = rest.trim_start_matches([' ', '\t']);
                let after_close = rest.trim_start_matches(EMPHASIS);
                let mut closed = after_close.len() < rest.len();
                let colon = after_close.starts_with(':');
                // A one-word lead-in ("answer") needs its colon or the line's end, so
                // "Answer the question: Paris" keeps its verb.
                if !lead.trim().contains(' ')
                    && !colon
                    && !after_close.starts_with(['\n', '\r'])
                    && !after_close.is_empty()
                {
                    return None;
                }
                let rest = after_close.strip_prefix(':').unwrap_or(after_close);
                let after_close = rest.trim_start_matches(EMPHASIS);
                closed |= after_close.len() < rest.len();
                let mut rest = after_close.trim_start();
                if !open.is_empty() && !closed {
                    // `**Answer: Paris**`: the emphasis closes after the answer.
                    rest = rest.strip_suffix(open).unwrap_or(rest).trim_end();
                }
                Some(rest)
            });
            match stripped {
                Some(rest) if !rest.is_empty() && rest.len() < s.len() => s = rest,
                _ => return s,
            }
        }
    }
}

/// `s` without a trailing run of `*` or `_` that nothing in `s` opens (`Paris**` from
/// `**Answer: Paris**` once the lead-in went with its opening emphasis).
fn strip_unopened_emphasis(s: &str) -> &str {
    for mark in ['*', '_'] {
        let t = s.trim_end_matches(mark);
        if t.len() < s.len() && !t.contains(mark) && !t.trim().is_empty() {
            return t.trim_end();
        }
    }
    s
}

/// `s` without trailing `.`, `!`, `?`, `;`, `,`, `:` and the white space before them,
/// keeping the final `.` of a dotted abbreviation of single letters (`D.C.`, `U.S.A.`).
fn strip_final_punctuation(s: &str) -> &str {
    let t = s
        .trim_end_matches(['.', '!', '?', ';', ',', ':'])
        .trim_end();
    let removed = &s[t.len()..];
    if removed.starts_with('.') && ends_with_dotted_letter(t) {
        &s[..t.len() + 1]
    } else {
        t
    }
}

/// Whether `t` ends with `X.Y` where `X` and `Y` are single letters (the start of a
/// dotted abbreviation whose final dot was cut: `D.C`, `U.S`).
fn ends_with_dotted_letter(t: &str) -> bool {
    let mut rev = t.chars().rev();
    let (Some(y), Some(dot), Some(x)) = (rev.next(), rev.next(), rev.next()) else {
        return false;
    };
    let before_x = rev.next();
    y.is_alphabetic()
        && dot == '.'
        && x.is_alphabetic()
        && before_x.is_none_or(|c| !c.is_alphanumeric())
}

/// The first non-blank line of `s`, trimmed; `s` itself when every line is blank.
fn first_nonblank_line(s: &str) -> &str {
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or(s)
}

/// The text after the last case-insensitive occurrence of `marker` in `s`.
fn after_last_marker<'a>(s: &'a str, marker: &str) -> Option<&'a str> {
    let marker = marker.to_lowercase();
    if marker.is_empty() {
        return None;
    }
    // Lowercasing can change byte lengths; search char boundaries of the original text.
    let mut found = None;
    for (i, _) in s.char_indices() {
        let rest = &s[i..];
        let mut want = marker.chars();
        let mut end = None;
        for (j, c) in rest.char_indices() {
            let mut ok = true;
            for l in c.to_lowercase() {
                if want.next() != Some(l) {
                    ok = false;
                    break;
                }
            }
            if !ok {
                break;
            }
            if want.as_str().is_empty() {
                end = Some(i + j + c.len_utf8());
                break;
            }
        }
        if let Some(e) = end {
            found = Some(e);
        }
    }
    found.map(|e| &s[e..])
}

/// `s` without surrounding quote or emphasis pairs (`"…"`, `'…'`, `` `…` ``, `*…*`,
/// `_…_`, `“…”`, `‘…’`), removed while the text inside is not empty.
fn strip_pairs(mut s: &str) -> &str {
    const PAIRS: [(char, char); 7] = [
        ('"', '"'),
        ('\'', '\''),
        ('`', '`'),
        ('*', '*'),
        ('_', '_'),
        ('\u{201C}', '\u{201D}'),
        ('\u{2018}', '\u{2019}'),
    ];
    loop {
        let inner = PAIRS.iter().find_map(|&(open, close)| {
            s.strip_prefix(open)
                .and_then(|r| r.strip_suffix(close))
                .map(str::trim)
        });
        match inner {
            Some(i) if !i.is_empty() => s = i,
            _ => return s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_the_identity() {
        let p = AnswerParser::default();
        for raw in ["", "  Paris.\n", "The answer is \"Paris\"."] {
            assert_eq!(p.parse(raw), raw);
        }
    }

    #[test]
    fn short_preset_takes_the_answer_out_of_a_sentence() {
        let p = AnswerParser::short();
        let cases = [
            ("The answer is Paris.", "Paris"),
            ("Answer: \"Paris\"", "Paris"),
            ("**Paris**\n\nParis is the capital of France.", "Paris"),
            ("Let me think.\nFinal answer: 1889", "1889"),
            ("FINAL ANSWER: `42`.", "42"),
            ("“Notre Dame”", "Notre Dame"),
            ("The answer is: The Beatles.", "The Beatles"),
            ("\"Paris.\"", "Paris"),
            // Lead-ins are whole words: "Answers" is not "Answer" + "s".
            ("Answers in Genesis", "Answers in Genesis"),
            // Nothing would be left: the text is kept.
            ("Answer:", "Answer"),
            ("'", "'"),
            ("...", "..."),
        ];
        for (raw, want) in cases {
            assert_eq!(p.parse(raw), want, "{raw:?}");
        }
    }

    #[test]
    fn a_lead_in_on_its_own_line_gives_the_next_line() {
        let p = AnswerParser::short();
        let cases = [
            ("Answer:\nParis", "Paris"),
            ("**Answer:**\nParis", "Paris"),
            ("**Answer:** Paris", "Paris"),
            ("**Answer**: Paris.", "Paris"),
            ("**Answer: Paris**", "Paris"),
            (
                "__Answer:__\n\nThe Beatles\nThey formed in 1960.",
                "The Beatles",
            ),
            ("The answer is:\n\"Paris\"", "Paris"),
            // A lead-in inside the first line still goes.
            ("Paris\nAnswer: Lyon", "Paris"),
        ];
        for (raw, want) in cases {
            assert_eq!(p.parse(raw), want, "{raw:?}");
        }
    }

    #[test]
    fn markdown_around_markers_and_lead_ins_and_one_word_lead_ins() {
        let p = AnswerParser::short();
        let cases = [
            ("**Final Answer:** Paris", "Paris"),
            ("**Final answer:**\nParis.", "Paris"),
            ("**Answer: Paris**\nIt is the capital.", "Paris"),
            ("Answer:_Paris_", "Paris"),
            // A one-word lead-in needs its colon (or the line's end).
            ("Answer the question: Paris", "Answer the question: Paris"),
            ("Answer\nParis", "Paris"),
        ];
        for (raw, want) in cases {
            assert_eq!(p.parse(raw), want, "{raw:?}");
        }
        // The text before the lead-ins, for the abstention rule.
        assert_eq!(
            p.before_lead_ins("The answer is not in the passages.\nMore."),
            "The answer is not in the passages."
        );
        assert_eq!(
            p.before_lead_ins("Thinking.\nFinal answer: Not found."),
            "Not found."
        );
        assert_eq!(AnswerParser::default().before_lead_ins(" raw "), " raw ");
    }

    #[test]
    fn final_dot_of_a_dotted_abbreviation_is_kept() {
        let p = AnswerParser::short();
        assert_eq!(p.parse("Washington, D.C."), "Washington, D.C.");
        assert_eq!(p.parse("The answer is U.S.A.."), "U.S.A.");
        assert_eq!(p.parse("\"U.S.\""), "U.S.");
        assert_eq!(p.parse("1944."), "1944");
        assert_eq!(p.parse("Antennae."), "Antennae");
        assert_eq!(p.parse("Yes."), "Yes");
        // A single initial is not an abbreviation of dotted letters.
        assert_eq!(p.parse("Plan B."), "Plan B");
        // Why it matters under DPR's match, whose tokens keep punctuation:
        // tests/pipeline.rs `dpr_match_finds_a_dotted_abbreviation_after_parsing`.
    }

    #[test]
    fn rules_apply_one_by_one() {
        let p = AnswerParser {
            first_line: true,
            ..AnswerParser::default()
        };
        assert_eq!(p.parse("\n  Paris.  \nMore text"), "Paris.");
        let p = AnswerParser {
            final_marker: "Final answer:".into(),
            ..AnswerParser::default()
        };
        assert_eq!(
            p.parse("final answer: a. Final Answer: b"),
            "b",
            "the last marker counts"
        );
        assert_eq!(p.parse("no marker here"), "no marker here");
        let p = AnswerParser {
            strip_final_punctuation: true,
            ..AnswerParser::default()
        };
        assert_eq!(p.parse("Washington, D.C."), "Washington, D.C.");
        assert_eq!(p.parse("Paris."), "Paris");
        // Multi-byte text around a marker and lowercase expansions do not break slicing.
        let p = AnswerParser {
            final_marker: "answer:".into(),
            ..AnswerParser::default()
        };
        assert_eq!(p.parse("İstanbul ANSWER: İzmir"), "İzmir");
    }

    #[test]
    fn never_panics_on_odd_text() {
        let p = AnswerParser::short();
        for raw in [
            "\u{0130}\u{0130}answer",
            "answer answer answer",
            "\"\"",
            "**",
            "\n\n",
            "a\u{0301}",
        ] {
            let _ = p.parse(raw);
        }
    }
}
