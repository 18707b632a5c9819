"""`AlbertPretrainer`: the encoder plus the masked-LM and sentence-order heads."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from albert_tf import names, task_heads
from albert_tf.config import AlbertConfig
from albert_tf.modeling import common
from albert_tf.modeling.base import AlbertModel, ExtraInput, tf1_scope
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.heads import MaskedLMHead, SentenceOrderHead

# The positions the MLM head predicts, [B, P]: padded with 0 (the [CLS] position).
MASKED_LM_POSITIONS = ExtraInput(names.MASKED_LM_POSITIONS, tf.int32, pad_value=0,
                                 per_position=False,
                                 warmup=lambda mask: np.zeros([1, 1], np.int32))


class AlbertPretrainer(AlbertModel):
    """ALBERT with its pretraining heads, as the original `run_pretraining.py` builds it.

    Inputs: the encoder's dict plus `masked_lm_positions` [B, P] (int32).
    Outputs: the encoder's dict plus `mlm_logits` [B, P, vocab_size] and
    `sop_logits` [B, 2]. Losses: `albert_tf.losses`.
    """

    hf_architecture = names.HF_PRETRAINING
    heads = (task_heads.MASKED_LM, task_heads.SENTENCE_ORDER)
    extra_inputs = (MASKED_LM_POSITIONS,)

    def __init__(self, config: AlbertConfig, seed: int | None = None, **kwargs):
        kwargs.setdefault("name", "albert_pretrainer")
        super().__init__(config, seed, **kwargs)
        self.encoder = AlbertEncoder(config, seed=seed, dtype=self.dtype_policy)
        # The heads draw their seeds after the encoder's, from a stream of their own.
        seeds = common.SeedStream(None if seed is None else seed + 1)
        self.masked_lm = MaskedLMHead(config, seeds, dtype=self.dtype_policy)
        self.sentence_order = SentenceOrderHead(config, seeds, dtype=self.dtype_policy)
        with tf1_scope("cls"):
            self.masked_lm.build()
            self.sentence_order.build()
        self.built = True

    def call(self, inputs, training=None):
        if "masked_lm_positions" not in inputs:
            raise KeyError(
                "AlbertPretrainer needs the input 'masked_lm_positions' [B, P]; "
                f"got keys {sorted(inputs)}")
        outputs = dict(self.encoder(inputs, training=training))
        outputs[names.MLM_LOGITS] = self.masked_lm(
            outputs[names.SEQUENCE_OUTPUT], inputs[names.MASKED_LM_POSITIONS],
            self.encoder.word_embeddings)
        outputs[names.SOP_LOGITS] = self.sentence_order(outputs[names.POOLED_OUTPUT])
        return outputs
