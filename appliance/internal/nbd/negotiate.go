package nbd

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-storage/cairn/appliance/internal/blockdev"
	"github.com/cairn-storage/cairn/appliance/internal/pki"
)

// readBufSize holds many 4 KiB write requests, so a burst is read with one
// system call; larger payloads are read straight into their buffers.
const readBufSize = 128 << 10

// conn is one client connection. The goroutine running ServeConn owns it:
// it reads options and requests; request goroutines (counted by workers)
// only send replies through reply().
type conn struct {
	srv    *Server
	nc     net.Conn // the TLS connection once STARTTLS is done
	br     *bufio.Reader
	remote net.Addr
	log    *slog.Logger

	// dlMu orders deadline changes against interrupt: once closing is set,
	// the past read deadline that stops the reader must stay. It also
	// guards the switch of nc to TLS, which interrupt may race with.
	dlMu    sync.Mutex
	closing bool

	// tlsUp: STARTTLS and the handshake are done; peer is who the client
	// certificate names (zero without a Cairn certificate).
	tlsUp bool
	peer  pki.Peer
	// askedInClear: a TLS-only server answered an option NBD_REP_ERR_TLS_REQD.
	askedInClear bool

	// Set by negotiate before transmission starts.
	vol      blockdev.Volume
	readOnly bool
	size     uint64

	// Transmission state.
	opCtx    context.Context // volume calls; outlives the server ctx by the shutdown grace
	opCancel context.CancelFunc
	workers  sync.WaitGroup
	budget   budget

	// Reply writer: replies are appended to wbuf under wmu and written when
	// no other reply is pending, so a burst of completions costs one write.
	wmu     sync.Mutex
	wbuf    []byte
	werr    error
	pending atomic.Int64
	// held: replies of async reads wait in wbuf for the volume's idle
	// notification (see readAsync), which writes them in one go.
	held atomic.Bool
	// ioErrLogged keeps a failing volume from flooding the log.
	ioErrLogged atomic.Bool
}

func newConn(s *Server, nc net.Conn) *conn {
	return &conn{
		srv:    s,
		nc:     nc,
		br:     bufio.NewReaderSize(nc, readBufSize),
		remote: nc.RemoteAddr(),
		log:    s.log.With("remote", addrString(nc.RemoteAddr())),
	}
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// interrupt stops the reader (server shutdown): the blocked read returns a
// deadline error; requests in flight carry on.
func (c *conn) interrupt() {
	c.dlMu.Lock()
	defer c.dlMu.Unlock()
	c.closing = true
	c.nc.SetReadDeadline(time.Unix(1, 0))
}

func (c *conn) setDeadline(t time.Time) {
	c.dlMu.Lock()
	defer c.dlMu.Unlock()
	if !c.closing {
		c.nc.SetDeadline(t)
	}
}

// errHardDisconnect ends negotiation without a reply: the protocol gives the
// server no way to report the problem, or the client broke a MUST.
var errHardDisconnect = errors.New("hard disconnect")

// negotiate runs the fixed newstyle handshake and option haggling. It
// returns true when the connection enters transmission with c.vol set.
func (c *conn) negotiate(ctx context.Context) bool {
	c.setDeadline(time.Now().Add(c.srv.handshakeTimeout()))
	err := c.haggle(ctx)
	if err == nil {
		c.setDeadline(time.Time{})
		return true
	}
	switch {
	case ctx.Err() != nil:
		c.log.Debug("nbd: negotiation interrupted by shutdown")
	case errors.Is(err, errTLSRefused), errors.Is(err, errNoTLS):
		// A client without the right certificate: a security event.
		c.refused(err.Error())
	case c.askedInClear && !c.tlsUp:
		// However it left (ABORT, EOF), it was refused.
		c.refused("it asked for exports without TLS (" + err.Error() + ")")
	case errors.Is(err, errAborted):
		c.log.Debug("nbd: client aborted negotiation")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		c.log.Debug("nbd: client left during negotiation", "err", err)
	default:
		c.log.Info("nbd: negotiation failed; connection closed", "err", err)
	}
	return false
}

var errAborted = errors.New("client sent NBD_OPT_ABORT")

// errTLSRefused: the TLS handshake failed (no certificate, another
// cluster's, a wrong role or host). errNoTLS: a client of a TLS-only server
// tried to enter transmission without TLS.
var (
	errTLSRefused = errors.New("TLS handshake refused")
	errNoTLS      = errors.New("plain NBD refused: this server requires TLS")
)

func (c *conn) haggle(ctx context.Context) error {
	var greet [18]byte
	binary.BigEndian.PutUint64(greet[0:], nbdMagic)
	binary.BigEndian.PutUint64(greet[8:], optMagic)
	binary.BigEndian.PutUint16(greet[16:], flagFixedNewstyle|flagNoZeroes)
	if _, err := c.nc.Write(greet[:]); err != nil {
		return fmt.Errorf("send greeting: %w", err)
	}
	var cf [4]byte
	if _, err := io.ReadFull(c.br, cf[:]); err != nil {
		return fmt.Errorf("read client flags: %w", err)
	}
	clientFlags := binary.BigEndian.Uint32(cf[:])
	if clientFlags&^(flagCFixedNewstyle|flagCNoZeroes) != 0 {
		return fmt.Errorf("client flags %#x have unknown bits: %w", clientFlags, errHardDisconnect)
	}
	// A client without C_FIXED_NEWSTYLE can only send EXPORT_NAME, which
	// this server handles the same way, so it is served too.
	noZeroes := clientFlags&flagCNoZeroes != 0

	var hdr [16]byte
	for n := 0; ; n++ {
		if n >= maxOptions {
			return fmt.Errorf("more than %d options: %w", maxOptions, errHardDisconnect)
		}
		if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
			return fmt.Errorf("read option header: %w", err)
		}
		if m := binary.BigEndian.Uint64(hdr[0:]); m != optMagic {
			return fmt.Errorf("bad option magic %#x: %w", m, errHardDisconnect)
		}
		opt := binary.BigEndian.Uint32(hdr[8:])
		length := binary.BigEndian.Uint32(hdr[12:])
		if length > maxOptionLen {
			if opt == optExportName || length > maxOptionDiscard {
				return fmt.Errorf("option %d with %d bytes of data: %w", opt, length, errHardDisconnect)
			}
			if _, err := io.CopyN(io.Discard, c.br, int64(length)); err != nil {
				return fmt.Errorf("skip option data: %w", err)
			}
			if err := c.optReply(opt, repErrTooBig, []byte(fmt.Sprintf("option data too long (%d bytes, limit %d)", length, maxOptionLen))); err != nil {
				return err
			}
			continue
		}
		data := make([]byte, length)
		if _, err := io.ReadFull(c.br, data); err != nil {
			return fmt.Errorf("read option data: %w", err)
		}
		done, err := c.option(ctx, opt, data, noZeroes)
		if err != nil || done {
			return err
		}
	}
}

