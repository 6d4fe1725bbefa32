"""Reader of e-mail messages (.eml, RFC 822/MIME): a header block, then the body text; attachments listed, not read."""

import re
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser

from lodex.indexer.errors import ReadError
from lodex.indexer.readers.containers import unreadable
from lodex.indexer.readers.doc_builder import DOC_BUILDER_VERSION, DocBuilder
from lodex.indexer.readers.document import Document, ReadLimits

# Bump the first number whenever a change here would change the text, title or extras read_eml gives.
MAIL_READER_VERSION = f"1+{DOC_BUILDER_VERSION}"

HEADERS = ("Subject", "From", "Date")  # the header block's lines, in this order (those the message has)
# A message of more MIME parts than this is refused before it is parsed: the email package takes about a millisecond a
# part (200,000 parts took minutes), and a real message has a few dozen.
MAX_MIME_PARTS = 1_000
_BOUNDARY = re.compile(rb'(?i)\bboundary\s*=\s*(?:"([^"\r\n]{1,200})"|([^\s;"]{1,200}))')
_HOSTILE_FIX = "the message is corrupt or hostile: exclude it"
_DELIMITER = re.compile(rb"^--([^\r\n]{1,200})", re.MULTILINE)
# A boundary parameter in RFC 2231's form (boundary*0=…, boundary*=…) or over 200 characters: the email package reads
# it, the part count above does not.
_ODD_BOUNDARY = re.compile(rb'(?i);\s*boundary\*|;\s*boundary\s*=\s*(?:"[^"\r\n]{201}|[^\s;"]{201})')


def read_eml(data: bytes, limits: ReadLimits) -> Document:
    """A message: "Subject: …\\nFrom: …\\nDate: …", then its body (text/plain preferred, else text/html as text);
    title = Subject. Attachments are not indexed: their names go to extras["skipped_attachments"] (comma-separated)."""
    if _ODD_BOUNDARY.search(data):  # parts under a boundary the count below cannot read would go uncounted
        raise ReadError(
            "mail whose multipart boundary is split in pieces (RFC 2231) or longer than 200 characters (RFC 2046 allows 70); refused", _HOSTILE_FIX
        )
    if mime_parts(data, MAX_MIME_PARTS) > MAX_MIME_PARTS:
        raise ReadError(f"mail of more than {MAX_MIME_PARTS:,} MIME parts (no real message has so many); refused", _HOSTILE_FIX)
    try:
        return _read_message(data, limits)
    except RecursionError as exc:  # the email package walks nested parts recursively
        raise ReadError("MIME parts nested too deeply to read (thousands of levels; no real mail nests so)", _HOSTILE_FIX) from exc


def mime_parts(data: bytes, most: int) -> int:
    """How many parts the message's multiparts open (counted up to `most` + 1), without parsing it: the lines that
    begin with "--" and one of the boundaries the message declares (closing delimiters, "--boundary--", not counted)."""
    boundaries = {quoted or bare for quoted, bare in _BOUNDARY.findall(data)}
    count = 0
    for match in _DELIMITER.finditer(data) if boundaries else ():
        count += match.group(1).rstrip() in boundaries
        if count > most:
            break
    return count


def _read_message(data: bytes, limits: ReadLimits) -> Document:
    msg = BytesParser(policy=policy.default).parsebytes(data)
    if not isinstance(msg, EmailMessage) or not any(_header(msg, name) for name in HEADERS):
        raise unreadable("eml", "no Subject, From or Date header: not a mail message")
    doc = DocBuilder(limits, "eml")
    doc.block("\n".join(f"{name}: {value}" for name in HEADERS if (value := _header(msg, name))))
    body = msg.get_body(preferencelist=("plain", "html"))
    if isinstance(body, EmailMessage):
        doc.block(_body_text(body))
    skipped = _attachment_names(msg, body)
    extras = {"skipped_attachments": ", ".join(skipped)} if skipped else {}
    return doc.build(title=_header(msg, "Subject"), extras=extras)


def _header(msg: Message, name: str) -> str:
    """A header's decoded value on one line ("" when absent, or too malformed for the parser to render)."""
    try:
        value = msg.get(name)
        return " ".join(str(value).split()) if value is not None else ""
    except Exception:  # noqa: BLE001 — the email package raises many kinds of error on malformed headers
        return ""


def _body_text(part: EmailMessage) -> str:
    """The body part's text: plain as it is, HTML without its markup."""
    from lodex.indexer.readers.html_reader import read_html

    text = _content(part)
    return read_html(text).text if part.get_content_type() == "text/html" else text


def _content(part: EmailMessage) -> str:
    """A text part decoded by its charset (an unknown charset read as UTF-8, bad bytes replaced)."""
    try:
        content = part.get_content()
        if isinstance(content, str):
            return content
    except (LookupError, UnicodeError, ValueError, AssertionError):
        pass
    payload = part.get_payload(decode=True)
    return payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""


def _attachment_names(msg: EmailMessage, body: Message | None) -> list[str]:
    """Names of the parts that are not the body nor an alternative rendering of it: attachments, inline images,
    forwarded messages ("(unnamed type/subtype)" for those without a file name)."""
    names = []
    for part in msg.walk():
        if part.get_content_type() == "message/rfc822" and part is not msg:
            names.append(part.get_filename() or f"(forwarded message: {_forwarded_subject(part)})")
        if part is body or part.is_multipart() or part is msg:
            continue
        filename = part.get_filename()
        if filename or part.get_content_disposition() == "attachment" or not part.get_content_maintype() == "text":
            names.append(" ".join((filename or f"(unnamed {part.get_content_type()})").split()))
    return names


def _forwarded_subject(part: Message) -> str:
    """The Subject of a message/rfc822 part's message."""
    payload = part.get_payload()
    inner = payload[0] if isinstance(payload, list) and payload else None
    return _header(inner, "Subject") if isinstance(inner, Message) else ""
