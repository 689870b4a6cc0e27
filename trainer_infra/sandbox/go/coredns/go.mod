module trainer-platform/e2e/controlplane/coredns

go 1.26

require github.com/coredns/coredns v1.15.0
