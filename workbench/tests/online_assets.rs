//! The online sources of `data/assets.toml` against real HTTP servers on 127.0.0.1:
//! pinned URLs (a good file, a truncated body, a wrong checksum, a 404, a server that
//! stalls mid-body) and the hub through hf-hub (a fake hub, an unreachable endpoint).
//! Every failure must name the asset, the URL and the fix, and leave nothing in the cache.

use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use workbench::assets::{Assets, FilledFrom};
use workbench::Error;

/// A real mirror file when the shared mirror is there, else a fixture of the same kind.
fn body() -> Vec<u8> {
    let real = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/mirror/msmarco-trec-dl19-subset/queries.jsonl");
    std::fs::read(real).unwrap_or_else(|_| {
        (0..200)
            .map(|i| format!("{{\"_id\": \"{i}\", \"text\": \"query number {i}\"}}\n"))
            .collect::<String>()
            .into_bytes()
    })
}

fn sha(bytes: &[u8]) -> String {
    hex_lower(&Sha256::digest(bytes))
}

fn hex_lower(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// One request as the server saw it.
struct Request {
    path: String,
    range: Option<String>,
}

/// What the server sends back: a head (status line and headers, `Content-Length`
/// included as given), a body, then either closes or keeps the connection open for
/// `stall` before closing.
struct Reply {
    head: String,
    body: Vec<u8>,
    stall: Option<Duration>,
}

impl Reply {
    fn ok(body: &[u8]) -> Self {
        Reply {
            head: format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\n",
                body.len()
            ),
            body: body.to_vec(),
            stall: None,
        }
    }
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

/// A server on 127.0.0.1 answering every connection with `handler`; returns its base URL.
fn serve(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handler: Arc<Handler> = Arc::new(handler);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let handler = handler.clone();
            std::thread::spawn(move || answer(stream, &*handler));
        }
    });
    format!("http://{addr}")
}

fn answer(mut stream: TcpStream, handler: &Handler) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut range = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("range") {
                range = Some(v.trim().to_string());
            }
        }
    }
    let reply = handler(&Request { path, range });
    let _ = stream.write_all(format!("{}Connection: close\r\n\r\n", reply.head).as_bytes());
    let _ = stream.write_all(&reply.body);
    let _ = stream.flush();
    if let Some(d) = reply.stall {
        std::thread::sleep(d);
    }
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A project with one asset `data-x` whose file `queries.jsonl` has `sha`, an online
/// source `online` (a TOML inline table) and, when `mirror` is given, a mirror folder
/// holding those bytes as the offline fill.
struct Project {
    tmp: tempfile::TempDir,
}

impl Project {
    fn new(online: &str, sha: &str, mirror: Option<&[u8]>) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("data")).unwrap();
        let source = match mirror {
            Some(bytes) => {
                let dir = root.join("mirror/x");
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join("queries.jsonl"), bytes).unwrap();
                "source = { type = \"mirror\", folder = \"x\" }\n"
            }
            None => "",
        };
        let toml = format!(
            "[asset.data-x]\nkind = \"dataset\"\nhf_id = \"workbench-mirror/data-x\"\nsnapshot = \"snap\"\n\
             license = \"test\"\ndescription = \"fixture\"\nonline = {online}\n{source}\
             [asset.data-x.files]\n\"queries.jsonl\" = {{ sha256 = \"{sha}\", from = \"queries.jsonl\" }}\n"
        );
        std::fs::write(root.join("data/assets.toml"), toml).unwrap();
        Project { tmp }
    }

    fn assets(&self) -> Assets {
        let root = self.tmp.path();
        let mut a = Assets::from_manifest(
            &root.join("data/assets.toml"),
            root.join("cache"),
            root.join("mirror"),
            root.join("wheels"),
        )
        .unwrap();
        a.offline = false;
        a.read_timeout = Duration::from_millis(800);
        a.connect_timeout = Duration::from_secs(2);
        a
    }

    fn snapshot(&self) -> PathBuf {
        self.tmp
            .path()
            .join("cache/datasets--workbench-mirror--data-x/snapshots/snap")
    }

    /// Every file under the cache folder (the hub staging folder included).
    fn cache_files(&self) -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else {
                    out.push(p);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.tmp.path().join("cache"), &mut out);
        out
    }
}

