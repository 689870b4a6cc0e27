"""Names huggingface_hub reads from the environment (huggingface_hub/constants.py, the version Trainer's
initializer images install: cmd/initializers/*/requirements.txt, `huggingface-hub>=0.27.0,<1.7`)."""

from __future__ import annotations

#: the Hub every request goes to, the token's included (`constants.ENDPOINT`)
ENDPOINT_ENV = "HF_ENDPOINT"
#: the token sent as `Authorization: Bearer` (`utils/_auth.py` `get_token`), and its legacy spelling
TOKEN_ENV = "HF_TOKEN"
LEGACY_TOKEN_ENV = "HUGGING_FACE_HUB_TOKEN"
#: its default Hub
DEFAULT_ENDPOINT = "https://huggingface.co"
