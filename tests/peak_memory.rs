//! `machine::peak_resident_bytes` and `reset_peak_resident`, in a test binary of their own:
//! the peak is a property of the whole process, so other tests allocating beside these in
//! the same process would move it.

#![cfg(target_os = "linux")]

use std::sync::Mutex;
use workbench::machine::{peak_resident_bytes, reset_peak_resident};

/// The tests of this file run one at a time: each allocates, and the peak is the process's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A reset brings the peak down to what the process holds now, so that touching 64 MiB
/// raises it again; without the reset the earlier 256 MiB would hide it.
#[test]
fn a_reset_peak_follows_the_next_phase() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let big = vec![1u8; 256 << 20];
    std::hint::black_box(&big);
    drop(big);
    let before = peak_resident_bytes(None).expect("VmHWM of this process");
    assert!(
        reset_peak_resident(),
        "/proc/self/clear_refs refused the reset"
    );
    let start = peak_resident_bytes(None).unwrap();
    assert!(
        start + (200 << 20) < before,
        "the reset left the peak at {start} (was {before})"
    );
    let v = vec![7u8; 64 << 20];
    std::hint::black_box(&v);
    let end = peak_resident_bytes(None).unwrap();
    let grew = end.saturating_sub(start);
    assert!(
        (60 << 20..100 << 20).contains(&grew),
        "peak {start} → {end}: grew {grew} bytes for 64 MiB touched"
    );
}

/// `Some(pid)` reads that process, not this one: a `sleep` child holds far less than this
/// test process after it touched 128 MiB.
#[test]
fn another_process_is_read_by_its_pid() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let v = vec![3u8; 128 << 20];
    std::hint::black_box(&v);
    let mut child = std::process::Command::new("sleep")
        .arg("5")
        .spawn()
        .expect("sleep");
    std::thread::sleep(std::time::Duration::from_millis(100));
    let theirs = peak_resident_bytes(Some(child.id()));
    let ours = peak_resident_bytes(None).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let theirs = theirs.expect("VmHWM of the sleep child");
    assert!(
        theirs > 0 && theirs + (100 << 20) < ours,
        "child {theirs} bytes, this process {ours}"
    );
}
