"""Long texts read whole (`--long_text=windows`, issue 68): the windows the sentence
records write (where they lie, their stride, word boundaries, the pair rule, Chinese
WordPiece), the labels they carry, the answers pooled over them at evaluation and
prediction (one row per text, equal to the mean of the window logits computed here
from the trained model; the max for multi-label), what data_report.json says of them,
the records' cache keyed by the mode, the exports (the SavedModel's serve_text reads
the same windows in its graph and answers as the run's predictions; the LiteRT file
cuts and says so), bad input refused in one line, and multiple choice's windows over
the context (each beside all its question's choices, pooled per question)."""

import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import names, packing
from albert_tf.data import records, sentence_records
from albert_tf.data.sentence_records import InputExample, LongText
from tests.helpers.scripts import FIXTURES, SPM, one_line_error, run_script
from tests.helpers.scripts import read_results as results
from tests.helpers.tiny import write_tiny_config
from tests.helpers.windows import choice_windows, window_outputs


@pytest.fixture(scope="module")
def tokenizer():
    from albert_tf.tokenization import FullTokenizer

    return FullTokenizer(spm_model_file=SPM, do_lower_case=True)


@pytest.fixture(scope="module")
def chinese():
    from albert_tf.tokenization import FullTokenizer

    return FullTokenizer(vocab_file=str(FIXTURES / "ner" / "vocab_chinese.txt"),
                         do_lower_case=True)


def read_records(path, max_seq_length):
    """Every record of a classification's windows file, parsed."""
    task = sentence_records.SentenceTask("t", ("neg", "pos"), "eval_accuracy", False,
                                         False)
    spec = sentence_records.record_spec(task, max_seq_length, windows=True)
    return [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(str(path))]


def pieces(tokenizer, record):
    """The pieces of a record's real positions."""
    ids = record[names.INPUT_IDS].numpy()[:int(record[names.INPUT_MASK].numpy().sum())]
    return tokenizer.convert_ids_to_tokens(ids)


# ------------------------------------------------------------------ which pieces start words
def test_word_starts_of_sentencepiece_and_wordpiece(tokenizer, chinese):
    table = tokenizer.word_start_table()
    words = tokenizer.tokenize(tokenizer.preprocess("Unbelievably wonderfully good"))
    assert words == ["▁un", "be", "liev", "ably", "▁wonderful", "ly", "▁good"]
    assert table[tokenizer.convert_tokens_to_ids(words)].tolist() == [
        True, False, False, False, True, False, True]
    assert table[[tokenizer.special_id("[CLS]"), tokenizer.vocab["<unk>"]]].all()
    zh = chinese.tokenize("今天很好playing北京")
    assert zh == ["今", "天", "很", "好", "play", "##ing", "北", "京"]
    assert chinese.word_start_table()[chinese.convert_tokens_to_ids(zh)].tolist() == [
        True, True, True, True, True, False, True, True]


# ---------------------------------------------------------------- the windows written
# "unbelievably good" is 5 pieces, ▁un be liev ably ▁good: word starts at 0 and 4 of each.
LONG = "unbelievably good " * 5  # 25 pieces


def test_a_long_text_is_written_in_windows_with_its_label_and_index(tmp_path, tokenizer):
    """--max_seq_length=16: windows of 14 pieces. The default stride is 7 and a cut
    moves back to a word start by at most 3 (min(7 // 2, (14 - 7) // 2)): starts 0,
    7 -> 5, 14; the first window ends at 14 (a word start), the second at 19; the last
    reaches the end. --window_stride=10 (back 2): starts 0, 10, 20."""
    task = sentence_records.SentenceTask("t", ("neg", "pos"), "eval_accuracy", False, False)
    examples = [InputExample("a", "a good film", None, "pos"),
                InputExample("b", LONG, None, "neg"),
                InputExample("c", "a bad film", None, "neg")]
    path = tmp_path / "windows.tf_record"
    count = sentence_records.write_examples(examples, task, 16, tokenizer, path,
                                            LongText("windows"))
    written = read_records(path, 16)
    assert count == len(written) == 5
    assert [int(r[names.EXAMPLE_INDEX]) for r in written] == [0, 1, 1, 1, 2]
    assert [int(r[names.LABEL_IDS]) for r in written] == [1, 0, 0, 0, 0]
    long_pieces = tokenizer.tokenize(tokenizer.preprocess(LONG))
    for record, (start, end) in zip(written[1:4], ((0, 14), (5, 19), (14, 25))):
        assert pieces(tokenizer, record) == ["[CLS]", *long_pieces[start:end], "[SEP]"]
    assert pieces(tokenizer, written[2])[1] == "▁un"  # 7 moved back to a word's start
    # a text that fits is the truncating record itself, with its index
    truncated = sentence_records.convert_single_example(examples[0], task, 16, tokenizer)
    assert written[0][names.INPUT_IDS].numpy().tolist() == truncated.input_ids

    strided = tmp_path / "strided.tf_record"
    sentence_records.write_examples(examples[1:2], task, 16, tokenizer, strided,
                                    LongText("windows", stride=10))
    assert [pieces(tokenizer, r)[1:-1] for r in read_records(strided, 16)] == [
        long_pieces[0:14], long_pieces[10:24], long_pieces[20:25]]
    # truncate: the original's records, no index
    plain = tmp_path / "plain.tf_record"
    assert sentence_records.write_examples(examples, task, 16, tokenizer, plain) == 3
    first = tf.train.Example.FromString(next(tf.data.TFRecordDataset(str(plain))
                                             .as_numpy_iterator()))
    assert names.EXAMPLE_INDEX not in first.features.feature


def test_inverse_window_weights_are_recorded_only_when_asked(tmp_path, tokenizer):
    """--window_weight=inverse: each window's record carries 1 / its text's windows (a
    text that fits: 1), and the cache keys it; `one` records and keys no weight."""
    task = sentence_records.SentenceTask("t", ("neg", "pos"), "eval_accuracy", False, False)
    examples = [InputExample("a", "a good film", None, "pos"),
                InputExample("b", LONG, None, "neg")]
    weighted = tmp_path / "weighted.tf_record"
    long_text = LongText("windows", weight="inverse")
    assert sentence_records.write_examples(examples, task, 16, tokenizer, weighted,
                                           long_text) == 4
    spec = sentence_records.record_spec(task, 16, windows=True, weighted=True)
    written = [tf.io.parse_single_example(r, spec)
               for r in tf.data.TFRecordDataset(str(weighted))]
    assert [float(r[names.WINDOW_WEIGHT]) for r in written] == pytest.approx(
        [1, 1 / 3, 1 / 3, 1 / 3])
    assert long_text.cache_settings()["window_weight"] == "inverse"
    assert "window_weight" not in long_text.export_options()
    plain = tmp_path / "one.tf_record"
    sentence_records.write_examples(examples, task, 16, tokenizer, plain, LongText("windows"))
    for record in tf.data.TFRecordDataset(str(plain)).as_numpy_iterator():
        assert names.WINDOW_WEIGHT not in tf.train.Example.FromString(record).features.feature
    assert LongText("windows").cache_settings() == {"long_text": "windows",
                                                    "window_stride": None}
    with pytest.raises(ValueError, match="needs long_text=windows"):
        LongText("truncate", weight="inverse")


