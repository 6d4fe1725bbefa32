"""Tiny random models of each supported architecture, built in a test (no download): a few small layers, saved
with `save_pretrained` next to the bundled MiniLM tokenizer, so lodex loads them like any local model directory."""

import json
import shutil
from pathlib import Path

from lodex.encoders.transformers_encoder import bundled_model_dir

KINDS = ("bert", "modernbert", "lfm2", "qwen3")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
# The MiniLM tokenizer's ids: [PAD] 0, [CLS] 101, [SEP] 102 (decoders use [SEP] as their end-of-sequence token).
_PAD, _CLS, _SEP, _VOCAB = 0, 101, 102, 30522


def tiny_config(kind: str, layers: int = 2, hidden: int = 64, window: int = 512):  # noqa: ANN201 - a transformers config
    """The config of a tiny `kind` model: `layers` layers `hidden` wide, `window` positions."""
    common = dict(
        vocab_size=_VOCAB,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=hidden * 2,
        max_position_embeddings=window,
        pad_token_id=_PAD,
    )
    if kind == "bert":
        from transformers import BertConfig

        return BertConfig(**common)
    if kind == "modernbert":
        from transformers import ModernBertConfig

        return ModernBertConfig(
            **common, bos_token_id=_CLS, eos_token_id=_SEP, cls_token_id=_CLS, sep_token_id=_SEP, global_attn_every_n_layers=2, local_attention=64
        )
    if kind == "lfm2":
        from transformers import Lfm2Config

        return Lfm2Config(
            **common,
            num_key_value_heads=2,
            bos_token_id=_CLS,
            eos_token_id=_SEP,
            layer_types=["conv" if i % 2 == 0 else "full_attention" for i in range(layers)],
            tie_word_embeddings=False,
        )
    if kind == "qwen3":
        from transformers import Qwen3Config

        return Qwen3Config(**common, num_key_value_heads=2, head_dim=hidden // 4, bos_token_id=_CLS, eos_token_id=_SEP, tie_word_embeddings=False)
    raise ValueError(f"unknown tiny model kind {kind!r}; one of {KINDS}")


def tiny_model(kind: str, path: Path, layers: int = 2, hidden: int = 64, window: int = 512, seed: int = 0) -> Path:
    """Build a random `kind` model (see tiny_config) and save it with the MiniLM tokenizer into `path`."""
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.manual_seed(seed)
    model = AutoModel.from_config(tiny_config(kind, layers, hidden, window)).eval()
    return save_with_tokenizer(model, path, window)


def save_with_tokenizer(model, path: Path, window: int) -> Path:  # noqa: ANN001 - a transformers model
    """Save `model` into `path` with the bundled MiniLM tokenizer, declaring a window of `window` tokens."""
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(path), safe_serialization=True)
    source = bundled_model_dir()
    for name in _TOKENIZER_FILES:
        shutil.copy(source / name, path / name)
    settings = path / "tokenizer_config.json"  # the tokenizer declares the model's window, not MiniLM's
    settings.write_text(json.dumps(json.loads(settings.read_text()) | {"model_max_length": window}))
    return path


_ST_POOLING = {
    "mean": "pooling_mode_mean_tokens",
    "cls": "pooling_mode_cls_token",
    "last": "pooling_mode_lasttoken",
    "max": "pooling_mode_max_tokens",
}


def sentence_transformers_files(path: Path, pooling: str | None = None, prompts: dict[str, str] | None = None, dim: int = 64) -> Path:
    """Add the files sentence-transformers writes: modules.json, 1_Pooling/config.json (`pooling`: mean, cls, last
    or max) and config_sentence_transformers.json with `prompts` (e.g. {"query": "Instruct: ...\\nQuery:", "document": ""})."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]
    if pooling:
        modules.append({"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"})
        (path / "1_Pooling").mkdir(exist_ok=True)
        flags = {key: name == pooling for name, key in _ST_POOLING.items()}
        (path / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": dim, **flags}))
    (path / "modules.json").write_text(json.dumps(modules))
    if prompts is not None:
        (path / "config_sentence_transformers.json").write_text(json.dumps({"prompts": prompts, "default_prompt_name": None}))
    return path


def tokenizer_options(path: Path, padding_side: str | None = None, special_tokens: bool = True) -> Path:
    """Set the tokenizer's padding side (left, as Qwen3-Embedding's), or make it add no special tokens (no [CLS] ... [SEP]:
    a decoder's tokenizer that leaves the end-of-sequence token to the caller)."""
    if padding_side:
        settings = path / "tokenizer_config.json"
        settings.write_text(json.dumps(json.loads(settings.read_text()) | {"padding_side": padding_side}))
    if not special_tokens:  # tokenizer.json as it is (BertTokenizer would build its own post-processor), without one
        tokenizer = path / "tokenizer.json"
        tokenizer.write_text(json.dumps(json.loads(tokenizer.read_text()) | {"post_processor": None}))
        settings = path / "tokenizer_config.json"
        settings.write_text(json.dumps(json.loads(settings.read_text()) | {"tokenizer_class": "PreTrainedTokenizerFast"}))
    return path
