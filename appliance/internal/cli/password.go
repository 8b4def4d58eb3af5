package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// passwordSource says where a password comes from, in this order: a file
// (--password-file), standard input (--password-stdin), the config's
// password_file, and last an interactive prompt — only when standard input
// is a terminal. Without a terminal and without a source it fails at once:
// CI jobs have no stdin and must never hang on a prompt.
type passwordSource struct {
	file  string
	stdin bool
}

func (p *passwordSource) read(s *session, prompt string, fallbackFile string) (string, error) {
	switch {
	case p.file != "":
		return readPasswordFile(p.file)
	case p.stdin:
		line, err := bufio.NewReader(io.LimitReader(s.env.Stdin, 4096)).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read password from stdin: %w", err)
		}
		pw := strings.TrimRight(line, "\r\n")
		if pw == "" {
			return "", errors.New("--password-stdin: standard input held no password")
		}
		return pw, nil
	case fallbackFile != "":
		return readPasswordFile(fallbackFile)
	}
	f, ok := s.env.Stdin.(*os.File)
	if !ok || !isTerminal(f) {
		return "", errors.New("no password given and standard input is not a terminal: use --password-file FILE or --password-stdin")
	}
	fmt.Fprint(s.env.Stderr, prompt)
	pw, err := readNoEcho(f)
	fmt.Fprintln(s.env.Stderr)
	if err != nil {
		return "", fmt.Errorf("read password: %w", err)
	}
	if pw == "" {
		return "", errors.New("empty password")
	}
	return pw, nil
}
