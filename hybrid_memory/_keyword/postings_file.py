"""The keyword postings kept on disk beside the index file, and mapped back into memory.

A reopened store ranks from its first search with the postings an earlier process wrote
(:class:`MappedPostings`): the file is mapped, not read, so opening it costs what its
header and term table cost, and its pages come in as searches touch them (and are shared
by every process on the path). What was written to the index after the file was made is
brought in by the owner of the postings (:mod:`hybrid_memory._keyword.postings`).

The file is derived from the index file (which is derived from the collection): a file
that does not belong to the index (another ``epoch``), or that is short or inconsistent,
is ignored and written again. A new file is written beside the old one and renamed over
it, never changed in place, so a process still mapping the old one keeps reading it
whole.

Layout, little-endian: a header (``MAGIC``, then the JSON length as 8 bytes, then the
JSON: the epoch, the highest row, the sections' offsets and sizes), then each section
aligned to 64 bytes: the terms (UTF-8, sorted, one after the other, with their byte
offsets), each term's first posting, the postings' rows (int32), term frequencies
(float32) and row lengths (uint16, capped), and per row its length in tokens (float32),
whether it was live (uint8) and its memory id (32 bytes), with the ids sorted for lookups.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import mmap
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, BinaryIO, NamedTuple

import numpy as np
import numpy.typing as npt

MAGIC = b"hybrid-memory postings 1\n"
# Each posting keeps its row's length in tokens (read beside its row id and tf by the
# compiled loops); a length of LENGTH_CAP tokens or more is kept as LENGTH_CAP, and the
# row's own length is read instead.
LENGTH_CAP = 65_535
_ALIGN = 64
ROW = np.dtype("<i4")
TF = np.dtype("<f4")
CAPPED_LENGTH = np.dtype("<u2")
LENGTH = np.dtype("<f4")
ID = np.dtype("S32")
OFFSET = np.dtype("<i8")


class TermLists(NamedTuple):
    """One term's postings: rows ascending, their term frequencies and row lengths."""

    rows: npt.NDArray[np.int32]
    tfs: npt.NDArray[np.float32]
    lengths: npt.NDArray[np.uint16]


class PerRow(NamedTuple):
    """Per row id up to the highest: tokens, whether live, memory id (b"": not named)."""

    length: npt.NDArray[np.float32]
    live: npt.NDArray[np.bool_]
    ids: npt.NDArray[np.bytes_]


class KeptCarriers(NamedTuple):
    """Every tag's carriers (:class:`~hybrid_memory._keyword.tag_carriers.TagCarriers`):
    tags sorted, each with its rows ascending and their positions oldest first, and each
    row's creation time."""

    tags: list[str]
    rows: list[npt.NDArray[np.int32]]
    oldest: list[npt.NDArray[np.int32]]
    times: npt.NDArray[np.float64]


def path_for(index_path: str) -> str:
    """Where the postings of the index file ``index_path`` are kept."""
    return f"{index_path}-postings"


def write(
    path: str,
    epoch: str,
    terms: Callable[[], Iterable[tuple[str, TermLists]]],
    rows: PerRow,
    other_ids: Mapping[int, str],
    carriers: KeptCarriers | None = None,
) -> None:
    """Write postings and the per-row arrays (and the tags' ``carriers``, when given) to
    ``path``, through a file beside it renamed over it. ``terms()`` gives the terms
    sorted, each with its live postings; it is asked twice (to size the sections, then to
    fill them), so that no more than one term's postings are copied at a time."""
    staged = f"{path}.new-{os.getpid()}"
    try:
        with open(staged, "wb") as out:
            _write_to(out, epoch, terms, rows, other_ids, carriers)
            out.flush()
            os.fsync(out.fileno())
        os.replace(staged, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)


