"""bench/readers/extract.py's figures: word fidelity against a known text, a distribution's installed size and licence, and
the CPU's flags line printed next to speed figures."""

import unicodedata
from collections import Counter
from importlib import metadata
from pathlib import Path


def words(text: str) -> list[str]:
    return unicodedata.normalize("NFKC", text).split()


def fidelity(pairs: list[tuple[str, str]]) -> tuple[float, float, float]:
    """(word recall, word precision, order: recall of the source's consecutive word pairs) over (source, text)."""
    hit_words = source_words = got_words = hit_pairs = source_pairs = 0
    for source, text in pairs:
        want, got = words(source), words(text)
        hit_words += sum((Counter(want) & Counter(got)).values())
        source_words, got_words = source_words + len(want), got_words + len(got)
        want_pairs, got_pairs = Counter(zip(want, want[1:])), Counter(zip(got, got[1:]))
        hit_pairs += sum((want_pairs & got_pairs).values())
        source_pairs += max(len(want) - 1, 0)
    return hit_words / source_words, hit_words / max(got_words, 1), hit_pairs / source_pairs


def requirements(dist: str, extra: str = "") -> set[str]:
    """The installed distributions `dist` (with `extra`) needs, itself included, by normalized name."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = [(dist, extra)]
    while todo:
        name, wanted = todo.pop()
        key = canonicalize_name(name)
        if key in seen:
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        seen.add(key)
        for line in requires:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": wanted}):
                todo.append((req.name, ""))
    return seen


def installed_mib(names: set[str]) -> float:
    total = 0
    for name in names:
        for file in metadata.distribution(name).files or []:
            path = Path(str(file.locate()))
            total += path.stat().st_size if path.is_file() else 0
    return total / 2**20


def licence(dist: str, known: str) -> str:
    if known:
        return known
    meta = metadata.metadata(dist)
    found = meta["License-Expression"] or (meta["License"] or "").split("\n")[0]
    classifiers = [c.split(" :: ")[-1].replace(" License", "") for c in meta.get_all("Classifier") or [] if "License ::" in c]
    return (found or ", ".join(classifiers) or "?")[:26]
