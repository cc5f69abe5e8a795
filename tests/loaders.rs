//! Integration tests for every loader in `workbench::load`: each loads a small
//! fixture written into a temporary folder and checks the records, then loads a
//! malformed variant and checks that the error names the file and the line (or,
//! for formats without lines, the record or row number, said as such).

use std::fs;
use std::path::{Path, PathBuf};
use tempfile::TempDir;
use workbench::load::question_set::BadRecords;
use workbench::load::{beir, nq_open, rag_mini, squad, text_dir, wiki_leads, wikitext};
use workbench::Error;

/// Write `content` to `dir/name` (creating parent folders) and return the path.
fn write(dir: &Path, name: &str, content: &str) -> PathBuf {
    let path = dir.join(name);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, content).unwrap();
    path
}

/// Assert that `err` is `Error::Malformed` for the file called `file` at `line`,
/// and that its message (as displayed) names the file, the line and `needle`.
fn assert_malformed(err: Error, file: &str, line: usize, needle: &str) {
    let shown = err.to_string();
    match &err {
        Error::Malformed { path, line: l, .. } => {
            assert_eq!(path.file_name().unwrap().to_str().unwrap(), file, "{shown}");
            assert_eq!(*l, line, "{shown}");
        }
        other => panic!("expected Error::Malformed, got {other:?}"),
    }
    assert!(shown.contains(&format!("{file}:{line}:")), "{shown}");
    assert!(shown.contains(needle), "expected {needle:?} in {shown}");
}

/// Assert that `err` names the file called `file` and the record (`what` = "record",
/// "row") numbered `n` as such, never as a line `file:n:`, and that its message
/// holds `needle`.
fn assert_record(err: Error, file: &str, what: &str, n: usize, needle: &str) {
    let shown = err.to_string();
    assert!(
        shown.contains(&format!("{file}: {what} {n}:")),
        "expected `{file}: {what} {n}:` in {shown}"
    );
    assert!(!shown.contains(&format!("{file}:{n}:")), "{shown}");
    assert!(shown.contains(needle), "expected {needle:?} in {shown}");
}

// ------------------------------------------------------------------ wiki leads

const LEAD: &str = r#""description": "d", "topic": "Science""#;

#[test]
fn wiki_leads_in_file_order_with_meta() {
    let tmp = TempDir::new().unwrap();
    let path = write(
        tmp.path(),
        "summaries_en-us.json",
        &format!(
            r#"{{
  "Zeta": {{"title": "Zeta", "extract": "Zeta is a letter.", {LEAD}}},
  "Alpha": {{"title": "Alpha", "extract": "Alpha comes first.", "description": "Greek letter", "topic": "Language"}},
  "Mu": {{"title": "Mu", "extract": "Mu.", {LEAD}}}
}}"#
        ),
    );
    let docs = wiki_leads::load(&path).unwrap();
    let ids: Vec<&str> = docs.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["Zeta", "Alpha", "Mu"], "file order, not sorted");
    assert_eq!(docs[1].title, "Alpha");
    assert_eq!(docs[1].text, "Alpha comes first.");
    assert_eq!(docs[1].meta["topic"], "Language");
    assert_eq!(docs[1].meta["description"], "Greek letter");
    assert_eq!(docs[0].meta.len(), 2);
}

#[test]
fn wiki_leads_errors_name_file_and_record() {
    let tmp = TempDir::new().unwrap();
    let path = write(
        tmp.path(),
        "leads.json",
        &format!(
            r#"{{"A": {{"title": "A", "extract": "a", {LEAD}}},
                "Broken Record": {{"title": "Broken Record", "extract": 7, {LEAD}}}}}"#
        ),
    );
    assert_record(
        wiki_leads::load(&path).unwrap_err(),
        "leads.json",
        "record",
        2,
        "Broken Record",
    );

    let path = write(
        tmp.path(),
        "missing.json",
        r#"{"A": {"title": "A", "extract": "a", "topic": "t"}}"#,
    );
    assert_record(
        wiki_leads::load(&path).unwrap_err(),
        "missing.json",
        "record",
        1,
        "`description` is missing",
    );

    // A JSON syntax error is at a real line.
    let path = write(
        tmp.path(),
        "syntax.json",
        "{\"A\": {\"title\": \"A\",\n \"extract\": \"a\" \"topic\": \"t\"}}",
    );
    assert_malformed(
        wiki_leads::load(&path).unwrap_err(),
        "syntax.json",
        2,
        "expected",
    );

    let path = write(tmp.path(), "empty.json", "{}");
    let err = wiki_leads::load(&path).unwrap_err();
    assert!(matches!(err, Error::BadInput { .. }), "{err:?}");
    assert!(err.to_string().contains("empty.json"), "{err}");
}

