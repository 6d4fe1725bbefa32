"""What a model directory declares, read without loading its weights: architecture, weights, and lodex's choices."""

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lodex.encoders.errors import ModelError
from lodex.encoders.settings import EncoderSettings
from lodex.store.json_files import NotAnObject, read_json_object

ST_CONFIG = "config_sentence_transformers.json"
# model_types of causal (decoder) language models: last-token pooling by default
_CAUSAL_TYPES = (
    "qwen2",
    "qwen3",
    "llama",
    "mistral",
    "mixtral",
    "gemma",
    "phi",
    "lfm2",
    "gpt2",
    "gpt_neox",
    "gptj",
    "falcon",
    "olmo",
    "granite",
    "smollm",
    "starcoder2",
    "deepseek",
    "internlm",
    "cohere",
    "stablelm",
)
_POOLING_KEYS = {"pooling_mode_cls_token": "cls", "pooling_mode_lasttoken": "last", "pooling_mode_mean_tokens": "mean"}
_UNSUPPORTED_POOLING = ("pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens")


@dataclass(frozen=True)
class Choice:
    """A value lodex uses and where it came from (a file of the model, lodex's config, or a default)."""

    value: Any
    source: str


@dataclass
class ModelInfo:
    """A model directory as its files declare it."""

    path: Path
    config: dict[str, Any]
    model_type: str
    architecture: str
    decoder: bool
    weights: list[Path] = field(default_factory=list)
    weight_bytes: int = 0
    parameters: int | None = None  # None: .bin weights (counted only once loaded)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # each tensor's shape, from the safetensors headers

    @property
    def hidden(self) -> int:
        return int(self.config.get("hidden_size") or self.config.get("d_model") or 0)

    def pooling(self, configured: str) -> Choice:
        """lodex config (unless "auto") > the sentence-transformers pooling file > the architecture's default."""
        if configured != "auto":
            return Choice(configured, "lodex config encoder.pooling")
        declared = _pooling_file(self.path)
        if declared is not None:
            name, config = declared
            if not any(config.get(key) for key in _POOLING_KEYS):
                used = [key for key in _UNSUPPORTED_POOLING if config.get(key)]
                raise ModelError(
                    f"the model in {self.path} declares a pooling lodex does not support ({', '.join(used) or 'none'} in {name})",
                    'set encoder.pooling to "mean", "cls" or "last"',
                )
            return Choice(next(v for k, v in _POOLING_KEYS.items() if config.get(k)), name)
        if self.decoder:
            return Choice("last", "default for decoder architectures (last token)")
        return Choice("mean", "default for encoder architectures (mean of tokens)")

    def prefixes(self, cfg: EncoderSettings) -> tuple[Choice, Choice]:
        """The query and document prefixes: lodex config when set, else the sentence-transformers prompts."""
        prompts = _read_json(self.path / ST_CONFIG).get("prompts") or {}
        prompts = prompts if isinstance(prompts, dict) else {}

        def choose(configured: str, key: str, names: tuple[str, ...]) -> Choice:
            if configured:
                return Choice(configured, f"lodex config encoder.{key}")
            for name in names:
                if isinstance(prompts.get(name), str) and prompts[name]:
                    return Choice(prompts[name], f"{ST_CONFIG} prompts[{name!r}]")
            return Choice("", "no prompt declared, none configured")

        return choose(cfg.query_prefix, "query_prefix", ("query",)), choose(cfg.document_prefix, "document_prefix", ("document", "passage"))

    def eos(self, mode: str, pooling: str, tokenizer: Any) -> Choice:
        """The end-of-sequence id lodex appends to every input (None: none), per encoder.append_eos: "auto" appends the
        EOS config.json declares (else the tokenizer's) for a last-token decoder whose tokenizer ends inputs with no
        special token of its own; "always" does so for any model. A tokenizer's own trailing token is kept as it is:
        Qwen3-Embedding's appends <|endoftext|> (its config's EOS; its tokenizer's eos_token is another, <|im_end|>)."""
        declared = self.config.get("eos_token_id")
        declared = declared[0] if isinstance(declared, list) and declared else declared
        eos_id, where = (declared, "config.json eos_token_id") if isinstance(declared, int) else (tokenizer.eos_token_id, "tokenizer eos_token")
        if mode == "never":
            return Choice(None, 'lodex config encoder.append_eos = "never"')
        if mode == "auto" and not (self.decoder and pooling == "last"):
            return Choice(None, "not a last-token decoder")
        if not isinstance(eos_id, int):
            if mode == "always":
                raise ModelError(f"the model in {self.path} declares no end-of-sequence token", 'set encoder.append_eos = "auto" or "never"')
            return Choice(None, "the model declares no end-of-sequence token")
        full, plain = tokenizer("a")["input_ids"], tokenizer("a", add_special_tokens=False)["input_ids"]
        if full and plain and full[-1] != plain[-1]:
            return Choice(None, f"the tokenizer ends inputs with token {full[-1]} itself")
        return Choice(int(eos_id), f"appended: {where} {eos_id}" + (' (encoder.append_eos = "always")' if mode == "always" else ""))

    def check_weights(self, model: Any) -> None:
        """A ModelError when the weights files lack tensors the loaded model needs, or hold them in other shapes
        (transformers would fill those with random values, silently). Unused heads (pooler) may be missing."""
        if not self.shapes:
            return
        prefix = f"{getattr(model, 'base_model_prefix', '')}."
        stored = {k.removeprefix(prefix): v for k, v in self.shapes.items()}
        state = model.state_dict()
        missing = [k for k in state if k not in stored and not k.startswith("pooler.")]
        wrong = [k for k, t in state.items() if k in stored and tuple(t.shape) != stored[k]]
        if missing or wrong:
            example = f"{wrong[0]} is {list(stored[wrong[0]])} in the file, {list(state[wrong[0]].shape)} by config.json" if wrong else missing[0]
            raise ModelError(
                f"the weights in {self.path} do not fit its config.json ({len(missing)} tensors missing, {len(wrong)} of other "
                f"shapes; e.g. {example})",
                "restore config.json and the weights of the same model",
            )


