"""``python -m hybrid_memory_mcp``: the server, started by an interpreter's absolute path.

What desktop clients should launch: they start servers without the shell's ``PATH``, so
a bare ``hybrid-memory`` is not found, while the absolute path of the virtual
environment's ``python`` always is (see the README).
"""

from hybrid_memory_mcp.cli import main

raise SystemExit(main())
