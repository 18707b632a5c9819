"""Models that take raw text, shaped as keras-hub's tasks.

A text model holds a `TextPreprocessor` and the id-level model of its kind (the scripts'
and the exports' model: `AlbertClassifier`, ...) as `model`. Its `call` takes the model
inputs and returns the logits, as keras-hub's do, so that Keras' own `compile(loss=...,
metrics=["accuracy"])` works on it; its `fit`, `evaluate` and `predict` take strings
(Python lists, NumPy arrays, or a `tf.data.Dataset` of batches) and run the preprocessor
inside tf.data.

Compiled when made (`compile()`, "auto" everywhere): the scripts' optimizer (AdamW with
warm-up and linear decay, clipping, the original's weight decay), made by each `fit`
over that fit's steps (`warmup_proportion` of them warming up); the task's loss, the
original's (`albert_tf.losses`); its metric. `fit` on Python lists or NumPy arrays
batches as the scripts do: shuffled with the model's `seed` as `run_classifier.py`
shuffles its records, repeated and cut to whole batches, so that it ends with the
script's weights on the same rows and settings (dropout 0: the dropout draws differ).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import os
import warnings

import keras
import numpy as np
import tensorflow as tf

from albert_tf import losses, names, packing
from albert_tf.data import ner, records
from albert_tf.data.sentence_records import pool_windows_tf
from albert_tf.modeling import common, real_tokens
from albert_tf.modeling.base import BuiltBeforeTracing
from albert_tf.tasks.classification import AlbertClassifier, ClassificationTask
from albert_tf.tasks.multi_label import AlbertMultiLabelClassifier, multi_label_loss
from albert_tf.tasks.multiple_choice import (
    AlbertMultipleChoice,
    MultipleChoiceTask,
    with_max_qa_length,
)
from albert_tf.tasks.options import FineTuningTraining, RuntimeOptions, TaskOptions
from albert_tf.tasks.token_classification import (
    AlbertTokenClassifier,
    TokenClassificationTask,
)
from albert_tf.text_models.preprocessing import (
    TextInputError,
    TextPreprocessor,
    _strings,
    check_choices,
    check_texts,
)
from albert_tf.training.optimizers import create_optimizer

AUTO = "auto"
_TRAINING = FineTuningTraining()  # the scripts' defaults, read once
_RUNTIME = RuntimeOptions()
# What each loss reads: the logits the model returns and the labels -> per example [B]
# (token classification's: the batch's, a scalar: the mean over the batch's labelled
# words, as the scripts' `TokenObjective`, not a mean of the examples' means).
PER_EXAMPLE_LOSSES = {
    "classification": lambda labels, logits: losses.classification_loss(
        logits, labels, per_example=True),
    "regression": lambda labels, logits: losses.regression_loss(
        logits, labels, per_example=True),
    "multi_label": lambda labels, logits: multi_label_loss(logits, labels),
    "token_classification": lambda labels, logits: losses.token_classification_loss(
        logits, labels),
}


@common.serializable
class TaskLoss(keras.losses.Loss):
    """A task's loss as the scripts train on it (`PER_EXAMPLE_LOSSES[task]`), as a Keras
    loss of (labels, logits): the mean over the batch."""

    def __init__(self, task: str = "classification", name: str | None = None, **kwargs):
        if task not in PER_EXAMPLE_LOSSES:
            raise ValueError(f"unknown task loss {task!r}: one of "
                             f"{', '.join(PER_EXAMPLE_LOSSES)}")
        super().__init__(name=name or f"{task}_loss", **kwargs)
        self.task = task

    def call(self, y_true, y_pred):
        return PER_EXAMPLE_LOSSES[self.task](y_true, y_pred)

    def get_config(self):
        return {**super().get_config(), "task": self.task}


# Texts tokenized and windowed at a time before `fit` shuffles their windows.
_WINDOWING_BATCH = 64


def _each_window(inputs: dict, y, weights):
    """The preprocessor's windows of a batch of texts (`names.WINDOW_SPLITS` among the
    inputs) as examples: the inputs without the splits, each text's label and weight
    repeated for each of its windows."""
    inputs = dict(inputs)
    splits = inputs.pop(names.WINDOW_SPLITS)
    counts = splits[1:] - splits[:-1]
    y, weights = (None if v is None else tf.repeat(v, counts, axis=0) for v in (y, weights))
    return inputs, y, weights


def _sequence_axis_second(value):
    """Inputs per choice [B, C, S] <-> [B, S, C] (their own inverse), so that a
    window's pieces are its rows' second axis, as one text's [B, S] (left as they
    are): what `_windows` cuts ragged and `_padded` pads."""
    return tf.transpose(value, [0, 2, 1]) if value.shape.rank == 3 else value


def _window_settings(long_text: str, window_stride: int | None) -> dict:
    """`from_release`'s `long_text` and `window_stride` as the preprocessor's text
    settings: none where they are the defaults (a truncating model's settings stay
    as they always were)."""
    if long_text == packing.TRUNCATE and window_stride is None:
        return {}
    return {"long_text": long_text, "window_stride": window_stride}


@contextlib.contextmanager
def _global_seed(seed: int):
    """The process's global TensorFlow seed set to `seed` while a pipeline is made, as
    the scripts set it (`session.seed_and_precision`), then given back."""
    from tensorflow.python.eager import context  # the one reader of the global seed

    previous = context.global_seed()
    tf.random.set_seed(seed)
    try:
        yield
    finally:
        tf.random.set_seed(previous)


@common.serializable
class TokenAccuracy(keras.metrics.Mean):
    """Token classification's accuracy: the share of labelled words (label >= 0; -1,
    `data.ner.IGNORE`, is not scored) whose highest logit is their label, over every
    batch seen."""

    def __init__(self, name: str = "accuracy", **kwargs):
        super().__init__(name=name, **kwargs)

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels = tf.cast(y_true, tf.int32)
        right = tf.equal(tf.argmax(y_pred, -1, output_type=tf.int32), labels)
        scored = tf.cast(labels >= 0, self.dtype)
        if sample_weight is not None:
            scored *= tf.cast(sample_weight, self.dtype)
        return super().update_state(tf.cast(right, self.dtype), sample_weight=scored)


def _saved_text_model(cls, path):
    """The text model of `path` if it is a text model's `.keras` file (Keras' own
    `load_model`); None for anything else (a release, an id-level model's `.keras`
    file); `TextInputError` for a `.keras` file of another text model than `cls`."""
    from albert_tf import fileio
    from albert_tf.checkpoints import keras_file
    from albert_tf.config import read_keras_file_values

    if not (keras_file.is_keras_file(path) and fileio.exists(os.fspath(path))):
        return None
    values = read_keras_file_values(os.fspath(path))
    held = keras.saving.get_registered_object(
        (values.get("registered_name") or "") if isinstance(values, dict) else "")
    if not (isinstance(held, type) and issubclass(held, AlbertTextModel)):
        return None
    if not issubclass(held, cls):
        raise TextInputError(f"{path} holds an {held.__name__}, not an {cls.__name__}: "
                             f"load it with {held.__name__}.from_release")
    return keras.saving.load_model(os.fspath(path))


_ABSENT = object()


def _held(model, name: str):
    """What a loaded text model holds for `from_release`'s argument `name`."""
    if name not in ("name", "compile"):
        for part in (model, model.preprocessor, model.model):
            if hasattr(part, name):
                return getattr(part, name)
    return model.preprocessor.text_settings.get(name, _ABSENT)