def window(path: Path, configured: int, positions: int, tokenizer_max: int) -> Choice:
    """Tokens per input: lodex config, else sentence_bert_config.json's max_seq_length, else the model's limit (never above it)."""
    limit = min(positions, tokenizer_max)
    if configured:
        return Choice(min(configured, limit), "lodex config encoder.max_length" + (" (capped by the model)" if configured > limit else ""))
    declared = _read_json(path / "sentence_bert_config.json").get("max_seq_length")
    if isinstance(declared, int) and declared > 0:
        return Choice(min(declared, limit), "sentence_bert_config.json max_seq_length")
    return Choice(limit, "config.json max_position_embeddings" if positions <= tokenizer_max else "tokenizer model_max_length")


def read_model_dir(path: Path) -> ModelInfo:
    """The directory's declarations, or a ModelError naming the first thing that keeps lodex from loading it."""
    info = read_model_declarations(path)
    _read_weights(info)
    return info


def read_model_declarations(path: Path) -> ModelInfo:
    """read_model_dir without the weights: the config and tokenizer checks (`lodex model pull` runs them before it
    fetches the weights)."""
    fix = "set encoder.model (or pass DIR) to a complete local Hugging Face model directory"
    if not path.is_dir():
        raise ModelError(f"{path} is not a folder", fix)
    config_path = path / "config.json"
    if not config_path.is_file():
        raise ModelError(f"no model found in {path} (config.json missing)", fix)
    try:
        config = read_json_object(config_path)
    except NotAnObject as exc:
        raise ModelError(f"{config_path} is not a JSON object", "restore the model's config.json") from exc
    except (OSError, ValueError) as exc:
        raise ModelError(f"{config_path} is not valid JSON ({str(exc).splitlines()[0]})", "restore the model's config.json") from exc
    model_type = str(config.get("model_type") or "")
    from transformers import CONFIG_MAPPING, __version__

    if model_type not in CONFIG_MAPPING:
        raise ModelError(
            f"unsupported architecture in {path}: model_type {model_type or None!r} is not one transformers {__version__} can build",
            "use a model of a supported architecture (BERT, ModernBERT, LFM2, Qwen3, ...) or a newer transformers",
        )
    if not (path / "tokenizer.json").is_file():
        raise ModelError(f"the model in {path} has no fast tokenizer (tokenizer.json missing)", "use a model directory with tokenizer.json")
    architectures = [str(a) for a in config.get("architectures") or []]
    decoder = (
        bool(config.get("is_decoder"))
        or any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in architectures)
        or model_type.startswith(_CAUSAL_TYPES)
    )
    return ModelInfo(path, config, model_type, architectures[0] if architectures else model_type, decoder)


