"""``python -m hybrid_memory_eval eval|peers ...``: the plugin's commands without the
``hybrid-memory`` command in front."""

from hybrid_memory_eval.cli import main

raise SystemExit(main())
