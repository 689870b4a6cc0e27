"""Pure functions that turn plan data into Kubernetes object dicts."""
