"""The contract every backend meets (as txtai's runTests runs one suite over every backend): the same folder
indexed, searched in every mode and ranking, and updated (edit, rename, delete) with both encoders (the FakeEncoder
and the real bundled model) and every kind of vector index (exact flat, IVF, compressed IVF with its exact re-scoring),
checking the index invariants
(tests/invariants.py) after every step, from the writer's side and from a fresh reader's."""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from lodex.encoders.encoder import Encoder
from lodex.indexer.pipeline import Indexer
from lodex.search.searcher import MODES, RANKINGS, Searcher
from lodex.store import faiss_lifecycle
from lodex.store.lance_store import AnnPolicy, LanceStore
from tests.conftest import make_pipeline
from tests.fakes import FakeEncoder
from tests.invariants import check_index, dense_document_scores


def _paragraphs(*parts: str) -> str:
    return "\n\n".join(parts) + "\n"


FOLDER = {
    "wings.md": "# Wings\n\n"
    + _paragraphs(
        "Aircraft wings produce lift because air flowing over the curved upper surface of the wing moves faster than the "
        "air below it, so the pressure above the wing drops.",
        "The angle of attack of the wings changes how much lift they produce; past the stall angle the airflow separates "
        "and the lift of the aircraft falls away.",
        "Flaps and slats change the shape of the wings at take-off and landing, so that the aircraft produces enough lift at low speed.",
    ),
    "volcano.txt": _paragraphs(
        "A volcano erupts when magma rises from the mantle through cracks in the crust and reaches the surface as lava.",
        "Volcanic eruptions throw out ash, gas and lava; the magma's silica content decides whether the eruption is "
        "explosive or whether the lava flows gently.",
        "Lava from volcanic eruptions cools into basalt, and a volcano may sleep for centuries between eruptions of magma.",
    ),
    "bread.txt": _paragraphs(
        "Sourdough bread rises thanks to wild yeast and lactic bacteria living in a starter of flour and water.",
        "The baker mixes flour, water, salt and the sourdough starter, then lets the dough ferment slowly so that the yeast "
        "fills the bread with gas.",
        "A hot oven and steam give sourdough bread its crust; the flour's protein decides how open the crumb of the bread is.",
    ),
    "notes/tides.txt": _paragraphs(
        "Ocean tides are caused by the gravity of the moon pulling on the water of the oceans, with a smaller pull from the sun.",
        "Spring tides happen when the sun and the moon line up, and their gravity together raises the highest ocean tides.",
        "Coasts see two high tides a day because the moon's gravity bulges the ocean on both sides of the earth.",
    ),
    "notes/chess.txt": _paragraphs(
        "Chess openings such as the Sicilian Defence and the Queen's Gambit set out how the pieces develop in the first moves of a chess game.",
        "A gambit offers a pawn in the opening for quicker development; the King's Gambit is one of the oldest chess openings.",
        "Good chess openings control the centre, develop the knights and bishops early, and castle the king to safety.",
    ),
}
# A query about each document, and the document it is about (the first hit in every mode and ranking).
QUERIES = {
    "how do aircraft wings produce lift": "wings.md",
    "magma and lava in volcanic eruptions": "volcano.txt",
    "sourdough bread made with yeast and flour": "bread.txt",
    "ocean tides and the gravity of the moon": "notes/tides.txt",
    "chess openings and the gambit": "notes/chess.txt",
}
IVF_LISTS = 24  # IVF clusters for the few chunks here: enough that updates go through the index, not a rebuild


@dataclass
class Backend:
    """One encoder and one kind of vector index, over its own copy of FOLDER."""

    name: str
    kind: str  # "flat" | "ivf" | "compressed"
    root: Path
    data: Path
    encoder: Encoder
    store: LanceStore
    indexer: Indexer
    searcher: Searcher

    @property
    def vector_atol(self) -> float:
        return 2e-3 if self.kind == "ivf" else 1e-5  # an IVF index stores float16 vectors; a compressed one reads float32

    def reader(self) -> Searcher:
        """A searcher over a fresh handle on the data directory: another process's view."""
        return Searcher(LanceStore(self.data, self.encoder.dim, AnnPolicy(kind=self.kind)), self.encoder)

    def check(self, persisted: bool = True) -> dict[str, str]:
        """The invariants from the writer's side and from a fresh reader's; the index kind is the one asked for."""
        hashes = check_index(self.store, self.root, persisted=persisted, vector_atol=self.vector_atol, encoder=self.encoder)
        reader = self.reader().store
        assert check_index(reader, self.root, vector_atol=self.vector_atol) == hashes
        for store in (self.store, reader):
            assert store.vector_index().kind == self.kind
        return hashes


