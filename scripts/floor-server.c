// floor-server: the serve benchmark's lower bound, not a product.
//
// The least a static tile server can do per response on this machine: every tile of ROOT
// read into memory at start, then per request one read(2), a scan for the end of the
// head, a hash lookup of the path, and one write(2) of a prepared head and body (or, for
// bodies over 16 KiB, the head with MSG_MORE and sendfile(2) from a descriptor kept open).
// No logging, no validation beyond the request line, no limits worth the name. The serve
// section of scripts/bench (scripts/benchmarks/serve.py) runs it beside tiler and nginx
// on the same tiles and URLs, so that its req/s and CPU per response show what any
// server could reach here, with wrk on the same cores.
//
// It answers /images/ID/tiles/REST for every file ROOT/ID/REST ending in .png, .jpg or
// .webp (tiler's own tile URLs), and 404 for anything else.
//
// Usage: floor-server ROOT PORT [THREADS]      (THREADS: event loops, default 2)
// Build: cc -O2 -Wall -Wextra -pthread -o floor-server floor-server.c
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

enum { sendfileAbove = 16384, requestBuffer = 4096, maxThreads = 64 };

// ---- The tiles: an open-addressing hash table from URL path to a prepared response.

typedef struct {
    char *path;         // "/images/ID/tiles/L/C/R.ext"
    size_t pathLength;
    char *response;     // head, then body (the body only when it is written from memory)
    size_t headLength;
    size_t bodyLength;
    int fd;             // the file, for sendfile; -1 when the body is in `response`
} Tile;

static Tile *tiles;
static size_t capacity = 1024, count;
static const char *root;
static size_t rootLength;

static uint64_t hashOf(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;  // FNV-1a
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

static void fail(const char *what) {
    perror(what);
    exit(1);
}

static void insert(Tile tile) {
    if ((count + 1) * 10 > capacity * 7) {  // grow at 70 % full
        Tile *old = tiles;
        size_t oldCapacity = capacity;
        capacity *= 2;
        tiles = calloc(capacity, sizeof *tiles);
        if (!tiles) fail("calloc");
        count = 0;
        for (size_t i = 0; i < oldCapacity; i++)
            if (old[i].path) insert(old[i]);
        free(old);
    }
    size_t i = hashOf(tile.path, tile.pathLength) & (capacity - 1);
    while (tiles[i].path) i = (i + 1) & (capacity - 1);
    tiles[i] = tile;
    count++;
}

static const Tile *lookup(const char *path, size_t n) {
    size_t i = hashOf(path, n) & (capacity - 1);
    for (; tiles[i].path; i = (i + 1) & (capacity - 1))
        if (tiles[i].pathLength == n && memcmp(tiles[i].path, path, n) == 0) return &tiles[i];
    return NULL;
}

static int addFile(const char *file, const struct stat *st, int type, struct FTW *ftw) {
    (void)ftw;
    if (type != FTW_F) return 0;
    const char *ext = strrchr(file, '.');
    const char *mime = !ext                     ? NULL
                       : !strcmp(ext, ".png")  ? "image/png"
                       : !strcmp(ext, ".jpg")  ? "image/jpeg"
                       : !strcmp(ext, ".webp") ? "image/webp"
                                               : NULL;
    const char *relative = file + rootLength + 1, *slash = strchr(relative, '/');
    if (!mime || !slash) return 0;
    Tile tile = {.bodyLength = (size_t)st->st_size, .fd = -1};
    char path[1024];
    int n = snprintf(path, sizeof path, "/images/%.*s/tiles%s", (int)(slash - relative), relative, slash);
    if (n < 0 || (size_t)n >= sizeof path) return 0;
    tile.path = strdup(path);
    tile.pathLength = (size_t)n;
    char head[256];
    int h = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Cache-Control: public, max-age=86400\r\nETag: \"%016llx\"\r\n\r\n",
                     mime, tile.bodyLength, (unsigned long long)hashOf(path, (size_t)n));
    tile.headLength = (size_t)h;
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(file);
    bool inMemory = tile.bodyLength <= sendfileAbove;
    tile.response = malloc(tile.headLength + (inMemory ? tile.bodyLength : 0));
    if (!tile.path || !tile.response) fail("malloc");
    memcpy(tile.response, head, tile.headLength);
    if (inMemory) {
        for (size_t done = 0; done < tile.bodyLength;) {
            ssize_t r = pread(fd, tile.response + tile.headLength + done, tile.bodyLength - done, (off_t)done);
            if (r <= 0) fail(file);
            done += (size_t)r;
        }
        close(fd);
    } else {
        tile.fd = fd;
    }
    insert(tile);
    return 0;
}

// ---- The event loops: one per thread, each with its own SO_REUSEPORT listener.

typedef struct {
    int fd;
    char buffer[requestBuffer];
    size_t have;
    const char *pending;  // bytes of a response still to write from memory
    size_t pendingLength;
    int file;             // then this many bytes of `file` from `fileOffset`
    off_t fileOffset;
    size_t fileLeft;
    bool waitingToWrite;  // registered for EPOLLOUT too
} Connection;