def test_a_cap_keeps_evenly_spaced_windows_the_first_and_the_last(tmp_path, tokenizer):
    """--max_windows_per_text=N: a text of more than N windows keeps N of them, evenly
    spaced, the first and the last among them (1: the first), in order; fewer are all
    kept. The records are exactly those windows' (inverse weights: 1 / the windows
    kept), a cap no text reaches writes the uncapped bytes, the cache keys the cap and
    the export ignores it, and only the training split is capped."""
    assert packing.capped_windows(range(7), 3) == [0, 3, 6]
    assert packing.capped_windows(range(6), 3) == [0, 3, 5]  # 2.5 rounds up
    assert packing.capped_windows(range(4), 2) == [0, 3]
    assert packing.capped_windows(range(5), 1) == [0]
    assert packing.capped_windows(range(3), 3) == packing.capped_windows(range(3), 0) == [
        0, 1, 2]
    for count in range(1, 12):
        for cap in range(1, 6):
            kept = packing.capped_windows(range(count), cap)
            assert len(kept) == min(count, cap) and kept == sorted(set(kept))
            assert kept[0] == 0 and (cap == 1 or kept[-1] == count - 1)
    with pytest.raises(ValueError, match="0 \\(no cap\\) or more"):
        packing.capped_windows(range(3), -1)

    task = sentence_records.SentenceTask("t", ("neg", "pos"), "eval_accuracy", False, False)
    examples = [InputExample("a", "a good film", None, "pos"),
                InputExample("b", LONG, None, "neg"),
                InputExample("c", LONG + " then the plot", None, "pos")]

    def written(long_text, name):
        path = tmp_path / f"{name}.tf_record"
        sentence_records.write_examples(examples, task, 16, tokenizer, path, long_text)
        return [tf.train.Example.FromString(r) for r in
                tf.data.TFRecordDataset(str(path)).as_numpy_iterator()]

    def index(record):
        return record.features.feature[names.EXAMPLE_INDEX].int64_list.value[0]

    every = written(LongText("windows", stride=3), "every")
    by_text = [[r for r in every if index(r) == i] for i in range(3)]
    assert [len(windows) for windows in by_text] == [1, 5, 6]
    capped = written(LongText("windows", stride=3, max_windows=3), "capped")
    assert capped == [r for windows in by_text for r in packing.capped_windows(windows, 3)]
    assert [index(r) for r in capped] == [0, 1, 1, 1, 2, 2, 2]
    weighted = written(LongText("windows", 3, "inverse", 2), "weighted")
    assert [r.features.feature[names.WINDOW_WEIGHT].float_list.value[0]
            for r in weighted] == pytest.approx([1, 1 / 2, 1 / 2, 1 / 2, 1 / 2])
    assert [list(r.features.feature[names.INPUT_IDS].int64_list.value) for r in
            weighted] == [list(r.features.feature[names.INPUT_IDS].int64_list.value) for r in
                          [by_text[0][0], by_text[1][0], by_text[1][-1], by_text[2][0],
                           by_text[2][-1]]]
    # a cap no text reaches: the very records of no cap
    written(LongText("windows", stride=3, max_windows=6), "loose")
    assert (tmp_path / "loose.tf_record").read_bytes() == (
        tmp_path / "every.tf_record").read_bytes()

    long_text = LongText("windows", max_windows=2)
    assert long_text.cache_settings() == {"long_text": "windows", "window_stride": None,
                                          "max_windows_per_text": 2}
    assert long_text.export_options() == {"long_text": "windows", "window_stride": None}
    assert long_text.at("train") is long_text
    assert long_text.at("dev") == long_text.at("test") == LongText("windows")
    with pytest.raises(ValueError, match="needs long_text=windows"):
        LongText("truncate", max_windows=2)
    with pytest.raises(ValueError, match="0 \\(no cap\\) or more"):
        LongText("windows", max_windows=-1)

    # multiple choice: a question's windows over its context, capped alike
    row = {"id": "q", "context": "the car was red " + LONG * 2, "question": "which colour?",
           "choices": ["red", "blue"], "label": 0}
    (all_windows,) = choice_windows(tokenizer, [row], 32, 8, stride=4)
    (kept,) = choice_windows(tokenizer, [row], 32, 8, stride=4, max_windows=3)
    assert len(all_windows) > 3
    assert [f.input_ids for f in kept] == [
        f.input_ids for f in packing.capped_windows(all_windows, 3)]


def test_the_inverse_weighted_loss_is_the_weighted_mean_of_the_windows():
    """A batch of three windows (two of one text, one of another), weighted 1/2, 1/2
    and 1: the task's loss is sum(w * nll) / sum(w), and `one` the plain mean."""
    from albert_tf.tasks.classification import ClassificationTask

    logits = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]], np.float32)
    labels = np.array([0, 0, 1])
    nll = -np.log(np.exp(logits[np.arange(3), labels]) / np.exp(logits).sum(-1))
    weights = np.array([0.5, 0.5, 1.0], np.float32)
    outputs = {names.LOGITS: tf.constant(logits)}
    features = {names.LABEL_IDS: tf.constant(labels), names.WINDOW_WEIGHT:
                tf.constant(weights), names.INPUT_IDS: tf.zeros([3, 4], tf.int64)}
    options = {"task_name": "classification", "text_a_field": "a", "output_dir": "x",
               "do_train": True, "spm_model_file": SPM, "max_seq_length": 16,
               "long_text": "windows"}
    losses = {}
    for weight in ("one", "inverse"):
        task = ClassificationTask(ClassificationTask.Options.build(
            {**options, "window_weight": weight}))
        losses[weight] = float(task.objective().loss(outputs, features))
    assert losses["one"] == pytest.approx(nll.mean(), rel=1e-6)
    assert losses["inverse"] == pytest.approx((weights * nll).sum() / weights.sum(),
                                              rel=1e-6)
    # split in two micro-batches, the global denominator gives the same loss
    objective = task.objective()
    halves = [{k: v[:2] for k, v in features.items()}, {k: v[2:] for k, v in features.items()}]
    total = objective.global_denominators([objective.denominators(h) for h in halves])
    summed = sum(float(objective.numerators({names.LOGITS: tf.constant(logits[sl])}, h)
                       ["loss"]) for sl, h in ((slice(0, 2), halves[0]),
                                               (slice(2, 3), halves[1])))
    assert summed / float(total["loss"]) == pytest.approx(losses["inverse"], rel=1e-6)


def test_a_pair_slides_over_its_longer_text_beside_the_other(tokenizer):
    """--max_seq_length=16 (13 pieces for the pair): a question of 2 pieces is kept
    whole and the 25-piece passage read in windows of 11; a first text longer than
    half (ceil 13 / 2 = 7) is cut to 7, as the truncation cuts it."""
    long_ids = tokenizer.encode(LONG)
    question = tokenizer.encode("why good")  # ▁why ▁good
    windows = sentence_records.pack_windows(question, long_ids, 16, tokenizer)
    cls, sep = tokenizer.special_id("[CLS]"), tokenizer.special_id("[SEP]")
    # window 11, stride 5, back min(2, 3) = 2: starts 0, 5, 10 -> 10, 15 -> 15 (+11 >= 25)
    spans = [(0, 10), (5, 15), (10, 20), (15, 25)]
    assert [w[names.INPUT_IDS][:int(w[names.INPUT_MASK].sum())].tolist() for w in windows] \
        == [[cls, *question, sep, *long_ids[a:b], sep] for a, b in spans]
    assert all(w[names.SEGMENT_IDS][:4].tolist() == [0, 0, 0, 0] for w in windows)
    # the first text the longer: windows over it, the second kept (3 <= 6) whole
    windows = sentence_records.pack_windows(long_ids, question, 16, tokenizer)
    assert all(w[names.INPUT_IDS][int(w[names.INPUT_MASK].sum()) - 3:
                                  int(w[names.INPUT_MASK].sum())].tolist()
               == [*question, sep] for w in windows)
    # both long: the passage B in windows of 6 beside A's first 7
    windows = sentence_records.pack_windows(long_ids, long_ids, 16, tokenizer)
    assert all(w[names.INPUT_IDS][1:9].tolist() == [*long_ids[:7], sep] for w in windows)
    assert len(windows) == len(packing.window_spans(
        tokenizer.word_start_table()[long_ids], 6, 3))


def test_chinese_windows_cut_between_characters_never_inside_a_wordpiece(chinese):
    """Each Chinese character is a word; "playing" is play ##ing. --max_seq_length=7
    (windows of 5), --window_stride=3 (back 1): the second window would end inside
    "playing" at 8 and moves back to its start, 7."""
    task = sentence_records.SentenceTask("zh", ("neg", "pos"), "eval_accuracy", False,
                                         False)
    text = "今天天气很好吗playing北京"
    assert chinese.tokenize(text)[6:9] == ["吗", "play", "##ing"]
    features = sentence_records.convert_example_windows(
        InputExample("z", text, None, "pos"), 4, task, 7, chinese, stride=3)
    assert [chinese.convert_ids_to_tokens(f.input_ids[1:sum(f.input_mask) - 1])
            for f in features] == [["今", "天", "天", "气", "很"], ["气", "很", "好", "吗"],
                                   ["吗", "play", "##ing", "北", "京"]]
    assert {(f.example_index, f.label_id) for f in features} == {(4, 1)}


def test_the_report_counts_windows_and_what_is_still_cut(tokenizer):
    from albert_tf.data.report import Truncation, counting_truncation, long_text_warning

    with counting_truncation() as counted:
        sentence_records.pack_windows(tokenizer.encode(LONG), None, 16, tokenizer)  # 3
        sentence_records.pack_windows(tokenizer.encode("a good film"), None, 16, tokenizer)
        # a pair whose first text (25) passes half (7): 18 of it cut
        sentence_records.pack_windows(tokenizer.encode(LONG), tokenizer.encode(LONG), 16,
                                      tokenizer)
    assert counted.to_json() == {"max_seq_length": 16, "examples": 3, "examples_cut": 1,
                                 "pieces_dropped": 18, "longest": 53, "windows": 3 + 1 + 8,
                                 "examples_in_windows": 2}
    assert counted.describe() == (
        "1 of 3 example(s) cut (33.3%), 18 piece(s) dropped; read in 12 window(s), 2 "
        "example(s) in more than one; the longest takes 53 positions whole")
    assert "raise --max_seq_length to read both whole" in long_text_warning("x", counted)
    assert "give --long_text=windows" in long_text_warning("x", Truncation(16, 3, 1, 5, 20))
    assert Truncation.from_json(counted.to_json()) == counted


