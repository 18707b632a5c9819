"""Classification and regression examples from your own CSV, TSV or JSONL files.

The format comes from the file name: `.csv` (comma-separated, double quotes as in
Python's `csv`), `.tsv` / `.txt` (tab-separated, quotes are text as in GLUE's files),
`.jsonl` / `.json` (one JSON object per line). Fields are named (`text_a_field`,
`text_b_field`, `label_field`): a column name of the header row (or a JSON key), or a
0-based column index. CSV/TSV files have a header row unless `header=False` (then
fields are indices).

Rows become `albert_tf.data.sentence_records.InputExample`s, so GLUE's records, metrics
and training serve them unchanged; `file_task` describes the task as a `SentenceTask`. Labels
are read as strings (a JSON number 1 is "1"); regression labels as floats. Bad rows (a
missing field, an unknown label, a regression label that is not a number, invalid
UTF-8 or JSON) are skipped with a warning naming file and line, then counted; a file
with no usable row is an error.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os

from albert_tf.data import records
from albert_tf.data.sentence_records import InputExample, SentenceDataError, SentenceTask
from albert_tf.fileio import read_text

FORMATS = {".csv": "csv", ".tsv": "tsv", ".txt": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}
# --data_dir file names of each split (any of the formats).
SPLIT_NAMES = {"train": "train", "dev": "dev", "test": "test"}


class TableDataError(SentenceDataError):
    """A file or field setting that cannot give examples."""


@dataclasses.dataclass(frozen=True)
class Fields:
    """Where the texts and the label are: names, or column indices as strings."""

    text_a: str
    text_b: str | None = None
    label: str | None = None

    def used(self, with_label: bool) -> list[tuple[str, str]]:
        out = [("text_a_field", self.text_a)]
        if self.text_b is not None:
            out.append(("text_b_field", self.text_b))
        if with_label and self.label is not None:
            out.append(("label_field", self.label))
        return out


def file_format(path: str) -> str:
    extension = os.path.splitext(path)[1].lower()
    if extension not in FORMATS:
        raise TableDataError(f"{path}: cannot tell the format from {extension or 'no'} "
                             f"extension; use one of {', '.join(FORMATS)}")
    return FORMATS[extension]


def split_file(data_dir, split: str) -> str:
    """`<data_dir>/<split>.<csv|tsv|jsonl>`: the one present."""
    base = os.path.join(os.fspath(data_dir), SPLIT_NAMES[split])
    found = [base + e for e in (".csv", ".tsv", ".jsonl") if os.path.exists(base + e)]
    if len(found) != 1:
        raise FileNotFoundError(
            f"expected one of {base}.csv, .tsv or .jsonl for the {split} split, found "
            f"{len(found)}")
    return found[0]


def rows(path: str, header: bool, used: list[tuple[str, str]], skips: records.SkipLog):
    """(line number, row), each row a dict: a JSON object, or a CSV/TSV row by column
    index (as a string) and, with a header, by column name too. A `used` field (flag,
    field) that is neither a header name nor a column index is an error, raised when the
    header is read, before any row."""
    text = read_text(path, TableDataError)
    kind = file_format(path)
    if kind == "jsonl":
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as e:
                skips.skip(f"{path}:{number}", f"not JSON ({e.msg})")
                continue
            if not isinstance(item, dict):
                skips.skip(f"{path}:{number}", "not a JSON object")
                continue
            yield number, item
        return
    options = {"delimiter": ","} if kind == "csv" else {"delimiter": "\t",
                                                         "quoting": csv.QUOTE_NONE}
    reader = csv.reader(io.StringIO(text, newline=""), **options)
    names = None
    for row in reader:
        if header and names is None:
            names = row
            for flag, field in used:
                if field not in names and not (field.isdigit() and int(field) < len(names)):
                    raise TableDataError(
                        f"{path}: --{flag}={field} is neither a column of the header "
                        f"({', '.join(names)}) nor a column index")
            continue
        if not row or row == [""]:
            continue
        if names is not None:
            item = {str(i): v for i, v in enumerate(row)}
            item.update({n: row[i] for i, n in enumerate(names) if i < len(row)})
            yield reader.line_num, item
        else:
            yield reader.line_num, {str(i): v for i, v in enumerate(row)}


def complete_rows(path: str, fields: Fields, header: bool, with_label: bool,
                  skips: records.SkipLog):
    """(where, row) of the rows that hold every field used (`path:line`); a row that
    lacks one is skipped, naming what it lacks."""
    for number, row in rows(path, header, fields.used(with_label), skips):
        where = f"{path}:{number}"
        missing = [f"{field!r} (--{flag})" for flag, field in fields.used(with_label)
                   if row.get(field) is None]
        if missing:
            skips.skip(where, f"missing {', '.join(missing)}")
            continue
        yield where, row


def read_examples(path: str, fields: Fields, *, split: str, labels: list[str] | None,
                  regression: bool, header: bool = True,
                  process_text=str) -> list[InputExample]:
    """The examples of one file (see the module's docstring). With `labels`, a row
    whose label is not one of them is skipped; a test split (or no `label_field`)
    reads no label."""
    with_label = split != "test" and fields.label is not None
    skips = records.SkipLog(f"{split} row")
    examples = []
    for where, row in complete_rows(path, fields, header, with_label, skips):
        label = None
        if with_label:
            raw = row[fields.label]
            if regression:
                try:
                    label = float(raw)
                except (TypeError, ValueError):
                    skips.skip(where, f"label {raw!r} is not a number")
                    continue
            else:
                label = str(raw)
                if labels is not None and label not in labels:
                    skips.skip(where, f"label {label!r} is not one of {', '.join(labels)}")
                    continue
        text_b = None if fields.text_b is None else process_text(str(row[fields.text_b]))
        examples.append(InputExample(f"{split}-{len(examples)}",
                                     process_text(str(row[fields.text_a])), text_b, label))
    skips.summary(len(examples) + skips.count)
    if not examples:
        raise TableDataError(f"no usable {split} row in {path} ({skips.count} bad row(s) "
                             f"skipped, see the warnings)")
    return examples


def labels_of(examples: list[InputExample]) -> list[str]:
    """The labels of training examples, sorted: the label list saved with a model."""
    return sorted({e.label for e in examples if e.label is not None})


def file_task(name: str, labels: list[str] | None, *, regression: bool,
              is_pair: bool) -> SentenceTask:
    """The files' task: GLUE's records, accuracy (classification) or Pearson / Spearman
    correlation (regression), the best checkpoint by it."""
    return SentenceTask(name, () if regression else tuple(labels or ()),
                        "pearson" if regression else "eval_accuracy", regression, is_pair)
