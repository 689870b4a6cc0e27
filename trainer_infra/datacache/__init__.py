"""Trainer's data cache, whole: its config (`dataCache`), what trainer's cache initializer creates and the
settings the platform pins in it, its RBAC and chart values, its checks, the inventory of the identities it
adds (with rights a member does not have) and every admission rule that bounds them. A member's env var on a
cache job leads here in one hop: `pinned.py` names it, `admission.py` judges it."""
