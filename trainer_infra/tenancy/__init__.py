"""Team tenancy: namespaces, RBAC for members, quotas, secrets, and the guard against losing data."""
