"""Writes: the writer that validates, embeds, writes to Chroma and then to the keyword
index, and says what each write did.

May import: ``_model``, ``_process``, ``_embedding``, ``_keyword``, ``_store``.
"""