# ------------------------------------------------------------------ pooling the answers
def test_answers_are_pooled_per_text_mean_of_logits_or_max():
    from albert_tf.tasks.classification import ClassificationTask
    from albert_tf.tasks.multi_label import MultiLabelTask

    outputs = {names.LOGITS: np.array([[0., 0.], [4., 0.], [1., 3.], [-2., 2.]], np.float32),
               names.LABEL_IDS: np.array([1, 1, 0, 0]),
               names.EXAMPLE_INDEX: np.array([0, 0, 1, 1])}
    options = {"task_name": "classification", "text_a_field": "t", "output_dir": "x",
               "do_train": True, "long_text": "windows"}
    pooled = ClassificationTask(options).data.example_outputs(outputs)
    np.testing.assert_allclose(pooled[names.LOGITS], [[2, 0], [-0.5, 2.5]])
    # the softmax of the mean logits (0.881), not the mean of the softmaxes (0.741)
    np.testing.assert_allclose(pooled[names.PROBABILITIES][0],
                               [np.exp(2) / (1 + np.exp(2)), 1 / (1 + np.exp(2))], rtol=1e-6)
    assert pooled[names.PREDICTIONS].tolist() == [0, 1]
    assert pooled[names.LABEL_IDS].tolist() == [1, 0]
    regression = ClassificationTask({**options, "task_name": "regression"})
    scores = regression.data.example_outputs({
        names.PREDICTIONS: np.array([1., 2., 4.], np.float32),
        names.LABEL_IDS: np.array([3., 3., 1.]), names.EXAMPLE_INDEX: np.array([0, 0, 1])})
    assert scores[names.PREDICTIONS].tolist() == [1.5, 4.0]
    multi = MultiLabelTask({**options, "task_name": "multi_label"})
    probabilities = multi.data.example_outputs({
        names.PROBABILITIES: np.array([[.1, .9], [.7, .2], [.3, .3]], np.float32),
        names.LABEL_IDS: np.array([[1, 1], [1, 1], [0, 1]]),
        names.EXAMPLE_INDEX: np.array([0, 0, 1])})
    np.testing.assert_allclose(probabilities[names.PROBABILITIES], [[.7, .9], [.3, .3]])
    # truncate: as they are
    assert ClassificationTask({**options, "long_text": "truncate"}).data.example_outputs(
        outputs) is outputs
    with pytest.raises(ValueError, match="out of their examples' order"):
        sentence_records.pool_windows({**outputs, names.EXAMPLE_INDEX: np.array([0, 1, 0, 1])},
                                      {names.LOGITS: "mean"})


# ---------------------------------------------------------------- end to end, a CSV task
# Words of one to four pieces that say nothing of a review's label.
FILLER = ["unbelievably", "extraordinarily", "wonderfully", "the", "plot", "actors",
          "story", "screenplay", "music", "long", "and", "then"]


def write_reviews(path, count, long_rows, seed):
    """A CSV of `count` reviews: short ones, and at `long_rows` texts of 20 to 50
    pieces (several windows at --max_seq_length=16) whose label word comes first;
    returns [(text, label)]."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        label = "pos" if rng.random() < 0.5 else "neg"
        word = "good" if label == "pos" else "bad"
        if i in long_rows:
            filler = rng.choice(FILLER, int(rng.integers(10, 22)))
            text = f"the film was {word} " + " ".join(filler)
        else:
            text = f"a {word} film"
        rows.append((text.strip(), label))
    path.write_text("text,label\n" + "".join(f"{t},{x}\n" for t, x in rows))
    return rows


def window_logits(model, tokenizer, texts, max_seq_length):
    """The model's logits on each window of each text, by text."""
    by_text = []
    for text in texts:
        windows = sentence_records.pack_windows(tokenizer.encode(text), None,
                                                max_seq_length, tokenizer)
        inputs = names.to_model_inputs({k: np.stack([w[k] for w in windows])
                                        for k in names.RECORD_SEQUENCES})
        by_text.append(model(inputs, training=False)[names.LOGITS].numpy())
    return by_text


@pytest.fixture(scope="module")
def classified(tmp_path_factory):
    """run_classifier.py --task_name=classification --long_text=windows: 40 training
    rows (five batches of 8) with 8 long ones, 20 dev rows (6 long), 12 test rows (5
    long), trained, evaluated, predicted."""
    root = tmp_path_factory.mktemp("long_reviews")
    splits = {"train": write_reviews(root / "train.csv", 40, set(range(3, 40, 5)), 0),
              "dev": write_reviews(root / "dev.csv", 20, {1, 4, 8, 11, 15, 19}, 1),
              "test": write_reviews(root / "test.csv", 12, {0, 3, 4, 7, 11}, 2)}
    out = root / "out"
    ran = run_script(
        "run_classifier.py", "--task_name=classification", f"--data_dir={root}",
        "--text_a_field=text", "--label_field=label", "--long_text=windows",
        "--do_train", "--do_eval", "--do_predict", f"--spm_model_file={SPM}",
        f"--albert_config_file={write_tiny_config(root)}", f"--output_dir={out}",
        "--max_seq_length=16", "--train_batch_size=8", "--eval_batch_size=8",
        "--predict_batch_size=8", "--train_step=10", "--save_checkpoints_steps=10",
        "--iterations_per_loop=10", "--learning_rate=1e-2", "--dropout_prob=0",
        f"--export_dir={out / 'export'}", f"--export_tflite={out / 'model.tflite'}")
    return root, out, splits, ran.stderr


def test_the_run_trains_on_windows_and_reports_them(classified, tokenizer):
    root, out, splits, _ = classified
    records_file = out / "classification_train.tf_record"
    written = read_records(records_file, 16)
    expected = [len(sentence_records.pack_windows(tokenizer.encode(text), None, 16,
                                                  tokenizer)) for text, _ in splits["train"]]
    assert sum(n > 1 for n in expected) == 8 and len(written) == sum(expected)
    assert [int(r[names.EXAMPLE_INDEX]) for r in written] == [
        i for i, n in enumerate(expected) for _ in range(n)]
    assert [int(r[names.LABEL_IDS]) for r in written] == [
        ["neg", "pos"].index(label) for (_, label), n in zip(splits["train"], expected)
        for _ in range(n)]
    report = json.loads((out / "data_report.json").read_text())["splits"]
    assert report["train"]["truncated"] == {
        "max_seq_length": 16, "examples": 40, "examples_cut": 0, "pieces_dropped": 0,
        "longest": max(len(tokenizer.encode(t)) + 2 for t, _ in splits["train"]),
        "windows": len(written), "examples_in_windows": 8}
    settings = json.loads((out / "classification_train.tf_record.meta.json").read_text())
    assert settings["settings"]["long_text"] == "windows"
    assert settings["num_examples"] == len(written)


def test_predictions_and_metrics_are_the_texts_pooled_windows(classified, tokenizer):
    """One row per text in test_results.tsv and the predictions file, each the softmax
    of the mean of its windows' logits as the trained model gives them here; the dev
    accuracy is that of the pooled answers."""
    from albert_tf.checkpoints import load_tf1_checkpoint
    from albert_tf.config import AlbertConfig
    from albert_tf.tasks.classification import AlbertClassifier

    root, out, splits, _ = classified
    model = AlbertClassifier(AlbertConfig.from_json_file(out / "albert_config.json"), 2)
    load_tf1_checkpoint(model, str(out / "model.ckpt-best"))
    test_logits = window_logits(model, tokenizer, [t for t, _ in splits["test"]], 16)
    mean = np.array([logits.mean(0) for logits in test_logits])
    expected = np.exp(mean) / np.exp(mean).sum(-1, keepdims=True)
    # (the windows of a long text answer differently: the first alone would not do)
    spread = max(np.abs(logits - logits[0]).max() for logits in test_logits)
    assert spread > 1e-4, spread

    predicted = [json.loads(line) for line in
                 (out / "classification_predictions.jsonl").read_text().splitlines()]
    assert [row["id"] for row in predicted] == [f"test-{i}" for i in range(12)]
    np.testing.assert_allclose([row["probabilities"] for row in predicted], expected,
                               atol=2e-6)
    assert [row["prediction"] for row in predicted] == [
        ["neg", "pos"][i] for i in mean.argmax(-1)]
    tsv = np.loadtxt(out / "test_results.tsv", ndmin=2)
    assert tsv.shape == (12, 2)
    np.testing.assert_allclose(tsv, expected, atol=2e-6)

    dev_logits = window_logits(model, tokenizer, [t for t, _ in splits["dev"]], 16)
    guessed = [["neg", "pos"][int(logits.mean(0).argmax())] for logits in dev_logits]
    accuracy = np.mean([g == label for g, (_, label) in zip(guessed, splits["dev"])])
    assert results(out / "eval_results.txt")["eval_accuracy"] == pytest.approx(accuracy)


