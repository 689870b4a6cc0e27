// Command pause is the pod sandbox process of the e2e's real node: it holds the pod's namespaces, reaps
// orphans and exits on SIGINT/SIGTERM, like upstream's pause (build/pause/linux/pause.c, C, not on the
// module proxy). It is published in the e2e image mirror as registry.k8s.io/pause:<kubeadm's version>.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		os.Stdout.WriteString("pause (trainer-platform e2e)\n")
		return
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
