"""Every reader on mutated real files (hypothesis, derandomized and bounded): extra or
missing delimiters, stray and unbalanced quotes, a BOM, CRLF, a NUL, a truncated last
line, invalid UTF-8, JSON broken mid-value, tabs inside CSV fields, blank lines.

Each clean file is built from real fixture data as a header, segments (one row, or
one sentence, document or article, of the reader) and what closes it. A mutation
touches one segment (or the header, or the whole file). Whatever it is, the reader
raises nothing but the project's own `DataError`, gives no label the clean file does not
have (a character inserted into or taken out of a label's own text is an edit of that
label, not a misread: the label with it undone is a clean one, or two clean labels of a
list joined), and reads every
segment the mutation did not touch exactly as from the clean file.
"""

from __future__ import annotations

import codecs
import collections
import csv
import dataclasses
import io
import json
import os
import re
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from albert_tf.data import glue, multiple_choice, ner, race, squad, tabular
from albert_tf.data.errors import DataError
from albert_tf.data.pretraining.corpus import read_chunks
from albert_tf.data.report import DataReport, SkipLog
from albert_tf.data.rows import NOT_LABEL_LIST, REPEATED_HEADER
from albert_tf.tasks.multi_label import MultiLabelTask
from tests.helpers.scripts import FIXTURES

SEGMENTS = 24  # rows (sentences, documents) of each clean file
# Mutations tried per reader: few enough for the suite, derandomized; a deeper search:
# ALBERT_TF_FUZZ_EXAMPLES=5000 pytest tests/test_messy_files.py
EXAMPLES = int(os.environ.get("ALBERT_TF_FUZZ_EXAMPLES", "60"))


# --------------------------------------------------------------------------- layouts
@dataclasses.dataclass
class Layout:
    """A clean file: `header` lines, `segments` (each a list of lines) with
    `separator` lines between them, `footer` lines; `delimiters` the format's
    structural characters; `read(path) -> [(content, labels)]`."""

    name: str
    file_name: str
    header: list[bytes]
    segments: list[list[bytes]]
    read: Callable
    delimiters: bytes
    separator: list[bytes] = dataclasses.field(default_factory=list)
    footer: list[bytes] = dataclasses.field(default_factory=list)
    separators_in_labels: bytes = b""  # a label list's own separators

    def lines(self, segments=None) -> tuple[list[bytes], list[int]]:
        """The file's lines and, for each, its segment (-1 header, -2 footer, -3 a
        separator)."""
        segments = self.segments if segments is None else segments
        lines, owners = list(self.header), [-1] * len(self.header)
        for i, segment in enumerate(segments):
            if i:
                lines += self.separator
                owners += [-3] * len(self.separator)
            lines += segment
            owners += [i] * len(segment)
        return lines + self.footer, owners + [-2] * len(self.footer)


def goemotions_rows():
    with open(FIXTURES / "goemotions" / "train.tsv", encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    rows = rows[:SEGMENTS]
    # a cell over two lines, as spreadsheets export a text with a line break
    rows[3] = [rows[3][0].replace(" ", "\n", 1), *rows[3][1:]]
    return rows


def csv_lines(row, delimiter=",") -> list[bytes]:
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter, lineterminator="\n").writerow(row)
    return out.getvalue().encode()[:-1].split(b"\n")


def dumps(value) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def read_table(fields, **options):
    def read(path):
        examples = tabular.read_examples(path, fields, split="train", labels=None,
                                         regression=False, **options)
        return [((e.text_a, e.text_b, e.label), (e.label,)) for e in examples]
    return read


def read_multi_label(path):
    task = MultiLabelTask({"text_a_field": "text", "text_b_field": None,
                           "label_field": "labels", "header": True, "label_separator": ","})
    return [((e.text_a, e.labels), e.labels or ()) for e in task.read("train", [path])]


def read_sst2(path):
    import os

    data_dir = os.path.dirname(os.path.dirname(path))
    examples = glue.GlueProcessor("sst-2").get_examples(data_dir, "train")
    return [((e.text_a, e.label), (e.label,)) for e in examples]


def read_choices(examples):
    return [((e.example_id, e.context, tuple(e.endings), e.label), (e.label,))
            for e in examples]


def read_squad(path):
    return [((e.qas_id, e.question_text, e.paragraph_text, e.orig_answer_text,
              e.start_position), ()) for e in squad.read_squad_examples(path, True)]


def read_conll(path):
    return [((tuple(s.words), tuple(s.tags)), tuple(s.tags))
            for s in ner.read_conll(path).sentences]


def read_cluener(path):
    return [((tuple(s.words), tuple(s.tags)), tuple(s.tags))
            for s in ner.read_cluener(path).sentences]


def read_text(path):
    chunks = read_chunks([path], chunk_bytes=1 << 20, max_line_bytes=1 << 16,
                         skips=SkipLog("input line"))
    return [((line,), ()) for c in chunks for d in c.documents for line in d.lines]


