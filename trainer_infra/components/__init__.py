"""Controllers and other components installed from their official Helm charts, driven by matrix rows."""
