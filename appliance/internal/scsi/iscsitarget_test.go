package scsi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
)

// testTarget is a minimal iSCSI target (RFC 7143) for tests only: it lets
// libiscsi's iscsi-test-cu reach a LUN over loopback without LIO, so the
// SCSI behaviour of this package is checked against the conformance suite
// on its own. It supports what iscsi-test-cu needs and nothing more: no
// authentication, no digests, one connection per session, error recovery
// level 0, commands executed in arrival order per connection.
type testTarget struct {
	lun  *LUN
	name string

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// iSCSI opcodes.
const (
	isNopOut      = 0x00
	isSCSICmd     = 0x01
	isTaskMgmt    = 0x02
	isLogin       = 0x03
	isText        = 0x04
	isDataOut     = 0x05
	isLogout      = 0x06
	isNopIn       = 0x20
	isSCSIResp    = 0x21
	isTaskMgmtRsp = 0x22
	isLoginRsp    = 0x23
	isTextRsp     = 0x24
	isDataIn      = 0x25
	isLogoutRsp   = 0x26
	isR2T         = 0x31
	isReject      = 0x3F
)

// Negotiated limits the target declares.
const (
	ttMaxRecvData = 256 << 10
	ttMaxBurst    = 256 << 10
	ttCmdWindow   = 128
)

// serve accepts connections until ln is closed; every connection's
// goroutine is tracked so close can wait for it.
func (tt *testTarget) serve(ln net.Listener) {
	tt.conns = map[net.Conn]bool{}
	tt.wg.Add(1)
	go func() {
		defer tt.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tt.mu.Lock()
			tt.conns[c] = true
			tt.mu.Unlock()
			tt.wg.Add(1)
			go func() {
				defer tt.wg.Done()
				defer func() {
					c.Close()
					tt.mu.Lock()
					delete(tt.conns, c)
					tt.mu.Unlock()
				}()
				s := &ttConn{tt: tt, rw: bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c)), pending: map[uint32]*ttCmd{}, peerMaxRecv: 8192}
				s.run()
			}()
		}
	}()
}

// close stops serving: the listener must already be closed.
func (tt *testTarget) close() {
	tt.mu.Lock()
	for c := range tt.conns {
		c.Close()
	}
	tt.mu.Unlock()
	tt.wg.Wait()
}

type ttCmd struct {
	bhs     []byte
	cdb     []byte
	data    []byte // data-out received so far, len == EDTL when complete
	got     int
	edtl    int
	lun     []byte
	itt     uint32
	r2tsn   uint32
	pending int // data-out bytes requested by the last R2T and not yet received
}

type ttConn struct {
	tt          *testTarget
	rw          *bufio.ReadWriter
	statSN      uint32
	expCmdSN    uint32
	peerMaxRecv int
	pending     map[uint32]*ttCmd
	ttt         uint32
}

type pdu struct {
	bhs  []byte
	data []byte
}

func (s *ttConn) read() (pdu, error) {
	bhs := make([]byte, 48)
	if _, err := io.ReadFull(s.rw, bhs); err != nil {
		return pdu{}, err
	}
	ahs := int(bhs[4]) * 4
	dlen := int(bhs[5])<<16 | int(bhs[6])<<8 | int(bhs[7])
	if ahs > 0 {
		if _, err := io.CopyN(io.Discard, s.rw, int64(ahs)); err != nil {
			return pdu{}, err
		}
	}
	data := make([]byte, (dlen+3)&^3)
	if _, err := io.ReadFull(s.rw, data); err != nil {
		return pdu{}, err
	}
	return pdu{bhs, data[:dlen]}, nil
}

func (s *ttConn) write(bhs, data []byte) error {
	bhs[5], bhs[6], bhs[7] = byte(len(data)>>16), byte(len(data)>>8), byte(len(data))
	s.rw.Write(bhs)
	s.rw.Write(data)
	if pad := (4 - len(data)%4) % 4; pad > 0 {
		s.rw.Write(make([]byte, pad))
	}
	return s.rw.Flush()
}

// sn fills StatSN (if advance), ExpCmdSN and MaxCmdSN at bytes 24-35.
func (s *ttConn) sn(bhs []byte, advance bool) {
	binary.BigEndian.PutUint32(bhs[24:], s.statSN)
	if advance {
		s.statSN++
	}
	binary.BigEndian.PutUint32(bhs[28:], s.expCmdSN)
	binary.BigEndian.PutUint32(bhs[32:], s.expCmdSN+ttCmdWindow)
}

