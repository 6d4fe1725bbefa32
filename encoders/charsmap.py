"""A SentencePiece "precompiled charsmap" built from a character map: the darts-clone double-array trie followed by the
replacement strings, the bytes that the `tokenizers` library's Precompiled normalizer reads (XLM-R's tokenizer.json
carries nmt_nfkc's as base64). Lookups follow darts-clone's unit layout: bits 0-7 the label, bit 8 "has a leaf", bits
10-30 the offset to the children's base; a leaf unit is bit 31 and the value (the replacement's byte offset)."""

import struct
from collections import deque

_LEAF = 1 << 31
_HAS_LEAF = 1 << 8
_MAX_OFFSET = 1 << 21  # offsets below this are stored as they are (bits 10-30), never touching the label's bit 31


def precompiled_charsmap(mapping: dict[str, str]) -> bytes:
    """The charsmap that replaces each key of `mapping` (a string, matched as UTF-8 bytes) by its value ("" removes it)."""
    normalized = bytearray()
    values: dict[bytes, int] = {}
    for key, replacement in sorted(mapping.items()):
        if not key:
            raise ValueError("an empty key cannot be matched")
        values[key.encode("utf-8")] = len(normalized)
        normalized += replacement.encode("utf-8") + b"\0"
    units = _double_array(values)
    return struct.pack("<I", 4 * len(units)) + struct.pack(f"<{len(units)}I", *units) + bytes(normalized)


def _trie(values: dict[bytes, int]) -> list[dict[int, int]]:
    """Nodes as {label: child}; a key's end is label 0 whose 'child' is the value (as -1 - value)."""
    nodes: list[dict[int, int]] = [{}]
    for key, value in values.items():
        node = 0
        for byte in key:
            if byte == 0:
                raise ValueError("a key cannot hold a NUL byte")
            if byte not in nodes[node]:
                nodes[node][byte] = len(nodes)
                nodes.append({})
            node = nodes[node][byte]
        nodes[node][0] = -1 - value
    return nodes


def _double_array(values: dict[bytes, int]) -> list[int]:
    """darts-clone's units for `values`: a node at position p with base b keeps its child labelled c at b ^ c (the leaf,
    label 0, at b itself); every base is distinct, so a label a node lacks never lands on another node's child of it."""
    nodes = _trie(values)
    units: dict[int, int] = {0: 0}
    bases: set[int] = set()
    lowest_free = 1
    queue = deque([(0, 0)])  # (node, position)
    while queue:
        node, position = queue.popleft()
        labels = sorted(nodes[node])
        while lowest_free in units:
            lowest_free += 1
        free = lowest_free
        while True:  # the first base whose every child position is free
            base = free ^ labels[0]
            if base not in bases and all((base ^ label) not in units and (base ^ label) != 0 for label in labels):
                break
            free += 1
            while free in units:
                free += 1
        offset = position ^ base
        if offset >= _MAX_OFFSET:
            raise ValueError("the map is too large for a double array without offset extension")
        bases.add(base)
        units[position] |= (offset << 10) | (_HAS_LEAF if 0 in nodes[node] else 0)
        for label in labels:
            child = nodes[node][label]
            if label == 0:
                units[base] = _LEAF | (-1 - child)
            else:
                units[base ^ label] = label
                queue.append((child, base ^ label))
    size = max(units) + 1
    return [units.get(i, 0) for i in range(size)]
