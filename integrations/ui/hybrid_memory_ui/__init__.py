"""hybrid-memory-ui: a web page over a hybrid-memory store, for people.

``hybrid-memory ui --path DIR`` serves it (see :mod:`hybrid_memory_ui.cli`);
:func:`create_app` builds the Starlette application over an open store.
"""

from __future__ import annotations

from hybrid_memory_ui.app import create_app
from hybrid_memory_ui.config import UIConfig

__all__ = ["UIConfig", "create_app"]
