"""Multiple choice beyond RACE: C3, SWAG and a generic JSONL, read into the examples
that `albert_tf.data.choice_records` turns into records (one `[CLS] context [SEP] ending [SEP]`
per choice; fewer choices than the task's maximum padded as absent choices, which the
model never predicts).

Formats:
- C3 (CLUE's Chinese multiple choice), as released: `c3-d-<split>.json` and
  `c3-m-<split>.json`, each a JSON list of `[document sentences, [{"question",
  "choice": [2-4 texts], "answer": the right choice's text}], document id]`; a split is
  the d file then the m file. The context is the sentences joined with spaces; example
  ids are `<part>-<document id>-<question index>`, the part `d` or `m` from the file's
  name (the two files reuse document ids: 26 of the dev set's are in both).
- SWAG's CSV (`video-id, fold-ind, startphrase, sent1, sent2, gold-source,
  ending0..3, label`): context `sent1`, endings `sent2 + " " + ending<i>` (as
  Hugging Face's SWAG example); ids from `fold-ind` (else the row's index).
- JSON lines `{"id", "context", "question", "choices": [...], "label"}`: `label` the
  right choice's index (or its text); `question` optional (endings are question +
  choice, or the choice in the question's `_` blank, as RACE's).
A file without answers (a test split) gives label -1 (`NO_LABEL`). Bad items are
skipped with a warning naming file, line or item; a file with none left is an error.
"""

from __future__ import annotations

import csv
import io
import json
import os

from albert_tf.data import records
from albert_tf.data.choice_records import ChoiceDataError, ChoiceExample, make_ending
from albert_tf.fileio import read_text

NO_LABEL = -1
C3_PARTS = ("d", "m")  # dialogues, then mixed-genre texts
SWAG_ENDINGS = tuple(f"ending{i}" for i in range(4))
# --data_dir file names of each split.
SWAG_FILES = {"train": "train.csv", "dev": "val.csv", "test": "test.csv"}
JSONL_FILES = {"train": "train.jsonl", "dev": "dev.jsonl", "test": "test.jsonl"}


def _text(path: str) -> str:
    return read_text(path, ChoiceDataError)


def _finish(examples, skips: records.SkipLog, what: str, where: str):
    skips.summary(len(examples) + skips.count)
    if not examples:
        raise ChoiceDataError(f"no usable {what} question in {where} ({skips.count} bad "
                              f"item(s) skipped, see the warnings)")
    return examples


def _label(answer, choices, where: str, skips: records.SkipLog) -> int | None:
    """The index of `answer` (an index, or a choice's text); None (skipped) if neither."""
    if answer is None:
        return NO_LABEL
    if isinstance(answer, int) and not isinstance(answer, bool):
        if 0 <= answer < len(choices):
            return answer
    elif isinstance(answer, str):
        if answer.strip().lstrip("-").isdigit() and answer not in choices:
            return _label(int(answer), choices, where, skips)
        if answer in choices:
            return choices.index(answer)
    skips.skip(where, f"answer {answer!r} is neither a choice nor a choice's index")
    return None


def c3_files(data_dir, split: str) -> list[str]:
    """`c3-d-<split>.json` and `c3-m-<split>.json` under `data_dir`: those present (at
    least one)."""
    paths = [os.path.join(os.fspath(data_dir), f"c3-{part}-{split}.json") for part in C3_PARTS]
    found = [p for p in paths if os.path.exists(p)]
    if not found:
        raise FileNotFoundError(f"no C3 {split} file in {data_dir}: expected "
                                f"{' and/or '.join(os.path.basename(p) for p in paths)}")
    return found


def c3_part(path) -> str:
    """Which part of C3 a file holds, for its example ids: `d` or `m` from a released
    name (`c3-<part>-<split>.json`), else the file's name without `.json`."""
    name = os.path.basename(os.fspath(path))
    stem = name[:-len(".json")] if name.endswith(".json") else name
    pieces = stem.split("-")
    return pieces[1] if len(pieces) == 3 and pieces[0] == "c3" else stem