def _or_saved(from_release):
    """`from_release` that also takes the `.keras` file a text model of its class saved
    (`model.save`): the model as saved, which needs no argument; any given must be what
    the file holds (`num_classes`, ...), else `TextInputError` names them."""
    signature = inspect.signature(from_release)

    @functools.wraps(from_release)
    def from_release_or_saved(cls, directory, *args, **kwargs):
        saved = _saved_text_model(cls, directory)
        if saved is None:
            return from_release(cls, directory, *args, **kwargs)
        given = dict(signature.bind_partial(cls, directory, *args, **kwargs).arguments)
        given = {**given.pop("kwargs", {}), **given}
        differ = [f"{name}={value!r}" for name, value in given.items()
                  if name not in ("cls", "directory") and _held(saved, name) != value]
        if differ:
            raise TextInputError(f"{directory} is a saved {type(saved).__name__}, loaded "
                                 f"as saved: it does not hold {', '.join(differ)}")
        return saved
    return from_release_or_saved


class _CompileArguments:
    """What `compile` was given, kept for the "auto" optimizer's compile at `fit` (an
    object of its own: a tuple attribute of a Keras model would track its metrics as
    the model's own)."""

    def __init__(self, loss, metrics, kwargs):
        self.loss, self.metrics, self.kwargs = loss, metrics, kwargs


