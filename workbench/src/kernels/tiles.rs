//! AMX tile configuration for kernels that use all eight tiles as 16 lines of 64 bytes
//! (the peak loops of [`super::peak`] and the prefill kernel of `amx`). A thread keeps one
//! configuration, and candle's own AMX kernel configures a thread once and expects it to
//! stay, so [`configure`] returns the previous one for [`restore`].

use super::cpu::AmxTiles;

/// The 64-byte `ldtilecfg` / `sttilecfg` operand.
#[repr(C, align(64))]
pub struct TileCfg {
    palette: u8,
    start_row: u8,
    _reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

/// Tiles 0–7 as 16 lines of 64 bytes.
static FULL: TileCfg = TileCfg {
    palette: 1,
    start_row: 0,
    _reserved: [0; 14],
    colsb: [64, 64, 64, 64, 64, 64, 64, 64, 0, 0, 0, 0, 0, 0, 0, 0],
    rows: [16, 16, 16, 16, 16, 16, 16, 16, 0, 0, 0, 0, 0, 0, 0, 0],
};

/// Configures this thread's tiles 0–7 as 16 lines of 64 bytes and returns its previous
/// configuration (the token proves AMX and the tile-data permission).
///
/// # Safety
/// [`restore`] is called with the result before this thread runs any other code that uses
/// tiles (candle's AMX kernel loads and stores tiles of the shapes it configured).
pub unsafe fn configure(_: AmxTiles) -> TileCfg {
    let mut saved = TileCfg {
        palette: 0,
        start_row: 0,
        _reserved: [0; 14],
        colsb: [0; 16],
        rows: [0; 16],
    };
    // SAFETY: the token proves AMX tiles with tile data permitted; `saved` is a 64-byte
    // aligned, writable 64-byte operand.
    unsafe { core::arch::asm!("sttilecfg [{}]", in(reg) &mut saved, options(nostack)) };
    // SAFETY: as above; FULL is a valid palette-1 configuration.
    unsafe { core::arch::asm!("ldtilecfg [{}]", in(reg) &FULL, options(nostack, readonly)) };
    saved
}

/// Puts back a configuration saved by [`configure`] (none: releases the tiles).
///
/// # Safety
/// No tile data loaded under the configuration being replaced is used afterwards.
pub unsafe fn restore(_: AmxTiles, saved: &TileCfg) {
    if saved.palette == 0 {
        // SAFETY: the token proves AMX; releasing the tiles is always allowed.
        unsafe { core::arch::asm!("tilerelease", options(nostack, nomem)) };
    } else {
        // SAFETY: the token proves AMX; `saved` was stored by `sttilecfg` (only
        // `configure` makes a TileCfg with a palette) and is 64-byte aligned.
        unsafe { core::arch::asm!("ldtilecfg [{}]", in(reg) saved, options(nostack, readonly)) };
    }
}
