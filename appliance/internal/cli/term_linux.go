//go:build linux

package cli

import (
	"bufio"
	"os"
	"strings"
	"syscall"
	"unsafe"
)

func tcget(fd uintptr) (syscall.Termios, error) {
	var t syscall.Termios
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TCGETS, uintptr(unsafe.Pointer(&t))); e != 0 {
		return t, e
	}
	return t, nil
}

func isTerminal(f *os.File) bool {
	_, err := tcget(f.Fd())
	return err == nil
}

// readNoEcho reads one line from the terminal with echo off.
func readNoEcho(f *os.File) (string, error) {
	old, err := tcget(f.Fd())
	if err != nil {
		return "", err
	}
	quiet := old
	quiet.Lflag &^= syscall.ECHO
	quiet.Lflag |= syscall.ICANON
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCSETS, uintptr(unsafe.Pointer(&quiet))); e != 0 {
		return "", e
	}
	defer syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCSETS, uintptr(unsafe.Pointer(&old)))
	line, err := bufio.NewReader(f).ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}
