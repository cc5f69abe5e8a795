//! Calibrating an LLM judge ([`judge`](super::judge)) against labelled predictions: how
//! often its verdicts agree with a label a reader gave, and which P(Yes) cut agrees best.
//!
//! A labelled set is a JSON Lines file, one [`LabelledPrediction`] per line: a question,
//! its gold answers, a prediction a reader gave, and whether that prediction is correct,
//! with how the label was made (`how`: an exact rule, [`rule_label`], or `read` for a
//! label given by reading the question, the golds and the prediction). The workbench's
//! own set is `data/judge-labels/labels.jsonl` (its README says how it was made).
//!
//! For one judge's P(Yes) on every labelled prediction, [`calibrate`] reports:
//!
//! | figure | how |
//! |---|---|
//! | the cut | the P(Yes) cut `c` (verdict "correct" when P(Yes) > `c`) with the highest Cohen's kappa against the labels, among 0.5 and the midpoints between consecutive distinct P(Yes) values; ties go to the cut nearest 0.5 |
//! | kappa, accuracy at the cut | on the whole set, the cut chosen on it (in-sample) |
//! | their 95 % intervals | percentile bootstrap over the labelled predictions (seeded), the cut held fixed |
//! | cross-validated kappa, accuracy | k-fold (seeded folds): each fold's verdicts use the cut chosen on the other folds, pooled over the folds; what to expect of the cut on new predictions of the same kind |
//! | kappa, accuracy at 0.5 | the uncalibrated cut, for comparison |
//! | AUC | the probability that a correct prediction gets a higher P(Yes) than an incorrect one (ties count half): how well P(Yes) ranks, whatever the cut |
//!
//! The cut a run uses ([`recorded_cut`]) comes from the committed calibration record,
//! [`RECORD`], for the judge model and the judge prompt's exact text; a judge or prompt
//! without a record uses [`DEFAULT_CUT`](super::judge::DEFAULT_CUT), and the run says so.

use super::judge::{cohen_kappa, DEFAULT_CUT};
use crate::{Error, Result};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::Path;

/// The committed calibration record, relative to the project root: one row per judge
/// calibrated (written by the `calibrate_judge` program, recorded by
/// `scripts/record_bench judge-calibration`).
pub const RECORD: &str = "data/benchmarks/judge-calibration/calibration.csv";

/// One labelled prediction: a line of a labelled set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelledPrediction {
    /// Unique id (`run/question id`).
    pub id: String,
    /// Where the prediction comes from (the run that gave it).
    pub source: String,
    /// The question.
    pub question: String,
    /// Its gold answers.
    pub gold_answers: Vec<String>,
    /// The prediction (never empty: the judge is not asked about abstentions).
    pub prediction: String,
    /// Whether the prediction answers the question correctly.
    pub correct: bool,
    /// How the label was made: an exact rule's name ([`rule_label`]) or `read`.
    pub how: String,
    /// Why, for a label given by reading (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The label an exact rule gives, with the rule's name, or `None` when no rule decides
/// (the prediction is then labelled by reading):
///
/// - `exact match`: the prediction equals a gold answer after SQuAD normalisation → correct;
/// - `yes/no`: every gold is a yes/no answer ([`qa::is_yes_no`](super::qa::is_yes_no))
///   with the same first word and the prediction's first word is `yes` or `no` → correct
///   when it is the golds' word, else incorrect.
pub fn rule_label<S: AsRef<str>>(golds: &[S], prediction: &str) -> Option<(bool, &'static str)> {
    if super::qa::exact_match(prediction, golds) == 1.0 {
        return Some((true, "exact match"));
    }
    let first = |s: &str| {
        s.split(|c: char| !c.is_alphanumeric())
            .find(|w| !w.is_empty())
            .map(str::to_lowercase)
    };
    let gold_words: BTreeSet<Option<String>> = golds
        .iter()
        .map(|g| {
            super::qa::is_yes_no(g.as_ref())
                .then(|| first(g.as_ref()))
                .flatten()
        })
        .collect();
    match (gold_words.len(), gold_words.iter().next()) {
        (1, Some(Some(word))) => match first(prediction).as_deref() {
            Some(p @ ("yes" | "no")) => Some((p == word, "yes/no")),
            _ => None,
        },
        _ => None,
    }
}

