//! Paired significance tests on per-query scores (e.g. [`MetricResult::per_query`]).
//!
//! All tests take two maps query id → score, for system A and system B, and pair
//! them by query id. The two maps must hold the same ids (an id present in one
//! only is an error naming it) and at least 2 pairs. Differences are `a − b`, so
//! a positive `mean_diff` / `statistic` means A scored higher.
//!
//! | test | null distribution | reference |
//! |---|---|---|
//! | [`paired_t_test`] | Student t, n − 1 df | Student (1908); Smucker, Allan & Carterette (2007) |
//! | [`randomization_test`] | random sign flips of the differences | Fisher (1935); Smucker, Allan & Carterette (2007) |
//! | [`bootstrap_test`] | resampled differences shifted to mean 0 | Efron & Tibshirani (1993, §16.4) |
//! | [`studentized_bootstrap_test`] | t statistics of resampled, mean-shifted differences | Sakai (2006); Efron & Tibshirani (1993, §16.4, Algorithm 16.2) |
//!
//! Smucker, Allan & Carterette, "A comparison of statistical significance tests
//! for information retrieval evaluation", CIKM 2007, recommend the randomisation
//! test (and find the t-test agrees closely with it) over the sign and Wilcoxon
//! tests. Every p-value is two-sided. The effect size is Cohen's d_z (Cohen 1988;
//! Lakens 2013): the mean of the paired differences divided by their sample
//! standard deviation (n − 1 denominator).
//!
//! The Monte Carlo tests count the observed arrangement among the resamples,
//! `p = (count + 1) / (trials + 1)` (Davison & Hinkley 1997, §4.2.5; Phipson &
//! Smyth 2010, "Permutation p-values should never be zero"), so p is never 0 and
//! equals 1 for identical systems. They are seeded with
//! `ChaCha8Rng::seed_from_u64(seed)`: the same inputs and seed give the same
//! result on every platform.
//!
//! For a table of several comparisons, [`holm`] adjusts a family's p-values
//! (Holm–Bonferroni), [`mean_ci95`] gives one system's bootstrap interval and
//! [`min_detectable_difference`] the difference the run's size could detect.
//!
//! [`MetricResult::per_query`]: crate::evaluate::MetricResult::per_query

use crate::{Error, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};
use std::collections::BTreeMap;

/// The outcome of a paired test of system A against system B.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    /// Which test: `paired_t`, `randomization`, `bootstrap` or
    /// `studentized_bootstrap`.
    pub test: String,
    /// Number of paired queries.
    pub n: usize,
    /// Mean score of system A.
    pub mean_a: f64,
    /// Mean score of system B.
    pub mean_b: f64,
    /// Mean of the per-query differences `a − b` (= `mean_a − mean_b`).
    pub mean_diff: f64,
    /// The test statistic: the t value for the t-test and the studentised
    /// bootstrap, the observed mean difference for the randomisation and bootstrap
    /// tests.
    pub statistic: f64,
    /// Two-sided p-value.
    pub p_value: f64,
    /// Cohen's d_z: `mean_diff / sd(diffs)` with the n − 1 sample standard
    /// deviation. 0 when every difference is 0; ±∞ when the differences are a
    /// nonzero constant.
    pub effect_size: f64,
    /// 95% percentile bootstrap confidence interval of the mean difference
    /// (bootstrap test only; `None` for the others).
    pub ci95: Option<(f64, f64)>,
}

/// Paired samples, in query id order.
struct Paired {
    a: Vec<f64>,
    b: Vec<f64>,
    diffs: Vec<f64>,
}