# ---------------------------------------------------------------------- the exports
def serve_text(version_dir, **texts) -> dict:
    """The outputs of an export's `serve_text` on lists of raw texts, as NumPy."""
    import tensorflow_text  # noqa: F401 (registers the tokenizer's ops)

    serve = tf.saved_model.load(str(version_dir)).signatures["serve_text"]
    return {k: v.numpy() for k, v in serve(**{k: tf.constant(v) for k, v in
                                               texts.items()}).items()}


def test_the_runs_savedmodel_answers_long_texts_as_its_predictions(classified, tokenizer):
    """The run's export reads each raw text in the windows of its records, in the
    graph, and answers with their pooled logits: the run's predictions (1e-5), one
    row per text; export_info.json says so. Its LiteRT file cuts, and says so in one
    warning line and its .json."""
    from albert_tf.export import read_export_info, read_tflite_info

    root, out, splits, stderr = classified
    texts = [t for t, _ in splits["test"]]
    served = serve_text(out / "export" / "1", text_a=texts)
    predicted = [json.loads(line) for line in
                 (out / "classification_predictions.jsonl").read_text().splitlines()]
    np.testing.assert_allclose(served[names.PROBABILITIES],
                               [row["probabilities"] for row in predicted], atol=1e-5)
    assert served[names.PREDICTIONS].tolist() == [
        ["neg", "pos"].index(row["prediction"]) for row in predicted]
    assert served[names.LOGITS].shape == (12, 2)
    info = read_export_info(out / "export" / "1")
    assert (info["long_text"], info["window_stride"], info["max_seq_length"]) == (
        "windows", None, 16)
    assert read_tflite_info(out / "model.tflite")["long_text"] == "truncate"
    warned = [line for line in stderr.splitlines() if "cuts each text" in line]
    assert len(warned) == 1 and "SavedModel's serve_text" in warned[0], stderr[-3000:]


def trained_classifier(checkpoint):
    """The classifier of a run's TF1 checkpoint (its directory's config)."""
    from albert_tf.checkpoints import load_tf1_checkpoint
    from albert_tf.config import AlbertConfig
    from albert_tf.tasks.classification import AlbertClassifier

    model = AlbertClassifier(AlbertConfig.from_json_file(checkpoint.parent /
                                                         "albert_config.json"), 2)
    load_tf1_checkpoint(model, str(checkpoint))
    return model


def test_keras_data_trains_on_windows_and_pools_dev_per_text(classified, tmp_path,
                                                             tokenizer):
    """`driver.keras_data` with long_text=windows: the training split is the windows'
    records (num_examples counts them, as the run's steps do); `predict` on dev is a
    row per window, and `KerasData.example_outputs` pools them a row per text: the
    mean of its windows' logits (1e-5), its label, its class."""
    from albert_tf.apps import driver
    from albert_tf.errors import UsageError
    from albert_tf.tasks.classification import ClassificationTask

    root, out, splits, _ = classified
    data = driver.keras_data(ClassificationTask, {
        "task_name": "classification", "data_dir": str(root), "text_a_field": "text",
        "label_field": "label", "long_text": "windows", "spm_model_file": SPM,
        "albert_config_file": str(out / "albert_config.json"), "max_seq_length": 16,
        "train_batch_size": 8, "eval_batch_size": 8, "do_train": True, "do_eval": True,
        "output_dir": str(tmp_path / "keras")})
    assert data.num_examples["train"] == sum(
        len(sentence_records.pack_windows(tokenizer.encode(text), None, 16, tokenizer))
        for text, _ in splits["train"])
    model = trained_classifier(out / "model.ckpt-best")
    outputs = model.predict(data.datasets["dev"], verbose=0)
    dev = [t for t, _ in splits["dev"]]
    by_text = window_logits(model, tokenizer, dev, 16)
    assert len(outputs[names.LOGITS]) == sum(len(x) for x in by_text) > len(dev)
    pooled = data.example_outputs("dev", outputs)
    mean = np.array([logits.mean(0) for logits in by_text])
    np.testing.assert_allclose(pooled[names.LOGITS], mean, atol=1e-5)
    assert pooled[names.PREDICTIONS].tolist() == mean.argmax(-1).tolist()
    assert pooled[names.LABEL_IDS].tolist() == [
        ["neg", "pos"].index(label) for _, label in splits["dev"]]
    with pytest.raises(UsageError, match=r"a split of records in order \(dev\), not "
                       r"'train'"):
        data.example_outputs("train", outputs)


def distil_windows(root, teacher, student, cache, *more):
    """run_classifier.py training a student of the windows run `teacher` on its windows
    (the teacher's outputs cached under `cache`), with `more` flags."""
    run_script(
        "run_classifier.py", "--task_name=classification", f"--data_dir={root}",
        "--text_a_field=text", "--label_field=label", "--long_text=windows", "--do_train",
        f"--spm_model_file={SPM}", f"--albert_config_file={teacher / 'albert_config.json'}",
        f"--output_dir={student}", f"--teacher_checkpoint={teacher / 'model.ckpt-best'}",
        f"--teacher_config_file={teacher / 'albert_config.json'}", f"--cached_dir={cache}",
        "--max_seq_length=16", "--train_batch_size=8", "--learning_rate=1e-2",
        "--dropout_prob=0", *more)


def test_distillation_with_lora_reads_windows(classified, tmp_path, tokenizer):
    """A student of the windows run (--teacher_checkpoint) with LoRA adapters
    (--lora_rank), --long_text=windows: the teacher's logits are cached one per window
    record (the teacher's own, 1e-5), the adapters are written, and the dev accuracy
    is that of the student's answers pooled per text."""
    root, out, splits, _ = classified
    cache, student = tmp_path / "cache", tmp_path / "student"
    distil_windows(root, out, student, cache, "--do_eval", "--lora_rank=2",
                   "--eval_batch_size=8", "--train_step=4")
    (written,) = cache.glob("*.teacher.tf_record")
    stored = [tf.train.Example.FromString(r).features.feature["teacher_logits"]
              .float_list.value for r in tf.data.TFRecordDataset(str(written))
              .as_numpy_iterator()]
    teacher = trained_classifier(out / "model.ckpt-best")
    train = window_logits(teacher, tokenizer, [t for t, _ in splits["train"]], 16)
    np.testing.assert_allclose(np.array(stored), np.concatenate(train), atol=1e-5)
    assert (student / "lora_adapter.npz").is_file()
    dev = window_logits(trained_classifier(student / "model.ckpt-best"), tokenizer,
                        [t for t, _ in splits["dev"]], 16)
    guessed = [["neg", "pos"][int(logits.mean(0).argmax())] for logits in dev]
    accuracy = np.mean([g == label for g, (_, label) in zip(guessed, splits["dev"])])
    assert results(student / "eval_results.txt")["eval_accuracy"] == pytest.approx(
        accuracy)


def test_a_capped_run_trains_on_the_chosen_windows_and_evaluates_every_one(
        classified, tmp_path, tokenizer):
    """--max_windows_per_text=2 on the 40 training texts (five batches; their long
    ones of 2 windows and more): the training records are exactly each text's first
    and last windows (`packing.capped_windows`), with its label and index, and the
    cache and report say so; the dev records are every window, and the dev accuracy is
    that of the model's logits pooled over all of a text's windows."""
    root, _, splits, _ = classified
    out = tmp_path / "capped"
    run_script(
        "run_classifier.py", "--task_name=classification", f"--data_dir={root}",
        "--text_a_field=text", "--label_field=label", "--long_text=windows",
        "--max_windows_per_text=2", "--do_train", "--do_eval", f"--spm_model_file={SPM}",
        f"--albert_config_file={write_tiny_config(tmp_path)}", f"--output_dir={out}",
        "--max_seq_length=16", "--train_batch_size=8", "--eval_batch_size=8",
        "--train_step=2", "--save_checkpoints_steps=2", "--iterations_per_loop=2",
        "--learning_rate=1e-2", "--dropout_prob=0")
    every = [sentence_records.pack_windows(tokenizer.encode(text), None, 16, tokenizer)
             for text, _ in splits["train"]]
    chosen = [(i, window) for i, windows in enumerate(every)
              for window in packing.capped_windows(windows, 2)]
    assert max(map(len, every)) >= 3
    written = read_records(out / "classification_train.tf_record", 16)
    assert len(written) == len(chosen) == sum(min(len(w), 2) for w in every) < sum(
        map(len, every))
    for record, (i, window) in zip(written, chosen):
        assert int(record[names.EXAMPLE_INDEX]) == i
        assert int(record[names.LABEL_IDS]) == ["neg", "pos"].index(splits["train"][i][1])
        np.testing.assert_array_equal(record[names.INPUT_IDS].numpy(),
                                      window[names.INPUT_IDS])
    meta = {split: json.loads((out / f"classification_{name}.tf_record.meta.json")
                              .read_text()) for split, name in (("train", "train"),
                                                                ("dev", "eval"))}
    assert meta["train"]["settings"]["max_windows_per_text"] == 2
    assert meta["train"]["truncated"]["windows"] == len(written)
    assert "max_windows_per_text" not in meta["dev"]["settings"]
    dev_logits = window_logits(trained_classifier(out / "model.ckpt-best"), tokenizer,
                               [t for t, _ in splits["dev"]], 16)
    assert meta["dev"]["num_examples"] == sum(map(len, dev_logits)) > 20
    guessed = [["neg", "pos"][int(logits.mean(0).argmax())] for logits in dev_logits]
    accuracy = np.mean([g == label for g, (_, label) in zip(guessed, splits["dev"])])
    assert results(out / "eval_results.txt")["eval_accuracy"] == pytest.approx(accuracy)


