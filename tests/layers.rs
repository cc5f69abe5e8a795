//! The library's layering, checked from its sources.
//!
//! `syn` parses every file of `workbench/src`. A reference from one file to another is an
//! edge: a `use` tree (grouped, renamed or globbed; starting at `crate::`, `super::`,
//! `self::` or a child module), a path in code (expressions, types, patterns; through the
//! names a file imports and through re-exports to the file that defines the item), and a
//! `crate::` / `super::` / `self::` path inside a macro call. Items under `#[cfg(test)]`
//! are not library code and are skipped; visibility paths (`pub(super)`) name no item.
//!
//! Checked:
//! - every top-level module is in exactly one layer of `ARCHITECTURE.md`'s table;
//! - a module uses only modules of its own layer or of layers below it;
//! - the modules form no cycle;
//! - the files form no cycle (a re-export, `pub use`, makes no file edge: it names an item
//!   for others, it does not use it; `pub(crate) use` and a private `use` do).
//!
//! The planted-violation tests copy the sources, add one violation of each kind and show
//! that the check reports it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit_mut::VisitMut;

type ModPath = Vec<String>;

/// One reference: from a file (in a module) to an absolute path in the crate.
struct Reference {
    from_file: PathBuf,
    target: ModPath,
    /// Made by a `pub use`: counts for modules, not for files.
    reexport: bool,
}

/// The crate's sources, parsed.
struct Crate {
    /// Module path → the file that holds it.
    modules: BTreeMap<ModPath, PathBuf>,
    /// File → (imported name → absolute path) from its `use` items.
    aliases: BTreeMap<PathBuf, BTreeMap<String, ModPath>>,
    /// File → module path of the file.
    file_module: BTreeMap<PathBuf, ModPath>,
    refs: Vec<Reference>,
}

fn rust_files(p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for e in entries {
            rust_files(&e, out);
        }
    } else if p.extension().is_some_and(|e| e == "rs") {
        out.push(p.to_path_buf());
    }
}

fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().to_string())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    // `cfg(test)` or `cfg(all(test, …))`: compiled only into tests. `any(test, …)` and
    // `not(test)` are library code.
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && matches!(&a.meta, syn::Meta::List(l) if {
                let t = l.tokens.to_string().replace(' ', "");
                t == "test" || (t.starts_with("all(") && t[4..].split([',', ')']).any(|w| w == "test"))
            })
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Every leaf of a `use` tree as (path segments, the name it binds or `*`).
fn use_leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(ModPath, String)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut path = prefix.clone();
            if name == "self" {
                let bound = path.last().cloned().unwrap_or_default();
                out.push((path, bound));
            } else {
                path.push(name.clone());
                out.push((path, name));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push((path, r.rename.to_string()));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), "*".into())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix, out);
            }
        }
    }
}

/// The paths one file writes, before resolution.
#[derive(Default)]
struct FileScan {
    /// (module the path is written in, segments, from a `pub use`, the name a `use` binds).
    paths: Vec<(ModPath, ModPath, bool, Option<String>)>,
    /// Inline (non-test) modules declared in the file.
    inline_modules: Vec<ModPath>,
    stack: ModPath,
}

impl VisitMut for FileScan {
    fn visit_item_mut(&mut self, item: &mut syn::Item) {
        if is_cfg_test(item_attrs(item)) {
            return;
        }
        syn::visit_mut::visit_item_mut(self, item);
    }
    fn visit_item_mod_mut(&mut self, m: &mut syn::ItemMod) {
        if m.content.is_some() {
            self.stack.push(m.ident.to_string());
            self.inline_modules.push(self.stack.clone());
            syn::visit_mut::visit_item_mod_mut(self, m);
            self.stack.pop();
        }
    }
    fn visit_item_use_mut(&mut self, u: &mut syn::ItemUse) {
        // `pub use` names an item for other modules; `pub(crate) use` and a private `use`
        // are used by the file itself (a glob's names as well), so they make file edges.
        let reexport = matches!(u.vis, syn::Visibility::Public(_));
        let mut leaves = Vec::new();
        use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
        for (path, bound) in leaves {
            self.paths
                .push((self.stack.clone(), path, reexport, Some(bound)));
        }
    }
    fn visit_visibility_mut(&mut self, _: &mut syn::Visibility) {}
    fn visit_path_mut(&mut self, p: &mut syn::Path) {
        let segs: ModPath = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.paths.push((self.stack.clone(), segs, false, None));
        syn::visit_mut::visit_path_mut(self, p);
    }
    fn visit_macro_mut(&mut self, m: &mut syn::Macro) {
        // The tokens as text (`crate :: a :: B`, brackets glued to their first token):
        // every `crate::`, `super::` or `self::` path in them.
        let text = m.tokens.to_string();
        let path = regex::Regex::new(r"\b(crate|super|self)((?:\s*::\s*\w+)+)").unwrap();
        for c in path.captures_iter(&text) {
            let mut segs = vec![c[1].to_string()];
            segs.extend(
                c[2].split("::")
                    .map(str::trim)
                    .filter(|w| !w.is_empty())
                    .map(str::to_string),
            );
            self.paths.push((self.stack.clone(), segs, false, None));
        }
        syn::visit_mut::visit_macro_mut(self, m);
    }
}

