// Fiber runtime of kernelopt's CPU emulation, part 2: the host thread pool that runs the blocks of a
// launch in parallel, memcheck's access checks, and crash and cancel signals. Failure reports are
// written in kocpu_reports.cpp.
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "kocpu_internal.h"

namespace kocpu_rt {
namespace {

constexpr size_t kAltStack = 64 * 1024;

struct Pool {
    std::mutex mu;
    std::condition_variable wake, done;
    std::vector<Worker*> workers;
    Worker* caller = nullptr;  // shared by whichever thread calls kocpu_rt_launch (launches are serialized)
    Launch* launch = nullptr;
    uint64_t epoch = 0;
    size_t wanted = 0;
    size_t active = 0;
};

// Leaked on purpose: nothing may wait for pool threads at exit (one may be stuck in a kernel).
// A forked child has none of the parent's pool threads, so it starts with a fresh pool.
Pool* g_pool = nullptr;
std::mutex* g_launch_mutex = nullptr;

void fresh_pool() {
    g_pool = new Pool();
    g_launch_mutex = new std::mutex();
}

Pool& pool() {
    static bool ready = [] {
        fresh_pool();
        pthread_atfork(nullptr, nullptr, fresh_pool);
        return true;
    }();
    (void)ready;
    return *g_pool;
}

std::mutex& launch_mutex() {
    pool();
    return *g_launch_mutex;
}

int cancel_signal() { return SIGRTMIN + 7; }

struct sigaction g_previous[NSIG];

void install_altstack() {
    stack_t current;
    if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return;
    stack_t ss;
    ss.ss_sp = malloc(kAltStack);
    ss.ss_size = kAltStack;
    ss.ss_flags = 0;
    if (ss.ss_sp) sigaltstack(&ss, nullptr);
}


// A fault inside a fiber ends that block (and the launch) instead of the process; anything else
// goes to whoever handled the signal before us.
void on_signal(int sig, siginfo_t* info, void* context) {
    Worker* w = tls_worker;
    if (sig == cancel_signal()) {
        if (w && w->in_fibers && !w->in_runtime) abort_fiber(w, kAbortCancelled);
        return;
    }
    if (w && w->in_fibers) {
        w->fault_signal = sig;
        w->fault_addr = reinterpret_cast<uintptr_t>(info->si_addr);
#if defined(__x86_64__)
        w->fault_pc = uintptr_t(static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
        w->fault_pc = uintptr_t(static_cast<ucontext_t*>(context)->uc_mcontext.pc);
#endif
        abort_fiber(w, kAbortSignal);
    }
    const struct sigaction& previous = g_previous[sig];
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction) {
            previous.sa_sigaction(sig, info, context);
            return;
        }
    } else if (previous.sa_handler == SIG_IGN) {
        return;
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != nullptr) {
        previous.sa_handler(sig);
        return;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

// Checked at every launch: a handler installed after ours (e.g. Python's faulthandler) is chained.
void ensure_handlers() {
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, cancel_signal()}) {
        struct sigaction current;
        sigaction(sig, nullptr, &current);
        if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_signal) continue;
        struct sigaction mine;
        memset(&mine, 0, sizeof mine);
        mine.sa_sigaction = on_signal;
        mine.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&mine.sa_mask);
        g_previous[sig] = current;
        sigaction(sig, &mine, nullptr);
    }
}

}  // namespace

void unblock_signals() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, cancel_signal()}) sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

}  // namespace kocpu_rt

using namespace kocpu_rt;

