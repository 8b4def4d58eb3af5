// Command cairn-ova assembles and checks the Cairn SVM OVA.
//
//	cairn-ova build -disk cairn-svm-disk1.vmdk -version 1.2.3 -out cairn-svm-1.2.3.ova
//	cairn-ova descriptor -disk cairn-svm-disk1.vmdk   # print the OVF descriptor
//	cairn-ova check cairn-svm-1.2.3.ova              # exit 1 when the OVA is broken
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cairn-storage/cairn/packer/tools/internal/ova"
	"github.com/cairn-storage/cairn/packer/tools/internal/ovfdesc"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "build", "descriptor":
		err = build(os.Args[1], os.Args[2:])
	case "check":
		err = check(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cairn-ova:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: cairn-ova build|descriptor|check ... (see -h of each)")
	os.Exit(2)
}

func build(cmd string, args []string) error {
	p := ovfdesc.Defaults()
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	disk := fs.String("disk", "", "streamOptimized VMDK of the OS disk (required)")
	out := fs.String("out", "", "OVA to write (build)")
	fs.StringVar(&p.Name, "name", p.Name, "VM name")
	fs.StringVar(&p.Version, "version", p.Version, "product version")
	fs.IntVar(&p.CPUs, "cpus", p.CPUs, "virtual CPUs")
	fs.IntVar(&p.MemoryMiB, "memory", p.MemoryMiB, "memory in MiB")
	fs.StringVar(&p.OSType, "os-type", p.OSType, "vSphere guest id (rockylinux_64Guest for the Rocky build)")
	fs.IntVar(&p.OSID, "os-id", p.OSID, "CIM OS id (96 Debian 64-bit, 80 RHEL 64-bit)")
	fs.StringVar(&p.HWVersion, "hw", p.HWVersion, "virtual hardware version")
	mtime := fs.String("mtime", "", "member mtime, unix seconds (default SOURCE_DATE_EPOCH, else now)")
	fs.Parse(args)
	if *disk == "" || (cmd == "build" && *out == "") {
		fs.Usage()
		os.Exit(2)
	}
	h, err := ova.ReadVMDKFile(*disk)
	if err != nil {
		return err
	}
	if probs := h.CheckStreamOptimized(); len(probs) > 0 {
		return fmt.Errorf("%s: %v (convert with qemu-img convert -O vmdk -o subformat=streamOptimized)", *disk, probs)
	}
	fi, err := os.Stat(*disk)
	if err != nil {
		return err
	}
	p.DiskFile = p.Name + "-disk1.vmdk"
	p.DiskSize = fi.Size()
	p.Capacity = int64(h.CapacitySectors) * 512
	desc, err := ovfdesc.Generate(p)
	if err != nil {
		return err
	}
	if cmd == "descriptor" {
		_, err = os.Stdout.Write(desc)
		return err
	}
	t := time.Now()
	if s := *mtime; s != "" || os.Getenv("SOURCE_DATE_EPOCH") != "" {
		if s == "" {
			s = os.Getenv("SOURCE_DATE_EPOCH")
		}
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("mtime %q: %w", s, err)
		}
		t = time.Unix(sec, 0)
	}
	if err := ova.Build(*out, p.Name+".ovf", desc, []ova.File{{Name: p.DiskFile, Path: *disk}}, t); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%s, disk %s: %d bytes, capacity %d bytes)\n", *out, filepath.Base(*out), p.DiskFile, p.DiskSize, p.Capacity)
	return nil
}

func check(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: cairn-ova check FILE.ova")
	}
	r, err := ova.Check(args[0])
	if err != nil {
		return err
	}
	for _, m := range r.Members {
		fmt.Printf("member %-28s %12d bytes sha256 %s\n", m.Name, m.Size, m.SHA256)
	}
	for _, d := range r.Disks {
		fmt.Printf("disk   %-28s createType=%s capacity=%d\n", d.Name, d.CreateType, d.Capacity)
	}
	fmt.Printf("vApp properties: %v\n", r.Properties)
	for _, p := range r.Problems {
		fmt.Println("FAIL:", p)
	}
	if len(r.Problems) > 0 {
		return fmt.Errorf("%s: %d problem(s)", args[0], len(r.Problems))
	}
	fmt.Println("PASS:", args[0])
	return nil
}
