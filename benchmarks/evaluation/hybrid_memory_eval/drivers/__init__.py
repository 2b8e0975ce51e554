"""Driver scripts of the foreign peers (:mod:`hybrid_memory_eval.foreign`).

Each ``*_driver.py`` runs as a script in its peer's own virtual environment, imports
only the standard library, ``_protocol.py`` beside it and its peer library, and never
``hybrid_memory``. Nothing imports this package; it exists so the scripts ship with
the harness.
"""
