//! The row kernels of the BERT forward and backward passes (LayerNorm, bias + activation,
//! softmax and their backward passes, `exp`/`erf` polynomials), each compiled twice: for
//! AVX2 + FMA (picked at run time when [`super::cpu::features`] finds them) and for the
//! baseline target. The entry points are safe and check the CPU themselves; the portable
//! path is the same code with `F = false` (no fused multiply-add), which the tests compare
//! against.

use super::cpu::{features, Avx2Fma};

/// Hidden activation of the feed-forward block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `0.5·x·(1 + erf(x/√2))` (HF `"gelu"`).
    Gelu,
    /// The tanh approximation (HF `"gelu_new"`, `"gelu_pytorch_tanh"`).
    GeluTanh,
    /// `max(x, 0)`.
    Relu,
}

#[inline(always)]
fn fma<const F: bool>(a: f32, b: f32, c: f32) -> f32 {
    if F {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// Sum with eight independent accumulators (vectorisable under strict IEEE semantics).
#[inline(always)]
fn sum8(xs: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let chunks = xs.chunks_exact(8);
    let rem = chunks.remainder();
    for c in chunks {
        for i in 0..8 {
            acc[i] += c[i];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for &r in rem {
        s += r;
    }
    s
}

/// `e^x` for f32, Cephes `expf` kernel, branch-free (vectorises).
#[inline(always)]
fn exp<const F: bool>(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    const MAGIC: f32 = 12_582_912.0; // 1.5 · 2^23: adding it rounds to an integer
                                     // Below −87.3 the result is 0 (not e^−87.3 ≈ 1e−38, whose products with anything
                                     // below 1 are subnormal floats, which the CPU multiplies ~100× slower).
    let keep = if x >= -87.3 { 1.0 } else { 0.0 };
    let x = x.clamp(-87.3, 88.3);
    let t = fma::<F>(x, LOG2E, MAGIC);
    let n = t - MAGIC;
    let r = fma::<F>(n, -C1, x);
    let r = fma::<F>(n, -C2, r);
    let mut p = 1.987_569_2e-4f32;
    p = fma::<F>(p, r, 1.398_2e-3);
    p = fma::<F>(p, r, 8.333_452e-3);
    p = fma::<F>(p, r, 4.166_579_6e-2);
    p = fma::<F>(p, r, 1.666_666_5e-1);
    p = fma::<F>(p, r, 0.5); // Cephes: 5.0000001201e-1, which rounds to 0.5 in f32
    let e = fma::<F>(p, r * r, r) + 1.0;
    let bits = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let scale = f32::from_bits(((bits + 127) << 23) as u32);
    e * scale * keep
}

/// erf(x), Abramowitz & Stegun 7.1.26 (|error| ≤ 1.5e-7).
#[inline(always)]
fn erf<const F: bool>(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / fma::<F>(0.327_591_1, a, 1.0);
    let mut p = 1.061_405_4f32;
    p = fma::<F>(p, t, -1.453_152);
    p = fma::<F>(p, t, 1.421_413_7);
    p = fma::<F>(p, t, -0.284_496_74);
    p = fma::<F>(p, t, 0.254_829_6);
    let y = 1.0 - p * t * exp::<F>(-a * a);
    y.copysign(x)
}

#[inline(always)]
fn act<const F: bool>(x: f32, kind: Activation) -> f32 {
    match kind {
        Activation::Gelu => 0.5 * x * (1.0 + erf::<F>(x * std::f32::consts::FRAC_1_SQRT_2)),
        Activation::GeluTanh => {
            let u = 0.797_884_6 * fma::<F>(0.044_715 * x, x * x, x);
            let tanh = 1.0 - 2.0 / (exp::<F>(2.0 * u) + 1.0);
            0.5 * x * (1.0 + tanh)
        }
        Activation::Relu => x.max(0.0),
    }
}

#[inline(always)]
fn norm_impl<const F: bool>(v: &mut [f32], w: &[f32], b: &[f32], eps: f32) {
    let n = v.len() as f32;
    let mean = sum8(v) / n;
    for x in v.iter_mut() {
        *x -= mean;
    }
    let mut acc = [0f32; 8];
    let chunks = v.chunks_exact(8);
    let rem = chunks.remainder();
    for c in chunks {
        for i in 0..8 {
            acc[i] = fma::<F>(c[i], c[i], acc[i]);
        }
    }
    let mut ss: f32 = acc.iter().sum();
    for &r in rem {
        ss += r * r;
    }
    let inv = 1.0 / (ss / n + eps).sqrt();
    for ((x, &w), &b) in v.iter_mut().zip(w).zip(b) {
        *x = fma::<F>(*x * inv, w, b);
    }
}

#[inline(always)]
fn add_impl<const F: bool>(v: &mut [f32], b: &[f32]) {
    for (x, &y) in v.iter_mut().zip(b) {
        *x += y;
    }
}

#[inline(always)]
fn bias_act_impl<const F: bool>(v: &mut [f32], bias: &[f32], kind: Activation) {
    let n = v.len().min(bias.len());
    match kind {
        Activation::Gelu => {
            #[cfg(target_arch = "x86_64")]
            if F {
                // SAFETY: `F` is true only in the AVX2 + FMA build (given the token).
                return unsafe { avx2::bias_gelu_in_place(&mut v[..n], &bias[..n]) };
            }
            for i in 0..n {
                v[i] = act::<F>(v[i] + bias[i], Activation::Gelu);
            }
        }
        Activation::GeluTanh => {
            for i in 0..n {
                v[i] = act::<F>(v[i] + bias[i], Activation::GeluTanh);
            }
        }
        Activation::Relu => {
            for i in 0..n {
                v[i] = (v[i] + bias[i]).max(0.0);
            }
        }
    }
}

/// 1 / √(2π).
const INV_SQRT_2PI: f32 = 0.398_942_3;

/// `d gelu(x) / dx = Φ(x) + x φ(x)`.
#[inline(always)]
fn gelu_grad<const F: bool>(x: f32) -> f32 {
    let cdf = 0.5 * (1.0 + erf::<F>(x * std::f32::consts::FRAC_1_SQRT_2));
    fma::<F>(x, INV_SQRT_2PI * exp::<F>(-0.5 * x * x), cdf)
}

#[inline(always)]
fn gelu_into_impl<const F: bool>(x: &[f32], y: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if F {
        // SAFETY: `F` is true only in the AVX2 + FMA build (given the token).
        return unsafe { avx2::gelu_into(x, y) };
    }
    for (y, &x) in y.iter_mut().zip(x) {
        *y = act::<F>(x, Activation::Gelu);
    }
}

#[inline(always)]
fn gelu_grad_impl<const F: bool>(x: &[f32], d: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if F {
        // SAFETY: `F` is true only in the AVX2 + FMA build (given the token).
        return unsafe { avx2::gelu_grad_in_place(x, d) };
    }
    for (d, &x) in d.iter_mut().zip(x) {
        *d *= gelu_grad::<F>(x);
    }
}

/// The backward pass of a softmax row in place: `d ← p ⊙ (d − Σ d·p)`.
#[inline(always)]
fn softmax_backward_impl<const F: bool>(d: &mut [f32], p: &[f32]) {
    let n = d.len().min(p.len());
    let (d, p) = (&mut d[..n], &p[..n]);
    let mut acc = [0f32; 16];
    let (dc, pc) = (d.chunks_exact(16), p.chunks_exact(16));
    let (dr, pr) = (dc.remainder(), pc.remainder());
    for (a, b) in dc.zip(pc) {
        for i in 0..16 {
            acc[i] = fma::<F>(a[i], b[i], acc[i]);
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (a, b) in dr.iter().zip(pr) {
        s += a * b;
    }
    for (a, &b) in d.iter_mut().zip(p) {
        *a = b * (*a - s);
    }
}

/// Largest element, eight lanes at a time.
#[inline(always)]
fn max8(xs: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 8];
    let chunks = xs.chunks_exact(8);
    let rem = chunks.remainder();
    for c in chunks {
        for i in 0..8 {
            acc[i] = if c[i] > acc[i] { c[i] } else { acc[i] };
        }
    }
    let mut m = f32::NEG_INFINITY;
    for &x in acc.iter().chain(rem) {
        m = if x > m { x } else { m };
    }
    m
}

/// Softmax of one row in place.
#[inline(always)]
fn softmax_impl<const F: bool>(row: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if F {
        // SAFETY: `F` is true only in the AVX2 + FMA build (given the token).
        return unsafe { avx2::softmax_row(row) };
    }
    let max = max8(row);
    for s in row.iter_mut() {
        *s = exp::<F>(*s - max);
    }
    let inv = 1.0 / sum8(row);
    for s in row.iter_mut() {
        *s *= inv;
    }
}

/// Explicit AVX2 + FMA versions of the hot loops (LLVM does not vectorise
/// them reliably). Only called after run-time detection.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn exp8(x: __m256) -> __m256 {
        // All ones where x ≥ −87.3: below, the result is 0 (see the scalar `exp`).
        let keep = _mm256_cmp_ps::<_CMP_GE_OQ>(x, _mm256_set1_ps(-87.3));
        let x = _mm256_min_ps(
            _mm256_max_ps(x, _mm256_set1_ps(-87.3)),
            _mm256_set1_ps(88.3),
        );
        let magic = _mm256_set1_ps(12_582_912.0);
        let t = _mm256_fmadd_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E), magic);
        let n = _mm256_sub_ps(t, magic);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), x);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
        let mut p = _mm256_set1_ps(1.987_569_2e-4);
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.398_2e-3));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.333_452e-3));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.166_579_6e-2));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.666_666_5e-1));
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5));
        let e = _mm256_add_ps(
            _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r),
            _mm256_set1_ps(1.0),
        );
        let bits = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_castps_si256(magic));
        let scale = _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_add_epi32(bits, _mm256_set1_epi32(127)),
            23,
        ));
        _mm256_and_ps(_mm256_mul_ps(e, scale), keep)
    }

    /// erf(z), Abramowitz & Stegun 7.1.26.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn erf8(z: __m256) -> __m256 {
        let sign = _mm256_set1_ps(-0.0);
        let a = _mm256_andnot_ps(sign, z);
        let one = _mm256_set1_ps(1.0);
        let t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.327_591_1), a, one));
        let mut p = _mm256_set1_ps(1.061_405_4);
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453_152));
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421_413_7));
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284_496_74));
        p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254_829_6));
        let e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(a, a)));
        let y = _mm256_fnmadd_ps(_mm256_mul_ps(p, t), e, one); // 1 − p·t·e
        _mm256_or_ps(y, _mm256_and_ps(sign, z))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn gelu8(x: __m256) -> __m256 {
        let erf = erf8(_mm256_mul_ps(
            x,
            _mm256_set1_ps(std::f32::consts::FRAC_1_SQRT_2),
        ));
        _mm256_mul_ps(
            _mm256_mul_ps(_mm256_set1_ps(0.5), x),
            _mm256_add_ps(_mm256_set1_ps(1.0), erf),
        )
    }

    /// `y = gelu(x)` (equal lengths).
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn gelu_into(x: &[f32], y: &mut [f32]) {
        let n = x.len().min(y.len());
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: `x` holds `n ≥ i + 8` floats.
            let v = unsafe { _mm256_loadu_ps(x.as_ptr().add(i)) };
            // SAFETY: `y` holds `n ≥ i + 8` floats.
            unsafe { _mm256_storeu_ps(y.as_mut_ptr().add(i), gelu8(v)) };
            i += 8;
        }
        for j in i..n {
            y[j] = super::act::<true>(x[j], super::Activation::Gelu);
        }
    }

    /// `d ← d · gelu'(x)` (equal lengths).
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn gelu_grad_in_place(x: &[f32], d: &mut [f32]) {
        let n = x.len().min(d.len());
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: `x` holds `n ≥ i + 8` floats.
            let v = unsafe { _mm256_loadu_ps(x.as_ptr().add(i)) };
            let erf = erf8(_mm256_mul_ps(
                v,
                _mm256_set1_ps(std::f32::consts::FRAC_1_SQRT_2),
            ));
            let cdf = _mm256_mul_ps(_mm256_set1_ps(0.5), _mm256_add_ps(_mm256_set1_ps(1.0), erf));
            let e = exp8(_mm256_mul_ps(_mm256_set1_ps(-0.5), _mm256_mul_ps(v, v)));
            let pdf = _mm256_mul_ps(_mm256_set1_ps(super::INV_SQRT_2PI), e);
            // SAFETY: `d` holds `n ≥ i + 8` floats.
            let di = unsafe { _mm256_loadu_ps(d.as_ptr().add(i)) };
            let r = _mm256_mul_ps(di, _mm256_fmadd_ps(v, pdf, cdf));
            // SAFETY: as above.
            unsafe { _mm256_storeu_ps(d.as_mut_ptr().add(i), r) };
            i += 8;
        }
        for j in i..n {
            d[j] *= super::gelu_grad::<true>(x[j]);
        }
    }

    /// `v = gelu(v + bias)` (equal lengths).
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn bias_gelu_in_place(v: &mut [f32], bias: &[f32]) {
        let n = v.len().min(bias.len());
        let p = v.as_mut_ptr();
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: `v` and `bias` hold `n ≥ i + 8` floats.
            let x = unsafe {
                _mm256_add_ps(
                    _mm256_loadu_ps(p.add(i)),
                    _mm256_loadu_ps(bias.as_ptr().add(i)),
                )
            };
            // SAFETY: as above.
            unsafe { _mm256_storeu_ps(p.add(i), gelu8(x)) };
            i += 8;
        }
        for j in i..n {
            v[j] = super::act::<true>(v[j] + bias[j], super::Activation::Gelu);
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn hmax(v: __m256) -> f32 {
        let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
        _mm_cvtss_f32(m)
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
        _mm_cvtss_f32(s)
    }

    /// Softmax of one row in place.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn softmax_row(row: &mut [f32]) {
        let n = row.len();
        let ptr = row.as_ptr();
        let mut mv = _mm256_set1_ps(f32::NEG_INFINITY);
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: `row` holds `n ≥ i + 8` floats.
            mv = _mm256_max_ps(mv, unsafe { _mm256_loadu_ps(ptr.add(i)) });
            i += 8;
        }
        let mut max = hmax(mv);
        for &x in &row[i..] {
            max = max.max(x);
        }
        let m = _mm256_set1_ps(max);
        let mut sv = _mm256_setzero_ps();
        let ptr = row.as_mut_ptr();
        i = 0;
        while i + 8 <= n {
            // SAFETY: `row` holds `n ≥ i + 8` floats.
            let e = exp8(_mm256_sub_ps(unsafe { _mm256_loadu_ps(ptr.add(i)) }, m));
            // SAFETY: as above.
            unsafe { _mm256_storeu_ps(ptr.add(i), e) };
            sv = _mm256_add_ps(sv, e);
            i += 8;
        }
        let mut sum = hsum(sv);
        for x in &mut row[i..] {
            *x = super::exp::<true>(*x - max);
            sum += *x;
        }
        let inv = 1.0 / sum;
        let iv = _mm256_set1_ps(inv);
        let ptr = row.as_mut_ptr();
        i = 0;
        while i + 8 <= n {
            // SAFETY: `row` holds `n ≥ i + 8` floats.
            unsafe { _mm256_storeu_ps(ptr.add(i), _mm256_mul_ps(_mm256_loadu_ps(ptr.add(i)), iv)) };
            i += 8;
        }
        for x in &mut row[i..] {
            *x *= inv;
        }
    }
}

