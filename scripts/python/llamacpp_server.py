"""Start llama.cpp's OpenAI-compatible server (the `xllamacpp` wheel) on a GGUF file.

    python scripts/python/llamacpp_server.py MODEL.gguf [--port 8080] [--threads 2] [--ctx 4096] [--parallel 1]

Prints one line, the API root (`http://127.0.0.1:PORT/v1`; without `--port`, a free port),
then serves until its standard
input closes or it is interrupted. A pipeline config reaches it with

    [reader]
    kind = "openai"
    base_url = "http://127.0.0.1:PORT/v1"
    model = "any name"        # llama.cpp serves the one model it loaded

`pip install xllamacpp` gives the wheel (no other dependency). The server binds the loopback
interface on a free port; nothing leaves the machine. With `--parallel N` it decodes up to N
requests together (llama.cpp's continuous batching; each gets ctx/N of the context).
"""

from __future__ import annotations

import argparse
import sys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="the .gguf file")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=4096, help="context length (shared by the parallel slots)")
    ap.add_argument("--parallel", type=int, default=1, help="requests decoded together")
    args = ap.parse_args()

    import xllamacpp as xlc

    p = xlc.CommonParams()
    p.model.path = args.model
    p.n_ctx = args.ctx
    p.n_parallel = args.parallel
    p.port = args.port
    p.cpuparams.n_threads = args.threads
    p.cpuparams_batch.n_threads = args.threads
    p.verbosity = 1
    server = xlc.Server(p)
    base = server.listening_address
    if not base.startswith("http://127.0.0.1:"):
        sys.exit(f"llama.cpp server is not on loopback: {base}")
    print(base + "/v1", flush=True)
    try:
        sys.stdin.read()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
