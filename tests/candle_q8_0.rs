//! Q8_0 products of candle-core as patched by the workspace (`vendor/candle-core.patch`,
//! docs/dependencies.md), including rows whose length is not a multiple of 256 (Qwen2.5
//! 0.5B's hidden size 896, SmolLM2-135M's 576). On x86 with VNNI these run on the repacked
//! tiles, with each 32-value block of the activations quantised on its own scale (Q8_0, as
//! ggml's Q8_0 x Q8_0 product) and the last superblock zero-padded. Each product must equal,
//! up to f32 summation, the dot product of the dequantised weights with those dequantised
//! activations: it does not when a tile or a block's scale is read from the wrong place, when
//! the activations share one scale per 256 values, or when the padded superblock reads past a
//! row. One row's product must not depend on how many rows are multiplied with it. Where the
//! tiles run, each product must also have exactly the bits of the tile kernel's arithmetic
//! (per 32-value block in order: the integer dot product times the product of the two
//! scales, fused-added), which candle's unpacked Q8_0 product, summing in another order, does
//! not reproduce: so the test fails when these shapes fall back to it.

use candle_core::quantized::k_quants::{BlockQ8_0, GgmlType};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};

/// Output rows: three 16-row tiles.
const N: usize = 48;

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn weights(k: usize) -> Vec<f32> {
    (0..N * k)
        .map(|i| {
            let (r, c) = (i / k, i % k);
            // each row its own magnitude, each 32-value block its own spread
            let mag = 2f32.powi((r % 7) as i32 - 3);
            let t = ((c * 37 + r * 11) % 61) as f32 / 30.0 - 1.0;
            mag * t * (1.0 + (c / 32 % 5) as f32 * 0.3)
        })
        .collect()
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn activations(m: usize, k: usize) -> Vec<f32> {
    (0..m * k)
        .map(|i| {
            let (r, c) = (i / k, i % k);
            // the largest magnitudes sit in the last, partial superblock for some rows
            let boost = if c >= k - 64 && r % 2 == 0 { 3.0 } else { 1.0 };
            boost * (((i * 53 + 17) % 101) as f32 / 50.0 - 1.0)
        })
        .collect()
}

/// The row quantised as the tiles' activations are (32-value Q8_0 blocks), dequantised.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn q8_0_round_trip(row: &[f32]) -> Vec<f32> {
    let mut blocks = vec![BlockQ8_0::zeros(); row.len() / 32];
    BlockQ8_0::from_float(row, &mut blocks);
    let mut back = vec![0f32; row.len()];
    BlockQ8_0::to_float(&blocks, &mut back);
    back
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
/// One row's 32-value blocks as candle's `BlockQ8_0::from_float` makes them: the scale as
/// stored (f16, read back as f32) and the values.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn q8_0_blocks(row: &[f32]) -> Vec<(f32, [i8; 32])> {
    row.chunks_exact(32)
        .map(|xs| {
            let amax = xs.iter().fold(0f32, |a, x| a.max(x.abs()));
            let d = amax / 127.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            let mut qs = [0i8; 32];
            for (q, x) in qs.iter_mut().zip(xs) {
                *q = (x * id).round() as i8;
            }
            (half::f16::from_f32(d).to_f32(), qs)
        })
        .collect()
}

/// Weight row `r` of a Q8_0 tensor's bytes (34-byte blocks: f16 scale, 32 values).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn weight_blocks(bytes: &[u8], r: usize, k: usize) -> Vec<(f32, [i8; 32])> {
    let per_row = k / 32 * 34;
    bytes[r * per_row..(r + 1) * per_row]
        .chunks_exact(34)
        .map(|b| {
            let d = half::f16::from_le_bytes([b[0], b[1]]).to_f32();
            let mut qs = [0i8; 32];
            for (q, &v) in qs.iter_mut().zip(&b[2..]) {
                *q = v as i8;
            }
            (d, qs)
        })
        .collect()
}

