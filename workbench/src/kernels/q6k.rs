//! Q6_K weights times a few activation rows, on AVX-512: the matrix products of decoding.
//!
//! candle multiplies a Q6_K matrix by one row with an AVX2 kernel on the file's compact
//! blocks, and by several rows with AVX-512 kernels on repacked tiles; the two round
//! differently. This kernel reads each weight block once for all the activation rows (one
//! pass over the weights per decoding step of a batch) and computes every (weight row,
//! activation row) dot product with the same instructions in the same order whatever the
//! number of rows, so a sequence decoded in a batch gets exactly the logits it gets alone.
//!
//! Activations are quantised to Q8_K as ggml and candle do (per 256 values: a scale, 256
//! int8 and the 16 sums of 16). A Q6_K block holds 256 six-bit values `q` in `ql` (low
//! four bits) and `qh` (high two), 16 int8 sub-block scales and an f16 scale `d`; its
//! value `i` is `d · scale[i / 16] · (q[i] − 32)`. Per block the kernel forms
//! `Σ scale · q · a` with `maddubs` / `madd` on 512-bit registers, subtracts
//! `32 · Σ scale · bsum`, and accumulates `d_w · d_a ·` that in f32 lanes.

use super::cpu::{features, switched_off, Avx512BwF16c};
use candle_core::quantized::{GgmlDType, QTensor};

/// Values per block.
const QK: usize = 256;
/// Bytes of a Q6_K block: `ql[128]`, `qh[64]`, `scales[16]`, `d: f16`.
const BLOCK_BYTES: usize = 210;
/// Weight rows per unit of parallel work.
const ROWS_PER_UNIT: usize = 32;

/// Whether this CPU runs the kernel (x86-64 with AVX-512 F/BW and F16C), and
/// `WORKBENCH_LLM_NO_Q6K` is unset (it restores candle's kernels, for comparisons).
pub(crate) fn available() -> bool {
    token().is_some()
}

/// The token the kernel runs with, when [`available`].
fn token() -> Option<Avx512BwF16c> {
    static TOKEN: std::sync::OnceLock<Option<Avx512BwF16c>> = std::sync::OnceLock::new();
    *TOKEN.get_or_init(|| {
        if switched_off("WORKBENCH_LLM_NO_Q6K") {
            return None;
        }
        features().avx512bw_f16c()
    })
}

/// Rows of activations quantised to Q8_K.
pub(crate) struct Q8k {
    rows: usize,
    /// Blocks per row.
    nb: usize,
    pub(super) d: Vec<f32>,
    pub(super) qs: Vec<i8>,
    /// Per block, `−16 · bsum[j]` twice for each sub-block `j` (32 i16): multiplied by
    /// the scales pairwise it gives the `−32 · Σ scale · bsum` of the unsigned weights.
    /// Q8_K values lie in −127..=127, so `16 · bsum` fits an i16.
    neg16_bsums: Vec<i16>,
}

impl Q8k {
    /// Quantise `x: [rows, k]` (row-major, `k` a multiple of 256) block by block, with
    /// ggml's rounding: scale `−127 / max` where `max` is the value of largest magnitude.
    pub fn quantize(x: &[f32], k: usize) -> Q8k {
        debug_assert!(k.is_multiple_of(QK) && x.len().is_multiple_of(k));
        let rows = x.len() / k;
        let nb = k / QK;
        let mut out = Q8k {
            rows,
            nb,
            d: vec![0.0; rows * nb],
            qs: vec![0; rows * k],
            neg16_bsums: vec![0; rows * nb * 32],
        };
        for (b, xs) in x.chunks_exact(QK).enumerate() {
            let mut max = 0f32;
            let mut amax = 0f32;
            for &v in xs {
                if amax < v.abs() {
                    amax = v.abs();
                    max = v;
                }
            }
            if amax == 0.0 {
                continue;
            }
            let iscale = -127f32 / max;
            let qs = &mut out.qs[b * QK..(b + 1) * QK];
            for (q, &v) in qs.iter_mut().zip(xs) {
                *q = (iscale * v).round().clamp(-128.0, 127.0) as i8;
            }
            for (j, s) in out.neg16_bsums[b * 32..(b + 1) * 32]
                .chunks_exact_mut(2)
                .enumerate()
            {
                let bsum: i16 = qs[j * 16..(j + 1) * 16].iter().map(|&q| q as i16).sum();
                s.fill(-16 * bsum);
            }
            out.d[b] = 1.0 / iscale;
        }
        out
    }
}

