//go:build tools

// Package tools pins the commands stacks/box/build.py builds from this module.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
