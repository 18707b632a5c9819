"""What we write, `transformers` loads and computes the same (1e-5); what it writes, we
read the same. Runs where `transformers` and `torch` are installed (the optional
benchmark environment, `benchmarks/requirements-peers.txt`); skipped otherwise. The
default suite checks the written files against transformers' own (test_huggingface.py).
Where importing triton after TensorFlow crashes (torch 2.14 on some machines), import it
first: `python -c "import triton, torch, transformers.models.albert.modeling_albert,
sys, pytest; sys.exit(pytest.main(['tests/test_transformers_interop.py']))"`.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from albert_tf import (  # noqa: E402
    AlbertClassifier,
    AlbertConfig,
    AlbertEncoder,
    AlbertMultipleChoice,
    AlbertPretrainer,
    AlbertSquadV1,
    AlbertTokenClassifier,
    names,
)
from albert_tf.checkpoints import huggingface  # noqa: E402
from tests.helpers.layouts import brightmart_release  # noqa: E402
from tests.helpers.paths import FIXTURES, SPM_MODEL  # noqa: E402
from tests.helpers.tiny import random_inputs, tiny_config  # noqa: E402

TOLERANCE = 1e-5
ORIGINAL = FIXTURES / "albert_tf1_tiny_grouped"  # Google's code: E != H, 2 x 2 groups


def torch_inputs(inputs):
    return {"input_ids": torch.tensor(inputs[names.INPUT_WORD_IDS], dtype=torch.long),
            "attention_mask": torch.tensor(inputs[names.INPUT_MASK], dtype=torch.long),
            "token_type_ids": torch.tensor(inputs[names.INPUT_TYPE_IDS], dtype=torch.long)}


def load_theirs(directory, architecture):
    model = getattr(transformers, architecture).from_pretrained(str(directory))
    return model.eval()


def close(ours, theirs):
    np.testing.assert_allclose(np.asarray(ours), theirs.detach().numpy(), atol=TOLERANCE)


@pytest.mark.parametrize("source", ["original", "brightmart", "gelu_exact"])
def test_pretrainer_written_is_loaded_by_transformers(tmp_path, source):
    if source == "original":
        model = AlbertPretrainer.from_release(ORIGINAL)
    elif source == "brightmart":
        model = AlbertPretrainer.from_release(brightmart_release(tmp_path / "zh"))
    else:
        model = AlbertPretrainer(tiny_config(vocab_size=60, hidden_act="gelu_exact",
                                             num_hidden_groups=2, inner_group_num=2), seed=4)
    huggingface.save_hf_checkpoint(model, tmp_path / "hf")
    theirs = load_theirs(tmp_path / "hf", "AlbertForPreTraining")
    inputs = random_inputs(model.config, batch=3, length=12, seed=0, min_length=5,
                           second_segment_from=6)
    length = inputs[names.INPUT_WORD_IDS].shape[1]
    ours = model({**inputs, names.MASKED_LM_POSITIONS: np.tile(np.arange(length), (3, 1))})
    with torch.no_grad():
        out = theirs(**torch_inputs(inputs), output_hidden_states=True)
    close(ours[names.MLM_LOGITS], out.prediction_logits)
    close(ours[names.SOP_LOGITS], out.sop_logits)
    close(ours["sequence_output"], out.hidden_states[-1])


@pytest.mark.parametrize("make, architecture", [
    (lambda c: AlbertClassifier(c, 3, seed=1), "AlbertForSequenceClassification"),
    (lambda c: AlbertClassifier(c, 1, seed=1), "AlbertForSequenceClassification"),
    (lambda c: AlbertMultipleChoice(c, 4, seed=1), "AlbertForMultipleChoice"),
    (lambda c: AlbertSquadV1(c, seed=1), "AlbertForQuestionAnswering"),
    (lambda c: AlbertTokenClassifier(c, 5, seed=1), "AlbertForTokenClassification"),
    (lambda c: AlbertEncoder(c, seed=1), "AlbertModel"),
])
def test_task_models_written_are_loaded_by_transformers(tmp_path, make, architecture):
    model = make(tiny_config(vocab_size=60, num_hidden_groups=2))
    huggingface.save_hf_checkpoint(model, tmp_path / "hf")
    theirs = load_theirs(tmp_path / "hf", architecture)
    choices = 4 if architecture == "AlbertForMultipleChoice" else None
    inputs = random_inputs(model.config, batch=2, length=10, seed=1, min_length=4,
                           num_choices=choices)
    ours = model(inputs)
    with torch.no_grad():
        out = theirs(**torch_inputs(inputs))
    if architecture == "AlbertForQuestionAnswering":
        close(ours[names.START_LOGITS], out.start_logits)
        close(ours[names.END_LOGITS], out.end_logits)
    elif architecture == "AlbertModel":
        close(ours["sequence_output"], out.last_hidden_state)
        close(ours["pooled_output"], out.pooler_output)
    else:
        regression = out.logits.shape[1] == 1  # our regression logits are [B]
        close(ours[names.LOGITS], out.logits[:, 0] if regression else out.logits)


@pytest.mark.parametrize("architecture", ["AlbertForSequenceClassification",
                                          "AlbertForQuestionAnswering"])
def test_what_transformers_writes_we_read(tmp_path, architecture):
    torch.manual_seed(0)
    config = transformers.AlbertConfig(
        vocab_size=70, embedding_size=8, hidden_size=16, num_hidden_layers=3,
        num_hidden_groups=1, inner_group_num=2, num_attention_heads=2,
        intermediate_size=24, max_position_embeddings=32, hidden_act="gelu",
        num_labels=3 if architecture == "AlbertForSequenceClassification" else 2)
    theirs = getattr(transformers, architecture)(config).eval()
    with torch.no_grad():  # non-trivial LayerNorms and biases
        for parameter in theirs.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    theirs.save_pretrained(str(tmp_path / "hf"), safe_serialization=True)
    ours_config = AlbertConfig.from_json_file(tmp_path / "hf" / "config.json")
    assert ours_config.hidden_act == "gelu_exact"
    if architecture == "AlbertForSequenceClassification":
        model = AlbertClassifier.from_release(tmp_path / "hf", num_labels=3, strict=True)
    else:
        model = AlbertSquadV1.from_release(tmp_path / "hf")
    assert model.load_report.unused == []
    inputs = random_inputs(ours_config, batch=2, length=9, seed=2, min_length=3)
    ours = model(inputs)
    with torch.no_grad():
        out = theirs(**torch_inputs(inputs))
    if architecture == "AlbertForQuestionAnswering":
        close(ours[names.START_LOGITS], out.start_logits)
    else:
        close(ours[names.LOGITS], out.logits)


@pytest.mark.parametrize("kind, texts", [
    ("spm", ["Hello World, this is ALBERT.", "Naïve café owners' rise"]),
    ("wordpiece", ["这部电影非常好看，我很喜欢。", "ALBERT模型在CLUE上"]),
])
def test_written_tokenizer_gives_our_ids(tmp_path, kind, texts):
    """Their tokenizer, from our directory, gives our ids on these texts. (Not on all:
    their AlbertTokenizer rewrites `` and '' into ", which the original keeps, and the
    tokenizers-backed one of transformers 5 splits "12.5%" as "▁12 . ▁ 5%" where
    SentencePiece gives "▁12 . 5%"; see the README.)"""
    from albert_tf.tokenization import FullTokenizer
    from tests.helpers.layouts import write_vocab

    if kind == "spm":
        files = {"spm_model_file": str(SPM_MODEL)}
        config = tiny_config()
    else:
        chars = "".join(texts)
        files = {"vocab_file": str(write_vocab(tmp_path / "vocab.txt", 60, chars))}
        config = tiny_config(vocab_size=60)
    huggingface.save_hf_checkpoint(AlbertEncoder(config, seed=0), tmp_path / "hf", **files)
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    ours = FullTokenizer(do_lower_case=True, **files)
    for text in texts:
        pieces = ours.tokenize(ours.preprocess(text))
        expected = [ours.vocab["[CLS]"], *ours.convert_tokens_to_ids(pieces),
                    ours.vocab["[SEP]"]]
        assert theirs(text)["input_ids"] == expected, text


def test_multi_label_both_ways_with_the_same_loss(tmp_path):
    """Ours written: transformers reads `problem_type` and computes the same logits and
    binary cross-entropy; theirs written (`problem_type="multi_label_classification"`):
    `convert.load` makes it our multi-label model, with the same logits."""
    from albert_tf import convert
    from albert_tf.tasks.multi_label import AlbertMultiLabelClassifier, multi_label_loss

    model = AlbertMultiLabelClassifier(tiny_config(vocab_size=60), 4, seed=2)
    huggingface.save_hf_checkpoint(model, tmp_path / "ours", labels=list("abcd"))
    theirs = load_theirs(tmp_path / "ours", "AlbertForSequenceClassification")
    assert theirs.config.problem_type == "multi_label_classification"
    inputs = random_inputs(model.config, batch=3, length=8, seed=3, min_length=3)
    labels = np.array([[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]], np.float32)
    ours = model(inputs)
    with torch.no_grad():
        out = theirs(**torch_inputs(inputs), labels=torch.tensor(labels))
    close(ours[names.LOGITS], out.logits)
    ours_loss = float(np.mean(multi_label_loss(ours[names.LOGITS], labels)))
    assert ours_loss == pytest.approx(float(out.loss), abs=TOLERANCE)

    theirs.save_pretrained(str(tmp_path / "theirs"), safe_serialization=True)
    loaded, _ = convert.load(tmp_path / "theirs")
    assert isinstance(loaded, AlbertMultiLabelClassifier) and loaded.num_labels == 4
    close(loaded(inputs)[names.LOGITS], out.logits)


@pytest.mark.parametrize("architecture", ["BertModel", "BertForSequenceClassification"])
def test_a_bert_transformers_wrote_reads_as_it_computes(tmp_path, architecture):
    """A BERT (the shape of MiniLM: erf GELU, one set of weights per layer) saved by
    transformers reads as the ALBERT of one group per layer and computes as BertModel
    (and its classifier) does; its WordPiece tokenizer gives our ids."""
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=70, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
        intermediate_size=24, max_position_embeddings=32, num_labels=3)
    theirs = getattr(transformers, architecture)(config).eval()
    with torch.no_grad():
        for parameter in theirs.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    theirs.save_pretrained(str(tmp_path / "bert"), safe_serialization=True)
    if architecture == "BertModel":
        model = AlbertEncoder.from_release(tmp_path / "bert", strict=True)
    else:
        model = AlbertClassifier.from_release(tmp_path / "bert", num_labels=3, strict=True)
    assert model.load_report.unused == []
    inputs = random_inputs(model.config, batch=3, length=12, seed=2, min_length=4,
                           second_segment_from=6)
    ours = model(inputs)
    with torch.no_grad():
        out = theirs(**torch_inputs(inputs))
    if architecture == "BertModel":
        close(ours["sequence_output"], out.last_hidden_state)
        close(ours["pooled_output"], out.pooler_output)
    else:
        close(ours[names.LOGITS], out.logits)
