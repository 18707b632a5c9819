import json

import pytest

from albert_tf import AlbertConfig, ConfigError, available_configs

SIZES = {  # hidden, intermediate, layers
    "base": (768, 3072, 12), "large": (1024, 4096, 24),
    "xlarge": (2048, 8192, 24), "xxlarge": (4096, 16384, 12)}


def test_every_release_has_a_shipped_config():
    names = available_configs()
    assert names == sorted(
        f"albert_{size}_{kind}" for size in SIZES for kind in ("v1", "v2", "zh"))
    for name in names:
        config = AlbertConfig.from_name(name)
        size = name.split("_")[1]
        assert (config.hidden_size, config.intermediate_size,
                config.num_hidden_layers) == SIZES[size]
        assert config.embedding_size == 128
        assert config.num_hidden_groups == 1 and config.inner_group_num == 1


def test_release_differences_v1_v2_zh():
    assert AlbertConfig.from_name("albert_base_v1").hidden_dropout_prob == 0.1
    for size in SIZES:
        v2 = AlbertConfig.from_name(f"albert_{size}_v2")
        assert v2.hidden_dropout_prob == 0 and v2.attention_probs_dropout_prob == 0
        assert v2.hidden_act == "gelu" and v2.vocab_size == 30000
        zh = AlbertConfig.from_name(f"albert_{size}_zh")
        assert zh.hidden_act == "relu" and zh.vocab_size == 21128
    # The extra fields of Google's files are tolerated and kept.
    assert AlbertConfig.from_name("albert_base_v2").extra["net_structure_type"] == 0


def test_json_round_trip_keeps_unknown_fields(tmp_path):
    original = json.loads(
        (AlbertConfig.from_name("albert_xxlarge_v2").to_json_string()))
    original["some_future_field"] = [1, 2]
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(original))
    config = AlbertConfig.from_json_file(path)
    assert config.extra["some_future_field"] == [1, 2]
    assert json.loads(config.to_json_string()) == original
    assert AlbertConfig.from_dict(config.to_dict()) == config
    config.to_json_file(tmp_path / "copy.json")
    assert AlbertConfig.from_json_file(tmp_path / "copy.json") == config
    assert not list(tmp_path.glob("*.tmp-*"))  # written under a temporary name, renamed


def test_name_or_file_takes_either_and_lists_the_names_for_neither(tmp_path):
    assert AlbertConfig.from_name_or_file("albert_base_v2") == \
        AlbertConfig.from_name("albert_base_v2")
    path = tmp_path / "albert_config.json"
    AlbertConfig.from_name("albert_large_zh").to_json_file(path)
    assert AlbertConfig.from_name_or_file(path) == AlbertConfig.from_name("albert_large_zh")
    with pytest.raises(ConfigError, match=r"albert config file albert_bsae_v2 does not "
                                          r"exist, and it is not the name of a shipped "
                                          r"config either \(albert_base_v1, albert_base_v2, "):
        AlbertConfig.from_name_or_file("albert_bsae_v2")


def test_defaults_are_those_of_the_original():
    config = AlbertConfig(vocab_size=30000)
    assert (config.hidden_size, config.num_attention_heads, config.intermediate_size,
            config.type_vocab_size, config.hidden_act) == (4096, 64, 16384, 2, "gelu")


BASE = dict(vocab_size=100, embedding_size=8, hidden_size=16, num_hidden_layers=4,
            num_attention_heads=4, intermediate_size=32)


@pytest.mark.parametrize("changes, words", [
    ({"num_attention_heads": 3}, ["'hidden_size' (16)", "'num_attention_heads' (3)",
                                   "multiple"]),
    ({"num_hidden_groups": 5}, ["'num_hidden_groups'", "5", "4 layers"]),
    ({"hidden_act": "swish"}, ["'hidden_act'", "'swish'", "gelu, gelu_exact, relu, tanh, linear"]),
    ({"ln_type": "preln"}, ["'ln_type'", "'preln'", "'postln'", "no weights"]),
    ({"hidden_size": 0}, ["'hidden_size'", ">= 1", "got 0"]),
    ({"vocab_size": -5}, ["'vocab_size'", "got -5"]),
    ({"hidden_size": "768"}, ["'hidden_size'", "must be an integer", "str '768'"]),
    ({"num_hidden_layers": 12.0}, ["'num_hidden_layers'", "must be an integer", "12.0"]),
    ({"inner_group_num": True}, ["'inner_group_num'", "must be an integer", "bool"]),
    ({"hidden_dropout_prob": "0.1"}, ["'hidden_dropout_prob'", "must be a number"]),
    ({"attention_probs_dropout_prob": 1.0}, ["'attention_probs_dropout_prob'", "[0, 1)"]),
    ({"initializer_range": 0}, ["'initializer_range'", "> 0"]),
    ({"hidden_act": 3}, ["'hidden_act'", "must be a string"]),
])
def test_invalid_config_names_the_field(changes, words):
    with pytest.raises(ConfigError) as error:
        AlbertConfig.from_dict({**BASE, **changes})
    for word in words:
        assert word in str(error.value)


def test_errors_name_the_file(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps({**BASE, "num_attention_heads": "four"}))
    with pytest.raises(ConfigError, match=f"'num_attention_heads' in {path}"):
        AlbertConfig.from_json_file(path)
    path.write_text('{"vocab_size": 10,\n "hidden_size": }')
    with pytest.raises(ConfigError, match=rf"{path} is not valid JSON.*line 2"):
        AlbertConfig.from_json_file(path)
    path.write_text(json.dumps({"hidden_size": 16}))
    with pytest.raises(ConfigError, match="no 'vocab_size' field"):
        AlbertConfig.from_json_file(path)
    path.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="must be a JSON object"):
        AlbertConfig.from_json_file(path)
    with pytest.raises(ConfigError, match="does not exist"):
        AlbertConfig.from_json_file(tmp_path / "missing.json")
    with pytest.raises(ConfigError, match="available: albert_base_v1"):
        AlbertConfig.from_name("albert_huge_v3")


def test_hidden_act_is_case_insensitive_like_the_original():
    assert AlbertConfig.from_dict({**BASE, "hidden_act": "GELU"}).hidden_act == "GELU"


def test_group_mapping_is_the_originals():
    config = AlbertConfig.from_dict({**BASE, "num_hidden_layers": 6, "num_hidden_groups": 2,
                                     "inner_group_num": 2})
    assert [config.group_index(layer) for layer in range(6)] == [0, 0, 0, 1, 1, 1]
    # int(l / L * G) in floating point: with 22 layers in 22 groups, 15/22*22 < 15,
    # so layers 14 and 15 share group_14 and group_15 has no variables.
    config = AlbertConfig.from_dict({**BASE, "num_hidden_layers": 22,
                                     "num_hidden_groups": 22})
    assert config.group_index(15) == 14
    assert config.used_groups() == [g for g in range(22) if g != 15]
