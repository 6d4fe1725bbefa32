"""A tiny random XLM-R-style multilingual model built in a test (no download): a sentencepiece Unigram tokenizer trained
on mixed Chinese, German and English lines, wrapped as XLM-R's, and random XLMRobertaModel weights (positions offset
by padding_idx + 1, as XLM-R's are), saved with `save_pretrained` like any local model directory."""

import json
import random
from pathlib import Path

ZH = (
    "系统 管理员 软件包 安装 时钟 同步 网络 配置 文件 服务器 内核 模块 用户 权限 备份 数据 磁盘 分区 挂载 日志 命令 终端 "
    "编辑器 脚本 进程 内存 启动 引导 程序 桌面 环境 打印机 字体 输入法 防火墙 代理 邮件 加密 签名 仓库 版本 升级"
).split()
DE = (
    "die Systemuhr wird mit dem Netzwerk synchronisiert Zeit stimmt Paket installieren Benutzer Rechte Sicherung Daten "
    "Festplatte Partition einhängen Protokoll Befehl Dienst Kern Modul Drucker Schrift Verschlüsselung Signatur"
).split()
EN = (
    "the system clock is kept in step with network time servers package install user rights backup data disk "
    "partition mount log command service kernel module printer font encryption signature"
).split()
_SPECIAL = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # XLM-R's ids: <s> 0, <pad> 1, </s> 2, <unk> 3


def sentence(rng: random.Random, language: str, words: int = 8) -> str:
    """A random sentence of this test vocabulary in `language` (zh, de or en)."""
    if language == "zh":
        return "".join(rng.choice(ZH) for _ in range(words)) + rng.choice("，。；！")
    return " ".join(rng.choice(DE if language == "de" else EN) for _ in range(words)).capitalize() + "."


def tiny_xlmr(path: Path, window: int = 512, seed: int = 0, hidden: int = 64) -> Path:
    """Save a random XLM-R model reading `window` tokens (max_position_embeddings window + 2) with its Unigram tokenizer."""
    import torch
    from tokenizers import SentencePieceUnigramTokenizer
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizerFast
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    rng = random.Random(seed)
    lines = [sentence(rng, language) for _ in range(150) for language in ("zh", "de", "en")]
    trained = SentencePieceUnigramTokenizer()
    trained.train_from_iterator(lines, vocab_size=600, special_tokens=_SPECIAL, unk_token="<unk>", show_progress=False)
    tokenizer = XLMRobertaTokenizerFast(
        tokenizer_object=trained._tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        cls_token="<s>",
        sep_token="</s>",
        mask_token="<mask>",
        model_max_length=window,
    )
    torch.manual_seed(seed)
    config = XLMRobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=2 * hidden,
        max_position_embeddings=window + 2,
        type_vocab_size=1,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    )
    path.mkdir(parents=True, exist_ok=True)
    XLMRobertaModel(config, add_pooling_layer=False).eval().save_pretrained(str(path), safe_serialization=True)
    tokenizer.save_pretrained(str(path))
    return path


def model_card(path: Path, languages: list[str]) -> Path:
    """A model card whose front matter lists `languages`, as multilingual-e5's and bge-m3's do."""
    (path / "README.md").write_text("---\nlanguage:\n" + "".join(f"- {code}\n" for code in languages) + "license: mit\n---\n# tiny\n")
    return path


def prompts(path: Path, declared: dict[str, str]) -> Path:
    """config_sentence_transformers.json declaring these prompts (E5's {"query": "query: ", "passage": "passage: "})."""
    (path / "config_sentence_transformers.json").write_text(json.dumps({"prompts": declared, "default_prompt_name": None}))
    return path
