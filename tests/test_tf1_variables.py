"""Variable names and shapes: the Keras models against what the original code creates."""

import functools

import keras
import pytest
import tensorflow as tf
from conftest import FIXTURE_CHECKPOINT

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.checkpoints import is_training_state
from albert_tf.modeling import tf1_variables
from tests.helpers import tiny


def model_variables(model):
    return {w.path: tuple(w.shape) for w in model.weights}


def test_the_tf1_variables_are_what_the_original_code_created(tiny_config):
    # The fixture checkpoint was written by the original TF1 graph: its model
    # variables are exactly those tf1_variables derives from the config.
    original = {name: tuple(shape) for name, shape in tf.train.list_variables(FIXTURE_CHECKPOINT)
                if not is_training_state(name)}
    assert original == tf1_variables.pretrainer_variables(tiny_config)


# Four layers of H=12 (E=8 != H), the sizes the cases below change.
config = functools.partial(tiny.tiny_config, vocab_size=30, hidden_size=12, num_hidden_layers=4,
                           intermediate_size=20, max_position_embeddings=16)


@pytest.mark.parametrize("cfg", [
    config(),  # one group, one inner group, E != H
    config(embedding_size=12),  # E == H: no embedding_hidden_mapping_in
    config(num_hidden_groups=4, num_hidden_layers=4),  # a group per layer
    config(num_hidden_groups=3, num_hidden_layers=7, inner_group_num=3),
    config(num_hidden_groups=2, num_hidden_layers=6, inner_group_num=2, embedding_size=12),
    # 22 layers in 22 groups: the original's float rule never uses group_15.
    config(num_hidden_groups=22, num_hidden_layers=22, hidden_size=4, intermediate_size=4),
], ids=["base-like", "E==H", "unshared", "3groups-3inner", "grouped-E==H", "22x22"])
def test_models_create_exactly_the_original_variables(cfg):
    assert model_variables(AlbertPretrainer(cfg)) == tf1_variables.pretrainer_variables(cfg)
    assert model_variables(AlbertEncoder(cfg)) == tf1_variables.encoder_variables(cfg)


def test_e_equal_h_has_no_mapping_and_runs():
    cfg = config(embedding_size=12)
    assert not any("embedding_hidden_mapping_in" in name
                   for name in tf1_variables.encoder_variables(cfg))
    out = AlbertEncoder(cfg)({"input_word_ids": tf.ones([2, 5], tf.int32)})
    assert out["sequence_output"].shape == (2, 5, 12)
    assert out["embedding_output"].shape == (2, 5, 12)


def test_variable_paths_do_not_depend_on_model_names_or_nesting():
    cfg = config()

    class Wrapper(keras.layers.Layer):
        def build(self, input_shape):
            self.inner = AlbertEncoder(cfg, name="renamed")

        def call(self, x):
            return self.inner(x)["pooled_output"]

    wrapper = Wrapper(name="outer")
    wrapper({"input_word_ids": tf.ones([1, 3], tf.int32)})
    assert model_variables(wrapper) == tf1_variables.encoder_variables(cfg)


@pytest.mark.parametrize("name, encoder, total", [
    ("albert_base_v2", 11_683_584, 11_813_810),
    ("albert_large_v2", 17_683_968, 17_847_474),
    ("albert_xlarge_v2", 58_724_864, 59_021_490),
    ("albert_xxlarge_v2", 222_595_584, 223_158_450),
])
def test_parameter_counts_of_released_sizes(name, encoder, total):
    counts = tf1_variables.parameter_counts(AlbertConfig.from_name(name))
    assert counts["encoder"] == encoder and counts["total"] == total
    assert counts["total"] == counts["encoder"] + counts["masked_lm_head"] + \
        counts["sentence_order_head"]


def test_parameter_counts_agree_with_the_paper():
    # Encoder + pooler in millions: 11.7 / 17.7 / 58.7 / 222.6; with the heads, base
    # and large round to the paper's 12M and 18M (ALBERT paper, Table 1).
    millions = {size: tf1_variables.parameter_counts(AlbertConfig.from_name(f"albert_{size}_v2"))
                for size in ("base", "large", "xlarge", "xxlarge")}
    assert [round(c["encoder"] / 1e6, 1) for c in millions.values()] == \
        [11.7, 17.7, 58.7, 222.6]
    assert round(millions["base"]["total"] / 1e6) == 12
    assert round(millions["large"]["total"] / 1e6) == 18


def test_built_model_has_the_counted_parameters():
    cfg = AlbertConfig.from_name("albert_base_v2")
    model = AlbertPretrainer(cfg)
    assert model.count_params() == tf1_variables.parameter_counts(cfg)["total"] == 11_813_810