namespace {

__attribute__((noinline)) void check_access(uintptr_t a, size_t n, int write, uintptr_t ret) {
    Worker* w = tls_worker;
    if (!w || !w->checking || n == 0) return;
    auto inside = [a, n](uintptr_t lo, uintptr_t hi) { return a >= lo && a + n <= hi && a + n > a; };
    const Fiber* f = w->current;
    if (f && f->stack && inside(reinterpret_cast<uintptr_t>(f->stack->lo), reinterpret_cast<uintptr_t>(f->stack->lo) + f->stack->size))
        return;
    const Launch* launch = w->launch;
    const kocpu_launch_desc* d = launch->desc;
    for (int i = 0; i < d->nregions; ++i)
        if (inside(uintptr_t(d->region_base[i]), uintptr_t(d->region_base[i] + d->region_size[i]))) return;
    auto dyn = reinterpret_cast<uintptr_t>(w->dyn_base);
    if (inside(dyn, dyn + w->dyn_size)) return;
    for (const Region& r : w->shared_regions)
        if (inside(r.lo, r.hi)) return;
    for (const Region& r : launch->lib_ranges)
        if (inside(r.lo, r.hi)) return;
    w->fault_addr = a;
    w->fault_size = int(n);
    w->fault_write = write;
    w->fault_pc = ret - 1;
    abort_fiber(w, kAbortMemcheck);  // before the access happens: nothing gets corrupted
}

struct FindObject {
    uintptr_t target;
    std::vector<Region>* ranges;
};

int find_object(struct dl_phdr_info* info, size_t, void* data) {
    auto* find = static_cast<FindObject*>(data);
    bool found = false;
    for (int i = 0; i < info->dlpi_phnum && !found; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
        found = ph.p_type == PT_LOAD && find->target >= lo && find->target < lo + ph.p_memsz;
    }
    if (!found) return 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
        if (ph.p_type == PT_LOAD) find->ranges->push_back(Region{lo, lo + ph.p_memsz, 0});
    }
    return 1;
}

void run_blocks(Worker* w, Launch* launch) {
    w->launch = launch;
    for (;;) {
        if (launch->stop.load(std::memory_order_relaxed)) break;
        uint64_t b = launch->next.fetch_add(1, std::memory_order_relaxed);
        if (b >= launch->nblocks) break;
        if (!run_block(w, launch, b)) {
            report_block_failure(w, launch);
            release_block(w);
            break;
        }
    }
    kocpu_tls_block = nullptr;
    kocpu_tls_thread = nullptr;
}

void pool_main(Worker* w, size_t index) {
    tls_worker = w;
    w->thread = pthread_self();
    install_altstack();
    Pool& P = pool();
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(P.mu);
    for (;;) {
        P.wake.wait(lock, [&] { return P.epoch != seen; });
        seen = P.epoch;
        if (index >= P.wanted) continue;
        Launch* launch = P.launch;
        lock.unlock();
        run_blocks(w, launch);
        lock.lock();
        if (--P.active == 0) P.done.notify_all();
    }
}

int invalid(kocpu_launch_report* r, const char* message) {
    r->status = KOCPU_INVALID;
    snprintf(r->message, sizeof r->message, "%s", message);
    return r->status;
}

}  // namespace

#define KOCPU_ACCESS_HOOKS(N)                                                                                         \
    KOCPU_EXPORT void __asan_load##N##_noabort(void* p) { check_access(uintptr_t(p), N, 0, uintptr_t(__builtin_return_address(0))); } \
    KOCPU_EXPORT void __asan_store##N##_noabort(void* p) { check_access(uintptr_t(p), N, 1, uintptr_t(__builtin_return_address(0))); } \
    KOCPU_EXPORT void __asan_load##N(void* p) { check_access(uintptr_t(p), N, 0, uintptr_t(__builtin_return_address(0))); } \
    KOCPU_EXPORT void __asan_store##N(void* p) { check_access(uintptr_t(p), N, 1, uintptr_t(__builtin_return_address(0))); }

// Memcheck builds compile the candidate with -fsanitize=kernel-address and call-only instrumentation:
// every load and store the compiler cannot prove safe calls one of these hooks first.
KOCPU_ACCESS_HOOKS(1)
KOCPU_ACCESS_HOOKS(2)
KOCPU_ACCESS_HOOKS(4)
KOCPU_ACCESS_HOOKS(8)
KOCPU_ACCESS_HOOKS(16)

