//! Q4_K and Q6_K weights times many activation rows with Intel AMX: the matrix products
//! of prefill.
//!
//! Within a 256-value block, value `i` of a Q4_K or Q6_K row is `d · scale(i) · q(i)`
//! plus a per-sub-block offset (Q4_K: `−dmin · min(i / 32)`; Q6_K: `−32 · d · scale(i / 16)`),
//! with `q` a 4- or 6-bit code and `scale` a 6-bit (Q4_K) or signed 8-bit (Q6_K) sub-block
//! scale. The integer `p = scale · q` needs up to 14 bits, so each weight is packed once as
//! two bytes, `p = 128 · h + l` with `h` signed and `l` in `0..128`, in the layout AMX
//! reads its second operand in. Activations are quantised to Q8_K as ggml and candle do
//! (per 256 values: a scale `d_a`, 256 int8 and 16 sums of 16). Per block, two AMX
//! products over all 256 values give the exact integer `Σ p · a = 128 · Σ h · a + Σ l · a`
//! for a 16 × 16 tile of outputs, and one f32 step adds `d_a · d · Σ p · a` to the output;
//! a second f32 pass adds the offsets' part, `Σ_j d_a · bsum_j · offset_j`. Activations are
//! taken in groups of blocks small enough to stay in L2 while every weight tile passes, and
//! each weight tile's outputs are summed in a contiguous buffer before one strided write.
//!
//! candle's AMX kernel multiplies the 4-bit codes and scales every 32 values in f32 (eight
//! times per block), and quantises activations with a scalar loop; here the scaling is
//! once per block and the quantisation is vectorised. Each output row depends only on its
//! own activation row, with the same operations in the same order whatever the number of
//! rows.
//!
//! AMX tile registers are shared with candle's own AMX kernel on the same threads: the
//! thread's tile configuration is saved on entry and put back on exit.

use candle_core::quantized::{GgmlDType, QTensor};

/// Values per block.
const QK: usize = 256;
/// Weight rows (and activation rows) per tile.
const TILE: usize = 16;
/// Packed bytes per (16-row tile, block): `h` then `l`, each 4 chunks of 16 × 64 bytes.
const TILE_BYTES: usize = 2 * QK * TILE;
const Q4K_BYTES: usize = 144;
const Q6K_BYTES: usize = 210;

/// Whether this CPU runs the kernel (x86-64 with AMX-INT8, AVX-512 F/BW and F16C, and
/// the kernel lets the process use AMX tile data), and `WORKBENCH_LLM_NO_AMX` is unset
/// (it restores candle's kernels, for comparisons).
pub(crate) fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| !super::switched_off("WORKBENCH_LLM_NO_AMX") && cpu_runs_amx())
}

fn cpu_runs_amx() -> bool {
    super::cpu_has_avx512bw_f16c() && crate::machine::ceiling::amx_int8_usable()
}

/// A Q4_K or Q6_K matrix `[n, k]` packed for [`matmul`].
pub(crate) struct Packed {
    n: usize,
    k: usize,
    /// Offsets per block: 8 (Q4_K, one per 32 values) or 16 (Q6_K, one per 16).
    j: usize,
    /// Per (tile of 16 rows, block), [`TILE_BYTES`]: `h` then `l`, each as 4 chunks of 64
    /// values, a chunk as 16 lines of (16 rows × 4 consecutive values).
    hl: Vec<u8>,
    /// Per (tile, block): `d` of the 16 rows.
    d: Vec<f32>,
    /// Per tile, `[k / 256 · j, 16]`: the 16 rows' offsets, block by block.
    off: Vec<f32>,
}

