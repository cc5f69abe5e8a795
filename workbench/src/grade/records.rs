//! Generated blocks whose source is committed with the repository rather than a result
//! folder, so that `grade readme --check` and the test suite can check them on any clone:
//!
//! | id | generated from |
//! |---|---|
//! | [`MATRIX_ID`] | `data/expected.toml`'s `[[headline]]` rows (their numbers are graded expected values), with their steps' times from `data/reproduce-times.tsv` |
//! | [`STEP_TIMES_ID`](super::STEP_TIMES_ID) | `scripts/reproduce`'s steps and `data/reproduce-times.tsv` |
//! | [`ASSETS_ID`], [`ASSETS_DETAIL_ID`] | `data/assets.toml` (description, licence, size, online source, offline fill) |
//! | [`PERFORMANCE_ID`] | `data/benchmarks.toml`'s `[[row]]`s of table `performance` (the workbench against its peers), read from the benchmark records |
//! | [`TRADEOFFS_ID`] | `data/benchmarks.toml`'s `[[row]]`s of table `tradeoffs` (the workbench's own configurations against each other), read from the benchmark records |
//! | [`BENCH_RUNS_ID`] | each benchmark record's date, commit, CPU and load |
//! | `bench-record-NAME` | the record's `bench.md`, as the benchmark wrote it |
//! | [`SCRIPT_TIMES_ID`] | `data/script-times.tsv`: the last total of `scripts/test` and `scripts/reproduce` per scale, on a fresh machine and with the setup cached |
//! | [`SCRIPT_STEPS_ID`] | `data/script-times.tsv`: the steps of the last recorded run of each script and setup |
//! | [`NOTEBOOK_TIMES_ID`] | `data/script-times.tsv`: the last execution time of each notebook |
//! | [`NOTEBOOK_FIRST_RESULT_ID`] | `data/notebook-first-result.tsv`: each notebook's last time to first result, cold and warm |
//! | `findings-NAME` | `data/findings/NAME.md`, whose `{result|file|row|column}` and `{result|file|/pointer}` placeholders are graded expected values of `data/expected.toml` |
//!
//! A benchmark record is `data/benchmarks/NAME/`: the small outputs of `data/results/NAME/`
//! (`bench.md`, the CSV files, `config.json`, `manifest.json`) and `recorded.json`
//! (`finished`, `commit`, `dirty`), copied there by `scripts/bench` after a run.

use super::format::thousands;
pub use super::format::typed_in;
use super::{Conditions, MATRIX_ID};
use crate::assets::{Assets, Online, Source};
use crate::display::Table;
use crate::{Error, Result};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Id of the models-and-data table ([`render_assets`]).
pub const ASSETS_ID: &str = "assets";
/// Id of the detailed models-and-data table ([`render_assets_detail`]).
pub const ASSETS_DETAIL_ID: &str = "assets-detail";
/// Id of the README's performance table ([`Benchmarks::render_performance`]).
pub const PERFORMANCE_ID: &str = "performance";
/// Id of the trade-offs table ([`Benchmarks::render_tradeoffs`]).
pub const TRADEOFFS_ID: &str = "performance-tradeoffs";
/// The values of a `[[row]]`'s `table`: the workbench against its peers (the README's
/// [`PERFORMANCE_ID`] block, the default), and a faster configuration of the workbench
/// against its exact one (the [`TRADEOFFS_ID`] block).
pub const ROW_TABLES: [&str; 2] = ["performance", "tradeoffs"];
/// Id of the table of benchmark runs ([`Benchmarks::render_runs`]).
pub const BENCH_RUNS_ID: &str = "benchmark-runs";
/// Prefix of the id of a record's own tables (`bench-record-NAME`).
pub const RECORD_PREFIX: &str = "bench-record-";
/// Sub-folder of a benchmark record holding, per kind of machine other than the latest run's,
/// the latest run on that kind (`data/benchmarks/NAME/machines/KIND/`, see [`machine_kind`]).
pub const MACHINES_DIR: &str = "machines";

/// The kind of machine a benchmark ran on, from its `config.json` `machine` object: the CPU
/// model as a slug and the widest instruction set the kernels can use (`amx`, `avx512`,
/// `avx512-avxvnni` where the CPU also has AVX-VNNI, `avx2`, else `baseline`), e.g.
/// `intel-xeon-amx` or `amd-epyc-7b13-64-avx2`. Runs of one kind
/// compare with each other; the records keep the latest run of each kind.
pub fn machine_kind(machine: &Value) -> String {
    let model = machine["cpu_model"].as_str().unwrap_or("unknown cpu");
    let model = model.to_lowercase().replace("(r)", "").replace("(tm)", "");
    let model = model.split('@').next().unwrap_or_default();
    let words: Vec<String> = model
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty() && !matches!(*w, "processor" | "cpu" | "core"))
        .map(str::to_string)
        .collect();
    let has = |f: &str| {
        machine["features"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(f)))
    };
    // The widest tier, and for AVX-512 whether the 256-bit VEX VNNI is there too: CPUs of
    // one model name (`AMD EPYC` on two generations) differ there, and so do their peaks.
    let tier = if has("amx_int8") {
        "amx"
    } else if has("avx512f") && has("avx_vnni") {
        "avx512-avxvnni"
    } else if has("avx512f") {
        "avx512"
    } else if has("avx2") {
        "avx2"
    } else {
        "baseline"
    };
    format!("{}-{tier}", words.join("-"))
}

/// [`cpu_label`] of what the `machine` objects of several records share: their model (the
/// kind's), the cores where all have as many, and the flags all list, in the first's order.
fn common_cpu_label(machines: &[Value]) -> String {
    let Some(first) = machines.first() else {
        return "not recorded".to_string();
    };
    if machines.iter().all(|m| cpu_label(m) == cpu_label(first)) {
        return cpu_label(first);
    }
    let flags = |m: &Value| -> Vec<String> {
        m["features"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let shared: Vec<String> = flags(first)
        .into_iter()
        .filter(|f| machines.iter().all(|m| flags(m).contains(f)))
        .collect();
    let cores = first["cores"].as_u64().unwrap_or(0);
    let cores = if machines
        .iter()
        .all(|m| m["cores"].as_u64().unwrap_or(0) == cores)
    {
        format!("{cores} cores")
    } else {
        "cores differ".to_string()
    };
    format!(
        "{}, {cores}, {} (the flags all its runs list)",
        first["cpu_model"].as_str().unwrap_or("unknown cpu"),
        shared.join(" ")
    )
}

/// `CPU model, N cores, flags` of a record's `machine` object.
fn cpu_label(m: &Value) -> String {
    match (m["cpu_model"].as_str(), m["features"].as_array()) {
        (Some(model), Some(f)) => {
            let flags: Vec<&str> = f.iter().filter_map(Value::as_str).collect();
            format!(
                "{model}, {} cores, {}",
                m["cores"].as_u64().unwrap_or(0),
                flags.join(" ")
            )
        }
        _ => "not recorded".to_string(),
    }
}

/// Prefix of the id of a findings text (`findings-NAME`, from `data/findings/NAME.md`).
pub const FINDINGS_PREFIX: &str = "findings-";
/// Id of the quick start's time table ([`render_script_times`]).
pub const SCRIPT_TIMES_ID: &str = "script-times";
/// Id of the step-by-step times of the scripts' last runs ([`render_script_steps`]).
pub const SCRIPT_STEPS_ID: &str = "script-steps";
/// Id of the notebooks' time table ([`render_notebook_times`]).
pub const NOTEBOOK_TIMES_ID: &str = "notebook-times";
/// Id of the notebooks' time-to-first-result table ([`render_notebook_first_result`]).
pub const NOTEBOOK_FIRST_RESULT_ID: &str = "notebook-first-result";

/// A line of `data/notebook-first-result.tsv`, as `scripts/notebook_first_result.py` wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct FirstResult {
    /// The notebook's name without `.ipynb`.
    pub notebook: String,
    /// `cold`: the kernels' compiled-dependency folder was emptied first; `warm`: not.
    pub run: String,
    /// From the kernel's start to the end of the `:dep` cell.
    pub dep_seconds: f64,
    /// From the kernel's start to the end of the first cell after the `:dep` cell.
    pub first_seconds: f64,
    /// Whether the kernel wrote a workbench library file (compiled the library).
    pub compiled: bool,
    /// `ok`, or `error: ` and the first line of the error the cells printed.
    pub status: String,
    /// When it finished (RFC 3339, UTC).
    pub finished: String,
    /// CPU model.
    pub cpu: String,
    /// The three load averages when it finished.
    pub load: String,
    /// `git describe --always --dirty` of the checkout.
    pub commit: String,
}

/// Read `data/notebook-first-result.tsv` (`#` lines are comments); every line must be one
/// the script wrote ([`typed_in`]). Errors name the file and line.
pub fn read_first_results(path: &Path) -> Result<Vec<FirstResult>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: String| Error::bad_input(path, format!("line {}: {why}", i + 1));
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != 10 {
            return Err(bad(format!(
                "{} fields, expected notebook, run, dep_seconds, first_seconds, library_compiled, status, finished, CPU, load, commit",
                f.len()
            )));
        }
        let secs = |s: &str| {
            s.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| bad(format!("`{s}` is not a number of seconds")))
        };
        if f[1] != "cold" && f[1] != "warm" {
            return Err(bad(format!("run `{}` is neither `cold` nor `warm`", f[1])));
        }
        let compiled = match f[4] {
            "yes" => true,
            "no" => false,
            other => {
                return Err(bad(format!(
                    "library_compiled `{other}` is neither `yes` nor `no`"
                )))
            }
        };
        if let Some(why) = typed_in(f[6], f[8]) {
            return Err(bad(format!(
                "{why}: times come from `scripts/notebook_first_result`'s log (`bash scripts/record_times`), not typed in"
            )));
        }
        out.push(FirstResult {
            notebook: f[0].to_string(),
            run: f[1].to_string(),
            dep_seconds: secs(f[2])?,
            first_seconds: secs(f[3])?,
            compiled,
            status: f[5].to_string(),
            finished: f[6].to_string(),
            cpu: f[7].to_string(),
            load: f[8].to_string(),
            commit: f[9].trim().to_string(),
        });
    }
    Ok(out)
}

