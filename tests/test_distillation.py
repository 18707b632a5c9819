"""Distillation's pieces (albert_tf.training.distillation): a student started from its
teacher's own weights (fewer layer passes of the same shared group, or fewer of a
BERT's groups), and the soft-target loss, its closed-form gradient and its mix with the
task's loss in a form that any split of the batch adds up to."""

import dataclasses
import json
import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier, AlbertEncoder, CheckpointError, ConfigError, losses, names
from albert_tf.training import distillation
from albert_tf.training.objectives import MeanObjective
from tests.helpers.tiny import random_inputs, tiny_config


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("temperature", [1.0, 2.0, 4.0])
def test_soft_loss_is_scaled_kl_with_the_closed_form_gradient(temperature):
    rng = np.random.default_rng(0)
    student, teacher = rng.normal(size=(5, 3)), rng.normal(size=(5, 3)) * 2
    p, q = softmax(teacher / temperature), softmax(student / temperature)
    expected = temperature ** 2 * np.sum(p * (np.log(p) - np.log(q)), -1)
    s = tf.Variable(student, dtype=tf.float32)
    with tf.GradientTape() as tape:
        loss = distillation.softmax_distillation(s, teacher, temperature)
        total = tf.reduce_sum(loss)
    np.testing.assert_allclose(loss, expected, rtol=1e-5, atol=1e-6)
    # d/ds T^2 KL(p || q) = T (q - p): the same scale at every temperature
    np.testing.assert_allclose(tape.gradient(total, s), temperature * (q - p), atol=1e-6)
    np.testing.assert_allclose(distillation.softmax_distillation(teacher, teacher, temperature),
                               0.0, atol=1e-6)


def test_sigmoid_and_regression_soft_losses():
    rng = np.random.default_rng(1)
    student, teacher = rng.normal(size=(4, 6)), rng.normal(size=(4, 6))

    def binary_kl(s, t):
        p, q = 1 / (1 + np.exp(-t / 2)), 1 / (1 + np.exp(-s / 2))
        return 4 * (p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q)))

    np.testing.assert_allclose(distillation.sigmoid_distillation(student, teacher, 2.0),
                               binary_kl(student, teacher).sum(-1), rtol=1e-5)
    np.testing.assert_allclose(
        distillation.regression_distillation(student[:, 0], teacher[:, 0]),
        (student[:, 0] - teacher[:, 0]) ** 2, rtol=1e-5)


def test_objective_mixes_the_labels_and_adds_up_over_any_split():
    rng = np.random.default_rng(2)
    outputs = {names.LOGITS: tf.constant(rng.normal(size=(6, 3)), tf.float32)}
    features = {"label_ids": tf.constant([0, 1, 2, 1, 0, 2]),
                distillation.TEACHER_LOGITS: tf.constant(rng.normal(size=(6, 3)), tf.float32)}
    task = MeanObjective(lambda o, f: losses.classification_loss(
        o[names.LOGITS], f["label_ids"], per_example=True))
    objective = distillation.DistillationObjective(task, temperature=2.0, alpha=0.7)
    assert objective.term_names == ("loss", "distillation_loss")
    whole = objective.terms(outputs, features)
    labels = float(task.loss(outputs, features))
    soft = float(tf.reduce_mean(distillation.softmax_distillation(
        outputs[names.LOGITS], features[distillation.TEACHER_LOGITS], 2.0)))
    np.testing.assert_allclose([whole["loss"], whole["distillation_loss"]],
                               [0.3 * labels, 0.7 * soft], rtol=1e-6)
    # two micro-batches of 2 and 4 examples, their denominators added first
    halves = [({k: v[:2] for k, v in outputs.items()}, {k: v[:2] for k, v in features.items()}),
              ({k: v[2:] for k, v in outputs.items()}, {k: v[2:] for k, v in features.items()})]
    denominators = objective.global_denominators([objective.denominators(f) for _, f in halves])
    parts = [objective.terms(o, f, denominators) for o, f in halves]
    for name in objective.term_names:
        np.testing.assert_allclose(sum(float(p[name]) for p in parts), whole[name], rtol=1e-6)
    only_labels = distillation.DistillationObjective(task, alpha=0.0).terms(outputs, features)
    assert float(only_labels["loss"]) == pytest.approx(labels, rel=1e-6)
    for wrong, words in (({"temperature": 0}, "positive"), ({"alpha": 1.5}, "[0, 1]"),
                         ({"soft_loss": "hinge"}, "known: softmax")):
        with pytest.raises(ValueError, match=words.replace("[", r"\[")):
            distillation.DistillationObjective(task, **wrong)


def test_token_soft_loss_is_the_mean_over_labelled_positions():
    """"token_softmax": T^2 KL at each position whose label is >= 0 (not the padding,
    not a word's later pieces), averaged over those positions of the whole batch as
    the task's token loss is; any split adds up, and a batch with none is 0."""
    from albert_tf.training.objectives import TokenObjective

    rng = np.random.default_rng(3)
    student, teacher = rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 5, 4)) * 2
    labels = np.array([[-1, 2, -1, 0, -1], [-1, 1, 3, -1, -1], [-1, -1, -1, -1, -1]])
    outputs = {names.LOGITS: tf.constant(student, tf.float32)}
    features = {names.LABEL_IDS: tf.constant(labels),
                distillation.TEACHER_LOGITS: tf.constant(teacher, tf.float32)}
    objective = distillation.DistillationObjective(TokenObjective(), soft_loss="token_softmax",
                                                   temperature=2.0, alpha=0.6)
    p, q = softmax(teacher / 2), softmax(student / 2)
    kl = 4 * np.sum(p * (np.log(p) - np.log(q)), -1)
    whole = objective.terms(outputs, features)
    assert float(whole["distillation_loss"]) == pytest.approx(
        0.6 * kl[labels >= 0].mean(), rel=1e-5)
    assert float(whole["loss"]) == pytest.approx(
        0.4 * float(TokenObjective().loss(outputs, features)), rel=1e-6)
    halves = [({k: v[i:j] for k, v in outputs.items()}, {k: v[i:j] for k, v in features.items()})
              for i, j in ((0, 1), (1, 3))]
    denominators = objective.global_denominators([objective.denominators(f) for _, f in halves])
    for name in objective.term_names:
        parts = sum(float(objective.terms(o, f, denominators)[name]) for o, f in halves)
        np.testing.assert_allclose(parts, whole[name], rtol=1e-6)
    unlabelled = {k: v[2:] for k, v in features.items()}
    none = objective.terms({k: v[2:] for k, v in outputs.items()}, unlabelled)
    assert float(none["distillation_loss"]) == 0.0 and float(none["loss"]) == 0.0


def test_fewer_passes_of_the_shared_group_are_the_teachers_weights():
    """A 1-group teacher of 4 layers and its 2-layer student: every weight of the
    student (its head of the same labels too) is the teacher's, and the student computes
    what the teacher's weights compute in 2 passes."""
    teacher = AlbertClassifier(tiny_config(num_hidden_layers=4), 3, seed=1)
    config = distillation.student_config(teacher.config, num_hidden_layers=2)
    assert (config.num_hidden_layers, config.num_hidden_groups) == (2, 1)
    student = AlbertClassifier(config, 3, seed=2)
    report = distillation.init_student_from_teacher(student, teacher)
    assert report.initialized == [] and len(report.copied) == len(student.weights)
    inputs = random_inputs(config, batch=2, length=8, seed=3, min_length=3)
    twin = AlbertClassifier(config, 3, seed=5)
    twin.set_weights(teacher.get_weights())  # the same variables, in the same order
    np.testing.assert_allclose(student(inputs)[names.LOGITS], twin(inputs)[names.LOGITS],
                               atol=1e-6)


