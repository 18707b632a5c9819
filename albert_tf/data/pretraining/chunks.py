"""One chunk of the corpus -> its serialized, shuffled instances: the unit of work
that worker processes share."""

from __future__ import annotations

import dataclasses
import random
from typing import Sequence

import numpy as np

from albert_tf.data.pretraining.config import PretrainingDataConfig, TokenizerSpec
from albert_tf.data.pretraining.corpus import Chunk, Document
from albert_tf.data.pretraining.example_encoder import ExampleEncoder
from albert_tf.data.pretraining.instances import InstanceMaker


@dataclasses.dataclass
class ChunkResult:
    index: int
    records: list[bytes]
    num_lines: int
    num_documents: int
    skipped: list[tuple[str, str]]  # (file:line, why) of documents without tokens


def chunk_generators(random_seed: int, chunk_index: int
                     ) -> tuple[random.Random, np.random.Generator]:
    """The generators of one chunk: a function of the seed and the chunk's position
    in the corpus only, so that any number of workers gives the same output."""
    sequence = np.random.SeedSequence([random_seed % (1 << 64), chunk_index])
    py_seed = int.from_bytes(sequence.generate_state(4).tobytes(), "little")
    return random.Random(py_seed), np.random.default_rng(sequence)


class ChunkProcessor:
    """Tokenizes a chunk and turns it into serialized, shuffled instances."""

    def __init__(self, tokenizer_spec: TokenizerSpec, config: PretrainingDataConfig):
        self.config = config
        self.tokenizer = tokenizer_spec.build()
        self.maker = InstanceMaker(self.tokenizer, config)
        self.encoder = ExampleEncoder(config.max_seq_length, config.max_predictions_per_seq)
        sp = self.tokenizer.sp_model
        # Pieces such as "▁1990," that the original re-splits (see tokenization.py):
        # lines with one take the tokenizer's slow path, the rest are encoded directly.
        self._resplit_ids = set() if sp is None else {
            i for i in range(sp.GetPieceSize())
            if len(p := sp.IdToPiece(i)) > 1 and p[-1] == "," and p[-2].isdigit()}

    def preprocess(self, line: str) -> str:
        """The original's line preprocessing: `preprocess_text` with SentencePiece,
        `strip` with WordPiece."""
        if self.tokenizer.sp_model is None:
            return line.strip()
        return self.tokenizer.preprocess(line)

    def encode(self, text: str) -> list[int]:
        """`tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))`, faster."""
        tokenizer = self.tokenizer
        if tokenizer.sp_model is not None:
            ids = tokenizer.sp_model.EncodeAsIds(text)
            if self._resplit_ids.isdisjoint(ids):
                return ids
        return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))

    def tokenize(self, documents: Sequence[Document], skipped: list
                 ) -> list[list[np.ndarray]]:
        """Documents as lists of id arrays (one per line with tokens).

        As in the original, a line that preprocesses to nothing (e.g. only combining
        accents) ends a document too. A document none of whose lines has a token is
        left out and reported in `skipped`.
        """
        tokenized = []
        for document in documents:
            segments: list[np.ndarray] = []
            first = 0  # the first line of the current document
            for position, line in enumerate(document.lines):
                text = self.preprocess(line)
                if text:
                    ids = self.encode(text)
                    if ids:
                        segments.append(np.array(ids, np.int32))
                    if position < len(document.lines) - 1:
                        continue
                    position += 1  # the document ends after this line
                if segments:
                    tokenized.append(segments)
                elif position > first:
                    skipped.append((document.where(first), "document without tokens"))
                segments, first = [], position + 1
        return tokenized

    def __call__(self, chunk: Chunk) -> ChunkResult:
        rng, np_rng = chunk_generators(self.config.random_seed, chunk.index)
        skipped: list[tuple[str, str]] = []
        documents = self.tokenize(chunk.documents, skipped)
        serialized: list[bytes] = []
        for _ in range(self.config.dupe_factor if documents else 0):
            serialized.extend(self.encoder.encode(self.maker.make(documents, rng, np_rng)))
        rng.shuffle(serialized)
        num_lines = sum(len(d.lines) for d in chunk.documents)
        return ChunkResult(chunk.index, serialized, num_lines, len(documents), skipped)