fn url_online(base: &str) -> String {
    format!("{{ type = \"url\", base = \"{base}/data/\", sha256_confirmed = true }}")
}

/// The failure of an online-only asset: names the asset, the URL and the fix, and
/// nothing (no file, no temporary file) is left in the cache.
fn assert_clean_failure(p: &Project, err: Error, url: &str, why: &[&str]) {
    let msg = err.to_string();
    assert!(matches!(err, Error::Fetch { .. }), "{err:?}");
    assert!(msg.contains("`data-x`"), "asset not named: {msg}");
    assert!(msg.contains(url), "URL not named: {msg}");
    assert!(
        msg.contains("Fix: run `cargo run --release --bin assets -- fetch data-x` on a machine with internet"),
        "no fix: {msg}"
    );
    assert!(
        why.iter().any(|w| msg.contains(w)),
        "cause {why:?} not in: {msg}"
    );
    assert_eq!(p.cache_files(), Vec::<PathBuf>::new(), "left in the cache");
}

#[test]
fn url_download_fills_the_cache_with_the_checked_file() {
    let bytes = body();
    let served = bytes.clone();
    let base = serve(move |r| {
        if r.path == "/data/queries.jsonl" {
            Reply::ok(&served)
        } else {
            Reply {
                head: "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n".into(),
                body: vec![],
                stall: None,
            }
        }
    });
    let p = Project::new(&url_online(&base), &sha(&bytes), None);
    let a = p.assets();
    let filled = a.fill("data-x").unwrap();
    assert_eq!(filled.from, FilledFrom::Online);
    assert_eq!(filled.dir, p.snapshot());
    let url = format!("{base}/data/");
    assert!(
        filled.message.contains("`data-x`") && filled.message.contains(&url),
        "{}",
        filled.message
    );
    let path = a.resolve("data-x", "queries.jsonl").unwrap();
    assert_eq!(path, p.snapshot().join("queries.jsonl"));
    assert_eq!(sha(&std::fs::read(&path).unwrap()), sha(&bytes));
    // Only the file and the ref: no temporary file.
    let mut files = p.cache_files();
    files.sort();
    assert_eq!(
        files,
        [
            p.tmp
                .path()
                .join("cache/datasets--workbench-mirror--data-x/refs/main"),
            path
        ]
    );
    // The next fill is a cache hit.
    assert_eq!(a.fill("data-x").unwrap().from, FilledFrom::Cache);
}

#[test]
fn resolve_downloads_a_missing_file_from_the_url() {
    let bytes = body();
    let served = bytes.clone();
    let base = serve(move |_| Reply::ok(&served));
    let p = Project::new(&url_online(&base), &sha(&bytes), None);
    let path = p.assets().resolve("data-x", "queries.jsonl").unwrap();
    assert_eq!(std::fs::read(path).unwrap(), bytes);
}

#[test]
fn truncated_body_is_an_error_and_leaves_nothing() {
    let bytes = body();
    let served = bytes.clone();
    // Content-Length claims more than is sent, then the server closes.
    let base = serve(move |_| Reply {
        head: format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n",
            served.len() + 100
        ),
        body: served.clone(),
        stall: None,
    });
    let p = Project::new(&url_online(&base), &sha(&bytes), None);
    let err = p.assets().fill("data-x").unwrap_err();
    assert_clean_failure(
        &p,
        err,
        &format!("{base}/data/queries.jsonl"),
        &["truncated", "broke off"],
    );
}

#[test]
fn wrong_checksum_is_an_error_and_leaves_nothing() {
    let bytes = body();
    let mut other = bytes.clone();
    other[0] ^= 1;
    let base = serve(move |_| Reply::ok(&other));
    let p = Project::new(&url_online(&base), &sha(&bytes), None);
    let err = p.assets().fill("data-x").unwrap_err();
    assert_clean_failure(
        &p,
        err,
        &format!("{base}/data/queries.jsonl"),
        &[&format!("expected {}", sha(&bytes))],
    );
}

