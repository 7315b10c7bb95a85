//go:build tools

// Package tools pins the commands stacks/box/build.py builds from this module.
package tools

import (
	_ "github.com/kubeflow/mpi-operator/cmd/mpi-operator"
)
