//! Grade every number the README and docs/ report against the result folders, and keep
//! their result tables generated from them.
//!
//! ```text
//! cargo run --release --bin grade                      # grade data/results/ against data/expected.toml
//! cargo run --release --bin grade -- --scale quick     # the quick scale's results
//! cargo run --release --bin grade -- readme --check    # fail if a generated table of README.md or docs/*.md is out of date
//! cargo run --release --bin grade -- readme --write    # regenerate them
//! ```
//!
//! Grades (see `data/expected.toml` and `workbench::grade`): OK, OKish (within
//! tolerance), FAIL, MISSING, STALE; timings are `reported`, not graded. Each line shows
//! the expected value beside the measured one; the last line counts the grades.
//!
//! `grade readme` covers README.md and every docs/*.md (`--page PATH`, repeatable, checks
//! only the pages named): each generated block is compared with the table its result
//! gives, and a stale one is reported with its page. A block the conditions describe must
//! sit in at least one page, and a page's block must be described.
//!
//! Exit status: 0 when every graded condition is OK or OKish (or every generated table is
//! up to date); 1 when any is FAIL, MISSING or STALE (or a generated table differs from
//! its result); 2 when the conditions file, a result table or a page cannot be read, or a
//! page's markers are wrong.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use workbench::grade::{self, Conditions};

#[derive(Parser, Debug)]
#[command(
    about = "Grade the numbers of README.md and docs/ against data/results/, and generate their tables"
)]
struct Args {
    /// Conditions file (default: data/expected.toml in the project root).
    #[arg(long)]
    conditions: Option<PathBuf>,
    /// Result folders (default: data/results in the project root).
    #[arg(long)]
    results: Option<PathBuf>,
    /// Where the experiment binaries are, to check that each result was written by the
    /// current build (default: this program's folder; `none` skips the check).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Grade only the results of this scale (quick, default, paper); `data/expected.toml`
    /// gives each result's scale.
    #[arg(long, default_value = "default")]
    scale: workbench::study::Scale,
    /// A step of `scripts/reproduce` that was not run on purpose (an online-only data set
    /// without internet; repeatable): its result (`STEP`, `STEP-quick` at the quick scale)
    /// is not graded, and its tables are left as the pages have them.
    #[arg(long = "not-run", value_name = "STEP")]
    not_run: Vec<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the machine kind of a benchmark's `config.json` (`workbench::grade::records::
    /// machine_kind`); `scripts/record_bench` keeps the latest run of each kind.
    MachineKind {
        /// A benchmark result's (or record's) `config.json`.
        config: PathBuf,
    },
    /// The generated tables of README.md and docs/*.md: check them (default) or rewrite them.
    Readme {
        /// Rewrite the blocks between the markers from the results.
        #[arg(long, conflicts_with = "check")]
        write: bool,
        /// Exit 1 when a block differs from what the results give (the default).
        #[arg(long)]
        check: bool,
        /// A page to check instead of the default set (repeatable; default: README.md
        /// and every docs/*.md of the project root).
        #[arg(long = "page", alias = "readme")]
        pages: Vec<PathBuf>,
        /// Only the blocks generated from committed sources (matrix, findings, step times,
        /// assets, benchmark records); the result tables are left as they are, so this
        /// needs no result folders.
        #[arg(long)]
        records_only: bool,
        /// Render only this result table from the results (repeatable); the other result
        /// tables are left as they are, so only its result folder is needed. For a partial
        /// run (`scripts/reproduce --only …`).
        #[arg(long = "block", conflicts_with = "records_only")]
        only_blocks: Vec<String>,
    },
}

fn main() -> ExitCode {
    let mut out = String::new();
    let result = run(&mut out);
    // A closed pipe (`grade | head`) is not an error worth a panic.
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("Error: writing to stdout: {e}");
            return ExitCode::from(2);
        }
    }
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            // The chain, without causes the message before already quotes.
            let mut msg = String::new();
            for cause in e.chain().map(|c| c.to_string()) {
                if !msg.contains(&cause) {
                    msg += if msg.is_empty() { "" } else { ": " };
                    msg += &cause;
                }
            }
            eprintln!("Error: {msg}");
            ExitCode::from(2)
        }
    }
}

