"""SavedModel export: every kind's signatures, reloaded in a fresh process, equal the
Keras model; versioning; strict checkpoint loading before anything is written."""

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest
import tensorflow as tf
from conftest import FIXTURE_CHECKPOINT, FIXTURE_DIR

from albert_tf.export import read_export_info
from albert_tf.modeling import real_tokens
from albert_tf.names import MODEL_TO_RECORD
from tests.helpers.forked import run_installed, run_python

REPO = pathlib.Path(__file__).resolve().parent.parent
SPM = str(REPO / "tests" / "fixtures" / "spm" / "albert_en_30k_reconstructed.model")
MAX_SEQ = 32
MAX_QUERY = 8

TEXTS_A = ["Hello world, this is a test.", "", " ".join(["a long sentence"] * 40),
           "Who wrote Pride and Prejudice in 1813?"]
# The original keeps `` (an unknown piece) and '' (two ' pieces): no rewriting to ".
QUOTED_CONTEXT = "he said ``quoted'' text, then wanted ''to see."
TEXTS_B = ["It is 1990, or so.", "Short.", "", " ".join(["another long one"] * 30)]

NER_LABELS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]

# kind -> (export kwargs for build_model, export_savedmodel kwargs)
CASES = {
    "classifier": ({"num_labels": 2}, {"task_name": "cola"}),  # single sentence
    "regression": ({"num_labels": 1}, {"task_name": "sts-b"}),  # pair
    "multiple_choice": ({"num_choices": 2}, {}),
    "squad_v1": ({}, {"max_query_length": MAX_QUERY}),
    "squad_v2": ({"start_n_top": 3, "end_n_top": 2}, {"max_query_length": MAX_QUERY}),
    "encoder": ({}, {}),
    "mlm": ({}, {}),
    "token_classifier": ({"num_labels": 5}, {"labels": NER_LABELS}),
}
# The signatures each case is also called with its request cut to no rows.
NO_ROWS = ("serving_default", "serve_examples", "serve_text")

RELOAD = r"""
import base64, json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the ops serve_text needs)
work = sys.argv[1]
with open(f"{work}/calls.json") as f:
    calls = json.load(f)
arrays = np.load(f"{work}/inputs.npz", allow_pickle=False)
loaded, results, strings_out = {}, {}, {}
for index, (path, signature, numeric, strings) in enumerate(calls):
    if path not in loaded:
        loaded[path] = tf.saved_model.load(path)
    inputs = {k: tf.constant(arrays[f"{index}/{k}"]) for k in numeric}
    for k, (shape, values) in strings.items():
        texts = np.array([base64.b64decode(v) for v in values], dtype=object)
        inputs[k] = tf.constant(texts.reshape(shape), dtype=tf.string)
    outputs = loaded[path].signatures[signature](**inputs)
    for k, v in outputs.items():
        v = v.numpy()
        if v.dtype == object:  # strings (NER tags): base64 in JSON, never pickle
            strings_out[f"{index}/{k}"] = [list(v.shape),
                                           [base64.b64encode(x).decode() for x in v.ravel()]]
        else:
            results[f"{index}/{k}"] = v
np.savez(f"{work}/results.npz", **results)
with open(f"{work}/strings.json", "w") as f:
    json.dump(strings_out, f)
"""


def call_in_a_fresh_process(calls: dict, work: pathlib.Path,
                            environment: dict | None = None) -> dict:
    """{key: (SavedModel path, signature, inputs)} -> {key: outputs}, every SavedModel
    loaded in a new process (as a server would), in order. Numbers travel as .npz,
    strings as base64 in JSON (exact bytes, invalid UTF-8 included): no pickle.
    `environment` is added to the process's (the preloaded interpreter it is forked from
    has run no TensorFlow kernel, so variables read at the first one take effect)."""
    import base64

    keys = list(calls)
    manifest, numeric = [], {}
    for index, key in enumerate(keys):
        path, signature, inputs = calls[key]
        strings = {}
        for name, value in inputs.items():
            value = np.asarray(value)
            if value.dtype == object:
                raw = [v.encode() if isinstance(v, str) else v for v in value.ravel()]
                strings[name] = [list(value.shape),
                                 [base64.b64encode(v).decode() for v in raw]]
            else:
                numeric[f"{index}/{name}"] = value
        manifest.append([str(path), signature,
                         [n for n in inputs if n not in strings], strings])
    (work / "calls.json").write_text(json.dumps(manifest))
    np.savez(work / "inputs.npz", **numeric)
    run_python(["-c", RELOAD, work], cwd=work, check=True,
               env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(environment or {})})
    results = {k: {} for k in keys}
    with np.load(work / "results.npz", allow_pickle=False) as saved:
        for name in saved.files:
            index, output = name.split("/", 1)
            results[keys[int(index)]][output] = saved[name]
    for name, (shape, values) in json.loads((work / "strings.json").read_text()).items():
        index, output = name.split("/", 1)
        results[keys[int(index)]][output] = np.array(
            [base64.b64decode(v) for v in values], dtype=object).reshape(shape)
    return results


def read_warmup_requests(path):
    from albert_tf.export.warmup import read_warmup_requests

    return read_warmup_requests(path)


def warmup_path(path):
    from albert_tf.export.warmup import warmup_path

    return warmup_path(path)


def _kind(case):
    return "classifier" if case == "regression" else case


@pytest.fixture(scope="module")
def config():
    from tests.helpers.tiny import tiny_config

    return tiny_config()


@pytest.fixture(scope="module")
def exported(config, tmp_path_factory):
    """case -> (model, version dir)."""
    from albert_tf.export import build_model, export_savedmodel

    root = tmp_path_factory.mktemp("export")
    out = {}
    for case, (model_kwargs, export_kwargs) in CASES.items():
        model = build_model(_kind(case), config, seed=3, **model_kwargs)
        path = export_savedmodel(model, root / case, kind=_kind(case), spm_model_file=SPM,
                                 max_seq_length=MAX_SEQ, **export_kwargs)
        out[case] = (model, path)
    return out


def _python_tokenizer():
    from albert_tf.tokenization import FullTokenizer

    return FullTokenizer(spm_model_file=SPM, do_lower_case=True)


def _pack(segments):
    from albert_tf.text import pack_inputs

    t = _python_tokenizer()
    ragged = []
    for texts in segments:
        ids = [t.encode(x) for x in texts]
        ragged.append(tf.RaggedTensor.from_row_lengths(
            np.array(sum(ids, []), np.int32), [len(x) for x in ids]))
    return {k: v.numpy() for k, v in pack_inputs(
        ragged, MAX_SEQ, cls_id=t.special_id("[CLS]"), sep_id=t.special_id("[SEP]"),
        pad_id=t.special_id("pad")).items()}


