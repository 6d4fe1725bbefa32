"""Which text the chunks' full-text index holds and how a query meets it: lodex's own terms, joined by spaces, in the
`keywords` column (words of every script, stems of the document's language), or, in an index made before that column
was, Lance's English tokenizer over `text` (searched as then: Chinese and Japanese text is not split into words)."""

from dataclasses import dataclass

from lodex.text.terms import TERMS_VERSION, keyword_words_and_terms, terms, words_and_terms

KEYWORDS = "keywords"  # the column of lodex's terms
LEGACY = "text"  # the column an index made before it holds
REINDEX_HINT = (
    "its keyword index predates word segmentation (Chinese, Japanese, Korean) and per-language stemming: "
    "rebuild it with `lodex index --rebuild` to have them"
)


@dataclass(frozen=True)
class KeywordScheme:
    """How keyword search tokenizes a store's chunks (`column`: the indexed column; `terms_version`: which terms lodex
    made for it, as its origin records) and its queries."""

    column: str = KEYWORDS
    terms_version: int = TERMS_VERSION

    @property
    def segmented(self) -> bool:
        """Whether the index holds lodex's terms (else Lance's English tokens of the raw text)."""
        return self.column == KEYWORDS

    def row_terms(self, stored: str | None) -> list[str]:
        """The terms of a row, from its indexed column's value."""
        if not stored:
            return []
        return stored.split() if self.segmented else terms(stored)

    def query_words(self, text: str, language: str | None) -> list[tuple[str, str]]:
        """A query's (word, term) pairs, in order, tokenized as the rows are (`language`: the query's)."""
        return keyword_words_and_terms(text, language, True, self.terms_version) if self.segmented else words_and_terms(text)

    def lance_query(self, text: str, words: list[tuple[str, str]]) -> str:
        """What the full-text index is asked for a query (its `query_words`): the terms, or the raw text as before."""
        return " ".join(term for _, term in words) if self.segmented else text

    def ask(self, word: str, term: str) -> str:
        """What the index is asked to find the rows with this one term (a word of the query that makes it)."""
        return term if self.segmented else word
