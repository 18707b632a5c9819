"""Fine-tuning task models: the ORIGINAL scripts' variable names, checkpoints and formulas.

The head variables below were read from google-research/albert: classifier_utils.py
`create_model` (GLUE), race_utils.py `create_model` (RACE), squad_utils.py
`create_v1_model` and `create_v2_model` (SQuAD). They are listed here by hand, apart
from the layout module, and every head is checked against a numpy restatement of the
original's formulas computed from the checkpoint's arrays.
"""

import functools
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import FIXTURE_CHECKPOINT, FIXTURE_DIR, model_inputs

from albert_tf import (
    AlbertClassifier,
    AlbertMultipleChoice,
    AlbertSquadV1,
    AlbertSquadV2,
    CheckpointError,
    load_tf1_checkpoint,
    losses,
    save_tf1_checkpoint,
)
from albert_tf.modeling import tf1_variables
from tests.helpers import tiny

ATOL = 1e-5
H = 16


# The task models' encoder (no dropout, the default): a 60-piece vocabulary.
config = functools.partial(tiny.tiny_config, vocab_size=60, hidden_size=H,
                           max_position_embeddings=32)


CONFIG = config()

# What each original fine-tuning graph adds to `bert/` for H = 16 (tf.layers.dense:
# kernel [in, out] and bias; contrib layer_norm: beta, gamma; `use_bias=False` on
# answer_class/dense_1).
HEADS = {
    "classifier": {"output_weights": (3, H), "output_bias": (3,)},
    "regression": {"output_weights": (1, H), "output_bias": (1,)},
    "race": {"output_weights": (1, H), "output_bias": (1,)},
    "squad_v1": {"cls/squad/output_weights": (2, H), "cls/squad/output_bias": (2,)},
    "squad_v2": {
        "start_logits/dense/kernel": (H, 1),
        "start_logits/dense/bias": (1,),
        "end_logits/dense_0/kernel": (2 * H, H),
        "end_logits/dense_0/bias": (H,),
        "end_logits/LayerNorm/beta": (H,),
        "end_logits/LayerNorm/gamma": (H,),
        "end_logits/dense_1/kernel": (H, 1),
        "end_logits/dense_1/bias": (1,),
        "answer_class/dense_0/kernel": (2 * H, H),
        "answer_class/dense_0/bias": (H,),
        "answer_class/dense_1/kernel": (H, 1),
    },
}
TASKS = sorted(HEADS)


def build(task, cfg=CONFIG, seed=0, **kwargs):
    if task == "classifier":
        return AlbertClassifier(cfg, num_labels=3, seed=seed, **kwargs)
    if task == "regression":
        return AlbertClassifier(cfg, num_labels=1, seed=seed, **kwargs)
    if task == "race":
        return AlbertMultipleChoice(cfg, num_choices=4, seed=seed, **kwargs)
    if task == "squad_v1":
        return AlbertSquadV1(cfg, seed=seed, **kwargs)
    return AlbertSquadV2(cfg, start_n_top=4, end_n_top=3, seed=seed, **kwargs)


def layout_head(task, cfg=CONFIG):
    return {
        "classifier": lambda: tf1_variables.classifier_variables(cfg, 3),
        "regression": lambda: tf1_variables.classifier_variables(cfg, 1),
        "race": lambda: tf1_variables.multiple_choice_variables(cfg),
        "squad_v1": lambda: tf1_variables.squad_v1_variables(cfg),
        "squad_v2": lambda: tf1_variables.squad_v2_variables(cfg),
    }[task]()


def model_variables(model):
    return {w.path: tuple(w.shape) for w in model.weights}