def layouts() -> dict[str, Layout]:
    rows = goemotions_rows()
    single = [(text, labels.split(",")[0], row_id) for text, labels, row_id in rows]
    c3 = json.loads((FIXTURES / "c3" / "c3-d-train.json").read_text(encoding="utf-8"))
    questions = [{"id": f"{d[2]}-{i}", "context": " ".join(d[0]), **{
        "question": q["question"], "choices": q["choice"], "label": q["answer"]}}
        for d in c3 for i, q in enumerate(d[1])][:SEGMENTS]
    document = json.loads((FIXTURES / "squad" / "dev-v1.1-excerpt.json").read_text())
    articles = [{"title": a["title"], "paragraphs": [p]} for a in document["data"]
                for p in a["paragraphs"]]
    sentences, sentence = [], []
    for line in (FIXTURES / "ner" / "wnut17_train.conll").read_bytes().split(b"\n"):
        if line.strip():
            sentence.append(line)
        elif sentence:
            sentences.append(sentence)
            sentence = []
    cluener = (FIXTURES / "ner" / "cluener_train.json").read_bytes().split(b"\n")
    text = [line for line in (FIXTURES / "text" / "real_sample.txt").read_bytes()
            .split(b"\n") if line.strip()]
    swag_header = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
                   "ending0", "ending1", "ending2", "ending3", "label"]
    swag = [[f"v{i}", str(i), "", rows[i][0], "Then", "gold",
             *(rows[(i + k) % len(rows)][0][:40] for k in range(1, 5)), str(i % 4)]
            for i in range(SEGMENTS)]
    return {layout.name: layout for layout in (
        Layout("csv", "train.csv", csv_lines(["id", "text", "label"]),
               [csv_lines([i, t, label]) for t, label, i in single],
               read_table(tabular.Fields("text", label="label")), b',"'),
        Layout("tsv", "train.tsv", [b"text\tlabel\tid"],
               [["\t".join(row).encode()] for row in single],
               read_table(tabular.Fields("text", label="label")), b"\t"),
        Layout("jsonl", "train.jsonl", [],
               [[dumps({"text": t, "label": label, "id": i})] for t, label, i in single],
               read_table(tabular.Fields("text", label="label")), b',:"{}'),
        Layout("multi_label_csv", "train.csv", csv_lines(["text", "labels"]),
               [csv_lines([t, labels]) for t, labels, _ in rows], read_multi_label, b',"',
               separators_in_labels=b","),
        Layout("multi_label_jsonl", "train.jsonl", [],
               [[dumps({"text": t, "labels": labels.split(",")})] for t, labels, _ in rows],
               read_multi_label, b',:"[]', separators_in_labels=b","),
        Layout("glue_sst2", "SST-2/train.tsv", [b"sentence\tlabel"],
               [[f"{t}\t{int(label == 'neutral')}".encode()] for t, label, _ in single
                if "\n" not in t], read_sst2, b"\t"),
        Layout("swag", "train.csv", csv_lines(swag_header),
               [csv_lines(row) for row in swag],
               lambda p: read_choices(multiple_choice.read_swag(p, labelled=True)), b',"'),
        Layout("choice_jsonl", "train.jsonl", [], [[dumps(q)] for q in questions],
               lambda p: read_choices(multiple_choice.read_choice_jsonl(p, labelled=True)),
               b',:"[]{}'),
        Layout("c3", "c3-d-train.json", [b"["], [[dumps(d)] for d in c3[:SEGMENTS]],
               lambda p: read_choices(multiple_choice.read_c3([p], labelled=True)),
               b',:"[]{}', separator=[b","], footer=[b"]"]),
        Layout("squad", "train.json", [b'{"version": "1.1", "data": ['],
               [[dumps(a)] for a in articles], read_squad, b',:"[]{}', separator=[b","],
               footer=[b"]}"]),
        Layout("conll", "train.conll", [], sentences[:SEGMENTS], read_conll, b" \t",
               separator=[b""]),
        Layout("cluener", "train.json", [], [[line] for line in cluener[:SEGMENTS]],
               read_cluener, b',:"[]{}'),
        Layout("text", "corpus.txt", [], [[line] for line in text[:SEGMENTS]], read_text,
               b"", separator=[b""]),
    )}


LAYOUTS = layouts()


def write(tmp_path, layout: Layout, lines: list[bytes], ended: bool = True) -> str:
    path = tmp_path / layout.file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\n".join(lines) + (b"\n" if ended else b""))
    return str(path)


def read_race_dir(directory):
    return read_choices(race.RaceProcessor().get_examples(directory, "train"))


# ------------------------------------------------------------------------ mutations
INSERTED = [b'"', b"\t", b"\x00", b"\xff", b"\xc3", b"\xef\xbb\xbf", b"\r"]


@st.composite
def mutations(draw, layout: Layout):
    """(lines, ended, touched segments or None for a change of the whole file, the
    header's or the footer's, the edit: ("insert" or "delete", the bytes) or None)."""
    lines, owners = layout.lines()
    kind = draw(st.sampled_from(["insert", "insert", "insert", "delete", "bom_line",
                                 "crlf_line", "crlf_file", "bom_file", "truncate_last",
                                 "cut_line", "blank_lines"]))
    if kind in ("crlf_file", "bom_file"):
        if kind == "crlf_file":
            return [line + b"\r" for line in lines], True, set(), None
        return [b"\xef\xbb\xbf" + lines[0], *lines[1:]], True, set(), None
    if kind == "truncate_last":
        last = lines[-1]
        cut = draw(st.integers(0, len(last)))
        touched = {owners[-1]} if owners[-1] >= 0 else None
        return lines[:-1] + [last[:cut]], False, touched, None
    index = draw(st.integers(0, len(lines) - 1))
    owner = owners[index]
    touched = {owner} if owner >= 0 else None
    if owner == -3:  # a separator: the segments on both sides
        touched = {owners[index - 1], owners[index + 1]}
    line, edit = lines[index], None
    if kind == "insert":
        inserted = draw(st.sampled_from(INSERTED + [bytes([c]) for c in layout.delimiters]))
        at = draw(st.integers(0, len(line)))
        line = line[:at] + inserted + line[at:]
        edit = ("insert", inserted)
    elif kind == "delete":
        positions = [i for i, c in enumerate(line) if bytes([c]) in layout.delimiters]
        if positions:
            at = draw(st.sampled_from(positions))
            edit = ("delete", line[at:at + 1])
            line = line[:at] + line[at + 1:]
    elif kind == "bom_line":
        line = b"\xef\xbb\xbf" + line
    elif kind == "crlf_line":
        line += b"\r"
    elif kind == "cut_line" and b"{" in layout.delimiters:  # JSON broken mid-value
        line = line[:draw(st.integers(0, len(line)))]
    elif kind == "blank_lines":
        count = draw(st.integers(1, 3))
        new = lines[:index] + [b""] * count + lines[index:]
        return new, True, touched, None
    return lines[:index] + [line] + lines[index + 1:], True, touched, edit