// option handles one option; done means transmission starts.
func (c *conn) option(ctx context.Context, opt uint32, data []byte, noZeroes bool) (bool, error) {
	if c.srv.TLS != nil && !c.tlsUp {
		// FORCEDTLS: nothing but STARTTLS and ABORT before TLS, so no
		// export name or size is ever sent in clear.
		switch opt {
		case optStartTLS:
			return false, c.startTLS(ctx, data)
		case optAbort:
		case optExportName:
			// Cannot be answered with an error: the protocol says end it.
			return false, fmt.Errorf("NBD_OPT_EXPORT_NAME before NBD_OPT_STARTTLS: %w", errNoTLS)
		default:
			c.askedInClear = true
			return false, c.optReply(opt, repErrTLSReqd, []byte(tlsRequiredMsg))
		}
	}
	switch opt {
	case optExportName:
		if len(data) > maxNameLen {
			return false, fmt.Errorf("export name of %d bytes: %w", len(data), errHardDisconnect)
		}
		name := string(data)
		if err := c.lookup(ctx, name); err != nil {
			// EXPORT_NAME cannot be answered with an error.
			return false, fmt.Errorf("export %q: %v: %w", name, err, errHardDisconnect)
		}
		reply := make([]byte, 10, 10+124)
		binary.BigEndian.PutUint64(reply[0:], c.size)
		binary.BigEndian.PutUint16(reply[8:], transmissionFlags(c.readOnly))
		if !noZeroes {
			reply = reply[:10+124]
		}
		if _, err := c.nc.Write(reply); err != nil {
			return false, fmt.Errorf("send export info: %w", err)
		}
		return true, nil

	case optAbort:
		// Best effort: the client may already have closed.
		_ = c.optReply(opt, repAck, nil)
		return false, errAborted

	case optList:
		if len(data) != 0 {
			return false, c.optReply(opt, repErrInvalid, []byte("NBD_OPT_LIST takes no data"))
		}
		lctx, cancel := context.WithTimeout(ctx, c.srv.handshakeTimeout())
		names, err := c.srv.resolver.List(lctx, c.remote)
		cancel()
		if err != nil {
			c.log.Warn("nbd: listing exports failed", "err", err)
			return false, c.optReply(opt, repErrPolicy, []byte("export list unavailable; try again later"))
		}
		for _, name := range names {
			if len(name) > maxNameLen {
				continue
			}
			d := make([]byte, 4+len(name))
			binary.BigEndian.PutUint32(d, uint32(len(name)))
			copy(d[4:], name)
			if err := c.optReply(opt, repServer, d); err != nil {
				return false, err
			}
		}
		return false, c.optReply(opt, repAck, nil)

	case optInfo, optGo:
		name, infos, ok := parseInfoRequest(data)
		if !ok {
			return false, c.optReply(opt, repErrInvalid, []byte("malformed NBD_OPT_INFO/GO data"))
		}
		if err := c.lookup(ctx, name); err != nil {
			return false, c.optReply(opt, repErrUnknown, []byte(fmt.Sprintf("export %q is not available to this host", name)))
		}
		if err := c.sendInfos(opt, name, infos); err != nil {
			return false, err
		}
		if err := c.optReply(opt, repAck, nil); err != nil {
			return false, err
		}
		if opt == optGo {
			return true, nil
		}
		c.vol = nil
		return false, nil

	case optStartTLS:
		if c.tlsUp {
			return false, c.optReply(opt, repErrInvalid, []byte("TLS is already running on this connection"))
		}
		return false, c.optReply(opt, repErrUnsup, []byte("this server does not offer TLS (cairn nbd --tls off)"))

	default:
		// STRUCTURED_REPLY, meta contexts, extended headers and anything
		// newer: not supported.
		return false, c.optReply(opt, repErrUnsup, nil)
	}
}

