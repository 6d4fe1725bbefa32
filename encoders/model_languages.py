"""Which languages an encoder knows (the bundled MiniLM: English only; a model directory may say, in its config.json
key `lodex_languages` or its model card's `language:` list), and the note an index run gives when a folder's main
language is not among them."""

import json
import re
from pathlib import Path

from lodex.text.languages import OTHER_SCRIPT_LANGUAGES, name_of

SHARE_TO_WARN = 0.3  # a language this large a share of the folder's documents, not covered, is worth a note
_CARD_LIST = re.compile(r"^language:\s*\n((?:\s*-\s*[\w-]+\s*\n)+)", re.MULTILINE)
_CARD_ONE = re.compile(r"^language:\s*([\w-]+)\s*$", re.MULTILINE)


def model_languages(model_dir: str) -> frozenset[str] | None:
    """The languages (ISO 639-1) the model in `model_dir` covers ("": the bundled English MiniLM); None when it does
    not say ("multilingual" in its card: every language)."""
    return declared_languages(model_dir)[0]


def declared_languages(model_dir: str) -> tuple[frozenset[str] | None, str]:
    """`model_languages` and where it came from (for `lodex model check`)."""
    if not model_dir:
        return frozenset({"en"}), "the bundled all-MiniLM-L6-v2 is English-only"
    root = Path(model_dir)
    try:
        config = json.loads((root / "config.json").read_text())
        if isinstance(config.get("lodex_languages"), list):
            return frozenset(str(c).lower() for c in config["lodex_languages"]), "config.json lodex_languages"
    except (OSError, ValueError, AttributeError):
        pass
    try:
        card = (root / "README.md").read_text(errors="replace")[:20_000]
    except OSError:
        return None, "not declared (no lodex_languages in config.json, no model card): every language taken as covered"
    found = _CARD_LIST.search(card)
    codes = re.findall(r"-\s*([\w-]+)", found.group(1)) if found else ([m.group(1)] if (m := _CARD_ONE.search(card)) else [])
    codes = [c.lower() for c in codes]
    if "multilingual" in codes:
        return None, "README.md language: multilingual (every language)"
    if not codes:
        return None, "not declared (no language: list in README.md): every language taken as covered"
    return frozenset(codes), "README.md language:"


def unread_languages(covered: frozenset[str] | None) -> frozenset[str]:
    """The languages a model with these `covered` languages cannot read at all: those of another script than its own
    (Chinese, Japanese, Korean, Thai…) that it does not declare, where its vectors are near random (none when it does
    not say which it covers)."""
    return frozenset() if covered is None else OTHER_SCRIPT_LANGUAGES - covered


def language_note(mix: dict[str, int], covered: frozenset[str] | None, bundled: bool) -> str | None:
    """'82% of this folder is Chinese; the bundled model is English-only: …' when the folder's largest language is
    not one the model covers (None when it is, or the model does not say)."""
    known = {code: n for code, n in mix.items() if code != "unknown"}
    if covered is None or not known:
        return None
    code, n = max(known.items(), key=lambda item: item[1])
    share = n / sum(mix.values())
    if code in covered or share < SHARE_TO_WARN:
        return None
    model = "the bundled model is English-only" if bundled else f"the model covers {', '.join(name_of(c) for c in sorted(covered))} only"
    return (
        f"{100 * share:.0f}% of this folder is {name_of(code)}; {model}: keyword search carries these documents; "
        "point encoder.model at a multilingual model"
    )
