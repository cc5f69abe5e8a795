//! Keeping freed memory in the process: what model code on candle needs from glibc's
//! allocator.
//!
//! candle allocates a new buffer for every tensor operation, and a prefill of a few
//! hundred tokens through a 1.5B model frees and allocates buffers of up to tens of MB
//! hundreds of times. With glibc's defaults, buffers above the (adaptive, at most 32 MB)
//! mmap threshold are mapped and unmapped each time, and freed memory at the top of the
//! heap is returned to the system; either way the next buffer starts on fresh pages, each
//! taking a page fault and being cleared by the kernel. Measured on a 592-token prefill
//! (Qwen2.5 1.5B, 2 threads): about 385,000 page faults (1.5 GB of fresh pages) per
//! prompt with the defaults, under 1,000 with [`keep_freed_memory`].
//!
//! [`keep_freed_memory`] sets glibc to serve every allocation from its heaps
//! (`M_MMAP_MAX = 0`) and to keep freed memory (`M_TRIM_THRESHOLD`, `M_TOP_PAD`), once per
//! process; loading a GGUF reader (`read::generative::Llm::load`) calls it. The
//! process then keeps its peak heap size until it exits. Training applies its own settings
//! (`train::keep_freed_memory`, which also limits glibc to one arena). It does nothing when any `MALLOC_*_` variable or `GLIBC_TUNABLES` is set (the
//! user's own settings win), when `WORKBENCH_KEEP_MALLOC_DEFAULTS` is set to anything but
//! `0`, or off glibc.

/// Applies the settings described in the [module docs](self), once; returns whether they
/// are in effect.
pub fn keep_freed_memory() -> bool {
    static DONE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DONE.get_or_init(|| {
        let user_set = std::env::vars_os().any(|(k, _)| {
            let k = k.to_string_lossy();
            k == "GLIBC_TUNABLES" || (k.starts_with("MALLOC_") && k.ends_with('_'))
        });
        let off = std::env::var("WORKBENCH_KEEP_MALLOC_DEFAULTS")
            .is_ok_and(|v| !v.is_empty() && v != "0");
        !user_set && !off && apply()
    })
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn apply() -> bool {
    // SAFETY: mallopt only changes allocator parameters; it is safe to call at any time.
    unsafe {
        libc::mallopt(libc::M_MMAP_MAX, 0) == 1
            && libc::mallopt(libc::M_TRIM_THRESHOLD, libc::c_int::MAX) == 1
            && libc::mallopt(libc::M_TOP_PAD, 64 << 20) == 1
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn apply() -> bool {
    false
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    /// Minor page faults taken by this thread so far.
    fn faults() -> i64 {
        // SAFETY: `rusage` is plain data (integers and timevals); all zeros is a valid value.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `u` is a valid rusage to fill.
        assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) }, 0);
        u.ru_minflt
    }

    fn touch(mb: usize) {
        let v = vec![1u8; mb << 20];
        std::hint::black_box(&v);
    }

    #[test]
    fn a_freed_large_buffer_is_reused_without_page_faults() {
        if !super::keep_freed_memory() {
            eprintln!("skipped: the allocator settings are off (environment)");
            return;
        }
        touch(48);
        let before = faults();
        touch(48);
        let taken = faults() - before;
        // 48 MB on fresh pages would be 12,288 faults of 4 KB.
        assert!(taken < 1000, "{taken} page faults");
    }
}
