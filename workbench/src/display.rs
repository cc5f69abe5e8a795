//! Display.
