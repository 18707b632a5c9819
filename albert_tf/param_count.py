"""Prints the parameter counts of ALBERT configs, by part.

  python -m albert_tf.param_count                      # every shipped config
  python -m albert_tf.param_count albert_base_v2 path/to/albert_config.json

Counts come from the variables the original code creates for the config (no model is
built, so even xxlarge is instant). `encoder` is everything under `bert/` (embeddings to
pooler); `total` adds the pretraining heads, as in a released checkpoint.
"""

from __future__ import annotations

import sys

from absl import app

from albert_tf.config import AlbertConfig, ConfigError, available_configs
from albert_tf.modeling.tf1_variables import parameter_counts

# Table 1 of Lan et al., "ALBERT: A Lite BERT for Self-supervised Learning of Language
# Representations" (ICLR 2020), arXiv:1909.11942.
PAPER_PARAMETERS = {"base": "12M", "large": "18M", "xlarge": "60M", "xxlarge": "235M"}

COLUMNS = ("embeddings", "embedding_hidden_mapping_in", "transformer", "pooler",
           "encoder", "masked_lm_head", "sentence_order_head", "total")
HEADERS = ("embeddings", "E->H map", "transformer", "pooler", "encoder", "MLM head",
           "SOP head", "total")


def _paper_figure(name: str) -> str:
    parts = name.split("_")
    if len(parts) == 3 and parts[0] == "albert" and parts[2] in ("v1", "v2"):
        return PAPER_PARAMETERS.get(parts[1], "")
    return ""


def format_table(names: list[str]) -> str:
    rows = [("config",) + HEADERS + ("encoder (M)", "total (M)", "paper")]
    for name in names:
        counts = parameter_counts(AlbertConfig.from_name_or_file(name))
        rows.append((name,) + tuple(f"{counts[c]:,}" for c in COLUMNS) + (
            f"{counts['encoder'] / 1e6:.1f}M", f"{counts['total'] / 1e6:.1f}M",
            _paper_figure(name)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.rjust(w) if i else cell.ljust(w)
                       for i, (cell, w) in enumerate(zip(row, widths)))
             for row in rows]
    lines.append(
        "paper: Table 1 of the ALBERT paper (arXiv:1909.11942). base and large agree at "
        "its rounding; its xlarge (60M) and xxlarge (235M) figures are above the counts "
        "of the released configs (59.0M, 223.2M), with no public explanation known. The "
        "encoder counts equal those keras-hub lists for its presets (222,595,584 for "
        "xxlarge).")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    names = argv[1:] or available_configs()
    try:
        print(format_table(names))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


def run() -> None:
    app.run(main)


if __name__ == "__main__":
    run()