def random_tensors(names_and_shapes, seed):
    """A checkpoint's worth of random, non-trivial arrays (LayerNorm gammas near 1)."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in sorted(names_and_shapes.items()):
        value = rng.normal(0.0, 0.3, shape)
        if name.endswith("gamma"):
            value += 1.0
        tensors[name] = value.astype(np.float32)
    return tensors


def write_tf1_checkpoint(prefix, tensors):
    """A name-based checkpoint as the original's Saver writes it: the variables plus
    AdamW slots and global_step (which loading must skip)."""
    extra = {"global_step": np.array(1000, np.int64)}
    for name, value in tensors.items():
        extra[f"{name}/adam_m"] = np.zeros_like(value)
        extra[f"{name}/adam_v"] = np.ones_like(value)
    everything = {**tensors, **extra}
    names = sorted(everything)
    tf.raw_ops.SaveV2(prefix=str(prefix), tensor_names=names,
                      shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(everything[n]) for n in names])
    return str(prefix)


# Rows that end in padding, and their lengths (a row of shorter inputs is full).
PADDED_ROWS = {1: 9, 2: 11, 3: 7}


def encoder_inputs(batch=3, length=12, seed=0, choices=None):
    """Two segments (type 1 from position 4 on), rows 1 to 3 padded."""
    rows = batch * (choices or 1)
    return tiny.random_inputs(CONFIG, batch, length, seed, num_choices=choices,
                              lengths=[PADDED_ROWS.get(i, length) for i in range(rows)],
                              second_segment_from=4)


def squad_p_mask(inputs):
    """p_mask as the original: 0 on [CLS] and the paragraph, 1 on the question
    (positions 1..3), the last [SEP] and padding."""
    mask = inputs["input_mask"]
    p_mask = 1 - mask
    p_mask[:, 1:4] = 1
    for row, length in enumerate(mask.sum(1)):
        p_mask[row, length - 1] = 1
    return p_mask.astype(np.int32)


def race_inputs(batch=2, choices=4, length=10, seed=0):
    return encoder_inputs(batch, length, seed, choices)


def task_inputs(task, seed=0):
    if task == "race":
        return race_inputs(seed=seed)
    inputs = encoder_inputs(seed=seed)
    if task == "squad_v2":
        inputs["p_mask"] = squad_p_mask(inputs)
    return inputs


# ------------------------------------------------------------------ numpy references
def np_log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def np_softmax(x):
    return np.exp(np_log_softmax(x))


def np_dense(x, t, scope, tanh=False, bias=True):
    y = x @ t[f"{scope}/kernel"].astype(np.float64)
    if bias:
        y = y + t[f"{scope}/bias"]
    return np.tanh(y) if tanh else y


def np_layer_norm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * gamma + beta


def np_p_masked(logits, p_mask):
    return logits * (1 - p_mask) - 1e30 * p_mask


def np_squad_v2(t, seq, p_mask, start_positions=None, start_n_top=4, end_n_top=3):
    """create_v2_model written out position by position, in float64."""
    seq, p_mask = seq.astype(np.float64), p_mask.astype(np.float64)
    batch, length, _ = seq.shape
    start_masked = np_p_masked(np_dense(seq, t, "start_logits/dense")[..., 0], p_mask)
    start_log_probs = np_log_softmax(start_masked)

    def end_log_probs(b, s):  # [S]: every end given start s of example b
        pairs = np.concatenate([seq[b], np.repeat(seq[b, s][None], length, 0)], -1)
        x = np_dense(pairs, t, "end_logits/dense_0", tanh=True)
        x = np_layer_norm(x, t["end_logits/LayerNorm/gamma"], t["end_logits/LayerNorm/beta"])
        return np_log_softmax(np_p_masked(np_dense(x, t, "end_logits/dense_1")[:, 0],
                                          p_mask[b]))

    out = {"start_log_probs": start_log_probs}
    if start_positions is not None:
        out["end_log_probs"] = np.stack([end_log_probs(b, start_positions[b])
                                         for b in range(batch)])
    else:
        top_lp, top_ix, end_lp, end_ix = [], [], [], []
        for b in range(batch):
            starts = np.argsort(-start_log_probs[b], kind="stable")[:start_n_top]
            top_ix.append(starts)
            top_lp.append(start_log_probs[b, starts])
            row_lp, row_ix = [], []
            for s in starts:
                ends = end_log_probs(b, s)
                best = np.argsort(-ends, kind="stable")[:end_n_top]
                row_ix.extend(best)
                row_lp.extend(ends[best])
            end_lp.append(row_lp)
            end_ix.append(row_ix)
        out.update(start_top_log_probs=np.array(top_lp), start_top_index=np.array(top_ix),
                   end_top_log_probs=np.array(end_lp), end_top_index=np.array(end_ix))
    start_p = np_softmax(start_masked)
    features = np.concatenate([np.einsum("bs,bsh->bh", start_p, seq), seq[:, 0]], -1)
    features = np_dense(features, t, "answer_class/dense_0", tanh=True)
    out["cls_logits"] = np_dense(features, t, "answer_class/dense_1", bias=False)[:, 0]
    return out


# ------------------------------------------------------------------ variables
@pytest.mark.parametrize("task", TASKS)
def test_models_create_exactly_the_original_variables(task):
    expected = {**tf1_variables.encoder_variables(CONFIG), **HEADS[task]}
    assert model_variables(build(task)) == expected
    assert layout_head(task) == HEADS[task]


@pytest.mark.parametrize("task", TASKS)
def test_names_do_not_depend_on_model_names_or_nesting(task):
    class Wrapper(keras.layers.Layer):
        def build(self, input_shape):
            with keras.name_scope("somewhere"):
                self.inner = build(task, name="renamed")

        def call(self, x):
            return self.inner(x)

    wrapper = Wrapper(name="outer")
    wrapper(task_inputs(task))
    assert model_variables(wrapper) == {**tf1_variables.encoder_variables(CONFIG), **HEADS[task]}


# ------------------------------------------------------------------ checkpoints
@pytest.fixture(scope="module")
def finetuned(tmp_path_factory):
    """Per task: a model loaded from a TF1-style fine-tuned checkpoint of random arrays,
    the arrays, and the checkpoint's path."""
    cache = {}

    def get(task):
        if task not in cache:
            names = {**tf1_variables.encoder_variables(CONFIG), **HEADS[task]}
            tensors = random_tensors(names, seed=TASKS.index(task))
            path = write_tf1_checkpoint(tmp_path_factory.mktemp(task) / "model.ckpt-best",
                                        tensors)
            model = build(task, seed=99)
            report = load_tf1_checkpoint(model, path, strict=True)
            cache[task] = (model, tensors, path, report)
        return cache[task]

    return get


