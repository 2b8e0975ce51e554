"""``HybridMemory``, the public store: its write, read and search halves, how it opens and
makes views, and the parts it assembles for a store or a namespace view.

May import: every sub-package above it: ``_model``, ``_process``, ``_embedding``,
``_keyword``, ``_shared_path``, ``_store``, ``_search``.
"""
