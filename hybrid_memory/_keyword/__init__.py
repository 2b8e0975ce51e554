"""The keyword index: derived BM25 and tag state over SQLite FTS5, rebuilt from the
Chroma collection whenever it drifts.

May import: ``_model``, ``_process``.
"""
