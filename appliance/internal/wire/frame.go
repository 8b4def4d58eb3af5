// Package wire owns Cairn's data-path protocol: framed binary requests and
// responses over TCP between clients and SDSs and between SDSs, many
// requests in flight per connection, answered in any order.
//
// Format version 1. All integers are big-endian.
//
//	Request header, 64 bytes:
//	  0  u32 magic   "CRQ1"
//	  4  u8  opcode
//	  5  u8  flags   (see Flags below)
//	  6  u16 reserved, zero
//	  8  u64 request id (chosen by the sender, echoed in the response)
//	 16  u64 epoch   (placement epoch the sender routed the request with)
//	 24  u64 volume id
//	 32  u64 offset  (bytes in the volume)
//	 40  u64 aux     (opcode specific, see the table below)
//	 48  u32 length  (bytes the operation covers)
//	 52  u32 payload length (bytes that follow the header)
//	 56  u32 reserved, zero
//	 60  u32 CRC-32C of header bytes 0..59 and the payload
//
//	Response header, 40 bytes:
//	  0  u32 magic   "CRS1"
//	  4  u16 status
//	  6  u16 reserved, zero
//	  8  u64 request id
//	 16  u64 epoch   (the responder's current epoch)
//	 24  u64 aux     (opcode specific: miscompare offset)
//	 32  u32 payload length
//	 36  u32 CRC-32C of header bytes 0..35 and the payload
//
// Flags (request byte 5; bits not listed are zero):
//
//	FlagFUA      bit 0  writes: durable before the answer (SCSI FUA)
//	FlagReplica  bit 1  primary -> secondary copy: apply, do not forward
//	FlagUnmap    bit 2  OpUnmap, OpWriteZeroes: deallocate whole chunks
//	FlagZero     bit 3  OpChunkPut: the chunk is all zeros (no payload); deallocate it
//	FlagRetry    bit 4  OpCompareWrite: a retry after an attempt of unknown outcome
//
// Per opcode, the request fields beyond op and id (a field not named is
// zero; epoch is the sender's placement epoch wherever it is named):
//
//	op               volume     offset            aux                 length        payload
//	OpPing           -          -                 -                   -             -
//	OpRead           volume     byte offset       -                   bytes         -          (response payload: the data)
//	OpWrite          volume     byte offset       -                   bytes         the data
//	OpFlush          -          -                 -                   -             -          (epoch)
//	OpCompareWrite   volume     byte offset       -                   bytes         compare bytes, then write bytes
//	OpWriteZeroes    volume     byte offset       -                   bytes         -
//	OpWriteSame      volume     byte offset       -                   bytes         one block pattern
//	OpUnmap          volume     byte offset       -                   bytes         -
//	OpCopyFrom       volume     byte offset       source byte offset  bytes         u64 source volume id
//	OpExtents        volume     byte offset       -                   bytes         -          (response payload: 1 byte, 1 if allocated)
//	OpPrepareDevice  -          -                 -                   -             JSON PrepareDeviceRequest (response: JSON)
//	OpChunkList      -          placement group   -                   -             pool id    (epoch; response: u64 volume, u64 chunk pairs)
//	OpChunkPut       volume     chunk byte offset primary's SDS id    ChunkSize     the chunk  (epoch; FlagZero: none)
//	OpChunkRead      reserved: no sender or handler today (answered StatusUnsupported)
//
// OpChunkList and OpChunkPut reuse the header fields: OpChunkList's offset
// is the placement group number, not a byte offset; OpChunkPut's aux is the
// sending primary's SDS id (16 hex digits read as a u64), so that a copy
// refuses a chunk from a primary the map no longer names. Data-path
// operations (OpRead to OpExtents, OpChunkPut) carry the epoch they were
// routed with; a responder with a newer map answers StatusStaleEpoch.
//
// The response's aux is opcode specific too: for StatusMiscompare, the byte
// offset of the first difference; zero otherwise. Its epoch is the
// responder's current epoch.
//
// Before the first frame, every connection runs the handshake of
// secure.go (mutual TLS 1.3 with the cluster's certificates, then frames on
// the raw stream in mode authenticated or inside TLS in mode secure), unless
// both ends run the explicit mode none. The SDS then knows the sender's role
// and refuses, with StatusForbidden, what that role may not do:
//
//	role                      may send
//	target, nbd, client       OpPing, OpFlush, OpRead to OpExtents (not FlagReplica)
//	sds                       all of the above, FlagReplica writes, OpChunkList, OpChunkPut
//	gateway, mdm              OpPing, OpPrepareDevice
//
// A client that sends a frame without a handshake to an SDS that requires
// one gets that frame answered StatusForbidden, and the connection closed.
//
// An error response's payload is a UTF-8 message. A receiver drops the
// connection on a bad magic, a payload over MaxPayload or a checksum
// mismatch: the stream can no longer be trusted.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

const (
	ReqMagic   = 0x43525131 // "CRQ1"
	RespMagic  = 0x43525331 // "CRS1"
	ReqHeader  = 64
	RespHeader = 40
	// MaxPayload bounds every frame: a 1 MiB chunk compare-and-write carries
	// two chunks, and control messages are small.
	MaxPayload = 4<<20 + 4096
)

