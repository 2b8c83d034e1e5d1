/* Appends to slice sequences: the part of lib/sched/dispatch.c that links
 * a submission's (or an admission's) ops into the sequences and wakes the
 * devices idle at their tails. Included by dispatch.c only, at the place
 * of its "appends" section (its static functions use the cursor and
 * trampoline functions defined before it there, and are called per
 * submission: one translation unit, as the library is built without
 * LTO). The protocol is in dispatch.c's file comment. */
#ifndef PW_SCHED_APPEND_H_
#define PW_SCHED_APPEND_H_

/* Appends the group |first| .. |last| (ops of |exec| on one slice whose
 * |p|-th part is |slice|, linked to each other) to |slice|'s sequence.
 * The tail is exchanged, so appenders need no lock for a part's own
 * sequence (pw_dispatch_append says when the lock is taken). The slice
 * holds one reference on its tail's execution (an IDLE cursor may name
 * the tail, and the next appender writes its link): |counted| says the
 * submission counted it already (pw__dispatch_submit); the displaced
 * tail's reference is dropped here. Devices idle after the old tail move
 * to |first|; if |first|'s inputs are already complete (a root op, or one
 * admitted late by the scheduler) they claim it at once.
 *
 * The caller keeps |exec| alive for the whole call (the submitter's
 * reference, or the append lock, which stops another appender displacing
 * |last| and dropping its reference meanwhile): the scan below reads
 * |first| after other devices may have run it. */
/* Moves every device of |slice| whose cursor reads |idle| to |arrive|
 * (first|RUNNING when |ready|, else first|WAITING); returns how many it
 * moved. A device claimed earlier no longer reads |idle|. */
static uint32_t pw_dispatch_claim_idle(pw_slice_t* slice, void* idle, void* arrive,
                                       pw_op_t* first, bool ready) {
  uint32_t claimed = 0;
  for (uint32_t i = 0; i < slice->lane_count; ++i) {
    pw_device_t* d = &slice->devices[i];
    void* expected = idle;
    if (pw_atomic_load_ptr_relaxed(&d->cursor) == idle &&
        pw_atomic_cas_ptr(&d->cursor, &expected, arrive)) {
      claimed++;
      if (ready) {
        d->running = first;
        pw_dispatch_push(d, PW_WORK_LAUNCH);
      } else {
        pw_dispatch_arrived(d, first);
      }
    }
  }
  return claimed;
}

static void pw_dispatch_append_part(pw_slice_t* slice, uint32_t p, pw_execution_t* exec,
                                    pw_op_t* first, pw_op_t* last, bool counted) {
  /* Links inside the group were set when the block was laid out (with a
   * scheduler window, groups are single ops); the last op's may still
   * name what followed it in an earlier run of the block. The tail
   * exchange below publishes it (and the claiming CAS to a device claimed
   * without the link). */
  pw_atomic_store_ptr_relaxed(pw_op_link_at(last, p), NULL);
  if (!counted) pw_atomic_fetch_add_u32(&exec->refs, 1);
  pw_op_t* prev = pw_atomic_exchange_ptr(&slice->tail, last);
  /* A destroyed client's destroy pins the tail while it looks at it
   * (pw__dispatch_client_release_tails): then the later of the two drops
   * the slice's reference on it. */
  bool pinned = ((uintptr_t)prev & PW_TAIL_PINNED) != 0;
  if (__builtin_expect(pinned, 0)) prev = (pw_op_t*)((uintptr_t)prev & ~(uintptr_t)PW_TAIL_PINNED);
  /* |prev| stays alive until its reference is dropped below. Devices idle
   * after the old tail move to |first|. Inputs already complete (a root op
   * readied before its append, or one admitted late by the scheduler): the
   * CAS claims the launch at once, nobody else can, as a claim needs
   * op|WAITING. The devices already idle are claimed before |first| is
   * linked: a device reads the old tail's link only between going idle
   * and being claimed, so when every device is claimed here the link is
   * not written at all (one locked instruction fewer: the common case of
   * devices that drained between submissions). Otherwise the link is
   * published (xchg) and the devices are scanned again: the Dekker pair
   * with a device going idle (see the file comment). */
  void* idle = pw_cursor(prev, PW_CURSOR_IDLE);
  bool ready = pw_atomic_load_u32_acquire(&first->inputs_ready) != 0;
  void* arrive = pw_cursor(first, ready ? PW_CURSOR_RUNNING : PW_CURSOR_WAITING);
  uint32_t claimed = pw_dispatch_claim_idle(slice, idle, arrive, first, ready);
  if (prev != NULL && claimed < slice->lane_count) {
    pw_atomic_exchange_ptr(pw_op_link(prev, slice), first);
    (void)pw_dispatch_claim_idle(slice, idle, arrive, first, ready);
  }
  if (prev != NULL && (!pinned || pw_atomic_fetch_sub_u32(&slice->tail_pin, 1) == 1)) {
    pw_execution_release(prev->exec);
  }
}

/* Appends the group |first| .. |last| (of |exec|, all on |slice|) to the
 * sequence of every part of |slice|. Without a scheduler window the
 * submitter appends, its tail references counted at submission; a
 * one-part group takes no lock. A spanning group is appended to its parts
 * holding their append locks, taken in ascending slice index (span
 * order), so spanning appends that share parts are mutually exclusive,
 * never deadlock, and leave their ops in the same relative order on every
 * part (one-part appends in between do not change that order). With a
 * window the admitting thread appends, always under the locks (they keep
 * the op's execution alive through the append: see
 * pw_dispatch_append_part). */
static void pw_dispatch_append(pw_slice_t* slice, pw_execution_t* exec, pw_op_t* first,
                               pw_op_t* last) {
  bool counted = slice->runtime->sched_window == 0;
  if (slice->span_count == 1 && counted) {
    pw_dispatch_append_part(slice, 0, exec, first, last, true);
    return;
  }
  for (uint32_t p = 0; p < slice->span_count; ++p) {
    pthread_mutex_lock(&slice->span[p]->append_lock);
  }
  for (uint32_t p = 0; p < slice->span_count; ++p) {
    pw_dispatch_append_part(slice->span[p], p, exec, first, last, counted);
  }
  for (uint32_t p = slice->span_count; p-- > 0;) {
    pthread_mutex_unlock(&slice->span[p]->append_lock);
  }
}

void pw__dispatch_append(pw_slice_t* slice, pw_execution_t* exec, pw_op_t* first,
                         pw_op_t* last) {
  pw_dispatch_append(slice, exec, first, last);
}

#endif /* PW_SCHED_APPEND_H_ */
