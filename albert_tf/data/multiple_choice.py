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
A file without answers (a test split) gives label -1 (`NO_LABEL`); in a training or
dev split (`labelled=True`) a question without one is skipped. A question is read whole
or not at all: a bad one (a broken CSV row or JSON line, invalid UTF-8, a NUL, an answer
that is no choice) is skipped, named by file and line or document, and counted by
reason; a file with none left is an error. C3's files are each one JSON document, read
whole or not at all.
"""

from __future__ import annotations

import os

from albert_tf.data import rows
from albert_tf.data.choice_records import ChoiceDataError, ChoiceExample, make_ending
from albert_tf.data.report import SkipLog
from albert_tf.data.rows import UNKNOWN_LABEL

NO_LABEL = -1
C3_PARTS = ("d", "m")  # dialogues, then mixed-genre texts
SWAG_ENDINGS = tuple(f"ending{i}" for i in range(4))
# --data_dir file names of each split.
SWAG_FILES = {"train": "train.csv", "dev": "val.csv", "test": "test.csv"}
JSONL_FILES = {"train": "train.jsonl", "dev": "dev.jsonl", "test": "test.jsonl"}


def _finish(examples, logs: list[SkipLog], what: str, where: str):
    for skips in logs:
        skips.summary()
    if not examples:
        raise ChoiceDataError(f"no usable {what} question in {where}: "
                              + "; ".join(skips.describe() for skips in logs))
    return examples


def _label(answer, choices, labelled: bool | None) -> int | tuple[str, str]:
    """The index of `answer` (an index, or a choice's text), NO_LABEL for none where
    `labelled` is not True, else (reason, detail) of why not."""
    if answer is None or answer == "":
        return ("no label", "no answer") if labelled else NO_LABEL
    if isinstance(answer, int) and not isinstance(answer, bool):
        if 0 <= answer < len(choices):
            return answer
    elif isinstance(answer, str):
        if answer.strip().lstrip("-").isdigit() and answer not in choices:
            return _label(int(answer), choices, labelled)
        if answer in choices:
            return choices.index(answer)
    return UNKNOWN_LABEL, f"answer {answer!r} is neither a choice nor a choice's index"


def _keep(examples: list, example: ChoiceExample, skips: SkipLog) -> None:
    examples.append(example)
    skips.keep(*([] if example.label == NO_LABEL else [str(example.label)]))


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


def read_c3(paths, process_text=str, max_choices: int = 4,
            labelled: bool | None = None) -> list[ChoiceExample]:
    """The questions of C3 files (see the module's docstring). A file is one JSON
    document, read whole or not at all; a question is skipped whole (named by file,
    document and question) when it cannot be read. `labelled`: True where every
    question must have an answer (training and dev)."""
    examples, logs = [], []
    for path in paths:
        skips = SkipLog("C3 question", path)
        logs.append(skips)
        part = c3_part(path)
        documents = rows.json_document(path, ChoiceDataError)
        if not isinstance(documents, list):
            raise ChoiceDataError(f"{path}: expected a JSON list of documents")
        for number, document in enumerate(documents):
            where = f"{path} document {number}"
            if not (isinstance(document, list) and len(document) == 3
                    and isinstance(document[0], list) and isinstance(document[1], list)
                    and all(isinstance(x, str) for x in document[0])):
                skips.skip(where, "malformed document", "not [sentences, questions, id]")
                continue
            sentences, questions, document_id = document
            problem = rows.text_problem(" ".join(sentences))
            context = None if problem else process_text(" ".join(sentences))
            for index, item in enumerate(questions):
                here = f"{where} ({document_id}) question {index}"
                choices = item.get("choice") if isinstance(item, dict) else None
                if problem:
                    skips.skip(here, *problem)
                    continue
                if not (isinstance(choices, list) and 1 <= len(choices) <= max_choices
                        and all(isinstance(c, str) for c in choices)):
                    skips.skip(here, "malformed question",
                               f"'choice' must be a list of 1 to {max_choices} texts")
                    continue
                question = item.get("question", "")
                bad = rows.text_problem(" ".join([str(question), *choices]))
                if bad:
                    skips.skip(here, *bad)
                    continue
                label = _label(item.get("answer"), choices, labelled)
                if isinstance(label, tuple):
                    skips.skip(here, *label)
                    continue
                question = process_text(str(question))
                _keep(examples, ChoiceExample(
                    f"{part}-{document_id}-{index}", context,
                    [make_ending(question, process_text(c)) for c in choices], label), skips)
    return _finish(examples, logs, "C3", ", ".join(paths))


def read_swag(path: str, process_text=str, labelled: bool | None = None
              ) -> list[ChoiceExample]:
    """The rows of a SWAG CSV (see the module's docstring); read as every CSV is
    (`albert_tf.data.rows`: a row whole or not at all)."""
    skips = SkipLog("SWAG row", path)
    header, found = rows.delimited_rows(path, skips, delimiter=",", quoting=True,
                                        header=True, error=ChoiceDataError, named=True)
    missing = [c for c in ("sent1", "sent2", *SWAG_ENDINGS) if c not in header]
    if missing:
        raise ChoiceDataError(f"{path}: no column(s) {', '.join(missing)} in the header "
                              f"(SWAG's CSV has sent1, sent2, ending0..3, label)")
    examples = []
    for index, row in enumerate(found):
        item = dict(zip(header, row.fields))
        here = rows.where(path, row.line)
        label = _label(item.get("label"), list(SWAG_ENDINGS), labelled)
        if isinstance(label, tuple):
            skips.skip(here, *label)
            continue
        example_id = item.get("fold-ind") or str(index)
        _keep(examples, ChoiceExample(
            example_id, process_text(item["sent1"]),
            [process_text(f"{item['sent2']} {item[e]}") for e in SWAG_ENDINGS], label), skips)
    return _finish(examples, [skips], "SWAG", path)


def read_choice_jsonl(path: str, process_text=str, max_choices: int | None = None,
                      labelled: bool | None = None) -> list[ChoiceExample]:
    """The lines of a multiple-choice JSONL file (see the module's docstring); a line is
    read whole or not at all (`albert_tf.data.rows.json_lines`)."""
    skips = SkipLog("multiple-choice line", path)
    examples = []
    for number, item, _ in rows.json_lines(path, skips, ChoiceDataError):
        here = rows.where(path, number)
        choices = item.get("choices")
        if not (isinstance(choices, list) and choices and all(isinstance(c, str) for c in choices)):
            skips.skip(here, "malformed question", "'choices' must be a non-empty list of "
                                                   "texts")
            continue
        if max_choices is not None and len(choices) > max_choices:
            skips.skip(here, "too many choices",
                       f"{len(choices)} choices, more than the model's {max_choices}")
            continue
        texts = [item.get("question") or "", item.get("context") or ""]
        if not all(isinstance(t, str) for t in texts):
            skips.skip(here, "not text", "'question' and 'context' must be texts")
            continue
        bad = rows.text_problem(" ".join(texts + choices))
        if bad:
            skips.skip(here, *bad)
            continue
        label = _label(item.get("label"), choices, labelled)
        if isinstance(label, tuple):
            skips.skip(here, *label)
            continue
        question = process_text(texts[0])
        endings = [make_ending(question, process_text(c)) for c in choices]
        _keep(examples, ChoiceExample(str(item.get("id", number - 1)),
                                      process_text(texts[1]), endings, label), skips)
    return _finish(examples, [skips], "multiple-choice", path)
