/*
** fuzz_msg_id.c: libFuzzer target for rmq_msg_id_parse, which reads the
** msgId a user gives in a WHERE clause (MessageDecoder.decodeMessageId).
**
** The input is the msgId text. A msgId that parses must format back to the
** same text, up to the case of its hex digits.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "message.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size ? size : 1);
  memcpy(text, data, size);
  rmq_host host;
  int64_t offset;
  if (rmq_msg_id_parse(text, size, &host, &offset) == 0) {
    char again[RMQ_MSG_ID_MAX];
    rmq_msg_id_format(&host, offset, again);
    if (strlen(again) != size || strncasecmp(again, text, size) != 0) abort();
  }
  free(text);
  return 0;
}
