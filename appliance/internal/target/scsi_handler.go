package target

import (
	"context"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/scsi"
	"github.com/cairn-storage/cairn/appliance/internal/tcmu"
)

// lunHandler runs ring commands through Cairn's SCSI layer.
type lunHandler struct{ lun *scsi.LUN }

func (h lunHandler) HandleCommand(ctx context.Context, cdb, dataOut, dataIn []byte) tcmu.Result {
	r := h.lun.Execute(ctx, cdb, dataOut, dataIn)
	return tcmu.Result{Status: r.Status, Sense: r.Sense, DataInLen: r.DataInLen}
}

// Start begins a read or a write without blocking when the volume does
// them asynchronously (the client library): see scsi.LUN.StartRead.
func (h lunHandler) Start(ctx context.Context, cdb, dataOut, dataIn []byte, hold bool, done func(tcmu.Result, bool)) bool {
	d := func(r scsi.Response, ok bool) {
		done(tcmu.Result{Status: r.Status, Sense: r.Sense, DataInLen: r.DataInLen}, ok)
	}
	return h.lun.StartRead(ctx, cdb, dataIn, hold, d) || h.lun.StartWrite(ctx, cdb, dataOut, hold, d)
}

// Flush sends the requests Start held back.
func (h lunHandler) Flush() { h.lun.FlushHeld() }

// SCSIHandlers returns a NewHandler that serves volumes with scsi.NewLUN.
// opts is the same for every volume (identity fields must match on every
// SVM); resolve finds another exported volume by WWN for EXTENDED COPY
// between volumes (nil: copies within one volume only).
func SCSIHandlers(opts scsi.Options, resolve func(wwn [16]byte) (blockdev.Volume, bool)) func(blockdev.Volume) tcmu.Handler {
	return func(vol blockdev.Volume) tcmu.Handler {
		o := opts
		if o.Resolve == nil {
			o.Resolve = resolve
		}
		return lunHandler{scsi.NewLUN(vol, o)}
	}
}

// OnIdle registers the ring's doorbell as the volume's idle hook
// (tcmu.IdleHandler).
func (h lunHandler) OnIdle(f func()) (cancel func(), ok bool) { return h.lun.OnIdle(f) }
