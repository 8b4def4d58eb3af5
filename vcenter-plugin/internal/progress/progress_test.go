package progress_test

import (
	"testing"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/progress"
)

func TestLog(t *testing.T) {
	l := progress.NewLog(3, nil)
	ch, cancel := l.Subscribe()
	defer cancel()
	for i := 0; i < 5; i++ {
		job := "a"
		if i%2 == 1 {
			job = "b"
		}
		l.Emit(job, progress.Info, "step", "", "event %d", i)
	}
	all := l.Since(0, "")
	if len(all) != 3 || all[0].Seq != 3 || all[2].Message != "event 4" {
		t.Fatalf("buffer keeps the last 3: %+v", all)
	}
	if a := l.Since(3, "a"); len(a) != 1 || a[0].Seq != 5 {
		t.Fatalf("filter: %+v", a)
	}
	for want := int64(1); want <= 5; want++ {
		select {
		case e := <-ch:
			if e.Seq != want {
				t.Fatalf("subscriber got seq %d, want %d", e.Seq, want)
			}
		case <-time.After(time.Second):
			t.Fatal("subscriber missed an event")
		}
	}
	// A subscriber that never reads does not block the emitter.
	_, cancel2 := l.Subscribe()
	defer cancel2()
	done := make(chan struct{})
	go func() {
		for i := 0; i < 1000; i++ {
			l.Emit("a", progress.Info, "s", "", "x")
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("emit blocked on a slow subscriber")
	}
}