#[test]
fn http_404_is_an_error_and_leaves_nothing() {
    let base = serve(|_| Reply {
        head: "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n".into(),
        body: b"not found".to_vec(),
        stall: None,
    });
    let bytes = body();
    let p = Project::new(&url_online(&base), &sha(&bytes), None);
    let err = p.assets().fill("data-x").unwrap_err();
    assert_clean_failure(
        &p,
        err,
        &format!("{base}/data/queries.jsonl"),
        &["HTTP 404"],
    );
    // resolve() says the same, with the command that fetches the asset.
    let err = p.assets().resolve("data-x", "queries.jsonl").unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::AssetMissing(_)), "{err:?}");
    assert!(
        msg.contains("data-x")
            && msg.contains("HTTP 404")
            && msg.contains(&format!("{base}/data/queries.jsonl"))
            && msg.contains("bin assets -- fetch data-x"),
        "{msg}"
    );
    assert_eq!(p.cache_files(), Vec::<PathBuf>::new());
}

#[test]
fn server_stalling_mid_body_is_an_error_and_leaves_nothing() {
    let bytes = body();
    let half = bytes[..bytes.len() / 2].to_vec();
    let len = bytes.len();
    // Half the body, then silence with the connection open (longer than the read timeout).
    let base = serve(move |_| Reply {
        head: format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n"),
        body: half.clone(),
        stall: Some(Duration::from_secs(10)),
    });
    let p = Project::new(&url_online(&base), &sha(&bytes), None);
    let start = std::time::Instant::now();
    let err = p.assets().fill("data-x").unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "{:?}",
        start.elapsed()
    );
    assert_clean_failure(
        &p,
        err,
        &format!("{base}/data/queries.jsonl"),
        &["broke off", "truncated"],
    );
}

#[test]
fn failed_url_falls_back_to_the_offline_fill_and_says_so() {
    let bytes = body();
    let base = serve(|_| Reply {
        head: "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n".into(),
        body: vec![],
        stall: None,
    });
    let p = Project::new(&url_online(&base), &sha(&bytes), Some(&bytes));
    let filled = p.assets().fill("data-x").unwrap();
    assert_eq!(filled.from, FilledFrom::Offline);
    let m = &filled.message;
    assert!(
        m.contains("`data-x`")
            && m.contains("offline fill (mirror folder `x`)")
            && m.contains("HTTP 404")
            && m.contains(&format!("{base}/data/queries.jsonl")),
        "{m}"
    );
    assert_eq!(
        std::fs::read(filled.dir.join("queries.jsonl")).unwrap(),
        bytes
    );
}

#[test]
fn offline_mode_never_contacts_the_online_source() {
    let bytes = body();
    let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = hits.clone();
    let served = bytes.clone();
    let base = serve(move |_| {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Reply::ok(&served)
    });
    let p = Project::new(&url_online(&base), &sha(&bytes), Some(&bytes));
    let mut a = p.assets();
    a.offline = true;
    let err = a
        .resolve("data-x", "queries.jsonl")
        .unwrap_err()
        .to_string();
    assert!(err.contains("WORKBENCH_OFFLINE=1"), "{err}");
    let filled = a.fill("data-x").unwrap();
    assert_eq!(filled.from, FilledFrom::Offline);
    assert!(
        filled.message.contains("WORKBENCH_OFFLINE=1"),
        "{}",
        filled.message
    );
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);
}

fn hub_online(repo: &str) -> String {
    format!(
        "{{ type = \"hub\", repo = \"{repo}\", revision = \"main\", sha256_confirmed = false }}"
    )
}

#[test]
fn unreachable_hub_falls_back_to_the_offline_fill_quickly() {
    let bytes = body();
    let p = Project::new(&hub_online("org/data-x"), &sha(&bytes), Some(&bytes));
    let mut a = p.assets();
    let port = closed_port();
    a.hub_endpoint = format!("http://127.0.0.1:{port}");
    let start = std::time::Instant::now();
    let filled = a.fill("data-x").unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(filled.from, FilledFrom::Offline);
    let m = &filled.message;
    assert!(
        m.contains("`data-x`")
            && m.contains("offline fill (mirror folder `x`)")
            && m.contains(&format!(
                "http://127.0.0.1:{port}/datasets/org/data-x/resolve/main/queries.jsonl"
            ))
            && m.contains("cannot connect"),
        "{m}"
    );
    assert_eq!(
        std::fs::read(filled.dir.join("queries.jsonl")).unwrap(),
        bytes
    );
    // No hub staging folder is left behind.
    assert!(!p.tmp.path().join("cache/.incoming").exists());
}

