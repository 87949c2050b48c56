/*
** index_file.c: IndexFile and IndexService (see index_file.h). Line
** references are to RocketMQ 4.9.7's IndexFile.java (IF), IndexHeader.java
** (IH) and IndexService.java (IS).
*/
#include "index_file.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "damaged.h"
#include "file_name.h"
#include "io.h"
#include "message.h"
#include "rmq.h"
#include "service_thread.h"

#define INDEX_NAME_LEN 17

/* ---------------------------------------------------------- IndexFile */

int64_t rmq_index_file_size(int32_t slot_num, int32_t index_num) {
  if (slot_num < 1 || index_num < 2) return -1;
  int64_t size = RMQ_INDEX_HEADER_SIZE + (int64_t)slot_num * RMQ_INDEX_SLOT_SIZE +
                 (int64_t)index_num * RMQ_INDEX_ITEM_SIZE;
  return size > INT32_MAX ? -1 : size;
}

static uint8_t *slot_at(rmq_index_file *f, int32_t key_hash) {
  uint32_t slot = (uint32_t)key_hash % (uint32_t)f->slot_num;
  return f->mf->mapped + RMQ_INDEX_HEADER_SIZE + (size_t)slot * RMQ_INDEX_SLOT_SIZE;
}

/* Where item k starts in the file; item 0 starts where the slots end. */
static int64_t item_offset(const rmq_index_file *f, int64_t k) {
  return RMQ_INDEX_HEADER_SIZE + (int64_t)f->slot_num * RMQ_INDEX_SLOT_SIZE +
         k * RMQ_INDEX_ITEM_SIZE;
}

static uint8_t *item_at(rmq_index_file *f, int32_t k) { return f->mf->mapped + item_offset(f, k); }

/*
** Slots are read by queries while the writer updates them: atomic 4-byte
** accesses (slot addresses are 4-aligned in the page-aligned mapping). The
** release store publishes the item written before it.
*/
static int32_t slot_load(const uint8_t *p) {
  return (int32_t)be32toh(__atomic_load_n((const uint32_t *)p, __ATOMIC_ACQUIRE));
}

static void slot_store(uint8_t *p, int32_t v) {
  __atomic_store_n((uint32_t *)p, htobe32((uint32_t)v), __ATOMIC_RELEASE);
}

/*
** The header's fields are read by readers in other processes while the
** writer moves them (rmq_index_service_follow): aligned atomic accesses,
** indexCount stored last with release and loaded first with acquire, so
** that a reader that sees a count sees the items and slots before it.
*/
static void header_put64(uint8_t *p, int64_t v) {
  __atomic_store_n((uint64_t *)p, htobe64((uint64_t)v), __ATOMIC_RELAXED);
}
static int64_t header_get64(const uint8_t *p) {
  return (int64_t)be64toh(__atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED));
}
static int32_t header_count_acquire(const uint8_t *h) {
  return (int32_t)be32toh(__atomic_load_n((const uint32_t *)(h + 36), __ATOMIC_ACQUIRE));
}

/* IH updateByteBuffer: the in-memory header into the mapping. */
static void header_write(rmq_index_file *f) {
  uint8_t *h = f->mf->mapped;
  header_put64(h, atomic_load(&f->begin_timestamp));
  header_put64(h + 8, atomic_load(&f->end_timestamp));
  header_put64(h + 16, atomic_load(&f->begin_phy_offset));
  header_put64(h + 24, atomic_load(&f->end_phy_offset));
  __atomic_store_n((uint32_t *)(h + 32), htobe32((uint32_t)atomic_load(&f->hash_slot_count)),
                   __ATOMIC_RELAXED);
  __atomic_store_n((uint32_t *)(h + 36), htobe32((uint32_t)atomic_load(&f->index_count)),
                   __ATOMIC_RELEASE);
}

/*
** A reader's file that a writer in another process adds to: take the
** header as it is now, indexCount first (header_write).
*/
static void index_file_follow(rmq_index_file *f) {
  const uint8_t *h = f->mf->mapped;
  int32_t count = header_count_acquire(h);
  if (count <= atomic_load(&f->index_count) || count > f->index_num) return;
  atomic_store(&f->begin_timestamp, header_get64(h));
  atomic_store(&f->end_timestamp, header_get64(h + 8));
  atomic_store(&f->begin_phy_offset, header_get64(h + 16));
  atomic_store(&f->end_phy_offset, header_get64(h + 24));
  atomic_store(&f->hash_slot_count,
               (int32_t)be32toh(__atomic_load_n((const uint32_t *)(h + 32), __ATOMIC_RELAXED)));
  atomic_store(&f->index_count, count);
}

/*
** The items a look-up may follow: a reader's file may have grown in
** another process since its last refresh, and a slot read (with acquire)
** may name an item its count does not show yet: the header read after the
** slot does.
*/
static int32_t select_count(rmq_index_file *f) {
  int32_t n = atomic_load(&f->index_count);
  if (f->mf->writable) return n;
  int32_t live = header_count_acquire(f->mf->mapped);
  return live > n && live <= f->index_num ? live : n;
}

static int index_file_map(const char *path, int32_t slot_num, int32_t index_num, bool create,
                          bool writable, rmq_index_file **out, rmq_err *err) {
  *out = NULL;
  int64_t size = rmq_index_file_size(slot_num, index_num);
  if (size < 0) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "index_slots %d and index_entries %d do not give an index file size "
                       "between 48 and %d bytes",
                       (int)slot_num, (int)index_num, INT32_MAX);
  }
  /* An empty file is a creation cut short by a crash: writable, it is mapped at full size. */
  struct stat st;
  if (!create && stat(path, &st) == 0 && st.st_size != size && !(st.st_size == 0 && writable)) {
    return rmq_err_set(err, RMQ_ECORRUPT,
                       "index file %s is %lld bytes but index_slots %d and index_entries %d "
                       "give %lld (check those settings)",
                       path, (long long)st.st_size, (int)slot_num, (int)index_num, (long long)size);
  }
  rmq_index_file *f = calloc(1, sizeof *f);
  if (f == NULL) return rmq_err_set(err, RMQ_ENOMEM, "out of memory opening %s", path);
  int rc = rmq_mapped_file_open(path, 0, (int32_t)size, create ? RMQ_MF_CREATE : RMQ_MF_EXISTING,
                                writable, &f->mf, err);
  if (rc != RMQ_OK) {
    free(f);
    return rc;
  }
  /* Written through the mapping; a reserve opens the file for itself. */
  rmq_mapped_file_close_fd(f->mf);
  f->slot_num = slot_num;
  f->index_num = index_num;
  *out = f;
  return RMQ_OK;
}

/*
** Items take disk in steps of this (52,428 items), so that a store with few
** keys does not take blocks for millions; the slots are reserved whole, as
** keys land in them at random.
*/
#define INDEX_RESERVE_STEP (1 << 20)

