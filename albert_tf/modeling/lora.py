"""LoRA on the models of this package: keras-hub's `backbone.enable_lora`, for ALBERT.

`LoraAdapters` is a base of `AlbertModel` (which keeps `_lora`, the arguments of
`enable_lora`, in its config): Keras' own Dense LoRA on the attention's shared query and
value (and the FFN), the encoder frozen, the head trained; the adapters folded in for
serving (`merge_lora`, `merged_weights`: what the TF1 checkpoints hold) or kept on
their own (`save_lora_weights`, `load_lora_weights`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os

import keras
import numpy as np
import tensorflow as tf

from albert_tf import fileio
from albert_tf.errors import UserError
from albert_tf.modeling import common

# The entries of an adapter file beside the weights.
_LORA_BASE = "__lora_base_sha256__"
_LORA_SETTINGS = "__lora_settings__"


class LoraAdapters:
    """The LoRA methods of `AlbertModel` (`self._lora`: None, or `enable_lora`'s
    arguments)."""

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
        encoder (a task's head, the pretraining heads) stays trainable. The encoder's
        shared layers add the adapters beside the frozen kernels, (x @ A) @ B (the same
        function, with no kernel-sized copy or gradient: `common.SharedDense`);
        `merge_lora()` folds them in for serving, `save_lora_weights` keeps what
        training changes on its own."""
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

    def merge_lora(self):
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
        if not self._lora:
            raise ValueError("save_lora_weights: LoRA is not enabled (enable_lora)")
        arrays = {w.path: w.numpy() for w in self.trainable_weights}
        arrays[_LORA_BASE] = np.array(self.lora_base_fingerprint())
        arrays[_LORA_SETTINGS] = np.array(json.dumps(self._lora))
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        fileio.write_bytes_atomically(path, buffer.getvalue())

    def load_lora_weights(self, path) -> None:
        """Loads an adapter file of `save_lora_weights` onto this model (LoRA enabled
        as the file says, if it is not yet), after checking that it fits: written
        for these frozen weights, holding every trainable weight with its shape."""
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
