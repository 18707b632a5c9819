"""The Keras text models (`albert_tf.text_models`): strings in `fit`, `evaluate` and
`predict`, the preprocessor equal to the records' Python path, `.keras` files that load
in a fresh process with their vocabulary, exports that take text, bad input in one
line. (`fit` ending with `run_classifier.py`'s weights:
tests/test_keras_native.py::test_fit_on_mrpc_ends_with_the_weights_run_classifier_ends_with.)
"""

from __future__ import annotations

import json
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertPretrainer, losses, names, packing, save_tf1_checkpoint
from albert_tf.data import ner
from albert_tf.text_models import (
    AlbertTextClassifier,
    AlbertTextMultipleChoice,
    AlbertTextTokenClassifier,
    TextInputError,
    TextPreprocessor,
)
from albert_tf.tokenization import FullTokenizer
from tests.helpers.forked import run_python
from tests.helpers.layouts import brightmart_release
from tests.helpers.paths import REPO, SPM_MODEL
from tests.helpers.text_cases import ORIGINAL_PIECES
from tests.helpers.tiny import tiny_config
from tests.helpers.windows import choice_window_outputs, window_outputs

GOLDEN = [case["text"] for case in ORIGINAL_PIECES["texts"]]
CHINESE = ["中文句子的分类。", "今天天气很好，我们去公园散步吧！", "他说：“这部电影真好看”",
           "北京2008年奥运会", "ALBERT 中文模型 albert_zh"]
SENTENCES = ["John Smith lives in New York", "the film was unbelievably good",
             "ALBERT is a lite BERT", "Paris"]
TAGS = [[1, 2, 0, 0, 1, 2], [0, 0, 0, 0, 0], [1, 0, 0, 0, 1], [1]]
WORDS = ["a good film", "a bad film, really bad", "great acting", "awful, boring plot",
         "i loved it", "i hated it", "wonderful", "terrible"]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """A tiny English release: config, TF1 checkpoint, SentencePiece model."""
    directory = tmp_path_factory.mktemp("release")
    config = tiny_config()
    config.to_json_file(directory / "albert_config.json")
    save_tf1_checkpoint(AlbertPretrainer(config, seed=1), str(directory / "model.ckpt"))
    shutil.copy(SPM_MODEL, directory / "30k-clean.model")
    return directory


@pytest.fixture(scope="module")
def chinese_release(tmp_path_factory):
    """brightmart's albert_zh fixture as released (WordPiece vocab.txt)."""
    return brightmart_release(tmp_path_factory.mktemp("zh") / "albert_tiny_zh")


@pytest.fixture(scope="module")
def tagger(release):
    """The module's token classifier: English SentencePiece, 3 labels, windows of 16."""
    return AlbertTextTokenClassifier.from_release(release, num_classes=3,
                                                  sequence_length=16)


def records_inputs(tokenizer: FullTokenizer, texts, sequence_length: int) -> dict:
    """The records' Python path: `FullTokenizer.encode`, then `packing.pack_batch` (as
    sentence_records packs), padded to the batch's longest packed text."""
    rows = [[tokenizer.encode(t) for t in row] for row in texts]
    packed = packing.pack_batch(rows, sequence_length, cls_id=tokenizer.special_id("[CLS]"),
                                sep_id=tokenizer.special_id("[SEP]"))
    longest = int(packed[names.INPUT_MASK].sum(1).max())
    return {k: v[:, :longest] for k, v in packed.items()}


def test_preprocessor_packs_as_the_records_english_and_chinese(release, chinese_release):
    """The in-graph preprocessor gives the ids, mask and segments of the records' Python
    path: the original tokenizer's golden texts (their ids are the original
    tokenization.py's) one by one and in pairs, cut at 24, and Chinese WordPiece
    text; the golden ids are what the Python path gives."""
    python = FullTokenizer(vocab_file=None, spm_model_file=str(release / "30k-clean.model"))
    assert [python.encode(t) for t in GOLDEN] == [c["ids"] for c in ORIGINAL_PIECES["texts"]]
    for rows in ([[t] for t in GOLDEN], list(zip(GOLDEN, GOLDEN[::-1]))):
        columns = tuple(tf.constant(list(c)) for c in zip(*rows))
        english = TextPreprocessor.from_release(release, sequence_length=24)
        got = english(columns if len(columns) == 2 else columns[0])
        expected = records_inputs(python, rows, 24)
        assert got[names.INPUT_WORD_IDS].shape == expected[names.INPUT_WORD_IDS].shape
        for name, value in expected.items():
            np.testing.assert_array_equal(got[name].numpy(), value, err_msg=name)
    assert english.pair is True
    with pytest.raises(TextInputError, match="reads pairs of texts"):
        english(tf.constant(GOLDEN))
    chinese = TextPreprocessor.from_release(chinese_release, sequence_length=16)
    assert chinese.vocabulary_kind == "wordpiece"
    zh_python = FullTokenizer(vocab_file=str(chinese_release / "vocab.txt"))
    got = chinese(tf.constant(CHINESE))
    expected = records_inputs(zh_python, [[t] for t in CHINESE], 16)
    assert int(expected[names.INPUT_MASK].sum(1).max()) == 16  # a text was cut
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name].numpy(), value, err_msg=name)


