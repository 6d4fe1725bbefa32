"""Building blocks of the hostile-file generators: seeded words, zip archives (deflate bombs, lying sizes), byte flips."""

import io
import random
import struct
import zipfile
import zlib
from collections.abc import Callable, Mapping

WORDS = (
    "wing lift drag flow wake vortex blade shock layer probe tunnel stall chord camber pitch yaw gust spar rib "
    "flap slat strut nozzle inlet plume jet boundary pressure stream turbulence laminar"
).split()


def words(rng: random.Random, n: int) -> str:
    """n words of the aerodynamics vocabulary, seeded."""
    return " ".join(rng.choice(WORDS) for _ in range(n))


def zip_bytes(entries: dict[str, bytes | str], stored: frozenset[str] = frozenset({"mimetype"})) -> bytes:
    """A zip of these entries, in order (deflated, except the names in `stored`)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for name, content in entries.items():
            kind = zipfile.ZIP_STORED if name in stored else zipfile.ZIP_DEFLATED
            archive.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), content, compress_type=kind)
    return buf.getvalue()


def _repeated(pattern: bytes, size: int) -> tuple[bytes, int, int, int]:
    """(piece, whole pieces, rest) of `pattern` repeated to `size` bytes, the piece about 1 MiB of whole patterns."""
    piece = pattern * max(1, (1 << 20) // len(pattern))
    return piece, size // len(piece), size % len(piece), len(piece)


def deflated(pattern: bytes, size: int, head: bytes = b"", tail: bytes = b"") -> tuple[bytes, int, int]:
    """`head` + `pattern` repeated to `size` bytes + `tail`, raw-deflated, with its CRC-32 and its Adler-32: each
    1 MiB piece is compressed once and its (self-contained, full-flushed) block repeated, so that a bomb of 1 GiB
    takes a fraction of a second to build and never exists whole."""
    piece, whole, rest, _ = _repeated(pattern, size)
    out = zlib.compressobj(9, zlib.DEFLATED, -15)
    parts = [out.compress(head)]
    if whole:
        parts.append(out.flush(zlib.Z_FULL_FLUSH))
        block = out.compress(piece) + out.flush(zlib.Z_FULL_FLUSH)
        assert block == out.compress(piece) + out.flush(zlib.Z_FULL_FLUSH), "a full-flushed block depends on its input only"
        parts += [block] * whole
    parts += [out.compress(piece[:rest] + tail), out.flush()]
    crc, adler = zlib.crc32(head), zlib.adler32(head)
    for _ in range(whole):
        crc, adler = zlib.crc32(piece, crc), zlib.adler32(piece, adler)
    crc, adler = zlib.crc32(piece[:rest] + tail, crc), zlib.adler32(piece[:rest] + tail, adler)
    return b"".join(parts), crc, adler


def zlib_stream(pattern: bytes, size: int) -> bytes:
    """`pattern` repeated to `size` bytes as a zlib stream (what a PDF /FlateDecode holds)."""
    body, _, adler = deflated(pattern, size)
    return b"\x78\xda" + body + struct.pack(">I", adler)


def zip_with_bomb(
    entries: Mapping[str, bytes | str], bomb_name: str, head: bytes, pattern: bytes, size: int, tail: bytes = b"", declared: int | None = None
) -> bytes:
    """A zip of `entries` plus `bomb_name`: `head`, then `pattern` to `size` bytes, then `tail` (deflated without being
    held whole); its declared (uncompressed) size is `declared` when given (a size that lies), else the true one."""
    data, crc, _ = deflated(pattern, size, head, tail)
    true_size = len(head) + size + len(tail)
    stored = {name: (content.encode() if isinstance(content, str) else content) for name, content in entries.items()}
    rows = [(name.encode(), 8, zlib.crc32(raw), zlib.compress(raw)[2:-4], len(raw)) for name, raw in stored.items()]
    rows.append((bomb_name.encode(), 8, crc, data, declared if declared is not None else true_size))
    local, central = bytearray(), bytearray()
    for name, method, check, body, usize in rows:
        usize &= 0xFFFFFFFF
        central += (
            struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, check, len(body), usize, len(name), 0, 0, 0, 0, 0, len(local))
            + name
        )
        local += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, check, len(body), usize, len(name), 0)
        local += name + body
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(rows), len(rows), len(central), len(local), 0)
    return bytes(local + central + end)


def flipped(data: bytes, rng: random.Random, flips: int | None = None) -> bytes:
    """`data` with a few random bytes replaced (a random number of them, 1 to 32, unless given)."""
    out = bytearray(data)
    for _ in range(flips if flips is not None else rng.randint(1, 32)):
        at = rng.randrange(len(out))
        out[at] = rng.choice((rng.randrange(256), out[at] ^ (1 << rng.randrange(8)), 0x00, 0xFF, ord("<"), ord("{")))
    return bytes(out)


def truncated(data: bytes, rng: random.Random) -> bytes:
    """`data` cut at a random point (keeping at least its first byte)."""
    return data[: rng.randint(1, max(1, len(data) - 1))]


def spliced(data: bytes, rng: random.Random) -> bytes:
    """`data` with one random slice of itself copied over another place (structure-preserving corruption)."""
    if len(data) < 4:
        return data
    a, b = sorted(rng.sample(range(len(data)), 2))
    at = rng.randrange(len(data))
    return data[:at] + data[a:b] + data[at + (b - a) // 2 :]


def zipfile_entries(data: bytes) -> dict[str, bytes | str]:
    """The entries of a zip made here, to change one and write it again."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def corruptions(valid: Callable[[random.Random], bytes]) -> dict[str, Callable[[random.Random], bytes]]:
    """Generators of `valid`'s files with random bytes flipped, cut short, or with a slice copied over another place."""
    return {
        "flip": lambda rng: flipped(valid(rng), rng),
        "truncate": lambda rng: truncated(valid(rng), rng),
        "splice": lambda rng: spliced(valid(rng), rng),
    }
