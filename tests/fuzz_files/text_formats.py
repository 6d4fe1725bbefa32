"""Hostile RTF, e-mail (.eml) and HTML files: deep groups, MIME parts and tags, wide multiparts, huge control
words, headers and attributes, odd charsets and encodings, and byte flips of valid files."""

import base64
import random

from tests.fuzz_files.common import corruptions, words

# ---- RTF ----------------------------------------------------------------------------------------------------


def valid_rtf(rng: random.Random) -> bytes:
    paras = "".join(f"{{\\pard {words(rng, 10)} caf\\'e9 \\u8364? \\par}}\n" for _ in range(rng.randint(2, 8)))
    return f"{{\\rtf1\\ansi\\ansicpg1252\\deff0{{\\fonttbl{{\\f0 Times;}}}}{{\\info{{\\title {words(rng, 3)}}}}}\n{paras}}}".encode()


def rtf_deep(rng: random.Random) -> bytes:
    """Groups nested 100k to 5M deep (or opened and never closed), text at the bottom."""
    depth = rng.choice((100_000, 1_000_000, 5_000_000))
    close = b"}" * depth if rng.random() < 0.7 else b""
    return b"{\\rtf1\\ansi " + b"{" * depth + words(rng, 4).encode() + close + b"}"


def rtf_control_words(rng: random.Random) -> bytes:
    """Control words with huge or negative numbers (\\bin, \\uc, \\u, \\fs, \\ansicpg), or 10 MB long."""
    kind = rng.randrange(6)
    body = [
        b"\\bin99999999999999999999 x",
        b"\\uc999999999 \\u65 tail",
        b"\\u-99999999999? \\u4294967296?",
        b"\\ansicpg99999 \\'e9\\'ff",
        b"\\" + b"a" * (10 << 20) + b" x",
        b"\\fs" + b"9" * 100_000 + b" x",
    ][kind]
    return b"{\\rtf1\\ansi " + body + b" " + words(rng, 5).encode() + b"\\par}"


def rtf_wide(rng: random.Random) -> bytes:
    """Millions of \\par, \\cell or \\'xx escapes, or a hex picture of 40 MB."""
    count = rng.choice((1_000_000, 4_000_000))
    unit = rng.choice((b"\\par ", b"\\cell ", b"\\'e9", b"\\row ", b"{}"))
    body = unit * count if rng.random() < 0.8 else b"{\\pict\\pngblip " + b"0f" * (20 << 20) + b"}"
    return b"{\\rtf1\\ansi " + body + b" lift}"


def rtf_encoding(rng: random.Random) -> bytes:
    """Code pages that do not exist or are multibyte (\\ansicpg932 with broken lead bytes), \\u surrogates alone."""
    cp = rng.choice((b"932", b"950", b"65001", b"1200", b"0", b"99999"))
    return (
        b"{\\rtf1\\ansi\\ansicpg" + cp + b" \\'81\\'81\\'ff \\u55357? \\u56832? " + bytes(range(128, 256)) + b" " + words(rng, 4).encode() + b"\\par}"
    )


# ---- e-mail -------------------------------------------------------------------------------------------------


def mail(headers: dict[str, str], body: str, content_type: str = "text/plain; charset=utf-8") -> bytes:
    head = "".join(f"{k}: {v}\r\n" for k, v in {"Subject": "s", "From": "a@example.org", **headers}.items())
    return f"{head}MIME-Version: 1.0\r\nContent-Type: {content_type}\r\n\r\n{body}".encode("utf-8", "surrogateescape")


def valid_eml(rng: random.Random) -> bytes:
    return mail({"Subject": words(rng, 4)}, words(rng, 40) + "\r\n")


def eml_deep(rng: random.Random) -> bytes:
    """Multiparts (or attached messages) nested 1k to 20k deep, text at the bottom."""
    depth = rng.choice((1_000, 5_000, 20_000))
    attached = rng.random() < 0.4
    parts, tail = [], []
    for i in range(depth):
        if attached:
            parts.append(f"Content-Type: message/rfc822\r\n\r\nSubject: m{i}\r\nFrom: a@b\r\n")
        else:
            parts.append(f'Content-Type: multipart/mixed; boundary="b{i}"\r\n\r\n--b{i}\r\n')
            tail.append(f"\r\n--b{i}--\r\n")
    body = "".join(parts) + "Content-Type: text/plain\r\n\r\n" + words(rng, 5) + "".join(reversed(tail))
    return f"Subject: deep\r\nFrom: a@example.org\r\nMIME-Version: 1.0\r\n{body}".encode()


def eml_wide(rng: random.Random) -> bytes:
    """A multipart of 10k to 200k parts (or attachments with names)."""
    count = rng.choice((10_000, 50_000, 200_000))
    named = rng.random() < 0.5
    disp = 'Content-Disposition: attachment; filename="f.txt"\r\n' if named else ""
    part = f"--b\r\nContent-Type: text/plain\r\n{disp}\r\nlift\r\n"
    return mail({}, part * count + "--b--\r\n", 'multipart/mixed; boundary="b"')