def test_a_bert_like_teacher_gives_every_other_layer():
    """A teacher of 6 groups (a BERT read as ALBERT) into 3: the student's groups 0, 1, 2
    are the teacher's 1, 3, 5; a head of another label set stays as initialized."""
    bert = tiny_config(num_hidden_layers=6, num_hidden_groups=6, embedding_size=32)
    teacher = AlbertClassifier(bert, 3, seed=1)
    config = distillation.student_config(bert, num_hidden_layers=3)
    assert distillation.group_map(bert, config) == {0: 1, 1: 3, 2: 5}
    student = AlbertClassifier(config, 2, seed=2)
    report = distillation.init_student_from_teacher(student, teacher)
    assert sorted(report.initialized) == ["output_bias", "output_weights"]
    theirs = {v.path: v.numpy() for v in teacher.weights}
    groups = set()
    for variable in student.weights:
        if variable.path in report.initialized:
            continue
        source = re.sub(r"transformer/group_(\d+)/",
                        lambda m: f"transformer/group_{2 * int(m[1]) + 1}/", variable.path)
        groups.update(re.findall(r"transformer/group_(\d+)/", source))
        np.testing.assert_array_equal(variable.numpy(), theirs[source])
    assert groups == {"1", "3", "5"}
    # chosen: the teacher's bottom groups
    assert distillation.group_map(bert, config, [0, 1, 2]) == {0: 0, 1: 1, 2: 2}
    bottom = AlbertClassifier(config, 3, seed=2)
    distillation.init_student_from_teacher(bottom, teacher, [0, 1, 2])
    for variable in bottom.weights:
        if "transformer/group_2/" in variable.path:
            np.testing.assert_array_equal(variable.numpy(), theirs[variable.path])
    for groups, words in (([0, 1], "from 2 of the teacher's (0, 1); it has 3"),
                          ([0, 1, 6], "groups 0 to 5; 6 is not one of them")):
        with pytest.raises(ConfigError, match=re.escape(words)):
            distillation.group_map(bert, config, groups)


def test_ffn_activity_is_that_of_the_units_each_block_ran_with():
    """`AlbertEncoder.ffn_activations` are the FFN units (after GELU) that each block
    run computed, in order (recorded as a model of two groups of two inner blocks, E !=
    H, runs); `ffn_activity` their mean magnitude and mean over the real tokens, each
    shared block's passes counted together."""
    config = tiny_config(num_hidden_layers=3, num_hidden_groups=2, inner_group_num=2)
    encoder = AlbertEncoder(config, seed=4)
    inputs = random_inputs(config, batch=2, length=6, seed=5, min_length=3)
    ran = []
    blocks = [getattr(encoder.encoder, f"group_{g}").blocks[i] for g in (0, 1)
              for i in (0, 1)]
    gelu = blocks[0].ffn.intermediate.activation
    for block in blocks:  # record what each block's GELU gives as the model runs
        block.ffn.intermediate.activation = lambda x: ran.append(gelu(x)) or ran[-1]
    encoded = encoder(inputs)
    for block in blocks:
        block.ffn.intermediate.activation = gelu
    found = encoder.ffn_activations(encoded, inputs["input_mask"])
    scopes = [f"bert/encoder/transformer/group_{config.group_index(layer)}/inner_group_{i}/"
              for layer in range(3) for i in (0, 1)]
    assert [scope for scope, _ in found] == scopes and len(ran) == 6
    for (_, units), expected in zip(found, ran):
        assert units.shape == (2, 6, 32)
        np.testing.assert_allclose(units, expected, atol=1e-5)
    activity = distillation.ffn_activity(encoder, [inputs])
    mask = np.asarray(inputs["input_mask"], bool)
    for scope in set(scopes):
        runs = np.concatenate([np.asarray(u)[mask] for name, u in zip(scopes, ran)
                               if name == scope])
        np.testing.assert_allclose(activity[scope].magnitude, np.abs(runs).mean(0), atol=1e-6)
        np.testing.assert_allclose(activity[scope].mean, runs.mean(0), atol=1e-6)


def test_ffn_units_are_the_most_active_and_the_bias_keeps_the_mean():
    magnitude = np.array([1.0, 0.5, 5.0, 2.0])
    w_out = np.array([[2.0, 0.0], [10.0, 0.0], [0.0, 0.1], [0.0, 1.0]])  # norms 2, 10, .1, 1
    activity = distillation.FfnActivity(magnitude, np.array([0.5, -1.0, 2.0, 1.0]))
    # scores 2, 5, 0.5, 2: the two strongest, in order; a tie keeps the first
    np.testing.assert_array_equal(distillation.ffn_units(activity, w_out, 2), [0, 1])
    np.testing.assert_array_equal(distillation.ffn_units(activity, w_out, 3), [0, 1, 3])
    # units 2 and 3 left out: their mean outputs, 2 * (0, .1) + 1 * (0, 1), join the bias
    np.testing.assert_allclose(
        distillation.ffn_output_bias(activity, w_out, [1.0, 1.0], np.array([0, 1])),
        [1.0, 2.2], rtol=1e-6)


def test_a_narrower_ffn_keeps_each_teacher_blocks_most_active_units():
    """A teacher of 2 groups whose FFNs each have 20 of 32 units silenced (their output
    weights zero; other units in each block): the student of 12 units keeps each
    block's 12 live ones, in order, and computes exactly what the teacher does. With
    1 pass of group 1 and 8 units, its FFN's output keeps the teacher block's mean over
    the tokens it was measured on; without inputs, such a student is refused."""
    config = tiny_config(num_hidden_layers=2, num_hidden_groups=2)
    teacher = AlbertClassifier(config, 3, seed=1)
    inputs = random_inputs(config, batch=4, length=8, seed=3, min_length=3)
    teacher(inputs)
    rng = np.random.default_rng(0)
    live = {}
    for variable in teacher.weights:
        if variable.path.endswith("ffn_1/intermediate/output/dense/kernel"):
            group = re.search(r"group_(\d+)", variable.path)[1]
            live[group] = np.sort(rng.choice(32, 12, replace=False))
            value = np.zeros(variable.shape, np.float32)
            value[live[group]] = variable.numpy()[live[group]]
            variable.assign(value)
    assert not np.array_equal(live["0"], live["1"])
    narrow = distillation.student_config(config, intermediate_size=12)
    assert (narrow.intermediate_size, narrow.num_hidden_layers) == (12, 2)
    student = AlbertClassifier(narrow, 3, seed=2)
    student(inputs)
    report = distillation.init_student_from_teacher(student, teacher, inputs=[inputs])
    assert report.initialized == [] and len(report.copied) == len(student.weights)
    assert sorted(report.narrowed) == sorted(
        f"bert/encoder/transformer/group_{g}/inner_group_0/ffn_1/intermediate/{part}"
        for g in "01" for part in ("dense/kernel", "dense/bias", "output/dense/kernel",
                                   "output/dense/bias"))
    theirs = {v.path: v.numpy() for v in teacher.weights}
    for variable in student.weights:
        if variable.path.endswith("ffn_1/intermediate/dense/kernel"):
            group = re.search(r"group_(\d+)", variable.path)[1]
            np.testing.assert_array_equal(variable.numpy(),
                                          theirs[variable.path][:, live[group]])
    np.testing.assert_allclose(student(inputs)[names.LOGITS], teacher(inputs)[names.LOGITS],
                               atol=1e-5)
    # 8 of group 1's 12 live units: the output's mean over the real tokens is kept
    one = AlbertClassifier(distillation.student_config(config, num_hidden_layers=1,
                                                       intermediate_size=8), 3, seed=2)
    one(inputs)
    distillation.init_student_from_teacher(one, teacher, [1], inputs=[inputs])
    mask = np.asarray(inputs["input_mask"], bool)
    _, (_, units) = teacher.encoder.ffn_activations(teacher.encoder(inputs),
                                                    inputs["input_mask"])
    units = np.asarray(units, np.float64)[mask]  # group 1's, on its inputs in the teacher

    def ffn(model, part):  # the teacher's group 1, the student's only group
        group = 0 if model is one else 1
        return next(np.asarray(v.numpy(), np.float64) for v in model.weights
                    if f"group_{group}/" in v.path
                    and v.path.endswith(f"ffn_1/intermediate/{part}"))

    kept = [int(np.flatnonzero((ffn(teacher, "dense/kernel") == column[:, None]).all(0))[0])
            for column in ffn(one, "dense/kernel").T]
    assert len(kept) == 8 and set(kept) <= set(live["1"]) and kept == sorted(kept)
    np.testing.assert_allclose(
        (units[:, kept] @ ffn(one, "output/dense/kernel") + ffn(one, "output/dense/bias"))
        .mean(0),
        (units @ ffn(teacher, "output/dense/kernel") + ffn(teacher, "output/dense/bias"))
        .mean(0), atol=1e-5)
    with pytest.raises(ValueError, match="give `inputs`"):
        distillation.init_student_from_teacher(student, teacher)


