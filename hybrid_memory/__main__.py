"""``python -m hybrid_memory ...``: the ``hybrid-memory`` command without its script."""

from hybrid_memory.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
