"""BM25 peer: index a BEIR-style corpus with bm25s and time single-threaded retrieval.

Run with the peers venv (scripts/lib.sh `ensure_peers`):

    ~/.cache/rag-workbench/peers-venv/bin/python scripts/python/bench_bm25s.py \
        [--corpus corpus.jsonl] [--queries queries.jsonl | --queries-from-corpus N [--seed S]] \
        [--k1 0.9] [--b 0.4] [--method lucene|robertson] [--k 10] [--repeats 20] \
        [--backends numba,numpy] [--write-queries PATH] [--out PATH]

Defaults: the MS MARCO TREC DL19 subset in the project's hub cache (corpus.jsonl, 5,000
passages; queries.jsonl, 50 queries, 43 of them in qrels/test.tsv), k1=0.9, b=0.4 (Anserini),
method lucene, k=10, 20 repeats, backends numba and numpy.

Input (BEIR JSONL): corpus lines {"_id", "title"?, "text"}; the indexed text is
`title + " " + text` when the title is non-empty, else `text`. Query lines {"_id", "text"}.

Analysis (the same chain as the Rust `AnalyzerParams::plain()`: lowercase, no stopwords, no
stemming, no length filter), done here and handed to bm25s as lists of strings, so bm25s's
own tokenizer (which would lowercase first and use `(?u)\\b\\w\\w+\\b`, dropping 1-character
tokens and keeping `_`) is NOT used:

  1. tokens = maximal runs of characters in `[\\p{Alphabetic}\\p{N}]` (the `regex` module),
     i.e. exactly Rust's `char::is_alphanumeric` (Unicode Alphabetic or general category
     Nd/Nl/No); every other character, `_` included, separates tokens;
  2. each token lowercased with `str.lower()` (full Unicode mapping, like Rust's
     `str::to_lowercase`), after splitting.

bm25s scoring (0.3.16): `method="lucene"`: idf = ln(1 + (N - df + 0.5)/(df + 0.5));
`method="robertson"`: idf = ln((N - df + 0.5)/(df + 0.5)) CLAMPED at 0 (bm25s's
allow_negative=False). Both use the term score tf / (k1·(1 - b + b·dl/avgdl) + tf), i.e.
without the constant (k1+1) factor (it does not change the ranking). dl = number of tokens
after analysis. A query term repeated in the query counts once per occurrence; query tokens
not in the vocabulary are dropped.

Retrieval, one retriever per backend in `--backends` (default `numba,numpy`), all built from
the same analysed corpus:

  - `numba`: bm25s's fastest documented configuration, `BM25(backend="numba")` and
    `retrieve(..., backend_selection="numba", n_threads=1)`: the whole batch goes to one
    jitted function (`bm25s.numba.retrieve_utils._retrieve_internal_jitted_serial`, a dense
    per-query score array filled from the eager CSC scores, top-k with a heap). `n_threads=1`
    selects the serial (`nogil`) kernel, not the `parallel=True` one, and NUMBA_NUM_THREADS=1
    besides. The script checks that the serial kernel was compiled and the parallel one was
    not, and that numba's JIT is on (it fails otherwise). JIT compilation happens in the
    untimed warm-up pass. (bm25s 0.3.16's constructor skips `compile()` unless
    NUMBA_DISABLE_JIT is set, so indexing stays numpy; retrieval is jitted regardless.)
  - `numpy`: `backend="numpy"`, `backend_selection="numpy"` (scores accumulated with np.add.at
    over the eager CSC score matrix, top-k with np.argpartition, then sorted), `n_threads=0`
    (a plain loop in this thread: no thread pool, no processes).

OMP/MKL/OpenBLAS/NUMBA threads pinned to 1. One untimed warm-up pass per backend, then
`--repeats` timed passes over all queries, the backends alternating within each pass (their
order swapped every pass) so that both see the same machine load. Each pass times, from the
raw query strings: analysis of every query + `retriever.retrieve(...)` for all of them (one
batch call). Reported per backend: queries/s as the median over the passes (also min/max, and
the analysis-free retrieval-only rate), plus queries per CPU-second of this process and the
1-minute load average before/after (on a shared machine wall time depends on what else runs).
The backends' top-10 lists are compared with each other (`backends_top10_agree`).

bm25s fills the top k with score-0 documents when fewer than k documents match; those are
not matches and are removed from the printed top-10 lists (so a list can be shorter than 10).
Ties are broken by bm25s's argpartition/argsort order.

`--queries-from-corpus N`: N pseudo-queries, the first sentence of N passages drawn with
random.Random(seed).sample (seed 0), in draw order. First sentence = text up to and including
the first `.`, `!` or `?` that is followed by whitespace or the end (the whole text if there
is none). Query ids are `pq-<passage _id>`. `--write-queries PATH` writes the queries used as
BEIR JSONL, so the Rust side can run the same set.

Output: one JSON line on stdout (and in `--out`): settings, corpus/query stats, tokenize and
index times, and `peers` = one object per backend (in `--backends` order) with its
queries/s, checks and `top10` = {query id: [passage ids]}.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")
for _v in THREAD_VARS:
    os.environ[_v] = "1"

import bm25s  # noqa: E402
import numpy as np  # noqa: E402
import regex  # noqa: E402

try:
    import numba  # noqa: E402
except ImportError:  # only the numpy backend can run
    numba = None

ROOT = Path(__file__).resolve().parents[2]
HUB = Path(os.environ.get("WORKBENCH_HF_CACHE") or os.environ.get("HF_HUB_CACHE") or ROOT / "data/cache/huggingface/hub")
DL19 = HUB / "datasets--workbench-mirror--msmarco-trec-dl19-subset/snapshots/mirror-agentset-7a1376ca"

TOKEN_RE = regex.compile(r"[\p{Alphabetic}\p{N}]+")
FIRST_SENTENCE_RE = regex.compile(r"^\s*(.*?[.!?])(?=\s|$)", regex.DOTALL)


def analyze(text: str) -> list[str]:
    return [t.lower() for t in TOKEN_RE.findall(text)]


def read_jsonl(path: Path, required: tuple[str, ...] = ()) -> list[dict]:
    """Records of a JSONL file; a bad line, or a record without a `required` string field,
    is an error naming the file and line."""
    out = []
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{no}: not JSON: {e}")
            for field in required:
                v = rec.get(field) if isinstance(rec, dict) else None
                if not (isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))):
                    sys.exit(f"{path}:{no}: no string field `{field}`")
            out.append(rec)
    return out


def backend_checks(backend: str) -> dict:
    """Evidence that the timed code is the backend it claims to be; exits if it is not."""
    if backend == "numpy":
        return {"path": "numpy (np.add.at + np.argpartition)"}
    from bm25s.numba import retrieve_utils

    serial = retrieve_utils._retrieve_internal_jitted_serial.signatures
    parallel = retrieve_utils._retrieve_internal_jitted_parallel.signatures
    checks = {
        "path": "numba serial kernel _retrieve_internal_jitted_serial",
        "numba_disable_jit": bool(numba.config.DISABLE_JIT),
        "numba_num_threads": numba.config.NUMBA_NUM_THREADS,
        "serial_kernel_signatures": len(serial),
        "parallel_kernel_signatures": len(parallel),
    }
    if checks["numba_disable_jit"] or not serial or parallel or checks["numba_num_threads"] != 1:
        sys.exit(f"bm25s numba backend did not run the serial jitted kernel with 1 thread: {checks}")
    return checks


def emit_json_line(out: dict, path: Path | None) -> None:
    """Print `out` as one JSON line (the peer protocol), and write it to `path` if given."""
    line = json.dumps(out, ensure_ascii=False)
    print(line)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(line + "\n", encoding="utf-8")


def doc_text(d: dict) -> str:
    title = (d.get("title") or "").strip()
    return f"{title} {d['text']}" if title else d["text"]


def first_sentence(text: str) -> str:
    m = FIRST_SENTENCE_RE.match(text)
    return (m.group(1) if m else text).strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=DL19 / "corpus.jsonl")
    ap.add_argument("--queries", type=Path, default=DL19 / "queries.jsonl")
    ap.add_argument("--queries-from-corpus", type=int, metavar="N", default=0,
                    help="use N pseudo-queries (first sentences of N seeded-random passages) instead of --queries")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--k1", type=float, default=0.9)
    ap.add_argument("--b", type=float, default=0.4)
    ap.add_argument("--method", choices=["lucene", "robertson"], default="lucene")
    ap.add_argument("--k", type=int, default=10, help="retrieval depth (timed); top-10 ids are printed")
    ap.add_argument("--repeats", type=int, default=20,
                    help="timed passes; 0 = only write --write-queries, no index, no timing")
    ap.add_argument("--backends", default="numba,numpy",
                    help="comma-separated bm25s backends to time (numba, numpy), interleaved")
    ap.add_argument("--write-queries", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not backends or any(b not in ("numba", "numpy") for b in backends) or len(set(backends)) != len(backends):
        ap.error(f"--backends: a comma-separated subset of numba,numpy, got {args.backends!r}")
    if "numba" in backends and numba is None:
        sys.exit("--backends numba: numba is not installed in this Python")

    corpus = read_jsonl(args.corpus, ("_id", "text"))
    doc_ids = [str(d["_id"]) for d in corpus]
    texts = [doc_text(d) for d in corpus]

    if args.queries_from_corpus:
        rng = random.Random(args.seed)
        picks = rng.sample(range(len(corpus)), args.queries_from_corpus)
        queries = [{"_id": f"pq-{doc_ids[i]}", "text": first_sentence(corpus[i]["text"])} for i in picks]
        query_source = f"first sentence of {len(picks)} passages, random.Random({args.seed}).sample"
    else:
        queries = [{"_id": str(q["_id"]), "text": q["text"]} for q in read_jsonl(args.queries, ("_id", "text"))]
        query_source = str(args.queries)
    if args.write_queries:
        args.write_queries.parent.mkdir(parents=True, exist_ok=True)
        with open(args.write_queries, "w", encoding="utf-8") as f:
            for q in queries:
                f.write(json.dumps(q, ensure_ascii=False) + "\n")
    if args.repeats == 0:
        return  # only the queries were wanted
    qids = [q["_id"] for q in queries]
    qtexts = [q["text"] for q in queries]

    t0 = time.perf_counter()
    corpus_tokens = [analyze(t) for t in texts]
    t1 = time.perf_counter()
    retrievers, index_s = {}, {}
    for backend in backends:
        a = time.perf_counter()
        retrievers[backend] = bm25s.BM25(k1=args.k1, b=args.b, method=args.method, backend=backend)
        retrievers[backend].index(corpus_tokens, show_progress=False)
        index_s[backend] = time.perf_counter() - a
    tokenize_s = t1 - t0

    def run(backend):
        retriever = retrievers[backend]
        a = time.perf_counter()
        qtok = [analyze(q) for q in qtexts]
        b = time.perf_counter()
        if backend == "numba":
            docs, scores = retriever.retrieve(
                qtok, k=args.k, n_threads=1, backend_selection="numba", show_progress=False, sorted=True
            )
        else:
            docs, scores = retriever.retrieve(
                qtok, k=args.k, n_threads=0, backend_selection="numpy", show_progress=False, sorted=True
            )
        c = time.perf_counter()
        return c - a, c - b, docs, scores

    first = {b: run(b)[2:] for b in backends}  # warm-up (numba: JIT compilation happens here)
    checks = {b: backend_checks(b) for b in backends}
    load_before = os.getloadavg()[0]
    totals = {b: [] for b in backends}
    retr = {b: [] for b in backends}
    cpu = {b: 0.0 for b in backends}
    for p in range(args.repeats):
        for backend in backends if p % 2 == 0 else backends[::-1]:
            c0 = time.process_time()
            total, r, d2, _ = run(backend)
            cpu[backend] += time.process_time() - c0
            totals[backend].append(total)
            retr[backend].append(r)
            if not np.array_equal(d2, first[backend][0]):
                sys.exit(f"bm25s {backend}: a timed pass returned other documents than the warm-up")
    load_after = os.getloadavg()[0]

    n = len(queries)
    peers = []
    top10s = {}
    for backend in backends:
        docs, scores = first[backend]
        top10 = {}
        for qi, qid in enumerate(qids):
            top10[qid] = [doc_ids[int(j)] for j, s in zip(docs[qi][:10], scores[qi][:10]) if s > 0]
        top10s[backend] = top10
        med = statistics.median(totals[backend])
        peers.append({
            "name": f"bm25s-{backend}",
            "backend": backend,
            "checks": checks[backend],
            "index_s": round(index_s[backend], 4),
            "qps": round(n / med, 2),
            "qps_min": round(n / max(totals[backend]), 2),
            "qps_max": round(n / min(totals[backend]), 2),
            "qps_retrieve_only": round(n / statistics.median(retr[backend]), 2),
            "ms_per_query": round(1000 * med / n, 4),
            # process CPU time per pass (mean) -> queries per CPU-second; wall vs CPU shows contention
            "qps_cpu": round(n * args.repeats / cpu[backend], 2),
            "pass_seconds": [round(t, 5) for t in totals[backend]],
            "queries_with_fewer_than_10_hits": sum(len(v) < 10 for v in top10.values()),
            "top10": top10,
        })
    agree = None
    if len(backends) > 1:
        ref = top10s[backends[0]]
        agree = {
            b: sum(set(ref[q]) == set(top10s[b][q]) for q in qids) / n for b in backends[1:]
        }
    qtok_lens = [len(analyze(q)) for q in qtexts]
    out = {
        "peer": "bm25s",
        "bm25s_version": bm25s.__version__,
        "numpy_version": np.__version__,
        "numba_version": numba.__version__ if numba is not None else None,
        "python": sys.version.split()[0],
        "corpus": str(args.corpus),
        "num_passages": len(corpus),
        "vocab_size": len(retrievers[backends[0]].vocab_dict) - ("" in retrievers[backends[0]].vocab_dict),
        "avg_passage_tokens": round(sum(map(len, corpus_tokens)) / len(corpus_tokens), 3),
        "queries": query_source,
        "num_queries": n,
        "queries_sha256": hashlib.sha256("\n".join(f"{i}\t{t}" for i, t in zip(qids, qtexts)).encode()).hexdigest(),
        "avg_query_tokens": round(sum(qtok_lens) / n, 3),
        "params": {"k1": args.k1, "b": args.b, "method": args.method, "k": args.k},
        "analysis": "tokens = runs of [\\p{Alphabetic}\\p{N}], then str.lower(); no stopwords, no stemming, no min length",
        "threads": {v: os.environ[v] for v in THREAD_VARS},
        "repeats": args.repeats,
        "tokenize_corpus_s": round(tokenize_s, 4),
        "loadavg_1min": [round(load_before, 2), round(load_after, 2)],
        "backends_top10_agree": agree,
        "peers": peers,
    }
    emit_json_line(out, args.out)


if __name__ == "__main__":
    main()