def test_fit_predict_evaluate_on_strings_lists_arrays_and_datasets(release, monkeypatch):
    """fit on a list of strings (more rows than a batch) moves the weights and the loss
    (that it trains as the script: test_keras_native); predict
    on a list, a NumPy array, a tf.data batch stream and one string agree; predict is
    the id model on the records' ids (1e-5); evaluate's accuracy is predict's. The
    tokenizer is not traced again for each call."""
    from albert_tf.text import AlbertTextTokenizer

    traced, tokenize = [], AlbertTextTokenizer._tokenize_vector

    def counted(self, texts):
        traced.append(texts.shape)
        return tokenize(self, texts)

    monkeypatch.setattr(AlbertTextTokenizer, "_tokenize_vector", counted)
    model = AlbertTextClassifier.from_release(release, num_classes=2, sequence_length=16,
                                              learning_rate=5e-3)
    labels = [i % 2 for i in range(len(WORDS))]
    texts, y = WORDS * 5, labels * 5
    before = [w.numpy().copy() for w in model.model.trainable_weights]
    steps_traced, train_step = [], model.train_step
    model.train_step = lambda data: steps_traced.append(data) or train_step(data)
    history = model.fit(texts, y, batch_size=8, epochs=3, verbose=0)
    assert len(history.history["loss"]) == 3
    # the optimizer's and metrics' variables made before the step was traced, which
    # was traced once (`modeling.base.BuiltBeforeTracing`)
    assert len(steps_traced) == 1
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert sum(not np.array_equal(b, w.numpy())
               for b, w in zip(before, model.model.trainable_weights)) > 10
    logits = model.predict(WORDS, batch_size=3, verbose=0)
    assert logits.shape == (len(WORDS), 2)
    np.testing.assert_allclose(model.predict(np.array(WORDS), verbose=0), logits, atol=1e-6)
    dataset = tf.data.Dataset.from_tensor_slices(WORDS).batch(5)
    np.testing.assert_allclose(model.predict(dataset, verbose=0), logits, atol=1e-6)
    np.testing.assert_allclose(model.predict(WORDS[2], verbose=0), logits[2:3], atol=1e-6)
    python = FullTokenizer(vocab_file=None, spm_model_file=str(release / "30k-clean.model"))
    ids = records_inputs(python, [[t] for t in WORDS], 16)
    np.testing.assert_allclose(model.model(ids)[names.LOGITS].numpy(), logits, atol=1e-5)
    result = model.evaluate(WORDS, labels, verbose=0, return_dict=True)
    assert result["accuracy"] == pytest.approx(np.mean(logits.argmax(1) == labels))
    with_data = model.evaluate(tf.data.Dataset.from_tensor_slices((WORDS, labels)).batch(3),
                               verbose=0, return_dict=True)
    assert with_data["loss"] == pytest.approx(result["loss"], rel=1e-5)
    # fit, the four predictions (batches of 3, 8, 5 and 1 texts) and the two
    # evaluations each mapped a dataset of their own; the tokenizer was traced for the
    # fit's batches of 8, then once for batches of any size
    assert len(traced) <= 2, traced


def test_keras_own_compile_and_pairs(release):
    """Keras' usual compile (its loss and "accuracy" on the returned logits) trains on
    a pair model's (text_a, text_b) tuples; regression and multi-label take their
    labels, with the task's loss."""
    model = AlbertTextClassifier.from_release(release, num_classes=3, sequence_length=16)
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    a, b = WORDS, WORDS[::-1]
    history = model.fit((a, b), [0, 1, 2, 0, 1, 2, 0, 1], batch_size=4, epochs=1, verbose=0)
    assert set(history.history) == {"loss", "accuracy"}
    assert model.pair and model.predict((a, b), verbose=0).shape == (8, 3)
    regression = AlbertTextClassifier.from_release(release, num_classes=1,
                                                   sequence_length=16)
    regression.fit(WORDS, np.linspace(0, 5, 8), batch_size=8, verbose=0)
    assert regression.predict(WORDS, verbose=0).shape == (8,)
    assert regression.task_loss == "regression"
    several = AlbertTextClassifier.from_release(release, num_classes=3, multi_label=True,
                                                sequence_length=16)
    history = several.fit(WORDS, np.eye(3, dtype=int)[[0, 1, 2, 0, 1, 2, 0, 1]],
                          batch_size=8, verbose=0)
    assert set(history.history) == {"loss", "accuracy"}
    assert several.predict(WORDS, verbose=0).shape == (8, 3)