// ------------------------------------------------------------------ wikitext

#[test]
fn wikitext_articles_sections_and_detokenisation() {
    let tmp = TempDir::new().unwrap();
    let path = write(
        tmp.path(),
        "wiki.test.raw",
        " \r\n = Robert Boulter = \r\n \r\n Robert Boulter is an English actor . \r\n He had a guest @-@ starring role . \r\n \
         = = Career = = \r\n = = = 2000 @–@ 2005 = = = \r\n In 2000 he earned 1 @,@ 000 pounds , 3 @.@ 5 times more . \r\n\
          = Ise @-@ class battleship = \r\n = National record \r\n Second article . \r\n = = Notes = = \r\n",
    );
    let docs = wikitext::load(&path).unwrap();
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0].id, "wikitext-0");
    assert_eq!(docs[0].title, "Robert Boulter");
    assert_eq!(
        docs[0].text,
        "Robert Boulter is an English actor .\nHe had a guest-starring role .\n\n\
         In 2000 he earned 1,000 pounds , 3.5 times more ."
    );
    assert_eq!(docs[1].id, "wikitext-1");
    assert_eq!(docs[1].title, "Ise-class battleship");
    // An unclosed ` = …` line is text; a trailing heading leaves no blank line.
    assert_eq!(docs[1].text, "= National record\nSecond article .");
}

#[test]
fn wikitext_text_before_first_title_names_the_line() {
    let tmp = TempDir::new().unwrap();
    let path = write(
        tmp.path(),
        "bad.raw",
        " \n orphan paragraph . \n = Title = \n text . \n",
    );
    assert_malformed(
        wikitext::load(&path).unwrap_err(),
        "bad.raw",
        2,
        "before the first article title",
    );
}

// ------------------------------------------------------------------ SQuAD

fn squad_json(second_start: usize) -> serde_json::Value {
    serde_json::json!({
        "version": "v2.0",
        "data": [
            {"title": "Normans", "paragraphs": [
                {"context": "The Normans gave their name to Normandy, a región in France.",
                 "qas": [
                    {"id": "q1", "question": "In what country is Normandy located?", "is_impossible": false,
                     "answers": [{"text": "France", "answer_start": 53},
                                 {"text": "France", "answer_start": 53},
                                 {"text": "in France", "answer_start": 50}]},
                    {"id": "q2", "question": "What is a región?", "is_impossible": false,
                     "answers": [{"text": "región", "answer_start": second_start}]}]},
                {"context": "Rollo was their leader.",
                 "qas": [{"id": "q3", "question": "Who gave their name to Italy?", "is_impossible": true,
                          "answers": [], "plausible_answers": [{"text": "Normans", "answer_start": 4}]}]}]},
            {"title": "Steam engine", "paragraphs": [
                {"context": "Steam engines do work.",
                 "qas": [{"id": "q4", "question": "What do steam engines do?",
                          "answers": [{"text": "work", "answer_start": 17}]}]}]}
        ]
    })
}