// refused counts, logs and reports (Server.OnRefused) a refused client.
// peer is what its certificate claims, verified or not.
func (c *conn) refused(reason string) {
	c.srv.stats.refused.Add(1)
	claims := ""
	if c.peer != (pki.Peer{}) {
		claims = c.peer.String()
	}
	c.log.Warn("nbd: client refused", "reason", reason, "claims", claims)
	if c.srv.OnRefused != nil {
		c.srv.OnRefused(addrString(c.remote), claims, reason)
	}
}

// tlsRequiredMsg is the text of every NBD_REP_ERR_TLS_REQD: what the client
// needs to connect.
const tlsRequiredMsg = "this server requires TLS with a client certificate of its Cairn cluster " +
	"(role host, issued with 'cairn pki issue --role host --name HOST'): connect with TLS " +
	"(qemu: tls-creds-x509 endpoint=client; libnbd: nbds:// URI)"

// startTLS answers STARTTLS and runs the TLS handshake; from then on c.nc
// and c.br are the TLS connection. Any failure after the ACK ends the
// connection (the protocol has no way back to clear text).
func (c *conn) startTLS(ctx context.Context, data []byte) error {
	if len(data) != 0 {
		return c.optReply(optStartTLS, repErrInvalid, []byte("NBD_OPT_STARTTLS takes no data"))
	}
	if err := c.optReply(optStartTLS, repAck, nil); err != nil {
		return err
	}
	// Bytes already read past STARTTLS were sent before the client saw the
	// ACK, in clear: a man in the middle may have put them there to be
	// taken as if they came through TLS (the STARTTLS command injection
	// attack). A correct client sends nothing until the ACK.
	if n := c.br.Buffered(); n > 0 {
		return fmt.Errorf("%d bytes sent after NBD_OPT_STARTTLS before its reply: %w", n, errHardDisconnect)
	}
	tc := tls.Server(c.nc, c.srv.TLS)
	if err := tc.HandshakeContext(ctx); err != nil {
		// Who the refused certificate claims to be, for the report.
		if pc := tc.ConnectionState().PeerCertificates; len(pc) > 0 {
			c.peer, _ = pki.PeerOf(pc[0])
		}
		return fmt.Errorf("%w: %v", errTLSRefused, err)
	}
	c.dlMu.Lock()
	c.nc = tc
	c.dlMu.Unlock()
	c.br.Reset(tc)
	c.tlsUp = true
	if p, err := pki.PeerFromState(tc.ConnectionState()); err == nil {
		c.peer = p
		c.log = c.log.With("peer", p.String())
	}
	c.log.Debug("nbd: TLS established", "version", tls.VersionName(tc.ConnectionState().Version))
	return nil
}

