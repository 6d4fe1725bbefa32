"""Keyword search of the Lance chunks table: Lance's BM25 index asked concurrently, the rows it lacks scored by lodex
(`keyword_delta`), and the index's figures those scores need."""

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from lodex.store import lance_bridge
from lodex.store.keyword_delta import MAX_ASKED, RESAMPLE_SHARE, KeywordDelta, merged
from lodex.store.keyword_scheme import KeywordScheme


class LanceKeywordSearch:
    """Keyword search of one Lance chunks table (a lancedb table handle; it reads at whatever version the handle has
    checked out) whose full-text index makes terms as `scheme` says; owned by `LanceStore`."""

    def __init__(self, chunks: Any, scheme: KeywordScheme) -> None:
        self.chunks = chunks
        self.scheme = scheme
        self._index_rows = (-1, (0, 0))  # (chunks version, (rows the full-text index holds, rows it does not))
        self._best: dict[str, float] = {}  # term → the index's best score of a row for it alone (0: none has it)
        self._best_rows = 0  # rows the index held when `_best` was begun

    def start(
        self,
        texts: list[str],
        limit: int | list[int],
        version: int | None = None,
        delta: KeywordDelta | None = None,
        languages: list[str | None] | None = None,
    ) -> Callable[[], list[tuple[np.ndarray, np.ndarray]]]:
        """Start BM25 over chunk text and return the function that waits for its answer, so that other work
        (encoding the same queries) goes on meanwhile: per text, the Lance row ids and scores of its best `limit`
        chunks (`ChunkOwners.ranked` of this version turns them into chunk ids, best first). The queries run
        concurrently in Lance's runtime at this handle's checked-out version (`version`, when the caller has just
        read it), one round trip for all; row ids spare Lance a read of the id column (a third of its work). With
        `delta` (the rows of this version the full-text index does not hold), Lance searches its index alone and
        the delta's hits are merged in; the idf of query terms the delta has and `delta.index_terms` lacks is asked
        for in the same round trip (the index's best row for each term alone, with its text), so that learning it
        overlaps the encoding instead of following the search; without a delta, Lance also scans the rows its index
        lacks, if any. `languages`: each query's language (its stemmer; None: English), as `scheme` tokenizes."""
        table = lance_bridge.async_of(self.chunks)
        covered = delta is not None or (version is not None and self.covers(version))
        limits = [limit] * len(texts) if isinstance(limit, int) else limit
        scheme = self.scheme
        words = [scheme.query_words(text, language) for text, language in zip(texts, languages or [None] * len(texts))]
        learning = _terms_to_learn(delta, words)
        column = scheme.column

        async def one(text: str, n: int) -> pa.Table | None:
            if not text.strip():
                return None
            query = table.query().nearest_to_text(text, columns=column)
            if covered:  # nothing outside the full-text index: skip planning a scan of unindexed rows (~5 ms a query)
                query = query.fast_search()
            return await query.select(["_score"]).with_row_id().limit(n).to_arrow()

        async def best(word: str) -> pa.Table:
            return await table.query().nearest_to_text(word, columns=column).fast_search().select(["_score", column]).limit(1).to_arrow()

        asked = [scheme.lance_query(text, w) for text, w in zip(texts, words)]

        async def every() -> list[pa.Table | None]:
            return await asyncio.gather(
                *(one(text, n) for text, n in zip(asked, limits)), *(best(scheme.ask(word, term)) for term, word in learning.items())
            )

        pending = lance_bridge.start(every())

        return lambda: _answers(pending.result(), len(texts), delta, learning, words, limits, column)

    def start_ceilings(self, texts: list[str], version: int, languages: list[str | None]) -> Callable[[], list[float]]:
        """Start finding each text's keyword ceiling and return the function that waits for it: the sum over its
        query terms of the best score the index gives a row for that term alone (no row can score more for the
        query). Each term's best is kept until the index grows or shrinks by a tenth; rows outside the index do not
        count (their scores are estimates of the same scale)."""
        indexed = self.index_rows(version)[0]
        if abs(indexed - self._best_rows) > RESAMPLE_SHARE * max(self._best_rows, 1):
            self._best, self._best_rows = {}, indexed
        known = self._best
        terms = [[t for _, t in self.scheme.query_words(text, language)] for text, language in zip(texts, languages)]
        learning = {t: w for text, language in zip(texts, languages) for w, t in self.scheme.query_words(text, language) if t not in known}
        table, column = lance_bridge.async_of(self.chunks), self.scheme.column

        async def best(word: str) -> pa.Table:
            return await table.query().nearest_to_text(word, columns=column).fast_search().select(["_score"]).limit(1).to_arrow()

        async def every() -> list[pa.Table]:
            return await asyncio.gather(*(best(self.scheme.ask(word, term)) for term, word in learning.items()))

        pending = lance_bridge.start(every()) if learning else None

        def answer() -> list[float]:
            if pending is not None:
                for term, top in zip(learning, pending.result()):
                    known[term] = float(top["_score"][0].as_py()) if top.num_rows else 0.0
            return [_ceiling([known.get(t, 0.0) for t in query]) for query in terms]

        return answer

    def index_rows(self, version: int) -> tuple[int, int]:
        """(rows the full-text index holds, chunk rows it does not) at this chunks version (asked once per version)."""
        if self._index_rows[0] != version:
            table = lance_bridge.async_of(self.chunks)

            async def stats() -> tuple[int, int]:
                name = next(ix.name for ix in await table.list_indices() if ix.columns == [self.scheme.column])
                got = await table.index_stats(name)
                return got.num_indexed_rows, got.num_unindexed_rows

            self._index_rows = (version, lance_bridge.run(stats()))
        return self._index_rows[1]

    def covers(self, version: int) -> bool:
        """Whether the full-text index holds every chunk row of this version."""
        return self.index_rows(version)[1] == 0

    def texts_at_rows(self, row_ids: np.ndarray) -> dict[int, str]:
        """The keyword-indexed column (`scheme.column`) of the chunk rows at these Lance row ids, by row id
        (ids not found left out)."""
        if not len(row_ids):
            return {}
        column = self.scheme.column
        take = lance_bridge.async_of(self.chunks).take_row_ids(np.asarray(row_ids).tolist()).select([column]).with_row_id()
        got = lance_bridge.run(take.to_arrow())
        return dict(zip(got["_rowid"].to_pylist(), got[column].to_pylist()))


