/*
** golden_dump.c: print every CommitLog record of a store as JSON lines.
**
**   golden_dump <store-dir>
**
** Walks <store-dir>/commitlog/ in name order (20-digit names only; a file's
** size is its length on disk) and decodes records with the CRC check on, as
** recovery does. One line per record, in this key order:
**
**   {"physicalOffset":..,"size":..,"topic":..,"queueId":..,"queueOffset":..,
**    "sysFlag":..,"flag":..,"bodyCRC":..,"bornTimestamp":..,"bornHost":..,
**    "storeTimestamp":..,"storeHost":..,"reconsumeTimes":..,
**    "preparedTransactionOffset":..,"bodyLength":..,"bodyHex":..,
**    "propertiesHex":..,"msgId":..,"tagsCode":..,"blank":false}
**   {"physicalOffset":P,"size":N,"blank":true}  a BLANK: go on at the next file
**   {"end":P,"status":"BAD_MAGIC"}              the first invalid record: stop
**   {"end":P,"status":"EOF"}                    no file left after a BLANK
**
** physicalOffset is the stored field (the position for blanks and the end).
** Hosts are "a.b.c.d:port" or "[v6]:port" (inet_ntop). tagsCode is the hash
** of TAGS (0 without), never the delivery time of SCHEDULE_TOPIC_XXXX. The
** topic is a JSON string with every byte outside 0x20..0x7E escaped as
** \u00XX, exactly as Python's json.dumps escapes it, because
** test/spec_decoder.py prints the same lines and the two are diffed.
*/
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_name.h"
#include "message.h"
#include "message_id.h"
#include "properties.h"
#include "rmq.h"

static void print_json_string(const char *s, size_t n) {
  putchar('"');
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    switch (c) {
      case '"': fputs("\\\"", stdout); break;
      case '\\': fputs("\\\\", stdout); break;
      case '\n': fputs("\\n", stdout); break;
      case '\r': fputs("\\r", stdout); break;
      case '\t': fputs("\\t", stdout); break;
      case '\b': fputs("\\b", stdout); break;
      case '\f': fputs("\\f", stdout); break;
      default:
        if (c < 0x20 || c > 0x7E)
          printf("\\u%04x", c);
        else
          putchar(c);
    }
  }
  putchar('"');
}

static void print_hex(const void *bytes, size_t n) {
  const uint8_t *p = bytes;
  putchar('"');
  for (size_t i = 0; i < n; i++) printf("%02x", p[i]);
  putchar('"');
}

static void print_record(const rmq_message *m) {
  char born[64], store[64], id[RMQ_MSG_ID_MAX];
  size_t tags_len = 0;
  const char *tags = rmq_properties_get(m->properties, (size_t)m->properties_len, RMQ_PROPERTY_TAGS,
                                        &tags_len);
  rmq_host_format(&m->born_host, born, sizeof born);
  rmq_host_format(&m->store_host, store, sizeof store);
  rmq_msg_id_format(&m->store_host, m->physical_offset, id);

  printf("{\"physicalOffset\":%" PRId64 ",\"size\":%" PRId32 ",\"topic\":", m->physical_offset,
         m->total_size);
  print_json_string(m->topic, (size_t)m->topic_len);
  printf(",\"queueId\":%" PRId32 ",\"queueOffset\":%" PRId64 ",\"sysFlag\":%" PRId32
         ",\"flag\":%" PRId32 ",\"bodyCRC\":%" PRId32 ",\"bornTimestamp\":%" PRId64
         ",\"bornHost\":\"%s\",\"storeTimestamp\":%" PRId64 ",\"storeHost\":\"%s\""
         ",\"reconsumeTimes\":%" PRId32 ",\"preparedTransactionOffset\":%" PRId64
         ",\"bodyLength\":%" PRId32 ",\"bodyHex\":",
         m->queue_id, m->queue_offset, m->sys_flag, m->flag, m->body_crc, m->born_timestamp, born,
         m->store_timestamp, store, m->reconsume_times, m->prepared_transaction_offset,
         m->body_len);
  print_hex(m->body, (size_t)m->body_len);
  fputs(",\"propertiesHex\":", stdout);
  print_hex(m->properties, (size_t)m->properties_len);
  printf(",\"msgId\":\"%s\",\"tagsCode\":%" PRId64 ",\"blank\":false}\n", id,
         rmq_tags_code(tags, tags_len));
}

static int is_segment_name(const struct dirent *e) {
  int64_t offset;
  return rmq_file_name_parse(e->d_name, &offset) == 0;
}

/*
** Prints the records of one segment and sets *next to the offset after it.
** Returns 1 when it ended with a BLANK (the walk goes on), 0 when it printed
** the end line, -1 on an I/O error.
*/
static int dump_segment(const char *path, int64_t start, int64_t *next) {
  int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    perror(path);
    if (fd >= 0) close(fd);
    return -1;
  }
  size_t size = (size_t)st.st_size;
  *next = start + st.st_size;
  const uint8_t *map = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  close(fd);
  if (map == MAP_FAILED) {
    perror(path);
    return -1;
  }
  size_t pos = 0;
  int result = 0;
  for (;;) {
    rmq_message m;
    rmq_decode_status s = rmq_message_decode(map + pos, size - pos, true, &m);
    if (s == RMQ_DECODE_OK) {
      print_record(&m);
      pos += (size_t)m.total_size;
    } else if (s == RMQ_DECODE_BLANK) {
      printf("{\"physicalOffset\":%" PRId64 ",\"size\":%" PRId32 ",\"blank\":true}\n",
             start + (int64_t)pos, m.total_size);
      result = 1;
      break;
    } else {
      printf("{\"end\":%" PRId64 ",\"status\":\"%s\"}\n", start + (int64_t)pos,
             rmq_decode_status_name(s));
      break;
    }
  }
  if (size) munmap((void *)map, size);
  return result;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <store-dir>\n", argv[0]);
    return 2;
  }
  struct dirent **names;
  char dir[4096], path[sizeof dir + 1 + sizeof names[0]->d_name];
  snprintf(dir, sizeof dir, "%s/commitlog", argv[1]);
  int n = scandir(dir, &names, is_segment_name,
                  alphasort); /* 20 digits: name order is offset order */
  if (n < 0) {
    perror(dir);
    return 1;
  }
  int rc = 0, go_on = 1;
  int64_t next = 0;
  for (int i = 0; i < n; i++) {
    if (go_on == 1) {
      int64_t start;
      rmq_file_name_parse(names[i]->d_name, &start);
      snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
      go_on = dump_segment(path, start, &next);
      if (go_on < 0) rc = 1;
    }
    free(names[i]);
  }
  free(names);
  if (go_on == 1) printf("{\"end\":%" PRId64 ",\"status\":\"EOF\"}\n", next);
  return rc;
}
