//! What the kernels' tests share: seeded inputs, and the line a test prints when this CPU
//! cannot run the kernel it checks.

use std::io::Write;

/// `n` deterministic values in [-1, 1) (xorshift from `seed`), for the kernels' tests.
#[cfg_attr(not(feature = "dense"), allow(dead_code))]
pub(crate) fn test_values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Says that test `test` (its full path, as `cargo test` names it) did not check its
/// kernel, and why: `SKIP <test>: <why>` on the process's standard error, written past the
/// test harness's capture so that it shows in the output of `cargo test` (and
/// `scripts/test` lists these lines).
pub(crate) fn skip(test: &str, why: &str) {
    let line = format!("SKIP {test}: {why}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
