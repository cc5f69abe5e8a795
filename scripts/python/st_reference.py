"""Reference embeddings of all-MiniLM-L6-v2 from sentence-transformers, for the Rust side to check against.

Run with the peers venv (scripts/lib.sh `ensure_peers`):

    ~/.cache/rag-workbench/peers-venv/bin/python scripts/python/st_reference.py [--out PATH]

Writes tests/data/st_reference.json:

    {"model": "sentence-transformers/all-MiniLM-L6-v2", "model_sha256": "53aa5117…",
     "sentence_transformers_version": …, "transformers_version": …, "torch_version": …,
     "max_seq_length": 256, "normalized": true, "pooling": "mean",
     "sentences": [...],
     "num_tokens": [...],      # tokens fed to the model per sentence, [CLS]/[SEP] included, after truncation
     "input_ids": [[...], ...],  # those token ids, unpadded
     "embeddings": [[384 floats], ...]}   # L2-normalised, rounded to 7 significant digits

How the model is loaded (offline, from data/cache/huggingface/hub, HF_HUB_OFFLINE=1): the
cached snapshot lacks modules.json / sentence_bert_config.json / tokenizer_config.json, so
`SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")` would silently build a
different model (mean pooling WITHOUT the Normalize module, max_seq_length 512). The pipeline
is therefore assembled explicitly from the snapshot folder — Transformer(path,
max_seq_length=256) -> Pooling(384, "mean") -> Normalize() — which is what the published
model's modules.json and sentence_bert_config.json specify. Details in minilm.py.

Embeddings are computed on CPU in float32, one batch per sentence (batch_size=1), so that no
padding is involved; sentence-transformers' padding is masked out anyway, so batching changes
the numbers only at the ~1e-7 level.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from minilm import MAX_SEQ_LENGTH, MODEL_ID, ROOT, load_minilm

LONG_IR = (
    "Information retrieval is the task of finding material, usually documents of an "
    "unstructured nature such as text, that satisfies an information need from within large "
    "collections stored on computers. Early systems in the 1950s and 1960s used Boolean queries "
    "over manually assigned index terms, and the Cranfield experiments established the practice "
    "of measuring effectiveness with test collections made of documents, queries and relevance "
    "judgements. The vector space model, proposed by Gerard Salton and colleagues, represented "
    "documents and queries as weighted term vectors and ranked documents by cosine similarity; "
    "term weighting schemes such as tf-idf rewarded terms that are frequent in a document but "
    "rare in the collection. Probabilistic models followed: the binary independence model of "
    "Robertson and Sparck Jones, and later the Okapi BM25 ranking function, which combines "
    "inverse document frequency with a saturating term-frequency component and document length "
    "normalisation controlled by the parameters k1 and b. For decades BM25 remained a strong "
    "baseline that many learned models failed to beat. Dense retrieval changed this picture: "
    "bi-encoders built on pretrained transformers map queries and passages into a shared "
    "embedding space, and nearest-neighbour search over these vectors retrieves passages that "
    "share meaning rather than exact words. Cross-encoders re-score a short list of candidates "
    "by reading the query and the passage together, trading speed for accuracy. Retrieval-"
    "augmented generation places a retriever in front of a language model, so that the answer "
    "is grounded in retrieved evidence; its quality depends on chunking, the choice of "
    "retriever, reranking, and on how the retrieved passages are presented to the reader model. "
    "Evaluation uses measures such as recall at k, mean reciprocal rank and normalised "
    "discounted cumulative gain, and significance tests tell whether an observed difference "
    "between two systems is likely to hold on new queries."
)

SENTENCES = [
    "a",
    "?",
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "what is the capital of france",
    "Paris is the capital and most populous city of France.",
    "how long does it take to boil an egg",
    "Retrieval-augmented generation (RAG) combines a retriever with a reader model.",
    "Zürich, São Paulo, Kraków and Reykjavík; a naïve café serves crème brûlée. ÉCOLE NORMALE SUPÉRIEURE",
    "東京は日本の首都です。 Москва — столица России. Η Αθήνα είναι η πρωτεύουσα της Ελλάδας. مرحبا بالعالم",
    "Wait... what?!? (Really) -- yes: [1], {2}, <3>; \"quoted\" & 'single' @user #tag $5.00 100% ~/path/to/file.txt",
    "def f(x): return x**2 + 3.14159 * x - 42  # e=2.71828, 1e-9, 0xFF, v1.2.3-rc.4",
    "I love pizza 🍕 and coffee ☕️ — NASA's JWST observed GN-z11 at z≈10.6!",
    "  leading and trailing whitespace\twith tabs and\nnew\r\nlines  ",
    "Pneumonoultramicroscopicsilicovolcanoconiosis and "
    + "supercalifragilisticexpialidocious" * 4
    + " (a 136-character word becomes [UNK])",
    LONG_IR,  # ~450 word pieces: truncated to 256
    " ".join(["token"] * 600),  # 600 words: truncated to 256
]


def sig7(x: float) -> float:
    return float(f"{x:.7g}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "st_reference.json")
    args = ap.parse_args()

    import sentence_transformers
    import torch
    import transformers

    torch.manual_seed(0)
    model, snap, sha = load_minilm("cpu")
    # The token ids exactly as the model sees them (sentence-transformers' own preprocessing).
    prep = getattr(model, "preprocess", None) or model.tokenize
    input_ids = [prep([s])["input_ids"][0].tolist() for s in SENTENCES]
    with torch.inference_mode():
        emb = model.encode(SENTENCES, batch_size=1, convert_to_numpy=True, normalize_embeddings=False)
    assert emb.shape == (len(SENTENCES), 384), emb.shape

    out = {
        "model": MODEL_ID,
        "model_sha256": sha,
        "model_snapshot": snap.name,
        "sentence_transformers_version": sentence_transformers.__version__,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "max_seq_length": MAX_SEQ_LENGTH,
        "pooling": "mean",
        "normalized": True,
        "float_rounding": "7 significant digits",
        "sentences": SENTENCES,
        "num_tokens": [len(ids) for ids in input_ids],
        "input_ids": input_ids,
        "embeddings": [[sig7(float(v)) for v in row] for row in emb],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")

    norms = (emb.astype("float64") ** 2).sum(1) ** 0.5
    print(
        json.dumps(
            {
                "out": str(args.out),
                "bytes": args.out.stat().st_size,
                "sentences": len(SENTENCES),
                "num_tokens": out["num_tokens"],
                "norm_min": float(norms.min()),
                "norm_max": float(norms.max()),
                "sentence_transformers": sentence_transformers.__version__,
                "torch": torch.__version__,
            }
        ),
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
