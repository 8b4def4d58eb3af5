package contract

// Guest info keys an SVM publishes to vSphere through VMware Tools (`vmtoolsd --cmd
// 'info-set KEY VALUE'`); vCenter shows them in the VM's extraConfig, where the deploy
// engine reads them. The OVF environment travels the other way, as GuestOVFEnv.
const (
	// GuestReady is "configured" after first boot wrote the configuration, then
	// "ready" once the units of the SVM's roles are active, or "error: <what>".
	GuestReady = "guestinfo.cairn.ready"
	ReadyValue = "ready"
	// GuestThumbprint is the SHA-256 of the gateway's TLS certificate (DER), lower-case
	// hex, published by SVMs with the gateway role. The deploy engine pins it: the
	// channel (vCenter, which only the SVM's guest can write to) vouches for it.
	GuestThumbprint = "guestinfo.cairn.tls.thumbprint"
	// GuestOVFEnv is the OVF environment document vSphere hands the guest.
	GuestOVFEnv = "guestinfo.ovfEnv"
)

// GatewayCertFile is the gateway's certificate on the appliance (`cairn gateway
// --state-dir /var/lib/cairn/gateway`, packer/files/cairn-role).
const GatewayCertFile = "/var/lib/cairn/gateway/cert.pem"