static int port;
static const char notFound[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
static const char badRequest[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

// Writes what is pending. Returns 1 when all is written, 0 on EAGAIN, -1 on an error.
static int flush(Connection *c) {
    while (c->pendingLength) {
        ssize_t w = send(c->fd, c->pending, c->pendingLength, c->fileLeft ? MSG_MORE | MSG_NOSIGNAL : MSG_NOSIGNAL);
        if (w < 0) return errno == EAGAIN ? 0 : -1;
        c->pending += w;
        c->pendingLength -= (size_t)w;
    }
    while (c->fileLeft) {
        ssize_t w = sendfile(c->fd, c->file, &c->fileOffset, c->fileLeft);
        if (w < 0) return errno == EAGAIN ? 0 : -1;
        if (w == 0) return -1;  // the file shrank
        c->fileLeft -= (size_t)w;
    }
    return 1;
}

// Reads and answers requests until the socket has no more or a write would block.
// Returns -1 when the connection should close.
static int serve(Connection *c, int epoll) {
    for (;;) {
        int flushed = flush(c);
        if (flushed < 0) return -1;
        if (flushed == 0) {
            if (!c->waitingToWrite) {
                struct epoll_event e = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
                if (epoll_ctl(epoll, EPOLL_CTL_MOD, c->fd, &e)) return -1;
                c->waitingToWrite = true;
            }
            return 0;
        }
        if (c->waitingToWrite) {
            struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
            if (epoll_ctl(epoll, EPOLL_CTL_MOD, c->fd, &e)) return -1;
            c->waitingToWrite = false;
        }
        char *end = memmem(c->buffer, c->have, "\r\n\r\n", 4);
        if (!end) {
            if (c->have == sizeof c->buffer) return -1;  // a head larger than the buffer
            ssize_t r = read(c->fd, c->buffer + c->have, sizeof c->buffer - c->have);
            if (r == 0) return -1;
            if (r < 0) return errno == EAGAIN ? 0 : -1;
            c->have += (size_t)r;
            continue;
        }
        size_t used = (size_t)(end + 4 - c->buffer);
        const Tile *tile = NULL;
        if (c->have >= 4 && memcmp(c->buffer, "GET ", 4) == 0) {
            char *path = c->buffer + 4, *space = memchr(path, ' ', (size_t)(end - path));
            if (!space) {
                c->pending = badRequest;
                c->pendingLength = sizeof badRequest - 1;
                flush(c);
                return -1;
            }
            tile = lookup(path, (size_t)(space - path));
        }
        memmove(c->buffer, c->buffer + used, c->have - used);
        c->have -= used;
        if (!tile) {
            c->pending = notFound;
            c->pendingLength = sizeof notFound - 1;
        } else if (tile->fd < 0) {
            c->pending = tile->response;
            c->pendingLength = tile->headLength + tile->bodyLength;
        } else {
            c->pending = tile->response;
            c->pendingLength = tile->headLength;
            c->file = tile->fd;
            c->fileOffset = 0;
            c->fileLeft = tile->bodyLength;
        }
    }
}

static void *runLoop(void *unused) {
    (void)unused;
    int one = 1;
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listener < 0) fail("socket");
    if (setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        setsockopt(listener, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one))
        fail("setsockopt");
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(listener, (struct sockaddr *)&address, sizeof address) || listen(listener, 4096)) fail("bind");
    int epoll = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event listening = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll < 0 || epoll_ctl(epoll, EPOLL_CTL_ADD, listener, &listening)) fail("epoll");
    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(epoll, events, 256, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            Connection *c = events[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    Connection *accepted = calloc(1, sizeof *accepted);
                    struct epoll_event e = {.events = EPOLLIN, .data.ptr = accepted};
                    if (!accepted || epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &e)) {
                        close(fd);
                        free(accepted);
                        continue;
                    }
                    accepted->fd = fd;
                }
                continue;
            }
            if (serve(c, epoll) < 0) {
                close(c->fd);
                free(c);
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: floor-server ROOT PORT [THREADS]\n");
        return 2;
    }
    root = argv[1];
    rootLength = strlen(root);
    port = atoi(argv[2]);
    int threads = argc > 3 ? atoi(argv[3]) : 2;
    if (port <= 0 || port > 65535 || threads < 1 || threads > maxThreads) {
        fprintf(stderr, "floor-server: bad port or thread count\n");
        return 2;
    }
    // sendfile has no MSG_NOSIGNAL: a client gone mid-answer (wrk at the end of a run)
    // would kill the process with SIGPIPE. The write's EPIPE closes the connection.
    signal(SIGPIPE, SIG_IGN);
    struct rlimit files;
    if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
        files.rlim_cur = files.rlim_max;
        setrlimit(RLIMIT_NOFILE, &files);
    }
    tiles = calloc(capacity, sizeof *tiles);
    if (!tiles) fail("calloc");
    if (nftw(root, addFile, 64, FTW_PHYS)) fail(root);
    fprintf(stderr, "floor-server: %zu tiles of %s on 127.0.0.1:%d, %d threads\n", count, root, port, threads);
    pthread_t loops[maxThreads];
    for (int i = 0; i < threads; i++)
        if (pthread_create(&loops[i], NULL, runLoop, NULL)) fail("pthread_create");
    pthread_join(loops[0], NULL);
    return 0;
}
