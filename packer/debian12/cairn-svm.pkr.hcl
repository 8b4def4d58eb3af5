# Cairn SVM, Debian 12 variant: customises the debootstrapped base disk
# (scripts/make-base-debian.sh) with the provisioning scripts. Builds offline here,
# under TCG. Works with Debian's packer 1.6.6 (qemu builder built in) and with packer
# >= 1.9 plus the qemu plugin; no `packer init` needed with 1.6.6.
#
#   packer build -var base_image=... -var cairn_bin_dir=... debian12/cairn-svm.pkr.hcl
#
# Normally run through `make -C packer appliance`.

variable "base_image" {
  type        = string
  description = "Debian 12 base disk (qcow2) from scripts/make-base-debian.sh"
  default     = "../.work/debian12-base.qcow2"
}
variable "base_sha256" {
  type        = string
  description = "sha256 of base_image, or \"none\" (the Makefile builds and caches it locally)"
  default     = "none"
}
variable "cairn_bin_dir" {
  type        = string
  description = "directory with the cairn and cairnctl binaries (linux/amd64)"
  default     = "../appliance/bin"
}
variable "version" {
  type    = string
  default = "dev"
}
variable "accel" {
  type        = string
  description = "qemu accelerator: kvm where it works, tcg otherwise (this CI)"
  default     = "tcg"
}
variable "cpu_model" {
  type        = string
  description = "qemu -cpu: max under tcg, host under kvm"
  default     = "max"
}
variable "out_dir" {
  type    = string
  default = ".work/debian12"
}
variable "disk_size" {
  type        = string
  description = "OS disk size; data disks are separate (second SCSI controller in the OVF)"
  default     = "4096M"
}

source "qemu" "cairn-svm" {
  disk_image       = true
  iso_url          = var.base_image
  iso_checksum     = var.base_sha256
  use_backing_file = false
  format           = "qcow2"
  disk_size        = var.disk_size
  disk_interface   = "virtio"
  # Without these qemu ignores discards: fstrim in 90-cleanup frees nothing and deleted
  # files stay in the image (it triples). disk_compression = qemu-img convert -c.
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
  # -cpu goes through qemuargs: packer 1.6.6 has no cpu_model option.
  # -netdev replaces the builder's default (hostfwd=tcp::PORT-:22 listens on 0.0.0.0):
  #  the SSH forward listens on loopback only. The id must stay user.0 (the builder's
  #  -device refers to it).
  qemuargs = [
    ["-cpu", var.cpu_model],
    ["-serial", "file:${var.out_dir}.serial.log"],
    ["-netdev", "user,id=user.0,hostfwd=tcp:127.0.0.1:{{ .SSHHostPort }}-:22"],
  ]
  boot_wait    = "5s"
  communicator = "ssh"
  ssh_host     = "127.0.0.1"
  # Temporary build account from the base disk, reachable only on the loopback forward;
  # the shutdown command deletes it, so the shipped image has no password anywhere.
  ssh_username     = "packer"
  ssh_password     = "packer"
  ssh_timeout      = "20m"
  shutdown_command = "sudo sh -c 'rm -f /etc/sudoers.d/packer; userdel -f -r packer; shutdown -P now'"
  shutdown_timeout = "5m"
}

build {
  sources = ["source.qemu.cairn-svm"]

  # Directory upload without a trailing slash: files/ arrives as /tmp/files.
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
