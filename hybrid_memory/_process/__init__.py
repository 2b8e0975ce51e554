"""Process hygiene: clean exits, the C heap after bulk writes, file descriptors, and
room on disk before a write.

May import: ``_model``.
"""
