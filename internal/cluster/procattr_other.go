//go:build !linux

package cluster

import "syscall"

// sysProcAttr is empty where there is no parent-death signal: the tests'
// cleanups stop the children.
func sysProcAttr() *syscall.SysProcAttr { return nil }
