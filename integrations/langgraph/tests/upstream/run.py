"""Run LangGraph's own store tests against HybridMemoryStore.

Downloads the pinned source archives of ``langgraph-checkpoint`` and
``langgraph-checkpoint-sqlite`` from the package index into a cache directory outside
the repository (``$HYBRID_MEMORY_UPSTREAM_CACHE``, default
``~/.cache/hybrid-memory/langgraph-upstream``), unpacks them, and runs their store test
files, unmodified, with the ``langgraph_upstream_shim`` pytest plugin beside this file,
which swaps only the store factories for ours.

    python integrations/langgraph/tests/upstream/run.py            # the CI step
    python integrations/langgraph/tests/upstream/run.py -k batch   # extra pytest args

``--check-in-memory`` runs only the tests listed as expected failures, against
LangGraph's own stores (InMemoryStore for the InMemoryStore tests), to show that they
fail there too.

The pins match the ``langgraph-checkpoint`` the environment has (its tests test its
``BaseStore``); ``langgraph-checkpoint-sqlite`` at that pin must be installed too (the
SQLite tests import its module before the shim swaps its store): both are in the dev
extra.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: distribution -> (version, the test files run from its archive)
PINS: dict[str, tuple[str, tuple[str, ...]]] = {
    "langgraph-checkpoint": ("4.3.2", ("tests/test_store.py",)),
    "langgraph-checkpoint-sqlite": (
        "3.1.2",
        ("tests/test_store.py", "tests/test_async_store.py", "tests/test_ttl.py"),
    ),
}


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "hybrid-memory" / "langgraph-upstream"
    return Path(os.environ.get("HYBRID_MEMORY_UPSTREAM_CACHE", default))


def fetched(distribution: str, pinned: str, cache: Path) -> Path:
    """The unpacked source archive of ``distribution==pinned``, downloaded once."""
    stem = f"{distribution.replace('-', '_')}-{pinned}"
    root = cache / stem
    if (root / "tests").is_dir():
        return root
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
            "--no-binary", ":all:", "--dest", str(cache), f"{distribution}=={pinned}",
        ],
        check=True,
    )  # fmt: skip
    archive = cache / f"{stem}.tar.gz"
    with tarfile.open(archive) as tar:
        tar.extractall(cache, filter="data")
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check-in-memory", action="store_true")
    args, pytest_args = parser.parse_known_args(argv)
    installed = version("langgraph-checkpoint")
    if installed != PINS["langgraph-checkpoint"][0]:
        print(
            f"langgraph-checkpoint {installed} is installed, the tests are pinned at "
            f"{PINS['langgraph-checkpoint'][0]}: update PINS in {__file__}"
        )
        return 2
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    if args.check_in_memory:
        env["HYBRID_MEMORY_UPSTREAM_CHECK_IN_MEMORY"] = "1"
    status = 0
    for distribution, (pinned, files) in PINS.items():
        root = fetched(distribution, pinned, cache_dir())
        command = [
            sys.executable, "-m", "pytest", "-p", "langgraph_upstream_shim",
            "--rootdir", str(root), "-c", str(root / "pyproject.toml"),
            "-o", "addopts=", "-p", "no:cacheprovider", "-q", "--durations=3",
            *files, *pytest_args,
        ]  # fmt: skip
        env["HYBRID_MEMORY_UPSTREAM_DISTRIBUTION"] = distribution
        print(f"=== {distribution}=={pinned}: {' '.join(files)}", flush=True)
        code = subprocess.run(command, cwd=root, env=env).returncode
        if code not in (0, 5):  # 5: nothing selected (-k)
            status = code
    return status


if __name__ == "__main__":
    sys.exit(main())
