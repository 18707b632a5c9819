"""Rows of text files read whole or not at all, each named by its file and line.

`read_lines` splits a file at its line breaks (LF or CRLF) and decodes each line on its
own: a line that is not UTF-8 or holds a NUL byte is a bad line (its reason kept), not
a bad file. A byte-order mark at the start of a line (a file's, or one left where files
were joined) is dropped. Only "\\n" ends a line: the other characters Python's
`str.splitlines` breaks at (U+2028, form feed, ...) are text.

`delimited_rows` reads CSV (RFC 4180: a field with a quote, delimiter or line break is
quoted, quotes doubled) and tab-separated files (quotes are text, as GLUE's). Every row
must have as many fields as the header (or, without one, as most rows of the file). A
quoted CSV field may hold line breaks only where the record it ends makes a whole row:
a quote that never closes, text after a closing quote, a quote inside an unquoted field
or a field count that does not fit skips the row where it started, and reading goes on
at the next line, so that one broken quote costs its own row and not the rows after it.

`json_lines` reads JSON lines: one object a line.

A file's last line without a line break, in a file whose other lines have one, may be
cut short (an interrupted copy): it is read, and `Row.unended` says so, for readers to
refuse a label seen nowhere else (`albert_tf.data.tabular`).
"""

from __future__ import annotations

import codecs
import collections
import dataclasses
import json
import re
from typing import Iterator

from albert_tf import fileio
from albert_tf.data.errors import DataError
from albert_tf.data.report import SkipLog

BOM = "\ufeff"
INVALID_UTF8 = "invalid UTF-8"
NUL = "NUL byte"
FIELD_COUNT = "wrong number of fields"
NOT_JSON = "not JSON"
NOT_OBJECT = "not a JSON object"
UNKNOWN_LABEL = "unknown label"
CUT_SHORT = "last line cut short"
UNTERMINATED = "unterminated quote"


@dataclasses.dataclass(frozen=True)
class Line:
    number: int  # 1-based
    text: str
    problem: tuple[str, str] | None = None  # (reason, detail) of a bad line
    unended: bool = False  # the file's last line, without the line break the others have


def _read_bytes(path: str, error: type[Exception]) -> bytes:
    """The file's bytes, a leading byte-order mark dropped; `error` where it cannot be
    read."""
    try:
        raw = fileio.read_bytes(path)
    except OSError as e:
        raise error(f"cannot read {path}: {e}") from None
    return raw[len(codecs.BOM_UTF8):] if raw.startswith(codecs.BOM_UTF8) else raw


def read_lines(path: str, error: type[Exception] = DataError) -> list[Line]:
    """The lines of `path` (see the module's docstring); `error` names a file that
    cannot be read."""
    raw = _read_bytes(path, error)
    parts = raw.split(b"\n")
    ended = parts[-1] == b""
    if ended:
        parts.pop()
    lines = []
    for number, part in enumerate(parts, 1):
        text, problem = decode_line(part)
        lines.append(Line(number, text, problem,
                          unended=not ended and number == len(parts) > 1))
    return lines


def decode_line(raw: bytes) -> tuple[str, tuple[str, str] | None]:
    """(text, problem) of one line's bytes, its line break ("\\n", "\\r\\n") and a
    byte-order mark at its start dropped; problem: (reason, detail) of a line that is
    not UTF-8 or holds a NUL byte (its text then ""), else None."""
    raw = raw[:-1] if raw.endswith(b"\n") else raw
    raw = raw[:-1] if raw.endswith(b"\r") else raw
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return "", (INVALID_UTF8, f"byte {raw[e.start]:#04x} at column {e.start + 1}")
    if "\0" in text:
        return "", (NUL, f"a NUL byte at column {text.index(chr(0)) + 1}")
    return text.lstrip(BOM), None


def where(path: str, line: int) -> str:
    return f"{path}:{line}"


