/* Options strings of plugins, "key=value,key=value" (pathways/plugin.h):
 * one tokenizer that pw_plugin_args_check and the getters share, so a
 * string the check accepted reads the same in every getter. Nothing is
 * allocated; every message quotes the key and, where it helps, the value. */
#include <stdio.h>
#include <string.h>

#include "pathways/plugin.h"

/* One "key=value" entry: pointers into the options string, not terminated. */
typedef struct pw_plugin_arg_t {
  const char* key;
  size_t key_len;
  const char* value; /* NULL when the entry has no '=' */
  size_t value_len;
  const char* entry; /* the whole entry, for messages */
  size_t entry_len;
} pw_plugin_arg_t;

/* Reads the entry at |*cursor| and moves past it and its ','. False at the
 * end of |args|. An empty string has no entries; an empty entry ("a=1,,"
 * or a trailing ',') is an entry without '='. */
static bool pw_plugin_arg_next(const char* args, const char** cursor, pw_plugin_arg_t* out) {
  const char* p = *cursor;
  if (p == NULL) {
    if (args == NULL || args[0] == '\0') return false;
    p = args;
  } else if (*p == '\0') {
    return false;
  } else {
    ++p; /* the ',' ending the previous entry */
  }
  const char* comma = strchr(p, ',');
  size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
  const char* eq = memchr(p, '=', len);
  out->entry = p;
  out->entry_len = len;
  out->key = p;
  out->key_len = eq != NULL ? (size_t)(eq - p) : len;
  out->value = eq != NULL ? eq + 1 : NULL;
  out->value_len = eq != NULL ? len - out->key_len - 1 : 0;
  *cursor = p + len; /* at the ',' or the NUL */
  return true;
}

static bool pw_plugin_key_is_valid(const char* key, size_t len) {
  if (len == 0) return false;
  for (size_t i = 0; i < len; ++i) {
    char c = key[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

static bool pw_plugin_key_is(const pw_plugin_arg_t* a, const char* key) {
  return a->key_len == strlen(key) && memcmp(a->key, key, a->key_len) == 0;
}

/* Writes "a, b, c" (or "none") into |buffer|, truncated with "..." if need be. */
static void pw_plugin_list_join(const char* const* names, char* buffer, size_t size) {
  size_t used = 0;
  buffer[0] = '\0';
  for (size_t i = 0; names != NULL && names[i] != NULL; ++i) {
    int n = snprintf(buffer + used, size - used, "%s%s", i > 0 ? ", " : "", names[i]);
    if (n < 0 || (size_t)n >= size - used) {
      if (size >= 4) memcpy(buffer + size - 4, "...", 4);
      return;
    }
    used += (size_t)n;
  }
  if (used == 0) snprintf(buffer, size, "none");
}

pw_status_t pw_plugin_args_check(const char* args, const char* const* known) {
  const char* cursor = NULL;
  pw_plugin_arg_t a;
  char list[512];
  while (pw_plugin_arg_next(args, &cursor, &a)) {
    if (a.value == NULL) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "options '%s': entry '%.*s' is not key=value", args,
                            (int)a.entry_len, a.entry);
    }
    if (!pw_plugin_key_is_valid(a.key, a.key_len)) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "options '%s': key '%.*s' is not [a-z0-9_]+", args, (int)a.key_len,
                            a.key);
    }
    bool is_known = false;
    for (size_t i = 0; known != NULL && known[i] != NULL && !is_known; ++i) {
      is_known = pw_plugin_key_is(&a, known[i]);
    }
    if (!is_known) {
      pw_plugin_list_join(known, list, sizeof(list));
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "options '%s': unknown key '%.*s' (known keys: %s)", args,
                            (int)a.key_len, a.key, list);
    }
    /* Given twice: any earlier entry with the same key. */
    const char* again = NULL;
    pw_plugin_arg_t b;
    while (pw_plugin_arg_next(args, &again, &b) && b.entry < a.entry) {
      if (b.key_len == a.key_len && memcmp(b.key, a.key, a.key_len) == 0) {
        return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "options '%s': key '%.*s' is given twice", args, (int)a.key_len,
                              a.key);
      }
    }
  }
  return NULL;
}

/* The first entry with |key| and a value; false when there is none. */
static bool pw_plugin_arg_find(const char* args, const char* key, pw_plugin_arg_t* out) {
  const char* cursor = NULL;
  while (pw_plugin_arg_next(args, &cursor, out)) {
    if (out->value != NULL && pw_plugin_key_is(out, key)) return true;
  }
  return false;
}

