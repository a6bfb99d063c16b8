package store

import (
	"runtime"
	"sync"
)

// A cold window reads several hours of several streams; each hour is an independent decompress-and-parse, so
// they run side by side (the first 4 h fleet view of a 1024-GPU run reads ~5 hours of gpu_rollup and up to
// 13 of phases). Loaders own their hour's partition and block; what they share is changed under s.lmu
// (block maps, lanes seen, notices, the data edge, counters).

// loadJob loads one partition.
type loadJob func()

// loadAll runs jobs concurrently, at most GOMAXPROCS at once, and returns when all are done. The caller holds
// s.mu for writing, so no query sees a half-loaded hour.
func (s *Store) loadAll(jobs []loadJob) {
	if len(jobs) == 1 {
		jobs[0]()
		return
	}
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			j()
		}()
	}
	wg.Wait()
}
