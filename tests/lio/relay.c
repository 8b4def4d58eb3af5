/*
 * relay PORT: qemu's guestfwd relay to 127.0.0.1:PORT, one process per guest
 * connection (run-guest.sh; qemu runs it as `guestfwd=...-cmd:relay PORT`).
 *
 * Why not socat: libslirp (4.7, Debian 12) hands a `cmd:` relay its connection
 * as a TCP socket pair over loopback whose qemu end keeps Nagle on. qemu writes
 * each guest segment (1460 bytes) separately, so the second and later segments
 * of a request wait until the relay's kernel ACKs the first - a delayed ACK, 40 ms.
 * socat's `nodelay` applies to its outgoing socket only. Measured on a 4k write
 * at queue depth 1 through the guest's Cairn target: 48 ms with socat, of which
 * 41 ms between the SDS reading the first 1460 bytes and the rest.
 *
 * So this relay:
 *   - sets TCP_NODELAY on both of its sockets (its replies to qemu are small too);
 *   - asks for an immediate ACK (TCP_QUICKACK) after every read from qemu, which
 *     releases qemu's held segments at once;
 *   - copies bytes both ways with poll(2), half-closes on EOF, and exits when
 *     both directions are done or on any error (the guest sees the reset).
 * stdin and stdout are the same socket (qemu dup2s it); anything else (a pipe,
 * in a test by hand) works too, without the socket options.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF (256 * 1024)

static void tune(int fd)
{
	int one = 1;
	/* ENOTSOCK / EOPNOTSUPP when stdin is not a TCP socket: nothing to tune */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void quickack(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
}

/* write_all: 0, or -1 with errno set */
static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int main(int argc, char **argv)
{
	char *end;
	long port = argc == 2 ? strtol(argv[1], &end, 10) : 0;
	if (argc != 2 || *end != '\0' || port < 1 || port > 65535) {
		fprintf(stderr, "usage: relay PORT (connects to 127.0.0.1:PORT; stdin/stdout: the other side)\n");
		return 2;
	}
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0) {
		perror("relay: socket");
		return 1;
	}
	struct sockaddr_in a;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((unsigned short)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		fprintf(stderr, "relay: connect 127.0.0.1:%ld: %s\n", port, strerror(errno));
		return 1;
	}
	tune(s);
	tune(0); /* fd 1 is the same socket when qemu runs the relay */

	char *buf = malloc(BUF);
	if (!buf) {
		perror("relay: malloc");
		return 1;
	}
	/* [0]: qemu -> host (read fd 0, write s); [1]: host -> qemu (read s, write fd 1) */
	int in[2] = {0, s}, out[2] = {s, 1}, open_[2] = {1, 1};
	while (open_[0] || open_[1]) {
		struct pollfd p[2];
		int np = 0, dir[2];
		for (int d = 0; d < 2; d++) {
			if (!open_[d])
				continue;
			p[np].fd = in[d];
			p[np].events = POLLIN;
			p[np].revents = 0;
			dir[np++] = d;
		}
		if (poll(p, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("relay: poll");
			return 1;
		}
		for (int i = 0; i < np; i++) {
			if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			int d = dir[i];
			ssize_t r = read(in[d], buf, BUF);
			if (r < 0) {
				if (errno == EINTR || errno == EAGAIN)
					continue;
				return 1; /* a reset: exiting closes the other side too */
			}
			if (r == 0) {
				/* EOF: pass the half-close on */
				open_[d] = 0;
				if (out[d] == s)
					shutdown(s, SHUT_WR);
				else
					shutdown(1, SHUT_WR);
				continue;
			}
			if (d == 0)
				quickack(0);
			if (write_all(out[d], buf, (size_t)r) < 0)
				return 1;
		}
	}
	return 0;
}
