"""Task distillation's pieces that no script owns (issue 50): the student made from its
teacher's own weights, and the soft-target loss.

**A student from its teacher's weights.** ALBERT's layers share their groups' weights,
so a student with fewer layer passes needs no new weights at all: `student_config`
keeps the teacher's config with fewer `num_hidden_layers` (and, for a teacher of several
groups such as a BERT read as the ALBERT of one group per layer, fewer groups), and
`init_student_from_teacher` copies each student variable from the teacher's variable of
the same name, a group's from the teacher's group `group_map` names (the last of each
equal block of the teacher's groups: 6 groups into 3 take groups 1, 3 and 5, as a
student of every other layer does). Everything else (embeddings, pooler, a head of the
same shape) is copied as it is; a head of another shape stays as initialized, and the
report says so. A student may also have narrower FFNs (`intermediate_size`): each
block keeps the teacher's units that move its output most on the training examples
(`ffn_units`: the mean magnitude of the unit's activation times the norm of its output
weights, a structured pruning measured on the teacher's own inputs, `ffn_activity`),
and the mean of what the units left out gave goes into the output bias
(`ffn_output_bias`); the attention and the hidden width stay whole, so the layers'
losses need no projection.

**The soft-target loss** (Hinton et al. 2015): per example, T^2 * KL(softmax(t / T) ||
softmax(s / T)) over the last axis of the teacher's logits t and the student's s,
whose gradient is T * (softmax(s / T) - softmax(t / T)), the same scale at every T
(`softmax_distillation`); for sigmoid outputs (multi-label) the same with each output a
two-way softmax (`sigmoid_distillation`); for a regression, the squared difference of
the two predictions (`regression_distillation`); for token classification,
`softmax_distillation` at each labelled position (`label_ids` >= 0), averaged over
those positions as the task's own loss is (`"token_softmax"`). `DistillationObjective`
mixes it with the task's own loss on the labels, as `(1 - alpha) * labels + alpha *
soft`, in the numerator / denominator form of `training.objectives`, so that replicas
and micro-batches add up to the loss of the whole batch. The teacher's outputs are a
feature of the batch (`TEACHER_LOGITS`), computed once before the student trains: a
student step runs no teacher.

**The layers' losses** (TinyBERT, Jiao et al. 2020), optional: each student layer
pass against its teacher layer (`hidden_layer_map`). Its output: the mean squared
difference over the real tokens (`hidden_distillation`), the student's first mapped by a
learned projection where the hidden sizes differ (TinyBERT's W_h, one for every layer).
Its attention scores, q . k / sqrt(D) of each head before the mask and the softmax, as
TinyBERT compares them: the mean squared difference over the heads and the pairs of real
tokens (`attention_distillation`; the same number of heads). (TinyBERT's task_distill.py
zeroes the padded keys' scores and averages over the whole padded batch, padded queries
included; over the real pairs of each sequence, the loss does not depend on how much a
batch is padded, and here batches are padded to their own longest.) Hidden states and
attention are too large to cache, so here the teacher (`LayerTeacher`) runs in the
student's step, its gradients stopped.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, NamedTuple, Sequence

import numpy as np
import tensorflow as tf

from albert_tf import names
from albert_tf.checkpoints.tf1 import CheckpointError, tf1_name
from albert_tf.config import AlbertConfig, ConfigError
from albert_tf.training.objectives import (
    Objective,
    WeightedMeanObjective,
    _batch_size,
    example_weights,
)

# The feature of a batch that holds the teacher's outputs for its examples.
TEACHER_LOGITS = "teacher_logits"
_GROUP = re.compile(r"(bert/encoder/transformer/group_)(\d+)(/)")


# ------------------------------------------------------------------ the student
def student_config(teacher: AlbertConfig, *, num_hidden_layers: int | None = None,
                   num_hidden_groups: int | None = None,
                   intermediate_size: int | None = None) -> AlbertConfig:
    """The teacher's config with `num_hidden_layers` layer passes (default: the
    teacher's) in `num_hidden_groups` groups (default: the teacher's, or fewer where
    the student has fewer layers), and FFNs of `intermediate_size` units (default: the
    teacher's; fewer keep the teacher's most active, `ffn_units`). Raises ConfigError,
    naming the field, for a student that the teacher's weights cannot start: more
    groups than the teacher has, more groups than layers, or none; a wider FFN."""
    width = teacher.intermediate_size if intermediate_size is None else intermediate_size
    if not 1 <= width <= teacher.intermediate_size:
        raise ConfigError(
            f"the student's intermediate_size is {width}; a student started from its "
            f"teacher's weights keeps 1 to the teacher's {teacher.intermediate_size} "
            "units of each FFN")
    layers = teacher.num_hidden_layers if num_hidden_layers is None else num_hidden_layers
    if layers < 1:
        raise ConfigError(f"the student's num_hidden_layers is {layers}; it needs at least 1")
    groups = (min(teacher.num_hidden_groups, layers) if num_hidden_groups is None
              else num_hidden_groups)
    if not 1 <= groups <= teacher.num_hidden_groups:
        raise ConfigError(
            f"the student's num_hidden_groups is {groups}; a student started from its "
            f"teacher's weights has 1 to the teacher's {teacher.num_hidden_groups}")
    if groups > layers:
        raise ConfigError(
            f"the student's num_hidden_groups ({groups}) is more than its "
            f"num_hidden_layers ({layers}): a group no layer uses has no weights")
    return dataclasses.replace(teacher, num_hidden_layers=layers, num_hidden_groups=groups,
                               intermediate_size=width)


def _last_of_block(index: int, teacher_count: int, student_count: int) -> int:
    """The teacher's group or layer that the student's `index`-th starts from or learns
    by default: the teacher's cut into the student's number of equal blocks, the last
    of the `index`-th block."""
    return (index + 1) * teacher_count // student_count - 1


def group_map(teacher: AlbertConfig, student: AlbertConfig,
              groups: Sequence[int] | None = None) -> dict[int, int]:
    """Student group -> the teacher's group whose weights it starts from: `groups` (the
    teacher's, one per student group, in order), by default the teacher's groups cut
    into the student's number of equal blocks, the last of each. Raises ConfigError
    for `groups` that are not one per student group, each one of the teacher's."""
    teacher_groups, student_groups = teacher.num_hidden_groups, student.num_hidden_groups
    if groups is None:
        return {g: _last_of_block(g, teacher_groups, student_groups)
                for g in student.used_groups()}
    groups = list(groups)
    if len(groups) != student_groups:
        raise ConfigError(f"the student's groups start from {len(groups)} of the teacher's "
                          f"({', '.join(map(str, groups))}); it has {student_groups}")
    outside = [g for g in groups if not 0 <= g < teacher_groups]
    if outside:
        raise ConfigError(f"the teacher has groups 0 to {teacher_groups - 1}; "
                          f"{', '.join(map(str, outside))} is not one of them")
    return dict(enumerate(groups))