class AlbertTextModel(BuiltBeforeTracing):
    """What the text models share: `preprocessor`, `model` (the id-level model), the
    training settings of the "auto" compile (`learning_rate`, `warmup_proportion`,
    `optimizer_name`) and `seed` (the data order; the model's initial head).

    Each kind's `from_release` also takes the `.keras` file a model of its kind saved:
    the model as saved, with no argument needed (those given must be what the file
    holds); a `.keras` file of another kind is refused in one line."""

    task_loss = "classification"  # PER_EXAMPLE_LOSSES' key

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        common.serializable(cls)
        if "from_release" in cls.__dict__:
            cls.from_release = classmethod(_or_saved(cls.__dict__["from_release"].__func__))

    def __init__(self, model, preprocessor: TextPreprocessor, *, seed: int = _TRAINING.seed,
                 learning_rate: float = _TRAINING.learning_rate,
                 warmup_proportion: float = _TRAINING.warmup_proportion,
                 optimizer_name: str = _TRAINING.optimizer, compile: bool = True,
                 **kwargs):
        super().__init__(**kwargs)
        self.model = model
        self.preprocessor = preprocessor
        self.seed = seed
        self.learning_rate = learning_rate
        self.warmup_proportion = warmup_proportion
        self.optimizer_name = optimizer_name
        self._auto_optimizer = False
        self.built = True
        if compile:
            self.compile()

    # ------------------------------------------------------------------ the model
    def call(self, inputs, training=None):
        """The logits of the inputs, a row each; a row per text where the inputs are
        the windows of long texts (`names.WINDOW_SPLITS` among them): their outputs
        pooled as the kind pools them (`window_outputs`)."""
        inputs = dict(inputs)
        splits = inputs.pop(names.WINDOW_SPLITS, None)
        outputs = self.model(inputs, training=training)
        if splits is not None:
            outputs = self.window_outputs(outputs, splits)
        return outputs[names.LOGITS]

    def window_outputs(self, outputs: dict, splits) -> dict:
        """The model's outputs on the windows of texts -> a row per text (text b's
        windows are rows `splits[b]` to `splits[b + 1]`), pooled by the kind's one
        `WindowPooling`, as the scripts' evaluation and `serve_text` pool them
        (`sentence_records.pool_windows_tf`)."""
        pooling = self.preprocessor.serving_kind.window_pooling(self.model)
        return pool_windows_tf(outputs, splits, pooling)

    @property
    def long_text(self) -> str:
        """How a text longer than the preprocessor's `sequence_length` is read: cut
        ("truncate") or in windows ("windows")."""
        return self.preprocessor.long_text

    @property
    def window_stride(self) -> int | None:
        return self.preprocessor.window_stride

    @property
    def pair(self) -> bool | None:
        return self.preprocessor.pair

    # ------------------------------------------------------------------ compile
    def default_metrics(self) -> list:
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def make_optimizer(self, steps: int):
        """The scripts' optimizer over `steps` (`warmup_proportion` of them warming up)."""
        return create_optimizer(self.learning_rate, steps,
                                int(steps * self.warmup_proportion),
                                optimizer=self.optimizer_name)

    def compile(self, optimizer=AUTO, loss=AUTO, metrics=AUTO, **kwargs):
        """Keras' `compile`, with "auto" for the task's defaults: the scripts' optimizer
        (made again by each `fit`, over its steps), the task's loss (`TaskLoss`) and
        metric; `jit_compile` the scripts' default (--enable_xla: off)."""
        self._auto_optimizer = isinstance(optimizer, str) and optimizer == AUTO
        if self._auto_optimizer:
            optimizer = self.make_optimizer(1)  # until a fit knows its steps
        if isinstance(loss, str) and loss == AUTO:
            loss = TaskLoss(self.task_loss)
        if isinstance(metrics, str) and metrics == AUTO:
            metrics = self.default_metrics()
        # The scripts' --enable_xla default (Keras' "auto" compiles with XLA)
        kwargs.setdefault("jit_compile", _RUNTIME.enable_xla)
        self._compiled = _CompileArguments(loss, metrics, kwargs)
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def get_compile_config(self):
        config = super().get_compile_config()
        if config is not None and self._auto_optimizer:
            config = {**config, "auto_optimizer": True}
        return config

    def compile_from_config(self, config):
        config = dict(config)
        auto = config.pop("auto_optimizer", False)
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**{**config, "optimizer": AUTO if auto else config["optimizer"]})
        if self.built:
            self.optimizer.build(self.trainable_variables)

    # ------------------------------------------------------------------ data
    def check_labels(self, y, texts, count: int) -> np.ndarray:
        """`y` as the labels of the `count` examples of `texts` (`texts_of`'s);
        `TextInputError` where one cannot be learned (a class outside [0,
        num_classes), a wrong count or shape)."""
        labels = np.asarray(y)
        if labels.shape[:1] != (count,):
            raise TextInputError(f"{count} texts and {labels.shape[0] if labels.ndim else 0} "
                                 "labels")
        return labels

    def texts_of(self, x) -> tuple:
        """(the texts of `x` as arrays for `tf.data.Dataset.from_tensor_slices`, how
        many examples); `TextInputError` for what the preprocessor cannot read. Here
        one text or a pair (`check_texts`)."""
        texts = check_texts(x)
        self.preprocessor.check_pairing(len(texts) == 2)
        return (texts if len(texts) == 2 else texts[0]), len(texts[0])

    def _texts(self, x) -> tuple:
        self.preprocessor.check_loaded()
        return self.texts_of(x)

    def _preprocessed(self, *element, windows_as_examples: bool = False):
        x, y, weights = keras.utils.unpack_x_y_sample_weight(element)
        inputs = self.preprocessor(x)
        if windows_as_examples and names.WINDOW_SPLITS in inputs:
            inputs, y, weights = _each_window(inputs, y, weights)
        if y is not None:
            y = self.batch_labels(y, inputs)
        return keras.utils.pack_x_y_sample_weight(inputs, y, weights)

    def batch_labels(self, labels, inputs):
        """A batch's labels as the loss reads them, given its model inputs (in the
        graph): here as they are."""
        return labels

    def _batches(self, dataset: tf.data.Dataset, *, training: bool = False
                 ) -> tf.data.Dataset:
        """Batches of texts -> of model inputs; `training`: a text read in windows is
        an example per window, each with its text's label and weight."""
        preprocessed = functools.partial(self._preprocessed, windows_as_examples=training)
        return dataset.map(preprocessed, num_parallel_calls=tf.data.AUTOTUNE,
                           deterministic=True).prefetch(tf.data.AUTOTUNE)

    def _windows(self, dataset: tf.data.Dataset) -> tuple[tf.data.Dataset, int]:
        """Unbatched examples -> (their windows, unbatched and unpadded, each with its
        text's label and weight, in the texts' order (as the windows' records are
        written); how many): what `fit` shuffles and batches as the scripts do their
        records. A text that fits is one window."""
        def windows(*element):
            x, y, weights = keras.utils.unpack_x_y_sample_weight(element)
            inputs, y, weights = _each_window(self.preprocessor(x), y, weights)
            inputs = {name: _sequence_axis_second(value) for name, value in inputs.items()}
            lengths = tf.reduce_sum(inputs[names.INPUT_MASK], 1)
            if lengths.shape.rank == 2:  # per choice: the window's longest choice
                lengths = tf.reduce_max(lengths, 1)
            inputs = {name: tf.RaggedTensor.from_tensor(value, lengths=lengths)
                      for name, value in inputs.items()}
            return keras.utils.pack_x_y_sample_weight(inputs, y, weights)

        dataset = dataset.batch(_WINDOWING_BATCH).map(
            windows, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).unbatch()
        return dataset, int(dataset.reduce(np.int64(0), lambda count, _: count + 1))

    def _padded(self, *element):
        """A ragged batch of windows (`_windows`, batched) -> model inputs padded to
        its longest window, as the preprocessor pads a batch."""
        x, y, weights = keras.utils.unpack_x_y_sample_weight(element)
        pad = {names.INPUT_WORD_IDS: self.preprocessor.tokenizer.pad_id}
        x = {name: _sequence_axis_second(value.to_tensor(default_value=pad.get(name, 0)))
             for name, value in x.items()}
        return keras.utils.pack_x_y_sample_weight(x, y, weights)

    def _dataset(self, x, y=None, sample_weight=None, batch_size=None):
        """(batches of model inputs and labels, number of examples) for evaluate and
        predict: in order, once."""
        if isinstance(x, tf.data.Dataset):
            self.preprocessor.check_loaded()
            return self._batches(x), None
        dataset, count = self._examples(x, y, sample_weight)
        return self._batches(dataset.batch(batch_size or _TRAINING.train_batch_size)), count

    def _examples(self, x, y=None, sample_weight=None, *, labelled=False) -> tuple:
        """(a dataset of the examples of `x` with their labels (required with
        `labelled`) and weights, unbatched; how many), every part checked first."""
        texts, count = self._texts(x)
        parts = [texts]
        if y is not None or labelled:
            parts.append(self.check_labels(y, texts, count))
        if sample_weight is not None:
            parts.append(np.asarray(sample_weight, np.float32))
        return tf.data.Dataset.from_tensor_slices(tuple(parts)), count

    # ------------------------------------------------------------------ Keras' API
    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto",
            callbacks=None, validation_data=None, shuffle=True, sample_weight=None,
            steps_per_epoch=None, **kwargs):
        """Keras' `fit` on texts: `x` a list or array of strings (a tuple of two for
        pairs), `y` the labels; or a `tf.data.Dataset` of batches of (texts, labels).
        Lists and arrays are batched as the scripts batch their records: shuffled with
        `seed` (unless `shuffle=False`), repeated, cut to whole batches of
        `batch_size` (default the scripts' 32); an epoch is ceil(examples /
        batch_size) steps. The "auto" optimizer is made for this fit's steps.

        A model that reads long texts in windows (`long_text="windows"`) trains on each
        window as an example with its text's label (and weight), as the scripts'
        windows records do: from lists, the windows are shuffled and batched as the
        examples are, an epoch ceil(windows / batch_size) steps; a dataset's batch of
        texts is a batch of their windows. `validation_data` is scored a row per text,
        as `evaluate`."""
        batch_size = batch_size or _TRAINING.train_batch_size
        if isinstance(x, tf.data.Dataset):
            self.preprocessor.check_loaded()
            dataset = self._batches(x, training=True)
            if steps_per_epoch is None:
                size = int(x.cardinality())
                if size < 0 and self._auto_optimizer:
                    raise TextInputError(
                        "the dataset's length is unknown: give steps_per_epoch (the "
                        "\"auto\" optimizer's schedule spans the fit's steps)")
                steps = size if size >= 0 else None
            else:
                steps = steps_per_epoch
        else:
            dataset, count = self._examples(x, y, sample_weight, labelled=True)
            windows = self.preprocessor.windows
            if windows:
                dataset, count = self._windows(dataset)
            if shuffle:
                with _global_seed(self.seed):
                    dataset = records.shuffled(dataset, self.seed)
            if windows:
                dataset = dataset.repeat().ragged_batch(batch_size, drop_remainder=True).map(
                    self._padded, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
                ).prefetch(tf.data.AUTOTUNE)
            else:
                dataset = self._batches(dataset.repeat().batch(batch_size,
                                                               drop_remainder=True))
            steps = steps_per_epoch or math.ceil(count / batch_size)
        if self._auto_optimizer:
            self._compile_auto(steps * epochs)
        if validation_data is not None and not isinstance(validation_data, tf.data.Dataset):
            validation_data = self._dataset(*keras.utils.unpack_x_y_sample_weight(
                tuple(validation_data)), batch_size=batch_size)[0]
        return super().fit(dataset, epochs=epochs, verbose=verbose, callbacks=callbacks,
                           validation_data=validation_data, steps_per_epoch=steps,
                           shuffle=False, **kwargs)

    def test_step(self, data):
        """Keras' evaluation step; where the inputs are the windows of long texts, each
        batch's loss weighs as many texts as it holds in `evaluate`'s mean over batches
        (Keras weighs it by the inputs' rows: here windows)."""
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        if not isinstance(x, dict) or names.WINDOW_SPLITS not in x:
            return super().test_step(data)
        y_pred = self(x, training=False)
        loss = self.compute_loss(x, y, y_pred, sample_weight, training=False)
        replicas = tf.distribute.get_strategy().num_replicas_in_sync  # as Keras unscales
        self._loss_tracker.update_state(loss * tf.cast(replicas, loss.dtype),
                                        sample_weight=tf.shape(x[names.WINDOW_SPLITS])[0] - 1)
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def _compile_auto(self, steps: int) -> None:
        given = self._compiled
        keras.Model.compile(self, optimizer=self.make_optimizer(max(1, steps)),
                            loss=given.loss, metrics=given.metrics, **given.kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto",
                 sample_weight=None, **kwargs):
        """Keras' `evaluate` on texts and labels (as `fit` takes them), in order; a row
        per text (a text read in windows: their outputs pooled, as `predict`)."""
        if kwargs.get("_use_cached_eval_dataset"):  # fit's validation, made by `fit`
            return super().evaluate(x, y, batch_size=batch_size, verbose=verbose,
                                    sample_weight=sample_weight, **kwargs)
        dataset, _ = self._dataset(x, y, sample_weight, batch_size)
        return super().evaluate(dataset, verbose=verbose, **kwargs)

    def predict(self, x, batch_size=None, verbose="auto", **kwargs):
        """The logits of texts (as `fit` takes them, without labels), in order, a row
        per text: with `long_text="windows"`, its windows' pooled as the scripts pool
        them (the mean of a classifier's or a regression's, each label's highest for
        multi-label)."""
        if isinstance(x, (str, bytes)):
            x = [x]
        dataset, _ = self._dataset(x, batch_size=batch_size)
        return super().predict(dataset, verbose=verbose, **kwargs)

    # ------------------------------------------------------------------ exports
    def text_signature(self) -> list[tf.TensorSpec]:
        """The exports' inputs: the kind's `serve_text` inputs."""
        p = self.preprocessor
        if p.sentences and self.pair is None:
            raise TextInputError(
                "the export takes one text or a pair, and this model has read neither: "
                "fit or predict it first, or make it with pair=True or pair=False")
        return p.serving_kind.text_specs(p.settings())

    def export(self, filepath, format="tf_saved_model", verbose=None, **kwargs):
        """Keras' `export`, raw text in: `format="tf_saved_model"` writes a SavedModel
        whose `serve` endpoint (and `serving_default` signature) takes the texts
        (`text_a`, and `text_b` for pairs) and returns the logits `predict` returns;
        `format="litert"` a LiteRT file whose `serve_text` signature takes them
        (`albert_tf.export.export_tflite(..., with_text=True)`). A model that reads
        long texts in windows: the SavedModel reads them so (its `serve` is `predict`);
        the LiteRT file cuts each text at `sequence_length`, with one warning, as the
        scripts' LiteRT export of such a run."""
        self.preprocessor.check_loaded()
        specs = self.text_signature()
        if format == "litert":
            return self._export_litert(filepath, **kwargs)
        if format != "tf_saved_model":
            raise TextInputError(f"a text model exports as tf_saved_model or litert, not "
                                 f"{format!r}")
        archive = keras.export.ExportArchive()
        archive.track(self)

        def serve(*texts):
            return self(self.preprocessor(texts), training=False)

        with real_tokens.inference_graph():
            archive.add_endpoint("serve", serve, input_signature=specs)
        archive.write_out(filepath, verbose=verbose)
        return filepath

    def _export_litert(self, filepath, **kwargs):
        from albert_tf.export import export_tflite

        if self.model.quantized_layers():
            raise TextInputError(
                "a text model quantized by Keras (int8 kernels) has no LiteRT export: "
                "export the float model with export(path, format=\"litert\", "
                "precision=\"int8\") (LiteRT's own int8), or this one as a SavedModel")
        # (long_text=windows: the file cuts each text, and says so in one warning, as
        # the scripts' LiteRT export of such a run)
        return export_tflite(self.model, filepath, kind=self.preprocessor.kind,
                             with_text=True, max_seq_length=self.preprocessor.sequence_length,
                             do_lower_case=self.preprocessor.do_lower_case,
                             is_pair=self.pair, long_text=self.preprocessor.long_text,
                             **self.preprocessor.tokenizer_files, **kwargs)

    # ------------------------------------------------------------------ saving
    def get_config(self):
        return {**super().get_config(),
                "model": keras.saving.serialize_keras_object(self.model),
                "preprocessor": keras.saving.serialize_keras_object(self.preprocessor),
                "seed": self.seed, "learning_rate": self.learning_rate,
                "warmup_proportion": self.warmup_proportion,
                "optimizer_name": self.optimizer_name}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        model = keras.saving.deserialize_keras_object(config.pop("model"))
        preprocessor = keras.saving.deserialize_keras_object(config.pop("preprocessor"))
        return cls(model, preprocessor, compile=False, **config)


