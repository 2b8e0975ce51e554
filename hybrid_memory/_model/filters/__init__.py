"""Metadata filters: one validated form, three ways to apply it.

Users write filters in Chroma's ``where`` syntax over their metadata::

    {"user": "alice"}                                   # implicit $eq
    {"$and": [{"user": "alice"}, {"session": {"$gte": 3}}]}
    {"tags": {"$contains": "ui"}}                       # reserved field: the memory's tags
    {"created_at": {"$gte": datetime(2024, 1, 1, tzinfo=UTC)}}   # reserved: times

A filter is validated once (:mod:`.grammar`), then applied by each search leg *before*
its top-k cut: as SQL over the keyword index for the keyword and tag legs (:mod:`.sql`),
as a Chroma ``where`` for the vector leg (:mod:`.chroma`), or in Python
(:mod:`.matching`). The three agree, including Chroma's rules that ``$ne``, ``$nin`` and
``$not_contains`` also match memories that lack the field, and that numbers never equal
booleans.
"""

from hybrid_memory._model.filters.chroma import chroma_part, to_chroma
from hybrid_memory._model.filters.grammar import (
    ARRAY_OPS,
    COMPARISON_OPS,
    EQUALITY_OPS,
    LIST_OPS,
    LOGICAL_OPS,
    MAX_FILTER_DEPTH,
    ORDER_OPS,
    RESERVED_FIELDS,
    TAGS_FIELD,
    TIME_FIELDS,
    Condition,
    Logical,
    Node,
    Scalar,
    fields_of,
    kind_of,
    parse_filter,
    tests_arrays,
)
from hybrid_memory._model.filters.matching import matches
from hybrid_memory._model.filters.sql import metadata_rows, to_sql
