"""Every language: Chinese, Japanese and Korean text cut into words for keyword search (documents, queries, and the
rows the full-text index does not hold yet, alike), per-language stems, and each document's language."""

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lodex.indexer.settings import IndexSettings
from lodex.store import lance_bridge
from lodex.store.lance_store import LanceStore
from lodex.store.lancedb_import import import_lancedb
from lodex.text.languages import detect
from lodex.text.terms import keyword_terms, keyword_text
from tests.conftest import indexed_notes
from tests.fakes import ReferenceBM25

# Words of a Debian manual's Chinese chapters, put together at random into sentences that look like it.
ZH_WORDS = (
    "系统 管理员 软件包 安装 时钟 同步 网络 配置 文件 服务器 内核 模块 用户 权限 备份 数据 磁盘 分区 挂载 日志 "
    "命令 终端 编辑器 脚本 进程 内存 启动 引导 程序 桌面 环境 打印机 字体 输入法 防火墙 代理 邮件 加密 签名 "
    "仓库 版本 升级 依赖 源码 编译 调试 文档 手册 问题 方法 检查 设置 更新 删除 下载"
).split()


# And of its Japanese chapters, with the particles that join them.
JA_WORDS = (
    "システム 管理者 パッケージ 時刻 同期 ネットワーク 設定 ファイル サーバー カーネル モジュール ユーザー 権限 "
    "バックアップ データ ディスク 日本 言語 ロケール 端末 エディタ スクリプト プロセス メモリ 起動 文書 更新 削除"
).split()