def read_c3(paths, process_text=str, max_choices: int = 4) -> list[ChoiceExample]:
    """The questions of C3 files (see the module's docstring)."""
    skips = records.SkipLog("C3 question")
    examples = []
    for path in paths:
        part = c3_part(path)
        try:
            documents = json.loads(_text(path))
        except json.JSONDecodeError as e:
            raise ChoiceDataError(f"{path}: not JSON ({e.msg}, line {e.lineno})") from None
        if not isinstance(documents, list):
            raise ChoiceDataError(f"{path}: expected a JSON list of documents")
        for number, document in enumerate(documents):
            where = f"{path} document {number}"
            if not (isinstance(document, list) and len(document) == 3
                    and isinstance(document[0], list) and isinstance(document[1], list)):
                skips.skip(where, "not [sentences, questions, id]")
                continue
            sentences, questions, document_id = document
            context = process_text(" ".join(str(s) for s in sentences))
            for index, item in enumerate(questions):
                here = f"{where} ({document_id}) question {index}"
                choices = item.get("choice") if isinstance(item, dict) else None
                if not (isinstance(choices, list) and 1 <= len(choices) <= max_choices
                        and all(isinstance(c, str) for c in choices)):
                    skips.skip(here, f"'choice' must be a list of 1 to {max_choices} texts")
                    continue
                label = _label(item.get("answer"), choices, here, skips)
                if label is None:
                    continue
                question = process_text(str(item.get("question", "")))
                examples.append(ChoiceExample(
                    f"{part}-{document_id}-{index}", context,
                    [make_ending(question, process_text(c)) for c in choices], label))
    return _finish(examples, skips, "C3", ", ".join(paths))


def read_swag(path: str, process_text=str) -> list[ChoiceExample]:
    """The rows of a SWAG CSV (see the module's docstring)."""
    skips = records.SkipLog("SWAG row")
    reader = csv.DictReader(io.StringIO(_text(path), newline=""))
    missing = [c for c in ("sent1", "sent2", *SWAG_ENDINGS) if c not in (reader.fieldnames or ())]
    if missing:
        raise ChoiceDataError(f"{path}: no column(s) {', '.join(missing)} in the header "
                              f"(SWAG's CSV has sent1, sent2, ending0..3, label)")
    examples = []
    for index, row in enumerate(reader):
        where = f"{path}:{reader.line_num}"
        if any(row.get(c) is None for c in ("sent1", "sent2", *SWAG_ENDINGS)):
            skips.skip(where, "missing column(s)")
            continue
        label = row.get("label")
        label = _label(label if label not in ("", None) else None, list(SWAG_ENDINGS),
                       where, skips)
        if label is None:
            continue
        example_id = row.get("fold-ind") or str(index)
        examples.append(ChoiceExample(
            example_id, process_text(row["sent1"]),
            [process_text(f"{row['sent2']} {row[e]}") for e in SWAG_ENDINGS], label))
    return _finish(examples, skips, "SWAG", path)


def read_choice_jsonl(path: str, process_text=str,
                      max_choices: int | None = None) -> list[ChoiceExample]:
    """The lines of a multiple-choice JSONL file (see the module's docstring)."""
    skips = records.SkipLog("multiple-choice line")
    examples = []
    for number, line in enumerate(_text(path).splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            skips.skip(where, f"not JSON ({e.msg})")
            continue
        choices = item.get("choices") if isinstance(item, dict) else None
        if not (isinstance(choices, list) and choices and all(isinstance(c, str) for c in choices)):
            skips.skip(where, "'choices' must be a non-empty list of texts")
            continue
        if max_choices is not None and len(choices) > max_choices:
            skips.skip(where, f"{len(choices)} choices, more than the model's {max_choices}")
            continue
        label = _label(item.get("label"), choices, where, skips)
        if label is None:
            continue
        question = process_text(str(item.get("question") or ""))
        endings = [make_ending(question, process_text(c)) for c in choices]
        examples.append(ChoiceExample(str(item.get("id", number - 1)),
                                      process_text(str(item.get("context") or "")), endings,
                                      label))
    return _finish(examples, skips, "multiple-choice", path)