def test_bad_input_is_one_line_before_any_step(release):
    model = AlbertTextClassifier.from_release(release, num_classes=2, sequence_length=16)
    model.predict(WORDS[:2], verbose=0)  # one text per example from now on
    before = model.optimizer.iterations.numpy()
    cases = [
        (([1, 2, 3], [0, 1, 0]), r"x\[0\] is int 1, not a string"),
        (([["a", "b"], ["c", "d"]], [0, 1]), r"x must be a flat list of strings \(one "
         r"per example; a pair is a tuple of two lists\), got shape \(2, 2\)"),
        ((["good", None], [0, 1]), r"x\[1\] is NoneType"),
        ((np.array([1.5, 2.0]), [0, 1]), r"x\[0\] is float64 1.5, not a string"),
        ((["good", "  "], [0, 1]), r"x\[1\] is an empty text"),
        ((["good", "bad"], [0, 2]), r"label 2 of example 1 is outside 0..1"),
        ((["good", "bad"], [0]), r"2 texts and 1 labels"),
        ((["good", "bad"], ["pos", "neg"]), r"labels must be one integer class"),
        (((["good"], ["bad"]), [0]), r"reads one text per example; it was given pairs"),
    ]
    for (x, y), message in cases:
        with pytest.raises(TextInputError, match=message) as raised:
            model.fit(x, y, verbose=0)
        assert "\n" not in str(raised.value)
    assert model.optimizer.iterations.numpy() == before
    pair = AlbertTextClassifier.from_release(release, num_classes=2, pair=True,
                                             sequence_length=16)
    with pytest.raises(TextInputError, match="reads pairs of texts"):
        pair.predict(["one text"], verbose=0)
    unseen = AlbertTextClassifier.from_release(release, num_classes=2, sequence_length=16)
    with pytest.raises(TextInputError, match="fit or predict it first"):
        unseen.export("never-written")


FRESH = """
import json, sys
import albert_tf, keras
for path, texts in json.loads(sys.argv[1]):
    model = keras.models.load_model(path)
    print(json.dumps({"logits": model.predict(texts, verbose=0).tolist(),
                      "class": type(model).__name__, "pair": model.pair,
                      "kind": model.preprocessor.vocabulary_kind}))
"""


def test_keras_file_loads_in_a_fresh_process_with_its_vocabulary(release, chinese_release,
                                                                    tagger, tmp_path):
    """`.keras` holds the tokenizer file as an asset: `import albert_tf` and
    `keras.models.load_model` in a new process (the release gone) give the same
    logits, English SentencePiece and Chinese WordPiece, a token classifier's too
    (its word split kept); `from_release` of a text model's `.keras` file loads it
    as saved, refusing another kind's file or an argument the file does not hold; a
    model whose asset is gone refuses its first use in one line."""
    import zipfile

    tagger.predict(SENTENCES[:1], verbose=0)  # its word split decided
    tagger.save(tmp_path / "tagger.keras")
    saved = [(str(tmp_path / "tagger.keras"), SENTENCES)]
    expected = [tagger.predict(SENTENCES, verbose=0)]
    for directory, texts in ((release, WORDS[:3]), (chinese_release, CHINESE[:3])):
        copy = tmp_path / directory.name
        shutil.copytree(directory, copy)
        model = AlbertTextClassifier.from_release(copy, num_classes=2, sequence_length=16)
        expected.append(model.predict(texts, verbose=0))
        path = tmp_path / f"{directory.name}.keras"
        model.save(path)
        shutil.rmtree(copy)
        saved.append((str(path), texts))
    result = run_python(["-c", FRESH, json.dumps(saved)], cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    got = [json.loads(line) for line in result.stdout.strip().splitlines()[-3:]]
    assert [g["kind"] for g in got] == ["sentencepiece", "sentencepiece", "wordpiece"]
    assert [(g["class"], g["pair"]) for g in got] == [
        ("AlbertTextTokenClassifier", None), ("AlbertTextClassifier", False),
        ("AlbertTextClassifier", False)]
    for one, logits in zip(got, expected):
        np.testing.assert_allclose(one["logits"], logits, atol=1e-6)
    again = AlbertTextTokenClassifier.from_release(saved[0][0], num_classes=3)
    assert again.word_split == tagger.word_split == "whitespace"
    np.testing.assert_allclose(again.predict(SENTENCES, verbose=0), expected[0], atol=1e-6)
    classifier = AlbertTextClassifier.from_release(path)
    np.testing.assert_allclose(classifier.predict(CHINESE[:3], verbose=0), expected[2],
                               atol=1e-6)
    for make, message in (
            (lambda: AlbertTextClassifier.from_release(path, num_classes=3),
             r"is a saved AlbertTextClassifier, loaded as saved: it does not hold "
             r"num_classes=3$"),
            (lambda: AlbertTextMultipleChoice.from_release(saved[0][0]),
             r"holds an AlbertTextTokenClassifier, not an AlbertTextMultipleChoice: load "
             r"it with AlbertTextTokenClassifier.from_release$")):
        with pytest.raises(TextInputError, match=message):
            make()
    stripped = tmp_path / "stripped.keras"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(stripped, "w") as target:
        for item in source.infolist():
            if not item.filename.startswith("assets/"):
                target.writestr(item, source.read(item.filename))
    loaded = keras.models.load_model(stripped)  # Keras loads no assets where none are
    for use in (lambda: loaded.predict(CHINESE), lambda: loaded.fit(CHINESE, [0] * 5),
                lambda: loaded.export(str(tmp_path / "never"))):
        with pytest.raises(TextInputError, match=r"has no vocabulary \(vocab.txt\): a "
                           r"\.keras file saved without its assets/") as raised:
            use()
        assert "\n" not in str(raised.value)
    assert not (tmp_path / "never").exists()


def test_exports_take_text_and_answer_as_predict(release, chinese_release, tmp_path):
    """`export(format="tf_saved_model")`: `serve` on raw strings (a pair model: text_a,
    text_b) returns predict's logits; `format="litert"`: the file's `serve_text` too
    (1e-5). Chinese WordPiece too: predict = the id model on the records' ids = `serve`
    = the LiteRT file's `serve_text`."""
    model = AlbertTextClassifier.from_release(release, num_classes=2, pair=True,
                                              sequence_length=16)
    a, b = WORDS[:5], WORDS[3:]
    expected = model.predict((a, b), verbose=0)
    model.export(tmp_path / "saved")
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    got = loaded.serve(tf.constant(a), tf.constant(b)).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-5)
    signature = loaded.signatures["serving_default"]
    assert sorted(signature.structured_input_signature[1]) == ["text_a", "text_b"]
    # Quantized by Keras: its .keras file loads (the int8 layers made again); a
    # LiteRT file of it is refused in one line that names the exports it has.
    import warnings

    quantized = AlbertTextClassifier.from_release(release, num_classes=2, pair=True,
                                                  sequence_length=16)  # the same weights
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantized.quantize("int8")
    answers = quantized.predict((a, b), verbose=0)
    np.testing.assert_allclose(answers, expected, atol=0.05 * np.abs(expected).max())
    quantized.save(tmp_path / "quantized.keras")
    again = keras.models.load_model(tmp_path / "quantized.keras")
    np.testing.assert_allclose(again.predict((a, b), verbose=0), answers, atol=1e-6)
    with pytest.raises(TextInputError, match=r"quantized by Keras .* no LiteRT export: "
                       r"export the float model .* or this one as a SavedModel"):
        again.export(str(tmp_path / "never.tflite"), format="litert")
    pytest.importorskip("ai_edge_litert")
    from albert_tf.export import tflite_interpreter

    model.export(str(tmp_path / "model.tflite"), format="litert")
    runner = tflite_interpreter(str(tmp_path / "model.tflite")).get_signature_runner(
        "serve_text")
    for i in range(len(a)):  # one request per text pair
        out = runner(text_a=np.array([a[i]]), text_b=np.array([b[i]]))
        np.testing.assert_allclose(out[names.LOGITS][0], expected[i], atol=1e-5)

    zh = AlbertTextClassifier.from_release(chinese_release, num_classes=3,
                                           sequence_length=16)
    expected = zh.predict(CHINESE, verbose=0)
    python = FullTokenizer(vocab_file=str(chinese_release / "vocab.txt"))
    ids = records_inputs(python, [[t] for t in CHINESE], 16)
    np.testing.assert_allclose(zh.model(ids)[names.LOGITS].numpy(), expected, atol=1e-5)
    zh.export(tmp_path / "zh_saved")
    loaded = tf.saved_model.load(str(tmp_path / "zh_saved"))
    np.testing.assert_allclose(loaded.serve(tf.constant(CHINESE)).numpy(), expected,
                               atol=1e-5)
    zh.export(str(tmp_path / "zh.tflite"), format="litert")
    runner = tflite_interpreter(str(tmp_path / "zh.tflite")).get_signature_runner(
        "serve_text")
    for i, text in enumerate(CHINESE):
        out = runner(text_a=np.array([text]))
        np.testing.assert_allclose(out[names.LOGITS][0], expected[i], atol=1e-5)