/// `12.3 s` under a minute, else [`duration`]'s `4m05s`.
fn seconds(s: f64) -> String {
    if s < 60.0 {
        format!("{s:.1} s")
    } else {
        duration(s.round() as u64)
    }
}

/// Each notebook of `notebooks` with its last cold and last warm time to first result.
pub fn render_notebook_first_result(results: &[FirstResult], notebooks: &Path) -> Result<String> {
    let mut names: Vec<String> = std::fs::read_dir(notebooks)
        .map_err(|e| Error::io(notebooks, e))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter_map(|n| n.strip_suffix(".ipynb").map(str::to_string))
        .collect();
    names.sort();
    let cell = |name: &str, run: &str| match results
        .iter()
        .rfind(|r| r.notebook == name && r.run == run)
    {
        None => "not measured".to_string(),
        Some(r) => {
            let mut s = format!(
                "{} (`:dep` cell {}",
                seconds(r.first_seconds),
                seconds(r.dep_seconds)
            );
            if r.compiled {
                s.push_str("; compiled the library");
            }
            if r.status != "ok" {
                s.push_str(&format!(
                    "; the cell stopped on `{}`",
                    r.status
                        .trim_start_matches("error: ")
                        .replace('|', "/")
                        .replace('`', "'")
                ));
            }
            s.push_str(&format!(
                "), {}, commit {}, load {}",
                r.finished.chars().take(10).collect::<String>(),
                r.commit,
                r.load
            ));
            s
        }
    };
    let mut t = Table::new([
        "notebook",
        "cold: compiled-dependency folder empty",
        "warm: after another notebook's kernel",
    ]);
    for n in &names {
        t.push([format!("`{n}`"), cell(n, "cold"), cell(n, "warm")])?;
    }
    let mut cpus: Vec<&str> = results.iter().map(|r| r.cpu.as_str()).collect();
    cpus.sort();
    cpus.dedup();
    Ok(format!(
        "{}\nFrom the kernel's start to the end of the first cell after `:dep`, by `bash scripts/notebook_first_result` (CPU: {}).",
        t.to_markdown(),
        if cpus.is_empty() {
            "none recorded".to_string()
        } else {
            cpus.join("; ").replace("(R)", "")
        }
    ))
}

/// A line of `data/script-times.tsv`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptTime {
    /// `test`, `reproduce quick`, `reproduce default`, … (or `nbconvert` for a notebook
    /// executed by hand).
    pub script: String,
    /// The step's name as the script printed it, or `total`.
    pub step: String,
    /// Wall time.
    pub seconds: u64,
    /// When it finished (a date or an RFC 3339 time, UTC).
    pub finished: String,
    /// CPU model.
    pub cpu: String,
    /// Load average (as recorded).
    pub load: String,
    /// `fresh`: the run installed the Rust kernel (nothing was set up); `cached`: it was.
    pub setup: String,
    /// What the time covers, when a plain reading would mislead.
    pub note: String,
    /// The commit the run measured (`git describe --always --dirty`); empty in lines
    /// recorded before the scripts wrote it.
    pub commit: String,
}

/// Read `data/script-times.tsv` (`#` lines are comments). Every line must be one a script
/// wrote ([`typed_in`]): timings are measured, never typed in. Errors name the file and
/// line.
pub fn read_script_times(path: &Path) -> Result<Vec<ScriptTime>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 7 {
            return Err(Error::bad_input(
                path,
                format!(
                    "line {}: {} fields, expected script, step, seconds, finished, CPU, load, setup[, note]",
                    i + 1,
                    f.len()
                ),
            ));
        }
        let seconds = f[2].parse().map_err(|_| {
            Error::bad_input(
                path,
                format!("line {}: seconds `{}` is not a whole number", i + 1, f[2]),
            )
        })?;
        if f[6] != "fresh" && f[6] != "cached" {
            return Err(Error::bad_input(
                path,
                format!(
                    "line {}: setup `{}` is neither `fresh` nor `cached`",
                    i + 1,
                    f[6]
                ),
            ));
        }
        if let Some(why) = typed_in(f[3], f[5]) {
            return Err(Error::bad_input(
                path,
                format!(
                    "line {}: {why}: timings come from the scripts' logs (`bash scripts/record_times`), not typed in",
                    i + 1
                ),
            ));
        }
        out.push(ScriptTime {
            script: f[0].to_string(),
            step: f[1].to_string(),
            seconds,
            finished: f[3].to_string(),
            cpu: f[4].to_string(),
            load: f[5].to_string(),
            setup: f[6].to_string(),
            note: f.get(7).map_or_else(String::new, |n| n.to_string()),
            commit: f.get(8).map_or_else(String::new, |c| c.trim().to_string()),
        });
    }
    Ok(out)
}

/// `2h00m`, `48m39s`, `52s`.
fn duration(secs: u64) -> String {
    if secs >= 3600 {
        format!("{}h{:02}m", secs / 3600, (secs % 3600 + 30) / 60)
    } else if secs >= 60 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{secs} s")
    }
}

/// `48m39s (2026-11-25, load …; note)`, with `commit C, ` after the date when recorded.
fn describe(t: &ScriptTime) -> String {
    let mut s = format!(
        "{} ({}, {}load {}",
        duration(t.seconds),
        t.finished.chars().take(10).collect::<String>(),
        if t.commit.is_empty() {
            String::new()
        } else {
            format!("commit {}, ", t.commit)
        },
        t.load
    );
    if !t.note.is_empty() {
        s.push_str(&format!("; {}", t.note));
    }
    s.push(')');
    s
}

/// The scripts and their names in `data/script-times.tsv`, in the order shown.
const SCRIPTS: [(&str, &str); 4] = [
    ("test", "`bash scripts/test`"),
    ("reproduce quick", "`bash scripts/reproduce`"),
    (
        "reproduce default",
        "`bash scripts/reproduce --scale default`",
    ),
    ("reproduce paper", "`bash scripts/reproduce --scale paper`"),
];

/// For each script and setup (nothing installed, then cached) whose last recorded run has
/// its steps recorded: a line naming the run, then its steps with their times.
pub fn render_script_steps(times: &[ScriptTime]) -> Result<String> {
    let mut parts = Vec::new();
    for (script, command) in SCRIPTS {
        for (setup, label) in [("fresh", "nothing installed"), ("cached", "setup cached")] {
            let Some(total) = times
                .iter()
                .rfind(|x| x.script == script && x.step == "total" && x.setup == setup)
            else {
                continue;
            };
            let steps: Vec<&ScriptTime> = times
                .iter()
                .filter(|x| {
                    x.script == script
                        && x.setup == setup
                        && x.finished == total.finished
                        && x.step != "total"
                })
                .collect();
            if steps.is_empty() {
                continue;
            }
            let mut t = Table::new(["step", "time", "note"]);
            for x in &steps {
                t.push([x.step.clone(), duration(x.seconds), x.note.clone()])?;
            }
            t.push([
                "**total**".to_string(),
                format!("**{}**", duration(total.seconds)),
                total.note.clone(),
            ])?;
            parts.push(format!(
                "{command}, {label}: {}, {}, load {}.\n\n{}",
                total.finished.chars().take(10).collect::<String>(),
                total.cpu.replace("(R)", ""),
                total.load,
                t.to_markdown().trim_end()
            ));
        }
    }
    Ok(parts.join("\n\n"))
}

/// The quick start's times: for `scripts/test` and `scripts/reproduce` at each scale, the
/// last recorded total on a machine with nothing set up and with the setup cached.
pub fn render_script_times(times: &[ScriptTime]) -> Result<String> {
    let mut t = Table::new([
        "command",
        "nothing installed",
        "build and Rust kernel in place",
    ]);
    for (script, command) in SCRIPTS {
        let last = |setup: &str| {
            times
                .iter()
                .rfind(|x| x.script == script && x.step == "total" && x.setup == setup)
                .map_or_else(|| "not measured".to_string(), describe)
        };
        t.push([command.to_string(), last("fresh"), last("cached")])?;
    }
    Ok(format!(
        "{}\nLast recorded totals, from `data/script-times.tsv` ([setup.md](docs/setup.md#what-a-run-costs) has them step by step).",
        t.to_markdown()
    ))
}

