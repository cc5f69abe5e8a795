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

/// One piece of a template with `{name}` placeholders and `{{` / `}}` escapes
/// ([`template_pieces`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplatePiece<'a> {
    /// Text without braces, copied as it is.
    Text(&'a str),
    /// `{{` or `}}` as written: one literal brace.
    Escape(&'a str),
    /// `{name}`: the name between the braces (it holds no brace).
    Slot(&'a str),
    /// A `{` with no `}` before the next `{` or the end: the `{` and the text after it up
    /// to that point.
    Unclosed(&'a str),
    /// A `}` that closes nothing.
    LoneClose,
}

impl TemplatePiece<'_> {
    /// The piece as it was written.
    pub fn source(&self) -> std::borrow::Cow<'_, str> {
        match self {
            TemplatePiece::Text(t) | TemplatePiece::Escape(t) | TemplatePiece::Unclosed(t) => {
                std::borrow::Cow::Borrowed(t)
            }
            TemplatePiece::Slot(name) => std::borrow::Cow::Owned(format!("{{{name}}}")),
            TemplatePiece::LoneClose => std::borrow::Cow::Borrowed("}"),
        }
    }
}

/// The pieces of `template`, left to right: the one placeholder scanner of the crate.
/// Concatenating every piece's [`TemplatePiece::source`] gives `template` back. Each user
/// decides what an unknown name, an unclosed `{` or a lone `}` means: the prompt loader
/// rejects them, [`fill_placeholders`] copies them, the grader's blocks reject an
/// unclosed `{`.
pub fn template_pieces(template: &str) -> impl Iterator<Item = TemplatePiece<'_>> {
    let mut rest = template;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let Some(at) = rest.find(['{', '}']) else {
            return Some(TemplatePiece::Text(std::mem::take(&mut rest)));
        };
        if at > 0 {
            let (text, tail) = rest.split_at(at);
            rest = tail;
            return Some(TemplatePiece::Text(text));
        }
        let brace = &rest[..1];
        let after = &rest[1..];
        if after.starts_with(brace) {
            let (escape, tail) = rest.split_at(2);
            rest = tail;
            return Some(TemplatePiece::Escape(escape));
        }
        if brace == "}" {
            rest = after;
            return Some(TemplatePiece::LoneClose);
        }
        match after.find(['{', '}']) {
            Some(close) if after[close..].starts_with('}') => {
                let name = &after[..close];
                rest = &after[close + 1..];
                Some(TemplatePiece::Slot(name))
            }
            other => {
                let end = 1 + other.unwrap_or(after.len());
                let (open, tail) = rest.split_at(end);
                rest = tail;
                Some(TemplatePiece::Unclosed(open))
            }
        }
    })
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
    for piece in template_pieces(template) {
        match piece {
            TemplatePiece::Escape(e) if !keep_escapes => out.push_str(&e[..1]),
            TemplatePiece::Slot(name) => match values.iter().find(|(n, _)| *n == name) {
                Some((_, value)) => out.push_str(value),
                None => out.push_str(&piece.source()),
            },
            other => out.push_str(&other.source()),
        }
    }
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
    fn template_pieces_cover_the_template_and_split_where_they_should() {
        use TemplatePiece::*;
        let t = "a {x} {{y}} }b {open {z}} {";
        let pieces: Vec<TemplatePiece> = template_pieces(t).collect();
        assert_eq!(
            pieces,
            vec![
                Text("a "),
                Slot("x"),
                Text(" "),
                Escape("{{"),
                Text("y"),
                Escape("}}"),
                Text(" "),
                LoneClose,
                Text("b "),
                Unclosed("{open "),
                Slot("z"),
                LoneClose,
                Text(" "),
                Unclosed("{"),
            ]
        );
        let back: String = pieces.iter().map(|p| p.source()).collect();
        assert_eq!(back, t);
        // Multi-byte text around the braces.
        assert_eq!(
            template_pieces("é{ß}ü}").collect::<Vec<_>>(),
            vec![Text("é"), Slot("ß"), Text("ü"), LoneClose]
        );
        assert_eq!(fill_placeholders("é{q}ü", &[("q", "ß")]), "éßü");
        // An unknown placeholder is copied as written, and a lone `}` after it too.
        assert_eq!(fill_placeholders("{x}}", &[]), "{x}}");
        assert_eq!(fill_placeholders("{a {q}", &[("q", "1")]), "{a 1");
        assert_eq!(template_pieces("").count(), 0);
        assert_eq!(template_pieces("{}").collect::<Vec<_>>(), vec![Slot("")]);
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
