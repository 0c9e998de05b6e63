/* Crashes on purpose, at known functions, through a few named frames.
 * argv[1] picks the crash: segv, other, abort, assert, null, flip, handler,
 * handler_flip, mce, wait, big.
 * Every function is noinline and does work after its call, so no build
 * flag turns a frame into a tail call. */
#include <assert.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NOINL __attribute__((noinline))
volatile int sink;
typedef void (*fn_t)(void);

NOINL void segv_leaf(int *p) { *p = 42; sink++; }
NOINL void segv_mid(int *p) { segv_leaf(p); sink++; }
NOINL void segv_top(int *p) { segv_mid(p); sink++; }

NOINL void other_leaf(int *p) { p[3] = 7; sink++; }
NOINL void other_top(int *p) { other_leaf(p); sink++; }

NOINL void abort_leaf(void) { abort(); }
NOINL void abort_top(void) { abort_leaf(); sink++; }

NOINL void assert_leaf(int x) { assert(x == 1); sink++; }
NOINL void assert_top(int x) { assert_leaf(x); sink++; }

NOINL void null_leaf(fn_t f) { f(); sink++; }
NOINL void null_top(fn_t f) { null_leaf(f); sink++; }

/* A heap pointer with one bit flipped, as a miscomputing CPU would leave it. */
NOINL void flip_leaf(int *p) { *p = 1; sink++; }
NOINL void flip_top(void) {
    int *good = malloc(64);
    good[0] = 0;
    uintptr_t bad = (uintptr_t)good ^ (1ULL << 44);
    flip_leaf((int *)bad);
    sink += good[0];
}

/* A crash handler that logs and aborts, as many services install: the stack
 * runs abort <- on_crash <- signal trampoline <- the faulting frames. */
NOINL void on_crash(int sig) { (void)sig; write(2, "crashed\n", 8); abort(); }
NOINL void handler_top(void) {
    signal(SIGSEGV, on_crash);
    segv_top(NULL);
    sink++;
}
NOINL void handler_flip_top(void) {
    signal(SIGSEGV, on_crash);
    flip_top();
    sink++;
}

/* What the kernel sends a process that reads memory a machine check has poisoned: SIGBUS with si_code
 * BUS_MCEERR_AR (4) and the address. No machine here can poison a page (MADV_HWPOISON needs
 * CONFIG_MEMORY_FAILURE), so the process queues that exact siginfo to itself, which Linux allows for a
 * process's own signals; the kernel then dumps core with it as it would. */
NOINL void mce_leaf(char *p) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = SIGBUS;
    si.si_code = 4; /* BUS_MCEERR_AR */
    si.si_addr = p;
    syscall(SYS_rt_sigqueueinfo, getpid(), SIGBUS, &si);
    sink += p[0];
}
NOINL void mce_top(void) { char *p = malloc(4096); p[0] = 1; mce_leaf(p); sink++; }

NOINL void wait_top(void) { for (;;) pause(); }

/* Touch about 1 GiB (argv[2] MiB), then crash: the benchmark's big core. */
NOINL void big_top(long mib) {
    char *mem = malloc((size_t)mib << 20);
    for (long i = 0; i < (mib << 20); i += 4096) mem[i] = (char)i | 1;
    segv_top(NULL);
    sink += mem[0];
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "segv";
    if (!strcmp(mode, "segv")) segv_top(NULL);
    else if (!strcmp(mode, "other")) other_top(NULL);
    else if (!strcmp(mode, "abort")) abort_top();
    else if (!strcmp(mode, "assert")) assert_top(argc);
    else if (!strcmp(mode, "null")) null_top(NULL);
    else if (!strcmp(mode, "flip")) flip_top();
    else if (!strcmp(mode, "handler")) handler_top();
    else if (!strcmp(mode, "handler_flip")) handler_flip_top();
    else if (!strcmp(mode, "mce")) mce_top();
    else if (!strcmp(mode, "wait")) { puts("waiting"); fflush(stdout); wait_top(); }
    else if (!strcmp(mode, "big")) big_top(argc > 2 ? atol(argv[2]) : 1024);
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
