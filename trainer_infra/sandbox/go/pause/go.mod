module trainer-platform/e2e/controlplane/pause

go 1.24
