"""The fine-tuning models of the original scripts, with their variable names and math.

- `AlbertClassifier`: GLUE (`classifier_utils.create_model`, run_classifier.py);
  `num_labels == 1` is STS-B regression.
- `AlbertMultipleChoice`: RACE (`race_utils.create_model`, run_race.py).
- `AlbertSquadV1`: SQuAD v1.1 (`squad_utils.create_v1_model`, run_squad_v1.py).
- `AlbertTokenClassifier`: token classification (NER); the original has none, its
  head is Model Garden's and Hugging Face's (dropout, a dense layer per position).
- `AlbertSquadV2`: SQuAD v2.0, ALBERT's own head (`squad_utils.create_v2_model`,
  run_squad_v2.py): start logits, end logits conditioned on a start (the gold one in
  training, the top `start_n_top` at inference) and an answerability logit.

Each holds an `AlbertEncoder` (`bert/...`) and its head's variables under the names the
original graph gives them (`albert_tf.modeling.tf1_variables` lists them), so a pretraining
checkpoint loads the encoder (the head is then reported missing, as it should be) and a
checkpoint fine-tuned by the original scripts loads whole. Losses: `albert_tf.losses`.
"""

from __future__ import annotations

import contextlib

import keras
import tensorflow as tf

from albert_tf import names, task_heads
from albert_tf.config import AlbertConfig
from albert_tf.modeling import common
from albert_tf.modeling.base import AlbertModel, tf1_scope
from albert_tf.modeling.encoder import INPUT_NAMES, AlbertEncoder

# The classifier, RACE and SQuAD v1 heads of the original use a fixed
# `truncated_normal_initializer(stddev=0.02)`, not the config's initializer_range
# (which the SQuAD v2 head uses).
HEAD_INITIALIZER_STDDEV = 0.02
# The original's head dropout: `keep_prob=0.9` (classifier, hard-coded) and the
# `--dropout_prob` default of run_race.py and run_squad_v2.py.
HEAD_DROPOUT_RATE = 0.1
# What the original SQuAD v2 head subtracts from the logits of positions p_mask excludes.
P_MASK_PENALTY = 1e30


def root_scope():
    """The TF1 root variable scope: a variable created in it is named by its bare name
    (`output_weights`) whatever scopes enclose the model."""
    return keras.name_scope("", override_parent="")


