"""The platform on one machine, from a checkout: a throwaway Kubernetes control plane of real upstream binaries
(etcd, kube-apiserver, kwok, JobSet, Kueue, Trainer, LeaderWorkerSet) as plain processes on loopback, what
`trainer-infra simulate` replays traces on; and the platform sandbox (`trainer-infra sandbox up`), the real
`pulumi up` of the local stack on a real node beside it. The e2e tests run on both.

`build.py` builds the pinned binaries from the Go module proxy (Go helper modules in `go/`) into
`~/.cache/trainer-platform/e2e/<version set>/bin/` (``SANDBOX_CACHE`` moves it); `toolchain.py` the Pulumi CLI
and provider. docs/sandbox.md is the map."""