_FFN = "ffn_1/intermediate/"
# Where a narrower student's FFN variables cut the teacher's units: the axis of I.
_FFN_UNIT_AXIS = {"dense/kernel": 1, "dense/bias": 0, "output/dense/kernel": 0}


class FfnActivity(NamedTuple):
    """A block's FFN units over real tokens (`ffn_activity`): the mean of each unit's
    magnitude |a| and of its value a ([I] each), after `hidden_act`."""

    magnitude: np.ndarray
    mean: np.ndarray


def ffn_activity(model, batches) -> dict[str, FfnActivity]:
    """The activity of each FFN unit of `model` (a task model or encoder) over the
    real tokens of `batches` (model inputs, [B, S] each, or [B, C, S] of a multiple
    choice's), by the block's TF1 scope: every pass of a shared block counted."""
    # an `AlbertEncoder`, or a task model's
    encoder = model if hasattr(model, "ffn_activations") else model.encoder
    sums: dict[str, list] = {}
    for inputs in batches:
        inputs = {k: tf.reshape(inputs[k], [-1, tf.shape(inputs[k])[-1]])
                  for k in names.MODEL_INPUTS if k in inputs}
        mask = tf.cast(inputs[names.INPUT_MASK], tf.float64)[..., None]
        encoded = encoder(inputs, training=False)
        for scope, units in encoder.ffn_activations(encoded, inputs[names.INPUT_MASK]):
            units = tf.cast(units, tf.float64)
            found = sums.setdefault(scope, [0.0, 0.0, 0.0])
            found[0] += tf.reduce_sum(tf.abs(units) * mask, [0, 1]).numpy()
            found[1] += tf.reduce_sum(units * mask, [0, 1]).numpy()
            found[2] += float(tf.reduce_sum(mask))
    return {scope: FfnActivity(magnitude / max(count, 1.0), mean / max(count, 1.0))
            for scope, (magnitude, mean, count) in sums.items()}