def test_attention_scores_are_those_each_block_ran_with():
    """`AlbertEncoder.attention_scores`: for each layer pass of a model of two groups of
    two inner blocks (E != H: the first block reads the mapped embeddings), the last
    block's softmax(scores + padding bias) times its values, through the rest of the
    block, gives that layer pass's output."""
    from albert_tf.modeling.attention import attention_bias

    config = tiny_config(num_hidden_layers=3, num_hidden_groups=2, inner_group_num=2)
    encoder = AlbertEncoder(config, seed=4)
    inputs = random_inputs(config, batch=2, length=6, seed=5, min_length=3)
    encoded = encoder(inputs)
    scores = encoder.attention_scores(encoded, [0, 1, 2])
    outputs = encoded["encoder_outputs"]
    heads, size, hidden = 2, 8, 16
    for layer, found in enumerate(scores):
        assert found.shape == (2, heads, 6, 6) and found.dtype == tf.float32
        block = getattr(encoder.encoder, f"group_{config.group_index(layer)}").blocks[-1]
        x = outputs[2 * layer]  # the last block's input: the inner block before it
        probs = tf.nn.softmax(found + attention_bias(inputs["input_mask"]))
        values = tf.transpose(tf.reshape(block.attention.value(x), [2, 6, heads, size]),
                              [0, 2, 1, 3])
        context = tf.reshape(tf.transpose(tf.matmul(probs, values), [0, 2, 1, 3]),
                             [2, 6, hidden])
        middle = block.attention_layer_norm(block.attention.output_dense(context) + x)
        end = block.ffn_layer_norm(block.ffn(middle, residual=middle))
        np.testing.assert_allclose(end, outputs[2 * layer + 1], atol=1e-5)
    # the first block of all reads the embeddings mapped to H
    first = encoder.attention_scores(encoded, [0])
    np.testing.assert_array_equal(first[0], scores[0])
    one = AlbertEncoder(tiny_config(num_hidden_layers=2), seed=4)
    encoded = one(inputs)
    mapped = one.encoder.embedding_hidden_mapping_in(encoded["embedding_output"])
    qk = one.encoder.group_0.blocks[0].attention
    q = tf.transpose(tf.reshape(qk.query(mapped), [2, 6, heads, size]), [0, 2, 1, 3])
    k = tf.transpose(tf.reshape(qk.key(mapped), [2, 6, heads, size]), [0, 2, 1, 3])
    np.testing.assert_allclose(one.attention_scores(encoded, [0])[0],
                               tf.matmul(q, k, transpose_b=True) / np.sqrt(size),
                               atol=1e-5)


def _layer_objective(teacher, layers, weight, attention_weight=0.0, projection=None):
    return distillation.DistillationObjective(
        MeanObjective(lambda o, f: losses.classification_loss(o[names.LOGITS],
                                                               f["label_ids"])),
        layers=distillation.LayerTeacher(teacher, layers, weight, attention_weight,
                                         projection))