@pytest.mark.parametrize("task", TASKS)
def test_checkpoint_fine_tuned_by_the_original_loads_by_name(task, finetuned):
    model, tensors, _, report = finetuned(task)
    assert sorted(report.loaded) == sorted(tensors)
    assert report.missing == [] and report.unused == []
    assert "global_step" in report.skipped and f"{sorted(HEADS[task])[0]}/adam_m" in report.skipped
    for weight in model.weights:
        np.testing.assert_array_equal(weight.numpy(), tensors[weight.path], err_msg=weight.path)


@pytest.mark.parametrize("task", TASKS)
def test_save_then_load_round_trips(task, finetuned, tmp_path):
    model, tensors, _, _ = finetuned(task)
    path = save_tf1_checkpoint(model, tmp_path / "model.ckpt")
    assert {n: tuple(s) for n, s in tf.train.list_variables(path)} == {
        n: v.shape for n, v in tensors.items()}
    clone = build(task, seed=5)
    load_tf1_checkpoint(clone, path, strict=True)
    inputs = task_inputs(task)
    expected, got = model(inputs), clone(inputs)
    for key in expected:
        np.testing.assert_array_equal(got[key].numpy(), expected[key].numpy(), err_msg=key)


@pytest.mark.parametrize("task", TASKS)
def test_object_checkpoints_restore_every_weight(task, finetuned, tmp_path):
    model = finetuned(task)[0]
    path = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
    clone = build(task, seed=3)
    tf.train.Checkpoint(model=clone).restore(path).assert_consumed()
    for a, b in zip(model.weights, clone.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


@pytest.mark.parametrize("task", TASKS)
def test_pretraining_checkpoint_loads_the_encoder_and_not_the_head(task, tiny_config,
                                                                  fixture_inputs,
                                                                  fixture_outputs):
    model = build(task, cfg=tiny_config)
    head = layout_head(task, tiny_config)
    report = load_tf1_checkpoint(model, FIXTURE_CHECKPOINT)
    assert sorted(report.missing) == sorted(head)
    assert sorted(report.unused) == sorted({**tf1_variables.masked_lm_variables(tiny_config),
                                            **tf1_variables.sentence_order_variables(tiny_config)})
    with pytest.raises(CheckpointError, match="strict"):
        load_tf1_checkpoint(build(task, cfg=tiny_config), FIXTURE_CHECKPOINT, strict=True)
    out = model.encoder(model_inputs(fixture_inputs, with_positions=False))
    np.testing.assert_allclose(out["sequence_output"], fixture_outputs["sequence_output"],
                               atol=ATOL, rtol=0)
    np.testing.assert_allclose(out["pooled_output"], fixture_outputs["pooled_output"],
                               atol=ATOL, rtol=0)


def test_from_release_needs_the_encoder_but_not_the_head(tmp_path, fixture_inputs,
                                                         fixture_outputs, tiny_config):
    release = tmp_path / "albert_base"
    release.mkdir()
    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copy(FIXTURE_CHECKPOINT + suffix, release / ("model.ckpt-best" + suffix))
    shutil.copy(FIXTURE_DIR / "albert_config.json", release)
    model = AlbertClassifier.from_release(release, num_labels=2)
    assert model.num_labels == 2
    assert sorted(model.load_report.missing) == ["output_bias", "output_weights"]
    pooled = model.encoder(model_inputs(fixture_inputs, with_positions=False))["pooled_output"]
    np.testing.assert_allclose(pooled, fixture_outputs["pooled_output"], atol=ATOL, rtol=0)
    with pytest.raises(CheckpointError, match="strict"):
        AlbertSquadV2.from_release(release, strict=True)

    # A checkpoint that holds only a head is no release for a task model.
    head_only = tmp_path / "head_only"
    head_only.mkdir()
    shutil.copy(FIXTURE_DIR / "albert_config.json", head_only)
    write_tf1_checkpoint(head_only / "model.ckpt",
                         random_tensors(tf1_variables.classifier_variables(tiny_config, 2), 0))
    with pytest.raises(CheckpointError, match="not an ALBERT checkpoint of a known layout"):
        AlbertClassifier.from_release(head_only, num_labels=2)


# ------------------------------------------------------------------ numerics
def test_classifier_head_is_the_originals(finetuned):
    model, t, _, _ = finetuned("classifier")
    inputs = task_inputs("classifier")
    out = model(inputs)
    pooled = model.encoder(inputs)["pooled_output"].numpy().astype(np.float64)
    logits = pooled @ t["output_weights"].T + t["output_bias"]
    np.testing.assert_allclose(out["logits"], logits, atol=ATOL, rtol=0)
    np.testing.assert_allclose(out["probabilities"], np_softmax(logits), atol=ATOL, rtol=0)
    np.testing.assert_array_equal(out["predictions"], logits.argmax(-1))
    assert out["predictions"].dtype == tf.int32

    labels = np.array([2, 0, 1])
    expected = -np_log_softmax(logits)[np.arange(3), labels]
    np.testing.assert_allclose(losses.classification_loss(out["logits"], labels),
                               expected.mean(), atol=ATOL, rtol=0)
    np.testing.assert_allclose(
        losses.classification_loss(out["logits"], labels[:, None], per_example=True),
        expected, atol=ATOL, rtol=0)


def test_regression_head_is_the_originals(finetuned):
    model, t, _, _ = finetuned("regression")
    inputs = task_inputs("regression")
    out = model(inputs)
    assert set(out) == {"logits", "predictions"} and model.is_regression
    pooled = model.encoder(inputs)["pooled_output"].numpy().astype(np.float64)
    logits = (pooled @ t["output_weights"].T + t["output_bias"])[:, 0]
    assert out["logits"].shape == (3,)
    np.testing.assert_allclose(out["logits"], logits, atol=ATOL, rtol=0)
    np.testing.assert_array_equal(out["predictions"], out["logits"])
    labels = np.array([[0.5], [4.2], [2.0]], np.float32)  # [B, 1] must not broadcast
    np.testing.assert_allclose(losses.regression_loss(out["predictions"], labels),
                               np.mean((logits - labels[:, 0]) ** 2), atol=ATOL, rtol=0)


def test_multiple_choice_head_is_the_originals(finetuned):
    model, t, _, _ = finetuned("race")
    inputs = race_inputs()
    out = model(inputs)
    assert out["logits"].shape == (2, 4)
    flat = {k: v.reshape(8, 10) for k, v in inputs.items()}
    pooled = model.encoder(flat)["pooled_output"].numpy().astype(np.float64)
    logits = (pooled @ t["output_weights"].T + t["output_bias"]).reshape(2, 4)
    np.testing.assert_allclose(out["logits"], logits, atol=ATOL, rtol=0)
    np.testing.assert_allclose(out["probabilities"], np_softmax(logits), atol=ATOL, rtol=0)
    np.testing.assert_array_equal(out["predictions"], logits.argmax(-1))
    labels = np.array([3, 1])
    np.testing.assert_allclose(losses.classification_loss(out["logits"], labels),
                               -np_log_softmax(logits)[[0, 1], labels].mean(), atol=ATOL)


def test_squad_v1_head_is_the_originals_and_unmasked(finetuned):
    model, t, _, _ = finetuned("squad_v1")
    inputs = task_inputs("squad_v1")
    out = model(inputs)
    seq = model.encoder(inputs)["sequence_output"].numpy().astype(np.float64)
    logits = seq @ t["cls/squad/output_weights"].T + t["cls/squad/output_bias"]
    np.testing.assert_allclose(out["start_logits"], logits[..., 0], atol=ATOL, rtol=0)
    np.testing.assert_allclose(out["end_logits"], logits[..., 1], atol=ATOL, rtol=0)
    assert np.all(np.abs(out["start_logits"].numpy()) < 1e3)  # padding is not masked

    starts, ends = np.array([5, 6, 4]), np.array([[7], [8], [4]])
    expected = (-np_log_softmax(logits[..., 0])[np.arange(3), starts].mean()
                - np_log_softmax(logits[..., 1])[np.arange(3), ends[:, 0]].mean()) / 2
    np.testing.assert_allclose(
        losses.squad_v1_loss(out["start_logits"], out["end_logits"], starts, ends),
        expected, atol=ATOL, rtol=0)


def test_squad_v2_training_path_is_the_originals(finetuned):
    model, t, _, _ = finetuned("squad_v2")
    inputs = task_inputs("squad_v2")
    starts = np.array([[5], [4], [0]], np.int32)  # [B, 1] as the records hold them
    out = model({**inputs, "start_positions": starts})
    assert set(out) == {"start_log_probs", "end_log_probs", "cls_logits"}
    seq = model.encoder(inputs)["sequence_output"].numpy()
    ref = np_squad_v2(t, seq, inputs["p_mask"], start_positions=starts[:, 0])
    for key in out:
        np.testing.assert_allclose(out[key], ref[key], atol=ATOL, rtol=1e-6, err_msg=key)

    ends, impossible = np.array([7, 6, 0]), np.array([0, 0, 1])
    rows = np.arange(3)
    sigmoid_ce = (np.maximum(ref["cls_logits"], 0) - ref["cls_logits"] * impossible
                  + np.log1p(np.exp(-np.abs(ref["cls_logits"]))))
    expected = ((-ref["start_log_probs"][rows, starts[:, 0]].mean()
                 - ref["end_log_probs"][rows, ends].mean()) * 0.5 + 0.5 * sigmoid_ce.mean())
    got = losses.squad_v2_loss(out["start_log_probs"], out["end_log_probs"],
                               out["cls_logits"], starts, ends, impossible)
    np.testing.assert_allclose(got, expected, atol=ATOL, rtol=0)


def test_squad_v2_beam_search_is_the_originals(finetuned):
    model, t, _, _ = finetuned("squad_v2")
    inputs = task_inputs("squad_v2")
    out = model(inputs)
    assert out["start_top_index"].shape == (3, 4) and out["end_top_index"].shape == (3, 12)
    seq = model.encoder(inputs)["sequence_output"].numpy()
    ref = np_squad_v2(t, seq, inputs["p_mask"])
    for key in ("start_top_index", "end_top_index"):
        np.testing.assert_array_equal(out[key], ref[key], err_msg=key)
    for key in ("start_top_log_probs", "end_top_log_probs", "cls_logits", "start_log_probs"):
        np.testing.assert_allclose(out[key], ref[key], atol=ATOL, rtol=1e-6, err_msg=key)


def test_squad_v2_beams_agree_with_the_training_path(finetuned):
    # Entry i * end_n_top + j of the beams is end j of start i: the same numbers as the
    # training path conditioned on that start.
    model = finetuned("squad_v2")[0]
    inputs = task_inputs("squad_v2")
    beams = model(inputs)
    for i in range(4):
        start = beams["start_top_index"][:, i]
        forced = model({**inputs, "start_positions": start})
        np.testing.assert_allclose(forced["cls_logits"], beams["cls_logits"], atol=ATOL)
        np.testing.assert_allclose(
            np.take_along_axis(forced["end_log_probs"].numpy(),
                               beams["end_top_index"][:, 3 * i:3 * i + 3].numpy(), 1),
            beams["end_top_log_probs"][:, 3 * i:3 * i + 3], atol=ATOL)


def test_squad_v2_p_mask_excludes_positions(finetuned):
    model = finetuned("squad_v2")[0]
    inputs = task_inputs("squad_v2")
    p_mask = inputs["p_mask"].astype(bool)
    out = model(inputs)
    start_log_probs = out["start_log_probs"].numpy()
    assert np.all(start_log_probs[p_mask] < -1e29)
    np.testing.assert_allclose(np.exp(start_log_probs).sum(-1), 1.0, atol=1e-5)
    for key in ("start_top_index", "end_top_index"):
        index = out[key].numpy()
        assert not np.take_along_axis(p_mask, index, 1).any(), key
    # Unmasking the question lets the model pick there: the mask is what kept it out.
    open_question = model({**inputs, "p_mask": np.zeros_like(inputs["p_mask"])})
    assert not np.allclose(open_question["start_log_probs"], start_log_probs)


def test_squad_v2_compiles_with_xla(finetuned):
    model = finetuned("squad_v2")[0]
    inputs = task_inputs("squad_v2")
    compiled = tf.function(lambda x: model(x, training=False), jit_compile=True)
    got = compiled({k: tf.constant(v) for k, v in inputs.items()})
    expected = model(inputs)
    for key in expected:
        np.testing.assert_allclose(got[key], expected[key], atol=1e-4, rtol=1e-5, err_msg=key)


# ------------------------------------------------------------------ behaviour
def test_head_dropout_only_in_training():
    inputs = task_inputs("classifier")
    model = AlbertClassifier(CONFIG, num_labels=3, seed=1, dropout_rate=0.5)
    first = model(inputs)["logits"].numpy()
    np.testing.assert_array_equal(first, model(inputs, training=False)["logits"].numpy())
    assert np.abs(model(inputs, training=True)["logits"].numpy() - first).max() > 1e-4

    v2 = AlbertSquadV2(CONFIG, seed=1, dropout_rate=0.5)
    squad = task_inputs("squad_v2")
    cls_eval = v2(squad)["cls_logits"].numpy()
    assert np.abs(v2(squad, training=True)["cls_logits"].numpy() - cls_eval).max() > 1e-4
    # SQuAD v1 has no head dropout (the encoder's is 0 here).
    v1 = AlbertSquadV1(CONFIG, seed=1)
    np.testing.assert_array_equal(v1(inputs, training=True)["start_logits"],
                                  v1(inputs)["start_logits"])
    # A rate of 0 adds no dropout at all.
    assert AlbertClassifier(CONFIG, 2, dropout_rate=0.0).dropout is None


@pytest.mark.parametrize("task", TASKS)
def test_seed_fixes_the_head(task):
    def head(model):
        return {w.path: w.numpy() for w in model.weights if not w.path.startswith("bert/")}

    a, b, c = head(build(task, seed=7)), head(build(task, seed=7)), head(build(task, seed=8))
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    kernels = [n for n in a if "LayerNorm" not in n and "bias" not in n]
    assert kernels and all(not np.allclose(a[n], c[n]) for n in kernels)
    assert all(np.abs(a[n]).max() <= 2 * 0.02 + 1e-7 for n in kernels)  # truncated 0.02


@pytest.mark.parametrize("task", TASKS)
def test_config_round_trip(task):
    model = build(task, seed=4)
    clone = type(model).from_config(model.get_config())
    assert clone.get_config() == model.get_config()
    for a, b in zip(model.weights, clone.weights):
        assert a.path == b.path
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_bad_arguments_give_clear_errors():
    for bad in (0, -1, 1.5, True, None):
        with pytest.raises(ValueError, match="num_labels must be an integer >= 1"):
            AlbertClassifier(CONFIG, num_labels=bad)
    with pytest.raises(ValueError, match="num_choices"):
        AlbertMultipleChoice(CONFIG, num_choices=0)
    with pytest.raises(ValueError, match="start_n_top"):
        AlbertSquadV2(CONFIG, start_n_top=0)
    with pytest.raises(ValueError, match="dropout_rate"):
        AlbertClassifier(CONFIG, 2, dropout_rate=1.0)


def test_bad_inputs_give_clear_errors():
    race = AlbertMultipleChoice(CONFIG, num_choices=4)
    flat = encoder_inputs()
    with pytest.raises(ValueError, match="'input_word_ids' of rank 3"):
        race(flat)
    with pytest.raises(ValueError, match="has 3 choices .* num_choices=4"):
        race(race_inputs(choices=3))
    v2 = AlbertSquadV2(CONFIG)
    with pytest.raises(KeyError, match="'p_mask'"):
        v2(flat)
    short = encoder_inputs(length=4)
    with pytest.raises(ValueError, match="shorter than start_n_top"):
        v2({**short, "p_mask": np.zeros((3, 4), np.int32)})


def test_mixed_precision_keeps_float32_weights_and_outputs(finetuned, tmp_path):
    model, _, path, _ = finetuned("squad_v2")
    mixed = AlbertSquadV2(CONFIG, start_n_top=4, end_n_top=3, dtype="mixed_bfloat16")
    load_tf1_checkpoint(mixed, path, strict=True)
    assert all(w.dtype == "float32" for w in mixed.weights)
    inputs = task_inputs("squad_v2")
    out, reference = mixed(inputs), model(inputs)
    assert all(v.dtype == tf.float32 or v.dtype == tf.int32 for v in out.values())
    assert np.all(out["start_log_probs"].numpy()[inputs["p_mask"] == 1] < -1e29)
    np.testing.assert_allclose(out["cls_logits"], reference["cls_logits"], atol=0.1)
    classifier = AlbertClassifier(CONFIG, 2, dtype="mixed_bfloat16")
    assert classifier(task_inputs("classifier"))["probabilities"].dtype == tf.float32


def test_classifier_learns_a_separable_task():
    # [CLS] then seven words, all from the low half of the vocabulary (label 0) or all
    # from the high half (label 1): a from-scratch model must reach ~100% in 40 steps.
    rng = np.random.default_rng(0)

    def data(n):
        labels = rng.integers(0, 2, n).astype(np.int32)
        ids = np.where(labels[:, None] == 1, rng.integers(35, 60, (n, 8)),
                       rng.integers(5, 30, (n, 8))).astype(np.int32)
        ids[:, 0] = 2
        return {"input_word_ids": ids}, labels

    model = AlbertClassifier(config(hidden_dropout_prob=0.1), num_labels=2, seed=0)
    optimizer = keras.optimizers.Adam(learning_rate=1e-2)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = losses.classification_loss(model(x, training=True)["logits"], y)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    test_x, test_y = data(256)
    before = float(np.mean(model(test_x)["predictions"].numpy() == test_y))
    train_losses = [float(step(*data(32))) for _ in range(40)]
    after = float(np.mean(model(test_x)["predictions"].numpy() == test_y))
    assert before < 0.7
    assert after >= 0.98, (before, after, train_losses[::8])
    assert np.mean(train_losses[-5:]) < 0.1 * np.mean(train_losses[:5])