/// A fake hub for `GET /datasets/org/data-x/resolve/main/queries.jsonl`: hf-hub's
/// metadata request (`Range: bytes=0-0`) and its download, serving `bytes` with the
/// LFS etag `etag`.
fn fake_hub(bytes: Vec<u8>, etag: String) -> String {
    serve(move |r| {
        if r.path != "/datasets/org/data-x/resolve/main/queries.jsonl" {
            return Reply {
                head: "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n".into(),
                body: vec![],
                stall: None,
            };
        }
        let start: usize = r
            .range
            .as_deref()
            .and_then(|v| v.strip_prefix("bytes="))
            .and_then(|v| v.split('-').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let end = if r.range.as_deref() == Some("bytes=0-0") {
            1
        } else {
            bytes.len()
        };
        let part = bytes[start..end].to_vec();
        Reply {
            head: format!(
                "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{}/{}\r\n\
                 X-Repo-Commit: 0123456789abcdef0123456789abcdef01234567\r\nX-Linked-Etag: \"{etag}\"\r\nETag: \"{etag}\"\r\n",
                part.len(),
                end - 1,
                bytes.len()
            ),
            body: part,
            stall: None,
        }
    })
}

#[test]
fn hub_download_through_hf_hub_is_checked_and_moved_into_the_snapshot() {
    let bytes = body();
    let endpoint = fake_hub(bytes.clone(), sha(&bytes));
    let p = Project::new(&hub_online("org/data-x"), &sha(&bytes), Some(&bytes));
    let mut a = p.assets();
    a.hub_endpoint = endpoint;
    let filled = a.fill("data-x").unwrap();
    assert_eq!(filled.from, FilledFrom::Online, "{}", filled.message);
    assert!(
        filled.message.contains("hub org/data-x@main"),
        "{}",
        filled.message
    );
    let path = filled.dir.join("queries.jsonl");
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
    assert!(!p.tmp.path().join("cache/.incoming").exists());
}

#[test]
fn hub_file_with_another_checksum_is_refused_and_says_the_sha_was_unconfirmed() {
    let bytes = body();
    let mut other = bytes.clone();
    other[0] ^= 1;
    let endpoint = fake_hub(other.clone(), sha(&other));
    // Without an offline fill: the error; with one: the fallback.
    let p = Project::new(&hub_online("org/data-x"), &sha(&bytes), None);
    let mut a = p.assets();
    a.hub_endpoint = endpoint.clone();
    let err = a.fill("data-x").unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("`data-x`")
            && msg.contains(&format!(
                "{endpoint}/datasets/org/data-x/resolve/main/queries.jsonl"
            ))
            && msg.contains("sha256_confirmed = false")
            && msg.contains("Fix:"),
        "{msg}"
    );
    assert_eq!(p.cache_files(), Vec::<PathBuf>::new());
    let p = Project::new(&hub_online("org/data-x"), &sha(&bytes), Some(&bytes));
    let mut a = p.assets();
    a.hub_endpoint = endpoint;
    let filled = a.fill("data-x").unwrap();
    assert_eq!(filled.from, FilledFrom::Offline);
    assert_eq!(
        std::fs::read(filled.dir.join("queries.jsonl")).unwrap(),
        bytes
    );
}

