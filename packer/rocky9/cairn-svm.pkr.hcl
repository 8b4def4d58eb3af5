# Cairn SVM, production variant: Rocky Linux 9 (or CentOS Stream 9) installed from the
# ISO with a kickstart, then the same provisioning scripts as the Debian variant.
# Cannot be built on the project's CI (no RHEL-family mirrors); see ../README.md
# "Building the Rocky Linux 9 image" for the steps on a machine with KVM.
#
#   packer build -var iso_url=... -var iso_checksum=sha256:... \
#     -var cairn_bin_dir=../appliance/bin rocky9/cairn-svm.pkr.hcl

# No defaults: a production build names the exact ISO and its checksum (the
# CHECKSUM file next to the ISO on the Rocky mirror), e.g.
#   -var iso_url=Rocky-9.6-x86_64-minimal.iso -var iso_checksum=sha256:<hex>
variable "iso_url" {
  type        = string
  description = "Rocky Linux 9 (or CentOS Stream 9) minimal or DVD ISO: local path or URL"
}
variable "iso_checksum" {
  type        = string
  description = "sha256:<hex> of the ISO"
}
variable "cairn_bin_dir" {
  type    = string
  default = "../appliance/bin"
}
variable "version" {
  type    = string
  default = "dev"
}
variable "accel" {
  type    = string
  default = "kvm"
}
variable "cpu_model" {
  type    = string
  default = "host"
}
variable "out_dir" {
  type    = string
  default = ".work/rocky9"
}
variable "disk_size" {
  type    = string
  default = "8192M"
}
variable "build_password" {
  type        = string
  description = "password of the temporary build account (deleted at the end of the build)"
  default     = "packer"
  sensitive   = true
}

source "qemu" "cairn-svm" {
  iso_url            = var.iso_url
  iso_checksum       = var.iso_checksum
  format             = "qcow2"
  disk_size          = var.disk_size
  disk_interface     = "virtio"
  disk_discard       = "unmap"
  disk_detect_zeroes = "unmap"
  disk_compression   = true
  net_device         = "virtio-net"
  accelerator        = var.accel
  cpus               = 2
  memory             = 2048
  headless           = true
  vnc_bind_address   = "127.0.0.1"
  output_directory   = var.out_dir
  vm_name            = "cairn-svm.qcow2"
  # Kickstart over Packer's HTTP server, bound to loopback (the guest reaches it as
  # 10.0.2.2 through qemu's user network).
  http_directory    = "${path.root}/http"
  http_bind_address = "127.0.0.1"
  qemuargs = [
    ["-cpu", var.cpu_model],
    ["-serial", "file:${var.out_dir}.serial.log"],
    ["-netdev", "user,id=user.0,hostfwd=tcp:127.0.0.1:{{ .SSHHostPort }}-:22"],
  ]
  boot_wait = "5s"
  boot_command = [
    "<up><wait><tab> inst.text inst.ks=http://{{ .HTTPIP }}:{{ .HTTPPort }}/ks.cfg console=ttyS0,115200n8 net.ifnames=0<enter>"
  ]
  communicator     = "ssh"
  ssh_host         = "127.0.0.1"
  ssh_username     = "packer"
  ssh_password     = var.build_password
  ssh_timeout      = "60m"
  shutdown_command = "sudo sh -c 'rm -f /etc/sudoers.d/packer; userdel -f -r packer; shutdown -P now'"
  shutdown_timeout = "5m"
}

build {
  sources = ["source.qemu.cairn-svm"]

  provisioner "file" {
    source      = "${path.root}/../files"
    destination = "/tmp"
  }
  provisioner "file" {
    source      = "${var.cairn_bin_dir}/cairn"
    destination = "/tmp/cairn"
  }
  provisioner "file" {
    source      = "${var.cairn_bin_dir}/cairnctl"
    destination = "/tmp/cairnctl"
  }
  provisioner "shell" {
    execute_command  = "sudo env {{ .Vars }} bash -eu '{{ .Path }}'"
    environment_vars = ["CAIRN_VERSION=${var.version}", "FILES=/tmp/files", "BIN=/tmp"]
    scripts = [
      "${path.root}/../scripts/10-base.sh",
      "${path.root}/../scripts/20-cairn.sh",
      "${path.root}/../scripts/90-cleanup.sh",
    ]
  }
}
