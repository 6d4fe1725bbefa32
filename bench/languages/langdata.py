"""Builds the multilingual evaluation folders of bench/languages/languages.py from Debian's `debian-reference-*` packages (and,
held out for Japanese, the Debian FAQ of `debian-faq-ja`).

Each package is one long HTML manual, one file per chapter (12 chapters, a preface and an appendix): too few
targets for 30+ questions, so every chapter is split at its <h2> sections into separate files, `chNN-SS.html`
(SS = the section's place in the chapter, 00 = the chapter's text before its first section, the table of contents
left out); the preface and the appendix likewise (`pr01-SS.html`, `apa-SS.html`). The .deb is downloaded with `apt-get download` into the work
dir when it is not there yet, and nothing of the HTML is committed: the questions (bench/data/langdata/LANG.json) name
these files. The FAQ (`ja-faq`) ships as one text file: it is split at its numbered questions into `faq-NN-MM.html`
(the question as the <h2> heading, its answer as paragraphs), the lines its text layout wrapped inside a Japanese word
joined again.
"""

import gzip
import html
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from selectolax.lexbor import LexborHTMLParser as HTMLParser
from selectolax.lexbor import LexborNode as Node

HERE = Path(__file__).resolve().parents[1] / "data" / "langdata"


@dataclass(frozen=True)
class Manual:
    """One language's manual: its Debian package and the suffix of its HTML files."""

    lang: str
    package: str
    suffix: str
    version: str = "2.100"  # the version the questions were written for (the section layout may move in another)
    kind: str = "reference"  # "reference": debian-reference's HTML chapters; "faq": the Debian FAQ's text


MANUALS = {
    "zh": Manual("zh", "debian-reference-zh-cn", "zh-cn"),
    "ja": Manual("ja", "debian-reference-ja", "ja"),
    "de": Manual("de", "debian-reference-de", "de"),
    "ja-faq": Manual("ja", "debian-faq-ja", "ja", "11.1", "faq"),  # held out: no Japanese default was chosen on it
}
_FAQ_QUESTION = re.compile(r"^(\d+)\.(\d+)\. \S", re.M)
_FAQ_CHAPTER = re.compile(r"^(?:\d+\. \S|-{10,}|={10,})", re.M)
# A line break (and the indents around it: spaces, no-break spaces) between two non-ASCII characters: the text layout
# wrapped a Japanese word.
_WRAPPED = re.compile(r"(?<=[^\x00-\x7f\xa0])[ \t\xa0]*\n[ \t\xa0]*(?=[^\x00-\x7f\xa0])")


def questions(lang: str) -> list[dict[str, str]]:
    """The committed questions of `lang`: [{question, target}], target a file name of the built folder."""
    return list(json.loads((HERE / f"{lang}.json").read_text(encoding="utf-8")))


def fetch_deb(manual: Manual, work: Path) -> Path:
    """The package's .deb in `work`, downloaded with `apt-get download` when missing (run `apt-get update` first
    when apt does not know the package)."""
    work.mkdir(parents=True, exist_ok=True)
    found = sorted(work.glob(f"{manual.package}_*_all.deb"))
    if not found:
        subprocess.run(["apt-get", "download", manual.package], cwd=work, check=True)
        found = sorted(work.glob(f"{manual.package}_*_all.deb"))
    if not found:
        raise SystemExit(f"apt-get download {manual.package} left no .deb in {work}")
    return found[-1]


def deb_version(deb: Path) -> str:
    """The version in a .deb's file name (package_VERSION_all.deb)."""
    return deb.name.split("_")[1]


def _document(title: str, body: str) -> str:
    return f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"/><title>{title}</title></head>\n<body>\n{body}\n</body></html>\n'


def _is_section(node: Node) -> bool:
    return node.tag == "div" and (node.attributes.get("class") or "") == "section" and node.css_first("h2") is not None


def split_chapter(html: str) -> list[tuple[str, str]]:
    """One chapter's pieces as (title, html): its text before the first section (titles and table of contents left
    out; absent when empty), then each <h2> section."""
    tree = HTMLParser(html)
    top = tree.css_first("div.chapter, div.appendix, div.preface")
    if top is None:
        return []
    heading = top.css_first("h1")
    chapter_title = heading.text(strip=True) if heading else ""
    intro: list[str] = []
    pieces: list[tuple[str, str]] = []
    for child in top.iter(include_text=False):
        css = child.attributes.get("class") or ""
        if css in ("titlepage", "toc"):
            continue
        if _is_section(child):
            h2 = child.css_first("h2")
            pieces.append((h2.text(strip=True) if h2 else "", child.html or ""))
        else:
            intro.append(child.html or "")
    has_text = bool(intro) and bool(HTMLParser("".join(intro)).text(strip=True))
    pieces.insert(0, (chapter_title, "".join(intro)) if has_text else ("", ""))  # section k is piece k
    return pieces


def split_faq(text: str) -> list[tuple[str, str, str]]:
    """The FAQ's text as (file stem, question, answer) per numbered question, wrapped words joined."""
    text = _WRAPPED.sub("", text)
    starts = list(_FAQ_QUESTION.finditer(text))
    out = []
    for i, match in enumerate(starts):
        block = text[match.start() : starts[i + 1].start() if i + 1 < len(starts) else len(text)]
        question, _, answer = block.partition("\n\n")
        end = _FAQ_CHAPTER.search(answer)
        answer = answer[: end.start()] if end else answer
        out.append((f"faq-{int(match.group(1)):02d}-{int(match.group(2)):02d}", " ".join(question.split()), answer))
    return out


def _faq_files(extracted: Path, staging: Path) -> None:
    for stem, question, answer in split_faq(gzip.decompress(next(extracted.rglob("debian-faq.ja.txt.gz")).read_bytes()).decode()):
        paragraphs = "".join(f"<p>{html.escape(' '.join(p.split()))}</p>\n" for p in answer.split("\n\n") if p.strip())
        title = html.escape(question)
        (staging / f"{stem}.html").write_text(_document(title, f"<h2>{title}</h2>\n{paragraphs}"), encoding="utf-8")


def build_folder(lang: str, work: Path) -> tuple[Path, str]:
    """The folder of `lang`'s section files under `work` (built once, reused), and the package version it holds."""
    manual = MANUALS[lang]
    deb = fetch_deb(manual, work)
    version = deb_version(deb)
    folder = work / f"docs-{lang}-{version}"
    if folder.is_dir() and any(folder.iterdir()):
        return folder, version
    extracted = work / f"deb-{lang}-{version}"
    if not extracted.is_dir():
        subprocess.run(["dpkg-deb", "-x", str(deb), str(extracted)], check=True)
    staging = work / f".staging-{lang}"
    staging.mkdir(parents=True, exist_ok=True)
    if manual.kind == "faq":
        _faq_files(extracted, staging)
        staging.rename(folder)
        return folder, version
    source = extracted / "usr" / "share" / "debian-reference"
    for chapter in sorted(source.glob(f"*.{manual.suffix}.html")):
        stem = chapter.name.split(".")[0]  # ch01, apa, pr01, index
        if stem == "index":
            continue  # the manual's table of contents
        pieces = split_chapter(chapter.read_text(encoding="utf-8"))
        for number, (title, body) in enumerate(pieces):
            if body:
                (staging / f"{stem}-{number:02d}.html").write_text(_document(title, body), encoding="utf-8")
    staging.rename(folder)
    return folder, version
