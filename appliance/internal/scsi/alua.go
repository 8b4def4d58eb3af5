package scsi

// Cairn's ALUA story (SPC-4 5.16), the one the code, REPORT TARGET PORT
// GROUPS and docs/vsphere.md tell:
//
//   - Every SVM exports every volume, with the same NAA identifier, in one
//     target port group that lists every SVM's relative target port
//     (Options.GroupPorts). Access is symmetric: all ports have the same
//     state, so the answer is byte for byte the same on every SVM.
//   - The group is active/optimized while the cluster serves the volume.
//   - When the cluster cannot serve a command within the client's retry
//     budget (blockdev.ErrUnavailable: a whole placement group is away, the
//     MDM has no quorum for a map change, the SVM is cut off from the data
//     network), the command ends NOT READY, LOGICAL UNIT NOT ACCESSIBLE,
//     ASYMMETRIC ACCESS STATE TRANSITION (02/04/0A) and the group is in the
//     transitioning state: REPORT TARGET PORT GROUPS says so (state 0Fh),
//     and advertises T_SUP=1 so that answer is legal. The next command that
//     reaches the volume successfully ends the transition.
//
// SPC-4 allows a device server in the transitioning state to answer 04/0A
// to media-access commands; an initiator that sees 04/0A and reads RTPG
// finds the state it expects. ESXi's VMW_SATP_ALUA and Linux's
// scsi_dh_alua both treat 04/0A as "retry, the path is not dead" and keep
// the I/O queued for up to the implicit transition time, which is the
// pause-not-error behaviour a rebuild or an MDM election needs.
// (tcmu-runner's alua.c models the same state, with T_SUP and an implicit
// transition time.)
//
// One caveat is inherent: the state is per SVM. If one SVM is cut off
// from the data network while the others serve, its answers say
// transitioning while theirs say active/optimized, for a group that lists
// every port; the initiator then retries on the paths that work, which is
// the outcome wanted.

// Asymmetric access states and the supported-states byte of an RTPG
// descriptor.
const (
	aluaActiveOptimized = 0x00
	aluaTransitioning   = 0x0F
	aluaSupported       = 0x80 | 0x01 // T_SUP | AO_SUP
	// implicitTransitionSeconds is the IMPLICIT TRANSITION TIME of the
	// extended RTPG header: how long an initiator should wait for a
	// transition to end. It is the data-path client's default retry
	// budget (client.Cluster.RetryFor), after which a command fails.
	implicitTransitionSeconds = 60
)

// enterTransition records that the volume could not be served and returns
// the sense data for it.
func (l *LUN) enterTransition() *checkCondition {
	l.transitioning.Store(true)
	return newCC(keyNotReady, ascNotAccessibleTransition)
}

// served ends a transition. It only reads the flag on the common path, so
// healthy I/O writes no shared memory.
func (l *LUN) served() {
	if l.transitioning.Load() {
		l.transitioning.Store(false)
	}
}

// aluaState is the group's asymmetric access state now.
func (l *LUN) aluaState() byte {
	if l.transitioning.Load() {
		return aluaTransitioning
	}
	return aluaActiveOptimized
}
