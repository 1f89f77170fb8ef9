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
#include <linux/futex.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* Advances *deadline by a second and returns how long from now until it. */
static struct timespec next_second(struct timespec *deadline)
{
    struct timespec now, left;
    deadline->tv_sec += 1;
    clock_gettime(CLOCK_MONOTONIC, &now);
    left.tv_sec = deadline->tv_sec - now.tv_sec;
    left.tv_nsec = deadline->tv_nsec - now.tv_nsec;
    if (left.tv_nsec < 0) {
        left.tv_nsec += 1000000000;
        left.tv_sec -= 1;
    }
    return left;
}

int main(void)
{
    const char *mode = getenv("WAKER_MODE") ? getenv("WAKER_MODE") : "epoll";
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);

    if (strcmp(mode, "epoll") == 0) {
        int epoll = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event events[4];
        for (;;) {
            struct timespec left = next_second(&deadline);
            long ms = left.tv_sec * 1000 + (left.tv_nsec + 999999) / 1000000;
            epoll_wait(epoll, events, 4, ms < 0 ? 0 : (int)ms);
        }
    } else if (strcmp(mode, "nanosleep") == 0) {
        for (;;) {
            deadline.tv_sec += 1;
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL);
        }
    } else if (strcmp(mode, "futex") == 0) {
        static uint32_t word;
        for (;;) {
            deadline.tv_sec += 1;
            syscall(SYS_futex, &word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, 0, &deadline,
                    NULL, FUTEX_BITSET_MATCH_ANY);
        }
    } else if (strcmp(mode, "timerfd") == 0) {
        int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
        struct itimerspec every_second = {{1, 0}, {1, 0}};
        uint64_t expirations;
        timerfd_settime(timer, 0, &every_second, NULL);
        for (;;)
            if (read(timer, &expirations, sizeof expirations) < 0)
                return 1;
    } else if (strcmp(mode, "sigtimed") == 0) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGHUP);
        sigprocmask(SIG_BLOCK, &set, NULL);
        for (;;) {
            struct timespec left = next_second(&deadline);
            sigtimedwait(&set, NULL, &left);
        }
    }
    fprintf(stderr, "wake-cost: unknown WAKER_MODE %s (epoll, nanosleep, futex, timerfd, sigtimed)\n", mode);
    return 2;
}