# --------------------------------------------------------------------------- the test
def contents_of(layout: Layout, segment: list[bytes], tmp_path) -> list:
    """What the reader makes of one segment alone (with the header and footer)."""
    lines, _ = layout.lines([segment])
    return [content for content, _ in layout.read(write(tmp_path, layout, lines))]


@dataclasses.dataclass
class Clean:
    rows: list
    labels: set
    by_segment: list


def clean_read(layout: Layout, tmp_path) -> Clean:
    lines, _ = layout.lines()
    rows = layout.read(write(tmp_path, layout, lines))
    by_segment = [contents_of(layout, s, tmp_path) for s in layout.segments]
    assert sorted(map(repr, (c for c, _ in rows))) == sorted(
        repr(c) for contents in by_segment for c in contents)
    return Clean(rows, {label for _, labels in rows for label in labels}, by_segment)


def label_is_clean(label, clean_labels, edit, separators: bytes) -> bool:
    """A label of the clean file, or one of its labels edited by the mutation: the
    character inserted into it (or into a list of labels at its separator, cutting one
    in two), or taken out of it (or out of a list, joining two)."""
    if label in clean_labels:
        return True
    if edit is None:
        return False
    kind, data = edit
    char = data.decode("utf-8", "ignore")
    if not char:
        return False
    if kind == "insert":
        cut = data in separators and any(label in c for c in clean_labels)
        return label.replace(char, "", 1) in clean_labels or cut
    joined = any(label == a + b for a in clean_labels for b in clean_labels)
    return any(label[:i] + char + label[i:] in clean_labels
               for i in range(len(label) + 1)) or (data in separators and joined)


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_a_mutated_file_is_read_row_by_row_or_refused(name, tmp_path_factory):
    layout = LAYOUTS[name]
    clean = clean_read(layout, tmp_path_factory.mktemp("clean"))
    assert len(clean.rows) >= SEGMENTS - 2 and all(clean.by_segment)
    folder = tmp_path_factory.mktemp("mutated")

    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(mutation=mutations(layout))
    def check(mutation):
        lines, ended, touched, edit = mutation
        try:
            rows = layout.read(write(folder, layout, lines, ended))
        except DataError:
            return
        got = collections.Counter(repr(content) for content, _ in rows)
        if touched is None:  # the header or footer: read as before, or refused
            assert got == collections.Counter(repr(c) for c, _ in clean.rows)
            return
        for i, contents in enumerate(clean.by_segment):
            if i in touched:
                continue
            for content in contents:
                assert got[repr(content)] > 0, (i, content)
                got[repr(content)] -= 1
        for _, labels in rows:
            for label in labels:
                assert label_is_clean(label, clean.labels, edit,
                                      layout.separators_in_labels), label

    check()


def test_race_documents_mutated_one_file_at_a_time(tmp_path_factory):
    """RACE: each file is a document; a mutated file costs its own questions only."""
    sources = sorted((FIXTURES / "race" / "RACE").glob("*/*/*.txt"))
    documents = [json.loads(p.read_text(encoding="utf-8")) for p in sources]
    clean_dir = tmp_path_factory.mktemp("race")
    (clean_dir / "RACE" / "train" / "high").mkdir(parents=True)
    for i, document in enumerate(documents):
        path = clean_dir / "RACE" / "train" / "middle" / f"{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document), encoding="utf-8")
    clean = read_race_dir(clean_dir)
    by_file = collections.defaultdict(list)
    for content, _ in clean:
        by_file[content[0]].append(content)
    labels = {label for _, ls in clean for label in ls}

    @settings(max_examples=EXAMPLES // 2, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(which=st.integers(0, len(documents) - 1), at=st.floats(0, 1),
           inserted=st.sampled_from([b'"', b",", b"}", b"\x00", b"\xff", b"", b"\n"]))
    def check(which, at, inserted):
        path = clean_dir / "RACE" / "train" / "middle" / f"{which}.txt"
        original = path.read_bytes()
        cut = int(at * len(original))
        path.write_bytes(original[:cut] + inserted + (original[cut:] if inserted else b""))
        try:
            rows = read_race_dir(clean_dir)
        except DataError:
            return
        finally:
            path.write_bytes(original)
        got = collections.Counter(repr(c) for c, _ in rows)
        for document_id, contents in by_file.items():
            if document_id == documents[which]["id"]:
                continue
            for content in contents:
                assert got[repr(content)] > 0, content
        assert all(label in labels for _, ls in rows for label in ls)

    check()


