#define _POSIX_C_SOURCE 200809L
/* The bundled `dir` store (pathways/stores/dir.h): one file per key in a
 * directory, written temp -> fsync -> rename -> fsync(dir).
 *
 * Written as a host application would write its own store: public headers
 * only. Every file operation is relative to a descriptor of the directory
 * (openat, renameat, unlinkat, fstatat), so the directory may be renamed
 * under us and paths are built once. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "pathways/stores/dir.h"

#define PW_DIR_TEMP_PREFIX ".tmp-"
#define PW_DIR_DEFAULT_STALE_SECONDS 3600u
/* Writes and reads go in chunks: bounded syscalls, and a kill can land
 * between two of them (the fault tests rely on that). */
#define PW_DIR_CHUNK ((size_t)1 << 20)
/* Names tried for one put's temporary file before it fails with EEXIST. */
#define PW_DIR_TEMP_ATTEMPTS 64

/* The SEQ of temporary files ".tmp-KEY-PID-SEQ", process-wide: two stores
 * over one directory in one process share the PID, so a counter per store
 * made the same name twice (and one put failed with EEXIST). This counter
 * only makes names unique, no store depends on another's use of it; a
 * name taken anyway (a leftover of an earlier process with this PID, a
 * second copy of this code in the process) is skipped by O_EXCL and
 * retrying with the next number. */
static atomic_uint_least64_t pw_dir_temp_seq;

typedef struct pw_dir_store_s {
  pw_allocator_t allocator;
  pw_logger_t logger;
  char* path;
  size_t path_size;
  int dirfd;
  uint64_t max_bytes;
  uint32_t stale_seconds;
  uint32_t stale_removed;
  pthread_mutex_t lock;      /* approx_bytes, eviction */
  uint64_t approx_bytes;     /* entries' bytes as last scanned plus puts since */
} pw_dir_store_t;

/* An errno as a status naming the store, the operation and the file. */
static pw_status_t pw_dir_errno(const pw_dir_store_t* s, int err, const char* op,
                                const char* name) {
  char text[128];
  if (strerror_r(err, text, sizeof(text)) != 0) snprintf(text, sizeof(text), "errno %d", err);
  pw_status_code_t code = err == ENOENT                  ? PW_STATUS_NOT_FOUND
                          : err == ENOSPC || err == EDQUOT ? PW_STATUS_RESOURCE_EXHAUSTED
                          : err == EACCES || err == EPERM  ? PW_STATUS_PERMISSION_DENIED
                                                           : PW_STATUS_UNAVAILABLE;
  return pw_status_make(code, "dir store '%s': %s '%s': %s", s->path, op, name, text);
}

static pw_status_t pw_dir_check_key(const pw_dir_store_t* s, const char* key) {
  if (!pw_store_key_is_valid(key)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "dir store '%s': invalid key '%.40s' (1-%d bytes of [A-Za-z0-9_.-], "
                          "not starting with '.')",
                          s->path, key ? key : "(null)", PW_STORE_KEY_MAX);
  }
  return NULL;
}

/* ---- stale temporary files and eviction ----------------------------------- */

/* True for ".tmp-KEY-PID-SEQ" left by a process that is gone, or older
 * than the stale age. */
static bool pw_dir_temp_is_stale(const pw_dir_store_t* s, const char* name,
                                 const struct stat* st, time_t now) {
  if (now - st->st_mtime > (time_t)s->stale_seconds) return true;
  const char* last = strrchr(name, '-');
  if (last == NULL || last == name) return false;
  const char* p = last - 1;
  while (p > name && *p != '-') --p;
  char* end = NULL;
  long pid = strtol(p + 1, &end, 10);
  if (end != last || pid <= 0 || pid == (long)getpid()) return false;
  return kill((pid_t)pid, 0) == -1 && errno == ESRCH;
}