def _write_to(
    out: BinaryIO,
    epoch: str,
    terms: Callable[[], Iterable[tuple[str, TermLists]]],
    rows: PerRow,
    other_ids: Mapping[int, str],
    carriers: KeptCarriers | None,
) -> None:
    names: list[bytes] = []
    starts = [0]
    for term, lists in terms():
        if len(lists.rows):
            names.append(term.encode("utf-8", "surrogatepass"))
            starts.append(starts[-1] + len(lists.rows))
    postings = starts[-1]
    term_bytes = b"".join(names)
    term_offsets = np.zeros(len(names) + 1, dtype=OFFSET)
    np.cumsum([len(n) for n in names], out=term_offsets[1:])
    order = np.argsort(rows.ids, kind="stable")
    named = order[rows.live[order] & (rows.ids[order] != b"")]
    sizes = {
        "term_bytes": len(term_bytes),
        "term_offsets": term_offsets.nbytes,
        "starts": 8 * len(starts),
        "rows": postings * ROW.itemsize,
        "tfs": postings * TF.itemsize,
        "lengths": postings * CAPPED_LENGTH.itemsize,
        "length": len(rows.length) * LENGTH.itemsize,
        "live": len(rows.live),
        "ids": len(rows.ids) * ID.itemsize,
        "sorted_ids": len(named) * ID.itemsize,
        "sorted_rows": len(named) * ROW.itemsize,
    }
    tag_parts: dict[str, bytes] = {}
    if carriers is not None:
        tag_names = [t.encode("utf-8", "surrogatepass") for t in carriers.tags]
        tag_offsets = np.zeros(len(tag_names) + 1, dtype=OFFSET)
        np.cumsum([len(n) for n in tag_names], out=tag_offsets[1:])
        tag_starts = np.zeros(len(tag_names) + 1, dtype=OFFSET)
        np.cumsum([len(r) for r in carriers.rows], out=tag_starts[1:])
        tag_parts = {
            "tag_bytes": b"".join(tag_names),
            "tag_offsets": tag_offsets.tobytes(),
            "tag_starts": tag_starts.tobytes(),
            "tag_rows": b"".join(r.astype(ROW).tobytes() for r in carriers.rows),
            "tag_oldest": b"".join(o.astype(ROW).tobytes() for o in carriers.oldest),
            "times": carriers.times.astype("<f8").tobytes(),
        }
        sizes.update({name: len(data) for name, data in tag_parts.items()})
    header_room = 4096 + 64 * len(other_ids)
    sections: dict[str, list[int]] = {}
    at = header_room
    for name, size in sizes.items():
        at = _aligned(at)
        sections[name] = [at, size]
        at += size
    fd = out.fileno()
    os.ftruncate(fd, at)

    def put(name: str, data: bytes, offset: int = 0) -> None:
        os.pwrite(fd, data, sections[name][0] + offset)

    put("term_bytes", term_bytes)
    put("term_offsets", term_offsets.tobytes())
    put("starts", np.asarray(starts, dtype=OFFSET).tobytes())
    done = 0
    for _, lists in terms():
        count = len(lists.rows)
        if not count:
            continue
        put("rows", lists.rows.astype(ROW, copy=False).tobytes(), done * ROW.itemsize)
        put("tfs", lists.tfs.astype(TF, copy=False).tobytes(), done * TF.itemsize)
        put(
            "lengths",
            lists.lengths.astype(CAPPED_LENGTH, copy=False).tobytes(),
            done * CAPPED_LENGTH.itemsize,
        )
        done += count
    if done != postings:
        raise ValueError("the terms changed while their postings were written")
    put("length", rows.length.astype(LENGTH, copy=False).tobytes())
    put("live", rows.live.astype(np.uint8).tobytes())
    put("ids", rows.ids.astype(ID, copy=False).tobytes())
    put("sorted_ids", rows.ids[named].astype(ID, copy=False).tobytes())
    put("sorted_rows", named.astype(ROW).tobytes())
    for name, data in tag_parts.items():
        put(name, data)
    header = json.dumps(
        {
            "epoch": epoch,
            "terms": len(names),
            "rows": len(rows.length),
            "postings": postings,
            "tags": -1 if carriers is None else len(carriers.tags),
            "other_ids": {str(r): i for r, i in other_ids.items()},
            "sections": sections,
            "size": at,
        }
    ).encode()
    if len(MAGIC) + 8 + len(header) > header_room:
        raise ValueError("the postings' header does not fit its room")
    os.pwrite(fd, MAGIC + len(header).to_bytes(8, "little") + header, 0)


