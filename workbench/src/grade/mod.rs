//! Expected values, graded: every number README.md and docs/ report from a result folder is
//! listed in a conditions file (`data/expected.toml`) with its expected value and a
//! tolerance, and [`grade`] compares each with what `data/results/<name>/` holds now,
//! as pyserini's two-click reproductions do. The same file says which tables of the pages
//! are generated from which result ([`render_readme_table`], [`replace_blocks`]).
//!
//! Grades ([`Grade`]):
//!
//! | grade | when |
//! |---|---|
//! | `OK` | the measured value, rounded to the decimals the expected value is written with, equals it, and the significance mark (`†`, `††`) is the same |
//! | `OKish` | not OK, but within the tolerance, same mark |
//! | `FAIL` | farther than the tolerance, or another mark |
//! | `MISSING` | the result folder, file, row or column is absent, or the cell is not a number |
//! | `STALE` | the result folder is not the one described: an output no longer matches `manifest.json`, `config.json` differs from the pinned fields, or the program that wrote it was rebuilt since |
//! | `reported` | a machine-dependent value (a timing), printed beside its expectation, never graded; flagged when the result says otherwise, since text filled from it would be stale |
//!
//! [`contradictions`] compares the expected values with the committed generated tables (no
//! result folders needed): a table regenerated from a newer result that shows another value
//! than the conditions file is listed by `grade readme`, and fails `grade readme --check`.
//!
//! The file format is documented at the top of `data/expected.toml`.

mod format;
pub mod records;

use crate::assets::sha256_file;
use crate::display::Table;
use crate::results::Manifest;
use crate::{Error, Result};
use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

/// The conditions file: results, expected values and generated tables.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conditions {
    /// The result folders, with the configuration the README's numbers assume.
    #[serde(default)]
    pub result: Vec<ResultSpec>,
    /// Expected values read from CSV files, one block per file and tolerance.
    #[serde(default)]
    pub csv: Vec<CsvBlock>,
    /// Expected values read from JSON files (e.g. `manifest.json`'s summary).
    #[serde(default)]
    pub json: Vec<JsonBlock>,
    /// Values a result must reach whatever its expected value (`[[floor]]`): sanity floors
    /// of models the run trains, such as a re-ranker not below its first stage.
    #[serde(default)]
    pub floor: Vec<FloorBlock>,
    /// Tables of README.md and docs/*.md generated from result files (`[[readme]]`).
    #[serde(default)]
    pub readme: Vec<ReadmeTable>,
    /// Rows of the README's reproduction matrix (`[[headline]]`), whose numbers are
    /// expected values of this file ([`Conditions::render_matrix`]).
    #[serde(default)]
    pub headline: Vec<Headline>,
    #[serde(skip)]
    path: PathBuf,
}

/// One row of the reproduction matrix: a report's figure or table, the `scripts/reproduce`
/// steps that make it, and a sentence whose numbers are expected values of the conditions
/// file, so that `grade` checks them against the results.
///
/// In `text`, `{result|file|row|column}` stands for a CSV expected value and
/// `{result|file|/pointer}` for a JSON one; each is replaced by the expected value as
/// written, without its significance mark.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Headline {
    /// Report number (`000` … `004`), or `–` for a study that belongs to none.
    pub report: String,
    /// The figure or table.
    pub what: String,
    /// The `scripts/reproduce --only` steps.
    pub only: String,
    /// The sentence, with placeholders.
    pub text: String,
    /// Link text of the page.
    pub page: String,
    /// Link target, relative to the README.
    pub link: String,
}

/// Joins the key columns of a CSV block whose rows are named by several columns.
pub const KEY_JOIN: &str = " + ";

/// Id of the generated reproduction matrix ([`Conditions::render_matrix`]).
pub const MATRIX_ID: &str = "matrix";

/// One result folder, `data/results/<name>/`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultSpec {
    /// Folder name under `data/results/`.
    pub name: String,
    /// The binary that writes it (`scripts/bin/<binary>.rs`); its sha256 must equal
    /// `config.json`'s `program_sha256` when the executable is found.
    pub binary: String,
    /// What the result is, for the report.
    pub what: String,
    /// JSON pointers into `config.json` and the value each must have.
    #[serde(default)]
    pub config: BTreeMap<String, Value>,
    /// JSON pointers into `config.json` that must be null or absent.
    #[serde(default)]
    pub unset: Vec<String>,
    /// The scales whose runs produce this folder (`quick`, `default`, `paper`; a
    /// result that is the same at every scale lists them all). Default `["default"]`.
    #[serde(default = "default_scales")]
    pub scales: Vec<crate::env::Scale>,
}

fn default_scales() -> Vec<crate::env::Scale> {
    vec![crate::env::Scale::Default]
}

/// Expected values in a CSV file: rows named by the `key` column, one value per column.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CsvBlock {
    /// Result folder name.
    pub result: String,
    /// CSV file in the result folder.
    pub file: String,
    /// The column whose value names a row, or several joined by ` + ` (`metric + system`)
    /// when one column does not name a row alone; the row keys are then the cells joined the
    /// same way (`EM + fusion`).
    pub key: String,
    /// The columns holding the expected values.
    pub columns: Vec<String>,
    /// Tolerance of every value in the block.
    pub tolerance: ToleranceSpec,
    /// The values are differences whose sign is a claim: a measured value must keep the
    /// expected one's sign (a positive one stays above 0, a negative one below; an expected
    /// 0 may move within the tolerance). Default false.
    #[serde(default)]
    pub same_sign: bool,
    /// `[row key, expected value per column …]`.
    pub rows: Vec<Vec<String>>,
}

/// Expected values in a JSON file, each at a JSON pointer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonBlock {
    /// Result folder name.
    pub result: String,
    /// JSON file in the result folder.
    pub file: String,
    /// The values.
    pub values: Vec<JsonValue>,
}

/// One expected value in a JSON file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonValue {
    /// RFC 6901 pointer, e.g. `/summary/passages`.
    pub pointer: String,
    /// Expected value as the README prints it.
    pub expected: String,
    /// Tolerance.
    pub tolerance: ToleranceSpec,
    /// What the value is.
    pub what: String,
}

/// Floors in a CSV file: each a cell that must be at least a number, or at least another
/// row's value in the same column.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FloorBlock {
    /// Result folder name.
    pub result: String,
    /// CSV file in the result folder.
    pub file: String,
    /// The column whose value names a row (as in [`CsvBlock::key`]).
    pub key: String,
    /// The floors.
    pub checks: Vec<FloorCheck>,
}

/// One floor: `row`'s `column` is at least `at_least`, or at least row `at_least_row`'s
/// value in the same column plus `by`, or at most `at_most` (exactly one of the three).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FloorCheck {
    /// The row (its key).
    pub row: String,
    /// The column.
    pub column: String,
    /// A number the value must reach.
    #[serde(default)]
    pub at_least: Option<String>,
    /// A row whose value (same column) the value must reach.
    #[serde(default)]
    pub at_least_row: Option<String>,
    /// A number the value must not exceed (a count that must stay 0, say).
    #[serde(default)]
    pub at_most: Option<String>,
    /// With `at_least_row`: a margin the value must clear that row's value by (so that a
    /// stage that changes nothing, and scores exactly what it was given, fails).
    #[serde(default)]
    pub by: Option<String>,
    /// Why the floor holds for a sane model (printed with the grade).
    pub what: String,
}

/// A tolerance as written: a number (absolute) or the word `"reported"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ToleranceSpec {
    /// Absolute tolerance, in the unit the file prints.
    Absolute(f64),
    /// A word; only `"reported"` is valid.
    Word(String),
}

/// How far a measured value may be from the expected one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tolerance {
    /// OKish when `|measured − expected| ≤` this.
    Absolute(f64),
    /// Printed, not graded.
    Reported,
    /// OK when the measured value is at least the expected one (a `[[floor]]`), else FAIL.
    Floor,
    /// OK when the measured value is at most the expected one (a `[[floor]]`'s
    /// `at_most`), else FAIL.
    Ceiling,
    /// As `Absolute`, and FAIL when a nonzero expected value's sign is not kept (a
    /// `[[csv]]` block's `same_sign`).
    Signed(f64),
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tolerance::Absolute(t) => write!(f, "±{t}"),
            Tolerance::Reported => write!(f, "reported"),
            Tolerance::Floor => write!(f, "floor"),
            Tolerance::Ceiling => write!(f, "ceiling"),
            Tolerance::Signed(t) => write!(f, "±{t}, same sign"),
        }
    }
}

/// A table of README.md or a docs page generated from a result file, between
/// `<!-- generated:ID -->` and `<!-- /generated:ID -->`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadmeTable {
    /// Marker id.
    pub id: String,
    /// Result folder name.
    pub result: String,
    /// CSV file in the result folder.
    pub file: String,
    /// Columns left out (every other column is shown).
    #[serde(default)]
    pub drop: Vec<String>,
    /// Header renames, CSV column → README header.
    #[serde(default)]
    pub rename: BTreeMap<String, String>,
    /// Lines printed under the table when their field exists.
    #[serde(default)]
    pub notes: Vec<Note>,
    /// Further result folders whose `file`, with the same columns, adds its rows below
    /// (one row per trained model, say). Notes come from `result` only.
    #[serde(default)]
    pub also: Vec<String>,
}

/// A note under a generated table: `text` with `{}` replaced by the JSON value at
/// `pointer` in `file`. A pointer the file does not have is an error naming both.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Note {
    /// JSON file in the result folder.
    pub file: String,
    /// RFC 6901 pointer.
    pub pointer: String,
    /// Text with one `{}`.
    pub text: String,
}

/// An expected value as written: its number, its decimals and its trailing mark.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    /// The text as written, e.g. `0.798††`.
    pub text: String,
    /// Its number.
    pub value: f64,
    /// Digits after the decimal point (sets the OK rounding).
    pub decimals: u32,
    /// What follows the number (a significance mark such as `†`), trimmed; empty if none.
    pub mark: String,
}

impl Expected {
    /// Parse `0.699†`, `9371`, `-1.5`: an optional sign, digits, an optional fraction,
    /// then an optional mark that does not start with a digit. `None` if there is no number.
    pub fn parse(text: &str) -> Option<Self> {
        let t = text.trim();
        let b = t.as_bytes();
        let mut i = 0;
        if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
            i += 1;
        }
        let int_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == int_start {
            return None;
        }
        let mut decimals = 0;
        if i < b.len() && b[i] == b'.' {
            let frac_start = i + 1;
            let mut j = frac_start;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            if j == frac_start {
                return None;
            }
            decimals = (j - frac_start) as u32;
            i = j;
        }
        let value: f64 = t[..i].parse().ok()?;
        let mark = t[i..].trim();
        if mark.starts_with(|c: char| c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E') {
            return None;
        }
        Some(Expected {
            text: t.to_string(),
            value,
            decimals,
            mark: mark.to_string(),
        })
    }
}

/// Where a condition's measured value is.
#[derive(Debug, Clone, PartialEq)]
pub enum Locator {
    /// A CSV cell: the row whose `key_column` is `key`, column `column`.
    Csv {
        /// Column naming rows.
        key_column: String,
        /// Row name.
        key: String,
        /// Column of the value.
        column: String,
    },
    /// A JSON value at an RFC 6901 pointer.
    Json {
        /// The pointer.
        pointer: String,
    },
}

/// One number the README reports: where it is, what it should be, how far it may stray.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// Result folder name.
    pub result: String,
    /// File in the result folder.
    pub file: String,
    /// Where in the file.
    pub locator: Locator,
    /// What it is (`system / metric` for CSV cells).
    pub what: String,
    /// Expected value.
    pub expected: Expected,
    /// Tolerance.
    pub tolerance: Tolerance,
}