# ------------------------------------------------------------------------ delimited
@dataclasses.dataclass(frozen=True)
class Row:
    line: int  # where it starts
    fields: list[str]
    unended: bool = False


class _Bad(Exception):
    """A record that is not a row: (reason, detail)."""


def _quoted(delimiter: str) -> tuple[re.Pattern, re.Pattern]:
    # A quoted field (pairs of quotes inside) that closes; an unquoted field.
    return (re.compile(r'"((?:[^"]|"")*)"(?!")', re.S),
            re.compile(r'[^"%s]*' % re.escape(delimiter)))


_CLOSES = re.compile(r'(?:[^"]|"")*"(?!")')  # a line that closes an open quoted field


def _csv_fields(text: str, delimiter: str, patterns) -> list[str] | int:
    """The fields of one record's text, or the position of a quote that opens a field
    and does not close in it. Raises `_Bad`."""
    quoted, unquoted = patterns
    fields, pos = [], 0
    while True:
        if text.startswith('"', pos):
            m = quoted.match(text, pos)
            if m is None:
                return pos
            fields.append(m.group(1).replace('""', '"'))
            pos = m.end()
            if pos < len(text) and text[pos] != delimiter:
                raise _Bad("text after a closing quote",
                           f"{text[pos:pos + 20]!r} after the quoted field "
                           f"{_short(m.group(1))}")
        else:
            m = unquoted.match(text, pos)
            fields.append(m.group(0))
            pos = m.end()
            if text.startswith('"', pos):
                raise _Bad("quote inside an unquoted field",
                           f"{_short(m.group(0) + text[pos:pos + 10])}: a field with a "
                           "quote must be quoted, its quotes doubled")
        if pos >= len(text):
            return fields
        pos += 1  # the delimiter
        if pos == len(text):
            fields.append("")
            return fields


def _short(text: str, size: int = 40) -> str:
    return repr(text if len(text) <= size else text[:size] + "...")


def _records(lines: list[Line], delimiter: str, quoting: bool
             ) -> Iterator[tuple[int, int, list[str] | _Bad]]:
    """(index of the first line, index of the last line, fields or why not) of each
    record, blank lines left out; a bad record covers its first line only."""
    patterns = _quoted(delimiter)
    never_closes_from = len(lines)  # an open quote stays open from this line to the end
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.problem is None and not line.text.strip():
            i += 1
            continue
        if line.problem is not None:
            yield i, i, _Bad(*line.problem)
            i += 1
            continue
        if not quoting:
            yield i, i, line.text.split(delimiter)
            i += 1
            continue
        text, last, opened = line.text, i, None
        try:
            while True:
                try:
                    fields = _csv_fields(text, delimiter, patterns)
                except _Bad as bad:
                    if opened is None:
                        raise
                    raise _Bad(UNTERMINATED, f"{opened} closes at line "
                               f"{lines[last].number} into no row: {bad.args[1]}") from None
                if isinstance(fields, list):
                    break
                if opened is None:
                    column = fields - text.rfind("\n", 0, fields)
                    opened = f"the quote at column {column}"
                closing = None
                if last + 1 < never_closes_from:
                    for j in range(last + 1, len(lines)):
                        if lines[j].problem is not None:
                            raise _Bad(UNTERMINATED, f"{opened} runs into line "
                                       f"{lines[j].number}, which has {lines[j].problem[0]}")
                        if _CLOSES.match(lines[j].text):
                            closing = j
                            break
                    else:
                        never_closes_from = last + 1
                if closing is None:
                    raise _Bad(UNTERMINATED, f"{opened} never closes")
                text += "\n" + "\n".join(lines[k].text for k in range(last + 1, closing + 1))
                last = closing
        except _Bad as bad:
            yield i, i, bad
            i += 1
            continue
        yield i, last, fields
        i = last + 1