/// Read a labelled set (JSON Lines). Errors name the file and line: a line that is not a
/// [`LabelledPrediction`], an empty prediction, no gold answer, an id seen before.
pub fn read_labels(path: &Path) -> Result<Vec<LabelledPrediction>> {
    let text = crate::load::read_to_string(path)?;
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |msg: String| Error::malformed(path, i + 1, msg);
        let l: LabelledPrediction = serde_json::from_str(line)
            .map_err(|e| at(format!("not a labelled prediction: {e}")))?;
        if l.prediction.trim().is_empty() {
            return Err(at(
                "empty prediction (the judge is not asked about abstentions)".into(),
            ));
        }
        if l.gold_answers.is_empty() {
            return Err(at("no gold answer".into()));
        }
        if !seen.insert(l.id.clone()) {
            return Err(at(format!("id `{}` appears twice", l.id)));
        }
        out.push(l);
    }
    if out.is_empty() {
        return Err(Error::bad_input(path, "no labelled prediction"));
    }
    Ok(out)
}

fn verdicts(p: &[f64], cut: f64) -> Vec<bool> {
    p.iter().map(|&x| x > cut).collect()
}

/// Cohen's kappa of the verdicts at `cut` against `labels` (`None`: undefined).
pub fn kappa_at(p: &[f64], labels: &[bool], cut: f64) -> Result<Option<f64>> {
    cohen_kappa(&verdicts(p, cut), labels)
}

/// Share of `labels` the verdicts at `cut` agree with (0 for no item).
pub fn accuracy_at(p: &[f64], labels: &[bool], cut: f64) -> f64 {
    if p.is_empty() {
        return 0.0;
    }
    let agree = p
        .iter()
        .zip(labels)
        .filter(|(&x, &l)| (x > cut) == l)
        .count();
    agree as f64 / p.len() as f64
}

/// The cut with the highest kappa against `labels`, among 0.5 and the midpoints between
/// consecutive distinct values of `p`; ties go to the cut nearest 0.5, then the lower.
/// `None` when the labels are all of one kind (or there is none): kappa against a constant
/// is 0 or undefined at every cut.
///
/// Errors: lists of different lengths.
pub fn choose_cut(p: &[f64], labels: &[bool]) -> Result<Option<f64>> {
    if p.len() != labels.len() {
        return Err(Error::param(
            "calibration",
            format!("{} P(Yes) values against {} labels", p.len(), labels.len()),
        ));
    }
    if labels.iter().all(|&l| l) || labels.iter().all(|&l| !l) {
        // Kappa against a constant is 0 or undefined at every cut: nothing to choose.
        return Ok(None);
    }
    let mut values: Vec<f64> = p.to_vec();
    values.sort_by(f64::total_cmp);
    values.dedup();
    let mut cuts: Vec<f64> = values.windows(2).map(|w| (w[0] + w[1]) / 2.0).collect();
    cuts.push(DEFAULT_CUT);
    let mut best: Option<(f64, f64)> = None;
    for c in cuts {
        let Some(k) = kappa_at(p, labels, c)? else {
            continue;
        };
        let better = match best {
            None => true,
            Some((bk, bc)) => {
                k > bk + 1e-12
                    || ((k - bk).abs() <= 1e-12
                        && ((c - DEFAULT_CUT).abs() < (bc - DEFAULT_CUT).abs() - 1e-12
                            || ((c - DEFAULT_CUT).abs() - (bc - DEFAULT_CUT).abs()).abs() <= 1e-12
                                && c < bc))
            }
        };
        if better {
            best = Some((k, c));
        }
    }
    Ok(best.map(|(_, c)| c))
}