impl Conditions {
    /// Read and validate a conditions file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::parse(&text, path)
    }

    /// Parse and validate conditions from text (`path` names the file in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let mut c: Conditions =
            toml::from_str(text).map_err(|e| Error::bad_input(path, e.to_string()))?;
        c.path = path.to_path_buf();
        c.validate()?;
        Ok(c)
    }

    fn bad(&self, message: String) -> Error {
        Error::bad_input(&self.path, message)
    }

    fn validate(&self) -> Result<()> {
        let mut names = std::collections::BTreeSet::new();
        for r in &self.result {
            if !names.insert(r.name.as_str()) {
                return Err(self.bad(format!("[[result]] `{}` is listed twice", r.name)));
            }
            for p in r.config.keys().chain(&r.unset) {
                if !p.starts_with('/') {
                    return Err(self.bad(format!(
                        "[[result]] `{}`: config pointer `{p}` must start with `/`",
                        r.name
                    )));
                }
            }
        }
        let known = |what: &str, result: &str| -> Result<()> {
            if names.contains(result) {
                Ok(())
            } else {
                Err(self.bad(format!(
                    "{what} names result `{result}`, which no [[result]] lists"
                )))
            }
        };
        for (bi, b) in self.csv.iter().enumerate() {
            let at = format!("[[csv]] block {} ({}/{})", bi + 1, b.result, b.file);
            known(&at, &b.result)?;
            let tolerance = self.tolerance(&b.tolerance, &at)?;
            if b.same_sign && !matches!(tolerance, Tolerance::Absolute(_)) {
                return Err(self.bad(format!("{at}: same_sign needs a numeric tolerance")));
            }
            if b.columns.is_empty() || b.rows.is_empty() {
                return Err(self.bad(format!("{at}: needs columns and rows")));
            }
            for (ri, row) in b.rows.iter().enumerate() {
                if row.len() != b.columns.len() + 1 {
                    return Err(self.bad(format!(
                        "{at}, row {}: {} cells, expected {} (the `{}` value, then one per column)",
                        ri + 1,
                        row.len(),
                        b.columns.len() + 1,
                        b.key
                    )));
                }
                for (ci, cell) in row[1..].iter().enumerate() {
                    if Expected::parse(cell).is_none() {
                        return Err(self.bad(format!(
                            "{at}, row `{}`, column `{}`: expected value `{cell}` is not a number",
                            row[0], b.columns[ci]
                        )));
                    }
                }
            }
        }
        for (bi, b) in self.json.iter().enumerate() {
            let at = format!("[[json]] block {} ({}/{})", bi + 1, b.result, b.file);
            known(&at, &b.result)?;
            for v in &b.values {
                self.tolerance(&v.tolerance, &at)?;
                if !v.pointer.starts_with('/') {
                    return Err(
                        self.bad(format!("{at}: pointer `{}` must start with `/`", v.pointer))
                    );
                }
                if Expected::parse(&v.expected).is_none() {
                    return Err(self.bad(format!(
                        "{at}, {}: expected value `{}` is not a number",
                        v.pointer, v.expected
                    )));
                }
            }
        }
        for (bi, b) in self.floor.iter().enumerate() {
            let at = format!("[[floor]] block {} ({}/{})", bi + 1, b.result, b.file);
            known(&at, &b.result)?;
            if b.checks.is_empty() {
                return Err(self.bad(format!("{at}: needs checks")));
            }
            for c in &b.checks {
                let at = format!("{at}, row `{}`, column `{}`", c.row, c.column);
                match (&c.at_least, &c.at_least_row, &c.at_most) {
                    (Some(v), None, None) | (None, None, Some(v)) => {
                        if Expected::parse(v).is_none_or(|e| !e.mark.is_empty()) {
                            return Err(self.bad(format!("{at}: `{v}` is not a number")));
                        }
                    }
                    (None, Some(r), None) if r != &c.row => {}
                    (None, Some(_), None) => {
                        return Err(self.bad(format!("{at}: at_least_row names the row itself")))
                    }
                    _ => {
                        return Err(self.bad(format!(
                            "{at}: give exactly one of at_least, at_least_row and at_most"
                        )))
                    }
                }
                if let Some(by) = &c.by {
                    if c.at_least_row.is_none() {
                        return Err(self.bad(format!("{at}: `by` needs at_least_row")));
                    }
                    if Expected::parse(by).is_none_or(|e| !e.mark.is_empty() || e.value < 0.0) {
                        return Err(
                            self.bad(format!("{at}: by `{by}` is not a non-negative number"))
                        );
                    }
                }
            }
        }
        let mut ids = std::collections::BTreeSet::new();
        for t in &self.readme {
            let at = format!("[[readme]] `{}`", t.id);
            known(&at, &t.result)?;
            for extra in &t.also {
                known(&at, extra)?;
            }
            if !valid_id(&t.id) {
                return Err(self.bad(format!("{at}: an id is letters, digits, `_` and `-`")));
            }
            if !ids.insert(t.id.as_str()) {
                return Err(self.bad(format!("{at} is listed twice")));
            }
            for n in &t.notes {
                if n.text.matches("{}").count() != 1 || !n.pointer.starts_with('/') {
                    return Err(self.bad(format!(
                        "{at}: note `{}` needs exactly one `{{}}` and a pointer starting with `/`",
                        n.text
                    )));
                }
            }
        }
        let all = self.conditions();
        for (i, h) in self.headline.iter().enumerate() {
            fill_headline(&h.text, &all).map_err(|m| {
                self.bad(format!(
                    "[[headline]] {} ({} {}): {m}",
                    i + 1,
                    h.report,
                    h.what
                ))
            })?;
        }
        Ok(())
    }

    /// The reproduction matrix: one row per `[[headline]]` (report, figure / table, the
    /// `--only` steps, the sentence with its expected values filled in, the page).
    ///
    /// With `times`, two columns more: the summed last recorded time of the row's steps at
    /// the quick and the default scale (`not timed` when one of them is not).
    pub fn render_matrix(&self, times: Option<&StepTimes>) -> Result<String> {
        let all = self.conditions();
        let mut header = vec!["report", "figure / table", "`--only`"];
        if times.is_some() {
            header.extend(["quick", "default"]);
        }
        header.extend(["headline (default scale)", "page"]);
        let mut t = Table::new(header);
        for (i, h) in self.headline.iter().enumerate() {
            let text = fill_headline(&h.text, &all).map_err(|m| {
                self.bad(format!(
                    "[[headline]] {} ({} {}): {m}",
                    i + 1,
                    h.report,
                    h.what
                ))
            })?;
            let names: Vec<&str> = h.only.split_whitespace().collect();
            let only: Vec<String> = names.iter().map(|s| format!("`{s}`")).collect();
            let mut row = vec![h.report.clone(), h.what.clone(), only.join(" ")];
            if let Some(times) = times {
                for scale in ["quick", "default"] {
                    row.push(
                        times
                            .sum(&names, scale)
                            .map_or_else(|| "not timed".to_string(), minutes),
                    );
                }
            }
            row.extend([text, format!("[{}]({})", h.page, h.link)]);
            t.push(row)?;
        }
        Ok(t.to_markdown())
    }

    /// `template` (markdown read from `at`) with each placeholder replaced by the expected
    /// value it names, as in a `[[headline]]`: the text of a findings block, whose every
    /// number is then a graded value.
    pub fn render_text(&self, template: &str, at: &Path) -> Result<String> {
        fill_headline(template, &self.conditions()).map_err(|m| Error::bad_input(at, m))
    }

    fn tolerance(&self, t: &ToleranceSpec, at: &str) -> Result<Tolerance> {
        match t {
            ToleranceSpec::Absolute(x) if x.is_finite() && *x >= 0.0 => Ok(Tolerance::Absolute(*x)),
            ToleranceSpec::Word(w) if w == "reported" => Ok(Tolerance::Reported),
            ToleranceSpec::Absolute(x) => {
                Err(self.bad(format!("{at}: tolerance {x} must be a finite number ≥ 0")))
            }
            ToleranceSpec::Word(w) => Err(self.bad(format!(
                "{at}: tolerance `{w}` must be a number or \"reported\""
            ))),
        }
    }

    /// Every condition, in file order: the CSV blocks, then the JSON blocks.
    pub fn conditions(&self) -> Vec<Condition> {
        let mut out = Vec::new();
        for b in &self.csv {
            // Validated in `parse`.
            let tolerance = match self
                .tolerance(&b.tolerance, "")
                .unwrap_or(Tolerance::Reported)
            {
                Tolerance::Absolute(t) if b.same_sign => Tolerance::Signed(t),
                t => t,
            };
            for row in &b.rows {
                for (col, cell) in b.columns.iter().zip(&row[1..]) {
                    if let Some(expected) = Expected::parse(cell) {
                        out.push(Condition {
                            result: b.result.clone(),
                            file: b.file.clone(),
                            locator: Locator::Csv {
                                key_column: b.key.clone(),
                                key: row[0].clone(),
                                column: col.clone(),
                            },
                            what: format!("{} / {col}", row[0]),
                            expected,
                            tolerance,
                        });
                    }
                }
            }
        }
        for b in &self.json {
            for v in &b.values {
                let tolerance = self
                    .tolerance(&v.tolerance, "")
                    .unwrap_or(Tolerance::Reported);
                if let Some(expected) = Expected::parse(&v.expected) {
                    out.push(Condition {
                        result: b.result.clone(),
                        file: b.file.clone(),
                        locator: Locator::Json {
                            pointer: v.pointer.clone(),
                        },
                        what: v.what.clone(),
                        expected,
                        tolerance,
                    });
                }
            }
        }
        out
    }
}

/// `text` with each `{result|file|row|column}` / `{result|file|/pointer}` replaced by the
/// expected value it names (without its mark). Errors name the placeholder: one that is
/// not closed, has another shape, or names no condition, or two conditions that disagree.
fn fill_headline(text: &str, all: &[Condition]) -> std::result::Result<String, String> {
    fill_placeholders(
        text,
        || format!("`{{` without `}}` in `{text}`"),
        |inner| {
            let parts: Vec<&str> = inner.split('|').collect();
            let found: Vec<&Condition> = match parts.as_slice() {
            [result, file, pointer] if pointer.starts_with('/') => all
                .iter()
                .filter(|c| {
                    c.result == *result
                        && c.file == *file
                        && matches!(&c.locator, Locator::Json { pointer: p } if p == pointer)
                })
                .collect(),
            [result, file, row, column] => all
                .iter()
                .filter(|c| {
                    c.result == *result
                        && c.file == *file
                        && matches!(&c.locator, Locator::Csv { key, column: col, .. } if key == row && col == column)
                })
                .collect(),
            _ => {
                return Err(format!(
                    "placeholder `{{{inner}}}` is neither `{{result|file|row|column}}` nor `{{result|file|/pointer}}`"
                ))
            }
        };
            let Some(first) = found.first() else {
                return Err(format!("placeholder `{{{inner}}}` names no expected value"));
            };
            if found.iter().any(|c| c.expected.text != first.expected.text) {
                let all: Vec<&str> = found.iter().map(|c| c.expected.text.as_str()).collect();
                return Err(format!(
                    "placeholder `{{{inner}}}` names expected values that differ: {}",
                    all.join(", ")
                ));
            }
            let e = &first.expected;
            Ok(format::thousands(
                e.text[..e.text.len() - e.mark.len()].trim_end(),
            ))
        },
    )
}

/// `template` with each `{inner}` replaced by `value(inner)` and `{{` / `}}` by a literal
/// brace ([`crate::text::template_pieces`]); `unclosed` is the error for a `{` without its
/// `}`. A lone `}` is copied.
fn fill_placeholders<E>(
    template: &str,
    unclosed: impl FnOnce() -> E,
    mut value: impl FnMut(&str) -> std::result::Result<String, E>,
) -> std::result::Result<String, E> {
    use crate::text::TemplatePiece as T;
    let mut out = String::with_capacity(template.len());
    for piece in crate::text::template_pieces(template) {
        match piece {
            T::Slot(inner) => out.push_str(&value(inner)?),
            T::Escape(e) => out.push_str(&e[..1]),
            T::Unclosed(_) => return Err(unclosed()),
            other => out.push_str(&other.source()),
        }
    }
    Ok(out)
}

/// The grade of one condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grade {
    /// Equal at the expected value's printed precision.
    Ok,
    /// Within the tolerance.
    OkIsh,
    /// Outside the tolerance, or another significance mark.
    Fail,
    /// Result, file, row or column absent, or not a number.
    Missing,
    /// The result folder is not the one the conditions describe.
    Stale,
    /// Not graded (machine-dependent).
    Reported,
}

impl fmt::Display for Grade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Grade::Ok => "OK",
            Grade::OkIsh => "OKish",
            Grade::Fail => "FAIL",
            Grade::Missing => "MISSING",
            Grade::Stale => "STALE",
            Grade::Reported => "reported",
        })
    }
}

/// Grade a measured value (`measured_mark`: the text after its number) against an expected one.
/// Returns the grade and, when it is not OK, why.
pub fn grade_value(
    expected: &Expected,
    tolerance: Tolerance,
    measured: f64,
    measured_mark: &str,
) -> (Grade, Option<String>) {
    if !measured.is_finite() && tolerance != Tolerance::Reported {
        return (Grade::Fail, Some(format!("measured {measured}")));
    }
    let tol = match tolerance {
        Tolerance::Reported => return (Grade::Reported, None),
        Tolerance::Floor => {
            // At least the floor itself (a value below it by more than binary rounding of
            // decimal text fails, however it prints).
            let eps = 1e-9 * expected.value.abs().max(1.0);
            return if measured >= expected.value - eps {
                (Grade::Ok, None)
            } else {
                (
                    Grade::Fail,
                    Some(format!(
                        "below the floor by {:.3e}",
                        expected.value - measured
                    )),
                )
            };
        }
        Tolerance::Ceiling => {
            let eps = 1e-9 * expected.value.abs().max(1.0);
            return if measured <= expected.value + eps {
                (Grade::Ok, None)
            } else {
                (
                    Grade::Fail,
                    Some(format!(
                        "above the ceiling by {:.3e}",
                        measured - expected.value
                    )),
                )
            };
        }
        Tolerance::Signed(t) => {
            let flipped = (expected.value > 0.0 && measured <= 0.0)
                || (expected.value < 0.0 && measured >= 0.0);
            if flipped {
                return (
                    Grade::Fail,
                    Some(format!(
                        "sign changed: expected {}, measured {measured}",
                        expected.text
                    )),
                );
            }
            t
        }
        Tolerance::Absolute(t) => t,
    };
    let diff = (measured - expected.value).abs();
    // Rounding to the expected value's decimals, with room for binary representation.
    let eps = 1e-9 * expected.value.abs().max(1.0);
    let half_unit = 0.5 * 10f64.powi(-(expected.decimals as i32));
    let mark_note = || {
        let show = |m: &str| {
            if m.is_empty() {
                "no mark".to_string()
            } else {
                format!("mark {m}")
            }
        };
        format!(
            "significance: expected {}, measured {}",
            show(&expected.mark),
            show(measured_mark)
        )
    };
    let same_mark = expected.mark == measured_mark;
    if diff <= half_unit + eps {
        if same_mark {
            (Grade::Ok, None)
        } else {
            (Grade::Fail, Some(mark_note()))
        }
    } else if diff <= tol + eps {
        if same_mark {
            (Grade::OkIsh, Some(format!("off by {diff:.3e} (≤ {tol})")))
        } else {
            (Grade::Fail, Some(mark_note()))
        }
    } else {
        (Grade::Fail, Some(format!("off by {diff:.3e} (> {tol})")))
    }
}