class AlbertTextClassifier(AlbertTextModel):
    """A text classifier of one text or a pair, as keras-hub's `AlbertTextClassifier`:
    `num_classes` >= 2 classes (softmax), `num_classes=1` a regression (a score),
    `multi_label=True` any number of the classes (a sigmoid each). Its model is
    `AlbertClassifier` (`AlbertMultiLabelClassifier`). `call` returns the logits [B,
    num_classes] ([B] for a regression). With `long_text="windows"` (`from_release`)
    a long text is read whole in windows, each trained on with the text's label, and
    answered a row per text (`call`, `predict`, `evaluate`, the SavedModel): the mean
    of its windows' logits (a regression's scores), each label's highest for
    multi-label, as `run_classifier.py --long_text=windows`."""

    def __init__(self, model, preprocessor: TextPreprocessor, **kwargs):
        kwargs.setdefault("name", "albert_text_classifier")
        super().__init__(model, preprocessor, **kwargs)

    @property
    def num_classes(self) -> int:
        return self.model.num_labels

    @property
    def multi_label(self) -> bool:
        return isinstance(self.model, AlbertMultiLabelClassifier)

    @property
    def task_loss(self) -> str:
        if self.multi_label:
            return "multi_label"
        return "regression" if self.num_classes == 1 else "classification"

    def default_metrics(self) -> list:
        if self.multi_label:  # every label's decision, at probability 0.5
            return [keras.metrics.BinaryAccuracy(name="accuracy", threshold=0.0)]
        if self.num_classes == 1:
            return [keras.metrics.MeanSquaredError(name="mse")]
        return super().default_metrics()

    def check_labels(self, y, texts, count: int) -> np.ndarray:
        labels = super().check_labels(y, texts, count)
        if self.num_classes == 1:
            if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.number):
                raise TextInputError("a regression's labels are one number per text")
            return labels.astype(np.float32)
        shape = (count, self.num_classes) if self.multi_label else (count,)
        if labels.shape != shape or not np.issubdtype(labels.dtype, np.integer) \
                and not (labels.dtype == bool):
            what = (f"0/1 for each of {self.num_classes} classes per text"
                    if self.multi_label else "one integer class per text")
            raise TextInputError(f"labels must be {what}; got {labels.dtype} of shape "
                                 f"{labels.shape}")
        top = 2 if self.multi_label else self.num_classes
        bad = np.flatnonzero(((labels < 0) | (labels >= top)).reshape(count, -1).any(-1))
        if bad.size:
            raise TextInputError(
                f"label {labels[bad[0]].tolist()!r} of example {bad[0]} is outside "
                + ("0/1" if self.multi_label else f"0..{self.num_classes - 1}")
                + f" (num_classes={self.num_classes}); {bad.size} such")
        return labels.astype(np.int32)

    @classmethod
    def from_release(cls, directory, num_classes: int | None = None, *,
                     multi_label: bool = False,
                     sequence_length: int = ClassificationTask.Options().max_seq_length,
                     pair: bool | None = None, seed: int = _TRAINING.seed,
                     dropout_rate: float = TaskOptions().dropout_prob,
                     long_text: str = packing.TRUNCATE, window_stride: int | None = None,
                     **kwargs):
        """The release's encoder under a new head of `num_classes` (None: the
        release's own head's, where it has one), and its tokenizer: any release
        directory the package reads (Google's, albert_zh, Hugging Face, keras-hub
        presets, a `.keras` file). A text classifier's own `.keras` file loads as saved
        (any argument given must be what it holds).

        `long_text`, `window_stride`: as `run_classifier.py`'s `--long_text` and
        `--window_stride`: "truncate" cuts a text longer than `sequence_length`;
        "windows" reads it whole, in windows of `sequence_length` every
        `window_stride` pieces (None: half the window), by the records' rules: `fit`
        trains on each window with its text's label, `predict`, `evaluate` and the
        SavedModel answer a row per text, its windows' pooled."""
        kind = "multi_label" if multi_label else "classifier"
        windows = _window_settings(long_text, window_stride)
        preprocessor = TextPreprocessor.from_release(  # (checks them before the model)
            directory, kind=kind, sequence_length=sequence_length, pair=pair,
            text_settings=windows)
        model_class = AlbertMultiLabelClassifier if multi_label else AlbertClassifier
        model = model_class.from_release(
            directory, seed=seed, dropout_rate=dropout_rate,
            **({} if num_classes is None else {"num_labels": num_classes}))
        return cls(model, preprocessor, seed=seed, **kwargs)



