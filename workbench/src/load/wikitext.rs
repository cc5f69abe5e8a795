//! WikiText raw files (`wiki.test.raw`, `wiki.train.raw`, …).
//!
//! The format is line-oriented:
//!
//! ```text
//!  = Robert Boulter =
//!  Robert Boulter is an English film , television and theatre actor . …
//!  = = Career = =
//!  = = = 2000 – 2005 = = =
//!  In 2000 Boulter had a guest @-@ starring role …
//! ```
//!
//! A line ` = Title = ` (one `=` on each side) starts an article. Lines with two or
//! more `=` on each side are section headings: they stay inside the article and
//! become a blank-line boundary between paragraphs. Every other non-blank line is
//! a paragraph. Lines that merely start with ` = ` but do not close with ` = `
//! (table legends such as ` = National record`) are paragraphs too.
//!
//! [`load`] also undoes WikiText's number tokenisation: ` @-@ ` → `-`,
//! ` @,@ ` → `,`, ` @.@ ` → `.` (in titles and paragraphs). The rest of the
//! tokenisation (spaces around punctuation) is left alone.

use crate::load::read_to_string;
use crate::{Document, Error, Result};
use std::path::Path;

/// What one trimmed line of a WikiText file is.
#[derive(Debug, PartialEq)]
enum Line<'a> {
    Blank,
    /// ` = Title = `: the raw title, before detokenisation.
    Title(&'a str),
    /// ` = = Section = = ` and deeper.
    Heading,
    Text(&'a str),
}

fn classify(raw: &str) -> Line<'_> {
    let t = raw.trim();
    if t.is_empty() {
        return Line::Blank;
    }
    if t.len() >= 5 && t.starts_with("= ") && t.ends_with(" =") {
        let inner = t[2..t.len() - 2].trim();
        let opens = inner.starts_with('=');
        let closes = inner.ends_with('=');
        if !opens && !closes && !inner.is_empty() {
            return Line::Title(inner);
        }
        if opens && closes {
            return Line::Heading;
        }
    }
    Line::Text(t)
}

/// Undo WikiText's ` @-@ `, ` @,@ ` and ` @.@ ` number/hyphen tokenisation.
pub fn detokenize(s: &str) -> String {
    s.replace(" @-@ ", "-")
        .replace(" @,@ ", ",")
        .replace(" @.@ ", ".")
}

/// Load a WikiText raw file as one [`Document`] per article, in file order.
///
/// Ids are `wikitext-{n}` (0-based article number), `title` is the article
/// title, and `text` holds the article's paragraphs (trimmed, detokenised) joined
/// with `"\n"`; a section heading leaves an empty line between the paragraphs
/// before and after it. Headings themselves are not part of the text. Both `\n`
/// and `\r\n` line endings are accepted.
///
/// # Errors
///
/// * [`Error::Io`] when the file cannot be read (or is not UTF-8);
/// * [`Error::Malformed`] naming the line of any paragraph or section heading
///   that comes before the first article title;
/// * [`Error::BadInput`] when the file holds no article title at all.
pub fn load(path: &Path) -> Result<Vec<Document>> {
    let raw = read_to_string(path)?;
    let mut docs = Vec::new();
    // The article being filled: title and paragraphs ("" marks a section boundary).
    let mut current: Option<(String, Vec<String>)> = None;

    for (i, line) in raw.lines().enumerate() {
        match classify(line) {
            Line::Blank => {}
            Line::Title(title) => {
                if let Some((t, paras)) = current.take() {
                    docs.push(finish(docs.len(), t, paras));
                }
                current = Some((detokenize(title), Vec::new()));
            }
            Line::Heading | Line::Text(_) if current.is_none() => {
                return Err(Error::malformed(
                    path,
                    i + 1,
                    format!(
                        "text before the first article title (` = Title = `): {:?}",
                        excerpt(line.trim())
                    ),
                ));
            }
            Line::Heading => {
                let paras = &mut current.as_mut().expect("checked above").1;
                if paras.last().is_some_and(|p| !p.is_empty()) {
                    paras.push(String::new());
                }
            }
            Line::Text(t) => current
                .as_mut()
                .expect("checked above")
                .1
                .push(detokenize(t)),
        }
    }
    if let Some((t, paras)) = current.take() {
        docs.push(finish(docs.len(), t, paras));
    }
    if docs.is_empty() {
        return Err(Error::bad_input(
            path,
            "no article title (` = Title = `) found",
        ));
    }
    Ok(docs)
}

fn finish(n: usize, title: String, mut paras: Vec<String>) -> Document {
    while paras.last().is_some_and(|p| p.is_empty()) {
        paras.pop();
    }
    Document::new(format!("wikitext-{n}"), title, paras.join("\n"))
}

/// The first 60 characters of a line, for error messages.
fn excerpt(s: &str) -> String {
    let mut out: String = s.chars().take(60).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_lines() {
        assert_eq!(classify(" = Du Fu = \r"), Line::Title("Du Fu"));
        assert_eq!(classify(" = = Career = = "), Line::Heading);
        assert_eq!(classify(" = = = 2000 – 2005 = = = "), Line::Heading);
        assert_eq!(
            classify(" = National record "),
            Line::Text("= National record")
        );
        assert_eq!(classify(" = = "), Line::Text("= ="));
        assert_eq!(classify("   "), Line::Blank);
    }

    #[test]
    fn undoes_number_tokens() {
        assert_eq!(
            detokenize("guest @-@ starring, 1 @,@ 000 and 3 @.@ 5"),
            "guest-starring, 1,000 and 3.5"
        );
    }
}