def test_the_layer_losses_compare_mapped_layers_over_real_tokens():
    """--distill_hidden_weight's and --distill_attention_weight's terms: a 6-group
    teacher (a BERT read as ALBERT) and its 2-pass student (a multiple-choice model: its
    choices are the sequences, a padded choice none). Each term is its weight times the
    mean over real sequences of the sum over the mapped layers (teacher layers 2 and 5,
    or those given) of the mean squared difference over real tokens (hidden states) or
    over heads and pairs of real tokens (attention scores), computed here in float64
    from each encoder's own outputs; no gradient reaches the teacher. A student of
    another width learns a projection of its states (its gradient reaches it). Layer
    maps outside either model refused."""
    from albert_tf.tasks.multiple_choice import AlbertMultipleChoice

    bert = tiny_config(num_hidden_layers=6, num_hidden_groups=6, embedding_size=32)
    teacher = AlbertMultipleChoice(bert, num_choices=3, seed=1)
    student = AlbertMultipleChoice(distillation.student_config(bert, num_hidden_layers=2),
                                   num_choices=3, seed=2)
    inputs = random_inputs(bert, batch=2, length=7, seed=3, num_choices=3, min_length=2)
    inputs["input_mask"][1, 2] = 0  # the second example's third choice is padding
    features = {"input_ids": inputs["input_word_ids"], "input_mask": inputs["input_mask"],
                "segment_ids": inputs["input_type_ids"],
                "label_ids": np.array([0, 1], np.int32),
                distillation.TEACHER_LOGITS: np.zeros((2, 3), np.float32)}
    flat = {k: v.reshape(6, 7) for k, v in inputs.items()}
    encoded = {"student": student.encoder(flat), "teacher": teacher.encoder(flat)}
    mask = flat["input_mask"].astype(np.float64)
    tokens = np.maximum(mask.sum(-1), 1)
    pairs = mask[:, None, :, None] * mask[:, None, None, :]

    def expected(layers, project=lambda x: x):
        hidden, attention = np.zeros(6), np.zeros(6)
        mine = encoded["student"]["encoder_outputs"]
        theirs = encoded["teacher"]["encoder_outputs"]
        mine_scores = student.encoder.attention_scores(encoded["student"], [0, 1])
        their_scores = teacher.encoder.attention_scores(encoded["teacher"], layers)
        for i, layer in enumerate(layers):
            squared = np.mean((project(np.float64(mine[i])) - np.float64(theirs[layer])) ** 2,
                              -1)
            hidden += (squared * mask).sum(-1) / tokens
            squared = (np.float64(mine_scores[i]) - np.float64(their_scores[i])) ** 2
            attention += (squared * pairs).mean(1).sum((-2, -1)) / tokens ** 2
        return hidden.sum() / 5, attention.sum() / 5  # 5 real choices

    def run(objective):
        distillation.prepare_layer_outputs(student, objective.layers)
        with tf.GradientTape() as tape:
            outputs = student(names.to_model_inputs(features), training=False)
            terms = objective.terms(outputs, features)
        gradients = tape.gradient(
            [terms[t] for t in objective.layer_terms],
            [*student.trainable_variables, *teacher.trainable_variables,
             *(v for layer in objective.trainable_layers().values()
               for v in layer.trainable_variables)])
        assert all(g is None for g in gradients[len(student.trainable_variables):][
            :len(teacher.trainable_variables)])
        assert any(g is not None for g in gradients[:len(student.trainable_variables)])
        return outputs, terms, gradients

    for given, layers in ((None, [2, 5]), ([0, 3], [0, 3])):
        objective = _layer_objective(teacher, distillation.hidden_layer_map(6, 2, given),
                                     0.7, 0.3)
        outputs, terms, _ = run(objective)
        assert set(outputs) >= {names.HIDDEN_STATES, names.ATTENTION_SCORES, names.LOGITS}
        hidden, attention = expected(layers)
        np.testing.assert_allclose(terms["hidden_loss"], 0.7 * hidden, rtol=1e-5)
        np.testing.assert_allclose(terms["attention_loss"], 0.3 * attention, rtol=1e-5)
    # the attention alone: the teacher gives its mapped layers' scores, no states
    objective = _layer_objective(teacher, [2, 5], 0.0, 1.0)
    outputs, terms, _ = run(objective)
    assert objective.layer_terms == ("attention_loss",) and "hidden_loss" not in terms
    assert names.HIDDEN_STATES not in outputs
    np.testing.assert_allclose(terms["attention_loss"], expected([2, 5])[1], rtol=1e-5)
    # a projection of the student's states (here the same width, a random one)
    from albert_tf.modeling import common
    projection = common.dense(16, name="distill_projection", stddev=0.5,
                              seeds=common.SeedStream(7), dtype="float32")
    projection.build((None, None, 16))
    projection.bias.assign(np.full(16, 0.1, np.float32))
    kernel, bias = np.float64(projection.kernel), np.float64(projection.bias)
    objective = _layer_objective(teacher, [2, 5], 1.0, projection=projection)
    _, terms, gradients = run(objective)
    np.testing.assert_allclose(terms["hidden_loss"], expected([2, 5], lambda x: x @ kernel +
                                                              bias)[0], rtol=1e-5)
    assert all(g is not None for g in gradients[-2:])  # kernel and bias
    assert list(objective.trainable_layers()) == ["distill_projection"]
    distillation.stop_layer_outputs(student)
    assert not {names.HIDDEN_STATES, names.ATTENTION_SCORES} & set(
        student(names.to_model_inputs(features)))
    # the flags' checks that need no run
    from types import SimpleNamespace

    from albert_tf.apps.distill import layer_map
    from albert_tf.checkpoints.release import SAVEDMODEL
    from albert_tf.errors import UsageError

    three_heads = distillation.student_config(
        tiny_config(num_hidden_layers=6, num_attention_heads=4), num_hidden_layers=2)
    for weight, attention, given, layout, config, words in (
            (-1.0, 0.0, None, "google", student.config,
             "--distill_hidden_weight=-1.0: a weight is at least 0"),
            (0.0, -2.0, None, "google", student.config,
             "--distill_attention_weight=-2.0: a weight is at least 0"),
            (0.0, 0.0, ("1",), "google", student.config, "neither of which is given"),
            (0.0, 1.0, None, SAVEDMODEL, student.config,
             "--distill_attention_weight: the teacher teacher is a SavedModel export"),
            (0.0, 1.0, None, "google", three_heads,
             "the student has 4 attention heads and the teacher 2")):
        options = SimpleNamespace(distill_hidden_weight=weight,
                                  distill_attention_weight=attention,
                                  distill_hidden_layers=given,
                                  teacher_files=SimpleNamespace(layout=layout),
                                  teacher_checkpoint="teacher")
        with pytest.raises(UsageError, match=re.escape(words)):
            layer_map(options, bert, config)
    for args, words in (((6, 2, [0]), "1 teacher layers for a student of 2"),
                        ((6, 2, [0, 6]), "layers [6] are outside the teacher's 0 to 5"),
                        ((2, 3, None), "name the teacher's layer of each")):
        with pytest.raises(ConfigError, match=re.escape(words)):
            distillation.hidden_layer_map(*args)


def test_students_the_teacher_cannot_start_are_refused():
    teacher = tiny_config(num_hidden_layers=4, num_hidden_groups=2)
    for kwargs, words in (({"num_hidden_groups": 3}, "1 to the teacher's 2"),
                          ({"num_hidden_layers": 1, "num_hidden_groups": 2},
                           "more than its num_hidden_layers"),
                          ({"num_hidden_layers": 0}, "at least 1"),
                          ({"intermediate_size": 33}, "keeps 1 to the teacher's 32 units"),
                          ({"intermediate_size": 0}, "intermediate_size is 0")):
        with pytest.raises(ConfigError, match=words):
            distillation.student_config(teacher, **kwargs)
    wider = dataclasses.replace(teacher, intermediate_size=teacher.intermediate_size * 2)
    with pytest.raises(CheckpointError,
                       match=re.escape("these differ: intermediate_size (wider than")):
        distillation.init_student_from_teacher(AlbertEncoder(wider, seed=0),
                                               AlbertEncoder(teacher, seed=0))


# ------------------------------------------------------- run_classifier.py --teacher_*
def classifier(*args, check=True):
    from tests.helpers.scripts import run_script

    return run_script("run_classifier.py", *args, check=check)


@pytest.fixture(scope="module")
def sst2_teacher(tmp_path_factory):
    """A 2-layer teacher fine-tuned on the SST-2 fixture (the flags its students share)."""
    from tests.helpers.scripts import FIXTURES, SPM
    from tests.helpers.tiny import write_tiny_config

    root = tmp_path_factory.mktemp("teacher")
    config = write_tiny_config(root, max_position_embeddings=64, num_hidden_layers=2)
    common = ["--task_name=SST-2", f"--data_dir={FIXTURES / 'glue'}", f"--spm_model_file={SPM}",
              "--max_seq_length=32", "--train_batch_size=4", "--train_step=4",
              "--learning_rate=1e-3", "--do_train"]
    classifier(*common, "--do_eval", f"--albert_config_file={config}",
               f"--output_dir={root / 'out'}")
    return root, config, common