BACKENDS = [
    pytest.param(("fake", "flat"), id="fake-flat"),
    pytest.param(("fake", "ivf"), id="fake-ivf"),
    pytest.param(("fake", "compressed"), id="fake-compressed"),
    pytest.param(("real", "flat"), id="real-flat", marks=pytest.mark.slow),
    pytest.param(("real", "ivf"), id="real-ivf", marks=pytest.mark.slow),
    pytest.param(("real", "compressed"), id="real-compressed", marks=pytest.mark.slow),
]


def _build(request: pytest.FixtureRequest, tmp: Path, mp: pytest.MonkeyPatch) -> Backend:
    name, kind = request.param
    encoder = request.getfixturevalue("real_encoder") if name == "real" else FakeEncoder()
    if kind != "flat":  # IVF from the first vector on (as test_ann forces it), with more clusters than so few chunks call for
        mp.setattr(AnnPolicy, "MIN_IVF", 1)
        mp.setattr(faiss_lifecycle, "ivf_lists", lambda n: max(1, min(IVF_LISTS, n)))
    root, data = tmp / "docs", tmp / "data"
    for rel, text in FOLDER.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    store, indexer, searcher = make_pipeline(data, encoder, max_tokens=32, overlap=4)
    store.ann = AnnPolicy(kind=kind)
    backend = Backend(name, kind, root, data, encoder, store, indexer, searcher)
    summary = indexer.run(root)
    assert (summary.added, summary.failed) == (len(FOLDER), 0), summary
    return backend


@pytest.fixture(scope="module", params=BACKENDS)
def indexed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    """A backend with FOLDER indexed, shared by the tests that only read it."""
    with pytest.MonkeyPatch.context() as mp:
        yield _build(request, tmp_path_factory.mktemp("contract"), mp)