/// Each notebook of `notebooks` (`*.ipynb`, by name) with its last recorded execution.
pub fn render_notebook_times(times: &[ScriptTime], notebooks: &Path) -> Result<String> {
    let mut names: Vec<String> = std::fs::read_dir(notebooks)
        .map_err(|e| Error::io(notebooks, e))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".ipynb"))
        .collect();
    names.sort();
    let mut t = Table::new(["notebook", "last execution", "by"]);
    for n in names {
        let step = format!("execute notebooks/{n}");
        let (time, by) = match times.iter().rfind(|x| x.step == step) {
            Some(x) => (
                describe(x),
                if x.script == "nbconvert" {
                    "`jupyter nbconvert --execute`".to_string()
                } else {
                    format!("`scripts/{}`", x.script)
                },
            ),
            None => ("not measured".to_string(), "–".to_string()),
        };
        t.push([format!("`{}`", n.trim_end_matches(".ipynb")), time, by])?;
    }
    Ok(t.to_markdown())
}

/// The models-and-data table: name, licence, size, online source, offline fill.
pub fn render_assets(assets: &Assets) -> Result<String> {
    let mut t = Table::new(["asset", "licence", "size", "online source", "offline fill"]);
    for (name, s) in &assets.specs {
        let online = online_label(s, "GitHub");
        let fill = match &s.source {
            Some(Source::Pypi { .. }) => "PyPI wheel",
            Some(Source::PypiSplitZip { .. }) => "PyPI, split zip",
            Some(Source::PypiSplitFile { .. }) => "PyPI, split file",
            Some(Source::PypiRebuild { .. }) => "rebuilt from a PyPI wheel",
            Some(Source::Mirror { .. }) => "mirror folder",
            None => "none (online only)",
        };
        t.push([
            format!("`{name}`"),
            s.license.clone(),
            s.size_label(),
            online,
            fill.to_string(),
        ])?;
    }
    Ok(t.to_markdown())
}

/// The models-and-data table with each asset's description and its offline fill named:
/// asset, what, licence, size, online source, offline fill.
pub fn render_assets_detail(assets: &Assets) -> Result<String> {
    let mut t = Table::new(["asset", "what", "licence", "size", "online", "offline fill"]);
    for (name, s) in &assets.specs {
        let online = online_label(s, "url,");
        let fill = match &s.source {
            Some(Source::Pypi { package, .. }) => format!("PyPI `{package}`"),
            Some(Source::PypiSplitZip { packages, .. }) => {
                format!("PyPI, a zip split over {} wheels", packages.len())
            }
            Some(Source::PypiSplitFile { packages, .. }) => {
                format!("PyPI, one file split over {} wheels", packages.len())
            }
            Some(Source::PypiRebuild {
                package, answers, ..
            }) => match answers {
                None => format!("rebuilt from PyPI `{package}`"),
                Some(a) => format!("rebuilt from PyPI `{package}` and `{}`", a.asset),
            },
            Some(Source::Mirror { folder }) => format!("mirror folder `{folder}`"),
            None => "none (online only)".to_string(),
        };
        t.push([
            format!("`{name}`"),
            s.description.clone(),
            s.license.clone(),
            s.size_label(),
            online,
            fill,
        ])?;
    }
    Ok(t.to_markdown())
}

/// An asset's online source for a table: `hub \`ORG/NAME\``, `hub data set \`…\``, or
/// `<url_word> \`OWNER/REPO\` at a commit` for a file of a GitHub repository.
fn online_label(s: &crate::assets::AssetSpec, url_word: &str) -> String {
    match &s.online {
        Some(Online::Hub {
            repo, repo_type, ..
        }) => match repo_type.unwrap_or(s.kind) {
            crate::assets::AssetKind::Dataset => format!("hub data set `{repo}`"),
            _ => format!("hub `{repo}`"),
        },
        Some(Online::Url { base, .. }) => match github_repo(base) {
            Some(r) => format!("{url_word} `{r}` at a commit"),
            None => format!("{url_word} `{base}`"),
        },
        None => "none".to_string(),
    }
}

/// `OWNER/REPO` of a `https://raw.githubusercontent.com/OWNER/REPO/COMMIT/…` prefix.
fn github_repo(base: &str) -> Option<String> {
    let rest = base.strip_prefix("https://raw.githubusercontent.com/")?;
    let mut parts = rest.split('/');
    Some(format!("{}/{}", parts.next()?, parts.next()?))
}

/// `data/benchmarks.toml`: the benchmarks whose latest run is recorded, and the README's
/// performance rows.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Benchmarks {
    /// The recorded benchmarks, in page order.
    #[serde(default)]
    pub benchmark: Vec<Benchmark>,
    /// The performance table's rows.
    #[serde(default)]
    pub row: Vec<PerformanceRow>,
    #[serde(skip)]
    path: PathBuf,
    #[serde(skip)]
    records: PathBuf,
}

/// One recorded benchmark.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Benchmark {
    /// Record folder (`data/benchmarks/NAME/`), the result folder's name.
    pub name: String,
    /// What it measures, against which peers.
    pub title: String,
    /// Link to its section.
    pub link: String,
    /// The markdown file of the record that its `bench-record-NAME` block shows (default
    /// `bench.md`).
    #[serde(default = "default_record_file")]
    pub file: String,
}

fn default_record_file() -> String {
    "bench.md".to_string()
}

fn default_row_table() -> String {
    ROW_TABLES[0].to_string()
}

/// A row of the performance or the trade-offs table: four templates whose `{cell}`
/// placeholders name cells of the record (its CSV files, or its JSON files by pointer).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerformanceRow {
    /// The record (`[[benchmark]]` name).
    pub benchmark: String,
    /// The table the row belongs to, one of [`ROW_TABLES`]: `performance` (default), the
    /// workbench against a peer, or `tradeoffs`, a faster configuration of the workbench
    /// against its exact one.
    #[serde(default = "default_row_table")]
    pub table: String,
    /// What is measured, under which conditions.
    pub what: String,
    /// Our system's number(s) (in a trade-off: the faster configuration's).
    pub ours: String,
    /// The peer and its number(s) (in a trade-off: the exact configuration's).
    pub peer: String,
    /// The ratio.
    pub ratio: String,
    /// The cells the templates name.
    pub cells: BTreeMap<String, Cell>,
}

/// A cell of a record: in a CSV file, the row whose columns hold the `where` values, column
/// `column`; or in a JSON file (`config.json`, `manifest.json`), the value at `pointer`, so
/// that a condition the run was given (threads, rounds, sizes) is read from its record
/// rather than typed into the template.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    /// CSV or JSON file of the record.
    pub file: String,
    /// Column → value, identifying one row (CSV; required there, `{}` for a one-row file).
    #[serde(rename = "where", default)]
    pub row: Option<BTreeMap<String, String>>,
    /// The column (CSV).
    #[serde(default)]
    pub column: String,
    /// JSON pointer (RFC 6901) into `file`, which is then read as JSON: a string, number or
    /// boolean there is the cell's text, as JSON writes it (the templates group thousands);
    /// anything else is an error. Takes no `where`, `column` or `median`.
    #[serde(default)]
    pub pointer: Option<String>,
    /// Take the median of every matching row (per-round CSVs) instead of exactly one row;
    /// printed with the inputs' largest number of decimals.
    #[serde(default)]
    pub median: bool,
    /// Take the smallest of every matching row (a per-round spread's low end), printed as
    /// [`Cell::median`] is.
    #[serde(default)]
    pub min: bool,
    /// Take the largest of every matching row (a per-round spread's high end).
    #[serde(default)]
    pub max: bool,
    /// Round the value to this many decimals (the CSV's own text otherwise).
    #[serde(default)]
    pub decimals: Option<usize>,
}

/// `recorded.json` of a record.
#[derive(Debug, Clone, Deserialize)]
struct Recorded {
    finished: String,
    commit: String,
    #[serde(default)]
    dirty: bool,
}

impl Recorded {
    /// When the run finished, as the pages show it (`2026-11-27 08:25:00`, UTC).
    fn when(&self) -> String {
        self.finished
            .replace('T', " ")
            .trim_end_matches('Z')
            .to_string()
    }
}

impl Benchmarks {
    /// Read `path` (`data/benchmarks.toml`); records are in `records` (`data/benchmarks/`).
    pub fn load(path: &Path, records: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let mut b: Benchmarks =
            toml::from_str(&text).map_err(|e| Error::bad_input(path, e.to_string()))?;
        b.path = path.to_path_buf();
        b.records = records.to_path_buf();
        for r in &b.row {
            if !ROW_TABLES.contains(&r.table.as_str()) {
                return Err(Error::bad_input(
                    path,
                    format!(
                        "[[row]] `{}` has table `{}`, expected one of {}",
                        r.what,
                        r.table,
                        ROW_TABLES.map(|t| format!("`{t}`")).join(", ")
                    ),
                ));
            }
            if !b.benchmark.iter().any(|x| x.name == r.benchmark) {
                return Err(Error::bad_input(
                    path,
                    format!(
                        "[[row]] `{}` names benchmark `{}`, which no [[benchmark]] lists",
                        r.what, r.benchmark
                    ),
                ));
            }
        }
        Ok(b)
    }