def test_distillation_weighs_each_window_one_over_its_texts_windows(classified, tmp_path,
                                                                   tokenizer):
    """A student (--teacher_checkpoint) with --window_weight=inverse: the teacher's
    logits are cached one per window record (the teacher's own, 1e-5), each record
    with its weight, 1 / its text's windows; the student's objective weighs both its
    terms (the labels' and the teacher's) by them."""
    from albert_tf.tasks.classification import ClassificationTask
    from albert_tf.training import distillation

    root, out, splits, _ = classified
    cache, student = tmp_path / "cache", tmp_path / "student"
    distil_windows(root, out, student, cache, "--window_weight=inverse", "--train_step=2")
    (written,) = cache.glob("*.teacher.tf_record")
    stored = [tf.train.Example.FromString(r).features.feature for r in
              tf.data.TFRecordDataset(str(written)).as_numpy_iterator()]
    train = window_logits(trained_classifier(out / "model.ckpt-best"), tokenizer,
                          [t for t, _ in splits["train"]], 16)
    np.testing.assert_allclose([f["teacher_logits"].float_list.value for f in stored],
                               np.concatenate(train), atol=1e-5)
    weights = [f[names.WINDOW_WEIGHT].float_list.value[0] for f in stored]
    assert weights == pytest.approx([1 / len(x) for x in train for _ in x])

    # the student's objective (`student_objective`: the task's, mixed with the teacher's)
    task = ClassificationTask(ClassificationTask.Options.build({
        "task_name": "classification", "text_a_field": "text", "output_dir": "x",
        "do_train": True, "spm_model_file": SPM, "max_seq_length": 16,
        "long_text": "windows", "window_weight": "inverse"}))
    objective = distillation.DistillationObjective(task.objective(), alpha=0.3)
    rng = np.random.default_rng(0)
    w = np.array([1, 1 / 3, 1 / 3, 1 / 3, 1 / 2, 1 / 2], np.float32)
    logits = rng.normal(size=(6, 2)).astype(np.float32)
    teacher = rng.normal(size=(6, 2)).astype(np.float32)
    labels = np.array([0, 1, 1, 1, 0, 0])
    terms = objective.terms({names.LOGITS: tf.constant(logits)}, {
        names.LABEL_IDS: tf.constant(labels), names.WINDOW_WEIGHT: tf.constant(w),
        distillation.TEACHER_LOGITS: tf.constant(teacher),
        names.INPUT_IDS: tf.zeros([6, 4], tf.int64)})

    def log_softmax(x):
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    nll = -log_softmax(logits)[np.arange(6), labels]
    kl = (np.exp(log_softmax(teacher)) * (log_softmax(teacher) - log_softmax(logits))).sum(-1)
    assert float(terms["loss"]) == pytest.approx(0.7 * (w * nll).sum() / w.sum(), rel=1e-5)
    assert float(terms["distillation_loss"]) == pytest.approx(
        0.3 * (w * kl).sum() / w.sum(), rel=1e-5)


def test_the_export_script_takes_the_windows_flags(classified, tmp_path, tokenizer):
    """export_savedmodel.py of the run's checkpoint with --long_text=windows and
    --window_stride: the checkpoint's answers on pairs pooled over the windows of that
    stride;
    a kind that reads no windows refuses in one line, before any work."""
    from albert_tf.checkpoints import load_tf1_checkpoint
    from albert_tf.config import AlbertConfig
    from albert_tf.export import read_export_info
    from albert_tf.tasks.classification import AlbertClassifier, window_pooling

    root, out, splits, _ = classified
    common = [f"--checkpoint={out / 'model.ckpt-best'}", f"--spm_model_file={SPM}",
              f"--albert_config_file={out / 'albert_config.json'}", "--max_seq_length=16"]
    run_script("export_savedmodel.py", "--kind=classifier", "--labels=neg,pos",
               "--long_text=windows", "--window_stride=5",
               f"--export_dir={tmp_path / 'export'}", *common)
    info = read_export_info(tmp_path / "export" / "1")
    assert (info["long_text"], info["window_stride"]) == ("windows", 5)
    model = AlbertClassifier(AlbertConfig.from_json_file(out / "albert_config.json"), 2)
    load_tf1_checkpoint(model, str(out / "model.ckpt-best"))
    # (no --task_name: a pair, as the script exports a classifier by default)
    texts = [t for t, _ in splits["test"]]
    seconds = ["why was it good or bad"] * len(texts)
    _, expected = window_outputs(model, tokenizer, list(zip(texts, seconds)), 16, 5,
                                 window_pooling(False))
    served = serve_text(tmp_path / "export" / "1", text_a=texts, text_b=seconds)
    np.testing.assert_allclose(served[names.LOGITS], expected[names.LOGITS], atol=1e-5)
    line = one_line_error(run_script(
        "export_savedmodel.py", "--kind=encoder", "--long_text=windows",
        f"--export_dir={tmp_path / 'encoder'}", *common, check=False))
    assert line.startswith("error: kind 'encoder' reads no windows of a long text")


@pytest.mark.parametrize("case", ["pair", "regression", "chinese_pair"])
def test_exports_of_pairs_regression_and_wordpiece_pool_as_the_run(case, tmp_path,
                                                                   tokenizer, chinese):
    """export_savedmodel(long_text="windows") of a tiny model: `serve_text` on long
    texts and pairs (either side the longer, both long, empty, short) equals the
    pooled answers of the records' windows (1e-5), with the given stride or the
    default; texts that fit are answered as the truncating export answers them."""
    from albert_tf.export import export_savedmodel, read_export_info
    from albert_tf.tasks.classification import AlbertClassifier, window_pooling
    from tests.helpers.tiny import tiny_config

    is_pair, regression = case != "regression", case == "regression"
    if case == "chinese_pair":
        long = "今天天气很好吗playing北京我们明天去上海看看朋友吧他说这部电影非常好看"
        rows = [(long, "好吗"), ("北京", long + long[::-1]), (long, long[::-1]),
                ("", "很好"), ("很好", "北京")]
        files = {"vocab_file": str(FIXTURES / "ner" / "vocab_chinese.txt")}
        tokenizer, stride = chinese, None
    else:
        long = " ".join(FILLER + FILLER[::-1])  # (LONG repeats itself: so would windows)
        rows = [(long, "why good"), ("why good", long + " " + LONG), (long, LONG),
                ("", "why"), ("a good film", "a bad one")]
        files, stride = {"spm_model_file": SPM}, (5 if regression else None)
    if not is_pair:
        rows = [(f"{a} {b}", None) for a, b in rows]
    # (weights large enough that windows answer apart)
    model = AlbertClassifier(tiny_config(initializer_range=0.5), 1 if regression else 3,
                             seed=3)
    texts = {names.TEXT_A: [a for a, _ in rows]}
    if is_pair:
        texts[names.TEXT_B] = [b for _, b in rows]
    path = export_savedmodel(model, tmp_path / "windows", kind="classifier",
                             max_seq_length=16, is_pair=is_pair, long_text="windows",
                             window_stride=stride, warmup_requests=False, **files)
    served = serve_text(path, **texts)
    _, expected = window_outputs(model, tokenizer, rows, 16, stride,
                                 window_pooling(regression))
    assert sorted(served) == sorted(k for k in (names.LOGITS, names.PROBABILITIES,
                                                names.PREDICTIONS) if k in expected)
    for name, values in served.items():
        np.testing.assert_allclose(values, expected[name], atol=1e-5, err_msg=name)
    # (the windows of a long text answer differently: the first alone would not do)
    _, first = window_outputs(model, tokenizer, rows[:1], 16, stride, {})
    assert np.abs(first[names.LOGITS] - expected[names.LOGITS][:1]).max() > 1e-4
    if case == "pair":  # the texts that fit: the truncating export's answers
        cut = export_savedmodel(model, tmp_path / "truncate", kind="classifier",
                                max_seq_length=16, is_pair=True, warmup_requests=False,
                                **files)
        short = {k: v[3:] for k, v in texts.items()}
        for name, values in serve_text(cut, **short).items():
            np.testing.assert_allclose(values, served[name][3:], atol=1e-6)
        # the same signature: names, dtypes and shapes (one row per text)
        assert read_export_info(path)["signatures"] == read_export_info(cut)["signatures"]