#[test]
fn unpinned_hub_file_is_checked_against_the_hub_lfs_sha256() {
    let bytes = body();
    let write = |p: &Path| {
        std::fs::write(
            p.join("data/assets.toml"),
            format!(
                "[asset.data-x]\nkind = \"dataset\"\nhf_id = \"workbench-mirror/data-x\"\nsnapshot = \"snap\"\n\
                 license = \"test\"\ndescription = \"fixture\"\nonline = {}\n\
                 [asset.data-x.files]\n\"queries.jsonl\" = {{}}\n",
                hub_online("org/data-x")
            ),
        )
        .unwrap()
    };
    // The hub's LFS sha256 matches the bytes: accepted.
    let p = Project::new(&hub_online("org/data-x"), &sha(&bytes), None);
    write(p.tmp.path());
    let mut a = p.assets();
    a.hub_endpoint = fake_hub(bytes.clone(), sha(&bytes));
    assert_eq!(a.fill("data-x").unwrap().from, FilledFrom::Online);
    assert_eq!(
        a.input_checksums(["data-x"]).unwrap(),
        [("data-x/queries.jsonl".to_string(), "unpinned".to_string())]
    );
    // It does not: refused, nothing left.
    let p = Project::new(&hub_online("org/data-x"), &sha(&bytes), None);
    write(p.tmp.path());
    let mut a = p.assets();
    a.hub_endpoint = fake_hub(bytes.clone(), sha(b"something else"));
    let msg = a.fill("data-x").unwrap_err().to_string();
    assert!(
        msg.contains(&format!("expected {}", sha(b"something else"))),
        "{msg}"
    );
    assert_eq!(p.cache_files(), Vec::<PathBuf>::new());
}

#[test]
fn manifest_online_sources_are_validated() {
    let bytes = body();
    for (online, field) in [
        (
            "{ type = \"url\", base = \"ftp://x/\", sha256_confirmed = true }",
            "`base`",
        ),
        (
            "{ type = \"url\", base = \"https://x/no-slash\", sha256_confirmed = true }",
            "`base`",
        ),
        (
            "{ type = \"hub\", repo = \"\", revision = \"main\", sha256_confirmed = true }",
            "`repo`",
        ),
        (
            "{ type = \"hub\", repo = \"o/n\", revision = \" \", sha256_confirmed = true }",
            "`revision`",
        ),
    ] {
        let p = Project::new(online, &sha(&bytes), None);
        let root = p.tmp.path();
        let err = Assets::from_manifest(
            &root.join("data/assets.toml"),
            root.join("cache"),
            root.join("mirror"),
            root.join("wheels"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("`data-x`") && err.contains(field),
            "{online}: {err}"
        );
    }
    // A URL file needs a pinned sha256.
    let p = Project::new(&url_online("https://example.org"), &sha(&bytes), None);
    let root = p.tmp.path();
    let text = std::fs::read_to_string(root.join("data/assets.toml")).unwrap();
    let text = text.replace(
        &format!(
            "{{ sha256 = \"{}\", from = \"queries.jsonl\" }}",
            sha(&bytes)
        ),
        "{}",
    );
    std::fs::write(root.join("data/assets.toml"), text).unwrap();
    let err = Assets::from_manifest(
        &root.join("data/assets.toml"),
        root.join("cache"),
        root.join("mirror"),
        root.join("wheels"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("`sha256` is missing"), "{err}");
}

#[test]
fn every_asset_of_the_real_manifest_names_its_online_source() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let a = Assets::from_manifest(
        &root.join("data/assets.toml"),
        root.join("data/cache/huggingface/hub"),
        root.join("../shared/mirror"),
        root.join("data/cache/wheels"),
    )
    .unwrap();
    for (name, spec) in &a.specs {
        let online = spec
            .online
            .as_ref()
            .unwrap_or_else(|| panic!("`{name}` has no online source"));
        if let workbench::assets::Online::Url { base, .. } = online {
            // Pinned: a 40-hex commit in the URL.
            assert!(
                base.split('/')
                    .any(|c| c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit())),
                "`{name}`: {base} is not pinned to a commit"
            );
        }
        // Everything but report 000's Wikipedia, the full MS MARCO collection (which
        // bench_bm25_scale reads only with --corpus msmarco-passage), FlashRAG's multi-hop
        // and long-tail sets and its wiki-18 corpus (no registry package carries them) has
        // an offline fill.
        assert_eq!(
            spec.source.is_none(),
            [
                "wikipedia-20220301-en",
                "msmarco-passage-corpus",
                "flashrag-hotpotqa",
                "flashrag-2wikimultihopqa",
                "flashrag-musique",
                "flashrag-bamboogle",
                "flashrag-popqa",
                "wiki18-100w",
            ]
            .contains(&name.as_str()),
            "`{name}`"
        );
    }
}
