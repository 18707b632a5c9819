"""What a run's readers kept and skipped: grouped warnings, the skip limit, and
`data_report.json`.

Every reader of the toolkit keeps a row whole or skips it, naming its file and line,
through a `SkipLog` (one per file, or per input a reader treats as one). A skip has a
short reason ("wrong number of fields", "invalid UTF-8", ...), under which skips are
grouped: the first few places of each reason are kept, the rest counted.

A fine-tuning run reads its splits inside `DataReport.reading(split)`: every `SkipLog`
made there reports to the run's `DataReport`, which prints one summary (rows read, kept
and skipped, labels), checks each split against `--max_skipped_rows` (`SkipLimit`)
before any training, warning of each split's skips (grouped, with their first places)
or refusing the split, and is written as `data_report.json` in the output directory.
Used on their own (from Python), the readers log their grouped warnings themselves.

Labels that differ only in case or spaces (`Positive`, `positive`, `positive `) are
different classes to a model: they are kept apart, as the files have them, and a
warning names them (`case_variants`), for the files to be fixed where they are one.

What `--max_seq_length` cuts of a split's texts is counted as its records are written
(`counting_truncation`, around a conversion: `albert_tf.data.cache`): the records of
sentence and multiple-choice tasks count each example they pack (`Truncation`, with the
lengths the rules of `albert_tf.packing` keep), the count is kept beside the cached
records, and the run adds it to its report (`DataReport.truncated`), printing it and
warning of each split with more than `TRUNCATION_WARNING_SHARE` of its examples cut
(`long_text_warning`). With `--long_text=windows` the sentence and multiple-choice
records read a long text (a context) in windows instead: they count the windows too,
and only what is still cut (a pair's shorter text past half of `max_seq_length`; of a
multiple-choice question, nothing). SQuAD's and NER's windows read long texts
whole: nothing of theirs is counted.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import dataclasses
import json
import os
import re

from absl import logging

from albert_tf import fileio, packing
from albert_tf.data.errors import DataError

REPORT_FILE = "data_report.json"
FIRST_PLACES = 5  # the places kept (and printed) of each reason
DEFAULT_MAX_SKIPPED = "0.01"
# A split with more than this share of its examples cut by --max_seq_length is warned of
# (a few percent: the texts a model never reads whole are then no rare exception).
TRUNCATION_WARNING_SHARE = 0.05
# What reads the cut texts whole, as the warning says it (`long_text_warning`).
LONG_TEXT_ADVICE = ("To read them whole, give --long_text=windows (classification, "
                    "regression, multi-label and multiple choice but RACE: each text, or "
                    "context, read in overlapping windows, its answers pooled) or raise "
                    "--max_seq_length (up to the model's max_position_embeddings, 512 in "
                    "the released models).")
# ... and where a pair is read in windows already, what still cuts its other text.
WINDOWED_PAIR_ADVICE = ("With --long_text=windows the windows slide over a pair's "
                        "longer text and the other keeps at most half of "
                        "--max_seq_length - 3 pieces: raise --max_seq_length to read "
                        "both whole.")


class TooManySkipped(DataError):
    """A split whose skipped rows pass `--max_skipped_rows`."""


@dataclasses.dataclass
class Reason:
    """The skips of one reason: how many, and the first places (`file:line: detail`)."""

    count: int = 0
    first: list[str] = dataclasses.field(default_factory=list)


class SkipLog:
    """The rows of one input (`source`: a file, or a folder read as one) a reader kept
    and skipped, in its unit (`unit`: "row", "sentence", "question", ...), with the
    labels of the rows kept. `what` names the rows in messages ("SST-2 train row")."""

    def __init__(self, what: str, source: str | None = None, unit: str | None = None):
        self.what, self.source = what, source
        self.unit = unit or what.split()[-1]
        self.kept = 0
        self.reasons: dict[str, Reason] = {}
        self.labels: collections.Counter = collections.Counter()
        collector = _COLLECTOR.get()
        # collected by a run's report, which prints one summary of every split
        self.collected = collector is not None
        if self.collected:
            collector.append(self)

    @property
    def count(self) -> int:
        """The rows skipped."""
        return sum(r.count for r in self.reasons.values())

    @property
    def read(self) -> int:
        """The rows read: kept and skipped."""
        return self.kept + self.count

    def skip(self, where: str, reason: str, detail: str | None = None) -> None:
        """One row skipped at `where` (`file:line`) for `reason` (a short phrase, the
        group), with `detail` (what exactly)."""
        entry = self.reasons.setdefault(reason, Reason())
        entry.count += 1
        if len(entry.first) < FIRST_PLACES:
            entry.first.append(f"{where}: {detail}" if detail else where)

    def keep(self, *labels) -> None:
        """One row kept, with its label(s) (none for a row without labels)."""
        self.kept += 1
        self.labels.update(str(label) for label in labels)

    def unkeep(self, *labels) -> None:
        """Takes back a row counted as kept (a reader that skips it after all)."""
        self.kept -= 1
        self.labels.subtract(str(label) for label in labels)
        self.labels = +self.labels

    def describe(self) -> str:
        """The grouped skips, or that the input held no row at all."""
        if not self.read:
            return f"no {self.unit} in it"
        return describe_skips(self.what, None, self.read, self.reasons)

    def summary(self) -> None:
        """Logs the grouped skips and the labels that differ only in case or spaces,
        unless a `DataReport` collects this log (then the run prints one summary of
        every split, and warns of them)."""
        if self.collected:
            return
        if self.count:
            logging.warning("%s", describe_skips(self.what, self.source, self.read,
                                                 self.reasons))
        warn_case_variants(self.labels, f"the {self.what}s of {self.source}"
                           if self.source else f"the {self.what}s")

    def to_json(self) -> dict:
        return {"path": self.source, "unit": self.unit, "rows_read": self.read,
                "rows_kept": self.kept, "rows_skipped": self.count,
                "skipped": _reasons_json(self.reasons), "labels": _sorted(self.labels)}


def describe_skips(what: str, source: str | None, read: int,
                   reasons: dict[str, Reason]) -> str:
    """`skipped 3 of 120 <what>(s) of <source>: 2 wrong number of fields (a.csv:4: ...;
    a.csv:9: ...), 1 invalid UTF-8 (a.csv:7: ...)`, the most frequent reason first, the
    first places of each, then how many more."""
    count = sum(r.count for r in reasons.values())
    groups = []
    for reason, entry in sorted(reasons.items(), key=lambda item: -item[1].count):
        more = entry.count - len(entry.first)
        places = "; ".join(entry.first) + (f"; and {more} more" if more else "")
        groups.append(f"{entry.count} {reason} ({places})")
    where = f" of {source}" if source else ""
    return f"skipped {count} of {read} {what}(s){where}: " + ", ".join(groups)


def _label_key(label: str) -> str:
    return " ".join(label.split()).casefold()


def case_variants(labels) -> list[list[str]]:
    """The groups of labels (of `labels`: names, or a Counter of them) that differ
    only in case or in spaces around or inside them, each sorted; none for distinct
    labels."""
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for label in labels:
        groups[_label_key(str(label))].append(str(label))
    return sorted(sorted(group) for group in groups.values() if len(group) > 1)


def warn_case_variants(labels: collections.Counter, whose: str) -> list[list[str]]:
    """Warns of `case_variants` of `labels` (a Counter of the rows kept), naming them
    with their rows; returns them."""
    variants = case_variants(labels)
    if variants:
        named = "; ".join(" / ".join(
            f"{label!r} ({labels[label]} row{'s' * (labels[label] != 1)})" for label in group)
            for group in variants)
        logging.warning(
            "%s have labels that differ only in case or spaces, which a model learns as "
            "different classes: %s. They are kept apart as the files have them; where "
            "they are one class, write them alike in the files", whose, named)
    return variants


def _reasons_json(reasons: dict[str, Reason]) -> dict:
    return {reason: {"count": entry.count, "first": list(entry.first)}
            for reason, entry in sorted(reasons.items())}


def _sorted(counter) -> dict:
    return {str(k): int(v) for k, v in sorted(counter.items()) if v}


# The logs of the split being read (`DataReport.reading`), else None.
_COLLECTOR: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "albert_tf_skip_logs", default=None)


# ------------------------------------------------------------------ the texts cut
@dataclasses.dataclass
class Truncation:
    """What `--max_seq_length` cuts of a split's examples, as their records pack them:
    the examples counted, those it cuts (pieces of their text dropped by the rules of
    `albert_tf.packing`), the pieces dropped in all, and the positions the longest
    example takes whole (`packing.whole_length`: `[CLS]`, its pieces, a `[SEP]` after
    each segment; a `--max_seq_length` of at least that cuts none of it). Records
    written in windows (`--long_text=windows`) count their `windows` too, and the
    examples read in more than one (`examples_in_windows`); 0 where no example was read
    in windows (then they are no part of the JSON, as before windows were)."""

    max_seq_length: int = 0
    examples: int = 0
    examples_cut: int = 0
    pieces_dropped: int = 0
    longest: int = 0
    windows: int = 0
    examples_in_windows: int = 0

    def add(self, max_seq_length: int, sequences, windows: int | None = None) -> None:
        """One example, packed as `sequences`: (its segments' lengths, the lengths the
        packing rule keeps of them) for each sequence of it (one for a text or a pair,
        one a choice). It is cut where any sequence is; its pieces dropped are the most
        any sequence drops (every choice reads the same context: the end they drop
        counts once); its length, its longest sequence's whole. `windows`: the windows
        it is read in (`--long_text=windows`: its windowed segment is kept whole)."""
        sequences = list(sequences)
        dropped = int(max(sum(lengths) - sum(kept) for lengths, kept in sequences))
        self.max_seq_length = int(max_seq_length)
        self.examples += 1
        self.examples_cut += int(dropped > 0)
        self.pieces_dropped += dropped
        self.longest = max(self.longest, *(packing.whole_length(lengths)
                                           for lengths, _ in sequences))
        if windows is not None:
            self.windows += int(windows)
            self.examples_in_windows += int(windows > 1)

    @property
    def share(self) -> float:
        """The share of the examples cut."""
        return self.examples_cut / self.examples if self.examples else 0.0

    def describe(self) -> str:
        """`5 of 40 example(s) cut (12.5%), 230 piece(s) dropped; the longest takes 150
        positions whole`."""
        cut = f"{self.examples_cut} of {self.examples} example(s) cut"
        if self.examples_cut:
            cut += (f" ({self.share:.1%}), {self.pieces_dropped} piece(s) dropped")
        if self.windows:
            cut += (f"; read in {self.windows} window(s), {self.examples_in_windows} "
                    f"example(s) in more than one")
        return f"{cut}; the longest takes {self.longest} positions whole"

    def to_json(self) -> dict:
        counted = dataclasses.asdict(self)
        if not self.windows:
            del counted["windows"], counted["examples_in_windows"]
        return counted

    @classmethod
    def from_json(cls, value: dict) -> "Truncation":
        return cls(**{f.name: int(value.get(f.name, 0)) for f in dataclasses.fields(cls)})


def long_text_warning(name: str, truncation: Truncation) -> str:
    """The warning of a split (`name`: "the train split") that `--max_seq_length` cuts
    too much of: how much, and what reads its texts whole (`LONG_TEXT_ADVICE`)."""
    t = truncation
    return (f"{name}: {t.examples_cut} of {t.examples} example(s) ({t.share:.1%}) are "
            f"longer than --max_seq_length={t.max_seq_length} and are cut, "
            f"{t.pieces_dropped} piece(s) dropped in all (the longest takes {t.longest} "
            f"positions whole); the model never reads what is cut, in training, "
            f"evaluation, prediction or serving. "
            f"{WINDOWED_PAIR_ADVICE if t.windows else LONG_TEXT_ADVICE}")


# The count of the records being written (`counting_truncation`), else None.
_TRUNCATION: contextvars.ContextVar[Truncation | None] = contextvars.ContextVar(
    "albert_tf_truncation", default=None)


@contextlib.contextmanager
def counting_truncation():
    """Counts the examples packed inside the block (`truncation_counter`) in the
    `Truncation` it yields."""
    counted = Truncation()
    token = _TRUNCATION.set(counted)
    try:
        yield counted
    finally:
        _TRUNCATION.reset(token)


def truncation_counter() -> Truncation | None:
    """The `Truncation` that counts the examples being packed (`counting_truncation`),
    or None: a record writer adds each example to it (`Truncation.add`)."""
    return _TRUNCATION.get()


# ----------------------------------------------------------------------- the limit
@dataclasses.dataclass(frozen=True)
class SkipLimit:
    """`--max_skipped_rows`: a fraction of a split's rows (`0.01`, `1%`) or a count
    (`0`, `25`) that its skipped rows may not pass."""

    text: str
    fraction: float | None = None
    count: int | None = None

    @classmethod
    def parse(cls, value) -> "SkipLimit":
        text = str(DEFAULT_MAX_SKIPPED if value is None else value).strip()
        try:
            if text.endswith("%"):
                fraction = float(text[:-1]) / 100
            elif re.fullmatch(r"\d+", text):
                return cls(text, count=int(text))
            else:
                fraction = float(text)
        except ValueError:
            fraction = -1.0
        if not 0 <= fraction <= 1:
            raise ValueError(
                f"--max_skipped_rows={value}: expected a fraction of a split's rows "
                f"between 0 and 1 (0.01, or 1%) or a whole number of rows (0, 25)")
        return cls(text, fraction=fraction)

    def allows(self, skipped: int, read: int) -> bool:
        if self.count is not None:
            return skipped <= self.count
        return skipped <= self.fraction * read

    def __str__(self) -> str:
        if self.count is not None:
            return f"{self.count} row(s)"
        return f"{self.fraction:.4g} of the rows ({self.fraction * 100:.4g}%)"


# ----------------------------------------------------------------------- the report
class DataReport:
    """What a run read, split by split (see the module's docstring)."""

    def __init__(self, limit: SkipLimit | str | None = None):
        self.limit = limit if isinstance(limit, SkipLimit) else SkipLimit.parse(limit)
        self.splits: dict[str, list[SkipLog]] = {}
        self.examples: dict[str, int] = {}
        self.names: dict[str, str] = {}
        # split -> what --max_seq_length cut of it, once its records are written
        self.truncated: dict[str, Truncation] = {}

    @contextlib.contextmanager
    def reading(self, split: str, name: str | None = None):
        """Collects the `SkipLog`s made inside the block as `split`'s (called `name` in
        messages: by default "the <split> split")."""
        self.names.setdefault(split, name or f"the {split} split")
        logs = self.splits.setdefault(split, [])
        token = _COLLECTOR.set(logs)
        try:
            yield
        finally:
            _COLLECTOR.reset(token)

    def totals(self, split: str) -> dict:
        logs = self.splits.get(split, [])
        reasons: dict[str, Reason] = {}
        labels: collections.Counter = collections.Counter()
        for log in logs:
            labels.update(log.labels)
            for reason, entry in log.reasons.items():
                total = reasons.setdefault(reason, Reason())
                total.count += entry.count
                total.first += entry.first[:max(0, FIRST_PLACES - len(total.first))]
        return {"read": sum(log.read for log in logs), "kept": sum(log.kept for log in logs),
                "skipped": sum(log.count for log in logs), "reasons": reasons,
                "labels": labels, "units": sorted({log.unit for log in logs})}

    def labels(self, split: str) -> collections.Counter:
        return self.totals(split)["labels"]

    def check(self) -> None:
        """Raises `TooManySkipped` for the first split (in reading order) whose skipped
        rows pass the limit, naming the reasons and their first places; warns of the
        skips of each split before it (`logging.warning`: the reasons and their first
        places), and of its labels that differ only in case or spaces
        (`case_variants`)."""
        for split in self.splits:
            t = self.totals(split)
            what = f"{split} {'/'.join(t['units']) or 'row'}"
            if t["skipped"] and self.limit.allows(t["skipped"], t["read"]):
                logging.warning("%s: %s", self.names.get(split, f"the {split} split"),
                                describe_skips(what, None, t["read"], t["reasons"]))
            warn_case_variants(t["labels"], self.names.get(split, f"the {split} split")
                               + "'s rows")
            if t["skipped"] and not self.limit.allows(t["skipped"], t["read"]):
                raise TooManySkipped(
                    f"{self.names.get(split, f'the {split} split')} has too many bad rows: "
                    f"{describe_skips(what, None, t['read'], t['reasons'])}. "
                    f"--max_skipped_rows={self.limit.text} allows {self.limit}; fix the "
                    f"rows named (or raise --max_skipped_rows to leave them out)")

    def check_labels(self, split: str, labels) -> None:
        """The labels of `split`'s kept rows must all be `labels` (the model's, as
        labels.txt keeps them); labels without a row of the split are warned about."""
        counts = self.labels(split)
        extra = sorted(set(counts) - set(labels))
        if extra:
            raise DataError(f"the {split} split kept rows labelled {', '.join(extra)}, "
                            f"which are not the model's labels ({', '.join(labels)})")
        unseen = [label for label in labels if not counts.get(label)]
        if unseen and split == "train":
            logging.warning("no training row is labelled %s (the model still has an "
                            "output for each)", ", ".join(unseen))

    def to_json(self) -> dict:
        splits = {}
        for split, logs in self.splits.items():
            t = self.totals(split)
            splits[split] = {
                "rows_read": t["read"], "rows_kept": t["kept"], "rows_skipped": t["skipped"],
                **({"examples": self.examples[split]} if split in self.examples else {}),
                "skipped": _reasons_json(t["reasons"]), "labels": _sorted(t["labels"]),
                **({"truncated": self.truncated[split].to_json()}
                   if split in self.truncated else {}),
                "files": [log.to_json() for log in logs]}
        return {"max_skipped_rows": self.limit.text, "splits": splits}

    def write(self, output_dir: str) -> str:
        """`<output_dir>/data_report.json`, written atomically; returns its path."""
        path = os.path.join(output_dir, REPORT_FILE)
        fileio.write_text_atomically(path, json.dumps(self.to_json(), indent=2,
                                                      ensure_ascii=False) + "\n")
        return path

    def summary(self) -> str:
        """One line a split: rows read, kept and skipped (by reason; `check` warns of
        them with their places), labels; then the texts cut, once the records have
        counted them (`truncation_summary`)."""
        lines = ["the data read:"]
        for split in self.splits:
            t = self.totals(split)
            unit = "/".join(t["units"]) or "row"
            line = f"  {split}: {t['read']} {unit}(s) read, {t['kept']} kept"
            if t["skipped"]:
                reasons = sorted(t["reasons"].items(), key=lambda item: -item[1].count)
                line += f", {t['skipped']} skipped (" + ", ".join(
                    f"{entry.count} {reason}" for reason, entry in reasons) + ")"
            if t["labels"]:
                shown = sorted(t["labels"].items(), key=lambda kv: (-kv[1], kv[0]))
                more = len(shown) - 20
                line += "; labels " + ", ".join(f"{k}: {v}" for k, v in shown[:20]) + (
                    f" and {more} more" if more > 0 else "")
            lines.append(line)
        if self.truncated:
            lines.append(self.truncation_summary())
        return "\n".join(lines)

    def truncation_summary(self) -> str:
        """One line a split whose records counted what --max_seq_length cuts
        (`truncated`): the examples cut, the pieces dropped, the longest; "" for
        none."""
        if not self.truncated:
            return ""
        lengths = sorted({t.max_seq_length for t in self.truncated.values()})
        lines = [f"the texts cut by --max_seq_length={'/'.join(map(str, lengths))}:"]
        lines += [f"  {split}: {t.describe()}" for split, t in self.truncated.items()]
        return "\n".join(lines)

    def check_truncation(self) -> None:
        """Logs `truncation_summary`, and warns of each split with more than
        `TRUNCATION_WARNING_SHARE` of its examples cut (`long_text_warning`)."""
        if self.truncated:
            logging.info("%s", self.truncation_summary())
        for split, truncation in self.truncated.items():
            if truncation.share > TRUNCATION_WARNING_SHARE:
                logging.warning("%s", long_text_warning(
                    self.names.get(split, f"the {split} split"), truncation))
