"""A batch of token id rows as the model's input arrays: the EOS the encoder appends, padding on the tokenizer's side."""

from typing import Any

import numpy as np


def padded_inputs(
    ids: list[list[int]], pad_id: int, left: bool, eos_id: int | None, extra: dict[str, tuple[list[Any], Any]] | None = None
) -> dict[str, np.ndarray]:
    """input_ids, attention_mask and token_type_ids (zeros) for these rows: `eos_id` appended to each row when set,
    rows padded with `pad_id` to the longest, on the left or the right. `extra` columns ({name: (rows, value)}: per-token
    values, e.g. token types, char offsets as pairs, special-token flags) are laid out alike, `value` for the appended
    EOS and the padding."""
    eos = eos_id is not None
    width, count = max(len(row) for row in ids) + eos, len(ids)
    out = {
        "input_ids": np.full((count, width), pad_id, np.int64),
        "attention_mask": np.zeros((count, width), np.int64),
        "token_type_ids": np.zeros((count, width), np.int64),
    }
    for name, (_, value) in (extra or {}).items():
        out[name] = np.empty((count, width, *np.shape(value)), np.int64)
        out[name][...] = value
    for i, row in enumerate(ids):
        at = slice(width - len(row) - eos, width) if left else slice(0, len(row) + eos)
        out["input_ids"][i, at] = list(row) + ([eos_id] if eos else [])
        out["attention_mask"][i, at] = 1
        for name, (rows, value) in (extra or {}).items():
            out[name][i, at] = list(rows[i]) + ([value] if eos else [])
    return out
