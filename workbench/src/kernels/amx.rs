//! Quantised weights times many activation rows with Intel AMX (bf16 tiles): the matrix
//! products of prefill.
//!
//! Each weight matrix is dequantised once, at the first prompt that needs it (the model's
//! warm-up at load, `read::generative::Llm::warm_up`), and stored
//! as bf16 (two bytes per weight) in the layout AMX reads its second operand in: per 16
//! output columns and 32 values of `k`, a 1 KB tile of 16 lines, line `i` holding values
//! `2i` and `2i + 1` of each of the 16 columns. The activation rows are rounded to bf16
//! (to nearest, ties to even) into 1 KB tiles of 16 rows × 32 values. `tdpbf16ps` adds
//! the products of a 16 × 32 activation tile and a 32 × 16 weight tile into a 16 × 16 f32
//! tile; four such accumulators (2 × 2 tiles: 32 rows × 32 columns) stay in tile
//! registers over `k` and are stored straight into the output.
//!
//! What this changes in the arithmetic: the weights are the GGUF file's values rounded to
//! bf16 (8 significant bits, relative error ≤ 2⁻⁹), and the activations are rounded to
//! bf16 instead of being quantised to int8 per 256 values as llama.cpp's CPU kernels do.
//! Sums are f32. Each output row depends only on its own activation row, with the same
//! operations in the same order whatever the number of rows.
//!
//! `k` is taken in groups small enough for a group of every row's activations to stay in
//! a core's L2 cache while all the weight tiles pass; between groups the accumulators go
//! through the output (an exact f32 store and load).
//!
//! AMX tile registers are shared with candle's own AMX kernel on the same threads: the
//! thread's tile configuration is saved on entry and put back on exit.

use super::cpu::{features, switched_off, AmxBf16, Avx512, Avx512BwF16c};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

/// Rows (of activations) and columns (of outputs) per tile.
const TILE: usize = 16;
/// Values of `k` per tile: 16 lines of 64 bytes hold 32 bf16 per row.
const CHUNK: usize = 32;
/// bf16 values per tile (1 KB).
const TILE_VALUES: usize = TILE * CHUNK;

/// One 64-byte tile line (32 bf16), aligned to a cache line: tile loads of lines that
/// straddle two cache lines ran at a third of the speed (measured: 1.4 vs 0.48 T
/// multiply-adds/s per core from L1).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u16; CHUNK]);

const ZERO_LINE: Line = Line([0; CHUNK]);

/// Whether this CPU runs the kernel (x86-64 with AMX-BF16 and AVX-512 F, and the kernel
/// lets the process use AMX tile data), and `WORKBENCH_LLM_NO_AMX` is unset (it restores
/// candle's kernels, for comparisons).
pub(crate) fn available() -> bool {
    tokens().is_some()
}

/// The capability tokens the kernel runs with, when [`available`].
fn tokens() -> Option<(Avx512BwF16c, AmxBf16)> {
    static TOKENS: std::sync::OnceLock<Option<(Avx512BwF16c, AmxBf16)>> =
        std::sync::OnceLock::new();
    *TOKENS.get_or_init(|| {
        if switched_off("WORKBENCH_LLM_NO_AMX") {
            return None;
        }
        let f = features();
        Some((f.avx512bw_f16c()?, f.amx_bf16()?))
    })
}

/// Whether weights of this type are multiplied here: the k-quants and Q8_0. The older
/// 4- and 5-bit types (Q4_0, Q4_1, Q5_0, Q5_1) stay with candle's kernels, whose int8
/// activations follow llama.cpp's: with them on bf16 tiles, SmolLM2-135M's greedy
/// continuations agreed with llama.cpp's on the first 16 tokens for 4 of 11 prompts
/// instead of 6 (`tests/llm_reference.rs`, all departures at margins under 0.4 nat).
pub(crate) fn handles(dtype: GgmlDType) -> bool {
    matches!(
        dtype,
        GgmlDType::Q2K
            | GgmlDType::Q3K
            | GgmlDType::Q4K
            | GgmlDType::Q5K
            | GgmlDType::Q6K
            | GgmlDType::Q8_0
    )
}