# ----------------------------------------------------------------- the reported cases
def test_the_cases_users_met(tmp_path, caplog):
    """A row with more fields than the header is no example labelled with its second
    field; an unterminated quote costs its own row, not the rows up to the next quote;
    a label cell that starts as a JSON list but is not one gives no labels `["joy"` or
    `[joy`; --labels that leave most rows out stop the run, with one warning a file
    (not one line a row)."""
    table = tmp_path / "train.csv"
    table.write_text('text,label\n'
                     'a fine film,positive\n'
                     'too,many,columns,here\n'
                     '"unterminated quote, positive\n'
                     'a dull film,negative\n'
                     'an ok film,neutral\n'
                     '"a ""quoted"" word, and a comma",positive\n', encoding="utf-8")
    read = read_table(tabular.Fields("text", label="label"))
    assert [content[::2] for content, _ in read(str(table))] == [
        ("a fine film", "positive"), ("a dull film", "negative"), ("an ok film", "neutral"),
        ('a "quoted" word, and a comma', "positive")]

    multi = tmp_path / "emotions.jsonl"
    rows = [{"text": "yay", "labels": '["joy", '}, {"text": "grr", "labels": "[joy, anger]"},
            {"text": "ok", "labels": ["joy"]}, {"text": "hmm", "labels": '["fear"]'}]
    multi.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert read_multi_label(str(multi)) == [(("ok", ("joy",)), ("joy",)),
                                            (("hmm", ("fear",)), ("fear",))]

    many = tmp_path / "many.jsonl"
    many.write_text("".join(json.dumps({"text": f"row {i}", "labels": [label]}) + "\n"
                            for i, label in enumerate(["joy", "anger", "fear", "love"] * 80)),
                    encoding="utf-8")
    from albert_tf.data.report import DataReport, TooManySkipped

    task = MultiLabelTask({"text_a_field": "text", "text_b_field": None,
                           "label_field": "labels", "header": True, "label_separator": ",",
                           "labels": ("joy", "anger")})
    report = DataReport()
    caplog.clear()
    with caplog.at_level("WARNING"), report.reading("train"):
        assert len(task.read("train", [str(many)])) == 160
    assert not [r for r in caplog.records if "skipp" in r.getMessage()]  # the run's own
    with pytest.raises(TooManySkipped, match=r"skipped 160 of 320 train row\(s\): 160 "
                                             r"unknown label \(.*many.jsonl:3: label\(s\) "
                                             r"'fear' not one of the 2 labels; .*; and 155 "
                                             r"more\)"):
        report.check()
    outside = MultiLabelTask(task.options)
    caplog.clear()
    with caplog.at_level("WARNING"):
        outside.read("train", [str(many)])
    assert len([r for r in caplog.records if "skipped" in r.getMessage()]) == 1


