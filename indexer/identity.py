"""What names documents and their contents: a document's id (from its path), a content hash (from its bytes), and
fresh chunk ids."""

import hashlib
import os

import numpy as np


def document_id(path: str) -> str:
    """Stable id of the document at a root-relative path."""
    return hashlib.blake2b(path.encode(), digest_size=8).hexdigest()


def content_hash(data: bytes) -> str:
    """Hash of a file's bytes: what decides whether it must be encoded again."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def new_chunk_ids(n: int) -> np.ndarray:
    """n random chunk ids: non-negative int64, never reused in practice (63 random bits)."""
    return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).astype(np.int64) & np.int64(0x7FFF_FFFF_FFFF_FFFF)
