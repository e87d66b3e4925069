"""Uploads waiting for the user to confirm an import (browser: preview, then save).

The uploaded file is kept in a private temp directory under a random key; the
browser only holds a signed token naming the key, the user and the file name,
so nothing reaches the database before the confirm, and a token cannot be
forged or used by another user. Files older than `MAX_AGE_SECONDS` are removed
whenever a new one is kept.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.core import signing

from verifiers_app.engine import SpecError

MAX_AGE_SECONDS = 24 * 3600
_SALT = "frontier.taskset-import"


def _directory() -> Path:
    base = (
        getattr(settings, "FRONTIER_IMPORT_DIR", "")
        or Path(tempfile.gettempdir()) / "frontier-imports"
    )
    path = Path(base)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def _sweep(directory: Path) -> None:
    cutoff = time.time() - MAX_AGE_SECONDS
    for old in directory.glob("*.upload"):
        try:
            if old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:  # removed by a concurrent sweep
            pass


def upload_keep(*, user, upload) -> str:
    """Copy an uploaded file aside; the signed token that names it."""
    directory = _directory()
    _sweep(directory)
    key = secrets.token_hex(16)
    with open(directory / f"{key}.upload", "wb") as out:
        upload.seek(0)
        shutil.copyfileobj(upload, out, length=1024 * 1024)
    return signing.dumps({"u": user.pk, "k": key, "f": upload.name[:200]}, salt=_SALT)


def upload_path(*, user, token: str) -> tuple[str, Path]:
    """The file name and the path of a kept upload; `SpecError` when the token is
    bad, someone else's, expired or already used."""
    try:
        data = signing.loads(token, salt=_SALT, max_age=MAX_AGE_SECONDS)
    except signing.BadSignature:
        raise SpecError(
            "file: this preview has expired or is not valid; choose the file again"
        ) from None
    path = _directory() / f"{data['k']}.upload"
    if data.get("u") != user.pk or not path.is_file():
        raise SpecError(
            "file: this preview has expired or was already imported; choose the file again"
        )
    return data["f"], path


def upload_discard(*, user, token: str) -> None:
    try:
        _, path = upload_path(user=user, token=token)
    except SpecError:
        return
    path.unlink(missing_ok=True)