#[test]
fn squad_contexts_examples_and_character_offsets() {
    let tmp = TempDir::new().unwrap();
    let path = write(tmp.path(), "dev-v2.0.json", &squad_json(43).to_string());
    let set = squad::load(&path).unwrap();
    assert_eq!(set.version, "v2.0");
    let ctx: Vec<&str> = set.contexts.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ctx, ["Normans#0", "Normans#1", "Steam engine#0"]);
    assert_eq!(set.contexts[1].title, "Normans");
    assert_eq!(set.contexts[2].text, "Steam engines do work.");

    assert_eq!(set.examples.len(), 4);
    let q1 = &set.examples[0];
    assert_eq!(q1.id, "q1");
    assert_eq!(
        q1.answers,
        ["France", "in France"],
        "deduplicated, order kept"
    );
    assert_eq!(q1.context_id.as_deref(), Some("Normans#0"));
    assert_eq!(q1.title.as_deref(), Some("Normans"));
    assert!(set.examples[2].is_unanswerable());
    assert_eq!(set.examples[2].context_id.as_deref(), Some("Normans#1"));
    assert_eq!(
        set.examples[3].answers,
        ["work"],
        "v1.1-style question without is_impossible"
    );
}

#[test]
fn squad_offset_mismatch_names_file_and_question() {
    let tmp = TempDir::new().unwrap();
    // "France" follows the accented "región": character 53 but byte 54. The
    // byte offset must be rejected.
    let mut v = squad_json(43);
    v["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 54.into();
    let path = write(tmp.path(), "bytes.json", &v.to_string());
    assert_record(
        squad::load(&path).unwrap_err(),
        "bytes.json",
        "record",
        1,
        "question `q1`",
    );

    let path = write(tmp.path(), "shifted.json", &squad_json(44).to_string());
    assert_record(
        squad::load(&path).unwrap_err(),
        "shifted.json",
        "record",
        2,
        "question `q2`",
    );

    let mut v = squad_json(43);
    v["data"][1]["paragraphs"][0]["qas"][0]
        .as_object_mut()
        .unwrap()
        .remove("question");
    let path = write(tmp.path(), "noquestion.json", &v.to_string());
    assert_record(
        squad::load(&path).unwrap_err(),
        "noquestion.json",
        "record",
        4,
        "`q4`",
    );

    let mut v = squad_json(43);
    v["data"][1].as_object_mut().unwrap().remove("paragraphs");
    let path = write(tmp.path(), "noparagraphs.json", &v.to_string());
    let err = squad::load(&path).unwrap_err();
    assert!(matches!(err, Error::BadInput { .. }), "{err:?}");
    let shown = err.to_string();
    assert!(
        shown.contains("noparagraphs.json") && shown.contains("Steam engine"),
        "{shown}"
    );
}

// ------------------------------------------------------------------ RAG-Mini-Wikipedia (CSV)

const INFOS: &str = "text\n\
\"Uruguay is a country, in South America.\"\n\
\"It has two lines:\nthe second, quoted.\"\n\
Plain passage\n";

const QUESTIONS: &str = "question,answer\n\
Was Abraham Lincoln the sixteenth President?,yes\n\
\"Who wrote \"\"Herons\"\"?\",\"Simon Stephens, playwright\"\n";

#[test]
fn rag_mini_csv_quoted_fields() {
    let tmp = TempDir::new().unwrap();
    let p = write(tmp.path(), "infos.csv", INFOS);
    let q = write(tmp.path(), "questions.csv", QUESTIONS);
    let (docs, qas) = rag_mini::load_csv(&p, &q).unwrap();
    assert_eq!(docs.len(), 3);
    assert_eq!(docs[0].id, "p0");
    assert_eq!(docs[0].text, "Uruguay is a country, in South America.");
    assert_eq!(docs[1].text, "It has two lines:\nthe second, quoted.");
    assert_eq!(docs[2].id, "p2");
    assert_eq!(qas.len(), 2);
    assert_eq!(qas[1].id, "q1");
    assert_eq!(qas[1].question, "Who wrote \"Herons\"?");
    assert_eq!(qas[1].answers, ["Simon Stephens, playwright"]);
    assert_eq!(qas[1].context_id, None);
}

#[test]
fn rag_mini_csv_errors_name_file_line_and_column() {
    let tmp = TempDir::new().unwrap();
    let p = write(tmp.path(), "infos.csv", INFOS);
    // The record starting on line 4 has three fields where the header has two.
    let bad = format!("{QUESTIONS}Too many,fields,here\n");
    let q = write(tmp.path(), "questions.csv", &bad);
    assert_malformed(
        rag_mini::load_csv(&p, &q).unwrap_err(),
        "questions.csv",
        4,
        "3 fields",
    );

    // Line 6: the quoted passage on lines 3-4 is one record, so the blank one starts on line 6.
    let p2 = write(tmp.path(), "blank.csv", &format!("{INFOS}\"  \"\n"));
    let q = write(tmp.path(), "questions.csv", QUESTIONS);
    assert_malformed(
        rag_mini::load_csv(&p2, &q).unwrap_err(),
        "blank.csv",
        6,
        "empty `text`",
    );

    let q = write(tmp.path(), "noanswer.csv", "question,reply\nWhy?,because\n");
    let err = rag_mini::load_csv(&p, &q).unwrap_err();
    assert!(matches!(err, Error::BadInput { .. }), "{err:?}");
    let shown = err.to_string();
    assert!(
        shown.contains("noanswer.csv") && shown.contains("`answer`"),
        "{shown}"
    );
}

// ------------------------------------------------------------------ RAG-Mini-Wikipedia (parquet)

mod parquet {
    use super::*;
    use polars::prelude::*;

    fn write_parquet(path: &Path, mut df: DataFrame) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let f = fs::File::create(path).unwrap();
        ParquetWriter::new(f).finish(&mut df).unwrap();
    }

    fn fixture(root: &Path) -> (PathBuf, PathBuf) {
        let passages = root.join("data/passages.parquet");
        let test = root.join("data/test.parquet");
        write_parquet(
            &passages.join("part.0.parquet"),
            df!("passage" => ["Uruguay is a country.", "It borders Brazil,\nand Argentina."], "id" => [0i64, 1]).unwrap(),
        );
        write_parquet(
            &test.join("part.0.parquet"),
            df!("question" => ["Is Uruguay a country?", "Who borders it?"],
                "answer" => ["yes", "Brazil"],
                "id" => [10i64, 11])
            .unwrap(),
        );
        (passages, test)
    }

    #[test]
    fn hf_layout_folder_or_file() {
        let tmp = TempDir::new().unwrap();
        let (passages, test) = fixture(tmp.path());
        let (docs, qas) = rag_mini::load_parquet(&passages, &test).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].id, "1");
        assert_eq!(docs[1].text, "It borders Brazil,\nand Argentina.");
        assert_eq!(qas.len(), 2);
        assert_eq!(qas[1].id, "11");
        assert_eq!(qas[1].question, "Who borders it?");
        assert_eq!(qas[1].answers, ["Brazil"]);

        let (docs2, qas2) = rag_mini::load_parquet(
            &passages.join("part.0.parquet"),
            &test.join("part.0.parquet"),
        )
        .unwrap();
        assert_eq!((docs2, qas2), (docs, qas));
    }

    /// Files written by pyarrow (the writer behind Hugging Face `datasets`) with
    /// statistics, dictionaries, page indexes, page checksums, v1 and v2 data pages and
    /// several codecs pass the loader's footer check and load.
    #[test]
    fn pyarrow_files_pass_the_footer_check() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/rag_mini_pyarrow");
        let test = dir.join("test.parquet");
        for passages in [
            dir.join("passages.parquet"),
            dir.join("passages_gzip.parquet"),
        ] {
            let (docs, qas) = rag_mini::load_parquet(&passages, &test).unwrap();
            assert_eq!((docs.len(), qas.len()), (1000, 2), "{}", passages.display());
            assert_eq!(docs[999].id, "999");
            assert_eq!(docs[1].text, "It borders Brazil,\nand Argentina.");
            assert_eq!(qas[1].answers, ["Brazil"]);
        }
    }

    #[test]
    fn missing_column_and_null_value_name_the_file() {
        let tmp = TempDir::new().unwrap();
        let (passages, _) = fixture(tmp.path());
        let bad_test = tmp.path().join("bad/part.0.parquet");
        write_parquet(
            &bad_test,
            df!("question" => ["q?"], "id" => [1i64]).unwrap(),
        );
        let err = rag_mini::load_parquet(&passages, &bad_test).unwrap_err();
        match &err {
            Error::Table { path, message } => {
                assert_eq!(path, &bad_test);
                assert!(message.contains("`answer`"), "{message}");
            }
            other => panic!("expected Error::Table, got {other:?}"),
        }
        assert!(err.to_string().contains("part.0.parquet"), "{err}");

        let null_test = tmp.path().join("null/part.0.parquet");
        write_parquet(
            &null_test,
            df!("question" => ["q1?", "q2?"], "answer" => [Some("a"), None], "id" => [1i64, 2])
                .unwrap(),
        );
        assert_record(
            rag_mini::load_parquet(&passages, &null_test).unwrap_err(),
            "part.0.parquet",
            "row",
            2,
            "null `answer`",
        );
    }
}

