package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// envProgress forces progress output on ("always") or off ("never");
// by default it shows when stderr is a terminal.
const envProgress = "FLOWLITE_PROGRESS"

// progressInterval is how often progress is redrawn.
const progressInterval = 250 * time.Millisecond

// showProgress reports whether long operations draw progress on stderr.
func (a *app) showProgress() bool {
	switch a.getenv(envProgress) {
	case "always":
		return true
	case "never":
		return false
	}
	f, ok := a.stderr.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// meter draws one progress line on stderr, redrawn in place, until done.
type meter struct {
	w     io.Writer
	what  string
	start time.Time

	mu          sync.Mutex
	done, total int // total 0: unknown
	counted     bool

	stopOnce sync.Once
	quit     chan struct{}
	exited   chan struct{}
}

// progress shows that the operation what is under way, with the time it
// has taken, until stop is called. It draws nothing unless showProgress.
func (a *app) progress(what string) (stop func()) {
	m := a.meter(what)
	return m.stop
}

// meter starts a progress line; set reports counts, stop clears the line.
func (a *app) meter(what string) *meter {
	m := &meter{w: a.stderr, what: what, start: time.Now(), quit: make(chan struct{}), exited: make(chan struct{})}
	if !a.showProgress() {
		close(m.exited)
		m.w = nil
		return m
	}
	go func() {
		defer close(m.exited)
		tick := time.NewTicker(progressInterval)
		defer tick.Stop()
		for {
			m.draw(false)
			select {
			case <-m.quit:
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

// set records that done of total items are handled (total 0: unknown).
func (m *meter) set(done, total int) {
	m.mu.Lock()
	m.done, m.total, m.counted = done, total, true
	m.mu.Unlock()
}

func (m *meter) draw(final bool) {
	m.mu.Lock()
	line := fmt.Sprintf("%s… %s", m.what, time.Since(m.start).Round(100*time.Millisecond))
	switch {
	case m.counted && m.total > 0:
		line = fmt.Sprintf("%s… %d/%d (%d%%) %s", m.what, m.done, m.total, m.done*100/m.total, time.Since(m.start).Round(100*time.Millisecond))
	case m.counted:
		line = fmt.Sprintf("%s… %d %s", m.what, m.done, time.Since(m.start).Round(100*time.Millisecond))
	}
	m.mu.Unlock()
	end := ""
	if final {
		end = "\n"
	}
	fmt.Fprintf(m.w, "\r\033[K%s%s", line, end)
}

// stop ends the progress line, leaving its last state on stderr.
func (m *meter) stop() {
	m.stopOnce.Do(func() {
		if m.w == nil {
			return
		}
		close(m.quit)
		<-m.exited
		m.draw(true)
	})
}
