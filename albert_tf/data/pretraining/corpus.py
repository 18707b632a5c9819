"""Reading the corpus: text with one sentence a line and a blank line between
documents, streamed as chunks of whole documents."""

from __future__ import annotations

import dataclasses
from typing import Iterator, Sequence

from albert_tf import fileio
from albert_tf.data import rows
from albert_tf.data.errors import DataError
from albert_tf.data.report import SkipLog


@dataclasses.dataclass
class Document:
    """Raw lines of one document, with where they came from."""
    source: str
    line_numbers: list[int]
    lines: list[str]

    def where(self, position: int = 0) -> str:
        return f"{self.source}:{self.line_numbers[position]}"


@dataclasses.dataclass
class Chunk:
    index: int
    documents: list[Document]


def read_lines(path: str, max_line_bytes: int, skips: SkipLog
               ) -> Iterator[tuple[int, str, int]]:
    """(line number, text, size in bytes) of each line of `path`.

    Lines that are not UTF-8, hold a NUL byte or are longer than `max_line_bytes` are
    skipped into `skips`, named by file and line; an over-long line is never held in
    memory whole. Only "\\n" ends a line; the text is without it (and without the "\\r"
    of a CRLF, or a byte-order mark at its start). A file saved as UTF-16 or UTF-32, or
    whose line ends are CR only, is refused (`DataError`), saying how to convert it.
    """
    with fileio.open_binary(path) as f:
        head = f.read(1 << 16)
        encoding = rows.utf8_bytes(head[:4])[1]
        if encoding is not None:
            raise DataError(f"{path}:1: the file is {encoding} (it starts with a {encoding} "
                            "byte-order mark, as Excel's \"Unicode text\" is saved); the "
                            "corpus is read as UTF-8: save it as UTF-8 (iconv -f "
                            f"{encoding} -t UTF-8)")
        if rows.cr_line_ends(head):
            raise DataError(f"{path}:1: the file's line ends are CR only (as old Mac "
                            "programs write) and the corpus is read at LF line ends: "
                            "convert them (tr '\\r' '\\n')")
        f.seek(0)
        number = 0
        while True:
            raw = f.readline(max_line_bytes + 1)
            if not raw:
                return
            number += 1
            here = f"{path}:{number}"
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):  # drop the rest of the line
                    raw = f.readline(max_line_bytes + 1)
                skips.skip(here, "line too long", f"longer than {max_line_bytes} bytes")
                continue
            text, problem = rows.decode_line(raw)
            if problem is not None:
                skips.skip(here, *problem)
                continue
            if text.strip():
                skips.kept += 1
            yield number, text, len(raw)


def read_chunks(files: Sequence[str], chunk_bytes: int, max_line_bytes: int,
                skips: SkipLog) -> Iterator[Chunk]:
    """Streams the corpus as chunks of whole documents, about `chunk_bytes` each.

    A document ends at a blank line or at the end of its file. A chunk ends at the
    first document end after `chunk_bytes`; a single document that reaches
    `chunk_bytes` on its own is cut there (its rest is a new document).
    """
    chunk: list[Document] = []
    chunk_size = 0
    index = 0
    for path in files:
        document, document_size = Document(path, [], []), 0
        for number, line, size in read_lines(path, max_line_bytes, skips):
            if line.strip():
                document.line_numbers.append(number)
                document.lines.append(line)
                document_size += size
                if document_size < chunk_bytes:
                    continue
            if document.lines:
                chunk.append(document)
                chunk_size += document_size
                document, document_size = Document(path, [], []), 0
            if chunk_size >= chunk_bytes:
                yield Chunk(index, chunk)
                chunk, chunk_size, index = [], 0, index + 1
        if document.lines:
            chunk.append(document)
            chunk_size += document_size
    if chunk:
        yield Chunk(index, chunk)
