/*
 * An LD_PRELOAD shim for the durability tests (gpu-core's LedgerForceOrderTest, gpusched-accounting's
 * ReleaseRecordCrashTest; kept in gpusched-testing so both find it on their test class path): it interposes write,
 * pwrite, pwrite64, writev, pwritev, fsync and fdatasync and logs, in the order they happen, what reaches one file (the
 * node ledger or an accounting journal, named by FSYNC_SHIM_FILE) and what the process prints on its standard output.
 * No ptrace, no seccomp: the dynamic linker resolves these libc calls to this library first, and each forwards to the
 * next definition (RTLD_NEXT).
 *
 * Environment: FSYNC_SHIM_LOG   the log file (appended to, one entry per write(2) with O_APPEND, so entries of
 *                               concurrent threads never interleave);
 *              FSYNC_SHIM_FILE  the absolute path of the watched file;
 *              FSYNC_SHIM_FORCE_DELAY_US  optional: sleep this long in each fsync/fdatasync of the watched file
 *                               (a slow disk, so that concurrent changes have time to queue up).
 *
 * Log entries (fields separated by one space, data after a 0x1f byte, newlines inside data written as 0x1e):
 *   W <tid> <fd> <bytes written>\x1f<data>   after a write to the watched file returned (vectored: the data joined)
 *   B <tid> <fd> fsync|fdatasync            before a force of the watched file
 *   E <tid> <fd> fsync|fdatasync <return>   after it returned
 *   O <tid> <bytes>\x1f<data>               before a write to file descriptor 1 (standard output)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static int log_fd = -1;
static const char *watched;
static long delay_us;

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);

static void resolve(void) {
    if (real_write == NULL) {
        real_write = (ssize_t (*)(int, const void *, size_t)) dlsym(RTLD_NEXT, "write");
        real_pwrite = (ssize_t (*)(int, const void *, size_t, off_t)) dlsym(RTLD_NEXT, "pwrite");
        real_pwrite64 = (ssize_t (*)(int, const void *, size_t, off64_t)) dlsym(RTLD_NEXT, "pwrite64");
        real_writev = (ssize_t (*)(int, const struct iovec *, int)) dlsym(RTLD_NEXT, "writev");
        real_pwritev = (ssize_t (*)(int, const struct iovec *, int, off_t)) dlsym(RTLD_NEXT, "pwritev");
        real_fsync = (int (*)(int)) dlsym(RTLD_NEXT, "fsync");
        real_fdatasync = (int (*)(int)) dlsym(RTLD_NEXT, "fdatasync");
    }
}

__attribute__((constructor)) static void shim_init(void) {
    resolve();
    const char *log = getenv("FSYNC_SHIM_LOG");
    watched = getenv("FSYNC_SHIM_FILE");
    const char *d = getenv("FSYNC_SHIM_FORCE_DELAY_US");
    delay_us = d == NULL ? 0 : atol(d);
    if (log != NULL) {
        log_fd = (int) syscall(SYS_openat, AT_FDCWD, log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    }
}

static int is_watched(int fd) {
    if (log_fd < 0 || watched == NULL || fd < 0 || fd == log_fd) {
        return 0;
    }
    char link[64];
    char target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) {
        return 0;
    }
    target[n] = 0;
    return strcmp(target, watched) == 0;
}

/* Writes one log entry: head, then (when data != NULL) 0x1f and the data with '\n' as 0x1e, then '\n'. */
static void entry(const char *head, const struct iovec *iov, int iovcnt, size_t limit) {
    size_t hl = strlen(head);
    size_t total = hl + 2 + limit;
    char stackbuf[16384];
    char *buf = total <= sizeof stackbuf ? stackbuf : malloc(total);
    if (buf == NULL) {
        return;
    }
    memcpy(buf, head, hl);
    size_t at = hl;
    if (iov != NULL) {
        buf[at++] = 0x1f;
        size_t left = limit;
        for (int i = 0; i < iovcnt && left > 0; i++) {
            size_t take = iov[i].iov_len < left ? iov[i].iov_len : left;
            const char *src = (const char *) iov[i].iov_base;
            for (size_t j = 0; j < take; j++) {
                buf[at++] = src[j] == '\n' ? 0x1e : src[j];
            }
            left -= take;
        }
    }
    buf[at++] = '\n';
    syscall(SYS_write, log_fd, buf, at);
    if (buf != stackbuf) {
        free(buf);
    }
}

static long tid(void) {
    return (long) syscall(SYS_gettid);
}

static void logged_write(int fd, const struct iovec *iov, int iovcnt, ssize_t r) {
    if (r > 0 && is_watched(fd)) {
        char head[96];
        snprintf(head, sizeof head, "W %ld %d %zd", tid(), fd, r);
        entry(head, iov, iovcnt, (size_t) r);
    }
}

static void logged_stdout(int fd, const struct iovec *iov, int iovcnt) {
    if (fd == 1 && log_fd >= 0) {
        size_t len = 0;
        for (int i = 0; i < iovcnt; i++) {
            len += iov[i].iov_len;
        }
        char head[96];
        snprintf(head, sizeof head, "O %ld %zu", tid(), len);
        entry(head, iov, iovcnt, len);
    }
}

ssize_t write(int fd, const void *b, size_t n) {
    resolve();
    struct iovec v = {(void *) b, n};
    logged_stdout(fd, &v, 1);
    ssize_t r = real_write(fd, b, n);
    logged_write(fd, &v, 1, r);
    return r;
}

ssize_t pwrite(int fd, const void *b, size_t n, off_t off) {
    resolve();
    ssize_t r = real_pwrite(fd, b, n, off);
    struct iovec v = {(void *) b, n};
    logged_write(fd, &v, 1, r);
    return r;
}

ssize_t pwrite64(int fd, const void *b, size_t n, off64_t off) {
    resolve();
    ssize_t r = real_pwrite64(fd, b, n, off);
    struct iovec v = {(void *) b, n};
    logged_write(fd, &v, 1, r);
    return r;
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
    resolve();
    logged_stdout(fd, iov, iovcnt);
    ssize_t r = real_writev(fd, iov, iovcnt);
    logged_write(fd, iov, iovcnt, r);
    return r;
}

ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t off) {
    resolve();
    ssize_t r = real_pwritev(fd, iov, iovcnt, off);
    logged_write(fd, iov, iovcnt, r);
    return r;
}

static int forced(int fd, const char *what, int (*real)(int)) {
    if (!is_watched(fd)) {
        return real(fd);
    }
    char head[96];
    snprintf(head, sizeof head, "B %ld %d %s", tid(), fd, what);
    entry(head, NULL, 0, 0);
    if (delay_us > 0) {
        struct timespec ts = {delay_us / 1000000, (delay_us % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
    int r = real(fd);
    snprintf(head, sizeof head, "E %ld %d %s %d", tid(), fd, what, r);
    entry(head, NULL, 0, 0);
    return r;
}

int fsync(int fd) {
    resolve();
    return forced(fd, "fsync", real_fsync);
}

int fdatasync(int fd) {
    resolve();
    return forced(fd, "fdatasync", real_fdatasync);
}