/// Does the work, appending what to print to `out`; `Ok(false)` means exit status 1.
fn run(out: &mut String) -> Result<bool> {
    let args = Args::parse();
    let root = workbench::paths::project_root()?;
    let conditions_path = args
        .conditions
        .unwrap_or_else(|| root.join("data").join("expected.toml"));
    let results = args
        .results
        .unwrap_or_else(|| root.join("data").join("results"));
    // Read by the commands that grade or generate; `machine-kind` needs no conditions file.
    let load_conditions = || Conditions::load(&conditions_path);
    match args.command {
        None => {
            let bin_dir = match args.bin_dir {
                Some(p) if p.as_os_str() == "none" => None,
                Some(p) => Some(p),
                None => std::env::current_exe()
                    .context("locating this program")?
                    .parent()
                    .map(PathBuf::from),
            };
            let conditions = load_conditions()?
                .without_steps(&args.not_run)?
                .at_scale(args.scale);
            for step in &args.not_run {
                writeln!(out, "not graded: {step} (not run)")?;
            }
            writeln!(
                out,
                "grading {} values and {} floors of the {} scale from {} against {}",
                conditions.conditions().len(),
                conditions
                    .floor
                    .iter()
                    .map(|b| b.checks.len())
                    .sum::<usize>(),
                args.scale,
                conditions_path.display(),
                results.display()
            )?;
            let report = grade::grade(&conditions, &results, bin_dir.as_deref());
            out.push_str(&report.render());
            if !report.passed() {
                writeln!(out, "some values are FAIL, MISSING or STALE: exit status 1")?;
            }
            Ok(report.passed())
        }
        Some(Command::MachineKind { config }) => {
            let text = std::fs::read_to_string(&config)
                .with_context(|| format!("reading {}", config.display()))?;
            let v: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not JSON", config.display()))?;
            writeln!(out, "{}", grade::records::machine_kind(&v["machine"]))?;
            Ok(true)
        }
        Some(Command::Readme {
            write,
            pages,
            records_only,
            only_blocks,
            ..
        }) => {
            let conditions = load_conditions()?;
            // The results of steps not run: their tables stay as the pages have them.
            let ran = conditions.without_steps(&args.not_run)?;
            let not_run = |name: &str| !ran.result.iter().any(|r| r.name == name);
            let named = !pages.is_empty();
            let paths = if named { pages } else { grade::pages(&root)? };
            let mut pages = Vec::with_capacity(paths.len());
            for p in paths {
                let text = std::fs::read_to_string(&p)
                    .with_context(|| format!("reading {}", p.display()))?;
                pages.push((p, text));
            }
            // Pages named on the command line are checked for the blocks they hold; the
            // default set must hold every block the conditions describe.
            let marked: Vec<String> = pages
                .iter()
                .flat_map(|(_, text)| grade::marked_ids(text))
                .collect();
            if let Some(unknown) = only_blocks
                .iter()
                .find(|id| !conditions.readme.iter().any(|t| &t.id == *id))
            {
                anyhow::bail!(
                    "--block {unknown}: no [[readme]] table of {} has this id",
                    conditions_path.display()
                );
            }
            if let Some(absent) = only_blocks.iter().find(|id| !marked.contains(id)) {
                anyhow::bail!(
                    "--block {absent}: no page {} holds this table's markers",
                    if named {
                        "named by --page"
                    } else {
                        "of the default set"
                    }
                );
            }
            let mut blocks = Vec::new();
            // Result tables `--block` leaves as the pages have them.
            let mut kept = Vec::new();
            for t in &conditions.readme {
                if named && !marked.contains(&t.id) {
                    continue;
                }
                let left_by_block = (!only_blocks.is_empty() && !only_blocks.contains(&t.id))
                    || std::iter::once(&t.result)
                        .chain(&t.also)
                        .any(|r| not_run(r));
                if left_by_block {
                    kept.push(t.id.clone());
                }
                let table = if records_only || left_by_block {
                    match pages
                        .iter()
                        .find(|(_, text)| grade::marked_ids(text).contains(&t.id))
                    {
                        Some((page, text)) => {
                            grade::block_content(text, &t.id, page)?.trim().to_string()
                        }
                        None => continue,
                    }
                } else {
                    grade::render_readme_table(t, &results)?
                };
                blocks.push((t.id.clone(), table));
            }
            // Blocks generated from committed sources (the reproduction matrix, step times,
            // assets, benchmark records), wherever a page holds their markers.
            blocks.extend(grade::records::record_blocks(&root, &conditions, &marked)?);
            let updates = grade::update_pages(&pages, &blocks)?;
            let show =
                |p: &std::path::Path| p.strip_prefix(&root).unwrap_or(p).display().to_string();
            let mut stale_pages = Vec::new();
            let mut stale = 0;
            for u in &updates {
                for b in &u.blocks {
                    if kept.contains(&b.id) {
                        writeln!(
                            out,
                            "{}: table `{}`: kept (not rendered: --block or --not-run)",
                            show(&b.page),
                            b.id
                        )?;
                    } else if b.diff.is_empty() {
                        writeln!(out, "{}: table `{}`: up to date", show(&b.page), b.id)?;
                    } else {
                        stale += 1;
                        writeln!(
                            out,
                            "{}: table `{}`: {} (- page, + results):",
                            show(&b.page),
                            b.id,
                            if write { "rewritten" } else { "OUT OF DATE" }
                        )?;
                        for line in &b.diff {
                            writeln!(out, "  {line}")?;
                        }
                    }
                }
                if u.stale() {
                    stale_pages.push(show(&u.page));
                }
            }
            // Expected values that the (regenerated) tables contradict: text filled from
            // them would disagree with the table beside it.
            let texts: Vec<(std::path::PathBuf, String)> = updates
                .iter()
                .map(|u| (u.page.clone(), u.text.clone()))
                .collect();
            let contradicted = grade::contradictions(&conditions, &texts);
            for c in &contradicted {
                writeln!(out, "FLAGGED {c}")?;
            }
            if !contradicted.is_empty() {
                writeln!(
                    out,
                    "{} expected value(s) of {} contradicted by the tables: copy the tables' values there, then `grade readme --write`",
                    contradicted.len(),
                    show(&conditions_path)
                )?;
            }
            if write {
                for (u, (_, old)) in updates.iter().zip(&pages) {
                    if u.text != *old {
                        std::fs::write(&u.page, &u.text)
                            .with_context(|| format!("writing {}", u.page.display()))?;
                    }
                }
                writeln!(
                    out,
                    "{stale} table(s) rewritten in {} page(s){}",
                    stale_pages.len(),
                    if stale_pages.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", stale_pages.join(", "))
                    }
                )?;
                Ok(true)
            } else {
                if stale > 0 {
                    writeln!(
                        out,
                        "{stale} generated table(s) differ from the results, in {}: run `cargo run --release --bin grade -- readme --write` (exit status 1)",
                        stale_pages.join(", ")
                    )?;
                } else {
                    writeln!(
                        out,
                        "{} page(s) checked: every generated table is up to date",
                        updates.len()
                    )?;
                }
                Ok(stale == 0 && contradicted.is_empty())
            }
        }
    }
}
