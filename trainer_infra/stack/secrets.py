"""Plaintext values where the config expects a Pulumi secret (`SecretStr` fields): a warning with the exact
command that stores the value encrypted. Offline only: under `pulumi up` every value arrives decrypted."""

from __future__ import annotations

import re

from pydantic import BaseModel, SecretStr

from trainer_infra.core.walk import Loc, instances

_PLAIN_SEGMENT = re.compile(r"^[A-Za-z0-9_$-]+$")


def pulumi_path(namespace: str, loc: Loc) -> str:
    """`("teams", 0, "secrets", "extra", "a.b")` → `ns:teams[0].secrets.extra["a.b"]` (Pulumi property path)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_SEGMENT.match(part):
            out += ("." if out else "") + part
        else:
            out += '["' + part.replace("\\", "\\\\").replace('"', '\\"') + '"]'
    return f"{namespace}:{out}"


def plaintext_warnings(cfg: BaseModel, namespace: str, placeholder: str) -> list[str]:
    """One warning per secret field written in plain text in the stack file (`{secure: …}` reads as
    `placeholder`)."""
    out = []
    for loc, secret in instances(cfg, SecretStr):
        if secret.get_secret_value() == placeholder:
            continue
        key = pulumi_path(namespace, loc)
        where = key.partition(":")[2]
        out.append(
            f"{where}: a secret in plain text in the stack file; store it encrypted with\n"
            f"    pulumi config set --secret --path '{key}' <value>"
        )
    return out
