"""trainer-platform: a Kubeflow Trainer v2 platform as typed Pulumi resources."""
