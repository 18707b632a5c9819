"""What a run read (`albert_tf.data.report`): skips grouped by reason with their first
places, the skip limit as a fraction or a count, the labels kept checked against the
model's, what --max_seq_length cut of the texts, data_report.json."""

import json

import pytest

from albert_tf.data.errors import DataError
from albert_tf.data.report import (
    DataReport,
    SkipLimit,
    SkipLog,
    TooManySkipped,
    Truncation,
    case_variants,
    counting_truncation,
    truncation_counter,
)
from tests.helpers.scripts import FIXTURES, SPM


def test_the_limit_is_a_fraction_or_a_count():
    assert SkipLimit.parse(None).fraction == 0.01  # the default
    assert SkipLimit.parse("1%").fraction == SkipLimit.parse("0.01").fraction == 0.01
    assert SkipLimit.parse("25").count == 25 and SkipLimit.parse("0").count == 0
    assert SkipLimit.parse("0.5").allows(5, 10) and not SkipLimit.parse("0.5").allows(6, 10)
    assert SkipLimit.parse("2").allows(2, 10**6) and not SkipLimit.parse("2").allows(3, 10**6)
    assert not SkipLimit.parse("0").allows(1, 10**6) and SkipLimit.parse("0").allows(0, 1)
    for wrong in ("-1", "1.5", "150%", "many", "", "1e"):
        with pytest.raises(ValueError, match=f"--max_skipped_rows={wrong}: expected a "
                                             "fraction"):
            SkipLimit.parse(wrong)


def test_skips_are_grouped_by_reason_with_their_first_places(tmp_path):
    report = DataReport("10")
    with report.reading("train"):
        log = SkipLog("train row", "a.csv")
        for line in range(2, 10):
            log.skip(f"a.csv:{line}", "wrong number of fields", "3 fields, expected 2")
        log.skip("a.csv:12", "invalid UTF-8")
        for label in ("pos", "neg", "pos"):
            log.keep(label)
    outside = SkipLog("dev row", "b.csv")  # not read inside a report: logs itself
    assert log.collected and not outside.collected
    assert log.describe() == (
        "skipped 9 of 12 train row(s): 8 wrong number of fields (a.csv:2: 3 fields, "
        "expected 2; a.csv:3: 3 fields, expected 2; a.csv:4: 3 fields, expected 2; "
        "a.csv:5: 3 fields, expected 2; a.csv:6: 3 fields, expected 2; and 3 more), "
        "1 invalid UTF-8 (a.csv:12)")
    report.check()  # 9 of 12 rows: within 10 rows
    strict = DataReport("5")
    strict.splits = report.splits
    with pytest.raises(TooManySkipped, match=r"the train split has too many bad rows: "
                                             r"skipped 9 of 12 train row\(s\): 8 wrong.*"
                                             r"--max_skipped_rows=5 allows 5 row\(s\)"):
        strict.check()
    written = json.loads(open(report.write(str(tmp_path))).read())
    assert written["max_skipped_rows"] == "10"
    assert written["splits"]["train"]["rows_read"] == 12
    assert written["splits"]["train"]["labels"] == {"neg": 1, "pos": 2}
    assert written["splits"]["train"]["skipped"]["wrong number of fields"]["count"] == 8
    assert len(written["splits"]["train"]["skipped"]["wrong number of fields"]["first"]) == 5
    assert written["splits"]["train"]["files"][0]["path"] == "a.csv"
    assert not list(tmp_path.glob("*.tmp-*"))  # written under a temporary name, renamed


def test_the_labels_kept_are_the_models():
    report = DataReport()
    with report.reading("train"):
        log = SkipLog("train row", "a.csv")
        log.keep("joy")
        log.keep("anger")
    report.check_labels("train", ["anger", "joy", "fear"])  # fear: warned, no row
    with pytest.raises(DataError, match="the train split kept rows labelled joy, which "
                                        r"are not the model's labels \(anger, fear\)"):
        report.check_labels("train", ["anger", "fear"])


def test_skips_are_warnings_and_the_summary_counts_them(caplog):
    """The summary (printed at INFO) counts each split's skips by reason; `check` warns
    of them with their places (a skip is a warning), and of labels that differ only in
    case or spaces, naming them."""
    report = DataReport("10")
    with report.reading("train"):
        log = SkipLog("train row", "a.csv")
        log.skip("a.csv:4", "repeated header", "the header row again (files joined?)")
        for label in ("pos", "Pos", "neg"):
            log.keep(label)
    assert report.summary() == ("the data read:\n  train: 4 row(s) read, 3 kept, 1 skipped "
                                "(1 repeated header); labels Pos: 1, neg: 1, pos: 1")
    caplog.clear()
    with caplog.at_level("INFO"):
        report.check()
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "the train split: skipped 1 of 4 train row(s): 1 repeated header "
                    "(a.csv:4: the header row again (files joined?))"),
        ("WARNING", "the train split's rows have labels that differ only in case or spaces, "
                    "which a model learns as different classes: 'Pos' (1 row) / 'pos' "
                    "(1 row). They are kept apart as the files have them; where they are "
                    "one class, write them alike in the files")]


