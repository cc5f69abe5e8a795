//! Prompts as data: a template file with placeholders, rendered for one question and
//! its passages.
//!
//! Placeholders in a template file:
//!
//! | placeholder | becomes |
//! |---|---|
//! | `{question}` | the question (or, for a transform prompt, the query to transform) |
//! | `{passages}` | every passage, each rendered with the passage format, joined by the separator |
//! | `{k}` | the number of passages given |
//! | `{n}` | the number of variants asked (paraphrase prompts) |
//!
//! and in the passage format (`reader.passage_format`, default `"[CHUNK {i}]\n{text}"`,
//! report 001's): `{i}` (1-based rank), `{id}`, `{title}`, `{text}`. `{{` and `}}` are
//! literal braces. Any other `{name}` is an error naming the file and the placeholder,
//! found when the template is loaded, before any work. The text is used as written,
//! except that one trailing newline at the end of the file is dropped.
//!
//! The files in `data/prompts/` (see its README for each one's source):
//! `rag_001.txt` and `closed_book_001.txt` (report 001 Appendix A), `extractive.txt`
//! (a plain extractive-style prompt), `rewrite_004.txt` (report 004's rewrite prompt),
//! `paraphrase_002.txt` (report 002's T5 `paraphrase:` input).

use crate::read::Context;
use crate::{Error, Result};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Slot(String),
}

fn parse(text: &str, allowed: &[&str], origin: &Path) -> Result<Vec<Piece>> {
    use crate::text::TemplatePiece as T;
    let mut out = Vec::new();
    let mut buf = String::new();
    for piece in crate::text::template_pieces(text) {
        match piece {
            T::Text(t) => buf.push_str(t),
            T::Escape(e) => buf.push_str(&e[..1]),
            T::Slot(name) if allowed.contains(&name) => {
                if !buf.is_empty() {
                    out.push(Piece::Text(std::mem::take(&mut buf)));
                }
                out.push(Piece::Slot(name.to_string()));
            }
            T::Slot(name) => {
                return Err(Error::bad_input(
                    origin,
                    format!(
                        "unknown placeholder `{{{name}}}`; known: {} (write `{{{{` for a literal brace)",
                        allowed
                            .iter()
                            .map(|a| format!("{{{a}}}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ))
            }
            T::Unclosed(open) => {
                return Err(Error::bad_input(
                    origin,
                    format!("unclosed placeholder `{open}`"),
                ))
            }
            T::LoneClose => {
                return Err(Error::bad_input(
                    origin,
                    "a lone `}` (write `}}` for a literal brace)",
                ))
            }
        }
    }
    if !buf.is_empty() {
        out.push(Piece::Text(buf));
    }
    Ok(out)
}

/// A loaded prompt template. See the [module docs](self).
#[derive(Debug, Clone, PartialEq)]
pub struct PromptTemplate {
    origin: PathBuf,
    text: String,
    pieces: Vec<Piece>,
    passage: Vec<Piece>,
    separator: String,
}

const TEMPLATE_SLOTS: [&str; 4] = ["question", "passages", "k", "n"];
const PASSAGE_SLOTS: [&str; 4] = ["i", "id", "title", "text"];

impl PromptTemplate {
    /// Parse `text` (from `origin`, for messages) with the passage format and separator.
    pub fn parse(text: &str, origin: &Path, passage_format: &str, separator: &str) -> Result<Self> {
        let raw = text;
        let text = text.strip_suffix('\n').unwrap_or(text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        Ok(PromptTemplate {
            origin: origin.to_path_buf(),
            text: raw.to_string(),
            pieces: parse(text, &TEMPLATE_SLOTS, origin)?,
            passage: parse(
                passage_format,
                &PASSAGE_SLOTS,
                Path::new("<reader.passage_format>"),
            )?,
            separator: separator.to_string(),
        })
    }

    /// Load a template file.
    pub fn load(path: &Path, passage_format: &str, separator: &str) -> Result<Self> {
        let text = crate::load::read_to_string(path)?;
        Self::parse(&text, path, passage_format, separator)
    }

    /// The template's text as it was read (trailing line break included).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The file it came from.
    pub fn origin(&self) -> &Path {
        &self.origin
    }

    /// Whether the template shows passages (a closed-book prompt does not).
    pub fn uses_passages(&self) -> bool {
        self.uses("passages")
    }

    /// Whether the template has the placeholder `{slot}` (`"n"`, `"question"`, …).
    pub fn uses(&self, slot: &str) -> bool {
        self.pieces
            .iter()
            .any(|p| matches!(p, Piece::Slot(s) if s == slot))
    }

    /// Render for a question and its passages (rank 1 first); `{n}` becomes `n`.
    pub fn render_with(&self, question: &str, passages: &[Context], n: usize) -> String {
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Slot(s) => match s.as_str() {
                    "question" => out.push_str(question),
                    "k" => out.push_str(&passages.len().to_string()),
                    "n" => out.push_str(&n.to_string()),
                    _ => {
                        for (i, c) in passages.iter().enumerate() {
                            if i > 0 {
                                out.push_str(&self.separator);
                            }
                            for q in &self.passage {
                                match q {
                                    Piece::Text(t) => out.push_str(t),
                                    Piece::Slot(s) => match s.as_str() {
                                        "i" => out.push_str(&(i + 1).to_string()),
                                        "id" => out.push_str(&c.id),
                                        "title" => out.push_str(&c.title),
                                        _ => out.push_str(&c.text),
                                    },
                                }
                            }
                        }
                    }
                },
            }
        }
        out
    }

    /// Render for a question and its passages.
    pub fn render(&self, question: &str, passages: &[Context]) -> String {
        self.render_with(question, passages, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_passages_and_escapes() {
        let t = PromptTemplate::parse(
            "Q: {question}\n{k} docs:\n{passages}\n{{literal}}\n",
            Path::new("t.txt"),
            "[CHUNK {i}] ({id}) {text}",
            "\n",
        )
        .unwrap();
        assert!(t.uses_passages());
        let ps = [Context::new("a", "first"), Context::new("b", "second")];
        assert_eq!(
            t.render("why?", &ps),
            "Q: why?\n2 docs:\n[CHUNK 1] (a) first\n[CHUNK 2] (b) second\n{literal}"
        );
    }

    #[test]
    fn unknown_placeholder_names_file_and_slot() {
        let e = PromptTemplate::parse("{query}", Path::new("p.txt"), "{text}", "")
            .unwrap_err()
            .to_string();
        assert!(e.contains("p.txt") && e.contains("{query}"), "{e}");
        let e = PromptTemplate::parse("{question}", Path::new("p.txt"), "{body}", "")
            .unwrap_err()
            .to_string();
        assert!(e.contains("passage_format") && e.contains("{body}"), "{e}");
        assert!(PromptTemplate::parse("x } y", Path::new("p.txt"), "", "").is_err());
        assert!(PromptTemplate::parse("{question", Path::new("p.txt"), "", "").is_err());
    }
}
