// Fiber runtime of kernelopt's CPU emulation, part 1: each CUDA thread of a block is a cooperative
// fiber; barriers, warp collectives and __shared__ memory live here.
//
// Scheduling within a block: fibers run in linear-thread-id order; a fiber runs until it waits at a
// barrier or warp collective (or exits), then control passes straight to the next runnable fiber.
// A fiber that exits without ever having waited hands its stack to the next unstarted fiber, so a
// barrier-free kernel runs every thread of a block on one stack without a single context switch.
// When nothing is runnable but threads are still alive, the block is deadlocked.
#include <sys/mman.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <utility>

#include "kocpu_internal.h"

extern "C" {
__attribute__((visibility("default"), tls_model("initial-exec"))) __thread kocpu_thread_pub* kocpu_tls_thread;
__attribute__((visibility("default"), tls_model("initial-exec"))) __thread const kocpu_block_pub* kocpu_tls_block;
}

namespace kocpu_rt {

__attribute__((tls_model("initial-exec"))) __thread Worker* tls_worker;

Worker* new_worker() {
    auto* w = new Worker();
    w->fibers = new Fiber[kMaxThreads]();
    size_t arena_size = kStaticArena + kSharedOptinLimit + kPage;
    void* mem = mmap(nullptr, arena_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) abort();
    w->arena = static_cast<char*>(mem);
    w->dyn_base = w->arena + kStaticArena;
    return w;
}

void abort_fiber(Worker* w, int code) {
    w->abort_code = code;
    ctx_jump(w->sched);
}

static inline void push_ready(Worker* w, unsigned index) {
    w->fibers[index].state = kReady;
    w->warp_blocked[index >> 5] &= ~(1u << (index & 31));
    w->rq[(w->rq_head + w->rq_count) & (kMaxThreads - 1)] = uint16_t(index);
    ++w->rq_count;
}

static inline Fiber* pick_next(Worker* w) {
    if (w->rq_count) {
        unsigned index = w->rq[w->rq_head];
        w->rq_head = (w->rq_head + 1) & (kMaxThreads - 1);
        --w->rq_count;
        return &w->fibers[index];
    }
    if (w->next_unstarted < w->T) return &w->fibers[w->next_unstarted++];
    return nullptr;
}

static inline void resumed(Worker* w, Fiber* f) {
    w->current = f;
    f->state = kRunning;
    kocpu_tls_thread = &f->pub;
}

static void fiber_main(void* arg);

// The current fiber waits: control passes to the next runnable fiber, or back to the scheduler.
static void suspend(Worker* w, Fiber* f) {
    if (w->launch->stop.load(std::memory_order_relaxed)) abort_fiber(w, kAbortStopped);
    Fiber* n = pick_next(w);
    if (n == f) {
        resumed(w, f);
        return;
    }
    if (!n) {
        ctx_switch(f->ctx, w->sched);
    } else {
        if (n->state == kNotStarted) {
            n->stack = w->stacks.get();
            if (!n->stack) abort_fiber(w, kAbortNoMemory);
            ctx_make(n->ctx, n->stack->lo, n->stack->size, fiber_main, n);
        }
        ctx_switch(f->ctx, n->ctx);
    }
    resumed(w, f);
}

static void complete_warp(Worker* w, unsigned warp, unsigned parts);

// A lane exited: a collective that only waited for it may now be complete.
static void retry_warp(Worker* w, unsigned warp) {
    Fiber* base = &w->fibers[warp * 32];
    unsigned todo = w->warp_pending[warp];
    while (todo) {
        unsigned lane = unsigned(__builtin_ctz(todo));
        todo &= todo - 1;
        if (!(w->warp_pending[warp] >> lane & 1)) continue;
        unsigned parts = (base[lane].mask & w->warp_live[warp]) | (1u << lane);
        if ((parts & ~w->warp_pending[warp]) == 0) complete_warp(w, warp, parts);
    }
}

// __activemask() returns the lanes that execute it together. With fibers, "together" means: once
// no lane of the warp can run any further (each waits somewhere or has exited), the lanes waiting
// in the same __activemask() call form the mask.
static void settle_activemask(Worker* w, unsigned warp) {
    if (!w->warp_converge[warp] || (w->warp_live[warp] & ~w->warp_blocked[warp]) != 0) return;
    Fiber* base = &w->fibers[warp * 32];
    while (unsigned waiting = w->warp_converge[warp]) {
        int line = base[__builtin_ctz(waiting)].line;
        unsigned group = 0;
        for (unsigned m = waiting; m; m &= m - 1)
            if (base[__builtin_ctz(m)].line == line) group |= 1u << __builtin_ctz(m);
        w->warp_converge[warp] &= ~group;
        for (unsigned m = group; m; m &= m - 1) {
            base[__builtin_ctz(m)].result = group;
            push_ready(w, warp * 32 + unsigned(__builtin_ctz(m)));
        }
    }
}

static void thread_exit(Worker* w, Fiber* f) {
    f->state = kDone;
    --w->live;
    unsigned warp = f->pub.linear >> 5;
    w->warp_live[warp] &= ~(1u << (f->pub.linear & 31));
    if (w->warp_pending[warp]) retry_warp(w, warp);
    settle_activemask(w, warp);
}

static void fiber_main(void* arg) {
    Fiber* f = static_cast<Fiber*>(arg);
    Worker* w = tls_worker;
    void (*kernel_main)(void**) = w->launch->desc->kernel_main;
    void** args = w->launch->desc->args;
    for (;;) {
        resumed(w, f);
        w->in_runtime = 0;
        kernel_main(args);
        w->in_runtime = 1;
        thread_exit(w, f);
        Fiber* n = pick_next(w);
        if (n && n->state == kNotStarted) {
            n->stack = f->stack;  // this thread never waited: the next one starts on this very stack
            f->stack = nullptr;
            f = n;
            continue;
        }
        w->stacks.put(f->stack);  // nothing touches it before we have left it
        f->stack = nullptr;
        if (!n) ctx_jump(w->sched);
        ctx_jump(n->ctx);
    }
}

static inline unsigned sanitize_width(int width) {
    return (width >= 1 && width <= 32 && (width & (width - 1)) == 0) ? unsigned(width) : 32u;
}

static unsigned reduce_lanes(const Fiber* base, unsigned parts, int op, bool is_signed) {
    unsigned acc = unsigned(base[__builtin_ctz(parts)].value);
    for (unsigned k = parts & (parts - 1); k; k &= k - 1) {
        unsigned v = unsigned(base[__builtin_ctz(k)].value);
        switch (op) {
        case KOCPU_WARP_REDUCE_ADD: acc += v; break;
        case KOCPU_WARP_REDUCE_AND: acc &= v; break;
        case KOCPU_WARP_REDUCE_OR: acc |= v; break;
        case KOCPU_WARP_REDUCE_XOR: acc ^= v; break;
        case KOCPU_WARP_REDUCE_MIN:
            acc = is_signed ? unsigned(int(v) < int(acc) ? int(v) : int(acc)) : (v < acc ? v : acc);
            break;
        default: acc = is_signed ? unsigned(int(v) > int(acc) ? int(v) : int(acc)) : (v > acc ? v : acc); break;
        }
    }
    return acc;
}

// Every lane of the group has arrived: compute each lane's result from the values all of them
// deposited, before any lane can run on and deposit its next value.
static void complete_warp(Worker* w, unsigned warp, unsigned parts) {
    Fiber* base = &w->fibers[warp * 32];
    unsigned ballot = 0;
    for (unsigned m = parts; m; m &= m - 1) {
        unsigned lane = unsigned(__builtin_ctz(m));
        if (base[lane].value) ballot |= 1u << lane;
    }
    for (unsigned m = parts; m; m &= m - 1) {
        unsigned lane = unsigned(__builtin_ctz(m));
        Fiber& g = base[lane];
        unsigned width = sanitize_width(g.width);
        unsigned segment = lane & ~(width - 1);
        unsigned delta = unsigned(g.arg);
        unsigned src = lane;
        switch (g.op) {
        case KOCPU_WARP_SHFL_IDX: src = segment + (delta & (width - 1)); break;
        case KOCPU_WARP_SHFL_UP: src = lane - segment >= delta ? lane - delta : lane; break;
        case KOCPU_WARP_SHFL_DOWN: src = lane - segment + delta < width ? lane + delta : lane; break;
        case KOCPU_WARP_SHFL_XOR: src = (lane ^ delta) < segment + width ? lane ^ delta : lane; break;
        default: break;
        }
        switch (g.op) {
        case KOCPU_WARP_SHFL_IDX:
        case KOCPU_WARP_SHFL_UP:
        case KOCPU_WARP_SHFL_DOWN:
        case KOCPU_WARP_SHFL_XOR: g.result = (src < 32 && (parts >> src & 1)) ? base[src].value : g.value; break;
        case KOCPU_WARP_BALLOT: g.result = ballot; break;
        case KOCPU_WARP_ANY: g.result = ballot != 0; break;
        case KOCPU_WARP_ALL: g.result = ballot == parts; break;
        case KOCPU_WARP_MATCH_ANY:
        case KOCPU_WARP_MATCH_ALL: {
            unsigned same = 0;
            for (unsigned k = parts; k; k &= k - 1) {
                unsigned other = unsigned(__builtin_ctz(k));
                if (base[other].value == g.value) same |= 1u << other;
            }
            g.result = g.op == KOCPU_WARP_MATCH_ANY ? same : (same == parts ? parts : 0);
            break;
        }
        case KOCPU_WARP_SYNC: g.result = 0; break;
        default: g.result = reduce_lanes(base, parts, g.op, g.arg != 0); break;
        }
    }
    w->warp_pending[warp] &= ~parts;
    for (unsigned m = parts; m; m &= m - 1) push_ready(w, warp * 32 + unsigned(__builtin_ctz(m)));
}

static void prepare_fibers(Worker* w, const unsigned* block) {
    if (w->prepared[0] == block[0] && w->prepared[1] == block[1] && w->prepared[2] == block[2]) return;
    unsigned index = 0;
    for (unsigned z = 0; z < block[2]; ++z)
        for (unsigned y = 0; y < block[1]; ++y)
            for (unsigned x = 0; x < block[0]; ++x, ++index) {
                w->fibers[index].pub.tid = uint3{x, y, z};
                w->fibers[index].pub.linear = index;
            }
    memcpy(w->prepared, block, sizeof w->prepared);
}

bool run_block(Worker* w, Launch* launch, uint64_t b) {
    const kocpu_launch_desc* d = launch->desc;
    uint64_t gx = d->grid[0], gy = d->grid[1];
    w->block.block_idx = uint3{unsigned(b % gx), unsigned((b / gx) % gy), unsigned(b / (gx * gy))};
    w->block.block_dim = uint3{d->block[0], d->block[1], d->block[2]};
    w->block.grid_dim = uint3{d->grid[0], d->grid[1], d->grid[2]};
    prepare_fibers(w, d->block);
    unsigned T = launch->T;
    w->T = T;
    w->next_unstarted = 0;
    w->live = T;
    w->arrived = w->pred_count = 0;
    w->rq_head = w->rq_count = 0;
    for (unsigned i = 0; i < T; ++i) {
        w->fibers[i].state = kNotStarted;
        w->fibers[i].stack = nullptr;
    }
    for (unsigned warp = 0; warp < (T + 31) / 32; ++warp) {
        unsigned lanes = T - warp * 32;
        w->warp_live[warp] = lanes >= 32 ? 0xffffffffu : (1u << lanes) - 1;
        w->warp_pending[warp] = w->warp_blocked[warp] = w->warp_converge[warp] = 0;
    }
    ++w->block_gen;
    w->static_top = w->static_bytes = 0;
    w->dyn_size = d->dynamic_shared;
    w->shared_regions.clear();
    w->abort_code = kNoAbort;
    kocpu_tls_block = &w->block;

    Fiber* first = pick_next(w);
    first->stack = w->stacks.get();
    if (!first->stack) {
        w->abort_code = kAbortNoMemory;
        return false;
    }
    ctx_make(first->ctx, first->stack->lo, first->stack->size, fiber_main, first);
    w->checking = d->memcheck != 0;
    w->in_runtime = 1;
    w->in_fibers = 1;
    ctx_switch(w->sched, first->ctx);
    w->in_fibers = 0;
    w->checking = false;
    return w->abort_code == kNoAbort && w->live == 0;
}

void release_block(Worker* w) {
    for (unsigned i = 0; i < w->T; ++i) {
        if (w->fibers[i].stack) {
            w->stacks.put(w->fibers[i].stack);
            w->fibers[i].stack = nullptr;
        }
    }
    w->current = nullptr;
}

}  // namespace kocpu_rt