# ------------------------------------------- what spreadsheets, pandas and Excel write
# Each family on the real fixture rows, a few examples each (derandomized, no deadline).
FAMILY_EXAMPLES = max(6, EXAMPLES // 5)
family = settings(max_examples=FAMILY_EXAMPLES, derandomize=True, deadline=None,
                  database=None, suppress_health_check=list(HealthCheck))
HEADED = ["csv", "tsv", "multi_label_csv", "glue_sst2", "swag"]  # a header row, by name
LINE_FILES = [n for n in LAYOUTS if n != "text"]  # read whole: text is streamed


def counted(layout: Layout, path: str):
    """(what the reader makes of `path`, the totals of the rows it read and skipped)."""
    report = DataReport("100%")
    with report.reading("train"):
        got = layout.read(path)
    return got, report.totals("train")


def contents(rows) -> collections.Counter:
    return collections.Counter(repr(content) for content, _ in rows)


def single_rows() -> list[tuple[str, str, str]]:
    """(text, label, id) of real GoEmotions rows, their texts as pandas wrote them
    (quotes and all: the fixture is a quoted TSV), read back as it meant them; rows
    with quotes in their text among them."""
    with open(FIXTURES / "goemotions" / "train.tsv", encoding="utf-8", newline="") as f:
        found = list(csv.reader(f, delimiter="\t"))[1:]
    quoted = [row for row in found if '"' in row[0]]
    chosen = (quoted[:8] + [row for row in found if '"' not in row[0]])[:SEGMENTS]
    return [(text, labels.split(",")[0], row_id) for text, labels, row_id in chosen]


def table_file(tmp_path, name: str, lines: list[str]) -> str:
    path = tmp_path / name
    path.write_bytes("".join(line + "\n" for line in lines).encode("utf-8"))
    return str(path)


def read_rows(path: str, **options) -> list[tuple]:
    return [content for content, _ in read_table(tabular.Fields("text", label="label"),
                                                 **options)(path)]


@pytest.mark.parametrize("name", HEADED)
def test_a_repeated_header_is_a_skip_of_its_own(name, tmp_path_factory):
    """Two files joined: the second header is skipped as "repeated header" (never a row
    labelled `label`), wherever it comes, with a byte-order mark, CRLF or spaces."""
    layout = LAYOUTS[name]
    clean = counted(layout, write(tmp_path_factory.mktemp("clean"), layout, layout.lines()[0]))
    folder = tmp_path_factory.mktemp("joined")
    delimiter = b"\t" if b"\t" in layout.header[0] else b","

    @family
    @given(at=st.lists(st.integers(1, len(layout.segments) - 1), min_size=1, max_size=3),
           form=st.sampled_from(["as is", "bom", "crlf", "spaces"]))
    def check(at, form):
        header = {"as is": layout.header[0], "bom": b"\xef\xbb\xbf" + layout.header[0],
                  "crlf": layout.header[0] + b"\r",
                  "spaces": layout.header[0].replace(delimiter, b" " + delimiter + b" ")}
        segments = list(layout.segments)
        for i in sorted(at, reverse=True):
            segments.insert(i, [header[form]])
        got, totals = counted(layout, write(folder, layout, layout.lines(segments)[0]))
        assert contents(got) == contents(clean[0])
        assert totals["reasons"][REPEATED_HEADER].count == len(at)
        assert totals["skipped"] == clean[1]["skipped"] + len(at)
        assert totals["labels"] == clean[1]["labels"]

    check()


@pytest.mark.parametrize("name", ["csv", "tsv", "multi_label_csv", "swag"])
def test_a_column_named_twice_is_refused_naming_it(name, tmp_path_factory):
    """`id,text,label,text`: refused, naming the file, line 1 and the column, before a
    row is read from either column."""
    layout = LAYOUTS[name]
    folder = tmp_path_factory.mktemp("twice")
    delimiter = "\t" if b"\t" in layout.header[0] else ","
    names = layout.header[0].decode().split(delimiter)

    @family
    @given(column=st.integers(0, len(names) - 1), at=st.integers(0, len(names)))
    def check(column, at):
        header = names[:at] + [names[column]] + names[at:]
        lines, _ = layout.lines()
        lines = [delimiter.join(header).encode()] + [line + delimiter.encode() + b"x"
                                                     for line in lines[1:]]
        path = write(folder, layout, lines)
        with pytest.raises(DataError, match=re.escape(
                f"{path}:1: the header names the column {names[column]!r} twice")):
            layout.read(path)

    check()


CASE_VARIANTS = {"upper": str.upper, "title": str.title, "swapcase": str.swapcase,
                 "spaces": lambda label: f"  {label} "}


@pytest.mark.parametrize("kind", ["csv", "tsv", "jsonl"])
def test_labels_differing_in_case_stay_apart_with_a_warning_naming_them(
        kind, tmp_path_factory, caplog):
    """`Positive` and `positive` are two classes, as written, with one warning naming
    both; spaces around a label are not part of it."""
    rows = single_rows()
    folder = tmp_path_factory.mktemp("case")

    def line(text, label, row_id):
        if kind == "csv":
            return b"\n".join(csv_lines([row_id, text, label])).decode()
        if kind == "tsv":  # the comment's id for its text: a TSV's quotes have a test
            return "\t".join([row_id, label])
        return json.dumps({"text": text, "label": label, "id": row_id})

    @family
    @given(changes=st.dictionaries(st.integers(0, len(rows) - 1),
                                   st.sampled_from(sorted(CASE_VARIANTS)), min_size=1,
                                   max_size=4))
    def check(changes):
        labels = [CASE_VARIANTS[changes[i]](label) if i in changes else label
                  for i, (_, label, _) in enumerate(rows)]
        head = {"csv": ["id,text,label"], "tsv": ["text\tlabel"], "jsonl": []}[kind]
        path = table_file(folder, f"train.{kind}", head + [
            line(text, label, row_id) for (text, _, row_id), label in zip(rows, labels)])
        caplog.clear()
        with caplog.at_level("WARNING"):
            got = [label for *_, label in read_rows(path)]
        assert got == [label.strip() for label in labels]  # none merged, none lost
        groups = collections.defaultdict(set)
        for label in got:
            groups[label.casefold()].add(label)
        variants = [sorted(g) for g in groups.values() if len(g) > 1]
        warned = [r.getMessage() for r in caplog.records
                  if "differ only in case" in r.getMessage()]
        assert len(warned) == bool(variants)
        for group in variants:
            assert all(repr(label) in warned[0] for label in group), (group, warned)

    check()


TSV_EDITS = ["\n", "\t", '"', '""', "  ", '"\n"']


@pytest.mark.parametrize("quoting", ["minimal", "all"])
def test_a_quoted_tsv_is_read_as_its_writer_meant(quoting, tmp_path_factory):
    """A TSV as pandas (`to_csv(sep="\\t")`) or Excel writes it: cells with a quote,
    tab or line break quoted, quotes doubled, CRLF or LF. Every text comes back exactly,
    never half a cell as a row, no quote left of the quoting."""
    rows = single_rows()
    folder = tmp_path_factory.mktemp("quoted")

    @family
    @given(edits=st.lists(st.tuples(st.integers(0, len(rows) - 1), st.floats(0, 1),
                                    st.sampled_from(TSV_EDITS)), max_size=4),
           crlf=st.booleans())
    def check(edits, crlf):
        texts = [text for text, _, _ in rows]
        for i, at, edit in edits:
            cut = int(at * len(texts[i]))
            texts[i] = texts[i][:cut] + edit + texts[i][cut:]
        out = io.StringIO()
        writer = csv.writer(out, delimiter="\t", lineterminator="\r\n" if crlf else "\n",
                            quoting=csv.QUOTE_ALL if quoting == "all" else csv.QUOTE_MINIMAL)
        writer.writerow(["text", "label", "id"])
        writer.writerows([text, label, row_id] for text, (_, label, row_id)
                         in zip(texts, rows))
        path = folder / "train.tsv"
        path.write_bytes(out.getvalue().encode("utf-8"))
        expected = [(text.replace("\r\n", "\n"), None, label)
                    for text, (_, label, _) in zip(texts, rows)]
        assert read_rows(str(path)) == expected

    check()


def test_glue_style_quotes_in_a_tsv_stay_text(tmp_path_factory):
    """Quotes that are text (GLUE's files: the original reads them with
    quotechar=None), opening a field and closing in its middle or never: every cell
    exactly as split at the tabs, whatever quotes are added inside the texts."""
    source = (FIXTURES / "glue" / "MRPC" / "train.tsv").read_text(encoding="utf-8-sig")
    lines = source.splitlines()
    folder = tmp_path_factory.mktemp("glue_style")
    fields = tabular.Fields("#1 String", "#2 String", "Quality")

    @family
    @given(edits=st.lists(st.tuples(st.integers(1, len(lines) - 1), st.integers(3, 4),
                                    st.floats(0, 1)), max_size=4))
    def check(edits):
        cells = [line.split("\t") for line in lines]
        for row, column, at in edits:
            text = cells[row][column]
            inside = [i for i in range(1, len(text)) if '"' not in text[i - 1:i + 1]]
            if inside:
                cut = inside[int(at * (len(inside) - 1))]
                cells[row][column] = text[:cut] + '"' + text[cut:]
        path = table_file(folder, "train.tsv", ["\t".join(c) for c in cells])
        examples = tabular.read_examples(path, fields, split="train", labels=None,
                                         regression=False)
        assert [(e.text_a, e.text_b, e.label) for e in examples] == [
            (c[3], c[4], c[0]) for c in cells[1:]]

    check()


def same_read(layout: Layout, clean_path: str, path: str) -> None:
    """`path` reads as `clean_path` does, row for row and skip for skip."""
    expected, clean = counted(layout, clean_path)
    got, totals = counted(layout, path)
    assert contents(got) == contents(expected)
    assert (totals["kept"], totals["skipped"]) == (clean["kept"], clean["skipped"])


@pytest.mark.parametrize("name", LINE_FILES)
def test_cr_only_line_ends_are_read_as_line_breaks(name, tmp_path_factory):
    """Old Mac Excel's CR-only line ends: the file reads as with LF."""
    layout = LAYOUTS[name]
    lines, _ = layout.lines()
    folder, lf = tmp_path_factory.mktemp("cr"), tmp_path_factory.mktemp("lf")

    @family
    @given(ended=st.booleans(), bom=st.booleans())
    def check(ended, bom):
        first = [(b"\xef\xbb\xbf" if bom else b"") + lines[0], *lines[1:]]
        path = folder / layout.file_name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\r".join(first) + (b"\r" if ended else b""))
        same_read(layout, write(lf, layout, first, ended), str(path))

    check()


def test_a_cr_only_corpus_is_refused_saying_so(tmp_path):
    layout = LAYOUTS["text"]
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"\r".join(layout.lines()[0]) + b"\r")
    with pytest.raises(DataError, match=re.escape(f"{path}:1: the file's line ends are "
                                                  "CR only")):
        layout.read(str(path))