static pw_status_t pw_plugin_args_null(const void* out, const char* key, const char* call) {
  if (out == NULL || key == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: %s is NULL", call,
                          key == NULL ? "key" : "the output");
  }
  return NULL;
}

pw_status_t pw_plugin_args_u64(const char* args, const char* key, uint64_t default_value,
                               uint64_t max, uint64_t* out_value) {
  return pw_plugin_args_range(args, key, default_value, 0, max, out_value);
}

pw_status_t pw_plugin_args_range(const char* args, const char* key, uint64_t default_value,
                                 uint64_t min, uint64_t max, uint64_t* out_value) {
  PW_RETURN_IF_ERROR(pw_plugin_args_null(out_value, key, "pw_plugin_args_range"));
  *out_value = default_value;
  pw_plugin_arg_t a;
  if (!pw_plugin_arg_find(args, key, &a)) return NULL;
  uint64_t v = 0;
  bool ok = a.value_len > 0 && a.value_len <= 20;
  for (size_t i = 0; ok && i < a.value_len; ++i) {
    char c = a.value[i];
    ok = c >= '0' && c <= '9';
    unsigned d = (unsigned)(c - '0');
    if (ok && v > (UINT64_MAX - d) / 10) ok = false;
    if (ok) v = v * 10 + d;
  }
  if (!ok) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "option %s='%.*s' is not a decimal number from %llu to %llu", key,
                          (int)a.value_len, a.value, (unsigned long long)min,
                          (unsigned long long)max);
  }
  if (v > max || v < min) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "option %s=%llu is %s its %s %llu", key,
                          (unsigned long long)v, v > max ? "above" : "below",
                          v > max ? "maximum" : "minimum",
                          (unsigned long long)(v > max ? max : min));
  }
  *out_value = v;
  return NULL;
}

pw_status_t pw_plugin_args_str(const char* args, const char* key, const char* default_value,
                               char* buffer, size_t buffer_size) {
  PW_RETURN_IF_ERROR(pw_plugin_args_null(buffer, key, "pw_plugin_args_str"));
  if (buffer_size == 0) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_plugin_args_str: option %s: the "
                          "buffer has no room", key);
  }
  buffer[0] = '\0';
  pw_plugin_arg_t a;
  const char* value = default_value != NULL ? default_value : "";
  size_t len = strlen(value);
  if (pw_plugin_arg_find(args, key, &a)) {
    value = a.value;
    len = a.value_len;
  }
  if (len >= buffer_size) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                          "option %s: its value (%zu bytes) is longer than %zu bytes", key, len,
                          buffer_size - 1);
  }
  memcpy(buffer, value, len);
  buffer[len] = '\0';
  return NULL;
}

pw_status_t pw_plugin_args_bool(const char* args, const char* key, bool default_value,
                                bool* out_value) {
  PW_RETURN_IF_ERROR(pw_plugin_args_null(out_value, key, "pw_plugin_args_bool"));
  *out_value = default_value;
  pw_plugin_arg_t a;
  if (!pw_plugin_arg_find(args, key, &a)) return NULL;
  static const char* const words[] = {"false", "0", "true", "1"};
  for (size_t i = 0; i < 4; ++i) {
    if (a.value_len == strlen(words[i]) && memcmp(a.value, words[i], a.value_len) == 0) {
      *out_value = i >= 2;
      return NULL;
    }
  }
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                        "option %s='%.*s' is not true, false, 1 or 0", key, (int)a.value_len,
                        a.value);
}

pw_status_t pw_plugin_args_choice(const char* args, const char* key, const char* const* choices,
                                  size_t default_index, size_t* out_index) {
  PW_RETURN_IF_ERROR(pw_plugin_args_null(out_index, key, "pw_plugin_args_choice"));
  *out_index = default_index;
  pw_plugin_arg_t a;
  if (!pw_plugin_arg_find(args, key, &a)) return NULL;
  for (size_t i = 0; choices != NULL && choices[i] != NULL; ++i) {
    if (a.value_len == strlen(choices[i]) && memcmp(a.value, choices[i], a.value_len) == 0) {
      *out_index = i;
      return NULL;
    }
  }
  char list[512];
  pw_plugin_list_join(choices, list, sizeof(list));
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "option %s='%.*s' is not one of: %s", key,
                        (int)a.value_len, a.value, list);
}