// parseInfoRequest decodes INFO/GO data: u32 name length, name, u16 count,
// count × u16 information type.
func parseInfoRequest(d []byte) (string, []uint16, bool) {
	if len(d) < 6 {
		return "", nil, false
	}
	nl := binary.BigEndian.Uint32(d)
	if nl > maxNameLen || uint64(len(d)) < 4+uint64(nl)+2 {
		return "", nil, false
	}
	name := string(d[4 : 4+nl])
	rest := d[4+nl:]
	n := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if len(rest) != 2*n {
		return "", nil, false
	}
	infos := make([]uint16, n)
	for i := range infos {
		infos[i] = binary.BigEndian.Uint16(rest[2*i:])
	}
	return name, infos, true
}

// lookup resolves name and records the volume for transmission.
func (c *conn) lookup(ctx context.Context, name string) error {
	lctx, cancel := context.WithTimeout(ctx, c.srv.handshakeTimeout())
	defer cancel()
	vol, ro, err := c.srv.resolver.Lookup(lctx, name, c.remote)
	if err == nil && vol == nil {
		err = ErrUnknownExport
	}
	if err != nil {
		if !errors.Is(err, ErrUnknownExport) {
			c.log.Warn("nbd: export lookup failed", "export", name, "err", err)
		}
		return err
	}
	size := vol.Size()
	if size < 0 {
		return fmt.Errorf("volume %q reports negative size %d", name, size)
	}
	c.vol, c.readOnly, c.size = vol, ro, uint64(size)
	c.log = c.srv.log.With("remote", addrString(c.remote), "export", name)
	if c.tlsUp && c.peer != (pki.Peer{}) {
		c.log = c.log.With("peer", c.peer.String())
	}
	return nil
}

// sendInfos answers INFO/GO: NBD_INFO_EXPORT always, the block sizes always
// (the protocol lets a server send them unasked; clients that ignore them
// still get EINVAL for unaligned writes), name and description on request.
func (c *conn) sendInfos(opt uint32, name string, infos []uint16) error {
	var b [18]byte
	binary.BigEndian.PutUint16(b[0:], infoExport)
	binary.BigEndian.PutUint64(b[2:], c.size)
	binary.BigEndian.PutUint16(b[10:], transmissionFlags(c.readOnly))
	if err := c.optReply(opt, repInfo, b[:12]); err != nil {
		return err
	}
	binary.BigEndian.PutUint16(b[0:], infoBlockSize)
	binary.BigEndian.PutUint32(b[2:], minBlockSize)
	binary.BigEndian.PutUint32(b[6:], preferredBlockSize)
	binary.BigEndian.PutUint32(b[10:], maxPayload)
	if err := c.optReply(opt, repInfo, b[:14]); err != nil {
		return err
	}
	sentName, sentDesc := false, false
	for _, info := range infos {
		var text string
		switch {
		case info == infoName && !sentName:
			sentName, text = true, name
		case info == infoDescription && !sentDesc:
			sentDesc, text = true, "Cairn volume "+c.vol.Name()
			if len(text) > maxNameLen {
				text = text[:maxNameLen]
			}
		default:
			continue
		}
		d := make([]byte, 2+len(text))
		binary.BigEndian.PutUint16(d, info)
		copy(d[2:], text)
		if err := c.optReply(opt, repInfo, d); err != nil {
			return err
		}
	}
	return nil
}

func (c *conn) optReply(opt, typ uint32, data []byte) error {
	b := make([]byte, 20+len(data))
	binary.BigEndian.PutUint64(b[0:], optReplyMagic)
	binary.BigEndian.PutUint32(b[8:], opt)
	binary.BigEndian.PutUint32(b[12:], typ)
	binary.BigEndian.PutUint32(b[16:], uint32(len(data)))
	copy(b[20:], data)
	if _, err := c.nc.Write(b); err != nil {
		return fmt.Errorf("send option reply: %w", err)
	}
	return nil
}

// transmissionFlags: every volume is safe with several connections (its
// writes are acknowledged only once on every copy and there is no
// per-connection cache), so CAN_MULTI_CONN is always set.
func transmissionFlags(readOnly bool) uint16 {
	f := tflagHasFlags | tflagSendFlush | tflagSendFUA | tflagCanMultiConn | tflagSendCache
	if readOnly {
		f |= tflagReadOnly
	} else {
		f |= tflagSendTrim | tflagSendWriteZeroes | tflagSendFastZero
	}
	return f
}
