module trainer-platform/e2e/controlplane/promql

go 1.24

require github.com/prometheus/prometheus v0.305.0