impl Crate {
    fn parse(src: &Path) -> Crate {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        let mut modules = BTreeMap::new();
        let mut file_module = BTreeMap::new();
        let mut scans = Vec::new();
        for f in &files {
            let m = module_of(src, f);
            modules.insert(m.clone(), f.clone());
            file_module.insert(f.clone(), m.clone());
            let text = std::fs::read_to_string(f).unwrap();
            let mut ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let mut scan = FileScan {
                stack: m,
                ..FileScan::default()
            };
            scan.visit_file_mut(&mut ast);
            scans.push((f.clone(), scan));
        }
        for (f, scan) in &scans {
            for m in &scan.inline_modules {
                modules.entry(m.clone()).or_insert_with(|| f.clone());
            }
        }
        let mut krate = Crate {
            modules,
            aliases: BTreeMap::new(),
            file_module,
            refs: Vec::new(),
        };
        // Imported names first (a file may use a name above the `use` that binds it).
        for (f, scan) in &scans {
            let mut map = BTreeMap::new();
            for (at, segs, _, bound) in &scan.paths {
                let Some(name) = bound.as_ref().filter(|n| *n != "*" && *n != "_") else {
                    continue;
                };
                if let Some(abs) = krate.absolute(at, f, segs, false) {
                    map.insert(name.clone(), abs);
                }
            }
            krate.aliases.insert(f.clone(), map);
        }
        for (f, scan) in &scans {
            for (at, segs, reexport, bound) in &scan.paths {
                if bound.is_none() && segs.len() == 1 {
                    // A bare name: only an imported one refers to the crate.
                    if let Some(abs) = krate.aliases[f].get(&segs[0]).cloned() {
                        krate.refs.push(Reference {
                            from_file: f.clone(),
                            target: abs,
                            reexport: false,
                        });
                    }
                    continue;
                }
                if let Some(abs) = krate.absolute(at, f, segs, true) {
                    krate.refs.push(Reference {
                        from_file: f.clone(),
                        target: abs,
                        reexport: *reexport,
                    });
                }
            }
        }
        krate
    }

