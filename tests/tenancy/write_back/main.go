// Lists what Go's encoding/json drops when Kueue writes a TrainJob back from Trainer's Go types: every
// `omitempty` field whose value is empty (list or map, "", false, 0). Quantities are rewritten in canonical form
// too, but Kueue's own mutating webhook already wrote them so at create (controller-runtime keeps a defaulter's
// replacements and drops only its removals). Read by generate.py.
package main

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var found = map[string]string{}

func kindOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Map:
		return "collection"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "number"
	}
	return ""
}

func walk(t reflect.Type, path string, depth int) {
	if depth > 40 {
		return
	}
	if t == reflect.TypeOf(resource.Quantity{}) || t == reflect.TypeOf(intstr.IntOrString{}) {
		return // canonical since create (see above); int or string as read
	}
	switch t.Kind() {
	case reflect.Ptr:
		walk(t.Elem(), path, depth+1)
	case reflect.Slice:
		walk(t.Elem(), path+"[]", depth+1)
	case reflect.Map:
		walk(t.Elem(), path+"{}", depth+1)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			parts := strings.Split(f.Tag.Get("json"), ",")
			if parts[0] == "-" || !f.IsExported() {
				continue
			}
			if f.Anonymous && parts[0] == "" {
				walk(f.Type, path, depth+1)
				continue
			}
			p := path + "." + parts[0]
			for _, opt := range parts[1:] {
				if opt == "omitempty" {
					if k := kindOf(f.Type); k != "" {
						found[p] = k
					}
				}
			}
			walk(f.Type, p, depth+1)
		}
	}
}

func main() {
	walk(reflect.TypeOf(trainer.TrainJobSpec{}), "spec", 0)
	paths := make([]string, 0, len(found))
	for p := range found {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Printf("field %s %s\n", found[p], p)
	}
}
