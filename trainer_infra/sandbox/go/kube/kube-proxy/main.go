// Command kube-proxy is a thin wrapper around k8s.io/kubernetes/cmd/kube-proxy/app, built from the same module,
// go.mod and Go caches as the kubelet: Service routing on the sandbox's real node (cluster_network.py).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
