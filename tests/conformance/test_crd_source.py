"""Without ../shared, the harness fetches the pinned upstream CRDs and refuses any that do not match."""

from __future__ import annotations

import hashlib
import io
import urllib.error
from pathlib import Path
from typing import Any

import pytest

from tests.conformance import crds


def _opener_from(folder: Path, tamper: str | None = None) -> Any:
    served: list[str] = []

    def opener(url: str, timeout: int) -> io.BytesIO:
        rel = next(e["path"] for e in crds._sources() if e["url"] == url)
        served.append(rel)
        data = (folder / rel).read_bytes()
        return io.BytesIO(data + b"# tampered\n" if rel == tamper else data)

    opener.served = served  # type: ignore[attr-defined]
    return opener


def test_pins_cover_every_shared_crd_and_match_their_checksums() -> None:
    shared = crds.crds_dir()
    pinned = {e["path"]: e["sha256"] for e in crds._sources()}
    files = {str(p.relative_to(shared)) for p in shared.glob("*/*/*.yaml")}
    assert files == set(pinned)
    for rel, sha in pinned.items():
        assert hashlib.sha256((shared / rel).read_bytes()).hexdigest() == sha


def test_fetch_caches_verified_files_and_rejects_tampered_ones(tmp_path: Path) -> None:
    shared = crds.crds_dir()
    opener = _opener_from(shared)
    cache = crds.fetch_pinned(tmp_path / "cache", opener)
    assert len(opener.served) == len(crds._sources())
    again = _opener_from(shared)
    crds.fetch_pinned(cache, again)
    assert again.served == [], "verified files are not fetched twice"
    victim = crds._sources()[0]["path"]
    with pytest.raises(RuntimeError, match="sha256"):
        crds.fetch_pinned(tmp_path / "other", _opener_from(shared, tamper=victim))


def test_without_the_shared_folder_or_network_the_error_says_what_to_set(tmp_path: Path) -> None:
    def offline(url: str, timeout: float) -> Any:
        raise urllib.error.URLError("[Errno 101] Network is unreachable")

    with pytest.raises(RuntimeError) as err:
        crds.fetch_pinned(tmp_path / "cache", offline)
    message = str(err.value)
    assert "TRAINER_PLATFORM_SHARED" in message and "Network is unreachable" in message