/// `dst[r * n + i] = Σ_j x[r, j] · W[i, j]` for the Q6_K matrix `w: [n, k]` and the rows
/// of `x: [rows, k]`, in parallel over the weight rows on candle's thread pool. `None`
/// when `w` is not Q6_K or the kernel is not [`available`].
pub(crate) fn matmul(w: &QTensor, x: &[f32]) -> candle_core::Result<Option<Vec<f32>>> {
    if w.dtype() != GgmlDType::Q6K {
        return Ok(None);
    }
    let Some(token) = token() else {
        return Ok(None);
    };
    let (n, k) = w.shape().dims2()?;
    if k == 0 || !k.is_multiple_of(QK) || !x.len().is_multiple_of(k) {
        candle_core::bail!("q6k matmul: {} inputs for rows of {k}", x.len());
    }
    let data = w.data()?;
    if data.len() != n * (k / QK) * BLOCK_BYTES {
        candle_core::bail!("q6k matmul: {} bytes for a {n}×{k} Q6_K matrix", data.len());
    }
    let a = Q8k::quantize(x, k);
    let rows = a.rows;
    let mut dst = vec![0f32; rows * n];
    let dst_ptr = dst.as_mut_ptr() as usize;
    let row_bytes = (k / QK) * BLOCK_BYTES;
    let units = n.div_ceil(ROWS_PER_UNIT);
    candle_core::utils::barrier_pool().execute_chunked(units, |range| {
        let lo = range.start * ROWS_PER_UNIT;
        let hi = n.min(range.end * ROWS_PER_UNIT);
        for i in lo..hi {
            let wrow = &data[i * row_bytes..(i + 1) * row_bytes];
            let mut r0 = 0;
            while r0 < rows {
                let take = (rows - r0).min(4);
                let mut out = [0f32; 4];
                kernel::dot(token, wrow, &a, r0, take, &mut out);
                for (r, v) in out[..take].iter().enumerate() {
                    // SAFETY: each (row, column) of `dst` is written by one unit only.
                    unsafe { *(dst_ptr as *mut f32).add((r0 + r) * n + i) = *v };
                }
                r0 += take;
            }
        }
    });
    Ok(Some(dst))
}

#[cfg(target_arch = "x86_64")]
mod kernel {
    use super::{Avx512BwF16c, Q8k, BLOCK_BYTES, QK};
    use std::arch::x86_64::*;

    /// i16 shift counts for the high bits: the first 16 lanes (bytes 0..32 of the
    /// broadcast `qh`) and the last 16 (its second copy).
    const SHL_LOW: [u16; 32] = {
        let mut a = [4u16; 32];
        let mut i = 16;
        while i < 32 {
            a[i] = 2;
            i += 1;
        }
        a
    };
    const SHR_HIGH: [u16; 32] = {
        let mut a = [0u16; 32];
        let mut i = 16;
        while i < 32 {
            a[i] = 2;
            i += 1;
        }
        a
    };

    /// For the 64 values `64t..64t + 64`, i16 lane `p` (values `2p, 2p + 1`) takes scale
    /// `4t + p / 8`.
    const fn scale_index(t: u16) -> [u16; 32] {
        let mut a = [0u16; 32];
        let mut p = 0;
        while p < 32 {
            a[p] = 4 * t + (p as u16) / 8;
            p += 1;
        }
        a
    }
    const SCALE_IDX: [[u16; 32]; 4] = [
        scale_index(0),
        scale_index(1),
        scale_index(2),
        scale_index(3),
    ];
    /// i16 lane `p` takes scale `p / 2` (for the `bsum` correction).
    const PAIR_IDX: [u16; 32] = {
        let mut a = [0u16; 32];
        let mut p = 0;
        while p < 32 {
            a[p] = (p / 2) as u16;
            p += 1;
        }
        a
    };