int rmq_index_file_create(const char *path, int32_t slot_num, int32_t index_num,
                          int64_t prev_end_phy_offset, int64_t prev_end_timestamp,
                          rmq_index_file **out, rmq_err *err) {
  rmq_index_file *f;
  *out = NULL;
  int rc = index_file_map(path, slot_num, index_num, true, true, &f, err);
  if (rc != RMQ_OK) return rc;
  rc = rmq_mapped_file_reserve_ahead(f->mf, (int32_t)item_offset(f, 0), INDEX_RESERVE_STEP, err);
  if (rc != RMQ_OK) {
    rmq_index_file_close(f, true);
    return rc;
  }
  /* Slots are written at random: fault them all in now, not one by one in dispatch. */
  madvise(f->mf->mapped, (size_t)item_offset(f, 0), MADV_POPULATE_WRITE);
  atomic_init(&f->index_count, 1);
  atomic_init(&f->checked, 1); /* written by this process only */
  /* IF 51-59: only these fields reach the mapping now; indexCount stays 0 on disk. */
  uint8_t *h = f->mf->mapped;
  if (prev_end_phy_offset > 0) {
    atomic_init(&f->begin_phy_offset, prev_end_phy_offset);
    atomic_init(&f->end_phy_offset, prev_end_phy_offset);
    rmq_put64(h + 16, prev_end_phy_offset);
    rmq_put64(h + 24, prev_end_phy_offset);
  }
  if (prev_end_timestamp > 0) {
    atomic_init(&f->begin_timestamp, prev_end_timestamp);
    atomic_init(&f->end_timestamp, prev_end_timestamp);
    rmq_put64(h, prev_end_timestamp);
    rmq_put64(h + 8, prev_end_timestamp);
  }
  *out = f;
  return RMQ_OK;
}

/*
** Every header field within its range: a damaged one must not overflow the
** arithmetic on it (beginTimestamp + timeDiff * 1000 in selectPhyOffset).
*/
#define MAX_TIMESTAMP (INT64_MAX - (int64_t)INT32_MAX * 1000)

/* ------------------------------------------------------- structure check */

static bool defect(rmq_index_defect *d, int64_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool defect(rmq_index_defect *d, int64_t at, const char *fmt, ...) {
  d->at = at;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->why, sizeof d->why, fmt, ap);
  va_end(ap);
  return false;
}

static const char *const header_names[] = {"beginTimestamp", "endTimestamp", "beginPhyOffset",
                                           "endPhyOffset"};

/* The header's fields within their ranges (what the arithmetic on them needs). */
static bool check_header(const uint8_t *p, int32_t slot_num, int32_t index_num,
                         rmq_index_defect *d) {
  for (int i = 0; i < 4; i++) {
    int64_t v = rmq_get64(p + 8 * i), max = i < 2 ? MAX_TIMESTAMP : INT64_MAX;
    if (v < 0 || v > max) {
      return defect(d, 8 * i, "%s %lld is out of range 0..%lld", header_names[i], (long long)v,
                    (long long)max);
    }
  }
  int32_t slots = rmq_get32(p + 32), count = rmq_get32(p + 36);
  if (slots < 0 || slots > slot_num) {
    return defect(d, 32, "hashSlotCount %d is out of range 0..%d (index_slots)", (int)slots,
                  (int)slot_num);
  }
  if (count < 0 || count > index_num) {
    return defect(d, 36, "indexCount %d is out of range 0..%d (index_entries)", (int)count,
                  (int)index_num);
  }
  return true;
}

static int64_t check_item_at(int32_t slot_num, int64_t k) {
  return RMQ_INDEX_HEADER_SIZE + (int64_t)slot_num * RMQ_INDEX_SLOT_SIZE + k * RMQ_INDEX_ITEM_SIZE;
}

/*
** Each slot's newest item so far, while the items are checked: an array of
** every slot, or for a file whose items use few of its slots (a store's
** newest file, checked at each open) a small hash of the used ones, so the
** check touches memory for the items, not for the whole slot table.
*/
typedef struct chain_heads {
  int32_t *dense; /* slot_num heads, or NULL */
  int32_t *slots; /* the hash's keys; -1: empty */
  int32_t *items; /* its values */
  uint32_t mask;
} chain_heads;

static bool heads_init(chain_heads *h, int32_t slot_num, int32_t count, bool every_slot) {
  *h = (chain_heads){0};
  if (every_slot || count > slot_num / 16) {
    return (h->dense = calloc((size_t)slot_num, sizeof *h->dense)) != NULL;
  }
  uint32_t cap = 16;
  while (cap < 2u * (uint32_t)count) cap *= 2;
  h->mask = cap - 1;
  h->slots = malloc(cap * sizeof *h->slots);
  h->items = malloc(cap * sizeof *h->items);
  if (h->slots) memset(h->slots, 0xff, cap * sizeof *h->slots);
  return h->slots && h->items;
}

static void heads_free(chain_heads *h) {
  free(h->dense);
  free(h->slots);
  free(h->items);
}

/* The hash's place for slot: where it is, or the empty one where it goes. */
static uint32_t heads_at(const chain_heads *h, uint32_t slot) {
  uint32_t i = (slot * 2654435761u) & h->mask;
  while (h->slots[i] >= 0 && (uint32_t)h->slots[i] != slot) i = (i + 1) & h->mask;
  return i;
}

static int32_t heads_get(const chain_heads *h, uint32_t slot) {
  if (h->dense) return h->dense[slot];
  uint32_t i = heads_at(h, slot);
  return h->slots[i] < 0 ? 0 : h->items[i];
}

static void heads_set(chain_heads *h, uint32_t slot, int32_t k) {
  if (h->dense) {
    h->dense[slot] = k;
    return;
  }
  uint32_t i = heads_at(h, slot);
  h->slots[i] = (int32_t)slot;
  h->items[i] = k;
}

/*
** Items 1 .. count-1 in the order putKey wrote them: each links to the item
** written before it in its slot (last[slot], then updated), and their
** commit-log offsets never go down, from beginPhyOffset to endPhyOffset.
*/
static bool check_items(const uint8_t *p, int32_t slot_num, int32_t count, chain_heads *last,
                        bool settled, rmq_index_defect *d) {
  int64_t prev_phy = -1;
  for (int32_t k = 1; k < count; k++) {
    int64_t at = check_item_at(slot_num, k);
    const uint8_t *it = p + at;
    int32_t hash = rmq_get32(it), td = rmq_get32(it + 12), prev = rmq_get32(it + 16);
    int64_t phy = rmq_get64(it + 4);
    uint32_t slot = (uint32_t)hash % (uint32_t)slot_num;
    if (hash < 0)
      return defect(d, at, "item %d has hash %d: a key's hash is never negative", k, hash);
    if (phy < prev_phy) {
      return defect(d, at, "item %d leads to commit-log offset %lld, below item %d's %lld", k,
                    (long long)phy, k - 1, (long long)prev_phy);
    }
    if (td < 0) return defect(d, at, "item %d has a negative timeDiff %d", k, td);
    int32_t before = heads_get(last, slot);
    if (prev != before) {
      return defect(d, at, "item %d links to item %d, but the item before it in slot %u is %d", k,
                    prev, slot, before);
    }
    if (k == 1 && phy != rmq_get64(p + 16)) {
      return defect(d, at, "item 1 leads to %lld but beginPhyOffset is %lld", (long long)phy,
                    (long long)rmq_get64(p + 16));
    }
    heads_set(last, slot, k);
    prev_phy = phy;
  }
  /* A writer moves endPhyOffset on with each item after the count read here. */
  if (settled && count > 1 && prev_phy != rmq_get64(p + 24)) {
    return defect(d, check_item_at(slot_num, count - 1),
                  "the last item %d leads to %lld but endPhyOffset is %lld", count - 1,
                  (long long)prev_phy, (long long)rmq_get64(p + 24));
  }
  return true;
}

