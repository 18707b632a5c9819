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

import collections
import csv
import dataclasses
import io
import json
import os
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from albert_tf.data import glue, multiple_choice, ner, race, squad, tabular
from albert_tf.data.errors import DataError
from albert_tf.data.pretraining.corpus import read_chunks
from albert_tf.data.report import SkipLog
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
                           "label_field": "labels", "header": True, "label_separator": ","})
    task.labels = ["joy", "anger"]
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
    outside.labels = task.labels
    caplog.clear()
    with caplog.at_level("WARNING"):
        outside.read("train", [str(many)])
    assert len([r for r in caplog.records if "skipped" in r.getMessage()]) == 1
