//! The library's top-level modules form no dependency cycle: every `crate::<module>`
//! reference outside comments is an edge, and no module reaches itself through them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_dir() {
        for e in std::fs::read_dir(p).unwrap() {
            rust_files(&e.unwrap().path(), out);
        }
    } else if p.extension().is_some_and(|e| e == "rs") {
        out.push(p.to_path_buf());
    }
}

/// `module → modules it references`, from the sources under `src`.
fn edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut modules = BTreeMap::new();
    for e in std::fs::read_dir(src).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        if name != "lib" && (p.is_dir() || p.extension().is_some_and(|e| e == "rs")) {
            modules.insert(name, p);
        }
    }
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, p) in &modules {
        let mut files = Vec::new();
        rust_files(p, &mut files);
        let refs = out.entry(m.clone()).or_default();
        for f in files {
            for line in std::fs::read_to_string(&f).unwrap().lines() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for (i, _) in line.match_indices("crate::") {
                    let rest = &line[i + "crate::".len()..];
                    let target: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                        .collect();
                    if target != *m && modules.contains_key(&target) {
                        refs.insert(target);
                    }
                }
            }
        }
    }
    out
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

#[test]
fn top_level_modules_have_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("workbench/src");
    let g = edges(&src);
    assert!(g.len() > 10, "found only {:?}", g.keys());
    assert!(
        g["pipeline"].contains("retrieve"),
        "the scan sees crate:: references"
    );
    let cycles: Vec<String> = g
        .keys()
        .filter_map(|m| cycle_through(&g, m))
        .map(|c| c.join(" → "))
        .collect();
    assert!(cycles.is_empty(), "module cycles: {cycles:#?}");
}

#[test]
fn the_scan_finds_a_planted_cycle() {
    let dir = std::env::temp_dir().join(format!("layers-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("b")).unwrap();
    std::fs::write(
        dir.join("a.rs"),
        "use crate::b::X;\n// crate::c in a comment\n",
    )
    .unwrap();
    std::fs::write(dir.join("b").join("mod.rs"), "fn f() { crate::a::g() }\n").unwrap();
    std::fs::write(dir.join("c.rs"), "use crate::a::Y;\n").unwrap();
    let g = edges(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(cycle_through(&g, "a").unwrap(), ["a", "b", "a"]);
    assert!(cycle_through(&g, "c").is_none());
}