def test_labels_that_differ_only_in_case_or_spaces():
    assert case_variants(["Positive", "positive", "neg", "NEG ", "neutral", "a  b", "A b",
                          "B-PER", "b-per", "I-PER"]) == [
        ["A b", "a  b"], ["B-PER", "b-per"], ["NEG ", "neg"], ["Positive", "positive"]]
    assert case_variants(["joy", "anger", "B-LOC", "I-LOC"]) == []


# --------------------------------------------------------------- the texts cut
@pytest.fixture(scope="module")
def tokenizer():
    from albert_tf.tokenization import FullTokenizer

    return FullTokenizer(spm_model_file=SPM, do_lower_case=True)


def test_the_sentence_records_count_what_max_seq_length_cuts(tokenizer):
    """Each example packed while records are written counts: cut or not, the pieces
    the packing rules drop (a single text keeps max_seq_length - 2, a pair is cut
    longest-first to max_seq_length - 3), the positions the longest takes whole."""
    from albert_tf.data.sentence_records import (
        InputExample,
        convert_single_example,
        pack_pair,
    )
    from albert_tf.tokenization import FullTokenizer

    task = _sentence_task()
    assert truncation_counter() is None
    with counting_truncation() as counted:
        assert truncation_counter() is counted
        for text_a, text_b in (("good " * 20, None),     # 20 pieces: 6 dropped, 22 whole
                               ("good " * 14, None),     # 14 + [CLS] [SEP]: whole
                               ("good " * 10, "bad " * 10),  # 7 dropped (to 7 + 6), 23
                               ("a good film", "")):     # an empty B is no B
            convert_single_example(InputExample("x", text_a, text_b, "pos"), task, 16,
                                   tokenizer)
    assert counted.to_json() == {"max_seq_length": 16, "examples": 4, "examples_cut": 2,
                                 "pieces_dropped": 13, "longest": 23}
    assert counted.share == 0.5
    pack_pair([5] * 40, None, 16, tokenizer)  # no records being written: not counted
    assert counted.examples == 4 and truncation_counter() is None

    # Chinese WordPiece: a piece a character, counted the same way
    chinese = FullTokenizer(vocab_file=str(FIXTURES / "ner" / "vocab_chinese.txt"),
                            do_lower_case=True)
    with counting_truncation() as counted:
        for text in ("今天天气很好我们去公园散步吧" * 2, "北京欢迎你"):  # 28 and 5 pieces
            convert_single_example(InputExample("z", text, None, "pos"), task, 16,
                                   chinese)
    assert counted.to_json() == {"max_seq_length": 16, "examples": 2, "examples_cut": 1,
                                 "pieces_dropped": 14, "longest": 30}


def _sentence_task():
    from albert_tf.data.sentence_records import SentenceTask

    return SentenceTask("reviews", ("neg", "pos"), "eval_accuracy", False, True)


def test_the_choice_records_count_an_example_once_however_many_choices(tokenizer):
    """A question is cut when any of its choices' article is (an option longer than
    --max_qa_length keeps its last pieces by a limit of its own: not counted); its
    pieces dropped are the most any choice drops (the article each choice reads is one
    text), its length its longest choice's whole (the option at most max_qa_length)."""
    from albert_tf.data.choice_records import ChoiceExample, convert_single_example

    with counting_truncation() as counted:
        # budget 16 - 3 = 13: "good good" keeps the article's first 11 of 20 (9 dropped);
        # 10 pieces keep their last 8 and the article 5 (15 dropped): 20 + 8 + 3 whole
        convert_single_example(ChoiceExample("a", "good " * 20, ["good good", "good " * 10],
                                             0), 16, 8, tokenizer)
        convert_single_example(ChoiceExample("b", "a good film", ["good", "bad"], 0), 16, 8,
                               tokenizer)
        # options of 10 cut to 8 and an article that fits beside them: not cut
        convert_single_example(ChoiceExample("c", "good " * 5, ["good " * 10] * 2, 0), 16,
                               8, tokenizer)
    assert counted.to_json() == {"max_seq_length": 16, "examples": 3, "examples_cut": 1,
                                 "pieces_dropped": 15, "longest": 31}


