package server

import "time"

// SetProgressClock makes the rebuild tracker read time from now.
func SetProgressClock(s *Server, now func() time.Time) {
	s.progress.mu.Lock()
	defer s.progress.mu.Unlock()
	s.progress.now = now
}