def test_multiple_choice_on_raw_text_as_its_records(release, tmp_path):
    """`AlbertTextMultipleChoice`: (context, question, choices) with fewer options
    than num_choices in some rows, blanks filled by each option, an article cut to
    the length: predict is the id model on the multiple-choice records' ids (Python
    path) to 1e-5, absent options never chosen; fit takes the right option's index
    (more rows than a batch); the SavedModel's `serve` answers as predict; a LiteRT
    file is refused in one line; a label naming an absent option is refused."""
    from albert_tf.data import choice_records

    model = AlbertTextMultipleChoice.from_release(release, num_choices=3,
                                                  sequence_length=24, max_qa_length=8)
    contexts = ["The cat sat on the mat while the dog slept by the door all day long.",
                "Tom went to the market.", "It rained."]
    questions = ["Where did the cat sit? On the _.", "Who went?", ""]
    choices = [["mat", "door", "roof"], ["Tom", "Ann"], ["yes", "no", "maybe"]]
    logits = model.predict((contexts, questions, choices), verbose=0)
    assert logits.shape == (3, 3) and logits[1, 2] < -1e8  # the absent third option
    python = FullTokenizer(vocab_file=None, spm_model_file=str(release / "30k-clean.model"))
    records = [choice_records.convert_single_example(choice_records.ChoiceExample(
        str(i), c, [choice_records.make_ending(q, o) for o in opts], 0), 24, 8, python,
        num_choices=3) for i, (c, q, opts) in enumerate(zip(contexts, questions, choices))]
    ids = {names.RECORD_TO_MODEL[n]: np.array([getattr(r, n) for r in records])
           for n in names.RECORD_SEQUENCES}
    present = np.array([[1, 1, 1], [1, 1, 0], [1, 1, 1]], bool)
    np.testing.assert_allclose(model.model(ids)[names.LOGITS].numpy()[present],
                               logits[present], atol=1e-5)
    texts = {"context": contexts * 3, "question": questions * 3, "choices": choices * 3}
    history = model.fit(texts, [0, 1, 2] * 3, batch_size=4, verbose=0)
    assert int(model.optimizer.iterations) == 3 and "accuracy" in history.history
    with pytest.raises(TextInputError, match="label 2 of example 1 is not one of its 2 "
                       "choices"):
        model.fit((contexts, questions, choices), [0, 2, 1], verbose=0)
    with pytest.raises(TextInputError, match=r"choices\[0\] must be a list of 1 to "
                       r"num_choices=3 options"):
        model.predict((contexts[:1], questions[:1], [["a", "b", "c", "d"]]), verbose=0)
    expected = model.predict((contexts, questions, choices), verbose=0)
    model.export(tmp_path / "saved")
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    padded = tf.constant([row + [""] * (3 - len(row)) for row in choices])
    got = loaded.serve(tf.constant(contexts), tf.constant(questions), padded).numpy()
    np.testing.assert_allclose(got[present], expected[present], atol=1e-5)
    with pytest.raises(Exception, match="raw text in a LiteRT file is offered for the "
                       "kinds that pack one text or a pair") as raised:
        model.export(str(tmp_path / "never.tflite"), format="litert")
    assert "\n" not in str(raised.value)


