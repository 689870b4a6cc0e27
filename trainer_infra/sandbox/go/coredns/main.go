// Command coredns is CoreDNS built with the plugins the e2e's cluster DNS uses (kubeadm's Corefile without
// forward, prometheus and reload: the sandbox has no upstream resolver), the way CoreDNS documents a build
// with fewer plugins: its coremain, the plugins imported, and the directive order filtered to them. Fewer
// plugins compile in a fraction of the time of the full binary (no cloud SDKs).
package main

import (
	"slices"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
)

// plugins are the imported plugins; their order is CoreDNS's own (dnsserver.Directives).
var plugins = []string{"cache", "errors", "health", "kubernetes", "loadbalance", "log", "loop", "ready"}

func main() {
	dnsserver.Directives = slices.DeleteFunc(slices.Clone(dnsserver.Directives), func(d string) bool {
		return !slices.Contains(plugins, d)
	})
	coremain.Run()
}
