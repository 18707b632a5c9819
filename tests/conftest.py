"""Shared fixtures: the checkpoint and outputs of the ORIGINAL TF1 ALBERT code.

`fixtures/albert_tf1_tiny_grouped` (6 layers, 2 groups, 2 inner groups, E=16 != H=32,
vocab 211) was produced by google-research/albert's own modeling.py and run_pretraining.py
heads; see its albert_config.json and the project README.
"""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# GELU, LayerNorm and the optimizer updates as plain TensorFlow ops (the same math,
# `albert_tf.modeling.fused`; read when albert_tf is imported), as the commands run them
# (`tests/helpers/forked.py`): the tests call tiny models at ever new shapes, and each
# new shape compiled the XLA kernels again (0.2 s a call instead of 0.05 for the tiny
# classifier). The modules that test the kernels (KERNEL_MODULES) have the product's
# default, XLA kernels, in every thread (`xla_kernels_where_tested`).
os.environ.setdefault("ALBERT_TF_XLA_KERNELS", "0")
KERNEL_MODULES = ("test_fused.py", "test_optimizers.py", "test_training_loop.py",
                  "test_recompute.py")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

# XLA's persistent compilation cache, one directory per test run (the pytest-xdist
# workers and every process they start share it through the environment): a kernel
# compiled once (the XLA kernels of the modules that test them, the optimizer updates,
# --enable_xla steps) is read back by the next process that compiles the same HLO
# instead of compiled again (TensorFlow checks the whole HLO before it uses an entry,
# and writes an entry to a temporary file renamed into place). The same executables:
# only the compile time is saved. test_training_loop.py's two tests of the original's
# two steps: 37 s with an empty cache, 20 s with the entries they had written.
XLA_CACHE_VARIABLE = "ALBERT_TF_TEST_XLA_CACHE"
XLA_CACHE_FLAG = "--tf_xla_persistent_cache_directory"


def pytest_configure(config):
    """Makes the run's XLA cache directory (in the process that starts the run; the
    workers inherit it) and names it in TF_XLA_FLAGS, before TensorFlow is imported."""
    import tempfile

    if os.environ.get(XLA_CACHE_VARIABLE):
        return
    directory = tempfile.mkdtemp(prefix="albert_tf_xla_cache_")
    config._albert_tf_xla_cache = directory
    os.environ[XLA_CACHE_VARIABLE] = directory
    os.environ["TF_XLA_FLAGS"] = " ".join(
        [os.environ.get("TF_XLA_FLAGS", ""), f"{XLA_CACHE_FLAG}={directory}"]).strip()


def pytest_collection_finish(session):
    """What the worker imported and collected lives as long as it: out of the
    collector's reach (`gc.freeze`), so that no full collection during a test walks it
    again (as `tests/helpers/forked.py`'s server does before it forks)."""
    import gc

    gc.collect()
    gc.freeze()


def pytest_unconfigure(config):
    import shutil

    directory = getattr(config, "_albert_tf_xla_cache", None)
    if directory:
        shutil.rmtree(directory, ignore_errors=True)

# The modules that take longest (most run scripts end to end in subprocesses), longest
# first. They are collected first, so that with `make test`'s two workers
# (--dist=loadscope --no-loadscope-reorder: a module at a time, in collection order; by
# default pytest-xdist 3.5+ reorders modules by their number of tests) the long ones
# start early and the short ones fill in, instead of one worker running a long module
# alone at the end. Worker seconds measured 2026-12-02 (2 workers on a 2-core AVX2
# AMD EPYC: 3,132 s of tests in 27:00), roughly.
LONGEST_MODULES = (
    "test_text_models.py", "test_readme.py", "test_benchmarks.py",  # 259-370
    "test_resume.py", "test_long_text.py", "test_export.py",  # 158-206
    "test_training_loop.py", "test_keras_native.py", "test_readme_sections.py",  # 118-156
    "test_distillation.py", "test_multi_worker.py", "test_recompute.py",  # 96-111
    "test_run_classifier.py", "test_tflite.py", "test_optimizers.py",  # 74-95
    "test_dynamic_masking.py", "test_bench_serving.py", "test_reusable_export.py",  # 56-62
    "test_bench_precision_agreement.py", "test_run_squad.py", "test_modeling.py",  # 38-45
    "test_demo.py", "test_multi_label.py", "test_tasks.py", "test_tflite_text.py",  # 28-38
    "test_run_pretraining.py", "test_task_registration.py",  # 26-28
    "test_dynamic_masking_masker.py", "test_run_ner.py", "test_scripts.py",  # 18-23
    "test_keras_hub_preset.py", "test_fused.py", "test_dynamic_masking_pairs.py",
    "test_huggingface.py", "test_task_module.py", "test_text.py")  # 11-17


def pytest_collection_modifyitems(items):
    rank = {name: index for index, name in enumerate(LONGEST_MODULES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable


@pytest.fixture(autouse=True, scope="module")
def xla_kernels_where_tested(request):
    """XLA kernels by default while a module of KERNEL_MODULES runs (the default of the
    switch, not a thread's setting: MirroredStrategy's replica threads read it too)."""
    if request.path.name not in KERNEL_MODULES:
        yield
        return
    from albert_tf.modeling import fused

    previous, fused._XLA.default = fused._XLA.default, True
    try:
        yield
    finally:
        fused._XLA.default = previous


FIXTURE_DIR = pathlib.Path(__file__).parent / "fixtures" / "albert_tf1_tiny_grouped"
FIXTURE_CHECKPOINT = str(FIXTURE_DIR / "model.ckpt")


@pytest.fixture(scope="session")
def spm_tokenizer():
    """The Python tokenizer of the English SentencePiece fixture (lower-cased)."""
    from albert_tf.tokenization import FullTokenizer
    from tests.helpers.paths import SPM_MODEL

    return FullTokenizer(spm_model_file=str(SPM_MODEL), do_lower_case=True)


@pytest.fixture(scope="session")
def spm_graph():
    """The in-graph tokenizer of the same model."""
    from albert_tf.text import AlbertTextTokenizer
    from tests.helpers.paths import SPM_MODEL

    return AlbertTextTokenizer(spm_model_file=str(SPM_MODEL), do_lower_case=True)


@pytest.fixture(scope="session")
def tokenizer(spm_tokenizer):
    """`spm_tokenizer` under the name the data tests use (a module may define its own)."""
    return spm_tokenizer


@pytest.fixture(scope="session")
def text_tokenizer(spm_graph):
    """`spm_graph` under the name the data tests use."""
    return spm_graph


@pytest.fixture(scope="session")
def tiny_config():
    """The config of the original's fixture checkpoint (6 layers, 2 groups, vocab 211);
    a test's own small models come from `tests.helpers.tiny.tiny_config(...)`."""
    from albert_tf import AlbertConfig

    return AlbertConfig.from_json_file(FIXTURE_DIR / "albert_config.json")


@pytest.fixture(scope="session")
def fixture_inputs():
    return dict(np.load(FIXTURE_DIR / "inputs.npz"))


@pytest.fixture(scope="session")
def fixture_outputs():
    return dict(np.load(FIXTURE_DIR / "outputs.npz"))


def model_inputs(features, with_positions=True):
    """The fixture's record features as model inputs (`albert_tf.names`), the masked
    positions only when `with_positions`."""
    from albert_tf import names

    inputs = {names.RECORD_TO_MODEL[n]: features[n] for n in names.RECORD_SEQUENCES}
    if with_positions:
        inputs[names.MASKED_LM_POSITIONS] = features[names.MASKED_LM_POSITIONS]
    return inputs
