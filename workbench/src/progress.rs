//! Progress bars for long loops (kdam), quiet when not on a terminal unless asked.

use kdam::{Bar, BarExt};

/// A progress bar over `total` steps with a description. Disabled when
/// `WORKBENCH_PROGRESS=0`.
pub fn bar(total: usize, desc: &str) -> Bar {
    let disable = std::env::var("WORKBENCH_PROGRESS").is_ok_and(|v| v == "0");
    kdam::BarBuilder::default()
        .total(total)
        .desc(desc)
        .disable(disable)
        .build()
        .unwrap_or_else(|_| Bar::new(total))
}

/// Advance a bar by `n`, ignoring terminal write errors (a closed stderr must not abort work).
pub fn tick(bar: &mut Bar, n: usize) {
    let _ = bar.update(n);
}
