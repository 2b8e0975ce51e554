"""``HybridMemory``, the public store, and the parts it assembles for a store or a
namespace view.

May import: every sub-package above it: ``_model``, ``_process``, ``_embedding``,
``_keyword``, ``_shared_path``, ``_store``, ``_search``, ``_write``.
"""