/// A weight matrix `[n, k]` as bf16 tiles for [`matmul`].
pub(crate) struct Packed {
    n: usize,
    k: usize,
    /// Per (tile of 16 columns, chunk of 32 values): 16 lines of bf16 bits, line `i` =
    /// (column 0: values `2i`, `2i + 1`), (column 1: …), ….
    w: Vec<Line>,
}

/// `v` rounded to bf16 (to nearest, ties to even), as bits.
fn bf16_bits(v: f32) -> u16 {
    half::bf16::from_f32(v).to_bits()
}

/// Packs `w` for [`matmul`]; `None` when its type is not [`handles`]d or its shape does
/// not tile (rows a multiple of 16, columns of 32).
pub(crate) fn pack(w: &QTensor) -> candle_core::Result<Option<Packed>> {
    let (n, k) = w.shape().dims2()?;
    if !handles(w.dtype()) || n == 0 || !n.is_multiple_of(TILE) || !k.is_multiple_of(CHUNK) {
        return Ok(None);
    }
    let f = w
        .dequantize(&Device::Cpu)?
        .flatten_all()?
        .to_vec1::<f32>()?;
    let chunks = k / CHUNK;
    let mut packed = vec![ZERO_LINE; n * k / CHUNK];
    let at = packed.as_mut_ptr() as usize;
    candle_core::utils::barrier_pool().execute_chunked(n / TILE, |tiles| {
        for t in tiles {
            // SAFETY: column tile `t` owns values `[t·chunks·TILE_VALUES,
            // (t + 1)·chunks·TILE_VALUES)` of `packed`; no other unit writes them.
            let dst = unsafe {
                std::slice::from_raw_parts_mut(
                    (at as *mut u16).add(t * chunks * TILE_VALUES),
                    chunks * TILE_VALUES,
                )
            };
            for (c, tile) in dst.chunks_exact_mut(TILE_VALUES).enumerate() {
                for j in 0..TILE {
                    let row = &f[(t * TILE + j) * k + c * CHUNK..][..CHUNK];
                    for (i, &v) in row.iter().enumerate() {
                        tile[(i / 2) * 2 * TILE + 2 * j + i % 2] = bf16_bits(v);
                    }
                }
            }
        }
    });
    Ok(Some(Packed { n, k, w: packed }))
}

/// Activation bytes a group of `k` may take, so that it stays in a core's L2 cache (2 MB
/// on the Xeons measured) while every weight tile is multiplied by it: 1.5 MB measured a
/// few per cent faster than 1 MB and 2 MB.
const GROUP_BYTES: usize = 3 << 19;

