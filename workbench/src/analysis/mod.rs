//! Analyses of embedding spaces (report 000's Figure 2): t-SNE projections and how well
//! labels cluster ([`clustering`]).

pub mod clustering;

#[cfg(feature = "tsne")]
mod tsne;

#[cfg(feature = "tsne")]
pub use tsne::{tsne_2d, TsneParams};