def _squad_pack(questions, contexts):
    """The original's packing of one window, in Python."""
    t = _python_tokenizer()
    cls, sep = t.special_id("[CLS]"), t.special_id("[SEP]")
    rows = []
    for q, c in zip(questions, contexts):
        q_ids = t.encode(q)[:MAX_QUERY]
        c_ids = t.encode(c)[:MAX_SEQ - 3 - len(q_ids)]
        ids = [cls] + q_ids + [sep] + c_ids + [sep]
        types = [0] * (len(q_ids) + 2) + [1] * (len(c_ids) + 1)
        p_mask = [0] + [1] * (len(q_ids) + 1) + [0] * len(c_ids) + [1]
        rows.append((ids, types, p_mask))
    length = max(len(r[0]) for r in rows)
    pad = lambda xs, v: xs + [v] * (length - len(xs))  # noqa: E731
    return {"input_word_ids": np.array([pad(r[0], 0) for r in rows], np.int32),
            "input_mask": np.array([pad([1] * len(r[0]), 0) for r in rows], np.int32),
            "input_type_ids": np.array([pad(r[1], 0) for r in rows], np.int32),
            "p_mask": np.array([pad(r[2], 1) for r in rows], np.float32)}


def _choice_pack(articles, questions, options, max_qa_length, max_seq_length=MAX_SEQ):
    """The multiple-choice records' packing, in Python: each ending's (question with
    option) last max_qa_length pieces, the article's first pieces that still fit; an
    empty option is an absent choice (zeros); [B, C, longest]."""
    from albert_tf.data.choice_records import make_ending

    t = _python_tokenizer()
    cls, sep = t.special_id("[CLS]"), t.special_id("[SEP]")
    rows = []
    for article, question, row in zip(articles, questions, options):
        for option in row:
            if option == "":
                rows.append(([], []))
                continue
            b = t.encode(make_ending(question, option))[-max_qa_length:]
            a = t.encode(article)[:max_seq_length - 3 - len(b)]
            rows.append(([cls] + a + [sep] + b + [sep], [0] * (len(a) + 2) + [1] * (len(b) + 1)))
    length = max(len(ids) for ids, _ in rows)
    pad = lambda xs: xs + [0] * (length - len(xs))  # noqa: E731
    shape = (len(articles), len(options[0]), length)
    return {"input_word_ids": np.array([pad(i) for i, _ in rows], np.int32).reshape(shape),
            "input_mask": np.array([pad([1] * len(i)) for i, _ in rows],
                                   np.int32).reshape(shape),
            "input_type_ids": np.array([pad(t) for _, t in rows], np.int32).reshape(shape)}


def _random_inputs(case, config, rng, batch=3, length=9):
    """Rows of 6 to 9 pieces, two segments; SQuAD v2's p_mask marks the question (1, 2)
    and the padding."""
    from tests.helpers.tiny import random_inputs

    inputs = random_inputs(config, batch, length, rng, min_length=6, second_segment_from=3,
                           num_choices=2 if case == "multiple_choice" else None,
                           masked_lm_predictions=2 if case == "mlm" else None)
    if case == "squad_v2":
        inputs["p_mask"] = (1 - inputs["input_mask"]).astype(np.float32)
        inputs["p_mask"][:, 1:3] = 1
    return inputs


def _examples(case, inputs):
    """Serialized tf.Examples, each row unpadded (RACE: all choices padded to the
    example's longest, flattened: examples of different lengths in one batch)."""
    out = []
    for i in range(len(inputs["input_word_ids"])):
        if case == "multiple_choice":
            keep = slice(0, int(inputs["input_mask"][i].sum(-1).max()))
        else:
            keep = slice(0, int(inputs["input_mask"][i].sum()))
        feature = {}
        for name, value in inputs.items():
            row = value[i] if name == "masked_lm_positions" else value[i][..., keep]
            values = np.asarray(row).astype(np.int64).reshape(-1)
            feature[MODEL_TO_RECORD.get(name, name)] = tf.train.Feature(
                int64_list=tf.train.Int64List(value=values))
        out.append(tf.train.Example(features=tf.train.Features(feature=feature))
                   .SerializeToString())
    return np.array(out, dtype=object)


def _ner_pack(texts, tokenizer=None, word_split="whitespace", max_seq_length=MAX_SEQ):
    """The NER features' packing of one window, in Python: the words of
    `data.ner.split_words`, each tokenized on its own (`word_pieces`), the first
    max_seq_length - 2 pieces; with the word's offsets and first-piece flag per
    position."""
    from albert_tf.data.ner import split_words, word_pieces
    from albert_tf.text import pack_inputs

    t = tokenizer or _python_tokenizer()
    rows, extras = [], []
    for text in texts:
        ids, starts, ends, first = [], [], [], []
        for word, start, end in split_words(text, word_split):
            pieces = t.convert_tokens_to_ids(word_pieces(t, word))
            ids += pieces
            starts += [start] * len(pieces)
            ends += [end] * len(pieces)
            first += [1] + [0] * (len(pieces) - 1) if pieces else []
        budget = max_seq_length - 2
        rows.append(ids[:budget])
        extras.append((starts[:budget], ends[:budget], first[:budget]))
    packed = {k: v.numpy() for k, v in pack_inputs(
        [tf.ragged.constant(rows, tf.int32, row_splits_dtype=tf.int64)], max_seq_length,
        cls_id=t.special_id("[CLS]"), sep_id=t.special_id("[SEP]"),
        pad_id=t.special_id("pad")).items()}
    length = packed["input_word_ids"].shape[1]
    for name, index, pad in (("token_start_char", 0, -1), ("token_end_char", 1, -1),
                             ("word_start", 2, 0)):
        packed[name] = np.array([[pad] + list(e[index]) + [pad] * (length - 1 - len(e[index]))
                                 for e in extras], np.int32)
    return packed


def _text_inputs(case):
    if case == "token_classifier":
        return {"text": TEXTS_A}
    if case in ("squad_v1", "squad_v2"):
        return {"question": TEXTS_A, "context": TEXTS_B}
    if case == "multiple_choice":
        # TEXTS_A[1] and TEXTS_B[2] are "": absent choices.
        return {"context": TEXTS_A, "question": ["Which _ is it?", "", "what", "who?"],
                "choices": [[b, a] for a, b in zip(TEXTS_A, TEXTS_B)]}
    if case == "classifier":
        return {"text_a": TEXTS_A}
    return {"text_a": TEXTS_A, "text_b": TEXTS_B}