/*
** Each slot holds its chain's newest item (a settled file's exactly; in a
** file being written, a newer one may be there already). With every_slot,
** the slots no item uses too, which must be empty; else only the used ones.
*/
static bool check_slots(const uint8_t *p, int32_t slot_num, int32_t count, const int32_t *last,
                        const rmq_index_check *c, rmq_index_defect *d) {
  int32_t used = 0;
  for (int64_t s = 0; s < slot_num; s++) {
    int32_t head = rmq_get32(p + RMQ_INDEX_HEADER_SIZE + s * RMQ_INDEX_SLOT_SIZE);
    if (last[s] != 0) used++;
    if (head == last[s] || (!c->settled && head >= count)) continue;
    return defect(d, RMQ_INDEX_HEADER_SIZE + s * RMQ_INDEX_SLOT_SIZE,
                  "slot %lld holds item %d where its newest item is %d", (long long)s, head,
                  last[s]);
  }
  int32_t hashed = rmq_get32(p + 32);
  if (c->settled && used != hashed) {
    return defect(d, 32, "hashSlotCount is %d but %d slots hold items", hashed, used);
  }
  return true;
}

/* The slots the items use, when every_slot is off: found from the items themselves. */
static bool check_used_slots(const uint8_t *p, int32_t slot_num, int32_t count,
                             const chain_heads *last, const rmq_index_check *c,
                             rmq_index_defect *d) {
  if (c->every_slot) return check_slots(p, slot_num, count, last->dense, c, d);
  int32_t used = 0;
  for (int32_t k = count - 1; k >= 1; k--) {
    uint32_t slot = (uint32_t)rmq_get32(p + check_item_at(slot_num, k)) % (uint32_t)slot_num;
    if (heads_get(last, slot) != k) continue; /* not its chain's newest */
    used++;
    int64_t at = RMQ_INDEX_HEADER_SIZE + (int64_t)slot * RMQ_INDEX_SLOT_SIZE;
    int32_t head = rmq_get32(p + at);
    if (head != k && (c->settled || head < count)) {
      return defect(d, at, "slot %u holds item %d where its newest item is %d", slot, head, k);
    }
  }
  if (c->settled && used != rmq_get32(p + 32)) {
    return defect(d, 32, "hashSlotCount is %d but %d slots hold items", (int)rmq_get32(p + 32),
                  used);
  }
  return true;
}

static bool check_ends(const uint8_t *p, int32_t slot_num, int32_t count, rmq_index_defect *d);

bool rmq_index_file_check(const uint8_t *p, int32_t slot_num, int32_t index_num,
                          const rmq_index_check *c, rmq_index_defect *d) {
  d->items_at = check_item_at(slot_num, 0);
  if (!check_header(p, slot_num, index_num, d)) return false;
  int32_t count = rmq_get32(p + 36);
  int32_t next = count < 1 ? 1 : count;
  static const uint8_t zero[RMQ_INDEX_ITEM_SIZE];
  /* A count cut short leaves written items after it (putKey writes the item, then the count). */
  if (c->settled && next < index_num &&
      memcmp(p + check_item_at(slot_num, next), zero, sizeof zero) != 0) {
    return defect(d, 36, "indexCount is %d but item %d after the last is written", (int)count,
                  (int)next);
  }
  if (c->header_only) return check_ends(p, slot_num, count, d);
  chain_heads last;
  bool ok = heads_init(&last, slot_num, count, c->every_slot);
  if (!ok) defect(d, -1, "out of memory checking %d slots", (int)slot_num);
  ok = ok && check_items(p, slot_num, count, &last, c->settled, d) &&
       check_used_slots(p, slot_num, count, &last, c, d);
  heads_free(&last);
  return ok;
}

/* The first and last items against the header's offsets: what a header-only check reads. */
static bool check_ends(const uint8_t *p, int32_t slot_num, int32_t count, rmq_index_defect *d) {
  if (count <= 1) return true;
  int64_t first = rmq_get64(p + check_item_at(slot_num, 1) + 4);
  int64_t last = rmq_get64(p + check_item_at(slot_num, count - 1) + 4);
  if (first != rmq_get64(p + 16)) {
    return defect(d, 16, "beginPhyOffset is %lld but item 1 leads to %lld",
                  (long long)rmq_get64(p + 16), (long long)first);
  }
  if (last != rmq_get64(p + 24)) {
    return defect(d, 24, "endPhyOffset is %lld but the last item %d leads to %lld",
                  (long long)rmq_get64(p + 24), (int)count - 1, (long long)last);
  }
  return true;
}

int rmq_index_file_load(const char *path, int32_t slot_num, int32_t index_num, bool writable,
                        const rmq_index_check *check, rmq_index_file **out, rmq_err *err) {
  rmq_index_file *f;
  *out = NULL;
  int rc = index_file_map(path, slot_num, index_num, false, writable, &f, err);
  if (rc != RMQ_OK) return rc;
  const uint8_t *h = f->mf->mapped;
  rmq_index_defect d;
  if (!rmq_index_file_check(h, slot_num, index_num, check, &d)) {
    rmq_index_file_close(f, false);
    return rmq_err_set(err, RMQ_ECORRUPT, "index file %s is damaged at offset %lld: %s", path,
                       (long long)d.at, d.why);
  }
  int32_t count = rmq_get32(h + 36);
  atomic_init(&f->checked, check->header_only ? 0 : 1);
  atomic_init(&f->begin_timestamp, rmq_get64(h));
  atomic_init(&f->end_timestamp, rmq_get64(h + 8));
  atomic_init(&f->begin_phy_offset, rmq_get64(h + 16));
  atomic_init(&f->end_phy_offset, rmq_get64(h + 24));
  atomic_init(&f->hash_slot_count, rmq_get32(h + 32));
  atomic_init(&f->index_count, count <= 0 ? 1 : count); /* IH load */
  *out = f;
  return RMQ_OK;
}

/* Serializes the first checks of files (rare): one reader checks, the others wait for it. */
static pthread_mutex_t check_mu = PTHREAD_MUTEX_INITIALIZER;

int rmq_index_file_ensure_checked(rmq_index_file *f, rmq_err *err) {
  int verdict = atomic_load(&f->checked);
  if (verdict == 0) {
    pthread_mutex_lock(&check_mu);
    verdict = atomic_load(&f->checked);
    if (verdict == 0) {
      rmq_index_check c = {.settled = true};
      bool ok = rmq_index_file_check(f->mf->mapped, f->slot_num, f->index_num, &c, &f->damage);
      verdict = ok ? 1 : -1;
      atomic_store(&f->checked, verdict); /* publishes f->damage */
    }
    pthread_mutex_unlock(&check_mu);
  }
  if (verdict > 0) return RMQ_OK;
  return rmq_err_set(err, RMQ_ECORRUPT,
                     "index file %s is damaged at offset %lld: %s; close the store and run SELECT "
                     "rocketmq_repair on it to rebuild the index from the log",
                     f->mf->path, (long long)f->damage.at, f->damage.why);
}

void rmq_index_file_close(rmq_index_file *f, bool unlink_file) {
  if (f == NULL) return;
  rmq_mapped_file_shutdown(f->mf, unlink_file);
  free(f);
}

const char *rmq_index_file_path(const rmq_index_file *f) { return f->mf->path; }

