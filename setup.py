"""Set-up of albert_tf (`pip install .`; see README.md)."""

from setuptools import find_packages, setup

setup(
    name="albert_tf",
    version="0.1.0",
    description="ALBERT for TensorFlow 2 / Keras 3: Google's checkpoints, fine-tuning, "
                "pretraining and serving",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["albert_tf", "albert_tf.*"]),
    # The official albert_config.json files (configs/ is a link to albert_tf/configs) and
    # the stored character classes of the in-graph tokenizer
    # (albert_tf.text.unicode_classes). The demo (demo_app/) is not installed.
    package_data={"albert_tf": ["configs/*.json"],
                  "albert_tf.text": ["character_classes.json"]},
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "tensorflow-text>=2.21,<2.22",
        "keras>=3.10,<4",
        # 0.2.2: SentencePieceNormalizer(norm_map=...), which compiles the character maps
        # of the LiteRT files' tokenizers (albert_tf.export.tflite_text)
        "sentencepiece>=0.2.2",
        "absl-py>=2.0",
        "tensorboard>=2.20",
        "tensorflow-serving-api>=2.21,<2.22",
        "numpy>=1.26",
        "safetensors>=0.4",  # Hugging Face weights, through its NumPy API
        "seqeval>=1.2.2",  # NER entities and metrics (conlleval's definitions)
        "scikit-learn>=1.3",  # multi-label metrics (seqeval needs it too)
    ],
    # ai-edge-litert: LiteRT's interpreter, which runs the --export_tflite files in tests;
    # tensorflow-hub and tf-keras (hub.KerasLayer is a tf-keras layer): the TF Hub way of
    # using an encoder export (tests/test_reusable_export.py, the README); hypothesis:
    # the readers fuzzed with mutations of real files (tests/test_messy_files.py);
    # keras-hub (pure Python): its AlbertBackbone / AlbertTextClassifier load the presets
    # albert_tf writes and write those it reads (tests/test_keras_hub_preset.py); ruff:
    # `make lint`, which CI runs before the tests (its rules in pyproject.toml; one minor
    # version, so that a new rule does not fail a run by itself).
    extras_require={"test": ["pytest>=8", "pytest-xdist>=3.8", "ai-edge-litert>=2.0",
                             "tensorflow-hub>=0.16", "tf-keras>=2.21,<2.22",
                             "hypothesis>=6.100", "keras-hub>=0.32,<0.33",
                             "ruff>=0.17,<0.18"]},
    entry_points={
        # Each the same absl program as the script of the same name in the repository.
        "console_scripts": [
            "albert-run-classifier=albert_tf.scripts.run_classifier:run",
            "albert-run-ner=albert_tf.scripts.run_ner:run",
            "albert-run-squad=albert_tf.scripts.run_squad:run",
            "albert-run-pretraining=albert_tf.scripts.run_pretraining:run",
            "albert-create-pretraining-data=albert_tf.scripts.create_pretraining_data:run",
            "albert-export=albert_tf.scripts.export_savedmodel:run",
            "albert-param-count=albert_tf.param_count:run",
        ],
    },
)