WIDE = ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]
BOMS = {"utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff", "utf-32-le": b"\xff\xfe\0\0",
        "utf-32-be": b"\0\0\xfe\xff"}


@pytest.mark.parametrize("name", LINE_FILES)
def test_utf16_files_are_read_as_their_text(name, tmp_path_factory):
    """Excel's "Unicode text" (UTF-16 with a byte-order mark, CRLF), and UTF-32: read
    as the same text in UTF-8. A character cut in half (an unpaired surrogate, a byte
    cut off at the end) costs its own row only."""
    layout = LAYOUTS[name]
    lines, owners = layout.lines()
    clean = clean_read(layout, tmp_path_factory.mktemp("clean"))
    utf8 = write(tmp_path_factory.mktemp("utf8"), layout, lines)
    folder = tmp_path_factory.mktemp("wide")

    @family
    @given(codec=st.sampled_from(WIDE), crlf=st.booleans(),
           damage=st.sampled_from([None, None, "surrogate", "cut"]),
           where=st.integers(0, len(lines) - 1))
    def check(codec, crlf, damage, where):
        texts = [line.decode("utf-8") for line in lines]
        touched = set()
        if damage == "surrogate":
            texts[where] = texts[where][:1] + "\ud800" + texts[where][1:]
            touched = {owners[where]} if owners[where] != -3 else {  # a separator
                owners[where - 1], owners[where + 1]}
        text = ("\r\n" if crlf else "\n").join(texts) + ("\r\n" if crlf else "\n")
        raw = BOMS[codec] + text.encode(codec, "surrogatepass")
        if damage == "cut":
            raw, touched = raw[:-1], {owners[-1]}
        path = folder / layout.file_name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
        if not touched:
            same_read(layout, utf8, str(path))
            return
        try:
            got = layout.read(str(path))
        except DataError:
            return
        if touched & {-1, -2}:  # the header's or footer's: read as before, or refused
            assert contents(got) == contents(clean.rows)
            return
        found = contents(got)
        for i, segment in enumerate(clean.by_segment):
            for content in segment if i not in touched else ():
                assert found[repr(content)] > 0, (i, content)
                found[repr(content)] -= 1
        assert {x for _, labels in got for x in labels} <= clean.labels

    check()


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-32-be"])
def test_a_utf16_corpus_is_refused_saying_how_to_save_it(codec, tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes(BOMS[codec] + b"\n".join(LAYOUTS["text"].lines()[0]).decode()
                     .encode(codec))
    with pytest.raises(DataError, match=rf"{re.escape(str(path))}:1: the file is "
                                        rf"UTF-(16|32) .*save it as UTF-8"):
        LAYOUTS["text"].read(str(path))


JSON_LINES = ["jsonl", "multi_label_jsonl", "choice_jsonl", "cluener"]


def pretty_array(objects: list, indent, ensure_ascii: bool) -> tuple[str, list[int]]:
    """A JSON array of `objects` over lines, as editors and `json.dump(indent=...)` write
    it, and where each object starts."""
    texts = [json.dumps(o, indent=indent, ensure_ascii=ensure_ascii) for o in objects]
    starts, text = [], "[\n"
    for i, item in enumerate(texts):
        starts.append(len(text))
        text += item + (",\n" if i + 1 < len(texts) else "\n")
    return text + "]\n", starts


@pytest.mark.parametrize("name", JSON_LINES)
def test_a_pretty_json_array_is_read_item_by_item(name, tmp_path_factory):
    """A `.json` file that is one JSON array over many lines reads as the same objects
    a line would; one broken inside is refused in one message naming its line, or, if
    it still parses, costs the item it breaks only."""
    layout = LAYOUTS[name]
    objects = [json.loads(segment[0]) for segment in layout.segments]
    clean = clean_read(layout, tmp_path_factory.mktemp("clean"))
    folder = tmp_path_factory.mktemp("pretty")

    @family
    @given(indent=st.sampled_from([None, 0, 1, 2, 4]), ascii_only=st.booleans(),
           broken=st.one_of(st.none(), st.floats(0, 1)))
    def check(indent, ascii_only, broken):
        text, starts = pretty_array(objects, indent, ascii_only)
        touched = None
        if broken is not None:
            structure = [i for i, c in enumerate(text) if c in ',:"[]{}']
            at = structure[int(broken * (len(structure) - 1))]
            text = text[:at] + text[at + 1:]
            touched = sum(start <= at for start in starts) - 1
        path = folder / layout.file_name
        path.write_text(text, encoding="utf-8")
        try:
            got = layout.read(str(path))
        except DataError as e:
            assert broken is not None, e
            number = int(re.match(re.escape(str(path)) + r":(\d+): ", str(e)).group(1))
            assert 1 <= number <= text.count("\n") + 1
            return
        found = contents(got)
        for i, segment in enumerate(clean.by_segment):
            for content in segment if i != touched else ():
                assert found[repr(content)] > 0, (i, content)
                found[repr(content)] -= 1
        if broken is None:
            assert not +found
        assert {x for _, labels in got for x in labels} <= clean.labels or touched is not None

    check()


@pytest.mark.parametrize("name", HEADED)
def test_empty_spreadsheet_rows_are_blank_lines(name, tmp_path_factory):
    """Excel's empty rows (`,,`, `"",""`, `\\t\\t`) are left out as blank lines are:
    never counted as bad rows against --max_skipped_rows."""
    layout = LAYOUTS[name]
    lines, _ = layout.lines()
    clean = write(tmp_path_factory.mktemp("clean"), layout, lines)
    folder = tmp_path_factory.mktemp("empty")
    delimiter = b"\t" if b"\t" in layout.header[0] else b","
    width = len(layout.header[0].split(delimiter))

    @family
    @given(at=st.lists(st.integers(1, len(layout.segments)), min_size=1, max_size=3),
           commas=st.integers(1, width + 1), cell=st.sampled_from([b"", b" ", b'""']))
    def check(at, commas, cell):
        if cell == b'""' and delimiter == b"\t":
            cell = b""
        segments = list(layout.segments)
        for i in sorted(at, reverse=True):
            segments.insert(i, [delimiter.join([cell] * (commas + 1))])
        same_read(layout, clean, write(folder, layout, layout.lines(segments)[0]))

    check()


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_a_label_cell_that_starts_or_ends_like_a_list_is_a_list_or_skipped(
        kind, tmp_path_factory):
    """Multi-label cells of JSON lists, some cut (`positive"]`, `["joy", "ang`): a cut
    one is skipped as "label not a JSON list"; no label with a bracket or quote of the
    list is learned; the other rows keep their labels."""
    rows = goemotions_rows()
    lists = [labels.split(",") for _, labels, _ in rows]
    folder = tmp_path_factory.mktemp("lists")

    def cell_line(text, cell):
        if kind == "csv":
            return b"\n".join(csv_lines([text, cell])).decode()
        return json.dumps({"text": text, "labels": cell})

    @family
    @given(cuts=st.dictionaries(st.integers(0, len(rows) - 1),
                                st.tuples(st.booleans(), st.floats(0, 1)), min_size=1,
                                max_size=4))
    def check(cuts):
        lines = ["text,labels"] if kind == "csv" else []
        for i, ((text, _, _), labels) in enumerate(zip(rows, lists)):
            cell = json.dumps(labels)
            if i in cuts:
                from_end, at = cuts[i]
                size = 1 + int(at * (len(cell) - 2))
                cell = cell[:size] if from_end else cell[-size:]
            lines.append(cell_line(text, cell))
        path = table_file(folder, f"train.{kind}", lines)
        layout = dataclasses.replace(LAYOUTS["multi_label_csv"], read=read_multi_label)
        got, totals = counted(layout, path)
        assert totals["reasons"][NOT_LABEL_LIST].count == len(cuts)
        assert [labels for _, labels in got] == [
            tuple(dict.fromkeys(labels)) for i, labels in enumerate(lists) if i not in cuts]

    check()


def test_tab_separated_conll_keeps_the_spaces_of_its_tokens(tmp_path_factory):
    """WNUT-17's tab-separated lines with tokens that hold a space (`New York<TAB>O`):
    each token read whole, with its tag; none dropped."""
    sentences = LAYOUTS["conll"].segments
    folder = tmp_path_factory.mktemp("tabs")

    @family
    @given(joins=st.lists(st.tuples(st.integers(0, len(sentences) - 1), st.floats(0, 1)),
                          min_size=1, max_size=4))
    def check(joins):
        tokens = [[line.decode().split("\t") for line in s] for s in sentences]
        for i, at in joins:
            if len(tokens[i]) > 1:
                k = int(at * (len(tokens[i]) - 2))
                word, tag = tokens[i][k]
                tokens[i][k:k + 2] = [[f"{word} {tokens[i][k + 1][0]}", tag]]
        path = table_file(folder, "train.conll", [
            line for s in tokens for line in ["\t".join(t) for t in s] + [""]])
        assert read_conll(path) == [
            ((tuple(w for w, _ in s), tuple(t for _, t in s)), tuple(t for _, t in s))
            for s in tokens]

    check()


# A file of each kind, as the tools write it, and what must come out of it: the rows
# kept (text, label), and the message (a refusal, or a warning) that names the place.
def _kinds():
    rows = single_rows()
    plain = [(t, label) for t, label, _ in rows if '"' not in t][:3]
    quoted = [(t, label) for t, label, _ in rows if '"' in t][:2]
    csv_rows = [f"{i},{csv_lines([t])[0].decode()},{label}" for i, (t, label) in
                enumerate(plain)]
    utf16 = "text\tlabel\r\n" + "".join(f"{t}\t{label}\r\n" for t, label in plain)
    return [
        ("repeated header", "train.csv",
         ("id,text,label\n" + "\n".join(csv_rows[:2]) + "\nid,text,label\n" + csv_rows[2]
          + "\n").encode(), plain, r"train.csv:4: the header row again \(files joined\?\)"),
        ("a column named twice", "train.csv",
         ("id,text,label,text\n" + "".join(f"{r},x\n" for r in csv_rows)).encode(), None,
         r"train.csv:1: the header names the column 'text' twice \(columns 2 and 4\)"),
        ("labels differing in case", "train.csv",
         ("id,text,label\n" + "".join(f"{i},{csv_lines([t])[0].decode()},{label}\n" for i, (
             (t, _), label) in enumerate(zip(plain, ["Positive", " positive ", "positive"])))
          ).encode(), [(t, label) for (t, _), label in zip(plain, ["Positive", "positive",
                                                                 "positive"])],
         r"differ only in case or spaces.*'Positive' \(1 row\) / 'positive' \(2 rows\)"),
        ("a quoted TSV (pandas, Excel)", "train.tsv",
         ("text\tlabel\n" + "".join(f'"{t.replace(chr(34), 2 * chr(34))}"\t{label}\n'
                                    for t, label in quoted)
          + '"a cell over\ntwo lines"\tjoy\n').encode(),
         quoted + [("a cell over\ntwo lines", "joy")], None),
        ("Excel's Unicode text (UTF-16)", "train.txt",
         codecs.BOM_UTF16_LE + utf16.encode("utf-16-le"), plain, None),
        ("UTF-16 without a byte-order mark", "train.tsv", utf16.encode("utf-16-be"), plain,
         None),
        ("CR-only line ends", "train.csv",
         ("id,text,label\r" + "\r".join(csv_rows) + "\r").encode(), plain, None),
        ("a pretty-printed JSON array", "train.json",
         json.dumps([{"text": t, "label": label} for t, label in plain], indent=2).encode(),
         plain, None),
        ("a broken pretty-printed JSON array", "train.json",  # line 8: "label" "joy"
         json.dumps([{"text": t, "label": label} for t, label in plain], indent=2)
         .replace('"label":', '"label"').replace('"label"', '"label":', 1).encode(), None,
         r"train.json:8: not valid JSON \(Expecting ':' delimiter, column 13\); the file "
         r"starts with '\[' and is one JSON array of objects, read whole or not at all"),
        ("Excel's empty rows", "train.csv",
         ("id,text,label\n" + csv_rows[0] + "\n,,\n" + csv_rows[1] + '\n"","",""\n'
          + csv_rows[2] + "\n,,\n").encode(), plain, None),
        ("a label cell ending like a list", "train.csv",
         ("id,text,label\n" + "\n".join(csv_rows) + '\n9,one more,"positive""]"\n')
         .encode(), plain,
         r"label not a JSON list \(\S*train.csv:5: 'positive\"\]' ends like a JSON list "
         r"but is not one"),
    ]


KINDS = _kinds()


@pytest.mark.parametrize("kind", KINDS, ids=[k[0] for k in KINDS])
def test_each_kind_of_file_users_met(kind, tmp_path, caplog):
    _, name, raw, expected, message = kind
    (tmp_path / name).write_bytes(raw)
    path = str(tmp_path / name)
    with caplog.at_level("WARNING"):
        if expected is None:
            with pytest.raises(DataError) as refused:
                read_rows(path)
            assert re.search(message, str(refused.value)), str(refused.value)
            assert str(refused.value).startswith(path + ":")
            return
        got = read_rows(path)
    assert got == [(text, None, label) for text, label in expected]
    warned = "\n".join(r.getMessage() for r in caplog.records)
    assert (message is None and not warned) or re.search(message, warned), warned


def test_a_conll_file_of_tab_separated_columns_keeps_spaces_in_tokens(tmp_path):
    path = tmp_path / "train.conll"
    path.write_text("New York\tB-location\nis\tO\nbig\tO\n\n@ paul walk\tO\nhi\tO\n",
                    encoding="utf-8")
    assert read_conll(str(path)) == [
        ((("New York", "is", "big"), ("B-location", "O", "O")), ("B-location", "O", "O")),
        ((("@ paul walk", "hi"), ("O", "O")), ("O", "O"))]
    spaced = tmp_path / "spaced.conll"  # CoNLL-2003's space-separated columns as before
    spaced.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n", encoding="utf-8")
    assert read_conll(str(spaced))[0][0] == (("EU", "rejects"), ("B-ORG", "O"))