/// One block of a row as `(p = scale · q, d, offsets)`.
fn decode_block(dtype: GgmlDType, blk: &[u8], p: &mut [i16; QK], off: &mut [f32; 16]) -> f32 {
    let f16 = |i: usize| half::f16::from_le_bytes([blk[i], blk[i + 1]]).to_f32();
    if dtype == GgmlDType::Q4K {
        let (d, dmin) = (f16(0), f16(2));
        let sc = &blk[4..16];
        let qs = &blk[16..144];
        for s in 0..8 {
            // ggml's get_scale_min_k4: six-bit scale and min of sub-block `s`.
            let (scale, min) = if s < 4 {
                (sc[s] & 63, sc[s + 4] & 63)
            } else {
                (
                    (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4),
                    (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4),
                )
            };
            off[s] = -dmin * min as f32;
            for t in 0..32 {
                let i = s * 32 + t;
                let byte = qs[(i / 64) * 32 + t];
                let q = if s % 2 == 0 { byte & 0xF } else { byte >> 4 };
                p[i] = scale as i16 * q as i16;
            }
        }
        d
    } else {
        let (ql, qh) = (&blk[0..128], &blk[128..192]);
        let sc = &blk[192..208];
        let d = f16(208);
        for i in 0..QK {
            let (half, r) = (i / 128, i % 128);
            let (quarter, l) = (r / 32, r % 32);
            let low = ql[64 * half + l + 32 * (quarter % 2)];
            let low = if quarter < 2 { low & 0xF } else { low >> 4 };
            let high = (qh[32 * half + l] >> (2 * quarter)) & 3;
            let q = (low | (high << 4)) as i16;
            p[i] = sc[i / 16] as i8 as i16 * q;
        }
        for (j, o) in off.iter_mut().enumerate() {
            *o = -32.0 * d * sc[j] as i8 as f32;
        }
        d
    }
}

/// Packs `w` for [`matmul`]; `None` when it is not Q4_K or Q6_K or its shape does not
/// tile (rows a multiple of 16, columns of 256).
pub(crate) fn pack(w: &QTensor) -> candle_core::Result<Option<Packed>> {
    let (j, block_bytes) = match w.dtype() {
        GgmlDType::Q4K => (8, Q4K_BYTES),
        GgmlDType::Q6K => (16, Q6K_BYTES),
        _ => return Ok(None),
    };
    let (n, k) = w.shape().dims2()?;
    if n == 0 || k == 0 || !n.is_multiple_of(TILE) || !k.is_multiple_of(QK) {
        return Ok(None);
    }
    let data = w.data()?;
    let nb = k / QK;
    if data.len() != n * nb * block_bytes {
        candle_core::bail!(
            "amx pack: {} bytes for a {n}×{k} {:?} matrix",
            data.len(),
            w.dtype()
        );
    }
    let tiles = n / TILE;
    let mut hl = vec![0u8; tiles * nb * TILE_BYTES];
    let mut ds = vec![0f32; tiles * nb * TILE];
    let mut offs = vec![0f32; n * nb * j];
    let (hl_ptr, d_ptr, off_ptr) = (
        hl.as_mut_ptr() as usize,
        ds.as_mut_ptr() as usize,
        offs.as_mut_ptr() as usize,
    );
    let dtype = w.dtype();
    candle_core::utils::barrier_pool().execute_chunked(tiles, |range| {
        let mut p = [0i16; QK];
        let mut off = [0f32; 16];
        for t in range {
            for r in 0..TILE {
                let row = t * TILE + r;
                for b in 0..nb {
                    let at = (row * nb + b) * block_bytes;
                    let d = decode_block(dtype, &data[at..at + block_bytes], &mut p, &mut off);
                    let tb = t * nb + b;
                    // SAFETY: tile `t` owns bytes `[tb·TILE_BYTES, (tb+1)·TILE_BYTES)` of
                    // `hl`, floats `[tb·16, (tb+1)·16)` of `ds` and its part of `offs`; no
                    // other unit writes them.
                    unsafe {
                        let h = (hl_ptr as *mut u8).add(tb * TILE_BYTES);
                        for (i, &v) in p.iter().enumerate() {
                            let at = (i / 64) * 1024 + ((i % 64) / 4) * 64 + r * 4 + i % 4;
                            *h.add(at) = (v >> 7) as i8 as u8;
                            *h.add(TILE_BYTES / 2 + at) = (v & 127) as u8;
                        }
                        *(d_ptr as *mut f32).add(tb * TILE + r) = d;
                        let o = (off_ptr as *mut f32).add(((t * nb + b) * j) * TILE + r);
                        for (jj, &v) in off[..j].iter().enumerate() {
                            *o.add(jj * TILE) = v;
                        }
                    }
                }
            }
        }
    });
    Ok(Some(Packed {
        n,
        k,
        j,
        hl,
        d: ds,
        off: offs,
    }))
}

