//! How well labels cluster in a space: k-nearest-neighbour label agreement, its chance
//! level, and the silhouette (Rousseeuw 1987). Points are indices `0..n`; the space is a
//! distance function.

/// Indices of the `k` nearest neighbours of every point (itself excluded) under `dist`;
/// ties by index.
pub fn knn(n: usize, k: usize, dist: impl Fn(usize, usize) -> f64) -> Vec<Vec<usize>> {
    (0..n)
        .map(|i| {
            let mut d: Vec<(f64, usize)> = (0..n)
                .filter(|&j| j != i)
                .map(|j| (dist(i, j), j))
                .collect();
            d.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            d.into_iter().take(k).map(|x| x.1).collect()
        })
        .collect()
}

/// Mean over points of the share of their neighbours with the same label, and the mean
/// per label (NaN for a label without points). `labels[i] < n_labels`.
pub fn agreement(neigh: &[Vec<usize>], labels: &[usize], n_labels: usize) -> (f64, Vec<f64>) {
    let mut per = vec![(0.0, 0usize); n_labels];
    let mut total = 0.0;
    for (i, nb) in neigh.iter().enumerate() {
        let a =
            nb.iter().filter(|&&j| labels[j] == labels[i]).count() as f64 / nb.len().max(1) as f64;
        total += a;
        per[labels[i]].0 += a;
        per[labels[i]].1 += 1;
    }
    (
        total / neigh.len().max(1) as f64,
        per.iter()
            .map(|(s, c)| if *c > 0 { s / *c as f64 } else { f64::NAN })
            .collect(),
    )
}

/// The agreement a random neighbour would have: Σ n_c(n_c−1) / (n(n−1)) over the label
/// sizes n_c.
pub fn chance_agreement(labels: &[usize], n_labels: usize) -> f64 {
    let n = labels.len();
    if n < 2 {
        return f64::NAN;
    }
    (0..n_labels)
        .map(|c| {
            let s = labels.iter().filter(|&&l| l == c).count();
            (s * s.saturating_sub(1)) as f64
        })
        .sum::<f64>()
        / (n * (n - 1)) as f64
}

/// Mean silhouette of the labels under `dist`, and the mean per label (NaN for a label
/// without points); a point alone in its label scores 0.
pub fn silhouette(
    n: usize,
    labels: &[usize],
    n_labels: usize,
    dist: impl Fn(usize, usize) -> f64,
) -> (f64, Vec<f64>) {
    let size: Vec<usize> = (0..n_labels)
        .map(|c| labels.iter().filter(|&&l| l == c).count())
        .collect();
    let mut per = vec![(0.0, 0usize); n_labels];
    let mut total = 0.0;
    for i in 0..n {
        let mut sums = vec![0.0; n_labels];
        for j in 0..n {
            if j != i {
                sums[labels[j]] += dist(i, j);
            }
        }
        let own = labels[i];
        let s = if size[own] <= 1 {
            0.0
        } else {
            let a = sums[own] / (size[own] - 1) as f64;
            let b = (0..n_labels)
                .filter(|&c| c != own && size[c] > 0)
                .map(|c| sums[c] / size[c] as f64)
                .fold(f64::INFINITY, f64::min);
            (b - a) / a.max(b)
        };
        total += s;
        per[own].0 += s;
        per[own].1 += 1;
    }
    (
        total / n.max(1) as f64,
        per.iter()
            .map(|(s, c)| if *c > 0 { s / *c as f64 } else { f64::NAN })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two tight, well-separated groups on a line: 0, 1, 2 and 100, 101, 102.
    fn line() -> (Vec<f64>, Vec<usize>) {
        (
            vec![0.0, 1.0, 2.0, 100.0, 101.0, 102.0],
            vec![0, 0, 0, 1, 1, 1],
        )
    }

    #[test]
    fn separated_groups_agree_fully_and_score_near_one() {
        let (x, labels) = line();
        let d = |i: usize, j: usize| (x[i] - x[j]).abs();
        let nb = knn(6, 2, d);
        assert_eq!(nb[0], [1, 2]);
        assert_eq!(nb[1], [0, 2], "ties broken by index");
        let (a, per) = agreement(&nb, &labels, 2);
        assert_eq!(a, 1.0);
        assert_eq!(per, [1.0, 1.0]);
        // chance: 2 groups of 3 → 2·3·2 / (6·5) = 0.4
        assert!((chance_agreement(&labels, 2) - 0.4).abs() < 1e-12);
        let (s, _) = silhouette(6, &labels, 2, d);
        assert!(s > 0.95, "{s}");
    }

    #[test]
    fn swapped_labels_score_below_zero() {
        let (x, _) = line();
        let labels = [0, 1, 0, 1, 0, 1];
        let d = |i: usize, j: usize| (x[i] - x[j]).abs();
        let (a, _) = agreement(&knn(6, 2, d), &labels, 2);
        assert!(a < 0.5, "{a}");
        let (s, _) = silhouette(6, &labels, 2, d);
        assert!(s < 0.0, "{s}");
    }
}
