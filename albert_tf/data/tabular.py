"""Classification and regression examples from your own CSV, TSV or JSONL files.

The format comes from the file name: `.csv` (comma-separated, RFC 4180 quotes: a field
with a comma, quote or line break is quoted, its quotes doubled), `.tsv` / `.txt`
(tab-separated: quotes are text as in GLUE's files, unless the file was written with
CSV's quoting, as pandas and Excel write it: told from the file,
`albert_tf.data.rows.detect_quoting`), `.jsonl` / `.json` (one JSON object per line,
or one JSON array of objects). A file saved as UTF-16 ("Unicode text") or with CR-only
line ends is read as its writer meant. Fields are named (`text_a_field`,
`text_b_field`, `label_field`): a column name of the header row (or a JSON key), or a
0-based column index. CSV/TSV files have a header row unless `header=False` (then
fields are indices); a header that names a column twice is refused, and the header
row again further down (two files joined) is a skipped row.

Rows become `albert_tf.data.sentence_records.InputExample`s, so GLUE's records, metrics
and training serve them unchanged; `file_task` describes the task as a `SentenceTask`. Labels
are read as strings without surrounding spaces (a JSON number 1 is "1"); regression
labels as finite floats. A row is read whole or not at all (`albert_tf.data.rows`):
bad rows (more or fewer fields than the header, a broken quote, invalid UTF-8, a NUL
byte, a line that is not a JSON object, a missing field or label, an unknown label, a
regression label that is not a number, a label cell that starts or ends like a JSON
list and is not one) are skipped, named by file and line and counted by reason
(`albert_tf.data.report`); a file with no usable row is an error. Labels that differ
only in case or spaces stay apart, with a warning naming them (`report.case_variants`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

from albert_tf.data.report import SkipLog
from albert_tf.data.rows import (
    CUT_SHORT,
    DETECT,
    NOT_LABEL_LIST,
    UNKNOWN_LABEL,
    delimited_rows,
    json_lines,
    where,
)
from albert_tf.data.sentence_records import InputExample, SentenceDataError, SentenceTask

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


def _check_used(path: str, names: list[str], used) -> None:
    for flag, field in used:
        if field not in names and not (field.isdigit() and int(field) < len(names)):
            raise TableDataError(
                f"{path}: --{flag}={field} is neither a column of the header "
                f"({', '.join(names)}) nor a column index")


def rows(path: str, skips: SkipLog, *, header: bool = True, used=()):
    """(`file:line`, row, unended) of each row read whole from a CSV, TSV or JSONL file
    (`albert_tf.data.rows`: a row with more or fewer fields than the header, a broken
    quote, invalid UTF-8, a NUL byte or a line that is not a JSON object is skipped into
    `skips`, naming file and line). A row is a dict: a JSON object, or a CSV/TSV row by
    column index (as a string) and, with a header, by column name too. `unended`: the
    file's last line, without the line break the others have (it may be cut short). A
    `used` field (flag, field) that is neither a header name nor a column index is an
    error, raised when the header is read, before any row. A task of your own reads its
    files with this too (`--task_module`)."""
    kind = file_format(path)
    if kind == "jsonl":
        for number, item, unended in json_lines(path, skips, TableDataError):
            yield where(path, number), item, unended
        return
    names, found = delimited_rows(path, skips, delimiter="," if kind == "csv" else "\t",
                                  quoting=True if kind == "csv" else DETECT, header=header,
                                  error=TableDataError, named=True)
    if names is not None:
        _check_used(path, names, used)
    for row in found:
        item = {str(i): v for i, v in enumerate(row.fields)}
        if names is not None:
            item.update(zip(names, row.fields))
        yield where(path, row.line), item, row.unended


def label_list(cell):
    """A label cell that starts or ends like a JSON list (`["joy", "anger"]`) as the
    list, a cell that does not as it is. Raises ValueError for one that does and does
    not parse as a list (`["joy"`, `joy"]`, `[joy]`): its labels cannot be told."""
    if not isinstance(cell, str):
        return cell
    text = cell.strip()
    if not (text.startswith("[") or text.endswith("]")):
        return cell
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ValueError(f"{cell!r} {'starts' if text.startswith('[') else 'ends'} like a "
                         f"JSON list but is not one ({getattr(e, 'msg', e)})") from None
    if not isinstance(value, list):
        raise ValueError(f"{cell!r} ends like a JSON list but is not one")
    return value


def complete_rows(path: str, fields: Fields, header: bool, with_label: bool,
                  skips: SkipLog):
    """(`file:line`, row, unended) of the rows that hold every field used, each a text
    (a JSON string, number or, for the label, a list); a row that lacks one, or holds
    something else (a JSON object, null), is skipped, naming what. A label cell that
    starts or ends like a JSON list is read as one (`label_list`), and its row skipped
    where it is not one."""
    used = fields.used(with_label)
    for here, row, unended in rows(path, skips, header=header, used=used):
        missing = [f"{field!r} (--{flag})" for flag, field in used if row.get(field) is None]
        if missing:
            skips.skip(here, "missing field", f"no {', '.join(missing)}")
            continue
        wrong = [f"{field!r} (--{flag}) is a JSON {type(row[field]).__name__}"
                 for flag, field in used
                 if not isinstance(row[field], (str, int, float) if flag != "label_field"
                                   else (str, int, float, list))
                 or isinstance(row[field], bool)]
        if wrong:
            skips.skip(here, "not text", ", ".join(wrong))
            continue
        if with_label and fields.label is not None:
            try:
                row[fields.label] = label_list(row[fields.label])
            except ValueError as e:
                skips.skip(here, NOT_LABEL_LIST, str(e))
                continue
        yield here, row, unended


def drop_cut_short_label(examples: list, last_unended: bool, label_of, skips: SkipLog,
                         here: str) -> None:
    """A file's last row, without the line break its other rows have, whose label no
    other row has, is taken as a row cut short by an interrupted copy (its label a
    prefix, say) and dropped from `examples` into `skips`: a label is never learned from
    it alone. `label_of(example)` gives an example's labels."""
    if not (last_unended and examples):
        return
    others = {label for example in examples[:-1] for label in label_of(example)}
    new = [label for label in label_of(examples[-1]) if label not in others]
    if new:
        skips.unkeep(*label_of(examples[-1]))
        examples.pop()
        skips.skip(here, CUT_SHORT, f"its label(s) {', '.join(map(repr, new))} are on no "
                                    "other row, and the file's last line has no line "
                                    "break: it may be cut short")


