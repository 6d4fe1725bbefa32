"""BM25 over the chunk rows Lance's full-text index does not hold yet (those committed since the last optimize), scored
as the index scores its own rows, so that keyword search asks the index alone (its fast plan) and merges these: Lance's
plan that also scans unindexed rows costs each query ~5 ms more, plus ~17 µs per such row (it re-tokenizes them)."""

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from lodex.store.keyword_scheme import KeywordScheme

K1, B = 1.2, 0.75  # Lance's BM25 parameters
MAX_ROWS = 2000  # above this many unindexed rows, Lance's own plan scans them (a long run between optimizes)
MAX_ASKED = 256  # terms whose idf one request may ask Lance for (a long query's others count as absent from the index)
SAMPLE_ROWS = 512  # indexed rows read to estimate the mean row length in terms
RESAMPLE_SHARE = 0.1  # the mean length and the terms' weights are re-read once the index grew or shrank this much


@dataclass
class IndexTerms:
    """What BM25 needs of the full-text index for rows outside it, kept across versions: how many rows it holds, their
    mean length in terms (from a sample), and each term's inverse document frequency (idf), which lancedb does not
    expose: lodex derives it from the index's own score of its best row for the term alone."""

    indexed: int = 0  # rows the index holds at the latest version prepared
    mean_length: float = 0.0
    measured_at: int = 0  # rows it held when the mean length was measured
    grown: int = 0  # how many times rows may have joined the index (a term absent before may be there since)
    _outside: int = 0  # rows outside the index at the latest version prepared
    _idf: dict[str, tuple[float, int, bool, int]] = field(default_factory=dict)  # term → (idf, rows indexed then, found, grown then)
    scheme: KeywordScheme = KeywordScheme()  # how the index's rows are tokenized

    def saw(self, indexed: int, outside: int) -> None:
        """The index's figures at the version being prepared: rows it holds, rows it does not. Rows joined it when it
        holds more than before, or fewer lie outside it; a commit's deletions only lower what it holds (a term known
        absent stays absent, where it was asked again after every commit: ~50 ms of the query path at 1M chunks)."""
        if indexed > self.indexed or outside < self._outside:
            self.grown += 1
        self.indexed, self._outside = indexed, outside

    def needs_sample(self) -> bool:
        """Whether the mean length is to be measured (first use, or the index grew or shrank by RESAMPLE_SHARE)."""
        return self.mean_length <= 0 or abs(self.indexed - self.measured_at) > RESAMPLE_SHARE * max(self.measured_at, 1)

    def measure(self, sample_texts: Sequence[str]) -> None:
        """Take the mean row length from these indexed rows (their indexed column's values)."""
        lengths = [len(self.scheme.row_terms(t)) for t in sample_texts]
        self.measured_at, self.mean_length = self.indexed, (sum(lengths) / len(lengths) if lengths else 0.0) or 1.0

    def missing(self, wanted: dict[str, str]) -> dict[str, str]:
        """The terms (→ a word that makes each) whose idf is to be asked for: not known, known absent from an index
        that rows joined since, or known for an index RESAMPLE_SHARE smaller or larger."""

        def stale(got: tuple[float, int, bool, int] | None) -> bool:
            return got is None or (not got[2] and got[3] != self.grown) or abs(got[1] - self.indexed) > RESAMPLE_SHARE * max(got[1], 1)

        return {t: w for t, w in wanted.items() if stale(self._idf.get(t))}

    def learn(self, term: str, best: tuple[float, str] | None) -> None:
        """A term's idf from the index's score of its best row for the term alone and that row's indexed column's
        value (None: no indexed row has it)."""
        if best is not None:
            score, text = best
            row = self.scheme.row_terms(text)
            tf = row.count(term)
            if tf:
                weight = tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(row) / max(self.mean_length, 1e-9)))
                self._idf[term] = (score / weight, self.indexed, True, self.grown)
                return
        self._idf[term] = (self._formula(0 if best is None else 1), self.indexed, best is not None, self.grown)

    def _formula(self, df: int) -> float:
        return math.log(1 + (self.indexed - df + 0.5) / (df + 0.5))

    def folded_idf(self, term: str, df: int, rows: int) -> float:
        """The term's idf once `rows` more rows, `df` of them with it, join the index: its count of rows with the term
        found from the idf the index gives it now (0 when not known: absent)."""
        got = self._idf.get(term)
        held = 0.0
        if got is not None and got[2]:
            ratio = math.expm1(got[0])  # idf = ln(1 + (n - df + 0.5) / (df + 0.5))
            held = max((self.indexed + 0.5 - 0.5 * ratio) / (1 + ratio), 0.0)
        return math.log(1 + (self.indexed + rows - held - df + 0.5) / (held + df + 0.5))

    def idf(self, term: str) -> float:
        """The term's idf (that of a term no indexed row has, when not known)."""
        got = self._idf.get(term)
        return got[0] if got is not None else self._formula(0)