def test_a_student_learns_from_the_teachers_cached_outputs(sst2_teacher, tmp_path):
    """run_classifier.py --teacher_checkpoint --student_num_hidden_layers=1: the student
    is the teacher's weights in one pass; the teacher's logits on every training record
    are written once beside the records (equal to the teacher's own, 1e-5) and read back
    by the next student with the same records and teacher, which runs no teacher
    (a wider student from scratch then learns the teacher's hidden states and attention
    too, their terms in the log)."""
    import tensorflow as tf

    from albert_tf import AlbertClassifier, AlbertConfig
    from albert_tf.checkpoints.release import load_checkpoint
    from albert_tf.data import sentence_records
    from albert_tf.data.glue import get_task
    from tests.helpers.scripts import read_results
    from tests.helpers.tiny import write_tiny_config

    root, config, common = sst2_teacher
    teacher = str(root / "out" / "model.ckpt-best")
    cache = tmp_path / "cache"
    flags = [*common, f"--teacher_checkpoint={teacher}", f"--teacher_config_file={config}",
             "--student_num_hidden_layers=1", "--distill_temperature=2", "--do_eval",
             f"--cached_dir={cache}"]
    first = classifier(*flags, f"--output_dir={tmp_path / 'student'}")
    assert "student started from the teacher" in first.stderr
    assert 0 <= read_results(tmp_path / "student" / "eval_results.txt")["eval_accuracy"] <= 1
    (written,) = cache.glob("*.teacher.tf_record")
    stored = [tf.train.Example.FromString(r).features.feature["teacher_logits"].float_list.value
              for r in tf.data.TFRecordDataset(str(written)).as_numpy_iterator()]
    model = AlbertClassifier(AlbertConfig.from_json_file(config), 2, seed=0)
    load_checkpoint(model, teacher)
    dataset = sentence_records.sentence_dataset(
        str(written).replace(".teacher", ""), get_task("SST-2"), 32, 64, training=False)
    logits = np.concatenate([model(names.to_model_inputs(batch))[names.LOGITS]
                             for batch in dataset])
    np.testing.assert_allclose(np.array(stored), logits, atol=1e-5)
    # again, a student twice as wide from scratch learning the teacher's hidden states
    # (through a projection) and attention too: the same cache; the teacher in each
    # step; the projection trains and is checkpointed with the run, not with the model
    wide = write_tiny_config(tmp_path / "wide", max_position_embeddings=64,
                             num_hidden_layers=1, hidden_size=32, intermediate_size=64)
    again = classifier(*[f for f in flags if not f.startswith("--student_")],
                       f"--albert_config_file={wide}", "--distill_hidden_weight=1",
                       "--distill_attention_weight=0.5", f"--output_dir={tmp_path / 'again'}")
    assert f"using cached records {written}" in again.stderr
    # (a tiny model's attention scores are about 0.01: their loss is logged as 0.0000)
    terms = dict(re.findall(r"(hidden_loss|attention_loss) (\d+\.\d+)", again.stderr))
    assert set(terms) == {"hidden_loss", "attention_loss"}, again.stderr[-2000:]
    assert float(terms["hidden_loss"]) > 0
    assert read_results(tmp_path / "again" / "eval_results.txt")["global_step"] == 4
    run = dict(tf.train.list_variables(tf.train.latest_checkpoint(str(tmp_path / "again"))))
    projection = {name: shape for name, shape in run.items()
                  if name.startswith("distill_projection/") and "OPTIMIZER_SLOT" not in name}
    assert sorted(projection.values()) == [[16], [32, 16]], run  # 32 -> 16: bias, kernel
    assert not any("distill_projection" in name for name in tf.train.list_variables(
        str(tmp_path / "again" / "model.ckpt-best")))
    student = dict(tf.train.list_variables(str(tmp_path / "student" / "model.ckpt-best")))
    assert "bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/dense/kernel" \
        in student


def test_transfer_text_is_labelled_by_the_teacher_among_the_training_records(
        sst2_teacher, tmp_path):
    """--transfer_file: its texts (blank lines skipped) become records with the
    teacher's logits and the teacher's class as their label, spread among the training
    records; the student trains on both."""
    import tensorflow as tf

    root, config, common = sst2_teacher
    lines = ["a gripping , funny film", "", "dull and far too long", "it is what it is",
             "the actors seem bored", "a small delight"]
    transfer = tmp_path / "transfer.txt"
    transfer.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cache = tmp_path / "cache"
    classifier(*common, f"--teacher_checkpoint={root / 'out'}", "--student_num_hidden_layers=1",
               f"--transfer_file={transfer}", f"--cached_dir={cache}",
               f"--output_dir={tmp_path / 'student'}")
    (written,) = cache.glob("*.teacher.tf_record")
    train = sum(1 for _ in tf.data.TFRecordDataset(str(cache / "sst-2_train.tf_record")))
    rows = [tf.train.Example.FromString(r).features.feature
            for r in tf.data.TFRecordDataset(str(written)).as_numpy_iterator()]
    assert len(rows) == train + 5
    # the transfer records: their label the argmax of their own teacher logits; not all
    # at the end
    from albert_tf.tokenization import FullTokenizer
    from tests.helpers.scripts import SPM

    tokenizer = FullTokenizer(spm_model_file=str(SPM), do_lower_case=True)
    wanted = {tuple(tokenizer.encode(text)) for text in lines if text}
    where = [i for i, f in enumerate(rows)
             if tuple(f["input_ids"].int64_list.value[1:1 + sum(
                 f["input_mask"].int64_list.value) - 2]) in wanted]
    assert len(where) == 5 and where[0] < train // 2, where
    for i in where:
        logits = rows[i]["teacher_logits"].float_list.value
        assert rows[i]["label_ids"].int64_list.value[0] == int(np.argmax(logits))


def test_a_savedmodel_export_teaches_a_student_of_its_own_config(sst2_teacher, tmp_path):
    """--teacher_checkpoint=an export directory, the student mirrored over two devices:
    its serving_default's logits are the cached outputs (the checkpoint teacher's,
    1e-5), its assets give the config and tokenizer; a student of narrower FFNs (which
    needs the teacher's weights) is refused."""
    import tensorflow as tf

    from albert_tf import AlbertClassifier, AlbertConfig
    from albert_tf.checkpoints.release import load_checkpoint
    from albert_tf.export import export_savedmodel
    from tests.helpers.scripts import SPM, run_with_faults
    from tests.helpers.tiny import write_tiny_config

    root, config, common = sst2_teacher
    teacher = AlbertClassifier(AlbertConfig.from_json_file(config), 2, seed=0)
    load_checkpoint(teacher, str(root / "out" / "model.ckpt-best"))
    exported = tmp_path / "export"
    export_savedmodel(teacher, exported, kind="classifier", task_name="SST-2",
                      spm_model_file=str(SPM), max_seq_length=32, warmup_requests=False)
    student = write_tiny_config(tmp_path / "student_config", max_position_embeddings=64,
                                num_hidden_layers=1, hidden_size=16, intermediate_size=32)
    cache = tmp_path / "cache"
    flags = [*common, f"--teacher_checkpoint={exported}", f"--cached_dir={cache}"]
    # mirrored over two CPU devices: the export answers in each replica
    mirrored = run_with_faults(
        "run_classifier", *flags, f"--albert_config_file={student}",
        f"--output_dir={tmp_path / 'out'}", "--distribution_strategy=mirrored",
        logical_cpus=2)
    assert "MirroredStrategy with 2 replicas" in mirrored.stderr
    (written,) = cache.glob("*.teacher.tf_record")
    rows = [tf.train.Example.FromString(r).features.feature
            for r in tf.data.TFRecordDataset(str(written)).as_numpy_iterator()]
    for row in rows[:8]:
        length = sum(row["input_mask"].int64_list.value)
        inputs = names.to_model_inputs({k: tf.constant([row[k].int64_list.value[:length]])
                                        for k in ("input_ids", "input_mask", "segment_ids")})
        np.testing.assert_allclose(row["teacher_logits"].float_list.value,
                                   teacher(inputs)[names.LOGITS][0], atol=1e-5)
    done = classifier(*flags, "--student_intermediate_size=16",
                      f"--output_dir={tmp_path / 'refused'}", check=False)
    assert done.returncode == 1 and done.stderr.splitlines()[-1].endswith(
        "is a SavedModel export, whose weights a student cannot start from: give the "
        "student's own --albert_config_file (and --init_checkpoint) instead of "
        "--student_intermediate_size=16")


