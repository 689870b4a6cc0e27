"""A throwaway Kubernetes control plane of real upstream binaries (etcd, kube-apiserver, kwok, JobSet, Kueue,
Trainer) as plain processes on loopback: what `trainer-infra simulate` replays traces on and what the e2e
tests run against. The binaries are built from the Go module proxy by `make e2e` (tests/e2e/build.py) into
`~/.cache/trainer-platform/e2e/<version set>/bin/`; this package only runs them."""
