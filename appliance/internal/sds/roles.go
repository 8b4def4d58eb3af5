package sds

// roles.go: what each role may ask of an SDS. The handshake (wire's
// secure.go) tells who sent a request; a request its role may not send is
// answered StatusForbidden, logged (rate-limited) and never executed.

import (
	"fmt"

	"github.com/cairn-storage/cairn/appliance/internal/pki"
	"github.com/cairn-storage/cairn/appliance/internal/wire"
)

// mayDo reports whether a peer of role may send req. Only SDSs move copies
// (FlagReplica writes from a primary, OpChunkPut and OpChunkList of
// rebuild and resync): a frontend's certificate must not be able to write
// one copy behind its primary's back. Only the gateway (cairnctl device
// add, through sdsrpc.Prober) and the MDM prepare devices.
func mayDo(role string, req *wire.Request) bool {
	switch role {
	case pki.RoleSDS:
		return req.Op != wire.OpPrepareDevice
	case pki.RoleTarget, pki.RoleNBD, pki.RoleClient:
		switch req.Op {
		case wire.OpPing, wire.OpFlush:
			return true
		case wire.OpRead, wire.OpWrite, wire.OpCompareWrite, wire.OpWriteZeroes, wire.OpWriteSame, wire.OpUnmap, wire.OpCopyFrom, wire.OpExtents:
			return req.Flags&wire.FlagReplica == 0
		}
		return false
	case pki.RoleGateway, pki.RoleMDM:
		return req.Op == wire.OpPing || req.Op == wire.OpPrepareDevice
	}
	return false
}

// forbid answers a request its sender's role may not send, and logs it.
func (s *Server) forbid(peer pki.Peer, req *wire.Request) (wire.Response, func()) {
	what := fmt.Sprintf("opcode %d", req.Op)
	if req.Flags&wire.FlagReplica != 0 {
		what += " with FlagReplica"
	}
	s.reporter.Refused("data path", "", peer.String(), "may not send "+what)
	if ok, n := s.refusals.Allow(peer.String() + " " + what); ok {
		s.log.Warn("data-path request refused: the sender's role may not send it", "peer", peer.String(), "request", what, "volume", fmt.Sprintf("%016x", req.Volume), "offset", req.Offset, "suppressed", n)
	}
	return errResp(wire.StatusForbidden, fmt.Errorf("%s may not send %s to an SDS (role %s)", peer, what, peer.Role))
}