def eml_huge_header(rng: random.Random) -> bytes:
    """A Subject of 1–20 MB, folded over many lines, or made of thousands of encoded words."""
    size = rng.choice((1, 5, 20)) << 20
    kind = rng.randrange(3)
    if kind == 0:
        subject = "lift " * (size // 5)
    elif kind == 1:
        subject = "\r\n ".join(["drag"] * (size // 7))
    else:
        subject = " ".join(["=?utf-8?b?" + base64.b64encode("wäke".encode()).decode() + "?="] * (size // 20))
    return mail({"Subject": subject}, words(rng, 10))


def eml_charsets(rng: random.Random) -> bytes:
    """Bodies in charsets Python has no codec for, utf-7, broken base64 / quoted-printable, or a lying one."""
    charset = rng.choice(("x-unknown", "utf-7", "utf-16", "unicode-1-1-utf-7", "iso-2022-jp", "", "utf-8\x00"))
    cte = rng.choice(("base64", "quoted-printable", "8bit", "x-uuencode", "binary"))
    body = rng.choice(("+AGEAYgBj-", "====\r\n=ZZ=\r\n", "bGlmdA", "\udcff\udcfe drag", "begin 644 x\r\n#86)C\r\nend\r\n"))
    return mail({"Content-Transfer-Encoding": cte}, body, f'text/plain; charset="{charset}"')


def eml_boundaries(rng: random.Random) -> bytes:
    """A multipart with no boundary parameter, an empty one, one never closed, or one of 70 kB."""
    boundary = rng.choice(("", "x" * 70_000, "b", '"'))
    return mail(
        {},
        f"--{boundary}\r\nContent-Type: text/html\r\n\r\n<p>{words(rng, 5)}" * 3,
        f'multipart/alternative; boundary="{boundary}"' if rng.random() < 0.8 else "multipart/mixed",
    )


# ---- HTML ---------------------------------------------------------------------------------------------------


def valid_html(rng: random.Random) -> bytes:
    paras = "".join(f"<p>{words(rng, 15)}</p>" for _ in range(rng.randint(2, 10)))
    return f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{words(rng, 3)}</title></head><body><h1>h</h1>{paras}</body></html>".encode()


def html_deep(rng: random.Random) -> bytes:
    """Tags nested 100k to 1M deep that the depth guard may not count: cells in tables in cells, unclosed <p>/<li>,
    foreign (svg) elements, formatting elements (<b><i>…) that the parser reconstructs."""
    depth = rng.choice((100_000, 300_000, 1_000_000))
    unit = rng.choice(("<table><tr><td>", "<li>", "<p>", "<svg><g>", "<b><i>", "<a>", "<dl><dd>", "<option><optgroup>"))
    return f"<html><body>{unit * depth}{words(rng, 3)}</body></html>".encode()


def html_huge(rng: random.Random) -> bytes:
    """An attribute, a comment never closed, a script, or a run of entities of 10–40 MB."""
    size = rng.choice((10, 20, 40)) << 20
    kind = rng.randrange(5)
    body = [
        f'<p title="{"a" * size}">x</p>',
        "<!-- " + "c" * size,
        "<script>" + "var a=1;" * (size // 8),
        "&amp;" * (size // 5),
        "<p " + "a " * (size // 2) + ">",
    ][kind]
    return f"<html><body>{body}{words(rng, 3)}</body></html>".encode()


def html_encoding(rng: random.Random) -> bytes:
    """UTF-16 without a BOM, a meta charset that lies or names utf-7, mixed encodings, NUL bytes."""
    text = f"<html><head><meta charset='{rng.choice(('utf-7', 'x-bogus', 'utf-16', 'shift_jis'))}'></head><body>{words(rng, 8)} é ☃</body></html>"
    kind = rng.randrange(4)
    return [text.encode("utf-16-le"), text.encode("utf-8"), text.encode("utf-8") + "é".encode("latin-1") * 50, text.encode().replace(b" ", b"\x00")][
        kind
    ]


RTF = {"valid": valid_rtf, "deep": rtf_deep, "control_words": rtf_control_words, "wide": rtf_wide, "encoding": rtf_encoding, **corruptions(valid_rtf)}
EML = {
    "valid": valid_eml,
    "deep": eml_deep,
    "wide": eml_wide,
    "huge_header": eml_huge_header,
    "charsets": eml_charsets,
    "boundaries": eml_boundaries,
    **corruptions(valid_eml),
}
HTML = {"valid": valid_html, "deep": html_deep, "huge": html_huge, "encoding": html_encoding, **corruptions(valid_html)}
