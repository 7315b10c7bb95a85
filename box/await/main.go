// Command pulumi-await answers, for Kubernetes objects as the rehearsal sees them, what the Kubernetes provider's
// await logic answers while `pulumi up` waits for them: is the object awaited, is it ready, or has it failed.
//
// It reads one JSON request per line on stdin, {"inputs": <object as registered>, "live": <object on the cluster>},
// and writes one JSON answer per line: {"awaited": bool, "ready": bool, "error": "..."}. It calls the provider's own
// code: pulumi.com/skipAwait and pulumi.com/waitFor (metadata.ReadyCondition, which takes precedence over the
// built-in awaiters), and the Job awaiter's checker (a Job is ready when it completes; its failure is an error).
// Other built-in awaiters (Deployment, DaemonSet, ...) are the rehearsal's own: it runs stand-ins for them.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/pulumi/cloud-ready-checks/pkg/kubernetes/job"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/clients"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/logging"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/metadata"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

type request struct {
	Inputs map[string]any `json:"inputs"`
	Live   map[string]any `json:"live"`
}

type answer struct {
	Awaited bool   `json:"awaited"`
	Ready   bool   `json:"ready"`
	Error   string `json:"error,omitempty"`
}

func check(ctx context.Context, req request) answer {
	inputs := &unstructured.Unstructured{Object: req.Inputs}
	live := &unstructured.Unstructured{Object: req.Live}
	// As provider/pkg/await/await.go's Creation: the annotations' condition, else the kind's built-in awaiter.
	ready, custom, err := metadata.ReadyCondition(ctx, nil, nil, logging.NewLogger(ctx, nil, ""), inputs, live)
	if err != nil {
		return answer{Awaited: true, Error: err.Error()}
	}
	if !custom && live.GetAPIVersion() == "batch/v1" && live.GetKind() == "Job" {
		j, err := clients.JobFromUnstructured(live)
		if err != nil {
			return answer{Awaited: true, Error: err.Error()}
		}
		ok, results := job.NewJobChecker().ReadyDetails(j)
		var errs []string
		for _, m := range results.Messages().Errors() {
			errs = append(errs, m.S)
		}
		return answer{Awaited: true, Ready: ok, Error: strings.Join(errs, "; ")}
	}
	ok, err := ready.Satisfied()
	a := answer{Awaited: custom, Ready: ok || !custom}
	if err != nil {
		a.Error = err.Error()
	}
	return a
}

func main() {
	ctx := context.Background()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintln(os.Stderr, "pulumi-await: bad request:", err)
			os.Exit(2)
		}
		if err := out.Encode(check(ctx, req)); err != nil {
			os.Exit(1)
		}
	}
}
