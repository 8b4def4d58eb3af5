// Package nbd serves Cairn volumes over the Network Block Device protocol:
// fixed newstyle negotiation, simple replies, many requests in flight per
// connection.
package nbd

// Wire format. The NBD protocol carries no version number; what it has is
// negotiated features. This server speaks the protocol of
// NetworkBlockDevice/nbd doc/proto.md: "fixed newstyle" negotiation with the
// INFO extension (INFO/GO, block sizes) and STARTTLS, simple replies only; no
// oldstyle, no structured replies, no extended headers, no block status (those
// options get NBD_REP_ERR_UNSUP, so clients fall back). Any change to this
// set must keep older clients working. All integers are big-endian.
//
// TLS (Server.TLS set) is the protocol's FORCEDTLS mode: before STARTTLS
// every option but STARTTLS and ABORT is answered NBD_REP_ERR_TLS_REQD and
// EXPORT_NAME ends the connection, so nothing about the exports is said in
// clear; STARTTLS (no data) is answered NBD_REP_ACK, then the TLS handshake
// runs on the same connection and haggling goes on inside it (no new
// greeting, no new client flags). Without TLS, STARTTLS gets ERR_UNSUP.
//
// Handshake (server first):
//
//	S: u64 NBDMAGIC, u64 IHAVEOPT, u16 handshake flags (FIXED_NEWSTYLE|NO_ZEROES)
//	C: u32 client flags (C_FIXED_NEWSTYLE|C_NO_ZEROES; any other bit: hard disconnect)
//
// Options (repeated until EXPORT_NAME, a successful GO, or ABORT):
//
//	C: u64 IHAVEOPT, u32 option, u32 length, length bytes of data
//	S: u64 optReplyMagic, u32 option, u32 reply type, u32 length, data
//
// EXPORT_NAME is answered without a reply header:
//
//	S: u64 export size, u16 transmission flags, [124 zero bytes unless NO_ZEROES]
//
// INFO/GO data: u32 name length, name, u16 n, n × u16 information type.
//
// Transmission:
//
//	C: u32 requestMagic, u16 command flags, u16 type, u64 cookie, u64 offset, u32 length, [length bytes for WRITE]
//	S: u32 simpleReplyMagic, u32 error, u64 cookie, [length bytes for a successful READ]
const (
	nbdMagic         uint64 = 0x4e42444d41474943 // "NBDMAGIC"
	optMagic         uint64 = 0x49484156454f5054 // "IHAVEOPT"
	optReplyMagic    uint64 = 0x0003e889045565a9
	requestMagic     uint32 = 0x25609513
	simpleReplyMagic uint32 = 0x67446698

	requestHeaderLen = 28
	replyHeaderLen   = 16
)

// Handshake flags (server) and client flags.
const (
	flagFixedNewstyle  uint16 = 1 << 0
	flagNoZeroes       uint16 = 1 << 1
	flagCFixedNewstyle uint32 = 1 << 0
	flagCNoZeroes      uint32 = 1 << 1
)

// Option types.
const (
	optExportName      uint32 = 1
	optAbort           uint32 = 2
	optList            uint32 = 3
	optStartTLS        uint32 = 5
	optInfo            uint32 = 6
	optGo              uint32 = 7
	optStructuredReply uint32 = 8
)

// Option reply types; errors have bit 31 set.
const (
	repAck    uint32 = 1
	repServer uint32 = 2
	repInfo   uint32 = 3

	repErrUnsup   uint32 = 1<<31 + 1
	repErrPolicy  uint32 = 1<<31 + 2
	repErrInvalid uint32 = 1<<31 + 3
	repErrTLSReqd uint32 = 1<<31 + 5
	repErrUnknown uint32 = 1<<31 + 6
	repErrTooBig  uint32 = 1<<31 + 9
)

// Information types for INFO/GO.
const (
	infoExport      uint16 = 0
	infoName        uint16 = 1
	infoDescription uint16 = 2
	infoBlockSize   uint16 = 3
)

// Transmission flags.
const (
	tflagHasFlags        uint16 = 1 << 0
	tflagReadOnly        uint16 = 1 << 1
	tflagSendFlush       uint16 = 1 << 2
	tflagSendFUA         uint16 = 1 << 3
	tflagSendTrim        uint16 = 1 << 5
	tflagSendWriteZeroes uint16 = 1 << 6
	tflagCanMultiConn    uint16 = 1 << 8
	tflagSendCache       uint16 = 1 << 10
	tflagSendFastZero    uint16 = 1 << 11
)

// Commands.
const (
	cmdRead        uint16 = 0
	cmdWrite       uint16 = 1
	cmdDisc        uint16 = 2
	cmdFlush       uint16 = 3
	cmdTrim        uint16 = 4
	cmdCache       uint16 = 5
	cmdWriteZeroes uint16 = 6
	numCommands           = 7
)

// Command flags.
const (
	cmdFlagFUA      uint16 = 1 << 0
	cmdFlagNoHole   uint16 = 1 << 1
	cmdFlagFastZero uint16 = 1 << 4
)

// Error values in simple replies (the protocol's fixed errno subset).
const (
	errPerm     uint32 = 1
	errIO       uint32 = 5
	errInval    uint32 = 22
	errNoSpc    uint32 = 28
	errShutdown uint32 = 108
)

// Limits. They bound what a client can make the server allocate or do.
const (
	// minBlockSize is the sector size of every Cairn volume: writes and
	// write-zeroes must be aligned to it.
	minBlockSize = 512
	// preferredBlockSize is what clients should use to avoid
	// read-modify-write in the data servers.
	preferredBlockSize = 4096
	// maxPayload is the largest READ or WRITE accepted (2^25, the size the
	// protocol says no server should treat as an attack).
	maxPayload = 32 << 20
	// maxDiscard is how much of an oversized WRITE payload the server reads
	// and throws away to keep the stream in sync before answering EINVAL;
	// anything bigger gets a hard disconnect.
	maxDiscard = 64 << 20
	// maxOptionLen bounds option data; maxNameLen is the protocol's string
	// limit for export names.
	maxOptionLen = 64 << 10
	maxNameLen   = 4096
	// maxOptionDiscard: larger option data is not read (hard disconnect).
	maxOptionDiscard = 16 << 20
	// maxOptions per connection before the server gives up on the client.
	maxOptions = 1024
	// maxInFlight requests per connection and maxInFlightBytes of their
	// payload buffers: beyond them the server stops reading the socket
	// (TCP back-pressure) until requests complete.
	maxInFlight      = 64
	maxInFlightBytes = 128 << 20
)