def _check_count(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _check_rate(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


def _variable(name: str, shape, initializer, dtype_policy) -> keras.Variable:
    return keras.Variable(initializer, shape=shape, dtype=dtype_policy.variable_dtype,
                          name=name)


class AlbertTaskModel(AlbertModel):
    """An `AlbertEncoder` plus a task head; what the task models share.

    The head's initial weights and dropout draw their seeds from `seed + 1`, after the
    encoder's (which uses `seed`), as `AlbertPretrainer` does.
    """

    release_strict = False  # `from_release`: a pretraining release has no task head

    def __init__(self, config: AlbertConfig, seed: int | None = None, **kwargs):
        super().__init__(config, seed, **kwargs)
        self.encoder = AlbertEncoder(config, seed=seed, dtype=self.dtype_policy)
        self._head_seeds = common.SeedStream(None if seed is None else seed + 1)

    def _encode(self, inputs, training, first_token_only=False):
        return self.encoder(inputs, training=training, first_token_only=first_token_only)

    def _build_head(self, head: task_heads.Head, num_outputs: int) -> None:
        """The weights and bias of a head (`albert_tf.task_heads.Head`) under their TF1
        names (`self.output_weights` [num_outputs, H], `self.output_bias`), created in
        the table's order."""
        created = []
        for name, variable in head.variables.items():
            *scopes, leaf = name.split("/")
            initial = "zeros" if variable.initial == "zeros" else \
                common.truncated_normal(HEAD_INITIALIZER_STDDEV, self._head_seeds)
            with contextlib.ExitStack() as stack:
                stack.enter_context(tf1_scope(scopes[0]) if scopes else root_scope())
                for scope in scopes[1:]:
                    stack.enter_context(keras.name_scope(scope))
                created.append(_variable(leaf, variable.shape(self.config, num_outputs),
                                         initial, self.dtype_policy))
        self.output_weights, self.output_bias = created

    def _build_pooled_head(self, head: task_heads.Head, num_outputs: int,
                           dropout_rate: float) -> None:
        """The head the original's classifier and RACE scorer put on the pooled output:
        root-scope `output_weights` [num_outputs, H] and `output_bias`, and dropout."""
        self._build_head(head, num_outputs)
        self.dropout = common.dropout(dropout_rate, self._head_seeds, self.dtype_policy)

    def _score_pooled(self, pooled, training):
        """dropout(pooled) @ output_weights^T + output_bias: [N, H] -> [N, num_outputs]."""
        pooled = common.apply_dropout(self.dropout, pooled, training)
        scores = tf.matmul(pooled, tf.cast(self.output_weights, pooled.dtype), transpose_b=True)
        return scores + tf.cast(self.output_bias, pooled.dtype)


# The logit of an absent choice (all-zero input_mask): finite, so that a row with no
# choice at all still has a softmax, and far below any score.
ABSENT_CHOICE_LOGIT = -1e9


def _choice_outputs(logits) -> dict:
    """`logits`, their softmax `probabilities` and the argmax `predictions` (int32)."""
    probabilities = tf.nn.softmax(logits, axis=-1)
    return {names.LOGITS: logits, names.PROBABILITIES: probabilities,
            names.PREDICTIONS: tf.argmax(probabilities, axis=-1, output_type=tf.int32)}


class AlbertClassifier(AlbertTaskModel):
    """GLUE classification on the pooled output, as `classifier_utils.create_model`.

    Variables (root scope): `output_weights` [num_labels, H], `output_bias` [num_labels].
    logits = dropout(pooled_output) @ output_weights^T + output_bias, dropout
    (`dropout_rate`, the original's 0.1) only when training.

    Inputs: the encoder's dict. Outputs (float32):
      classification (num_labels >= 2): `logits` [B, num_labels], `probabilities`
        (softmax) and `predictions` (argmax, int32 [B]);
      regression (num_labels == 1, STS-B): `logits` [B] (squeezed, as the original) and
        `predictions` = `logits`.
    Losses: `losses.classification_loss(logits, label_ids)`, or
    `losses.regression_loss(predictions, label_ids)`.
    """

    hf_architecture = names.HF_SEQUENCE_CLASSIFICATION
    heads = (task_heads.CLASSIFIER,)
    outputs_argument = "num_labels"

    def __init__(self, config: AlbertConfig, num_labels: int, seed: int | None = None,
                 dropout_rate: float = HEAD_DROPOUT_RATE, **kwargs):
        _check_count("num_labels", num_labels)
        dropout_rate = _check_rate("dropout_rate", dropout_rate)
        kwargs.setdefault("name", "albert_classifier")
        super().__init__(config, seed, **kwargs)
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate
        self._build_pooled_head(self.heads[0], num_labels, dropout_rate)
        self.built = True

    @property
    def is_regression(self) -> bool:
        return self.num_labels == 1

    def call(self, inputs, training=None):
        # Only the pooled output is read: the last block computes [CLS] alone.
        pooled = self._encode(inputs, training, first_token_only=True)[names.POOLED_OUTPUT]
        logits = tf.cast(self._score_pooled(pooled, training), tf.float32)  # [B, num_labels]
        if self.is_regression:
            logits = tf.squeeze(logits, -1)  # [B]
            return {names.LOGITS: logits, names.PREDICTIONS: logits}
        return _choice_outputs(logits)

    def get_config(self):
        return {**super().get_config(), "num_labels": self.num_labels,
                "dropout_rate": self.dropout_rate}


class AlbertMultipleChoice(AlbertTaskModel):
    """RACE, as `race_utils.create_model`: every choice is scored from its pooled output.

    Inputs: the encoder's names, each int [B, num_choices, S]; they are run as
    [B * num_choices, S]. Variables (root scope): `output_weights` [1, H],
    `output_bias` [1]; score = dropout(pooled) @ output_weights^T + output_bias (dropout
    `dropout_rate`, the original's `--dropout_prob` 0.1, only when training).
    A choice whose `input_mask` is all zeros is absent (an example with fewer choices
    than `num_choices`, padded): its logit is `ABSENT_CHOICE_LOGIT`, so its probability
    is 0 and it is never predicted (RACE, whose four choices are always there, is
    unchanged).
    Outputs (float32): `logits` [B, num_choices], `probabilities`, `predictions` (int32
    [B]). Loss: `losses.classification_loss(logits, label_ids)`.
    """

    hf_architecture = names.HF_MULTIPLE_CHOICE
    heads = (task_heads.MULTIPLE_CHOICE,)
    detectable = False  # its head is the classifier's

    def __init__(self, config: AlbertConfig, num_choices: int = 4, seed: int | None = None,
                 dropout_rate: float = HEAD_DROPOUT_RATE, **kwargs):
        _check_count("num_choices", num_choices)
        dropout_rate = _check_rate("dropout_rate", dropout_rate)
        kwargs.setdefault("name", "albert_multiple_choice")
        super().__init__(config, seed, **kwargs)
        self.num_choices = num_choices
        self.dropout_rate = dropout_rate
        self._build_pooled_head(self.heads[0], 1, dropout_rate)
        self.built = True

    def _flatten(self, inputs) -> tuple[dict, tf.Tensor]:
        """The inputs as [B * C, S], and [B, C]."""
        if not isinstance(inputs, dict) or names.INPUT_WORD_IDS not in inputs:
            raise KeyError(f"AlbertMultipleChoice takes a dict with '{names.INPUT_WORD_IDS}' "
                           f"[B, num_choices, S] (and '{names.INPUT_MASK}', "
                           f"'{names.INPUT_TYPE_IDS}')")
        flat, batch_and_choices = {}, None
        for name in INPUT_NAMES:
            if inputs.get(name) is None:
                continue
            value = tf.convert_to_tensor(inputs[name])
            if value.shape.rank != 3:
                raise ValueError(
                    f"AlbertMultipleChoice needs '{name}' of rank 3 [batch, num_choices, "
                    f"seq_length]; got shape {value.shape}")
            choices = value.shape[1]
            if choices is not None and choices != self.num_choices:
                raise ValueError(
                    f"'{name}' has {choices} choices (shape {value.shape}); this model "
                    f"was built for num_choices={self.num_choices}")
            if name == names.INPUT_WORD_IDS:
                batch_and_choices = tf.shape(value)[:2]
            flat[name] = tf.reshape(value, [-1, tf.shape(value)[2]])
        return flat, batch_and_choices

    def call(self, inputs, training=None):
        flat, batch_and_choices = self._flatten(inputs)
        pooled = self._encode(flat, training, first_token_only=True)[names.POOLED_OUTPUT]
        scores = self._score_pooled(pooled, training)  # [B * C, 1]
        logits = tf.cast(tf.reshape(scores, batch_and_choices), tf.float32)  # [B, C]
        if names.INPUT_MASK in flat:
            present = tf.reshape(tf.reduce_any(flat[names.INPUT_MASK] > 0, axis=-1),
                                 batch_and_choices)
            logits = tf.where(present, logits, ABSENT_CHOICE_LOGIT)
        return _choice_outputs(logits)

    def get_config(self):
        return {**super().get_config(), "num_choices": self.num_choices,
                "dropout_rate": self.dropout_rate}


class AlbertSquadV1(AlbertTaskModel):
    """SQuAD v1.1, as `squad_utils.create_v1_model`: a linear map of every position.

    Variables: `cls/squad/output_weights` [2, H], `cls/squad/output_bias` [2]; no head
    dropout. [start, end] = sequence_output @ output_weights^T + output_bias.
    Outputs (float32): `start_logits`, `end_logits` [B, S] — over every position, not
    masked (the original masks neither `p_mask` nor padding; its prediction step keeps
    only spans inside the paragraph). Loss: `losses.squad_v1_loss`.
    """

    hf_architecture = names.HF_QUESTION_ANSWERING
    heads = (task_heads.SQUAD_V1,)

    reads_pooled_output = False

    def __init__(self, config: AlbertConfig, seed: int | None = None, **kwargs):
        kwargs.setdefault("name", "albert_squad_v1")
        super().__init__(config, seed, **kwargs)
        self._build_head(self.heads[0], 2)
        self.built = True

    def call(self, inputs, training=None):
        sequence = self._encode(inputs, training)[names.SEQUENCE_OUTPUT]  # [B, S, H]
        logits = tf.einsum("BSH,NH->BSN", sequence,
                           tf.cast(self.output_weights, sequence.dtype))
        logits = tf.cast(logits + tf.cast(self.output_bias, sequence.dtype), tf.float32)
        return {names.START_LOGITS: logits[:, :, 0], names.END_LOGITS: logits[:, :, 1]}


class AlbertTokenClassifier(AlbertTaskModel):
    """Token classification (NER), as Model Garden's tagging and Hugging Face's
    `AlbertForTokenClassification`: dropout, then a score per label at every position.

    Variables (ours: the original has no NER head; `tf1_variables.token_classification_variables`):
    `cls/ner/output_weights` [num_labels, H], `cls/ner/output_bias` [num_labels];
    logits = dropout(sequence_output) @ output_weights^T + output_bias, dropout
    (`dropout_rate`) only when training. Outputs (float32): `logits` [B, S, num_labels],
    `probabilities`, `predictions` (int32 [B, S]). Loss:
    `losses.token_classification_loss(logits, label_ids)` (label -1: not scored).
    """

    hf_architecture = names.HF_TOKEN_CLASSIFICATION
    heads = (task_heads.TOKEN_CLASSIFIER,)
    outputs_argument = "num_labels"
    reads_pooled_output = False

    def __init__(self, config: AlbertConfig, num_labels: int, seed: int | None = None,
                 dropout_rate: float = HEAD_DROPOUT_RATE, **kwargs):
        _check_count("num_labels", num_labels)
        dropout_rate = _check_rate("dropout_rate", dropout_rate)
        kwargs.setdefault("name", "albert_token_classifier")
        super().__init__(config, seed, **kwargs)
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate
        self._build_head(self.heads[0], num_labels)
        self.dropout = common.dropout(dropout_rate, self._head_seeds, self.dtype_policy)
        self.built = True

    def call(self, inputs, training=None):
        sequence = self._encode(inputs, training)[names.SEQUENCE_OUTPUT]  # [B, S, H]
        sequence = common.apply_dropout(self.dropout, sequence, training)
        logits = tf.einsum("BSH,NH->BSN", sequence,
                           tf.cast(self.output_weights, sequence.dtype))
        logits = tf.cast(logits + tf.cast(self.output_bias, sequence.dtype), tf.float32)
        return _choice_outputs(logits)

    def get_config(self):
        return {**super().get_config(), "num_labels": self.num_labels,
                "dropout_rate": self.dropout_rate}


def _apply_p_mask(logits, p_mask):
    """The original: logits * (1 - p_mask) - 1e30 * p_mask (1 = not an answer)."""
    return logits * (1.0 - p_mask) - P_MASK_PENALTY * p_mask


class AlbertSquadV2(AlbertTaskModel):
    """SQuAD v2.0 with ALBERT's own head, as `squad_utils.create_v2_model`.

    Variables (root scope; initializer_range truncated normal, zero biases):
      `start_logits/dense` (H -> 1),
      `end_logits/dense_0` (2H -> H, tanh), `end_logits/LayerNorm`,
      `end_logits/dense_1` (H -> 1),
      `answer_class/dense_0` (2H -> H, tanh), `answer_class/dense_1` (H -> 1, no bias).

    Inputs: the encoder's dict plus `p_mask` [B, S] (1 where no answer may start or end:
    question, [SEP], padding), and in training `start_positions` [B] (or [B, 1]).
    Every logit is masked as the original: logits * (1 - p_mask) - 1e30 * p_mask.

    - start: log_softmax of the masked `start_logits/dense` of each position.
    - end for a start s: concat(sequence_output[i], sequence_output[s]) -> dense_0 (tanh)
      -> LayerNorm -> dense_1, masked, log_softmax over i.
    - answerability: concat(sum_i softmax(start)_i sequence_output[i], sequence_output[0])
      -> dense_0 (tanh) -> dropout (`dropout_rate`, only when training) -> dense_1.

    With `start_positions` in the inputs (the original's training graph), the end is
    conditioned on the gold start; outputs `start_log_probs` [B, S], `end_log_probs`
    [B, S] and `cls_logits` [B] for `losses.squad_v2_loss`. Without them (its predict
    graph), the beam search: the top `start_n_top` starts, for each the top `end_n_top`
    ends; outputs `start_top_log_probs`, `start_top_index` [B, start_n_top],
    `end_top_log_probs`, `end_top_index` [B, start_n_top * end_n_top] (entry
    i * end_n_top + j: end j of start i), `cls_logits` [B], and `start_log_probs`.
    Dropout follows `training` only, whichever path is taken. Outputs are float32.
    """

    heads = (task_heads.SQUAD_V2,)
    reads_pooled_output = False

    def __init__(self, config: AlbertConfig, start_n_top: int = 5, end_n_top: int = 5,
                 seed: int | None = None, dropout_rate: float = HEAD_DROPOUT_RATE,
                 **kwargs):
        _check_count("start_n_top", start_n_top)
        _check_count("end_n_top", end_n_top)
        dropout_rate = _check_rate("dropout_rate", dropout_rate)
        kwargs.setdefault("name", "albert_squad_v2")
        super().__init__(config, seed, **kwargs)
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        self.dropout_rate = dropout_rate
        h, stddev, seeds, dtype = (config.hidden_size, config.initializer_range,
                                   self._head_seeds, self.dtype_policy)

        def dense(units, name, activation=None):
            return common.dense(units, name=name, stddev=stddev, seeds=seeds, dtype=dtype,
                                activation=activation)

        self.start_dense = dense(1, "dense")
        self.end_dense_0 = dense(h, "dense_0", activation="tanh")
        self.end_layer_norm = common.layer_norm("LayerNorm", dtype)
        self.end_dense_1 = dense(1, "dense_1")
        self.answer_dense_0 = dense(h, "dense_0", activation="tanh")
        self.answer_dropout = common.dropout(dropout_rate, seeds, dtype)
        self.answer_dense_1 = keras.layers.Dense(
            1, use_bias=False, name="dense_1", dtype=dtype,
            kernel_initializer=common.truncated_normal(stddev, seeds))
        with tf1_scope("start_logits"):
            self.start_dense.build((None, None, h))
        with tf1_scope("end_logits"):
            self.end_dense_0.build((None, None, 2 * h))
            self.end_layer_norm.build((None, None, h))
            self.end_dense_1.build((None, None, h))
        with tf1_scope("answer_class"):
            self.answer_dense_0.build((None, 2 * h))
            self.answer_dense_1.build((None, h))
        self.built = True

    def _end_logits(self, sequence, start_features):
        """End logits [B, K, S] (float32, unmasked) for K start representations
        `start_features` [B, K, H]: dense_1(LayerNorm(dense_0([seq_i ; start_k])))."""
        length, k = tf.shape(sequence)[1], tf.shape(start_features)[1]
        # (expand_dims, not [:, None]: LiteRT has no StridedSlice that adds axes)
        pairs = tf.concat([tf.tile(tf.expand_dims(sequence, 2), [1, 1, k, 1]),
                           tf.tile(tf.expand_dims(start_features, 1), [1, length, 1, 1])],
                          axis=-1)  # [B, S, K, 2H]
        x = self.end_dense_1(self.end_layer_norm(self.end_dense_0(pairs)))  # [B, S, K, 1]
        return tf.cast(tf.transpose(x[..., 0], [0, 2, 1]), tf.float32)

    def call(self, inputs, training=None):
        if not isinstance(inputs, dict) or "p_mask" not in inputs:
            keys = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise KeyError("AlbertSquadV2 needs the input 'p_mask' [B, S] (1 where no "
                           f"answer may be: question, [SEP], padding); got {keys}")
        sequence = self._encode(inputs, training)[names.SEQUENCE_OUTPUT]  # [B, S, H]
        p_mask = tf.cast(inputs["p_mask"], tf.float32)  # [B, S]
        start_logits = tf.cast(self.start_dense(sequence)[..., 0], tf.float32)
        start_masked = _apply_p_mask(start_logits, p_mask)
        start_log_probs = tf.nn.log_softmax(start_masked, axis=-1)
        outputs = {"start_log_probs": start_log_probs}

        if inputs.get("start_positions") is not None:
            positions = tf.reshape(tf.cast(inputs["start_positions"], tf.int32), [-1, 1])
            start_features = tf.gather(sequence, positions, batch_dims=1)  # [B, 1, H]
            end_logits = self._end_logits(sequence, start_features)[:, 0]  # [B, S]
            outputs["end_log_probs"] = tf.nn.log_softmax(
                _apply_p_mask(end_logits, p_mask), axis=-1)
        else:
            length = sequence.shape[1]
            if length is not None and length < max(self.start_n_top, self.end_n_top):
                raise ValueError(
                    f"sequence length {length} is shorter than start_n_top "
                    f"({self.start_n_top}) or end_n_top ({self.end_n_top})")
            start_top_log_probs, start_top_index = tf.nn.top_k(
                start_log_probs, k=self.start_n_top)  # [B, K]
            start_features = tf.gather(sequence, start_top_index, batch_dims=1)  # [B, K, H]
            end_logits = self._end_logits(sequence, start_features)  # [B, K, S]
            end_log_probs = tf.nn.log_softmax(
                _apply_p_mask(end_logits, tf.expand_dims(p_mask, 1)), axis=-1)
            end_top_log_probs, end_top_index = tf.nn.top_k(end_log_probs, k=self.end_n_top)
            beams = self.start_n_top * self.end_n_top
            outputs.update({
                "start_top_log_probs": start_top_log_probs,
                "start_top_index": start_top_index,
                "end_top_log_probs": tf.reshape(end_top_log_probs, [-1, beams]),
                "end_top_index": tf.reshape(end_top_index, [-1, beams]),
            })

        # Answerability from the start-weighted representation and [CLS]; it does not
        # depend on the end, so there is one cls_logits per example.
        start_p = tf.cast(tf.nn.softmax(start_masked, axis=-1), sequence.dtype)
        # [B, 1, S] @ [B, S, H] (an einsum here has no LiteRT kernel)
        start_feature = tf.squeeze(tf.matmul(tf.expand_dims(start_p, 1), sequence), 1)
        x = self.answer_dense_0(tf.concat([start_feature, sequence[:, 0]], axis=-1))
        x = common.apply_dropout(self.answer_dropout, x, training)
        outputs["cls_logits"] = tf.cast(self.answer_dense_1(x)[:, 0], tf.float32)
        return outputs

    def get_config(self):
        return {**super().get_config(), "start_n_top": self.start_n_top,
                "end_n_top": self.end_n_top, "dropout_rate": self.dropout_rate}