// ------------------------------------------------------------------ BEIR

const CORPUS: &str = r#"{"_id": "d1", "title": "Fahrenheit", "text": "The Fahrenheit scale.", "metadata": {"url": "http://x", "rank": 3}}
{"_id": "d2", "title": "", "text": "Celsius is metric.", "metadata": {}}

{"_id": 3, "text": "No title here."}
"#;

const QUERIES: &str = r#"{"_id": "q1", "text": "who invented fahrenheit", "metadata": {}}
{"_id": "q2", "text": "unjudged query"}
"#;

fn beir_fixture(qrels: &str) -> TempDir {
    let tmp = TempDir::new().unwrap();
    write(tmp.path(), "corpus.jsonl", CORPUS);
    write(tmp.path(), "queries.jsonl", QUERIES);
    write(tmp.path(), "qrels/test.tsv", qrels);
    tmp
}

#[test]
fn beir_with_and_without_header() {
    for qrels in [
        "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\t3\t0\n",
        "q1\td1\t2\r\nq1\t3\t0\r\n",
    ] {
        let tmp = beir_fixture(qrels);
        let set = beir::load(tmp.path(), "test").unwrap();
        assert_eq!(set.corpus.len(), 3);
        assert_eq!(set.corpus[0].title, "Fahrenheit");
        assert_eq!(set.corpus[0].meta["url"], "http://x");
        assert_eq!(set.corpus[0].meta["rank"], "3");
        assert_eq!(set.corpus[2].id, "3", "integer _id as text");
        assert_eq!(set.corpus[2].title, "");
        assert_eq!(set.queries.len(), 2);
        assert_eq!(set.queries[1].text, "unjudged query");
        assert_eq!(set.qrels.len(), 1);
        assert_eq!(set.qrels["q1"]["d1"], 2);
        assert_eq!(set.qrels["q1"]["3"], 0);
        assert_eq!(set.judged_queries().len(), 1);
    }
}

