"""Reference token ids and greedy continuations from llama.cpp, for the Rust GGUF reader to check against.

Run with the peers venv (scripts/lib.sh `ensure_peers`):

    ~/.cache/rag-workbench/peers-venv/bin/python scripts/python/llamacpp_ref.py \
        [--models smollm2-135m-instruct-gguf,qwen2.5-coder-0.5b-instruct-gguf,qwen2.5-coder-1.5b-instruct-gguf] \
        [--n-predict 32] [--threads 2] [--out tests/data/llamacpp_reference.json]

llama.cpp is the `xllamacpp==2026.10.11549` wheel (its server, in-process; see
llamacpp_peer.py for the endpoints and settings). The GGUFs are read from the project's hub
cache (data/cache/huggingface/hub, or $WORKBENCH_HF_CACHE) and their sha256 is checked
against data/assets.toml's before use.

Writes tests/data/llamacpp_reference.json:

    {"xllamacpp_version": "2026.10.11549", "llama_cpp_build": …, "settings": {…},
     "n_predict": 32,
     "strings": [...],            # the texts tokenised
     "prompts": [...],            # raw-text prompts (no chat template) continued greedily
     "models": {
       "<asset key>": {
         "file": …, "sha256": …, "bytes": …,
         "add_bos": bool,         # does add_special prepend a BOS for this GGUF
         "tokens": [              # one per string, llama_tokenize(text, add_special, parse_special):
           {"plain": [...],       #   add_special=false, parse_special=false
            "parse_special": [...],  # add_special=false, parse_special=true
            "special": [...]}     #   add_special=true,  parse_special=true (the server's own prompt tokenisation)
         ],
         "continuations": [       # one per prompt
           {"prompt_ids": [...],  # the prompt as llama.cpp's server tokenises text (add_special, parse_special)
            "ids": [...],         # up to n_predict greedy tokens (fewer when EOS came first)
            "gaps": [...],        # per generated token: log p(top 1) - log p(top 2), i.e. the logit
                                  #   margin of the greedy choice (3 decimals); small = a near tie
            "ids_fa_off": [...],  # the same continuation from llama.cpp with flash attention off
                                  #   (another arithmetic path of llama.cpp itself: how far two
                                  #   correct implementations drift apart on this model)
            "stop_type": "limit" | "eos" | …,
            "text": "…"}          # llama.cpp's detokenisation of ids, for people reading a failure
         ]}}}

The continuations are computed from `prompt_ids` (the id list is sent, not the text), so the
Rust side can feed the very same ids to its model and compare generation alone.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from llamacpp_peer import MODELS, ROOT, Peer, model_path, sha256_file, xllamacpp_version

STRINGS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "what is the capital of france",
    "Zürich, São Paulo, Kraków and Reykjavík; a naïve café serves crème brûlée. ÉCOLE NORMALE SUPÉRIEURE",
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.",
    "Москва — столица России. Η Αθήνα είναι η πρωτεύουσα της Ελλάδας. مرحبا بالعالم",
    "I love pizza 🍕 and coffee ☕️ — NASA's JWST observed GN-z11 at z≈10.6! 👩‍👩‍👧 🇫🇷",
    "def f(x):\n    return x**2 + 3.14159 * x - 42  # e=2.71828, 1e-9, 0xFF, v1.2.3-rc.4\n",
    "fn main() {\n\tlet v: Vec<u32> = (0..10).map(|i| i * i).collect();\n\tprintln!(\"{v:?}\");\n}",
    " leading space",
    "   three leading spaces",
    "multiple   spaces    inside     a  sentence",
    "trailing spaces   ",
    "line one\nline two\n\nline four\r\nline five\n\n\n",
    "\t\ttabs\tand\u00a0no-break\u2009thin spaces",
    "<|im_start|>user\nWhat is RAG?<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|> and <|im_end|> as text, <s> </s> <unk>",
    "1234567890 3.14159 1,000,000 2026-11-23T05:41:18Z",
    "Wait... what?!? (Really) -- yes: [1], {2}, <3>; \"quoted\" & 'single' @user #tag $5.00 100% ~/path/to/file.txt",
    "don't won't it's I'm you're we've they'll HE'S",
    "",
]

PROMPTS = [
    "The capital of France is",
    "Paris is the capital and most populous city of France. It is known for",
    "Question: What is the boiling point of water at sea level?\nAnswer:",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Retrieval-augmented generation combines a retriever with",
    "Once upon a time, in a small village by the sea,",
    "1, 2, 3, 5, 8, 13, 21,",
    "Abraham Lincoln was the 16th president of the United States. He was born in",
    "Context: The Eiffel Tower was completed in 1889 for the World's Fair in Paris. "
    "It is 330 metres tall.\nQuestion: When was the Eiffel Tower completed?\nAnswer:",
    "<|im_start|>user\nWhat is the largest planet in the solar system?<|im_end|>\n<|im_start|>assistant\n",
    "Zürich ist die größte Stadt der Schweiz und",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS), help="asset keys, comma-separated")
    ap.add_argument("--n-predict", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "llamacpp_reference.json")
    args = ap.parse_args()

    out: dict = {
        "xllamacpp_version": xllamacpp_version(),
        "n_predict": args.n_predict,
        "strings": STRINGS,
        "prompts": PROMPTS,
        "models": {},
    }
    for key in args.models.split(","):
        path = model_path(key)
        t0 = time.time()
        sha = sha256_file(path)
        expected = MODELS[key][3]
        if sha != expected:
            raise SystemExit(f"{key}: {path} has sha256 {sha}, data/assets.toml says {expected}")
        peer = Peer(path, threads=args.threads)
        out.setdefault("settings", peer.settings)
        tokens = [
            {
                "plain": peer.tokenize(s, add_special=False, parse_special=False),
                "parse_special": peer.tokenize(s, add_special=False, parse_special=True),
                "special": peer.tokenize(s, add_special=True, parse_special=True),
            }
            for s in STRINGS
        ]
        add_bos = peer.tokenize("a", True, False) != peer.tokenize("a", False, False)
        conts = []
        for prompt in PROMPTS:
            ids = peer.tokenize(prompt, add_special=True, parse_special=True)
            r = peer.greedy(ids, args.n_predict, n_probs=2)
            out.setdefault("llama_cpp_build", r.get("system_fingerprint") or "")
            gen = [int(t) for t in r["tokens"]]
            if r.get("tokens_evaluated") != len(ids):
                raise SystemExit(f"{key}: llama.cpp evaluated {r.get('tokens_evaluated')} prompt tokens, sent {len(ids)}")
            gaps = []
            for tok, cp in zip(gen, r["completion_probabilities"]):
                top = cp["top_logprobs"]
                if cp["id"] != tok or top[0]["id"] != tok:
                    raise SystemExit(f"{key}: llama.cpp's probabilities do not follow its greedy tokens: {cp}")
                gaps.append(round(top[0]["logprob"] - top[1]["logprob"], 3) if len(top) > 1 else None)
            conts.append(
                {
                    "prompt_ids": ids,
                    "ids": gen,
                    "gaps": gaps,
                    "stop_type": r.get("stop_type"),
                    "text": peer.detokenize(gen),
                }
            )
        # Determinism: the first prompt again gives the same ids.
        again = [int(t) for t in peer.greedy(conts[0]["prompt_ids"], args.n_predict)["tokens"]]
        if again != conts[0]["ids"]:
            raise SystemExit(f"{key}: llama.cpp's greedy continuation is not repeatable: {conts[0]['ids']} vs {again}")
        del peer
        # llama.cpp against itself: flash attention off (another reduction order).
        alt = Peer(path, threads=args.threads, flash_attn="off")
        for c in conts:
            c["ids_fa_off"] = [int(t) for t in alt.greedy(c["prompt_ids"], args.n_predict)["tokens"]]
        del alt
        out["models"][key] = {
            "file": path.name,
            "sha256": sha,
            "bytes": path.stat().st_size,
            "add_bos": add_bos,
            "tokens": tokens,
            "continuations": conts,
        }
        def prefix(a, b):
            n = 0
            while n < min(len(a), len(b)) and a[n] == b[n]:
                n += 1
            return n

        print(
            json.dumps(
                {
                    "model": key,
                    "seconds": round(time.time() - t0, 1),
                    "add_bos": add_bos,
                    "string_tokens": [len(t["plain"]) for t in tokens],
                    "continuation_lengths": [len(c["ids"]) for c in conts],
                    "stop_types": [c["stop_type"] for c in conts],
                    "fa_off_prefix_agreement": [prefix(c["ids"], c["ids_fa_off"]) for c in conts],
                }
            ),
            file=sys.stderr,
        )
        for c in conts:
            print(f"  {c['text']!r}", file=sys.stderr)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(json.dumps({"out": str(args.out), "bytes": args.out.stat().st_size}), file=sys.stderr)


if __name__ == "__main__":
    main()
