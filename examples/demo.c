/* The quick-start demo: prints the linked library's version and what it
 * can run on. Later work replaces it with the end-to-end training demo. */
#include <stdio.h>

#include "pathways/pathways.h"

int main(void) {
  printf("libpathways %s (headers %s)\n", pw_version_string(),
         PW_VERSION_STRING);
  printf("backends: none registered yet (the cpu and sim backends land with "
         "the runtime)\n");

  /* Exercise the base layer the way every later module does. */
  pw_event_t* event = NULL;
  pw_status_t status = pw_event_create(pw_allocator_system(), &event);
  if (status == NULL) status = pw_event_signal(event);
  if (status == NULL) status = pw_event_wait(event, pw_deadline_from_timeout(1000000000));
  pw_event_release(event);
  char text[256];
  pw_status_format(status, text, sizeof(text));
  printf("event round trip: %s\n", text);
  int rc = status == NULL ? 0 : 1;
  pw_status_free(status);
  return rc;
}