func (s *ttConn) run() {
	for {
		p, err := s.read()
		if err != nil {
			return
		}
		op := p.bhs[0] & 0x3F
		immediate := p.bhs[0]&0x40 != 0
		switch op {
		case isLogin:
			if s.login(p) != nil {
				return
			}
		case isSCSICmd, isNopOut, isTaskMgmt, isText, isLogout:
			cmdSN := binary.BigEndian.Uint32(p.bhs[24:])
			if !immediate && cmdSN == s.expCmdSN {
				s.expCmdSN++
			}
			switch op {
			case isSCSICmd:
				err = s.scsiCommand(p)
			case isNopOut:
				err = s.nop(p)
			case isTaskMgmt:
				r := make([]byte, 48)
				r[0], r[1] = isTaskMgmtRsp, 0x80
				copy(r[16:20], p.bhs[16:20])
				s.sn(r, true)
				err = s.write(r, nil)
			case isText:
				r := make([]byte, 48)
				r[0], r[1] = isTextRsp, 0x80
				copy(r[16:20], p.bhs[16:20])
				binary.BigEndian.PutUint32(r[20:], 0xFFFFFFFF)
				s.sn(r, true)
				var kv []byte
				if bytes.Contains(p.data, []byte("SendTargets=")) {
					kv = []byte("TargetName=" + s.tt.name + "\x00")
				}
				err = s.write(r, kv)
			case isLogout:
				r := make([]byte, 48)
				r[0], r[1] = isLogoutRsp, 0x80
				copy(r[16:20], p.bhs[16:20])
				s.sn(r, true)
				s.write(r, nil)
				return
			}
		case isDataOut:
			err = s.dataOut(p)
		default:
			r := make([]byte, 48)
			r[0], r[1], r[2] = isReject, 0x80, 0x04 // command not supported
			binary.BigEndian.PutUint32(r[16:], 0xFFFFFFFF)
			s.sn(r, true)
			err = s.write(r, p.bhs)
		}
		if err != nil {
			return
		}
	}
}

// login answers every login request by moving to the stage the initiator
// asks for, with no authentication, accepting its operational keys within
// the target's limits.
func (s *ttConn) login(p pdu) error {
	keys := map[string]string{}
	for _, kv := range strings.Split(string(p.data), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			keys[k] = v
		}
	}
	var out []string
	for k, v := range keys {
		switch k {
		case "InitiatorName", "SessionType", "TargetName", "InitiatorAlias":
		case "AuthMethod":
			out = append(out, "AuthMethod=None")
		case "HeaderDigest", "DataDigest":
			out = append(out, k+"=None")
		case "MaxRecvDataSegmentLength":
			fmt.Sscan(v, &s.peerMaxRecv)
		case "MaxBurstLength", "FirstBurstLength":
			var n int
			fmt.Sscan(v, &n)
			out = append(out, fmt.Sprintf("%s=%d", k, min(n, ttMaxBurst)))
		case "InitialR2T":
			out = append(out, "InitialR2T=Yes")
		case "ImmediateData":
			out = append(out, "ImmediateData="+v)
		case "MaxConnections", "MaxOutstandingR2T":
			out = append(out, k+"=1")
		case "ErrorRecoveryLevel":
			out = append(out, k+"=0")
		case "DataPDUInOrder", "DataSequenceInOrder":
			out = append(out, k+"=Yes")
		case "IFMarker", "OFMarker":
			out = append(out, k+"=No")
		case "DefaultTime2Wait", "DefaultTime2Retain":
			out = append(out, k+"="+v)
		default:
			out = append(out, k+"=NotUnderstood")
		}
	}
	if keys["TargetName"] != "" || keys["SessionType"] != "" {
		out = append(out, "TargetPortalGroupTag=1")
	}
	out = append(out, fmt.Sprintf("MaxRecvDataSegmentLength=%d", ttMaxRecvData))
	r := make([]byte, 48)
	r[0] = isLoginRsp
	r[1] = p.bhs[1] & 0xC3 &^ 0x40 // T and NSG as asked, C clear
	r[1] |= p.bhs[1] & 0x0C        // CSG
	copy(r[8:14], p.bhs[8:14])     // ISID
	if p.bhs[1]&0x80 != 0 && p.bhs[1]&0x03 == 3 {
		binary.BigEndian.PutUint16(r[14:], 1) // TSIH on the final response
	}
	copy(r[16:20], p.bhs[16:20])
	s.statSN = binary.BigEndian.Uint32(p.bhs[28:])
	s.expCmdSN = binary.BigEndian.Uint32(p.bhs[24:])
	s.sn(r, true)
	return s.write(r, []byte(strings.Join(out, "\x00")+"\x00"))
}

func (s *ttConn) nop(p pdu) error {
	itt := binary.BigEndian.Uint32(p.bhs[16:])
	if itt == 0xFFFFFFFF {
		return nil // a reply to our (never sent) NOP-In
	}
	r := make([]byte, 48)
	r[0], r[1] = isNopIn, 0x80
	copy(r[8:16], p.bhs[8:16])
	copy(r[16:20], p.bhs[16:20])
	binary.BigEndian.PutUint32(r[20:], 0xFFFFFFFF)
	s.sn(r, true)
	return s.write(r, p.data)
}

