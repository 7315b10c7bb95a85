/* A slow shared volume, for the trainer's fault tests (tests/real/test_training_faults_real.py), loaded with LD_PRELOAD.
 *
 * fsync() and fdatasync() of a file whose path contains one of the ':'-separated strings in $SLOW_FSYNC_MATCH sleep
 * $SLOW_FSYNC_SECONDS first, then do the real call: what a write to EFS or FSx that stalls under load looks like to
 * the writer (the data are on their way, the call does not return). Every other file is untouched. With
 * $SLOW_FSYNC_GATE set, only while that file exists (the test opens the gate when the volume is to turn slow); with
 * $SLOW_FSYNC_ONCE=1 too, the first matching call closes the gate (removes the file: of all the processes and threads
 * that reach it, exactly one stalls), so the volume stalls one write and recovers, whenever the test looks.
 * Each stall is announced on stderr as one JSON line (event "slow_fsync"). Built at test time with the machine's cc. */
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
    const char *gate = getenv("SLOW_FSYNC_GATE");
    const char *once = getenv("SLOW_FSYNC_ONCE");
    if (match == NULL || seconds == NULL || *match == '\0') return;
    int gated = gate != NULL && *gate != '\0';
    if (gated && access(gate, F_OK) != 0) return;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return;
    path[n] = '\0';
    int matched = 0;
    for (const char *start = match; *start != '\0' && !matched;) {
        const char *end = strchr(start, ':');
        size_t len = end ? (size_t)(end - start) : strlen(start);
        char part[PATH_MAX];
        if (len > 0 && len < sizeof part) {
            memcpy(part, start, len);
            part[len] = '\0';
            matched = strstr(path, part) != NULL;
        }
        start += len + (end ? 1 : 0);
    }
    if (!matched) return;
    if (gated && once != NULL && strcmp(once, "1") == 0 && unlink(gate) != 0) return; /* another call closed it */
    double s = atof(seconds);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    /* One JSON line per stall on stderr (the pod's log), so a test can tell which writes were held. */
    dprintf(2, "{\"event\": \"slow_fsync\", \"time\": %.3f, \"pid\": %d, \"path\": \"%s\", \"seconds\": %g}\n",
            (double)now.tv_sec + now.tv_nsec / 1e9, (int)getpid(), path, s);
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
