// The contract between kernel libraries (candidate + prelude) and the fiber runtime library.
// Kernel code reads its thread and block through two initial-exec TLS pointers owned by the runtime,
// so a threadIdx read is one %fs-relative load even though both libraries are dlopen'd.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "kocpu_vector.h"

#define KOCPU_ABI_VERSION 4
#define KOCPU_EXPORT extern "C" __attribute__((visibility("default")))

enum kocpu_barrier_op { KOCPU_BAR_SYNC = 0, KOCPU_BAR_COUNT, KOCPU_BAR_AND, KOCPU_BAR_OR };

enum kocpu_warp_op {
    KOCPU_WARP_SYNC = 0,
    KOCPU_WARP_SHFL_IDX,
    KOCPU_WARP_SHFL_UP,
    KOCPU_WARP_SHFL_DOWN,
    KOCPU_WARP_SHFL_XOR,
    KOCPU_WARP_BALLOT,
    KOCPU_WARP_ANY,
    KOCPU_WARP_ALL,
    KOCPU_WARP_MATCH_ANY,
    KOCPU_WARP_MATCH_ALL,
    KOCPU_WARP_REDUCE_ADD,
    KOCPU_WARP_REDUCE_MIN,
    KOCPU_WARP_REDUCE_MAX,
    KOCPU_WARP_REDUCE_AND,
    KOCPU_WARP_REDUCE_OR,
    KOCPU_WARP_REDUCE_XOR,
    KOCPU_WARP_ACTIVEMASK,
    KOCPU_WARP_OP_COUNT
};

// Launch outcome codes (kocpu_launch_report.status).
enum kocpu_status {
    KOCPU_OK = 0,
    KOCPU_DEADLOCK,
    KOCPU_MEMCHECK,
    KOCPU_INVALID,
    KOCPU_SIGNAL,
    KOCPU_CANCELLED,
    KOCPU_TRAP,
    KOCPU_INTERNAL
};

enum kocpu_region_kind { KOCPU_REGION_NONE = 0, KOCPU_REGION_ARG, KOCPU_REGION_SHARED, KOCPU_REGION_DYNAMIC };

extern "C" {

struct kocpu_thread_pub {
    uint3 tid;
    unsigned int linear;
};

struct kocpu_block_pub {
    uint3 block_idx;
    uint3 block_dim;
    uint3 grid_dim;
};

// A function-local static per __shared__ declaration (and per template instance); 0 = unassigned.
struct kocpu_shared_key {
    int index_plus_one;
};

struct kocpu_launch_desc {
    void (*kernel_main)(void** args);
    void** args;
    unsigned int grid[3];
    unsigned int block[3];
    unsigned long long dynamic_shared;
    int threads;
    int memcheck;
    int nregions;
    const unsigned long long* region_base;
    const unsigned long long* region_size;
    const char* filename;
};

struct kocpu_launch_report {
    int status;
    int signal;
    int is_write;
    int access_size;
    unsigned int block[3];
    unsigned int thread[3];
    unsigned long long address;
    unsigned long long pc_offset;
    int pc_in_kernel;
    int region_kind;
    int region_index;
    int region_line;
    long long region_offset;
    unsigned long long region_size;
    char message[4096];
};

extern __thread struct kocpu_thread_pub* kocpu_tls_thread __attribute__((tls_model("initial-exec")));
extern __thread const struct kocpu_block_pub* kocpu_tls_block __attribute__((tls_model("initial-exec")));

int kocpu_rt_abi_version(void);
int kocpu_rt_launch(const struct kocpu_launch_desc* desc, struct kocpu_launch_report* report);
int kocpu_rt_cancel(const struct kocpu_launch_desc* target);
int kocpu_rt_barrier(int line, int op, int predicate);
unsigned long long kocpu_rt_warp(int line, int op, unsigned int mask, unsigned long long value, int arg,
                                 int width);
unsigned int kocpu_rt_activemask(int line);
void* kocpu_rt_shared_static(struct kocpu_shared_key* key, size_t size, size_t align, int line);
void* kocpu_rt_shared_dynamic(void);
void kocpu_rt_trap(int line, const char* what) __attribute__((noreturn));
}