/// `x · Wᵀ` for `x: [rows, k]` (row-major) and the packed `w: [n, k]`, as `[rows, n]`.
/// Needs [`available`].
pub(crate) fn matmul(w: &Packed, x: &[f32]) -> candle_core::Result<Tensor> {
    let (n, k) = (w.n, w.k);
    let Some((avx512, amx)) = tokens() else {
        candle_core::bail!("amx matmul: this CPU does not run the kernel");
    };
    if x.is_empty() || !x.len().is_multiple_of(k) {
        candle_core::bail!("amx matmul: {} inputs for rows of {k}", x.len());
    }
    let rows = x.len() / k;
    // Rows in pairs of tiles; the padding rows are zeros.
    let padded = rows.div_ceil(2 * TILE) * 2 * TILE;
    let chunks = k / CHUNK;
    thread_local! {
        // Reused across calls: fresh memory costs page faults.
        static SPARE: std::cell::Cell<Vec<Line>> = const { std::cell::Cell::new(Vec::new()) };
    }
    let mut a = SPARE.take();
    a.resize(padded * chunks, ZERO_LINE);
    let at = a.as_mut_ptr() as usize;
    candle_core::utils::barrier_pool().execute_chunked(padded, |ms| {
        for m in ms {
            // SAFETY: row `m` writes only its own 64-byte lines of `a`, which holds the
            // `padded` rows' lines.
            unsafe { kernel::convert(avx512.avx512(), x, rows, k, m, at as *mut u16) }
        }
    });
    // The output starts on a cache line (the accumulators are stored and loaded 64 bytes
    // a line); `skip` floats before it are unused.
    let mut dst: Vec<f32> = Vec::with_capacity(padded * n + LINE_FLOATS);
    let skip = dst.as_ptr().align_offset(64).min(LINE_FLOATS);
    // SAFETY: `skip < LINE_FLOATS` floats from the start stay inside the allocation.
    let out = unsafe { dst.as_mut_ptr().add(skip) } as usize;
    let group = (GROUP_BYTES / (padded * CHUNK * 2)).clamp(1, chunks);
    let mut c0 = 0;
    while c0 < chunks {
        let part = c0..(c0 + group).min(chunks);
        let a = &a;
        candle_core::utils::barrier_pool().execute_chunked(n / TILE, |tiles| {
            // SAFETY: `dst` has room for `padded` rows, columns of tiles `tiles` are
            // written by this unit only, and the groups run one after the other, the first
            // storing every value; `a` holds the `padded` rows from `convert`.
            unsafe {
                kernel::columns(
                    amx,
                    w,
                    a.as_ptr() as *const u16,
                    padded,
                    tiles,
                    part.clone(),
                    out as *mut f32,
                )
            }
        });
        c0 = part.end;
    }
    SPARE.set(a);
    // The unused floats before the output, then the output: the first group stored every
    // (row, column).
    dst.resize(skip, 0.0);
    // SAFETY: floats `skip..skip + rows · n` were written above.
    unsafe { dst.set_len(skip + rows * n) };
    Tensor::from_vec(dst, skip + rows * n, &Device::Cpu)?
        .narrow(0, skip, rows * n)?
        .reshape((rows, n))
}

/// f32 values per cache line.
const LINE_FLOATS: usize = 16;

#[cfg(target_arch = "x86_64")]
mod kernel {
    use super::{AmxBf16, Avx512, Packed, CHUNK, TILE, TILE_VALUES};
    use std::arch::x86_64::*;

    use crate::kernels::tiles;

    /// Where value `c·32` of row `m` goes: per pair of row tiles, chunk by chunk, the
    /// pair's two tiles one after the other.
    pub(super) fn line(m: usize, c: usize, chunks: usize) -> usize {
        let (pair, r, i) = (m / (2 * TILE), (m / TILE) % 2, m % TILE);
        ((pair * chunks + c) * 2 + r) * TILE_VALUES + i * CHUNK
    }

    /// Row `m` of `x: [rows, k]` rounded to bf16 into its tile lines of `a` (zeros for a
    /// padding row, `m ≥ rows`).
    ///
    /// # Safety
    /// `a` holds the padded rows' lines (the token proves AVX-512 F).
    pub(super) unsafe fn convert(
        _: Avx512,
        x: &[f32],
        rows: usize,
        k: usize,
        m: usize,
        a: *mut u16,
    ) {
        // SAFETY: the token proves AVX-512 F; the caller's promise about `a` is
        // `convert_avx512`'s.
        unsafe { convert_avx512(x, rows, k, m, a) }
    }