void rmq_index_file_header(rmq_index_file *f, rmq_index_header *out) {
  out->begin_timestamp = atomic_load(&f->begin_timestamp);
  out->end_timestamp = atomic_load(&f->end_timestamp);
  out->begin_phy_offset = atomic_load(&f->begin_phy_offset);
  out->end_phy_offset = atomic_load(&f->end_phy_offset);
  out->hash_slot_count = atomic_load(&f->hash_slot_count);
  out->index_count = atomic_load(&f->index_count);
}

bool rmq_index_file_is_full(rmq_index_file *f) {
  return atomic_load(&f->index_count) >= f->index_num;
}

/* IF 88-146. */
bool rmq_index_file_put_key(rmq_index_file *f, int32_t key_hash, int64_t phy_offset,
                            int64_t store_timestamp) {
  int32_t count = atomic_load(&f->index_count);
  if (count >= f->index_num || !f->mf->writable) return false;
  uint8_t *slot = slot_at(f, key_hash);
  int32_t slot_value = slot_load(slot);
  if (slot_value <= 0 || slot_value > count) slot_value = 0;

  int64_t begin = atomic_load(&f->begin_timestamp);
  /* Compared before subtracting: a damaged record's time may be anything. */
  int64_t time_diff = begin <= 0 || store_timestamp <= begin ? 0 : (store_timestamp - begin) / 1000;
  if (time_diff > INT32_MAX) time_diff = INT32_MAX;
  uint8_t *item = item_at(f, count);
  rmq_put32(item, key_hash);
  rmq_put64(item + 4, phy_offset);
  rmq_put32(item + 12, (int32_t)time_diff);
  rmq_put32(item + 16, slot_value);
  slot_store(slot, count);

  if (count <= 1) {
    atomic_store(&f->begin_phy_offset, phy_offset);
    atomic_store(&f->begin_timestamp, store_timestamp);
  }
  if (slot_value == 0) atomic_fetch_add(&f->hash_slot_count, 1);
  atomic_store(&f->index_count, count + 1);
  atomic_store(&f->end_phy_offset, phy_offset);
  atomic_store(&f->end_timestamp, store_timestamp);
  header_write(f);
  return true;
}

/* An offset already in out: the same record indexed twice (buildIndex after recovery). */
static bool already_found(const int64_t *out, int count, int64_t off) {
  for (int i = 0; i < count; i++) {
    if (out[i] == off) return true;
  }
  return false;
}

/*
** IF 175-230. With match, an item counts only if match accepts its record,
** so colliding keys cannot fill max_num in front of the key looked up. An
** item match finds damaged stops the walk: its number goes into *damaged.
*/
static void index_file_select(rmq_index_file *f, int32_t key_hash, int max_num, int64_t begin,
                              int64_t end, const rmq_index_match *match, int64_t *out, int *count,
                              int32_t *damaged) {
  int32_t k = slot_load(slot_at(f, key_hash));
  int32_t index_count = select_count(f);
  if (k <= 0 || k > index_count || index_count <= 1) return;
  int64_t file_begin = atomic_load(&f->begin_timestamp);
  /* The slot's acquire made item k and everything it chains to visible. */
  while (*count < max_num && k < f->index_num) {
    const uint8_t *item = item_at(f, k);
    int32_t time_diff = rmq_get32(item + 12);
    int32_t prev = rmq_get32(item + 16);
    if (time_diff < 0) break;
    int64_t time_read = file_begin + (int64_t)time_diff * 1000;
    int64_t off = rmq_get64(item + 4);
    if (rmq_get32(item) == key_hash && time_read >= begin && time_read <= end) {
      rmq_index_verdict v = match ? match->fn(match->ctx, off, key_hash) : RMQ_INDEX_MATCH;
      if (v == RMQ_INDEX_DAMAGED) {
        *damaged = k;
        return;
      }
      if (v == RMQ_INDEX_MATCH && (!match || !already_found(out, *count, off)))
        out[(*count)++] = off;
    }
    /* A sound chain points strictly backwards; RocketMQ only stops at prev == k. */
    if (prev <= 0 || prev > index_count || prev >= k || time_read < begin) break;
    k = prev;
  }
}

void rmq_index_file_select(rmq_index_file *f, int32_t key_hash, int max_num, int64_t begin,
                           int64_t end, int64_t *out, int *count) {
  int32_t damaged = 0;
  index_file_select(f, key_hash, max_num, begin, end, NULL, out, count, &damaged);
}

bool rmq_index_file_time_matched(rmq_index_file *f, int64_t begin, int64_t end) {
  int64_t fb = atomic_load(&f->begin_timestamp), fe = atomic_load(&f->end_timestamp);
  return (begin < fb && end > fe) || (begin >= fb && begin <= fe) || (end >= fb && end <= fe);
}

int rmq_index_file_flush(rmq_index_file *f, rmq_err *err) {
  if (!f->mf->writable) return RMQ_OK;
  /*
  ** Writes touch slots all over the file: forcing it with its pages mapped
  ** write-protects each one (a TLB shoot-down a page); unmapped first, they
  ** go at once, and the next access maps a page again from the page cache.
  */
  rmq_mapped_file_drop_pages(f->mf);
  if (rmq_io_msync(f->mf->mapped, (size_t)f->mf->file_size) != 0) {
    return rmq_err_set(err, RMQ_EIO, "cannot flush index file %s: %s", f->mf->path,
                       strerror(errno));
  }
  return RMQ_OK;
}

/* ------------------------------------------------------- IndexService */

int rmq_index_service_init(rmq_index_service *s, const char *root, int32_t slot_num,
                           int32_t index_num, bool writable, rmq_checkpoint *checkpoint,
                           rmq_err *err) {
  memset(s, 0, sizeof *s);
  if (rmq_index_file_size(slot_num, index_num) < 0) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "index_slots %d and index_entries %d are out of range: index_slots "
                       ">= 1, index_entries >= 2 and 40 + 4*index_slots + 20*index_entries "
                       "<= %d",
                       (int)slot_num, (int)index_num, INT32_MAX);
  }
  size_t n = strlen(root) + sizeof "/index";
  if ((s->dir = malloc(n)) == NULL) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  snprintf(s->dir, n, "%s/index", root);
  s->slot_num = slot_num;
  s->index_num = index_num;
  s->writable = writable;
  s->checkpoint = checkpoint;
  /* Queries hold the read lock while they walk: a roll must not wait for a gap between them. */
  pthread_rwlockattr_t attr;
  pthread_rwlockattr_init(&attr);
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&s->lock, &attr);
  pthread_rwlockattr_destroy(&attr);
  return RMQ_OK;
}

void rmq_index_service_destroy(rmq_index_service *s) {
  if (s->dir == NULL) return;
  for (int i = 0; i < s->count; i++) rmq_index_file_close(s->files[i], false);
  free(s->files);
  free(s->dir);
  pthread_rwlock_destroy(&s->lock);
  memset(s, 0, sizeof *s);
}

/* Append f to the list. Called with the write lock held (or before any reader). */
static int service_push(rmq_index_service *s, rmq_index_file *f, rmq_err *err) {
  if (s->count == s->cap) {
    int cap = s->cap ? s->cap * 2 : 8;
    rmq_index_file **files = realloc(s->files, (size_t)cap * sizeof *files);
    if (files == NULL) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
    s->files = files;
    s->cap = cap;
  }
  s->files[s->count++] = f;
  return RMQ_OK;
}