@pytest.fixture(params=BACKENDS)
def fresh(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Backend:
    """A backend with FOLDER indexed, for a test that changes it."""
    return _build(request, tmp_path, monkeypatch)


def _assert_well_formed(backend: Backend, results, k: int) -> None:
    """At most k results, distinct documents, best first, and passages that are their files' text at their offsets."""
    assert 0 < len(results) <= k
    paths = [hit.path for hit in results]
    assert len(paths) == len(set(paths)), paths
    scores = [hit.score for hit in results]
    assert scores == sorted(scores, reverse=True), scores
    for hit in results:
        assert hit.passages, hit.path
        text = (backend.root / hit.path).read_text()
        for passage in hit.passages:
            assert passage.text and passage.char_start < passage.char_end
            if hit.path.endswith(".txt"):  # plain text: offsets into the file itself
                assert text[passage.char_start : passage.char_end] == passage.text


def test_indexing_a_folder_meets_every_invariant(indexed: Backend) -> None:
    hashes = indexed.check()
    assert set(hashes) == set(FOLDER)
    records = indexed.store.document_records()
    assert records["wings.md"].title == "Wings" and all(r.chunk_count >= 2 for r in records.values())
    assert indexed.indexer.run(indexed.root).unchanged == len(FOLDER)  # nothing to do a second time
    assert indexed.check() == hashes


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_finds_the_document_a_query_is_about(indexed: Backend, mode: str) -> None:
    for searcher in (indexed.searcher, indexed.reader()):
        for query, path in QUERIES.items():
            results = searcher.search(query, k=3, mode=mode).results  # type: ignore[arg-type]
            assert results[0].path == path, (mode, query, [h.path for h in results])
            _assert_well_formed(indexed, results, 3)
        if mode != "bm25":  # every document has some cosine to any query: a k beyond the index gives them all
            assert len(searcher.search("wings", k=20, mode=mode).results) == len(FOLDER)  # type: ignore[arg-type]


@pytest.mark.parametrize("ranking", RANKINGS)
def test_every_ranking_scores_documents_as_computed_by_hand(indexed: Backend, ranking: str) -> None:
    fusion = indexed.searcher.fusion
    for query, path in QUERIES.items():
        vector = indexed.encoder.embed([query], kind="query")[0]
        expected = dense_document_scores(indexed.store, vector, ranking, fusion.top_m, fusion.blend_alpha)
        dense = indexed.searcher.search(query, k=len(FOLDER), mode="dense", ranking=ranking).results  # type: ignore[arg-type]
        assert {h.path: h.score for h in dense} == pytest.approx(expected, abs=2 * indexed.vector_atol)
        assert dense[0].path == path
        hybrid = indexed.searcher.search(query, k=3, mode="hybrid", ranking=ranking).results  # type: ignore[arg-type]
        assert hybrid[0].path == path, (ranking, query, [h.path for h in hybrid])
        _assert_well_formed(indexed, hybrid, 3)


def test_edit_rename_and_delete_keep_every_invariant(fresh: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str | None] = []
    build = faiss_lifecycle.FaissLifecycle._build
    monkeypatch.setattr(faiss_lifecycle.FaissLifecycle, "_build", lambda self, kind=None: built.append(kind) or build(self, kind))
    root, indexer, encoder = fresh.root, fresh.indexer, fresh.encoder
    before = fresh.check()

    # edit: one paragraph of bread.txt rewritten; only its chunks are encoded again
    chunks = fresh.store.document_records()["bread.txt"].chunk_count
    encoded = encoder.texts_encoded
    edited = FOLDER["bread.txt"].replace(
        "A hot oven and steam give sourdough bread its crust", "A wood-fired brick oven gives rye bread a smoky crust"
    )
    (root / "bread.txt").write_text(edited)
    summary = indexer.run(root)
    assert (summary.updated, summary.unchanged) == (1, len(FOLDER) - 1)
    assert 1 <= encoder.texts_encoded - encoded <= chunks
    after_edit = fresh.check()
    assert after_edit["bread.txt"] != before["bread.txt"] and {p: h for p, h in after_edit.items() if p != "bread.txt"} == {
        p: h for p, h in before.items() if p != "bread.txt"
    }
    for searcher in (fresh.searcher, fresh.reader()):
        hit = searcher.search("wood-fired brick oven", k=1, mode="bm25").results[0]
        assert hit.path == "bread.txt" and any("wood-fired" in p.text for p in hit.passages)
        assert all("steam" not in p.text for h in searcher.search("steam crust", k=5, mode="bm25").results for p in h.passages)

    # rename, as the watcher applies it (only the two paths; the FAISS file is not saved at once): no encoding
    encoded = encoder.texts_encoded
    (root / "notes" / "tides.txt").rename(root / "notes" / "moon-tides.txt")
    summary = indexer.run(root, only=["notes/tides.txt", "notes/moon-tides.txt"])
    assert (summary.reused, summary.deleted) == (1, 1) and encoder.texts_encoded == encoded
    after_rename = fresh.check(persisted=False)
    assert after_rename["notes/moon-tides.txt"] == after_edit["notes/tides.txt"] and "notes/tides.txt" not in after_rename
    for searcher in (fresh.searcher, fresh.reader()):
        for mode in MODES:
            paths = [h.path for h in searcher.search("ocean tides and the gravity of the moon", k=5, mode=mode).results]  # type: ignore[arg-type]
            assert paths[0] == "notes/moon-tides.txt" and "notes/tides.txt" not in paths, (mode, paths)

    # delete
    encoded = encoder.texts_encoded  # (the searches above encoded their queries)
    (root / "volcano.txt").unlink()
    summary = indexer.run(root)
    assert summary.deleted == 1 and encoder.texts_encoded == encoded
    assert set(fresh.check()) == set(FOLDER) - {"volcano.txt", "notes/tides.txt"} | {"notes/moon-tides.txt"}
    for searcher in (fresh.searcher, fresh.reader()):
        for mode in MODES:
            for ranking in RANKINGS:
                results = searcher.search("magma and lava in volcanic eruptions", k=10, mode=mode, ranking=ranking).results  # type: ignore[arg-type]
                assert "volcano.txt" not in [h.path for h in results], (mode, ranking)
    assert not built, f"the updates went through the in-memory {fresh.kind} index, not a rebuild from Lance: {built}"


def test_every_stored_vector_is_its_own_nearest_neighbour(indexed: Backend) -> None:
    """Searched with its own vector, every chunk comes back first, even when an IVF index looks in one cluster only
    (each vector sits in its nearest cluster's list): ids keyed to the right vectors, in the right lists."""
    index = indexed.reader().store.vector_index()
    if index.kind != "flat":
        assert index.index.nlist > 1
        index.index.nprobe = 1
    ids = np.sort(index.ids())
    scores, found = index.search_batch(index.vectors(ids), 1)
    assert np.array_equal(found[:, 0], ids)
    assert np.allclose(scores[:, 0], 1.0, atol=indexed.vector_atol)