impl Paired {
    fn new(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> Result<Self> {
        if let Some(q) = a.keys().find(|q| !b.contains_key(*q)) {
            return Err(Error::param(
                "b",
                format!("query `{q}` is scored for system A but not for system B"),
            ));
        }
        if let Some(q) = b.keys().find(|q| !a.contains_key(*q)) {
            return Err(Error::param(
                "a",
                format!("query `{q}` is scored for system B but not for system A"),
            ));
        }
        for (name, m) in [("a", a), ("b", b)] {
            if let Some((q, v)) = m.iter().find(|(_, v)| !v.is_finite()) {
                return Err(Error::param(
                    name,
                    format!("score {v} for query `{q}` is not finite"),
                ));
            }
        }
        if a.len() < 2 {
            return Err(Error::param(
                "a",
                format!("a paired test needs at least 2 queries, got {}", a.len()),
            ));
        }
        let a: Vec<f64> = a.values().copied().collect();
        let b: Vec<f64> = b.values().copied().collect();
        let diffs = a.iter().zip(&b).map(|(x, y)| x - y).collect();
        Ok(Paired { a, b, diffs })
    }

    fn n(&self) -> usize {
        self.diffs.len()
    }

    /// Student's t distribution with n − 1 degrees of freedom.
    fn student_t(&self) -> Result<StudentsT> {
        StudentsT::new(0.0, 1.0, (self.n() - 1) as f64)
            .map_err(|e| Error::param("a", format!("Student t distribution: {e}")))
    }

    fn mean_diff(&self) -> f64 {
        mean(&self.diffs)
    }

    /// Sample standard deviation of the differences (n − 1 denominator), or `None`
    /// when they are constant up to rounding.
    fn sd_diff(&self) -> Option<f64> {
        sample_sd(&self.diffs)
    }

    /// Cohen's d_z, with the degenerate cases of [`TestResult::effect_size`].
    fn effect_size(&self) -> f64 {
        let m = self.mean_diff();
        match self.sd_diff() {
            Some(sd) => m / sd,
            None if is_zero(m, &self.diffs) => 0.0,
            None => f64::INFINITY.copysign(m),
        }
    }

    fn result(
        &self,
        test: &str,
        statistic: f64,
        p_value: f64,
        ci95: Option<(f64, f64)>,
    ) -> TestResult {
        let mean_a = mean(&self.a);
        let mean_b = mean(&self.b);
        TestResult {
            test: test.to_string(),
            n: self.n(),
            mean_a,
            mean_b,
            mean_diff: self.mean_diff(),
            statistic,
            p_value: p_value.clamp(0.0, 1.0),
            effect_size: self.effect_size(),
            ci95,
        }
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Sample standard deviation (n − 1 denominator) of `x` (n ≥ 2), or `None` when
/// the values are constant up to rounding.
fn sample_sd(x: &[f64]) -> Option<f64> {
    let (lo, hi) = x
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &d| {
            (lo.min(d), hi.max(d))
        });
    let scale = x.iter().fold(1.0f64, |m, d| m.max(d.abs()));
    if hi - lo <= 1e-12 * scale {
        return None;
    }
    let m = mean(x);
    let ss: f64 = x.iter().map(|d| (d - m).powi(2)).sum();
    Some((ss / (x.len() - 1) as f64).sqrt())
}

/// The one-sample t statistic `mean(x) / (sd(x) / √n)`, with the limits of
/// [`paired_t_test`] when the values are constant: 0 when they are all 0 (up to
/// rounding), ±∞ (sign of the mean) otherwise.
fn t_statistic(x: &[f64]) -> f64 {
    let m = mean(x);
    match sample_sd(x) {
        Some(sd) => m / (sd / (x.len() as f64).sqrt()),
        None if is_zero(m, x) => 0.0,
        None => f64::INFINITY.copysign(m),
    }
}

/// A mean of constant differences that is zero up to rounding.
fn is_zero(m: f64, diffs: &[f64]) -> bool {
    m.abs() <= 1e-12 * diffs.iter().fold(1.0f64, |x, d| x.max(d.abs()))
}

fn check_trials(trials: usize) -> Result<()> {
    if trials == 0 {
        return Err(Error::param("trials", "must be at least 1"));
    }
    Ok(())
}

/// Tolerance for "at least as extreme" comparisons of resampled sums, so that an
/// arrangement equal to the observed one up to rounding is counted.
fn tolerance(diffs: &[f64]) -> f64 {
    1e-9 * diffs.iter().map(|d| d.abs()).sum::<f64>()
}

/// Paired Student t-test.
///
/// With differences `d_i = a_i − b_i`, `t = mean(d) / (sd(d) / √n)` (sample sd,
/// n − 1 denominator) and `p = 2 · P(T_{n−1} ≥ |t|)` from
/// `statrs::distribution::StudentsT`.
///
/// Degenerate variance: if every difference is 0 the result is `statistic = 0`,
/// `p = 1`; if the differences are the same nonzero constant the result is
/// `statistic = ±∞` (sign of the difference), `p = 0` — the limit of the test as
/// the variance goes to 0.
pub fn paired_t_test(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> Result<TestResult> {
    let p = Paired::new(a, b)?;
    let m = p.mean_diff();
    let (t, pv) = match p.sd_diff() {
        None if is_zero(m, &p.diffs) => (0.0, 1.0),
        None => (f64::INFINITY.copysign(m), 0.0),
        Some(sd) => {
            let t = m / (sd / (p.n() as f64).sqrt());
            let dist = p.student_t()?;
            (t, 2.0 * dist.sf(t.abs()))
        }
    };
    Ok(p.result("paired_t", t, pv, None))
}

/// Fisher's paired randomisation (permutation) test, as in Smucker, Allan &
/// Carterette (2007).
///
/// Under the null hypothesis the labels A and B are exchangeable within each
/// query, so each difference is equally likely to have either sign. Each of
/// `trials` rounds flips the sign of every difference with probability ½ and
/// records the mean; `p = (#{|mean_perm| ≥ |mean_obs|} + 1) / (trials + 1)`.
/// `statistic` is the observed mean difference.
///
/// Errors: `trials == 0`, plus the pairing errors of the module docs.
pub fn randomization_test(
    a: &BTreeMap<String, f64>,
    b: &BTreeMap<String, f64>,
    trials: usize,
    seed: u64,
) -> Result<TestResult> {
    check_trials(trials)?;
    let p = Paired::new(a, b)?;
    let observed: f64 = p.diffs.iter().sum();
    let threshold = observed.abs() - tolerance(&p.diffs);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut extreme = 0usize;
    for _ in 0..trials {
        let s: f64 = p
            .diffs
            .iter()
            .map(|&d| if rng.gen::<bool>() { d } else { -d })
            .sum();
        if s.abs() >= threshold {
            extreme += 1;
        }
    }
    let pv = (extreme + 1) as f64 / (trials + 1) as f64;
    Ok(p.result("randomization", p.mean_diff(), pv, None))
}

/// Paired bootstrap test (Efron & Tibshirani 1993, §16.4; Sakai 2006) with a 95%
/// percentile confidence interval.
///
/// Each of `trials` rounds draws n differences with replacement and records their
/// mean `m*`. The null distribution is the bootstrap distribution shifted to mean
/// 0 (subtract the observed mean `m`):
/// `p = (#{|m* − m| ≥ |m|} + 1) / (trials + 1)`. `ci95` is the 2.5th and 97.5th
/// percentiles of the unshifted `m*` (linear interpolation between order
/// statistics, numpy's default). `statistic` is the observed mean difference.
///
/// Errors: `trials == 0`, plus the pairing errors of the module docs.
pub fn bootstrap_test(
    a: &BTreeMap<String, f64>,
    b: &BTreeMap<String, f64>,
    trials: usize,
    seed: u64,
) -> Result<TestResult> {
    check_trials(trials)?;
    let p = Paired::new(a, b)?;
    let n = p.n();
    let observed = p.mean_diff();
    let threshold = observed.abs() - tolerance(&p.diffs) / n as f64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut means = Vec::with_capacity(trials);
    let mut extreme = 0usize;
    for _ in 0..trials {
        let s: f64 = (0..n).map(|_| p.diffs[rng.gen_range(0..n)]).sum();
        let m = s / n as f64;
        if (m - observed).abs() >= threshold {
            extreme += 1;
        }
        means.push(m);
    }
    means.sort_by(f64::total_cmp);
    let ci = (quantile(&means, 0.025), quantile(&means, 0.975));
    let pv = (extreme + 1) as f64 / (trials + 1) as f64;
    Ok(p.result("bootstrap", observed, pv, Some(ci)))
}

/// Studentised paired bootstrap test (Sakai 2006, "Evaluating evaluation metrics
/// based on the bootstrap", SIGIR 2006, Fig. 1; the bootstrap-t test of Efron &
/// Tibshirani 1993, §16.4, Algorithm 16.2, applied to paired differences).
///
/// With differences `z_i = a_i − b_i`, their mean `z̄` and sample standard
/// deviation `σ̄` (n − 1 denominator), the observed statistic is
///
/// `t(z) = z̄ / (σ̄ / √n)`
///
/// (the paired t statistic). The differences are shifted to obey the null
/// hypothesis, `w_i = z_i − z̄`. Each of `trials` rounds draws n values of `w` with
/// replacement, `w*`, and computes `t(w*) = w̄* / (σ̄* / √n)` the same way. The
/// two-sided achieved significance level is
///
/// `p = (#{|t(w*)| ≥ |t(z)|} + 1) / (trials + 1)`
///
/// (Sakai reports `count / B`; the +1 is this module's convention, see the module
/// docs). Studentising makes the resampled statistic pivotal, which is why Sakai
/// prefers it to the plain [`bootstrap_test`] of the mean. A sample with zero
/// variance takes the t-test's limits: `t = 0` when its mean is 0, ±∞ otherwise
/// (so identical systems give p = 1, and a constant nonzero difference gives
/// p = 1 / (trials + 1)). `statistic` is `t(z)`; `ci95` is `None`.
///
/// The resamples use `ChaCha8Rng::seed_from_u64(seed)` and draw indices exactly
/// as [`bootstrap_test`] does, so with the same seed both tests see the same
/// resamples.
///
/// Errors: `trials == 0`, plus the pairing errors of the module docs.
pub fn studentized_bootstrap_test(
    a: &BTreeMap<String, f64>,
    b: &BTreeMap<String, f64>,
    trials: usize,
    seed: u64,
) -> Result<TestResult> {
    check_trials(trials)?;
    let p = Paired::new(a, b)?;
    let n = p.n();
    let z_bar = p.mean_diff();
    let observed = t_statistic(&p.diffs);
    let w: Vec<f64> = p.diffs.iter().map(|z| z - z_bar).collect();
    // "At least as extreme" up to rounding of the observed statistic.
    let threshold = observed.abs() * (1.0 - 1e-9);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut sample = vec![0.0; n];
    let mut extreme = 0usize;
    for _ in 0..trials {
        for s in sample.iter_mut() {
            *s = w[rng.gen_range(0..n)];
        }
        if t_statistic(&sample).abs() >= threshold {
            extreme += 1;
        }
    }
    let pv = (extreme + 1) as f64 / (trials + 1) as f64;
    Ok(p.result("studentized_bootstrap", observed, pv, None))
}

/// System A against baseline B on one metric, by all four paired tests with the
/// same trials and seed — one row of an experiment's significance table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Paired t-test (also carries the means, n and Cohen's d_z).
    pub paired_t: TestResult,
    /// Fisher randomisation test; its p-value decides [`Comparison::marker`].
    pub randomization: TestResult,
    /// Paired bootstrap test with the 95% interval of the mean difference.
    pub bootstrap: TestResult,
    /// Studentised paired bootstrap test (Sakai 2006).
    pub studentized_bootstrap: TestResult,
}

impl Comparison {
    /// Column names of [`Comparison::cells`].
    pub const COLUMNS: [&'static str; 11] = [
        "mean",
        "baseline_mean",
        "diff",
        "effect_size_dz",
        "p_paired_t",
        "p_randomization",
        "p_bootstrap",
        "p_studentized_bootstrap",
        "bootstrap_ci95_lo",
        "bootstrap_ci95_hi",
        "queries",
    ];

    /// The values of [`Comparison::COLUMNS`], formatted to 4 decimals.
    pub fn cells(&self) -> Vec<String> {
        let t = &self.paired_t;
        let (lo, hi) = self.bootstrap.ci95.unwrap_or((f64::NAN, f64::NAN));
        vec![
            format!("{:.4}", t.mean_a),
            format!("{:.4}", t.mean_b),
            format!("{:+.4}", t.mean_diff),
            format!("{:.3}", t.effect_size),
            format!("{:.4}", t.p_value),
            format!("{:.4}", self.randomization.p_value),
            format!("{:.4}", self.bootstrap.p_value),
            format!("{:.4}", self.studentized_bootstrap.p_value),
            format!("{lo:.4}"),
            format!("{hi:.4}"),
            t.n.to_string(),
        ]
    }

    /// `††` when the randomisation test gives p < 0.01, `†` when p < 0.05, else
    /// empty: the marks the experiment tables put after a mean.
    pub fn marker(&self) -> &'static str {
        marker(self.randomization.p_value)
    }
}

/// `††` for p < 0.01, `†` for p < 0.05, else empty.
pub fn marker(p: f64) -> &'static str {
    if p < 0.01 {
        "††"
    } else if p < 0.05 {
        "†"
    } else {
        ""
    }
}