static bool is_index_name(const char *name) {
  if (strlen(name) != INDEX_NAME_LEN) return false;
  for (int i = 0; i < INDEX_NAME_LEN; i++) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  return true;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The index file names in dir, sorted; a missing dir has none. */
static int list_index_names(const char *dir, char ***names, int *n, rmq_err *err) {
  *names = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (d == NULL) {
    if (errno == ENOENT) return RMQ_OK;
    return rmq_err_set(err, RMQ_EIO, "cannot list %s: %s", dir, strerror(errno));
  }
  int cap = 0, rc = RMQ_OK;
  struct dirent *e;
  while (rc == RMQ_OK && (e = readdir(d)) != NULL) {
    if (!is_index_name(e->d_name)) continue;
    if (*n == cap) {
      cap = cap ? cap * 2 : 16;
      char **grown = realloc(*names, (size_t)cap * sizeof *grown);
      if (grown == NULL) {
        rc = rmq_err_set(err, RMQ_ENOMEM, "out of memory");
        break;
      }
      *names = grown;
    }
    if (((*names)[*n] = strdup(e->d_name)) == NULL) {
      rc = rmq_err_set(err, RMQ_ENOMEM, "out of memory");
    } else {
      (*n)++;
    }
  }
  closedir(d);
  if (*n > 1) qsort(*names, (size_t)*n, sizeof **names, cmp_names);
  return rc;
}

/*
** The geometry from what was written, for a file whose size neither the
** configured geometry nor 4:1 explains. IndexFile.putKey writes items in
** order from item 1 into a zeroed file and sets the header's indexCount (n)
** and endPhyOffset with each; item k sits at size - 20 * (entries - k). So
** the last item written, n - 1, is the first 20 bytes that are not all zero
** when the file is read back from its end in steps of 20, which gives
** entries, and then slots. It must hold endPhyOffset, link back to an older
** item and head its slot's chain. *slots is 0 when the file holds no item
** (any geometry reads it as empty).
*/
static bool geometry_from_items(const uint8_t *p, int64_t size, int32_t *slots, int32_t *entries) {
  static const uint8_t zero[RMQ_INDEX_ITEM_SIZE];
  int32_t n = rmq_get32(p + 36), used_slots = rmq_get32(p + 32);
  *slots = 0;
  if (n <= 1) return true;
  int64_t at = size - RMQ_INDEX_ITEM_SIZE;
  while (at > RMQ_INDEX_HEADER_SIZE && memcmp(p + at, zero, sizeof zero) == 0) {
    at -= RMQ_INDEX_ITEM_SIZE;
  }
  int64_t e = n - 1 + (size - at) / RMQ_INDEX_ITEM_SIZE;
  int64_t slot_bytes = at - RMQ_INDEX_HEADER_SIZE - (int64_t)(n - 1) * RMQ_INDEX_ITEM_SIZE;
  if (slot_bytes < RMQ_INDEX_SLOT_SIZE || slot_bytes % RMQ_INDEX_SLOT_SIZE != 0 ||
      slot_bytes / RMQ_INDEX_SLOT_SIZE < used_slots || e > INT32_MAX) {
    return false;
  }
  int32_t sl = (int32_t)(slot_bytes / RMQ_INDEX_SLOT_SIZE);
  const uint8_t *item = p + at;
  int32_t hash = rmq_get32(item), prev = rmq_get32(item + 16);
  if (rmq_get64(item + 4) != rmq_get64(p + 24) || hash < 0 || prev < 0 || prev >= n - 1) {
    return false;
  }
  int64_t head = RMQ_INDEX_HEADER_SIZE + (int64_t)((uint32_t)hash % (uint32_t)sl) * 4;
  if (rmq_get32(p + head) != n - 1) return false;
  *slots = sl;
  *entries = (int32_t)e;
  return true;
}

/* geometry_from_items on the file mapped read-only; false when it cannot be read. */
static bool written_geometry(const char *path, int64_t size, int32_t *slots, int32_t *entries) {
  int fd = rmq_io_open(path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return false;
  void *map = rmq_io_mmap(fd, (size_t)size, 0);
  close(fd);
  if (map == MAP_FAILED) return false;
  bool ok = geometry_from_items(map, size, slots, entries);
  munmap(map, (size_t)size);
  return ok;
}

/*
** The geometry of an index file of `size` bytes that a reader opens: the
** configured one when it fits, else RocketMQ's proportion (maxIndexNum =
** 4 * maxHashSlotNum, so size = 40 + 84 * slots), which the defaults
** (5000000, 20000000) and most brokers follow, else what its items show
** (geometry_from_items). *slots 0: the file holds nothing.
*/
static int readonly_geometry(rmq_index_service *s, const char *path, int64_t size, int32_t *slots,
                             int32_t *entries, rmq_err *err) {
  *slots = s->slot_num;
  *entries = s->index_num;
  if (rmq_index_file_size(*slots, *entries) == size) return RMQ_OK;
  int64_t per_slot = RMQ_INDEX_SLOT_SIZE + 4 * RMQ_INDEX_ITEM_SIZE;
  int64_t n = (size - RMQ_INDEX_HEADER_SIZE) / per_slot;
  if (size > RMQ_INDEX_HEADER_SIZE && (size - RMQ_INDEX_HEADER_SIZE) % per_slot == 0 &&
      n <= INT32_MAX / 4 && rmq_index_file_size((int32_t)n, (int32_t)(4 * n)) == size) {
    *slots = (int32_t)n;
    *entries = (int32_t)(4 * n);
    return RMQ_OK;
  }
  if (size >= rmq_index_file_size(1, 2) && size <= INT32_MAX &&
      written_geometry(path, size, slots, entries)) {
    return RMQ_OK;
  }
  return rmq_err_set(err, RMQ_ECORRUPT,
                     "index file %s is %lld bytes: index_slots %d and index_entries %d give "
                     "%lld, index_entries = 4 * index_slots fits no size, and its items do not "
                     "show its geometry; a rocketmq table with readonly=1 and the index_slots "
                     "and index_entries it was written with reads it",
                     path, (long long)size, (int)s->slot_num, (int)s->index_num,
                     (long long)rmq_index_file_size(s->slot_num, s->index_num));
}

/*
** A damaged file (RMQ_ECORRUPT from rmq_index_file_load). A reader skips it
** and fails the key look-ups, naming it; a writer stops loading there: this
** file and those after it are set aside and rebuilt from the log after the
** last file kept (rmq_index_service_set_aside).
*/
static void take_damaged(rmq_index_service *s, const char *name, const rmq_err *why) {
  if (s->skipped.code == RMQ_OK) s->skipped = *why;
  if (s->writable && !s->damaged_from[0])
    snprintf(s->damaged_from, sizeof s->damaged_from, "%s", name);
}

/* A writable file must have the configured geometry: another size is a setting, not damage. */
static int check_geometry(rmq_index_service *s, const char *path, rmq_err *err) {
  struct stat st;
  int64_t size = rmq_index_file_size(s->slot_num, s->index_num);
  if (stat(path, &st) != 0 || st.st_size == size || st.st_size == 0) return RMQ_OK;
  return rmq_err_set(err, RMQ_ECORRUPT,
                     "index file %s is %lld bytes but index_slots %d and index_entries %d "
                     "give %lld (check those settings)",
                     path, (long long)st.st_size, (int)s->slot_num, (int)s->index_num,
                     (long long)size);
}

bool rmq_index_file_readable_size(const char *path, int64_t size, int32_t slot_num,
                                  int32_t index_num) {
  rmq_index_service s = {.slot_num = slot_num, .index_num = index_num};
  int32_t slots, entries;
  rmq_err why = {0};
  return readonly_geometry(&s, path, size, &slots, &entries, &why) == RMQ_OK;
}

/*
** IS 57-88. newest: the file a writer goes on with and a crash leaves
** unfinished, checked whole now; the others' headers only, and whole at
** their first look-up (rmq_index_file_ensure_checked). settled: no writer
** is adding to the file (see rmq_index_check).
*/
static int load_one(rmq_index_service *s, const char *name, bool last_exit_ok, bool newest,
                    bool settled, rmq_err *err) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", s->dir, name);
  int32_t slots = s->slot_num, entries = s->index_num;
  struct stat st;
  if (!s->writable && stat(path, &st) == 0) {
    /* A read-only store cannot size an empty file (left by a crash); it holds nothing. */
    if (st.st_size == 0) return RMQ_OK;
    rmq_err why = {0};
    if (readonly_geometry(s, path, (int64_t)st.st_size, &slots, &entries, &why) != RMQ_OK) {
      if (s->skipped.code == RMQ_OK) s->skipped = why;
      return RMQ_OK;
    }
    if (slots == 0) return RMQ_OK;
  }
  int rc = s->writable ? check_geometry(s, path, err) : RMQ_OK;
  if (rc != RMQ_OK) return rc;
  rmq_index_file *f;
  rmq_index_check check = {.settled = settled, .header_only = !newest};
  rmq_err why = {0};
  rc = rmq_index_file_load(path, slots, entries, s->writable, &check, &f, &why);
  if (rc == RMQ_ECORRUPT) take_damaged(s, name, &why);
  if (rc != RMQ_OK) return rc == RMQ_ECORRUPT ? RMQ_OK : rmq_err_set(err, rc, "%s", why.msg);
  /* What a reader reports as the store's geometry: its newest file's. */
  s->slot_num = slots;
  s->index_num = entries;
  int64_t indexed = s->checkpoint ? atomic_load(&s->checkpoint->index_msg_timestamp) : 0;
  if (!last_exit_ok && s->writable && atomic_load(&f->end_timestamp) > indexed) {
    /* Not known to be flushed whole: dispatch rebuilds what it held. */
    rmq_index_file_close(f, true);
    return RMQ_OK;
  }
  rc = service_push(s, f, err);
  if (rc != RMQ_OK) rmq_index_file_close(f, false);
  return rc;
}

int rmq_index_service_load(rmq_index_service *s, bool last_exit_ok, rmq_err *err) {
  char **names;
  int n;
  int rc = list_index_names(s->dir, &names, &n, err);
  pthread_rwlock_wrlock(&s->lock);
  for (int i = 0; rc == RMQ_OK && i < n && !s->damaged_from[0]; i++) {
    /* After a crash the newest file may hold items its header does not count yet. */
    rc = load_one(s, names[i], last_exit_ok, i == n - 1, last_exit_ok || i < n - 1, err);
  }
  pthread_rwlock_unlock(&s->lock);
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  return rc;
}

/* The file's geometry as a load takes it: configured when writable, else read off its size. */
static bool file_geometry(rmq_index_service *s, const char *path, int64_t size, int32_t *slots,
                          int32_t *entries) {
  rmq_err why = {0};
  if (!s->writable) return readonly_geometry(s, path, size, slots, entries, &why) == RMQ_OK;
  *slots = s->slot_num;
  *entries = s->index_num;
  return size == rmq_index_file_size(*slots, *entries);
}

int rmq_index_service_check_file(rmq_index_service *s, const char *name, bool settled,
                                 rmq_index_defect *d) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", s->dir, name);
  struct stat st;
  int32_t slots, entries;
  if (stat(path, &st) != 0 || st.st_size == 0) return RMQ_OK;
  if (!file_geometry(s, path, (int64_t)st.st_size, &slots, &entries)) return RMQ_OK;
  if (slots == 0) return RMQ_OK; /* holds no item */
  int fd = rmq_io_open(path, O_RDONLY | O_CLOEXEC, 0);
  void *map = fd < 0 ? MAP_FAILED : rmq_io_mmap(fd, (size_t)st.st_size, 0);
  if (fd >= 0) close(fd);
  if (map == MAP_FAILED) {
    defect(d, -1, "cannot be read: %s", strerror(errno));
    return RMQ_ECORRUPT;
  }
  rmq_index_check c = {.settled = settled, .every_slot = true};
  bool ok = rmq_index_file_check(map, slots, entries, &c, d);
  munmap(map, (size_t)st.st_size);
  return ok ? RMQ_OK : RMQ_ECORRUPT;
}

