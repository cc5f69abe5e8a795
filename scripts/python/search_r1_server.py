"""Search-R1's retrieval server as a benchmark peer (scripts/bin/bench_serve.rs).

Runs `search_r1/search/retrieval_server.py` of a Search-R1 checkout (PeterGriffinJin/Search-R1;
read at a14dc3a4) on the CPU, over a corpus and passage vectors the benchmark writes:

    python scripts/python/search_r1_server.py --search-r1 PATH/TO/Search-R1 \
        --corpus corpus.jsonl --vectors vectors.f32 --dim 384 --model MODEL_DIR \
        --topk 3 --port 8001 [--extra-packages DIR]

What is Search-R1's own code: the FastAPI app and its `/retrieve` endpoint, `QueryRequest`,
`DenseRetriever` (FAISS search, `load_docs` over the `datasets` corpus), `Encoder` (its
tokenisation, mean pooling and normalisation), `Config`. What this runner does instead of the
script's `__main__` block: it builds the same `Config` (dense retriever, mean pooling, query
length 256, batch 512) with the given model, index, corpus, top k, `faiss_gpu=False` and
`retrieval_use_fp16=False` (the `__main__` block sets fp16, which is for GPUs), and serves the
app with uvicorn on 127.0.0.1 at the given port (the block's port is fixed at 8000). Search-R1's
`load_model` and `Encoder.encode` call `.cuda()` unconditionally; on a machine without CUDA
those calls are made no-ops (`torch.nn.Module.cuda`, `torch.Tensor.cuda` return their object),
so everything runs on the CPU and nothing else changes.

The index is a FAISS `IndexFlatIP` over the given vectors (the workbench's MiniLM passage
vectors, float32, row i = line i of the corpus), the exact flat index the workbench's dense
retriever searches. `--extra-packages DIR` is appended to `sys.path` after the venv's own
packages (Search-R1's dependencies the peers venv lacks: faiss-cpu, datasets, fastapi, uvicorn),
so the venv's versions of shared packages win.
"""

import argparse
import os
import runpy
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--search-r1", required=True, help="a Search-R1 checkout")
    ap.add_argument("--corpus", required=True, help='JSON lines {"id", "contents"}')
    ap.add_argument("--vectors", required=True, help="float32 rows, one per corpus line")
    ap.add_argument("--dim", type=int, required=True)
    ap.add_argument("--model", required=True, help="the encoder folder (Hugging Face layout)")
    ap.add_argument("--topk", type=int, default=3)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--threads", type=int, default=0,
                    help="torch and FAISS threads (0: their defaults)")
    ap.add_argument("--extra-packages", default=None)
    args = ap.parse_args()
    if args.extra_packages:
        sys.path.append(os.path.abspath(args.extra_packages))

    import faiss
    import numpy as np
    import torch
    import uvicorn

    if args.threads > 0:
        torch.set_num_threads(args.threads)
        # This thread's OpenMP setting; the request threads take OMP_NUM_THREADS, which
        # bench_serve sets in this process's environment.
        faiss.omp_set_num_threads(args.threads)
    if not torch.cuda.is_available():
        torch.nn.Module.cuda = lambda self, *a, **k: self
        torch.Tensor.cuda = lambda self, *a, **k: self

    vectors = np.fromfile(args.vectors, dtype=np.float32)
    if vectors.size % args.dim:
        sys.exit(f"{args.vectors}: {vectors.size} floats is not a multiple of --dim {args.dim}")
    vectors = vectors.reshape(-1, args.dim)
    index = faiss.IndexFlatIP(args.dim)
    index.add(vectors)
    index_path = os.path.join(os.path.dirname(os.path.abspath(args.vectors)), "flat_ip.index")
    faiss.write_index(index, index_path)

    script = os.path.join(args.search_r1, "search_r1", "search", "retrieval_server.py")
    if not os.path.isfile(script):
        sys.exit(f"{script}: not found (--search-r1 must be a checkout of PeterGriffinJin/Search-R1)")
    # The module's globals without running its __main__ block.
    mod = runpy.run_path(script, run_name="search_r1_retrieval_server")
    config = mod["Config"](
        retrieval_method="minilm",  # no "e5" / "bge" / "dpr" in the name: no prefix, normalised
        index_path=index_path,
        corpus_path=os.path.abspath(args.corpus),
        retrieval_topk=args.topk,
        faiss_gpu=False,
        retrieval_model_path=args.model,
        retrieval_pooling_method="mean",
        retrieval_query_max_length=256,
        retrieval_use_fp16=False,
        retrieval_batch_size=512,
    )
    # retrieve_endpoint reads the module globals `config` and `retriever`, as __main__ sets them.
    endpoint_globals = mod["retrieve_endpoint"].__globals__
    endpoint_globals["config"] = config
    endpoint_globals["retriever"] = mod["get_retriever"](config)
    print(
        f"search-r1 server: {index.ntotal} passages, http://127.0.0.1:{args.port}/retrieve, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), faiss {faiss.__version__} "
        f"({faiss.omp_get_max_threads()} threads)",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(mod["app"], host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