/// Compare per-query scores `a` (system) with `b` (baseline) by the paired t,
/// randomisation, bootstrap and studentised bootstrap tests (`trials` rounds
/// each, each test seeded with `seed` on its own generator, so adding a test never
/// changes another's numbers).
pub fn compare(
    a: &BTreeMap<String, f64>,
    b: &BTreeMap<String, f64>,
    trials: usize,
    seed: u64,
) -> Result<Comparison> {
    Ok(Comparison {
        paired_t: paired_t_test(a, b)?,
        randomization: randomization_test(a, b, trials, seed)?,
        bootstrap: bootstrap_test(a, b, trials, seed)?,
        studentized_bootstrap: studentized_bootstrap_test(a, b, trials, seed)?,
    })
}

/// Holm–Bonferroni adjusted p-values (Holm 1979) of one family of comparisons, in the
/// order given: with the p-values sorted ascending, `p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)
/// p_(j))` (the step-down adjustment of R's `p.adjust(method = "holm")`). Rejecting where
/// `p̃ < α` controls the family-wise error rate at α. An empty family gives an empty list.
///
/// Errors: a p-value that is not in [0, 1].
pub fn holm(p: &[f64]) -> Result<Vec<f64>> {
    if let Some(x) = p.iter().find(|x| !(0.0..=1.0).contains(*x)) {
        return Err(Error::param("p", format!("p-value {x} is not in [0, 1]")));
    }
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]).then(i.cmp(&j)));
    let mut out = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        out[i] = running;
    }
    Ok(out)
}

