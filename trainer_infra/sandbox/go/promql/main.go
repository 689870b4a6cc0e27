// promql-names parses PromQL expressions with the Prometheus parser of the pinned version and
// reports, per expression, the metric names it selects and the label names it relies on, so the
// e2e suite can compare them with what the real controllers export.
//
// Input (stdin): JSON list of {"id": "...", "expr": "..."}.
// Output (stdout): JSON list of {"id", "error", "selectors": [{"metric", "labels"}], "grouping": [{"labels", "metrics"}], "produced": [...]}.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

type input struct {
	ID   string `json:"id"`
	Expr string `json:"expr"`
}

type selector struct {
	Metric string   `json:"metric"`
	Labels []string `json:"labels"`
}

// grouping: label names used in by/on/group_left over a subexpression selecting these metrics.
type grouping struct {
	Labels  []string `json:"labels"`
	Metrics []string `json:"metrics"`
}

type output struct {
	ID        string     `json:"id"`
	Error     string     `json:"error,omitempty"`
	Selectors []selector `json:"selectors"`
	Grouping  []grouping `json:"grouping"`
	Produced  []string   `json:"produced"`
}

func metricsUnder(node parser.Node) []string {
	seen := map[string]bool{}
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && vs.Name != "" {
			seen[vs.Name] = true
		}
		return nil
	})
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

func analyse(in input) output {
	out := output{ID: in.ID, Selectors: []selector{}, Grouping: []grouping{}, Produced: []string{}}
	expr, err := parser.ParseExpr(in.Expr)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		switch e := n.(type) {
		case *parser.VectorSelector:
			names := []string{}
			for _, m := range e.LabelMatchers {
				if m.Name != labels.MetricName {
					names = append(names, m.Name)
				}
			}
			sort.Strings(names)
			out.Selectors = append(out.Selectors, selector{Metric: e.Name, Labels: names})
		case *parser.AggregateExpr:
			if len(e.Grouping) > 0 {
				out.Grouping = append(out.Grouping, grouping{Labels: e.Grouping, Metrics: metricsUnder(e.Expr)})
			}
		case *parser.BinaryExpr:
			if vm := e.VectorMatching; vm != nil && (len(vm.MatchingLabels) > 0 || len(vm.Include) > 0) {
				all := append(append([]string{}, vm.MatchingLabels...), vm.Include...)
				out.Grouping = append(out.Grouping, grouping{Labels: all, Metrics: metricsUnder(e)})
			}
		case *parser.Call:
			if e.Func.Name == "label_replace" && len(e.Args) == 5 {
				if dst, ok := e.Args[1].(*parser.StringLiteral); ok {
					out.Produced = append(out.Produced, dst.Val)
				}
				if src, ok := e.Args[3].(*parser.StringLiteral); ok && src.Val != "" {
					out.Grouping = append(out.Grouping, grouping{Labels: []string{src.Val}, Metrics: metricsUnder(e.Args[0])})
				}
			}
		}
		return nil
	})
	return out
}

func main() {
	var inputs []input
	if err := json.NewDecoder(os.Stdin).Decode(&inputs); err != nil {
		fmt.Fprintln(os.Stderr, "promql-names: cannot read input:", err)
		os.Exit(2)
	}
	outputs := make([]output, 0, len(inputs))
	for _, in := range inputs {
		outputs = append(outputs, analyse(in))
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(outputs); err != nil {
		os.Exit(1)
	}
}