/// Whether a result folder is the one the conditions describe.
#[derive(Debug, Clone, PartialEq)]
pub enum Freshness {
    /// Outputs unchanged, pinned config fields as expected, program unchanged
    /// (the strings say what was checked).
    Fresh(Vec<String>),
    /// The reasons it is not.
    Stale(Vec<String>),
    /// The folder does not exist.
    Missing(String),
}

/// Check a result folder: the manifest's checksums, the pinned config fields, and (when
/// `bin_dir` holds the binary) the program's sha256 against `config.json`'s `program_sha256`.
pub fn check_result(spec: &ResultSpec, results_dir: &Path, bin_dir: Option<&Path>) -> Freshness {
    let dir = results_dir.join(&spec.name);
    if !dir.is_dir() {
        return Freshness::Missing(format!(
            "{} does not exist (run `cargo run --release --bin {}`)",
            dir.display(),
            spec.binary
        ));
    }
    let mut stale = Vec::new();
    let mut checked = Vec::new();
    let manifest_path = dir.join("manifest.json");
    match std::fs::read_to_string(&manifest_path)
        .map_err(|e| e.to_string())
        .and_then(|s| serde_json::from_str::<Manifest>(&s).map_err(|e| e.to_string()))
    {
        Err(e) => stale.push(format!("{}: {e}", manifest_path.display())),
        Ok(m) => {
            let mut bad = 0;
            for (file, sha) in &m.outputs {
                match sha256_file(&dir.join(file)) {
                    Ok(s) if s.eq_ignore_ascii_case(sha) => {}
                    Ok(_) => {
                        bad += 1;
                        stale.push(format!("{file} changed since manifest.json was written"))
                    }
                    Err(e) => {
                        bad += 1;
                        stale.push(e.to_string())
                    }
                }
            }
            if bad == 0 {
                checked.push(format!("{} outputs match manifest.json", m.outputs.len()));
            }
        }
    }
    let config_path = dir.join("config.json");
    let config = std::fs::read_to_string(&config_path)
        .map_err(|e| e.to_string())
        .and_then(|s| serde_json::from_str::<Value>(&s).map_err(|e| e.to_string()));
    match &config {
        Err(e) => stale.push(format!("{}: {e}", config_path.display())),
        Ok(cfg) => {
            let before = stale.len();
            for (p, want) in &spec.config {
                match cfg.pointer(p) {
                    None => stale.push(format!("config.json has no {p} (expected {want})")),
                    Some(got) if !same_json(got, want) => {
                        stale.push(format!("config.json {p} is {got}, expected {want}"))
                    }
                    Some(_) => {}
                }
            }
            for p in &spec.unset {
                if let Some(got) = cfg.pointer(p).filter(|v| !v.is_null()) {
                    stale.push(format!("config.json {p} is {got}, expected null"));
                }
            }
            let pins = spec.config.len() + spec.unset.len();
            if stale.len() == before && pins > 0 {
                checked.push(format!("{pins} config fields as expected"));
            }
        }
    }
    if let (Some(bin), Ok(cfg)) = (bin_dir, &config) {
        let exe = bin.join(&spec.binary);
        if exe.is_file() {
            match (
                sha256_file(&exe),
                cfg.pointer("/program_sha256").and_then(Value::as_str),
            ) {
                (Ok(now), Some(then)) if now == then => {
                    checked.push(format!("written by the current {}", spec.binary))
                }
                (Ok(_), Some(_)) => stale.push(format!(
                    "written by another build of {} than {} (rerun it)",
                    spec.binary,
                    exe.display()
                )),
                (Ok(_), None) => stale.push("config.json has no /program_sha256".to_string()),
                (Err(e), _) => stale.push(e.to_string()),
            }
        } else {
            checked.push(format!("program not checked (no {})", exe.display()));
        }
    }
    if stale.is_empty() {
        Freshness::Fresh(checked)
    } else {
        Freshness::Stale(stale)
    }
}

/// JSON equality with numbers compared as numbers (`30` equals `30.0`).
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_json(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// One graded condition.
#[derive(Debug, Clone)]
pub struct Graded {
    /// The condition.
    pub condition: Condition,
    /// The measured value as found (cell text or JSON), if found.
    pub measured: Option<String>,
    /// The grade.
    pub grade: Grade,
    /// Why, when not OK.
    pub note: Option<String>,
}

/// The outcome of grading every condition.
#[derive(Debug, Clone)]
pub struct Report {
    /// Each result folder and its freshness, in conditions-file order.
    pub results: Vec<(ResultSpec, Freshness)>,
    /// Each condition's grade, grouped by result.
    pub graded: Vec<Graded>,
}

/// How many conditions got each grade.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// `OK`.
    pub ok: usize,
    /// `OKish`.
    pub okish: usize,
    /// `FAIL`.
    pub fail: usize,
    /// `MISSING`.
    pub missing: usize,
    /// `STALE`.
    pub stale: usize,
    /// `reported` (not graded).
    pub reported: usize,
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "grades: {} OK, {} OKish, {} FAIL, {} MISSING, {} STALE; {} reported (not graded)",
            self.ok, self.okish, self.fail, self.missing, self.stale, self.reported
        )
    }
}

impl Report {
    /// Counts per grade.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for g in &self.graded {
            match g.grade {
                Grade::Ok => c.ok += 1,
                Grade::OkIsh => c.okish += 1,
                Grade::Fail => c.fail += 1,
                Grade::Missing => c.missing += 1,
                Grade::Stale => c.stale += 1,
                Grade::Reported => c.reported += 1,
            }
        }
        c
    }

    /// True when every graded condition is OK or OKish.
    pub fn passed(&self) -> bool {
        let c = self.counts();
        c.fail + c.missing + c.stale == 0
    }

    /// The report as text: per result its freshness, then one aligned line per
    /// condition (file, what, expected, measured, grade, why), then the counts.
    pub fn render(&self) -> String {
        let width = |f: &dyn Fn(&Graded) -> usize| self.graded.iter().map(f).max().unwrap_or(0);
        let chars = |s: &str| s.chars().count();
        let w_file = width(&|g| chars(&g.condition.file));
        let w_what = width(&|g| chars(&g.condition.what));
        let w_exp = width(&|g| chars(&g.condition.expected.text)).max(8);
        let w_meas = width(&|g| g.measured.as_deref().map_or(1, chars)).max(8);
        let pad = |s: &str, w: usize| format!("{s}{}", " ".repeat(w.saturating_sub(chars(s))));
        let mut out = String::new();
        for (spec, fresh) in &self.results {
            let status = match fresh {
                Freshness::Fresh(checks) if checks.is_empty() => "fresh".to_string(),
                Freshness::Fresh(checks) => format!("fresh ({})", checks.join("; ")),
                Freshness::Stale(why) => format!("STALE: {}", why.join("; ")),
                Freshness::Missing(why) => format!("MISSING: {why}"),
            };
            out += &format!("\n{} — {}\n  {status}\n", spec.name, spec.what);
            out += &format!(
                "  {} {} {} {} grade\n",
                pad("file", w_file),
                pad("value", w_what),
                pad("expected", w_exp),
                pad("measured", w_meas)
            );
            for g in self
                .graded
                .iter()
                .filter(|g| g.condition.result == spec.name)
            {
                let mut line = format!(
                    "  {} {} {} {} {}",
                    pad(&g.condition.file, w_file),
                    pad(&g.condition.what, w_what),
                    pad(&g.condition.expected.text, w_exp),
                    pad(g.measured.as_deref().unwrap_or("–"), w_meas),
                    g.grade
                );
                if g.grade != Grade::Ok && g.condition.tolerance != Tolerance::Reported {
                    line += &format!(" [{}]", g.condition.tolerance);
                }
                if let Some(n) = &g.note {
                    line += &format!("  {n}");
                }
                out += line.trim_end();
                out.push('\n');
            }
        }
        out += &format!("\n{}\n", self.counts());
        out
    }
}

/// A file of a result folder, read once for every condition that needs it.
enum Loaded {
    Csv(Table),
    Json(Value),
}

fn load_file(path: &Path) -> std::result::Result<Loaded, String> {
    if !path.is_file() {
        return Err(format!("{} does not exist", path.display()));
    }
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "csv" => Table::read_csv(path)
            .map(Loaded::Csv)
            .map_err(|e| e.to_string()),
        "json" => std::fs::read_to_string(path)
            .map_err(|e| format!("{}: {e}", path.display()))
            .and_then(|s| {
                serde_json::from_str(&s)
                    .map(Loaded::Json)
                    .map_err(|e| format!("{}: {e}", path.display()))
            }),
        _ => Err(format!(
            "{}: only .csv and .json files can be graded",
            path.display()
        )),
    }
}

/// Find a condition's value in a loaded file: its text, number and mark. A JSON float is
/// shown with `show_decimals` decimals (graded at full precision).
fn measure(
    loaded: &Loaded,
    file: &str,
    locator: &Locator,
    show_decimals: usize,
) -> std::result::Result<(String, f64, String), String> {
    match (loaded, locator) {
        (
            Loaded::Csv(t),
            Locator::Csv {
                key_column,
                key,
                column,
            },
        ) => {
            let col = |name: &str| {
                t.header.iter().position(|h| h == name).ok_or_else(|| {
                    format!(
                        "{file} has no column `{name}` (columns: {})",
                        t.header.join(", ")
                    )
                })
            };
            let kcs = key_column
                .split(KEY_JOIN)
                .map(col)
                .collect::<std::result::Result<Vec<usize>, String>>()?;
            let vc = col(column)?;
            let row_key = |r: &Vec<String>| {
                kcs.iter()
                    .map(|&k| r[k].as_str())
                    .collect::<Vec<_>>()
                    .join(KEY_JOIN)
            };
            let rows: Vec<&Vec<String>> = t.rows.iter().filter(|r| row_key(r) == *key).collect();
            let row = match rows.as_slice() {
                [r] => r,
                [] => return Err(format!("{file} has no row with {key_column} = `{key}`")),
                _ => {
                    return Err(format!(
                        "{file} has {} rows with {key_column} = `{key}`",
                        rows.len()
                    ))
                }
            };
            let cell = &row[vc];
            let e = Expected::parse(cell)
                .ok_or_else(|| format!("{file} {key} / {column}: `{cell}` is not a number"))?;
            Ok((cell.clone(), e.value, e.mark))
        }
        (Loaded::Json(v), Locator::Json { pointer }) => match v.pointer(pointer) {
            None => Err(format!("{file} has no {pointer}")),
            Some(Value::Number(n)) => n
                .as_f64()
                .map(|x| {
                    let text = if n.is_f64() {
                        format!("{x:.show_decimals$}")
                    } else {
                        n.to_string()
                    };
                    (text, x, String::new())
                })
                .ok_or_else(|| format!("{file} {pointer}: {n} is not a finite number")),
            Some(Value::String(s)) => Expected::parse(s)
                .map(|e| (s.clone(), e.value, e.mark))
                .ok_or_else(|| format!("{file} {pointer}: `{s}` is not a number")),
            Some(other) => Err(format!("{file} {pointer}: {other} is not a number")),
        },
        (Loaded::Csv(_), Locator::Json { .. }) => Err(format!("{file} is CSV, not JSON")),
        (Loaded::Json(_), Locator::Csv { .. }) => Err(format!("{file} is JSON, not CSV")),
    }
}

impl Conditions {
    /// Only the results of `scale`, with their expected values (README tables are kept).
    pub fn at_scale(&self, scale: crate::env::Scale) -> Conditions {
        self.keep_results(|r| r.scales.contains(&scale))
    }

    /// The results of every step of `steps` taken out: a step of `scripts/reproduce` that
    /// was not run on purpose (an online-only data set on a machine without internet)
    /// writes the result `<step>` (`<step>-quick` at the quick scale). An error names a
    /// step that no result stands for.
    pub fn without_steps(&self, steps: &[String]) -> Result<Conditions> {
        let of = |step: &str, name: &str| name == step || name == format!("{step}-quick");
        if let Some(s) = steps
            .iter()
            .find(|s| !self.result.iter().any(|r| of(s, &r.name)))
        {
            return Err(self.bad(format!("step `{s}`: no [[result]] `{s}` or `{s}-quick`")));
        }
        Ok(self.keep_results(|r| !steps.iter().any(|s| of(s, &r.name))))
    }

    /// The results `keep` accepts, with their expected values (README tables are kept).
    fn keep_results(&self, keep: impl Fn(&ResultSpec) -> bool) -> Conditions {
        let result: Vec<ResultSpec> = self.result.iter().filter(|r| keep(r)).cloned().collect();
        let kept = |name: &str| result.iter().any(|r| r.name == name);
        Conditions {
            csv: self
                .csv
                .iter()
                .filter(|b| kept(&b.result))
                .cloned()
                .collect(),
            json: self
                .json
                .iter()
                .filter(|b| kept(&b.result))
                .cloned()
                .collect(),
            floor: self
                .floor
                .iter()
                .filter(|b| kept(&b.result))
                .cloned()
                .collect(),
            readme: self.readme.clone(),
            headline: self.headline.clone(),
            path: self.path.clone(),
            result,
        }
    }
}

