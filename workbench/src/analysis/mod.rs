//! Analyses of embedding spaces (report 000's Figure 2).

#[cfg(feature = "tsne")]
mod tsne;

#[cfg(feature = "tsne")]
pub use tsne::{tsne_2d, TsneParams};