/// Area under the ROC curve of `p` for `labels`: P(a correct item's P(Yes) > an incorrect
/// one's), ties counting half. `None` without both kinds of label.
pub fn auc(p: &[f64], labels: &[bool]) -> Option<f64> {
    let pos: Vec<f64> = p
        .iter()
        .zip(labels)
        .filter(|(_, &l)| l)
        .map(|(&x, _)| x)
        .collect();
    let neg: Vec<f64> = p
        .iter()
        .zip(labels)
        .filter(|(_, &l)| !l)
        .map(|(&x, _)| x)
        .collect();
    if pos.is_empty() || neg.is_empty() {
        return None;
    }
    let mut wins = 0.0;
    for &a in &pos {
        for &b in &neg {
            wins += if a > b {
                1.0
            } else if a == b {
                0.5
            } else {
                0.0
            };
        }
    }
    Some(wins / (pos.len() * neg.len()) as f64)
}

/// A 95 % percentile bootstrap interval of `stat` over `n` items resampled with
/// replacement (`rounds` resamples from `seed`); resamples where `stat` is undefined are
/// left out. `None` when every resample is.
pub fn bootstrap_interval(
    n: usize,
    rounds: usize,
    seed: u64,
    stat: impl Fn(&[usize]) -> Option<f64>,
) -> Option<(f64, f64)> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut values = Vec::with_capacity(rounds);
    let mut idx = vec![0usize; n];
    for _ in 0..rounds {
        for slot in idx.iter_mut() {
            *slot = rng.gen_range(0..n);
        }
        if let Some(v) = stat(&idx) {
            values.push(v);
        }
    }
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let q =
        |f: f64| values[((f * (values.len() - 1) as f64).round() as usize).min(values.len() - 1)];
    Some((q(0.025), q(0.975)))
}

/// Cross-validated verdicts: the items split into `folds` seeded folds, each fold's
/// verdicts taken at the cut chosen on the other folds. Returns the verdicts (in item
/// order) and each fold's cut.
///
/// Errors: fewer items than folds, fewer than 2 folds, or a fold whose complement has
/// one label only (no cut can be chosen).
pub fn cross_validated(
    p: &[f64],
    labels: &[bool],
    folds: usize,
    seed: u64,
) -> Result<(Vec<bool>, Vec<f64>)> {
    if folds < 2 || p.len() < folds {
        return Err(Error::param(
            "calibration",
            format!("{folds} folds over {} items", p.len()),
        ));
    }
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
    let mut fold_of = vec![0usize; p.len()];
    for (rank, &i) in order.iter().enumerate() {
        fold_of[i] = rank % folds;
    }
    let mut out = vec![false; p.len()];
    let mut cuts = Vec::with_capacity(folds);
    for f in 0..folds {
        let (tp, tl): (Vec<f64>, Vec<bool>) = (0..p.len())
            .filter(|&i| fold_of[i] != f)
            .map(|i| (p[i], labels[i]))
            .unzip();
        let cut = choose_cut(&tp, &tl)?.ok_or_else(|| {
            Error::param(
                "calibration",
                format!("fold {} leaves one label only: no cut to choose", f + 1),
            )
        })?;
        for i in (0..p.len()).filter(|&i| fold_of[i] == f) {
            out[i] = p[i] > cut;
        }
        cuts.push(cut);
    }
    Ok((out, cuts))
}

/// One judge's agreement with a labelled set: a row of [`RECORD`]. See the
/// [module docs](self).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The judge model (as named in `evaluation.judge_model`).
    pub judge: String,
    /// sha256 of the judge prompt's text.
    pub prompt_sha256: String,
    /// sha256 of the labelled set file.
    pub labels_sha256: String,
    /// Labelled predictions.
    pub n: usize,
    /// Of which labelled correct.
    pub correct: usize,
    /// The chosen cut.
    pub cut: f64,
    /// Kappa at the cut (in-sample).
    pub kappa: f64,
    /// Its bootstrap interval.
    pub kappa_low: f64,
    /// Its bootstrap interval.
    pub kappa_high: f64,
    /// Accuracy at the cut (in-sample).
    pub accuracy: f64,
    /// Its bootstrap interval.
    pub accuracy_low: f64,
    /// Its bootstrap interval.
    pub accuracy_high: f64,
    /// Cross-validated kappa.
    pub cv_kappa: Option<f64>,
    /// Cross-validated accuracy.
    pub cv_accuracy: f64,
    /// Smallest and largest cut over the folds.
    pub cv_cut_min: f64,
    /// Smallest and largest cut over the folds.
    pub cv_cut_max: f64,
    /// Kappa at 0.5.
    pub kappa_at_half: Option<f64>,
    /// Accuracy at 0.5.
    pub accuracy_at_half: f64,
    /// AUC of P(Yes).
    pub auc: Option<f64>,
}

