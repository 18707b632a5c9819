"""Pretrains ALBERT (masked LM + sentence order) from records or raw text.

The program is `albert_tf/scripts/run_pretraining.py`, installed as `albert-run-pretraining`;
`python run_pretraining.py --help` lists its flags.
"""

from albert_tf.scripts.run_pretraining import run

if __name__ == "__main__":
    run()