    /// [`convert`] on AVX-512 F.
    ///
    /// # Safety
    /// AVX-512 F present; `a` holds the padded rows' lines.
    #[target_feature(enable = "avx512f")]
    unsafe fn convert_avx512(x: &[f32], rows: usize, k: usize, m: usize, a: *mut u16) {
        let chunks = k / CHUNK;
        for c in 0..chunks {
            // SAFETY: row `m`'s line of chunk `c` is inside `a` (the caller's promise).
            let dst = unsafe { a.add(line(m, c, chunks)) };
            if m >= rows {
                // SAFETY: the line holds CHUNK values.
                unsafe { std::ptr::write_bytes(dst, 0, CHUNK) };
                continue;
            }
            let src = x[m * k + c * CHUNK..][..CHUNK].as_ptr();
            for h in 0..2 {
                // Round to nearest, ties to even: add 0x7fff plus the kept part's lowest
                // bit, keep the upper 16 bits.
                // SAFETY: `src` holds CHUNK = 32 floats, 16 from `16 · h`.
                let u = _mm512_castps_si512(unsafe { _mm512_loadu_ps(src.add(16 * h)) });
                let odd = _mm512_and_si512(_mm512_srli_epi32::<16>(u), _mm512_set1_epi32(1));
                let r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd));
                let v = _mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(r));
                // SAFETY: the line holds CHUNK = 32 values, 16 from `16 · h`.
                unsafe { _mm256_storeu_si256(dst.add(16 * h) as *mut __m256i, v) };
            }
        }
    }

    /// Columns `16t..16t + 16` of `dst` for the tiles `t` in `tiles`, summed over the
    /// chunks `part` of `k`: stored when `part` starts at 0, else added to what `dst`
    /// holds.
    ///
    /// # Safety
    /// `a` holds `padded` rows from [`convert`]; `dst` holds `padded · w.n` floats, the
    /// columns of these tiles written by this call only (the token proves AMX-BF16 and the
    /// tile-data permission).
    pub(super) unsafe fn columns(
        amx: AmxBf16,
        w: &Packed,
        a: *const u16,
        padded: usize,
        tiles: std::ops::Range<usize>,
        part: std::ops::Range<usize>,
        dst: *mut f32,
    ) {
        let chunks = w.k / CHUNK;
        let stride = w.n * 4;
        let first = part.start == 0;
        // Tiles 0–3: f32 accumulators; 4–5: activation tiles; 6–7: weight tiles.
        // SAFETY: restored below, before this function returns.
        let saved = unsafe { tiles::configure(amx.into()) };
        // SAFETY: the token proves AMX-BF16 with tile data, and the tiles are configured
        // as 16 lines of 64 bytes; every tile load and store stays inside its buffer: the
        // weight tiles `t`, `t + 1` of chunk `c` inside `w.w` (`t < tiles.end ≤ w.n / 16`,
        // `c < chunks`), the activation tiles of pair `pair` inside `a` (the caller's
        // `padded` rows), the accumulators' 16 rows × 16 floats inside `dst` (rows of
        // `pair < padded / 32`, columns of tiles `t`, `t + 1`: the caller's promise).
        unsafe {
            let mut t = tiles.start;
            while t < tiles.end {
                // Two column tiles at a time; a lone last one is multiplied twice and stored
                // once.
                let two = t + 1 < tiles.end;
                let b0 = (w.w.as_ptr() as *const u16).add(t * chunks * TILE_VALUES);
                let b1 = if two {
                    b0.add(chunks * TILE_VALUES)
                } else {
                    b0
                };
                for pair in 0..padded / (2 * TILE) {
                    let c00 = dst.add(2 * pair * TILE * w.n + t * TILE);
                    let c10 = c00.add(TILE * w.n);
                    let (c01, c11) = if two {
                        (c00.add(TILE), c10.add(TILE))
                    } else {
                        (c00, c10)
                    };
                    if first {
                        core::arch::asm!(
                            "tilezero tmm0",
                            "tilezero tmm1",
                            "tilezero tmm2",
                            "tilezero tmm3",
                            options(nostack, nomem)
                        );
                    } else {
                        core::arch::asm!(
                            "tileloadd tmm0, [{c00} + {s}*1]",
                            "tileloadd tmm1, [{c01} + {s}*1]",
                            "tileloadd tmm2, [{c10} + {s}*1]",
                            "tileloadd tmm3, [{c11} + {s}*1]",
                            c00 = in(reg) c00,
                            c01 = in(reg) c01,
                            c10 = in(reg) c10,
                            c11 = in(reg) c11,
                            s = in(reg) stride,
                            options(nostack, readonly)
                        );
                    }
                    for c in part.clone() {
                        let a0 = a.add(((pair * chunks + c) * 2) * TILE_VALUES);
                        core::arch::asm!(
                            "tileloadd tmm4, [{a0} + {s}*1]",
                            "tileloadd tmm6, [{b0} + {s}*1]",
                            "tdpbf16ps tmm0, tmm4, tmm6",
                            "tileloadd tmm7, [{b1} + {s}*1]",
                            "tdpbf16ps tmm1, tmm4, tmm7",
                            "tileloadd tmm5, [{a1} + {s}*1]",
                            "tdpbf16ps tmm2, tmm5, tmm6",
                            "tdpbf16ps tmm3, tmm5, tmm7",
                            a0 = in(reg) a0,
                            a1 = in(reg) a0.add(TILE_VALUES),
                            b0 = in(reg) b0.add(c * TILE_VALUES),
                            b1 = in(reg) b1.add(c * TILE_VALUES),
                            s = in(reg) 64usize,
                            options(nostack, readonly)
                        );
                    }
                    core::arch::asm!(
                        "tilestored [{c00} + {s}*1], tmm0",
                        "tilestored [{c10} + {s}*1], tmm2",
                        c00 = in(reg) c00,
                        c10 = in(reg) c10,
                        s = in(reg) stride,
                        options(nostack)
                    );
                    if two {
                        core::arch::asm!(
                            "tilestored [{c01} + {s}*1], tmm1",
                            "tilestored [{c11} + {s}*1], tmm3",
                            c01 = in(reg) c01,
                            c11 = in(reg) c11,
                            s = in(reg) stride,
                            options(nostack)
                        );
                    }
                }
                t += 2;
            }
        }
        // SAFETY: the tile data of this function is not used after this point.
        unsafe { tiles::restore(amx.into(), &saved) };
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod kernel {
    use super::{AmxBf16, Avx512, Packed};

    pub(super) unsafe fn convert(
        _: Avx512,
        _x: &[f32],
        _rows: usize,
        _k: usize,
        _m: usize,
        _a: *mut u16,
    ) {
        unreachable!("amx::available() is false off x86-64")
    }

    pub(super) unsafe fn columns(
        _: AmxBf16,
        _w: &Packed,
        _a: *const u16,
        _padded: usize,
        _t: std::ops::Range<usize>,
        _p: std::ops::Range<usize>,
        _d: *mut f32,
    ) {
        unreachable!("amx::available() is false off x86-64")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::QMatMul;
    use candle_core::Module;

    fn quantized(dtype: GgmlDType, n: usize, k: usize, seed: u64) -> QTensor {
        let w = Tensor::from_vec(
            crate::kernels::testing::test_values(n * k, seed),
            (n, k),
            &Device::Cpu,
        )
        .unwrap();
        QTensor::quantize(&w, dtype).unwrap()
    }

    fn flat(t: Tensor) -> Vec<f32> {
        t.flatten_all().unwrap().to_vec1().unwrap()
    }

    fn bf16(v: f32) -> f64 {
        half::bf16::from_bits(bf16_bits(v)).to_f64()
    }

    /// Skips (with its line) when this CPU does not run the kernel.
    fn runs(test: &str) -> Option<(Avx512BwF16c, AmxBf16)> {
        let t = tokens();
        if t.is_none() {
            crate::kernels::testing::skip(
                test,
                "CPU has no AMX-BF16 with tile data (or WORKBENCH_LLM_NO_AMX is set)",
            );
        }
        t
    }

    #[test]
    fn rounds_to_nearest_even_as_the_half_crate() {
        let Some((avx512, _)) =
            runs("kernels::amx::tests::rounds_to_nearest_even_as_the_half_crate")
        else {
            return;
        };
        let k = 64;
        let mut x = crate::kernels::testing::test_values(3 * k, 4);
        // Exact ties (1 + 2⁻⁸ and 1 + 3·2⁻⁸ lie halfway), a value just above a tie, tiny
        // and large magnitudes.
        let ulp8 = 2f32.powi(-8);
        let above = -(1.0 + ulp8 + f32::EPSILON);
        x[..6].copy_from_slice(&[1.0 + ulp8, 1.0 + 3.0 * ulp8, above, 1e-30, -3e38, 0.0]);
        let mut lines = vec![ZERO_LINE; 2 * TILE * k / CHUNK];
        for m in 0..2 * TILE {
            // SAFETY: `lines` holds the lines of 2 × TILE padded rows of k values.
            unsafe {
                kernel::convert(avx512.avx512(), &x, 3, k, m, lines.as_mut_ptr() as *mut u16)
            };
        }
        let a: Vec<u16> = lines.iter().flat_map(|l| l.0).collect();
        for m in 0..2 * TILE {
            for i in 0..k {
                let got = a[kernel::line(m, i / CHUNK, k / CHUNK) + i % CHUNK];
                let want = if m < 3 { bf16_bits(x[m * k + i]) } else { 0 };
                assert_eq!(got, want, "row {m} value {i}");
            }
        }
        assert_eq!(&a[..2], &[0x3f80, 0x3f82]);
    }

    #[test]
    fn matches_the_bf16_product_and_candle() {
        if runs("kernels::amx::tests::matches_the_bf16_product_and_candle").is_none() {
            return;
        }
        // The last case multiplies in two groups of `k` (see GROUP_BYTES); 48 columns end
        // with a lone tile.
        let cases = [
            (1, 48, 768),
            (17, 48, 768),
            (40, 32, 768),
            (40, 16, 65 * 256),
        ];
        for dtype in [GgmlDType::Q4K, GgmlDType::Q6K, GgmlDType::Q8_0] {
            for (rows, n, k) in cases {
                let w = quantized(dtype, n, k, 11);
                let x = crate::kernels::testing::test_values(rows * k, 5 + rows as u64);
                let y = flat(matmul(&pack(&w).unwrap().unwrap(), &x).unwrap());
                let f = w
                    .dequantize(&Device::Cpu)
                    .unwrap()
                    .to_vec2::<f32>()
                    .unwrap();
                let candle = QMatMul::from_qtensor(w)
                    .unwrap()
                    .forward(&Tensor::from_vec(x.clone(), (rows, k), &Device::Cpu).unwrap())
                    .unwrap()
                    .to_vec2::<f32>()
                    .unwrap();
                for m in 0..rows {
                    for (j, wj) in f.iter().enumerate() {
                        // What the kernel computes, in f64: bf16 inputs, exact products.
                        let (mut want, mut size) = (0f64, 0f64);
                        for (i, &v) in wj.iter().enumerate() {
                            let p = bf16(x[m * k + i]) * bf16(v);
                            want += p;
                            size += p.abs();
                        }
                        let got = y[m * n + j] as f64;
                        assert!(
                            (got - want).abs() <= 1e-5 * size,
                            "{dtype:?} {rows}×{n}×{k} ({m}, {j}): {got} vs {want}"
                        );
                        // candle quantises the activations to int8: a coarser product.
                        let c = candle[m][j] as f64;
                        assert!(
                            (got - c).abs() <= 2e-2 * size,
                            "{dtype:?} ({m}, {j}): {got} vs candle {c}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn each_row_is_the_same_alone_or_among_others() {
        if runs("kernels::amx::tests::each_row_is_the_same_alone_or_among_others").is_none() {
            return;
        }
        let (n, k) = (48, 40 * 256);
        let w = pack(&quantized(GgmlDType::Q6K, n, k, 2)).unwrap().unwrap();
        let x = crate::kernels::testing::test_values(35 * k, 9);
        // 35 rows take several groups of `k`, one row takes one.
        let all = flat(matmul(&w, &x).unwrap());
        for r in [0, 16, 31, 32, 34] {
            let one = flat(matmul(&w, &x[r * k..(r + 1) * k]).unwrap());
            assert_eq!(one, all[r * n..(r + 1) * n], "row {r}");
        }
    }

    #[test]
    fn other_types_and_shapes_are_declined() {
        let f32s = Tensor::from_vec(
            crate::kernels::testing::test_values(32 * 256, 1),
            (32, 256),
            &Device::Cpu,
        )
        .unwrap();
        assert!(pack(&QTensor::quantize(&f32s, GgmlDType::F32).unwrap())
            .unwrap()
            .is_none());
        assert!(pack(&quantized(GgmlDType::Q4K, 24, 256, 1))
            .unwrap()
            .is_none());
        let w = pack(&quantized(GgmlDType::Q4K, 16, 256, 1))
            .unwrap()
            .unwrap();
        assert!(matmul(&w, &[0.0; 100]).is_err());
    }
}
