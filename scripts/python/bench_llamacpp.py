"""llama.cpp peer of bench_llm: a long-lived process that runs greedy generations on request.

Run with the peers venv (scripts/lib.sh `ensure_peers`); `bench_llm` starts it itself:

    ~/.cache/rag-workbench/peers-venv/bin/python scripts/python/bench_llamacpp.py \
        --model PATH.gguf [--threads 2] [--flash-attn auto|on|off] [--n-ctx 4096] \
        [--server-binary PATH/llama-server]

The process loads the GGUF into llama.cpp's server (xllamacpp; or, with `--server-binary`, a
`llama-server` built from source by build_llamacpp.py; see llamacpp_peer.py for the
configuration, the same for both: one slot, n_batch 2048 / n_ubatch 512, REPACK buffers, mmap, no prompt
cache), prints one JSON line `{"ready": true, "xllamacpp_version", "settings", "model"}`, and
then answers requests, one JSON object per stdin line, one JSON line per answer on stdout:

    request:  {"prompt_ids": [...], "n_predict": 64}
    answer:   {"prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "tokens": [...],
               "stop_type", "wall_ms"}

With `--parallel N` the server has N slots (each with `--n-ctx` positions) and a request
`{"batch": [[...], ...], "n_predict": 64}` sends its prompts at once, one HTTP request each
from its own thread, so the server decodes them together (continuous batching); the answer
is `{"wall_ms", "results": [answer, ...]}` with one answer as above per prompt, in order.

`prompt_ms` and `predicted_ms` are llama.cpp's own timings of the prompt batch and of the
generation (the server's `timings`), so HTTP and JSON overhead is not in them; `wall_ms` is
the whole request as seen from Python. The prompt is sent as token ids (used as is: no BOS,
no re-tokenisation) with `cache_prompt: false`, so every request processes its whole prompt
from an empty KV cache. Greedy decoding, EOS not suppressed; the caller sees `predicted_n`.
A request line `{"memory": true}` is answered with `{"peak_rss_bytes", "file_rss_bytes",
"process"}`: the peak resident memory (Linux's VmHWM) of the process that holds the model and
the part of its resident memory that maps files (RssFile), the `llama-server`
child for a native build and this Python process for the wheel. The ready line carries
`load_s`, the seconds from the start of the model's load to a server ready to answer.
A request line `{"quit": true}` or end of input ends the process.

Keeping the model loaded between requests lets the Rust side interleave its own rounds with
llama.cpp's in one run. When idle the server's threads sleep (llama.cpp's OpenMP threadpool
spins for at most a few ms after a graph, then blocks), so the Rust rounds run on a quiet CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from llamacpp_peer import NativePeer, Peer, xllamacpp_version


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--flash-attn", choices=["auto", "on", "off"], default="auto")
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--server-binary", type=Path, help="a llama-server built by build_llamacpp.py (default: xllamacpp)")
    ap.add_argument("--parallel", type=int, default=1, help="server slots (sequences decoded together)")
    args = ap.parse_args()
    if not args.model.is_file():
        raise SystemExit(f"--model: {args.model} is not a file")

    t0 = time.perf_counter()
    if args.server_binary is not None:
        if not args.server_binary.is_file():
            raise SystemExit(f"--server-binary: {args.server_binary} is not a file")
        peer = NativePeer(args.server_binary, args.model, threads=args.threads, n_ctx=args.n_ctx,
                          flash_attn=args.flash_attn, n_parallel=args.parallel)
        load_s = time.perf_counter() - t0
        version = "native build: " + args.server_binary.parent.name
        info = args.server_binary.parent / "build-info.json"
        build = json.loads(info.read_text()) if info.is_file() else None
        if not peer.settings["system_info"] and build is not None:
            # This llama-server prints no system_info line at its default verbosity: take the
            # one its smoke test logged, else the instruction sets it was compiled for.
            if build.get("system_info"):
                peer.settings["system_info"] = f"build {build['variant']}: " + build["system_info"]
            on = build.get("instruction_sets") or [
                o[len("-DGGML_"):-len("=ON")] for o in build["options"] if o.startswith("-DGGML_") and o.endswith("=ON")]
            if not peer.settings["system_info"]:
                peer.settings["system_info"] = f"build {build['variant']}: " + " ".join(on)
    else:
        peer = Peer(args.model, threads=args.threads, n_ctx=args.n_ctx, flash_attn=args.flash_attn,
                    n_parallel=args.parallel)
        load_s = time.perf_counter() - t0
        version = xllamacpp_version()
        build = None
    print(
        json.dumps(
            {
                "ready": True,
                "xllamacpp_version": version,
                "build": build,
                "load_s": load_s,
                "settings": peer.settings,
                "model": str(args.model),
            }
        ),
        flush=True,
    )
    try:
        serve(peer)
    finally:
        if isinstance(peer, NativePeer):
            peer.close()


def one(peer: Peer | NativePeer, ids: list[int], n_predict: int) -> dict:
    """One greedy generation, timed from Python, checked to have processed the whole prompt."""
    t0 = time.perf_counter()
    r = peer.greedy(ids, n_predict)
    wall_ms = (time.perf_counter() - t0) * 1e3
    t = r["timings"]
    if t.get("prompt_n") != len(ids) or t.get("cache_n", 0) != 0:
        raise SystemExit(f"llama.cpp processed {t.get('prompt_n')} prompt tokens ({t.get('cache_n')} cached), sent {len(ids)}")
    return {
        "prompt_n": t["prompt_n"],
        "prompt_ms": t["prompt_ms"],
        "predicted_n": t["predicted_n"],
        "predicted_ms": t["predicted_ms"],
        "tokens": [int(x) for x in r["tokens"]],
        "stop_type": r.get("stop_type"),
        "wall_ms": wall_ms,
    }


def peak_rss(peer: Peer | NativePeer) -> dict:
    """The peak resident memory of the process holding the model (VmHWM) and the part of
    its resident memory that maps files now (RssFile), bytes."""
    pid, process = (peer.proc.pid, "llama-server") if isinstance(peer, NativePeer) else ("self", "python + xllamacpp")
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmHWM", "RssFile"):
            fields[key] = int(rest.split()[0]) * 1024
    if len(fields) != 2:
        raise SystemExit(f"/proc/{pid}/status lacks VmHWM or RssFile: {fields}")
    return {"peak_rss_bytes": fields["VmHWM"], "file_rss_bytes": fields["RssFile"], "process": process}


def serve(peer: Peer | NativePeer) -> None:
    from concurrent.futures import ThreadPoolExecutor

    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        if req.get("quit"):
            break
        if req.get("memory"):
            print(json.dumps(peak_rss(peer)), flush=True)
            continue
        n_predict = int(req["n_predict"])
        if "batch" in req:
            prompts = [[int(t) for t in p] for p in req["batch"]]
            t0 = time.perf_counter()
            with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
                results = list(pool.map(lambda ids: one(peer, ids, n_predict), prompts))
            answer = {"wall_ms": (time.perf_counter() - t0) * 1e3, "results": results}
        else:
            answer = one(peer, [int(t) for t in req["prompt_ids"]], n_predict)
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