#[test]
fn beir_errors_name_file_line_and_id() {
    let tmp = beir_fixture("q1\td1\t2\nq1\td9\t1\n");
    let err = beir::load(tmp.path(), "test").unwrap_err();
    assert_malformed(err, "test.tsv", 2, "\"d9\"");

    let tmp = beir_fixture("query-id\tcorpus-id\tscore\nq1\td1\t2\nq7\td2\t1\n");
    assert_malformed(
        beir::load(tmp.path(), "test").unwrap_err(),
        "test.tsv",
        3,
        "\"q7\"",
    );

    let tmp = beir_fixture("q1\td1\t2\nq1\td2\thigh\n");
    assert_malformed(
        beir::load(tmp.path(), "test").unwrap_err(),
        "test.tsv",
        2,
        "not an integer",
    );

    let tmp = beir_fixture("q1\td1\t2\n");
    write(
        tmp.path(),
        "corpus.jsonl",
        &format!("{CORPUS}{{\"_id\": \"d4\", \"title\": \"t\"}}\n"),
    );
    assert_malformed(
        beir::load(tmp.path(), "test").unwrap_err(),
        "corpus.jsonl",
        5,
        "text",
    );

    let tmp = beir_fixture("q1\td1\t2\n");
    let err = beir::load(tmp.path(), "dev").unwrap_err();
    assert!(
        matches!(err, Error::Io { .. }) && err.to_string().contains("dev.tsv"),
        "{err}"
    );
}

// ------------------------------------------------------------------ NQ-open

