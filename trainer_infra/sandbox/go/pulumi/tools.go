//go:build tools

// Package tools anchors the Pulumi CLI wrapper module: toolchain.py (beside go/) writes its go.mod
// (pkg/v3 and sdk/v3 at the pinned version, plus pkg's own clipboard replace) and builds
// github.com/pulumi/pulumi/pkg/v3/cmd/pulumi from it.
package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
