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
//! | the cut | the P(Yes) cut `c` (verdict "correct" when P(Yes) > `c`) with the highest Cohen's kappa against the labels, among 0.5 and the midpoints between consecutive distinct P(Yes) values; ties go to the cut nearest 0.5, then the lower |
//! | kappa, accuracy at the cut | on the whole set, the cut chosen on it (in-sample: optimistic) |
//! | cross-validated kappa, accuracy | k-fold over questions (seeded; every prediction of a question in one fold): each fold's verdicts use the cut chosen on the other folds, pooled over the folds; what to expect of the cut on new predictions of the same kind |
//! | their 95 % intervals | percentile bootstrap of the pooled cross-validated verdicts, resampling questions (seeded) |
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
/// (the prediction is then labelled by reading): `exact match`, the prediction equals a
/// gold answer after SQuAD normalisation, so it is correct. No rule labels a prediction to
/// a question without gold answers.
///
/// A yes / no answer is read, not ruled on by its first word: "Yes, Germany is the
/// smallest …" to "Is it (Liechtenstein) the smallest …?" starts with the gold's word and
/// still gives another answer.
pub fn rule_label<S: AsRef<str>>(golds: &[S], prediction: &str) -> Option<(bool, &'static str)> {
    if golds.iter().all(|g| g.as_ref().trim().is_empty()) {
        return None;
    }
    (super::qa::exact_match(prediction, golds) == 1.0).then_some((true, "exact match"))
}

/// The values of [`LabelledPrediction::how`].
pub const HOW: [&str; 2] = ["exact match", "read"];