class AlbertTextMultipleChoice(AlbertTextModel):
    """Multiple choice on raw text (RACE, C3, SWAG, your own): `x` a dict of `context`,
    `question` and `choices` (a list of 1 to `num_choices` options per example) or a
    tuple of the three, `y` the index of the right option. Each option is packed as
    the multiple-choice records pack it: `[CLS] context [SEP] question-with-option
    [SEP]`, the option in place of the question's `_` blanks, else after it, keeping
    its last `max_qa_length` pieces. Its model is `AlbertMultipleChoice`; `call`
    returns the logits [B, num_choices] (an absent option's far below any other).
    With `long_text="windows"` (`from_release`) a long context is read whole in
    windows, each beside all the question's options and trained on with its label,
    and answered a row per question (`call`, `predict`, `evaluate`, the SavedModel):
    each option's logit the mean of its windows', as `run_classifier.py
    --task_name=multiple_choice --long_text=windows`."""

    def __init__(self, model, preprocessor: TextPreprocessor, **kwargs):
        kwargs.setdefault("name", "albert_text_multiple_choice")
        super().__init__(model, preprocessor, **kwargs)

    @property
    def num_choices(self) -> int:
        return self.model.num_choices

    def texts_of(self, x) -> tuple:
        texts = check_choices(x, self.num_choices)
        return texts, len(texts[0])

    def check_labels(self, y, texts, count: int) -> np.ndarray:
        labels = super().check_labels(y, texts, count)
        if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
            raise TextInputError(f"labels must be one integer (the right option) per "
                                 f"example; got {labels.dtype} of shape {labels.shape}")
        options = (texts[2] != "").sum(1)  # each example's options (the rest padding)
        bad = np.flatnonzero((labels < 0) | (labels >= options))
        if bad.size:
            i = bad[0]
            raise TextInputError(f"label {labels[i].tolist()} of example {i} is not one "
                                 f"of its {options[i]} choices; {bad.size} such")
        return labels.astype(np.int32)

    @classmethod
    def from_release(cls, directory, num_choices: int = 4, *,
                     sequence_length: int = MultipleChoiceTask.Options().max_seq_length,
                     max_qa_length: int | None = None, seed: int = _TRAINING.seed,
                     dropout_rate: float = TaskOptions().dropout_prob,
                     long_text: str = packing.TRUNCATE, window_stride: int | None = None,
                     **kwargs):
        """The release's encoder under a new choice head and its tokenizer;
        `max_qa_length` (default RACE's 128, or what `sequence_length` leaves) as the
        scripts' --max_qa_length.

        `long_text`, `window_stride`: as `run_classifier.py`'s `--long_text` and
        `--window_stride` for multiple choice: "truncate" cuts a context to what
        `sequence_length` leaves beside each option; "windows" reads it whole, in
        windows of what it leaves beside the question's longest option (at most
        `max_qa_length` pieces) every `window_stride` pieces (None: half the window),
        by the records' rules. `max_qa_length` must leave the windows two pieces at
        least: below a `sequence_length` of 133 the default fills it, give a smaller
        one."""
        max_qa_length = with_max_qa_length(MultipleChoiceTask.Options(
            max_seq_length=sequence_length, max_qa_length=max_qa_length)).max_qa_length
        windows = _window_settings(long_text, window_stride)
        preprocessor = TextPreprocessor.from_release(  # (checks them before the model)
            directory, kind="multiple_choice", sequence_length=sequence_length,
            text_settings={"num_choices": num_choices, "max_qa_length": max_qa_length,
                           **windows})
        model = AlbertMultipleChoice.from_release(directory, num_choices=num_choices,
                                                  seed=seed, dropout_rate=dropout_rate)
        return cls(model, preprocessor, seed=seed, **kwargs)


