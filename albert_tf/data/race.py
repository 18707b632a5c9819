"""RACE: multiple-choice reading comprehension, as the original ALBERT `race_utils.py`.

The release's files are `<data_dir>/RACE/{train,dev,test}/{middle,high}/*.txt`, each
one JSON document: `article`, `questions`, `options` (four per question), `answers`
(letters A-D), `id`. Each question becomes one `ChoiceExample` of four choices (the
article and each option as `make_ending` puts it in the question), whose records
`albert_tf.data.choice_records` writes: `[CLS] article [SEP] question-with-option
[SEP]`, four of them.

Unlike the original, files are read in sorted order (the original follows `os.listdir`,
so its order depends on the file system) and a question is read whole or not at all:
bad input (invalid JSON or UTF-8, an answer outside A-D, a question without four
options) is skipped, named by file and question and counted by reason, instead of
stopping the run.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Callable, Sequence

import tensorflow as tf

from albert_tf.data import rows
from albert_tf.data.cache import (
    CachedRecords,
    abspath_or_url,
    cached_conversion,
    open_binary,
    tokenizer_settings,
)
from albert_tf.data.choice_records import (
    DEFAULT_MAX_QA_LENGTH,
    ChoiceDataError,
    ChoiceExample,
    check_lengths,
    make_ending,
    write_examples,
)
from albert_tf.data.report import SkipLog
from albert_tf.tokenization import convert_to_unicode

RACE_LABELS = ("A", "B", "C", "D")
NUM_CHOICES = len(RACE_LABELS)
LEVELS = ("middle", "high")  # the original's reading order
SPLITS = ("train", "dev", "test")
CACHE_FORMAT = "albert_tf.race/1"


class RaceDataError(ChoiceDataError):
    """RACE data that cannot be used: no valid question left, bad arguments."""


def race_dir(data_dir, split: str) -> str:
    """`<data_dir>/RACE/<split>`: `data_dir` is the folder that holds `RACE/`."""
    if split not in SPLITS:
        raise RaceDataError(f"unknown RACE split {split!r}; expected one of {SPLITS}")
    return os.path.join(os.fspath(data_dir), "RACE", split)


def selected_levels(high_only: bool = False, middle_only: bool = False) -> tuple[str, ...]:
    if high_only and middle_only:
        raise RaceDataError("high_only and middle_only exclude each other: set at most one")
    if high_only:
        return ("high",)
    if middle_only:
        return ("middle",)
    return LEVELS


def race_files(data_dir, split: str, high_only: bool = False,
               middle_only: bool = False) -> list[str]:
    """The `.txt` files of a split, level by level (middle, then high), sorted."""
    split_dir = race_dir(data_dir, split)
    files = []
    for level in selected_levels(high_only, middle_only):
        level_dir = os.path.join(split_dir, level)
        if not tf.io.gfile.isdir(level_dir):
            hint = ("the RACE release has RACE/{train,dev,test}/{middle,high}/*.txt; "
                    "--data_dir is the folder that holds RACE/")
            if tf.io.gfile.isdir(os.path.join(os.fspath(data_dir), split)):
                hint += f"; {os.fspath(data_dir)} looks like the RACE folder itself"
            raise FileNotFoundError(f"RACE folder {level_dir} does not exist ({hint})")
        files += [os.path.join(level_dir, name)
                  for name in sorted(tf.io.gfile.listdir(level_dir)) if name.endswith(".txt")]
    return files


def _documents(path: str, skips: SkipLog):
    """(where, document) of each JSON document of a file: one per file in the release;
    one per line also works (the original reads line by line), each line read whole or
    not at all. A file read whole that is not UTF-8 is skipped as one item."""
    with open_binary(path) as f:
        raw = f.read()
    try:
        return [(path, json.loads(raw.decode("utf-8-sig")))]
    except UnicodeDecodeError as e:
        if b"\n" not in raw.strip():
            skips.skip(path, rows.INVALID_UTF8, f"byte {raw[e.start]:#04x} at offset {e.start}")
            return []
    except ValueError:
        pass
    return [(rows.where(path, number), item)
            for number, item, _ in rows.json_lines(path, skips, RaceDataError)]


def document_examples(document, where: str, process_text: Callable[[str], str],
                      skips: SkipLog) -> list[ChoiceExample]:
    """The examples of one RACE JSON document; a bad question is skipped whole (a bad
    document counts as one skipped question: nothing tells how many it held)."""
    if not isinstance(document, dict):
        skips.skip(where, rows.NOT_OBJECT)
        return []
    missing = [k for k in ("article", "questions", "options", "answers", "id")
               if k not in document]
    if missing:
        skips.skip(where, "missing field", f"no {', '.join(missing)}")
        return []
    answers, options, questions = (document["answers"], document["options"],
                                   document["questions"])
    if not (isinstance(document["article"], str) and all(
            isinstance(x, list) for x in (answers, options, questions))):
        skips.skip(where, "malformed document", "'article' must be a text, 'answers', "
                                                "'options' and 'questions' lists")
        return []
    problem = rows.text_problem(document["article"])
    context = None if problem else process_text(document["article"])
    examples = []
    for i, answer in enumerate(answers):
        here = f"{where} question {i}"
        if problem:
            skips.skip(here, *problem)
            continue
        if i >= len(questions) or i >= len(options):
            skips.skip(here, "malformed question", "no question or options for this answer")
            continue
        if answer not in RACE_LABELS:
            skips.skip(here, rows.UNKNOWN_LABEL,
                       f"answer {answer!r} is not one of {', '.join(RACE_LABELS)}")
            continue
        if not (isinstance(options[i], list) and len(options[i]) == NUM_CHOICES
                and all(isinstance(o, str) for o in options[i])
                and isinstance(questions[i], str)):
            skips.skip(here, "malformed question", f"expected a question and {NUM_CHOICES} "
                                                   f"option texts")
            continue
        bad = rows.text_problem(" ".join([questions[i], *options[i]]))
        if bad:
            skips.skip(here, *bad)
            continue
        question = process_text(questions[i])
        endings = [make_ending(question, process_text(option)) for option in options[i]]
        examples.append(ChoiceExample(str(document["id"]), context, endings,
                                      RACE_LABELS.index(answer)))
        skips.keep(answer)
    return examples


class RaceProcessor:
    """Reads RACE examples as the original `RaceProcessor`.

    Args:
      process_text: the original's `process_text`: pass `tokenizer.preprocess` (or use
        `for_tokenizer`). Default: nothing.
      high_only, middle_only: read only that level.
    """

    def __init__(self, process_text: Callable[[str], str] | None = None,
                 high_only: bool = False, middle_only: bool = False):
        self.process_text = process_text or convert_to_unicode
        self.levels = selected_levels(high_only, middle_only)
        self.high_only, self.middle_only = high_only, middle_only
        self.last_skipped = 0

    @classmethod
    def for_tokenizer(cls, tokenizer, high_only: bool = False, middle_only: bool = False):
        return cls(tokenizer.preprocess, high_only, middle_only)

    def get_labels(self) -> list[str]:
        return list(RACE_LABELS)

    def get_train_examples(self, data_dir) -> list[ChoiceExample]:
        return self.get_examples(data_dir, "train")

    def get_dev_examples(self, data_dir) -> list[ChoiceExample]:
        return self.get_examples(data_dir, "dev")

    def get_test_examples(self, data_dir) -> list[ChoiceExample]:
        return self.get_examples(data_dir, "test")

    def get_examples(self, data_dir, split: str) -> list[ChoiceExample]:
        files = race_files(data_dir, split, self.high_only, self.middle_only)
        skips = SkipLog(f"RACE {split} question", race_dir(data_dir, split))
        examples = []
        for path in files:
            for where, document in _documents(path, skips):
                examples += document_examples(document, where, self.process_text, skips)
        skips.summary()
        self.last_skipped = skips.count
        if not examples:
            raise RaceDataError(
                f"no usable RACE {split} question under {race_dir(data_dir, split)} "
                f"(levels: {', '.join(self.levels)}; {len(files)} .txt file(s); "
                f"{skips.describe()})")
        return examples


def cache_path(cache_dir, split: str, high_only: bool = False,
               middle_only: bool = False) -> str:
    """`<cache_dir>/race[_high|_middle]_{train,eval,predict}.tf_record`."""
    level = "_high" if high_only else "_middle" if middle_only else ""
    suffix = {"train": "train", "dev": "eval", "test": "predict"}[split]
    return os.path.join(os.fspath(cache_dir), f"race{level}_{suffix}.tf_record")


def _files_sha256(files: Sequence[str], root: str) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(os.path.relpath(path, root).encode() + b"\0")
        with open_binary(path) as f:
            digest.update(f.read())
        digest.update(b"\0")
    return digest.hexdigest()


def cached_race_records(split: str, data_dir, cache_dir, tokenizer, max_seq_length: int,
                        max_qa_length: int = DEFAULT_MAX_QA_LENGTH, *,
                        high_only: bool = False, middle_only: bool = False,
                        examples: list[ChoiceExample] | None = None) -> CachedRecords:
    """Converts a RACE split to a TFRecord file under `cache_dir`, or reuses the one
    converted before from the same files with the same settings (kept in
    `<file>.meta.json`: the files' SHA-256, lengths, levels, tokenizer, `do_lower_case`).
    `examples`: the split's examples already read (`RaceProcessor.for_tokenizer`), else
    read here."""
    check_lengths(max_seq_length, max_qa_length)
    files = race_files(data_dir, split, high_only, middle_only)
    split_dir = race_dir(data_dir, split)
    settings = {"format": CACHE_FORMAT, "split": split, "source": abspath_or_url(split_dir),
                "levels": list(selected_levels(high_only, middle_only)),
                "num_files": len(files), "source_sha256": _files_sha256(files, split_dir),
                "max_seq_length": int(max_seq_length), "max_qa_length": int(max_qa_length),
                **tokenizer_settings(tokenizer)}

    def convert(path):
        processor = RaceProcessor.for_tokenizer(tokenizer, high_only, middle_only)
        read = processor.get_examples(data_dir, split) if examples is None else examples
        count = write_examples(read, max_seq_length, max_qa_length, tokenizer, path)
        return count, processor.last_skipped

    return cached_conversion(cache_path(cache_dir, split, high_only, middle_only),
                             settings, convert)