def ner_records(tokenizer, sentences, sequence_length: int, tags=None):
    """run_ner.py's records of `sentences` (lists of words): `ner.file_features`, one
    window each here; (model inputs, label_ids, the word each position predicts)."""
    data = ner.NerFile("texts", "conll", [
        ner.NerSentence(words, None if tags is None else [str(t) for t in tags[i]], i)
        for i, words in enumerate(sentences)])
    features = ner.file_features(data, tokenizer, sequence_length, ["0", "1", "2"])
    assert [f.sentence for f in features] == list(range(len(sentences)))  # one window
    arrays = ner.feature_arrays(features)
    return ({k: arrays[k] for k in names.MODEL_INPUTS}, arrays["label_ids"],
            arrays["words"])


def assert_words_as_records(model, texts, tokenizer, sentences, atol=1e-5):
    """predict on `texts` = the id model on the NER records of `sentences` (their
    words), read at each word's first piece; zeros past the words."""
    got = model.predict(texts, verbose=0)
    assert got.shape == (len(texts), model.max_words, model.num_classes)
    inputs, _, words = ner_records(tokenizer, sentences, model.preprocessor.sequence_length)
    logits = model.model(inputs)[names.LOGITS].numpy()
    for row, sentence in enumerate(sentences):
        positions = np.flatnonzero(words[row] >= 0)
        np.testing.assert_array_equal(words[row][positions], np.arange(len(sentence)))
        np.testing.assert_allclose(got[row, :len(sentence)], logits[row, positions],
                                   atol=atol)
        assert not got[row, len(sentence):].any()
    return got