#[test]
fn nq_open_records() {
    let tmp = TempDir::new().unwrap();
    let path = write(
        tmp.path(),
        "NQ-open.dev.jsonl",
        r#"{"question": "when was the last time anyone was on the moon", "answer": ["14 December 1972 UTC", "December 1972"]}
{"question": "who wrote he ain't heavy", "answer": ["Bobby Scott", "Bob Russell", "Bobby Scott"], "def_correct_predictions": ["x"]}
"#,
    );
    let set = nq_open::load(&path, BadRecords::Error).unwrap();
    assert!(set.skipped.is_empty() && set.dropped_golds.is_empty());
    let qas = set.questions;
    assert_eq!(qas.len(), 2);
    assert_eq!(qas[0].id, "nq-0");
    assert_eq!(qas[0].answers, ["14 December 1972 UTC", "December 1972"]);
    assert_eq!(qas[1].id, "nq-1");
    assert_eq!(qas[1].answers, ["Bobby Scott", "Bob Russell"]);
    assert_eq!(qas[1].context_id, None);
}

#[test]
fn nq_open_errors_name_file_and_line() {
    let tmp = TempDir::new().unwrap();
    let path = write(
        tmp.path(),
        "nq.jsonl",
        "{\"question\": \"a?\", \"answer\": [\"x\"]}\n{\"question\": \"b?\", \"answer\": [\"y\"]}\n{\"question\": \"c?\", \"answer\": []}\n",
    );
    assert_malformed(
        nq_open::load(&path, BadRecords::Error).unwrap_err(),
        "nq.jsonl",
        3,
        "empty `answer` list",
    );

    let path = write(
        tmp.path(),
        "nq2.jsonl",
        "{\"question\": \"a?\", \"answer\": [\"x\"]}\n{\"question\": \"b?\"}\n",
    );
    assert_malformed(
        nq_open::load(&path, BadRecords::Skip).unwrap_err(),
        "nq2.jsonl",
        2,
        "answer",
    );
}

/// NQ-open dev has gold answers `)` and `---`, which SQuAD normalisation empties: they are
/// dropped and counted, and a question left without a gold is an error naming its line
/// or, skipping, a counted skip; its id stays its line's.
#[test]
fn nq_open_golds_that_normalise_to_nothing() {
    let tmp = TempDir::new().unwrap();
    let path = write(
        tmp.path(),
        "nq.jsonl",
        "{\"question\": \"a?\", \"answer\": [\"x\", \"---\"]}\n\
         {\"question\": \"b?\", \"answer\": [\")\"]}\n\
         {\"question\": \"c?\", \"answer\": [\"z\"]}\n",
    );
    assert_malformed(
        nq_open::load(&path, BadRecords::Error).unwrap_err(),
        "nq.jsonl",
        2,
        "no usable gold answer",
    );
    let set = nq_open::load(&path, BadRecords::Skip).unwrap();
    let ids: Vec<&str> = set.questions.iter().map(|q| q.id.as_str()).collect();
    assert_eq!(ids, ["nq-0", "nq-2"]);
    assert_eq!(set.questions[0].answers, ["x"]);
    assert_eq!(set.skipped.len(), 1);
    assert_eq!(set.skipped[0].line, 2);
    assert_eq!(set.dropped_golds.len(), 1);
    assert_eq!(
        (
            set.dropped_golds[0].line,
            set.dropped_golds[0].answer.as_str()
        ),
        (1, "---")
    );
    let note = nq_open::dropped_note(&set);
    assert!(
        note.starts_with("1 questions left out (line 2: ")
            && note.contains("1 gold answers dropped"),
        "{note}"
    );
}

// ------------------------------------------------------------------ folder of text files

#[test]
fn text_dir_recursive_sorted_with_titles() {
    let tmp = TempDir::new().unwrap();
    write(
        tmp.path(),
        "b.txt",
        "\n\n  First line is the title  \nbody\n",
    );
    write(
        tmp.path(),
        "a/page.md",
        "# Markdown Title\n\nSome *text*.\n",
    );
    write(tmp.path(), "a/blank.txt", "   \n\n");
    write(tmp.path(), "notes.json", "{}");
    write(tmp.path(), ".hidden/skip.txt", "hidden");
    let docs = text_dir::load(tmp.path()).unwrap();
    let ids: Vec<&str> = docs.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["a/blank", "a/page", "b"]);
    assert_eq!(docs[0].title, "blank", "file stem when no line has text");
    assert_eq!(docs[1].title, "Markdown Title");
    assert_eq!(docs[1].text, "# Markdown Title\n\nSome *text*.\n");
    assert_eq!(docs[2].title, "First line is the title");
    assert_eq!(docs[2].meta["path"], "b.txt");
}

