package mdm

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/cairn-storage/cairn/appliance/internal/refusals"
	"go.uber.org/zap"
)

// TestRefusalLoggerPicksRejections: etcd's rejection warnings (the message
// and fields etcd v3.6's embed/config_logging.go writes) reach the
// reporter; other logs do not.
func TestRefusalLoggerPicksRejections(t *testing.T) {
	rep := refusals.New("mdm", "m1", slog.New(slog.DiscardHandler))
	lg := refusalLogger(rep)
	lg.Warn("rejected connection on client endpoint", zap.String("remote-addr", "10.1.2.3:555"),
		zap.String("server-name", ""), zap.Error(errors.New("tls: client didn't provide a certificate")))
	lg.With(zap.String("remote-addr", "10.1.2.4:1")).Warn("rejected connection on peer endpoint", zap.Error(errors.New("bad certificate")))
	lg.Warn("slow fdatasync")
	lg.Error("something else")
	got := refusals.Pending(rep)
	if len(got) != 2 {
		t.Fatalf("%d refusals: %+v", len(got), got)
	}
	if got[0].Remote != "10.1.2.3:555" || got[0].Service != "etcd client port" || got[0].Reason != "tls: client didn't provide a certificate" {
		t.Errorf("first: %+v", got[0])
	}
	if got[1].Remote != "10.1.2.4:1" || got[1].Service != "etcd peer port" {
		t.Errorf("second: %+v", got[1])
	}
}
