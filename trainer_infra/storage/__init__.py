"""Shared ReadWriteMany storage: backends, StorageClass, team claims, the shared-volume injection."""