KOCPU_EXPORT void __asan_loadN_noabort(void* p, size_t n) { check_access(uintptr_t(p), n, 0, uintptr_t(__builtin_return_address(0))); }
KOCPU_EXPORT void __asan_storeN_noabort(void* p, size_t n) { check_access(uintptr_t(p), n, 1, uintptr_t(__builtin_return_address(0))); }
KOCPU_EXPORT void __asan_loadN(void* p, size_t n) { check_access(uintptr_t(p), n, 0, uintptr_t(__builtin_return_address(0))); }
KOCPU_EXPORT void __asan_storeN(void* p, size_t n) { check_access(uintptr_t(p), n, 1, uintptr_t(__builtin_return_address(0))); }
KOCPU_EXPORT void __asan_handle_no_return(void) {}

KOCPU_EXPORT int kocpu_rt_abi_version(void) { return KOCPU_ABI_VERSION; }

KOCPU_EXPORT const char* kocpu_rt_switch_kind(void) { return kSwitchKind; }

KOCPU_EXPORT int kocpu_rt_launch(const kocpu_launch_desc* d, kocpu_launch_report* r) {
    std::lock_guard<std::mutex> serial(launch_mutex());
    memset(r, 0, sizeof *r);
    uint64_t T = uint64_t(d->block[0]) * d->block[1] * d->block[2];
    uint64_t nblocks = uint64_t(d->grid[0]) * d->grid[1] * d->grid[2];
    if (T == 0 || nblocks == 0) return invalid(r, "grid and block must be at least 1 in every dimension");
    if (T > kMaxThreads) return invalid(r, "a block has more than 1024 threads");
    if (d->dynamic_shared > kSharedOptinLimit) return invalid(r, "dynamic shared memory exceeds 232448 B per block");
    Launch launch;
    launch.desc = d;
    launch.report = r;
    launch.nblocks = nblocks;
    launch.T = unsigned(T);
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(d->kernel_main), &info)) launch.lib_base = reinterpret_cast<uintptr_t>(info.dli_fbase);
    if (d->memcheck) {
        FindObject find{reinterpret_cast<uintptr_t>(d->kernel_main), &launch.lib_ranges};
        dl_iterate_phdr(find_object, &find);
    }
    ensure_handlers();
    Pool& P = pool();
    uint64_t threads = d->threads < 1 ? 1 : (d->threads > 1024 ? 1024 : uint64_t(d->threads));
    size_t helpers = size_t(threads - 1 < nblocks - 1 ? threads - 1 : nblocks - 1);
    Worker* me;
    {
        std::lock_guard<std::mutex> guard(P.mu);
        while (P.workers.size() < helpers) {
            Worker* w = new_worker();
            P.workers.push_back(w);
            std::thread(pool_main, w, P.workers.size() - 1).detach();
        }
        if (!P.caller) P.caller = new_worker();
        me = P.caller;
        me->thread = pthread_self();
        P.launch = &launch;
        P.wanted = helpers;
        P.active = helpers;
        ++P.epoch;
    }
    P.wake.notify_all();
    install_altstack();
    tls_worker = me;
    run_blocks(me, &launch);
    tls_worker = nullptr;
    {
        std::unique_lock<std::mutex> lock(P.mu);
        P.done.wait(lock, [&] { return P.active == 0; });
        P.launch = nullptr;
    }
    fflush(stdout);
    return r->status;
}

// Ends a launch that runs too long: stops handing out blocks and interrupts threads running kernel
// code. Only the launch described by `target` (any launch if null); returns 1 if it was running.
KOCPU_EXPORT int kocpu_rt_cancel(const kocpu_launch_desc* target) {
    Pool& P = pool();
    std::lock_guard<std::mutex> guard(P.mu);
    if (!P.launch || (target && P.launch->desc != target)) return 0;
    P.launch->stop.store(true);
    for (Worker* w : P.workers)
        if (w->in_fibers) pthread_kill(w->thread, cancel_signal());
    if (P.caller && P.caller->in_fibers) pthread_kill(P.caller->thread, cancel_signal());
    return 1;
}
