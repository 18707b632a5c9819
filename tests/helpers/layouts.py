"""The other layouts' fixtures (what brightmart's and transformers' own code computed)
and release directories laid out as those projects ship them."""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import tensorflow as tf

from albert_tf import names
from tests.helpers.paths import FIXTURES, SPM_MODEL

BRIGHTMART = FIXTURES / "brightmart_albert_zh_tiny"  # brightmart's modeling.py, 3 layers
HF = FIXTURES / "hf_albert_tiny_grouped"  # transformers 5.23 AlbertForPreTraining
# WordPiece special tokens first, then CJK characters: a vocab.txt of `size` entries.
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def load_npz(directory: pathlib.Path, name: str) -> dict[str, np.ndarray]:
    return dict(np.load(directory / f"{name}.npz"))


def model_inputs(features: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A fixture's `inputs.npz` (record feature names) as model inputs."""
    return {names.RECORD_TO_MODEL[n]: features[n] for n in names.RECORD_SEQUENCES}


def write_vocab(path: pathlib.Path, size: int, chars: str = "") -> pathlib.Path:
    """A WordPiece vocab.txt of `size` entries: the special tokens, `chars`, then other
    CJK characters."""
    tokens = SPECIAL + [c for c in dict.fromkeys(chars) if c not in SPECIAL]
    code = 0x4E00
    while len(tokens) < size:
        if chr(code) not in tokens:
            tokens.append(chr(code))
        code += 1
    path.write_text("\n".join(tokens[:size]) + "\n", encoding="utf-8")
    return path


def brightmart_release(directory: pathlib.Path) -> pathlib.Path:
    """The brightmart fixture laid out as `albert_tiny_zh/` is released:
    `albert_config_tiny.json`, `albert_model.ckpt.*`, `vocab.txt`, and a `checkpoint`
    file naming a path on its authors' machine."""
    directory.mkdir(parents=True)
    shutil.copy(BRIGHTMART / "albert_config.json", directory / "albert_config_tiny.json")
    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copy(BRIGHTMART / f"model.ckpt{suffix}", directory / f"albert_model.ckpt{suffix}")
    (directory / "checkpoint").write_text(
        'model_checkpoint_path: "/home/brightmart/albert_tiny/albert_model.ckpt"\n')
    config = json.loads((BRIGHTMART / "albert_config.json").read_text())
    write_vocab(directory / "vocab.txt", config["vocab_size"])
    return directory


def hf_release(directory: pathlib.Path, tokenizer: str = "spm") -> pathlib.Path:
    """The transformers fixture with tokenizer files, as `save_pretrained` leaves a
    directory: `spiece.model` (tokenizer "spm") or `vocab.txt` ("wordpiece")."""
    shutil.copytree(HF, directory, ignore=shutil.ignore_patterns("*.npz"))
    config = json.loads((HF / "config.json").read_text())
    if tokenizer == "spm":
        shutil.copy(SPM_MODEL, directory / "spiece.model")
        settings = {"tokenizer_class": "AlbertTokenizer", "do_lower_case": True}
    else:
        write_vocab(directory / "vocab.txt", config["vocab_size"])
        settings = {"tokenizer_class": "BertTokenizer", "do_lower_case": False}
    (directory / "tokenizer_config.json").write_text(json.dumps(settings))
    return directory


def write_brightmart_checkpoint(prefix: str, config, seed: int = 0) -> str:
    """A checkpoint with brightmart's names and shapes for a brightmart-style `config`
    (E != H allowed), random values: a stand-in release of any vocabulary."""
    rng = np.random.default_rng(seed)
    v, e, h, i = (config.vocab_size, config.embedding_size, config.hidden_size,
                  config.intermediate_size)
    shapes = {
        "bert/embeddings/word_embeddings": (v, e),
        "bert/embeddings/word_embeddings_2": (e, h),
        "bert/embeddings/token_type_embeddings": (config.type_vocab_size, h),
        "bert/embeddings/position_embeddings": (config.max_position_embeddings, h),
        "bert/pooler/dense/kernel": (h, h), "bert/pooler/dense/bias": (h,),
        "cls/predictions/transform/dense/kernel": (h, h),
        "cls/predictions/transform/dense/bias": (h,),
        "cls/predictions/output_bias": (v,),
        "cls/seq_relationship/output_weights": (2, h), "cls/seq_relationship/output_bias": (2,),
    }
    for scope in ("bert/embeddings/LayerNorm", "cls/predictions/transform/LayerNorm"):
        shapes.update({f"{scope}/gamma": (h,), f"{scope}/beta": (h,)})
    shared = "bert/encoder/layer_shared/"
    for part, (fan_in, fan_out) in {
            "attention/self/query": (h, h), "attention/self/key": (h, h),
            "attention/self/value": (h, h), "attention/output/dense": (h, h),
            "intermediate/dense": (h, i), "output/dense": (i, h)}.items():
        shapes.update({f"{shared}{part}/kernel": (fan_in, fan_out),
                       f"{shared}{part}/bias": (fan_out,)})
    for part in ("attention/output/LayerNorm", "output/LayerNorm"):
        shapes.update({f"{shared}{part}/gamma": (h,), f"{shared}{part}/beta": (h,)})
    tensors = {n: (1.0 + 0.1 * rng.standard_normal(s) if n.endswith("gamma")
                   else 0.1 * rng.standard_normal(s)).astype(np.float32)
               for n, s in shapes.items()}
    ordered = sorted(tensors)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=ordered, shape_and_slices=[""] * len(ordered),
                      tensors=[tf.constant(tensors[n]) for n in ordered])
    return prefix


