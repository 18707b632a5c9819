"""What the pretraining-data tests share: small settings and the SentencePiece fixture
as a tokenizer spec."""

from albert_tf.data import pretraining as pt
from tests.helpers.paths import SPM_MODEL


def config(**overrides) -> pt.PretrainingDataConfig:
    """Small records (64 tokens, 10 predictions, 2 duplicates) unless overridden."""
    settings = dict(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2)
    settings.update(overrides)
    return pt.PretrainingDataConfig(**settings)


def spm_spec_of() -> pt.TokenizerSpec:
    return pt.TokenizerSpec(spm_model_file=str(SPM_MODEL))
