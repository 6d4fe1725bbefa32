"""Loading a model directory for the full encoder: its fast tokenizer, the weights' fingerprint and the PyTorch (or
layer-streamed) model, the vendors' errors mapped to one ModelError each."""

import pickle
from pathlib import Path
from typing import Any

from lodex.encoders.errors import ModelError
from lodex.encoders.layer_stream import open_streamed
from lodex.encoders.model_files import model_fingerprint
from lodex.encoders.model_info import ModelInfo
from lodex.encoders.settings import EncoderSettings


def load_model(path: Path, info: ModelInfo, cfg: EncoderSettings, spill_dir: Path | None) -> tuple[Any, str, Any]:
    """The fast tokenizer, the weights' fingerprint and the model (PyTorch, or layer-streamed when `cfg` says so) of
    the directory `path` (`info`: what `read_model_dir` found there); the vendors' errors as one ModelError each."""
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        fingerprint = model_fingerprint(path)
        return (
            tokenizer,
            fingerprint,
            open_streamed(path, cfg, fingerprint, spill_dir) or AutoModel.from_pretrained(str(path), local_files_only=True).eval(),
        )
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load the model in {path}: {str(exc).splitlines()[0]}", "check encoder.model") from exc
    except pickle.UnpicklingError as exc:  # torch's weights-only loader refused a pickled object that could run code
        raise ModelError(
            f"the weights file {', '.join(p.name for p in info.weights)} in {path} holds pickled Python objects, not "
            "plain tensors: lodex does not load them (loading could run any code)",
            "convert the weights to safetensors: load the model where you trust it and save it with "
            "model.save_pretrained(DIR, safe_serialization=True), or use the model's model.safetensors",
        ) from exc
    except RuntimeError as exc:  # transformers refuses weights of other shapes than config.json gives
        raise ModelError(
            f"the weights in {path} do not fit its config.json (tensors of other shapes)", "restore config.json and the weights of the same model"
        ) from exc
