"""Token classification (NER) data: files in, features out, predictions written back.

Two formats, told apart by their content:
- CoNLL columns: one token per line, its tag in the last column (tab or space
  separated: in a file whose token lines are mostly tab-separated, a line with a tab
  is cut at tabs only, so a token may hold a space, as in `New York<TAB>B-LOC`), a
  blank line (or a line of whitespace only) between sentences,
  `-DOCSTART-` lines skipped. Tags are kept as the file has them (BIO, IOB1 or BIOES);
  a file whose token lines have one column only has no tags (a test file).
- CLUENER2020's JSON lines: `{"text": ..., "label": {type: {entity: [[start, end]]}}}`
  with inclusive character offsets; every character is a word, tagged B-/I-<type>.

Features follow Model Garden's and Hugging Face's rule: the first piece of a word carries
the word's tag, every other piece (and [CLS], [SEP], padding) is ignored by the loss
(`IGNORE`). A sentence longer than the window is split, at word boundaries, into windows
of whole words; each word is predicted in exactly one window, and the predictions go back
per word. Written back, predictions keep the input's own format: a CoNLL file gets the
predicted tag as a new last column on every token line (everything else kept); CLUENER
lines get the predicted spans in `label`, as its leaderboard expects.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re

import numpy as np
from absl import logging

from albert_tf import fileio, names, packing
from albert_tf.data import rows
from albert_tf.data.errors import DataError
from albert_tf.data.report import SkipLog

# The label id of positions the loss and the metrics skip.
IGNORE = -1
DOCSTART = "-DOCSTART-"
_TAG = re.compile(r"^(O|[BIES]-.+)$")
# How raw text becomes words when a model serves it (`split_words`): as the training
# data's words are (CLUENER's and MSRA's files: every character a word).
WORD_SPLITS = ("whitespace", "characters")


class NerDataError(DataError):
    """NER data that cannot be used; the message names the file and line."""


@dataclasses.dataclass
class NerSentence:
    """One sentence: its words and their tags (None in a file without tags)."""

    words: list[str]
    tags: list[str] | None
    line: int  # where it starts in its file (1-based), for messages


@dataclasses.dataclass
class NerFile:
    """The sentences of a file and what writing predictions back needs: for CoNLL the
    file's lines (`rows[i]` is the sentence index and word index of line i, or None
    for a line kept as it is), for CLUENER the JSON objects."""

    path: str
    format: str  # "conll" or "cluener"
    sentences: list[NerSentence]
    lines: list[str] = dataclasses.field(default_factory=list)
    rows: list[tuple[int, int] | None] = dataclasses.field(default_factory=list)
    objects: list[dict] = dataclasses.field(default_factory=list)
    # the windows of its sentences (`file_features`), once made for a model's labels
    windows: list | None = None

    def head(self, count: int) -> "NerFile":
        """A file of the first `count` sentences (nothing to write back)."""
        return NerFile(self.path, self.format, self.sentences[:count])

    @property
    def has_tags(self) -> bool:
        return bool(self.sentences) and self.sentences[0].tags is not None


def _fields(line: str, tabs: bool = False) -> list[str]:
    """A CoNLL line's columns, cut at spaces and tabs only (a token may be another
    kind of space: U+3000 in Chinese text); with `tabs` (a tab-separated file), a line
    with a tab is cut at tabs only, spaces around each column dropped."""
    line = line.strip(" \t")
    if not line:
        return []
    if tabs and "\t" in line:
        return [column.strip(" ") for column in line.split("\t")]
    return _COLUMNS.split(line)


_COLUMNS = re.compile(r"[ \t]+")


def _tab_separated(lines) -> bool:
    """Whether most token lines of a CoNLL file (of more than one column) hold a tab."""
    with_tab = [("\t" in text.strip(" \t")) for text in (
        line.text for line in lines if line.problem is None) if len(_fields(text)) > 1]
    return 2 * sum(with_tab) > len(with_tab)


def _unknown(tags, labels) -> list[str]:
    return sorted(set(tags) - set(labels)) if labels is not None and tags else []


def read_conll(path: str, labels: list[str] | None = None) -> NerFile:
    """A CoNLL column file; see the module's docstring. A sentence is read whole or not
    at all: one with a bad line (a tag that is not O or B-/I-/E-/S-<type>, a line with a
    tag where most of the file's token lines have none or the reverse, invalid UTF-8, a
    NUL byte, with `labels` a tag not among them) is skipped, named by file and line, and
    its lines are written back unchanged. An error when no sentence is left."""
    lines = rows.read_lines(path, NerDataError)
    result = NerFile(path=path, format="conll", sentences=[])
    skips = SkipLog("CoNLL sentence", path)
    tabs = _tab_separated(lines)
    # tagged or not as most token lines are (one bad line does not decide for the file)
    counts = collections.Counter(min(len(f), 2) for f in (
        _fields(line.text, tabs) for line in lines if line.problem is None)
        if f and f[0] != DOCSTART)
    columns = counts.most_common(1)[0][0] if counts else None
    words, tags, start, first_row, bad = [], [], 0, 0, None
    seen_tags: set[str] = set()

    def close():
        nonlocal words, tags, bad
        if bad is None and words and _unknown(tags, labels):
            bad = (start, rows.UNKNOWN_LABEL, f"tag(s) {', '.join(_unknown(tags, labels))} "
                                              f"not among the labels")
        if bad is not None:
            skips.skip(rows.where(path, bad[0]), bad[1], bad[2])
            for i in range(first_row, len(result.rows)):  # written back as they are
                result.rows[i] = None
        elif words:
            result.sentences.append(NerSentence(words, tags if columns > 1 else None, start))
            skips.keep(*(tags if columns > 1 else ()))
        words, tags, bad = [], [], None

    for line in lines:
        number = line.number
        result.lines.append(line.text)
        fields = [] if line.problem else _fields(line.text, tabs)
        if line.problem is None and (not fields or fields[0] == DOCSTART):
            close()
            result.rows.append(None)
            continue
        if not words and bad is None:
            start, first_row = number, len(result.rows)
        result.rows.append((len(result.sentences), len(words)))
        if line.problem is not None:
            bad = bad or (number, *line.problem)
            words.append("")
            continue
        if bad is None and min(len(fields), 2) != columns:
            bad = (number, rows.FIELD_COUNT,
                   f"{len(fields)} column(s) where the file's token lines have "
                   f"{'a tag' if columns > 1 else 'no tag'}")
        elif bad is None and columns > 1 and not _TAG.match(fields[-1]):
            bad = (number, "not a tag", f"tag {fields[-1]!r} is not O or B-/I-/E-/S-<type>")
        elif bad is None and columns > 1 and line.unended and labels is None \
                and fields[-1] not in seen_tags:
            bad = (number, rows.CUT_SHORT, f"tag {fields[-1]!r} is on no other line, and the "
                                      "file's last line has no line break: it may be cut "
                                      "short")
        words.append(fields[0])
        if columns > 1:
            tags.append(fields[-1])
            seen_tags.add(fields[-1])
    close()
    skips.summary()
    if not result.sentences:
        raise NerDataError(f"{path} holds no usable sentence: {skips.describe()}")
    return result


def _cluener_tags(text: str, label) -> list[str]:
    """Character tags of one line; raises `_BadLine` for an entity whose span is not its
    text (or lies outside it) or overlaps another (CLUENER2020's train file has one)."""
    tags = ["O"] * len(text)
    if not isinstance(label, dict):
        raise _BadLine("malformed label", "'label' is not an object")
    for entity_type, entities in label.items():
        if not isinstance(entities, dict):
            raise _BadLine("malformed label", f"{entity_type!r} is not an object")
        for entity, spans in entities.items():
            if not (isinstance(spans, list) and all(
                    isinstance(span, list) and len(span) == 2 and all(
                        isinstance(x, int) and not isinstance(x, bool) for x in span)
                    for span in spans)):
                raise _BadLine("malformed label", f"{entity_type} {entity!r}: spans must "
                                                  "be [[start, end], ...]")
            for start, end in spans:
                if not (0 <= start <= end < len(text)) or text[start:end + 1] != entity:
                    raise _BadLine("entity not at its offsets",
                                   f"{entity_type} {entity!r} at [{start}, {end}] is not "
                                   f"that text (inclusive offsets into 'text')")
                if any(t != "O" for t in tags[start:end + 1]):
                    raise _BadLine("overlapping entities",
                                   f"{entity_type} {entity!r} at [{start}, {end}] overlaps "
                                   f"another entity")
                tags[start] = f"B-{entity_type}"
                for i in range(start + 1, end + 1):
                    tags[i] = f"I-{entity_type}"
    return tags


class _BadLine(Exception):
    """(reason, detail) of a CLUENER line that cannot be read whole."""


def read_cluener(path: str, labels: list[str] | None = None) -> NerFile:
    """CLUENER2020 JSON lines; every character is a word. A line is read whole or not
    at all: one that is not a JSON object with a 'text' string, or with a bad entity
    (see `_cluener_tags`; with `labels`, a tag not among them), is skipped, named by
    file and line."""
    result = NerFile(path=path, format="cluener", sentences=[])
    skips = SkipLog("CLUENER line", path)
    items = list(rows.json_lines(path, skips, NerDataError))
    # labelled or not as most lines are (one bad line does not decide for the file)
    labelled = 2 * sum("label" in item for _, item, _ in items) >= len(items)
    for number, item, _ in items:
        here = rows.where(path, number)
        try:
            if not isinstance(item.get("text"), str):
                raise _BadLine("missing field", "no 'text' string")
            problem = rows.text_problem(item["text"])
            if problem:
                raise _BadLine(*problem)
            tags = _cluener_tags(item["text"], item["label"]) if "label" in item else None
            if (tags is not None) != labelled:
                raise _BadLine("missing field", "no 'label' where most lines have one"
                               if labelled else "a 'label' where most lines have none")
            if _unknown(tags, labels):
                raise _BadLine(rows.UNKNOWN_LABEL, f"tag(s) {', '.join(_unknown(tags, labels))}"
                                                   f" not among the labels")
        except _BadLine as bad:
            skips.skip(here, *bad.args)
            continue
        result.objects.append(item)
        result.sentences.append(NerSentence(list(item["text"]), tags, number))
        skips.keep(*(tags or ()))
    skips.summary()
    if not result.sentences:
        raise NerDataError(f"{path} holds no usable sentence: {skips.describe()}")
    return result


def read_ner_file(path: str, labels: list[str] | None = None) -> NerFile:
    """CLUENER JSON lines if the file starts with a JSON object (or is a JSON array of
    them), else CoNLL.
    With `labels`, a sentence with another tag is skipped (a dev or test file)."""
    head = rows.text_head(path).lstrip("\ufeff \t\r\n")
    cluener = head.startswith("{") or re.match(r"\[\s*[{\]]", head)  # or an array of them
    return read_cluener(path, labels) if cluener else read_conll(path, labels)


def labels_of(files: list[NerFile]) -> list[str]:
    """The tags of the files, sorted, "O" first: the label list saved with a model."""
    found = {t for f in files for s in f.sentences for t in (s.tags or ())}
    return ["O", *sorted(found - {"O"})]


def warn_about_unopened_entities(ner_file: NerFile) -> int:
    """Counts the sentences with an `I-` tag that does not continue an entity of its
    type (after `O`, at the start, or after another type) and warns, naming the first
    line: such a tag is read as seqeval's default mode reads it, as the start of a new
    entity (normal in IOB1 files, where `B-` only separates adjacent entities)."""
    count, first = 0, None
    for sentence in ner_file.sentences:
        previous = "O"
        for tag in sentence.tags or ():
            if tag.startswith("I-") and previous[2:] != tag[2:]:
                count += 1
                first = first or sentence.line
                break
            previous = tag
    if count:
        logging.warning(
            "%s: %d sentences have an I- tag that opens an entity (first in the sentence "
            "at line %d); read as seqeval does, as the start of a new entity", ner_file.path,
            count, first)
    return count


def word_split_of(ner_file: NerFile) -> str:
    """"characters" when every word of the file is one character (CLUENER, MSRA's
    character-per-line files), else "whitespace": how `split_words` cuts raw text into
    words like those the model was trained on."""
    return word_split_of_words(s.words for s in ner_file.sentences)


def word_split_of_words(sentences) -> str:
    """`word_split_of` for sentences given as lists of words."""
    single = all(len(w) == 1 for words in sentences for w in words)
    return "characters" if single else "whitespace"


def split_words(text: str, word_split: str = "whitespace") -> list[tuple[str, int, int]]:
    """Raw text -> (word, start, end) with code points [start, end): "whitespace" takes
    runs of non-space characters, each CJK character a word of its own (as BERT's basic
    tokenizer treats them); "characters" takes every non-space character. The same rule
    as the exports' `serve_text`."""
    from albert_tf.tokenization import _is_chinese_char

    if word_split not in WORD_SPLITS:
        raise ValueError(f"word_split must be one of {WORD_SPLITS}, got {word_split!r}")
    words, start = [], None
    for i, char in enumerate(text + " "):
        cjk = _is_chinese_char(ord(char))
        if start is not None and (char.isspace() or cjk or word_split == "characters"
                                  or _is_chinese_char(ord(text[i - 1]))):
            words.append((text[start:i], start, i))
            start = None
        if start is None and not char.isspace():
            start = i
    return words


# ----------------------------------------------------------------------------- features
@dataclasses.dataclass
class NerFeature:
    """One window: model inputs, `label_ids` (IGNORE where nothing is predicted) and
    `words` [S] (the word index a position predicts, -1 elsewhere), of `sentence`."""

    sentence: int
    inputs: dict[str, np.ndarray]
    label_ids: np.ndarray
    words: np.ndarray


def word_pieces(tokenizer, word: str) -> list[str]:
    """A word's pieces: WordPiece's, or SentencePiece's of the preprocessed word."""
    if getattr(tokenizer, "sp_model", None) is not None:
        return tokenizer.tokenize(tokenizer.preprocess(word))
    return tokenizer.tokenize(word)


def _windows(lengths: list[int], budget: int) -> list[tuple[int, int]]:
    """[start, end) word ranges, whole words, at most `budget` pieces each (a longer
    word alone)."""
    windows, start, used = [], 0, 0
    for i, length in enumerate(lengths):
        if used and used + length > budget:
            windows.append((start, i))
            start, used = i, 0
        used += length
    windows.append((start, len(lengths)))
    return windows


def sentence_features(index: int, sentence: NerSentence, tokenizer, max_seq_length: int,
                      label_ids: dict[str, int]) -> list[NerFeature]:
    """The windows of one sentence (see the module's docstring), padded to
    `max_seq_length`."""
    pieces = [tokenizer.convert_tokens_to_ids(word_pieces(tokenizer, w))
              for w in sentence.words]
    budget = packing.segment_budget(max_seq_length, 1)
    cls_id, sep_id = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    features = []
    for start, end in _windows([len(p) for p in pieces], budget):
        ids, words = [], []
        for w in range(start, end):
            kept = pieces[w][:budget - len(ids)]
            ids += kept
            words += [w] + [-1] * (len(kept) - 1) if kept else []
        inputs = packing.pack([ids], max_seq_length, cls_id=cls_id, sep_id=sep_id)
        word_of = np.full(max_seq_length, -1, np.int32)
        word_of[1:1 + len(words)] = words
        labels = np.full(max_seq_length, IGNORE, np.int32)
        if sentence.tags is not None:
            for position in np.flatnonzero(word_of >= 0):
                labels[position] = label_ids.get(sentence.tags[word_of[position]], IGNORE)
        features.append(NerFeature(index, inputs, labels, word_of))
    return features


def file_features(ner_file: NerFile, tokenizer, max_seq_length: int,
                  labels: list[str]) -> list[NerFeature]:
    """Every window of every sentence. A word whose tag is not in `labels` is not
    scored (label `IGNORE`: not trained on; in evaluation its entity stays in the gold
    tags, which the model cannot predict): a warning names each such line, then the
    count. An error when no word of the file is left with a known tag."""
    label_ids = {label: i for i, label in enumerate(labels)}
    unknown_lines, unknown_tags = 0, set()
    for sentence in ner_file.sentences:
        unknown = sorted(set(sentence.tags or ()) - set(label_ids))
        if unknown:
            unknown_lines += 1
            unknown_tags.update(unknown)
            logging.warning("%s, line %d: tags %s are not among the model's labels; "
                            "those words are not scored", ner_file.path, sentence.line,
                            unknown)
    if unknown_lines:
        logging.warning("%s: %d of %d sentences have tags outside the label list (%s)",
                        ner_file.path, unknown_lines, len(ner_file.sentences),
                        ", ".join(sorted(unknown_tags)))
    features = [feature for i, sentence in enumerate(ner_file.sentences)
                for feature in sentence_features(i, sentence, tokenizer, max_seq_length,
                                                 label_ids)]
    if ner_file.has_tags and not any((f.label_ids >= 0).any() for f in features):
        raise NerDataError(f"{ner_file.path}: no word has a tag among the labels {labels}")
    return features


def feature_arrays(features: list[NerFeature]) -> dict[str, np.ndarray]:
    """The features stacked: model inputs, `label_ids`, and `words`."""
    arrays = {name: np.stack([f.inputs[name] for f in features])
              for name in names.MODEL_INPUTS}
    arrays["label_ids"] = np.stack([f.label_ids for f in features])
    arrays["words"] = np.stack([f.words for f in features])
    return arrays


def word_predictions(ner_file: NerFile, features: list[NerFeature], predicted: np.ndarray,
                     labels: list[str]) -> list[list[str]]:
    """Per sentence, one tag per word from the predicted label ids [N, S] of the
    features; a word with no piece (e.g. a space) is "O"."""
    tags = [["O"] * len(s.words) for s in ner_file.sentences]
    for feature, row in zip(features, predicted):  # rows may differ in length
        for position in np.flatnonzero(feature.words >= 0):
            tags[feature.sentence][feature.words[position]] = labels[int(row[position])]
    return tags


# ----------------------------------------------------------------------- writing back
def spans_of(tags: list[str]) -> list[tuple[str, int, int]]:
    """(type, first, last) of each entity in `tags`, as seqeval's default mode reads
    them (the definition the metrics use)."""
    from seqeval.metrics.sequence_labeling import get_entities

    return [(t, start, end) for t, start, end in get_entities(list(tags))]


def predictions_text(ner_file: NerFile, tags: list[list[str]]) -> str:
    """The file's content with the predictions, in its own format."""
    if ner_file.format == "conll":
        out = []
        for line, row in zip(ner_file.lines, ner_file.rows):
            if row is None:
                out.append(line)
            else:
                separator = "\t" if "\t" in line else " "
                out.append(f"{line.rstrip()}{separator}{tags[row[0]][row[1]]}")
        return "\n".join(out) + "\n"
    lines = []
    for item, sentence_tags in zip(ner_file.objects, tags):
        text, label = item["text"], {}
        for entity_type, start, end in spans_of(sentence_tags):
            label.setdefault(entity_type, {}).setdefault(
                text[start:end + 1], []).append([start, end])
        lines.append(json.dumps({**item, "label": label}, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def write_predictions(ner_file: NerFile, tags: list[list[str]], path: str) -> None:
    """`predictions_text` written atomically to `path` (test_predictions.conll or
    test_predictions.json, by the scripts)."""
    fileio.write_text_atomically(path, predictions_text(ner_file, tags))


# ----------------------------------------------------------------------------- metrics
def ner_metrics(gold: list[list[str]], predicted: list[list[str]]) -> dict[str, float]:
    """Entity-level precision, recall and F1 (overall and `<type>_f1` etc. per type),
    seqeval's default mode (conlleval's definitions), and token `accuracy`."""
    from seqeval.metrics import accuracy_score, classification_report

    if [len(s) for s in gold] != [len(s) for s in predicted]:
        raise ValueError("gold and predicted tags differ in sentence or word counts")
    report = classification_report(gold, predicted, output_dict=True, zero_division=0)
    results = {"accuracy": float(accuracy_score(gold, predicted))}
    for key, values in report.items():
        if key in ("macro avg", "weighted avg"):
            continue
        prefix = "" if key == "micro avg" else f"{key}_"
        for metric in ("precision", "recall", "f1-score"):
            results[prefix + metric.replace("-score", "")] = float(values[metric])
    return results


# ------------------------------------------------------------------------ serving
def serving_entities(text: str, outputs: dict, row: int = 0) -> list[tuple[str, int, int, str]]:
    """The entities of `text` from a token-classification export's `serve_text` outputs
    (row `row` of the batch; numpy or tensors): the tags at the positions that start a
    word (`word_start`), read as seqeval reads them, each entity as (type, start, end,
    text) with code points [start, end) of `text`."""
    def row_of(name):
        return np.asarray(outputs[name])[row]

    starts = np.flatnonzero(row_of(names.WORD_START))
    tags = [t.decode("utf-8") if isinstance(t, bytes) else str(t)
            for t in row_of(names.TAGS)[starts]]
    first, last = row_of(names.TOKEN_START_CHAR)[starts], row_of(names.TOKEN_END_CHAR)[starts]
    return [(entity_type, int(first[a]), int(last[b]), text[first[a]:last[b]])
            for entity_type, a, b in spans_of(tags)]
