//! candle-core's CPU thread pool as patched by the workspace (`vendor/candle-core.patch`,
//! docs/dependencies.md): a parallel region does not wait for a worker that has not arrived
//! by the time the caller has run out of work, and every item is still run exactly once.
//!
//! The process is restricted to one CPU before the pool exists, with two pool threads (the
//! caller and one worker): the worker is then always kept off the core while the caller
//! runs, as on a machine whose other cores are busy with other work. Unpatched (or with
//! `CANDLE_BARRIER_POOL_STRICT=1`) every region waits until the scheduler hands the core
//! to the worker.

use candle_core::utils::barrier_pool;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

/// Restrict the calling thread (and the threads it starts from now on) to the first CPU it
/// may run on.
fn pin_to_one_cpu() {
    // SAFETY: plain libc calls on a zeroed cpu_set_t owned by this frame.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        let first = (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &set))
            .expect("a CPU in the affinity mask");
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(first, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0
        );
    }
}

#[test]
fn a_worker_kept_off_the_core_does_not_hold_up_parallel_regions() {
    // The only test of this binary: it creates the pool, after these two settings.
    std::env::set_var("CANDLE_NUM_THREADS", "2");
    pin_to_one_cpu();
    let pool = barrier_pool();
    assert_eq!(pool.n_workers(), 1, "CANDLE_NUM_THREADS=2: one worker");
    let items = 4096;
    let regions = 400u32;
    let hits: Vec<AtomicU32> = (0..items).map(|_| AtomicU32::new(0)).collect();
    let t = Instant::now();
    for _ in 0..regions {
        pool.execute_chunked(items, |range| {
            for i in range {
                hits[i].fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let per_region = t.elapsed().as_secs_f64() / regions as f64;
    // Every item ran once per region, whoever ran it.
    for (i, h) in hits.iter().enumerate() {
        assert_eq!(h.load(Ordering::Relaxed), regions, "item {i}");
    }
    eprintln!(
        "one CPU, two pool threads: {:.1} µs per region",
        per_region * 1e6
    );
    // The work of a region is a few microseconds; waiting for the worker to be scheduled
    // costs a scheduler time slice (measured unpatched: see the CHANGELOG entry).
    assert!(
        per_region < 200e-6,
        "{:.1} µs per region: the caller waits for a worker that is not running",
        per_region * 1e6
    );
}