/// Activation rows quantised to Q8_K, in the layout the tile loads read: per block, per
/// tile of 16 rows (rows padded with zeros to a multiple of 32), 4 chunks of 16 × 64 bytes.
struct Acts {
    rows: usize,
    /// Tiles of 16 rows (an even number).
    tiles: usize,
    qs: Vec<i8>,
    /// `d_a` per (row, block).
    d: Vec<f32>,
    /// `[rows, k / 256 · j]`: `d_a · bsum`, sums of 16 (Q6_K) or 32 (Q4_K) values.
    dbs: Vec<f32>,
}

#[cfg(test)]
impl Acts {
    /// Byte offset of value `i` of row `m`.
    fn at(&self, m: usize, i: usize) -> usize {
        (((i / QK) * self.tiles + m / TILE) * 4 + (i % QK) / 64) * 1024 + (m % TILE) * 64 + i % 64
    }
}

/// Activation bytes a group of blocks may take, so that it stays in a core's L2 cache
/// while every weight tile is multiplied by it.
const GROUP_BYTES: usize = 1 << 20;

/// `x · Wᵀ` for `x: [rows, k]` (row-major) and the packed `w: [n, k]`, as `[rows, n]`.
/// Needs [`available`].
pub(crate) fn matmul(w: &Packed, x: &[f32]) -> candle_core::Result<Vec<f32>> {
    let (n, k) = (w.n, w.k);
    if !available() || x.is_empty() || !x.len().is_multiple_of(k) {
        candle_core::bail!("amx matmul: {} inputs for rows of {k}", x.len());
    }
    let rows = x.len() / k;
    let nb = k / QK;
    thread_local! {
        static SPARE: std::cell::Cell<Option<Acts>> = const { std::cell::Cell::new(None) };
    }
    let a = kernel::quantize(x, k, w.j, SPARE.take());
    let mut dst: Vec<f32> = Vec::with_capacity(rows * n);
    let dst_ptr = dst.as_mut_ptr() as usize;
    // Blocks per pass: all of them when the activations fit GROUP_BYTES.
    let group = (GROUP_BYTES / (a.tiles * TILE * QK)).clamp(1, nb);
    let mut b0 = 0;
    while b0 < nb {
        let blocks = b0..(b0 + group).min(nb);
        let last = blocks.end == nb;
        candle_core::utils::barrier_pool().execute_chunked(n / TILE, |tiles| {
            // SAFETY: `available()` checked the CPU and the tile-data permission; tile `t`
            // writes columns `16t..16t + 16` of every row of `dst`, and no other unit does;
            // passes run one after the other, the first storing every output.
            unsafe { kernel::columns(w, &a, tiles, blocks.clone(), last, dst_ptr as *mut f32) }
        });
        b0 = blocks.end;
    }
    SPARE.set(Some(a));
    // SAFETY: every (row, column) was written: block 0 stores each tile's outputs.
    unsafe { dst.set_len(rows * n) };
    Ok(dst)
}

#[cfg(target_arch = "x86_64")]
mod kernel {
    use super::{Acts, Packed, QK, TILE, TILE_BYTES};
    use std::arch::x86_64::*;

    /// Activation rows per pass: two tiles of 16.
    const PAIR: usize = 2 * TILE;

    #[repr(C, align(64))]
    struct TileCfg {
        palette: u8,
        start_row: u8,
        _reserved: [u8; 14],
        colsb: [u16; 16],
        rows: [u8; 16],
    }

    /// `(bytes per row, rows)` of tiles 0–7.
    const fn config(shapes: [(u16, u8); 8]) -> TileCfg {
        let mut cfg = TileCfg {
            palette: 1,
            start_row: 0,
            _reserved: [0; 14],
            colsb: [0; 16],
            rows: [0; 16],
        };
        let mut t = 0;
        while t < 8 {
            cfg.colsb[t] = shapes[t].0;
            cfg.rows[t] = shapes[t].1;
            t += 1;
        }
        cfg
    }

    /// Ours: four 16 × 16 i32 accumulators (tmm0–3), two activation tiles (tmm4–5) and the
    /// `h` and `l` weight tiles (tmm6–7), all 16 lines of 64 bytes.
    static OURS: TileCfg = config([(64, 16); 8]);