/// Options of [`calibrate`].
#[derive(Debug, Clone, Copy)]
pub struct CalibrationOptions {
    /// Bootstrap resamples.
    pub rounds: usize,
    /// Cross-validation folds.
    pub folds: usize,
    /// Seed of the bootstrap and of the folds.
    pub seed: u64,
}

impl Default for CalibrationOptions {
    fn default() -> Self {
        CalibrationOptions {
            rounds: 2000,
            folds: 5,
            seed: 42,
        }
    }
}

/// Calibrate a judge whose P(Yes) on the labelled predictions is `p` (in the labels'
/// order). See the [module docs](self).
///
/// Errors: lengths that differ; labels all of one kind (no kappa at any cut).
pub fn calibrate(
    judge: &str,
    prompt_sha256: &str,
    labels_sha256: &str,
    p: &[f64],
    labels: &[bool],
    opts: CalibrationOptions,
) -> Result<Calibration> {
    let cut = choose_cut(p, labels)?.ok_or_else(|| {
        Error::param(
            "calibration",
            "kappa is undefined at every cut: the labels need both correct and incorrect predictions",
        )
    })?;
    let kappa = kappa_at(p, labels, cut)?.unwrap_or(0.0);
    let pick =
        |idx: &[usize]| -> (Vec<f64>, Vec<bool>) { idx.iter().map(|&i| (p[i], labels[i])).unzip() };
    let kappa_ci = bootstrap_interval(p.len(), opts.rounds, opts.seed, |idx| {
        let (bp, bl) = pick(idx);
        kappa_at(&bp, &bl, cut).ok().flatten()
    })
    .unwrap_or((f64::NAN, f64::NAN));
    let acc_ci = bootstrap_interval(p.len(), opts.rounds, opts.seed, |idx| {
        let (bp, bl) = pick(idx);
        Some(accuracy_at(&bp, &bl, cut))
    })
    .unwrap_or((f64::NAN, f64::NAN));
    let (cv, cuts) = cross_validated(p, labels, opts.folds, opts.seed)?;
    let cv_accuracy =
        cv.iter().zip(labels).filter(|(a, b)| a == b).count() as f64 / labels.len() as f64;
    Ok(Calibration {
        judge: judge.to_string(),
        prompt_sha256: prompt_sha256.to_string(),
        labels_sha256: labels_sha256.to_string(),
        n: p.len(),
        correct: labels.iter().filter(|l| **l).count(),
        cut,
        kappa,
        kappa_low: kappa_ci.0,
        kappa_high: kappa_ci.1,
        accuracy: accuracy_at(p, labels, cut),
        accuracy_low: acc_ci.0,
        accuracy_high: acc_ci.1,
        cv_kappa: cohen_kappa(&cv, labels)?,
        cv_accuracy,
        cv_cut_min: cuts.iter().copied().fold(f64::INFINITY, f64::min),
        cv_cut_max: cuts.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        kappa_at_half: kappa_at(p, labels, DEFAULT_CUT)?,
        accuracy_at_half: accuracy_at(p, labels, DEFAULT_CUT),
        auc: auc(p, labels),
    })
}

/// Read a calibration record (CSV of [`Calibration`] rows). Errors name the file.
pub fn read_record(path: &Path) -> Result<Vec<Calibration>> {
    let mut r = csv::Reader::from_path(path).map_err(|e| Error::bad_input(path, e.to_string()))?;
    r.deserialize()
        .map(|row| row.map_err(|e| Error::bad_input(path, e.to_string())))
        .collect()
}

