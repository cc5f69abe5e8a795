//! Calibrate LLM judges against labelled predictions (`workbench::evaluate::calibration`).
//!
//! ```text
//! # 1. candidates: the answered predictions of finished runs, labelled where an exact
//! #    rule decides (`correct` null elsewhere, for a reader to fill in)
//! cargo run --release --bin calibrate_judge -- candidates \
//!     data/results/report001/qwen2.5-coder-1.5b/* --out candidates.jsonl
//! # 2. each judge's agreement with the labels, and its cut
//! cargo run --release --bin calibrate_judge -- run [--labels data/judge-labels/labels.jsonl]
//!     [--judge qwen2.5-coder-1.5b-instruct-gguf …] [--base-url http://host:8080/v1]
//! bash scripts/record_bench judge-calibration   # the record runs take their cut from
//! ```
//!
//! `run` writes `data/results/judge-calibration/`: `bench.md` (the table), `calibration.csv`
//! (one row per judge: the record `evaluation.judge_cut` is resolved from once recorded
//! to `data/benchmarks/judge-calibration/`), `scores.csv` (every judge's P(Yes) on every
//! labelled prediction), `config.json` (labels, prompt, judges, seed, the machine) and
//! `manifest.json`. Without `--judge` it calibrates every GGUF model the workbench ships;
//! with `--base-url` each `--judge` is a model name on that OpenAI-compatible server.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use workbench::assets::{sha256_bytes, sha256_file};
use workbench::bench::BenchRun;
use workbench::display::Table;
use workbench::evaluate::calibration::{self, CalibrationOptions, LabelledPrediction};
use workbench::evaluate::judge::{Judge, LlmJudge, ServerJudge, DEFAULT_PROMPT};
use workbench::read::generative::{Llm, LoadOptions, SharedLlm};

/// The GGUF models the workbench ships (`data/assets.toml`), calibrated by default.
const SHIPPED_JUDGES: [&str; 3] = [
    "qwen2.5-coder-1.5b-instruct-gguf",
    "qwen2.5-coder-0.5b-instruct-gguf",
    "smollm2-135m-instruct-gguf",
];
const NAME: &str = "judge-calibration";
const LABELS: &str = "data/judge-labels/labels.jsonl";

#[derive(Parser, Debug)]
#[command(about = "Calibrate LLM judges against labelled predictions")]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Write the answered predictions of run folders as labelling candidates (JSON Lines).
    Candidates {
        /// Run folders (`traces.jsonl` each).
        runs: Vec<PathBuf>,
        /// Output file.
        #[arg(long)]
        out: PathBuf,
    },
    /// Each judge's agreement with the labelled set, and its cut.
    Run {
        /// The labelled set.
        #[arg(long, default_value = LABELS)]
        labels: PathBuf,
        /// Judge models (asset names or .gguf paths; with --base-url, the server's names).
        #[arg(long = "judge")]
        judges: Vec<String>,
        /// The judge prompt template.
        #[arg(long, default_value = DEFAULT_PROMPT)]
        prompt: PathBuf,
        /// An OpenAI-compatible server that runs the judges (log-probabilities).
        #[arg(long)]
        base_url: Option<String>,
        /// Environment variable holding the server's API key.
        #[arg(long, default_value = "")]
        api_key_env: String,
        /// Bootstrap resamples.
        #[arg(long, default_value_t = 2000)]
        rounds: usize,
        /// Cross-validation folds.
        #[arg(long, default_value_t = 5)]
        folds: usize,
        /// Seed of the bootstrap and the folds.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
}

/// A labelling candidate: a [`LabelledPrediction`] whose `correct` may be unknown.
#[derive(Serialize)]
struct Candidate {
    id: String,
    source: String,
    question: String,
    gold_answers: Vec<String>,
    prediction: String,
    correct: Option<bool>,
    how: String,
}

