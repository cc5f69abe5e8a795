//! Small text utilities shared by loaders, chunkers and metrics.

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
}