LONG_TEXT_WARNING = (
    "the train split: 6 of 40 example(s) (15.0%) are longer than --max_seq_length=16 and "
    "are cut, 96 piece(s) dropped in all (the longest takes 32 positions whole); the model "
    "never reads what is cut, in training, evaluation, prediction or serving. To read them "
    "whole, give --long_text=windows (classification, regression, multi-label and "
    "multiple choice but RACE: each text, or context, read in overlapping windows, its "
    "answers pooled) or raise --max_seq_length (up to the model's "
    "max_position_embeddings, 512 in the released models).")


def test_a_split_cut_by_more_than_a_few_percent_is_warned_of(caplog):
    report = DataReport()
    for split in ("train", "dev", "test"):
        with report.reading(split):
            log = SkipLog(f"{split} row", f"{split}.csv")
            log.keep("pos")
    report.truncated = {"train": Truncation(16, 40, 6, 96, 32),
                        "dev": Truncation(16, 40, 2, 10, 20),  # 5%: no more than a few
                        "test": Truncation(16, 3, 0, 0, 12)}
    caplog.clear()
    with caplog.at_level("INFO"):
        report.check_truncation()
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        LONG_TEXT_WARNING]
    assert report.truncation_summary() == (
        "the texts cut by --max_seq_length=16:\n"
        "  train: 6 of 40 example(s) cut (15.0%), 96 piece(s) dropped; the longest takes "
        "32 positions whole\n"
        "  dev: 2 of 40 example(s) cut (5.0%), 10 piece(s) dropped; the longest takes 20 "
        "positions whole\n"
        "  test: 0 of 3 example(s) cut; the longest takes 12 positions whole")
    assert report.summary().endswith(report.truncation_summary())
    written = report.to_json()["splits"]
    assert written["train"]["truncated"] == {"max_seq_length": 16, "examples": 40,
                                             "examples_cut": 6, "pieces_dropped": 96,
                                             "longest": 32}
    assert written["test"]["truncated"]["examples_cut"] == 0
    assert "truncated" not in DataReport().to_json()["splits"].get("train", {})


def _write_reviews(path, count, long_rows, words):
    """A CSV of `count` short reviews (3 pieces each), those at `long_rows` `words`
    pieces long instead."""
    rows = ["text,label"]
    for i in range(count):
        label = "pos" if i % 2 else "neg"
        text = "good " * words if i in long_rows else f"a {'good' if i % 2 else 'bad'} film"
        rows.append(f"{text.strip()},{label}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_run_reports_the_texts_cut_and_a_cached_rerun_does_too(tmp_path, caplog):
    """run_classifier.py's read and convert stages on a CSV split of 40 rows (five
    batches of 8), six of them 30 pieces long at --max_seq_length=16: data_report.json
    counts them, the run warns; dev cuts one of 30 (3.3%), reported, not warned of. A
    second run on the cached records (another output directory) reports the same."""
    from albert_tf.apps import driver, session
    from tests.helpers.tiny import write_tiny_config

    options = {"task_name": "classification", "text_a_field": "text", "label_field": "label",
               "train_file": str(_write_reviews(tmp_path / "train.csv", 40,
                                                {3, 9, 15, 21, 27, 33}, 30)),
               "dev_file": str(_write_reviews(tmp_path / "dev.csv", 30, {7}, 20)),
               "spm_model_file": SPM, "albert_config_file": str(write_tiny_config(tmp_path)),
               "max_seq_length": 16, "train_batch_size": 8, "eval_batch_size": 8,
               "do_train": True, "do_eval": True, "cached_dir": str(tmp_path / "cache")}
    expected = {"train": {"max_seq_length": 16, "examples": 40, "examples_cut": 6,
                          "pieces_dropped": 6 * (30 - 14), "longest": 32},
                "dev": {"max_seq_length": 16, "examples": 30, "examples_cut": 1,
                        "pieces_dropped": 20 - 14, "longest": 22}}
    for run, reused in (("first", False), ("again", True)):
        caplog.clear()
        with caplog.at_level("WARNING"):
            state = driver.read("classification", {**options,
                                                   "output_dir": str(tmp_path / run)})
            state.context = session.setup(state.options)
            driver.convert(state)
        assert {split: r.reused for split, r in state.records.items()} == {
            "train": reused, "dev": reused}
        report = json.loads((tmp_path / run / "data_report.json").read_text())
        assert {split: report["splits"][split]["truncated"] for split in expected} == \
            expected, run
        assert [r.getMessage() for r in caplog.records
                if "--max_seq_length" in r.getMessage()] == [LONG_TEXT_WARNING], run
    info = json.loads((tmp_path / "cache" / "classification_train.tf_record.meta.json"
                       ).read_text())
    assert info["truncated"] == expected["train"] and "truncated" not in info["settings"]