class KeywordDelta:
    """The chunk rows of one chunks version that the full-text index does not hold (by Lance row id), their terms
    counted; `merged` adds their BM25 hits to the index's. Made from the previous version's delta by reading only
    the rows it lacks."""

    def __init__(self, rows: dict[int, tuple[Counter[str], int]], index_terms: IndexTerms) -> None:
        self.rows = rows  # row id → (term counts, length in terms)
        self.index_terms = index_terms
        self._row_ids = np.fromiter(rows, np.uint64, len(rows))
        self._postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._vocabulary: frozenset[str] | None = None

    @classmethod
    def build(
        cls, previous: "KeywordDelta | None", row_ids: np.ndarray, texts_of: Callable[[np.ndarray], dict[int, str]], index_terms: IndexTerms
    ) -> "KeywordDelta":
        """The delta of these row ids (the version's unindexed rows), reading with `texts_of` the indexed column of
        those the previous delta did not hold."""
        held = previous.rows if previous is not None else {}
        wanted = [int(r) for r in row_ids]
        new = np.array([r for r in wanted if r not in held], np.uint64)
        texts = texts_of(new) if len(new) else {}
        rows = {}
        for r in wanted:
            if r in held:
                rows[r] = held[r]
            elif r in texts:
                counts = Counter(index_terms.scheme.row_terms(texts[r]))
                rows[r] = (counts, sum(counts.values()))
        return cls(rows, index_terms)

    def __len__(self) -> int:
        return len(self.rows)

    def _posting(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """The positions (in `_row_ids`) of the rows with this term, and its count in each."""
        got = self._postings.get(term)
        if got is None:
            hits = [(i, counts[term]) for i, (counts, _) in enumerate(self.rows.values()) if term in counts]
            got = (np.array([i for i, _ in hits], np.int64), np.array([c for _, c in hits], np.float64))
            self._postings[term] = got  # several query threads may fill it at once: the same value
        return got

    def wanted_terms(self, words: list[tuple[str, str]]) -> dict[str, str]:
        """The query's terms (of its (word, term) pairs) that some row here has (→ a word of the query that makes each)."""
        vocabulary = self._terms()
        return {term: word for word, term in words if term in vocabulary}

    def _terms(self) -> frozenset[str]:
        """Every term some row here has (made at the first query of a version: a long query looks each word up once)."""
        if self._vocabulary is None:
            self._vocabulary = frozenset(term for counts, _ in self.rows.values() for term in counts)
        return self._vocabulary

    def scores(self, query: list[str], limit: int) -> tuple[np.ndarray, np.ndarray]:
        """The row ids and BM25 scores of this delta's best `limit` rows for the query's terms (their idf known), as
        the index will score them once it folds them in: each term's idf and the mean length counted over the index's
        rows and these (a word only new rows have is not scored as if it were the rarest of all)."""
        if not query or not self.rows:
            return np.zeros(0, np.uint64), np.zeros(0, np.float32)
        lengths = np.fromiter((n for _, n in self.rows.values()), np.float64, len(self.rows))
        held = self.index_terms
        mean = (held.mean_length * held.indexed + lengths.sum()) / max(held.indexed + len(lengths), 1)
        norm = K1 * (1 - B + B * lengths / max(mean, 1e-9))
        total = np.zeros(len(self.rows))
        vocabulary = self._terms()
        for term in query:  # a repeated query word counts each time, as in Lance
            if term not in vocabulary:
                continue
            at, tf = self._posting(term)
            if len(at):
                total[at] += held.folded_idf(term, len(at), len(lengths)) * tf * (K1 + 1) / (tf + norm[at])
        hit = np.flatnonzero(total > 0)
        best = hit[np.argsort(-total[hit], kind="stable")[:limit]]
        return self._row_ids[best], total[best].astype(np.float32)


def merged(index_hits: tuple[np.ndarray, np.ndarray], delta_hits: tuple[np.ndarray, np.ndarray], limit: int) -> tuple[np.ndarray, np.ndarray]:
    """The best `limit` of both hit lists (row ids, scores), a row in both kept once with the index's score."""
    rows, scores = index_hits
    extra = ~np.isin(delta_hits[0], rows)
    rows = np.concatenate([rows.astype(np.uint64), delta_hits[0][extra]])
    scores = np.concatenate([scores.astype(np.float32), delta_hits[1][extra]])
    order = np.argsort(-scores, kind="stable")[:limit]
    return rows[order], scores[order]
