"""The PDF filters that cannot be recognised from their bytes (LZW, RunLength), decoded by the guard only when a
stream's dictionary names them, each stopping just past a limit: an amplification is refused, never materialised."""

import re

# The filters a stream's dictionary may name (full or abbreviated, as pdfium accepts them), in the order named; those
# the guard recognises from their bytes (SNIFFED) and those it must be told of.
_NAMED = re.compile(
    rb"/(FlateDecode|Fl|ASCIIHexDecode|AHx|ASCII85Decode|A85|LZWDecode|LZW|RunLengthDecode|RL)"
    rb"(?![A-Za-z0-9])"
)
_KINDS = {
    b"FlateDecode": "flate",
    b"Fl": "flate",
    b"ASCIIHexDecode": "ahx",
    b"AHx": "ahx",
    b"ASCII85Decode": "a85",
    b"A85": "a85",
    b"LZWDecode": "lzw",
    b"LZW": "lzw",
    b"RunLengthDecode": "rl",
    b"RL": "rl",
}
SNIFFED = frozenset({"flate", "ahx", "a85"})
_ESCAPE = re.compile(rb"#([0-9A-Fa-f]{2})")
_EARLY_CHANGE = re.compile(rb"/EarlyChange\s+0(?![0-9])")
_CLEAR, _END, _FIRST = 256, 257, 258


def named_filters(dictionary: bytes) -> tuple[str, ...]:
    """The filters `dictionary` names, in order ("flate", "ahx", "a85", "lzw", "rl"; "lzw0" for LZW with early
    change 0)."""
    if b"#" in dictionary:  # a name may spell a character as #xx (/LZWDecod#65): pdfium reads it as the character
        dictionary = _ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), dictionary)
    kinds = tuple(_KINDS[name] for name in _NAMED.findall(dictionary))
    return tuple("lzw0" if kind == "lzw" else kind for kind in kinds) if _EARLY_CHANGE.search(dictionary) else kinds


def decode_named(kind: str, data: bytes | memoryview, limit: int) -> bytes:
    """`data` decoded by the filter `kind` ("lzw", "lzw0" or "rl"), cut just past `limit` bytes."""
    if kind == "rl":
        return run_length(data, limit)
    return lzw(data, limit, early=kind == "lzw")


def run_length(data: bytes | memoryview, limit: int) -> bytes:
    """RunLengthDecode: a length byte L copies the next L + 1 bytes (L < 128) or repeats the next byte 257 - L times
    (L > 128); 128 ends the data. Stops once the output passes `limit`."""
    out, at, end = bytearray(), 0, len(data)
    while at < end and len(out) <= limit:
        length = data[at]
        if length == 128:
            break
        if length < 128:
            out += data[at + 1 : at + 2 + length]
            at += 2 + length
        else:
            out += bytes(data[at + 1 : at + 2]) * (257 - length)
            at += 2
    return bytes(out)


def lzw(data: bytes | memoryview, limit: int, early: bool = True) -> bytes:
    """LZWDecode (9- to 12-bit codes, most significant bit first; `early`: the code width grows one code early, PDF's
    default). Stops at the end-of-data code, at a code it cannot decode, or once the output passes `limit`."""
    out, table = bytearray(), [bytes((i,)) for i in range(256)] + [b"", b""]
    acc = bits = 0
    width, previous = 9, b""
    for byte in bytes(data):
        acc, bits = (acc << 8) | byte, bits + 8
        if bits < width:
            continue
        bits -= width
        code, acc = acc >> bits, acc & ((1 << bits) - 1)
        if code == _CLEAR:
            del table[_FIRST:]
            width, previous = 9, b""
            continue
        if code == _END:
            break
        if code < len(table):
            entry = table[code]
        elif code == len(table) and previous:
            entry = previous + previous[:1]
        else:
            break
        out += entry
        if previous and len(table) < 4096:
            table.append(previous + entry[:1])
        previous = entry
        size = len(table) + early
        width = 9 if size < 512 else 10 if size < 1024 else 11 if size < 2048 else 12
        if len(out) > limit:
            break
    return bytes(out)