static void pw_dir_remove_stale(pw_dir_store_t* s) {
  int fd = openat(s->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = fd >= 0 ? fdopendir(fd) : NULL;
  if (dir == NULL) {
    if (fd >= 0) close(fd);
    return;
  }
  time_t now = time(NULL);
  struct dirent* de;
  while ((de = readdir(dir)) != NULL) {
    if (strncmp(de->d_name, PW_DIR_TEMP_PREFIX, strlen(PW_DIR_TEMP_PREFIX)) != 0) continue;
    struct stat st;
    if (fstatat(s->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISREG(st.st_mode) || !pw_dir_temp_is_stale(s, de->d_name, &st, now)) continue;
    if (unlinkat(s->dirfd, de->d_name, 0) == 0) s->stale_removed++;
  }
  closedir(dir);
  if (s->stale_removed) {
    pw_log(&s->logger, PW_LOG_INFO, "store", "dir store '%s': removed %u stale temporary files",
           s->path, s->stale_removed);
  }
}

typedef struct pw_dir_file_t {
  char name[PW_STORE_KEY_MAX + 1];
  int64_t mtime_ns;
  uint64_t size;
} pw_dir_file_t;

static int pw_dir_file_order(const void* a, const void* b) {
  const pw_dir_file_t* x = a;
  const pw_dir_file_t* y = b;
  if (x->mtime_ns != y->mtime_ns) return x->mtime_ns < y->mtime_ns ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Scans the entries; evicts least recently used ones (never |keep|) until
 * they fit the bound. Called with s->lock held. */
static pw_status_t pw_dir_evict(pw_dir_store_t* s, const char* keep) {
  int fd = openat(s->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = fd >= 0 ? fdopendir(fd) : NULL;
  if (dir == NULL) {
    int err = errno;
    if (fd >= 0) close(fd);
    return pw_dir_errno(s, err, "listing", ".");
  }
  pw_dir_file_t* files = NULL;
  size_t count = 0, capacity = 0;
  uint64_t total = 0;
  pw_status_t status = NULL;
  struct dirent* de;
  while (status == NULL && (de = readdir(dir)) != NULL) {
    struct stat st;
    if (!pw_store_key_is_valid(de->d_name) ||
        fstatat(s->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      continue;
    }
    if (count == capacity) {
      size_t next = capacity ? capacity * 2 : 64;
      pw_dir_file_t* grown = NULL;
      status = pw_allocator_malloc(s->allocator, next * sizeof(*files), 0, (void**)&grown);
      if (status != NULL) break;
      if (count) memcpy(grown, files, count * sizeof(*files));
      pw_allocator_free(s->allocator, files, capacity * sizeof(*files));
      files = grown;
      capacity = next;
    }
    memcpy(files[count].name, de->d_name, strlen(de->d_name) + 1); /* valid keys fit */
    files[count].mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    files[count].size = (uint64_t)st.st_size;
    total += (uint64_t)st.st_size;
    count++;
  }
  closedir(dir);
  if (status == NULL && total > s->max_bytes) {
    qsort(files, count, sizeof(*files), pw_dir_file_order);
    uint32_t evicted = 0;
    for (size_t i = 0; i < count && total > s->max_bytes; ++i) {
      if (strcmp(files[i].name, keep) == 0) continue;
      if (unlinkat(s->dirfd, files[i].name, 0) == 0 || errno == ENOENT) {
        total -= files[i].size;
        evicted++;
      }
    }
    pw_log(&s->logger, PW_LOG_DEBUG, "store", "dir store '%s': evicted %u entries", s->path,
           evicted);
  }
  if (status == NULL) s->approx_bytes = total;
  pw_allocator_free(s->allocator, files, capacity * sizeof(*files));
  return status;
}

/* ---- vtable methods ------------------------------------------------------- */

static void pw_dir_destroy(void* self) {
  pw_dir_store_t* s = self;
  if (s->dirfd >= 0) close(s->dirfd);
  pthread_mutex_destroy(&s->lock);
  pw_allocator_free(s->allocator, s->path, s->path_size);
  pw_allocator_free(s->allocator, s, sizeof(*s));
}

static pw_status_t pw_dir_get(void* self, const char* key, pw_allocator_t allocator,
                              void** out_bytes, size_t* out_size) {
  pw_dir_store_t* s = self;
  *out_bytes = NULL;
  *out_size = 0;
  PW_RETURN_IF_ERROR(pw_dir_check_key(s, key));
  int fd = openat(s->dirfd, key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return pw_dir_errno(s, errno, "opening", key);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return pw_dir_errno(s, err, "stat of", key);
  }
  size_t size = (size_t)st.st_size;
  void* bytes = NULL;
  pw_status_t status = size ? pw_allocator_malloc(allocator, size, 0, &bytes) : NULL;
  size_t got = 0;
  while (status == NULL && got < size) {
    size_t want = size - got < PW_DIR_CHUNK ? size - got : PW_DIR_CHUNK;
    ssize_t n = read(fd, (char*)bytes + got, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) status = pw_dir_errno(s, errno, "reading", key);
    else if (n == 0) {
      status = pw_status_make(PW_STATUS_DATA_LOSS,
                              "dir store '%s': '%s' ended after %zu of %zu bytes", s->path, key,
                              got, size);
    } else {
      got += (size_t)n;
    }
  }
  /* Refresh the modification time: it orders eviction (LRU). */
  if (status == NULL && s->max_bytes) (void)futimens(fd, NULL);
  close(fd);
  if (status != NULL) {
    if (bytes) pw_allocator_free(allocator, bytes, size);
    return status;
  }
  *out_bytes = bytes;
  *out_size = size;
  return NULL;
}

static pw_status_t pw_dir_write_all(pw_dir_store_t* s, int fd, const char* name,
                                    const void* bytes, size_t size) {
  size_t done = 0;
  while (done < size) {
    size_t want = size - done < PW_DIR_CHUNK ? size - done : PW_DIR_CHUNK;
    ssize_t n = write(fd, (const char*)bytes + done, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return pw_dir_errno(s, errno, "writing", name);
    if (n == 0) return pw_dir_errno(s, EIO, "writing", name);
    done += (size_t)n;
  }
  return NULL;
}

static pw_status_t pw_dir_put(void* self, const char* key, const void* bytes, size_t size) {
  pw_dir_store_t* s = self;
  PW_RETURN_IF_ERROR(pw_dir_check_key(s, key));
  if (s->max_bytes && size > s->max_bytes) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "dir store '%s': '%s' has %zu bytes, more than the store's bound of "
                          "%llu",
                          s->path, key, size, (unsigned long long)s->max_bytes);
  }
  char temp[PW_STORE_KEY_MAX + 64];
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < PW_DIR_TEMP_ATTEMPTS; ++attempt) {
    unsigned long long seq = (unsigned long long)atomic_fetch_add(&pw_dir_temp_seq, 1) + 1;
    snprintf(temp, sizeof(temp), PW_DIR_TEMP_PREFIX "%s-%ld-%llu", key, (long)getpid(), seq);
    fd = openat(s->dirfd, temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return pw_dir_errno(s, errno, "creating", temp);
  pw_status_t status = pw_dir_write_all(s, fd, temp, bytes, size);
  if (status == NULL && fsync(fd) != 0) status = pw_dir_errno(s, errno, "fsync of", temp);
  if (close(fd) != 0 && status == NULL) status = pw_dir_errno(s, errno, "closing", temp);
  if (status == NULL && renameat(s->dirfd, temp, s->dirfd, key) != 0) {
    status = pw_dir_errno(s, errno, "renaming into place", temp);
  }
  if (status != NULL) {
    (void)unlinkat(s->dirfd, temp, 0); /* the previous value stays */
    return status;
  }
  if (fsync(s->dirfd) != 0) {
    status = pw_dir_errno(s, errno, "fsync of the directory after writing", key);
    return pw_status_annotate(status, "the new entry is in place but may not survive a crash");
  }
  if (s->max_bytes) {
    pthread_mutex_lock(&s->lock);
    s->approx_bytes += size;
    if (s->approx_bytes > s->max_bytes) status = pw_dir_evict(s, key);
    pthread_mutex_unlock(&s->lock);
    if (status != NULL) {
      pw_log(&s->logger, PW_LOG_WARN, "store", "eviction failed: %s", pw_status_message(status));
      pw_status_free(status);
    }
  }
  return NULL;
}

static pw_status_t pw_dir_remove(void* self, const char* key) {
  pw_dir_store_t* s = self;
  PW_RETURN_IF_ERROR(pw_dir_check_key(s, key));
  if (unlinkat(s->dirfd, key, 0) != 0) return pw_dir_errno(s, errno, "removing", key);
  return NULL;
}

static pw_status_t pw_dir_list(void* self, pw_store_list_fn_t fn, void* user) {
  pw_dir_store_t* s = self;
  if (fn == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "dir store '%s': list without a callback",
                          s->path);
  }
  int fd = openat(s->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = fd >= 0 ? fdopendir(fd) : NULL;
  if (dir == NULL) {
    int err = errno;
    if (fd >= 0) close(fd);
    return pw_dir_errno(s, err, "listing", ".");
  }
  struct dirent* de;
  while ((de = readdir(dir)) != NULL) {
    struct stat st;
    if (!pw_store_key_is_valid(de->d_name) ||
        fstatat(s->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      continue;
    }
    if (!fn(user, de->d_name, (uint64_t)st.st_size)) break;
  }
  closedir(dir);
  return NULL;
}

static const pw_store_vtable_t pw_dir_store_vtable = {
    .struct_size = sizeof(pw_store_vtable_t),
    .name = "dir",
    .destroy = pw_dir_destroy,
    .get = pw_dir_get,
    .put = pw_dir_put,
    .remove = pw_dir_remove,
    .list = pw_dir_list,
};

/* ---- create --------------------------------------------------------------- */

void pw_dir_store_options_init(pw_dir_store_options_t* options) {
  memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(*options);
}

pw_status_t pw_dir_store_create(const pw_dir_store_options_t* options, pw_store_t* out_store) {
  if (out_store == NULL || options == NULL ||
      options->struct_size < PW_DIR_STORE_OPTIONS_SIZE_V1 || options->path == NULL ||
      options->path[0] == '\0') {
    if (out_store) {
      out_store->vtable = NULL;
      out_store->self = NULL;
    }
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_dir_store_create: options, path or out_store missing, or options "
                          "struct_size is smaller than v1 (%zu)",
                          (size_t)PW_DIR_STORE_OPTIONS_SIZE_V1);
  }
  out_store->vtable = NULL;
  out_store->self = NULL;
  pw_allocator_t a = pw_allocator_is_valid(options->allocator) ? options->allocator
                                                               : pw_allocator_system();
  pw_dir_store_t* s = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(a, sizeof(*s), 0, (void**)&s));
  s->allocator = a;
  s->logger = options->logger.fn ? options->logger : pw_logger_default();
  s->max_bytes = options->max_bytes;
  s->stale_seconds = options->stale_temp_seconds ? options->stale_temp_seconds
                                                 : PW_DIR_DEFAULT_STALE_SECONDS;
  s->dirfd = -1;
  s->path_size = strlen(options->path) + 1;
  pthread_mutex_init(&s->lock, NULL);
  pw_status_t status = pw_allocator_malloc(a, s->path_size, 1, (void**)&s->path);
  if (status != NULL) {
    s->path_size = 0;
    pw_dir_destroy(s);
    return status;
  }
  memcpy(s->path, options->path, s->path_size);
  if (mkdir(s->path, 0755) != 0 && errno != EEXIST) {
    status = pw_dir_errno(s, errno, "creating directory", s->path);
  }
  if (status == NULL) {
    s->dirfd = open(s->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dirfd < 0) status = pw_dir_errno(s, errno, "opening directory", s->path);
  }
  if (status != NULL) {
    pw_dir_destroy(s);
    return status;
  }
  pw_dir_remove_stale(s);
  if (s->max_bytes) {
    pthread_mutex_lock(&s->lock);
    status = pw_dir_evict(s, "");
    pthread_mutex_unlock(&s->lock);
    if (status != NULL) {
      pw_dir_destroy(s);
      return status;
    }
  }
  out_store->vtable = &pw_dir_store_vtable;
  out_store->self = s;
  return NULL;
}

uint32_t pw_dir_store_stale_removed(const pw_store_t* store) {
  if (store == NULL || store->vtable != &pw_dir_store_vtable) return 0;
  return ((const pw_dir_store_t*)store->self)->stale_removed;
}
