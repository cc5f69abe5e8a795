//! Small text utilities shared by loaders, chunkers and metrics, and the rules by which an
//! answer matches its golds ([`answer_match`]).

pub mod answer_match;

/// Number of whitespace-separated words (the unit report 000 filters on).
pub fn word_count(s: &str) -> usize {
    s.split_whitespace().count()
}

/// Byte spans `(start, end)` of the whitespace-separated words of `s`.
pub fn word_spans(s: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        if c.is_whitespace() {
            if let Some(st) = start.take() {
                spans.push((st, i));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(st) = start {
        spans.push((st, s.len()));
    }
    spans
}

/// Byte spans of the non-empty paragraphs of `s`, split on newlines, trimmed of
/// surrounding whitespace. `&s[a..b]` is each paragraph.
pub fn paragraph_spans(s: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut offset = 0;
    for line in s.split_inclusive('\n') {
        let trimmed_start = line.len() - line.trim_start().len();
        let body = line.trim();
        if !body.is_empty() {
            let a = offset + trimmed_start;
            out.push((a, a + body.len()));
        }
        offset += line.len();
    }
    out
}

/// `template` with each `{name}` whose `name` is a key of `values` replaced by its value,
/// and each `{{` / `}}` replaced by a literal `{` / `}`, in one left-to-right pass: text
/// inserted for a placeholder is never scanned again, so a passage or question that
/// itself holds `{question}` or `{text}` stays as written, and `{{question}}` is the
/// literal text `{question}`, not a placeholder. Everything else (unknown `{...}`, lone
/// braces) is copied unchanged.
pub fn fill_placeholders(template: &str, values: &[(&str, &str)]) -> String {
    fill(template, values, false)
}

/// [`fill_placeholders`] for a template that is filled again later: the named
/// placeholders are replaced in the same single pass, but `{{` and `}}` are copied as they
/// are (still escapes for the later fill), so `{{k}}` stays `{{k}}` while `{k}` is
/// filled.
pub fn fill_placeholders_keep_escapes(template: &str, values: &[(&str, &str)]) -> String {
    fill(template, values, true)
}

fn fill(template: &str, values: &[(&str, &str)], keep_escapes: bool) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find(['{', '}']) {
        out.push_str(&rest[..open]);
        let brace = &rest[open..open + 1];
        let after = &rest[open + 1..];
        // An escaped brace: `{{` or `}}`.
        if after.starts_with(brace) {
            out.push_str(if keep_escapes {
                &rest[open..open + 2]
            } else {
                brace
            });
            rest = &after[1..];
            continue;
        }
        if brace == "}" {
            out.push('}');
            rest = after;
            continue;
        }
        let hit = values
            .iter()
            .find(|(name, _)| after.starts_with(name) && after[name.len()..].starts_with('}'));
        match hit {
            Some((name, value)) => {
                out.push_str(value);
                rest = &after[name.len() + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_slice_back() {
        let s = "  alpha beta\n\n gamma\t delta \nε";
        for (a, b) in word_spans(s) {
            assert!(!s[a..b].contains(char::is_whitespace));
        }
        assert_eq!(word_count(s), 5);
        let p: Vec<&str> = paragraph_spans(s).iter().map(|&(a, b)| &s[a..b]).collect();
        assert_eq!(p, vec!["alpha beta", "gamma\t delta", "ε"]);
    }

    #[test]
    fn fill_placeholders_in_one_pass() {
        let t = "Q: {question}\n{passages}\n{unknown} {{x}} { }";
        let out = fill_placeholders(
            t,
            &[
                ("passages", "a passage with {question} and {text}"),
                ("question", "why {passages}?"),
            ],
        );
        assert_eq!(
            out,
            "Q: why {passages}?\na passage with {question} and {text}\n{unknown} {x} { }"
        );
        assert_eq!(
            fill_placeholders("{a}{a}{b}", &[("a", "1"), ("b", "{a}")]),
            "11{a}"
        );
        assert_eq!(fill_placeholders("", &[("a", "1")]), "");
    }

    #[test]
    fn escaped_braces_are_unescaped_in_the_filling_pass() {
        let q = [("question", "who wrote hamlet?")];
        assert_eq!(
            fill_placeholders("Say {{question}} literally: {question}", &q),
            "Say {question} literally: who wrote hamlet?"
        );
        // `{{{question}}}`: a literal brace, the question, a literal brace.
        assert_eq!(
            fill_placeholders("{{{question}}}", &q),
            "{who wrote hamlet?}"
        );
        // A value holding `{{` is not unescaped (inserted text is never scanned).
        assert_eq!(
            fill_placeholders("{question}", &[("question", "{{a}}")]),
            "{{a}}"
        );
        // Keeping the escapes for a later fill: `{k}` filled, `{{k}}` kept.
        let once = fill_placeholders_keep_escapes("{k} of {{k}}: {question}", &[("k", "3")]);
        assert_eq!(once, "3 of {{k}}: {question}");
        assert_eq!(fill_placeholders(&once, &q), "3 of {k}: who wrote hamlet?");
    }
}
