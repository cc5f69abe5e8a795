//! A folder of plain-text or Markdown files (for example report 001's scraped
//! pages), one [`Document`] per file.
//!
//! Every `*.txt` and `*.md` file (extension case-insensitive) under the folder is
//! read, subfolders included. Hidden files and folders (name starting with `.`)
//! are skipped, and symbolic links to folders are not followed.

use crate::{Document, Error, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Load every `*.txt` / `*.md` file under `dir` (recursively), sorted by path
/// relative to `dir`.
///
/// * `id`: the relative path without its extension, with `/` separators
///   (`news/2024-01-02`);
/// * `title`: the first non-empty line, trimmed, with leading `#` (a Markdown
///   heading) stripped; the file stem when no line has text;
/// * `text`: the whole file (a leading UTF-8 byte-order mark removed);
/// * `meta["path"]`: the relative path with extension.
///
/// # Errors
///
/// * [`Error::Io`] when `dir` or a file in it cannot be read;
/// * [`Error::Malformed`] naming the file and the line of the first invalid
///   UTF-8 byte;
/// * [`Error::BadInput`] for a non-UTF-8 file name, or two files that map to the
///   same id (`a.txt` and `a.md`);
/// * [`Error::Empty`] naming `dir` when it holds no text file.
pub fn load(dir: &Path) -> Result<Vec<Document>> {
    let mut files = Vec::new();
    walk(dir, dir, &mut files)?;
    if files.is_empty() {
        return Err(Error::Empty(format!(
            "no .txt or .md files under {}",
            dir.display()
        )));
    }
    files.sort();

    let mut docs: Vec<Document> = Vec::with_capacity(files.len());
    let mut seen: HashMap<String, String> = HashMap::new(); // id -> relative path
    for (rel, path) in files {
        let id = match rel.rfind('.') {
            Some(dot) => rel[..dot].to_string(),
            None => rel.clone(),
        };
        if let Some(other) = seen.get(&id) {
            return Err(Error::bad_input(
                &path,
                format!("`{rel}` and `{other}` map to the same document id `{id}`"),
            ));
        }
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let at = e.utf8_error().valid_up_to();
            let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
            Error::malformed(&path, line, format!("invalid UTF-8 at byte {at}"))
        })?;
        let text = match text.strip_prefix('\u{feff}') {
            Some(rest) => rest.to_string(),
            None => text,
        };
        let title = text
            .lines()
            .map(|l| l.trim().trim_start_matches('#').trim())
            .find(|l| !l.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| {
                path.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            });
        docs.push(Document::new(id.clone(), title, text).with_meta("path", rel.as_str()));
        seen.insert(id, rel);
    }
    Ok(docs)
}

/// Collect `(relative path with '/' separators, full path)` of the text files under `dir`.
fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let ft = entry.file_type().map_err(|e| Error::io(&path, e))?;
        if ft.is_dir() {
            walk(root, &path, out)?;
            continue;
        }
        // Regular files, and symbolic links that resolve to files.
        let is_file = ft.is_file() || (ft.is_symlink() && path.is_file());
        let is_text = path
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| x.eq_ignore_ascii_case("txt") || x.eq_ignore_ascii_case("md"));
        if !(is_file && is_text) {
            continue;
        }
        let rel = path.strip_prefix(root).expect("walk stays under root");
        let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
        let Some(parts) = parts else {
            return Err(Error::bad_input(&path, "file name is not valid UTF-8"));
        };
        out.push((parts.join("/"), path));
    }
    Ok(())
}