def _ceiling(bests: list[float]) -> float:
    """A query's keyword ceiling from its terms' best single-term scores (0: no indexed row has the term), a term
    no row has counted as the rarest the query has: a chunk that had it would score at least that much for it."""
    top = max(bests, default=0.0)
    return sum(b if b > 0 else top for b in bests)


def _terms_to_learn(delta: KeywordDelta | None, texts: list[list[tuple[str, str]]]) -> dict[str, str]:
    """The queries' terms that rows of the delta have and whose idf the index's figures lack (→ a word of a query
    that makes each), at most MAX_ASKED: a long query's others count as absent from the index."""
    if delta is None or not len(delta):
        return {}
    wanted: dict[str, str] = {}
    for text in texts:
        wanted |= delta.wanted_terms(text)
    return dict(list(delta.index_terms.missing(wanted).items())[:MAX_ASKED])


def _answers(
    got: list[pa.Table | None],
    n_texts: int,
    delta: KeywordDelta | None,
    learning: dict[str, str],
    words: list[list[tuple[str, str]]],
    limits: list[int],
    column: str,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """`LanceKeywordSearch.start`'s answer from what Lance returned (`got`: the `n_texts` queries' hits, then the best
    row of each term learnt): per text, the Lance row ids and scores, with the delta's hits merged in."""
    hits = [
        (np.zeros(0, np.uint64), np.zeros(0, np.float32)) if t is None else (t["_rowid"].to_numpy(), t["_score"].to_numpy().astype(np.float32))
        for t in got[:n_texts]
    ]
    if delta is None or not len(delta):
        return hits
    for term, top in zip(learning, got[n_texts:]):
        assert top is not None
        delta.index_terms.learn(term, (float(top["_score"][0].as_py()), top[column][0].as_py()) if top.num_rows else None)
    return [merged(h, delta.scores([t for _, t in w], n), n) for h, w, n in zip(hits, words, limits)]
