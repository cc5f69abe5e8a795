//! Attention of one new position over the KV cache, on AVX-512, without tensor operations.
//!
//! In decoding each layer attends one query row per head to the cached keys and values.
//! Done with tensor operations that is some twenty small operations per layer (matmuls of
//! a few rows, scaling, softmax, stacking, each with its allocation), whose overhead grows
//! with the context. Here each KV head's cached slab `[kv_len, head_dim]` is read in place,
//! once for all the query heads that share it: scores, softmax (max-subtracted, as
//! candle's), and the weighted sum of the values. The KV heads are shared out over
//! candle's thread pool.

use super::cpu::{features, switched_off, Avx512};

/// Whether this CPU runs the kernel (x86-64 with AVX-512 F) and `WORKBENCH_LLM_NO_ATTN` is
/// unset (it restores the tensor-operation attention, for comparisons).
pub(crate) fn available() -> bool {
    token().is_some()
}

/// The token the kernel runs with, when [`available`].
fn token() -> Option<Avx512> {
    static TOKEN: std::sync::OnceLock<Option<Avx512>> = std::sync::OnceLock::new();
    *TOKEN.get_or_init(|| {
        if switched_off("WORKBENCH_LLM_NO_ATTN") {
            return None;
        }
        features().avx512()
    })
}

/// Shapes of one layer's decode attention.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
    /// Positions the cache has room for (its second dimension).
    pub cap: usize,
    /// Positions attended to (the new one included).
    pub kv_len: usize,
}

/// `softmax(q_h · K_jᵀ · scale) · V_j` for every head `h` (KV head `j = h / group`), for
/// the rotated queries `q: [n_head · head_dim]` and the caches `k`, `v: [n_kv_head, cap,
/// head_dim]`; `None` when the kernel does not apply (CPU, or `head_dim` not a multiple
/// of 16).
pub(crate) fn attend(q: &[f32], k: &[f32], v: &[f32], s: Shape, scale: f32) -> Option<Vec<f32>> {
    let Shape {
        n_head,
        n_kv_head,
        head_dim: hd,
        cap,
        kv_len,
    } = s;
    let token = token()?;
    if !hd.is_multiple_of(16)
        || n_kv_head == 0
        || !n_head.is_multiple_of(n_kv_head)
        || kv_len == 0
        || kv_len > cap
        || q.len() != n_head * hd
        || k.len() < n_kv_head * cap * hd
        || v.len() < n_kv_head * cap * hd
    {
        return None;
    }
    let group = n_head / n_kv_head;
    let mut out = vec![0f32; n_head * hd];
    let out_ptr = out.as_mut_ptr() as usize;
    candle_core::utils::barrier_pool().execute_chunked(n_kv_head, |range| {
        for j in range {
            let ks = &k[j * cap * hd..(j * cap + kv_len) * hd];
            let vs = &v[j * cap * hd..(j * cap + kv_len) * hd];
            let qs = &q[j * group * hd..(j + 1) * group * hd];
            // SAFETY: KV head j writes only its heads' rows of `out`.
            let os = unsafe {
                std::slice::from_raw_parts_mut(
                    (out_ptr as *mut f32).add(j * group * hd),
                    group * hd,
                )
            };
            kernel::head_group(token, qs, ks, vs, os, group, hd, kv_len, scale);
        }
    });
    Some(out)
}

#[cfg(target_arch = "x86_64")]
mod kernel {
    use super::Avx512;
    use std::arch::x86_64::*;

