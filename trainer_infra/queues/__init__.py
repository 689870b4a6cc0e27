"""Kueue objects derived from node pools and teams (flavors, topologies, cohort, queues, priorities)."""
