/* Clients as every module sees them (core/client.h): the end of an
 * execution, the references executions hold on the client's struct, and
 * the struct's last release. Creating and destroying a client is
 * lib/runtime/client.c. */
#include <assert.h>
#include <pthread.h>

#include "core/client.h"

void pw__client_end(pw_client_t* client, uint32_t stripe) {
  /* The decrement that may bring the client to idle must be this
   * thread's last touch of the struct: once a waiter sees idle it may go
   * on to destroy the client, and the struct goes with the last block
   * that references it, which another thread may release at any time
   * (a slice displacing its tail). So the waiter count is read first
   * (seq_cst; a waiter registers with a locked add, fences, and sums the
   * stripes under idle_lock). No waiter, or this is not the stripe's last
   * execution: decrement, and touch nothing after. Otherwise decrement
   * and wake under idle_lock, which a waiter holds to sum the stripes:
   * it cannot see idle before this thread lets go of the lock. A waiter
   * that registers between the two reads and sums before the decrement
   * misses the wake-up: waiters wait in short timed slices
   * (pw_client_wait_stripes). No locked instruction is added: the read of
   * the waiter count is a plain load on x86. */
  pw_atomic_u64_t* counts = &client->stripes[stripe].counts;
  if (pw_atomic_load_u32_seq_cst(&client->idle_waiters) == 0 ||
      (uint32_t)pw_atomic_load_u64_relaxed(counts) != 1) {
    pw_atomic_fetch_sub_u64(counts, 1); /* the last touch of |client| */
    return;
  }
  pthread_mutex_lock(&client->idle_lock);
  if ((uint32_t)pw_atomic_fetch_sub_u64(counts, 1) == 1) {
    pthread_cond_broadcast(&client->idle_cond);
  }
  pthread_mutex_unlock(&client->idle_lock);
}

void pw__client_release_stripe(pw_client_t* client, uint32_t stripe) {
  uint64_t old = pw_atomic_fetch_sub_u64(&client->stripes[stripe].counts, PW_CLIENT_REF);
  if (old & PW_CLIENT_FOLDED) pw__client_release(client);
}

void pw__client_release(pw_client_t* client) {
  if (pw_atomic_fetch_sub_u32(&client->refs, 1) != 1) return;
  pw_atomic_fence_acquire();
  pw_runtime_t* runtime = client->runtime;
  /* The block cache is empty: pw_client_destroy drained and closed it, and
   * a block put back after that is freed, or drains the cache itself when
   * its put raced with the close (lib/sched/block.c); either happens before
   * its execution drops the reference this is the last of. */
  for (int i = 0; i < PW_BLOCK_CACHE_SLOTS; ++i) {
    assert(pw_atomic_load_ptr_relaxed(&client->block_cache[i].block) == NULL);
  }
  pthread_cond_destroy(&client->idle_cond);
  pthread_mutex_destroy(&client->idle_lock);
  pthread_mutex_destroy(&client->execs_lock);
  pw_allocator_free(runtime->allocator, client, sizeof(*client));
  /* The last touch of the runtime: pw_runtime_destroy waits for it. */
  pw_atomic_fetch_sub_u32(&runtime->client_structs, 1);
}
