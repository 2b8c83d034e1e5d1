/* A host application linking the installed library. */
#include <stdio.h>
#include <string.h>

#include <pathways/pathways.h>

int consumer_plugins(void); /* plugins.c */

int main(void) {
  if (strcmp(pw_version_string(), PW_VERSION_STRING) != 0) {
    fprintf(stderr, "header %s != library %s\n", PW_VERSION_STRING, pw_version_string());
    return 1;
  }
  pw_status_t s = pw_status_make(PW_STATUS_NOT_FOUND, "probe %d", 1);
  s = pw_status_annotate(s, "consumer");
  int ok = pw_status_code(s) == PW_STATUS_NOT_FOUND &&
           strcmp(pw_status_message(s), "consumer: probe 1") == 0;
  pw_status_free(s);
  if (!ok) return 1;
  if (consumer_plugins() != 0) {
    fprintf(stderr, "bundled plugins' options failed\n");
    return 1;
  }
  printf("consumer ok: libpathways %s\n", pw_version_string());
  return 0;
}
