//go:build !linux

package cli

import (
	"errors"
	"os"
)

// Elsewhere cairnctl does not prompt: give --password-file or --password-stdin.
func isTerminal(*os.File) bool { return false }

func readNoEcho(*os.File) (string, error) {
	return "", errors.New("interactive password prompt not supported on this system")
}