def _aligned(at: int) -> int:
    return (at + _ALIGN - 1) // _ALIGN * _ALIGN


class PostingsFileError(Exception):
    """The file is not postings of this index, or not whole: it is written again."""


class MappedPostings:
    """Postings read from a file written by :func:`write`, mapped: term lookups and
    lists are views of the file's pages."""

    def __init__(self, path: str, epoch: str) -> None:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < len(MAGIC) + 8:
                raise PostingsFileError(f"{path} is too short")
            # Copy on write: the views are writable (numba's loops take no read-only
            # arrays) while every page stays the file's, shared, as nothing writes to it.
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        try:
            self._read_header(path, epoch, size)
        except BaseException:
            self._map.close()
            raise

    def _read_header(self, path: str, epoch: str, size: int) -> None:
        if self._map[: len(MAGIC)] != MAGIC:
            raise PostingsFileError(f"{path} is not a postings file of this version")
        length = int.from_bytes(self._map[len(MAGIC) : len(MAGIC) + 8], "little")
        start = len(MAGIC) + 8
        try:
            header = json.loads(self._map[start : start + length])
            sections = {k: (int(a), int(n)) for k, (a, n) in header["sections"].items()}
        except (ValueError, KeyError, TypeError) as exc:
            raise PostingsFileError(f"{path} has no readable header: {exc}") from exc
        if header.get("epoch") != epoch:
            raise PostingsFileError(f"{path} belongs to another state of the index")
        if header.get("size") != size or any(a + n > size for a, n in sections.values()):
            raise PostingsFileError(f"{path} is not whole ({size} bytes)")
        terms, rows, postings = int(header["terms"]), int(header["rows"]), int(header["postings"])
        self._term_bytes = memoryview(self._map)[slice(*_span(sections["term_bytes"]))]
        self._term_offsets = self._array(sections, "term_offsets", OFFSET, terms + 1)
        self._starts = self._array(sections, "starts", OFFSET, terms + 1)
        self._rows = self._array(sections, "rows", ROW, postings)
        self._tfs = self._array(sections, "tfs", TF, postings)
        self._lengths = self._array(sections, "lengths", CAPPED_LENGTH, postings)
        self.per_row = PerRow(
            self._array(sections, "length", LENGTH, rows),
            self._array(sections, "live", np.dtype(np.uint8), rows).view(np.bool_),
            self._array(sections, "ids", ID, rows),
        )
        named = sections["sorted_rows"][1] // ROW.itemsize
        self.sorted_ids = self._array(sections, "sorted_ids", ID, named)
        self.sorted_rows = self._array(sections, "sorted_rows", ROW, named)
        self.other_ids = {int(r): str(i) for r, i in header["other_ids"].items()}
        self._sections = sections
        self._tags = int(header.get("tags", -1))
        self.terms = terms
        self.high = rows - 1
        # Each term's list is checked (rows ascending, within the rows) the first time it
        # is used, not all at once: opening reads no posting.
        self._checked: set[int] = set()
        ends, bounds = self._term_offsets, self._starts
        if terms and (
            int(ends[-1]) != len(self._term_bytes)
            or int(bounds[-1]) != postings
            or bool((np.diff(bounds) < 0).any())
            or bool((np.diff(ends) <= 0).any())
        ):
            raise PostingsFileError(f"{path} has inconsistent term tables")

    def _array(
        self, sections: Mapping[str, tuple[int, int]], name: str, dtype: np.dtype[Any], count: int
    ) -> np.ndarray:
        at, size = sections[name]
        if size != count * dtype.itemsize:
            raise PostingsFileError(f"section {name} holds {size} bytes, not {count} values")
        return np.frombuffer(self._map, dtype=dtype, count=count, offset=at)

    def carriers(self) -> KeptCarriers | None:
        """The tags' carriers kept with the postings (views of the file), None when the
        file has none or they are inconsistent."""
        if self._tags < 0:
            return None
        sections, count = self._sections, self._tags
        try:
            names = memoryview(self._map)[slice(*_span(sections["tag_bytes"]))]
            offsets = self._array(sections, "tag_offsets", OFFSET, count + 1)
            starts = self._array(sections, "tag_starts", OFFSET, count + 1)
            total = int(starts[-1])
            rows = self._array(sections, "tag_rows", ROW, total)
            oldest = self._array(sections, "tag_oldest", ROW, total)
            times = self._array(sections, "times", np.dtype("<f8"), sections["times"][1] // 8)
        except (KeyError, PostingsFileError):
            return None
        tags = [
            bytes(names[int(offsets[t]) : int(offsets[t + 1])]).decode("utf-8", "surrogatepass")
            for t in range(count)
        ]
        bounds = starts.tolist()
        return KeptCarriers(
            tags,
            [rows[a:b] for a, b in itertools.pairwise(bounds)],
            [oldest[a:b] for a, b in itertools.pairwise(bounds)],
            times,
        )

    def term_index(self, term: str) -> int | None:
        """The position of ``term`` in the sorted terms, None when absent."""
        wanted = term.encode("utf-8", "surrogatepass")
        offsets, names = self._term_offsets, self._term_bytes
        low, high = 0, self.terms
        while low < high:
            middle = (low + high) // 2
            name = bytes(names[int(offsets[middle]) : int(offsets[middle + 1])])
            if name < wanted:
                low = middle + 1
            elif name > wanted:
                high = middle
            else:
                return middle
        return None

    def lists(self, term: str) -> TermLists | None:
        """``term``'s postings (views of the file), None when no row holds it."""
        at = self.term_index(term)
        if at is None:
            return None
        a, b = int(self._starts[at]), int(self._starts[at + 1])
        found = TermLists(self._rows[a:b], self._tfs[a:b], self._lengths[a:b])
        if at not in self._checked:
            rows = found.rows
            if len(rows) and (
                int(rows[0]) < 0 or int(rows[-1]) > self.high or bool((rows[1:] <= rows[:-1]).any())
            ):
                raise PostingsFileError(f"the postings of {term!r} are out of order")
            self._checked.add(at)
        return found

    def each_term(self) -> Iterator[tuple[str, TermLists]]:
        """Every term in sorted order, with its postings."""
        offsets, names = self._term_offsets, self._term_bytes
        for at in range(self.terms):
            name = bytes(names[int(offsets[at]) : int(offsets[at + 1])])
            term = name.decode("utf-8", "surrogatepass")
            lists = self.lists(term)
            assert lists is not None
            yield term, lists

    def row_of(self, names: npt.NDArray[np.bytes_]) -> npt.NDArray[np.int64]:
        """For each of ``names`` (memory ids as 32 bytes), its row, or -1."""
        if not len(self.sorted_ids):
            return np.full(len(names), -1, dtype=np.int64)
        at = np.searchsorted(self.sorted_ids, names)
        at = np.minimum(at, len(self.sorted_ids) - 1)
        found = self.sorted_ids[at] == names
        return np.where(found, self.sorted_rows[at].astype(np.int64), -1)

    def close(self) -> None:
        """Unmap (views taken from it must be gone first)."""
        with contextlib.suppress(BufferError):
            self._term_bytes.release()
            self._map.close()


def _span(section: tuple[int, int]) -> tuple[int, int]:
    at, size = section
    return at, at + size
