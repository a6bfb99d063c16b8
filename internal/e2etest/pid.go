package e2etest

// PID is the collector process's id (benchmarks read its CPU time from /proc).
func (c *Collector) PID() int { return c.cmd.Process.Pid }