/// Read a labelled set (JSON Lines). Errors name the file and line: a line that is not a
/// [`LabelledPrediction`], an empty prediction, no gold answer, an id seen before, a `how`
/// that is not one of [`HOW`], a rule's label that the rule does not give.
pub fn read_labels(path: &Path) -> Result<Vec<LabelledPrediction>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
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
        if l.gold_answers.iter().all(|g| g.trim().is_empty()) {
            return Err(at("no gold answer".into()));
        }
        if !seen.insert(l.id.clone()) {
            return Err(at(format!("id `{}` appears twice", l.id)));
        }
        if !HOW.contains(&l.how.as_str()) {
            return Err(at(format!("`how` is {:?}, not one of {HOW:?}", l.how)));
        }
        if l.how != "read" {
            let rule = rule_label(&l.gold_answers, &l.prediction);
            if rule != Some((l.correct, HOW[0])) {
                return Err(at(format!(
                    "labelled {} by `{}`, but the rule gives {rule:?}",
                    l.correct, l.how
                )));
            }
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
///
/// Errors: lists of different lengths.
pub fn accuracy_at(p: &[f64], labels: &[bool], cut: f64) -> Result<f64> {
    same_length(p, labels)?;
    if p.is_empty() {
        return Ok(0.0);
    }
    let agree = p
        .iter()
        .zip(labels)
        .filter(|(&x, &l)| (x > cut) == l)
        .count();
    Ok(agree as f64 / p.len() as f64)
}

fn same_length(p: &[f64], labels: &[bool]) -> Result<()> {
    if p.len() != labels.len() {
        return Err(Error::param(
            "calibration",
            format!("{} P(Yes) values against {} labels", p.len(), labels.len()),
        ));
    }
    Ok(())
}

/// The cut with the highest kappa against `labels`, among 0.5 and the midpoints between
/// consecutive distinct values of `p`; ties go to the cut nearest 0.5, then the lower.
/// `None` when the labels are all of one kind (or there is none): kappa against a constant
/// is 0 or undefined at every cut.
///
/// Errors: lists of different lengths.
pub fn choose_cut(p: &[f64], labels: &[bool]) -> Result<Option<f64>> {
    same_length(p, labels)?;
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

/// A 95 % percentile bootstrap interval of `stat` over items in `groups` (each item's
/// group, e.g. its question), resampling whole groups with replacement (`rounds`
/// resamples from `seed`); `stat` gets the resampled items' indices. Resamples where
/// `stat` is undefined are left out. `None` when every resample is, or there is no item.
pub fn bootstrap_interval(
    groups: &[usize],
    rounds: usize,
    seed: u64,
    stat: impl Fn(&[usize]) -> Option<f64>,
) -> Option<(f64, f64)> {
    let members = group_members(groups);
    if members.is_empty() {
        return None;
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut values = Vec::with_capacity(rounds);
    let mut idx = Vec::with_capacity(groups.len());
    for _ in 0..rounds {
        idx.clear();
        for _ in 0..members.len() {
            idx.extend_from_slice(&members[rng.gen_range(0..members.len())]);
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

/// The items of each group, groups in order of first appearance.
fn group_members(groups: &[usize]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = Vec::new();
    let mut members: std::collections::HashMap<usize, Vec<usize>> = Default::default();
    for (i, &g) in groups.iter().enumerate() {
        members
            .entry(g)
            .or_insert_with(|| {
                order.push(g);
                Vec::new()
            })
            .push(i);
    }
    order
        .into_iter()
        .map(|g| members.remove(&g).unwrap_or_default())
        .collect()
}

/// Each item's fold (0..folds): the groups shuffled from `seed` and dealt round-robin, so
/// every item of a group is in one fold.
///
/// Errors: fewer than 2 folds, fewer groups than folds, or a fold whose complement has
/// labels of one kind only (no cut can be chosen there).
pub fn folds_of(groups: &[usize], labels: &[bool], folds: usize, seed: u64) -> Result<Vec<usize>> {
    let mut members = group_members(groups);
    if folds < 2 || members.len() < folds {
        return Err(Error::param(
            "calibration",
            format!(
                "{folds} fold(s) over {} question(s): need at least 2 folds and a question per fold",
                members.len()
            ),
        ));
    }
    members.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
    let mut fold_of = vec![0usize; groups.len()];
    for (rank, m) in members.iter().enumerate() {
        for &i in m {
            fold_of[i] = rank % folds;
        }
    }
    for f in 0..folds {
        let rest: Vec<bool> = (0..labels.len())
            .filter(|&i| fold_of[i] != f)
            .map(|i| labels[i])
            .collect();
        if rest.iter().all(|&l| l) || rest.iter().all(|&l| !l) {
            return Err(Error::param(
                "calibration",
                format!(
                    "the items outside fold {} of {folds} (seed {seed}) are all labelled {}: no cut can be chosen on them",
                    f + 1,
                    if rest.first().copied().unwrap_or_default() {
                        "correct"
                    } else {
                        "incorrect"
                    }
                ),
            ));
        }
    }
    Ok(fold_of)
}

/// Cross-validated verdicts: each item's verdict at the cut chosen on the items of the
/// other folds ([`folds_of`]). Returns the verdicts (in item order) and each fold's cut.
///
/// Errors: those of [`folds_of`]; lists of different lengths.
pub fn cross_validated(
    p: &[f64],
    labels: &[bool],
    groups: &[usize],
    folds: usize,
    seed: u64,
) -> Result<(Vec<bool>, Vec<f64>)> {
    same_length(p, labels)?;
    if groups.len() != p.len() {
        return Err(Error::param(
            "calibration",
            format!("{} groups for {} items", groups.len(), p.len()),
        ));
    }
    let fold_of = folds_of(groups, labels, folds, seed)?;
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
    /// `gguf` (in this process) or `server` (`evaluation.judge_base_url`).
    pub backend: String,
    /// sha256 of the judge prompt's text.
    pub prompt_sha256: String,
    /// sha256 of the labelled set file.
    pub labels_sha256: String,
    /// Labelled predictions.
    pub n: usize,
    /// Of which labelled correct.
    pub correct: usize,
    /// Questions they belong to.
    pub questions: usize,
    /// The chosen cut.
    pub cut: f64,
    /// Kappa at the cut (in-sample).
    pub kappa: f64,
    /// Accuracy at the cut (in-sample).
    pub accuracy: f64,
    /// Cross-validated kappa.
    pub cv_kappa: Option<f64>,
    /// Its bootstrap interval.
    pub cv_kappa_low: Option<f64>,
    /// Its bootstrap interval.
    pub cv_kappa_high: Option<f64>,
    /// Cross-validated accuracy.
    pub cv_accuracy: f64,
    /// Its bootstrap interval.
    pub cv_accuracy_low: f64,
    /// Its bootstrap interval.
    pub cv_accuracy_high: f64,
    /// Smallest cut over the folds.
    pub cv_cut_min: f64,
    /// Largest cut over the folds.
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

/// What a calibration is of: the judge, how it runs, the prompt and the labels.
#[derive(Debug, Clone, Copy)]
pub struct Calibrated<'a> {
    /// The judge model's name.
    pub judge: &'a str,
    /// `gguf` or `server`.
    pub backend: &'a str,
    /// sha256 of the prompt's text.
    pub prompt_sha256: &'a str,
    /// sha256 of the labels file.
    pub labels_sha256: &'a str,
}

/// Calibrate a judge whose P(Yes) on the labelled predictions is `p`, with their `labels`
/// and `groups` (each prediction's question), all in the same order. See the
/// [module docs](self).
///
/// Errors: lengths that differ; a P(Yes) outside [0, 1]; labels all of one kind; no
/// bootstrap resample; folds [`folds_of`] refuses.
pub fn calibrate(
    of: Calibrated<'_>,
    p: &[f64],
    labels: &[bool],
    groups: &[usize],
    opts: CalibrationOptions,
) -> Result<Calibration> {
    same_length(p, labels)?;
    if let Some(x) = p.iter().find(|x| !(0.0..=1.0).contains(*x)) {
        return Err(Error::param(
            "calibration",
            format!("P(Yes) {x} is not in [0, 1]"),
        ));
    }
    if opts.rounds == 0 {
        return Err(Error::param(
            "calibration",
            "bootstrap rounds must be at least 1",
        ));
    }
    let cut = choose_cut(p, labels)?.ok_or_else(|| {
        Error::param(
            "calibration",
            "the labels are all of one kind: they need both correct and incorrect predictions",
        )
    })?;
    let (cv, cuts) = cross_validated(p, labels, groups, opts.folds, opts.seed)?;
    let agree = |idx: &[usize]| {
        idx.iter().filter(|&&i| cv[i] == labels[i]).count() as f64 / idx.len().max(1) as f64
    };
    let pick = |idx: &[usize]| -> (Vec<bool>, Vec<bool>) {
        idx.iter().map(|&i| (cv[i], labels[i])).unzip()
    };
    let kappa_ci = bootstrap_interval(groups, opts.rounds, opts.seed, |idx| {
        let (v, l) = pick(idx);
        cohen_kappa(&v, &l).ok().flatten()
    });
    let acc_ci = bootstrap_interval(groups, opts.rounds, opts.seed, |idx| Some(agree(idx)))
        .ok_or_else(|| Error::param("calibration", "no bootstrap resample"))?;
    let all: Vec<usize> = (0..p.len()).collect();
    Ok(Calibration {
        judge: of.judge.to_string(),
        backend: of.backend.to_string(),
        prompt_sha256: of.prompt_sha256.to_string(),
        labels_sha256: of.labels_sha256.to_string(),
        n: p.len(),
        correct: labels.iter().filter(|l| **l).count(),
        questions: group_members(groups).len(),
        cut,
        kappa: kappa_at(p, labels, cut)?.unwrap_or(0.0),
        accuracy: accuracy_at(p, labels, cut)?,
        cv_kappa: cohen_kappa(&cv, labels)?,
        cv_kappa_low: kappa_ci.map(|c| c.0),
        cv_kappa_high: kappa_ci.map(|c| c.1),
        cv_accuracy: agree(&all),
        cv_accuracy_low: acc_ci.0,
        cv_accuracy_high: acc_ci.1,
        cv_cut_min: cuts.iter().copied().fold(f64::INFINITY, f64::min),
        cv_cut_max: cuts.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        kappa_at_half: kappa_at(p, labels, DEFAULT_CUT)?,
        accuracy_at_half: accuracy_at(p, labels, DEFAULT_CUT)?,
        auc: auc(p, labels),
    })
}

/// Read a calibration record (CSV of [`Calibration`] rows). Errors name the file: a row
/// that cannot be read, two rows for one judge, backend and prompt.
pub fn read_record(path: &Path) -> Result<Vec<Calibration>> {
    let mut r = csv::Reader::from_path(path).map_err(|e| Error::bad_input(path, e.to_string()))?;
    let rows: Vec<Calibration> = r
        .deserialize()
        .map(|row| row.map_err(|e| Error::bad_input(path, e.to_string())))
        .collect::<Result<_>>()?;
    if let Some(why) = duplicate_row(&rows) {
        return Err(Error::bad_input(path, why));
    }
    Ok(rows)
}

/// The first judge, backend and prompt that `rows` hold twice, in words.
fn duplicate_row(rows: &[Calibration]) -> Option<String> {
    let mut seen = BTreeSet::new();
    rows.iter()
        .find(|c| !seen.insert((&c.judge, &c.backend, &c.prompt_sha256)))
        .map(|c| {
            format!(
                "two rows for judge `{}` ({}) with prompt sha256 {}",
                c.judge, c.backend, c.prompt_sha256
            )
        })
}

/// Write a calibration record (CSV). Errors: two rows for one judge, backend and prompt
/// (nothing is written); the file cannot be written.
pub fn write_record(path: &Path, rows: &[Calibration]) -> Result<()> {
    if let Some(why) = duplicate_row(rows) {
        return Err(Error::param("calibration record", why));
    }
    let io = |e: csv::Error| match e.into_kind() {
        csv::ErrorKind::Io(e) => Error::io(path, e),
        other => Error::param("calibration record", format!("{other:?}")),
    };
    let mut w = csv::Writer::from_path(path).map_err(io)?;
    for row in rows {
        w.serialize(row).map_err(io)?;
    }
    w.flush().map_err(|e| Error::io(path, e))?;
    Ok(())
}

/// The calibration of `judge` run by `backend` (`gguf` or `server`) with the prompt whose
/// text is `template`, from the record at `record` (`None`: no record, or no row for them).
///
/// Errors: a record that exists but cannot be read.
pub fn recorded_cut(
    record: &Path,
    judge: &str,
    backend: &str,
    template: &str,
) -> Result<Option<Calibration>> {
    if !record.is_file() {
        return Ok(None);
    }
    let sha = crate::assets::sha256_bytes(template.as_bytes());
    Ok(read_record(record)?
        .into_iter()
        .find(|c| c.judge == judge && c.backend == backend && c.prompt_sha256 == sha))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_label_exact_matches_only() {
        assert_eq!(
            rule_label(&["Paris"], "paris."),
            Some((true, "exact match"))
        );
        assert_eq!(
            rule_label(&["the Paris"], "Paris"),
            Some((true, "exact match"))
        );
        assert_eq!(
            rule_label(&["No", "no."], "no"),
            Some((true, "exact match"))
        );
        assert_eq!(
            rule_label(&["yes", "no"], "yes"),
            Some((true, "exact match"))
        );
        // Longer answers are read, yes / no ones included: the rest can contradict.
        assert_eq!(rule_label(&["Paris"], "It is Paris."), None);
        assert_eq!(rule_label(&["Yes."], "Yes, they do."), None);
        assert_eq!(rule_label(&["Yes"], "Yes, Germany is the smallest."), None);
        assert_eq!(rule_label(&["yes"], "No, never."), None);
        assert_eq!(rule_label(&["No Doubt"], "No"), None);
        // No gold: nothing to match.
        assert_eq!(rule_label(&[""], "The."), None);
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
        assert_eq!(accuracy_at(&p, &l, 0.75).unwrap(), 1.0);
        assert!(accuracy_at(&p, &l[..3], 0.75).is_err());
        // Already separated at 0.5: 0.5 is kept (it ties the midpoint 0.5 and is nearest).
        let p = [0.1, 0.2, 0.8, 0.9];
        assert_eq!(choose_cut(&p, &l).unwrap(), Some(0.5));
        let p = [0.1, 0.45, 0.8, 0.9];
        assert_eq!(choose_cut(&p, &l).unwrap(), Some(0.5));
        // Kappa, not accuracy: with 7 of 8 correct, the cut 0.15 has the best accuracy
        // (6/8, kappa −1/7) and 0.45 the best kappa (5/8, kappa 0.25).
        let p = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8];
        let l = [true, true, true, false, true, true, true, true];
        let c = choose_cut(&p, &l).unwrap().unwrap();
        assert!((c - 0.45).abs() < 1e-12, "{c}");
        assert!((kappa_at(&p, &l, c).unwrap().unwrap() - 0.25).abs() < 1e-12);
        // Equal kappa at 0.35 and 0.65, equally far from 0.5: the lower.
        let p = [0.3, 0.4, 0.6, 0.7];
        let l = [false, true, false, true];
        let c = choose_cut(&p, &l).unwrap().unwrap();
        assert!((c - 0.35).abs() < 1e-12, "{c}");
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

    /// 20 items, one question each: correct ones from 0.75 up, incorrect ones from 0.55
    /// to 0.64, with item 1 (0.55) labelled correct.
    fn twenty() -> (Vec<f64>, Vec<bool>) {
        let mut p = Vec::new();
        let mut l = Vec::new();
        for i in 0..10 {
            p.push(0.75 + 0.02 * i as f64);
            l.push(true);
            p.push(0.55 + 0.01 * i as f64);
            l.push(false);
        }
        l[1] = true;
        (p, l)
    }

    fn of() -> Calibrated<'static> {
        Calibrated {
            judge: "j",
            backend: "gguf",
            prompt_sha256: "s",
            labels_sha256: "t",
        }
    }

    #[test]
    fn cross_validation_chooses_each_folds_cut_on_the_others() {
        let (p, l) = twenty();
        let groups: Vec<usize> = (0..20).collect();
        let (v, cuts) = cross_validated(&p, &l, &groups, 5, 7).unwrap();
        assert_eq!(cuts.len(), 5);
        // Every fold's cut separates the bulk (between 0.64 and 0.75)...
        assert!(cuts.iter().all(|&c| c > 0.6 && c < 0.75), "{cuts:?}");
        // ...so only the mislabelled item is missed.
        let wrong: Vec<usize> = (0..20).filter(|&i| v[i] != l[i]).collect();
        assert_eq!(wrong, vec![1]);
        let c = calibrate(of(), &p, &l, &groups, CalibrationOptions::default()).unwrap();
        assert_eq!((c.n, c.correct, c.questions), (20, 11, 20));
        assert!((c.cv_accuracy - 0.95).abs() < 1e-12);
        assert!((c.accuracy - 0.95).abs() < 1e-12 && c.cut > 0.6 && c.cut < 0.75);
        assert!(c.cv_accuracy_low <= c.cv_accuracy && c.cv_accuracy <= c.cv_accuracy_high);
        assert!(c.cv_accuracy_low < 0.95 && c.cv_accuracy_high <= 1.0);
        let (lo, hi) = (c.cv_kappa_low.unwrap(), c.cv_kappa_high.unwrap());
        assert!(lo < c.cv_kappa.unwrap() && c.cv_kappa.unwrap() <= hi && hi <= 1.0);
        assert!((c.accuracy_at_half - 0.55).abs() < 1e-12);
        assert!(cross_validated(&p, &l, &groups, 1, 7).is_err());
        // Two predictions per question: 10 questions.
        let pairs: Vec<usize> = (0..20).map(|i| i / 2).collect();
        let c2 = calibrate(of(), &p, &l, &pairs, CalibrationOptions::default()).unwrap();
        assert_eq!((c2.n, c2.questions), (20, 10));
        // A P(Yes) outside [0, 1], no resample: refused.
        let mut bad = p.clone();
        bad[3] = f64::NAN;
        assert!(calibrate(of(), &bad, &l, &groups, CalibrationOptions::default()).is_err());
        let none = CalibrationOptions {
            rounds: 0,
            ..Default::default()
        };
        assert!(calibrate(of(), &p, &l, &groups, none).is_err());
    }

    #[test]
    fn cross_validation_judges_each_fold_out_of_sample() {
        // Item 0 (P(Yes) 0.7, correct) sits in the gap between the incorrect items (0.60 to
        // 0.65) and the correct ones (0.80 to 0.90). On all items the best cut is 0.675,
        // which calls it correct; left out (13 folds of one), the others put the cut at
        // 0.725, which does not.
        let mut p = vec![0.7];
        let mut l = vec![true];
        for i in 0..6 {
            p.push(0.8 + 0.02 * i as f64);
            l.push(true);
            p.push(0.6 + 0.01 * i as f64);
            l.push(false);
        }
        let in_sample = choose_cut(&p, &l).unwrap().unwrap();
        assert!(p[0] > in_sample, "{in_sample}");
        let groups: Vec<usize> = (0..p.len()).collect();
        let (v, _) = cross_validated(&p, &l, &groups, 13, 1).unwrap();
        assert!(!v[0], "item 0's cut is chosen without it");
    }

    #[test]
    fn folds_keep_a_questions_predictions_together() {
        // 12 predictions of 4 questions, 3 each; labels mixed within every question.
        let groups: Vec<usize> = (0..12).map(|i| i / 3).collect();
        let labels: Vec<bool> = (0..12).map(|i| i % 3 != 0).collect();
        let f = folds_of(&groups, &labels, 2, 3).unwrap();
        for q in 0..4 {
            let fs: BTreeSet<usize> = (0..12).filter(|i| i / 3 == q).map(|i| f[i]).collect();
            assert_eq!(fs.len(), 1, "question {q} split over folds {fs:?}");
        }
        // More folds than questions: refused.
        assert!(folds_of(&groups, &labels, 5, 3).is_err());
        // A fold whose complement has one label only: refused before any judging.
        let one_sided = [true, true, true, false];
        let e = folds_of(&[0, 1, 2, 3], &one_sided, 4, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no cut can be chosen"), "{e}");
        // The bootstrap resamples questions: items 0 and 1 (one question) are always drawn
        // together, as often as each other.
        let count = |idx: &[usize], i: usize| idx.iter().filter(|&&j| j == i).count() as f64;
        let diff = bootstrap_interval(&groups, 50, 9, |idx| Some(count(idx, 0) - count(idx, 1)));
        assert_eq!(diff, Some((0.0, 0.0)));
        let drawn = bootstrap_interval(&groups, 50, 9, |idx| Some(count(idx, 0))).unwrap();
        assert!(drawn.1 >= 2.0, "{drawn:?}");
    }

    #[test]
    fn records_round_trip_and_match_judge_backend_and_prompt() {
        let dir = std::env::temp_dir().join(format!("calibration-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("calibration.csv");
        let (p, l) = twenty();
        let groups: Vec<usize> = (0..20).collect();
        let template = "Q {question} G {gold} A {answer}";
        let sha = crate::assets::sha256_bytes(template.as_bytes());
        let m = Calibrated {
            judge: "m",
            prompt_sha256: &sha,
            ..of()
        };
        let c = calibrate(m, &p, &l, &groups, CalibrationOptions::default()).unwrap();
        let server = Calibration {
            backend: "server".into(),
            cut: 0.9,
            ..c.clone()
        };
        write_record(&path, &[c.clone(), server.clone()]).unwrap();
        assert_eq!(read_record(&path).unwrap(), vec![c.clone(), server]);
        let cut = |judge: &str, backend: &str, t: &str| {
            recorded_cut(&path, judge, backend, t)
                .unwrap()
                .map(|c| c.cut)
        };
        assert_eq!(cut("m", "gguf", template), Some(c.cut));
        assert_eq!(cut("m", "server", template), Some(0.9));
        assert_eq!(cut("m", "gguf", "another prompt"), None);
        assert_eq!(cut("other", "gguf", template), None);
        assert_eq!(
            recorded_cut(&dir.join("none.csv"), "m", "gguf", template).unwrap(),
            None
        );
        // Two rows for one judge, backend and prompt: refused, writing and reading.
        let e = write_record(&path, &[c.clone(), c.clone()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("two rows for judge `m`"), "{e}");
        let mut csv = std::fs::read_to_string(&path).unwrap();
        let first_row = csv.lines().nth(1).unwrap().to_string();
        csv.push_str(&first_row);
        csv.push('\n');
        std::fs::write(&path, csv).unwrap();
        let e = read_record(&path).unwrap_err().to_string();
        assert!(e.contains("two rows for judge `m`"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn labelled_sets_refuse_bad_lines_by_file_and_line() {
        let dir = std::env::temp_dir().join(format!("labels-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("labels.jsonl");
        let line = |id: &str, pred: &str, correct: bool, how: &str| {
            format!(
                r#"{{"id":"{id}","source":"r","question":"q","gold_answers":["a"],"prediction":"{pred}","correct":{correct},"how":"{how}"}}"#
            )
        };
        let write = |lines: &[String]| std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        write(&[
            line("1", "a", true, "exact match"),
            String::new(),
            line("2", "b", true, "read"),
        ]);
        assert_eq!(read_labels(&path).unwrap().len(), 2);
        write(&[line("1", "a", true, "read"), line("1", "b", true, "read")]);
        let e = read_labels(&path).unwrap_err().to_string();
        assert!(e.contains("labels.jsonl:2") && e.contains("twice"), "{e}");
        write(&[line("1", " ", true, "read")]);
        assert!(read_labels(&path)
            .unwrap_err()
            .to_string()
            .contains("empty prediction"));
        for how in ["", "yes/no"] {
            write(&[line("1", "b", true, how)]);
            let e = read_labels(&path).unwrap_err().to_string();
            assert!(e.contains("`how`"), "{e}");
        }
        // A rule's label the rule does not give.
        write(&[line("1", "b", true, "exact match")]);
        let e = read_labels(&path).unwrap_err().to_string();
        assert!(e.contains("the rule gives None"), "{e}");
        write(&[line("1", "a", false, "exact match")]);
        assert!(read_labels(&path).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
