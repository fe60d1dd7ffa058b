/* A slow disk for the chaos harness: preloaded into a node (LD_PRELOAD), it delays every fsync
 * and fdatasync by the number of milliseconds written in the file that
 * LOGBROKER_CHAOS_SLOW_DISK_FILE names, while that file exists (at most 10 s a call). The file
 * is read on each call, so the harness turns the fault on and off without touching the node. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void delay(void) {
    const char *path = getenv("LOGBROKER_CHAOS_SLOW_DISK_FILE");
    if (path == NULL) return;
    FILE *f = fopen(path, "r");
    if (f == NULL) return;
    long ms = 0;
    if (fscanf(f, "%ld", &ms) != 1) ms = 0;
    fclose(f);
    if (ms <= 0) return;
    if (ms > 10000) ms = 10000;
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) != 0) {}
}

int fsync(int fd) {
    static int (*real)(int) = NULL;
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    delay();
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int) = NULL;
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    delay();
    return real(fd);
}
