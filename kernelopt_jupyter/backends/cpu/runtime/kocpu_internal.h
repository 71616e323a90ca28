// Internal structures of the fiber runtime, shared by kocpu_fibers.cpp (scheduling inside a block)
// and kocpu_launch.cpp (host thread pool, memcheck, signals, reports). Not seen by kernel code.
#pragma once
#include <pthread.h>
#include <signal.h>
#include <ucontext.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "kocpu_abi.h"

namespace kocpu_rt {

constexpr unsigned kMaxThreads = 1024;
constexpr size_t kStaticSharedLimit = 49152;
constexpr size_t kSharedOptinLimit = 232448;
constexpr size_t kStaticArena = 128 * 1024;
constexpr size_t kMemcheckGap = 64;
constexpr size_t kPage = 4096;

#if defined(__x86_64__) && !defined(KOCPU_UCONTEXT)
extern "C" void kocpu_ctx_switch(void** save_sp, void* load_sp);
extern "C" [[noreturn]] void kocpu_ctx_jump(void* load_sp);
struct Context {
    void* sp = nullptr;
};
inline void ctx_switch(Context& from, Context& to) { kocpu_ctx_switch(&from.sp, to.sp); }
[[noreturn]] inline void ctx_jump(Context& to) { kocpu_ctx_jump(to.sp); }
#else
struct Context {
    ucontext_t uc;
};
inline void ctx_switch(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }
[[noreturn]] inline void ctx_jump(Context& to) {
    setcontext(&to.uc);
    abort();
}
#endif
void ctx_make(Context& c, char* lo, size_t size, void (*fn)(void*), void* arg);
extern const char* const kSwitchKind;

struct Stack {
    char* lo;
    size_t size;
    Stack* next;
};

// Fiber stacks: mmap'd in chunks, each with a guard page below it, recycled LIFO.
struct StackPool {
    size_t size;
    Stack* free_list = nullptr;
    StackPool();
    Stack* get() {
        if (!free_list && !grow()) return nullptr;
        Stack* s = free_list;
        free_list = s->next;
        return s;
    }
    void put(Stack* s) {
        s->next = free_list;
        free_list = s;
    }
    bool grow();
};

enum FiberState : uint8_t { kNotStarted, kReady, kRunning, kAtBarrier, kAtWarp, kDone };
enum AbortCode {
    kNoAbort = 0,
    kAbortStopped,
    kAbortMemcheck,
    kAbortSignal,
    kAbortCancelled,
    kAbortTrap,
    kAbortInvalid,
    kAbortNoMemory
};

struct Fiber {
    kocpu_thread_pub pub;
    uint8_t state;
    uint8_t op;
    int line;
    unsigned mask;
    int arg;
    int width;
    unsigned long long value;
    unsigned long long result;
    Stack* stack;
    Context ctx;
};

struct Region {
    uintptr_t lo, hi;
    int line;
};

struct Slot {
    uint64_t gen;
    size_t offset;
};

struct Launch {
    const kocpu_launch_desc* desc;
    kocpu_launch_report* report;
    uint64_t nblocks;
    unsigned T;
    std::atomic<uint64_t> next{0};
    std::atomic<bool> stop{false};
    std::atomic<bool> claimed{false};
    std::vector<Region> lib_ranges;
    uintptr_t lib_base = 0;
};

// One per host thread that runs blocks; owns the fibers, stacks and shared memory it reuses.
struct Worker {
    Context sched;
    StackPool stacks;
    Fiber* fibers = nullptr;
    unsigned warp_live[kMaxThreads / 32];
    unsigned warp_pending[kMaxThreads / 32];   // lanes waiting at a warp collective
    unsigned warp_blocked[kMaxThreads / 32];   // lanes waiting at anything (barrier, collective, activemask)
    unsigned warp_converge[kMaxThreads / 32];  // lanes waiting in __activemask()
    uint16_t rq[kMaxThreads];
    unsigned rq_head = 0, rq_count = 0;
    unsigned T = 0, next_unstarted = 0, live = 0, arrived = 0, pred_count = 0, last_count = 0;
    unsigned prepared[3] = {0, 0, 0};
    kocpu_block_pub block;
    Fiber* current = nullptr;
    Launch* launch = nullptr;
    volatile sig_atomic_t in_fibers = 0;
    volatile sig_atomic_t in_runtime = 0;
    bool checking = false;
    int abort_code = kNoAbort;
    // What an abort carries back to the scheduler (recorded where it happens, formatted later).
    uintptr_t fault_addr = 0, fault_pc = 0;
    int fault_size = 0, fault_write = 0, fault_signal = 0, trap_line = 0;
    const char* trap_what = nullptr;
    char invalid_message[512];
    // Shared memory of the block being run.
    char* arena = nullptr;
    char* dyn_base = nullptr;
    size_t dyn_size = 0, static_top = 0, static_bytes = 0;
    uint64_t block_gen = 0;
    std::vector<Slot> slots;
    std::vector<Region> shared_regions;
    pthread_t thread;
};

extern __thread Worker* tls_worker __attribute__((tls_model("initial-exec")));

Worker* new_worker();
[[noreturn]] void abort_fiber(Worker* w, int code);
// Runs one block to completion; false if it aborted or deadlocked (w->abort_code says which).
bool run_block(Worker* w, Launch* launch, uint64_t block);
// Formats the report of a failed block; called in normal (non-fiber) context.
void report_block_failure(Worker* w, Launch* launch);
void release_block(Worker* w);
// Lets crash and cancel signals reach this thread again after a fiber was ended by one.
void unblock_signals();

}  // namespace kocpu_rt
