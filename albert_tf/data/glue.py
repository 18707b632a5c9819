"""GLUE: the tasks, their TSV files, features and TFRecords as the original ALBERT code.

`GLUE_TASKS` is the one list of tasks (name -> directory, labels, metric, regression or
not, pair or single, where each column is); everything else (processors, records, the
training script) reads it from here. Names are the original `run_classifier.py`'s
(`cola`, `mnli`, `mismnli`, `mrpc`, `rte`, `sst-2`, `sts-b`, `qqp`, `qnli`, `wnli`) plus
`ax` (the diagnostic set, which the original has a processor for), case-insensitive.

Rows become examples as the original processors do (same columns, same guid, text passed
through `tokenizer.preprocess` where the original calls `process_text`, test rows
without labels), and examples become the original's features
(`albert_tf.data.sentence_records`: `[CLS] A [SEP] (B [SEP])`, longest-first
truncation, zero padding to `max_seq_length`, `label_ids` float for STS-B). The
functions here take a task's name as well as its `GlueTask`.
Unlike the original, a row is read whole or not at all: bad rows (more or fewer
columns than the header, or than most rows of a file without one; an unknown label;
invalid UTF-8; a NUL byte) are skipped, named by file and line and counted by reason
(`albert_tf.data.rows`, `albert_tf.data.report`), instead of stopping the run or taking
a value from the wrong column.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Mapping

import tensorflow as tf
from absl import logging

from albert_tf.data import rows, sentence_records
from albert_tf.data.cache import (
    CACHE_SUFFIX,
    CachedRecords,
    abspath_or_url,
    cached_conversion,
    file_sha256,
    tokenizer_settings,
)
from albert_tf.data.records import InputFeatures
from albert_tf.data.report import SkipLog
from albert_tf.data.sentence_records import (
    InputExample,
    LongText,
    SentenceDataError,
    SentenceTask,
)
from albert_tf.tokenization import convert_to_unicode

SPLITS = ("train", "dev", "test")
CACHE_FORMAT = "albert_tf.glue/1"  # bump when a change here changes the records


class GlueDataError(SentenceDataError):
    """GLUE data that cannot be used: nothing valid left in a file, a split the task
    does not have, a label the task does not know."""


# ----------------------------------------------------------------------- the tasks
@dataclasses.dataclass(frozen=True)
class Columns:
    """Where one split's fields are in a TSV row (0-based columns; -1 = last)."""

    text_a: int
    text_b: int | None = None
    label: int | None = None  # None: a test split, without labels
    guid: int | None = None   # None: "<split>-<row index>", as the original
    header: bool = True

    @property
    def min_columns(self) -> int:
        used = [c for c in (self.text_a, self.text_b, self.label, self.guid)
                if c is not None and c >= 0]
        # A label read from the last column must not be one of the text columns.
        return max(used) + 1 + (1 if self.label is not None and self.label < 0 else 0)


@dataclasses.dataclass(frozen=True)
class GlueTask(SentenceTask):
    """One GLUE task: what its records and scores are, and where its files are."""

    dir_name: str                  # its folder under the GLUE root: "STS-B"
    files: Mapping[str, str]       # split -> file name in dir_name
    columns: Mapping[str, Columns]  # split -> where its fields are

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(s for s in SPLITS if s in self.files)

    def path(self, data_dir: str | os.PathLike, split: str) -> str:
        if split not in self.files:
            raise GlueDataError(
                f"task {self.name} has no {split!r} split (it has: {', '.join(self.splits)})")
        return os.path.join(os.fspath(data_dir), self.dir_name, self.files[split])


def _files(train="train.tsv", dev="dev.tsv", test="test.tsv"):
    return {"train": train, "dev": dev, "test": test}


def _task(name, dir_name, labels, metric, is_regression, is_pair, files, columns):
    return GlueTask(name=name, labels=labels, metric=metric, is_regression=is_regression,
                    is_pair=is_pair, dir_name=dir_name, files=files, columns=columns)


def _pair_columns(text_a, text_b, label, test_a, test_b, guid=0):
    train = Columns(text_a, text_b, label=label, guid=guid)
    return {"train": train, "dev": train, "test": Columns(test_a, test_b, guid=0)}


_MNLI_LABELS = ("contradiction", "entailment", "neutral")
_NLI_LABELS = ("entailment", "not_entailment")
_BINARY = ("0", "1")
_ACCURACY, _MCC, _PEARSON = "eval_accuracy", "matthew_corr", "pearson"
_MNLI_COLUMNS = _pair_columns(8, 9, -1, 8, 9)

