/* A slow shared volume, for the trainer's fault tests (tests/test_training_faults_real.py), loaded with LD_PRELOAD.
 *
 * fsync() and fdatasync() of a file whose path contains $SLOW_FSYNC_MATCH sleep $SLOW_FSYNC_SECONDS first, then do
 * the real call: what a write to EFS or FSx that stalls under load looks like to the writer (the data are on their
 * way, the call does not return). Every other file is untouched. Built at test time with the machine's cc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void maybe_stall(int fd) {
    const char *match = getenv("SLOW_FSYNC_MATCH");
    const char *seconds = getenv("SLOW_FSYNC_SECONDS");
    if (match == NULL || seconds == NULL || *match == '\0') return;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return;
    path[n] = '\0';
    if (strstr(path, match) == NULL) return;
    double s = atof(seconds);
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int fsync(int fd) {
    static int (*real)(int) = NULL;
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    maybe_stall(fd);
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int) = NULL;
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    maybe_stall(fd);
    return real(fd);
}