func (s *ttConn) scsiCommand(p pdu) error {
	c := &ttCmd{bhs: p.bhs, cdb: append([]byte(nil), p.bhs[32:48]...), lun: p.bhs[8:16],
		itt: binary.BigEndian.Uint32(p.bhs[16:]), edtl: int(binary.BigEndian.Uint32(p.bhs[20:]))}
	c.cdb = c.cdb[:cdbLength(c.cdb[0])]
	if p.bhs[1]&0x20 == 0 { // no data-out
		return s.execute(c)
	}
	c.data = make([]byte, c.edtl)
	c.got = copy(c.data, p.data)
	return s.more(c)
}

// more asks for the rest of a command's data-out, or runs it.
func (s *ttConn) more(c *ttCmd) error {
	if c.got >= c.edtl {
		delete(s.pending, c.itt)
		return s.execute(c)
	}
	s.pending[c.itt] = c
	if c.pending > 0 {
		return nil // the last R2T is still being answered
	}
	n := min(c.edtl-c.got, ttMaxBurst)
	c.pending = n
	r := make([]byte, 48)
	r[0], r[1] = isR2T, 0x80
	copy(r[8:16], c.lun)
	binary.BigEndian.PutUint32(r[16:], c.itt)
	s.ttt++
	binary.BigEndian.PutUint32(r[20:], s.ttt)
	s.sn(r, false)
	binary.BigEndian.PutUint32(r[36:], c.r2tsn)
	c.r2tsn++
	binary.BigEndian.PutUint32(r[40:], uint32(c.got))
	binary.BigEndian.PutUint32(r[44:], uint32(n))
	return s.write(r, nil)
}

func (s *ttConn) dataOut(p pdu) error {
	c := s.pending[binary.BigEndian.Uint32(p.bhs[16:])]
	if c == nil {
		return nil
	}
	off := int(binary.BigEndian.Uint32(p.bhs[40:]))
	if off <= len(c.data) {
		n := copy(c.data[off:], p.data)
		c.got = max(c.got, off+n)
		c.pending -= n
	}
	if p.bhs[1]&0x80 == 0 { // not the final PDU of this sequence
		return nil
	}
	c.pending = 0
	return s.more(c)
}

// execute runs the command on the LUN and sends data-in and status.
func (s *ttConn) execute(c *ttCmd) error {
	var in []byte
	if c.bhs[1]&0x40 != 0 {
		in = make([]byte, c.edtl)
	}
	resp := s.tt.lun.Execute(context.Background(), c.cdb, c.data, in)
	residual, flags := 0, byte(0)
	if c.bhs[1]&0x40 != 0 && resp.Status == StatusGood && resp.DataInLen < c.edtl {
		residual, flags = c.edtl-resp.DataInLen, 0x02 // underflow
	}
	if resp.Status == StatusGood && resp.DataInLen > 0 {
		data := in[:resp.DataInLen]
		for off, sn := 0, uint32(0); off < len(data); sn++ {
			n := min(len(data)-off, s.peerMaxRecv)
			r := make([]byte, 48)
			r[0] = isDataIn
			last := off+n == len(data)
			copy(r[8:16], c.lun)
			binary.BigEndian.PutUint32(r[16:], c.itt)
			binary.BigEndian.PutUint32(r[20:], 0xFFFFFFFF)
			s.sn(r, last)
			if last {
				r[1] = 0x80 | 0x01 | flags // F, S
				r[3] = resp.Status
				binary.BigEndian.PutUint32(r[44:], uint32(residual))
			}
			binary.BigEndian.PutUint32(r[36:], sn)
			binary.BigEndian.PutUint32(r[40:], uint32(off))
			if err := s.write(r, data[off:off+n]); err != nil {
				return err
			}
			off += n
		}
		return nil
	}
	r := make([]byte, 48)
	r[0], r[1], r[3] = isSCSIResp, 0x80|flags, resp.Status
	binary.BigEndian.PutUint32(r[16:], c.itt)
	s.sn(r, true)
	binary.BigEndian.PutUint32(r[44:], uint32(residual))
	var data []byte
	if len(resp.Sense) > 0 {
		data = make([]byte, 2+len(resp.Sense))
		binary.BigEndian.PutUint16(data, uint16(len(resp.Sense)))
		copy(data[2:], resp.Sense)
	}
	return s.write(r, data)
}

// cdbLength is the CDB length for an operation code group (SAM-5).
func cdbLength(op byte) int {
	switch op >> 5 {
	case 0:
		return 6
	case 1, 2:
		return 10
	case 4:
		return 16
	case 5:
		return 12
	}
	return 16
}
