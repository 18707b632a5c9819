"""Rows of text files read whole or not at all, each named by its file and line.

`read_lines` splits a file at its line breaks (LF or CRLF) and decodes each line on its
own: a line that is not UTF-8 or holds a NUL byte is a bad line (its reason kept), not
a bad file. A byte-order mark at the start of a line (a file's, or one left where files
were joined) is dropped. Only "\\n" ends a line: the other characters Python's
`str.splitlines` breaks at (U+2028, form feed, ...) are text. Two kinds of file that
spreadsheets write are read as their writer meant (`utf8_bytes`): one that starts with a
UTF-16 or UTF-32 byte-order mark (Excel's "Unicode text") is decoded from it, and one
whose line ends are CR only (old Mac Excel: more lone CRs than LFs, `cr_line_ends`) is
split at its CRs too.

`delimited_rows` reads CSV (RFC 4180: a field with a quote, delimiter or line break is
quoted, quotes doubled) and tab-separated files: quotes are text (as GLUE's files, which
the original reads with `quotechar=None`), or, with `quoting=DETECT`, quoted as in CSV
where the file was written so (pandas, Excel; `detect_quoting`). A header row that comes
again (two files joined) is skipped under its own reason, and a row whose fields are all
empty (a spreadsheet's empty row, `,,`) is left out as a blank line is. Every row
must have as many fields as the header (or, without one, as most rows of the file). A
quoted CSV field may hold line breaks only where the record it ends makes a whole row:
a quote that never closes, text after a closing quote, a quote inside an unquoted field
or a field count that does not fit skips the row where it started, and reading goes on
at the next line, so that one broken quote costs its own row and not the rows after it.

`json_lines` reads JSON lines: one object a line; a file that is one JSON array of
objects (a pretty-printed `.json`) is read item by item, each named by the line it
starts on.

A file's last line without a line break, in a file whose other lines have one, may be
cut short (an interrupted copy): it is read, and `Row.unended` says so, for readers to
refuse a label seen nowhere else (`albert_tf.data.tabular`).
"""

from __future__ import annotations

import bisect
import codecs
import collections
import dataclasses
import json
import re
from typing import Iterator

from absl import logging

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
REPEATED_HEADER = "repeated header"
NOT_LABEL_LIST = "label not a JSON list"
# The reasons a record is not a row under CSV quoting (`_Bad`): each one a quote that
# the file's writer did not put there by RFC 4180's rules.
_QUOTE_REASONS = frozenset({"text after a closing quote", "quote inside an unquoted field",
                            UNTERMINATED})
DETECT = "detect"  # `delimited_rows(quoting=DETECT)`: quoted as the file was written


@dataclasses.dataclass(frozen=True)
class Line:
    number: int  # 1-based
    text: str
    problem: tuple[str, str] | None = None  # (reason, detail) of a bad line
    unended: bool = False  # the file's last line, without the line break the others have


