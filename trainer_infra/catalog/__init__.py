"""The curated runtime catalog: runtime files (`runtimes/`), their typed model and loader, the planner that
serves them as (Cluster)TrainingRuntimes, and the platform injections it owns (image mirror, default resources)."""