    /// One KV head's group of query heads. Checked: panics unless `hd % 16 == 0`, `qs` and
    /// `os` hold `group · hd` floats and `ks`, `vs` `kv_len · hd`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn head_group(
        _: Avx512,
        qs: &[f32],
        ks: &[f32],
        vs: &[f32],
        os: &mut [f32],
        group: usize,
        hd: usize,
        kv_len: usize,
        scale: f32,
    ) {
        assert!(
            hd.is_multiple_of(16)
                && qs.len() == group * hd
                && os.len() == group * hd
                && ks.len() == kv_len * hd
                && vs.len() == kv_len * hd
        );
        // SAFETY: the token proves AVX-512 F; the lengths are checked above.
        unsafe { head_group_avx512(qs, ks, vs, os, group, hd, kv_len, scale) }
    }

    /// # Safety
    /// AVX-512 F; `hd % 16 == 0`; `qs`, `os`: `group · hd`; `ks`, `vs`: `kv_len · hd`.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f")]
    unsafe fn head_group_avx512(
        qs: &[f32],
        ks: &[f32],
        vs: &[f32],
        os: &mut [f32],
        group: usize,
        hd: usize,
        kv_len: usize,
        scale: f32,
    ) {
        // Scores, `[group, kv_len]`: each key row is read once for the whole group.
        let mut w = vec![0f32; group * kv_len];
        // SAFETY: key row `p < kv_len` and query row `g < group` hold `hd` floats (the
        // caller's promise), read 16 at a time (`hd % 16 == 0`); `w` holds `group · kv_len`
        // scores.
        unsafe {
            for p in 0..kv_len {
                let kp = ks.as_ptr().add(p * hd);
                for g in 0..group {
                    let qg = qs.as_ptr().add(g * hd);
                    let mut acc = _mm512_setzero_ps();
                    let mut i = 0;
                    while i < hd {
                        acc = _mm512_fmadd_ps(
                            _mm512_loadu_ps(qg.add(i)),
                            _mm512_loadu_ps(kp.add(i)),
                            acc,
                        );
                        i += 16;
                    }
                    *w.get_unchecked_mut(g * kv_len + p) = _mm512_reduce_add_ps(acc) * scale;
                }
            }
        }
        // Softmax of each head's row.
        for row in w.chunks_exact_mut(kv_len) {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0f32;
            for x in row.iter_mut() {
                *x = (*x - max).exp();
                sum += *x;
            }
            let inv = 1.0 / sum;
            for x in row.iter_mut() {
                *x *= inv;
            }
        }
        // Weighted sums of the value rows, each read once for the whole group.
        os.fill(0.0);
        // SAFETY: value row `p < kv_len` and output row `g < group` hold `hd` floats (the
        // caller's promise), read and written 16 at a time; `w` holds `group · kv_len`.
        unsafe {
            for p in 0..kv_len {
                let vp = vs.as_ptr().add(p * hd);
                for g in 0..group {
                    let a = _mm512_set1_ps(*w.get_unchecked(g * kv_len + p));
                    let o = os.as_mut_ptr().add(g * hd);
                    let mut i = 0;
                    while i < hd {
                        let y = _mm512_fmadd_ps(
                            a,
                            _mm512_loadu_ps(vp.add(i)),
                            _mm512_loadu_ps(o.add(i)),
                        );
                        _mm512_storeu_ps(o.add(i), y);
                        i += 16;
                    }
                }
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod kernel {
    use super::Avx512;

    #[allow(clippy::too_many_arguments)]
    pub(super) fn head_group(
        _: Avx512,
        _qs: &[f32],
        _ks: &[f32],
        _vs: &[f32],
        _os: &mut [f32],
        _group: usize,
        _hd: usize,
        _kv_len: usize,
        _scale: f32,
    ) {
        unreachable!("decode attention kernel is only used on x86-64 (see `available`)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::testing::test_values as values;

    /// The same attention in f64, directly from the definition.
    fn reference(q: &[f32], k: &[f32], v: &[f32], s: Shape, scale: f32) -> Vec<f64> {
        let group = s.n_head / s.n_kv_head;
        let mut out = vec![0f64; s.n_head * s.head_dim];
        for h in 0..s.n_head {
            let j = h / group;
            let qh = &q[h * s.head_dim..(h + 1) * s.head_dim];
            let scores: Vec<f64> = (0..s.kv_len)
                .map(|p| {
                    let kp = &k[(j * s.cap + p) * s.head_dim..][..s.head_dim];
                    qh.iter()
                        .zip(kp)
                        .map(|(a, b)| *a as f64 * *b as f64)
                        .sum::<f64>()
                        * scale as f64
                })
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|x| (x - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            for (p, ep) in e.iter().enumerate() {
                let vp = &v[(j * s.cap + p) * s.head_dim..][..s.head_dim];
                for (o, x) in out[h * s.head_dim..(h + 1) * s.head_dim].iter_mut().zip(vp) {
                    *o += ep / sum * *x as f64;
                }
            }
        }
        out
    }

    #[test]
    fn matches_the_definition() {
        if !available() {
            crate::kernels::testing::skip(
                "kernels::decode_attn::tests::matches_the_definition",
                "CPU has no AVX-512 F (or WORKBENCH_LLM_NO_ATTN is set)",
            );
            return;
        }
        let s = Shape {
            n_head: 6,
            n_kv_head: 2,
            head_dim: 32,
            cap: 40,
            kv_len: 29,
        };
        let q = values(s.n_head * s.head_dim, 1);
        let k = values(s.n_kv_head * s.cap * s.head_dim, 2);
        let v = values(s.n_kv_head * s.cap * s.head_dim, 3);
        let got = attend(&q, &k, &v, s, 0.3).unwrap();
        let want = reference(&q, &k, &v, s, 0.3);
        for (g, w) in got.iter().zip(&want) {
            assert!((*g as f64 - w).abs() < 1e-5, "{g} vs {w}");
        }
        // Positions past kv_len are not read.
        let mut k2 = k.clone();
        for j in 0..s.n_kv_head {
            k2[(j * s.cap + s.kv_len) * s.head_dim] = f32::NAN;
        }
        assert_eq!(attend(&q, &k2, &v, s, 0.3).unwrap(), got);
    }

    #[test]
    fn shapes_it_does_not_handle_are_declined() {
        let s = Shape {
            n_head: 4,
            n_kv_head: 2,
            head_dim: 24,
            cap: 8,
            kv_len: 8,
        };
        let q = values(4 * 24, 1);
        let kv = values(2 * 8 * 24, 2);
        assert!(attend(&q, &kv, &kv, s, 1.0).is_none());
        let s = Shape {
            head_dim: 32,
            kv_len: 9,
            ..s
        };
        let kv = values(2 * 8 * 32, 2);
        assert!(attend(&values(4 * 32, 1), &kv, &kv, s, 1.0).is_none());
    }
}
