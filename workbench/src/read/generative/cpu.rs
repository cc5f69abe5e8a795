//! What the CPU can run, and the switches that turn a fast path off for comparisons.

/// Whether the environment variable `var` switches a fast path off (set, not empty, not
/// `0`): the `WORKBENCH_LLM_NO_*` switches, for comparisons.
pub(super) fn switched_off(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Whether the CPU has AVX-512 F, which the attention and SiLU kernels need.
#[cfg(target_arch = "x86_64")]
pub(super) fn cpu_has_avx512f() -> bool {
    is_x86_feature_detected!("avx512f")
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn cpu_has_avx512f() -> bool {
    false
}

/// Whether the CPU has AVX-512 F/BW and F16C, which the Q6_K kernel needs (and, with
/// AMX-BF16, the AMX kernel).
#[cfg(target_arch = "x86_64")]
pub(super) fn cpu_has_avx512bw_f16c() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("f16c")
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn cpu_has_avx512bw_f16c() -> bool {
    false
}
