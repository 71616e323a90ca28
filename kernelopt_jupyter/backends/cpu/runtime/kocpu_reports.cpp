// Fiber runtime of kernelopt's CPU emulation, part 3: the report of a failed block — a deadlock with
// the threads and lines involved, a fault or out-of-bounds access with the buffer it is nearest to.
#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "kocpu_internal.h"

namespace kocpu_rt {
namespace {

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
