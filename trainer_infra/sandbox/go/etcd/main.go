// Command etcd wraps etcdmain.Main: go.etcd.io/etcd/server/v3 has replace
// directives in its go.mod, so `go install` refuses it (etcd-io/etcd#18501).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