def test_the_graphs_windows_and_pooling_are_the_records(tokenizer):
    """`packing.pack_windows_tf` makes the windows `pack_windows` makes, for a batch
    of texts or pairs (every side longer, ties, empty texts, strides given or not);
    `pool_windows_tf` pools as `pool_windows`."""
    from albert_tf.tasks.classification import CLASSIFICATION_POOLING
    from albert_tf.tasks.multi_label import WINDOW_POOLING

    table = tf.constant(tokenizer.word_start_table())
    texts_a = [LONG, "a good film", "", LONG * 2, "why good", LONG]
    texts_b = ["why good", LONG, "x", LONG, LONG * 3, LONG]
    cls, sep = tokenizer.special_id("[CLS]"), tokenizer.special_id("[SEP]")

    def ids(texts):
        return tf.ragged.constant([tokenizer.encode(t) for t in texts], tf.int32)

    for max_seq_length, stride in ((16, None), (16, 3), (12, 2), (24, None)):
        for pair in (False, True):
            segments = [ids(texts_a)] + ([ids(texts_b)] if pair else [])
            packed, splits = packing.pack_windows_tf(
                segments, lambda x: tf.gather(table, x), max_seq_length, stride=stride,
                cls_id=cls, sep_id=sep)
            want = [sentence_records.pack_windows(
                tokenizer.encode(a), tokenizer.encode(b) if pair else None,
                max_seq_length, tokenizer, stride) for a, b in zip(texts_a, texts_b)]
            assert splits.numpy().tolist() == np.cumsum([0] + [len(w) for w in want]
                                                        ).tolist()
            for row, window in enumerate(w for made in want for w in made):
                length = int(window[names.INPUT_MASK].sum())
                assert packed[names.INPUT_MASK][row].numpy().sum() == length
                for name, record_name in ((names.INPUT_WORD_IDS, names.INPUT_IDS),
                                          (names.INPUT_TYPE_IDS, names.SEGMENT_IDS)):
                    assert packed[name][row, :length].numpy().tolist() == \
                        window[record_name][:length].tolist(), (max_seq_length, stride,
                                                                pair, row)
    # a request of no texts: no windows, no answers
    packed, splits = packing.pack_windows_tf([ids(["x"])[:0]] * 2, lambda x: tf.gather(
        table, x), 16, stride=None, cls_id=cls, sep_id=sep)
    assert packed[names.INPUT_WORD_IDS].shape[0] == 0 and splits.numpy().tolist() == [0]
    assert sentence_records.pool_windows_tf({names.LOGITS: tf.zeros([0, 2])}, splits,
                                            CLASSIFICATION_POOLING)[names.PROBABILITIES
                                                                    ].shape == (0, 2)
    rng = np.random.default_rng(0)
    index = np.array([0, 0, 0, 1, 2, 2])
    outputs = {names.LOGITS: rng.normal(size=(6, 3)).astype(np.float32),
               names.PROBABILITIES: rng.random((6, 3)).astype(np.float32),
               names.PREDICTIONS: rng.integers(0, 2, (6, 3)).astype(np.int32)}
    for pooling in (CLASSIFICATION_POOLING, WINDOW_POOLING):
        want = sentence_records.pool_windows({**outputs, names.EXAMPLE_INDEX: index},
                                             pooling)
        got = sentence_records.pool_windows_tf(
            {k: tf.constant(v) for k, v in outputs.items()}, [0, 3, 4, 6], pooling)
        for name, values in got.items():
            np.testing.assert_allclose(values.numpy(), want[name], rtol=1e-6,
                                       err_msg=name)


def test_multi_label_pools_each_labels_most_probable_window(tmp_path, tokenizer):
    """--task_name=multi_label --long_text=windows: a text's probability of a label is
    the most any of its windows gives it."""
    from albert_tf.checkpoints import load_tf1_checkpoint
    from albert_tf.config import AlbertConfig
    from albert_tf.tasks.multi_label import AlbertMultiLabelClassifier

    rows = []
    for i in range(20):
        text = ("the plot was good " + LONG * (i % 3)) if i % 2 else "a bad film"
        rows.append({"text": text.strip(), "labels": ["plot", "good"] if i % 2 else ["bad"]})
    for split, part in (("train", rows), ("dev", rows[:10]), ("test", rows[10:])):
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
    out = tmp_path / "out"
    run_script("run_classifier.py", "--task_name=multi_label", f"--data_dir={tmp_path}",
               "--text_a_field=text", "--label_field=labels", "--long_text=windows",
               "--window_stride=5", "--do_train", "--do_eval", "--do_predict",
               f"--spm_model_file={SPM}", f"--albert_config_file={write_tiny_config(tmp_path)}",
               f"--output_dir={out}", "--max_seq_length=16", "--train_batch_size=8",
               "--eval_batch_size=4", "--predict_batch_size=4", "--train_step=6",
               "--save_checkpoints_steps=6", "--iterations_per_loop=6",
               "--learning_rate=1e-2", "--dropout_prob=0", f"--export_dir={out / 'export'}")
    model = AlbertMultiLabelClassifier(
        AlbertConfig.from_json_file(out / "albert_config.json"), 3)
    load_tf1_checkpoint(model, str(out / "model.ckpt-best"))
    expected = []
    for row in rows[10:]:
        windows = sentence_records.pack_windows(tokenizer.encode(row["text"]), None, 16,
                                                tokenizer, stride=5)
        inputs = names.to_model_inputs({k: np.stack([w[k] for w in windows])
                                        for k in names.RECORD_SEQUENCES})
        expected.append(model(inputs, training=False)[names.PROBABILITIES].numpy().max(0))
    predicted = [json.loads(line) for line in
                 (out / "multi_label_predictions.jsonl").read_text().splitlines()]
    assert len(predicted) == 10
    np.testing.assert_allclose([list(r["probabilities"].values()) for r in predicted],
                               expected, atol=2e-6)
    assert list(predicted[0]["probabilities"]) == ["bad", "good", "plot"]
    assert "micro_f1" in results(out / "eval_results.txt")
    # The run's export reads the windows too (at the run's stride): the predictions.
    served = serve_text(out / "export" / "1", text_a=[row["text"] for row in rows[10:]])
    np.testing.assert_allclose(served[names.PROBABILITIES],
                               [list(r["probabilities"].values()) for r in predicted],
                               atol=1e-5)
    assert served[names.PREDICTIONS].tolist() == [
        [int(label in r["labels"]) for label in r["probabilities"]] for r in predicted]