def test_token_classifier_predicts_as_the_ner_records(tagger, chinese_release):
    """predict on texts = the id model on run_ner.py's records of the same sentences,
    at each word's first piece (1e-5): English SentencePiece cut at whitespace; Chinese
    WordPiece given as characters (word_split decided "characters", as run_ner.py
    decides from a file of one-character words), then as raw text. A text longer than
    the window is cut: the words without a kept piece get zeros."""
    python = FullTokenizer(vocab_file=None, spm_model_file=tagger.preprocessor._file)
    words = [s.split() for s in SENTENCES]
    got = assert_words_as_records(tagger, SENTENCES, python, words)
    np.testing.assert_allclose(tagger.predict(words, verbose=0), got, atol=1e-6)
    assert tagger.word_split == "whitespace"
    long = " ".join(["unbelievably"] * 20)
    cut = tagger.predict([long], verbose=0)[0]
    first = len(ner.word_pieces(python, "unbelievably"))
    answered = -(-(tagger.max_words) // first)  # words with a first piece kept
    assert cut[:answered].any(-1).all() and not cut[answered:].any()
    zh = AlbertTextTokenClassifier.from_release(chinese_release, num_classes=3,
                                                sequence_length=16)
    zh_python = FullTokenizer(vocab_file=str(chinese_release / "vocab.txt"))
    characters = [[c for c in text if not c.isspace()] for text in CHINESE]
    assert_words_as_records(zh, characters, zh_python, [c[:14] for c in characters])
    assert zh.word_split == "characters"
    np.testing.assert_allclose(zh.predict(CHINESE, verbose=0),
                               zh.predict(characters, verbose=0), atol=1e-6)


def test_token_classifier_fits_with_the_scripts_loss(tagger):
    """evaluate's loss is the scripts' (`losses.token_classification_loss` on the NER
    records' label_ids: the mean over the labelled words), its accuracy that of
    predict's tags on the labelled words; fit on more rows than a batch lowers it;
    Keras' own compile (ignore_class=-1) trains too."""
    python = FullTokenizer(vocab_file=None, spm_model_file=tagger.preprocessor._file)
    words = [s.split() for s in SENTENCES]
    inputs, label_ids, _ = ner_records(python, words, 16, TAGS)
    expected = losses.token_classification_loss(tagger.model(inputs)[names.LOGITS],
                                                label_ids).numpy()
    result = tagger.evaluate(SENTENCES, TAGS, verbose=0, return_dict=True)
    assert result["loss"] == pytest.approx(expected, rel=1e-5)
    tags = tagger.predict(SENTENCES, verbose=0).argmax(-1)
    right = [t == tags[i, j] for i, row in enumerate(TAGS) for j, t in enumerate(row)]
    assert result["accuracy"] == pytest.approx(np.mean(right))
    tagger.learning_rate = 5e-3
    history = tagger.fit(SENTENCES * 3, TAGS * 3, batch_size=4, epochs=2, verbose=0)
    assert int(tagger.optimizer.iterations) == 6
    assert history.history["loss"][-1] < history.history["loss"][0]
    after = losses.token_classification_loss(tagger.model(inputs)[names.LOGITS],
                                             label_ids).numpy()
    assert after < expected
    dataset = tf.data.Dataset.from_tensor_slices((SENTENCES, tf.ragged.constant(TAGS)))
    with_data = tagger.evaluate(dataset.batch(4).map(lambda x, y: (x, y.to_tensor(-1))),
                                verbose=0, return_dict=True)  # [B, words] labels
    assert with_data["loss"] == pytest.approx(after, rel=1e-5)
    tagger.compile(optimizer=keras.optimizers.Adam(1e-3), loss=keras.losses.
                   SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1))
    history = tagger.fit(SENTENCES, TAGS, batch_size=4, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


def test_token_classifier_bad_input_is_one_line_before_any_step(tagger, release):
    tagger.predict(SENTENCES[:1], verbose=0)
    before = tagger.optimizer.iterations.numpy()
    cases = [
        ((SENTENCES[:2], [[0, 1], [0] * 5]), r"example 0 has 6 words \(word_split="
         r"'whitespace'\) and 2 labels"),
        ((SENTENCES[:2], TAGS[:1]), r"2 texts and 1 lists of labels"),
        ((SENTENCES[:1], [[0, 1, 3, 0, 0, 0]]), r"label 3 of word 2 of example 0 is "
         r"outside 0..2 \(num_classes=3; -1: not scored\)"),
        ((SENTENCES[:1], [["O"] * 6]), r"labels must be a list of integer classes"),
        (([1, 2], [[0], [0]]), r"x\[0\] is int 1, not a string"),
        ((["ok", " "], [[0], []]), r"x\[1\] is an empty text"),
        (((SENTENCES[:1], SENTENCES[:1]), TAGS[:1]), r"reads one text per example"),
        (([["New York", "is"]], [[1, 0]]), r"x\[0\]: word 0, 'New York', is not one "
         r"word as word_split='whitespace' cuts text"),
        (([["a", 3]], [[1, 0]]), r"x\[0\] \(words\)\[1\] is int 3"),
    ]
    for (x, y), message in cases:
        with pytest.raises(TextInputError, match=message) as raised:
            tagger.fit(x, y, verbose=0)
        assert "\n" not in str(raised.value)
    with pytest.raises(TextInputError, match="takes no sample_weight"):
        tagger.fit(SENTENCES, TAGS, sample_weight=[1.0] * 4, verbose=0)
    assert tagger.optimizer.iterations.numpy() == before
    with pytest.raises(TextInputError, match="word_split must be one of"):
        AlbertTextTokenClassifier.from_release(release, num_classes=3,
                                               word_split="words")


def test_token_classifier_export_answers_as_predict(tagger, tmp_path):
    """The SavedModel's `serve` on raw text returns predict's per-word logits (1e-5);
    a LiteRT file of raw text is refused in one line."""
    texts = SENTENCES + [" ".join(["unbelievably"] * 20)]
    expected = tagger.predict(texts, verbose=0)
    tagger.export(tmp_path / "saved")
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    np.testing.assert_allclose(loaded.serve(tf.constant(texts)).numpy(), expected,
                               atol=1e-5)
    with pytest.raises(TextInputError, match="no LiteRT export of raw text") as raised:
        tagger.export(str(tmp_path / "never.tflite"), format="litert")
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "never.tflite").exists()


# ------------------------------------------------------------ long texts, in windows
# Texts of 20 to 40 pieces: several windows of 14 at sequence_length=16.
LONG_TEXTS = ["the film was good " + "unbelievably wonderfully the plot and then " * 3,
              "a bad film",
              "the film was bad " + "extraordinarily long music and actors " * 4]


def louder(model, scale: float = 300.0):
    """The head's weights `scale` times larger, so that a tiny random encoder's windows
    answer visibly differently (a test at 1e-5 that pools the wrong windows fails)."""
    for weight in model.model.weights:
        if "output_weights" in weight.path:
            weight.assign(weight * scale)


