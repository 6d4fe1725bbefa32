"""Builders of the hostile files of issue #37 (spreadsheet amplification, PDF filter and shared-stream tricks, deep
MIME, sniffed content under text extensions), small on disk, for tests/test_budget.py and bench runs."""

import base64
import io
import zipfile
import zlib
from pathlib import Path

_XLSX_CT = (
    '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
    "</Types>"
)
_RELS = (
    '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
    'Target="xl/workbook.xml"/></Relationships>'
)
_WB_RELS = (
    '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" '
    'Target="worksheets/sheet1.xml"/>'
    '<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" '
    'Target="sharedStrings.xml"/></Relationships>'
)
_S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_WB = (
    f'<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="{_S}" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/'
    'relationships"><sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>'
)


def _zip(parts: dict[str, bytes | str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, body in parts.items():
            z.writestr(name, body)
    return out.getvalue()


def xlsx(sheet_rows: str, shared: list[str]) -> bytes:
    """A workbook of one sheet whose <sheetData> holds `sheet_rows`, with `shared` as its shared strings."""
    strings = "".join(f"<si><t>{s}</t></si>" for s in shared)
    return _zip(
        {
            "[Content_Types].xml": _XLSX_CT,
            "_rels/.rels": _RELS,
            "xl/workbook.xml": _WB,
            "xl/_rels/workbook.xml.rels": _WB_RELS,
            "xl/sharedStrings.xml": f'<sst xmlns="{_S}" count="{len(shared)}">{strings}</sst>',
            "xl/worksheets/sheet1.xml": f'<worksheet xmlns="{_S}"><sheetData>{sheet_rows}</sheetData></worksheet>',
        }
    )


def xlsx_shared_string_bomb(cells: int = 3_000, string_mb: int = 1) -> bytes:
    """One shared string of `string_mb` MB used by `cells` cells of one row (~3 GB of text from a few KB)."""
    return xlsx('<row r="1">' + '<c t="s"><v>0</v></c>' * cells + "</row>", ["x" * (string_mb << 20)])


def xlsx_empty_cells(cells: int = 12_000_000) -> bytes:
    """One row of `cells` empty <c/> elements (12M: 48 MB of XML in a ~50 KB file)."""
    return xlsx('<row r="1">' + "<c/>" * cells + "</row>", [])


def ods_repeated_columns(text_kb: int = 1024, repeat: int = 1_000, cells: int = 1) -> bytes:
    """A spreadsheet whose one row holds `cells` cells of `text_kb` KB each, repeated `repeat` times
    (table:number-columns-repeated)."""
    ns = (
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
    )
    cell = f'<table:table-cell table:number-columns-repeated="{repeat}"><text:p>{"y" * (text_kb << 10)}</text:p></table:table-cell>'
    content = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {ns}><office:body><office:spreadsheet>'
        f'<table:table table:name="S"><table:table-row>{cell * cells}</table:table-row></table:table>'
        "</office:spreadsheet></office:body></office:document-content>"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet", zipfile.ZIP_STORED)
        z.writestr("content.xml", content, zipfile.ZIP_DEFLATED, compresslevel=9)
    return out.getvalue()


def pdf(objects: list[bytes], root: int = 1) -> bytes:
    """A PDF of numbered `objects` (object n is objects[n - 1], "n 0 obj" and "endobj" added), with its xref table."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % at for at in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, root, xref)
    return bytes(out)


def _stream(dictionary: bytes, data: bytes, between: bytes = b"\n") -> bytes:
    return b"<< " + dictionary + b" /Length %d >>" % len(data) + between + b"stream\n" + data + b"\nendstream"


def _pages(contents: list[int], first: int, count: int | None = None) -> list[bytes]:
    """Catalog (object 1), page tree (2) and `count` pages (objects `first`…) each drawing the streams `contents`."""
    count = count or 1
    kids = b" ".join(b"%d 0 R" % (first + i) for i in range(count))
    refs = b" ".join(b"%d 0 R" % c for c in contents)
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents [" + refs + b"] /Resources << /Font << /F1 3 0 R >> >> >>"
    return [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % count,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        *([page] * count),
    ]


def pdf_text(text: str = "A page of plain words.") -> bytes:
    """A one-page PDF saying `text`."""
    content = b"BT /F1 12 Tf 72 720 Td (" + text.encode("latin-1") + b") Tj ET"
    return pdf([*_pages([5], 4), _stream(b"", content)])


def pdf_filter_bomb(inflated_mb: int = 1024, trick: str = "array") -> bytes:
    """A page whose content stream inflates to `inflated_mb` MB of spaces, hidden from a guard that inflates only what
    follows `>> stream`: `array` filters it [/ASCIIHexDecode /FlateDecode], `a85` [/ASCII85Decode /FlateDecode],
    `double` [/FlateDecode /FlateDecode], `comment` puts a %comment before `stream`."""
    packer = zlib.compressobj(9)
    block = b" " * (1 << 20)
    packed = b"".join(packer.compress(block) for _ in range(inflated_mb)) + packer.flush()
    if trick == "array":
        body = _stream(b"/Filter [/ASCIIHexDecode /FlateDecode]", packed.hex().encode() + b">")
    elif trick == "a85":
        body = _stream(b"/Filter [/ASCII85Decode /FlateDecode]", base64.a85encode(packed, adobe=False) + b"~>")
    elif trick == "double":
        body = _stream(b"/Filter [/FlateDecode /FlateDecode]", zlib.compress(packed, 9))
    else:
        body = _stream(b"/Filter /FlateDecode", packed, between=b" % a comment\n")
    return pdf([*_pages([5], 4), body])


def pdf_shared_stream(pages: int = 20_000, stream_mb: int = 40) -> bytes:
    """`pages` pages all drawing one content stream of `stream_mb` MiB of no-op operators (q Q), flate-compressed."""
    packer = zlib.compressobj(9)
    block = b"q Q " * (1 << 18)
    packed = b"".join(packer.compress(block) for _ in range(stream_mb)) + packer.flush()
    first = 5
    objects = _pages([4], first, pages)
    objects.insert(3, _stream(b"/Filter /FlateDecode", packed))  # object 4; the pages follow from 5
    return pdf(objects)


def deep_mime(depth: int = 5_000) -> bytes:
    """A message whose multipart parts nest `depth` deep."""
    head = b"From: a@example.org\r\nSubject: deep\r\nMIME-Version: 1.0\r\n"
    parts = [b'Content-Type: multipart/mixed; boundary="b%d"\r\n\r\n--b%d\r\n' % (i, i) for i in range(depth)]
    tail = [b"\r\n--b%d--\r\n" % i for i in reversed(range(depth))]
    return head + b"".join(parts) + b"Content-Type: text/plain\r\n\r\nhello\r\n" + b"".join(tail)


def write_all(folder: Path) -> dict[str, str]:
    """Every hostile file of issue #37 under `folder`; {name: the start of the reason it must fail with}."""
    files: dict[str, tuple[bytes, str]] = {
        "shared.xlsx": (xlsx_shared_string_bomb(), "xlsx text too long"),
        "repeated.ods": (ods_repeated_columns(), "ods text too long"),
        "empty-cells.xlsx": (xlsx_empty_cells(), "xlsx row of more than"),
        "hex-flate.pdf": (pdf_filter_bomb(trick="array"), "a compressed stream inflates past"),
        "comment.pdf": (pdf_filter_bomb(trick="comment"), "a compressed stream inflates past"),
        "shared-stream.pdf": (pdf_shared_stream(), "page contents"),
        "deep.eml": (deep_mime(), "mail of more than 1,000 MIME parts"),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name, (data, _) in files.items():
        (folder / name).write_bytes(data)
    return {name: reason for name, (_, reason) in files.items()}
