// Fiber runtime of kernelopt's CPU emulation, part 0: switching between fibers (a hand-written
// x86-64 switch, or ucontext elsewhere) and the pool of fiber stacks, with guard pages.
#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <utility>

#include "kocpu_internal.h"

namespace kocpu_rt {

#if defined(__x86_64__) && !defined(KOCPU_UCONTEXT)
// Saves the callee-saved registers on the current stack, swaps stack pointers, restores the other
// side's registers: no system call, no signal mask, a handful of cycles.
extern "C" void kocpu_ctx_entry();
asm(R"(
    .text
    .p2align 4
    .globl kocpu_ctx_switch
    .hidden kocpu_ctx_switch
    .type kocpu_ctx_switch, @function
kocpu_ctx_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size kocpu_ctx_switch, .-kocpu_ctx_switch

    .p2align 4
    .globl kocpu_ctx_jump
    .hidden kocpu_ctx_jump
    .type kocpu_ctx_jump, @function
kocpu_ctx_jump:
    movq %rdi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size kocpu_ctx_jump, .-kocpu_ctx_jump

    .p2align 4
    .globl kocpu_ctx_entry
    .hidden kocpu_ctx_entry
    .type kocpu_ctx_entry, @function
kocpu_ctx_entry:
    .cfi_startproc
    .cfi_undefined rip
    movq %r12, %rdi
    callq *%r13
    ud2
    .cfi_endproc
    .size kocpu_ctx_entry, .-kocpu_ctx_entry
)");

void ctx_make(Context& c, char* lo, size_t size, void (*fn)(void*), void* arg) {
    uintptr_t top = (reinterpret_cast<uintptr_t>(lo) + size) & ~uintptr_t(15);
    void** sp = reinterpret_cast<void**>(top - 56);  // 6 registers + return address; entry sees rsp = top
    sp[0] = nullptr;                                 // r15
    sp[1] = nullptr;                                 // r14
    sp[2] = reinterpret_cast<void*>(fn);             // r13
    sp[3] = arg;                                     // r12
    sp[4] = nullptr;                                 // rbx
    sp[5] = nullptr;                                 // rbp
    sp[6] = reinterpret_cast<void*>(&kocpu_ctx_entry);
    c.sp = sp;
}
const char* const kSwitchKind = "x86-64 switch";
#else
using Entry = std::pair<void (*)(void*), void*>;

static void ctx_trampoline(unsigned hi, unsigned lo) {
    auto* entry = reinterpret_cast<Entry*>((uintptr_t(hi) << 32) | uintptr_t(lo));
    entry->first(entry->second);
    abort();
}

void ctx_make(Context& c, char* lo, size_t size, void (*fn)(void*), void* arg) {
    // makecontext passes only ints, so (fn, arg) goes on top of the new stack and its address in two halves.
    uintptr_t top = (reinterpret_cast<uintptr_t>(lo) + size - sizeof(Entry)) & ~uintptr_t(15);
    auto* entry = new (reinterpret_cast<void*>(top)) Entry(fn, arg);
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = lo;
    c.uc.uc_stack.ss_size = top - reinterpret_cast<uintptr_t>(lo);
    c.uc.uc_link = nullptr;
    auto packed = reinterpret_cast<uintptr_t>(entry);
    makecontext(&c.uc, reinterpret_cast<void (*)()>(&ctx_trampoline), 2, unsigned(packed >> 32), unsigned(packed));
}
const char* const kSwitchKind = "ucontext";
#endif

// Guard pages split mappings; stop adding them well before vm.max_map_count on many-core hosts.
static std::atomic<long> g_guard_budget{24000};

StackPool::StackPool() {
    const char* text = getenv("KERNELOPT_CPU_STACK_KB");
    long kb = text ? atol(text) : 128;
    size = size_t(kb < 16 ? 16 : kb) * 1024;
}

bool StackPool::grow() {
    const size_t count = 32;
    bool guard = g_guard_budget.fetch_sub(long(count)) > long(count);
    size_t slot = size + (guard ? kPage : 0);
    void* mem = mmap(nullptr, slot * count, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
                     -1, 0);
    if (mem == MAP_FAILED) return false;
    for (size_t i = count; i-- > 0;) {
        char* base = static_cast<char*>(mem) + i * slot;
        if (guard) mprotect(base, kPage, PROT_NONE);
        put(new Stack{base + (guard ? kPage : 0), size, nullptr});
    }
    return true;
}

}  // namespace kocpu_rt