    fn record(&self, name: &str) -> PathBuf {
        self.records.join(name)
    }

    fn read_json(&self, name: &str, file: &str) -> Result<Value> {
        let p = self.record(name).join(file);
        let text = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
        serde_json::from_str(&text).map_err(|e| Error::bad_input(&p, e.to_string()))
    }

    fn cell(&self, name: &str, c: &Cell) -> Result<String> {
        let v = self.raw_cell(name, c)?;
        match c.decimals {
            None => Ok(v),
            Some(d) => {
                let x: f64 = v.trim().parse().map_err(|_| {
                    Error::bad_input(
                        self.record(name).join(&c.file),
                        match &c.pointer {
                            Some(ptr) => format!("`{ptr}`: `{v}` is not a number to round"),
                            None => {
                                format!("column `{}`: `{v}` is not a number to round", c.column)
                            }
                        },
                    )
                })?;
                Ok(format!("{x:.d$}"))
            }
        }
    }

    fn raw_cell(&self, name: &str, c: &Cell) -> Result<String> {
        let p = self.record(name).join(&c.file);
        if let Some(pointer) = &c.pointer {
            if !c.column.is_empty() || c.row.is_some() || c.median || c.min || c.max {
                return Err(Error::bad_input(
                    &p,
                    format!(
                        "cell at `{pointer}`: a JSON cell takes no `column`, `where`, `median`, `min` or `max`"
                    ),
                ));
            }
            let doc = self.read_json(name, &c.file)?;
            return match doc.pointer(pointer) {
                Some(Value::String(v)) => Ok(v.clone()),
                Some(v @ (Value::Number(_) | Value::Bool(_))) => Ok(v.to_string()),
                Some(v) => Err(Error::bad_input(
                    &p,
                    format!("`{pointer}` holds {v}, not a string, number or boolean"),
                )),
                None => Err(Error::bad_input(&p, format!("no value at `{pointer}`"))),
            };
        }
        let (Some(row), false) = (&c.row, c.column.is_empty()) else {
            return Err(Error::bad_input(
                &p,
                "a CSV cell needs `where` and `column` (or a `pointer` into a JSON file)",
            ));
        };
        let t = Table::read_csv(&p)?;
        let col = |h: &str| {
            t.header.iter().position(|x| x == h).ok_or_else(|| {
                Error::bad_input(
                    &p,
                    format!("no column `{h}` (columns: {})", t.header.join(", ")),
                )
            })
        };
        let want = col(&c.column)?;
        let keys: Vec<(usize, &String)> = row
            .iter()
            .map(|(k, v)| col(k).map(|i| (i, v)))
            .collect::<Result<_>>()?;
        let found: Vec<&Vec<String>> = t
            .rows
            .iter()
            .filter(|r| keys.iter().all(|(i, v)| r[*i] == **v))
            .collect();
        if [c.median, c.min, c.max].iter().filter(|&&b| b).count() > 1 {
            return Err(Error::bad_input(
                &p,
                format!(
                    "column `{}`: a cell takes one of `median`, `min` and `max`",
                    c.column
                ),
            ));
        }
        if (c.median || c.min || c.max) && !found.is_empty() {
            let mut xs = Vec::with_capacity(found.len());
            let mut decimals = 0;
            for r in &found {
                let v = r[want].trim();
                let x = v.parse::<f64>().map_err(|_| {
                    Error::bad_input(&p, format!("column `{}`: `{v}` is not a number", c.column))
                })?;
                // A round that measured nothing (NaN) is left out, as the benchmarks' own
                // medians leave it out.
                if x.is_finite() {
                    xs.push(x);
                    decimals = decimals.max(v.split_once('.').map_or(0, |(_, f)| f.len()));
                }
            }
            if xs.is_empty() {
                return Err(Error::bad_input(
                    &p,
                    format!("column `{}`: no finite value where {row:?}", c.column),
                ));
            }
            xs.sort_by(f64::total_cmp);
            let n = xs.len();
            let m = if c.min {
                xs[0]
            } else if c.max {
                xs[n - 1]
            } else if n % 2 == 1 {
                xs[n / 2]
            } else {
                (xs[n / 2 - 1] + xs[n / 2]) / 2.0
            };
            return Ok(format!("{m:.decimals$}"));
        }
        match found.as_slice() {
            [r] => Ok(r[want].clone()),
            _ => Err(Error::bad_input(
                &p,
                format!(
                    "{} rows where {:?}, expected exactly one (column `{}`)",
                    found.len(),
                    row,
                    c.column
                ),
            )),
        }
    }

    fn fill(&self, row: &PerformanceRow, template: &str) -> Result<String> {
        let cell = |name: &str| -> Result<&Cell> {
            row.cells.get(name).ok_or_else(|| {
                Error::bad_input(
                    &self.path,
                    format!(
                        "[[row]] `{}`: `{{{name}}}` is not one of its cells",
                        row.what
                    ),
                )
            })
        };
        let value = |name: &str| self.cell(&row.benchmark, cell(name)?);
        // A ratio is taken from the cells as recorded, before any rounding.
        let num = |name: &str| -> Result<f64> {
            let v = self.raw_cell(&row.benchmark, cell(name)?)?;
            v.trim().parse::<f64>().map_err(|_| {
                Error::bad_input(
                    &self.path,
                    format!(
                        "[[row]] `{}`: cell `{name}` = `{v}` is not a number",
                        row.what
                    ),
                )
            })
        };
        super::fill_placeholders(
            template,
            || Error::bad_input(&self.path, format!("`{template}`: `{{` without `}}`")),
            |inner| match inner.split_once('/') {
                // `{a/b}`: the ratio of two cells (unrounded), two decimals.
                Some((a, b)) => Ok(format!("{:.2}", num(a)? / num(b)?)),
                None => Ok(thousands(&value(inner)?)),
            },
        )
    }

    /// The README's performance table, the rows of table `performance`: what (with its
    /// conditions), ours, peer, ratio, and the run's date.
    pub fn render_performance(&self) -> Result<String> {
        self.render_rows("performance", ["what", "ours", "peer", "ratio", "run"])
    }

    /// The trade-offs table, the rows of table `tradeoffs`: what, the faster configuration,
    /// the exact one, the speed-up with what it costs, and the run's date.
    pub fn render_tradeoffs(&self) -> Result<String> {
        self.render_rows(
            "tradeoffs",
            ["what", "approximate", "exact", "speed-up", "run"],
        )
    }

    /// The rows of `table`, under `header`. Rows whose latest runs come from different
    /// kinds of machine are not mixed: one table per kind, in the order of each kind's first
    /// row, each under a line naming the kind and its CPU.
    fn render_rows(&self, table: &str, header: [&str; 5]) -> Result<String> {
        // (kind, CPU label, rows)
        // (kind, the machine objects of its rows, rows)
        let mut groups: Vec<(String, Vec<Value>, Vec<[String; 5]>)> = Vec::new();
        for r in self.row.iter().filter(|r| r.table == table) {
            let rec: Recorded = self.recorded(&r.benchmark)?;
            let machine = self.read_json(&r.benchmark, "config.json")?;
            let kind = machine_kind(&machine["machine"]);
            let row = [
                self.fill(r, &r.what)?,
                self.fill(r, &r.ours)?,
                self.fill(r, &r.peer)?,
                self.fill(r, &r.ratio)?,
                format!(
                    "{}, {kind}",
                    rec.finished.chars().take(10).collect::<String>()
                ),
            ];
            let machine = machine["machine"].clone();
            match groups.iter_mut().find(|g| g.0 == kind) {
                Some(g) => {
                    g.1.push(machine);
                    g.2.push(row);
                }
                None => groups.push((kind, vec![machine], vec![row])),
            }
        }
        let several = groups.len() > 1;
        let mut out = Vec::new();
        for (kind, machines, rows) in groups {
            let cpu = common_cpu_label(&machines);
            let mut t = Table::new(header);
            for row in rows {
                t.push(row)?;
            }
            let md = t.to_markdown();
            if several {
                out.push(format!("On `{kind}` ({cpu}):\n\n{}", md.trim_end()));
            } else {
                out.push(md);
            }
        }
        if out.is_empty() {
            return Ok(Table::new(header).to_markdown());
        }
        Ok(out.join("\n\n"))
    }

    fn recorded(&self, name: &str) -> Result<Recorded> {
        let v = self.read_json(name, "recorded.json")?;
        serde_json::from_value(v)
            .map_err(|e| Error::bad_input(self.record(name).join("recorded.json"), e.to_string()))
    }