/// Write a calibration record (CSV).
pub fn write_record(path: &Path, rows: &[Calibration]) -> Result<()> {
    let mut w = csv::Writer::from_path(path).map_err(|e| Error::bad_input(path, e.to_string()))?;
    for row in rows {
        w.serialize(row)
            .map_err(|e| Error::bad_input(path, e.to_string()))?;
    }
    w.flush().map_err(|e| Error::io(path, e))?;
    Ok(())
}

/// The calibrated cut of `judge` with the prompt whose text is `template`, from the
/// record at `record` (`None`: no record, or no row for this judge and prompt).
///
/// Errors: a record that exists but cannot be read.
pub fn recorded_cut(record: &Path, judge: &str, template: &str) -> Result<Option<Calibration>> {
    if !record.is_file() {
        return Ok(None);
    }
    let sha = crate::assets::sha256_bytes(template.as_bytes());
    Ok(read_record(record)?
        .into_iter()
        .find(|c| c.judge == judge && c.prompt_sha256 == sha))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_label_exact_matches_and_yes_no_answers_only() {
        assert_eq!(
            rule_label(&["Paris"], "paris."),
            Some((true, "exact match"))
        );
        assert_eq!(
            rule_label(&["the Paris"], "Paris"),
            Some((true, "exact match"))
        );
        assert_eq!(
            rule_label(&["Yes."], "Yes, they do."),
            Some((true, "yes/no"))
        );
        assert_eq!(rule_label(&["yes"], "No, never."), Some((false, "yes/no")));
        assert_eq!(
            rule_label(&["No", "no."], "no"),
            Some((true, "exact match"))
        );
        // A longer answer, a name that starts with No, golds that disagree: no rule.
        assert_eq!(rule_label(&["Paris"], "It is Paris."), None);
        assert_eq!(rule_label(&["No Doubt"], "No"), None);
        assert_eq!(
            rule_label(&["yes", "no"], "yes"),
            Some((true, "exact match"))
        );
        assert_eq!(rule_label(&["yes", "no."], "Yes, it is"), None);
        assert_eq!(rule_label(&["Yes."], "Probably"), None);
    }

    #[test]
    fn the_cut_maximises_kappa_and_prefers_one_near_a_half() {
        // Correct items sit at 0.8 and 0.9, incorrect ones at 0.6 and 0.7: 0.5 calls
        // everything correct (kappa 0); the midpoint 0.75 separates them (kappa 1).
        let p = [0.6, 0.7, 0.8, 0.9];
        let l = [false, false, true, true];
        assert_eq!(choose_cut(&p, &l).unwrap(), Some(0.75));
        // (Verdicts all "correct": p_o = p_e = 0.5, kappa 0.)
        assert_eq!(kappa_at(&p, &l, 0.5).unwrap(), Some(0.0));
        assert_eq!(accuracy_at(&p, &l, 0.75), 1.0);
        // Already separated at 0.5: 0.5 is kept (it ties the midpoint 0.5 and is nearest).
        let p = [0.1, 0.2, 0.8, 0.9];
        assert_eq!(choose_cut(&p, &l).unwrap(), Some(0.5));
        let p = [0.1, 0.45, 0.8, 0.9];
        assert_eq!(choose_cut(&p, &l).unwrap(), Some(0.5));
        // One label only: no cut.
        assert_eq!(choose_cut(&p, &[true; 4]).unwrap(), None);
        assert!(choose_cut(&p, &[true; 3]).is_err());
    }

    #[test]
    fn auc_counts_pairs_and_ties_half() {
        assert_eq!(auc(&[0.9, 0.8, 0.1], &[true, true, false]), Some(1.0));
        assert_eq!(auc(&[0.1, 0.8, 0.9], &[true, true, false]), Some(0.0));
        // (1 win + 0.5 tie) / 2 pairs
        assert_eq!(auc(&[0.5, 0.9, 0.5], &[false, true, true]), Some(0.75));
        assert_eq!(auc(&[0.5], &[true]), None);
    }

    #[test]
    fn cross_validation_chooses_each_folds_cut_on_the_others() {
        // 20 items; correct ones above 0.7, incorrect below, except one mislabelled item.
        let mut p = Vec::new();
        let mut l = Vec::new();
        for i in 0..10 {
            p.push(0.75 + 0.02 * i as f64);
            l.push(true);
            p.push(0.55 + 0.01 * i as f64);
            l.push(false);
        }
        l[1] = true; // 0.55 labelled correct
        let (v, cuts) = cross_validated(&p, &l, 5, 7).unwrap();
        assert_eq!(cuts.len(), 5);
        // Every fold's cut separates the bulk (between 0.64 and 0.75)...
        assert!(cuts.iter().all(|&c| c > 0.6 && c < 0.75), "{cuts:?}");
        // ...so only the mislabelled item is missed.
        let wrong: Vec<usize> = (0..20).filter(|&i| v[i] != l[i]).collect();
        assert_eq!(wrong, vec![1]);
        let c = calibrate("j", "s", "t", &p, &l, CalibrationOptions::default()).unwrap();
        assert_eq!((c.n, c.correct), (20, 11));
        assert!((c.cv_accuracy - 0.95).abs() < 1e-12);
        assert!((c.accuracy - 0.95).abs() < 1e-12 && c.cut > 0.6 && c.cut < 0.75);
        assert!(c.accuracy_low <= c.accuracy && c.accuracy <= c.accuracy_high);
        assert!(c.accuracy_low < 0.95 && c.accuracy_high <= 1.0);
        assert!((c.accuracy_at_half - 0.55).abs() < 1e-12);
        assert!(cross_validated(&p, &l, 1, 7).is_err());
    }

    #[test]
    fn records_round_trip_and_match_judge_and_prompt() {
        let dir = std::env::temp_dir().join(format!("calibration-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("calibration.csv");
        let p = [0.6, 0.7, 0.8, 0.9, 0.3, 0.95];
        let l = [false, false, true, true, false, true];
        let template = "Q {question} G {gold} A {answer}";
        let sha = crate::assets::sha256_bytes(template.as_bytes());
        let c = calibrate(
            "m",
            &sha,
            "x",
            &p,
            &l,
            CalibrationOptions {
                folds: 2,
                ..Default::default()
            },
        )
        .unwrap();
        write_record(&path, std::slice::from_ref(&c)).unwrap();
        assert_eq!(read_record(&path).unwrap(), vec![c.clone()]);
        assert_eq!(
            recorded_cut(&path, "m", template).unwrap().map(|c| c.cut),
            Some(0.75)
        );
        assert_eq!(recorded_cut(&path, "m", "another prompt").unwrap(), None);
        assert_eq!(recorded_cut(&path, "other", template).unwrap(), None);
        assert_eq!(
            recorded_cut(&dir.join("none.csv"), "m", template).unwrap(),
            None
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn labelled_sets_refuse_bad_lines_by_file_and_line() {
        let dir = std::env::temp_dir().join(format!("labels-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("labels.jsonl");
        let line = |id: &str, pred: &str| {
            format!(
                r#"{{"id":"{id}","source":"r","question":"q","gold_answers":["a"],"prediction":"{pred}","correct":true,"how":"read"}}"#
            )
        };
        std::fs::write(&path, format!("{}\n\n{}\n", line("1", "a"), line("2", "b"))).unwrap();
        assert_eq!(read_labels(&path).unwrap().len(), 2);
        std::fs::write(&path, format!("{}\n{}\n", line("1", "a"), line("1", "b"))).unwrap();
        let e = read_labels(&path).unwrap_err().to_string();
        assert!(e.contains("labels.jsonl:2") && e.contains("twice"), "{e}");
        std::fs::write(&path, format!("{}\n", line("1", " "))).unwrap();
        assert!(read_labels(&path)
            .unwrap_err()
            .to_string()
            .contains("empty prediction"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