/// The tile kernel's sum for one output: blocks in order, each block's exact integer dot
/// product (as f32) times `d_w · d_x` (rounded to f32), fused-added.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn tile_sum(w: &[(f32, [i8; 32])], x: &[(f32, [i8; 32])]) -> f32 {
    w.iter().zip(x).fold(0f32, |acc, ((dw, qw), (dx, qx))| {
        let dot: i32 = qw.iter().zip(qx).map(|(a, b)| *a as i32 * *b as i32).sum();
        (dot as f32).mul_add(dw * dx, acc)
    })
}

/// Whether this process multiplies Q8_0 rows of length `k` on the tiles.
#[cfg(target_arch = "x86_64")]
fn on_tiles(k: usize) -> bool {
    let forced_avx2 = std::env::var_os("MISTRALRS_FORCE_AVX2").is_some();
    let vnni = (std::is_x86_feature_detected!("avx512vnni")
        && std::is_x86_feature_detected!("avx512bw"))
        || std::is_x86_feature_detected!("avxvnni");
    vnni && !forced_avx2 && k.is_multiple_of(64)
}

fn product(mm: &QMatMul, x: &[f32], m: usize, k: usize) -> Vec<f32> {
    mm.forward(&Tensor::from_vec(x.to_vec(), (m, k), &Device::Cpu).unwrap())
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap()
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn check(k: usize) {
    let dev = Device::Cpu;
    let w = Tensor::from_vec(weights(k), (N, k), &dev).unwrap();
    let q = QTensor::quantize(&w, GgmlDType::Q8_0).unwrap();
    let deq: Vec<f32> = q
        .dequantize(&dev)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let bytes = q.data().unwrap().to_vec();
    let mm = QMatMul::from_qtensor(q).unwrap();
    assert!(
        matches!(mm, QMatMul::QTensor(_)),
        "candle dequantised the Q8_0 weights"
    );
    #[cfg(target_arch = "x86_64")]
    let tiles = on_tiles(k);
    #[cfg(not(target_arch = "x86_64"))]
    let tiles = false;
    // 9 rows: two full groups of the kernel's 4 rows and one row over
    let m = 9;
    let x = activations(m, k);
    let got = product(&mm, &x, m, k);
    for row in 0..m {
        let xq = q8_0_round_trip(&x[row * k..(row + 1) * k]);
        let xb = q8_0_blocks(&x[row * k..(row + 1) * k]);
        let alone = product(&mm, &x[row * k..(row + 1) * k], 1, k);
        for col in 0..N {
            let ws = &deq[col * k..(col + 1) * k];
            let want: f64 = xq.iter().zip(ws).map(|(a, b)| *a as f64 * *b as f64).sum();
            let mass: f64 = xq
                .iter()
                .zip(ws)
                .map(|(a, b)| (*a as f64 * *b as f64).abs())
                .sum();
            let g = got[row * N + col];
            // f32 sums of exact integer block sums: far below 1e-5 of Σ|x·w|; one activation
            // scale per 256 values moves products by ~1e-3 of it
            assert!(
                (g as f64 - want).abs() <= 1e-5 * mass,
                "k={k} row {row} col {col}: got {g}, want {want} (Σ|x·w| {mass})"
            );
            if tiles {
                let t = tile_sum(&weight_blocks(&bytes, col, k), &xb);
                assert_eq!(
                    g.to_bits(),
                    t.to_bits(),
                    "k={k} row {row} col {col}: {g}, the tile kernel's arithmetic gives {t}"
                );
            }
            assert_eq!(
                g.to_bits(),
                alone[col].to_bits(),
                "k={k} row {row} col {col}: {g} among {m} rows, {} alone",
                alone[col]
            );
        }
    }
}

#[test]
fn q8_0_products_with_a_partial_superblock_match_the_dequantised_blocks() {
    #[cfg(target_arch = "x86_64")]
    {
        let vnni512 = std::is_x86_feature_detected!("avx512vnni")
            && std::is_x86_feature_detected!("avx512bw");
        let vnni256 = std::is_x86_feature_detected!("avxvnni")
            && std::env::var_os("MISTRALRS_FORCE_AVX2").is_none();
        if !vnni512 && !vnni256 {
            eprintln!(
                "SKIP q8_0_products_with_a_partial_superblock_match_the_dequantised_blocks: Q8_0 tiles need VNNI, this CPU lacks it"
            );
            return;
        }
        check(896);
        check(576);
        // a single, padded superblock
        check(192);
        // whole superblocks still take the same path
        check(512);
        // an odd number of 32-value blocks: not on the tiles, candle's unpacked product
        check(608);
    }
    #[cfg(not(target_arch = "x86_64"))]
    eprintln!(
        "SKIP q8_0_products_with_a_partial_superblock_match_the_dequantised_blocks: the tiles are x86 only"
    );
}

/// The same on the 256-bit AVX-VNNI kernel, in a child process of this test binary (candle
/// picks its kernel level once per process).
#[test]
#[cfg(target_arch = "x86_64")]
fn q8_0_products_match_on_the_avx_vnni_kernel() {
    if !(std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("fma")
        && std::is_x86_feature_detected!("avxvnni"))
    {
        eprintln!("SKIP q8_0_products_match_on_the_avx_vnni_kernel: this CPU lacks AVX-VNNI");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .env_remove("MISTRALRS_FORCE_AVX2")
        .env_remove("CANDLE_DEQUANTIZE_ALL")
        .env_remove("CANDLE_DEQUANTIZE_ALL_F16")
        .env("MISTRALRS_FORCE_AVXVNNI", "1")
        .args([
            "--exact",
            "q8_0_products_with_a_partial_superblock_match_the_dequantised_blocks",
            "--test-threads",
            "1",
            "--nocapture",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed") && !stderr.contains("SKIP"),
        "MISTRALRS_FORCE_AVXVNNI=1: {}\n{stdout}\n{stderr}",
        out.status
    );
}

/// Decoding's fused product of several weights sharing one activation row (q, k, v; gate,
/// up) gives each weight the bits of its own product.
#[test]
fn fused_single_row_products_equal_the_separate_ones() {
    let dev = Device::Cpu;
    for k in [896usize, 576, 512] {
        let q = |seed: usize| {
            let w: Vec<f32> = weights(k)
                .iter()
                .map(|v| v * (1.0 + seed as f32 * 0.1))
                .collect();
            QTensor::quantize(&Tensor::from_vec(w, (N, k), &dev).unwrap(), GgmlDType::Q8_0).unwrap()
        };
        let (a, b) = (q(0), q(1));
        let x = Tensor::from_vec(activations(1, k), (1, k), &dev).unwrap();
        let fused = QTensor::gemv_fused_shared_lhs(&[&a, &b], &x).unwrap();
        #[cfg(target_arch = "x86_64")]
        let expected = std::is_x86_feature_detected!("avx512vnni")
            && std::is_x86_feature_detected!("avx512bw")
            && std::env::var_os("MISTRALRS_FORCE_AVX2").is_none()
            && std::env::var_os("MISTRALRS_FORCE_AVXVNNI").is_none();
        #[cfg(not(target_arch = "x86_64"))]
        let expected = false;
        let Some(fused) = fused else {
            assert!(
                !expected,
                "k={k}: no fused product on a CPU with AVX-512 VNNI"
            );
            eprintln!("SKIP fused_single_row_products_equal_the_separate_ones: no fused kernel here (k = {k})");
            continue;
        };
        for (t, f) in [a, b].into_iter().zip(fused) {
            let mm = QMatMul::from_qtensor(t).unwrap();
            let alone: Vec<f32> = mm
                .forward(&x)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            let f: Vec<f32> = f.flatten_all().unwrap().to_vec1().unwrap();
            for (i, (p, q)) in f.iter().zip(&alone).enumerate() {
                assert_eq!(
                    p.to_bits(),
                    q.to_bits(),
                    "k={k} col {i}: fused {p}, alone {q}"
                );
            }
        }
    }
}
