"""`AlbertModel`: what every model of this package shares."""

from __future__ import annotations

import dataclasses
import json
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

from albert_tf import names
from albert_tf.config import AlbertConfig
from albert_tf.errors import UserError
from albert_tf.modeling import common
from albert_tf.modeling import recompute as recompute_units


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


class AlbertModel(keras.Model):
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
        if not isinstance(config, AlbertConfig):
            raise TypeError(f"config must be an AlbertConfig, got {type(config).__name__}")
        self.config = config
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
        when made, never called, exports too. (`albert_tf.export.export_savedmodel` is
        the full export: raw text in, tf.Example, labels, warmup, versions.)"""
        if input_signature is None:
            input_signature = [self.input_signature()]
        return keras.Model.export(_TensorOutputs(self), filepath, format=format,
                                  verbose=verbose, input_signature=input_signature,
                                  **kwargs)

    def get_config(self):
        # Keras' own (name, trainable, the dtype policy), then ours.
        config = {**super().get_config(), "config": self.config.to_dict(),
                  "seed": self.seed}
        if self._recompute is not None:
            config["recompute"] = self._recompute
        if self._lora:
            config["lora"] = dict(self._lora)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        lora = config.pop("lora", None)
        model = cls(AlbertConfig.from_dict(config.pop("config")), **config)
        if lora:
            model.enable_lora(**lora)
        return model

    # -- LoRA: keras-hub's `backbone.enable_lora`, for ALBERT
    def lora_encoder(self):
        """The encoder whose weights LoRA freezes (a model's `encoder`)."""
        return self.encoder

    def lora_targets(self, ffn: bool = False) -> list:
        """The Dense layers LoRA adapts: each attention's query and value, with `ffn`
        the FFN's two denses too (one of each per shared group)."""
        from albert_tf.modeling.attention import AlbertAttention
        from albert_tf.modeling.transformer import AlbertFeedForward

        targets = []
        for layer in self.lora_encoder()._flatten_layers(include_self=False):
            if isinstance(layer, AlbertAttention):
                targets += [layer.query, layer.value]
            elif ffn and isinstance(layer, AlbertFeedForward):
                targets += [layer.intermediate, layer.output_dense]
        return targets

    @property
    def lora_rank(self) -> int | None:
        return self._lora["rank"] if self._lora else None

    def enable_lora(self, rank: int, *, ffn: bool = False, alpha: float | None = None):
        """Low-rank adapters, as keras-hub's backbones have them: Keras' Dense LoRA
        (kernel + alpha / rank * A @ B, alpha defaulting to the rank; A drawn from the
        model's seed, B zeros, so the model starts where it was) on each attention's
        query and value (one per shared group: shared, as the kernels they adapt), with
        `ffn` on the FFN's two denses too. Every other weight of the encoder is frozen
        (the adapted denses' biases stay trainable, as in keras-hub); what is not the
        encoder (a task's head, the pretraining heads) stays trainable. The forward
        pass reads the adapted kernels; `merge_lora()` folds them in for serving,
        `save_lora_weights` keeps what training changes on its own."""
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise ValueError(f"the LoRA rank must be an integer >= 1, got {rank!r}")
        if self._lora:
            raise ValueError(f"LoRA is enabled already (rank {self.lora_rank})")
        seeds = common.SeedStream(None if self.seed is None else self.seed + 2)
        for layer in self.lora_encoder()._flatten_layers(include_self=False):
            layer.trainable = False
        for layer in self.lora_targets(ffn):
            layer.trainable = True
            layer.enable_lora(rank, lora_alpha=alpha,
                              a_initializer=keras.initializers.HeUniform(seed=seeds()))
        self._lora = {"rank": rank, "ffn": ffn, "alpha": alpha}

    def merge_lora(self) -> "AlbertModel":
        """A copy of the model without adapters, each adapted kernel replaced by kernel +
        alpha / rank * A @ B: this model's outputs at the base model's serving cost
        (what an export of a LoRA-trained model holds). The model itself if LoRA is
        off."""
        if not self._lora:
            return self
        values = self.merged_weights()
        config = self.get_config()
        del config["lora"]
        merged = type(self).from_config(config)
        for weight in merged.weights:
            weight.assign(tf.cast(values[weight.path], weight.dtype))
        return merged

    def merged_weights(self) -> dict:
        """The weights by path as `merge_lora()`'s model holds them: each adapted kernel
        with its adapter folded in (a tensor), no adapter weights (the variables
        themselves where LoRA is off). What a TF1 checkpoint of the model holds."""
        weights = {w.path: w for w in self.weights}
        if self._lora:
            for layer in self.lora_targets(self._lora["ffn"]):
                weights[layer._kernel.path] = layer.kernel  # kernel + its adapter
                del weights[layer.lora_kernel_a.path], weights[layer.lora_kernel_b.path]
        return weights

    def lora_base_fingerprint(self) -> str:
        """sha256 of the frozen weights (paths and values): which base an adapter fits."""
        import hashlib

        digest = hashlib.sha256()
        for weight in sorted(self.non_trainable_weights, key=lambda w: w.path):
            digest.update(weight.path.encode())
            digest.update(np.ascontiguousarray(weight.numpy()).tobytes())
        return digest.hexdigest()

    def save_lora_weights(self, path) -> None:
        """What LoRA training changes (the adapters, the adapted denses' biases, the
        head), with the fingerprint of the base they fit, as an .npz file (written
        under a temporary name, then renamed): a small file beside the base
        checkpoint, loaded back with `load_lora_weights`."""
        import os

        if not self._lora:
            raise ValueError("save_lora_weights: LoRA is not enabled (enable_lora)")
        path = os.fspath(path)
        arrays = {w.path: w.numpy() for w in self.trainable_weights}
        arrays[_LORA_BASE] = np.array(self.lora_base_fingerprint())
        arrays[_LORA_SETTINGS] = np.array(json.dumps(self._lora))
        temporary = f"{path}.tmp-{os.getpid()}.npz"
        try:
            np.savez(temporary, **arrays)
            os.replace(temporary, path)
        finally:
            if os.path.exists(temporary):
                os.remove(temporary)

    def load_lora_weights(self, path) -> None:
        """Loads an adapter file of `save_lora_weights` onto this model (LoRA enabled
        as the file says, if it is not yet), after checking that it fits: written
        for these frozen weights, holding every trainable weight with its shape."""
        import os

        path = os.fspath(path)
        if not os.path.isfile(path):
            raise UserError(f"{path}: no such LoRA adapter file")
        try:
            with np.load(path, allow_pickle=False) as stored:
                arrays = {k: stored[k] for k in stored.files}
        except (OSError, ValueError) as e:
            raise UserError(f"{path}: not a LoRA adapter file ({e})") from None
        if _LORA_BASE not in arrays or _LORA_SETTINGS not in arrays:
            raise UserError(f"{path}: not a LoRA adapter file (no {_LORA_BASE})")
        settings = json.loads(str(arrays.pop(_LORA_SETTINGS)))
        if not self._lora:
            self.enable_lora(**settings)
        elif settings != self._lora:
            raise UserError(f"{path}: an adapter of LoRA {settings}, the model has "
                            f"{self._lora}")
        if str(arrays.pop(_LORA_BASE)) != self.lora_base_fingerprint():
            raise UserError(f"{path}: a LoRA adapter of another base checkpoint (its "
                            "frozen weights differ from this model's)")
        weights = {w.path: w for w in self.trainable_weights}
        if sorted(arrays) != sorted(weights):
            missing = sorted(set(weights) - set(arrays))
            extra = sorted(set(arrays) - set(weights))
            raise UserError(f"{path}: the adapter does not fit the model (missing: "
                            f"{', '.join(missing) or 'none'}; not the model's: "
                            f"{', '.join(extra) or 'none'})")
        for name, value in arrays.items():
            if tuple(value.shape) != tuple(weights[name].shape):
                raise UserError(f"{path}: {name} is {list(value.shape)} in the adapter, "
                                f"{list(weights[name].shape)} in the model")
        for name, value in arrays.items():
            weights[name].assign(value)

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


# The entries of an adapter file beside the weights.
_LORA_BASE = "__lora_base_sha256__"
_LORA_SETTINGS = "__lora_settings__"


# What `from_release` calls: (model class, directory, strict=, **kwargs) -> model.
_release_reader = None


def set_release_reader(read) -> None:
    global _release_reader
    _release_reader = read