def test_classifier_reads_long_texts_in_windows_as_the_records(release, tmp_path,
                                                               monkeypatch):
    """`long_text="windows"`: predict and evaluate are a row per text, the id model on
    the records' windows (`pack_windows`) pooled by `pool_windows` (the mean of the
    logits), to 1e-5 (the preprocessor packs with the exports' `serve_text` function:
    multi-label's pooling and Chinese WordPiece windows are tests/test_long_text.py's
    export cases); fit trains on each window with its text's label
    (ceil(windows / batch) steps); the `.keras` file keeps the setting; the SavedModel
    answers as predict; LiteRT is the scripts' export of a windows run (which cuts, with
    one warning); bad settings are one line."""
    from albert_tf.tasks.classification import CLASSIFICATION_POOLING

    python = FullTokenizer(vocab_file=None, spm_model_file=str(release / "30k-clean.model"))
    model = AlbertTextClassifier.from_release(release, num_classes=2, sequence_length=16,
                                              long_text="windows", learning_rate=1e-3)
    louder(model)
    got = model.predict(LONG_TEXTS, batch_size=2, verbose=0)
    windows, expected = window_outputs(model.model, python, LONG_TEXTS, 16, None,
                                       CLASSIFICATION_POOLING)
    index = windows[names.EXAMPLE_INDEX]
    assert np.bincount(index).tolist()[1] == 1 and len(index) >= 7
    spread = np.abs(windows[names.LOGITS] - expected[names.LOGITS][index]).max()
    assert spread > 1e-3, spread  # the windows differ: the first alone would not do
    np.testing.assert_allclose(got, expected[names.LOGITS], atol=1e-5)
    labels = [1, 0, 0]
    result = model.evaluate(LONG_TEXTS, labels, verbose=0, return_dict=True)
    assert result["accuracy"] == pytest.approx(np.mean(got.argmax(1) == labels))
    model.export(tmp_path / "saved")
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    np.testing.assert_allclose(loaded.serve(tf.constant(LONG_TEXTS)).numpy(), got,
                               atol=1e-5)
    model.fit(LONG_TEXTS * 2, labels * 2, batch_size=4, verbose=0)
    assert int(model.optimizer.iterations) == -(-2 * len(index) // 4)
    model.save(tmp_path / "windows.keras")
    again = keras.models.load_model(tmp_path / "windows.keras")
    assert (again.long_text, again.window_stride) == ("windows", None)
    np.testing.assert_allclose(again.predict(LONG_TEXTS, verbose=0),
                               model.predict(LONG_TEXTS, verbose=0), atol=1e-6)
    with pytest.raises(TextInputError, match=r"does not hold long_text='truncate'$"):
        AlbertTextClassifier.from_release(tmp_path / "windows.keras", long_text="truncate")

    for arguments, message in (
            ({"long_text": "cut"}, r"long_text must be one of truncate, windows, got 'cut'"),
            ({"window_stride": 4}, r"window_stride=4 is for long_text=windows"),
            ({"long_text": "windows", "window_stride": 14},
             r"window_stride=14 must be smaller than the window: sequence_length=16 gives "
             r"a text windows of 14 piece\(s\); give window_stride=7")):
        with pytest.raises(TextInputError, match=message) as raised:
            AlbertTextClassifier.from_release(release, num_classes=2, sequence_length=16,
                                              pair=False, **arguments)
        assert "\n" not in str(raised.value)
    pairs = AlbertTextClassifier.from_release(release, num_classes=2, sequence_length=16,
                                              long_text="windows", window_stride=6)
    with pytest.raises(TextInputError, match=r"window_stride=6 must be smaller than the "
                       r"window: sequence_length=16 gives a pair windows of 6"):
        pairs.predict((LONG_TEXTS, LONG_TEXTS), verbose=0)
    # LiteRT: the scripts' export of a windows run (it cuts, with one warning line:
    # tests/test_long_text.py), told so
    import albert_tf.export

    told = {}
    monkeypatch.setattr(albert_tf.export, "export_tflite",
                        lambda model, path, **kwargs: told.update(kwargs) or path)
    model.export(str(tmp_path / "cut.tflite"), format="litert")
    assert told["long_text"] == "windows" and told["max_seq_length"] == 16


# Questions over contexts of 3 to 40 pieces: several windows of 13 at sequence_length=24
# and max_qa_length=8 (some fewer pieces beside a shorter longest option), blanks, fewer
# options than num_choices, a context that fits.
LONG_QUESTIONS = [
    {"context": "the car was red " + "and then the plot went unbelievably long " * 3,
     "question": "the car was _ .", "choices": ["red", "blue", "green"]},
    {"context": "the car was red", "question": "which one?", "choices": ["red", "blue"]},
    {"context": "a film of " + "extraordinarily long music and actors " * 4,
     "question": "which colour was the car in the story at the end?",
     "choices": ["red", "blue"]},
    {"context": "the boat was green and " + "the sea was wonderfully calm " * 3,
     "question": "", "choices": ["green", "blue", "yellow"]},
    {"context": "it rained " * 9, "question": "what?", "choices": ["rain", "snow", "sun"]}]


def test_multiple_choice_reads_long_contexts_in_windows_as_the_records(release, tmp_path,
                                                                       monkeypatch):
    """`AlbertTextMultipleChoice` with `long_text="windows"`: predict is a row per
    question (more questions than a batch), the id model on the windows' records
    (`convert_example_windows`, as `run_classifier.py --long_text=windows` writes them)
    with each option's logit the mean of its windows', to 1e-5; fit trains on each
    window with its question's label (its loss the mean over windows, ceil(windows /
    batch) steps), and its `validation_data` (evaluate) scores a row per question (the
    loss and accuracy of the pooled logits; over several batches, the loss their mean
    over questions, not windows); the `.keras` file keeps the setting (and
    reads the same windows); the SavedModel answers as predict; LiteRT refuses the kind
    in one line, with no warning of cutting; a window that cannot be cut is refused in
    one line, before the model."""
    from albert_tf.tasks.multiple_choice import WINDOW_POOLING

    python = FullTokenizer(vocab_file=None, spm_model_file=str(release / "30k-clean.model"))
    model = AlbertTextMultipleChoice.from_release(
        release, num_choices=3, sequence_length=24, max_qa_length=8, long_text="windows",
        learning_rate=0.0, dropout_rate=0.0)  # (fit's loss: of the windows as predicted)
    louder(model, 3000.0)
    x = {key: [row[key] for row in LONG_QUESTIONS]
         for key in ("context", "question", "choices")}
    got = model.predict(x, batch_size=2, verbose=0)
    windows, expected = choice_window_outputs(model.model, python, LONG_QUESTIONS, 24, 8,
                                              None, WINDOW_POOLING)
    index = windows[names.EXAMPLE_INDEX]
    assert np.bincount(index)[1] == 1 and len(index) >= 10
    present = np.abs(windows[names.LOGITS]) < 1e8
    spread = np.abs(windows[names.LOGITS] - expected[names.LOGITS][index])[present].max()
    assert spread > 1e-3, spread  # the windows differ: the first alone would not do
    assert got.shape == (5, 3) and got[1, 2] < -1e8 and got[2, 2] < -1e8  # absent
    np.testing.assert_allclose(got, expected[names.LOGITS], atol=1e-5)
    labels = [0, 1, 1, 2, 0]
    model.export(tmp_path / "saved")
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    padded = tf.constant([row + [""] * (3 - len(row)) for row in x["choices"]])
    np.testing.assert_allclose(
        loaded.serve(tf.constant(x["context"]), tf.constant(x["question"]), padded).numpy(),
        got, atol=1e-5)
    # two batches of half the windows: an epoch of every window once, its loss the
    # mean of the windows' losses (not of the questions' pooled logits)
    window_loss, question_loss = (losses.classification_loss(
        logits, np.array(labels)[rows], per_example=True).numpy().mean() for logits, rows
        in ((windows[names.LOGITS], index), (expected[names.LOGITS], slice(None))))
    assert len(index) % 2 == 0 and abs(window_loss - question_loss) > 1e-4
    history = model.fit(x, labels, batch_size=len(index) // 2, verbose=0,
                        validation_data=(x, labels)).history  # (one batch of questions)
    assert int(model.optimizer.iterations) == 2
    assert history["loss"][0] == pytest.approx(window_loss, rel=1e-5)
    assert history["val_loss"][0] == pytest.approx(question_loss, rel=1e-5)
    assert history["val_accuracy"][0] == pytest.approx(np.mean(got.argmax(1) == labels))
    # evaluate over batches of 2, 2 and 1 questions: the mean over questions still
    assert model.evaluate(x, labels, batch_size=2, verbose=0)[0] == pytest.approx(
        losses.classification_loss(model.predict(x, verbose=0), np.array(labels),
                                   per_example=True).numpy().mean(), rel=1e-5)
    model.save(tmp_path / "windows.keras")
    again = keras.models.load_model(tmp_path / "windows.keras")
    assert (again.long_text, again.window_stride) == ("windows", None)
    splits = again.preprocessor((tf.constant(x["context"]), tf.constant(x["question"]),
                                 padded))[names.WINDOW_SPLITS]
    assert splits.numpy().tolist() == np.cumsum([0, *np.bincount(index)]).tolist()
    with pytest.raises(TextInputError, match=r"does not hold long_text='truncate'$"):
        AlbertTextMultipleChoice.from_release(tmp_path / "windows.keras",
                                              long_text="truncate")
    import albert_tf.export.tflite

    warned = []
    monkeypatch.setattr(albert_tf.export.tflite.logging, "warning",
                        lambda *args: warned.append(args))
    with pytest.raises(Exception, match="raw text in a LiteRT file is offered for the "
                       "kinds that pack one text or a pair") as raised:
        model.export(str(tmp_path / "never.tflite"), format="litert")
    assert "\n" not in str(raised.value) and not warned

    for arguments, message in (
            ({"long_text": "windows"},  # the default max_qa_length fills the 24
             r"long_text=windows: sequence_length=24 and max_qa_length=21 give a context "
             r"windows of 0 piece\(s\) \(beside the longest question \+ choice\), too few "
             r"to slide \(two at least\): give a larger sequence_length or a smaller "
             r"max_qa_length"),
            ({"long_text": "windows", "max_qa_length": 8, "window_stride": 13},
             r"window_stride=13 must be smaller than the window: sequence_length=24 and "
             r"max_qa_length=8 give a context windows of 13 piece\(s\) .*; give "
             r"window_stride=6 \(half the window\) or less"),
            ({"window_stride": 4}, r"window_stride=4 is for long_text=windows")):
        with pytest.raises(TextInputError, match=message) as raised:
            AlbertTextMultipleChoice.from_release(release, num_choices=3,
                                                  sequence_length=24, **arguments)
        assert "\n" not in str(raised.value)
