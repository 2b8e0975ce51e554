"""Uploaded files waiting for their import to be confirmed (see
:mod:`hybrid_memory_ui.transfer`)."""

from __future__ import annotations

import contextlib
import secrets
import tempfile
import threading
import time
from pathlib import Path

from starlette.datastructures import UploadFile

#: How long an upload waits for its confirmation.
UPLOAD_SECONDS = 3600.0


class UploadStash:
    """Uploaded files waiting for their import to be confirmed, in a private temporary
    directory (removed when the server exits), each under a random token."""

    def __init__(self) -> None:
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self._lock = threading.Lock()

    def _dir(self) -> Path:
        with self._lock:
            if self._folder is None:
                self._folder = tempfile.TemporaryDirectory(prefix="hybrid-memory-ui-")
            return Path(self._folder.name)

    def keep(self, upload: UploadFile) -> str:
        """Keep ``upload``'s content; returns its token."""
        folder = self._dir()
        now = time.time()
        for old in folder.iterdir():  # uploads never confirmed
            with contextlib.suppress(OSError):
                if now - old.stat().st_mtime > UPLOAD_SECONDS:
                    old.unlink()
        token = secrets.token_urlsafe(16)
        upload.file.seek(0)
        with (folder / token).open("wb") as out:
            while chunk := upload.file.read(1 << 16):
                out.write(chunk)
        return token

    def path(self, token: str) -> Path | None:
        """The file kept under ``token``; None for a token that names none."""
        if not token or not token.replace("-", "").replace("_", "").isalnum():
            return None
        found = self._dir() / token
        return found if found.is_file() else None

    def drop(self, token: str) -> None:
        """Forget the file kept under ``token``."""
        found = self.path(token)
        if found is not None:
            with contextlib.suppress(OSError):
                found.unlink()