def _text_model_inputs(case):
    if case == "token_classifier":
        return _ner_pack(TEXTS_A)
    if case in ("squad_v1", "squad_v2"):
        return _squad_pack(TEXTS_A, TEXTS_B)
    if case == "multiple_choice":  # max_qa_length 128, capped at MAX_SEQ - 3
        texts = _text_inputs(case)
        return _choice_pack(texts["context"], texts["question"], texts["choices"],
                            MAX_SEQ - 3)
    inputs = _pack([TEXTS_A] if case == "classifier" else [TEXTS_A, TEXTS_B])
    if case == "mlm":
        length = inputs["input_word_ids"].shape[1]
        inputs["masked_lm_positions"] = np.tile(np.arange(length, dtype=np.int32),
                                                (len(TEXTS_A), 1))
    return inputs


def _expected(case, model, inputs):
    from albert_tf.export import serving_kinds

    model_inputs = dict(inputs)
    if case == "squad_v1":
        model_inputs.pop("p_mask", None)
    model_inputs = {k: v for k, v in model_inputs.items()
                    if k not in ("word_start", "token_start_char", "token_end_char")}
    outputs = model({k: tf.constant(v) for k, v in model_inputs.items()}, training=False)
    return {**{k: np.asarray(outputs[k]) for k in serving_kinds()[_kind(case)].outputs
               if k in outputs}, "_mask": np.asarray(inputs["input_mask"], bool)}


def real_positions(value, mask):
    """An output's values at real tokens alone when it has one per position (the
    export computes on real tokens only: a padded position holds the head's output
    on zeros, not the padded computation's)."""
    return value[mask] if value.shape[:mask.ndim] == mask.shape else value


@pytest.fixture(scope="module")
def reloaded(config, exported, tmp_path_factory):
    """Every signature of every case, called in a fresh process; and what to expect."""
    rng = np.random.default_rng(0)
    calls, expected = {}, {}
    for case, (model, path) in exported.items():
        inputs = _random_inputs(case, config, rng)
        calls[(case, "serving_default")] = (path, "serving_default", inputs)
        expected[(case, "serving_default")] = _expected(case, model, inputs)
        calls[(case, "serve_examples")] = (path, "serve_examples",
                                          {"examples": _examples(case, inputs)})
        expected[(case, "serve_examples")] = expected[(case, "serving_default")]
        calls[(case, "serve_text")] = (path, "serve_text", {
            k: np.array(v, dtype=object) for k, v in _text_inputs(case).items()})
        text_inputs = _text_model_inputs(case)
        expected[(case, "serve_text")] = {**_expected(case, model, text_inputs),
                                          "_inputs": text_inputs}
        for signature in NO_ROWS:  # the same requests, cut to no rows
            calls[(case, f"{signature}:no_rows")] = (path, signature, {
                k: v[:0] for k, v in calls[(case, signature)][2].items()})
    for case, (_, path) in exported.items():  # TF Serving's warmup request replays
        logs = read_warmup_requests(warmup_path(path))
        assert len(logs) == 1
        request = logs[0].predict_log.request
        assert request.model_spec.signature_name == "serving_default"
        calls[(case, "warmup")] = (path, "serving_default", {
            k: tf.make_ndarray(v) for k, v in request.inputs.items()})
    calls[("squad_v1", "quotes")] = (exported["squad_v1"][1], "serve_text", {
        "question": np.array([b"what?"], dtype=object),
        "context": np.array([QUOTED_CONTEXT.encode()], dtype=object)})
    calls[("squad_v2", "empty")] = (exported["squad_v2"][1], "serve_text", {
        "question": np.array([b"", b""], dtype=object),
        "context": np.array([b"", b""], dtype=object)})
    return call_in_a_fresh_process(calls, tmp_path_factory.mktemp("reload")), expected


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("signature", ["serving_default", "serve_examples", "serve_text"])
def test_signature_matches_keras_model(reloaded, case, signature):
    results, expected = reloaded
    got, want = results[(case, signature)], dict(expected[(case, signature)])
    packed, mask = want.pop("_inputs", None), want.pop("_mask")
    for name, value in want.items():
        assert name in got, f"{signature} lacks {name}: {sorted(got)}"
        assert got[name].shape == value.shape, name
        served, value = real_positions(got[name], mask), real_positions(value, mask)
        if value.dtype.kind in "iu":
            np.testing.assert_array_equal(served, value, err_msg=name)
        else:
            assert np.isfinite(got[name]).all(), name
            np.testing.assert_allclose(served, value, atol=1e-5, rtol=1e-5, err_msg=name)
    if signature == "serve_text":
        width = packed["input_word_ids"].shape[-1]
        assert width <= MAX_SEQ
        if case in ("squad_v1", "squad_v2"):
            for name in ("input_word_ids", "input_mask", "input_type_ids", "p_mask"):
                np.testing.assert_array_equal(got[name], packed[name], err_msg=name)
            np.testing.assert_array_equal(
                got["context_start"],
                [min(len(_python_tokenizer().encode(q)), MAX_QUERY) + 2 for q in TEXTS_A])
            assert_offsets_locate_the_context_pieces(got)
        if case == "mlm":
            np.testing.assert_array_equal(got["input_word_ids"], packed["input_word_ids"])
        if case == "token_classifier":
            for name in ("input_mask", "word_start", "token_start_char", "token_end_char"):
                np.testing.assert_array_equal(got[name], packed[name], err_msg=name)
            np.testing.assert_array_equal(
                got["tags"].astype(str), np.array(NER_LABELS)[got["predictions"]])


def assert_offsets_locate_the_context_pieces(got):
    """token_start_char / token_end_char: -1 off the context, else the raw text of the
    piece at that position (what the tokenizer's own offsets give)."""
    from albert_tf.text import AlbertTextTokenizer

    tokenizer = AlbertTextTokenizer(spm_model_file=SPM, with_offsets=True)
    ids, starts, ends = tokenizer.tokenize_with_offsets(TEXTS_B)
    for row, context in enumerate(TEXTS_B):
        first = got["context_start"][row]
        in_context = np.flatnonzero(got["token_start_char"][row] >= 0)
        n = len(in_context)
        np.testing.assert_array_equal(in_context, np.arange(first, first + n))
        assert (got["token_end_char"][row][got["token_start_char"][row] < 0] == -1).all()
        assert got["input_word_ids"][row][in_context].tolist() == ids[row][:n].numpy().tolist()
        assert got["token_start_char"][row][in_context].tolist() == \
            starts[row][:n].numpy().tolist()
        assert got["token_end_char"][row][in_context].tolist() == ends[row][:n].numpy().tolist()
    texts = [TEXTS_B[0][a:b] for a, b in zip(got["token_start_char"][0],
                                              got["token_end_char"][0]) if a >= 0]
    assert texts == ["It", "is", "1990", ",", "or", "so", "."]


