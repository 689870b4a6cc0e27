"""Plaintext values where the config expects a Pulumi secret (`SecretStr` fields): a warning with the exact
command that stores the value encrypted. Offline a `{secure: …}` value reads as a placeholder; under the engine
every value arrives decrypted and only the top-level keys Pulumi holds as secrets tell them apart."""

from __future__ import annotations

import re

from pydantic import BaseModel, SecretStr

from trainer_infra.core.walk import Loc, instances
from trainer_infra.stack.load import SECRET_PLACEHOLDER

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


def stored_encrypted(loc: Loc, value: SecretStr, secret_keys: frozenset[str] | None) -> bool:
    """`secret_keys`: the top-level config keys the engine marks secret (live), None offline. Live, a key with
    one encrypted leaf is secret as a whole: a plaintext sibling under it goes unnoticed here, and the offline
    `validate` (which reads the file itself) is the one that names it."""
    if secret_keys is None:
        return value.get_secret_value() == SECRET_PLACEHOLDER
    return bool(loc) and str(loc[0]) in secret_keys


def plaintext_warnings(cfg: BaseModel, namespace: str, secret_keys: frozenset[str] | None) -> list[str]:
    """One warning per secret field written in plain text in the stack file."""
    out = []
    for loc, secret in instances(cfg, SecretStr):
        if stored_encrypted(loc, secret, secret_keys):
            continue
        key = pulumi_path(namespace, loc)
        where = key.partition(":")[2]
        plain = "; a value that is not secret: `{plaintext: <value>}`" if loc[-3:-2] == ("extra",) else ""
        out.append(
            f"{where}: a secret in plain text in the stack file; store it encrypted with\n"
            f"    pulumi config set --secret --path '{key}' <value>{plain}"
        )
    return out