def test_transfer_files_that_are_not_text_are_refused_naming_the_line(tmp_path):
    """`read_transfer` (before any work): the texts of the non-blank lines; a file that
    is empty, not UTF-8 or has a NUL byte, a pair task's line without its tab or with
    an empty text, --transfer_file without a teacher, a task that takes none: one
    UsageError naming the file (and line)."""
    from types import SimpleNamespace

    from albert_tf.apps.distill import read_transfer
    from albert_tf.errors import UsageError

    def task(pair, own=None):
        return SimpleNamespace(name="mrpc", teaching=SimpleNamespace(
            transfer_is_pair=lambda: pair, read_transfer=lambda path: own))

    def options(name, teacher="teacher"):
        return SimpleNamespace(transfer_file=str(tmp_path / name), teacher_checkpoint=teacher)

    files = {"good.txt": b"a\tb\n\n  \nc d\te\n", "empty.txt": b"\n  \n",
             "latin1.txt": "caf\u00e9\n".encode("latin-1"), "nul.txt": b"a\tb\nbad\0\n",
             "three.txt": b"a\tb\tc\n", "blank.txt": b"a\t \n"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    assert read_transfer(task(True), options("good.txt")) == [("a", "b"), ("c d", "e")]
    assert read_transfer(task(False), options("good.txt")) == [("a\tb", None), ("c d\te", None)]
    assert read_transfer(task(True), SimpleNamespace(transfer_file=None)) == []
    for name, pair, words in (("empty.txt", True, "empty.txt has no text"),
                              ("latin1.txt", True, "latin1.txt is not UTF-8 (byte offset 3)"),
                              ("nul.txt", True, "nul.txt:2: a NUL byte"),
                              ("three.txt", True, "three.txt:1: 3 tab-separated fields"),
                              ("blank.txt", True, "blank.txt:1: an empty text"),
                              ("missing.txt", True, "missing.txt: no such file"),
                              ("good.txt", None, "the task 'mrpc' takes no transfer text")):
        with pytest.raises(UsageError, match=re.escape(words)):
            read_transfer(task(pair), options(name))
    with pytest.raises(UsageError, match="it needs --teacher_checkpoint"):
        read_transfer(task(True), options("good.txt", teacher=None))
    # a task that reads the file in its own format (multiple choice): its examples
    assert read_transfer(task(None, ["question"]), options("good.txt")) == ["question"]
    with pytest.raises(UsageError, match=re.escape("good.txt has no example")):
        read_transfer(task(None, []), options("good.txt"))


def test_a_teacher_that_cannot_teach_is_one_line_before_any_work(sst2_teacher, tmp_path):
    """A teacher of another label set, a student made of the teacher given its own
    config too or more groups than the teacher has, student flags without a teacher, a
    student of another vocabulary, hidden states of a layer the teacher lacks or of
    another width: one line, before any training, no directory left."""
    from tests.helpers.scripts import FIXTURES, SPM, run_script
    from tests.helpers.tiny import write_tiny_config

    root, config, common = sst2_teacher
    teacher = [f"--teacher_checkpoint={root / 'out' / 'model.ckpt-best'}",
               f"--teacher_config_file={config}"]
    cases = [
        # a teacher of two labels for a task of one (STS-B's regression)
        ([*common[1:], "--task_name=STS-B", *teacher, f"--albert_config_file={config}"],
         "is not a model of this task and its labels"),
        ([*common, *teacher, f"--albert_config_file={config}",
          "--student_num_hidden_layers=1"], "cannot be given with it"),
        ([*common, *teacher, "--student_num_hidden_layers=1",
          "--student_num_hidden_groups=2"], "num_hidden_groups is 2"),
        ([*common, "--student_num_hidden_layers=1", f"--albert_config_file={config}"],
         "--student_num_hidden_layers=1: a student of --teacher_checkpoint's weights, "
         "which is not given"),
        ([*common, *teacher,
          f"--albert_config_file={write_tiny_config(tmp_path, vocab_size=100)}"],
         "has a vocabulary of"),
        ([*common, *teacher, "--student_num_hidden_layers=1",
          "--student_teacher_groups=0,1"],
         "--student_teacher_groups=0,1: the student's groups start from 2 of the teacher's"),
        ([*common, *teacher, f"--albert_config_file={config}", "--student_teacher_groups=0"],
         "--student_teacher_groups: the student starts from the teacher's groups only "
         "where it is made of the teacher's weights (--student_num_hidden_layers, "
         "--student_num_hidden_groups, --student_intermediate_size)"),
        ([*common, *teacher, "--student_num_hidden_layers=1", "--distill_alpha=2"],
         "--distill_alpha=2.0: the soft targets' weight is in [0, 1]"),
        # the hidden states: a layer outside the teacher's two
        ([*common, *teacher, "--student_num_hidden_layers=1", "--distill_hidden_weight=1",
          "--distill_hidden_layers=2"],
         "--distill_hidden_layers=2: layers [2] are outside the teacher's 0 to 1"),
    ]
    (tmp_path / "single.txt").write_text("one text only\n")
    cases += [  # a pair task's transfer line without its tab (the other checks: below)
        ([*[f for f in common if not f.startswith("--task_name")], "--task_name=MRPC",
          *teacher, "--student_num_hidden_layers=1",
          f"--transfer_file={tmp_path / 'single.txt'}"],
         "single.txt:1: 1 tab-separated fields; a line of --transfer_file for mrpc is a pair"),
    ]
    squad = [FIXTURES / "squad" / "dev-v1.1-excerpt.json", f"--spm_model_file={SPM}",
             f"--albert_config_file={config}", *teacher]
    cases.append((["run_squad.py", f"--train_file={squad[0]}", *squad[1:], "--do_train",
                   "--max_seq_length=64", "--doc_stride=16", "--max_query_length=16"],
                  "the task 'squad' is not distilled here"))
    for args, words in cases:
        out = tmp_path / "out"
        script = args.pop(0) if args[0].endswith(".py") else "run_classifier.py"
        done = run_script(script, *args, f"--output_dir={out}", check=False)
        # one line (after the run's own log lines where the teacher is read), no
        # traceback, nothing trained and nothing left
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
        line = done.stderr.strip().splitlines()[-1]
        assert line.startswith("error: ") and words in line, line
        assert "steps/s" not in done.stderr and not out.exists()


def test_augmentation_that_cannot_work_is_refused_before_any_work():
    """`check_augment`: copies below 0, a probability outside (0, 1], no neighbours,
    no teacher, a task that labels no new examples, a SavedModel teacher (whose
    embeddings are not read): one UsageError naming the flag."""
    from types import SimpleNamespace

    from albert_tf.apps.distill import check_augment
    from albert_tf.checkpoints import release
    from albert_tf.errors import UsageError
    from albert_tf.tasks import Task

    class Labels:
        name = "sst-2"

        class Teaching(Task.Teaching):
            def pseudo_label(self, example, output):
                pass

    class NoLabels:
        name = "squad"
        Teaching = Task.Teaching

    def options(**given):
        return SimpleNamespace(**{
            "distill_augment": 2, "teacher_checkpoint": "teacher",
            "distill_augment_probability": 0.4, "distill_augment_neighbours": 15,
            "teacher_files": SimpleNamespace(layout="google"), **given})

    assert check_augment(Labels(), options()) is True
    assert check_augment(Labels(), options(distill_augment=0)) is False
    for task, given, words in (
            (Labels(), {"distill_augment": -1}, "--distill_augment=-1: the copies"),
            (Labels(), {"distill_augment_probability": 0.0},
             "--distill_augment_probability=0.0: a probability in (0, 1]"),
            (Labels(), {"distill_augment_probability": 1.5}, "probability in (0, 1]"),
            (Labels(), {"distill_augment_neighbours": 0},
             "--distill_augment_neighbours=0: at least 1"),
            (Labels(), {"teacher_checkpoint": None}, "it needs --teacher_checkpoint"),
            (NoLabels(), {}, "the task 'squad' takes no examples labelled by the teacher"),
            (Labels(), {"teacher_files": SimpleNamespace(layout=release.SAVEDMODEL)},
             "is a SavedModel export, whose word embeddings are not read here")):
        with pytest.raises(UsageError, match=re.escape(words)):
            check_augment(task, options(**given))


# ------------------------------------------------------------- run_ner.py --teacher_*
def test_a_ner_student_learns_each_labelled_position(tmp_path):
    """run_ner.py on the CLUENER slice: a 2-layer teacher, then its 1-pass student of
    a narrower FFN named by the teacher's output directory alone (the run kept its config and
    vocabulary there), with Chinese transfer text. The cached outputs are the teacher's
    logits at each example's real positions (1e-5); a transfer text's records (a window
    each) are tagged with the teacher's argmax at each character; the student trains,
    evaluates (seqeval's scores) and keeps its TF1 checkpoint and its own config. A copy
    of each training record with characters replaced (--distill_augment=1) keeps its
    original's labelled positions, tagged by the teacher."""
    from albert_tf import AlbertConfig, AlbertTokenClassifier
    from albert_tf.checkpoints.release import load_checkpoint
    from albert_tf.data import records
    from tests.helpers.scripts import FIXTURES, read_results, run_script
    from tests.helpers.tiny import write_tiny_config

    ner = FIXTURES / "ner"
    config = write_tiny_config(tmp_path, vocab_size=21128, num_hidden_layers=2)
    common = [f"--train_file={ner / 'cluener_train.json'}",
              f"--dev_file={ner / 'cluener_dev.json'}", "--max_seq_length=64",
              "--train_batch_size=16", "--eval_batch_size=16", "--train_step=3",
              "--learning_rate=1e-3", "--do_train", "--do_eval",
              f"--cached_dir={tmp_path / 'cache'}"]
    teacher = tmp_path / "teacher"
    run_script("run_ner.py", *common, f"--albert_config_file={config}",
               f"--vocab_file={ner / 'vocab_chinese.txt'}", f"--output_dir={teacher}")
    assert (teacher / "vocab.txt").read_bytes() == (ner / "vocab_chinese.txt").read_bytes()
    assert AlbertConfig.from_json_file(teacher / "albert_config.json") == \
        AlbertConfig.from_json_file(config)
    # transfer text: Chinese, cut into characters as CLUENER's words are; the long
    # text in two windows
    transfer = ["北京的天气很好。", "我们在上海开会，" * 10]
    (tmp_path / "transfer.txt").write_text("\n".join(transfer) + "\n", encoding="utf-8")
    done = run_script("run_ner.py", *common, f"--teacher_checkpoint={teacher}",
                      "--student_num_hidden_layers=1", "--student_intermediate_size=20",
                      f"--output_dir={tmp_path / 'student'}",
                      f"--transfer_file={tmp_path / 'transfer.txt'}", "--distill_augment=1")
    # its one block's FFN: the teacher's 20 most active units of 32, and its bias
    assert "copied (4 of them the narrower FFNs', of their most active units), " \
        "0 initialized" in done.stderr
    assert "f1" in read_results(tmp_path / "student" / "eval_results.txt")
    student = AlbertConfig.from_json_file(tmp_path / "student" / "albert_config.json")
    assert (student.num_hidden_layers, student.intermediate_size) == (1, 20)
    (written,) = (tmp_path / "cache").glob("*.teacher.tf_record")
    labels = (teacher / "labels.txt").read_text().split()
    model = AlbertTokenClassifier(AlbertConfig.from_json_file(config), len(labels), seed=0)
    load_checkpoint(model, str(teacher / "model.ckpt-best"))
    features = [tf.train.Example.FromString(record).features.feature
                for record in tf.data.TFRecordDataset(str(written)).as_numpy_iterator()]
    assert len(features) > 10
    # the teacher on every record at once (each padded to the records' length; the
    # padding is masked out)
    logits = model(names.to_model_inputs({
        k: tf.constant([f[k].int64_list.value for f in features], tf.int32)
        for k in records.SEQUENCE_FEATURES}))[names.LOGITS].numpy()
    vocab = (ner / "vocab_chinese.txt").read_text(encoding="utf-8").split("\n")
    texts = [" ".join(str(vocab.index(c)) for c in text) for text in transfer]
    (train,) = (tmp_path / "cache").glob("*_train.tf_record")
    originals = [tf.train.Example.FromString(r).features.feature
                 for r in tf.data.TFRecordDataset(str(train)).as_numpy_iterator()]
    by_ids = {tuple(f["input_ids"].int64_list.value): f for f in originals}
    taught, augmented = [], 0
    for feature, expected in zip(features, logits):
        length = sum(feature["input_mask"].int64_list.value)
        stored = np.reshape(feature["teacher_logits"].float_list.value, (length, len(labels)))
        np.testing.assert_allclose(stored, expected[:length], atol=1e-5)
        ids = " ".join(map(str, feature["input_ids"].int64_list.value[1:length - 1]))
        label_ids = np.array(feature["label_ids"].int64_list.value[:length])
        if any(ids in text for text in texts):  # a transfer record: the teacher's tags
            assert (label_ids[1:-1] >= 0).all() and label_ids[0] == label_ids[-1] == -1
            np.testing.assert_array_equal(label_ids[1:-1], np.argmax(stored, -1)[1:-1])
            taught.append(length - 2)
        elif tuple(feature["input_ids"].int64_list.value) not in by_ids:
            # --distill_augment's copy of a training record: characters replaced, its
            # labelled positions its original's, tagged by the teacher
            new = np.array(feature["input_ids"].int64_list.value)
            original = min(originals, key=lambda o: np.sum(
                np.array(o["input_ids"].int64_list.value) != new))
            old = np.array(original["input_ids"].int64_list.value)
            assert all(vocab[i].isalpha() for i in [*old[old != new], *new[old != new]])
            old_labels = np.array(original["label_ids"].int64_list.value[:length])
            np.testing.assert_array_equal(label_ids >= 0, old_labels >= 0)
            np.testing.assert_array_equal(label_ids[label_ids >= 0],
                                          np.argmax(stored, -1)[label_ids >= 0])
            augmented += 1
    assert sorted(taught) == [8, 18, 62]  # the short text; the long one's two windows
    assert 0.8 * len(originals) < augmented <= len(originals)
    assert len(features) == len(originals) + 3 + augmented


# --------------------------------------- the other kinds: regression, multi-label, choices
def _stored_and_recomputed(cache, teacher, kind, output, max_seq_length):
    """The cached teacher outputs of each training record, and the teacher's checkpoint
    run on the same records (all at once, each at the records' length; the padding is
    masked out)."""
    from albert_tf.data import records
    from albert_tf.export import load_model_from_checkpoint

    (written,) = cache.glob("*.teacher.tf_record")
    features = [tf.train.Example.FromString(record).features.feature
                for record in tf.data.TFRecordDataset(str(written)).as_numpy_iterator()]
    model = load_model_from_checkpoint(kind, teacher / "albert_config.json", teacher)
    inputs = {k: np.array([f[k].int64_list.value for f in features], np.int32)
              for k in records.SEQUENCE_FEATURES}
    if kind == "multiple_choice":  # each record's choices one after the other
        inputs = {k: v.reshape(len(features), -1, max_seq_length) for k, v in inputs.items()}
    recomputed = model(names.to_model_inputs(inputs))[output].numpy()
    stored = np.array([f[distillation.TEACHER_LOGITS].float_list.value for f in features])
    return stored.reshape(recomputed.shape), recomputed


@pytest.mark.parametrize("kind", ["regression", "multi_label", "c3"])
def test_each_kind_distils_from_its_teachers_outputs(kind, tmp_path):
    """run_classifier.py's other kinds (STS-B's regression, GoEmotions' multi-label
    rows, C3's variable choices with the Chinese vocabulary): a 2-layer teacher, then
    its 1-pass student named by the teacher's directory alone. The cached outputs are
    the teacher's (its predictions, its logits, each choice's logit: 1e-5), and the
    student trains on them and evaluates to finite scores. The multi-label student also
    has transfer text, labelled with the labels the teacher gives 0.5 or more; the C3
    student unanswered questions in C3's format, labelled with the teacher's choice,
    and two copies of each training record with words replaced (--distill_augment),
    labelled so too."""
    from tests.helpers.scripts import FIXTURES, SPM, read_results, run_script
    from tests.helpers.tiny import write_tiny_config

    tokenizer = f"--spm_model_file={SPM}"
    length = 32
    if kind == "regression":
        data = ["--task_name=STS-B", f"--data_dir={FIXTURES / 'glue'}"]
        served, output = "classifier", names.PREDICTIONS
    elif kind == "multi_label":
        emotions = FIXTURES / "goemotions"
        data = ["--task_name=multi_label", f"--train_file={emotions / 'train.tsv'}",
                f"--dev_file={emotions / 'dev.tsv'}", "--text_a_field=text",
                "--label_field=labels"]
        served, output = "multi_label", names.LOGITS
    else:
        data = ["--task_name=c3", f"--data_dir={FIXTURES / 'c3'}"]
        tokenizer = f"--vocab_file={FIXTURES / 'ner' / 'vocab_chinese.txt'}"
        served, output, length = "multiple_choice", names.LOGITS, 96
    config = write_tiny_config(tmp_path, **({"vocab_size": 21128} if kind == "c3" else {}),
                               max_position_embeddings=128, num_hidden_layers=2)
    common = [*data, f"--max_seq_length={length}", "--train_batch_size=8",
              "--eval_batch_size=8", "--predict_batch_size=8", "--train_step=2",
              "--save_checkpoints_steps=2", "--learning_rate=1e-3", "--do_train",
              f"--cached_dir={tmp_path / 'cache'}"]
    teacher = tmp_path / "teacher"
    run_script("run_classifier.py", *common, f"--albert_config_file={config}", tokenizer,
               f"--output_dir={teacher}")
    transfer = ["so happy for you", "that is awful news", "what a day"]
    if kind == "multi_label":  # texts the teacher labels
        (tmp_path / "transfer.txt").write_text("\n".join(transfer) + "\n")
        common.append(f"--transfer_file={tmp_path / 'transfer.txt'}")
    if kind == "c3":  # questions without answers, in C3's own format
        transfer = [[["今天下午我们去公园散步"], [
            {"question": "他们下午去哪里?", "choice": ["公园", "学校"]},
            {"question": "他们去做什么?", "choice": ["散步", "跑步", "游泳", "看书"]}], "t-1"],
            [["图书馆周末也开门"], [{"question": "图书馆什么时候开门?",
                                     "choice": ["周末", "不开"]}], "t-2"]]
        (tmp_path / "transfer.json").write_text(json.dumps(transfer, ensure_ascii=False),
                                                encoding="utf-8")
        common += [f"--transfer_file={tmp_path / 'transfer.json'}", "--distill_augment=2"]
    done = run_script("run_classifier.py", *common, "--do_eval",
                      f"--teacher_checkpoint={teacher}", "--student_num_hidden_layers=1",
                      f"--output_dir={tmp_path / 'student'}")
    assert "student started from the teacher" in done.stderr
    scores = read_results(tmp_path / "student" / "eval_results.txt")
    assert scores["global_step"] == 2 and all(np.isfinite(list(scores.values())))
    stored, recomputed = _stored_and_recomputed(tmp_path / "cache", teacher, served, output,
                                                length)
    np.testing.assert_allclose(stored, recomputed, atol=1e-5)
    if kind == "c3":  # a padded choice: the absent logit, whose probability is 0
        assert (stored < -1e8).any() and (stored > -1e8).any()
        # the three transfer questions, each labelled with the teacher's choice among
        # its own (found by their contexts' first pieces)
        from albert_tf.tokenization import FullTokenizer

        encode = FullTokenizer(vocab_file=str(FIXTURES / "ner" / "vocab_chinese.txt")).encode
        starts = {tuple(encode(document[0][0])[:4]): len(document[1])
                  for document in transfer}
        (written,) = (tmp_path / "cache").glob("*.teacher.tf_record")
        rows = [tf.train.Example.FromString(r).features.feature
                for r in tf.data.TFRecordDataset(str(written)).as_numpy_iterator()]
        found = {}
        for row, logits in zip(rows, stored):
            start = tuple(row["input_ids"].int64_list.value[1:5])
            if start in starts:
                assert row["label_ids"].int64_list.value == [int(np.argmax(logits))]
                found[start] = found.get(start, 0) + 1
        assert found == starts
        # --distill_augment=2: two copies of each training record, Chinese characters
        # replaced by the teacher's nearest ones, as `Augmenter` makes them from the
        # teacher's embeddings and the run's seed; each labelled with the teacher's choice
        from albert_tf.data import augmentation

        (train,) = (tmp_path / "cache").glob("*_train.tf_record")
        originals = {tuple(tf.train.Example.FromString(r).features.feature["input_ids"]
                           .int64_list.value)
                     for r in tf.data.TFRecordDataset(str(train)).as_numpy_iterator()}
        from albert_tf.export import load_model_from_checkpoint

        table = load_model_from_checkpoint(served, teacher / "albert_config.json", teacher) \
            .encoder.word_embeddings.numpy()
        made = [tuple(tf.train.Example.FromString(r).features.feature["input_ids"]
                      .int64_list.value) for _, _, r in augmentation.Augmenter(
                          FullTokenizer(vocab_file=str(FIXTURES / "ner" / "vocab_chinese.txt")),
                          table, 2, 0.4, 15, seed=12345).records(str(train))]
        augmented = [(tuple(row["input_ids"].int64_list.value), row, logits)
                     for row, logits in zip(rows, stored)
                     if tuple(row["input_ids"].int64_list.value[1:5]) not in starts
                     and tuple(row["input_ids"].int64_list.value) not in originals]
        assert sorted(ids for ids, _, _ in augmented) == sorted(made)
        assert 127 < len(made) <= 2 * 127 and len(rows) == 127 + 3 + len(made)
        for _, row, logits in augmented:
            assert row["label_ids"].int64_list.value == [int(np.argmax(logits))]
    if kind == "multi_label":  # labelled: each label the teacher gives 0.5 or more
        from albert_tf.tokenization import FullTokenizer

        encode = FullTokenizer(spm_model_file=str(SPM), do_lower_case=True).encode
        wanted = {tuple(encode(text)) for text in transfer}
        (written,) = (tmp_path / "cache").glob("*.teacher.tf_record")
        rows = [tf.train.Example.FromString(r).features.feature
                for r in tf.data.TFRecordDataset(str(written)).as_numpy_iterator()]
        found = [(f["label_ids"].int64_list.value, logits) for f, logits in zip(rows, stored)
                 if tuple(f["input_ids"].int64_list.value[1:sum(
                     f["input_mask"].int64_list.value) - 1]) in wanted]
        assert len(found) == len(transfer)
        for labels, logits in found:
            assert list(labels) == [int(x >= 0.0) for x in logits]  # sigmoid >= 0.5
