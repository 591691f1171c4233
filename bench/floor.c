/* The wire bench's compiled floor (bench/wire.py, "for information"): the Python floor
 * server (wire.serve_floor) with no interpreter at all. It accepts connections on a free
 * loopback port (printed on stdout), serves each on its own thread with blocking sockets,
 * writes each request frame to the connection's own preallocated file with one
 * pwritev2(RWF_DSYNC) and answers with a fixed 12-byte frame: what the hardware allows a
 * server that does nothing else, to set the Python floor against.
 *
 * Built by the bench with the system's C compiler (cc -O2 -pthread); not part of the
 * package's code. Usage: floor DIRECTORY */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define FILE_BYTES (8 << 20)  /* preallocated, as wire.serve_floor's files */
#define WRAP_BYTES (4 << 20)  /* where the writes start over */
#define MAX_FRAME (1 << 20)

static const char *directory;

struct conn {
    int sock;
    int n;
};

/* Read exactly len bytes; 0 at a clean end, -1 on an error. */
static int read_exactly(int sock, char *buf, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t r = recv(sock, buf + got, len - got, 0);
        if (r == 0)
            return 0;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)r;
    }
    return 1;
}

static int send_all(int sock, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t w = send(sock, buf, len, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

static void *serve(void *arg) {
    struct conn c = *(struct conn *)arg;
    free(arg);
    char path[4096];
    snprintf(path, sizeof path, "%s/cfloor-%d.log", directory, c.n);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    char *frame = malloc(MAX_FRAME);
    static const char answer[12] = {0, 0, 0, 8};
    off_t position = 0;
    if (fd >= 0 && frame != NULL && posix_fallocate(fd, 0, FILE_BYTES) == 0) {
        for (;;) {
            uint32_t size;
            if (read_exactly(c.sock, (char *)&size, 4) <= 0)
                break;
            size = ntohl(size);
            if (size > MAX_FRAME || read_exactly(c.sock, frame, size) <= 0)
                break;
            struct iovec iov = {frame, size};  /* the request, as the Python floor writes it */
            ssize_t w;
            do {
                w = pwritev2(fd, &iov, 1, position, RWF_DSYNC);
            } while (w < 0 && errno == EINTR);
            if (w < 0)
                break;
            position = (position + size) % WRAP_BYTES;
            if (send_all(c.sock, answer, sizeof answer) < 0)
                break;
        }
    }
    free(frame);
    if (fd >= 0)
        close(fd);
    close(c.sock);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: floor DIRECTORY\n");
        return 2;
    }
    directory = argv[1];
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0,
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    if (listener < 0 || bind(listener, (struct sockaddr *)&addr, sizeof addr) < 0
        || listen(listener, 4096) < 0
        || getsockname(listener, (struct sockaddr *)&addr, &len) < 0) {
        perror("floor: listen");
        return 1;
    }
    printf("%d\n", ntohs(addr.sin_port));
    fflush(stdout);
    for (int n = 0;; n++) {
        int sock = accept(listener, NULL, NULL);
        if (sock < 0) {
            if (errno == EINTR)
                continue;
            perror("floor: accept");
            return 1;
        }
        int one = 1;
        setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = malloc(sizeof *c);
        pthread_t thread;
        if (c == NULL) {
            close(sock);
            continue;
        }
        c->sock = sock;
        c->n = n;
        if (pthread_create(&thread, NULL, serve, c) != 0) {
            free(c);
            close(sock);
            continue;
        }
        pthread_detach(thread);
    }
}