    /// Loads our tile configuration, returning the thread's previous one (candle's AMX
    /// kernel configures a thread once and expects its configuration to stay).
    unsafe fn load_config() -> TileCfg {
        let mut saved = config([(0, 0); 8]);
        core::arch::asm!("sttilecfg [{}]", in(reg) &mut saved, options(nostack));
        core::arch::asm!("ldtilecfg [{}]", in(reg) &OURS, options(nostack, readonly));
        saved
    }

    /// Puts back a configuration saved by [`load_config`] (none: releases the tiles).
    unsafe fn restore_config(saved: &TileCfg) {
        if saved.palette == 0 {
            core::arch::asm!("tilerelease", options(nostack, nomem));
        } else {
            core::arch::asm!("ldtilecfg [{}]", in(reg) saved, options(nostack, readonly));
        }
    }

    /// Quantises `x: [rows, k]` to Q8_K (ggml's rounding: scale `−127 / max`, `max` the
    /// first value of largest magnitude, round half away from zero), with `j` offset sums
    /// per block, in parallel over rows.
    /// `spare`: buffers of an earlier call to reuse (fresh memory costs page faults).
    pub(super) fn quantize(x: &[f32], k: usize, j: usize, spare: Option<Acts>) -> Acts {
        let rows = x.len() / k;
        let nb = k / QK;
        let padded = rows.div_ceil(PAIR) * PAIR;
        let mut a = spare.unwrap_or(Acts {
            rows: 0,
            tiles: 0,
            qs: Vec::new(),
            d: Vec::new(),
            dbs: Vec::new(),
        });
        a.rows = rows;
        a.tiles = padded / TILE;
        // Real rows are overwritten below; the padding rows must be zero.
        a.qs.resize(padded * k, 0);
        a.d.resize(rows * nb, 0.0);
        a.dbs.resize(rows * nb * j, 0.0);
        let tiles = a.tiles;
        for b in 0..nb {
            for m in rows..padded {
                for c in 0..4 {
                    let at = ((b * tiles + m / TILE) * 4 + c) * 1024 + (m % TILE) * 64;
                    a.qs[at..at + 64].fill(0);
                }
            }
        }
        let (qs, d, dbs) = (
            a.qs.as_mut_ptr() as usize,
            a.d.as_mut_ptr() as usize,
            a.dbs.as_mut_ptr() as usize,
        );
        candle_core::utils::barrier_pool().execute_chunked(rows * nb, |range| {
            let mut bsum = [0i32; 16];
            for rb in range {
                // SAFETY: unit `rb` writes only block `rb` of each array; the caller of
                // `matmul` checked AVX-512 F/BW through `available()`.
                unsafe {
                    let (m, b) = (rb / nb, rb % nb);
                    let at = ((b * tiles + m / TILE) * 4) * 1024 + (m % TILE) * 64;
                    let db = block(x.as_ptr().add(rb * QK), (qs as *mut i8).add(at), &mut bsum);
                    *(d as *mut f32).add(rb) = db;
                    let out = (dbs as *mut f32).add(rb * j);
                    let per = 16 / j;
                    for jj in 0..j {
                        let s: i32 = bsum[jj * per..(jj + 1) * per].iter().sum();
                        *out.add(jj) = db * s as f32;
                    }
                }
            }
        });
        a
    }