int64_t rmq_index_service_cut(rmq_index_service *s, int64_t end) {
  int64_t rebuild_from = INT64_MAX;
  pthread_rwlock_wrlock(&s->lock);
  while (s->count > 0 && atomic_load(&s->files[s->count - 1]->end_phy_offset) >= end) {
    rmq_index_file_close(s->files[--s->count], true);
    rebuild_from = s->count ? atomic_load(&s->files[s->count - 1]->end_phy_offset) : 0;
  }
  pthread_rwlock_unlock(&s->lock);
  return rebuild_from;
}

int64_t rmq_index_service_rebuild_from(rmq_index_service *s) {
  if (!s->damaged_from[0]) return INT64_MAX;
  return s->count ? atomic_load(&s->files[s->count - 1]->end_phy_offset) : 0;
}

int rmq_index_service_set_aside(rmq_index_service *s, const char *damaged_dir, int64_t *moved,
                                rmq_err *err) {
  char **names;
  int n;
  int rc = list_index_names(s->dir, &names, &n, err);
  for (int i = 0; i < n; i++) {
    if (rc == RMQ_OK && strcmp(names[i], s->damaged_from) >= 0) {
      rc = rmq_damaged_move(s->dir, names[i], damaged_dir, "index", moved, err);
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* ms of a yyyyMMddHHmmssSSS local-time name, or 0 when it does not parse. */
static int64_t index_name_ms(const char *name) {
  struct tm tm;
  int ms;
  memset(&tm, 0, sizeof tm);
  if (sscanf(name, "%4d%2d%2d%2d%2d%2d%3d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
             &tm.tm_min, &tm.tm_sec, &ms) != 7) {
    return 0;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_isdst = -1;
  time_t t = rmq_local_mktime(&tm);
  return t == (time_t)-1 ? 0 : (int64_t)t * 1000 + ms;
}

/*
** The path of the next index file: the local time now, or 1 ms after the
** newest file's name when the clock was stepped back (so that load order
** stays creation order), bumped by 1 ms while the name exists.
*/
static void next_index_path(rmq_index_service *s, const char *newest, char *path, size_t cap) {
  int64_t ms = rmq_now_ms();
  int64_t newest_ms = newest ? index_name_ms(newest) : 0;
  if (ms <= newest_ms) ms = newest_ms + 1;
  for (;; ms++) {
    char name[INDEX_NAME_LEN + 1];
    rmq_index_file_name(ms, name);
    snprintf(path, cap, "%s/%s", s->dir, name);
    if (access(path, F_OK) != 0) return;
  }
}

/*
** After a roll (IS 292-363): force the full file and record in the
** checkpoint that everything up to its end is on disk.
*/
static int flush_full_file(rmq_index_service *s, rmq_index_file *prev, rmq_err *err) {
  int rc = rmq_index_file_flush(prev, err);
  if (rc != RMQ_OK || s->checkpoint == NULL || !rmq_index_file_is_full(prev)) return rc;
  atomic_store(&s->checkpoint->index_msg_timestamp, atomic_load(&prev->end_timestamp));
  return rmq_checkpoint_flush(s->checkpoint, err);
}

/*
** getAndCreateLastIndexFile (IS 292-363): the newest file when it has room,
** else a new one. Only the dispatcher calls this and only it adds files, and
** the newest file is never deleted, so *out stays valid without the lock.
*/
static int writable_file(rmq_index_service *s, rmq_index_file **out, rmq_err *err) {
  pthread_rwlock_rdlock(&s->lock);
  rmq_index_file *last = s->count ? s->files[s->count - 1] : NULL;
  pthread_rwlock_unlock(&s->lock);
  if (last && !rmq_index_file_is_full(last)) {
    *out = last;
    return RMQ_OK;
  }
  char path[PATH_MAX];
  if (mkdir(s->dir, 0755) != 0 && errno != EEXIST) {
    return rmq_err_set(err, RMQ_EIO, "cannot create directory %s: %s", s->dir, strerror(errno));
  }
  next_index_path(s, last ? base_name(rmq_index_file_path(last)) : NULL, path, sizeof path);
  rmq_index_file *f;
  int rc = rmq_index_file_create(path, s->slot_num, s->index_num,
                                 last ? atomic_load(&last->end_phy_offset) : 0,
                                 last ? atomic_load(&last->end_timestamp) : 0, &f, err);
  if (rc != RMQ_OK) return rc;
  pthread_rwlock_wrlock(&s->lock);
  rc = service_push(s, f, err);
  pthread_rwlock_unlock(&s->lock);
  if (rc != RMQ_OK) {
    rmq_index_file_close(f, true);
    return rc;
  }
  *out = f;
  return last ? flush_full_file(s, last, err) : RMQ_OK;
}

/*
** Allocate the disk blocks of f's next item (and INDEX_RESERVE_STEP beyond)
** before it is written through the mapping, so that a full disk is an error
** (RMQ_EFULL) and not SIGBUS. The header and slots are reserved at creation.
*/
static int reserve_next_item(rmq_index_file *f, rmq_err *err) {
  int64_t end = item_offset(f, (int64_t)atomic_load(&f->index_count) + 1);
  if (end > f->mf->file_size) return RMQ_OK; /* full: put_key refuses anyway */
  return rmq_mapped_file_reserve_ahead(f->mf, (int32_t)end, INDEX_RESERVE_STEP, err);
}

/* IS putKey: put into *f, rolling to a new file when it is full. */
static int put_key(rmq_index_service *s, rmq_index_file **f, const rmq_index_request *req,
                   const char *key, size_t key_len, rmq_err *err) {
  int32_t hash = rmq_index_key_hash(req->topic, req->topic_len, key, key_len);
  int rc = reserve_next_item(*f, err);
  if (rc != RMQ_OK) return rc;
  if (rmq_index_file_put_key(*f, hash, req->commit_log_offset, req->store_timestamp)) {
    return RMQ_OK;
  }
  if ((rc = writable_file(s, f, err)) != RMQ_OK) return rc;
  if ((rc = reserve_next_item(*f, err)) != RMQ_OK) return rc;
  if (!rmq_index_file_put_key(*f, hash, req->commit_log_offset, req->store_timestamp)) {
    return rmq_err_set(err, RMQ_EFULL, "new index file %s has no room for a key",
                       rmq_index_file_path(*f));
  }
  return RMQ_OK;
}

bool rmq_index_keys_have_hash(const char *topic, size_t topic_len, const char *uniq_key,
                              size_t uniq_len, const char *keys, size_t keys_len, int32_t hash) {
  if (uniq_key && rmq_index_key_hash(topic, topic_len, uniq_key, uniq_len) == hash) return true;
  const char *k = keys, *end = keys ? keys + keys_len : NULL;
  while (k && k < end) {
    const char *sp = memchr(k, ' ', (size_t)(end - k));
    const char *tok_end = sp ? sp : end;
    if (tok_end > k && rmq_index_key_hash(topic, topic_len, k, (size_t)(tok_end - k)) == hash) {
      return true;
    }
    k = tok_end + 1;
  }
  return false;
}

/* IS 201-261. */
int rmq_index_service_build(rmq_index_service *s, const rmq_index_request *req, rmq_err *err) {
  if (!s->writable) {
    return rmq_err_set(err, RMQ_EINVAL, "index %s is read-only", s->dir);
  }
  rmq_index_file *f;
  int rc = writable_file(s, &f, err);
  if (rc != RMQ_OK) return rc;
  if (req->commit_log_offset < atomic_load(&f->end_phy_offset)) return RMQ_OK;
  if ((req->sys_flag & RMQ_SYSFLAG_TRANSACTION_MASK) == RMQ_SYSFLAG_TRANSACTION_ROLLBACK) {
    return RMQ_OK;
  }
  if (req->uniq_key) rc = put_key(s, &f, req, req->uniq_key, req->uniq_key_len, err);
  /* KEYS is split on single spaces; empty tokens are skipped. */
  const char *p = req->keys, *end = req->keys ? req->keys + req->keys_len : NULL;
  while (rc == RMQ_OK && p && p < end) {
    const char *space = memchr(p, ' ', (size_t)(end - p));
    const char *stop = space ? space : end;
    if (stop > p) rc = put_key(s, &f, req, p, (size_t)(stop - p), err);
    p = stop + 1;
  }
  return rc;
}

static int cmp_offsets(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* IS 157-195. */
int rmq_index_service_query_matching(rmq_index_service *s, const char *topic, size_t topic_len,
                                     const char *key, size_t key_len, int max_num, int64_t begin,
                                     int64_t end, const rmq_index_match *match, int64_t *offsets,
                                     int *count, rmq_err *err) {
  *count = 0;
  if (max_num > 0 && offsets == NULL) {
    return rmq_err_set(err, RMQ_EINVAL, "index query: no room for %d offsets", max_num);
  }
  int32_t hash = rmq_index_key_hash(topic, topic_len, key, key_len);
  int rc = RMQ_OK;
  pthread_rwlock_rdlock(&s->lock);
  for (int i = s->count - 1; i >= 0 && *count < max_num; i--) {
    rmq_index_file *f = s->files[i];
    if (rmq_index_file_time_matched(f, begin, end)) {
      if ((rc = rmq_index_file_ensure_checked(f, err)) != RMQ_OK) break;
      int32_t damaged = 0;
      index_file_select(f, hash, max_num, begin, end, match, offsets, count, &damaged);
      if (damaged) {
        rc = rmq_err_set(err, RMQ_ECORRUPT,
                         "index file %s is damaged: item %d leads to commit-log offset %lld, "
                         "where no record has a key of its hash %d; close the store and run "
                         "SELECT rocketmq_repair on it to rebuild the index from the log",
                         rmq_index_file_path(f), (int)damaged,
                         (long long)rmq_get64(item_at(f, damaged) + 4), (int)hash);
        break;
      }
    }
    if (atomic_load(&f->begin_timestamp) < begin) break;
  }
  pthread_rwlock_unlock(&s->lock);
  qsort(offsets, (size_t)*count, sizeof *offsets, cmp_offsets);
  return rc;
}

int rmq_index_service_query(rmq_index_service *s, const char *topic, size_t topic_len,
                            const char *key, size_t key_len, int max_num, int64_t begin,
                            int64_t end, int64_t *offsets, int *count, rmq_err *err) {
  return rmq_index_service_query_matching(s, topic, topic_len, key, key_len, max_num, begin, end,
                                          NULL, offsets, count, err);
}

/* The files deleteExpiredFile takes, oldest first; with the lock held. */
static int expired_files(rmq_index_service *s, int64_t commitlog_min_offset) {
  int n = 0;
  while (n < s->count - 1 && atomic_load(&s->files[n]->end_phy_offset) < commitlog_min_offset) {
    n++;
  }
  return n;
}

int rmq_index_service_expired_files(rmq_index_service *s, int64_t commitlog_min_offset) {
  pthread_rwlock_rdlock(&s->lock);
  int n = expired_files(s, commitlog_min_offset);
  pthread_rwlock_unlock(&s->lock);
  return n;
}

/* A view may hold the file: the retired list unlinks it when the view lets go. */
static void delete_file(rmq_index_service *s, rmq_index_file *f) {
  if (s->retired == NULL) {
    rmq_index_file_close(f, true);
    return;
  }
  rmq_retired_add(s->retired, f->mf);
  free(f);
}

/* IS 90-141. */
int rmq_index_service_delete_expired(rmq_index_service *s, int64_t commitlog_min_offset) {
  pthread_rwlock_wrlock(&s->lock);
  int n = expired_files(s, commitlog_min_offset);
  for (int i = 0; i < n; i++) delete_file(s, s->files[i]);
  /* With no index file yet, files is NULL: memmove may not be given it, even for 0 bytes. */
  if (n > 0) memmove(s->files, s->files + n, (size_t)(s->count - n) * sizeof *s->files);
  s->count -= n;
  pthread_rwlock_unlock(&s->lock);
  return n;
}

int rmq_index_service_flush(rmq_index_service *s, rmq_err *err) {
  int rc = RMQ_OK;
  pthread_rwlock_rdlock(&s->lock);
  for (int i = 0; rc == RMQ_OK && i < s->count; i++) rc = rmq_index_file_flush(s->files[i], err);
  pthread_rwlock_unlock(&s->lock);
  return rc;
}

int rmq_index_service_count(rmq_index_service *s) {
  pthread_rwlock_rdlock(&s->lock);
  int n = s->count;
  pthread_rwlock_unlock(&s->lock);
  return n;
}

bool rmq_index_service_file_info(rmq_index_service *s, int i, rmq_index_header *header,
                                 char name[18]) {
  pthread_rwlock_rdlock(&s->lock);
  bool ok = i >= 0 && i < s->count;
  if (ok) {
    rmq_index_file_header(s->files[i], header);
    snprintf(name, INDEX_NAME_LEN + 1, "%s", base_name(rmq_index_file_path(s->files[i])));
  }
  pthread_rwlock_unlock(&s->lock);
  return ok;
}

bool rmq_index_service_view(rmq_index_service *s, const char *after, rmq_index_view *v) {
  memset(v, 0, sizeof *v);
  pthread_rwlock_rdlock(&s->lock);
  for (int i = 0; i < s->count && v->mf == NULL; i++) {
    rmq_index_file *f = s->files[i];
    const char *name = base_name(rmq_index_file_path(f));
    if ((after && strcmp(name, after) <= 0) || !rmq_mapped_file_hold(f->mf)) continue;
    v->mf = f->mf;
    snprintf(v->name, sizeof v->name, "%s", name);
    v->slot_num = f->slot_num;
    v->index_num = f->index_num;
    rmq_index_file_header(f, &v->header);
  }
  pthread_rwlock_unlock(&s->lock);
  return v->mf != NULL;
}

void rmq_index_view_release(rmq_index_view *v) {
  if (v->mf) rmq_mapped_file_release(v->mf);
  v->mf = NULL;
}

bool rmq_index_view_valid(const rmq_index_view *v) {
  return v->mf == NULL || !rmq_mapped_file_revoked(v->mf);
}

int32_t rmq_index_view_slot(const rmq_index_view *v, int32_t key_hash) {
  uint32_t slot = (uint32_t)key_hash % (uint32_t)v->slot_num;
  return slot_load(v->mf->mapped + RMQ_INDEX_HEADER_SIZE + (size_t)slot * RMQ_INDEX_SLOT_SIZE);
}

bool rmq_index_view_item(const rmq_index_view *v, int32_t k, rmq_index_item *out) {
  if (k < 1 || k >= v->index_num) return false;
  const uint8_t *item = v->mf->mapped + RMQ_INDEX_HEADER_SIZE +
                        (size_t)v->slot_num * RMQ_INDEX_SLOT_SIZE + (size_t)k * RMQ_INDEX_ITEM_SIZE;
  out->key_hash = rmq_get32(item);
  out->phy_offset = rmq_get64(item + 4);
  out->time_diff = rmq_get32(item + 12);
  out->prev_index = rmq_get32(item + 16);
  return true;
}

/* ------------------------------------------------------------ following */

static bool name_listed(char **names, int n, const char *name) {
  return bsearch(&name, names, (size_t)n, sizeof *names, cmp_names) != NULL;
}

/* Is the file at its name still the one mapped? */
static bool same_file(const rmq_mapped_file *mf) {
  struct stat st;
  return stat(mf->path, &st) == 0 && st.st_dev == mf->dev && st.st_ino == mf->ino;
}

/* Let go of the files whose names are gone (or hold other files, with identity); with the lock. */
static void follow_deleted(rmq_index_service *s, char **names, int n, bool identity) {
  int kept = 0;
  for (int i = 0; i < s->count; i++) {
    rmq_index_file *f = s->files[i];
    if (name_listed(names, n, base_name(rmq_index_file_path(f))) &&
        (!identity || same_file(f->mf))) {
      s->files[kept++] = f;
      continue;
    }
    rmq_retired_let_go(s->retired, f->mf);
    free(f);
  }
  s->count = kept;
}

int rmq_index_service_follow(rmq_index_service *s, bool identity, rmq_err *err) {
  char **names;
  int n;
  int rc = list_index_names(s->dir, &names, &n, err);
  if (rc != RMQ_OK) return rc;
  pthread_rwlock_wrlock(&s->lock);
  follow_deleted(s, names, n, identity);
  const char *newest = s->count ? base_name(rmq_index_file_path(s->files[s->count - 1])) : NULL;
  char last[INDEX_NAME_LEN + 1] = "";
  if (newest) snprintf(last, sizeof last, "%s", newest);
  /* A file that holds no item yet is skipped by load_one, and tried again next time. */
  for (int i = 0; rc == RMQ_OK && i < n; i++) {
    if (strcmp(names[i], last) > 0) rc = load_one(s, names[i], true, i == n - 1, false, err);
  }
  for (int i = 0; i < s->count; i++) {
    if (!rmq_index_file_is_full(s->files[i])) index_file_follow(s->files[i]);
  }
  pthread_rwlock_unlock(&s->lock);
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  return rc;
}
