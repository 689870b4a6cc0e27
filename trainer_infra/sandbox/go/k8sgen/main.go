// Command k8sgen regenerates the files the pulumi-kubernetes source snapshot lacks.
//
// The snapshot in ../shared/upstream-src omits generated files (the provider schema and
// sdk/go/kubernetes/core/v1/pulumiTypes.go). Upstream's generator (cmd/pulumi-gen-kubernetes)
// cannot be built here: it imports the .NET language host, which the module proxy refuses, and it
// downloads legacy OpenAPI specs over HTTP. This program calls the same libraries — the provider's
// own pkg/gen and Pulumi's Go code generator — from the Kubernetes OpenAPI specs the module proxy
// serves inside k8s.io/kubernetes. The e2e toolchain build copies it into the extracted provider
// module (it compiles against that module's go.mod), never into the repository's Go code.
//
// Usage:
//
//	k8sgen schema <swagger.json> <root>   writes <root>/provider/cmd/pulumi-resource-kubernetes/schema.json;
//	                                      swagger-v1.N.0.json files beside <swagger.json> are merged first
//	k8sgen go <schema.json> <root> <ver>  writes the Go SDK files missing under <root>/sdk/go
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	"github.com/imdario/mergo"
	gogen "github.com/pulumi/pulumi/pkg/v3/codegen/go"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/gen"
)

// legacySpecs are the Kubernetes minors whose removed APIs the provider keeps in its schema
// (the list upstream's generator merges, in the same order).
var legacySpecs = []string{"17", "18", "19", "20", "26", "28", "30", "31"}

func main() {
	if len(os.Args) < 4 {
		fail("usage: k8sgen schema <swagger.json> <root> | k8sgen go <schema.json> <root> <version>")
	}
	var err error
	switch os.Args[1] {
	case "schema":
		err = writeSchema(os.Args[2], os.Args[3])
	case "go":
		if len(os.Args) < 5 {
			fail("k8sgen go needs <schema.json> <root> <version>")
		}
		err = writeMissingGoFiles(os.Args[2], os.Args[3], os.Args[4])
	default:
		err = fmt.Errorf("unknown step %q (expected schema or go)", os.Args[1])
	}
	if err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "k8sgen:", msg)
	os.Exit(1)
}

// writeSchema merges the current spec over the legacy ones and writes the Pulumi package schema.
func writeSchema(swaggerPath, root string) error {
	current, err := os.ReadFile(swaggerPath)
	if err != nil {
		return err
	}
	for _, minor := range legacySpecs {
		path := filepath.Join(filepath.Dir(swaggerPath), fmt.Sprintf("swagger-v1.%s.0.json", minor))
		legacy, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("legacy OpenAPI spec missing (from k8s.io/kubernetes@v1.%s.0): %w", minor, err)
		}
		if current, err = merge(legacy, current); err != nil {
			return fmt.Errorf("merging %s: %w", path, err)
		}
	}
	var spec map[string]any
	if err := json.Unmarshal(current, &spec); err != nil {
		return err
	}
	pkg := gen.PulumiSchema(spec, gen.WithResourceOverlays(gen.ResourceOverlays), gen.WithTypeOverlays(gen.TypeOverlays))
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "    ")
	if err := enc.Encode(pkg); err != nil {
		return err
	}
	dest := filepath.Join(root, "provider", "cmd", "pulumi-resource-kubernetes", "schema.json")
	fmt.Println("wrote", dest)
	return os.WriteFile(dest, out.Bytes(), 0o644)
}

// merge overlays current on legacy, as upstream does (newer definitions win).
func merge(legacyBytes, currentBytes []byte) ([]byte, error) {
	var legacy, current map[string]any
	if err := json.Unmarshal(legacyBytes, &legacy); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(currentBytes, &current); err != nil {
		return nil, err
	}
	if err := mergo.Merge(&legacy, current, mergo.WithOverride); err != nil {
		return nil, err
	}
	return json.Marshal(legacy)
}

// helmV3Files get upstream's package rename (Go codegen names the Helm Release package v3).
var helmV3Files = map[string]bool{
	"kubernetes/helm/v3/pulumiTypes.go": true,
	"kubernetes/helm/v3/init.go":        true,
	"kubernetes/helm/v3/release.go":     true,
}

// writeMissingGoFiles generates the Go SDK and writes only the files the snapshot does not have,
// so every file upstream shipped stays byte-for-byte upstream's.
func writeMissingGoFiles(schemaPath, root, version string) error {
	raw, err := os.ReadFile(schemaPath)
	if err != nil {
		return err
	}
	var spec schema.PackageSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	spec.Version = version
	pkg, err := schema.ImportSpec(spec, nil, schema.ValidationOptions{})
	if err != nil {
		return err
	}
	files, err := gogen.GeneratePackage("pulumigen", pkg, nil)
	if err != nil {
		return err
	}
	rename := regexp.MustCompile(`package v3`)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	written := 0
	for _, name := range names {
		dest := filepath.Join(root, "sdk", "go", name)
		if _, err := os.Stat(dest); err == nil {
			continue
		}
		content := files[name]
		if helmV3Files[name] {
			content = rename.ReplaceAll(content, []byte("package helm"))
		}
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dest, content, 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", dest)
		written++
	}
	fmt.Printf("%d missing Go SDK files written (%d generated)\n", written, len(files))
	return nil
}