    /// The records of benchmark `name`, relative to the records folder: the latest run
    /// (`NAME`), then the latest run of each other machine kind (`NAME/machines/KIND`),
    /// newest first.
    fn runs_of(&self, name: &str) -> Result<Vec<String>> {
        let mut others = Vec::new();
        let dir = self.record(name).join(MACHINES_DIR);
        if dir.is_dir() {
            for e in std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
                let e = e.map_err(|e| Error::io(&dir, e))?;
                if e.path().is_dir() {
                    let run = format!("{name}/{MACHINES_DIR}/{}", e.file_name().to_string_lossy());
                    others.push((self.recorded(&run)?.finished, run));
                }
            }
        }
        others.sort_by(|a, b| b.cmp(a));
        Ok(std::iter::once(name.to_string())
            .chain(others.into_iter().map(|(_, r)| r))
            .collect())
    }

    /// The benchmark runs, the latest of each benchmark and then the latest on each other
    /// machine kind: link, date, commit, CPU model and flags, load average before (and
    /// after, when the benchmark recorded it).
    pub fn render_runs(&self) -> Result<String> {
        let mut t = Table::new([
            "benchmark",
            "finished (UTC)",
            "commit",
            "CPU model and flags",
            "load average before → after",
        ]);
        for b in &self.benchmark {
            for (i, run) in self.runs_of(&b.name)?.iter().enumerate() {
                let rec = self.recorded(run)?;
                let config = self.read_json(run, "config.json")?;
                let manifest = self.read_json(run, "manifest.json")?;
                let m = &config["machine"];
                let before = m["load_before"].as_str().unwrap_or("not recorded");
                // The benchmarks name the load at their end in several ways.
                let summary = &manifest["summary"];
                let end = summary["load_end"]
                    .as_str()
                    .or_else(|| summary["load_avg_end"].as_str())
                    .map(str::to_string)
                    .or_else(|| {
                        summary["loadavg_1min"]
                            .as_array()
                            .and_then(|a| a.last())
                            .map(|x| format!("{x} (1 min)"))
                    });
                let load = format!("{before} → {}", end.as_deref().unwrap_or("not recorded"));
                let commit = if rec.dirty {
                    format!("`{}` with uncommitted changes", rec.commit)
                } else {
                    format!("`{}`", rec.commit)
                };
                let label = if i == 0 {
                    format!("[{}]({})", b.title, b.link)
                } else {
                    format!("[{}]({}), other machine", b.title, b.link)
                };
                t.push([label, rec.when(), commit, cpu_label(m), load])?;
            }
        }
        Ok(t.to_markdown())
    }

    /// A record's own tables: its `bench.md` (or the `file` its `[[benchmark]]` names), as
    /// the benchmark wrote it, then those of the
    /// latest run on each other machine kind, each under a line naming the machine.
    pub fn render_record(&self, name: &str) -> Result<String> {
        let Some(b) = self.benchmark.iter().find(|b| b.name == name) else {
            return Err(Error::bad_input(
                &self.path,
                format!("no [[benchmark]] `{name}` (block `{RECORD_PREFIX}{name}`)"),
            ));
        };
        let mut out = String::new();
        for (i, run) in self.runs_of(name)?.iter().enumerate() {
            let p = self.record(run).join(&b.file);
            let text = std::fs::read_to_string(&p).map_err(|e| Error::io(&p, e))?;
            if i > 0 {
                let rec = self.recorded(run)?;
                let config = self.read_json(run, "config.json")?;
                out.push_str(&format!(
                    "\n\nThe latest run on another kind of machine ({}; {}, commit `{}`):\n\n",
                    cpu_label(&config["machine"]),
                    rec.when(),
                    rec.commit
                ));
            }
            out.push_str(text.trim());
        }
        Ok(out)
    }
}

/// Every record-backed block among `wanted` (the ids the pages mark), rendered from the
/// project at `root`: the matrix from `conditions`, the step times, the assets table, the
/// benchmark tables. Ids that are not record-backed are left to the caller.
pub fn record_blocks(
    root: &Path,
    conditions: &Conditions,
    wanted: &[String],
) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let want = |id: &str| wanted.iter().any(|w| w == id);
    if want(MATRIX_ID) {
        let times = super::StepTimes::load(
            &root.join("scripts/reproduce"),
            &root.join("data/reproduce-times.tsv"),
        )?;
        out.push((
            MATRIX_ID.to_string(),
            conditions.render_matrix(Some(&times))?,
        ));
    }
    if want(super::STEP_TIMES_ID) {
        out.push((
            super::STEP_TIMES_ID.to_string(),
            super::render_step_times(
                &root.join("scripts/reproduce"),
                &root.join("data/reproduce-times.tsv"),
            )?,
        ));
    }
    if want(SCRIPT_TIMES_ID) || want(NOTEBOOK_TIMES_ID) || want(SCRIPT_STEPS_ID) {
        let times = read_script_times(&root.join("data/script-times.tsv"))?;
        if want(SCRIPT_TIMES_ID) {
            out.push((SCRIPT_TIMES_ID.to_string(), render_script_times(&times)?));
        }
        if want(SCRIPT_STEPS_ID) {
            out.push((SCRIPT_STEPS_ID.to_string(), render_script_steps(&times)?));
        }
        if want(NOTEBOOK_TIMES_ID) {
            out.push((
                NOTEBOOK_TIMES_ID.to_string(),
                render_notebook_times(&times, &root.join("notebooks"))?,
            ));
        }
    }
    if want(NOTEBOOK_FIRST_RESULT_ID) {
        let results = read_first_results(&root.join("data/notebook-first-result.tsv"))?;
        out.push((
            NOTEBOOK_FIRST_RESULT_ID.to_string(),
            render_notebook_first_result(&results, &root.join("notebooks"))?,
        ));
    }
    if want(ASSETS_ID) || want(ASSETS_DETAIL_ID) {
        let assets = Assets::from_manifest(
            &root.join("data/assets.toml"),
            crate::paths::hf_cache_dir(root),
            crate::paths::mirror_dir(root),
            crate::paths::wheel_dir(root),
        )?;
        if want(ASSETS_ID) {
            out.push((ASSETS_ID.to_string(), render_assets(&assets)?));
        }
        if want(ASSETS_DETAIL_ID) {
            out.push((ASSETS_DETAIL_ID.to_string(), render_assets_detail(&assets)?));
        }
    }
    for id in wanted {
        if let Some(name) = id.strip_prefix(FINDINGS_PREFIX) {
            if out.iter().any(|(done, _)| done == id) {
                continue;
            }
            let path = root.join("data/findings").join(format!("{name}.md"));
            let template = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
            let text = conditions.render_text(template.trim_end(), &path)?;
            out.push((id.clone(), format!("{}\n", reflow(&text, 95))));
        }
    }
    let bench_ids: Vec<&String> = wanted
        .iter()
        .filter(|w| {
            *w == PERFORMANCE_ID
                || *w == TRADEOFFS_ID
                || *w == BENCH_RUNS_ID
                || w.starts_with(RECORD_PREFIX)
        })
        .collect();
    if !bench_ids.is_empty() {
        let b = Benchmarks::load(
            &root.join("data/benchmarks.toml"),
            &root.join("data/benchmarks"),
        )?;
        let mut seen = std::collections::BTreeSet::new();
        for id in bench_ids {
            if !seen.insert(id.clone()) {
                continue;
            }
            let text = if id == PERFORMANCE_ID {
                b.render_performance()?
            } else if id == TRADEOFFS_ID {
                b.render_tradeoffs()?
            } else if id == BENCH_RUNS_ID {
                b.render_runs()?
            } else {
                b.render_record(&id[RECORD_PREFIX.len()..])?
            };
            out.push((id.clone(), text));
        }
    }
    Ok(out)
}

/// `text` with each paragraph and list item (`- ` …) refilled to lines of at most `width`
/// characters (a longer word gets a line of its own); tables, headings and blank lines are
/// kept as they are. The placeholders of a findings text make its lines ragged once filled.
fn reflow(text: &str, width: usize) -> String {
    fn fill(out: &mut Vec<String>, words: &[&str], first: &str, rest: &str, width: usize) {
        let mut line = first.to_string();
        let mut empty = true;
        for w in words {
            if !empty && line.chars().count() + 1 + w.chars().count() > width {
                out.push(std::mem::replace(&mut line, rest.to_string()));
                empty = true;
            }
            if !empty {
                line.push(' ');
            }
            line.push_str(w);
            empty = false;
        }
        if !empty {
            out.push(line);
        }
    }
    let mut out = Vec::new();
    let mut block: Vec<&str> = Vec::new();
    let mut item = false;
    let flush = |out: &mut Vec<String>, block: &mut Vec<&str>, item: bool| {
        if block.is_empty() {
            return;
        }
        let (first, rest) = if item { ("- ", "  ") } else { ("", "") };
        fill(out, block, first, rest, width);
        block.clear();
    };
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('|') || t.starts_with('#') {
            flush(&mut out, &mut block, item);
            out.push(line.to_string());
            continue;
        }
        if let Some(body) = t.strip_prefix("- ") {
            flush(&mut out, &mut block, item);
            item = true;
            block.extend(body.split_whitespace());
        } else {
            if block.is_empty() {
                item = false;
            }
            block.extend(t.split_whitespace());
        }
    }
    flush(&mut out, &mut block, item);
    out.join("\n")
}

