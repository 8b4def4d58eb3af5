package server

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func jobServer(dir string) *Server {
	s := &Server{cfg: Config{StateDir: dir, Logger: slog.New(slog.DiscardHandler)}, jobs: loadJobs(dir, slog.New(slog.DiscardHandler))}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

func waitState(t *testing.T, s *Server, name, want string) *Job {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		j := *s.jobs[name]
		s.mu.Unlock()
		if j.State == want {
			return &j
		}
	}
	t.Fatalf("job %s never %s", name, want)
	return nil
}

// The job list outlives the plugin server: ended jobs are listed again by
// the next one, and a job cut short by a stop (or a crash) as interrupted,
// with what to do.
func TestJobsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	s := jobServer(dir)
	if _, err := s.start("volume:v1", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.start("grow:v2", func(context.Context) error { return errors.New("the datastore is gone") }); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, "volume:v1", "succeeded")
	waitState(t, s, "grow:v2", "failed")
	block := make(chan struct{})
	if _, err := s.start("maintenance:c1", func(ctx context.Context) error {
		close(block)
		<-ctx.Done()
		return ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	<-block
	s.cancel() // the server stops while the roll runs
	s.wg.Wait()

	s2 := jobServer(dir)
	for name, want := range map[string]string{"volume:v1": "succeeded", "grow:v2": "failed", "maintenance:c1": JobInterrupted} {
		j := s2.jobs[name]
		if j == nil || j.State != want {
			t.Fatalf("after the restart %s is %+v, want %s", name, j, want)
		}
	}
	if s2.jobs["grow:v2"].Error != "the datastore is gone" || s2.jobs["maintenance:c1"].Error != interruptedWhy {
		t.Errorf("errors not kept: %+v %+v", s2.jobs["grow:v2"], s2.jobs["maintenance:c1"])
	}

	// A crash leaves "running" in the file: the next server lists it interrupted.
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	crashed := t.TempDir()
	must(os.WriteFile(filepath.Join(crashed, jobsFileName), []byte(`[{"name":"deploy:c9","state":"running","started":"2026-11-26T10:00:00Z"}]`), 0o600))
	if j := jobServer(crashed).jobs["deploy:c9"]; j == nil || j.State != JobInterrupted {
		t.Fatalf("crashed job: %+v", j)
	}
	// A damaged file is set aside: an empty list, the server starts.
	must(os.WriteFile(filepath.Join(crashed, jobsFileName), []byte(`[{"name":`), 0o600))
	if n := len(jobServer(crashed).jobs); n != 0 {
		t.Fatalf("damaged file gave %d jobs", n)
	}
}
