//! The crate's error type. Every failure names the file, record or parameter at fault.

use std::path::PathBuf;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the workbench.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O failure on a named path.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder being read or written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A record in a line-oriented input file (or one whose parser reports lines)
    /// could not be parsed or failed validation. Shown as `path:line: message`.
    #[error("{path}:{line}: {message}")]
    Malformed {
        /// The file holding the record.
        path: PathBuf,
        /// 1-based line of the file.
        line: usize,
        /// What is wrong with it.
        message: String,
    },

    /// A record of a file without useful lines (an entry of a JSON object, a
    /// question of a SQuAD file, a parquet row) failed validation. Shown as
    /// `path: record N: message` (or `row N`), never as a line.
    #[error("{path}: {unit} {number}: {message}")]
    MalformedRecord {
        /// The file holding the record.
        path: PathBuf,
        /// What is counted: `"record"`, `"row"`.
        unit: &'static str,
        /// 1-based number of the record in the file.
        number: usize,
        /// What is wrong with it.
        message: String,
    },

    /// One item of a loop over many (a question of a question set, …) failed.
    #[error("{what} {number}: {source}")]
    AtItem {
        /// What is counted: `"question"`.
        what: &'static str,
        /// 1-based number of the item.
        number: usize,
        /// What went wrong.
        #[source]
        source: Box<Error>,
    },

    /// A whole input file is unusable (wrong top-level shape, empty, …).
    #[error("{path}: {message}")]
    BadInput {
        /// The file or folder.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },

    /// A hyper-parameter was rejected before any work started.
    #[error("invalid parameter `{name}`: {message}")]
    InvalidParam {
        /// The field name, as in the config struct.
        name: &'static str,
        /// Why it was rejected.
        message: String,
    },

    /// Two runs cannot be compared question by question (their questions, gold answers,
    /// answer-match rule or judge differ).
    #[error("cannot compare {other} with {base}: {what}")]
    Incomparable {
        /// The run compared against.
        base: String,
        /// The run compared.
        other: String,
        /// The first difference found.
        what: String,
    },

    /// An asset (model or data set) is not in the cache and could not be downloaded.
    #[error("{0}")]
    AssetMissing(Box<AssetMissing>),

    /// An asset file is present but its checksum does not match the manifest.
    #[error("{0}")]
    AssetCorrupt(Box<AssetCorrupt>),

    /// An asset name that `data/assets.toml` does not list.
    #[error("unknown asset `{name}`; known assets: {known}")]
    UnknownAsset {
        /// The name asked for.
        name: String,
        /// Comma-separated list of known names.
        known: String,
    },

    /// Fetching an asset from its offline source failed.
    #[error("fetching asset `{name}` failed: {message}")]
    Fetch {
        /// Asset name.
        name: String,
        /// What went wrong.
        message: String,
    },

    /// The project root (the folder holding `data/assets.toml`) could not be found.
    #[error("cannot find the project root (a folder with data/assets.toml) from {start}; set WORKBENCH_ROOT")]
    NoProjectRoot {
        /// Where the search started.
        start: PathBuf,
    },

    /// An empty input where at least one item is required.
    #[error("empty input: {0}")]
    Empty(String),

    /// JSON (de)serialisation failure outside a line-oriented file.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),

    /// Plotting failed.
    #[error("plot {path}: {message}")]
    Plot {
        /// Output file.
        path: PathBuf,
        /// Backend message.
        message: String,
    },

    /// A tokenizer could not be loaded or failed on an input.
    #[error("tokenizer: {0}")]
    Tokenizer(String),

    /// A FAISS index operation failed (feature `faiss`).
    #[error("faiss: {0}")]
    Faiss(String),

    /// A Python peer of a benchmark (`scripts/python/<script>`) is missing, failed or
    /// printed something unexpected; the message says which and how to fix it.
    #[error("python peer {script}: {message}")]
    Peer {
        /// The peer script.
        script: PathBuf,
        /// What went wrong, with the peer's stderr where it failed.
        message: String,
    },

    /// A model server (an OpenAI-compatible endpoint) failed or answered something
    /// unusable after the retries allowed; the message names the request and every
    /// attempt's failure.
    #[error("server {url}: {message}")]
    Server {
        /// The endpoint.
        url: String,
        /// What failed.
        message: String,
    },

    /// A polars failure while reading a table.
    #[error("table {path}: {message}")]
    Table {
        /// The table file.
        path: PathBuf,
        /// polars' message.
        message: String,
    },
}

impl Error {
    /// Wrap an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// A malformed-record error.
    pub fn malformed(path: impl Into<PathBuf>, line: usize, message: impl Into<String>) -> Self {
        Error::Malformed {
            path: path.into(),
            line,
            message: message.into(),
        }
    }

    /// A malformed-record error for a format without lines: `unit` (`"record"`,
    /// `"row"`) `number` (1-based) of the file.
    pub fn record(
        path: impl Into<PathBuf>,
        unit: &'static str,
        number: usize,
        message: impl Into<String>,
    ) -> Self {
        Error::MalformedRecord {
            path: path.into(),
            unit,
            number,
            message: message.into(),
        }
    }

    /// A bad-input error for a whole file.
    pub fn bad_input(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Error::BadInput {
            path: path.into(),
            message: message.into(),
        }
    }

    /// A rejected parameter.
    pub fn param(name: &'static str, message: impl Into<String>) -> Self {
        Error::InvalidParam {
            name,
            message: message.into(),
        }
    }
}

/// Details of [`Error::AssetMissing`].
#[derive(Debug, thiserror::Error)]
#[error("asset `{name}` ({hf_id}, file `{file}`) is missing: {detail}. Expected sha256 {sha256}. Fetch it with: {fetch_command}")]
pub struct AssetMissing {
    /// Asset name in `data/assets.toml`.
    pub name: String,
    /// Hugging Face repository id.
    pub hf_id: String,
    /// File inside the repository.
    pub file: String,
    /// Expected checksum.
    pub sha256: String,
    /// What happened when it was looked up.
    pub detail: String,
    /// The command that fills the cache.
    pub fetch_command: String,
}

/// Details of [`Error::AssetCorrupt`].
#[derive(Debug, thiserror::Error)]
#[error("asset `{name}` file {path} is corrupt: sha256 {actual}, expected {expected}. Replace it with: {fetch_command}")]
pub struct AssetCorrupt {
    /// Asset name in `data/assets.toml`.
    pub name: String,
    /// The file on disk.
    pub path: PathBuf,
    /// Checksum in the manifest.
    pub expected: String,
    /// Checksum of the file on disk.
    pub actual: String,
    /// The command that fills the cache.
    pub fetch_command: String,
}