#[test]
fn text_dir_errors_name_file_line_and_dir() {
    let tmp = TempDir::new().unwrap();
    write(tmp.path(), "good.txt", "fine\n");
    fs::write(
        tmp.path().join("latin1.txt"),
        b"line one\nline two\ncaf\xe9\n",
    )
    .unwrap();
    assert_malformed(
        text_dir::load(tmp.path()).unwrap_err(),
        "latin1.txt",
        3,
        "invalid UTF-8",
    );

    let empty = TempDir::new().unwrap();
    write(empty.path(), "data.csv", "a,b\n");
    let err = text_dir::load(empty.path()).unwrap_err();
    match &err {
        Error::Empty(msg) => assert!(msg.contains(&empty.path().display().to_string()), "{msg}"),
        other => panic!("expected Error::Empty, got {other:?}"),
    }
}

// ------------------------------------------------------------------ the real mirror

/// Load the mirrored data sets from `../shared/mirror` (or `$WORKBENCH_MIRROR`) and
/// check the record counts their SOURCE.md files give. The mirror is always beside
/// the project (it is where `assets fetch` gets these files), so a missing mirror or
/// data set fails the test, naming the path.
#[test]
fn real_mirror_data() {
    let mirror = std::env::var_os("WORKBENCH_MIRROR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/mirror"));
    assert!(
        mirror.is_dir(),
        "no mirror at {}: the data mirror must sit beside the project (../shared/mirror) \
         or be named by WORKBENCH_MIRROR",
        mirror.display()
    );
    let have = |rel: &str| {
        let p = mirror.join(rel);
        assert!(p.exists(), "the mirror lacks {}", p.display());
        p
    };

    let docs = wikitext::load(&have("wikitext-2-raw/wiki.test.raw")).unwrap();
    assert_eq!(docs.len(), 62);
    assert_eq!(docs[0].title, "Robert Boulter");
    assert!(docs.iter().all(|d| !d.text.contains(" @-@ ")));

    let set = squad::load(&have("squad-v2-dev-cs224n-half/dev-v2.0.json")).unwrap();
    assert_eq!(set.examples.len(), 6078);
    assert_eq!(
        set.examples.iter().filter(|q| q.is_unanswerable()).count(),
        3168
    );

    let (docs, qas) = rag_mini::load_csv(
        &have("rag-mini-wikipedia/infos.csv"),
        &have("rag-mini-wikipedia/questions.csv"),
    )
    .unwrap();
    assert_eq!((docs.len(), qas.len()), (3200, 918));

    let set = beir::load(&have("msmarco-trec-dl19-subset"), "test").unwrap();
    assert_eq!(
        (set.corpus.len(), set.queries.len(), set.qrels.len()),
        (5000, 50, 43)
    );
    assert_eq!(set.qrels.values().map(|m| m.len()).sum::<usize>(), 4102);

    // Questions whose only golds normalise to nothing are left out, and counted.
    let nq = nq_open::load(&have("nq-open/NQ-open.dev.jsonl"), BadRecords::Skip).unwrap();
    assert_eq!(nq.questions.len() + nq.skipped.len(), 3610);
    for r in &nq.skipped {
        assert!(r.reason.contains("no usable gold answer"), "{r:?}");
    }
    // `---` (line 291) and `)` (line 364) are those questions' only golds; `A+` and `*`
    // are dropped beside golds that stay.
    assert_eq!(
        nq.skipped.iter().map(|r| r.line).collect::<Vec<_>>(),
        [291, 364]
    );
    let dropped: Vec<&str> = nq.dropped_golds.iter().map(|d| d.answer.as_str()).collect();
    assert_eq!(dropped, ["A+", "*"]);
}
