"""Arrow schemas of the two Lance tables: documents and their chunks."""

import numpy as np
import pyarrow as pa


def vector_type(dim: int) -> pa.DataType:
    """Fixed-size float32 list: how vectors are stored."""
    return pa.list_(pa.float32(), dim)


def documents_schema(dim: int) -> pa.Schema:
    """One row per indexed file: where it is, what it held, and its aggregated vector."""
    return pa.schema(
        [
            ("id", pa.string()),
            ("path", pa.string()),
            ("content_hash", pa.string()),
            ("size", pa.int64()),
            ("mtime", pa.float64()),
            ("format", pa.string()),
            ("title", pa.string()),
            ("chunk_count", pa.int32()),
            ("token_count", pa.int64()),
            ("vector", vector_type(dim)),
            ("indexed_at", pa.float64()),
            ("metadata", pa.string()),  # JSON object: what an API client sent with a pushed document
            ("language", pa.string()),  # ISO 639-1 code, detected from the text (null: none found, or indexed before)
        ]
    )


def chunks_schema(dim: int) -> pa.Schema:
    """One row per chunk; (document_id, content_hash) ties it to the document version it belongs to."""
    return pa.schema(
        [
            ("id", pa.int64()),
            ("document_id", pa.string()),
            ("content_hash", pa.string()),
            ("ordinal", pa.int32()),
            ("char_start", pa.int64()),
            ("char_end", pa.int64()),
            ("token_count", pa.int32()),
            ("text", pa.string()),
            ("vector", vector_type(dim)),
            ("page", pa.int32()),  # where the chunk starts: PDF page or slide (1-based); null for formats without pages
            ("page_end", pa.int32()),  # the page where it ends (the same page for most)
            ("section", pa.string()),  # heading path, e.g. "2 Methods › 2.3 Sampling"; null without headings
            ("language", pa.string()),  # its document's language (ISO 639-1)
            ("keywords", pa.string()),  # its terms for the full-text index, joined by spaces (`terms.keyword_text`)
        ]
    )


LOCATION_COLUMNS = ["page", "page_end", "section"]


DOCUMENT_COLUMNS = [name for name in documents_schema(1).names if name != "vector"]


def vectors_of(table: pa.Table) -> np.ndarray:
    """The `vector` column of a table as an (n, dim) float32 array."""
    column = table["vector"].combine_chunks()
    if len(column) == 0:
        return np.zeros((0, column.type.list_size), dtype=np.float32)
    values: np.ndarray = column.values.to_numpy(zero_copy_only=False)
    return values.reshape(len(column), -1).astype(np.float32, copy=False)


def with_keywords(chunks: pa.Table, terms_version: int | None = None) -> pa.Table:
    """The chunk rows with their `keywords` made from text, section heading and language where they lack them (the
    indexer makes them while reading; rows made elsewhere get them here), or, for an index of other keyword terms
    than the indexer makes (`terms_version`: an index made before them), made again as that index holds them."""
    from lodex.text.terms import TERMS_VERSION, keyword_text

    version = TERMS_VERSION if terms_version is None else terms_version
    if "keywords" in chunks.column_names and chunks["keywords"].null_count == 0 and version == TERMS_VERSION:
        return chunks
    count = chunks.num_rows
    languages = chunks["language"].to_pylist() if "language" in chunks.column_names else [None] * count
    sections = chunks["section"].to_pylist() if "section" in chunks.column_names else [None] * count
    given = chunks["keywords"].to_pylist() if "keywords" in chunks.column_names and version == TERMS_VERSION else [None] * count
    made = pa.array(
        [
            k if k is not None else keyword_text(t or "", lang, section, version)
            for k, t, lang, section in zip(given, chunks["text"].to_pylist(), languages, sections)
        ],
        pa.string(),
    )
    if "keywords" in chunks.column_names:
        return chunks.set_column(chunks.column_names.index("keywords"), "keywords", made)
    return chunks.append_column("keywords", made)