    /// `segs` written in module `at` of `file`, as an absolute path; `None` outside the crate.
    fn absolute(
        &self,
        at: &ModPath,
        file: &Path,
        segs: &ModPath,
        aliases: bool,
    ) -> Option<ModPath> {
        let first = segs.first()?;
        let mut base = at.clone();
        let rest: &[String] = match first.as_str() {
            "crate" => {
                base.clear();
                &segs[1..]
            }
            "self" => &segs[1..],
            "super" => {
                let supers = segs.iter().take_while(|s| *s == "super").count();
                for _ in 0..supers {
                    base.pop()?;
                }
                &segs[supers..]
            }
            name => {
                let mut child = at.clone();
                child.push(name.to_string());
                if self.modules.contains_key(&child) {
                    &segs[..]
                } else if let Some(abs) = aliases
                    .then(|| self.aliases.get(file).and_then(|m| m.get(name)))
                    .flatten()
                {
                    let mut p = abs.clone();
                    p.extend(segs[1..].iter().cloned());
                    return Some(p);
                } else {
                    return None;
                }
            }
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The module (and so the file) that defines what `abs` names.
    fn defining_module(&self, abs: &ModPath) -> ModPath {
        self.defining_item(abs).0
    }

    /// The module that defines what `abs` names, and the item's name in it (`None` when
    /// `abs` names the module itself): the longest module prefix, followed through the
    /// re-exports of that module's file.
    fn defining_item(&self, abs: &ModPath) -> (ModPath, Option<String>) {
        let mut abs = abs.clone();
        let mut module = Vec::new();
        for _ in 0..8 {
            let k = (0..=abs.len())
                .rev()
                .find(|&k| self.modules.contains_key(&abs[..k]))
                .unwrap_or(0);
            module = abs[..k].to_vec();
            let Some(name) = abs.get(k).cloned() else {
                return (module, None);
            };
            let file = &self.modules[&module];
            match self.aliases.get(file).and_then(|m| m.get(&name)) {
                Some(target) if target != &abs[..=k] => {
                    let mut next = target.clone();
                    next.extend(abs[k + 1..].iter().cloned());
                    abs = next;
                }
                _ => return (module, Some(name)),
            }
        }
        (module, None)
    }

    /// Top-level module → top-level modules it references.
    fn module_edges(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for m in self.modules.keys().filter(|m| m.len() == 1) {
            out.entry(m[0].clone()).or_default();
        }
        for r in &self.refs {
            let from = &self.file_module[&r.from_file];
            let to = self.defining_module(&r.target);
            if let (Some(a), Some(b)) = (from.first(), to.first()) {
                if a != b {
                    out.entry(a.clone()).or_default().insert(b.clone());
                }
            }
        }
        out
    }

    /// File → files it uses (re-exports excluded), as paths relative to `src`.
    fn file_edges(&self, src: &Path) -> BTreeMap<String, BTreeSet<String>> {
        let rel = |p: &Path| p.strip_prefix(src).unwrap().display().to_string();
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for r in self.refs.iter().filter(|r| !r.reexport) {
            let to = &self.modules[&self.defining_module(&r.target)];
            if to != &r.from_file {
                out.entry(rel(&r.from_file)).or_default().insert(rel(to));
            }
        }
        out
    }
}

/// A path `from → … → from`, if there is one.
fn cycle_through(g: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    fn dfs(
        g: &BTreeMap<String, BTreeSet<String>>,
        at: &str,
        goal: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in g.get(at).into_iter().flatten() {
            if next == goal {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if dfs(g, next, goal, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![from.to_string()];
    dfs(g, from, from, &mut path, &mut BTreeSet::new()).then_some(path)
}

/// The layers of `ARCHITECTURE.md`'s table, bottom first: (layer, its modules).
fn documented_layers(architecture: &str) -> Vec<(String, Vec<String>)> {
    let section = architecture
        .split("## Layers")
        .nth(1)
        .expect("ARCHITECTURE.md has a '## Layers' section");
    section
        .lines()
        .skip_while(|l| !l.starts_with("| layer"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let modules = cells[2]
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect();
            (cells[1].to_string(), modules)
        })
        .collect()
}

/// Every violation of the rules above, as readable lines.
fn violations(src: &Path, architecture: &str) -> Vec<String> {
    let krate = Crate::parse(src);
    let layers = documented_layers(architecture);
    let mut rank = BTreeMap::new();
    let mut out = Vec::new();
    for (i, (layer, modules)) in layers.iter().enumerate() {
        for m in modules {
            if let Some((other, _)) = rank.insert(m.clone(), (layer.clone(), i)) {
                out.push(format!("`{m}` is in two layers: {other} and {layer}"));
            }
        }
    }
    let modules = krate.module_edges();
    for m in modules.keys() {
        if !rank.contains_key(m) {
            out.push(format!("`{m}` is in no layer of ARCHITECTURE.md"));
        }
    }
    for m in rank.keys() {
        if !modules.contains_key(m) {
            out.push(format!(
                "`{m}` of ARCHITECTURE.md's layers is no module of the library"
            ));
        }
    }
    for (a, targets) in &modules {
        for b in targets {
            if let (Some((la, ra)), Some((lb, rb))) = (rank.get(a), rank.get(b)) {
                if rb > ra {
                    out.push(format!("`{a}` ({la}) uses `{b}` ({lb}), a layer above it"));
                }
            }
        }
    }
    let mut seen = BTreeSet::new();
    for m in modules.keys() {
        if let Some(c) = cycle_through(&modules, m) {
            let key: BTreeSet<_> = c.iter().cloned().collect();
            if seen.insert(key) {
                out.push(format!("module cycle: {}", c.join(" → ")));
            }
        }
    }
    let files = krate.file_edges(src);
    let mut seen = BTreeSet::new();
    for f in files.keys() {
        if let Some(c) = cycle_through(&files, f) {
            let key: BTreeSet<_> = c.iter().cloned().collect();
            if seen.insert(key) {
                out.push(format!("file cycle: {}", c.join(" → ")));
            }
        }
    }
    out
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn architecture() -> String {
    std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap()
}

#[test]
fn the_library_keeps_its_layers() {
    let src = root().join("workbench/src");
    let found = violations(&src, &architecture());
    assert!(
        found.is_empty(),
        "layering violations:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_finds_known_edges() {
    let src = root().join("workbench/src");
    let krate = Crate::parse(&src);
    let modules = krate.module_edges();
    assert!(modules.len() > 20, "found only {:?}", modules.keys());
    assert!(modules["pipeline"].contains("retrieve"));
    // `crate::Error` is defined in `error` (re-exported at the root).
    assert!(
        modules["retrieve"].contains("error"),
        "{:?}",
        modules["retrieve"]
    );
    assert_eq!(documented_layers(&architecture()).len(), 6);
}

/// The files that build a pipeline or a study's systems from their specs, besides every
/// file of the stages whose specs build themselves ([`BUILDER_DIRS`]).
const BUILDERS: [&str; 4] = [
    "pipeline/systems.rs",
    "pipeline/mod.rs",
    "pipeline/reader.rs",
    "build.rs",
];

/// Stages whose specs build themselves (`RetrieverSpec::build`, `RerankerSpec::build`,
/// `ReaderSpec::build`): every file under them is a builder.
const BUILDER_DIRS: [&str; 3] = ["retrieve/", "rerank/", "read/"];

fn is_builder(file: &str) -> bool {
    BUILDERS.contains(&file) || BUILDER_DIRS.iter().any(|d| file.starts_with(d))
}

/// What the builders may name in `crate::train`: types and constants, reading a finished
/// checkpoint, the seeded split that says which questions a trained model saw, and the
/// guard that makes training fail while they run (`no_training`).
fn builder_may_use(module: &ModPath, item: Option<&str>) -> bool {
    let in_file = |file: &str| module.len() == 2 && module[1] == file;
    match item {
        None => true,
        Some(i) if i.starts_with(|c: char| c.is_ascii_uppercase()) => true,
        Some("read_done") => in_file("checkpoint"),
        Some("hash_test_side") => in_file("qa_data"),
        Some("no_training") => module == &["train".to_string()] || in_file("run"),
        Some(_) => false,
    }
}

/// Every call from a builder file into training, or into resolution (which may train).
fn builder_training_calls(src: &Path) -> Vec<String> {
    let krate = Crate::parse(src);
    let mut out = BTreeSet::new();
    for r in &krate.refs {
        let from = r.from_file.strip_prefix(src).unwrap().display().to_string();
        if !is_builder(&from) || r.reexport {
            continue;
        }
        let (module, item) = krate.defining_item(&r.target);
        let named = format!(
            "{}::{}",
            module.join("::"),
            item.clone().unwrap_or_default()
        );
        let trains = match module.first().map(String::as_str) {
            Some("train") => !builder_may_use(&module, item.as_deref()),
            Some("pipeline") => {
                module.get(1).map(String::as_str) == Some("trained")
                    && item
                        .as_deref()
                        .is_some_and(|i| i.starts_with(|c: char| c.is_ascii_lowercase()))
            }
            _ => false,
        };
        if trains {
            out.insert(format!("{from} calls {named}"));
        }
    }
    out.into_iter().collect()
}

#[test]
fn builders_never_train() {
    let src = root().join("workbench/src");
    let found = builder_training_calls(&src);
    assert!(
        found.is_empty(),
        "builders that may train:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_builder_that_trains_is_reported() {
    for (file, line, expect) in [
        (
            "pipeline/systems.rs",
            "fn _planted() { let _ = crate::train::colbert::train_or_load; }",
            "pipeline/systems.rs calls train::colbert::train_or_load",
        ),
        (
            "pipeline/mod.rs",
            "use crate::train::cross_recipe as _cr;\nfn _planted() { let _ = _cr::recipe_groups; }",
            "pipeline/mod.rs calls train::cross_recipe::recipe_groups",
        ),
        (
            "pipeline/reader.rs",
            "fn _planted() { let _ = super::trained::for_config; }",
            "pipeline/reader.rs calls pipeline::trained::for_config",
        ),
        (
            "rerank/spec.rs",
            "fn _planted() { let _ = crate::train::cross_recipe::train_or_load; }",
            "rerank/spec.rs calls train::cross_recipe::train_or_load",
        ),
        (
            "retrieve/bm25.rs",
            "fn _planted() { let _ = crate::train::train; }",
            "retrieve/bm25.rs calls train::run::train",
        ),
        (
            "read/spec.rs",
            "fn _planted() { let _ = crate::train::train; }",
            "read/spec.rs calls train::run::train",
        ),
    ] {
        let dir = scratch_copy(&[(file, line)]);
        let copy = dir.path().join("src");
        let found = builder_training_calls(&copy);
        assert!(
            found.iter().any(|f| f == expect),
            "planting {line:?} in {file}: expected {expect:?}, got {found:?}"
        );
    }
}

/// A scratch copy of the sources (in `<dir>/src`) with each `(file, line)` appended.
fn scratch_copy(lines: &[(&str, &str)]) -> tempfile::TempDir {
    let src = root().join("workbench/src");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    for f in &files {
        let to = copy.join(f.strip_prefix(&src).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(f, &to).unwrap();
    }
    for (file, line) in lines {
        let target = copy.join(file);
        let text = std::fs::read_to_string(&target).unwrap_or_default();
        std::fs::write(&target, format!("{text}\n{line}\n")).unwrap();
    }
    dir
}

/// The violations of a scratch copy with `lines` planted, checked against `arch` (the
/// layer table), that the sources do not have against ARCHITECTURE.md.
fn plant(lines: &[(&str, &str)], arch: &str) -> Vec<String> {
    let src = root().join("workbench/src");
    let dir = scratch_copy(lines);
    let before: BTreeSet<String> = violations(&src, &architecture()).into_iter().collect();
    violations(&dir.path().join("src"), arch)
        .into_iter()
        .filter(|v| !before.contains(v))
        .collect()
}

#[test]
fn a_table_listing_a_module_twice_or_no_module_is_reported() {
    let arch = architecture().replace(
        "| grading | `grade` |",
        "| grading | `grade`, `text`, `zz` |",
    );
    assert_ne!(
        arch,
        architecture(),
        "the grading row of ARCHITECTURE.md changed"
    );
    let found = plant(&[], &arch);
    assert!(
        found.iter().any(|v| v.contains("`text` is in two layers")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|v| v.contains("`zz` of ARCHITECTURE.md's layers is no module")),
        "{found:?}"
    );
}

#[test]
fn planted_violations_are_reported() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        // A grouped import of a layer above.
        (&[("text/mod.rs", "use crate::{pipeline::_planted_item, Error as _E};")], "`text` (core) uses `pipeline`"),
        // A path in an expression, one layer up.
        (&[("load/mod.rs", "fn _planted() { let _ = crate::retrieve::_planted_item; }")], "`load` (data) uses `retrieve`"),
        // Inside a macro call, and inside brackets in it.
        (&[("paths.rs", "fn _planted() { println!(\"{:?}\", crate::grade::_planted_item); }")], "`paths` (core) uses `grade`"),
        (&[("paths.rs", "fn _planted() { println!(\"{:?}\", Some(crate::study::_planted_item)); }")], "`paths` (core) uses `study`"),
        // Through a name the file imports.
        (&[("types.rs", "use crate::plot as _p;\nfn _planted() { let _ = _p::_planted_item; }")], "`types` (core) uses `plot`"),
        // Library code that is also compiled into tests.
        (&[("text/mod.rs", "#[cfg(any(test, feature = \"dense\"))]\npub fn _planted() { let _ = crate::pipeline::_planted_item; }")], "`text` (core) uses `pipeline`"),
        // Two modules of one layer using each other.
        (&[("retrieve/tfidf.rs", "fn _planted() { let _ = crate::rerank::_planted_item; }")], "module cycle"),
        // Two files using each other through `super::` in code, or through `use` alone.
        (&[("retrieve/bm25.rs", "fn _planted_b() { let _ = super::tfidf::_planted_t; }"),
           ("retrieve/tfidf.rs", "fn _planted_t() { let _ = super::bm25::_planted_b; }")], "file cycle: retrieve/"),
        (&[("retrieve/bm25.rs", "use super::tfidf::_planted_t as _t;"),
           ("retrieve/tfidf.rs", "use super::bm25::_planted_b as _b;")], "file cycle: retrieve/"),
        // A crate-visible glob import of a file that uses its `mod.rs`.
        (&[("retrieve/mod.rs", "pub(crate) use bm25::*;")], "file cycle: retrieve/"),
        // A module in no layer.
        (&[("lib.rs", "pub mod zz_planted;"), ("zz_planted.rs", "pub fn f() {}")], "`zz_planted` is in no layer"),
    ];
    for (lines, expect) in cases {
        let found = plant(lines, &architecture());
        assert!(
            found.iter().any(|v| v.contains(expect)),
            "planting {lines:?}: expected a violation containing {expect:?}, got {found:?}"
        );
    }
}