# ------------------------------------------------------------------------ the cache
def test_cached_records_are_keyed_by_the_mode_and_stride(tmp_path, tokenizer):
    """A split's records cached by a truncating run are never read by a windows run
    (nor those of one stride by another), for your files and GLUE's alike."""
    from albert_tf.apps import driver, session
    from albert_tf.data import glue

    write_reviews(tmp_path / "train.csv", 12, {2, 5}, 3)
    options = {"task_name": "classification", "text_a_field": "text", "label_field": "label",
               "train_file": str(tmp_path / "train.csv"), "spm_model_file": SPM,
               "albert_config_file": str(write_tiny_config(tmp_path)), "max_seq_length": 16,
               "do_train": True, "cached_dir": str(tmp_path / "cache")}
    seen = []
    for run, changes in (("a", {}), ("b", {"long_text": "windows"}),
                         ("c", {"long_text": "windows"}),
                         ("d", {"long_text": "windows", "window_stride": 3}), ("e", {})):
        state = driver.read("classification", {**options, **changes,
                                               "output_dir": str(tmp_path / run)})
        state.context = session.setup(state.options)
        driver.convert(state)
        seen.append((state.records["train"].reused, state.records["train"].num_examples))
    assert [reused for reused, _ in seen] == [False, False, True, False, False]
    assert seen[0][1] == 12 and seen[1][1] > 12
    meta = json.loads((tmp_path / "cache" / "classification_train.tf_record.meta.json")
                      .read_text())
    assert "long_text" not in meta["settings"]  # truncate's settings are the original's

    glue_examples = glue.get_processor("MRPC", tokenizer).get_examples(FIXTURES / "glue",
                                                                       "dev")
    made = [glue.cached_glue_records("MRPC", "dev", FIXTURES / "glue", tmp_path / "glue",
                                     tokenizer, 24, glue_examples, long_text)
            for long_text in (None, LongText("windows"), LongText("windows"))]
    assert [m.reused for m in made] == [False, False, True]
    assert made[1].num_examples > made[0].num_examples == len(glue_examples)
    windows = records.spec_of_first_record(made[1].path)
    assert names.EXAMPLE_INDEX in windows


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize("changes, message", [
    ({"long_text": "windows", "window_stride": 14},
     "--window_stride=14 must be smaller than the window: --max_seq_length=16 gives a "
     "text's windows 14 piece(s) (--max_seq_length - 2); give --window_stride=7 (half "
     "the window) or less, or a larger --max_seq_length"),
    ({"long_text": "windows", "window_stride": 6, "text_b_field": "b"},
     "--window_stride=6 must be smaller than the window: --max_seq_length=16 gives a "
     "pair's windows 6 piece(s) (half of --max_seq_length - 3, the other text keeping up "
     "to the other half); give --window_stride=3 (half the window) or less"),
    ({"long_text": "windows", "text_b_field": "b", "max_seq_length": 6},
     "--long_text=windows: --max_seq_length=6 leaves a pair's windows 1 piece(s) (half of "
     "--max_seq_length - 3, the other text keeping up to the other half), too few to "
     "slide (two at least): give --max_seq_length=7 or more"),
    ({"window_stride": 4}, "--window_stride=4 is for --long_text=windows"),
    ({"window_weight": "inverse"}, "--window_weight=inverse is for --long_text=windows"),
    ({"max_windows_per_text": 2},
     "--max_windows_per_text=2 is for --long_text=windows (--long_text=truncate reads no "
     "window)"),
])
def test_windows_that_cannot_be_cut_are_refused_before_any_work(changes, message):
    from albert_tf.errors import UsageError
    from albert_tf.tasks.classification import ClassificationTask
    from albert_tf.tasks.multi_label import MultiLabelTask

    options = {"task_name": "classification", "text_a_field": "a", "output_dir": "x",
               "do_train": True, "spm_model_file": SPM, "max_seq_length": 16, **changes}
    for task, name in ((ClassificationTask, "classification"), (MultiLabelTask, "multi_label")):
        with pytest.raises(UsageError) as refused:
            task.Options.build({**options, "task_name": name}).validate()
        assert message in str(refused.value)
    # GLUE's pairs are pairs
    mrpc = ClassificationTask.Options.build({
        **options, "task_name": "MRPC", "data_dir": str(FIXTURES / "glue"),
        "long_text": "windows", "window_stride": 6, "max_seq_length": 16})
    with pytest.raises(UsageError, match="a pair's windows 6"):
        mrpc.validate()
    # only classification and regression weigh their windows
    weighted = {**{k: v for k, v in options.items() if k not in changes},
                "max_seq_length": 16, "long_text": "windows", "window_weight": "inverse"}
    ClassificationTask.Options.build(weighted).validate()
    with pytest.raises(UsageError, match="only classification and regression weigh"):
        MultiLabelTask.Options.build({**weighted, "task_name": "multi_label"}).validate()


def test_the_scripts_refuse_in_one_line(tmp_path):
    """A stride too long for the window; windows for a task that has windows of its
    own (SQuAD, NER) or none to pool (pretraining): one line, before any work."""
    common = [f"--spm_model_file={SPM}", f"--output_dir={tmp_path / 'out'}", "--do_train"]
    line = one_line_error(run_script(
        "run_classifier.py", "--task_name=sst-2", f"--data_dir={FIXTURES / 'glue'}",
        "--long_text=windows", "--window_stride=20", "--max_seq_length=16", *common,
        check=False))
    assert line.startswith("error: --window_stride=20 must be smaller than the window")
    line = one_line_error(run_script(
        "run_classifier.py", "--task_name=squad", "--long_text=windows",
        f"--train_file={FIXTURES / 'squad' / 'dev-v1.1-excerpt.json'}", *common,
        check=False))
    assert line == "error: --long_text: not an option of the task 'squad'"
    for script in ("run_ner.py", "run_squad.py", "run_pretraining.py"):
        refused = run_script(script, "--long_text=windows", *common, check=False)
        assert refused.returncode != 0 and "Unknown command line flag 'long_text'" in \
            refused.stderr, (script, refused.stderr[-2000:])
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------- multiple choice
# Questions over contexts longer than one window at --max_seq_length=32 and
# --max_qa_length=8 (windows of 29 - the longest ending's kept pieces, 21 at least).
COLOURS = ["red", "blue", "green", "yellow"]