def delimited_rows(path: str, skips: SkipLog, *, delimiter: str, quoting: bool,
                   header: bool, error: type[Exception] = DataError
                   ) -> tuple[list[str] | None, list[Row]]:
    """(the header's fields or None, the rows) of a CSV (`quoting`) or tab-separated
    file; each record that is not a whole row is skipped into `skips` (see the module's
    docstring). A header that is not a row raises `error`."""
    lines = read_lines(path, error)
    records = list(_records(lines, delimiter, quoting))
    names = None
    if header:
        if not records:
            raise error(f"{path} is empty: expected a header row")
        first, _, fields = records.pop(0)
        if isinstance(fields, _Bad):
            reason, detail = fields.args
            raise error(f"{where(path, lines[first].number)}: the header row is not "
                        f"readable ({reason}: {detail})")
        names = fields
        expected = len(names)
    else:
        counts = collections.Counter(len(f) for _, _, f in records if isinstance(f, list))
        expected = counts.most_common(1)[0][0] if counts else 0
    rows = []
    for first, last, fields in records:
        line = lines[first]
        if isinstance(fields, _Bad):
            skips.skip(where(path, line.number), *fields.args)
        elif len(fields) != expected:
            expect = f"expected {expected} as {'the header' if header else 'most rows'}"
            if last > first:  # a quoted field over line ends that makes no row
                skips.skip(where(path, line.number), UNTERMINATED,
                           f"a field quoted here closes at line {lines[last].number} into "
                           f"{len(fields)} fields, {expect}")
            else:
                skips.skip(where(path, line.number), FIELD_COUNT,
                           f"{len(fields)} fields, {expect}")
        else:
            rows.append(Row(line.number, fields, lines[last].unended))
    return names, rows


def json_lines(path: str, skips: SkipLog, error: type[Exception] = DataError
               ) -> Iterator[tuple[int, dict, bool]]:
    """(line number, object, unended) of each JSON object line; blank lines are left
    out; a line that is not one JSON object is skipped into `skips`."""
    for line in read_lines(path, error):
        if line.problem is None and not line.text.strip():
            continue
        here = where(path, line.number)
        if line.problem is not None:
            skips.skip(here, *line.problem)
            continue
        try:
            item = json.loads(line.text)
        except ValueError as e:  # json.JSONDecodeError, or a number too long to convert
            skips.skip(here, NOT_JSON, getattr(e, "msg", str(e)))
            continue
        if not isinstance(item, dict):
            skips.skip(here, NOT_OBJECT, f"a JSON {type(item).__name__}")
            continue
        yield line.number, item, line.unended


def json_document(path: str, error: type[Exception] = DataError):
    """A file that is one JSON value (C3; SQuAD's bytes: `parse_json_document`)."""
    return parse_json_document(_read_bytes(path, error), path, error)


def parse_json_document(raw: bytes, path: str, error: type[Exception] = DataError):
    """The bytes of a file that is one JSON value, read whole or not at all, so one
    that is not JSON raises `error`, naming the line (`path`'s). A leading byte-order
    mark is dropped. Bytes that are not UTF-8 become lone surrogates, for the reader to
    skip only the item whose text holds them (`text_problem`)."""
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
    try:
        return json.loads(raw.decode("utf-8", "surrogateescape"))
    except json.JSONDecodeError as e:
        raise error(f"{where(path, e.lineno)}: not valid JSON ({e.msg}, column {e.colno}); "
                    "the file is one JSON document, read whole or not at all") from None
    except ValueError as e:  # a number too long to convert
        raise error(f"{path} is not valid JSON: {e}") from None


_BAD_TEXT = re.compile("[\ud800-\udfff\x00]")


def text_problem(value: str) -> tuple[str, str] | None:
    """(reason, detail) when a text read from JSON holds bytes that were not UTF-8 (see
    `json_document`) or a NUL character; else None."""
    m = _BAD_TEXT.search(value)
    if m is None:
        return None
    if m.group() == "\x00":
        return NUL, f"a NUL character at character {m.start() + 1}"
    return INVALID_UTF8, f"an invalid byte at character {m.start() + 1}"
