"""The derived keyword index (SQLite FTS5 with in-memory mirrors): everything in it is
rebuilt from the Chroma collection when needed. :class:`index.KeywordIndex` is its front."""
