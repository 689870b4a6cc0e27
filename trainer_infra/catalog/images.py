"""Image references a runtime may use: an explicit tag (never `latest`, never untagged), optionally a digest."""

from __future__ import annotations

import re

DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")


def image_problem(image: str) -> str | None:
    """None when `image` is pinned: an explicit tag other than `latest`, optionally with a sha256 digest."""
    name, _, digest = image.partition("@")
    if digest and not DIGEST.match(digest):
        return "digest must be sha256:<64 hex digits>"
    repo, sep, tag = name.rpartition(":")
    if not sep or "/" in tag or not repo:
        return "image has no tag: pin an explicit tag (and optionally @sha256:<digest>)"
    if tag == "latest":
        return "image tag 'latest' is not a pin: use an explicit version tag"
    return None
