"""The Chroma side of a store: the client, the collection and its namespaces' partition,
the namespace registry, and the sync that keeps the keyword index in step with it.

May import: ``_model``, ``_process``, ``_embedding``, ``_keyword``, ``_shared_path``.
"""
