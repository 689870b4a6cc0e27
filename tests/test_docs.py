"""The configuration reference in the README and `config-schema` come from the models themselves."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import ROOT
from tests.update_readme import updated


def test_readme_configuration_reference_is_current() -> None:
    readme = (ROOT / "README.md").read_text()
    assert updated(readme) == readme, "README config reference is stale: run `make docs`"


def test_config_schema_describes_the_stack_config() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "trainer_infra", "config-schema"], capture_output=True, text=True, check=True
    ).stdout
    schema = json.loads(out)
    assert schema["required"] == ["kubernetes"]
    assert schema["additionalProperties"] is False
    assert {"kubernetes", "components", "images", "charts", "allowUnsupportedVersions"} <= set(schema["properties"])
