//go:build !unix

package cluster

import "errors"

var errNoPause = errors.New("cluster: pausing a process needs SIGSTOP, which this system lacks")

func (p *process) pause() error  { return errNoPause }
func (p *process) resume() error { return errNoPause }
