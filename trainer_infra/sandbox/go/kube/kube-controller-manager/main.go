// Command kube-controller-manager is a thin wrapper around k8s.io/kubernetes/cmd/kube-controller-manager/app so
// that the binary can be built from the Go module proxy (upstream's own main
// package lives in a module with local replace directives).
package main

import (
	"os"
	_ "time/tzdata" // same as upstream: timezone data for CronJob etc.

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
