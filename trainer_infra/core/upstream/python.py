"""Names the Python project's official container images define (Docker Hub's `library/python`)."""

from __future__ import annotations

#: The image the platform's small standard-library servers run in (the team file service, `storage/files.py`):
#: CPython's Debian slim image, pinned to a patch release (pulled through `images.registryMirror` like every other).
IMAGE = "docker.io/library/python:3.12.7-slim-bookworm"
