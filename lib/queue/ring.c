typedef int pw__ring_placeholder_t;