/// Grade every condition against `results_dir/<name>/`. `bin_dir` is where the result
/// binaries are (for the program check; `None` skips it). Missing folders, files, rows
/// and columns become `MISSING` grades, not errors.
pub fn grade(conditions: &Conditions, results_dir: &Path, bin_dir: Option<&Path>) -> Report {
    let results: Vec<(ResultSpec, Freshness)> = conditions
        .result
        .iter()
        .map(|r| (r.clone(), check_result(r, results_dir, bin_dir)))
        .collect();
    let fresh: HashMap<&str, &Freshness> =
        results.iter().map(|(r, f)| (r.name.as_str(), f)).collect();
    let mut files: HashMap<PathBuf, std::result::Result<Loaded, String>> = HashMap::new();
    let mut graded = Vec::new();
    let all = conditions.conditions();
    // Group by result, in [[result]] order.
    for (spec, _) in &results {
        for c in all.iter().filter(|c| c.result == spec.name) {
            let freshness = fresh[c.result.as_str()];
            if let Freshness::Missing(_) = freshness {
                graded.push(Graded {
                    condition: c.clone(),
                    measured: None,
                    grade: if c.tolerance == Tolerance::Reported {
                        Grade::Reported
                    } else {
                        Grade::Missing
                    },
                    note: Some(format!("no folder {}", c.result)),
                });
                continue;
            }
            let path = results_dir.join(&c.result).join(&c.file);
            let loaded = files
                .entry(path.clone())
                .or_insert_with(|| load_file(&path));
            let g = match loaded.as_ref().map_err(Clone::clone).and_then(|l| {
                // Two decimals more than the expected value, at least four.
                let show = (c.expected.decimals as usize + 2).max(4);
                measure(l, &c.file, &c.locator, show)
            }) {
                Err(why) => Graded {
                    condition: c.clone(),
                    measured: None,
                    grade: if c.tolerance == Tolerance::Reported {
                        Grade::Reported
                    } else {
                        Grade::Missing
                    },
                    note: Some(why),
                },
                Ok((text, value, mark)) => {
                    let (mut grade, mut note) = grade_value(&c.expected, c.tolerance, value, &mark);
                    // A reported value is not graded, but text filled from it (findings,
                    // the matrix) goes stale when a newer result says otherwise.
                    if grade == Grade::Reported
                        && grade_value(&c.expected, Tolerance::Absolute(0.0), value, &mark).0
                            != Grade::Ok
                    {
                        note = Some(format!(
                            "FLAGGED: the result says {text}; copy it into the conditions file so the pages' text follows"
                        ));
                    }
                    if matches!(freshness, Freshness::Stale(_)) && grade != Grade::Reported {
                        (grade, note) = stale(grade, note);
                    }
                    Graded {
                        condition: c.clone(),
                        measured: Some(text),
                        grade,
                        note,
                    }
                }
            };
            graded.push(g);
        }
        for b in conditions.floor.iter().filter(|b| b.result == spec.name) {
            let freshness = fresh[b.result.as_str()];
            let path = results_dir.join(&b.result).join(&b.file);
            for c in &b.checks {
                graded.push(grade_floor(b, c, freshness, &path, &mut files));
            }
        }
    }
    Report { results, graded }
}

/// A grade on a stale folder: STALE, the note saying what it would have been.
fn stale(grade: Grade, note: Option<String>) -> (Grade, Option<String>) {
    let why = note.map(|n| format!(": {n}")).unwrap_or_default();
    (Grade::Stale, Some(format!("would be {grade}{why}")))
}