GLUE_TASKS: dict[str, GlueTask] = {task.name: task for task in (
    _task("cola", "CoLA", _BINARY, _MCC, False, False, _files(), {
        # CoLA's train and dev have no header (as GLUE ships them); its test has one.
        "train": Columns(3, label=1, header=False), "dev": Columns(3, label=1, header=False),
        "test": Columns(1, guid=0)}),
    _task("sst-2", "SST-2", _BINARY, _ACCURACY, False, False, _files(), {
        "train": Columns(0, label=1), "dev": Columns(0, label=1), "test": Columns(1, guid=0)}),
    _task("mrpc", "MRPC", _BINARY, _ACCURACY, False, True, _files(),
             _pair_columns(3, 4, 0, 3, 4, guid=None)),
    _task("sts-b", "STS-B", (), _PEARSON, True, True, _files(),
             _pair_columns(7, 8, -1, 7, 8)),
    _task("qqp", "QQP", _BINARY, _ACCURACY, False, True, _files(),
             _pair_columns(3, 4, 5, 1, 2)),
    _task("mnli", "MNLI", _MNLI_LABELS, _ACCURACY, False, True,
             _files(dev="dev_matched.tsv", test="test_matched.tsv"), _MNLI_COLUMNS),
    _task("mismnli", "MNLI", _MNLI_LABELS, _ACCURACY, False, True,
             _files(dev="dev_mismatched.tsv", test="test_mismatched.tsv"), _MNLI_COLUMNS),
    _task("qnli", "QNLI", _NLI_LABELS, _ACCURACY, False, True, _files(),
             _pair_columns(1, 2, -1, 1, 2)),
    _task("rte", "RTE", _NLI_LABELS, _ACCURACY, False, True, _files(),
             _pair_columns(1, 2, -1, 1, 2)),
    _task("wnli", "WNLI", _BINARY, _ACCURACY, False, True, _files(),
             _pair_columns(1, 2, -1, 1, 2)),
    # The diagnostic set: test only, scored with an MNLI model.
    _task("ax", "diagnostic", _MNLI_LABELS, _ACCURACY, False, True,
             {"test": "diagnostic.tsv"}, {"test": Columns(1, 2, guid=0)}),
)}

# Other spellings people use -> the original's names.
TASK_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "sts": "sts-b", "mnli-m": "mnli",
                "mnli-mm": "mismnli", "mnli_mismatched": "mismnli", "diagnostic": "ax"}


def get_task(name: str | SentenceTask) -> SentenceTask:
    """The task named `name` (case-insensitive; `TASK_ALIASES` accepted); a task is
    itself."""
    if isinstance(name, SentenceTask):
        return name
    key = name.strip().lower()
    key = TASK_ALIASES.get(key, key)
    if key not in GLUE_TASKS:
        raise GlueDataError(
            f"unknown GLUE task {name!r}; known: {', '.join(GLUE_TASKS)}")
    return GLUE_TASKS[key]


# ---------------------------------------------------------------- rows -> examples
def _missing_file_error(task: GlueTask, data_dir, path: str) -> FileNotFoundError:
    data_dir = os.fspath(data_dir)
    hint = (f"--data_dir is the GLUE root: the {task.name} processor adds "
            f"'{task.dir_name}/{os.path.basename(path)}'")
    if tf.io.gfile.exists(os.path.join(data_dir, os.path.basename(path))):
        hint += f"; {data_dir} looks like the {task.dir_name} folder itself, use its parent"
    elif not tf.io.gfile.isdir(data_dir):
        hint = f"{data_dir} does not exist; " + hint
    return FileNotFoundError(f"GLUE file {path} does not exist ({hint})")


class GlueProcessor:
    """Reads a task's TSV files into `InputExample`s, as the original processors.

    Args:
      task: a `GlueTask` or its name.
      process_text: what the original's `process_text` does to texts, labels and ids
        read from the file: pass `tokenizer.preprocess` (SentencePiece:
        `preprocess_text`, lowercasing per `do_lower_case`; WordPiece: nothing), or use
        `for_tokenizer` / `get_processor`. Default: nothing.
    """

    def __init__(self, task: str | GlueTask,
                 process_text: Callable[[str], str] | None = None):
        self.task = get_task(task)
        self.process_text = process_text or convert_to_unicode
        self.last_skipped = 0

    @classmethod
    def for_tokenizer(cls, task: str | GlueTask, tokenizer) -> "GlueProcessor":
        """Text processed as the original does for `tokenizer` (`tokenizer.preprocess`)."""
        return cls(task, tokenizer.preprocess)

    def get_labels(self) -> list:
        """The original's label list (`[None]` for STS-B)."""
        return [None] if self.task.is_regression else list(self.task.labels)

    def get_train_examples(self, data_dir) -> list[InputExample]:
        return self.get_examples(data_dir, "train")

    def get_dev_examples(self, data_dir) -> list[InputExample]:
        return self.get_examples(data_dir, "dev")

    def get_test_examples(self, data_dir) -> list[InputExample]:
        return self.get_examples(data_dir, "test")

    def get_examples(self, data_dir, split: str) -> list[InputExample]:
        """The examples of `split` ("train", "dev", "test") under the GLUE root
        `data_dir`. Bad rows are skipped (see `last_skipped`); a file with no usable
        row raises `GlueDataError`."""
        task = self.task
        path = task.path(data_dir, split)
        if not tf.io.gfile.exists(path):
            raise _missing_file_error(task, data_dir, path)
        columns = task.columns[split]
        skips = SkipLog(f"{task.name} {split} row", path)
        _, found = rows.delimited_rows(path, skips, delimiter="\t", quoting=False,
                                       header=columns.header, error=GlueDataError)
        examples = []
        for row in found:
            here = rows.where(path, row.line)
            if len(row.fields) < columns.min_columns:
                skips.skip(here, rows.FIELD_COUNT, f"{len(row.fields)} columns, expected "
                                                   f"at least {columns.min_columns}")
                continue
            example, problem = self._make_example(row.line - 1, row.fields, columns, split)
            if problem:
                skips.skip(here, *problem)
                continue
            examples.append(example)
            skips.keep(*([] if example.label is None or task.is_regression
                         else [example.label]))
        skips.summary()
        self.last_skipped = skips.count
        if not examples:
            raise GlueDataError(
                f"no usable {task.name} {split} example in {path}: {skips.describe()}")
        return examples

    def _make_example(self, index: int, line: list[str], columns: Columns, split: str
                      ) -> tuple[InputExample | None, tuple[str, str] | None]:
        process = self.process_text
        label = None
        if columns.label is not None:
            raw = line[columns.label]
            if self.task.is_regression:  # the original: float(line[-1]), unprocessed
                try:
                    label = float(raw)
                except ValueError:
                    return None, ("label not a number", f"label {raw!r}")
            else:
                label = process(raw)
                if label not in self.task.labels:
                    return None, (rows.UNKNOWN_LABEL, f"label {raw!r} is not one of "
                                                 f"{', '.join(self.task.labels)}")
        guid = f"{split}-{index}" if columns.guid is None else process(line[columns.guid])
        text_b = None if columns.text_b is None else process(line[columns.text_b])
        return InputExample(guid, process(line[columns.text_a]), text_b, label), None