using namespace kocpu_rt;

extern "C" {

KOCPU_EXPORT int kocpu_rt_barrier(int line, int op, int predicate) {
    Worker* w = tls_worker;
    w->in_runtime = 1;
    Fiber* f = w->current;
    f->state = kAtBarrier;
    f->line = line;
    f->op = uint8_t(op);
    unsigned warp = f->pub.linear >> 5;
    w->warp_blocked[warp] |= 1u << (f->pub.linear & 31);
    ++w->arrived;
    if (predicate) ++w->pred_count;
    if (w->arrived == w->T) {  // arrivals at different __syncthreads lines count together, as on hardware
        w->last_count = w->pred_count;
        w->arrived = w->pred_count = 0;
        for (unsigned i = 0; i < w->T; ++i) push_ready(w, i);
    } else {
        settle_activemask(w, warp);
    }
    suspend(w, f);
    unsigned count = w->last_count;
    w->in_runtime = 0;
    switch (op) {
    case KOCPU_BAR_COUNT: return int(count);
    case KOCPU_BAR_AND: return count == w->T;
    case KOCPU_BAR_OR: return count != 0;
    default: return 0;
    }
}

KOCPU_EXPORT unsigned long long kocpu_rt_warp(int line, int op, unsigned int mask, unsigned long long value, int arg,
                                              int width) {
    Worker* w = tls_worker;
    w->in_runtime = 1;
    Fiber* f = w->current;
    unsigned warp = f->pub.linear >> 5, lane = f->pub.linear & 31;
    f->state = kAtWarp;
    f->line = line;
    f->op = uint8_t(op);
    f->mask = mask | (1u << lane);
    f->value = value;
    f->arg = arg;
    f->width = width;
    w->warp_pending[warp] |= 1u << lane;
    w->warp_blocked[warp] |= 1u << lane;
    unsigned parts = f->mask & w->warp_live[warp];
    if ((parts & ~w->warp_pending[warp]) == 0) complete_warp(w, warp, parts);
    else settle_activemask(w, warp);
    suspend(w, f);
    w->in_runtime = 0;
    return f->result;
}

KOCPU_EXPORT unsigned int kocpu_rt_activemask(int line) {
    Worker* w = tls_worker;
    w->in_runtime = 1;
    Fiber* f = w->current;
    unsigned warp = f->pub.linear >> 5, bit = 1u << (f->pub.linear & 31);
    f->state = kAtWarp;
    f->op = KOCPU_WARP_ACTIVEMASK;
    f->line = line;
    w->warp_blocked[warp] |= bit;
    w->warp_converge[warp] |= bit;
    settle_activemask(w, warp);
    suspend(w, f);
    w->in_runtime = 0;
    return unsigned(f->result);
}

KOCPU_EXPORT void* kocpu_rt_shared_static(kocpu_shared_key* key, size_t size, size_t align, int line) {
    static std::mutex key_mutex;
    static int key_count = 0;
    Worker* w = tls_worker;
    int index = __atomic_load_n(&key->index_plus_one, __ATOMIC_ACQUIRE) - 1;
    if (index < 0) {
        std::lock_guard<std::mutex> guard(key_mutex);
        if (key->index_plus_one == 0) __atomic_store_n(&key->index_plus_one, ++key_count, __ATOMIC_RELEASE);
        index = key->index_plus_one - 1;
    }
    if (size_t(index) >= w->slots.size()) {
        w->in_runtime = 1;  // a cancel signal must not land inside malloc
        w->slots.resize(size_t(index) + 16, Slot{0, 0});
        w->in_runtime = 0;
    }
    Slot& slot = w->slots[size_t(index)];
    if (slot.gen == w->block_gen) return w->arena + slot.offset;
    if (align < 16) align = 16;
    size_t gap = w->checking ? kMemcheckGap : 0;
    size_t offset = (w->static_top + gap + align - 1) & ~(align - 1);
    size_t bytes = w->static_bytes + size;
    const char* filename = w->launch->desc->filename;
    if (bytes > kStaticSharedLimit) {
        snprintf(w->invalid_message, sizeof w->invalid_message,
                 "%s:%d: static __shared__ memory reaches %zu B, over CUDA's limit of %zu B for static shared memory",
                 filename, line, bytes, kStaticSharedLimit);
        abort_fiber(w, kAbortInvalid);
    }
    if (bytes + w->dyn_size > kSharedOptinLimit) {
        snprintf(w->invalid_message, sizeof w->invalid_message,
                 "%zu B dynamic + %zu B static shared memory exceeds the %zu B per block (%s:%d)", w->dyn_size, bytes,
                 kSharedOptinLimit, filename, line);
        abort_fiber(w, kAbortInvalid);
    }
    if (offset + size + gap > kStaticArena) {
        snprintf(w->invalid_message, sizeof w->invalid_message,
                 "%s:%d: too many __shared__ variables for the CPU emulation", filename, line);
        abort_fiber(w, kAbortInvalid);
    }
    slot.gen = w->block_gen;
    slot.offset = offset;
    w->static_top = offset + size;
    w->static_bytes = bytes;
    if (w->checking) {
        auto lo = reinterpret_cast<uintptr_t>(w->arena + offset);
        w->shared_regions.push_back(Region{lo, lo + size, line});
    }
    return w->arena + offset;
}

KOCPU_EXPORT void* kocpu_rt_shared_dynamic(void) { return tls_worker->dyn_base; }

KOCPU_EXPORT void kocpu_rt_trap(int line, const char* what) {
    Worker* w = tls_worker;
    if (!w || !w->in_fibers) abort();
    w->trap_line = line;
    w->trap_what = what;
    abort_fiber(w, kAbortTrap);
}

}  // extern "C"
