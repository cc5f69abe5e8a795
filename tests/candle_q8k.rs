//! Activation quantisation of candle-core as patched by the workspace
//! (`vendor/candle-core.patch`, docs/dependencies.md): on CPUs with AVX-512 F,
//! `BlockQ8K::from_float` runs a vectorised copy of candle's scalar loop, which must give the
//! same blocks byte for byte (scale, values and 16-value sums), so that every quantised
//! product is unchanged. The reference below is candle's scalar loop. The blocks include the
//! awkward cases: products that fall exactly halfway between integers (rounded away from
//! zero, where round-half-to-even would differ), the largest magnitude held by values of both
//! signs (the first one sets the scale's sign), an all-zero block, and NaN and infinite inputs.

use candle_core::quantized::k_quants::{BlockQ8K, GgmlType, QK_K};

/// candle's scalar `BlockQ8K::from_float` (0.11.1), as bytes: `d`, `qs`, `bsums`.
fn reference(xs: &[f32]) -> Vec<u8> {
    let mut out = Vec::new();
    for xs in xs.chunks_exact(QK_K) {
        let mut max = 0f32;
        let mut amax = 0f32;
        for &x in xs {
            if amax < x.abs() {
                amax = x.abs();
                max = x;
            }
        }
        let mut qs = [0i8; QK_K];
        let mut bsums = [0i16; QK_K / 16];
        let mut d = 0f32;
        if amax != 0f32 {
            let iscale = -127f32 / max;
            for (q, &x) in qs.iter_mut().zip(xs) {
                *q = (iscale * x).round().clamp(-128., 127.) as i8;
            }
            for (j, s) in bsums.iter_mut().enumerate() {
                *s = qs[j * 16..j * 16 + 16]
                    .iter()
                    .map(|&q| q as i32)
                    .sum::<i32>() as i16;
            }
            d = 1.0 / iscale;
        }
        out.extend_from_slice(&d.to_le_bytes());
        out.extend(qs.iter().map(|&q| q as u8));
        for s in bsums {
            out.extend_from_slice(&s.to_le_bytes());
        }
    }
    out
}

fn candle(xs: &[f32]) -> Vec<u8> {
    let mut ys = vec![BlockQ8K::zeros(); xs.len() / QK_K];
    BlockQ8K::from_float(xs, &mut ys);
    let bytes = std::mem::size_of_val(ys.as_slice());
    // SAFETY: `BlockQ8K` is `#[repr(C)]` of an f32, 256 i8 and 16 i16, with no padding
    // (candle asserts its size), so its bytes are initialised.
    unsafe { std::slice::from_raw_parts(ys.as_ptr() as *const u8, bytes) }.to_vec()
}

/// A deterministic spread of values in about [-3, 3].
fn spread(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 6.0
        })
        .collect()
}

fn blocks() -> Vec<(&'static str, Vec<f32>)> {
    let mut cases = vec![
        ("spread", spread(4 * QK_K, 7)),
        ("all zero", vec![0.0; QK_K]),
    ];
    // max = -127 makes the scale 1, so x.5 values are exact ties: 2.5 rounds to 3, -3.5 to -4
    let mut ties: Vec<f32> = (0..QK_K).map(|i| (i % 40) as f32 - 20.5).collect();
    ties[5] = -127.0;
    cases.push(("ties", ties));
    // the largest magnitude first as a positive value, later negative: the scale is negative
    let mut signs = spread(QK_K, 11);
    signs[3] = 9.0;
    signs[200] = -9.0;
    cases.push(("both signs", signs));
    let mut nan = spread(QK_K, 13);
    nan[17] = f32::NAN;
    // in the last 16 values too: a maximum that lets NaN lanes in fails here
    nan[255] = f32::NAN;
    cases.push(("NaN", nan));
    let mut inf = spread(QK_K, 17);
    inf[40] = f32::INFINITY;
    cases.push(("infinity", inf));
    let mut neg_inf = spread(QK_K, 23);
    neg_inf[100] = f32::NEG_INFINITY;
    neg_inf[101] = -0.0;
    cases.push(("-infinity and -0", neg_inf));
    cases.push(("all NaN", vec![f32::NAN; QK_K]));
    // small values: the scale -127 / max stays finite
    cases.push((
        "small",
        spread(QK_K, 19).iter().map(|x| x * 1e-30).collect(),
    ));
    // values so small that -127 / max overflows to infinity: the products are ±inf (clamped
    // to -128 / 127) or NaN (0), as in the scalar loop
    for (name, scale) in [("near the smallest normal", 1e-38f32), ("subnormal", 1e-40)] {
        let mut xs: Vec<f32> = spread(QK_K, 29).iter().map(|x| x * scale).collect();
        xs[9] = 0.0;
        cases.push((name, xs));
    }
    cases
}

#[test]
fn q8k_blocks_equal_the_scalar_loop() {
    let avx512 = std::is_x86_feature_detected!("avx512f");
    if !avx512 {
        eprintln!(
            "SKIP q8k_blocks_equal_the_scalar_loop: no AVX-512 F, candle runs the scalar loop"
        );
    }
    for (name, xs) in blocks() {
        let want = reference(&xs);
        let got = candle(&xs);
        assert_eq!(got.len(), want.len(), "{name}");
        let block = want.len() / (xs.len() / QK_K);
        for (i, (g, w)) in got.chunks(block).zip(want.chunks(block)).enumerate() {
            assert_eq!(g, w, "{name}: block {i} differs from candle's scalar loop");
        }
    }
}

/// The ties case really has ties: the reference rounds them away from zero, which
/// round-half-to-even would not (so a vectorised rounding to even fails the test above).
#[test]
fn the_ties_block_has_halfway_products() {
    let (_, xs) = blocks().into_iter().find(|(n, _)| *n == "ties").unwrap();
    let bytes = reference(&xs);
    let qs = &bytes[4..4 + QK_K];
    // value 2.5 (i % 40 == 23) has scale 1 · 2.5 → 3, not 2
    let i = 23;
    assert_eq!(xs[i], 2.5);
    assert_eq!(qs[i] as i8, 3);
    let i = 17;
    assert_eq!(xs[i], -3.5);
    assert_eq!(qs[i] as i8, -4);
}
