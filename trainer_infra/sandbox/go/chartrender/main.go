// chart-render prints what `helm template` renders for one chart archive, with the Helm library the
// Kubernetes provider's helm.v4.Chart renders with (its version is pinned in go.mod): the control plane of
// `trainer-infra simulate` and the e2e fleet installs the charts' RBAC from it, so its controllers run with
// exactly the permissions the charts give them.
//
// Usage: chart-render ARCHIVE RELEASE NAMESPACE KUBE_VERSION < values.json > manifest.yaml
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: chart-render ARCHIVE RELEASE NAMESPACE KUBE_VERSION < values.json")
		os.Exit(2)
	}
	if err := render(os.Args[1], os.Args[2], os.Args[3], os.Args[4]); err != nil {
		fmt.Fprintln(os.Stderr, "chart-render:", err)
		os.Exit(1)
	}
}

func render(archive, release, namespace, kubeVersion string) error {
	values := map[string]interface{}{}
	if err := json.NewDecoder(os.Stdin).Decode(&values); err != nil {
		return fmt.Errorf("values on stdin: %w", err)
	}
	chart, err := loader.Load(archive)
	if err != nil {
		return err
	}
	version, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return err
	}
	// what `helm template` and the provider's Chart set: client-only, no cluster, no hooks run
	install := action.NewInstall(&action.Configuration{Log: func(string, ...interface{}) {}})
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.ReleaseName = release
	install.Namespace = namespace
	install.KubeVersion = version
	rel, err := install.Run(chart, values)
	if err != nil {
		return err
	}
	_, err = fmt.Print(rel.Manifest)
	return err
}
