"""`AlbertModel`: what every model of this package shares."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

from albert_tf import names
from albert_tf.config import AlbertConfig
from albert_tf.errors import UserError
from albert_tf.modeling import common, real_tokens
from albert_tf.modeling import recompute as recompute_units
from albert_tf.modeling.lora import LoraAdapters


def tf1_scope(name: str):
    """An absolute variable scope: paths below it start at `name`, whatever encloses
    the model, so that every variable path is its name in a TF1 checkpoint."""
    return keras.name_scope(name, override_parent="")


@dataclasses.dataclass(frozen=True)
class ExtraInput:
    """A model input beside the three sequences (`names.MODEL_INPUTS`). `per_position`:
    one value per sequence position (padded with the sequences), else its own length
    (`masked_lm_positions`). `warmup`: its value in an export's warmup request, from
    that request's input_mask [1, L]."""

    name: str                # the model input, and the record feature of the same name
    dtype: tf.DType
    pad_value: int           # what positions past an example's end hold
    per_position: bool
    warmup: Callable[[np.ndarray], np.ndarray]


class BuiltBeforeTracing(keras.Model):
    """A Keras model whose `fit` and `evaluate` build what the step creates (the
    optimizer's slots, the compiled metrics' and loss trackers' state) before the step
    is traced, from the batches' spec, as Keras does under a distribution strategy.
    Without one Keras builds them inside the first trace, and tf.function then traces
    the step a second time and wraps each new variable's initializer in a tf.cond: a
    tiny text classifier's first `fit` took 10.5 s instead of 16.5 under the profiler
    (2-core AMD EPYC), one trace of the training step instead of two."""

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        dataset = getattr(iterator, "_distributed_dataset", None)  # Keras' TFEpochIterator
        if self._distribute_strategy is not None or data_batch is not None or \
                dataset is None:
            return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)
        with self.distribute_strategy.scope():
            self._symbolic_build(data_batch=dataset.element_spec)


