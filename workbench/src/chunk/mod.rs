//! Chunkers.
