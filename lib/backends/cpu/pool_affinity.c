/* Worker affinity for the CPU backend's pool: which CPU each worker is
 * pinned to (pathways/backends/cpu.h, WORKER POOL), and how many CPUs the
 * process may run on (the pool's cap on spinning workers).
 *
 * The list is resolved once, at creation, against sched_getaffinity: an
 * entry outside the process's CPU set is the caller's mistake and fails
 * creation naming the entry. Pinning a running thread can still fail later
 * (the set changed, a cgroup moved the process); that only costs placement,
 * so it is a logged warning and the worker runs unpinned. */
#define _GNU_SOURCE /* cpu_set_t, sched_getaffinity, pthread_setaffinity_np */
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"

/* The CPUs this process may run on, or false if the kernel will not say. */
static bool pw_cpu_allowed_set(cpu_set_t* out_set) {
  CPU_ZERO(out_set);
  return sched_getaffinity(0, sizeof(*out_set), out_set) == 0 && CPU_COUNT(out_set) > 0;
}

uint32_t pw_cpu__allowed_cpu_count(void) {
  cpu_set_t set;
  if (!pw_cpu_allowed_set(&set)) return 1;
  return (uint32_t)CPU_COUNT(&set);
}

/* "0-1,4" style text of |set| into |buffer| (truncated to fit). */
static void pw_cpu_format_set(const cpu_set_t* set, char* buffer, size_t capacity) {
  size_t length = 0;
  buffer[0] = '\0';
  for (int cpu = 0; cpu < CPU_SETSIZE && length + 16 < capacity; ++cpu) {
    if (!CPU_ISSET(cpu, set)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set)) ++last;
    int n = last == cpu ? snprintf(buffer + length, capacity - length, "%s%d",
                                   length ? "," : "", cpu)
                        : snprintf(buffer + length, capacity - length, "%s%d-%d",
                                   length ? "," : "", cpu, last);
    if (n < 0) break;
    length += (size_t)n;
    cpu = last;
  }
}

pw_status_t pw_cpu__affinity_resolve(pw_allocator_t allocator,
                                     const pw_cpu__pool_config_t* config,
                                     uint32_t** out_cpus, uint32_t* out_count) {
  *out_cpus = NULL;
  *out_count = 0;
  if (config->affinity == PW_CPU_AFFINITY_NONE) return NULL;
  cpu_set_t allowed;
  if (!pw_cpu_allowed_set(&allowed)) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "cpu backend: affinity: the process's CPU set cannot be "
                          "read (sched_getaffinity failed)");
  }
  uint32_t count = config->affinity == PW_CPU_AFFINITY_LIST ? config->cpu_count
                                                            : (uint32_t)CPU_COUNT(&allowed);
  if (config->affinity == PW_CPU_AFFINITY_LIST) {
    for (uint32_t i = 0; i < count; ++i) {
      uint32_t cpu = config->cpus[i];
      if (cpu >= CPU_SETSIZE || !CPU_ISSET((int)cpu, &allowed)) {
        char text[128];
        pw_cpu_format_set(&allowed, text, sizeof(text));
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "cpu backend: affinity_cpus[%u] is CPU %u, not one this "
                              "process may run on (%s)",
                              i, cpu, text);
      }
    }
  }
  void* memory = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_allocator_calloc_array(allocator, count, sizeof(uint32_t),
                                                   alignof(uint32_t), &memory),
                         "cpu backend: affinity list of %u CPUs", count);
  uint32_t* cpus = memory;
  if (config->affinity == PW_CPU_AFFINITY_LIST) {
    memcpy(cpus, config->cpus, count * sizeof(uint32_t));
  } else {
    uint32_t n = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && n < count; ++cpu) {
      if (CPU_ISSET(cpu, &allowed)) cpus[n++] = (uint32_t)cpu;
    }
  }
  *out_cpus = cpus;
  *out_count = count;
  return NULL;
}

void pw_cpu__affinity_pin(pthread_t thread, uint32_t worker, uint32_t cpu,
                          const pw_logger_t* logger) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET((int)cpu, &set);
  int rc = pthread_setaffinity_np(thread, sizeof(set), &set);
  if (rc != 0) {
    pw_log(logger, PW_LOG_WARN, PW_CPU_LOG,
           "worker %u could not be pinned to CPU %u (%s); it runs unpinned", worker, cpu,
           strerror(rc));
  }
}
