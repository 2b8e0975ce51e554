"""Speed at scale: hybrid-memory against Chroma and the peers' hybrid retrievers (issue 5).

The entry point of the benchmark; the code lives in the package ``benchmarks/_scale/``,
whose docstring says what is measured and how. Usage::

    python benchmarks/scale.py --n 10000 100000            # hybrid-memory + Chroma's own add
    python benchmarks/scale.py --n 10000 100000 --peers    # + LangChain and LlamaIndex
    python benchmarks/scale.py --n 100000 --model          # + the default embedding model
    python benchmarks/scale.py --n 2000 --queries 50       # the CI size (no timing checks)
    python benchmarks/scale.py --n 10000 --json            # one JSON document on stdout
    python benchmarks/scale.py --namespaces 10000 --ulimit 256  # many tenants (_scale.tenants)

Each system is measured in a fresh process running this script again with ``--worker``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:  # run as a script, this folder is already first; not so with -m
    sys.path.insert(0, HERE)

from _scale.cli import main  # noqa: E402

if __name__ == "__main__":
    if "--namespaces" in sys.argv:  # many tenants on one store: its own module
        from _scale.tenants import main as tenants_main

        sys.exit(tenants_main())
    sys.exit(main())