/// An entry point: the AVX2 + FMA build (`$imp::<true>` inlined into a function compiled
/// for them) when [`features`] hands out the token, the baseline build otherwise.
macro_rules! dispatch {
    ($(#[$m:meta])* pub fn $name:ident / $avx:ident => $imp:ident ( $($arg:ident : $ty:ty),* );) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        fn $avx(_: Avx2Fma, $($arg: $ty),*) {
            $imp::<true>($($arg),*)
        }
        $(#[$m])*
        pub fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            if let Some(token) = avx2_fma() {
                // SAFETY: the token proves AVX2 and FMA.
                return unsafe { $avx(token, $($arg),*) };
            }
            $imp::<false>($($arg),*)
        }
    };
}

/// The token of the AVX2 + FMA build, when this CPU has them.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn avx2_fma() -> Option<Avx2Fma> {
    features().avx2_fma()
}

dispatch! {
    /// LayerNorm of one row in place.
    pub fn layer_norm_in_place / layer_norm_avx2 => norm_impl(v: &mut [f32], w: &[f32], b: &[f32], eps: f32);
}
dispatch! {
    /// `v += b` for one row.
    pub fn add_in_place / add_avx2 => add_impl(v: &mut [f32], b: &[f32]);
}
dispatch! {
    /// `v = act(v + bias)` for one row.
    pub fn bias_act_in_place / bias_act_avx2 => bias_act_impl(v: &mut [f32], bias: &[f32], kind: Activation);
}
dispatch! {
    /// Softmax of one row in place.
    pub fn softmax_row / softmax_avx2 => softmax_impl(row: &mut [f32]);
}
dispatch! {
    /// The backward pass of a softmax row in place: `d ← p ⊙ (d − Σ d·p)`.
    pub fn softmax_backward_row / softmax_backward_avx2 => softmax_backward_impl(d: &mut [f32], p: &[f32]);
}
dispatch! {
    /// `y = gelu(x)` (exact GELU, erf approximated as above).
    pub fn gelu_into / gelu_into_avx2 => gelu_into_impl(x: &[f32], y: &mut [f32]);
}
dispatch! {
    /// `d ← d · gelu'(x)`.
    pub fn gelu_grad_in_place / gelu_grad_avx2 => gelu_grad_impl(x: &[f32], d: &mut [f32]);
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_kernels_match_the_scalar_ones() {
        if super::avx2_fma().is_none() {
            crate::kernels::testing::skip(
                "kernels::rows::tests::avx2_kernels_match_the_scalar_ones",
                "CPU has no AVX2 and FMA",
            );
            return;
        }
        let xs: Vec<f32> = (0..1003).map(|i| (i as f32 - 500.0) / 37.0).collect();
        let bias = vec![0.25f32; xs.len()];
        let (mut simd, mut scalar) = (xs.clone(), xs.clone());
        // SAFETY: the token above proves AVX2 and FMA.
        unsafe { super::avx2::bias_gelu_in_place(&mut simd, &bias) };
        super::bias_act_impl::<false>(&mut scalar, &bias, super::Activation::Gelu);
        for (a, b) in simd.iter().zip(&scalar) {
            assert!((a - b).abs() <= 1e-6 * (1.0 + b.abs()), "gelu {a} vs {b}");
        }
        let g: Vec<f32> = xs.iter().map(|x| 1.0 - x * 0.01).collect();
        let (mut y1, mut y2) = (vec![0f32; xs.len()], vec![0f32; xs.len()]);
        super::gelu_into_impl::<true>(&xs, &mut y1);
        super::gelu_into_impl::<false>(&xs, &mut y2);
        let (mut d1, mut d2) = (g.clone(), g.clone());
        super::gelu_grad_impl::<true>(&xs, &mut d1);
        super::gelu_grad_impl::<false>(&xs, &mut d2);
        for i in 0..xs.len() {
            assert!(
                (y1[i] - y2[i]).abs() <= 1e-6 * (1.0 + y2[i].abs()),
                "gelu at {}",
                xs[i]
            );
            assert!(
                (d1[i] - d2[i]).abs() <= 1e-6 * (1.0 + d2[i].abs()),
                "gelu' at {}",
                xs[i]
            );
        }
        for n in [1usize, 15, 16, 17, 100, 257] {
            let p: Vec<f32> = (0..n).map(|i| 1.0 / (1.0 + i as f32)).collect();
            let d: Vec<f32> = xs[..n].to_vec();
            let s: f64 = p.iter().zip(&d).map(|(p, d)| (p * d) as f64).sum();
            let (mut d1, mut d2) = (d.clone(), d.clone());
            super::softmax_backward_impl::<true>(&mut d1, &p);
            super::softmax_backward_impl::<false>(&mut d2, &p);
            for i in 0..n {
                let want = p[i] as f64 * (d[i] as f64 - s);
                for got in [d1[i], d2[i]] {
                    assert!(
                        (got as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                        "softmax' {got} vs {want}"
                    );
                }
            }
        }
        for n in [1usize, 7, 8, 9, 100, 257] {
            let mut a: Vec<f32> = xs[..n].iter().map(|x| x * 0.3).collect();
            // Masked entries (additive −1e9) get exactly 0.
            for i in (1..n).step_by(3) {
                a[i] -= 1e9;
            }
            let mut b = a.clone();
            super::softmax_impl::<true>(&mut a);
            super::softmax_impl::<false>(&mut b);
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                assert!((x - y).abs() <= 1e-6, "softmax {x} vs {y}");
                if i % 3 == 1 {
                    assert!(*x == 0.0 && *y == 0.0, "masked {x}, {y}");
                }
            }
        }
    }

    /// LayerNorm: the dispatched entry (the AVX2 + FMA build on a CPU that has them), the
    /// baseline build and a float64 reference agree, at lengths around the 8-lane chunks.
    #[test]
    fn layer_norm_builds_match_a_float64_reference() {
        if super::avx2_fma().is_none() {
            crate::kernels::testing::skip(
                "kernels::rows::tests::layer_norm_builds_match_a_float64_reference (AVX2 build)",
                "CPU has no AVX2 and FMA: the baseline build is checked alone",
            );
        }
        for (n, eps) in [
            (1usize, 1e-12f32),
            (7, 1e-12),
            (8, 0.5),
            (9, 1e-12),
            (100, 0.5),
            (384, 1e-12),
            (385, 1e-12),
        ] {
            let v: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0 + 3.0)
                .collect();
            let w: Vec<f32> = (0..n).map(|i| 0.5 + (i % 5) as f32 * 0.25).collect();
            let b: Vec<f32> = (0..n).map(|i| (i % 3) as f32 * 0.1 - 0.1).collect();
            let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
            let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n as f64;
            let want: Vec<f64> = (0..n)
                .map(|i| {
                    (v[i] as f64 - mean) / (var + eps as f64).sqrt() * w[i] as f64 + b[i] as f64
                })
                .collect();
            let (mut dispatched, mut scalar) = (v.clone(), v.clone());
            super::layer_norm_in_place(&mut dispatched, &w, &b, eps);
            super::norm_impl::<false>(&mut scalar, &w, &b, eps);
            for i in 0..n {
                for (build, got) in [("dispatched", dispatched[i]), ("scalar", scalar[i])] {
                    assert!(
                        (got as f64 - want[i]).abs() <= 1e-5 * (1.0 + want[i].abs()),
                        "layer norm ({build}, n = {n}) at {i}: {got} vs {}",
                        want[i]
                    );
                }
            }
        }
    }

    #[test]
    fn exp_and_erf_are_accurate() {
        // Far below the smallest normal result: exactly 0 (a masked key's weight).
        for x in [-87.4f32, -1e3, -1e9, f32::NEG_INFINITY] {
            assert_eq!(super::exp::<false>(x), 0.0, "exp({x})");
            assert_eq!(super::exp::<true>(x), 0.0, "exp({x})");
        }
        for i in -2000..=2000 {
            let x = i as f32 / 50.0;
            let e = super::exp::<false>(x);
            let want = (x as f64).exp();
            assert!(
                ((e as f64 - want) / want).abs() < 5e-7,
                "exp({x}) = {e}, want {want}"
            );
            let g = super::erf::<false>(x);
            let want = statrs::function::erf::erf(x as f64);
            assert!(
                (g as f64 - want).abs() < 3e-7,
                "erf({x}) = {g}, want {want}"
            );
        }
    }
}