    /// Dot products of the weight row `w` (Q6_K blocks) with activation rows
    /// `r0..r0 + take` of `a` (`take` ≤ 4), into `out[..take]`.
    ///
    /// Checked: panics unless `take <= 4`, `r0 + take <= a.rows` and `w` holds `a.nb`
    /// blocks (the token proves AVX-512 F/BW and F16C).
    pub(super) fn dot(
        _: Avx512BwF16c,
        w: &[u8],
        a: &Q8k,
        r0: usize,
        take: usize,
        out: &mut [f32; 4],
    ) {
        assert!(take <= 4 && r0 + take <= a.rows && w.len() == a.nb * BLOCK_BYTES);
        // SAFETY: the token proves the features; the lengths are checked above.
        unsafe { dot_avx512(w, a, r0, take, out) }
    }

    /// # Safety
    /// The CPU has AVX-512 F/BW and F16C; `w` holds `a.nb` blocks; `r0 + take <= a.rows`.
    #[target_feature(enable = "avx512f,avx512bw,f16c")]
    unsafe fn dot_avx512(w: &[u8], a: &Q8k, r0: usize, take: usize, out: &mut [f32; 4]) {
        // SAFETY: the caller's promise is `dot_r`'s for `R = take` (at most 4).
        unsafe {
            match take {
                1 => dot_r::<1>(w, a, r0, out),
                2 => dot_r::<2>(w, a, r0, out),
                3 => dot_r::<3>(w, a, r0, out),
                _ => dot_r::<4>(w, a, r0, out),
            }
        }
    }

