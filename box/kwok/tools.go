//go:build tools

// Package tools pins the commands stacks/box/build.py builds from this module.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/kwok/cmd/kwokctl"
)