    /// One block of 256 values: writes 256 int8 (values `64c..64c + 64` at `qs + 1024c`),
    /// the 16 sums of 16, returns `d_a`.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn block(x: *const f32, qs: *mut i8, bsum: &mut [i32; 16]) -> f32 {
        let mut amax = _mm512_setzero_ps();
        for v in 0..16 {
            amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(x.add(16 * v))));
        }
        let amax = _mm512_reduce_max_ps(amax);
        if amax == 0.0 {
            std::ptr::write_bytes(qs, 0, QK);
            bsum.fill(0);
            return 0.0;
        }
        let mut max = 0f32;
        for v in 0..16 {
            let xs = _mm512_loadu_ps(x.add(16 * v));
            let hit = _mm512_cmpeq_ps_mask(_mm512_abs_ps(xs), _mm512_set1_ps(amax));
            if hit != 0 {
                max = *x.add(16 * v + hit.trailing_zeros() as usize);
                break;
            }
        }
        let iscale = -127f32 / max;
        let half = _mm512_set1_ps(0.5);
        let one = _mm512_set1_ps(1.0);
        for (v, s) in bsum.iter_mut().enumerate() {
            let y = _mm512_mul_ps(_mm512_set1_ps(iscale), _mm512_loadu_ps(x.add(16 * v)));
            // Round half away from zero, exactly: truncate, then step away from zero
            // where the (exact) fraction is at least one half.
            let t = _mm512_roundscale_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(y);
            let up = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(_mm512_abs_ps(_mm512_sub_ps(y, t)), half);
            let sign = _mm512_or_ps(_mm512_and_ps(y, _mm512_set1_ps(-0.0)), one);
            let r = _mm512_cvtps_epi32(_mm512_mask_add_ps(t, up, t, sign));
            let at = (v / 4) * 1024 + (v % 4) * 16;
            _mm_storeu_si128(qs.add(at) as *mut __m128i, _mm512_cvtsepi32_epi8(r));
            *s = _mm512_reduce_add_epi32(r);
        }
        1.0 / iscale
    }

    /// Columns `16t..16t + 16` of `dst: [rows, n]` for the tiles `t` in `tiles`, summed
    /// over `blocks`, plus the offsets when `last`: the first pass (blocks from 0) stores,
    /// later passes add. Each tile is summed in a contiguous buffer, then written once.
    ///
    /// # Safety
    /// AMX-INT8 and AVX-512 F/BW present and tile data permitted; `dst` holds
    /// `a.rows · w.n` floats, columns of these tiles written by this call only.
    pub(super) unsafe fn columns(
        w: &Packed,
        a: &Acts,
        tiles: std::ops::Range<usize>,
        blocks: std::ops::Range<usize>,
        last: bool,
        dst: *mut f32,
    ) {
        thread_local! {
            static ACC: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
        }
        // Every row of the buffer is stored by the first block before it is read.
        let mut acc = ACC.take();
        acc.resize(a.rows * TILE, 0.0);
        let saved = load_config();
        for t in tiles {
            for b in blocks.clone() {
                column(w, a, t, b, b == blocks.start, acc.as_mut_ptr());
            }
            if last {
                offsets(w, a, t, acc.as_mut_ptr());
            }
            write_out(
                &acc[..a.rows * TILE],
                blocks.start == 0,
                dst.add(t * TILE),
                w.n,
            );
        }
        restore_config(&saved);
        ACC.set(acc);
    }

    /// `dst[m, ..16] (+)= acc[m]` for every row.
    #[target_feature(enable = "avx512f")]
    unsafe fn write_out(acc: &[f32], store: bool, dst: *mut f32, n: usize) {
        for (m, y) in acc.chunks_exact(TILE).enumerate() {
            let out = dst.add(m * n);
            let y = _mm512_loadu_ps(y.as_ptr());
            let y = if store {
                y
            } else {
                _mm512_add_ps(_mm512_loadu_ps(out), y)
            };
            _mm512_storeu_ps(out, y);
        }
    }

    /// Adds `Σ_(block, j) d_a · bsum · offset` of tile `t` to `acc: [rows, 16]`, summed
    /// in the same order for every row.
    #[target_feature(enable = "avx512f")]
    unsafe fn offsets(w: &Packed, a: &Acts, t: usize, acc: *mut f32) {
        let kj = (w.k / QK) * w.j;
        let off = w.off.as_ptr().add(t * kj * TILE);
        let mut m = 0;
        while m + 8 <= a.rows {
            add_offsets::<8>(off, kj, a, m, acc, TILE);
            m += 8;
        }
        while m < a.rows {
            add_offsets::<1>(off, kj, a, m, acc, TILE);
            m += 1;
        }
    }

    /// Rows `m..m + R` of [`offsets`] for one tile.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn add_offsets<const R: usize>(
        off: *const f32,
        kj: usize,
        a: &Acts,
        m: usize,
        dst: *mut f32,
        n: usize,
    ) {
        let mut acc = [_mm512_setzero_ps(); R];
        let dbs = a.dbs.as_ptr().add(m * kj);
        for q in 0..kj {
            let v = _mm512_loadu_ps(off.add(q * TILE));
            for (r, y) in acc.iter_mut().enumerate() {
                *y = _mm512_fmadd_ps(_mm512_set1_ps(*dbs.add(r * kj + q)), v, *y);
            }
        }
        for (r, y) in acc.iter().enumerate() {
            let out = dst.add((m + r) * n);
            _mm512_storeu_ps(out, _mm512_add_ps(_mm512_loadu_ps(out), *y));
        }
    }

    #[repr(C, align(64))]
    struct Acc([i32; 4 * TILE * TILE]);

    /// Block `b` of tile `t` into `acc: [rows, 16]`, stored when `first`, else added.
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn column(w: &Packed, a: &Acts, t: usize, b: usize, first: bool, acc: *mut f32) {
        let nb = w.k / QK;
        let mut tiles = Acc([0; 4 * TILE * TILE]);
        let c = tiles.0.as_mut_ptr();
        let tb = t * nb + b;
        let h = w.hl.as_ptr().add(tb * TILE_BYTES);
        let l = h.add(TILE_BYTES / 2);
        let dw = _mm512_loadu_ps(w.d.as_ptr().add(tb * TILE));
        for pair in 0..a.tiles / 2 {
            let a0 = a.qs.as_ptr().add((b * a.tiles + 2 * pair) * 4096);
            let a1 = a0.add(4096);
            core::arch::asm!(
                "tilezero tmm0",
                "tilezero tmm1",
                "tilezero tmm2",
                "tilezero tmm3",
                options(nostack, nomem)
            );
            for ch in 0..4 {
                core::arch::asm!(
                    "tileloadd tmm4, [{a0} + {s}*1]",
                    "tileloadd tmm6, [{h} + {s}*1]",
                    "tileloadd tmm7, [{l} + {s}*1]",
                    "tdpbssd tmm0, tmm4, tmm6",
                    "tdpbsud tmm1, tmm4, tmm7",
                    "tileloadd tmm5, [{a1} + {s}*1]",
                    "tdpbssd tmm2, tmm5, tmm6",
                    "tdpbsud tmm3, tmm5, tmm7",
                    a0 = in(reg) a0.add(1024 * ch),
                    a1 = in(reg) a1.add(1024 * ch),
                    h = in(reg) h.add(1024 * ch),
                    l = in(reg) l.add(1024 * ch),
                    s = in(reg) 64usize,
                    options(nostack, readonly)
                );
            }
            core::arch::asm!(
                "tilestored [{c} + {s}*1], tmm0",
                "tilestored [{c} + {s}*1 + 1024], tmm1",
                "tilestored [{c} + {s}*1 + 2048], tmm2",
                "tilestored [{c} + {s}*1 + 3072], tmm3",
                c = in(reg) c,
                s = in(reg) 64usize,
                options(nostack)
            );
            let m0 = 2 * TILE * pair;
            for i in 0..(a.rows.saturating_sub(m0)).min(2 * TILE) {
                let m = m0 + i;
                let ct = c.add((i / TILE) * 2 * TILE * TILE + (i % TILE) * TILE);
                let hi = _mm512_load_si512(ct as *const _);
                let lo = _mm512_load_si512(ct.add(TILE * TILE) as *const _);
                let s = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32::<7>(hi), lo));
                let scale = _mm512_mul_ps(dw, _mm512_set1_ps(*a.d.get_unchecked(m * nb + b)));
                let out = acc.add(m * TILE);
                let y = if first {
                    _mm512_mul_ps(s, scale)
                } else {
                    _mm512_fmadd_ps(s, scale, _mm512_loadu_ps(out))
                };
                _mm512_storeu_ps(out, y);
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod kernel {
    use super::{Acts, Packed};

    pub(super) fn quantize(_x: &[f32], _k: usize, _j: usize, _s: Option<Acts>) -> Acts {
        unreachable!("amx::available() is false off x86-64")
    }

    pub(super) unsafe fn columns(
        _w: &Packed,
        _a: &Acts,
        _t: std::ops::Range<usize>,
        _b: std::ops::Range<usize>,
        _last: bool,
        _d: *mut f32,
    ) {
        unreachable!("amx::available() is false off x86-64")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::QMatMul;
    use candle_core::{Device, Module, Tensor};

    fn quantized(dtype: GgmlDType, n: usize, k: usize, seed: u64) -> QTensor {
        let w =
            Tensor::from_vec(super::super::test_values(n * k, seed), (n, k), &Device::Cpu).unwrap();
        QTensor::quantize(&w, dtype).unwrap()
    }

    #[test]
    fn quantisation_matches_the_scalar_one() {
        if !available() {
            eprintln!("skipped: this CPU has no AMX (the kernel is not used here)");
            return;
        }
        let k = 512;
        let mut x = super::super::test_values(5 * k, 3);
        // Ties: with 127 the largest magnitude the scale is exactly −1.
        x[0] = 127.0;
        x[1..8].copy_from_slice(&[0.5, -0.5, 1.5, -2.5, 0.49999997, -0.49999997, 126.5]);
        x[300] = -4.0; // a block whose largest magnitude is negative
        let stale = kernel::quantize(&vec![1.0; 40 * k], k, 16, None);
        let a = kernel::quantize(&x, k, 16, Some(stale));
        let s = super::super::q6k::Q8k::quantize(&x, k);
        let ours: Vec<i8> = (0..5 * k).map(|i| a.qs[a.at(i / k, i % k)]).collect();
        assert_eq!(ours, s.qs);
        assert_eq!(a.d, s.d);
        let nonzero = |q: &[i8]| q.iter().filter(|&&q| q != 0).count();
        assert_eq!(nonzero(&a.qs), nonzero(&ours), "padding rows are zero");
        assert_eq!(&ours[..8], &[-127, -1, 1, -2, 3, 0, 0, -127]);
    }

    #[test]
    fn matches_the_dequantised_product_and_candle() {
        if !available() {
            eprintln!("skipped: this CPU has no AMX (the kernel is not used here)");
            return;
        }
        // The last case multiplies in two passes over the blocks (see GROUP_BYTES).
        let cases = [
            (1, 48, 768),
            (17, 48, 768),
            (40, 48, 768),
            (40, 16, 65 * QK),
        ];
        for dtype in [GgmlDType::Q4K, GgmlDType::Q6K] {
            for (rows, n, k) in cases {
                let w = quantized(dtype, n, k, 11);
                let x = super::super::test_values(rows * k, 5 + rows as u64);
                let y = matmul(&pack(&w).unwrap().unwrap(), &x).unwrap();
                let want = super::super::dequantised_product(&w, &x, k);
                let candle = QMatMul::from_qtensor(w)
                    .unwrap()
                    .forward(&Tensor::from_vec(x.clone(), (rows, k), &Device::Cpu).unwrap())
                    .unwrap()
                    .flatten_all()
                    .unwrap()
                    .to_vec1::<f32>()
                    .unwrap();
                for (i, ((&got, &r), &c)) in y.iter().zip(&want).zip(&candle).enumerate() {
                    assert!(
                        (got as f64 - r).abs() < 1e-4 * (1.0 + r.abs()),
                        "{dtype:?} {i}: {got} vs {r}"
                    );
                    assert!(
                        (got - c).abs() < 1e-3 * (1.0 + c.abs()),
                        "{dtype:?} {i}: {got} vs candle {c}"
                    );
                }
            }
        }
    }

    #[test]
    fn each_row_is_the_same_alone_or_among_others() {
        if !available() {
            eprintln!("skipped: this CPU has no AMX (the kernel is not used here)");
            return;
        }
        let (n, k) = (32, 512);
        let w = pack(&quantized(GgmlDType::Q6K, n, k, 2)).unwrap().unwrap();
        let x = super::super::test_values(35 * k, 9);
        let all = matmul(&w, &x).unwrap();
        for r in [0, 16, 31, 32, 34] {
            let one = matmul(&w, &x[r * k..(r + 1) * k]).unwrap();
            assert_eq!(one, all[r * n..(r + 1) * n], "row {r}");
        }
    }

    #[test]
    fn other_types_and_shapes_are_declined() {
        assert!(pack(&quantized(GgmlDType::Q8_0, 32, 256, 1))
            .unwrap()
            .is_none());
        assert!(pack(&quantized(GgmlDType::Q4K, 24, 256, 1))
            .unwrap()
            .is_none());
    }
}