def get_processor(task: str | GlueTask, tokenizer=None) -> GlueProcessor:
    """The processor of `task`, processing text as `tokenizer` needs (if given)."""
    if tokenizer is None:
        return GlueProcessor(task)
    return GlueProcessor.for_tokenizer(task, tokenizer)


# ------------------------------------------------------------- examples -> features
def convert_single_example(example: InputExample, task: str | SentenceTask,
                           max_seq_length: int, tokenizer) -> InputFeatures:
    """`sentence_records.convert_single_example` of the task (or its name)."""
    return sentence_records.convert_single_example(example, get_task(task), max_seq_length,
                                                   tokenizer)


def write_examples(examples, task: str | SentenceTask, max_seq_length: int, tokenizer,
                   output_file, long_text: LongText | None = None) -> int:
    """`sentence_records.write_examples` of the task (or its name)."""
    return sentence_records.write_examples(examples, get_task(task), max_seq_length,
                                           tokenizer, output_file, long_text)


def glue_dataset(files, task: str | SentenceTask, max_seq_length: int, batch_size: int,
                 **kwargs) -> tf.data.Dataset:
    """`sentence_records.sentence_dataset` of the task (or its name)."""
    return sentence_records.sentence_dataset(files, get_task(task), max_seq_length,
                                             batch_size, **kwargs)


def cache_path(cache_dir, task: str | GlueTask, split: str) -> str:
    """`<cache_dir>/<task>_{train,eval,predict}.tf_record`, the original's names."""
    task = get_task(task)
    if split not in CACHE_SUFFIX:
        raise GlueDataError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    return os.path.join(os.fspath(cache_dir), f"{task.name}_{CACHE_SUFFIX[split]}.tf_record")


def cached_glue_records(task: str | GlueTask, split: str, data_dir, cache_dir, tokenizer,
                        max_seq_length: int, examples: list[InputExample] | None = None,
                        long_text: LongText | None = None) -> CachedRecords:
    """Converts a whole split of a task to a TFRecord file under `cache_dir`, or reuses
    the file converted before from the same data with the same settings. `examples`:
    the split's examples already read (`GlueProcessor.for_tokenizer`), else read here;
    `long_text`: how a long text is read (default: cut, the original's records).

    The settings (task, split, source file and its SHA-256, `max_seq_length`, the
    tokenizer's model path and SHA-256, `do_lower_case`, and windows with their stride
    where the records are windows) are kept in `<file>.meta.json`; any difference
    converts again.
    """
    long_text = long_text or LongText()
    task = get_task(task)
    source = task.path(data_dir, split)
    if not tf.io.gfile.exists(source):
        raise _missing_file_error(task, data_dir, source)
    settings = {"format": CACHE_FORMAT, "task": task.name, "split": split,
                "source": abspath_or_url(source), "source_sha256": file_sha256(source),
                "max_seq_length": int(max_seq_length), **tokenizer_settings(tokenizer),
                **long_text.cache_settings()}

    def convert(path):
        processor = get_processor(task, tokenizer)
        read = processor.get_examples(data_dir, split) if examples is None else examples
        count = write_examples(read, task, max_seq_length, tokenizer, path, long_text)
        logging.info("wrote %d %s %s records to %s", count, task.name, split, path)
        return count, processor.last_skipped

    return cached_conversion(cache_path(cache_dir, task, split), settings, convert)
