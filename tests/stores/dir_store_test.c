#define _POSIX_C_SOURCE 200809L
/* The bundled dir store through its vtable, as the cache uses it: get,
 * put (atomic replace), remove, list, key rules, stale temporary files
 * removed at open (dead writer or too old, never a live writer's fresh
 * one), size bound with least-recently-used eviction, and errors that
 * name the path. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache_util.h"
#include "runtime/checks.h"
#include "support/test_allocators.h"

TestSuite(dir_store, .fini = pw_test_check_leaks);

static void put(pw_store_t* s, const char* key, const char* text) {
  OK(s->vtable->put(s->self, key, text, strlen(text)));
}

static void expect(pw_store_t* s, const char* key, const char* text) {
  void* bytes = NULL;
  size_t size = 0;
  OK(s->vtable->get(s->self, key, pw_allocator_system(), &bytes, &size));
  cr_assert_eq(size, strlen(text), "%s: %zu bytes", key, size);
  cr_assert(size == 0 || memcmp(bytes, text, size) == 0);
  if (bytes) pw_allocator_free(pw_allocator_system(), bytes, size);
}

typedef struct listing_t {
  int count;
  uint64_t bytes;
} listing_t;

static bool count_entry(void* user, const char* key, uint64_t size) {
  (void)key;
  listing_t* l = user;
  l->count++;
  l->bytes += size;
  return true;
}

Test(dir_store, get_put_remove_list) {
  char dir[256];
  cr_assert(cu_make_dir(dir, sizeof(dir)));
  pw_store_t s = cu_dir_store(dir, 0);
  cr_assert_not_null(s.vtable);
  cr_assert_str_eq(s.vtable->name, "dir");
  put(&s, "alpha", "first");
  put(&s, "beta.v2", "second value");
  put(&s, "empty", "");
  expect(&s, "alpha", "first");
  expect(&s, "empty", "");
  put(&s, "alpha", "replaced");
  expect(&s, "alpha", "replaced");
  listing_t l = {0, 0};
  OK(s.vtable->list(s.self, count_entry, &l));
  cr_assert_eq(l.count, 3);
  cr_assert_eq(l.bytes, strlen("replaced") + strlen("second value"));
  OK(s.vtable->remove(s.self, "alpha"));
  void* bytes;
  size_t size;
  FAILS(s.vtable->get(s.self, "alpha", pw_allocator_system(), &bytes, &size), PW_STATUS_NOT_FOUND,
        "alpha");
  FAILS(s.vtable->remove(s.self, "alpha"), PW_STATUS_NOT_FOUND, dir);
  /* Keys that could escape the directory or hide as temp files. */
  const char* bad[] = {"", ".hidden", "a/b", "..", "with space", "tab\t"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    FAILS(s.vtable->put(s.self, bad[i], "x", 1), PW_STATUS_INVALID_ARGUMENT, "invalid key");
  }
  char long_key[PW_STORE_KEY_MAX + 2];
  memset(long_key, 'k', sizeof(long_key) - 1);
  long_key[sizeof(long_key) - 1] = '\0';
  FAILS(s.vtable->put(s.self, long_key, "x", 1), PW_STATUS_INVALID_ARGUMENT, "invalid key");
  long_key[PW_STORE_KEY_MAX] = '\0';
  put(&s, long_key, "longest key");
  cr_assert_eq(cu_count_files(dir, ".tmp-"), 0);
  s.vtable->destroy(s.self);
  cu_remove_dir(dir);
}

/* Creates a temporary file as a writer |pid| would have left it, |age|
 * seconds old. */
static void plant_temp(const char* dir, const char* key, long pid, time_t age) {
  char path[512];
  snprintf(path, sizeof(path), "%s/.tmp-%s-%ld-1", dir, key, pid);
  FILE* f = fopen(path, "wb");
  fputs("partial", f);
  fclose(f);
  if (age > 0) {
    struct timespec times[2];
    clock_gettime(CLOCK_REALTIME, &times[0]);
    times[0].tv_sec -= age;
    times[1] = times[0];
    cr_assert_eq(utimensat(AT_FDCWD, path, times, 0), 0);
  }
}

static long dead_pid(void) {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status;
  waitpid(pid, &status, 0);
  return (long)pid; /* reaped: gone (barring reuse within this test) */
}