fn candidates(runs: &[PathBuf], out: &Path) -> Result<()> {
    let root = workbench::paths::project_root()?;
    let mut seen = BTreeSet::new();
    let (mut lines, mut ruled, mut repeats) = (Vec::new(), 0usize, 0usize);
    let (mut abstained, mut no_gold) = (0usize, 0usize);
    for dir in runs {
        let dir = &std::path::absolute(dir)?;
        let traces = dir.join("traces.jsonl");
        let records = workbench::pipeline::trace::read_traces(&traces)?;
        // Under data/results/: the path below it; elsewhere: the run folder's name.
        let source = match dir.strip_prefix(root.join("data/results")) {
            Ok(rel) => rel.display().to_string(),
            Err(_) => dir.file_name().map_or_else(
                || dir.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
        };
        for r in records {
            if r.abstained || r.prediction.trim().is_empty() {
                abstained += 1;
                continue;
            }
            if r.gold_answers.iter().all(|g| g.trim().is_empty()) {
                no_gold += 1;
                continue;
            }
            // One candidate per question and normalised prediction, whichever run gave it.
            let key = (
                r.id.clone(),
                r.question.clone(),
                workbench::evaluate::qa::normalize_answer(&r.prediction),
            );
            if !seen.insert(key) {
                repeats += 1;
                continue;
            }
            let rule = calibration::rule_label(&r.gold_answers, &r.prediction);
            ruled += usize::from(rule.is_some());
            lines.push(serde_json::to_string(&Candidate {
                id: format!("{source}/{}", r.id),
                source: source.clone(),
                question: r.question,
                gold_answers: r.gold_answers,
                prediction: r.prediction,
                correct: rule.map(|(c, _)| c),
                how: rule.map_or(String::new(), |(_, how)| how.to_string()),
            })?);
        }
    }
    std::fs::write(out, lines.join("\n") + "\n")
        .with_context(|| format!("writing {}", out.display()))?;
    println!(
        "{}: {} candidates ({ruled} labelled by a rule, {} to read); left out: {repeats} repeats of a question's prediction, {abstained} abstentions, {no_gold} predictions to questions without a gold answer",
        out.display(),
        lines.len(),
        lines.len() - ruled
    );
    Ok(())
}

#[derive(Serialize)]
struct Config {
    labels: String,
    labels_sha256: String,
    prompt: String,
    prompt_sha256: String,
    judges: Vec<String>,
    base_url: Option<String>,
    rounds: usize,
    folds: usize,
    seed: u64,
}

fn judge_for(
    name: &str,
    template: &str,
    base_url: Option<&str>,
    api_key_env: &str,
) -> Result<Box<dyn Judge>> {
    if let Some(url) = base_url {
        return Ok(Box::new(ServerJudge::new(
            url,
            name,
            api_key_env,
            template,
        )?));
    }
    let opts = LoadOptions::default();
    let llm = Llm::from_model(name, "judge", |p: &str| std::path::PathBuf::from(p), &opts)?;
    Ok(Box::new(LlmJudge::new(SharedLlm::new(llm), template)?))
}

fn run(
    labels_path: &Path,
    judges: Vec<String>,
    prompt: &Path,
    base_url: Option<String>,
    api_key_env: &str,
    opts: CalibrationOptions,
) -> Result<()> {
    let root = workbench::paths::project_root()?;
    let abs = |p: &Path| {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            root.join(p)
        }
    };
    let labels = calibration::read_labels(&abs(labels_path))?;
    let template = std::fs::read_to_string(abs(prompt))
        .with_context(|| format!("reading the judge prompt {}", prompt.display()))?;
    workbench::evaluate::judge::check_template(&template)?;
    let judges: Vec<String> = if judges.is_empty() {
        if base_url.is_some() {
            bail!("--base-url needs --judge: the server's model name(s)");
        }
        SHIPPED_JUDGES.iter().map(|s| s.to_string()).collect()
    } else {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for j in judges {
            // A .gguf path is named as a config names it: relative to the project root
            // when inside it, else absolute.
            let j = match (base_url.is_none(), workbench::assets::ModelRef::parse(&j)) {
                (true, workbench::assets::ModelRef::Path(p)) => {
                    let full = std::path::absolute(p)?;
                    full.strip_prefix(&root)
                        .map_or_else(|_| full.display().to_string(), |r| r.display().to_string())
                }
                _ => j,
            };
            if seen.insert(j.clone()) {
                out.push(j);
            }
        }
        out
    };
    let config = Config {
        labels: labels_path.display().to_string(),
        labels_sha256: sha256_file(&abs(labels_path))?,
        prompt: prompt.display().to_string(),
        prompt_sha256: sha256_bytes(template.as_bytes()),
        judges: judges.clone(),
        base_url: base_url.clone(),
        rounds: opts.rounds,
        folds: opts.folds,
        seed: opts.seed,
    };
    let truth: Vec<bool> = labels.iter().map(|l| l.correct).collect();
    // Each prediction's question: folds and bootstrap resamples keep a question's
    // predictions together.
    let mut question_ids = std::collections::HashMap::new();
    let groups: Vec<usize> = labels
        .iter()
        .map(|l| {
            let n = question_ids.len();
            *question_ids
                .entry(l.question.trim().to_string())
                .or_insert(n)
        })
        .collect();
    // Refuse folds that cannot be calibrated before any judging.
    calibration::folds_of(&groups, &truth, opts.folds, opts.seed)?;
    let backend = if base_url.is_some() { "server" } else { "gguf" };
    let BenchRun { exp, machine } = BenchRun::start(NAME, &config, "bench.md")?;
    println!("{}", machine.summary());
    // One row per labelled prediction, one P(Yes) column per judge (small enough to record).
    let mut judged: Vec<(String, Vec<f64>)> = Vec::new();
    let write_scores = |judged: &[(String, Vec<f64>)]| -> Result<()> {
        let mut t = Table::new(
            ["id".to_string(), "correct".to_string()]
                .into_iter()
                .chain(judged.iter().map(|(name, _)| name.clone())),
        );
        for (i, l) in labels.iter().enumerate() {
            t.push(
                [l.id.clone(), l.correct.to_string()]
                    .into_iter()
                    .chain(judged.iter().map(|(_, p)| format!("{:.6}", p[i])))
                    .collect::<Vec<String>>(),
            )?;
        }
        t.write_csv(&exp.out.path("scores.csv"))?;
        Ok(())
    };
    for name in &judges {
        let judge = judge_for(name, &template, base_url.as_deref(), api_key_env)
            .with_context(|| format!("loading judge {name}"))?;
        let mut bar = workbench::progress::bar(labels.len(), &format!("judge {name}"));
        let mut p = Vec::with_capacity(labels.len());
        for l in &labels {
            let v = judge
                .p_yes(&l.question, &l.gold_answers, &l.prediction)
                .with_context(|| format!("judge {name} on labelled prediction {}", l.id))?;
            p.push(v);
            workbench::progress::tick(&mut bar, 1);
        }
        drop(bar);
        judged.push((name.clone(), p));
        // Written after each judge, so a failure later keeps what was judged.
        write_scores(&judged)?;
    }
    let mut rows = Vec::new();
    for (name, p) in &judged {
        let of = calibration::Calibrated {
            judge: name,
            backend,
            prompt_sha256: &config.prompt_sha256,
            labels_sha256: &config.labels_sha256,
        };
        rows.push(calibration::calibrate(of, p, &truth, &groups, opts)?);
    }
    // Rows of the record for other judges, backends or prompts are kept (recording this
    // run replaces the record folder).
    let record = root.join(calibration::RECORD);
    let kept: Vec<calibration::Calibration> = if record.is_file() {
        calibration::read_record(&record)?
            .into_iter()
            .filter(|old| {
                !rows.iter().any(|r| {
                    r.judge == old.judge
                        && r.backend == old.backend
                        && r.prompt_sha256 == old.prompt_sha256
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let all: Vec<calibration::Calibration> = rows.iter().chain(&kept).cloned().collect();
    calibration::write_record(&exp.out.path("calibration.csv"), &all)?;
    let md = render(&labels, &config, &rows, &kept, &machine.summary())?;
    std::fs::write(exp.out.path("bench.md"), &md)?;
    println!("{md}");
    exp.finish(serde_json::json!({
        "labelled": labels.len(),
        "questions": question_ids.len(),
        "judges": judges,
        "cuts": rows.iter().map(|r| r.cut).collect::<Vec<_>>(),
        "kept_from_record": kept.len(),
    }))?;
    Ok(())
}

fn render(
    labels: &[LabelledPrediction],
    config: &Config,
    rows: &[calibration::Calibration],
    kept: &[calibration::Calibration],
    machine: &str,
) -> Result<String> {
    let correct = labels.iter().filter(|l| l.correct).count();
    let read = labels.iter().filter(|l| l.how == "read").count();
    let sources: BTreeSet<&str> = labels.iter().map(|l| l.source.as_str()).collect();
    let questions: BTreeSet<&str> = labels.iter().map(|l| l.question.trim()).collect();
    let pct = |v: f64| format!("{:.1}", 100.0 * v);
    let opt = |v: Option<f64>| v.map_or("–".into(), |x| format!("{x:.3}"));
    let mut t = Table::new([
        "judge",
        "backend",
        "cut",
        "cross-validated kappa (95 % CI)",
        "cross-validated accuracy % (95 % CI)",
        "fold cuts",
        "kappa at the cut (in-sample)",
        "accuracy at the cut % (in-sample)",
        "kappa at 0.5",
        "accuracy at 0.5 %",
        "AUC",
    ]);
    for r in rows.iter().chain(kept) {
        let mark = if kept.contains(r) { " ‡" } else { "" };
        t.push(vec![
            format!("{}{mark}", r.judge),
            r.backend.clone(),
            format!("{:.3}", r.cut),
            format!(
                "{} ({}–{})",
                opt(r.cv_kappa),
                opt(r.cv_kappa_low),
                opt(r.cv_kappa_high)
            ),
            format!(
                "{} ({}–{})",
                pct(r.cv_accuracy),
                pct(r.cv_accuracy_low),
                pct(r.cv_accuracy_high)
            ),
            format!("{:.3}–{:.3}", r.cv_cut_min, r.cv_cut_max),
            format!("{:.3}", r.kappa),
            pct(r.accuracy),
            opt(r.kappa_at_half),
            pct(r.accuracy_at_half),
            opt(r.auc),
        ])?;
    }
    let kept_note = if kept.is_empty() {
        String::new()
    } else {
        "‡ kept from the earlier record (another run, possibly other labels).\n".to_string()
    };
    Ok(format!(
        "LLM judges against {n} labelled predictions to {q} questions ({labels}: {correct} correct, {wrong} incorrect; {ruled} labelled by an exact rule, {read} by reading; from {src} runs), judge prompt {prompt} (sha256 {sha}). \
         A verdict is \"correct\" when P(Yes) > cut. cut: the cut with the highest kappa against all the labels. \
         Cross-validated: {folds} seeded folds over questions, each fold judged at the cut chosen on the others (fold cuts: their range), with 95 % percentile bootstrap intervals over questions ({rounds} resamples, seed {seed}); \
         in-sample: at the cut, on the labels it was chosen on (optimistic). AUC: P(a correct prediction's P(Yes) > an incorrect one's).\n\n{table}\n{kept_note}Machine: {machine}.\n",
        n = labels.len(),
        q = questions.len(),
        labels = config.labels,
        wrong = labels.len() - correct,
        ruled = labels.len() - read,
        src = sources.len(),
        prompt = config.prompt,
        sha = &config.prompt_sha256[..12],
        rounds = config.rounds,
        seed = config.seed,
        folds = config.folds,
        table = t.to_markdown(),
    ))
}

fn main() -> Result<()> {
    match Args::parse().command {
        Command::Candidates { runs, out } => {
            if runs.is_empty() {
                bail!("name at least one run folder");
            }
            candidates(&runs, &out)
        }
        Command::Run {
            labels,
            judges,
            prompt,
            base_url,
            api_key_env,
            rounds,
            folds,
            seed,
        } => run(
            &labels,
            judges,
            &prompt,
            base_url,
            &api_key_env,
            CalibrationOptions {
                rounds,
                folds,
                seed,
            },
        ),
    }
}