# UTF-32's marks first: UTF-32-LE's starts with UTF-16-LE's.
_WIDE_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32"),
              (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32"),
              (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16"),
              (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16"))
INVALID_WIDE = "invalid {}"  # a line of a UTF-16 / UTF-32 file that does not decode


def utf8_bytes(raw: bytes) -> tuple[bytes, str | None]:
    """(UTF-8 bytes, the encoding read from, or None for UTF-8) of a file's bytes: a
    leading UTF-8 byte-order mark dropped; a file that starts with a UTF-16 or UTF-32
    one (Excel saves "Unicode text" as UTF-16) decoded from it, as is one without a
    mark whose first 1,024 bytes are 90% ASCII characters of UTF-16 (a NUL byte in
    every pair), which is never UTF-8 text. A character that does not decode (an
    unpaired surrogate, a code unit cut off at the end) becomes bytes that are not
    UTF-8, so that its line alone is bad (`read_lines`)."""
    if raw.startswith(codecs.BOM_UTF8):
        return raw[len(codecs.BOM_UTF8):], None
    found = next(((raw[len(bom):], codec, name) for bom, codec, name in _WIDE_BOMS
                  if raw.startswith(bom)), None)
    pairs = [raw[i:i + 2] for i in range(0, min(len(raw), 1024) - 1, 2)]
    for codec, zero in (("utf-16-le", 1), ("utf-16-be", 0)):
        if found is None and len(pairs) >= 8 and sum(
                p[zero] == 0 and p[1 - zero] != 0 for p in pairs) >= 0.9 * len(pairs):
            found = (raw, codec, "UTF-16")
    if found is None:
        return raw, None
    body, codec, name = found
    cut = len(body) % (4 if name == "UTF-32" else 2)
    text = body[:len(body) - cut].decode(codec, "surrogatepass")
    return text.encode("utf-8", "surrogatepass") + b"\xff" * bool(cut), name


def _read_bytes(path: str, error: type[Exception]) -> bytes:
    """The file's bytes; `error` where it cannot be read."""
    try:
        return fileio.read_bytes(path)
    except OSError as e:
        raise error(f"cannot read {path}: {e}") from None


def _read_utf8(path: str, error: type[Exception]) -> tuple[bytes, str | None]:
    """The file's bytes as UTF-8 and the encoding read from (`utf8_bytes`)."""
    raw, encoding = utf8_bytes(_read_bytes(path, error))
    if encoding is not None:
        logging.info("%s: read as %s, as its first bytes are", path, encoding)
    return raw, encoding


def read_lines(path: str, error: type[Exception] = DataError) -> list[Line]:
    """The lines of `path` (see the module's docstring); `error` names a file that
    cannot be read."""
    raw, encoding = _read_utf8(path, error)
    if cr_line_ends(raw):
        logging.info("%s: its line ends are CR only (as old Mac spreadsheets write): "
                     "read as line breaks", path)
        raw = _LONE_CR.sub(b"\n", raw)
    parts = raw.split(b"\n")
    ended = parts[-1] == b""
    if ended:
        parts.pop()
    lines = []
    for number, part in enumerate(parts, 1):
        text, problem = decode_line(part)
        if problem is not None and problem[0] == INVALID_UTF8 and encoding is not None:
            problem = (INVALID_WIDE.format(encoding),
                       "a character that does not decode (an unpaired surrogate, or a "
                       "code unit cut off at the end of the file)")
        lines.append(Line(number, text, problem,
                          unended=not ended and number == len(parts) > 1))
    return lines


_LONE_CR = re.compile(rb"\r(?!\n)")


def cr_line_ends(raw: bytes) -> bool:
    """Whether a file's lines end with a CR alone (old Mac programs; Excel's then keeps
    an LF for a line break inside a cell): more lone CRs than LFs. A stray CR in a file
    of LF or CRLF line ends is text."""
    return b"\r" in raw and len(_LONE_CR.findall(raw)) > raw.count(b"\n")


def text_head(path: str, size: int = 4096) -> str:
    """The first `size` bytes of `path` as text (`utf8_bytes`: a UTF-16 file's too),
    what does not decode replaced: for telling a file's format from its start."""
    with fileio.open_binary(path) as f:
        head = f.read(size)
    return utf8_bytes(head)[0].decode("utf-8", errors="replace")


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


def _csv_fields(text: str, delimiter: str, patterns, needed: list | None = None
                ) -> list[str] | int:
    """The fields of one record's text, or the position of a quote that opens a field
    and does not close in it. Raises `_Bad`. `needed` gets the quoted fields that
    need their quotes (a doubled quote, the delimiter or a line break inside)."""
    quoted, unquoted = patterns
    fields, pos = [], 0
    if needed is not None:
        needed.clear()
    while True:
        if text.startswith('"', pos):
            m = quoted.match(text, pos)
            if m is None:
                return pos
            if needed is not None and any(c in m.group(1) for c in ('""', delimiter, "\n")):
                needed.append(m.group(1))
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


def _records(lines: list[Line], delimiter: str, quoting: bool, evidence: dict | None = None
             ) -> Iterator[tuple[int, int, list[str] | _Bad]]:
    """(index of the first line, index of the last line, fields or why not) of each
    record, blank lines left out; a bad record covers its first line only. `evidence`
    gets, by the index of a record's first line, how many of its quoted fields need
    their quotes."""
    patterns = _quoted(delimiter)
    needed: list[str] = []
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
                    fields = _csv_fields(text, delimiter, patterns, needed)
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
        if evidence is not None and needed:
            evidence[i] = len(needed)
        yield i, last, fields
        i = last + 1


def detect_quoting(lines: list[Line], delimiter: str) -> tuple[bool, list | None]:
    """(whether the file is quoted as CSV is, its records read so or None) for a
    tab-separated file whose quotes may be text (GLUE's files, which the original reads
    with `quotechar=None`: quotes that open a field and close in the middle of it, or
    never) or quoting (a TSV from pandas or Excel: a field with a quote, tab or line
    break quoted, its quotes doubled). Read quoted when the quoted fields that need
    their quotes (a doubled quote, a tab or a line break inside), in records that make
    rows of the file's width (that of most of its records), with a header whose every
    field is quoted counted too, are at least as many as the records that quoting
    cannot read (a quote inside an unquoted field, text after a closing quote, a quote
    that never closes, a quoted line break that makes no row of that width), and there
    is one: a file with no such field, or with more quotes that are text, keeps its
    quotes as text."""
    if not any('"' in line.text for line in lines):
        return False, None
    needed: dict[int, int] = {}
    records = list(_records(lines, delimiter, True, needed))
    widths = collections.Counter(len(f) for _, _, f in records if isinstance(f, list))
    width = widths.most_common(1)[0][0] if widths else 0
    broken = evidence = 0
    for first, last, fields in records:
        if isinstance(fields, _Bad):
            broken += fields.args[0] in _QUOTE_REASONS
        elif len(fields) == width:
            evidence += needed.get(first, 0)
        else:
            broken += last > first
    head = next((line.text for line in lines if line.problem is None and line.text.strip()),
                "").split(delimiter)
    evidence += all(len(c) > 1 and c[0] == c[-1] == '"' for c in head)
    return (evidence >= broken and evidence > 0), records


def delimited_rows(path: str, skips: SkipLog, *, delimiter: str, quoting: bool | str,
                   header: bool, error: type[Exception] = DataError, named: bool = False
                   ) -> tuple[list[str] | None, list[Row]]:
    """(the header's fields or None, the rows) of a CSV (`quoting`) or tab-separated
    file (quotes as text, or `quoting=DETECT`: as the file was written,
    `detect_quoting`); each record that is not a whole row is skipped into `skips`
    (see the module's docstring). A header that is not a row raises `error`; so does,
    for rows read by column name (`named`), one that names a column twice
    (`check_names`)."""
    lines = read_lines(path, error)
    records = None
    if quoting == DETECT:
        quoting, records = detect_quoting(lines, delimiter)
        if quoting:
            logging.info("%s: read with its quotes as CSV's (a field with a quote, tab or "
                         "line break quoted, its quotes doubled), as pandas and Excel "
                         "write tab-separated files", path)
    if not quoting or records is None:
        records = list(_records(lines, delimiter, bool(quoting)))
    # a spreadsheet's empty row (",,") is a blank line
    records = [r for r in records if isinstance(r[2], _Bad) or "".join(r[2]).strip()]
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
        if named:
            check_names(path, names, error, lines[first].number)
    else:
        counts = collections.Counter(len(f) for _, _, f in records if isinstance(f, list))
        expected = counts.most_common(1)[0][0] if counts else 0
    rows = []
    plain_names = names and [name.strip() for name in names]
    for first, last, fields in records:
        line = lines[first]
        if isinstance(fields, _Bad):
            skips.skip(where(path, line.number), *fields.args)
        elif plain_names and [f.strip() for f in fields] == plain_names:
            skips.skip(where(path, line.number), REPEATED_HEADER,
                       "the header row again (files joined?)")
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


def check_names(path: str, names: list[str], error: type[Exception] = DataError,
                line: int = 1) -> None:
    """Raises `error` for a header row that names a column twice (an empty name aside:
    a spreadsheet's unnamed columns): a row read by column name would hold only the
    last of them."""
    seen: dict[str, int] = {}
    for column, name in enumerate(names, 1):
        if name.strip() and name in seen:
            raise error(f"{where(path, line)}: the header names the column {name!r} twice "
                        f"(columns {seen[name]} and {column}): a row read by name would "
                        "hold only the last; rename one of them")
        seen.setdefault(name, column)


_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _array_items(text: str) -> list[tuple[int, object]]:
    """(offset, value) of each item of the JSON array that `text` is. Raises
    `json.JSONDecodeError` (or ValueError) where it is not one."""
    decoder, items = json.JSONDecoder(), []
    pos = _JSON_SPACE.match(text).end()
    if not text.startswith("[", pos):
        raise json.JSONDecodeError("Expecting '['", text, pos)
    pos = _JSON_SPACE.match(text, pos + 1).end()
    if text.startswith("]", pos):
        pos += 1
    else:
        while True:
            item, end = decoder.raw_decode(text, pos)
            items.append((pos, item))
            pos = _JSON_SPACE.match(text, end).end()
            if text.startswith(",", pos):
                pos = _JSON_SPACE.match(text, pos + 1).end()
            elif text.startswith("]", pos):
                pos += 1
                break
            else:
                raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
    pos = _JSON_SPACE.match(text, pos).end()
    if pos != len(text):
        raise json.JSONDecodeError("Extra data", text, pos)
    return items


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _json_document_items(path: str, lines: list[Line], error: type[Exception]
                         ) -> list[tuple[int, object]] | None:
    """(line number, value) of each item of a file that is one JSON array written over
    its lines (a pretty-printed `.json`), or None for JSON lines. A file that starts
    with "[" and is not a whole array (most of its lines not JSON on their own) raises
    `error`, naming the line; so does one JSON object written over many lines."""
    filled = [line for line in lines if line.problem is not None or line.text.strip()]
    if not filled or filled[0].problem is not None:
        return None
    opening = filled[0].text.lstrip(BOM + " \t\r")[:1]
    if opening not in ("[", "{") or _parses(filled[0].text) and (
            opening == "{" or len(filled) > 1):
        return None
    if opening == "{":  # a first line that is no object alone: one object over lines?
        if len(filled) > 1 and not any(_parses(line.text) for line in filled[1:]) \
                and all(line.problem is None for line in filled) \
                and isinstance(_try_json("\n".join(line.text for line in lines)), dict):
            raise error(f"{where(path, filled[0].number)}: the file is one JSON object "
                        f"written over {len(lines)} lines; it is read as JSON lines (one "
                        "object a line) or as one JSON array of objects")
        return None
    bad = next((line for line in filled if line.problem is not None), None)
    text = "\n".join(line.text for line in lines)
    try:
        if bad is not None:
            raise ValueError(bad)
        items = _array_items(text)
    except ValueError as e:
        if 2 * sum(_parses(line.text) for line in filled) > len(filled):
            return None  # JSON lines, with a "[" on the first
        what = "one JSON array of objects, read whole or not at all"
        if bad is not None:
            raise error(f"{where(path, bad.number)}: {bad.problem[0]} ({bad.problem[1]}); "
                        f"the file starts with '[' and is {what}") from None
        if isinstance(e, json.JSONDecodeError):
            raise error(f"{where(path, e.lineno)}: not valid JSON ({e.msg}, column "
                        f"{e.colno}); the file starts with '[' and is {what}") from None
        raise error(f"{path} is not valid JSON ({e}); the file starts with '[' and is "
                    f"{what}") from None
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line.text) + 1)
    return [(bisect.bisect_right(starts, offset), item) for offset, item in items]


def _try_json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def json_lines(path: str, skips: SkipLog, error: type[Exception] = DataError
               ) -> Iterator[tuple[int, dict, bool]]:
    """(line number, object, unended) of each JSON object line; blank lines are left
    out; a line that is not one JSON object is skipped into `skips`. A file that is
    one JSON array written over its lines gives its items, each named by the line it
    starts on (one that is not an object skipped), or raises `error` naming the line
    where it does not parse (see `_json_document_items`). A file of three lines or
    more, most of which are not JSON on their own, is no JSON lines file: `error`, in
    one message naming the first such line, instead of a skip a line."""
    lines = read_lines(path, error)
    items = _json_document_items(path, lines, error)
    if items is not None:
        logging.info("%s: read as one JSON array of %d items", path, len(items))
        for number, item in items:
            if not isinstance(item, dict):
                skips.skip(where(path, number), NOT_OBJECT, f"a JSON {type(item).__name__}")
                continue
            yield number, item, False
        return
    parsed = []
    for line in lines:
        if line.problem is None and not line.text.strip():
            continue
        if line.problem is not None:
            parsed.append((line, line.problem))
            continue
        try:
            parsed.append((line, json.loads(line.text)))
        except ValueError as e:  # json.JSONDecodeError, or a number too long to convert
            parsed.append((line, (NOT_JSON, getattr(e, "msg", str(e)))))
    failed = [(line, why) for line, why in parsed if isinstance(why, tuple)]
    if len(parsed) >= 3 and 2 * len(failed) > len(parsed):
        line, (reason, detail) = failed[0]
        raise error(f"{where(path, line.number)}: {reason} ({detail}), as {len(failed)} of "
                    f"the file's {len(parsed)} lines are: it is read as JSON lines (one "
                    "object a line) or as one JSON array of objects")
    for line, item in parsed:
        here = where(path, line.number)
        if isinstance(item, tuple):
            skips.skip(here, *item)
        elif not isinstance(item, dict):
            skips.skip(here, NOT_OBJECT, f"a JSON {type(item).__name__}")
        else:
            yield line.number, item, line.unended


def json_document(path: str, error: type[Exception] = DataError):
    """A file that is one JSON value (C3; SQuAD's bytes: `parse_json_document`)."""
    return parse_json_document(_read_bytes(path, error), path, error)


def parse_json_document(raw: bytes, path: str, error: type[Exception] = DataError):
    """The bytes of a file that is one JSON value, read whole or not at all, so one
    that is not JSON raises `error`, naming the line (`path`'s). A leading byte-order
    mark is dropped (a UTF-16 or UTF-32 one decodes the file: `utf8_bytes`). Bytes
    that are not UTF-8 become lone surrogates, for the reader to skip only the item
    whose text holds them (`text_problem`)."""
    raw = utf8_bytes(raw)[0]
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
