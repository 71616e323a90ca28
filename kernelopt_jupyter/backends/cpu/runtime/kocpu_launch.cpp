// Fiber runtime of kernelopt's CPU emulation, part 2: the host thread pool that runs the blocks of a
// launch in parallel, memcheck's access checks, crash and cancel signals, and failure reports.
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdarg>
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

void unblock_signals() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, cancel_signal()}) sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
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

struct Text {
    char* buf;
    size_t cap;
    size_t len = 0;
    void add(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
        if (len + 1 >= cap) return;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf + len, cap - len, fmt, ap);
        va_end(ap);
        if (n > 0) len = len + size_t(n) < cap ? len + size_t(n) : cap - 1;
    }
};

const char* barrier_name(int op) {
    static const char* const names[] = {"__syncthreads()", "__syncthreads_count()", "__syncthreads_and()",
                                        "__syncthreads_or()"};
    return op >= 0 && op < 4 ? names[op] : "__syncthreads()";
}

const char* warp_name(int op) {
    static const char* const names[] = {
        "__syncwarp()",        "__shfl_sync()",      "__shfl_up_sync()",      "__shfl_down_sync()",
        "__shfl_xor_sync()",   "__ballot_sync()",    "__any_sync()",          "__all_sync()",
        "__match_any_sync()",  "__match_all_sync()", "__reduce_add_sync()",   "__reduce_min_sync()",
        "__reduce_max_sync()", "__reduce_and_sync()", "__reduce_or_sync()",   "__reduce_xor_sync()",
        "__activemask()"};
    return op >= 0 && op < KOCPU_WARP_OP_COUNT ? names[op] : "a warp collective";
}

// "threads 16-31" / "thread 5" / "threads 0-3, 8-11, ..." for the fibers a predicate selects.
template <class Pred>
void add_threads(Text& t, const Worker* w, Pred pred) {
    unsigned ranges = 0, count = 0;
    for (unsigned i = 0; i < w->T; ++i) count += pred(w->fibers[i]) ? 1 : 0;
    t.add(count == 1 ? "thread " : "threads ");
    for (unsigned i = 0; i < w->T;) {
        if (!pred(w->fibers[i])) {
            ++i;
            continue;
        }
        unsigned j = i;
        while (j + 1 < w->T && pred(w->fibers[j + 1])) ++j;
        if (ranges == 4) {
            t.add(", ...");
            return;
        }
        t.add(ranges ? ", " : "");
        if (i == j) t.add("%u", i);
        else t.add("%u-%u", i, j);
        ++ranges;
        i = j + 1;
    }
}

void describe_deadlock(Text& t, const Worker* w, const char* file) {
    const kocpu_block_pub& b = w->block;
    t.add("deadlock in block (%u,%u,%u) of %u threads: ", b.block_idx.x, b.block_idx.y, b.block_idx.z, w->T);
    unsigned at_barrier = 0, exited = 0;
    int lines[4], counts[4], nlines = 0, bar_op = 0;
    for (unsigned i = 0; i < w->T; ++i) {
        const Fiber& f = w->fibers[i];
        if (f.state == kDone) ++exited;
        if (f.state != kAtBarrier) continue;
        ++at_barrier;
        bar_op = f.op;
        int k = 0;
        while (k < nlines && lines[k] != f.line) ++k;
        if (k == nlines && nlines < 4) {
            lines[nlines] = f.line;
            counts[nlines++] = 0;
        }
        if (k < nlines) ++counts[k];
    }
    bool first = true;
    if (at_barrier) {
        t.add("%s at ", barrier_name(bar_op));
        for (int k = 0; k < nlines; ++k) {
            t.add("%s%s:%d", k ? " and " : "", file, lines[k]);
            if (nlines > 1) t.add(" (%d threads)", counts[k]);
        }
        t.add(" was reached by %u of %u threads; ", at_barrier, w->T);
    }
    if (exited) {
        t.add("%u exited (", exited);
        add_threads(t, w, [](const Fiber& f) { return f.state == kDone; });
        t.add(")");
        first = false;
    }
    // Each distinct warp collective someone waits at, with who waits there.
    int seen_ops[8], seen_lines[8], nseen = 0;
    for (unsigned i = 0; i < w->T; ++i) {
        const Fiber& f = w->fibers[i];
        if (f.state != kAtWarp) continue;
        bool known = false;
        for (int k = 0; k < nseen; ++k) known |= seen_ops[k] == f.op && seen_lines[k] == f.line;
        if (known || nseen == 8) continue;
        seen_ops[nseen] = f.op;
        seen_lines[nseen++] = f.line;
        int op = f.op, line = f.line;
        auto here = [op, line](const Fiber& g) { return g.state == kAtWarp && g.op == op && g.line == line; };
        unsigned n = 0;
        for (unsigned k = 0; k < w->T; ++k) n += here(w->fibers[k]) ? 1 : 0;
        t.add("%s%u wait%s at %s at %s:%d (", first ? "" : "; ", n, n == 1 ? "s" : "", warp_name(op), file, line);
        add_threads(t, w, here);
        t.add(")");
        first = false;
    }
    if (!at_barrier) t.add("; none of them can complete");
}

void describe_where(Text& t, const Worker* w) {
    const kocpu_block_pub& b = w->block;
    t.add(" by block (%u,%u,%u), thread ", b.block_idx.x, b.block_idx.y, b.block_idx.z);
    if (w->current) t.add("(%u,%u,%u)", w->current->pub.tid.x, w->current->pub.tid.y, w->current->pub.tid.z);
    else t.add("(?)");
}