Test(dir_store, stale_temporary_files_are_removed_at_open) {
  char dir[256];
  cr_assert(cu_make_dir(dir, sizeof(dir)));
  plant_temp(dir, "a-b", dead_pid(), 0);          /* writer died: removed */
  plant_temp(dir, "c", (long)getppid(), 7200);    /* alive but 2 h old: removed */
  plant_temp(dir, "d-e-f", (long)getppid(), 0);   /* alive and fresh: kept */
  char other[512];
  snprintf(other, sizeof(other), "%s/.tmp-odd-name", dir); /* no pid: kept until old */
  FILE* f = fopen(other, "wb");
  fclose(f);
  pw_store_t s = cu_dir_store(dir, 0);
  cr_assert_eq(pw_dir_store_stale_removed(&s), 2, "removed %u, %d temporary files left",
               pw_dir_store_stale_removed(&s), cu_count_files(dir, ".tmp-"));
  cr_assert_eq(cu_count_files(dir, ".tmp-"), 2);
  listing_t l = {0, 0};
  OK(s.vtable->list(s.self, count_entry, &l));
  cr_assert_eq(l.count, 0, "temporary files are not entries");
  s.vtable->destroy(s.self);
  cu_remove_dir(dir);
}

static void set_age(const char* dir, const char* key, time_t age) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, key);
  struct timespec times[2];
  clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= age;
  times[1] = times[0];
  cr_assert_eq(utimensat(AT_FDCWD, path, times, 0), 0);
}

static bool exists(const char* dir, const char* key) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, key);
  return access(path, F_OK) == 0;
}

Test(dir_store, size_bound_evicts_least_recently_used) {
  char dir[256];
  cr_assert(cu_make_dir(dir, sizeof(dir)));
  pw_store_t s = cu_dir_store(dir, 1000);
  char value[301];
  memset(value, 'v', 300);
  value[300] = '\0';
  put(&s, "a", value);
  put(&s, "b", value);
  put(&s, "c", value);
  set_age(dir, "a", 300);
  set_age(dir, "b", 200);
  set_age(dir, "c", 100);
  expect(&s, "a", value); /* a is now the most recently used */
  put(&s, "d", value);    /* 1200 > 1000: evicts b */
  cr_assert(exists(dir, "a") && !exists(dir, "b") && exists(dir, "c") && exists(dir, "d"));
  char big[1002];
  memset(big, 'x', 1001);
  big[1001] = '\0';
  FAILS(s.vtable->put(s.self, "big", big, 1001), PW_STATUS_RESOURCE_EXHAUSTED,
        "more than the store's bound of 1000");
  s.vtable->destroy(s.self);
  /* Opening a directory over the bound trims it. */
  s = cu_dir_store(dir, 500);
  listing_t l = {0, 0};
  OK(s.vtable->list(s.self, count_entry, &l));
  cr_assert_leq(l.bytes, 500);
  s.vtable->destroy(s.self);
  cu_remove_dir(dir);
}

Test(dir_store, errors_name_the_path) {
  pw_dir_store_options_t o;
  pw_dir_store_options_init(&o);
  o.path = "/nonexistent-pw-parent/cache";
  pw_store_t s;
  FAILS(pw_dir_store_create(&o, &s), PW_STATUS_NOT_FOUND,
        "dir store '/nonexistent-pw-parent/cache': creating directory");
  cr_assert_null(s.vtable);
  o.path = NULL;
  FAILS(pw_dir_store_create(&o, &s), PW_STATUS_INVALID_ARGUMENT, "path");
  o.path = "/tmp";
  o.struct_size = 8;
  FAILS(pw_dir_store_create(&o, &s), PW_STATUS_INVALID_ARGUMENT, "smaller than v1");
}

static bool sweep_body(pw_allocator_t allocator, bool expect_failure, void* user) {
  const char* dir = user;
  pw_dir_store_options_t o;
  pw_dir_store_options_init(&o);
  o.path = dir;
  o.max_bytes = 100000;
  o.allocator = allocator;
  pw_store_t s;
  pw_status_t st = pw_dir_store_create(&o, &s);
  if (st != NULL) {
    bool ok = expect_failure && pw_status_code(st) == PW_STATUS_RESOURCE_EXHAUSTED;
    pw_status_free(st);
    return ok;
  }
  st = s.vtable->put(s.self, "k", "value", 5);
  void* bytes = NULL;
  size_t size = 0;
  if (st == NULL) st = s.vtable->get(s.self, "k", allocator, &bytes, &size);
  bool ok = st == NULL ? size == 5
                       : expect_failure && pw_status_code(st) == PW_STATUS_RESOURCE_EXHAUSTED;
  pw_status_free(st);
  if (bytes) pw_allocator_free(allocator, bytes, size);
  s.vtable->destroy(s.self);
  return ok;
}

Test(dir_store, every_allocation_failure_is_reported_cleanly) {
  char dir[256];
  cr_assert(cu_make_dir(dir, sizeof(dir)));
  char why[256] = "";
  cr_assert_gt(pw_test_allocator_sweep(sweep_body, dir, why), 1, "%s", why);
  cu_remove_dir(dir);
}