def test_serve_text_truncates_long_and_handles_empty(reloaded):
    results, _ = reloaded
    got = results[("classifier", "serve_text")]
    assert got["probabilities"].shape == (len(TEXTS_A), 2)
    squad = results[("squad_v2", "serve_text")]
    assert squad["input_word_ids"].shape == (len(TEXTS_A), MAX_SEQ)  # the long one is cut
    assert squad["input_mask"][3].sum() == MAX_SEQ
    empty = results[("squad_v2", "empty")]  # [CLS] [SEP] [SEP], padded for the beam
    np.testing.assert_array_equal(empty["input_mask"], [[1, 1, 1]] * 2)
    np.testing.assert_array_equal(empty["p_mask"], [[0, 1, 1]] * 2)
    assert empty["start_top_index"].shape == (2, 3)
    assert empty["end_top_index"].shape == (2, 6)
    assert np.isfinite(empty["cls_logits"]).all()
    np.testing.assert_array_equal(empty["token_start_char"], [[-1] * 3] * 2)


@pytest.mark.parametrize("case", list(CASES))
def test_a_request_of_no_rows_answers_no_rows(reloaded, case):
    """An empty batch (ids [0, S], no tf.Examples, no texts): every output of the full
    request, each with no rows and its own rank (a request of no rows packs to no
    positions; the model still gets its one position)."""
    results, _ = reloaded
    for signature in NO_ROWS:
        full, empty = results[(case, signature)], results[(case, f"{signature}:no_rows")]
        assert sorted(empty) == sorted(full), signature
        for name, value in empty.items():
            assert value.shape[0] == 0 and value.ndim == full[name].ndim, (signature, name)
            assert value.dtype == full[name].dtype, (signature, name)


def test_squad_offsets_keep_the_quotes_as_pieces(reloaded):
    """``quoted'' and '': every context piece's offsets give its raw text, the quotes
    included (`` is one unknown piece, '' two ' pieces), and the ids are the Python
    tokenizer's."""
    results, _ = reloaded
    got = results[("squad_v1", "quotes")]
    in_context = got["token_start_char"][0] >= 0
    texts = [QUOTED_CONTEXT[a:b] for a, b in zip(got["token_start_char"][0][in_context],
                                                  got["token_end_char"][0][in_context])]
    # A lone "▁" piece (the space before a quote) spans nothing.
    assert texts == ["he", "said", "", "``", "quo", "ted", "'", "'", "text", ",", "then",
                     "wanted", "", "'", "'", "to", "see", "."]
    assert got["input_word_ids"][0][in_context].tolist() == \
        _python_tokenizer().encode(QUOTED_CONTEXT)


@pytest.mark.parametrize("case", list(CASES))
def test_warmup_request_runs(reloaded, case):
    results, _ = reloaded
    got = results[(case, "warmup")]
    from albert_tf.export import serving_kinds

    assert sorted(got) == sorted(k for k in serving_kinds()[_kind(case)].outputs
                                 if case != "regression" or k != "probabilities")
    for value in got.values():
        assert np.isfinite(value).all()


def test_extras_and_saved_model_cli(exported):
    path = exported["classifier"][1]
    extra = pathlib.Path(path) / "assets.extra"
    info = json.loads((extra / "export_info.json").read_text())  # the documented path
    assert info["kind"] == "classifier" and info["max_seq_length"] == MAX_SEQ
    assert info["do_lower_case"] is True and info["is_pair"] is False
    assert info["warmup_requests"] is True
    assert sorted(info["signatures"]) == ["serve_examples", "serve_text", "serving_default"]
    assert (extra / "labels.txt").read_text() == "0\n1\n"
    assert json.loads((extra / "albert_config.json").read_text())["hidden_size"] == 16
    assert not (pathlib.Path(exported["regression"][1]) / "assets.extra" / "labels.txt").exists()
    assert (pathlib.Path(exported["multiple_choice"][1]) / "assets.extra" /
            "labels.txt").read_text() == "A\nB\n"
    choice_info = read_export_info(exported["multiple_choice"][1])
    assert choice_info["num_choices"] == 2
    assert choice_info["max_qa_length"] == MAX_SEQ - 3  # 128 does not fit in MAX_SEQ
    assert "max_qa_length" not in info and info["num_labels"] == 2
    assert [p.name for p in (pathlib.Path(path) / "assets").iterdir()] == \
        ["albert_en_30k_reconstructed.model"]
    shown = run_installed("saved_model_cli", ["show", "--dir", path, "--all"],
                          check=True).stdout
    for name in ("serving_default", "serve_examples", "serve_text", "probabilities",
                 "input_word_ids", "examples", "text_a"):
        assert name in shown


def _gradient_ops(saved_model_dir) -> dict[str, int]:
    """{signature: the custom-gradient ops (`_gradient_op_type`) in the functions it
    calls}, and under "" those of the whole function library."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((pathlib.Path(saved_model_dir) / "saved_model.pb").read_bytes())
    graph = saved.meta_graphs[0].graph_def
    library = {f.signature.name: f.node_def for f in graph.library.function}
    nodes = {node.name: node for node in graph.node}

    def counted(node_list, seen):
        found = 0
        for node in node_list:
            found += "_gradient_op_type" in node.attr
            for value in node.attr.values():
                name = value.func.name
                if name and name not in seen:
                    seen.add(name)
                    found += counted(library[name], seen)
        return found

    counts = {"": sum("_gradient_op_type" in n.attr for f in library.values() for n in f)}
    for name, signature in saved.meta_graphs[0].signature_def.items():
        if name.startswith("__"):  # __saved_model_init_op
            continue
        calls = [nodes[n] for n in {t.name.split(":")[0] for t in signature.outputs.values()}]
        counts[name] = counted(calls, set())
    return counts


def test_serving_graphs_hold_no_gradient_functions(exported):
    """Nothing differentiates a serving signature: GELU and LayerNorm are traced there
    without their gradient functions (`fused.without_gradients`), which the SavedModel
    would otherwise trace and keep; a reusable export's `__call__` (the encoder's, the
    MLM's), which fine-tuning differentiates, keeps them."""
    from albert_tf.export.kinds import serving_kinds

    for case, (_, path) in exported.items():
        counts = _gradient_ops(path)
        signatures = {k: v for k, v in counts.items() if k}
        assert sorted(signatures) == sorted(read_export_info(path)["signatures"]), case
        assert not any(signatures.values()), (case, counts)
        assert (counts[""] > 0) == serving_kinds()[_kind(case)].reusable, (case, counts)