def _chinese(rng: random.Random, words: int) -> str:
    out = []
    for _ in range(words // 8):
        out.append("".join(rng.choice(ZH_WORDS) for _ in range(8)) + rng.choice("，。；"))
    return "".join(out)


def _japanese(rng: random.Random, words: int) -> str:
    return "".join(rng.choice(JA_WORDS) + rng.choice("のをにはと") + ("。" if i % 8 == 7 else "") for i in range(words))


def test_mixed_text_keeps_chinese_words_and_english_stems() -> None:
    """A Chinese sentence with commands and product names in it: its Chinese words (a document's also the words inside
    its long ones) and character pairs, its English words stemmed; a query's Chinese as its words alone and pairs."""
    text = "使用 apt-get install 安装软件包时，请先检查系统管理员的Debian手册。Running tests"
    got = keyword_terms(text, "zh")
    assert {"apt", "get", "instal", "安装", "软件包", "软件", "检查", "系统管理员", "管理员", "debian", "手册", "run", "test"} <= set(got)
    assert "的" not in got and not any(" " in t or "，" in t for t in got)
    assert keyword_terms("系统管理员 apt-get", "zh", query=True) == ["系统管理员", "·系统", "·统管", "·管理", "·理员", "apt", "get"]
    assert keyword_terms("系统管理员 apt-get", "zh", query=True, terms_version=1) == ["系统管理员", "apt", "get"]


def test_japanese_korean_and_other_scripts() -> None:
    """Japanese by Sudachi (particles out), Korean and Thai as character pairs, German by its own stemmer."""
    assert keyword_terms("時刻同期の問題を解決するにはapt-getでパッケージをインストールします。", "ja") == [
        "時刻",
        "同期",
        "問題",
        "解決",
        "apt",
        "get",
        "パッケージ",
        "インストール",
    ]
    assert keyword_terms("형태소 분석", "ko") == ["형태", "태소", "분석"]
    assert keyword_terms("ภาษาไทย", "th") == ["ภา", "าษ", "ษา", "าไ", "ไท", "ทย"]
    assert keyword_terms("Die Pakete wurden installiert", "de") == ["pak", "installiert"]  # German stems, its stop words out
    assert keyword_terms("Paket", "de") == keyword_terms("Pakete", "de")
    assert keyword_terms("Pakete", "de") != keyword_terms("Pakete", "en")


def test_language_of_a_text() -> None:
    assert detect("时钟同步的问题怎么解决？请检查网络配置。") == "zh"
    assert detect("時刻同期の問題を解決する方法") == "ja"
    assert detect("형태소 분석기를 사용합니다") == "ko"
    assert detect("Die Installation der Pakete läuft über das Werkzeug apt und seine Freunde") == "de"
    assert detect("how to install packages", fallback="en") == "en"
    assert detect("时钟", fallback="ja") == "ja"  # a few kanji alone: the index's main language decides


def test_lodex_terms_score_chinese_rows_exactly_as_lances_index(tmp_path: Path) -> None:
    """BM25 with lodex's terms of Chinese text equals the score Lance's index gives each of a query's best rows: the
    index holds the same terms (the `keywords` column), and a query is cut as the rows are."""
    rng = random.Random(3)
    texts = [_chinese(rng, 40 + rng.randrange(80)) + (" Debian apt-get" if i % 7 == 0 else "") for i in range(300)]
    keywords = [keyword_text(t, "zh") for t in texts]
    db = import_lancedb().connect(str(tmp_path / "lance"))
    table = db.create_table("chunks", pa.table({"id": np.arange(len(texts)), "text": texts, "keywords": keywords}))
    assert lance_bridge.ensure_text_index(table).segmented
    rows = [k.split() for k in keywords]
    bm25 = ReferenceBM25(rows)

    checked = 0
    for query in ["时钟同步的问题", "系统管理员如何备份数据", "debian apt-get 安装软件包", "防火墙配置", "输入法"]:
        words = keyword_terms(query, "zh", query=True)
        got = table.search(" ".join(words), query_type="fts").fast_search().select(["id"]).limit(10).to_arrow()
        assert got.num_rows > 0, query
        for i, score in zip(got["id"].to_pylist(), got["_score"].to_pylist()):
            assert bm25(words, rows[i]) == pytest.approx(score, rel=2e-3), (query, i)
            checked += 1
    assert checked >= 40


@pytest.mark.parametrize(
    ("lang", "new_text", "query"),
    [
        ("zh", "如何配置时钟同步服务？使用 chrony 软件包：安装后检查时钟同步状态。", "时钟同步 chrony"),
        ("ja", "日本語のロケールを設定するには locales パッケージを使います。日本語の入力も設定します。", "日本語ロケール locales"),
    ],
)
def test_a_passage_committed_a_moment_ago_scores_as_once_optimized(tmp_path: Path, lang: str, new_text: str, query: str) -> None:
    """A Chinese or Japanese query (a Japanese compound kept whole) finds the passage of a file committed a moment ago
    (outside the full-text index: scored by lodex beside it) with the score the index gives it once optimized."""
    rng = random.Random(5)
    make = _chinese if lang == "zh" else _japanese
    root, store, indexer, searcher = indexed_notes(tmp_path, {f"n{i:03d}.txt": make(rng, 60) for i in range(300)})
    (root / "new.txt").write_text(new_text)
    indexer.run(root, only=["new.txt"])
    snap = searcher.source.refresh()
    assert snap.keywords is not None and len(snap.keywords) == 1
    assert [h.path for h in searcher.search(query, 3, mode="bm25").results][:1] == ["new.txt"]
    reader = LanceStore(tmp_path / "data", store.dim)
    reader.pin(snap.versions)
    rows, scores = reader.start_keyword_search([query], 10, snap.version, snap.keywords, [lang])()[0]
    before = dict(zip(*snap.owners.ranked(rows, scores)))

    store.optimize()
    after = LanceStore(tmp_path / "data", store.dim)
    version = after.refresh()[1]
    assert after.text_index_rows(version)[1] == 0
    rows, scores = after.start_keyword_search([query], 10, version, None, [lang])()[0]
    owners = after.chunk_owners(version)
    ids, scores = owners.ranked(rows, scores)
    assert ids[0] == next(iter(before))  # the new passage, best before and after
    assert float(before[ids[0]]) == pytest.approx(float(scores[0]), rel=2e-3)
    assert [h.path for h in searcher.search(query, 3, mode="bm25").results][:1] == ["new.txt"]


def test_an_index_made_before_keeps_its_english_keyword_index(tmp_path: Path) -> None:
    """A chunks table whose full-text index is over `text` (made by an earlier lodex) is searched as before."""
    db = import_lancedb().connect(str(tmp_path / "lance"))
    table = db.create_table("chunks", pa.table({"id": np.arange(3), "text": ["turbine blades", "running tests", "other"]}))
    scheme = lance_bridge.ensure_text_index(table)
    assert scheme.column == "text" and not scheme.segmented
    table.add_columns(pa.schema([("keywords", pa.string())]))
    assert lance_bridge.ensure_text_index(table).column == "text"  # the column added later does not change it
    assert scheme.row_terms("Running tests") == ["run", "test"]


def test_highlights_mark_chinese_and_japanese_query_words() -> None:
    from lodex.search.highlight import highlight_spans, query_stems

    text = "使用 apt-get 安装后检查时钟同步状态，时钟很重要。Installing"
    marked = [text[a:b] for a, b in highlight_spans(text, query_stems("时钟同步 apt-get installing"))]
    assert marked == ["apt", "get", "时钟同步", "时钟", "Installing"]
    text = "時刻同期の問題を解決する"
    assert [text[a:b] for a, b in highlight_spans(text, query_stems("時刻同期の問題"))] == ["時刻同期", "問題"]


def _mixed_folder(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(11)
    for i in range(4):
        (root / f"zh{i}.txt").write_text(_chinese(rng, 80) + "配置时钟同步服务。")
    (root / "wings.txt").write_text("Lift and drag of swept wings at transonic speed; clock synchronisation of the servers. " * 4)


def test_cli_language_mix_note_and_lang_filter(cli_home: Path) -> None:
    """`lodex index` notes that most of the folder is in a language the (bundled, English) model does not cover;
    `lodex status` shows the mix; `--lang zh` keeps Chinese documents only."""
    import json

    from typer.testing import CliRunner

    from lodex.api.cli import app

    runner = CliRunner()
    root = cli_home / "docs"
    _mixed_folder(root)
    result = runner.invoke(app, ["index", str(root)])
    assert result.exit_code == 0, result.output
    assert "80% of this folder is Chinese; the bundled model is English-only: keyword search carries these documents" in result.output
    assert result.output.count("of this folder is") == 1  # once, in the summary
    status = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert status["languages"] == {"zh": 4, "en": 1}
    assert "languages zh 80% (4), en 20% (1)" in runner.invoke(app, ["status"]).output
    found = json.loads(runner.invoke(app, ["search", "时钟同步 clock", "-k", "5", "--lang", "zh", "--json"]).stdout)
    assert found["results"] and all(r["path"].startswith("zh") for r in found["results"])
    found = json.loads(runner.invoke(app, ["search", "时钟同步 clock", "-k", "5", "--lang", "en", "--json"]).stdout)
    assert [r["path"] for r in found["results"]] == ["wings.txt"]


def test_api_lang_filter_and_stats(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from lodex.api.factory import open_app
    from lodex.api.http.app import create_app
    from lodex.api.settings import Settings
    from tests.fakes import FakeEncoder

    root = tmp_path / "docs"
    _mixed_folder(root)
    settings = Settings(base_dir=tmp_path)
    settings.index.data_dir = str(tmp_path / "data")
    service = open_app(settings, "serve", root, watch=False, encoder=FakeEncoder()).start()
    service.served.writer.reconcile().result(timeout=60)
    try:
        with TestClient(create_app(service), base_url="http://127.0.0.1:8765") as client:
            assert client.get("/stats").json()["languages"] == {"zh": 4, "en": 1}
            got = client.get("/search", params={"q": "时钟同步", "k": 5, "lang": "zh"}).json()
            assert got["results"] and all(r["path"].startswith("zh") for r in got["results"])
            assert got["results"][0]["passages"][0]["highlights"]
            got = client.post("/search", json={"q": "时钟同步 clock", "k": 5, "lang": ["en"]}).json()
            assert [r["path"] for r in got["results"]] == ["wings.txt"]
            bad = client.get("/search", params={"q": "x", "lang": "chinese!"})
            assert bad.status_code == 400 and "lang" in bad.json()["error"]["message"]
    finally:
        service.close()


def test_an_index_made_before_the_keywords_column_is_searched_as_before(tmp_path: Path) -> None:
    """Tables made by an earlier lodex (no `keywords` or `language` column, the full-text index over `text`) open,
    take new documents, and find them by keyword, fresh rows included (scored with Lance's English tokenizer's terms)."""
    from lancedb.index import FTS

    from lodex.store.schema import chunks_schema, documents_schema
    from tests.conftest import make_pipeline
    from tests.fakes import FakeEncoder

    dim = FakeEncoder().dim
    db = import_lancedb().connect(str(tmp_path / "data" / "lance"))
    old = lambda schema: pa.schema([f for f in schema if f.name not in ("keywords", "language")])  # noqa: E731
    db.create_table("documents", schema=old(documents_schema(dim)), storage_options=lance_bridge.NEW_TABLE_OPTIONS)
    chunks = db.create_table("chunks", schema=old(chunks_schema(dim)), storage_options=lance_bridge.NEW_TABLE_OPTIONS)
    chunks.create_index("text", config=FTS(with_position=False))
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(20):
        (root / f"n{i}.txt").write_text(f"note {i} on wings and lift and flutter " * 5)
    store, indexer, searcher = make_pipeline(tmp_path / "data", FakeEncoder())
    assert not store.keyword_scheme.segmented
    indexer.run(root)
    (root / "n3.txt").write_text("the zeppelinoid airship floats on hydrogen " * 3)
    indexer.run(root, only=["n3.txt"])
    snap = searcher.source.refresh()
    assert snap.keywords is not None and len(snap.keywords) > 0
    assert [h.path for h in searcher.search("zeppelinoid airships", 3, mode="bm25").results] == ["n3.txt"]
    store.optimize()
    assert [h.path for h in searcher.search("zeppelinoid airships", 3, mode="bm25").results] == ["n3.txt"]


def test_model_languages_and_the_note(tmp_path: Path) -> None:
    """The bundled model is English-only; a model directory says its languages in config.json (lodex_languages) or
    its card; the note names the folder's main language when the model does not cover it, and only then."""
    import json

    from lodex.encoders.model_languages import language_note, model_languages

    assert model_languages("") == frozenset({"en"})
    (tmp_path / "m1").mkdir()
    (tmp_path / "m1" / "config.json").write_text(json.dumps({"lodex_languages": ["zh", "EN"]}))
    assert model_languages(str(tmp_path / "m1")) == frozenset({"zh", "en"})
    (tmp_path / "m2").mkdir()
    (tmp_path / "m2" / "README.md").write_text("---\nlanguage:\n- de\n- fr\nlicense: mit\n---\n# a model\n")
    assert model_languages(str(tmp_path / "m2")) == frozenset({"de", "fr"})
    (tmp_path / "m3").mkdir()
    (tmp_path / "m3" / "README.md").write_text("---\nlanguage: multilingual\n---\n")
    assert model_languages(str(tmp_path / "m3")) is None and model_languages(str(tmp_path / "none")) is None
    assert language_note({"zh": 82, "en": 18}, frozenset({"en"}), bundled=True) == (
        "82% of this folder is Chinese; the bundled model is English-only: keyword search carries these documents; "
        "point encoder.model at a multilingual model"
    )
    assert language_note({"zh": 82, "en": 18}, frozenset({"zh", "en"}), bundled=False) is None
    assert language_note({"en": 90, "ja": 10}, frozenset({"en"}), bundled=True) is None
    assert "covers German, French only" in (language_note({"ja": 5}, frozenset({"de", "fr"}), bundled=False) or "")


def test_hybrid_leans_on_keywords_only_where_the_model_knows_not_the_script(tmp_path: Path) -> None:
    """With an English-only model, a Chinese hybrid query is answered by keywords alone (its vector is near random);
    a German one stays hybrid (shared words carry meaning); an English one is untouched."""
    rng = random.Random(7)
    texts = {f"zh{i}.txt": _chinese(rng, 40) for i in range(4)}
    texts |= {
        "de.txt": "Die Systemuhr wird mit dem Netzwerk über NTP synchronisiert, damit die Zeit stimmt. " * 6,
        "en.txt": "The system clock is kept in step with network time servers over NTP. " * 6,
    }
    _, _, _, searcher = indexed_notes(tmp_path, texts)
    searcher.languages = frozenset({"en"})  # what model_languages says of the bundled MiniLM
    assert searcher.search("时钟同步 网络", 3).mode == "bm25"
    assert searcher.search("Wie synchronisiert man die Systemuhr mit dem Netzwerk?", 3).mode == "hybrid"
    assert searcher.search("how is the system clock kept in step with the network", 3).mode == "hybrid"
    searcher.languages = None  # a model that says nothing of its languages: every query as asked
    assert searcher.search("时钟同步 网络", 3).mode == "hybrid"


def test_index_language_sets_every_documents_language_and_its_stems(tmp_path: Path) -> None:
    """index.language: a folder in one language has its terms made for it (German stems), whatever detection says."""
    from lodex.indexer.pipeline import Indexer

    text = "The houses of the town stand by the river, and the people of the north walk to the south of it every day. "
    root, store, indexer, searcher = indexed_notes(tmp_path, {"notes.txt": text * 3})
    assert store.language_mix() == {"en": 1}
    forced = Indexer(store, indexer.encoder, indexer.chunker, indexer.rules, IndexSettings(language="de"))
    (root / "notes.txt").write_text(text * 3 + "Die Häuser stehen am Fluss.")
    forced.run(root)
    assert store.language_mix() == {"de": 1}
    searcher.source.refresh()
    assert [h.path for h in searcher.search("Haus", 1, mode="bm25").results] == ["notes.txt"]  # Häuser stemmed as German
    with pytest.raises(ValueError):
        IndexSettings(language="german")