# A tiny BERT (transformers' BertModel keys): what `checkpoints.huggingface` reads as
# the ALBERT of one group per layer.
BERT = {"model_type": "bert", "vocab_size": 40, "hidden_size": 16, "num_hidden_layers": 3,
        "num_attention_heads": 2, "intermediate_size": 24, "hidden_act": "gelu",
        "max_position_embeddings": 12, "type_vocab_size": 2, "layer_norm_eps": 1e-12}


def bert_state_dict(config: dict, base: str, seed: int = 0) -> dict[str, np.ndarray]:
    """Random weights under BertModel's state-dict keys (`base`: "bert." in its task
    classes), with the position buffer it saves beside them."""
    rng = np.random.default_rng(seed)
    h, i = config["hidden_size"], config["intermediate_size"]

    def draw(*shape):
        return rng.normal(0, 0.2, shape).astype(np.float32)

    keys = {"embeddings.word_embeddings.weight": draw(config["vocab_size"], h),
            "embeddings.position_embeddings.weight": draw(config["max_position_embeddings"], h),
            "embeddings.token_type_embeddings.weight": draw(config["type_vocab_size"], h),
            "pooler.dense.weight": draw(h, h), "pooler.dense.bias": draw(h)}
    norms = ["embeddings.LayerNorm"]
    for n in range(config["num_hidden_layers"]):
        layer = f"encoder.layer.{n}"
        for name, (out, into) in {"attention.self.query": (h, h), "attention.self.key": (h, h),
                                  "attention.self.value": (h, h),
                                  "attention.output.dense": (h, h),
                                  "intermediate.dense": (i, h), "output.dense": (h, i)}.items():
            keys[f"{layer}.{name}.weight"] = draw(out, into)
            keys[f"{layer}.{name}.bias"] = draw(out)
        norms += [f"{layer}.attention.output.LayerNorm", f"{layer}.output.LayerNorm"]
    for norm in norms:
        keys[f"{norm}.weight"], keys[f"{norm}.bias"] = 1 + draw(h), draw(h)
    keys = {f"{base}{k}": v for k, v in keys.items()}
    keys[f"{base}embeddings.position_ids"] = np.arange(
        config["max_position_embeddings"], dtype=np.int64)[None]
    return keys


def write_bert_directory(directory, config: dict, tensors: dict, architecture: str):
    """A Hugging Face BERT directory as transformers' save_pretrained lays it out: the
    weights, config.json of `architecture`, a small uncased WordPiece vocab.txt."""
    directory.mkdir(parents=True)
    from safetensors.numpy import save_file

    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    (directory / "config.json").write_text(json.dumps({**config,
                                                       "architectures": [architecture]}))
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cafe", "un", "##able",
             ",", "中", "文"]
    (directory / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    (directory / "tokenizer_config.json").write_text(json.dumps(
        {"do_lower_case": True, "tokenizer_class": "BertTokenizer"}))
    return directory
