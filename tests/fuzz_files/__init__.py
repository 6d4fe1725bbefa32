"""Structure-aware generators of hostile files for lodex's readers, shared by tests/test_reader_fuzz.py and
bench/readers/fuzz_readers.py: a case is (format, generator, seed) and always builds the same bytes."""

import random
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.fuzz_files import odf_epub, ooxml, pdf, text_formats
from tests.fuzz_files.common import flipped, spliced, truncated

Generator = Callable[[random.Random], bytes]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# a real producer's file of each format (LibreOffice, Chromium, Python's email): the base of the fixture_* generators
FIXTURE_OF = {
    "pdf": "pdf/forty_pages.pdf",
    "docx": "office/report.docx",
    "xlsx": "office/sheets.xlsx",
    "pptx": "office/slides.pptx",
    "odt": "office/report.odt",
    "ods": "office/sheets.ods",
    "odp": "office/slides.odp",
    "epub": "office/report.epub",
    "rtf": "office/report.rtf",
    "eml": "office/message.eml",
}


def _fixture(fmt: str) -> dict[str, Generator]:
    """Byte flips, cuts and splices of the format's real fixture file."""
    if fmt not in FIXTURE_OF:
        return {}

    def data() -> bytes:
        return (FIXTURES / FIXTURE_OF[fmt]).read_bytes()

    return {
        "fixture_flip": lambda rng: flipped(data(), rng, rng.randint(1, 8)),
        "fixture_truncate": lambda rng: truncated(data(), rng),
        "fixture_splice": lambda rng: spliced(data(), rng),
    }


GENERATORS: dict[str, dict[str, Generator]] = {
    "pdf": pdf.PDF,
    "docx": ooxml.DOCX,
    "xlsx": ooxml.XLSX,
    "pptx": ooxml.PPTX,
    "odt": odf_epub.ODT,
    "ods": odf_epub.ODS,
    "odp": odf_epub.ODP,
    "epub": odf_epub.EPUB,
    "rtf": text_formats.RTF,
    "eml": text_formats.EML,
    "html": text_formats.HTML,
}
for _fmt, _table in GENERATORS.items():
    _table.update(_fixture(_fmt))
FORMATS = tuple(GENERATORS)
# A reason a person cannot read: a Python exception's class name and message, a traceback, or a library's own words
# (zipfile's, zlib's, a codec's, expat's, pdfium's) where the reader should have said what is wrong in its own.
RAW_REASON = re.compile(
    r"^\s*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b|Traceback)|\bMemoryError\b|\bRecursionError\b"
    r"|PDFium|Failed to (?:load|get)|Bad magic number|Bad CRC-32|File is not a zip file|Truncated (?:file "
    r"header|central directory)|Corrupt extra field|while decompressing data|codec can't decode"
    r"|not well-formed \(|mismatched tag|compression method is not supported|zip file version"
)


@dataclass(frozen=True, order=True)
class Case:
    """One hostile file: the format, the generator and the seed that build it."""

    fmt: str
    generator: str
    seed: int

    @property
    def name(self) -> str:
        """Its file name in a fuzz folder (the extension decides the reader, as in any folder)."""
        return f"{self.fmt}-{self.generator}-{self.seed}.{self.fmt}"

    @property
    def id(self) -> str:
        return f"{self.fmt}/{self.generator}/{self.seed}"

    def build(self) -> bytes:
        """The file's bytes: the same for the same case, on any machine."""
        seed = zlib.crc32(f"{self.fmt}/{self.generator}".encode()) ^ self.seed
        return GENERATORS[self.fmt][self.generator](random.Random(seed))

    @classmethod
    def parse(cls, text: str) -> "Case":
        """A case from its id, "fmt/generator/seed"."""
        fmt, generator, seed = text.split("/")
        return cls(fmt, generator, int(seed))


def cases(formats: tuple[str, ...] = FORMATS, seeds: range = range(3), generators: tuple[str, ...] = ()) -> Iterator[Case]:
    """Every (format, generator, seed) of these formats (and generators, when named)."""
    for fmt in formats:
        for generator in GENERATORS[fmt]:
            if not generators or generator in generators:
                for seed in seeds:
                    yield Case(fmt, generator, seed)


def write_cases(folder: Path, chosen: list[Case]) -> dict[str, Case]:
    """Write each case into `folder` under its name; {file name: case}."""
    folder.mkdir(parents=True, exist_ok=True)
    for case in chosen:
        (folder / case.name).write_bytes(case.build())
    return {case.name: case for case in chosen}