def _read_weights(info: ModelInfo) -> None:
    """The weights files, their size and parameter count (from safetensors headers); a ModelError when missing or cut short."""
    path = info.path
    index = _read_json(path / "model.safetensors.index.json").get("weight_map")
    names = sorted(set(index.values())) if isinstance(index, dict) else sorted(p.name for p in path.glob("*.safetensors"))
    if not names:
        binaries = sorted(path.glob("pytorch_model*.bin"))
        if not binaries:
            raise ModelError(
                f"the model in {path} has no weights (no model.safetensors or pytorch_model.bin)", "copy the model's weights files into it"
            )
        info.weights, info.weight_bytes = binaries, sum(p.stat().st_size for p in binaries)
        return
    for name in names:
        file = path / name
        if not file.is_file():
            raise ModelError(f"the model in {path} lacks its weights file {name}", "copy the model's weights files into it")
        size = _safetensors_header(file, info.shapes)
        info.weight_bytes += size
        info.weights.append(file)
    info.parameters = sum(_product(shape) for shape in info.shapes.values())


def _safetensors_header(file: Path, shapes: dict[str, tuple[int, ...]]) -> int:
    """The bytes of tensor data of a safetensors file, its tensors' shapes added to `shapes`; a ModelError when its
    header is unreadable or the file is shorter than it declares."""
    broken = ModelError(f"the weights file {file} is damaged (unreadable safetensors header)", "copy the model's weights files again")
    try:
        with file.open("rb") as fh:
            (length,) = struct.unpack("<Q", fh.read(8).ljust(8, b"\0"))
            if not 0 < length <= 100 << 20:
                raise broken
            header = json.loads(fh.read(length))
    except (OSError, ValueError) as exc:
        raise broken from exc
    tensors = {k: t for k, t in header.items() if k != "__metadata__"} if isinstance(header, dict) else {}
    try:
        end = max((int(t["data_offsets"][1]) for t in tensors.values()), default=0)
        shapes.update({name: tuple(int(n) for n in t["shape"]) for name, t in tensors.items()})
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise broken from exc
    actual = file.stat().st_size - 8 - length
    if actual < end:
        raise ModelError(f"the weights file {file} is truncated ({actual:,} of {end:,} bytes of tensors)", "copy the model's weights files again")
    return end


def _product(shape: tuple[int, ...]) -> int:
    result = 1
    for n in shape:
        result *= int(n)
    return result


def _pooling_file(path: Path) -> tuple[str, dict[str, Any]] | None:
    """(its name, its content) of the sentence-transformers Pooling module's config (modules.json says where), or None."""
    modules = _read_json_any(path / "modules.json")
    folders = (
        [m.get("path") for m in modules if isinstance(m, dict) and str(m.get("type", "")).endswith("Pooling")] if isinstance(modules, list) else []
    )
    for folder in [*(f for f in folders if isinstance(f, str)), "1_Pooling"]:
        config = _read_json(path / folder / "config.json")
        if config:
            return f"{folder}/config.json", config
    return None


def _read_json_any(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _read_json(path: Path) -> dict[str, Any]:
    value = _read_json_any(path)
    return value if isinstance(value, dict) else {}