def ffn_units(activity: FfnActivity, output_kernel, count: int) -> np.ndarray:
    """The `count` of a block's I FFN units that a narrower student keeps, in order:
    those whose mean magnitude times the norm of their output weights
    (`output_kernel` [I, H]), E|a_j| * ||W_out[j, :]||, is the largest, the most each
    moves the block's output on the teacher's own inputs (ties: the first)."""
    score = activity.magnitude * np.linalg.norm(np.asarray(output_kernel, np.float64), axis=1)
    return np.sort(np.argsort(-score, kind="stable")[:count])


def ffn_output_bias(activity: FfnActivity, output_kernel, output_bias,
                    kept: np.ndarray) -> np.ndarray:
    """The output bias of a block that keeps the units `kept`: the teacher's plus the
    mean of what the units left out gave (sum over them of E[a_j] * W_out[j, :]), so
    that the block's output keeps its mean on the teacher's inputs."""
    dropped = np.setdiff1d(np.arange(len(activity.mean)), kept)
    shift = activity.mean[dropped] @ np.asarray(output_kernel, np.float64)[dropped]
    return (np.asarray(output_bias, np.float64) + shift).astype(np.float32)


class StudentReport(NamedTuple):
    """What `init_student_from_teacher` did: the student's variables copied (by name;
    `narrowed`, those among them a narrower FFN's: cut to its units, or its output
    bias shifted) and those left as initialized (no teacher variable of that name and
    shape)."""

    copied: list[str]
    initialized: list[str]
    narrowed: tuple[str, ...] = ()


def init_student_from_teacher(student, teacher, groups: Sequence[int] | None = None,
                              inputs=None) -> StudentReport:
    """Assigns each of the student model's variables from the teacher model's variable
    of the same TF1 name, a transformer group's from the teacher's group of `group_map`
    (`groups`). A student of a narrower FFN (`intermediate_size`) keeps, in each block,
    the units of `ffn_units` and the output bias of `ffn_output_bias`, both measured on
    `inputs` (batches of model inputs of the training examples, `ffn_activity`;
    needed then). Both models are built; their configs must agree but for the layers,
    groups and FFN width."""
    ours, theirs = student.config, teacher.config
    differ = [f.name for f in dataclasses.fields(AlbertConfig)
              if f.compare and f.name not in ("num_hidden_layers", "num_hidden_groups",
                                              "intermediate_size")
              and getattr(ours, f.name) != getattr(theirs, f.name)]
    if ours.intermediate_size > theirs.intermediate_size:
        differ.append("intermediate_size (wider than the teacher's)")
    if differ:
        raise CheckpointError(
            "a student started from its teacher's weights has the teacher's config but "
            "for its layers, groups and a narrower FFN; these differ: "
            f"{', '.join(differ)}")
    mapping = group_map(theirs, ours, groups)
    source = {tf1_name(v): v for v in teacher.weights}
    narrower = ours.intermediate_size < theirs.intermediate_size
    if narrower and inputs is None:
        raise ValueError("a student of narrower FFNs than its teacher's keeps the units "
                         "most active on the training examples: give `inputs`")
    activity = ffn_activity(teacher, inputs) if narrower else {}
    kept: dict[str, np.ndarray] = {}

    def teacher_name(name: str) -> str:
        return _GROUP.sub(lambda m: f"{m[1]}{mapping[int(m[2])]}{m[3]}", name)

    def narrowed(name: str, found) -> np.ndarray | None:
        scope, ffn, part = name.partition(_FFN)
        if not (narrower and ffn):
            return None
        output_kernel = source[f"{scope}{_FFN}output/dense/kernel"].numpy()
        if scope not in kept:
            kept[scope] = ffn_units(activity[scope], output_kernel, ours.intermediate_size)
        if part == "output/dense/bias":
            return ffn_output_bias(activity[scope], output_kernel, found.numpy(),
                                   kept[scope])
        if part in _FFN_UNIT_AXIS:
            return np.take(found.numpy(), kept[scope], axis=_FFN_UNIT_AXIS[part])
        return None

    copied, initialized, cut = [], [], []
    for variable in student.weights:
        name = tf1_name(variable)
        in_teacher = teacher_name(name)
        found = source.get(in_teacher)
        value = None if found is None else narrowed(in_teacher, found)
        if value is not None:
            cut.append(name)
        elif found is not None:
            value = found
        if value is None or tuple(value.shape) != tuple(variable.shape):
            initialized.append(name)
            continue
        variable.assign(value)
        copied.append(name)
    return StudentReport(copied, initialized, tuple(n for n in cut if n in copied))