// Opcodes.
const (
	OpPing          = 1
	OpRead          = 2
	OpWrite         = 3
	OpFlush         = 4
	OpCompareWrite  = 5 // payload: compare bytes then write bytes
	OpWriteZeroes   = 6 // FlagUnmap: deallocate whole chunks
	OpWriteSame     = 7 // payload: one block pattern
	OpUnmap         = 8
	OpCopyFrom      = 9  // payload: 8-byte source volume id; aux: source offset
	OpExtents       = 10 // response payload: one byte, 1 if the chunk is allocated
	OpPrepareDevice = 20 // payload: JSON PrepareDeviceRequest
	OpChunkList     = 30 // list allocated chunks of a placement group (rebuild)
	OpChunkRead     = 31 // read a whole chunk for a copy (rebuild/resync)
	OpChunkPut      = 32 // install a whole chunk copy (rebuild/resync)
)

// Flags.
const (
	FlagFUA     = 1 << 0
	FlagReplica = 1 << 1 // primary -> secondary: apply, don't forward
	FlagUnmap   = 1 << 2
	FlagZero    = 1 << 3 // OpChunkPut: the chunk is all zeros / deallocated
	FlagRetry   = 1 << 4 // OpCompareWrite: a retry after an attempt of unknown outcome
)

// Status codes.
const (
	StatusOK          = 0
	StatusStaleEpoch  = 1 // sender's epoch is older than the responder's
	StatusNotPrimary  = 2 // responder does not hold this copy at this epoch
	StatusMiscompare  = 3 // aux = byte offset of the first difference
	StatusIOError     = 4
	StatusInvalid     = 5 // bad request; OpPrepareDevice: refused for any reason but "taken"
	StatusNoSpace     = 6
	StatusUnavailable = 7 // a copy is unreachable; retry after a map change
	StatusChecksum    = 8
	StatusUnsupported = 9
	StatusNotFound    = 10
	StatusRefused     = 11 // a control request refused: message says why; OpPrepareDevice: the device is taken (in use, or holds data only force may destroy)
	StatusInternal    = 12
	StatusForbidden   = 13 // the sender's role may not do this (or it is not authenticated): message says who and what
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Request is one decoded request.
type Request struct {
	Op      uint8
	Flags   uint8
	ID      uint64
	Epoch   uint64
	Volume  uint64
	Offset  uint64
	Aux     uint64
	Length  uint32
	Payload []byte
	// OnRetry, if set, is called (by the data client, not sent) when an
	// attempt failed without a definite answer, before the request is sent
	// again.
	OnRetry func(*Request)
	// Alone is set by the server (not sent): no other request was buffered
	// behind this one on its connection when it was read.
	Alone bool
	// Inline is set by the server (not sent): the handler runs on the
	// connection's reader (ServeInline's rule) or on a local caller's
	// goroutine (ServeLocal), so everything behind the request waits for
	// it. A handler that would have to wait for a device may then answer
	// WouldBlock(): the request is run again, with Inline false, on a
	// goroutine of its own, and nothing is sent for the first attempt.
	Inline bool
}

// MaxInlineRead is the largest read a data server serves on a
// connection's reader (sds's inline rule), and the largest a data client
// sends on its first connection with the other small reads (client's
// Together rule).
const MaxInlineRead = 128 << 10

// statusWouldBlock marks WouldBlock's answer. It is never sent: the server
// runs the request again instead (a handler that returns it for a request
// that is not Inline gets StatusInternal sent in its place).
const statusWouldBlock = 0xffff

// WouldBlock is a handler's answer to an Inline request it cannot serve
// without waiting (a read the page cache cannot satisfy at once): run it
// again on a goroutine of its own.
func WouldBlock() Response { return Response{Status: statusWouldBlock} }

// misusedWouldBlock is sent in place of WouldBlock's answer to a request
// that was not Inline (a handler bug).
func misusedWouldBlock() Response {
	return Errorf(StatusInternal, "handler answered would-block to a request not served inline")
}

// IsWouldBlock reports whether resp is WouldBlock's answer.
func IsWouldBlock(resp Response) bool { return resp.Status == statusWouldBlock }

// Response is one decoded response.
type Response struct {
	Status  uint16
	ID      uint64
	Epoch   uint64
	Aux     uint64
	Payload []byte
}

// Sentinel errors of the framing layer.
var (
	ErrBadMagic = errors.New("wire: bad magic")
	ErrTooLarge = errors.New("wire: payload too large")
	ErrChecksum = errors.New("wire: checksum mismatch")
)

// PutRequestHeader encodes r's header (with r.Payload's length and CRC) into h.
func PutRequestHeader(h []byte, r *Request) {
	_ = h[ReqHeader-1]
	be := binary.BigEndian
	be.PutUint32(h[0:], ReqMagic)
	h[4], h[5] = r.Op, r.Flags
	be.PutUint16(h[6:], 0)
	be.PutUint64(h[8:], r.ID)
	be.PutUint64(h[16:], r.Epoch)
	be.PutUint64(h[24:], r.Volume)
	be.PutUint64(h[32:], r.Offset)
	be.PutUint64(h[40:], r.Aux)
	be.PutUint32(h[48:], r.Length)
	be.PutUint32(h[52:], uint32(len(r.Payload)))
	be.PutUint32(h[56:], 0)
	c := crc32.Update(0, castagnoli, h[:60])
	be.PutUint32(h[60:], crc32.Update(c, castagnoli, r.Payload))
}

// PutResponseHeader encodes r's header into h.
func PutResponseHeader(h []byte, r *Response) {
	_ = h[RespHeader-1]
	be := binary.BigEndian
	be.PutUint32(h[0:], RespMagic)
	be.PutUint16(h[4:], r.Status)
	be.PutUint16(h[6:], 0)
	be.PutUint64(h[8:], r.ID)
	be.PutUint64(h[16:], r.Epoch)
	be.PutUint64(h[24:], r.Aux)
	be.PutUint32(h[32:], uint32(len(r.Payload)))
	c := crc32.Update(0, castagnoli, h[:36])
	be.PutUint32(h[36:], crc32.Update(c, castagnoli, r.Payload))
}

// ParseRequestHeader decodes a request header; it returns the payload
// length still to be read and the partial CRC to finish over the payload.
func ParseRequestHeader(h []byte, r *Request) (payloadLen int, crc uint32, want uint32, err error) {
	be := binary.BigEndian
	if be.Uint32(h[0:]) != ReqMagic {
		return 0, 0, 0, ErrBadMagic
	}
	r.Op, r.Flags = h[4], h[5]
	r.ID = be.Uint64(h[8:])
	r.Epoch = be.Uint64(h[16:])
	r.Volume = be.Uint64(h[24:])
	r.Offset = be.Uint64(h[32:])
	r.Aux = be.Uint64(h[40:])
	r.Length = be.Uint32(h[48:])
	n := be.Uint32(h[52:])
	if n > MaxPayload {
		return 0, 0, 0, fmt.Errorf("%w: %d bytes", ErrTooLarge, n)
	}
	return int(n), crc32.Update(0, castagnoli, h[:60]), be.Uint32(h[60:]), nil
}

// ParseResponseHeader decodes a response header.
func ParseResponseHeader(h []byte, r *Response) (payloadLen int, crc uint32, want uint32, err error) {
	be := binary.BigEndian
	if be.Uint32(h[0:]) != RespMagic {
		return 0, 0, 0, ErrBadMagic
	}
	r.Status = be.Uint16(h[4:])
	r.ID = be.Uint64(h[8:])
	r.Epoch = be.Uint64(h[16:])
	r.Aux = be.Uint64(h[24:])
	n := be.Uint32(h[32:])
	if n > MaxPayload {
		return 0, 0, 0, fmt.Errorf("%w: %d bytes", ErrTooLarge, n)
	}
	return int(n), crc32.Update(0, castagnoli, h[:36]), be.Uint32(h[36:]), nil
}

// ReadRequest reads one request from r; the payload is read into a buffer
// from alloc (which must return a slice of exactly n bytes).
func ReadRequest(rd io.Reader, hdr []byte, req *Request, alloc func(n int) []byte) error {
	if _, err := io.ReadFull(rd, hdr[:ReqHeader]); err != nil {
		return err
	}
	n, crc, want, err := ParseRequestHeader(hdr, req)
	if err != nil {
		return err
	}
	req.Payload = nil
	if n > 0 {
		req.Payload = alloc(n)
		if _, err := io.ReadFull(rd, req.Payload); err != nil {
			return err
		}
		crc = crc32.Update(crc, castagnoli, req.Payload)
	}
	if crc != want {
		return ErrChecksum
	}
	return nil
}

// StatusError is a non-OK response turned into an error.
type StatusError struct {
	Status  uint16
	Aux     uint64
	Epoch   uint64
	Message string
}

func (e *StatusError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("%s: %s", StatusName(e.Status), e.Message)
	}
	return StatusName(e.Status)
}

// StatusName names a status code for messages.
func StatusName(s uint16) string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusStaleEpoch:
		return "stale epoch"
	case StatusNotPrimary:
		return "not primary"
	case StatusMiscompare:
		return "miscompare"
	case StatusIOError:
		return "i/o error"
	case StatusInvalid:
		return "invalid request"
	case StatusNoSpace:
		return "no space"
	case StatusUnavailable:
		return "unavailable"
	case StatusChecksum:
		return "checksum mismatch"
	case StatusUnsupported:
		return "unsupported"
	case StatusNotFound:
		return "not found"
	case StatusRefused:
		return "refused"
	case StatusInternal:
		return "internal error"
	case StatusForbidden:
		return "forbidden"
	}
	return fmt.Sprintf("status %d", s)
}

// IsStatus reports whether err is a StatusError with status s.
func IsStatus(err error, s uint16) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Status == s
}