    /// [`dot`] for `R` rows. The operations for one activation row do not depend on `R`.
    ///
    /// # Safety
    /// As [`dot_avx512`], with `r0 + R <= a.rows`.
    #[target_feature(enable = "avx512f,avx512bw,f16c")]
    #[inline]
    unsafe fn dot_r<const R: usize>(w: &[u8], a: &Q8k, r0: usize, out: &mut [f32; 4]) {
        let m4 = _mm512_set1_epi8(0x0F);
        let m30 = _mm512_set1_epi8(0x30);
        // SAFETY: each table is 32 u16, one 512-bit vector.
        let (shl, shr, idx, pair_idx) = unsafe {
            (
                _mm512_loadu_si512(SHL_LOW.as_ptr() as *const _),
                _mm512_loadu_si512(SHR_HIGH.as_ptr() as *const _),
                [
                    _mm512_loadu_si512(SCALE_IDX[0].as_ptr() as *const _),
                    _mm512_loadu_si512(SCALE_IDX[1].as_ptr() as *const _),
                    _mm512_loadu_si512(SCALE_IDX[2].as_ptr() as *const _),
                    _mm512_loadu_si512(SCALE_IDX[3].as_ptr() as *const _),
                ],
                _mm512_loadu_si512(PAIR_IDX.as_ptr() as *const _),
            )
        };
        let mut acc = [_mm512_setzero_ps(); R];
        let nb = a.nb;
        for b in 0..nb {
            // SAFETY: block `b < nb` of `w` (which holds `nb` blocks of BLOCK_BYTES = 210
            // bytes: `ql` at 0..128, `qh` at 128..192, the scales at 192..208, `d` at
            // 208..210) is read at those offsets only; activation block `ab` of rows
            // `r0..r0 + R` (fewer than `a.rows`) holds QK = 256 values in `a.qs`, 32
            // entries in `a.neg16_bsums` and one scale in `a.d`.
            unsafe {
                let blk = w.as_ptr().add(b * BLOCK_BYTES);
                // Values 0..128 come from ql[0..64] and qh[0..32], 128..256 from ql[64..128]
                // and qh[32..64]. In each half, the low nibbles of ql give values 0..64 and
                // the high nibbles 64..128; qh's bit pairs 0, 1, 2, 3 go to its values
                // 0..32, 32..64, 64..96, 96..128.
                let mut q = [_mm512_setzero_si512(); 4];
                for h in 0..2 {
                    let ql = _mm512_loadu_si512(blk.add(64 * h) as *const _);
                    let qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(
                        blk.add(128 + 32 * h) as *const _
                    ));
                    let hi_lo = _mm512_and_si512(_mm512_sllv_epi16(qh, shl), m30);
                    let hi_hi = _mm512_and_si512(_mm512_srlv_epi16(qh, shr), m30);
                    q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), hi_lo);
                    q[2 * h + 1] =
                        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), hi_hi);
                }
                let sc8 = _mm_loadu_si128(blk.add(192) as *const __m128i);
                let sc16 = _mm256_cvtepi8_epi16(sc8);
                let scz = _mm512_castsi256_si512(sc16);
                let s = [
                    _mm512_permutexvar_epi16(idx[0], scz),
                    _mm512_permutexvar_epi16(idx[1], scz),
                    _mm512_permutexvar_epi16(idx[2], scz),
                    _mm512_permutexvar_epi16(idx[3], scz),
                ];
                let pairs = _mm512_permutexvar_epi16(pair_idx, scz);
                let dw_bits = u16::from_le_bytes([*blk.add(208), *blk.add(209)]);
                let dw = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(dw_bits as i32)));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let ab = (r0 + r) * nb + b;
                    let y = a.qs.as_ptr().add(ab * QK);
                    let bs = _mm512_loadu_si512(a.neg16_bsums.as_ptr().add(ab * 32) as *const _);
                    let mut sum = _mm512_madd_epi16(pairs, bs);
                    for (t, (qt, st)) in q.iter().zip(&s).enumerate() {
                        let yt = _mm512_loadu_si512(y.add(64 * t) as *const _);
                        let p = _mm512_madd_epi16(_mm512_maddubs_epi16(*qt, yt), *st);
                        sum = _mm512_add_epi32(sum, p);
                    }
                    let d = _mm512_set1_ps(dw * *a.d.get_unchecked(ab));
                    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), d, *acc);
                }
            }
        }
        for (o, acc) in out.iter_mut().zip(acc) {
            *o = _mm512_reduce_add_ps(acc);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod kernel {
    use super::{Avx512BwF16c, Q8k};
    pub(super) fn dot(
        _: Avx512BwF16c,
        _w: &[u8],
        _a: &Q8k,
        _r0: usize,
        _take: usize,
        _out: &mut [f32; 4],
    ) {
        unreachable!("the Q6_K kernel is only used on x86-64 (see `available`)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::QMatMul;
    use candle_core::{Device, Module, Tensor};

    fn random(n: usize, k: usize, seed: u64) -> Vec<f32> {
        crate::kernels::testing::test_values(n * k, seed)
    }

    fn q6k(n: usize, k: usize) -> QTensor {
        let w = Tensor::from_vec(random(n, k, 1), (n, k), &Device::Cpu).unwrap();
        QTensor::quantize(&w, GgmlDType::Q6K).unwrap()
    }

    #[test]
    fn q8k_quantisation_matches_ggml_rounding() {
        let x = random(1, 512, 7);
        let a = Q8k::quantize(&x, 512);
        for b in 0..2 {
            let xs = &x[b * QK..(b + 1) * QK];
            let (i, _) = xs
                .iter()
                .enumerate()
                .max_by(|p, q| p.1.abs().total_cmp(&q.1.abs()))
                .unwrap();
            // The value of largest magnitude maps to -127.
            assert_eq!(a.qs[b * QK + i], -127);
            for j in 0..16 {
                let s: i32 = a.qs[b * QK + j * 16..b * QK + j * 16 + 16]
                    .iter()
                    .map(|&q| q as i32)
                    .sum();
                assert_eq!(a.neg16_bsums[b * 32 + 2 * j] as i32, -16 * s);
                assert_eq!(a.neg16_bsums[b * 32 + 2 * j + 1] as i32, -16 * s);
            }
            assert!(a.qs.iter().all(|&q| q >= -127));
            let back = a.qs[b * QK + 3] as f32 * a.d[b];
            assert!((back - xs[3]).abs() <= a.d[b].abs() * 0.5 + 1e-6);
        }
        let zeros = Q8k::quantize(&[0.0; 256], 256);
        assert_eq!(zeros.d[0], 0.0);
        assert!(zeros.qs.iter().all(|&q| q == 0));
    }

    /// `x · Wᵀ` in f64 from candle's dequantised `w: [n, k]` and the rows of `x` quantised to
    /// Q8_K: the reference of the kernel's test (`[rows, n]`, row-major).
    fn dequantised_product(w: &candle_core::quantized::QTensor, x: &[f32], k: usize) -> Vec<f64> {
        let wd = w
            .dequantize(&candle_core::Device::Cpu)
            .and_then(|t| t.to_vec2::<f32>())
            .expect("dequantise");
        let a = Q8k::quantize(x, k);
        let mut out = Vec::new();
        for r in 0..x.len() / k {
            for row in &wd {
                let mut s = 0f64;
                for (j, &wv) in row.iter().enumerate() {
                    let d = a.d[r * (k / 256) + j / 256] as f64;
                    s += wv as f64 * a.qs[r * k + j] as f64 * d;
                }
                out.push(s);
            }
        }
        out
    }

    #[test]
    fn matches_the_dequantised_product_and_candle() {
        if !available() {
            crate::kernels::testing::skip(
                "kernels::q6k::tests::matches_the_dequantised_product_and_candle",
                "CPU has no AVX-512 F/BW and F16C (or WORKBENCH_LLM_NO_Q6K is set)",
            );
            return;
        }
        let (n, k) = (70, 768);
        let w = q6k(n, k);
        let x = random(3, k, 2);
        let got = matmul(&w, &x).unwrap().unwrap();
        let want = dequantised_product(&w, &x, k);
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (*g as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                "{g} vs {w}"
            );
        }
        // candle's own product (same Q8_K quantisation, another summation order).
        let mm = QMatMul::from_qtensor(q6k(n, k)).unwrap();
        let xt = Tensor::from_vec(x.clone(), (3, k), &Device::Cpu).unwrap();
        let theirs = mm
            .forward(&xt)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        for (g, t) in got.iter().zip(&theirs) {
            assert!((g - t).abs() <= 1e-3 * (1.0 + t.abs()), "{g} vs candle {t}");
        }
    }

    #[test]
    fn each_row_is_the_same_alone_or_in_a_batch() {
        if !available() {
            crate::kernels::testing::skip(
                "kernels::q6k::tests::each_row_is_the_same_alone_or_in_a_batch",
                "CPU has no AVX-512 F/BW and F16C (or WORKBENCH_LLM_NO_Q6K is set)",
            );
            return;
        }
        let (n, k) = (37, 1536);
        let w = q6k(n, k);
        let x = random(6, k, 3);
        let all = matmul(&w, &x).unwrap().unwrap();
        for r in 0..6 {
            let alone = matmul(&w, &x[r * k..(r + 1) * k]).unwrap().unwrap();
            assert_eq!(alone, all[r * n..(r + 1) * n], "row {r}");
        }
    }

    #[test]
    fn other_types_and_bad_shapes_are_refused() {
        let w = Tensor::from_vec(random(8, 256, 4), (8, 256), &Device::Cpu).unwrap();
        let q4 = QTensor::quantize(&w, GgmlDType::Q4K).unwrap();
        assert!(matmul(&q4, &random(1, 256, 5)).unwrap().is_none());
        if available() {
            let q6 = QTensor::quantize(&w, GgmlDType::Q6K).unwrap();
            assert!(matmul(&q6, &random(1, 100, 5)).is_err());
        }
    }
}
