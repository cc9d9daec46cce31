/*
 * LD_PRELOAD shim for the durability attack tests (io.gpusched.core.adversarial.durability): logs, in one order
 * under one mutex, every pwrite/write/ftruncate/fsync/fdatasync on a file whose name is "ledger" and every write to
 * standard output (where the child prints its acknowledgements). With ACKORDER_FAIL_FORCE=N the N-th fdatasync/fsync
 * of the ledger (1-based) fails with EIO without syncing. Log lines: "W <fd> <offset> <len> <ret>", "T <fd> <len> <ret>",
 * "F <fd> <ret>", "O <text of stdout write>". Build: gcc -shared -fPIC -o ackorder.so ackorder.c -ldl -lpthread
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int logfd = -2;
static long forces;

static ssize_t (*r_write)(int, const void *, size_t);
static ssize_t (*r_pwrite64)(int, const void *, size_t, off64_t);
static int (*r_fsync)(int);
static int (*r_fdatasync)(int);
static int (*r_ftruncate64)(int, off64_t);

static void init(void) {
    if (!r_write) {
        r_write = dlsym(RTLD_NEXT, "write");
        r_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
        r_fsync = dlsym(RTLD_NEXT, "fsync");
        r_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
        r_ftruncate64 = dlsym(RTLD_NEXT, "ftruncate64");
    }
    if (logfd == -2) {
        const char *p = getenv("ACKORDER_LOG");
        logfd = p ? open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
    }
}

static int is_ledger(int fd) {
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    const char *slash = strrchr(path, '/');
    return slash && strcmp(slash + 1, "ledger") == 0;
}

static void logline(const char *s, size_t n) {
    if (logfd >= 0) r_write(logfd, s, n);
}

ssize_t write(int fd, const void *buf, size_t n) {
    init();
    if (fd == 1 && logfd >= 0) {
        pthread_mutex_lock(&mu);
        ssize_t r = r_write(fd, buf, n);
        /* one "O" line per printed line */
        const char *b = buf;
        size_t start = 0;
        for (size_t i = 0; i < n; i++) {
            if (b[i] == '\n') {
                logline("O ", 2);
                logline(b + start, i - start + 1);
                start = i + 1;
            }
        }
        pthread_mutex_unlock(&mu);
        return r;
    }
    if (is_ledger(fd)) {
        pthread_mutex_lock(&mu);
        off_t off = lseek(fd, 0, SEEK_CUR);
        ssize_t r = r_write(fd, buf, n);
        char l[128];
        int k = snprintf(l, sizeof l, "W %d %lld %zu %zd\n", fd, (long long) off, n, r);
        logline(l, k);
        pthread_mutex_unlock(&mu);
        return r;
    }
    return r_write(fd, buf, n);
}

static ssize_t do_pwrite(int fd, const void *buf, size_t n, off64_t off) {
    init();
    if (!is_ledger(fd)) return r_pwrite64(fd, buf, n, off);
    pthread_mutex_lock(&mu);
    ssize_t r = r_pwrite64(fd, buf, n, off);
    int e = errno;
    char l[128];
    int k = snprintf(l, sizeof l, "W %d %lld %zu %zd\n", fd, (long long) off, n, r);
    logline(l, k);
    pthread_mutex_unlock(&mu);
    errno = e;
    return r;
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off) { return do_pwrite(fd, buf, n, off); }
ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) { return do_pwrite(fd, buf, n, off); }

static int do_sync(int fd, int data) {
    init();
    if (!is_ledger(fd)) return data ? r_fdatasync(fd) : r_fsync(fd);
    pthread_mutex_lock(&mu);
    long nth = ++forces;
    const char *f = getenv("ACKORDER_FAIL_FORCE");
    int r;
    int e = 0;
    if (f && atol(f) == nth) {
        r = -1;
        e = EIO;
    } else {
        r = data ? r_fdatasync(fd) : r_fsync(fd);
        e = errno;
    }
    char l[64];
    int k = snprintf(l, sizeof l, "F %d %d\n", fd, r);
    logline(l, k);
    pthread_mutex_unlock(&mu);
    errno = e;
    return r;
}

int fsync(int fd) { return do_sync(fd, 0); }
int fdatasync(int fd) { return do_sync(fd, 1); }

static int do_trunc(int fd, off64_t len) {
    init();
    if (!is_ledger(fd)) return r_ftruncate64(fd, len);
    pthread_mutex_lock(&mu);
    int r = r_ftruncate64(fd, len);
    int e = errno;
    char l[64];
    int k = snprintf(l, sizeof l, "T %d %lld %d\n", fd, (long long) len, r);
    logline(l, k);
    pthread_mutex_unlock(&mu);
    errno = e;
    return r;
}

int ftruncate64(int fd, off64_t len) { return do_trunc(fd, len); }
int ftruncate(int fd, off_t len) { return do_trunc(fd, len); }
