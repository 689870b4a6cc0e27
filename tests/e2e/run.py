"""Single entry point for ``make e2e``: build what is missing, then run the e2e suite.

Usage: ``python -m tests.e2e.run [pytest args...]`` (default args: ``-m e2e tests/e2e``).
Prints the build and test durations so CI logs show where the time went.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.e2e.build import Builder, BuildError
from tests.e2e.versions import REPO_ROOT, VersionSet


def main(argv: list[str] | None = None) -> int:
    """Build, then run pytest; exit with pytest's code."""
    args = list(sys.argv[1:] if argv is None else argv)
    versions = VersionSet.from_env()
    start = time.monotonic()
    try:
        built = Builder(versions).build()
    except BuildError as exc:
        print(f"[e2e] build failed: {exc}", file=sys.stderr)
        return 1
    build_s = time.monotonic() - start
    print(
        f"[e2e] binaries for {versions.key}: {'built ' + str(built) if built else 'cached'} ({build_s:.0f} s)",
        flush=True,
    )
    # smoke first: if the basics fail, the scenarios would only repeat it
    pytest_args = args or [
        "-m",
        "e2e",
        "tests/e2e/test_smoke.py",
        "tests/e2e/test_scenarios.py",
        "tests/e2e/test_attacks.py",
        "tests/e2e/test_migrate.py",
        "tests/e2e/test_observability.py",  # after the scenarios: it checks the metrics they produced
        "tests/e2e/test_failures.py",
        "tests/e2e/test_fleet.py",
    ]
    test_start = time.monotonic()
    code = subprocess.call(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *pytest_args],
        cwd=REPO_ROOT,
        env={**os.environ, "E2E_NO_BUILD": "1"},
    )
    print(f"[e2e] build {build_s:.0f} s, tests {time.monotonic() - test_start:.0f} s, exit {code}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