# ---------------------------------------------------------------- the soft loss
def softmax_distillation(student_logits, teacher_logits, temperature: float):
    """Per example (all axes but the last): T^2 * KL(softmax(t / T) || softmax(s / T))."""
    t = tf.cast(teacher_logits, tf.float32) / temperature
    s = tf.cast(student_logits, tf.float32) / temperature
    teacher = tf.nn.softmax(t, axis=-1)
    kl = tf.reduce_sum(teacher * (tf.nn.log_softmax(t, axis=-1) -
                                  tf.nn.log_softmax(s, axis=-1)), axis=-1)
    return temperature ** 2 * kl


def sigmoid_distillation(student_logits, teacher_logits, temperature: float):
    """Per example: `softmax_distillation` of each output as a two-way softmax
    (logits 0 and x), summed over the outputs (multi-label)."""
    def two_way(x):
        x = tf.cast(x, tf.float32)
        return tf.stack([tf.zeros_like(x), x], axis=-1)

    return tf.reduce_sum(softmax_distillation(two_way(student_logits),
                                              two_way(teacher_logits), temperature), axis=-1)


def regression_distillation(student_predictions, teacher_predictions, temperature=None):
    """Per example: the squared difference of the predictions (no temperature)."""
    del temperature
    difference = tf.cast(student_predictions, tf.float32) - tf.cast(teacher_predictions,
                                                                   tf.float32)
    return tf.reshape(tf.square(difference), [tf.shape(difference)[0], -1])[:, 0]


SOFT_LOSSES: dict[str, Callable] = {"softmax": softmax_distillation,
                                    "sigmoid": sigmoid_distillation,
                                    "regression": regression_distillation,
                                    "token_softmax": softmax_distillation}
# The soft losses of each labelled position of a sequence ([B, S] per position, its
# mean over the positions whose `label_ids` are >= 0) rather than of each example.
PER_POSITION = frozenset({"token_softmax"})


# ------------------------------------------------------- the hidden states' loss
def hidden_layer_map(teacher_layers: int, student_layers: int,
                     layers: Sequence[int] | None = None) -> list[int]:
    """The teacher's layer pass (0-based) whose output each student layer pass learns:
    `layers`, by default the last of each equal block of the teacher's (as `group_map`:
    6 into 2 give 2 and 5). Raises ConfigError for `layers` that are not one per
    student layer, each one of the teacher's."""
    if layers is None:
        if student_layers > teacher_layers:
            raise ConfigError(f"the student has {student_layers} layer passes and the "
                              f"teacher {teacher_layers}: name the teacher's layer of each")
        return [_last_of_block(i, teacher_layers, student_layers)
                for i in range(student_layers)]
    layers = list(layers)
    if len(layers) != student_layers:
        raise ConfigError(f"{len(layers)} teacher layers for a student of {student_layers} "
                          "layer passes: one each")
    outside = [x for x in layers if not 0 <= x < teacher_layers]
    if outside:
        raise ConfigError(f"layers {outside} are outside the teacher's 0 to "
                          f"{teacher_layers - 1}")
    return layers


