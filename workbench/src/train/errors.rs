//! How training reports a candle error.

use crate::Error;

/// Wrap a candle error with what was being done.
pub(crate) fn candle_err(what: &'static str) -> impl Fn(candle_core::Error) -> Error {
    move |e| Error::param("training", format!("{what}: {e}"))
}