class AlbertModel(LoraAdapters, BuiltBeforeTracing):
    """A Keras model built from an `AlbertConfig` (and a seed): loadable from a release
    directory (Google's, brightmart's albert_zh or a Hugging Face one), and a Keras
    serializable (every subclass is registered when defined, `common.serializable`):
    `model.save("m.keras")` and `keras.models.load_model("m.keras")` give it back with
    its weights, dtype policy, `recompute` and (compiled) optimizer state. Its config
    (`get_config`) is the `AlbertConfig`, the seed and the subclass's own arguments."""

    # The `transformers` class with the same weights (`huggingface.save_hf_checkpoint`
    # writes it); None where there is none.
    hf_architecture: str | None = None
    # With `hf_architecture`, Hugging Face's `problem_type` where that says which model
    # of ours the class is (multi-label classification).
    hf_problem_type: str | None = None
    # The heads it puts on the encoder (`albert_tf.task_heads.Head`: TF1 names, shapes,
    # Hugging Face keys), the first one's created first.
    heads: tuple = ()
    # The constructor argument that the size of the first head gives (`num_labels`:
    # `task_heads.num_outputs`), read from a checkpoint before the model is built.
    outputs_argument: str | None = None
    # Whether `from_release` requires every weight by default (a task model: only the
    # encoder's, since a pretraining release has no task head).
    release_strict: bool = True
    # Whether the model reads the pooled output: a checkpoint without the pooler (as
    # transformers' question-answering and token-classification models save) loads
    # into a model that does not.
    reads_pooled_output: bool = True
    # Whether `albert_tf.convert` may tell this model from a TF1 checkpoint's variables
    # alone (not where another model has the same head: multiple choice, multi-label).
    detectable: bool = True
    # Its inputs beyond the three sequences (`ExtraInput`), and whether the sequences
    # are [B, num_choices, S] (the model's `num_choices`) instead of [B, S]: what
    # `input_signature` says, and the exports take.
    extra_inputs: tuple[ExtraInput, ...] = ()
    per_choice: bool = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        common.serializable(cls)

    def __init__(self, config: AlbertConfig, seed: int | None = None,
                 recompute: str | None = None, **kwargs):
        """`recompute` ("layer", "group" or None): what a training pass keeps of the
        encoder's blocks: each unit's input alone, the unit run again in the backward pass
        (`albert_tf.modeling.recompute`; the same gradients, less memory, more time).
        Settable later as `model.recompute`."""
        super().__init__(**kwargs)
        self.config = common.checked_config(config)
        self.seed = seed
        self.recompute = recompute
        self._lora = None  # `enable_lora`'s arguments, once called

    @property
    def recompute(self) -> str | None:
        return self._recompute

    @recompute.setter
    def recompute(self, value) -> None:
        self._recompute = recompute_units.check_unit(value)

    def __call__(self, *args, **kwargs):
        # The unit is read when the encoder is traced; a model inside another keeps the
        # outer one's unless it has one of its own.
        if self._recompute is None:
            return super().__call__(*args, **kwargs)
        with recompute_units.with_unit(self._recompute):
            return super().__call__(*args, **kwargs)

    def compile(self, optimizer="rmsprop", loss=None, **kwargs):
        """Keras' `compile`; `loss` may also be a task's objective (`task.objective()`:
        an `albert_tf.training.objectives.Objective`, whose `loss(outputs, features)`
        reads the model's outputs and the batch's record features), the loss the scripts
        train on. `fit` then takes batches of (model inputs, record features), as
        `albert_tf.apps.driver.keras_data` makes them. The original's optimizers and
        schedule: `albert_tf.training.optimizers.create_optimizer`."""
        self._objective = None
        if loss is not None and not callable(loss) and callable(getattr(loss, "loss", None)):
            self._objective, loss = loss, None
        super().compile(optimizer=optimizer, loss=loss, **kwargs)

    def compile_from_config(self, config):
        """What `keras.models.load_model` compiles a loaded model with: the saved
        optimizer (and its state), Keras losses and metrics. (Keras skips this for a
        model whose `compile` is its own; a task's objective is not saved: compile
        with it again to train on.)"""
        config = keras.saving.deserialize_keras_object(config)
        keras.Model.compile(self, **config)
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                     training=True):
        objective = getattr(self, "_objective", None)
        if objective is None:
            return super().compute_loss(x, y, y_pred, sample_weight, training)
        loss = objective.loss(y_pred, y)
        return loss + tf.add_n(self.losses) if self.losses else loss

    def input_signature(self) -> dict[str, tf.TensorSpec]:
        """The model's inputs, name -> `tf.TensorSpec` (any batch and length): the
        sequences int32 [B, S] ([B, num_choices, S] for a per-choice model), then its
        `extra_inputs`."""
        shape = [None, self.num_choices, None] if self.per_choice else [None, None]
        specs = {name: tf.TensorSpec(shape, tf.int32, name=name)
                 for name in names.MODEL_INPUTS}
        specs.update({x.name: tf.TensorSpec([None, None], x.dtype, name=x.name)
                      for x in self.extra_inputs})
        return specs

    def export(self, filepath, format="tf_saved_model", verbose=None,
               input_signature=None, **kwargs):
        """Keras' `Model.export` (`format="tf_saved_model"`, `"litert"`, ...), its input
        signature the model's own (`input_signature()`) unless given: a model built
        when made, never called, exports too. Traced as the package's own exports are
        (`real_tokens.inference_graph`: computed on the real tokens only, and GELU and
        LayerNorm as plain TensorFlow ops, which TF Serving runs without XLA).
        (`albert_tf.export.export_savedmodel` is the full export: raw text in,
        tf.Example, labels, warmup, versions.)"""
        if input_signature is None:
            input_signature = [self.input_signature()]
        if format == "litert" and self.quantized_layers():
            raise UserError(
                "a model quantized by Keras (int8 kernels) has no LiteRT export: export the "
                "float model with albert_tf.export.export_tflite(model, path, kind=..., "
                "precision=\"int8\"), LiteRT's own int8, or this one as a SavedModel")
        with real_tokens.inference_graph():
            return keras.Model.export(_TensorOutputs(self), filepath, format=format,
                                      verbose=verbose, input_signature=input_signature,
                                      **kwargs)

    def quantized_layers(self) -> dict[str, str]:
        """The layers `quantize` changed (Keras' `model.quantize`, on this model or on
        one holding it), path -> quantization mode."""
        return {layer.path: layer.quantization_mode for layer in self._flatten_layers()
                if getattr(layer, "quantization_mode", None)}

    def get_config(self):
        # Keras' own (name, trainable, the dtype policy), then ours.
        config = {**super().get_config(), "config": self.config.to_dict(),
                  "seed": self.seed}
        if self._recompute is not None:
            config["recompute"] = self._recompute
        if self._lora:
            config["lora"] = dict(self._lora)
        quantized = self.quantized_layers()
        if quantized:  # made again by `from_config`, so that their weights load
            config["quantized"] = quantized
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        lora = config.pop("lora", None)
        quantized = config.pop("quantized", None)
        model = cls(AlbertConfig.from_dict(config.pop("config")), **config)
        if lora:
            model.enable_lora(**lora)
        for mode in sorted(set((quantized or {}).values())):
            with warnings.catch_warnings():  # LayerNorm, Dropout: nothing to quantize
                warnings.simplefilter("ignore")
                model.quantize(mode, filters=lambda layer, mode=mode:
                               quantized.get(layer.path) == mode)
        return model

    @classmethod
    def from_release(cls, directory, *, strict: bool | None = None, **kwargs):
        """Builds the model from a release directory's config and loads its weights: a
        Google release, a brightmart/albert_zh one (built as its Google-layout
        equivalent) or a Hugging Face directory. `strict` (default `release_strict`:
        True, and False for a task model, whose head a pretraining release lacks):
        every weight must come from the checkpoint; without it the encoder's must. The
        load report (its `layout` says which was read) is kept as
        `model.load_report`, the files as `model.release_files`.

        The reading is `albert_tf.checkpoints.load_model`: the package hands it to
        `set_release_reader` when imported, so that modeling itself reads no file."""
        if _release_reader is None:
            raise RuntimeError("no release reader: import albert_tf (which sets "
                               "albert_tf.checkpoints.load_model)")
        return _release_reader(cls, directory, strict=strict, **kwargs)


class _TensorOutputs(keras.Model):
    """What `AlbertModel.export` exports: the model in inference, each list of its
    outputs (the encoder's `encoder_outputs`) as one output per entry, `name_0`,
    `name_1`, ...: an exported signature returns tensors."""

    def __init__(self, model: AlbertModel):
        super().__init__(name=model.name, dtype=model.dtype_policy)
        self.model = model
        self.built = True

    def call(self, inputs):
        return tensor_outputs(self.model(inputs, training=False))


def tensor_outputs(outputs: dict) -> dict:
    """`outputs` with each list `name` as `name_0`, `name_1`, ... (the order kept)."""
    flat = {}
    for name, value in outputs.items():
        if isinstance(value, (list, tuple)):
            flat.update({f"{name}_{i}": v for i, v in enumerate(value)})
        else:
            flat[name] = value
    return flat


# What `from_release` calls: (model class, directory, strict=, **kwargs) -> model.
_release_reader = None


def set_release_reader(read) -> None:
    global _release_reader
    _release_reader = read