def hidden_distillation(student_states, teacher_states, mask) -> tf.Tensor:
    """Per sequence ([N]): the sum over the mapped layers of the mean over its real
    tokens (`mask` [N, S]) of the mean over the hidden units of the squared difference
    of the student's and the teacher's hidden states (each a list of [N, S, H], in
    the same order; TinyBERT's hidden-state loss, without a projection)."""
    mask = tf.cast(mask, tf.float32)
    tokens = tf.maximum(tf.reduce_sum(mask, -1), 1.0)
    total = tf.zeros_like(tokens)
    for student, teacher in zip(student_states, teacher_states, strict=True):
        squared = tf.reduce_mean(tf.square(tf.cast(student, tf.float32) -
                                           tf.cast(teacher, tf.float32)), -1)  # [N, S]
        total += tf.reduce_sum(squared * mask, -1) / tokens
    return total


def attention_distillation(student_scores, teacher_scores, mask) -> tf.Tensor:
    """Per sequence ([N]): the sum over the mapped layers of the mean over the heads and
    the (query, key) pairs of real tokens (`mask` [N, S]) of the squared difference of
    the student's and the teacher's attention scores (each a list of [N, heads, S, S],
    in the same order; TinyBERT's attention loss)."""
    mask = tf.cast(mask, tf.float32)
    pairs = mask[:, None, :, None] * mask[:, None, None, :]  # [N, 1, S, S]
    count = tf.maximum(tf.reduce_sum(mask, -1) ** 2, 1.0)
    total = tf.zeros_like(count)
    for student, teacher in zip(student_scores, teacher_scores, strict=True):
        squared = tf.reduce_mean(tf.square(tf.cast(student, tf.float32) -
                                           tf.cast(teacher, tf.float32)) * pairs, 1)
        total += tf.reduce_sum(squared, [-2, -1]) / count
    return total


class LayerTeacher(NamedTuple):
    """The teacher run in each student step for its layers: `model` (not trainable),
    `layers` (the teacher's layer pass of each student layer pass), the hidden states'
    loss's `weight`, the attention loss's `attention_weight` (0: off), and the
    `projection` of the student's hidden states to the teacher's width (a Keras Dense
    layer trained with the student), None where they have the same. The models give
    what the weights ask for (`prepare_layer_outputs`)."""

    model: object
    layers: Sequence[int]
    weight: float
    attention_weight: float = 0.0
    projection: object = None


def prepare_layer_outputs(student, teacher: LayerTeacher) -> None:
    """Asks the student and the teacher for the layer outputs its losses compare (their
    `hidden_states_output` and `attention_layers_output`); the teacher is made not
    trainable."""
    student.hidden_states_output = teacher.model.hidden_states_output = teacher.weight > 0
    if teacher.attention_weight > 0:
        student.attention_layers_output = tuple(range(len(teacher.layers)))
        teacher.model.attention_layers_output = tuple(teacher.layers)
    teacher.model.trainable = False


def stop_layer_outputs(model) -> None:
    """The model's outputs as any model's again (after `prepare_layer_outputs`)."""
    model.hidden_states_output, model.attention_layers_output = False, ()


def _labelled(features) -> tf.Tensor:
    return tf.cast(tf.cast(features[names.LABEL_IDS], tf.int32) >= 0, tf.float32)