/// 95% percentile bootstrap interval of the mean of `values` (one system's per-question
/// scores): `trials` resamples of n values with replacement, seeded with `seed`; the
/// 2.5th and 97.5th percentiles of the resampled means ([`quantile`]).
///
/// Errors: no values, a value that is not finite, `trials == 0`.
pub fn mean_ci95(values: &[f64], trials: usize, seed: u64) -> Result<(f64, f64)> {
    check_trials(trials)?;
    if values.is_empty() {
        return Err(Error::param("values", "no values to resample"));
    }
    if let Some(v) = values.iter().find(|v| !v.is_finite()) {
        return Err(Error::param("values", format!("score {v} is not finite")));
    }
    let n = values.len();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut means: Vec<f64> = (0..trials)
        .map(|_| (0..n).map(|_| values[rng.gen_range(0..n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    Ok((quantile(&means, 0.025), quantile(&means, 0.975)))
}

/// The smallest true mean difference a paired t-test at two-sided level `alpha` detects
/// with probability `power`, given the observed standard deviation of the paired
/// differences and their number: `(t_{1−α/2, n−1} + t_{power, n−1}) · sd(d) / √n`
/// (the usual normal-approximation formula with Student quantiles). It says how large a
/// difference the run's size could have shown: a difference below it that is not
/// significant is no evidence of equality.
///
/// `None` when every paired difference is the same (identical systems, or one that
/// differs by the same amount on every question): the differences have no spread, so the
/// formula has nothing to scale and the detectable difference is undefined.
///
/// Errors: the pairing errors of the module docs; `alpha` or `power` outside (0, 1).
pub fn min_detectable_difference(
    a: &BTreeMap<String, f64>,
    b: &BTreeMap<String, f64>,
    alpha: f64,
    power: f64,
) -> Result<Option<f64>> {
    for (name, v) in [("alpha", alpha), ("power", power)] {
        if !(v > 0.0 && v < 1.0) {
            return Err(Error::param(name, format!("{v} is not in (0, 1)")));
        }
    }
    let p = Paired::new(a, b)?;
    let Some(sd) = p.sd_diff() else {
        return Ok(None);
    };
    let dist = p.student_t()?;
    let q = dist.inverse_cdf(1.0 - alpha / 2.0) + dist.inverse_cdf(power);
    Ok(Some(q * sd / (p.n() as f64).sqrt()))
}

/// Quantile `q` (0…1) of sorted `v` by linear interpolation between order
/// statistics (Hyndman & Fan type 7, numpy's default); NaN when `v` is empty.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let h = (v.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(v.len() - 1);
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holm_matches_r_p_adjust() {
        // R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") = 0.03 0.06 0.06 0.02
        let adj = holm(&[0.01, 0.04, 0.03, 0.005]).unwrap();
        for (got, want) in adj.iter().zip([0.03, 0.06, 0.06, 0.02]) {
            assert!((got - want).abs() < 1e-12, "{adj:?}");
        }
        // Capped at 1, one comparison unchanged, empty family empty.
        assert_eq!(holm(&[0.6, 0.7]).unwrap(), vec![1.0, 1.0]);
        assert_eq!(holm(&[0.2]).unwrap(), vec![0.2]);
        assert!(holm(&[]).unwrap().is_empty());
        let e = holm(&[0.1, 1.5]).unwrap_err().to_string();
        assert!(e.contains("1.5"), "{e}");
    }

    #[test]
    fn mean_interval_covers_the_mean_and_is_seeded() {
        let v: Vec<f64> = (0..40)
            .map(|i| if i % 4 == 0 { 1.0 } else { 0.0 })
            .collect();
        let (lo, hi) = mean_ci95(&v, 2000, 7).unwrap();
        assert!(
            lo < 0.25 && 0.25 < hi && lo >= 0.0 && hi <= 1.0,
            "{lo} {hi}"
        );
        // Roughly ±1.96·sqrt(0.25·0.75/40) = ±0.134 around 0.25.
        assert!((hi - lo - 0.268).abs() < 0.06, "{lo} {hi}");
        assert_eq!(mean_ci95(&v, 2000, 7).unwrap(), (lo, hi));
        assert_eq!(mean_ci95(&[0.5; 10], 100, 1).unwrap(), (0.5, 0.5));
        assert!(mean_ci95(&[], 100, 1).is_err());
        assert!(mean_ci95(&[f64::NAN], 100, 1).is_err());
    }

    #[test]
    fn detectable_difference_by_hand() {
        // Differences ±1 alternating over n = 16: sd = sqrt(16/15), so MDE =
        // (t_{.975,15} + t_{.8,15}) · sd / 4 = (2.131450 + 0.866120) · 1.032796 / 4.
        let a = scores(&(0..16).map(|i| (i % 2) as f64).collect::<Vec<_>>());
        let b = scores(&(0..16).map(|i| ((i + 1) % 2) as f64).collect::<Vec<_>>());
        let mde = min_detectable_difference(&a, &b, 0.05, 0.8)
            .unwrap()
            .unwrap();
        let want = (2.131_450 + 0.866_120) * (16.0f64 / 15.0).sqrt() / 4.0;
        assert!((mde - want).abs() < 1e-4, "{mde} vs {want}");
        // Four times the questions halve it (same spread).
        let a4 = scores(&(0..64).map(|i| (i % 2) as f64).collect::<Vec<_>>());
        let b4 = scores(&(0..64).map(|i| ((i + 1) % 2) as f64).collect::<Vec<_>>());
        let mde4 = min_detectable_difference(&a4, &b4, 0.05, 0.8)
            .unwrap()
            .unwrap();
        assert!(mde4 < 0.5 * mde && mde4 > 0.44 * mde, "{mde4} vs {mde}");
        assert!(min_detectable_difference(&a, &b, 0.0, 0.8).is_err());
    }

    #[test]
    fn detectable_difference_is_undefined_without_spread() {
        let a = scores(&(0..16).map(|i| (i % 2) as f64).collect::<Vec<_>>());
        // Identical systems: every difference is 0.
        assert_eq!(min_detectable_difference(&a, &a, 0.05, 0.8).unwrap(), None);
        // A constant shift: every difference is 0.25, no spread either.
        let shifted = scores(&(0..16).map(|i| (i % 2) as f64 + 0.25).collect::<Vec<_>>());
        assert_eq!(
            min_detectable_difference(&shifted, &a, 0.05, 0.8).unwrap(),
            None
        );
    }

    fn scores(v: &[f64]) -> BTreeMap<String, f64> {
        v.iter()
            .enumerate()
            .map(|(i, &x)| (format!("q{i:02}"), x))
            .collect()
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn t_test_by_hand_df2() {
        // d = [0.1, 0.2, 0.3]: mean 0.2, sd = sqrt((0.01 + 0 + 0.01) / 2) = 0.1,
        // t = 0.2 / (0.1 / √3) = 2√3 = 3.4641016.
        // For 2 df the t CDF is closed-form: P(T > t) = ½ − t / (2√(t² + 2)), so
        // p = 1 − t/√(t² + 2) = 1 − √(12/14) = 1 − √(6/7) = 0.0741799.
        let a = scores(&[0.4, 0.5, 0.6]);
        let b = scores(&[0.3, 0.3, 0.3]);
        let r = paired_t_test(&a, &b).unwrap();
        assert_eq!(r.test, "paired_t");
        assert_eq!(r.n, 3);
        assert!(close(r.mean_a, 0.5, 1e-12) && close(r.mean_b, 0.3, 1e-12));
        assert!(close(r.mean_diff, 0.2, 1e-12));
        assert!(
            close(r.statistic, 2.0 * 3f64.sqrt(), 1e-9),
            "{}",
            r.statistic
        );
        assert!(
            close(r.p_value, 1.0 - (6.0f64 / 7.0).sqrt(), 1e-9),
            "{}",
            r.p_value
        );
        assert!(close(r.effect_size, 2.0, 1e-9)); // 0.2 / 0.1
        assert_eq!(r.ci95, None);
        // Swapping the systems flips the sign, not the p-value.
        let s = paired_t_test(&b, &a).unwrap();
        assert!(close(s.statistic, -r.statistic, 1e-12) && close(s.p_value, r.p_value, 1e-15));
    }

    #[test]
    fn t_test_by_hand_df1() {
        // d = [0.1, 0.3]: mean 0.2, sd = √(0.01 + 0.01) = 0.1414214,
        // t = 0.2 / (0.1414214 / √2) = 2. With 1 df the t distribution is Cauchy:
        // p = 1 − (2/π)·atan(2) = 0.2951672.
        let r = paired_t_test(&scores(&[0.6, 0.8]), &scores(&[0.5, 0.5])).unwrap();
        assert!(close(r.statistic, 2.0, 1e-9));
        let want = 1.0 - 2.0 / std::f64::consts::PI * 2f64.atan();
        assert!(close(r.p_value, want, 1e-9), "{} vs {want}", r.p_value);
    }

    #[test]
    fn t_test_against_scipy() {
        // d = [0.1, 0.2, -0.05, 0.3]: mean 0.1375, Σ(d − mean)² = 0.066875,
        // sd = √(0.066875 / 3) = 0.1493039, t = 0.1375 / (0.1493039 / 2) = 1.8418804.
        // Reference values computed once with scipy 1.17.1,
        // scipy.stats.ttest_rel([.5, .7, .3, .9], [.4, .5, .35, .6]), and pasted here.
        const SCIPY_T: f64 = 1.8418803882136272;
        const SCIPY_P: f64 = 0.16273310982429354;
        let r = paired_t_test(
            &scores(&[0.5, 0.7, 0.3, 0.9]),
            &scores(&[0.4, 0.5, 0.35, 0.6]),
        )
        .unwrap();
        assert!(close(r.statistic, SCIPY_T, 1e-9), "{}", r.statistic);
        assert!(close(r.p_value, SCIPY_P, 1e-9), "{}", r.p_value);
        assert!(close(
            r.effect_size,
            0.1375 / (0.066875f64 / 3.0).sqrt(),
            1e-9
        ));
    }

    #[test]
    fn t_test_zero_variance() {
        let a = scores(&[0.5, 0.7, 0.9]);
        let same = paired_t_test(&a, &a).unwrap();
        assert_eq!(
            (same.statistic, same.p_value, same.effect_size),
            (0.0, 1.0, 0.0)
        );
        // Constant nonzero difference (0.1, up to rounding) → t = +∞, p = 0.
        let b = scores(&[0.4, 0.6, 0.8]);
        let r = paired_t_test(&a, &b).unwrap();
        assert_eq!(r.statistic, f64::INFINITY);
        assert_eq!(r.p_value, 0.0);
        assert_eq!(r.effect_size, f64::INFINITY);
        let r = paired_t_test(&b, &a).unwrap();
        assert_eq!((r.statistic, r.p_value), (f64::NEG_INFINITY, 0.0));
    }

    #[test]
    fn pairing_errors() {
        let a = scores(&[0.1, 0.2, 0.3]);
        let mut b = a.clone();
        b.remove("q01");
        let e = paired_t_test(&a, &b).unwrap_err();
        assert!(e.to_string().contains("q01"), "{e}");
        let e = randomization_test(&b, &a, 10, 0).unwrap_err();
        assert!(e.to_string().contains("q01"), "{e}");
        let one = scores(&[0.1]);
        assert!(paired_t_test(&one, &one).is_err());
        assert!(paired_t_test(&BTreeMap::new(), &BTreeMap::new()).is_err());
        let mut nan = a.clone();
        nan.insert("q00".into(), f64::NAN);
        assert!(bootstrap_test(&nan, &a, 10, 0).is_err());
        for e in [
            randomization_test(&a, &a, 0, 1).unwrap_err(),
            bootstrap_test(&a, &a, 0, 1).unwrap_err(),
        ] {
            assert!(
                matches!(e, Error::InvalidParam { name: "trials", .. }),
                "{e}"
            );
        }
    }

    fn strongly_different() -> (BTreeMap<String, f64>, BTreeMap<String, f64>) {
        let a: Vec<f64> = (0..20).map(|i| 0.8 + 0.01 * (i % 5) as f64).collect();
        let b: Vec<f64> = (0..20).map(|i| 0.2 + 0.02 * (i % 3) as f64).collect();
        (scores(&a), scores(&b))
    }

    fn moderate() -> (BTreeMap<String, f64>, BTreeMap<String, f64>) {
        (
            scores(&[0.5, 0.7, 0.3, 0.9, 0.4, 0.6]),
            scores(&[0.4, 0.5, 0.35, 0.6, 0.5, 0.55]),
        )
    }

    #[test]
    fn randomization_identical_and_different() {
        let (a, b) = strongly_different();
        let same = randomization_test(&a, &a, 1000, 7).unwrap();
        assert_eq!(same.p_value, 1.0); // every permutation ties the observed 0
        assert_eq!(same.test, "randomization");
        let r = randomization_test(&a, &b, 1000, 7).unwrap();
        // All 20 differences are positive: only 2 of 2^20 sign patterns are as
        // extreme, so essentially no trial is, and p = 1/1001.
        assert!(r.p_value < 0.01, "{}", r.p_value);
        assert!(r.p_value > 0.0);
        assert!(close(r.statistic, r.mean_diff, 0.0));
        assert!(r.mean_diff > 0.5);
    }

    #[test]
    fn randomization_matches_exact_enumeration() {
        // d = [0.1, 0.2, −0.05, 0.3], |Σd| = 0.55. Of the 16 sign patterns, |Σ s·d|
        // ≥ 0.55 only when the "wrong-signed" set has |d|-sum ≤ 0.05: {} or
        // {−0.05}, and their mirror images → exact p = 4/16 = 0.25.
        let a = scores(&[0.5, 0.7, 0.3, 0.9]);
        let b = scores(&[0.4, 0.5, 0.35, 0.6]);
        let r = randomization_test(&a, &b, 20_000, 42).unwrap();
        assert!(close(r.p_value, 0.25, 0.02), "{}", r.p_value);
    }

    #[test]
    fn randomization_seeding() {
        let (a, b) = moderate();
        let r1 = randomization_test(&a, &b, 2000, 1).unwrap();
        let r2 = randomization_test(&a, &b, 2000, 1).unwrap();
        assert_eq!(r1, r2);
        let ps: Vec<f64> = (2..6)
            .map(|s| randomization_test(&a, &b, 2000, s).unwrap().p_value)
            .collect();
        assert!(
            ps.iter().any(|&p| p != r1.p_value),
            "{ps:?} vs {}",
            r1.p_value
        );
        // Every seed estimates the same exact permutation p-value. d = [0.1, 0.2,
        // −0.05, 0.3, −0.1, 0.05], |Σd| = 0.5, Σ|d| = 0.8: a sign pattern whose
        // "wrong-signed" |d|-sum is w gives |0.8 − 2w| ≥ 0.5 iff w ≤ 0.15 or
        // w ≥ 0.65. Subsets with w ≤ 0.15: {}, {0.1}×2, {0.05}×2, {0.05, 0.05},
        // {0.1, 0.05}×4 = 10, plus their 10 complements → exact p = 20/64 = 0.3125.
        // (The observed pattern sits exactly on the boundary w = 0.15, so this also
        // checks the rounding tolerance.) Monte Carlo sd at 2000 trials ≈ 0.010.
        let big = randomization_test(&a, &b, 200_000, 99).unwrap();
        assert!(close(big.p_value, 0.3125, 0.005), "{}", big.p_value);
        for p in ps.iter().chain([&r1.p_value]) {
            assert!(close(*p, 0.3125, 0.04), "{p}");
        }
    }

    #[test]
    fn bootstrap_identical_and_different() {
        let (a, b) = strongly_different();
        let same = bootstrap_test(&a, &a, 1000, 3).unwrap();
        assert_eq!(same.test, "bootstrap");
        assert_eq!(same.p_value, 1.0);
        assert_eq!(same.ci95, Some((0.0, 0.0)));
        let r = bootstrap_test(&a, &b, 1000, 3).unwrap();
        assert!(r.p_value < 0.01, "{}", r.p_value);
        let (lo, hi) = r.ci95.unwrap();
        assert!(
            lo > 0.0 && lo <= r.mean_diff && r.mean_diff <= hi,
            "{lo} {hi} {}",
            r.mean_diff
        );
    }

    #[test]
    fn bootstrap_by_hand() {
        // d = [0, 1], mean 0.5. A resample of 2 has mean 0 (prob ¼), 0.5 (½) or 1 (¼);
        // shifted by −0.5 that is −0.5, 0, 0.5, and |m* − 0.5| ≥ 0.5 with prob ½
        // → p ≈ 0.5. The 2.5th / 97.5th percentiles of m* are 0 and 1.
        let r = bootstrap_test(&scores(&[1.0, 1.0]), &scores(&[1.0, 0.0]), 20_000, 9).unwrap();
        assert!(close(r.mean_diff, 0.5, 0.0));
        assert!(close(r.p_value, 0.5, 0.02), "{}", r.p_value);
        assert_eq!(r.ci95, Some((0.0, 1.0)));
        assert!(close(r.effect_size, 0.5 / 0.5f64.sqrt(), 1e-12)); // sd = √((0.25 + 0.25) / 1)
    }

    #[test]
    fn bootstrap_seeding() {
        let (a, b) = moderate();
        let r1 = bootstrap_test(&a, &b, 2000, 11).unwrap();
        assert_eq!(r1, bootstrap_test(&a, &b, 2000, 11).unwrap());
        let others: Vec<TestResult> = (12..16)
            .map(|s| bootstrap_test(&a, &b, 2000, s).unwrap())
            .collect();
        assert!(others
            .iter()
            .any(|o| o.p_value != r1.p_value || o.ci95 != r1.ci95));
        for o in &others {
            assert!(close(o.p_value, r1.p_value, 0.05));
        }
    }

    #[test]
    fn studentized_bootstrap_by_hand_n2() {
        // z = [0, 1]: z̄ = 0.5, σ̄ = √0.5, t(z) = 0.5 / (√0.5 / √2) = 1.
        // w = [−0.5, 0.5]. A resample of 2 is [−.5, −.5] or [.5, .5] (prob ½,
        // zero variance, nonzero mean → t* = ∓∞, extreme) or mixed (prob ½, mean
        // 0 → t* = 0, not extreme) → p ≈ 0.5.
        let r = studentized_bootstrap_test(&scores(&[1.0, 1.0]), &scores(&[1.0, 0.0]), 20_000, 9)
            .unwrap();
        assert_eq!(r.test, "studentized_bootstrap");
        assert!(close(r.statistic, 1.0, 1e-12), "{}", r.statistic);
        assert!(close(r.p_value, 0.5, 0.02), "{}", r.p_value);
        assert_eq!(r.ci95, None);
        assert!(close(r.mean_diff, 0.5, 0.0));
    }

    #[test]
    fn studentized_bootstrap_matches_exact_enumeration() {
        // z = [0.1, 0.2, −0.05, 0.3] (the t-test fixture): t(z) = 1.8418804. The
        // exact bootstrap ASL enumerates all 4⁴ = 256 equally likely index
        // tuples; computed here with the formula written out independently.
        let a = scores(&[0.5, 0.7, 0.3, 0.9]);
        let b = scores(&[0.4, 0.5, 0.35, 0.6]);
        let z = [0.1, 0.2, -0.05, 0.3];
        let n = z.len();
        let z_bar = z.iter().sum::<f64>() / n as f64;
        let t = |x: &[f64]| {
            let m = x.iter().sum::<f64>() / n as f64;
            let var = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1) as f64;
            m / (var.sqrt() / (n as f64).sqrt())
        };
        let t_obs = t(&z);
        assert!(close(t_obs, 1.8418803882136272, 1e-9));
        let w: Vec<f64> = z.iter().map(|v| v - z_bar).collect();
        let mut extreme = 0;
        for code in 0..256usize {
            let idx = [code & 3, (code >> 2) & 3, (code >> 4) & 3, code >> 6];
            // All four indices equal: zero variance, nonzero mean → t* = ±∞.
            if idx.iter().all(|&i| i == idx[0]) {
                extreme += 1;
                continue;
            }
            let x: Vec<f64> = idx.iter().map(|&i| w[i]).collect();
            if t(&x).abs() >= t_obs {
                extreme += 1;
            }
        }
        let exact = extreme as f64 / 256.0;
        let r = studentized_bootstrap_test(&a, &b, 50_000, 5).unwrap();
        assert!(close(r.statistic, t_obs, 1e-9));
        // Monte Carlo sd at 50,000 trials ≤ 0.0023.
        assert!(
            close(r.p_value, exact, 0.01),
            "{} vs exact {exact}",
            r.p_value
        );
    }

    #[test]
    fn studentized_bootstrap_identical_and_different() {
        let (a, b) = strongly_different();
        let same = studentized_bootstrap_test(&a, &a, 1000, 3).unwrap();
        assert_eq!((same.p_value, same.statistic), (1.0, 0.0));
        let r = studentized_bootstrap_test(&a, &b, 1000, 3).unwrap();
        // t(z) is huge and every resample of the centred differences has a small
        // |t*|: p = 1/1001.
        assert!(r.p_value < 0.01, "{}", r.p_value);
        assert!(r.statistic > 10.0, "{}", r.statistic);
        assert_eq!(
            r.statistic,
            paired_t_test(&a, &b).unwrap().statistic,
            "the observed statistic is the paired t"
        );
        // A constant nonzero difference: t(z) = +∞, every resample of w = 0 has
        // t* = 0, so p = 1 / (trials + 1).
        let shifted: BTreeMap<String, f64> = a.iter().map(|(q, v)| (q.clone(), v - 0.25)).collect();
        let c = studentized_bootstrap_test(&a, &shifted, 999, 3).unwrap();
        assert_eq!((c.statistic, c.p_value), (f64::INFINITY, 0.001));
    }

    #[test]
    fn studentized_bootstrap_seeding() {
        let (a, b) = moderate();
        let r1 = studentized_bootstrap_test(&a, &b, 2000, 11).unwrap();
        assert_eq!(r1, studentized_bootstrap_test(&a, &b, 2000, 11).unwrap());
        let ps: Vec<f64> = (12..16)
            .map(|s| studentized_bootstrap_test(&a, &b, 2000, s).unwrap().p_value)
            .collect();
        assert!(ps.iter().any(|&p| p != r1.p_value), "{ps:?}");
        for p in &ps {
            assert!(close(*p, r1.p_value, 0.05), "{p} vs {}", r1.p_value);
        }
        let e = studentized_bootstrap_test(&a, &b, 0, 1).unwrap_err();
        assert!(
            matches!(e, Error::InvalidParam { name: "trials", .. }),
            "{e}"
        );
        let mut short = b.clone();
        short.remove("q03");
        assert!(studentized_bootstrap_test(&a, &short, 10, 1).is_err());
    }

    #[test]
    fn quantile_type7() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 0.5), 3.0);
        assert_eq!(quantile(&v, 1.0), 5.0);
        assert!(close(quantile(&v, 0.1), 1.4, 1e-12)); // h = 0.4
        assert_eq!(quantile(&[7.0], 0.975), 7.0);
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn compare_runs_all_three_tests_and_marks_by_randomization_p() {
        // Ten queries, A better on every one by 0.1..1.0: clearly significant.
        let a = scores(&[1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9]);
        let b = scores(&[0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]);
        let c = compare(&a, &b, 2000, 7).unwrap();
        assert_eq!(c.paired_t, paired_t_test(&a, &b).unwrap());
        assert_eq!(
            c.randomization,
            randomization_test(&a, &b, 2000, 7).unwrap()
        );
        assert_eq!(c.bootstrap, bootstrap_test(&a, &b, 2000, 7).unwrap());
        assert_eq!(
            c.studentized_bootstrap,
            studentized_bootstrap_test(&a, &b, 2000, 7).unwrap()
        );
        // Every sign flip but the observed one has a smaller |sum|: p = 2/1024 in the
        // exact test, so the Monte Carlo p is far below 0.01.
        assert!(c.randomization.p_value < 0.01);
        assert_eq!(c.marker(), "††");
        let cells = c.cells();
        assert_eq!(cells.len(), Comparison::COLUMNS.len());
        assert_eq!(cells[2], "+0.5500");
        assert_eq!(cells[10], "10");
        assert_eq!(
            cells[Comparison::COLUMNS
                .iter()
                .position(|c| *c == "p_studentized_bootstrap")
                .unwrap()],
            format!("{:.4}", c.studentized_bootstrap.p_value)
        );
        // Identical systems: p = 1, no mark.
        let same = compare(&a, &a, 200, 7).unwrap();
        assert_eq!(same.marker(), "");
        assert_eq!(
            (marker(0.009), marker(0.049), marker(0.05)),
            ("††", "†", "")
        );
    }
}
