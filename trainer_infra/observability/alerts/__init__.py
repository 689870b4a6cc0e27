"""The platform's alerts: each one an `Alert` (`model.py`) with its settings model and its rules, listed in
`registry.py`; `observability.alerts.<name>` in the stack is derived from that list."""
