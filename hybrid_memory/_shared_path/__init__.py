"""One owner per embedded path: the election (a file lock), the owner's loopback server,
the proxy other processes on the path use, and the owner's count of writes.

May import: ``_model``, ``_process``.
"""