class DistillationObjective(Objective):
    """`(1 - alpha)` times the task's own objective on the labels, plus `alpha` times
    the mean over the examples (over the labelled positions, for a soft loss of
    `PER_POSITION`) of `soft_loss(outputs[output], features[TEACHER_LOGITS],
    temperature)`: its term `distillation_loss` beside the task's terms; weighted as
    the task's own where that is a `WeightedMeanObjective` (`--window_weight=inverse`:
    each window 1 / its text's windows, in both terms). With `layers`
    (`LayerTeacher`), also the term `hidden_loss` (where its weight is not 0): the
    weight times the mean over the sequences that have a real token (a multiple-choice
    example's choices each) of `hidden_distillation` of the student's
    `names.HIDDEN_STATES` (projected, with a projection) and those the teacher computes
    on the batch; and `attention_loss` likewise of `attention_distillation` of their
    `names.ATTENTION_SCORES`. A projection trains with the model
    (`trainable_layers`)."""

    def __init__(self, task_objective: Objective, *, soft_loss: str = "softmax",
                 temperature: float = 1.0, alpha: float = 0.5, output: str = "logits",
                 layers: LayerTeacher | None = None):
        if soft_loss not in SOFT_LOSSES:
            raise ValueError(f"soft_loss {soft_loss!r}; known: {', '.join(SOFT_LOSSES)}")
        if not temperature > 0:
            raise ValueError(f"the temperature must be positive, got {temperature}")
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha (the soft targets' weight) must be in [0, 1], got {alpha}")
        if "distillation_loss" in task_objective.term_names:
            raise ValueError("the task's objective already has a term distillation_loss")
        self.task, self.soft_loss = task_objective, SOFT_LOSSES[soft_loss]
        self.per_position = soft_loss in PER_POSITION
        self.temperature, self.alpha, self.output = float(temperature), float(alpha), output
        self.term_names = (*task_objective.term_names, "distillation_loss")
        self.weight = (task_objective.weight if isinstance(
            task_objective, WeightedMeanObjective) and not self.per_position else None)
        self.layers = layers
        self.layer_terms = () if layers is None else tuple(
            term for term, weight in (("hidden_loss", layers.weight),
                                      ("attention_loss", layers.attention_weight))
            if weight > 0)
        self.term_names += self.layer_terms
        self.offsets = dict(task_objective.offsets)

    def trainable_layers(self) -> dict:
        projection = None if self.layers is None else self.layers.projection
        return {} if projection is None else {"distill_projection": projection}

    def numerators(self, outputs, features):
        found = {k: (1.0 - self.alpha) * v
                 for k, v in self.task.numerators(outputs, features).items()}
        soft = self.soft_loss(outputs[self.output], features[TEACHER_LOGITS], self.temperature)
        if self.per_position:
            soft = soft * _labelled(features)
        if self.weight is not None:
            soft = soft * tf.cast(example_weights(features, self.weight), soft.dtype)
        found["distillation_loss"] = self.alpha * tf.reduce_sum(soft)
        if self.layer_terms:
            teacher = self.layers
            taught = teacher.model(names.to_model_inputs(features), training=False)
            mask = _sequence_mask(features)
            if "hidden_loss" in self.layer_terms:
                states = outputs[names.HIDDEN_STATES]
                if teacher.projection is not None:
                    states = [teacher.projection(x) for x in states]
                theirs = [tf.stop_gradient(taught[names.HIDDEN_STATES][i])
                          for i in teacher.layers]
                found["hidden_loss"] = teacher.weight * tf.reduce_sum(
                    hidden_distillation(states, theirs, mask))
            if "attention_loss" in self.layer_terms:
                theirs = [tf.stop_gradient(x) for x in taught[names.ATTENTION_SCORES]]
                found["attention_loss"] = teacher.attention_weight * tf.reduce_sum(
                    attention_distillation(outputs[names.ATTENTION_SCORES], theirs, mask))
        return found

    def denominators(self, features):
        found = dict(self.task.denominators(features))
        found["distillation_loss"] = (
            tf.reduce_sum(_labelled(features)) if self.per_position else
            _batch_size(features) if self.weight is None else
            tf.reduce_sum(example_weights(features, self.weight)))
        if self.layer_terms:  # the sequences with a real token (not a padded choice)
            sequences = tf.reduce_sum(tf.cast(
                tf.reduce_any(_sequence_mask(features) > 0, -1), tf.float32))
            found.update(dict.fromkeys(self.layer_terms, sequences))
        return found

    def global_denominators(self, parts, all_reduce=None):
        # the task's own rule for its terms (and the sum for ours); a global batch with
        # no labelled position counts as one, as the task's token loss does
        total = self.task.global_denominators(parts, all_reduce)
        if self.per_position:
            total["distillation_loss"] = tf.maximum(total["distillation_loss"], 1.0)
        for term in self.layer_terms:
            total[term] = tf.maximum(total[term], 1.0)
        return total


def _sequence_mask(features) -> tf.Tensor:
    """The input mask of each sequence of the batch ([N, S]: a multiple-choice
    example's choices one after the other, as the model runs them)."""
    mask = features[names.INPUT_MASK]
    return tf.reshape(mask, [-1, tf.shape(mask)[-1]])

