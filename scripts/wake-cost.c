/*
 * wake-cost: the CPU cost of waking once a second by different means, and nothing else.
 * Used to choose how steerd's tick thread sleeps (docs/performance.md). The mode comes
 * from WAKER_MODE: epoll (epoll_wait with a millisecond timeout, what steerd does),
 * nanosleep (clock_nanosleep, TIMER_ABSTIME), futex (FUTEX_WAIT_BITSET, absolute
 * CLOCK_MONOTONIC timeout), timerfd (a blocking read of a periodic timerfd), sigtimed
 * (sigtimedwait with a timeout). It ignores its arguments, so scripts/ab-idle.sh can run
 * two modes side by side through one-line wrappers:
 *
 *   gcc -O2 -o /tmp/wake-cost scripts/wake-cost.c
 *   for m in epoll futex; do
 *       printf '#!/bin/sh\nWAKER_MODE=%s exec /tmp/wake-cost\n' $m >/tmp/wake-$m; chmod +x /tmp/wake-$m
 *   done
 *   sudo scripts/ab-idle.sh /tmp/wake-epoll /tmp/wake-futex 30 10
 */
#define _GNU_SOURCE
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/prctl.h>
#include <sched.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>
#include <signal.h>
#include <linux/futex.h>
#include <sys/syscall.h>
int main(void) {
    const char *mode = getenv("WAKER_MODE"); if (!mode) mode = "epoll";
    if (strstr(mode, "slack")) prctl(PR_SET_TIMERSLACK, 50000000UL, 0, 0, 0);
    if (strstr(mode, "pin")) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(1, &s); sched_setaffinity(0, sizeof s, &s); }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev[4];
    if (strstr(mode, "timerfd")) {
        int t = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
        struct itimerspec its = {{1,0},{1,0}};
        timerfd_settime(t, 0, &its, NULL);
        uint64_t n;
        for (;;) read(t, &n, 8);
    }
    if (strstr(mode, "sigtimed")) {
        sigset_t set; sigemptyset(&set); sigaddset(&set, SIGHUP); sigaddset(&set, SIGRTMIN);
        sigprocmask(SIG_BLOCK, &set, NULL);
        struct timespec now, next; clock_gettime(CLOCK_MONOTONIC, &next);
        for (;;) {
            next.tv_sec += 1;
            clock_gettime(CLOCK_MONOTONIC, &now);
            struct timespec rel = { next.tv_sec - now.tv_sec, next.tv_nsec - now.tv_nsec };
            if (rel.tv_nsec < 0) { rel.tv_nsec += 1000000000; rel.tv_sec -= 1; }
            sigtimedwait(&set, NULL, &rel);
        }
    }
    if (strstr(mode, "futex")) {
        static int word = 0;
        struct timespec next; clock_gettime(CLOCK_MONOTONIC, &next);
        for (;;) { next.tv_sec += 1; syscall(SYS_futex, &word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, 0, &next, NULL, FUTEX_BITSET_MATCH_ANY); }
    }
    if (strstr(mode, "nanosleep")) {
        struct timespec next; clock_gettime(CLOCK_MONOTONIC, &next);
        for (;;) { next.tv_sec += 1; clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL); }
    }
    struct timespec now, next; clock_gettime(CLOCK_MONOTONIC, &next);
    for (;;) {
        next.tv_sec += 1;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long ms = (next.tv_sec - now.tv_sec) * 1000 + (next.tv_nsec - now.tv_nsec + 999999) / 1000000;
        if (ms < 0) ms = 0;
        epoll_wait(ep, ev, 4, (int)ms);
    }
}
