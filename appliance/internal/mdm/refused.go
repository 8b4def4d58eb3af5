package mdm

import (
	"os"
	"strings"

	"github.com/cairn-storage/cairn/appliance/internal/refusals"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// refusalLogger is the embedded etcd's logger: errors go to stderr as
// before (etcd's LogLevel "error"), and the warnings etcd writes when it
// refuses a TLS connection ("rejected connection on client endpoint" /
// "... peer endpoint": no certificate, another CA's, plain text on a TLS
// port) go to rep, and so become security events.
func refusalLogger(rep *refusals.Reporter) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	stderr := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(os.Stderr)), zapcore.ErrorLevel)
	return zap.New(zapcore.NewTee(stderr, refusalCore{rep: rep}))
}

type refusalCore struct {
	rep    *refusals.Reporter
	fields []zapcore.Field
}

func (c refusalCore) Enabled(l zapcore.Level) bool { return l >= zapcore.WarnLevel }

func (c refusalCore) With(f []zapcore.Field) zapcore.Core {
	return refusalCore{rep: c.rep, fields: append(append([]zapcore.Field(nil), c.fields...), f...)}
}

func (c refusalCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if strings.HasPrefix(e.Message, "rejected connection") {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c refusalCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range append(append([]zapcore.Field(nil), c.fields...), fs...) {
		f.AddTo(enc)
	}
	remote, _ := enc.Fields["remote-addr"].(string)
	reason, _ := enc.Fields["error"].(string)
	service := "etcd client port"
	if strings.Contains(e.Message, "peer") {
		service = "etcd peer port"
	}
	c.rep.Refused(service, remote, "", reason)
	return nil
}

func (c refusalCore) Sync() error { return nil }
