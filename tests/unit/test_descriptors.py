"""The descriptor budget of namespaces and the error that names a limit hit."""

from __future__ import annotations

import errno
import resource

import pytest

from hybrid_memory._process.descriptors import (
    NAMESPACES_OPEN,
    descriptor_exhaustion,
    namespaces_kept_open,
)


def with_limit(monkeypatch: pytest.MonkeyPatch, soft: int) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    monkeypatch.setattr(resource, "getrlimit", lambda which: (soft, hard))


@pytest.mark.parametrize(("soft", "kept"), [(64, 5), (128, 10), (256, 21), (1024, 85)])
def test_a_quarter_of_the_limit_three_descriptors_each(
    monkeypatch: pytest.MonkeyPatch, soft: int, kept: int
) -> None:
    with_limit(monkeypatch, soft)
    assert namespaces_kept_open() == kept


def test_never_fewer_than_four_nor_more_than_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    with_limit(monkeypatch, 16)
    assert namespaces_kept_open() == 4
    with_limit(monkeypatch, 1_000_000)
    assert namespaces_kept_open() == NAMESPACES_OPEN


def test_emfile_is_named_with_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    with_limit(monkeypatch, 256)
    said = descriptor_exhaustion(OSError(errno.EMFILE, "Too many open files"))
    assert said is not None
    assert "too many open files" in said and "`ulimit -n` (now 256)" in said
    assert "open_namespaces" in said


def test_another_error_with_descriptors_to_spare_is_not_blamed_on_them() -> None:
    assert descriptor_exhaustion(OSError(errno.EACCES, "Permission denied")) is None