def write_questions(path, count, long_rows, seed):
    """A multiple-choice JSON-lines file of `count` questions with 2 to 4 choices:
    short contexts, and at `long_rows` contexts of 25 to 80 pieces; returns the rows."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        choices = COLOURS[:int(rng.integers(2, 5))]
        label = int(rng.integers(len(choices)))
        context = f"the car was {choices[label]}"
        if i in long_rows:
            context += " " + " ".join(rng.choice(FILLER, int(rng.integers(12, 30))))
        question = "the car was _ ." if i % 2 else "which colour was the car?"
        rows.append({"id": f"q{i}", "context": context, "question": question,
                     "choices": choices, "label": label})
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return rows


def test_a_long_context_is_read_in_windows_beside_every_choice(tokenizer):
    """A question's windows lie over its context by the window rule (`window_spans`,
    windows of what max_seq_length leaves beside its longest ending kept as
    `choice_lengths` keeps it), each record all its choices packed as truncate packs
    them, with the question's label and index; a context that fits is truncate's one
    record; nothing is counted cut."""
    from albert_tf.data import choice_records
    from albert_tf.data.report import counting_truncation

    context = " ".join(FILLER * 3)
    endings = ["which colour was it? red", "which colour was the car in the story? blue",
               "green"]
    example = choice_records.ChoiceExample("q", context, endings, 2)
    with counting_truncation() as counted:
        windows = choice_records.convert_example_windows(example, 7, 32, 8, tokenizer,
                                                         num_choices=4, stride=6)
    ids = tokenizer.encode(context)
    ending_ids = [tokenizer.encode(e) for e in endings]
    assert len(ending_ids[1]) > 8  # cut to its last 8 pieces, as truncate cuts it
    window = packing.segment_budget(32) - 8
    spans = packing.window_spans(tokenizer.word_start_table()[ids], window, 6)
    assert len(spans) == len(windows) > 3
    for (start, length), features in zip(spans, windows):
        assert (features.label_id, features.example_index) == (2, 7)
        for choice, ending in enumerate(ending_ids):
            packed = packing.pack([ids[start:start + length], ending[-8:]], 32,
                                  cls_id=tokenizer.special_id("[CLS]"),
                                  sep_id=tokenizer.special_id("[SEP]"))
            assert features.input_ids[choice] == packed[names.INPUT_WORD_IDS].tolist()
            assert features.segment_ids[choice] == packed[names.INPUT_TYPE_IDS].tolist()
        assert features.input_ids[3] == features.input_mask[3] == [0] * 32  # absent
    assert (counted.examples, counted.examples_cut, counted.windows) == (1, 0, len(spans))
    # the default stride: half the window
    assert len(choice_records.convert_example_windows(example, 0, 32, 8, tokenizer)) == \
        len(packing.window_spans(tokenizer.word_start_table()[ids], window, window // 2))
    # a context that fits: truncate's record
    short = choice_records.ChoiceExample("s", "the car was red", endings, 1)
    [one] = choice_records.convert_example_windows(short, 0, 32, 8, tokenizer)
    cut = choice_records.convert_single_example(short, 32, 8, tokenizer)
    assert one.to_record() != cut.to_record() and one.example_index == 0
    assert (one.input_ids, one.input_mask, one.segment_ids, one.label_id) == (
        cut.input_ids, cut.input_mask, cut.segment_ids, cut.label_id)


def test_the_graphs_choice_windows_are_the_records(tokenizer):
    """`serving_text.pack_choices` with windows packs, in the graph, the windows of
    `convert_example_windows` (blanks filled, endings cut to their last max_qa_length,
    absent choices zeros, a short context one window), a row per window; the rows of
    each question in `window_splits`."""
    from albert_tf.export import serving_kinds
    from albert_tf.export.serving_text import TextSettings
    from albert_tf.text import AlbertTextTokenizer

    rows = [{"id": "a", "context": " ".join(FILLER * 2), "question": "the car was _ .",
             "choices": ["red", "blue", "green"]},
            {"id": "b", "context": "the car was red", "question": "which one?",
             "choices": ["red", "blue", "green", "yellow"]},
            {"id": "c", "context": LONG, "question": "which colour was the car in it?",
             "choices": ["red", "blue"]}]
    for stride in (None, 4):
        settings = TextSettings(max_seq_length=32, max_qa_length=8, num_choices=4,
                                long_text="windows", window_stride=stride)
        packed = serving_kinds()["multiple_choice"].pack_text(
            AlbertTextTokenizer(spm_model_file=SPM), settings, {
                "context": tf.constant([r["context"] for r in rows]),
                "question": tf.constant([r["question"] for r in rows]),
                "choices": tf.constant([r["choices"] + [""] * (4 - len(r["choices"]))
                                        for r in rows])})
        expected = choice_windows(tokenizer, rows, 32, 8, stride=stride)
        assert packed.window_splits.numpy().tolist() == np.cumsum(
            [0] + [len(w) for w in expected]).tolist()
        assert len(expected[0]) > 2 and len(expected[1]) == 1
        flat = [f for features in expected for f in features]
        for name, field in ((names.INPUT_WORD_IDS, "input_ids"),
                            (names.INPUT_MASK, "input_mask"),
                            (names.INPUT_TYPE_IDS, "segment_ids")):
            got = packed.inputs[name].numpy()  # [W, 4, longest]
            want = np.array([getattr(f, field) for f in flat])
            np.testing.assert_array_equal(got, want[..., :got.shape[-1]], err_msg=name)
            assert not want[..., got.shape[-1]:].any()


@pytest.fixture(scope="module")
def chosen(tmp_path_factory):
    """run_classifier.py --task_name=multiple_choice --long_text=windows: 16 training
    questions (6 of long contexts), 8 dev (4 long), 6 test (4 long), trained,
    evaluated, predicted, exported."""
    root = tmp_path_factory.mktemp("long_questions")
    splits = {"train": write_questions(root / "train.jsonl", 16, {1, 4, 6, 9, 12, 15}, 0),
              "dev": write_questions(root / "dev.jsonl", 8, {0, 3, 4, 7}, 1),
              "test": write_questions(root / "test.jsonl", 6, {0, 2, 3, 5}, 2)}
    out = root / "out"
    run_script(
        "run_classifier.py", "--task_name=multiple_choice", f"--data_dir={root}",
        "--long_text=windows", "--max_qa_length=8", "--do_train", "--do_eval",
        "--do_predict", f"--spm_model_file={SPM}",
        # (a wide initializer: windows that answer apart)
        f"--albert_config_file={write_tiny_config(root, initializer_range=1.0)}",
        f"--output_dir={out}", "--max_seq_length=32", "--train_batch_size=4",
        "--eval_batch_size=4", "--predict_batch_size=4", "--train_step=4",
        "--save_checkpoints_steps=4", "--iterations_per_loop=4", "--learning_rate=1e-3",
        "--dropout_prob=0",
        f"--export_dir={out / 'export'}")
    return root, out, splits


def test_multiple_choice_trains_on_windows_and_pools_per_question(chosen, tokenizer):
    """The run's records are each question's windows (`convert_example_windows`), a
    record per window with the question's label and index, nothing counted cut; its
    predictions (one row per question, test_results.tsv too) are the softmax of the
    mean of each choice's window logits from model.ckpt-best, its dev accuracy that of
    those; its SavedModel's serve_text answers the raw questions so, in the graph."""
    from albert_tf.checkpoints import load_tf1_checkpoint
    from albert_tf.config import AlbertConfig
    from albert_tf.data import choice_records
    from albert_tf.tasks.multiple_choice import AlbertMultipleChoice

    root, out, splits = chosen
    windows = {split: choice_windows(tokenizer, rows, 32, 8)
               for split, rows in splits.items()}
    spec = choice_records.record_spec(32, 4, windows=True)
    written = [tf.io.parse_single_example(r, spec) for r in
               tf.data.TFRecordDataset(str(out / "multiple_choice_train.tf_record"))]
    flat = [(i, f) for i, features in enumerate(windows["train"]) for f in features]
    assert len(written) == len(flat) > 16 + 6
    for record, (index, features) in zip(written, flat):
        assert int(record[names.EXAMPLE_INDEX]) == index == features.example_index
        assert int(record[names.LABEL_IDS]) == splits["train"][index]["label"]
        assert record[names.INPUT_IDS].numpy().tolist() == features.input_ids
    report = json.loads((out / "data_report.json").read_text())["splits"]["train"]
    assert (report["truncated"]["examples_cut"], report["truncated"]["windows"],
            report["truncated"]["examples_in_windows"]) == (
        0, len(flat), sum(len(features) > 1 for features in windows["train"]))
    assert sum(len(features) > 1 for features in windows["test"]) >= 3

    model = AlbertMultipleChoice(AlbertConfig.from_json_file(out / "albert_config.json"),
                                 num_choices=4)
    load_tf1_checkpoint(model, str(out / "model.ckpt-best"))

    spread = []

    def pooled(split):  # [questions, 4]: the softmax of the mean window logits
        means = []
        for features in windows[split]:
            inputs = names.to_model_inputs({
                name: np.array([getattr(f, field) for f in features])
                for name, field in zip(names.RECORD_SEQUENCES,
                                       ("input_ids", "input_mask", "segment_ids"))})
            logits = model(inputs, training=False)[names.LOGITS].numpy()
            means.append(logits.astype(np.float64).mean(0))
            spread.append(np.abs(logits - logits[0]).max())
        means = np.array(means)
        return np.exp(means - means.max(-1, keepdims=True)) / np.exp(
            means - means.max(-1, keepdims=True)).sum(-1, keepdims=True)

    expected = pooled("test")
    assert max(spread) > 1e-4  # the windows answer apart: the first alone would not do
    predicted = [json.loads(line) for line in
                 (out / "multiple_choice_predictions.jsonl").read_text().splitlines()]
    assert [row["id"] for row in predicted] == [r["id"] for r in splits["test"]]
    for row, probabilities, question in zip(predicted, expected, splits["test"]):
        count = len(question["choices"])
        np.testing.assert_allclose(row["probabilities"], probabilities[:count], atol=2e-6)
        assert row["prediction"] == int(probabilities.argmax())
    tsv = np.loadtxt(out / "test_results.tsv", ndmin=2)
    assert tsv.shape == (6, 4)
    np.testing.assert_allclose(tsv, expected, atol=2e-6)
    accuracy = np.mean([int(p.argmax()) == q["label"]
                        for p, q in zip(pooled("dev"), splits["dev"])])
    assert results(out / "eval_results.txt")["eval_accuracy"] == pytest.approx(accuracy)

    served = serve_text(out / "export" / "1", context=[q["context"] for q in splits["test"]],
                        question=[q["question"] for q in splits["test"]],
                        choices=[q["choices"] + [""] * (4 - len(q["choices"]))
                                 for q in splits["test"]])
    np.testing.assert_allclose(served[names.PROBABILITIES], expected, atol=1e-5)


def test_multiple_choice_windows_that_cannot_be_cut_are_refused():
    """RACE keeps its original records; a stride or a --max_qa_length that leaves no
    window to slide over a context: refused in one line, before any work."""
    from albert_tf.errors import UsageError
    from albert_tf.tasks.multiple_choice import MultipleChoiceTask

    options = {"task_name": "c3", "data_dir": str(FIXTURES / "c3"), "output_dir": "x",
               "do_train": True, "spm_model_file": SPM, "max_seq_length": 32,
               "max_qa_length": 8, "long_text": "windows"}
    for changes, message in (
            ({"task_name": "race", "data_dir": str(FIXTURES / "race")},
             "--long_text=windows: RACE's records are the original's and cut its articles; "
             "for windows give its questions as --task_name=multiple_choice JSON lines"),
            ({"window_stride": 21},
             "--window_stride=21 must be smaller than the window: --max_seq_length=32 gives "
             "a context's windows 21 piece(s) (--max_seq_length - 3 - --max_qa_length=8, "
             "beside the longest question + choice); give --window_stride=10"),
            ({"max_qa_length": None},  # the default fills what max_seq_length leaves
             "--long_text=windows: --max_seq_length=32 leaves a context's windows 0 "
             "piece(s) (--max_seq_length - 3 - --max_qa_length=29, beside the longest "
             "question + choice), too few to slide (two at least): give "
             "--max_seq_length=34 or more or a smaller --max_qa_length")):
        with pytest.raises(UsageError) as refused:
            MultipleChoiceTask.Options.build({**options, **changes}).validate()
        assert message in str(refused.value)
    MultipleChoiceTask.Options.build({**options, "window_stride": 20}).validate()
