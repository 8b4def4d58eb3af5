package firstboot

import "github.com/cairn-storage/cairn/appliance/contract"

// A real ed25519 public key (generated for these tests; the private half was discarded).
const testSSHKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMusA5/KUSY+1FXP3mKoSCoib8YRCmz4mDu6Ey3cNF2m test@cairn"

// goodSettings is a complete, valid setting of an MDM + SDS + target + gateway SVM.
func goodSettings() map[string]string {
	return map[string]string{
		contract.KeyHostname:     "SVM-esx01.lab.example",
		contract.KeyMgmtAddress:  "192.0.2.10/24",
		contract.KeyMgmtGateway:  "192.0.2.1",
		contract.KeyDataAddress:  "198.51.100.10/24",
		contract.KeyDNS:          "192.0.2.53, 192.0.2.54",
		contract.KeyNTP:          "ntp1.example.org,192.0.2.123",
		contract.KeyRoles:        "mdm, sds,target,gateway",
		contract.KeyClusterName:  "prod-cluster.1",
		contract.KeyJoinToken:    "cj1.0123456789abcdef0123456789abcdef",
		contract.KeyMDMMembers:   "svm-esx01.lab.example=192.0.2.10,svm-esx02=192.0.2.11,svm-esx03=192.0.2.12",
		contract.KeyGateways:     "192.0.2.10,192.0.2.11",
		contract.KeySVMs:         "192.0.2.10,198.51.100.10,192.0.2.11,198.51.100.11,192.0.2.12,198.51.100.12",
		contract.KeyTargetPortID: "2",
		contract.KeyTargetPorts:  "1,2,3",
		contract.KeySSHKey:       testSSHKey,
	}
}
