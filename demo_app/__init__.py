"""The end-to-end demo behind `make demo` (`python demo.py`): an application of albert_tf,
not part of it (the library never imports it, and it is not installed with it).

`steps` runs the demo (its flags, the steps, the summary, the client it writes), `data`
generates its corpus and review task, `work` holds its sizes, files and resumable state,
and `text/` the public-domain English its SentencePiece model is trained on.
"""
