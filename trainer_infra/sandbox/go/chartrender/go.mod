module trainer-platform/e2e/controlplane/chartrender

go 1.24

require helm.sh/helm/v3 v3.20.2