def read_examples(path: str, fields: Fields, *, split: str, labels: list[str] | None,
                  regression: bool, header: bool = True,
                  process_text=str) -> list[InputExample]:
    """The examples of one file (see the module's docstring). With `labels`, a row
    whose label is not one of them is skipped; a test split (or no `label_field`)
    reads no label."""
    with_label = split != "test" and fields.label is not None
    skips = SkipLog(f"{split} row", path)
    examples, here, last_unended = [], None, False
    for here, row, last_unended in complete_rows(path, fields, header, with_label, skips):
        label = None
        if with_label:
            raw = row[fields.label]
            if regression:
                try:
                    label = float(raw)
                except (TypeError, ValueError):
                    skips.skip(here, "label not a number", f"label {raw!r}")
                    continue
                if not math.isfinite(label):
                    skips.skip(here, "label not a number", f"label {raw!r} is not finite")
                    continue
            else:
                label = raw.strip() if isinstance(raw, str) else str(raw)
                if isinstance(raw, list):
                    skips.skip(here, "no label", f"label {raw!r} is a list (more labels "
                                                 "than one a row: --task_name=multi_label)")
                    continue
                if not label:
                    skips.skip(here, "no label", f"label {raw!r}")
                    continue
                if labels is not None and label not in labels:
                    skips.skip(here, UNKNOWN_LABEL,
                               f"label {label!r} is not one of {', '.join(labels)}")
                    continue
        text_b = None if fields.text_b is None else process_text(str(row[fields.text_b]))
        examples.append(InputExample(f"{split}-{len(examples)}",
                                     process_text(str(row[fields.text_a])), text_b, label))
        skips.keep(*([] if label is None or regression else [label]))
    if labels is None and not regression:
        drop_cut_short_label(examples, last_unended, lambda e: [e.label], skips, here)
    skips.summary()
    if not examples:
        raise TableDataError(f"no usable {split} row in {path}: {skips.describe()}")
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