/// Whether `id` is a block [`record_blocks`] renders.
pub fn is_record_block(id: &str) -> bool {
    [
        MATRIX_ID,
        super::STEP_TIMES_ID,
        ASSETS_ID,
        ASSETS_DETAIL_ID,
        PERFORMANCE_ID,
        TRADEOFFS_ID,
        BENCH_RUNS_ID,
        SCRIPT_TIMES_ID,
        SCRIPT_STEPS_ID,
        NOTEBOOK_TIMES_ID,
        NOTEBOOK_FIRST_RESULT_ID,
    ]
    .contains(&id)
        || id.starts_with(RECORD_PREFIX)
        || id.starts_with(FINDINGS_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_kinds_name_the_model_and_the_widest_instructions() {
        let m = |model: &str, f: &[&str]| serde_json::json!({"cpu_model": model, "features": f});
        assert_eq!(
            machine_kind(&m(
                "Intel(R) Xeon(R) Processor",
                &["avx2", "avx512f", "avx_vnni", "amx_int8"]
            )),
            "intel-xeon-amx"
        );
        assert_eq!(
            machine_kind(&m("AMD EPYC 7B13 64-Core Processor", &["avx2", "fma"])),
            "amd-epyc-7b13-64-avx2"
        );
        assert_eq!(
            machine_kind(&m("Intel(R) Core(TM) i7-8550U CPU @ 1.80GHz", &["avx512f"])),
            "intel-i7-8550u-avx512"
        );
        assert_eq!(
            machine_kind(&m(
                "AMD EPYC",
                &["avx2", "avx512f", "avx512_vnni", "avx_vnni"]
            )),
            "amd-epyc-avx512-avxvnni"
        );
        assert_eq!(
            machine_kind(&m(
                "AMD EPYC",
                &["avx2", "avx512f", "avx512_vnni", "avx512_bf16"]
            )),
            "amd-epyc-avx512"
        );
        assert_eq!(machine_kind(&serde_json::json!({})), "unknown-baseline");
    }

    #[test]
    fn other_machine_kinds_are_shown_after_the_latest_run() {
        let dir = tempfile::tempdir().unwrap();
        let b = fixture(dir.path(), "x\n1\n", "");
        let other = dir.path().join("records/bench-x/machines/amd-epyc-avx2");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("bench.md"), "| b |\n|---|\n| 2 |\n").unwrap();
        std::fs::write(
            other.join("recorded.json"),
            r#"{"finished": "2026-11-25T10:00:00Z", "commit": "abc1234"}"#,
        )
        .unwrap();
        std::fs::write(
            other.join("config.json"),
            r#"{"machine": {"cpu_model": "AMD EPYC", "cores": 2, "features": ["avx2"], "load_before": "1.0"}}"#,
        )
        .unwrap();
        std::fs::write(
            other.join("manifest.json"),
            r#"{"summary": {"load_end": "2.0"}}"#,
        )
        .unwrap();
        let runs = b.render_runs().unwrap();
        let lines: Vec<&str> = runs.lines().skip(2).collect();
        assert_eq!(lines.len(), 2, "{runs}");
        assert!(
            lines[0].starts_with("| [X vs Y](#x) | 2026-11-27 08:25:00 | `ef4fd67`"),
            "{runs}"
        );
        assert!(lines[1].contains("other machine") && lines[1].contains("AMD EPYC, 2 cores, avx2"));
        assert!(lines[1].contains("1.0 → 2.0"), "{runs}");
        let rec = b.render_record("bench-x").unwrap();
        assert!(rec.starts_with("| a |"), "{rec}");
        assert!(
            rec.contains("another kind of machine (AMD EPYC, 2 cores, avx2; 2026-11-25 10:00:00, commit `abc1234`):\n\n| b |"),
            "{rec}"
        );
    }

    #[test]
    fn findings_texts_are_refilled() {
        let text = "Intro with\na   short\nline.\n\n- item one\n  goes on\n- item two\n\n| a | b |\n|---|---|";
        assert_eq!(
            reflow(text, 12),
            "Intro with a\nshort line.\n\n- item one\n  goes on\n- item two\n\n| a | b |\n|---|---|"
        );
        assert_eq!(
            reflow("averyveryverylongword x", 5),
            "averyveryverylongword\nx"
        );
    }

    #[test]
    fn thousands_groups_long_integers_only() {
        assert_eq!(thousands("54823"), "54,823");
        assert_eq!(thousands("1234567"), "1,234,567");
        assert_eq!(thousands("3715"), "3,715");
        assert_eq!(thousands("512"), "512");
        assert_eq!(thousands("2.36"), "2.36");
        assert_eq!(thousands("1.12× (native)"), "1.12× (native)");
    }

    #[test]
    fn script_times_take_the_last_total_per_setup() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.tsv");
        std::fs::write(
            &p,
            "# header\ntest\ttotal\t2919\t2026-11-25T09:00:00Z\tEPYC\t0.50 0.40 0.30\tfresh\tfirst\n\
             test\ttotal\t432\t2026-11-23T09:00:00Z\tEPYC\t1.00 1.00 1.00\tcached\t\n\
             test\texecute notebooks/a.ipynb\t61\t2026-11-24T10:00:00Z\tXeon\t2.00 2.00 2.00\tcached\t\n\
             test\tcargo test\t219\t2026-11-25T10:00:00Z\tEPYC\t1.00 1.00 1.00\tcached\t\n\
             test\ttotal\t684\t2026-11-25T10:00:00Z\tEPYC\t1.00 1.00 1.00\tcached\t\tabc1234\n",
        )
        .unwrap();
        let times = read_script_times(&p).unwrap();
        let md = render_script_times(&times).unwrap();
        assert!(
            md.contains("| `bash scripts/test` | 48m39s (2026-11-25, load 0.50 0.40 0.30; first) | 11m24s (2026-11-25, commit abc1234, load 1.00 1.00 1.00) |"),
            "{md}"
        );
        assert!(
            md.contains("| `bash scripts/reproduce --scale paper` | not measured | not measured |"),
            "{md}"
        );
        let steps = render_script_steps(&times).unwrap();
        assert!(
            steps.starts_with(
                "`bash scripts/test`, setup cached: 2026-11-25, EPYC, load 1.00 1.00 1.00."
            ),
            "{steps}"
        );
        // The fresh run has no step rows: only the cached run of 2026-11-25 is shown (the
        // notebook row belongs to 2026-11-24's run).
        assert!(steps.contains("| cargo test | 3m39s |"), "{steps}");
        assert!(!steps.contains("notebooks/a"), "{steps}");
        assert!(steps.contains("| **total** | **11m24s** |"), "{steps}");
        assert!(!steps.contains("nothing installed"), "{steps}");
        let nb = dir.path().join("nb");
        std::fs::create_dir_all(&nb).unwrap();
        std::fs::write(nb.join("a.ipynb"), "{}").unwrap();
        std::fs::write(nb.join("b.ipynb"), "{}").unwrap();
        let md = render_notebook_times(&times, &nb).unwrap();
        assert!(
            md.contains("| `a` | 1m01s (2026-11-24, load 2.00 2.00 2.00) | `scripts/test` |"),
            "{md}"
        );
        assert!(md.contains("| `b` | not measured | – |"), "{md}");
        std::fs::write(&p, "test\ttotal\tsoon\td\tc\tl\tfresh\n").unwrap();
        let e = read_script_times(&p).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("soon"), "{e}");
        // A line typed in (a date alone, an estimated load) is refused.
        for typed in [
            "reproduce quick\ttotal\t7200\t2026-11-26\tXeon\t4.00 5.00 6.00\tfresh\n",
            "reproduce quick\ttotal\t7200\t2026-11-26T10:00:00Z\tXeon\t4–6\tfresh\n",
            "reproduce quick\ttotal\t7200\t2026-11-26T10:00:00Z\tXeon\tnot recorded\tfresh\n",
        ] {
            std::fs::write(&p, typed).unwrap();
            let e = read_script_times(&p).unwrap_err().to_string();
            assert!(e.contains("line 1") && e.contains("not typed in"), "{e}");
        }
        assert_eq!(duration(7200), "2h00m");
        assert_eq!(duration(52), "52 s");
    }

    #[test]
    fn first_results_take_the_last_cold_and_warm_line_per_notebook() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.tsv");
        std::fs::write(
            &p,
            "# notebook\trun\t…\n\
             a\tcold\t1201.0\t1212.4\tyes\tok\t2026-11-29T08:00:00Z\tEPYC\t5.00 4.00 3.00\tabc1234\n\
             a\twarm\t30.0\t41.0\tno\tok\t2026-11-29T08:10:00Z\tEPYC\t2.00 2.00 2.00\tabc1234\n\
             a\twarm\t20.0\t31.2\tno\tok\t2026-11-29T09:10:00Z\tEPYC\t1.00 1.00 1.00\tdef5678\n\
             b\twarm\t21.0\t22.0\tno\terror: No such file or directory | x\t2026-11-29T08:20:00Z\tEPYC\t2.00 2.00 2.00\tabc1234\n",
        )
        .unwrap();
        let results = read_first_results(&p).unwrap();
        assert_eq!(results.len(), 4);
        let nb = dir.path().join("nb");
        std::fs::create_dir_all(&nb).unwrap();
        for n in ["a", "b", "c"] {
            std::fs::write(nb.join(format!("{n}.ipynb")), "{}").unwrap();
        }
        let md = render_notebook_first_result(&results, &nb).unwrap();
        assert!(
            md.contains("| `a` | 20m12s (`:dep` cell 20m01s; compiled the library), 2026-11-29, commit abc1234, load 5.00 4.00 3.00 | 31.2 s (`:dep` cell 20.0 s), 2026-11-29, commit def5678, load 1.00 1.00 1.00 |"),
            "{md}"
        );
        assert!(
            md.contains("| `b` | not measured | 22.0 s (`:dep` cell 21.0 s; the cell stopped on `No such file or directory / x`), 2026-11-29, commit abc1234, load 2.00 2.00 2.00 |"),
            "{md}"
        );
        assert!(md.contains("| `c` | not measured | not measured |"), "{md}");
        assert!(md.contains("(CPU: EPYC)"), "{md}");
        for (bad, why) in [
            (
                "a\tcold\t1.0\t2.0\tyes\tok\t2026-11-29\tEPYC\t1.00 1.00 1.00\tabc\n",
                "not typed in",
            ),
            (
                "a\tcold\t1.0\t2.0\tyes\tok\t2026-11-29T08:00:00Z\tEPYC\t~1\tabc\n",
                "not typed in",
            ),
            (
                "a\thot\t1.0\t2.0\tyes\tok\t2026-11-29T08:00:00Z\tEPYC\t1.00 1.00 1.00\tabc\n",
                "neither `cold`",
            ),
            (
                "a\tcold\tsoon\t2.0\tyes\tok\t2026-11-29T08:00:00Z\tEPYC\t1.00 1.00 1.00\tabc\n",
                "`soon`",
            ),
            (
                "a\tcold\t1.0\t2.0\tmaybe\tok\t2026-11-29T08:00:00Z\tEPYC\t1.00 1.00 1.00\tabc\n",
                "`maybe`",
            ),
            ("a\tcold\t1.0\n", "3 fields"),
        ] {
            std::fs::write(&p, bad).unwrap();
            let e = read_first_results(&p).unwrap_err().to_string();
            assert!(e.contains("line 1") && e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn github_repo_from_a_raw_prefix() {
        assert_eq!(
            github_repo("https://raw.githubusercontent.com/chrischute/squad/4f2f/data/").as_deref(),
            Some("chrischute/squad")
        );
        assert_eq!(github_repo("https://example.org/x/"), None);
    }

    /// A record with one CSV; a performance row naming two of its cells.
    fn fixture(dir: &Path, csv: &str, row: &str) -> Benchmarks {
        try_fixture(dir, csv, row).unwrap()
    }

    /// A record `records/NAME` under `dir`: its `bench.csv` and `bench.md`, finished at
    /// `finished` (RFC 3339) on `machine` (the `machine` object of its config, as JSON).
    fn write_record(dir: &Path, name: &str, csv: &str, md: &str, finished: &str, machine: &str) {
        let rec = dir.join("records").join(name);
        std::fs::create_dir_all(&rec).unwrap();
        std::fs::write(rec.join("bench.csv"), csv).unwrap();
        std::fs::write(rec.join("bench.md"), md).unwrap();
        std::fs::write(
            rec.join("recorded.json"),
            format!(r#"{{"finished": "{finished}", "commit": "ef4fd67", "dirty": false}}"#),
        )
        .unwrap();
        std::fs::write(
            rec.join("config.json"),
            format!(r#"{{"machine": {machine}}}"#),
        )
        .unwrap();
        std::fs::write(rec.join("manifest.json"), r#"{"summary": {}}"#).unwrap();
    }

    /// [`fixture`], with `data/benchmarks.toml`'s errors returned.
    fn try_fixture(dir: &Path, csv: &str, row: &str) -> Result<Benchmarks> {
        write_record(
            dir,
            "bench-x",
            csv,
            "\n| a |\n|---|\n| 1 |\n\n",
            "2026-11-27T08:25:00Z",
            r#"{"cpu_model": "Xeon", "cores": 2, "features": ["avx2", "fma"], "load_before": "0.5 0.4 0.3"}"#,
        );
        let toml = dir.join("benchmarks.toml");
        std::fs::write(
            &toml,
            format!(
                "[[benchmark]]\nname = \"bench-x\"\ntitle = \"X vs Y\"\nlink = \"#x\"\n\n{row}"
            ),
        )
        .unwrap();
        Benchmarks::load(&toml, &dir.join("records"))
    }

    const ROW: &str = r#"[[row]]
benchmark = "bench-x"
what = "queries/s"
ours = "{ours}"
peer = "Y {peer}"
ratio = "{ratio}× ({ours/peer}×)"
cells = { ours = { file = "bench.csv", where = { system = "ours", mode = "fast" }, column = "qps" }, peer = { file = "bench.csv", where = { system = "Y" }, column = "qps" }, ratio = { file = "bench.csv", where = { system = "ours", mode = "fast" }, column = "ratio" } }
"#;

    #[test]
    fn performance_rows_come_from_the_record_cells() {
        let dir = tempfile::tempdir().unwrap();
        let csv = "system,mode,qps,ratio\nY,fast,23273,1.00\nours,fast,54823,2.36\nours,slow,15623,0.67\n";
        let b = fixture(dir.path(), csv, ROW);
        let md = b.render_performance().unwrap();
        assert!(
            md.contains(
                "| queries/s | 54,823 | Y 23,273 | 2.36× (2.36×) | 2026-11-27, xeon-avx2 |"
            ),
            "{md}"
        );
        let runs = b.render_runs().unwrap();
        assert!(
            runs.contains("| [X vs Y](#x) | 2026-11-27 08:25:00 | `ef4fd67` | Xeon, 2 cores, avx2 fma | 0.5 0.4 0.3 → not recorded |"),
            "{runs}"
        );
        assert_eq!(b.render_record("bench-x").unwrap(), "| a |\n|---|\n| 1 |");
        assert!(b.render_record("bench-y").is_err());
    }

    #[test]
    fn rows_from_two_kinds_of_machine_are_two_tables_each_under_its_cpu() {
        let dir = tempfile::tempdir().unwrap();
        write_record(
            dir.path(),
            "bench-y",
            "system,qps\nours,7\n",
            "| c |\n|---|\n| 3 |\n",
            "2026-11-29T08:25:00Z",
            r#"{"cpu_model": "AMD EPYC", "cores": 2, "features": ["avx2", "avx512f"], "load_before": "1.0"}"#,
        );
        let row_y = r#"[[row]]
benchmark = "bench-y"
what = "other"
ours = "{ours}"
peer = "none"
ratio = "1×"
cells = { ours = { file = "bench.csv", where = { system = "ours" }, column = "qps" } }
"#;
        // Rows x, y, x: the two x rows come together, in the kind of the first row.
        let rows = format!(
            "[[benchmark]]\nname = \"bench-y\"\ntitle = \"Y\"\nlink = \"#y\"\n\n{ROW}\n{row_y}\n{}",
            ROW.replace("what = \"queries/s\"", "what = \"again\"")
        );
        let md = fixture(
            dir.path(),
            "system,mode,qps,ratio\nY,fast,2,1\nours,fast,5,2.5\n",
            &rows,
        )
        .render_performance()
        .unwrap();
        let xeon = md
            .find("On `xeon-avx2` (Xeon, 2 cores, avx2 fma):")
            .expect(&md);
        let epyc = md
            .find("On `amd-epyc-avx512` (AMD EPYC, 2 cores, avx2 avx512f):")
            .expect(&md);
        assert!(xeon < epyc, "{md}");
        let (first, second) = md.split_at(epyc);
        assert!(
            first.contains("| queries/s |") && first.contains("| again |"),
            "{md}"
        );
        assert!(
            second.contains("| other | 7 | none | 1× | 2026-11-29, amd-epyc-avx512 |"),
            "{md}"
        );
        assert_eq!(
            md.matches("| what | ours | peer | ratio | run |").count(),
            2,
            "{md}"
        );
        assert!(
            !md.contains("\n\n\n"),
            "one blank line between the tables: {md:?}"
        );
    }

    /// A trade-off row: the approximate configuration against the exact one, with a cell in
    /// its `what`.
    const TRADEOFF: &str = r#"[[row]]
benchmark = "bench-x"
table = "tradeoffs"
what = "fast mode, {n} queries"
ours = "{ours}"
peer = "slow {slow}"
ratio = "{ours/slow}×"
cells.n = { file = "bench.csv", where = { system = "ours", mode = "fast" }, column = "n" }
cells.ours = { file = "bench.csv", where = { system = "ours", mode = "fast" }, column = "qps" }
cells.slow = { file = "bench.csv", where = { system = "ours", mode = "slow" }, column = "qps" }
"#;

    #[test]
    fn a_tradeoffs_row_is_in_its_own_table_and_not_the_readmes() {
        let dir = tempfile::tempdir().unwrap();
        let csv = "system,mode,qps,ratio,n\nY,fast,23273,1.00,1050\nours,fast,54823,2.36,1050\nours,slow,15623,0.67,1050\n";
        let b = fixture(dir.path(), csv, &format!("{ROW}\n{TRADEOFF}"));
        let peers = b.render_performance().unwrap();
        assert!(
            peers.starts_with("| what | ours | peer | ratio | run |"),
            "{peers}"
        );
        assert!(
            peers.contains("| queries/s | 54,823 | Y 23,273 |"),
            "{peers}"
        );
        assert!(!peers.contains("fast mode"), "{peers}");
        let tradeoffs = b.render_tradeoffs().unwrap();
        assert!(
            tradeoffs.starts_with("| what | approximate | exact | speed-up | run |"),
            "{tradeoffs}"
        );
        assert!(
            tradeoffs.contains(
                "| fast mode, 1,050 queries | 54,823 | slow 15,623 | 3.51× | 2026-11-27, xeon-avx2 |"
            ),
            "{tradeoffs}"
        );
        assert!(!tradeoffs.contains("| queries/s |"), "{tradeoffs}");
        // Both blocks come out of `record_blocks` under their ids.
        let root = dir.path();
        std::fs::create_dir_all(root.join("data")).unwrap();
        std::fs::rename(root.join("records"), root.join("data/benchmarks")).unwrap();
        std::fs::rename(
            root.join("benchmarks.toml"),
            root.join("data/benchmarks.toml"),
        )
        .unwrap();
        let conditions: Conditions = toml::from_str("").unwrap();
        let wanted = [PERFORMANCE_ID.to_string(), TRADEOFFS_ID.to_string()];
        let blocks = record_blocks(root, &conditions, &wanted).unwrap();
        assert_eq!(
            blocks,
            vec![
                (PERFORMANCE_ID.to_string(), peers),
                (TRADEOFFS_ID.to_string(), tradeoffs)
            ]
        );
        assert!(is_record_block(TRADEOFFS_ID));
    }

    #[test]
    fn an_unknown_table_is_an_error_naming_the_row() {
        let dir = tempfile::tempdir().unwrap();
        let csv = "system,mode,qps,ratio,n\nours,fast,2,2,1\nours,slow,1,1,1\n";
        let row = TRADEOFF.replace("\"tradeoffs\"", "\"trade-offs\"");
        let e = try_fixture(dir.path(), csv, &row).unwrap_err().to_string();
        assert!(
            e.contains("fast mode, {n} queries")
                && e.contains("`trade-offs`")
                && e.contains("`performance`, `tradeoffs`"),
            "{e}"
        );
    }

    #[test]
    fn a_json_cell_reads_the_value_at_its_pointer() {
        let dir = tempfile::tempdir().unwrap();
        let csv = "system,qps\nours,4\nY,2\n";
        let row = r#"[[row]]
benchmark = "bench-x"
what = "{cores} cores, CPU {cpu}"
ours = "{ours}"
peer = "{peer}"
ratio = "{ours/peer}"
cells.cores = { file = "config.json", pointer = "/machine/cores" }
cells.cpu = { file = "config.json", pointer = "/machine/cpu_model" }
cells.ours = { file = "bench.csv", where = { system = "ours" }, column = "qps" }
cells.peer = { file = "bench.csv", where = { system = "Y" }, column = "qps" }
"#;
        let md = fixture(dir.path(), csv, row).render_performance().unwrap();
        assert!(md.contains("| 2 cores, CPU Xeon | 4 | 2 | 2.00 |"), "{md}");
        // Thousands are grouped as in every other cell; a boolean reads as JSON writes it.
        let counts = row
            .replace("{cores} cores, CPU {cpu}", "{n} queries, exact {exact}")
            .replace(
                "cells.cores = { file = \"config.json\", pointer = \"/machine/cores\" }",
                "cells.n = { file = \"manifest.json\", pointer = \"/summary/queries\" }\ncells.exact = { file = \"manifest.json\", pointer = \"/summary/exact\" }",
            );
        let b = fixture(dir.path(), csv, &counts);
        std::fs::write(
            dir.path().join("records/bench-x/manifest.json"),
            r#"{"summary": {"queries": 1050, "exact": true}}"#,
        )
        .unwrap();
        let md = b.render_performance().unwrap();
        assert!(
            md.contains("| 1,050 queries, exact true | 4 | 2 | 2.00 |"),
            "{md}"
        );
        // A JSON cell with a CSV's `column`, and a CSV cell without `where`, are errors.
        for (from, to, says) in [
            (
                "pointer = \"/machine/cores\"",
                "pointer = \"/machine/cores\", column = \"qps\"",
                "takes no",
            ),
            (
                "pointer = \"/machine/cores\"",
                "pointer = \"/machine/cores\", max = true",
                "takes no",
            ),
            (
                "where = { system = \"ours\" }, column",
                "column",
                "needs `where` and `column`",
            ),
        ] {
            let bad = row.replace(from, to);
            let e = fixture(dir.path(), csv, &bad)
                .render_performance()
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{e}");
        }
        // A pointer to nothing, or to a list, is an error naming the pointer.
        for (pointer, says) in [
            ("/machine/threads", "no value"),
            ("/machine/features", "not a"),
        ] {
            let bad = row.replace("/machine/cores", pointer);
            let e = fixture(dir.path(), csv, &bad)
                .render_performance()
                .unwrap_err()
                .to_string();
            assert!(e.contains(pointer) && e.contains(says), "{e}");
        }
    }

    #[test]
    fn a_median_cell_takes_every_matching_row() {
        let dir = tempfile::tempdir().unwrap();
        let csv =
            "round,system,qps,ratio\n1,Y,10.4,1\n1,ours,3.22,1\n2,ours,4.50,1\n3,ours,4.26,1\n";
        let row = r#"[[row]]
benchmark = "bench-x"
what = "w"
ours = "{ours}"
peer = "{peer}"
ratio = "{ours/peer}"
cells.ours = { file = "bench.csv", where = { system = "ours" }, column = "qps", median = true }
cells.peer = { file = "bench.csv", where = { system = "Y" }, column = "qps", median = true, decimals = 0 }
"#;
        let b = fixture(dir.path(), csv, row);
        let md = b.render_performance().unwrap();
        // The ratio divides the cells as recorded (4.26 / 10.4), not as rounded (4.26 / 10).
        assert!(md.contains("| w | 4.26 | 10 | 0.41 |"), "{md}");
        // `min` and `max` take the ends of the same rows, with the inputs' decimals.
        let spread = row
            .replace("ours = \"{ours}\"", "ours = \"{ours} ({lo}–{hi})\"")
            .replace(
                "cells.peer",
                "cells.lo = { file = \"bench.csv\", where = { system = \"ours\" }, column = \"qps\", min = true }\n\
                 cells.hi = { file = \"bench.csv\", where = { system = \"ours\" }, column = \"qps\", max = true }\n\
                 cells.peer",
            );
        let md = fixture(dir.path(), csv, &spread)
            .render_performance()
            .unwrap();
        assert!(md.contains("| w | 4.26 (3.22–4.50) | 10 |"), "{md}");
        // A cell asks for one of them only.
        let both = spread.replace("min = true", "min = true, max = true");
        let e = fixture(dir.path(), csv, &both)
            .render_performance()
            .unwrap_err()
            .to_string();
        assert!(e.contains("one of `median`, `min` and `max`"), "{e}");
    }

    #[test]
    fn an_ambiguous_or_missing_cell_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        // Two `ours, fast` rows.
        let csv = "system,mode,qps,ratio\nY,fast,1,1\nours,fast,2,2\nours,fast,3,3\n";
        let b = fixture(dir.path(), csv, ROW);
        let e = b.render_performance().unwrap_err().to_string();
        assert!(e.contains("bench.csv") && e.contains("2 rows"), "{e}");
        let csv = "system,mode,qps\nY,fast,1\nours,fast,2\n";
        let b = fixture(dir.path(), csv, ROW);
        let e = b.render_performance().unwrap_err().to_string();
        assert!(e.contains("no column `ratio`"), "{e}");
    }

    /// The record-backed blocks of README.md and docs/*.md match what they are generated
    /// from (the matrix, step times, assets and benchmark tables): run
    /// `cargo run --release --bin grade -- readme --write` after changing a source.
    #[test]
    fn project_record_blocks_are_up_to_date() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let conditions = Conditions::load(&root.join("data/expected.toml")).unwrap();
        let pages = super::super::pages(&root).unwrap();
        let mut texts = Vec::new();
        let mut marked = Vec::new();
        for p in &pages {
            let text = std::fs::read_to_string(p).unwrap();
            marked.extend(super::super::marked_ids(&text));
            texts.push((p.clone(), text));
        }
        for id in [
            MATRIX_ID,
            ASSETS_ID,
            PERFORMANCE_ID,
            TRADEOFFS_ID,
            BENCH_RUNS_ID,
        ] {
            assert!(marked.iter().any(|m| m == id), "no page marks `{id}`");
        }
        let blocks = record_blocks(&root, &conditions, &marked).unwrap();
        for (page, text) in &texts {
            for (id, table) in &blocks {
                if super::super::marked_ids(text).contains(id) {
                    let current = super::super::block_content(text, id, page).unwrap();
                    let diff = super::super::block_diff(current, table);
                    assert!(
                        diff.is_empty(),
                        "{}: block `{id}` is out of date (run `grade readme --write`):\n{}",
                        page.display(),
                        diff.join("\n")
                    );
                }
            }
        }
    }
}