void fill_position(kocpu_launch_report* r, const Worker* w, const Launch* launch, uintptr_t pc) {
    r->block[0] = w->block.block_idx.x;
    r->block[1] = w->block.block_idx.y;
    r->block[2] = w->block.block_idx.z;
    if (w->current) {
        r->thread[0] = w->current->pub.tid.x;
        r->thread[1] = w->current->pub.tid.y;
        r->thread[2] = w->current->pub.tid.z;
    }
    Dl_info info;
    if (pc && dladdr(reinterpret_cast<void*>(pc), &info) && info.dli_fbase) {
        r->pc_offset = pc - reinterpret_cast<uintptr_t>(info.dli_fbase);
        r->pc_in_kernel = reinterpret_cast<uintptr_t>(info.dli_fbase) == launch->lib_base;
    }
}

// The buffer an invalid address is nearest to, so the report can say "4 bytes past the end of x".
void nearest_region(kocpu_launch_report* r, const Worker* w, const Launch* launch, uintptr_t a) {
    unsigned long long best = ~0ull;
    auto consider = [&](uintptr_t lo, uintptr_t hi, int kind, int index, int line) {
        if (hi <= lo) return;
        unsigned long long dist = a < lo ? lo - a : (a >= hi ? a - hi : 0);
        if (dist >= best) return;
        best = dist;
        r->region_kind = kind;
        r->region_index = index;
        r->region_line = line;
        r->region_offset = (long long)(a - lo);
        r->region_size = hi - lo;
    };
    const kocpu_launch_desc* d = launch->desc;
    for (int i = 0; i < d->nregions; ++i)
        consider(uintptr_t(d->region_base[i]), uintptr_t(d->region_base[i] + d->region_size[i]), KOCPU_REGION_ARG, i, 0);
    for (size_t i = 0; i < w->shared_regions.size(); ++i)
        consider(w->shared_regions[i].lo, w->shared_regions[i].hi, KOCPU_REGION_SHARED, int(i), w->shared_regions[i].line);
    auto dyn = reinterpret_cast<uintptr_t>(w->dyn_base);
    consider(dyn, dyn + w->dyn_size, KOCPU_REGION_DYNAMIC, 0, 0);
}

bool in_guard_page(const Worker* w, uintptr_t a) {
    if (!w->current || !w->current->stack) return false;
    auto lo = reinterpret_cast<uintptr_t>(w->current->stack->lo);
    return a < lo && a + kPage * 4 >= lo;
}

}  // namespace

void report_block_failure(Worker* w, Launch* launch) {
    int code = w->abort_code;
    if (code == kAbortSignal || code == kAbortCancelled) unblock_signals();
    bool expected = false;
    bool mine = code != kAbortStopped && launch->claimed.compare_exchange_strong(expected, true);
    launch->stop.store(true);
    if (!mine) return;
    kocpu_launch_report* r = launch->report;
    const char* file = launch->desc->filename;
    Text t{r->message, sizeof r->message};
    switch (code) {
    case kNoAbort:
        r->status = KOCPU_DEADLOCK;
        describe_deadlock(t, w, file);
        break;
    case kAbortMemcheck:
        r->status = KOCPU_MEMCHECK;
        r->is_write = w->fault_write;
        r->access_size = w->fault_size;
        r->address = w->fault_addr;
        fill_position(r, w, launch, w->fault_pc);
        nearest_region(r, w, launch, w->fault_addr);
        t.add("out-of-bounds %d-byte %s of address 0x%llx@WHERE@", w->fault_size, w->fault_write ? "write" : "read",
              (unsigned long long)w->fault_addr);
        describe_where(t, w);
        break;
    case kAbortSignal: {
        r->status = KOCPU_SIGNAL;
        r->signal = w->fault_signal;
        r->address = w->fault_addr;
        fill_position(r, w, launch, w->fault_pc);
        bool overflow = w->fault_signal == SIGSEGV && in_guard_page(w, w->fault_addr);
        if (overflow) {
            t.add("stack overflow@WHERE@");
            describe_where(t, w);
            t.add(": the CPU emulation gives each thread %zu KiB of stack (KERNELOPT_CPU_STACK_KB)",
                  w->current->stack->size / 1024);
        } else if (w->fault_signal == SIGFPE) {
            t.add("arithmetic exception (SIGFPE, e.g. integer division by zero)@WHERE@");
            describe_where(t, w);
        } else {
            t.add("%s accessing address 0x%llx@WHERE@", strsignal(w->fault_signal), (unsigned long long)w->fault_addr);
            describe_where(t, w);
        }
        break;
    }
    case kAbortCancelled:
        r->status = KOCPU_CANCELLED;
        t.add("cancelled");
        describe_where(t, w);
        break;
    case kAbortTrap:
        r->status = KOCPU_TRAP;
        t.add("%s at %s:%d", w->trap_what ? w->trap_what : "__trap()", file, w->trap_line);
        describe_where(t, w);
        break;
    case kAbortInvalid:
        r->status = KOCPU_INVALID;
        t.add("%s", w->invalid_message);
        break;
    default:
        r->status = KOCPU_INTERNAL;
        t.add("out of memory for fiber stacks (%u threads per block)", w->T);
        break;
    }
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