/// Grade one `[[floor]]` check: the cell, and the floor (a number, or another row's cell).
fn grade_floor(
    b: &FloorBlock,
    c: &FloorCheck,
    freshness: &Freshness,
    path: &Path,
    files: &mut HashMap<PathBuf, std::result::Result<Loaded, String>>,
) -> Graded {
    let cell = |row: &str| Locator::Csv {
        key_column: b.key.clone(),
        key: row.to_string(),
        column: c.column.clone(),
    };
    let what = format!("{} / {} (floor: {})", c.row, c.column, c.what);
    let mut condition = Condition {
        result: b.result.clone(),
        file: b.file.clone(),
        locator: cell(&c.row),
        what,
        expected: Expected {
            text: match (&c.at_least, &c.at_least_row, &c.at_most) {
                (Some(v), _, _) => format!("≥ {v}"),
                (_, Some(r), _) => match &c.by {
                    Some(by) => format!("≥ row `{r}` + {by}"),
                    None => format!("≥ row `{r}`"),
                },
                (_, _, Some(v)) => format!("≤ {v}"),
                _ => String::new(),
            },
            value: f64::NAN,
            decimals: 0,
            mark: String::new(),
        },
        tolerance: if c.at_most.is_some() {
            Tolerance::Ceiling
        } else {
            Tolerance::Floor
        },
    };
    let missing = |condition: Condition, why: String| Graded {
        condition,
        measured: None,
        grade: Grade::Missing,
        note: Some(why),
    };
    if let Freshness::Missing(_) = freshness {
        return missing(condition, format!("no folder {}", b.result));
    }
    let loaded = files
        .entry(path.to_path_buf())
        .or_insert_with(|| load_file(path));
    let loaded = match loaded {
        Ok(l) => l,
        Err(why) => return missing(condition, why.clone()),
    };
    // The floor: a number, or the other row's cell (its significance mark dropped).
    let floor = match (&c.at_least, &c.at_least_row, &c.at_most) {
        (Some(v), _, _) => Expected::parse(v)
            .map(|e| (e, format!("≥ {v}")))
            .ok_or_else(|| format!("at_least `{v}` is not a number")),
        (_, _, Some(v)) => Expected::parse(v)
            .map(|e| (e, format!("≤ {v}")))
            .ok_or_else(|| format!("at_most `{v}` is not a number")),
        (_, Some(r), _) => measure(loaded, &b.file, &cell(r), 4).and_then(|(text, _, _)| {
            let other = Expected::parse(&text)
                .ok_or_else(|| format!("row `{r}`: `{text}` is not a number"))?;
            match &c.by {
                None => Ok((other, format!("≥ {text} (`{r}`)"))),
                Some(by) => {
                    let margin =
                        Expected::parse(by).ok_or_else(|| format!("by `{by}` is not a number"))?;
                    let value = other.value + margin.value;
                    Ok((
                        Expected { value, ..other },
                        format!("≥ {text} (`{r}`) + {by}"),
                    ))
                }
            }
        }),
        _ => Err("none of at_least, at_least_row and at_most".to_string()),
    };
    match floor {
        Ok((e, text)) => {
            condition.expected = Expected {
                text,
                mark: String::new(),
                ..e
            }
        }
        Err(why) => return missing(condition, why),
    }
    match measure(loaded, &b.file, &condition.locator, 4) {
        Err(why) => missing(condition, why),
        Ok((text, value, _mark)) => {
            let (grade, note) = grade_value(&condition.expected, condition.tolerance, value, "");
            let (grade, note) = if matches!(freshness, Freshness::Stale(_)) {
                stale(grade, note)
            } else {
                (grade, note)
            };
            Graded {
                condition,
                measured: Some(text),
                grade,
                note,
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Tables of README.md and docs/*.md generated from results.

/// The opening marker of a generated block.
pub fn start_marker(id: &str) -> String {
    format!("<!-- generated:{id} -->")
}

/// The closing marker of a generated block.
pub fn end_marker(id: &str) -> String {
    format!("<!-- /generated:{id} -->")
}

/// A JSON value as a README note shows it: integers ≥ 1,000 with thousands separators,
/// strings without quotes.
fn show_json(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_i64() {
            Some(i) if i.abs() >= 1000 => {
                let s = format::thousands(&i.abs().to_string());
                if i < 0 {
                    format!("-{s}")
                } else {
                    s
                }
            }
            // Floats (run times in seconds, rates) to whole units from 100, else 2 decimals.
            _ => match n.as_f64() {
                Some(x) if n.as_i64().is_none() && x.abs() >= 100.0 => format!("{x:.0}"),
                Some(x) if n.as_i64().is_none() && n.as_u64().is_none() => format!("{x:.2}"),
                _ => n.to_string(),
            },
        },
        other => other.to_string(),
    }
}

/// The Markdown of one generated table: the CSV's columns except `drop`, headers renamed,
/// then a line naming the source file and its notes.
pub fn render_readme_table(spec: &ReadmeTable, results_dir: &Path) -> Result<String> {
    let dir = results_dir.join(&spec.result);
    let path = dir.join(&spec.file);
    if !path.is_file() {
        return Err(Error::bad_input(
            &path,
            format!(
                "generated table `{}` comes from this file, which does not exist; run its experiment first",
                spec.id
            ),
        ));
    }
    let t = Table::read_csv(&path)?;
    for c in spec.drop.iter().chain(spec.rename.keys()) {
        if !t.header.contains(c) {
            return Err(Error::bad_input(
                &path,
                format!(
                    "generated table `{}` drops or renames column `{c}`, which the file does not have (columns: {})",
                    spec.id,
                    t.header.join(", ")
                ),
            ));
        }
    }
    let keep: Vec<usize> = (0..t.header.len())
        .filter(|&i| !spec.drop.contains(&t.header[i]))
        .collect();
    let mut out = Table::new(keep.iter().map(|&i| {
        spec.rename
            .get(&t.header[i])
            .cloned()
            .unwrap_or_else(|| t.header[i].clone())
    }));
    for r in &t.rows {
        out.push(keep.iter().map(|&i| r[i].clone()))?;
    }
    for extra in &spec.also {
        let p = results_dir.join(extra).join(&spec.file);
        if !p.is_file() {
            return Err(Error::bad_input(
                &p,
                format!(
                    "generated table `{}` adds the rows of this file, which does not exist; run its experiment first",
                    spec.id
                ),
            ));
        }
        let more = Table::read_csv(&p)?;
        if more.header != t.header {
            return Err(Error::bad_input(
                &p,
                format!(
                    "generated table `{}`: columns {} differ from {}'s {}",
                    spec.id,
                    more.header.join(", "),
                    path.display(),
                    t.header.join(", ")
                ),
            ));
        }
        for r in &more.rows {
            out.push(keep.iter().map(|&i| r[i].clone()))?;
        }
    }
    let mut jsons: HashMap<&str, Value> = HashMap::new();
    let mut notes = Vec::new();
    for n in &spec.notes {
        if !jsons.contains_key(n.file.as_str()) {
            let p = dir.join(&n.file);
            let text = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
            let v: Value =
                serde_json::from_str(&text).map_err(|e| Error::bad_input(&p, e.to_string()))?;
            jsons.insert(n.file.as_str(), v);
        }
        let Some(v) = jsons[n.file.as_str()].pointer(&n.pointer) else {
            return Err(Error::bad_input(
                dir.join(&n.file),
                format!(
                    "generated table `{}` has the note `{}`, but the file has no `{}`",
                    spec.id, n.text, n.pointer
                ),
            ));
        };
        notes.push(n.text.replacen("{}", &show_json(v), 1));
    }
    let mut source = format!(
        "Generated from `data/results/{}/{}`",
        spec.result, spec.file
    );
    for extra in &spec.also {
        source += &format!(", `data/results/{extra}/{}`", spec.file);
    }
    if !notes.is_empty() {
        source += "; ";
        source += &notes.join("; ");
    }
    source += ".";
    // A blank line ends the table (GitHub would read the next line as a row).
    Ok(format!("{}\n{source}\n", out.to_markdown()))
}

/// The text between a block's markers, if both are present once, in order.
pub fn block_content<'a>(readme: &'a str, id: &str, path: &Path) -> Result<&'a str> {
    let (start, end) = (start_marker(id), end_marker(id));
    let count = |m: &str| readme.matches(m).count();
    if count(&start) != 1 || count(&end) != 1 {
        return Err(Error::bad_input(
            path,
            format!(
                "needs `{start}` and `{end}` once each around the generated table `{id}` (found {} and {})",
                count(&start),
                count(&end)
            ),
        ));
    }
    let s = readme.find(&start).expect("counted") + start.len();
    let e = readme.find(&end).expect("counted");
    if e < s {
        return Err(Error::bad_input(
            path,
            format!("`{end}` comes before `{start}`"),
        ));
    }
    Ok(&readme[s..e])
}

/// Whether `id` can name a generated block: letters, digits, `_` and `-`.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
}

/// Ids of every generated block a page has opening markers for (text that only
/// mentions the marker syntax, such as `<!-- generated:… -->`, is not a marker).
pub fn marked_ids(readme: &str) -> Vec<String> {
    let prefix = "<!-- generated:";
    readme
        .match_indices(prefix)
        .filter_map(|(i, _)| {
            let rest = &readme[i + prefix.len()..];
            rest.find(" -->")
                .map(|e| &rest[..e])
                .filter(|id| valid_id(id))
                .map(String::from)
        })
        .collect()
}

/// The page with each block `(id, table)` put between its markers (a blank line on
/// each side). Every id must have its markers, and every marked block an entry.
pub fn replace_blocks(readme: &str, blocks: &[(String, String)], path: &Path) -> Result<String> {
    for id in marked_ids(readme) {
        if !blocks.iter().any(|(b, _)| *b == id) {
            return Err(Error::bad_input(
                path,
                format!("has a generated block `{id}` that the conditions file does not describe"),
            ));
        }
    }
    let mut text = readme.to_string();
    for (id, table) in blocks {
        let old = block_content(&text, id, path)?;
        let start = text.find(&start_marker(id)).expect("checked") + start_marker(id).len();
        let end = start + old.len();
        text = format!(
            "{}\n\n{}\n\n{}",
            &text[..start],
            table.trim_end(),
            &text[end..]
        );
    }
    Ok(text)
}

/// Lines that differ between a page's block and the generated one, as
/// `- page` / `+ results` pairs (empty when equal).
pub fn block_diff(current: &str, generated: &str) -> Vec<String> {
    let a: Vec<&str> = current.trim().lines().collect();
    let b: Vec<&str> = generated.trim().lines().collect();
    let mut out = Vec::new();
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (a.get(i), b.get(i));
        if x != y {
            if let Some(x) = x {
                out.push(format!("- {x}"));
            }
            if let Some(y) = y {
                out.push(format!("+ {y}"));
            }
        }
    }
    out
}

/// The pages that may hold generated blocks: `README.md` and every `docs/*.md` under
/// `root` (not in subfolders), README first, then the docs pages sorted by name. A
/// missing `README.md` or `docs/` folder is left out, not an error.
pub fn pages(root: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let readme = root.join("README.md");
    if readme.is_file() {
        out.push(readme);
    }
    let docs = root.join("docs");
    if docs.is_dir() {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&docs).map_err(|e| Error::io(&docs, e))? {
            let p = entry.map_err(|e| Error::io(&docs, e))?.path();
            if p.is_file() && p.extension().is_some_and(|e| e == "md") {
                found.push(p);
            }
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

/// Id of the generated block with each `scripts/reproduce` step's last measured time per
/// scale ([`render_step_times`]).
pub const STEP_TIMES_ID: &str = "step-times";

/// `m`m`ss`s (`h`h`mm`m from an hour), as `scripts/reproduce` prints step times.
fn minutes(secs: f64) -> String {
    let s = secs.round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600 + 30) / 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// The steps of `scripts/reproduce` and the last recorded time of each at each scale.
#[derive(Debug, Clone, Default)]
pub struct StepTimes {
    /// `(name, scales, what)` in the script's order.
    pub steps: Vec<(String, Vec<String>, String)>,
    /// `(step, scale)` → `(seconds, finished, load)` of the last recorded line.
    pub last: HashMap<(String, String), (f64, String, String)>,
}

impl StepTimes {
    /// Read `reproduce` (the script, whose `STEPS` lines are `"name|scales|what"`) and
    /// `times` (the TSV `step, scale, seconds, date, CPU, load`; absent = nothing timed).
    ///
    /// Errors: a script without steps, a TSV line with fewer than three fields or a time
    /// that is not a number (each naming the file and line).
    pub fn load(reproduce: &Path, times: &Path) -> Result<Self> {
        let (steps, last) = read_step_times(reproduce, times)?;
        Ok(StepTimes { steps, last })
    }

    /// The summed last times of `names` at `scale`; `None` when one is not timed.
    pub fn sum(&self, names: &[&str], scale: &str) -> Option<f64> {
        names
            .iter()
            .map(|n| {
                self.last
                    .get(&(n.to_string(), scale.to_string()))
                    .map(|t| t.0)
            })
            .sum()
    }
}

type StepList = Vec<(String, Vec<String>, String)>;
type LastTimes = HashMap<(String, String), (f64, String, String)>;

/// The table of `scripts/reproduce --list`: each step of `reproduce` (the script, whose
/// `STEPS` lines are `"name|scales|what"`) with the last time of `times` (the TSV
/// `step, scale, seconds, date, CPU, load` that the script appends to) at each scale.
///
/// Errors: those of [`StepTimes::load`].
pub fn render_step_times(reproduce: &Path, times: &Path) -> Result<String> {
    let StepTimes { steps, last } = StepTimes::load(reproduce, times)?;
    render_steps(&steps, &last)
}

fn read_step_times(reproduce: &Path, times: &Path) -> Result<(StepList, LastTimes)> {
    let script = std::fs::read_to_string(reproduce).map_err(|e| Error::io(reproduce, e))?;
    let mut steps: StepList = Vec::new();
    let mut inside = false;
    for line in script.lines() {
        let t = line.trim();
        if t.starts_with("STEPS=(") {
            inside = true;
            continue;
        }
        if inside && t == ")" {
            break;
        }
        if inside {
            let body = t.trim_matches('"');
            let mut parts = body.splitn(3, '|');
            if let (Some(n), Some(sc), Some(w)) = (parts.next(), parts.next(), parts.next()) {
                let scales = sc.split_whitespace().map(str::to_string).collect();
                steps.push((n.to_string(), scales, w.to_string()));
            }
        }
    }
    if steps.is_empty() {
        return Err(Error::bad_input(
            reproduce,
            "no STEPS=( \"name|scales|what\" … ) list found",
        ));
    }
    // (step, scale) → (seconds, finished, load) of the last line.
    let mut last: LastTimes = HashMap::new();
    if times.is_file() {
        let text = std::fs::read_to_string(times).map_err(|e| Error::io(times, e))?;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let f: Vec<&str> = line.split('\t').collect();
            if f.len() < 3 {
                return Err(Error::bad_input(
                    times,
                    format!("line {}: expected step, scale, seconds", i + 1),
                ));
            }
            let secs: f64 = f[2].parse().map_err(|_| {
                Error::bad_input(
                    times,
                    format!("line {}: seconds `{}` is not a number", i + 1, f[2]),
                )
            })?;
            let why = match (f.get(3), f.get(5)) {
                (Some(finished), Some(load)) => format::typed_in(finished, load),
                _ => Some("no finish time or load".to_string()),
            };
            if let Some(why) = why {
                return Err(Error::bad_input(
                    times,
                    format!(
                        "line {}: {why}: step times come from `scripts/reproduce`'s log, not typed in",
                        i + 1
                    ),
                ));
            }
            last.insert(
                (f[0].to_string(), f[1].to_string()),
                (
                    secs,
                    f.get(3).map_or_else(String::new, |d| d.to_string()),
                    f.get(5).map_or_else(String::new, |l| l.to_string()),
                ),
            );
        }
    }
    Ok((steps, last))
}

fn render_steps(steps: &StepList, last: &LastTimes) -> Result<String> {
    let mut t = Table::new(["step (`--only`)", "quick", "default", "paper", "what"]);
    for (name, scales, what) in steps {
        let mut row = vec![format!("`{name}`")];
        for sc in ["quick", "default", "paper"] {
            row.push(if !scales.iter().any(|s| s == sc) {
                "–".to_string()
            } else {
                last.get(&(name.clone(), sc.to_string()))
                    .map_or_else(|| "not timed".to_string(), |(s, _, _)| minutes(*s))
            });
        }
        row.push(what.clone());
        t.push(row)?;
    }
    // When and under what load the times shown were measured, per scale.
    let mut when = Vec::new();
    for sc in ["quick", "default", "paper"] {
        let shown: Vec<&(f64, String, String)> = steps
            .iter()
            .filter_map(|(name, _, _)| last.get(&(name.clone(), sc.to_string())))
            .collect();
        if shown.is_empty() {
            continue;
        }
        let mut dates: Vec<&str> = shown
            .iter()
            .map(|(_, d, _)| d.get(..10).unwrap_or(d))
            .collect();
        dates.sort();
        let loads: Vec<f64> = shown
            .iter()
            .filter_map(|(_, _, l)| l.split_whitespace().next()?.parse().ok())
            .collect();
        let range = |lo: &str, hi: &str| {
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo} to {hi}")
            }
        };
        let mut line = format!("{sc}: {}", range(dates[0], dates[dates.len() - 1]));
        if !loads.is_empty() {
            let lo = loads.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = loads.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            line.push_str(&format!(
                ", 1-min load average {} when the step ended",
                range(&format!("{lo:.1}"), &format!("{hi:.1}"))
            ));
        }
        if loads.len() < shown.len() {
            line.push_str(&format!(
                " ({} recorded without a load average)",
                shown.len() - loads.len()
            ));
        }
        when.push(line);
    }
    Ok(format!(
        "{}\nWall times of the last measured run of each step (`data/reproduce-times.tsv`; `bash scripts/reproduce --list` prints the same); measured {}.",
        t.to_markdown(),
        if when.is_empty() { "never".to_string() } else { when.join("; ") }
    ))
}

/// One generated block of one page, compared with the table the results give.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockCheck {
    /// The page holding the block.
    pub page: PathBuf,
    /// The block's id.
    pub id: String,
    /// [`block_diff`] of the page's block against the results: empty when up to date.
    pub diff: Vec<String>,
}

/// A page after its generated blocks were regenerated.
#[derive(Debug, Clone, PartialEq)]
pub struct PageUpdate {
    /// The page.
    pub page: PathBuf,
    /// Its text with every block it holds regenerated (equal to the old text when each
    /// block was up to date).
    pub text: String,
    /// Its blocks, in the order of `blocks` given to [`update_pages`].
    pub blocks: Vec<BlockCheck>,
}

impl PageUpdate {
    /// Whether any block of the page differs from the results.
    pub fn stale(&self) -> bool {
        self.blocks.iter().any(|b| !b.diff.is_empty())
    }
}

/// Regenerate the blocks of several pages (`(path, text)`, e.g. from [`pages`]): each
/// page's marked blocks get the tables of `blocks` (`(id, table)`, as for
/// [`replace_blocks`]). A block may sit in more than one page; each copy is checked.
///
/// Errors, each naming the page: a marked block that `blocks` does not describe, a block
/// whose markers are not there once each, in order. An error too when a block of
/// `blocks` is in no page, so that no described table goes unchecked.
pub fn update_pages(
    pages: &[(PathBuf, String)],
    blocks: &[(String, String)],
) -> Result<Vec<PageUpdate>> {
    let mut placed = std::collections::BTreeSet::new();
    let mut out = Vec::with_capacity(pages.len());
    for (page, text) in pages {
        let ids = marked_ids(text);
        let here: Vec<(String, String)> = blocks
            .iter()
            .filter(|(id, _)| ids.contains(id))
            .cloned()
            .collect();
        // Checks every marked id against `blocks` and each block's markers.
        let new = replace_blocks(text, &here, page)?;
        let mut checks = Vec::with_capacity(here.len());
        for (id, table) in &here {
            placed.insert(id.clone());
            checks.push(BlockCheck {
                page: page.clone(),
                id: id.clone(),
                diff: block_diff(block_content(text, id, page)?, table),
            });
        }
        out.push(PageUpdate {
            page: page.clone(),
            text: new,
            blocks: checks,
        });
    }
    if let Some((id, _)) = blocks.iter().find(|(id, _)| !placed.contains(id)) {
        let names: Vec<String> = pages.iter().map(|(p, _)| p.display().to_string()).collect();
        return Err(Error::bad_input(
            pages.first().map_or_else(|| PathBuf::from("README.md"), |(p, _)| p.clone()),
            format!(
                "no page has the markers `{}` … `{}` of the generated table `{id}` (pages searched: {})",
                start_marker(id),
                end_marker(id),
                if names.is_empty() { "none".to_string() } else { names.join(", ") }
            ),
        ));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Expected values against the committed generated tables.

/// An expected value of the conditions file that a page's generated table contradicts: the
/// table, generated from a newer result, shows another value for the same cell. Text filled
/// from expected values (the findings, the reproduction matrix) would then disagree with the
/// table beside it, so [`contradictions`] finds these on any clone, without result folders.
#[derive(Debug, Clone, PartialEq)]
pub struct Contradiction {
    /// The page holding the table.
    pub page: PathBuf,
    /// The generated table's id.
    pub table: String,
    /// The condition (its result, row and column).
    pub condition: Condition,
    /// The cell as the table shows it.
    pub shown: String,
}

impl fmt::Display for Contradiction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.condition;
        write!(
            f,
            "{}: table `{}`: {} / {}: the conditions file expects {}{}, the table (from a newer result) shows {}",
            self.page.display(),
            self.table,
            c.result,
            c.what,
            c.expected.text,
            if c.tolerance == Tolerance::Reported {
                " (reported, not graded)"
            } else {
                ""
            },
            self.shown
        )
    }
}

/// The cells of a markdown table (`| a | b |` lines): the header, then the rows after the
/// `|---|` line.
fn markdown_table(text: &str) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('|') && l.ends_with('|') && l.len() > 1);
    let cells = |l: &str| -> Vec<String> {
        l[1..l.len() - 1]
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let header = cells(lines.next()?);
    let rows = lines
        .skip(1)
        .map(cells)
        .filter(|r| r.len() == header.len())
        .collect();
    Some((header, rows))
}

/// Every CSV expected value that a page's generated table (`[[readme]]`, from the same
/// result and file, or one of its `also` results) shows differently: the table's cell,
/// rounded to the decimals the expected value is written with, is another number, or has
/// another significance mark. Cells a table does not show (a dropped key or column, a row
/// that is not there) are not compared; `grade` grades those against the results.
/// `pages` are `(path, text)`, as for [`update_pages`].
pub fn contradictions(conditions: &Conditions, pages: &[(PathBuf, String)]) -> Vec<Contradiction> {
    let all = conditions.conditions();
    let mut out = Vec::new();
    for t in &conditions.readme {
        for (page, text) in pages {
            if !marked_ids(text).contains(&t.id) {
                continue;
            }
            let Some((header, rows)) = block_content(text, &t.id, page)
                .ok()
                .and_then(markdown_table)
            else {
                continue;
            };
            let col = |name: &str| {
                let shown = t.rename.get(name).map_or(name, String::as_str);
                header.iter().position(|h| h == shown)
            };
            for c in &all {
                if c.file != t.file || (c.result != t.result && !t.also.contains(&c.result)) {
                    continue;
                }
                let Locator::Csv {
                    key_column,
                    key,
                    column,
                } = &c.locator
                else {
                    continue;
                };
                let key_cols: Option<Vec<usize>> = key_column.split(" + ").map(col).collect();
                let (Some(key_cols), Some(value_col)) = (key_cols, col(column)) else {
                    continue;
                };
                let keys: Vec<&str> = key.split(" + ").collect();
                if keys.len() != key_cols.len() {
                    continue;
                }
                let Some(row) = rows
                    .iter()
                    .find(|r| key_cols.iter().zip(&keys).all(|(&i, k)| r[i] == *k))
                else {
                    continue;
                };
                let shown = &row[value_col];
                let Some(cell) = Expected::parse(shown) else {
                    continue;
                };
                let (agree, _) = grade_value(
                    &c.expected,
                    Tolerance::Absolute(0.0),
                    cell.value,
                    &cell.mark,
                );
                if agree != Grade::Ok {
                    out.push(Contradiction {
                        page: page.clone(),
                        table: t.id.clone(),
                        condition: c.clone(),
                        shown: shown.clone(),
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::ResultDir;

    /// The generated blocks' placeholders: `{inner}` filled, `{{` / `}}` literal braces, an
    /// unclosed `{` an error, a lone `}` copied.
    #[test]
    fn generated_block_placeholders_fill_escape_and_refuse_unclosed() {
        let fill = |t: &str| {
            fill_placeholders(
                t,
                || "unclosed".to_string(),
                |inner| Ok(format!("<{inner}>")),
            )
        };
        assert_eq!(fill("a {x|y} b").unwrap(), "a <x|y> b");
        assert_eq!(fill("{{x}} {y}").unwrap(), "{x} <y>");
        assert_eq!(fill("} {z}").unwrap(), "} <z>");
        assert_eq!(fill("é{ß}").unwrap(), "é<ß>");
        assert_eq!(fill("{open").unwrap_err(), "unclosed");
        assert_eq!(fill("{a{b}").unwrap_err(), "unclosed");
    }

    /// A finished result folder `root/name` with these files and `config`.
    fn result(root: &Path, name: &str, config: Value, files: &[(&str, &str)]) -> ResultDir {
        let r = ResultDir::at(root.join(name), name, &config).unwrap();
        r.begin().unwrap();
        for (f, text) in files {
            std::fs::write(r.path(f), text).unwrap();
        }
        r.finish(
            serde_json::json!({"queries": 43, "passages": 12345, "agreement": 0.4549999999999996}),
        )
        .unwrap();
        r
    }

    #[test]
    fn step_times_take_the_last_run_per_scale() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("reproduce");
        std::fs::write(
            &script,
            "X=1\nSTEPS=(\n  \"fig1|quick default|Figure 1\"\n  \"dl19|quick|DL19 systems\"\n)\nrest\n",
        )
        .unwrap();
        let tsv = dir.path().join("times.tsv");
        std::fs::write(
            &tsv,
            "fig1\tquick\t61\t2026-11-26T10:00:00Z\tcpu\t1.00 1.00 1.00\n\
             fig1\tquick\t125\t2026-11-26T11:00:00Z\tcpu\t1.00 1.00 1.00\n\
             fig1\tdefault\t3\t2026-11-26T12:00:00Z\tcpu\t1.00 1.00 1.00\n",
        )
        .unwrap();
        let md = render_step_times(&script, &tsv).unwrap();
        assert!(
            md.contains("| `fig1` | 2m05s | 0m03s | – | Figure 1 |"),
            "{md}"
        );
        assert!(
            md.contains("| `dl19` | not timed | – | – | DL19 systems |"),
            "{md}"
        );
        std::fs::write(&tsv, "fig1\tquick\tsoon\n").unwrap();
        let e = render_step_times(&script, &tsv).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("soon"), "{e}");
        // A time typed in (a summed time with a load range) is refused.
        std::fs::write(
            &tsv,
            "fig1\tquick\t125\t2026-11-26T11:00:00Z\tcpu\t3-7 (summed)\n",
        )
        .unwrap();
        let e = render_step_times(&script, &tsv).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("not typed in"), "{e}");
        std::fs::write(&script, "no steps\n").unwrap();
        assert!(render_step_times(&script, &tsv).is_err());
    }

    const METRICS: &str = "system,nDCG@10,MRR@10,seconds\n\
        bm25,0.7337,0.8605,1.2\n\
        dense,0.7980††,0.8230,3.4\n\
        rrf,0.7958†,0.8488,0.1\n\
        weird,–,0.5,0.0\n";

    const CONDITIONS: &str = r#"
[[result]]
name = "exp"
binary = "exp_bin"
what = "a test experiment"
config = { "/args/k" = 10, "/args/w" = 0.5 }
unset = ["/args/max"]

[[csv]]
result = "exp"
file = "metrics.csv"
key = "system"
columns = ["nDCG@10", "MRR@10"]
tolerance = 0.0001
rows = [
  ["bm25", "0.734", "0.8604"],
]

[[csv]]
result = "exp"
file = "metrics.csv"
key = "system"
columns = ["nDCG@10", "MRR@10"]
tolerance = 0.01
rows = [
  ["dense", "0.798††", "0.845"],
  ["rrf", "0.796††", "0.849"],
]

[[csv]]
result = "exp"
file = "metrics.csv"
key = "system"
columns = ["nDCG@10", "recall"]
tolerance = 0.01
rows = [
  ["weird", "0.5", "0.5"],
  ["absent", "0.5", "0.5"],
]

[[csv]]
result = "exp"
file = "metrics.csv"
key = "system"
columns = ["seconds"]
tolerance = "reported"
rows = [["bm25", "9.9"]]

[[json]]
result = "exp"
file = "manifest.json"
values = [
  { pointer = "/summary/queries", expected = "43", tolerance = 0, what = "queries" },
  { pointer = "/summary/passages", expected = "12346", tolerance = 0, what = "passages" },
  { pointer = "/summary/nothing", expected = "1", tolerance = 0, what = "absent" },
  { pointer = "/summary/agreement", expected = "0.46", tolerance = 0.01, what = "agreement" },
]

[[result]]
name = "never-run"
binary = "never"
what = "not there"

[[json]]
result = "never-run"
file = "manifest.json"
values = [{ pointer = "/summary/x", expected = "1", tolerance = 0, what = "x" }]

[[readme]]
id = "exp"
result = "exp"
file = "metrics.csv"
drop = ["seconds"]
rename = { system = "run" }
notes = [
  { file = "manifest.json", pointer = "/summary/passages", text = "{} passages" },
  { file = "config.json", pointer = "/args/k", text = "k = {}" },
]
"#;

    fn conditions() -> Conditions {
        Conditions::parse(CONDITIONS, Path::new("test.toml")).unwrap()
    }

    fn grade_of<'a>(r: &'a Report, what: &str) -> &'a Graded {
        r.graded
            .iter()
            .find(|g| g.condition.what == what)
            .unwrap_or_else(|| panic!("no condition `{what}`"))
    }

    #[test]
    fn parses_expected_values() {
        let e = Expected::parse("0.798††").unwrap();
        assert_eq!((e.value, e.decimals, e.mark.as_str()), (0.798, 3, "††"));
        let e = Expected::parse(" 9371 ").unwrap();
        assert_eq!((e.value, e.decimals, e.mark.as_str()), (9371.0, 0, ""));
        assert_eq!(Expected::parse("-1.50").unwrap().decimals, 2);
        for bad in ["", "–", "abc", "1.", ".5", "1.2.3", "1e5"] {
            assert!(Expected::parse(bad).is_none(), "`{bad}` must not parse");
        }
    }

    #[test]
    fn grades_rounding_tolerance_and_marks() {
        let e = Expected::parse("0.734").unwrap();
        let tight = Tolerance::Absolute(1e-4);
        assert_eq!(grade_value(&e, tight, 0.7344, "").0, Grade::Ok);
        assert_eq!(grade_value(&e, tight, 0.7335, "").0, Grade::Ok);
        assert_eq!(grade_value(&e, tight, 0.7346, "").0, Grade::Fail);
        assert_eq!(grade_value(&e, tight, 0.7334, "").0, Grade::Fail);
        let e4 = Expected::parse("0.7337").unwrap();
        assert_eq!(grade_value(&e4, tight, 0.7337, "").0, Grade::Ok);
        assert_eq!(grade_value(&e4, tight, 0.7338, "").0, Grade::OkIsh);
        assert_eq!(grade_value(&e4, tight, 0.7344, "").0, Grade::Fail);
        let loose = Tolerance::Absolute(0.01);
        let d = Expected::parse("0.798††").unwrap();
        assert_eq!(grade_value(&d, loose, 0.7981, "††").0, Grade::Ok);
        assert_eq!(grade_value(&d, loose, 0.805, "††").0, Grade::OkIsh);
        assert_eq!(grade_value(&d, loose, 0.7981, "†").0, Grade::Fail);
        assert_eq!(grade_value(&d, loose, 0.81, "††").0, Grade::Fail);
        assert_eq!(grade_value(&d, loose, f64::NAN, "††").0, Grade::Fail);
        let count = Expected::parse("9371").unwrap();
        assert_eq!(
            grade_value(&count, Tolerance::Absolute(0.0), 9371.0, "").0,
            Grade::Ok
        );
        assert_eq!(
            grade_value(&count, Tolerance::Absolute(0.0), 9372.0, "").0,
            Grade::Fail
        );
        assert_eq!(
            grade_value(&count, Tolerance::Reported, 1.0, "").0,
            Grade::Reported
        );
        // A difference whose sign is a claim: within the tolerance, but not across 0.
        let signed = Tolerance::Signed(6.7);
        let up = Expected::parse("+3.3").unwrap();
        assert_eq!(grade_value(&up, signed, 3.3, "").0, Grade::Ok);
        assert_eq!(grade_value(&up, signed, 6.7, "").0, Grade::OkIsh);
        assert_eq!(
            grade_value(&up, Tolerance::Absolute(6.7), -3.3, "").0,
            Grade::OkIsh
        );
        assert_eq!(grade_value(&up, signed, -3.3, "").0, Grade::Fail);
        assert_eq!(grade_value(&up, signed, 0.0, "").0, Grade::Fail);
        let down = Expected::parse("-6.7").unwrap();
        assert_eq!(grade_value(&down, signed, -3.3, "").0, Grade::OkIsh);
        assert_eq!(grade_value(&down, signed, 0.0, "").0, Grade::Fail);
        let tie = Expected::parse("+0.0").unwrap();
        assert_eq!(grade_value(&tie, signed, 3.3, "").0, Grade::OkIsh);
        assert_eq!(grade_value(&tie, signed, -3.3, "").0, Grade::OkIsh);
        assert_eq!(grade_value(&tie, signed, 10.0, "").0, Grade::Fail);
        let text = "[[result]]\nname = \"r\"\nbinary = \"b\"\nwhat = \"w\"\n\n[[csv]]\nresult = \"r\"\nfile = \"f.csv\"\nkey = \"k\"\ncolumns = [\"d\"]\ntolerance = 6.7\nsame_sign = true\nrows = [[\"a\", \"+3.3\"]]\n";
        let c = Conditions::parse(text, Path::new("t.toml")).unwrap();
        assert_eq!(c.conditions()[0].tolerance, signed);
        let e = Conditions::parse(
            &text.replace("tolerance = 6.7", "tolerance = \"reported\""),
            Path::new("t.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("same_sign"), "{e}");
    }

    #[test]
    fn a_step_not_run_takes_out_its_results_at_both_scales_and_no_other() {
        let result = |name: &str, scales: &str| {
            format!(
                "[[result]]\nname = \"{name}\"\nbinary = \"b\"\nwhat = \"w\"\nscales = [{scales}]\n\n[[json]]\nresult = \"{name}\"\nfile = \"m.json\"\nvalues = [{{ pointer = \"/n\", expected = \"1\", tolerance = 0, what = \"{name}\" }}]\n\n"
            )
        };
        let text = [
            result("set", "\"default\""),
            result("set-quick", "\"quick\""),
            result("set-adaptive", "\"default\""),
            result("other", "\"default\""),
        ]
        .concat();
        let c = Conditions::parse(&text, Path::new("t.toml")).unwrap();
        let kept = c.without_steps(&["set".to_string()]).unwrap();
        let names: Vec<&str> = kept.result.iter().map(|r| r.name.as_str()).collect();
        // `set` and `set-quick` go; `set-adaptive` (another step) stays.
        assert_eq!(names, ["set-adaptive", "other"]);
        let whats: Vec<String> = kept.conditions().into_iter().map(|c| c.what).collect();
        assert_eq!(whats, ["set-adaptive", "other"]);
        assert_eq!(c.without_steps(&[]).unwrap().result.len(), 4);
        let e = c
            .without_steps(&["nope".to_string()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("step `nope`"), "{e}");
    }

    #[test]
    fn floors_compare_a_cell_with_a_number_or_another_row() {
        let text = r#"
[[result]]
name = "exp"
binary = "exp_bin"
what = "a test experiment"

[[floor]]
result = "exp"
file = "metrics.csv"
key = "system"
checks = [
  { row = "dense", column = "nDCG@10", at_least_row = "bm25", what = "dense ≥ bm25" },
  { row = "bm25", column = "MRR@10", at_least_row = "dense", what = "bm25 ≥ dense" },
  { row = "dense", column = "MRR@10", at_least_row = "rrf", what = "dense ≥ rrf" },
  { row = "bm25", column = "nDCG@10", at_least = "0.7337", what = "equal" },
  { row = "rrf", column = "MRR@10", at_least = "0.85", what = "rrf ≥ 0.85" },
  { row = "weird", column = "nDCG@10", at_least_row = "bm25", what = "not a number" },
  { row = "bm25", column = "nDCG@10", at_least_row = "weird", what = "floor row not a number" },
  { row = "bm25", column = "nDCG@10", at_least_row = "absent", what = "no such row" },
  { row = "dense", column = "nDCG@10", at_least_row = "bm25", by = "0.05", what = "dense clears bm25 by 0.05" },
  { row = "dense", column = "nDCG@10", at_least_row = "bm25", by = "0.1", what = "dense clears bm25 by 0.1" },
  { row = "bm25", column = "nDCG@10", at_most = "0.7337", what = "at most equal" },
  { row = "dense", column = "nDCG@10", at_most = "0.75", what = "dense ≤ 0.75" },
]
"#;
        let c = Conditions::parse(text, Path::new("floors.toml")).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        result(
            tmp.path(),
            "exp",
            serde_json::json!({}),
            &[("metrics.csv", METRICS)],
        );
        let report = grade(&c, tmp.path(), None);
        let by = |what: &str| {
            report
                .graded
                .iter()
                .find(|g| g.condition.what.contains(what))
                .unwrap_or_else(|| panic!("no floor `{what}`"))
        };
        // 0.7980†† against bm25's 0.7337: the mark does not matter to a floor.
        assert_eq!(by("dense ≥ bm25").grade, Grade::Ok);
        assert_eq!(
            by("dense ≥ bm25").condition.expected.text,
            "≥ 0.7337 (`bm25`)"
        );
        assert_eq!(by("bm25 ≥ dense").grade, Grade::Ok);
        // 0.7980 clears bm25's 0.7337 by 0.05, not by 0.1.
        assert_eq!(by("dense clears bm25 by 0.05").grade, Grade::Ok);
        assert_eq!(
            by("dense clears bm25 by 0.05").condition.expected.text,
            "≥ 0.7337 (`bm25`) + 0.05"
        );
        assert_eq!(by("dense clears bm25 by 0.1").grade, Grade::Fail);
        // A ceiling: bm25's 0.7337 is at most 0.7337; dense's 0.7980 is above 0.75.
        assert_eq!(by("at most equal").grade, Grade::Ok);
        let over = by("dense ≤ 0.75");
        assert_eq!(
            (over.grade, over.condition.expected.text.as_str()),
            (Grade::Fail, "≤ 0.75")
        );
        assert!(
            over.note.as_deref().unwrap().contains("above the ceiling"),
            "{:?}",
            over.note
        );
        for both in [
            r#"at_least = "0", at_most = "1""#,
            r#"at_least_row = "bm25", at_most = "1""#,
        ] {
            let bad = text.replace(r#"at_most = "0.75""#, both);
            let e = Conditions::parse(&bad, Path::new("floors.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("exactly one of"), "{e}");
        }
        // 0.8230 < rrf's 0.8488.
        let f = by("dense ≥ rrf");
        assert_eq!(f.grade, Grade::Fail);
        assert!(
            f.note.as_deref().unwrap().contains("below the floor"),
            "{:?}",
            f.note
        );
        assert_eq!(by("equal").grade, Grade::Ok);
        assert_eq!(by("rrf ≥ 0.85").grade, Grade::Fail);
        assert_eq!(by("not a number").grade, Grade::Missing);
        // The other row's cell is not a number either: no floor, so MISSING, not passed.
        assert_eq!(by("floor row not a number").grade, Grade::Missing);
        let absent = by("no such row");
        assert_eq!(absent.grade, Grade::Missing);
        assert!(
            absent.note.as_deref().unwrap().contains("`absent`"),
            "{:?}",
            absent.note
        );
        assert!(!report.passed());
        assert!(report.render().contains("(floor: dense ≥ rrf)"));
        // A floor of a result folder that is not there is MISSING, not passed.
        let empty = tempfile::tempdir().unwrap();
        let none = grade(&c, empty.path(), None);
        assert!(none.graded.iter().all(|g| g.grade == Grade::Missing));
        assert_eq!(none.graded.len(), 12);
        // Floors follow their result through `at_scale` (the path `grade --scale` takes).
        let scaled = format!(
            "{}\n[[result]]\nname = \"later\"\nbinary = \"b\"\nwhat = \"w\"\nscales = [\"default\"]\n\n[[floor]]\nresult = \"later\"\nfile = \"metrics.csv\"\nkey = \"system\"\nchecks = [{{ row = \"bm25\", column = \"MRR@10\", at_least = \"0\", what = \"w\" }}]\n",
            text.replace("what = \"a test experiment\"", "what = \"a test experiment\"\nscales = [\"quick\"]")
        );
        let c2 = Conditions::parse(&scaled, Path::new("floors.toml")).unwrap();
        let quick = c2.at_scale(crate::env::Scale::Quick);
        assert_eq!(
            (quick.floor.len(), quick.floor[0].result.as_str()),
            (1, "exp")
        );
        assert_eq!(grade(&quick, tmp.path(), None).graded.len(), 12);
        assert_eq!(c2.at_scale(crate::env::Scale::Default).floor.len(), 1);
        // A floor on a folder whose outputs changed since its manifest is STALE, not OK.
        std::fs::write(
            tmp.path().join("exp").join("metrics.csv"),
            METRICS.replace("0.8488", "0.9000"),
        )
        .unwrap();
        let stale = grade(&c, tmp.path(), None);
        assert_eq!(
            stale
                .graded
                .iter()
                .find(|g| g.condition.what.contains("dense ≥ bm25"))
                .unwrap()
                .grade,
            Grade::Stale
        );
        // Exactly one of the two bounds, and not the row itself.
        for (bad, why) in [
            (r#"{ row = "a", column = "x", what = "w" }"#, "exactly one"),
            (
                r#"{ row = "a", column = "x", at_least = "1", at_least_row = "b", what = "w" }"#,
                "exactly one",
            ),
            (
                r#"{ row = "a", column = "x", at_least_row = "a", what = "w" }"#,
                "itself",
            ),
            (
                r#"{ row = "a", column = "x", at_least = "high", what = "w" }"#,
                "not a number",
            ),
        ] {
            let t = format!(
                "[[result]]\nname = \"exp\"\nbinary = \"b\"\nwhat = \"w\"\n\n[[floor]]\nresult = \"exp\"\nfile = \"m.csv\"\nkey = \"system\"\nchecks = [{bad}]\n"
            );
            let e = Conditions::parse(&t, Path::new("floors.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(why) && e.contains("[[floor]]"), "{bad}: {e}");
        }
    }

    #[test]
    fn grades_a_result_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = serde_json::json!({"args": {"k": 10, "w": 0.5, "max": null}});
        result(tmp.path(), "exp", cfg, &[("metrics.csv", METRICS)]);
        let report = grade(&conditions(), tmp.path(), None);
        assert_eq!(
            report.results[0].1,
            Freshness::Fresh(vec![
                "2 outputs match manifest.json".into(),
                "3 config fields as expected".into()
            ])
        );
        assert_eq!(grade_of(&report, "bm25 / nDCG@10").grade, Grade::Ok);
        // 0.8605 against 0.8604 ± 0.0001: within tolerance, not equal.
        assert_eq!(grade_of(&report, "bm25 / MRR@10").grade, Grade::OkIsh);
        assert_eq!(grade_of(&report, "dense / nDCG@10").grade, Grade::Ok);
        // 0.8230 against 0.845 ± 0.01.
        let f = grade_of(&report, "dense / MRR@10");
        assert_eq!(f.grade, Grade::Fail);
        assert_eq!(f.measured.as_deref(), Some("0.8230"));
        // Right value, wrong significance mark.
        let m = grade_of(&report, "rrf / nDCG@10");
        assert_eq!(m.grade, Grade::Fail);
        assert!(m.note.as_deref().unwrap().contains("significance"));
        assert_eq!(grade_of(&report, "rrf / MRR@10").grade, Grade::Ok);
        let not_number = grade_of(&report, "weird / nDCG@10");
        assert_eq!(not_number.grade, Grade::Missing);
        assert!(not_number.note.as_deref().unwrap().contains("not a number"));
        let no_col = grade_of(&report, "weird / recall");
        assert_eq!(no_col.grade, Grade::Missing);
        assert!(no_col
            .note
            .as_deref()
            .unwrap()
            .contains("no column `recall`"));
        let no_row = grade_of(&report, "absent / nDCG@10");
        assert!(no_row
            .note
            .as_deref()
            .unwrap()
            .contains("no row with system = `absent`"));
        let seconds = grade_of(&report, "bm25 / seconds");
        assert_eq!(seconds.grade, Grade::Reported);
        // A reported value that the result contradicts (9.9 expected, 1.2 measured) is flagged.
        assert!(
            seconds
                .note
                .as_deref()
                .unwrap()
                .starts_with("FLAGGED: the result says 1.2"),
            "{:?}",
            seconds.note
        );
        assert_eq!(grade_of(&report, "queries").grade, Grade::Ok);
        // 0.455 (as binary floating point 0.45499…) is 0.46 at two decimals; shown with four.
        let a = grade_of(&report, "agreement");
        assert_eq!(
            (a.grade, a.measured.as_deref()),
            (Grade::Ok, Some("0.4550"))
        );
        assert_eq!(grade_of(&report, "passages").grade, Grade::Fail);
        let absent = grade_of(&report, "absent");
        assert_eq!(absent.grade, Grade::Missing);
        assert!(absent
            .note
            .as_deref()
            .unwrap()
            .contains("manifest.json has no /summary/nothing"));
        let never = grade_of(&report, "x");
        assert_eq!(never.grade, Grade::Missing);
        assert!(never.note.as_deref().unwrap().contains("never-run"));
        let Freshness::Missing(why) = &report.results[1].1 else {
            panic!("never-run must be missing: {:?}", report.results[1].1)
        };
        assert!(why.contains("cargo run --release --bin never"), "{why}");
        let c = report.counts();
        assert_eq!(
            c,
            Counts {
                ok: 5,
                okish: 1,
                fail: 3,
                missing: 6,
                stale: 0,
                reported: 1
            }
        );
        assert!(!report.passed());
        let text = report.render();
        assert!(text.ends_with(
            "grades: 5 OK, 1 OKish, 3 FAIL, 6 MISSING, 0 STALE; 1 reported (not graded)\n"
        ));
        assert!(text.contains("0.845"), "expected beside measured:\n{text}");
    }

    #[test]
    fn rows_named_by_several_columns_and_findings_texts() {
        let tmp = tempfile::tempdir().unwrap();
        let text = r#"
[[result]]
name = "cmp"
binary = "cmp_bin"
what = "paired tests"

[[csv]]
result = "cmp"
file = "significance.csv"
key = "metric + system"
columns = ["diff", "p"]
tolerance = 0.01
rows = [["EM + fusion", "-4.2", "1.00"], ["F1 + fusion", "-7.0", "0.12"], ["EM + span", "25", "0.03"]]
"#;
        let c = Conditions::parse(text, Path::new("test.toml")).unwrap();
        let sig = "metric,system,diff,p\nEM,fusion,-4.1667,1.0000\nF1,fusion,-6.9513,0.1198\nEM,span,+25.0000,0.0500\n";
        result(
            tmp.path(),
            "cmp",
            serde_json::json!({}),
            &[("significance.csv", sig)],
        );
        let report = grade(&c, tmp.path(), None);
        assert_eq!(grade_of(&report, "EM + fusion / diff").grade, Grade::Ok);
        assert_eq!(grade_of(&report, "F1 + fusion / p").grade, Grade::Ok);
        // 0.05 against 0.03 ± 0.01: the key columns found the right row, whose value fails.
        assert_eq!(grade_of(&report, "EM + span / p").grade, Grade::Fail);
        let at = Path::new("findings/x.md");
        assert_eq!(
            c.render_text("EM {cmp|significance.csv|EM + fusion|diff} (p = {cmp|significance.csv|EM + fusion|p})", at)
                .unwrap(),
            "EM -4.2 (p = 1.00)"
        );
        let e = c
            .render_text("{cmp|significance.csv|EM + judge|p}", at)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("findings/x.md") && e.contains("names no expected value"),
            "{e}"
        );
    }

    #[test]
    fn a_clean_folder_passes() {
        let tmp = tempfile::tempdir().unwrap();
        let text = r#"
[[result]]
name = "r"
binary = "b"
what = "w"
[[csv]]
result = "r"
file = "m.csv"
key = "s"
columns = ["v"]
tolerance = 0
rows = [["a", "1.50"]]
"#;
        let c = Conditions::parse(text, Path::new("t.toml")).unwrap();
        result(
            tmp.path(),
            "r",
            serde_json::json!({}),
            &[("m.csv", "s,v\na,1.5\n")],
        );
        let report = grade(&c, tmp.path(), None);
        assert!(report.passed(), "{}", report.render());
        std::fs::write(tmp.path().join("r/m.csv"), "s,v\na,1.6\n").unwrap();
        let report = grade(&c, tmp.path(), None);
        assert!(!report.passed());
        assert_eq!(report.graded[0].grade, Grade::Stale, "edited after the run");
    }

    #[test]
    fn stale_results_are_not_graded_as_fresh() {
        let tmp = tempfile::tempdir().unwrap();
        // Other config, and an output edited after the run.
        let cfg =
            serde_json::json!({"args": {"k": 20, "w": 0.5, "max": 100}, "program_sha256": "00"});
        let r = result(tmp.path(), "exp", cfg, &[("metrics.csv", METRICS)]);
        std::fs::write(
            r.final_path("metrics.csv"),
            METRICS.replace("0.7337", "0.7338"),
        )
        .unwrap();
        let bins = tmp.path().join("bin");
        std::fs::create_dir_all(&bins).unwrap();
        std::fs::write(bins.join("exp_bin"), "another build").unwrap();
        let report = grade(&conditions(), tmp.path(), Some(&bins));
        let Freshness::Stale(why) = &report.results[0].1 else {
            panic!("must be stale: {:?}", report.results[0].1)
        };
        let why = why.join("\n");
        for part in [
            "metrics.csv changed since manifest.json",
            "/args/k is 20, expected 10",
            "/args/max is 100, expected null",
            "another build of exp_bin",
        ] {
            assert!(why.contains(part), "`{part}` not in:\n{why}");
        }
        let g = grade_of(&report, "bm25 / nDCG@10");
        assert_eq!(g.grade, Grade::Stale);
        assert_eq!(g.measured.as_deref(), Some("0.7338"));
        assert_eq!(report.counts().stale, 9);
        assert!(!report.passed());
    }

    #[test]
    fn program_check_matches_the_binary() {
        let tmp = tempfile::tempdir().unwrap();
        let bins = tmp.path().join("bin");
        std::fs::create_dir_all(&bins).unwrap();
        std::fs::write(bins.join("exp_bin"), "this build").unwrap();
        let sha = sha256_file(&bins.join("exp_bin")).unwrap();
        let cfg = serde_json::json!({"args": {"k": 10, "w": 0.5}, "program_sha256": sha});
        result(tmp.path(), "exp", cfg, &[("metrics.csv", METRICS)]);
        let c = conditions();
        let fresh = check_result(&c.result[0], tmp.path(), Some(&bins));
        let Freshness::Fresh(checks) = fresh else {
            panic!("must be fresh: {fresh:?}")
        };
        assert!(checks.iter().any(|c| c == "written by the current exp_bin"));
    }

    #[test]
    fn bad_conditions_name_the_block() {
        let p = Path::new("c.toml");
        let err = |text: &str| Conditions::parse(text, p).unwrap_err().to_string();
        let head = "[[result]]\nname = \"r\"\nbinary = \"b\"\nwhat = \"w\"\n";
        let e = err(&format!(
            "{head}[[csv]]\nresult = \"r\"\nfile = \"m.csv\"\nkey = \"s\"\ncolumns = [\"a\", \"b\"]\ntolerance = 0\nrows = [[\"x\", \"1\"]]\n"
        ));
        assert!(
            e.contains("c.toml") && e.contains("row 1: 2 cells, expected 3"),
            "{e}"
        );
        let e = err(&format!(
            "{head}[[csv]]\nresult = \"r\"\nfile = \"m.csv\"\nkey = \"s\"\ncolumns = [\"a\"]\ntolerance = 0\nrows = [[\"x\", \"n/a\"]]\n"
        ));
        assert!(e.contains("`n/a` is not a number"), "{e}");
        let e = err(&format!(
            "{head}[[csv]]\nresult = \"q\"\nfile = \"m.csv\"\nkey = \"s\"\ncolumns = [\"a\"]\ntolerance = 0\nrows = [[\"x\", \"1\"]]\n"
        ));
        assert!(e.contains("result `q`, which no [[result]] lists"), "{e}");
        let e = err(&format!(
            "{head}[[csv]]\nresult = \"r\"\nfile = \"m.csv\"\nkey = \"s\"\ncolumns = [\"a\"]\ntolerance = \"loose\"\nrows = [[\"x\", \"1\"]]\n"
        ));
        assert!(e.contains("tolerance `loose`"), "{e}");
        let e = err(&format!("{head}colour = \"red\"\n"));
        assert!(e.contains("c.toml") && e.contains("colour"), "{e}");
    }

    #[test]
    fn readme_tables_add_the_rows_of_further_results() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = serde_json::json!({"args": {"k": 10}});
        result(tmp.path(), "exp", cfg.clone(), &[("metrics.csv", METRICS)]);
        result(
            tmp.path(),
            "exp2",
            cfg.clone(),
            &[(
                "metrics.csv",
                "system,nDCG@10,MRR@10,seconds\nsplade,0.7001,0.8001,0.9\n",
            )],
        );
        let mut spec = conditions().readme[0].clone();
        spec.also = vec!["exp2".into()];
        let table = render_readme_table(&spec, tmp.path()).unwrap();
        assert!(
            table.contains("| weird | – | 0.5 |\n| splade | 0.7001 | 0.8001 |\n"),
            "{table}"
        );
        assert!(
            table.contains("`data/results/exp/metrics.csv`, `data/results/exp2/metrics.csv`"),
            "{table}"
        );
        // Other columns: an error naming the file.
        result(
            tmp.path(),
            "exp3",
            cfg,
            &[("metrics.csv", "system,nDCG@10\nx,0.1\n")],
        );
        spec.also = vec!["exp3".into()];
        let e = render_readme_table(&spec, tmp.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("exp3") && e.contains("differ"), "{e}");
    }

    #[test]
    fn readme_tables_are_generated_and_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = serde_json::json!({"args": {"k": 10}});
        result(tmp.path(), "exp", cfg, &[("metrics.csv", METRICS)]);
        let c = conditions();
        let table = render_readme_table(&c.readme[0], tmp.path()).unwrap();
        assert_eq!(
            table,
            "| run | nDCG@10 | MRR@10 |\n|---|---|---|\n| bm25 | 0.7337 | 0.8605 |\n\
             | dense | 0.7980†† | 0.8230 |\n| rrf | 0.7958† | 0.8488 |\n| weird | – | 0.5 |\n\n\
             Generated from `data/results/exp/metrics.csv`; 12,345 passages; k = 10.\n"
        );
        let p = Path::new("README.md");
        let readme = "intro\n<!-- generated:exp -->\n| old |\n<!-- /generated:exp -->\nend\n";
        let blocks = vec![("exp".to_string(), table.clone())];
        let new = replace_blocks(readme, &blocks, p).unwrap();
        assert!(new.starts_with("intro\n<!-- generated:exp -->\n\n| run |"));
        assert!(
            new.ends_with("k = 10.\n\n<!-- /generated:exp -->\nend\n"),
            "{new}"
        );
        // Regenerating is a fixed point, and the diff of an out-of-date block is not empty.
        assert_eq!(replace_blocks(&new, &blocks, p).unwrap(), new);
        assert!(block_diff(block_content(&new, "exp", p).unwrap(), &table).is_empty());
        let diff = block_diff(block_content(readme, "exp", p).unwrap(), &table);
        assert_eq!(diff[0], "- | old |");
        assert_eq!(diff[1], "+ | run | nDCG@10 | MRR@10 |");
        // Markers missing, or a marked block the conditions do not describe.
        let e = replace_blocks("no markers\n", &blocks, p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("<!-- generated:exp -->"), "{e}");
        let mention = format!("{new}Tables sit between `<!-- generated:… -->` markers.\n");
        assert_eq!(marked_ids(&mention), vec!["exp".to_string()]);
        let extra = format!("{new}<!-- generated:other -->\n<!-- /generated:other -->\n");
        let e = replace_blocks(&extra, &blocks, p).unwrap_err().to_string();
        assert!(e.contains("`other`"), "{e}");
        // A dropped column the file lacks is an error naming the file.
        let mut spec = c.readme[0].clone();
        spec.drop.push("recall".into());
        let e = render_readme_table(&spec, tmp.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("metrics.csv") && e.contains("`recall`"), "{e}");
        // A note whose field the result lacks is an error naming the file and the pointer.
        let mut spec = c.readme[0].clone();
        spec.notes[1].pointer = "/args/nothing".into();
        let e = render_readme_table(&spec, tmp.path())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("config.json") && e.contains("`/args/nothing`") && e.contains("k = {}"),
            "{e}"
        );
        // No result: an error naming the missing file.
        let e = render_readme_table(&c.readme[0], &tmp.path().join("none"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("metrics.csv") && e.contains("does not exist"),
            "{e}"
        );
    }

    /// A stale block in a docs page is found and named by its page; the README beside it
    /// is left alone; a block no page holds, or a page's block the conditions do not
    /// describe, is an error naming the block and the page.
    #[test]
    fn stale_block_in_a_docs_page_is_found() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = serde_json::json!({"args": {"k": 10}});
        result(tmp.path(), "exp", cfg, &[("metrics.csv", METRICS)]);
        let c = conditions();
        let table = render_readme_table(&c.readme[0], tmp.path()).unwrap();
        let blocks = vec![("exp".to_string(), table.clone())];

        let root = tmp.path().join("project");
        std::fs::create_dir_all(root.join("docs").join("nested")).unwrap();
        let readme = "# Project\n\nSee [the results](docs/results.md).\n";
        let stale = "# Results\n\n<!-- generated:exp -->\n| old |\n<!-- /generated:exp -->\n";
        std::fs::write(root.join("README.md"), readme).unwrap();
        std::fs::write(root.join("docs").join("results.md"), stale).unwrap();
        std::fs::write(root.join("docs").join("notes.txt"), "not a page").unwrap();
        std::fs::write(root.join("docs").join("nested").join("deep.md"), "x").unwrap();
        let found = pages(&root).unwrap();
        assert_eq!(
            found,
            vec![root.join("README.md"), root.join("docs").join("results.md")]
        );
        let read = |ps: &[PathBuf]| -> Vec<(PathBuf, String)> {
            ps.iter()
                .map(|p| (p.clone(), std::fs::read_to_string(p).unwrap()))
                .collect()
        };
        let updates = update_pages(&read(&found), &blocks).unwrap();
        assert_eq!(updates.len(), 2);
        assert!(!updates[0].stale() && updates[0].blocks.is_empty());
        assert_eq!(updates[0].text, readme);
        let docs = &updates[1];
        assert!(docs.stale());
        assert_eq!(docs.blocks[0].page, root.join("docs").join("results.md"));
        assert_eq!(docs.blocks[0].diff[0], "- | old |");
        assert!(
            docs.text.contains("| bm25 | 0.7337 | 0.8605 |"),
            "{}",
            docs.text
        );

        // Written back, the page is up to date, and regenerating changes nothing.
        std::fs::write(&docs.page, &docs.text).unwrap();
        let again = update_pages(&read(&found), &blocks).unwrap();
        assert!(again.iter().all(|u| !u.stale()));
        assert_eq!(again[1].text, docs.text);

        // The same block in the README as well: both copies are checked.
        let both = format!("{readme}{stale}");
        std::fs::write(root.join("README.md"), &both).unwrap();
        let twice = update_pages(&read(&found), &blocks).unwrap();
        assert!(twice[0].stale() && !twice[1].stale());

        // A block no page holds.
        let extra = vec![
            blocks[0].clone(),
            ("missing".to_string(), "| t |\n".to_string()),
        ];
        let e = update_pages(&read(&found), &extra).unwrap_err().to_string();
        assert!(e.contains("`missing`") && e.contains("results.md"), "{e}");
        // A docs page with a block the conditions do not describe.
        let unknown = format!(
            "{}<!-- generated:other -->\n<!-- /generated:other -->\n",
            docs.text
        );
        std::fs::write(&docs.page, unknown).unwrap();
        let e = update_pages(&read(&found), &blocks)
            .unwrap_err()
            .to_string();
        assert!(e.contains("results.md") && e.contains("`other`"), "{e}");
    }

    #[test]
    fn tables_newer_than_the_expected_values_are_found() {
        let c = Conditions::parse(
            r#"
[[result]]
name = "reader"
binary = "train_reader"
what = "a reader"

[[result]]
name = "other"
binary = "train_reader"
what = "another reader"

[[csv]]
result = "reader"
file = "metrics.csv"
key = "reader"
columns = ["EM"]
tolerance = 1.0
rows = [["a", "41.2"]]

[[csv]]
result = "reader"
file = "metrics.csv"
key = "reader"
columns = ["train_s"]
tolerance = "reported"
rows = [["a", "3137"]]

[[csv]]
result = "other"
file = "metrics.csv"
key = "reader"
columns = ["EM", "MRR@10"]
tolerance = 0.01
rows = [["b", "37.0", "0.8542††"]]

[[readme]]
id = "readers"
result = "reader"
file = "metrics.csv"
also = ["other"]
rename = { train_s = "training s" }
"#,
            Path::new("expected.toml"),
        )
        .unwrap();
        let page = "# Readers\n\n<!-- generated:readers -->\n\n| reader | EM | training s | MRR@10 |\n|---|---|---|---|\n| a | 41.24 | 476 | – |\n| b | 37.0 | 300 | 0.8543†† |\n\n<!-- /generated:readers -->\n";
        let pages = vec![(PathBuf::from("docs/readers.md"), page.to_string())];
        let found: Vec<String> = contradictions(&c, &pages)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            found,
            vec![
                "docs/readers.md: table `readers`: reader / a / train_s: the conditions file expects 3137 (reported, not graded), the table (from a newer result) shows 476",
                "docs/readers.md: table `readers`: other / b / MRR@10: the conditions file expects 0.8542††, the table (from a newer result) shows 0.8543††",
            ]
        );
        // Expected values the tables agree with (to the decimals written) are not listed.
        let fixed = page
            .replace("| 476 |", "| 3137 |")
            .replace("0.8543", "0.8542");
        assert!(contradictions(&c, &[(PathBuf::from("docs/readers.md"), fixed)]).is_empty());
    }

    /// The committed tables of README.md and docs/*.md show what `data/expected.toml`
    /// expects, so that text filled from expected values agrees with the tables beside it.
    #[test]
    fn project_expected_values_agree_with_the_committed_tables() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let c = Conditions::load(&root.join("data").join("expected.toml")).unwrap();
        let pages: Vec<(PathBuf, String)> = pages(&root)
            .unwrap()
            .into_iter()
            .map(|p| {
                let text = std::fs::read_to_string(&p).unwrap();
                (p, text)
            })
            .collect();
        let found: Vec<String> = contradictions(&c, &pages)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            found.is_empty(),
            "update data/expected.toml from the tables (or the results), then `grade readme --write --records-only`:\n{}",
            found.join("\n")
        );
    }

    /// The project's own conditions file parses, and README.md and docs/*.md hold every
    /// block it describes, and no other.
    #[test]
    fn project_conditions_and_pages_agree() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let c = Conditions::load(&root.join("data").join("expected.toml")).unwrap();
        assert!(c.conditions().len() >= 60, "{}", c.conditions().len());
        let found = pages(&root).unwrap();
        assert!(found.len() > 1, "README.md and docs/*.md: {found:?}");
        let mut ids: Vec<String> = c.readme.iter().map(|t| t.id.clone()).collect();
        let mut marked = Vec::new();
        for p in &found {
            let text = std::fs::read_to_string(p).unwrap();
            for id in marked_ids(&text) {
                block_content(&text, &id, p).unwrap();
                // Generated from committed sources, not from a result.
                if records::is_record_block(&id) {
                    ids.push(id.clone());
                }
                assert!(
                    ids.contains(&id),
                    "{} holds `{id}`, which no [[readme]] describes",
                    p.display()
                );
                marked.push(id);
            }
        }
        ids.dedup();
        ids.sort();
        marked.sort();
        marked.dedup();
        assert_eq!(ids, marked);
    }
}