def test_versions_increment_and_never_overwrite(exported, config, tmp_path):
    from albert_tf.export import ExportError, export_savedmodel, next_version

    model, path = exported["encoder"]
    root = pathlib.Path(path).parent
    assert pathlib.Path(path).name == "1"
    second = export_savedmodel(model, root, kind="encoder", max_seq_length=MAX_SEQ)
    assert pathlib.Path(second).name == "2"
    loaded_info = read_export_info(second)
    assert sorted(loaded_info["signatures"]) == ["serve_examples", "serving_default"]
    before = sorted(os.listdir(root))
    with pytest.raises(ExportError, match="never overwritten"):
        export_savedmodel(model, root, kind="encoder", max_seq_length=MAX_SEQ, version=1)
    assert sorted(os.listdir(root)) == before  # no temporary directory left
    (root / "7").mkdir()
    (root / "notanumber").mkdir()
    assert next_version(root) == 8
    assert next_version(tmp_path / "nothing") == 1
    with pytest.raises(ExportError, match="AlbertClassifier"):
        export_savedmodel(model, tmp_path / "x", kind="classifier")
    assert not (tmp_path / "x").exists()


def test_bfloat16_export_answers_in_float32_close_to_the_float32_model(
        exported, config, tmp_path, caplog):
    """serving_precision="bfloat16": a copy of the model with its weights stored in
    bfloat16 (LayerNorm's in float32) answers as the mixed_bfloat16 model does (its
    matmuls in bfloat16), float32 outputs close to the float32 model's; export_info.json
    says so; a CPU without bfloat16 instructions gets a warning; an unknown precision is
    refused before anything is written."""
    import tensorflow_text  # noqa: F401

    from albert_tf.export import ExportError, export_savedmodel
    from albert_tf.export.savedmodel import cpu_flags, in_serving_precision, with_dtype_policy

    model, _ = exported["classifier"]
    with pytest.raises(ExportError, match="unknown serving precision 'float16'"):
        export_savedmodel(model, tmp_path / "bad", kind="classifier", task_name="cola",
                          spm_model_file=SPM, max_seq_length=MAX_SEQ,
                          serving_precision="float16")
    assert not (tmp_path / "bad").exists()
    path = export_savedmodel(model, tmp_path / "bf16", kind="classifier", task_name="cola",
                             spm_model_file=SPM, max_seq_length=MAX_SEQ,
                             serving_precision="bfloat16")
    info = read_export_info(path)
    assert info["serving_precision"] == "bfloat16"
    assert info["signatures"]["serve_text"]["outputs"]["logits"]["dtype"] == "float32"
    assert info["signatures"]["serving_default"]["inputs"]["input_word_ids"] == {
        "dtype": "int32", "shape": [None, None]}
    assert list(info["signatures"]["serve_text"]["inputs"]) == ["text_a"]
    flags = cpu_flags()
    lacks = flags is not None and not flags & {"avx512_bf16", "amx_bf16"}
    assert ("multiplies bfloat16 slower" in caplog.text) == lacks
    inputs = _random_inputs("classifier", config, np.random.default_rng(1), batch=4)
    served = tf.saved_model.load(path).signatures["serving_default"](
        **{k: tf.constant(v) for k, v in inputs.items()})
    want = model(inputs, training=False)
    assert served["probabilities"].dtype == tf.float32
    np.testing.assert_allclose(served["probabilities"], want["probabilities"], atol=0.02)
    assert not np.array_equal(served["logits"], want["logits"])  # computed in bfloat16
    # The weights rounded to bfloat16 once, at export, give the numbers of rounding them
    # at every request (Keras' mixed_bfloat16 policy): the same in process, and within
    # bfloat16's summation-order noise served.
    mixed = with_dtype_policy(model, "mixed_bfloat16")
    stored_once = in_serving_precision(model, "bfloat16")
    with real_tokens.inference_graph():
        again, same = (tf.function(lambda x, m=m: m(x, training=False))(inputs)
                       for m in (mixed, stored_once))
    np.testing.assert_array_equal(same["probabilities"], again["probabilities"])
    np.testing.assert_allclose(served["probabilities"], again["probabilities"], atol=1e-4)
    stored = tf.train.load_checkpoint(str(pathlib.Path(path) / "variables" / "variables"))
    dtypes = {name: dtype for name, dtype in stored.get_variable_to_dtype_map().items()
              if name.endswith("VARIABLE_VALUE")}
    in_float32 = sorted(name for name, dtype in dtypes.items() if dtype == tf.float32)
    assert in_float32 and all("layer_norm" in name for name in in_float32), in_float32
    assert {dtype for name, dtype in dtypes.items() if name not in in_float32} == {
        tf.bfloat16}
    text = tf.saved_model.load(path).signatures["serve_text"](text_a=tf.constant(TEXTS_A))
    assert text["probabilities"].shape == (len(TEXTS_A), 2)


def test_bfloat16_exports_answer_right_in_their_serving_environment(
        exported, config, tmp_path):
    """export_info.json's serving_environment for bfloat16 (TensorFlow's oneDNN MatMuls
    keep their first call's copy of their weights): a classifier and a SQuAD v2.0 export
    (whose beam multiplies request tensors) in bfloat16 answer requests of other rows
    and values, after the first, as the mixed_bfloat16 model does. In the same process a
    control shows the setting at work where TensorFlow runs oneDNN: a MatMul with bias
    of two request tensors answers its second request with the first's weights.
    float32 exports name no setting."""
    from tensorflow.python.util import _pywrap_util_port

    from albert_tf.export import SERVING_ENVIRONMENTS, export_savedmodel
    from albert_tf.export.savedmodel import with_dtype_policy

    def environment(path):
        return read_export_info(path)["serving_environment"]

    assert environment(exported["classifier"][1]) == {}
    control = tf.Module()
    control.f = tf.function(lambda a, b, c: tf.nn.bias_add(tf.matmul(a, b), c),
                            input_signature=[tf.TensorSpec([None, 8]),
                                             tf.TensorSpec([8, 8]), tf.TensorSpec([8])])
    tf.saved_model.save(control, str(tmp_path / "control"), signatures=control.f)
    rng = np.random.default_rng(5)
    a, b1, b2, c = (rng.standard_normal(shape).astype(np.float32)
                    for shape in ([2, 8], [8, 8], [8, 8], [8]))
    calls = {("control", 0): (tmp_path / "control", "serving_default",
                              {"a": a, "b": b1, "c": c}),
             ("control", 1): (tmp_path / "control", "serving_default",
                              {"a": a, "b": b2, "c": c})}
    expected = {}
    for case in ("classifier", "squad_v2"):
        model, _ = exported[case]
        path = export_savedmodel(model, tmp_path / case, kind=_kind(case),
                                 spm_model_file=SPM, max_seq_length=MAX_SEQ,
                                 serving_precision="bfloat16", warmup_requests=False,
                                 **CASES[case][1])
        assert environment(path) == SERVING_ENVIRONMENTS["bfloat16"] != {}
        mixed = with_dtype_policy(model, "mixed_bfloat16")
        for index, (batch, length) in enumerate([(4, 9), (1, 6), (3, MAX_SEQ)]):
            inputs = _random_inputs(case, config, rng, batch=batch, length=length)
            calls[(case, index)] = (path, "serving_default", inputs)
            expected[(case, index)] = _expected(case, mixed, inputs)
    (tmp_path / "work").mkdir()
    results = call_in_a_fresh_process(calls, tmp_path / "work",
                                      SERVING_ENVIRONMENTS["bfloat16"])
    for key, want in expected.items():
        mask = want.pop("_mask")
        for name, value in want.items():
            np.testing.assert_allclose(real_positions(results[key][name], mask),
                                       real_positions(value, mask), atol=2e-3,
                                       err_msg=f"{key} {name}")
    second = results[("control", 1)]["output_0"]
    stale = np.allclose(second, a @ b1 + c, atol=1e-3)
    assert stale == _pywrap_util_port.IsMklEnabled()
    assert stale != np.allclose(second, a @ b2 + c, atol=1e-3)