def word_logits(logits, word_positions):
    """Per-position logits [B, S, N] -> per word [B, W, N]: each word's at its first
    piece (`word_positions` [B, W], -1: no piece kept, which gets zeros)."""
    answered = word_positions >= 0
    picked = tf.gather(logits, tf.maximum(word_positions, 0), batch_dims=1)
    return tf.where(answered[..., None], picked, tf.zeros_like(picked))


class AlbertTextTokenClassifier(AlbertTextModel):
    """Token classification (NER) on raw text: a tag per word. Its model is
    `AlbertTokenClassifier`, and its words and windows are `run_ner.py`'s and its
    SavedModel's (`serving_text.pack_words`).

    `x`: texts (a list or array of strings), each cut into words as `run_ner.py`'s
    data are (`data.ner.split_words`, `word_split`: "whitespace" takes runs of
    non-space characters, each CJK character a word of its own; "characters" every
    non-space character, as CLUENER's and MSRA's files); or the words themselves (a
    list of lists of strings), which must be what the split gives back for them joined
    by spaces (else refused). `word_split` (None) is decided by the first data read,
    as `run_ner.py` decides it from its training file (`data.ner.word_split_of`):
    "characters" when every given word is one character, else (and for texts)
    "whitespace".

    `y`: one list of integer labels per text, one per word (-1, `data.ner.IGNORE`: not
    scored); a tf.data.Dataset's batches of labels are [B, words] padded with -1. The
    label goes on the word's first piece, as the NER records put it, the other pieces
    are not scored. `call` and `predict` return logits per word [B,
    sequence_length - 2, num_classes]: word i's in row i, `argmax(-1)` its tag.

    One window per text, as the export's `serve_text`: a text is cut after its first
    `sequence_length - 2` pieces (not windowed as `run_ner.py` windows a long
    sentence). A word with no piece kept (cut off, or no piece at all), and each
    position past the text's words, gets zero logits (argmax 0, the first label: "O"
    in `run_ner.py`'s label lists) and is not trained on. The loss is the scripts'
    (the mean over the batch's labelled words); the metric the accuracy over labelled
    words (`TokenAccuracy`). A LiteRT export is refused (LiteRT has no kernels to cut
    words)."""

    task_loss = "token_classification"

    def __init__(self, model, preprocessor: TextPreprocessor, **kwargs):
        kwargs.setdefault("name", "albert_text_token_classifier")
        super().__init__(model, preprocessor, **kwargs)

    def call(self, inputs, training=None):
        inputs = dict(inputs)
        positions = inputs.pop(names.WORD_POSITIONS)
        return word_logits(self.model(inputs, training=training)[names.LOGITS], positions)

    @property
    def num_classes(self) -> int:
        return self.model.num_labels

    @property
    def word_split(self) -> str | None:
        """How texts are cut into words (`data.ner.WORD_SPLITS`); None until decided."""
        return self.preprocessor.text_settings.get("word_split")

    @property
    def max_words(self) -> int:
        """The words answered per text (the width of `predict`'s logits)."""
        return packing.segment_budget(self.preprocessor.sequence_length, 1)

    def default_metrics(self) -> list:
        return [TokenAccuracy(name="accuracy")]

    def _decide_word_split(self, word_split: str) -> str:
        if self.word_split is None:
            self.preprocessor.text_settings["word_split"] = word_split
        return self.word_split

    def text_signature(self):
        self._decide_word_split("whitespace")
        return super().text_signature()

    def texts_of(self, x) -> tuple:
        if isinstance(x, dict) and list(x) == [names.TEXT]:
            x = x[names.TEXT]
        if isinstance(x, (list, np.ndarray)) and len(x) and not isinstance(
                x[0], (str, bytes, np.str_, np.bytes_)) and isinstance(
                x[0], (list, tuple, np.ndarray)):
            return self._texts_of_words(x)
        texts = check_texts(x)
        if len(texts) != 1:
            raise TextInputError("a token classifier reads one text per example (or its "
                                 "words), not pairs")
        self._decide_word_split("whitespace")
        return texts[0], len(texts[0])

    def _texts_of_words(self, rows) -> tuple:
        """Lists of words -> their texts (joined by spaces), each checked to split back
        into its words."""
        rows = [list(row) if isinstance(row, (list, tuple, np.ndarray)) else row
                for row in rows]
        for i, row in enumerate(rows):
            if not isinstance(row, list):
                raise TextInputError(f"x[{i}] is {type(row).__name__}, where x[0] is a "
                                     "list of words: give texts or lists of words")
            _strings(row, f"x[{i}] (words)")
        split = self._decide_word_split(ner.word_split_of_words(rows))
        texts = np.array([" ".join(map(_text, row)) for row in rows], dtype=object)
        for i, (row, text) in enumerate(zip(rows, texts)):
            got = [w for w, _, _ in ner.split_words(text, split)]
            if got != [_text(w) for w in row]:
                j = next((j for j, w in enumerate(row) if j >= len(got) or got[j] != w),
                         len(row))
                raise TextInputError(
                    f"x[{i}]: word {j}, {_text(row[j])!r:.30}, is not one word as "
                    f"word_split={split!r} cuts text (run_ner.py's rule), which the model "
                    "applies to the texts it predicts")
        return texts, len(texts)

    def check_labels(self, y, texts, count: int) -> np.ndarray:
        """Per-word labels -> [count, max_words], padded (and a text's words past
        max_words marked) with `ner.IGNORE`."""
        rows = [] if y is None or isinstance(y, (str, bytes)) else list(y)
        if len(rows) != count:
            raise TextInputError(f"{count} texts and {len(rows)} lists of labels")
        labels = np.full((count, self.max_words), ner.IGNORE, np.int32)
        for i, (text, row) in enumerate(zip(texts, rows)):
            row = np.asarray(row)
            if row.ndim != 1 or row.size and not np.issubdtype(row.dtype, np.integer):
                raise TextInputError(
                    f"labels must be a list of integer classes per text, one per word; "
                    f"example {i} has {row.dtype} of shape {row.shape}")
            words = len(ner.split_words(_text(text), self.word_split))
            if row.size != words:
                raise TextInputError(
                    f"example {i} has {words} words (word_split={self.word_split!r}) and "
                    f"{row.size} labels")
            bad = np.flatnonzero((row < ner.IGNORE) | (row >= self.num_classes))
            if bad.size:
                raise TextInputError(
                    f"label {row[bad[0]]} of word {bad[0]} of example {i} is outside "
                    f"0..{self.num_classes - 1} (num_classes={self.num_classes}; "
                    f"{ner.IGNORE}: not scored)")
            labels[i, :min(words, self.max_words)] = row[:self.max_words]
        return labels

    def batch_labels(self, labels, inputs):
        """[B, words] labels -> [B, max_words]: padded or cut, and `ner.IGNORE` for
        each word that has no piece in the window."""
        positions = inputs[names.WORD_POSITIONS]
        labels = tf.cast(labels, tf.int32)[:, :self.max_words]
        labels = tf.pad(labels, [[0, 0], [0, self.max_words - tf.shape(labels)[1]]],
                        constant_values=ner.IGNORE)
        return tf.where(positions >= 0, labels, ner.IGNORE)

    def fit(self, *args, **kwargs):
        """`AlbertTextModel.fit` on texts (or words) and per-word labels."""
        with warnings.catch_warnings():  # the encoder's pooler, which tagging never reads
            warnings.filterwarnings("ignore", r"Gradients do not exist for variables "
                                    r"\['bert/pooler/dense/kernel', 'bert/pooler")
            return super().fit(*args, **kwargs)

    def _examples(self, x, y=None, sample_weight=None, **kwargs) -> tuple:
        if sample_weight is not None:
            raise TextInputError("a token classifier takes no sample_weight (its loss is "
                                 "the mean over the batch's labelled words): give a word "
                                 "the label -1 to leave it out")
        return super()._examples(x, y, **kwargs)

    def _export_litert(self, filepath, **kwargs):
        raise TextInputError("a token classifier has no LiteRT export of raw text "
                             "(LiteRT has no kernels to cut words): export it as a "
                             "SavedModel")

    @classmethod
    def from_release(cls, directory, num_classes: int | None = None, *,
                     sequence_length: int = TokenClassificationTask.Options().max_seq_length,
                     word_split: str | None = None, seed: int = _TRAINING.seed,
                     dropout_rate: float = TokenClassificationTask.Options().dropout_prob,
                     **kwargs):
        """The release's encoder under a new tagging head of `num_classes` labels, and
        its tokenizer; `sequence_length` (default run_ner.py's 128) the window;
        `word_split` (see the class)."""
        if word_split is not None and word_split not in ner.WORD_SPLITS:
            raise TextInputError(f"word_split must be one of {', '.join(ner.WORD_SPLITS)}, "
                                 f"got {word_split!r}")
        model = AlbertTokenClassifier.from_release(
            directory, seed=seed, dropout_rate=dropout_rate,
            **({} if num_classes is None else {"num_labels": num_classes}))
        preprocessor = TextPreprocessor.from_release(
            directory, kind="token_classifier", sequence_length=sequence_length,
            text_settings={"word_split": word_split} if word_split else {})
        return cls(model, preprocessor, seed=seed, **kwargs)


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
