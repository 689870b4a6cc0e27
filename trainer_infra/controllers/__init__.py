"""The controller stack: JobSet, Kubeflow Trainer and Kueue, installed from their official charts."""
