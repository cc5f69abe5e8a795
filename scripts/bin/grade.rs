//! Grade every number the README reports against the result folders, and keep the
//! README's result tables generated from them.
//!
//! ```text
//! cargo run --release --bin grade                      # grade data/results/ against data/expected.toml
//! cargo run --release --bin grade -- --scale quick     # the quick scale's results
//! cargo run --release --bin grade -- readme --check    # fail if the README's generated tables are out of date
//! cargo run --release --bin grade -- readme --write    # regenerate them
//! ```
//!
//! Grades (see `data/expected.toml` and `workbench::grade`): OK, OKish (within
//! tolerance), FAIL, MISSING, STALE; timings are `reported`, not graded. Each line shows
//! the expected value beside the measured one; the last line counts the grades.
//!
//! Exit status: 0 when every graded condition is OK or OKish (or the README is up to
//! date); 1 when any is FAIL, MISSING or STALE (or a README table differs from its
//! result); 2 when the conditions file, a result table or the README cannot be read.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use workbench::grade::{self, Conditions};

#[derive(Parser, Debug)]
#[command(about = "Grade the README's numbers against data/results/, and generate its tables")]
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
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The README's generated tables: check them (default) or rewrite them.
    Readme {
        /// Rewrite the blocks between the markers from the results.
        #[arg(long, conflicts_with = "check")]
        write: bool,
        /// Exit 1 when a block differs from what the results give (the default).
        #[arg(long)]
        check: bool,
        /// The README (default: README.md in the project root).
        #[arg(long)]
        readme: Option<PathBuf>,
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
    let conditions = Conditions::load(&conditions_path)?;
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
            let conditions = conditions.at_scale(args.scale);
            writeln!(
                out,
                "grading {} values of the {} scale from {} against {}",
                conditions.conditions().len(),
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
        Some(Command::Readme { write, readme, .. }) => {
            let path = readme.unwrap_or_else(|| root.join("README.md"));
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let mut blocks = Vec::new();
            for t in &conditions.readme {
                blocks.push((t.id.clone(), grade::render_readme_table(t, &results)?));
            }
            let updated = grade::replace_blocks(&text, &blocks, &path)?;
            let mut stale = 0;
            for (id, table) in &blocks {
                let diff = grade::block_diff(grade::block_content(&text, id, &path)?, table);
                if diff.is_empty() {
                    writeln!(out, "README table `{id}`: up to date")?;
                } else {
                    stale += 1;
                    writeln!(
                        out,
                        "README table `{id}`: {} (- README, + results):",
                        if write { "rewritten" } else { "OUT OF DATE" }
                    )?;
                    for line in diff {
                        writeln!(out, "  {line}")?;
                    }
                }
            }
            if write {
                if updated != text {
                    std::fs::write(&path, &updated)
                        .with_context(|| format!("writing {}", path.display()))?;
                }
                writeln!(out, "{}: {stale} table(s) rewritten", path.display())?;
                Ok(true)
            } else {
                if stale > 0 {
                    writeln!(
                out,
                        "{stale} README table(s) differ from the results: run `cargo run --release --bin grade -- readme --write` (exit status 1)"
                    )?;
                }
                Ok(stale == 0)
            }
        }
    }
}