def test_checkpoint_mismatch_fails_before_writing(tmp_path):
    from albert_tf.checkpoints import CheckpointError
    from albert_tf.export import load_model_from_checkpoint

    config_file = str(FIXTURE_DIR / "albert_config.json")
    model = load_model_from_checkpoint("mlm", config_file, FIXTURE_CHECKPOINT)
    assert not model.load_report.missing
    with pytest.raises(CheckpointError):  # a pretraining checkpoint has no classifier head
        load_model_from_checkpoint("classifier", config_file, FIXTURE_CHECKPOINT,
                                   num_labels=2)
    other = json.loads((FIXTURE_DIR / "albert_config.json").read_text())
    other["intermediate_size"] += 8
    (tmp_path / "other.json").write_text(json.dumps(other))
    with pytest.raises(CheckpointError):
        load_model_from_checkpoint("encoder", tmp_path / "other.json", FIXTURE_CHECKPOINT)

    export_dir = tmp_path / "serving"
    result = run_python(
        [REPO / "export_savedmodel.py", "--kind=classifier",
         f"--albert_config_file={config_file}", f"--checkpoint={FIXTURE_CHECKPOINT}",
         "--task_name=MRPC", f"--export_dir={export_dir}"],
        cwd=tmp_path, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode != 0
    assert "error:" in result.stderr
    assert not export_dir.exists()


def test_script_exports_a_checkpoint(tmp_path):
    """--max_seq_length left at its default (512) is cut to the model's
    max_position_embeddings (64 in the fixture's config) for the SavedModel and for the
    preprocessor beside it alike (a value given beyond them is refused:
    test_reusable_export.py, test_tflite.py)."""
    export_dir = tmp_path / "serving"
    result = run_python(
        [REPO / "export_savedmodel.py", "--kind=encoder",
         f"--albert_config_file={FIXTURE_DIR / 'albert_config.json'}",
         f"--checkpoint={FIXTURE_CHECKPOINT}", f"--spm_model_file={SPM}",
         f"--export_dir={export_dir}", f"--export_preprocessor={tmp_path / 'preprocess'}"],
        cwd=tmp_path, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(os.listdir(export_dir)) == ["1"]
    longest = json.loads((FIXTURE_DIR / "albert_config.json").read_text())[
        "max_position_embeddings"]
    info = read_export_info(export_dir / "1")
    assert info["kind"] == "encoder" and info["max_seq_length"] == longest
    info = read_export_info(tmp_path / "preprocess" / "1")
    assert info["seq_length"] == info["max_seq_length"] == longest


def test_wordpiece_export_serves_text(tmp_path):
    """A WordPiece vocabulary (the Chinese models') travels as the asset and serve_text
    tokenizes with it exactly as the Python tokenizer; SQuAD exports refuse it."""
    from albert_tf.export import ExportError, build_model, export_savedmodel
    from albert_tf.text import pack_inputs
    from albert_tf.tokenization import FullTokenizer
    from tests.helpers.paths import REAL_TEXT
    from tests.helpers.text_cases import make_wordpiece_vocab
    from tests.helpers.tiny import tiny_config

    chinese = ["中文的句子，还有标点。", "我们在北京大学学习。"]
    vocab = make_wordpiece_vocab(tmp_path / "vocab.txt", REAL_TEXT[:40] + chinese)
    python = FullTokenizer(vocab_file=vocab, do_lower_case=True)
    config = tiny_config(vocab_size=python.vocab_size, num_hidden_layers=1)
    model = build_model("classifier", config, seed=5, num_labels=3)
    path = export_savedmodel(model, tmp_path / "wordpiece", kind="classifier",
                             vocab_file=vocab, max_seq_length=MAX_SEQ, is_pair=True)
    info = read_export_info(path)
    assert info["tokenizer"] == "wordpiece"
    assert [p.name for p in (pathlib.Path(path) / "assets").iterdir()] == ["vocab.txt"]

    texts_a = REAL_TEXT[40:43] + chinese[:1]
    texts_b = chinese[1:] + ["snowman ☃ unknown"] + TEXTS_B[:2]
    calls = {"text": (path, "serve_text", {"text_a": np.array(texts_a, dtype=object),
                                           "text_b": np.array(texts_b, dtype=object)})}
    got = call_in_a_fresh_process(calls, tmp_path)["text"]

    segments = [tf.ragged.constant([python.encode(t) for t in texts], tf.int32)
                for texts in (texts_a, texts_b)]
    packed = pack_inputs(segments, MAX_SEQ, cls_id=python.special_id("[CLS]"),
                         sep_id=python.special_id("[SEP]"), pad_id=python.special_id("pad"))
    assert any(python.vocab["[UNK]"] in python.encode(t) for t in texts_a + texts_b)
    want = model(packed, training=False)
    np.testing.assert_allclose(got["probabilities"], want["probabilities"], atol=1e-5)

    with pytest.raises(ExportError, match="spm_model_file"):
        export_savedmodel(build_model("squad_v1", config, seed=5), tmp_path / "squad",
                          kind="squad_v1", vocab_file=vocab, max_seq_length=MAX_SEQ)
    assert not (tmp_path / "squad").exists()


# A RACE question whose first ending is longer than max_qa_length, and a C3-like one
# with three choices (the fourth absent) and a blank to fill.
RACE_ARTICLE = "the article is about a cat that sat on the mat and then went to sleep. " * 3
RACE_QUESTIONS = ["which animal sat on the mat before it went to sleep in the sun?",
                  "the _ went to sleep"]
RACE_OPTIONS = [["the cat", "a dog", "nobody", "the cat sat on the mat"],
                ["cat", "dog", "mat", ""]]
RACE_MAX_QA = 6


def _race_records():
    """What data.choice_records.convert_single_example writes for the questions:
    [2, 4, MAX_SEQ]."""
    from albert_tf.data import choice_records

    python = _python_tokenizer()
    rows = []
    for question, options in zip(RACE_QUESTIONS, RACE_OPTIONS):
        endings = [choice_records.make_ending(question, o) for o in options if o]
        example = choice_records.ChoiceExample("q", RACE_ARTICLE, endings, 0)
        rows.append(choice_records.convert_single_example(example, MAX_SEQ, RACE_MAX_QA,
                                                          python))
    assert len(python.encode(choice_records.make_ending(RACE_QUESTIONS[0], RACE_OPTIONS[0][0]))) \
        > RACE_MAX_QA  # the ending is cut
    return {"input_word_ids": np.array([f.input_ids for f in rows], np.int32),
            "input_mask": np.array([f.input_mask for f in rows], np.int32),
            "input_type_ids": np.array([f.segment_ids for f in rows], np.int32)}


def _race_text():
    return {"context": [RACE_ARTICLE] * 2, "question": RACE_QUESTIONS,
            "choices": RACE_OPTIONS}


def test_multiple_choice_text_packs_as_the_records():
    """The multiple-choice kind packs text in the graph into the ids of the records: the
    ending's last max_qa_length pieces, the article's first pieces that still fit, the
    option in the question's blank, absent choices all zeros."""
    from albert_tf.export import serving_kinds
    from albert_tf.export.serving_text import TextSettings
    from albert_tf.text import AlbertTextTokenizer

    settings = TextSettings(max_seq_length=MAX_SEQ, max_qa_length=RACE_MAX_QA, num_choices=4)
    packed = serving_kinds()["multiple_choice"].pack_text(
        AlbertTextTokenizer(spm_model_file=SPM), settings,
        {k: tf.constant(v) for k, v in _race_text().items()}).inputs
    for name, want in _race_records().items():
        got = packed[name].numpy()  # [2, 4, longest packed choice]
        np.testing.assert_array_equal(got, want[..., :got.shape[-1]], err_msg=name)
        assert not want[..., got.shape[-1]:].any(), name  # the rest is the records' padding
    assert not packed["input_mask"].numpy()[1, 3].any()  # the absent choice


def test_multiple_choice_export_serves_the_records_packing(tmp_path):
    """serve_text of a multiple-choice export gives the logits of the records (and not
    those of longest-first packing); an absent choice is never predicted; fewer choices
    than the export's are padded, more are refused; export_info records max_qa_length."""
    from albert_tf.export import build_model, export_savedmodel
    from tests.helpers.tiny import tiny_config

    # A wide initializer: logits that tell one packing from another.
    config = tiny_config(num_hidden_layers=1, initializer_range=1.0)
    model = build_model("multiple_choice", config, seed=3, num_choices=4)
    path = export_savedmodel(model, tmp_path / "race", kind="multiple_choice",
                             spm_model_file=SPM, max_seq_length=MAX_SEQ,
                             max_qa_length=RACE_MAX_QA, warmup_requests=False)
    info = read_export_info(path)
    assert info["max_qa_length"] == RACE_MAX_QA and info["num_choices"] == 4

    text = {k: np.array(v, dtype=object) for k, v in _race_text().items()}
    three = {**text, "choices": text["choices"][:, :3]}
    calls = {"text": (path, "serve_text", text), "three": (path, "serve_text", three)}
    results = call_in_a_fresh_process(calls, tmp_path)
    got = results["text"]

    want = model({k: tf.constant(v) for k, v in _race_records().items()},
                 training=False)["logits"].numpy()
    np.testing.assert_allclose(got["logits"], want, atol=1e-5, rtol=1e-5)
    assert got["probabilities"][1, 3] == 0 and want[1, 3] < -1e8
    np.testing.assert_allclose(results["three"]["logits"][:, :3], want[:, :3], atol=1e-5)
    assert (results["three"]["logits"][:, 3] < -1e8).all()
    from albert_tf.data.choice_records import make_ending

    endings = [make_ending(RACE_QUESTIONS[0], o) for o in RACE_OPTIONS[0]]
    longest_first = {k: v.reshape(1, 4, -1)
                     for k, v in _pack([[RACE_ARTICLE] * 4, endings]).items()}
    other = model({k: tf.constant(v) for k, v in longest_first.items()},
                  training=False)["logits"].numpy()
    assert np.abs(other - want[:1]).max() > 1e-3
    five = {**text, "choices": np.concatenate([text["choices"], text["choices"][:, :1]], 1)}
    with pytest.raises(subprocess.CalledProcessError) as refused:
        call_in_a_fresh_process({"five": (path, "serve_text", five)}, tmp_path)
    assert "at most 4 choices per question" in refused.value.stderr


def test_failed_export_leaves_nothing(exported, monkeypatch):
    """A failure while the version is written removes its temporary directory."""
    from albert_tf.export import export_savedmodel, savedmodel

    model, path = exported["encoder"]
    root = pathlib.Path(path).parent
    before = sorted(os.listdir(root))

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(savedmodel, "_write_extras", fail)
    with pytest.raises(OSError, match="disk full"):
        export_savedmodel(model, root, kind="encoder", max_seq_length=MAX_SEQ)
    assert sorted(os.listdir(root)) == before


def test_token_classifier_serves_entities_of_raw_chinese_text(tmp_path):
    """A character-level NER export with the real Chinese WordPiece vocabulary: in a
    fresh process serve_text packs raw text as the NER features (every character a
    word), and `serving_entities` gives the spans that the Keras model's word tags
    give, with their text."""
    from albert_tf.data.ner import serving_entities, spans_of
    from albert_tf.export import build_model, export_savedmodel
    from albert_tf.tokenization import FullTokenizer
    from tests.helpers.tiny import tiny_config

    vocab = REPO / "tests" / "fixtures" / "ner" / "vocab_chinese.txt"
    python = FullTokenizer(vocab_file=str(vocab), do_lower_case=True)
    model = build_model("token_classifier", tiny_config(vocab_size=python.vocab_size),
                        seed=11, num_labels=len(NER_LABELS))
    path = export_savedmodel(model, tmp_path / "ner", kind="token_classifier",
                             vocab_file=str(vocab), max_seq_length=MAX_SEQ,
                             labels=NER_LABELS, word_split="characters")
    info = read_export_info(path)
    assert info["word_split"] == "characters" and info["labels"] == NER_LABELS
    texts = ["浙商银行企业信贷部叶老桂博士则从另一个角度对五道门槛进行了解读。",
             "  北京 2019年 Google 公司 ", "", "中" * 50]
    calls = {"text": (path, "serve_text", {"text": np.array(texts, dtype=object)})}
    got = call_in_a_fresh_process(calls, tmp_path)["text"]

    packed = _ner_pack(texts, python, "characters")
    for name in ("input_mask", "word_start", "token_start_char", "token_end_char"):
        np.testing.assert_array_equal(got[name], packed[name], err_msg=name)
    assert got["input_mask"][3].sum() == MAX_SEQ  # cut to one window
    predictions = np.asarray(model({k: packed[k] for k in
                                    ("input_word_ids", "input_mask", "input_type_ids")},
                                   training=False)["predictions"])
    found = 0
    for i, text in enumerate(texts):
        starts = np.flatnonzero(packed["word_start"][i])
        tags = [NER_LABELS[p] for p in predictions[i][starts]]
        begin, end = packed["token_start_char"][i][starts], packed["token_end_char"][i][starts]
        want = [(t, int(begin[a]), int(end[b]), text[begin[a]:end[b]])
                for t, a, b in spans_of(tags)]
        assert serving_entities(text, got, i) == want
        found += len(want)
    assert found > 0  # a random head tags something: the comparison is not empty


def assert_refused(result: subprocess.CompletedProcess, message: str) -> None:
    """A script's refusal of bad arguments: exit status 1 and one line, `error: <message>`,
    as the last of its stderr, no traceback."""
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == f"error: {message}"


def run_classifier_refusing(tmp_path, *flags) -> subprocess.CompletedProcess:
    """run_classifier.py asked to train MRPC (the fixture's rows) with `flags`, which it
    must refuse before any work: asserts that it made no --output_dir (it would hold
    the checkpoints)."""
    from tests.helpers.paths import FIXTURES
    from tests.helpers.scripts import run_script

    out = tmp_path / "run_out"
    result = run_script("run_classifier.py", "--task_name=MRPC", "--do_train",
                        f"--data_dir={FIXTURES / 'glue'}", f"--output_dir={out}",
                        f"--albert_config_file={FIXTURE_DIR / 'albert_config.json'}",
                        f"--spm_model_file={SPM}", "--max_seq_length=32",
                        "--train_batch_size=2", "--train_step=1", *flags, check=False)
    assert not out.exists()
    return result


def test_an_export_dir_that_is_a_file_is_refused_before_any_work(tmp_path):
    """An --export_dir (--export_preprocessor, --export_hf_dir) that is a file, or lies
    under one: one line naming the flag and the file before any model is loaded or any
    training starts; nothing is written and the file is unchanged. From Python,
    export_savedmodel and export_preprocessor raise ExportError before writing."""
    import re

    from albert_tf.apps.session import check_exports
    from albert_tf.errors import UsageError
    from albert_tf.export import (
        ExportError,
        build_model,
        check_export_dir,
        export_preprocessor,
        export_savedmodel,
    )
    from albert_tf.tasks.options import RunOptions
    from tests.helpers.scripts import run_script
    from tests.helpers.tiny import tiny_config

    in_the_way = tmp_path / "serving"
    in_the_way.write_text("a file\n")
    under = in_the_way / "sub"
    is_a_file = f"{in_the_way} is a file, not a directory: an export's version " \
        "directories go in a directory"
    under_a_file = f"{in_the_way} is a file, so {under} cannot be a directory for an " \
        "export's versions"
    model = build_model("encoder", tiny_config(), seed=1)
    with pytest.raises(ExportError, match=re.escape(is_a_file)):
        export_savedmodel(model, in_the_way, kind="encoder", max_seq_length=MAX_SEQ)
    with pytest.raises(ExportError, match=re.escape(under_a_file)):
        export_preprocessor(under, spm_model_file=SPM)
    with pytest.raises(ExportError, match=re.escape(is_a_file)):
        check_export_dir(f"{in_the_way}/", version=3)

    checkpoint = [f"--albert_config_file={FIXTURE_DIR / 'albert_config.json'}",
                  f"--checkpoint={FIXTURE_CHECKPOINT}", f"--spm_model_file={SPM}"]
    assert_refused(run_script("export_savedmodel.py", "--kind=encoder", *checkpoint,
                              f"--export_dir={in_the_way}", check=False),
                   f"--export_dir: {is_a_file}")
    assert_refused(run_script("export_savedmodel.py", "--kind=encoder", *checkpoint,
                              f"--export_dir={tmp_path / 'new'}",
                              f"--export_preprocessor={under}", check=False),
                   f"--export_preprocessor: {under_a_file}")
    assert_refused(run_script("export_savedmodel.py", "--kind=preprocessor",
                              f"--spm_model_file={SPM}", f"--export_dir={in_the_way}",
                              check=False),
                   f"--export_dir: {is_a_file}")
    assert_refused(run_classifier_refusing(tmp_path, f"--export_dir={in_the_way}"),
                   f"--export_dir: {is_a_file}")

    # --export_hf_dir (run_* scripts): a file, or a directory that holds something
    # already (save_hf_checkpoint's rule), is refused with the others before training.
    assert_refused(run_classifier_refusing(tmp_path, f"--export_hf_dir={in_the_way}"),
                   f"--export_hf_dir: {in_the_way} is a file; the Hugging Face export "
                   "is a directory")
    full = tmp_path / "hf"
    full.mkdir()
    (full / "config.json").write_text("{}\n")
    options = RunOptions(spm_model_file=SPM)
    with pytest.raises(UsageError, match=re.escape(
            f"--export_hf_dir: {full} exists and is not empty; an export is never "
            "written over")):
        check_exports(options.replace(export_hf_dir=str(full)), "classifier")
    with pytest.raises(UsageError,
                       match=re.escape(f"--export_hf_dir: {in_the_way} is a file")):
        check_exports(options.replace(export_hf_dir=str(under)), "classifier")
    (tmp_path / "empty").mkdir()  # an empty directory is taken (and replaced)
    check_exports(options.replace(export_hf_dir=str(tmp_path / "empty")), "classifier")

    assert in_the_way.read_text() == "a file\n"
    assert (full / "config.json").read_text() == "{}\n"
    assert sorted(os.listdir(tmp_path)) == ["empty", "hf", "serving"]
