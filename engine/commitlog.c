/*
** commitlog.c: appends and reads of the CommitLog (see commitlog.h); its
** recovery is commitlog_recover.c.
*/
#include "commitlog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "io.h"
#include "multi_dispatch.h"
#include "properties.h"
#include "rmq.h"
#include "service_thread.h"

/* ------------------------------------------------------------- put lock */

/* This process's put lock: a mutex, or a spin lock when configured. */
static void local_lock(rmq_commitlog *cl) {
  if (cl->cfg.use_spin_lock) {
    pthread_spin_lock(&cl->put_spin);
  } else {
    pthread_mutex_lock(&cl->put_mutex);
  }
}

static void local_unlock(rmq_commitlog *cl) {
  if (cl->cfg.use_spin_lock) {
    pthread_spin_unlock(&cl->put_spin);
  } else {
    pthread_mutex_unlock(&cl->put_mutex);
  }
}

/*
** Do other processes append to this log now (shared_log.h)? Then a put
** takes the processes' lock too. It turns on only under this process's
** lock (rmq_commitlog_let_others_append) and never off, so a put sees the
** same answer when it takes and when it drops the locks.
*/
static bool shared_puts(rmq_commitlog *cl) {
  return cl->shared.appender || rmq_commitlog_direct_writers(cl);
}

/*
** The put lock: this process's, then, while other processes append, the
** processes' shared one, which also brings this writer up to what they
** appended. An appender (a follower's log) takes the shared one alone.
*/
static int put_lock(rmq_commitlog *cl, rmq_err *err) {
  if (cl->shared.appender) return rmq_shared_writer_enter(&cl->shared, err);
  local_lock(cl);
  int rc = shared_puts(cl) ? rmq_shared_writer_enter(&cl->shared, err) : RMQ_OK;
  if (rc != RMQ_OK) local_unlock(cl);
  return rc;
}

static void put_unlock(rmq_commitlog *cl) {
  if (shared_puts(cl)) rmq_shared_writer_leave(&cl->shared);
  if (!cl->shared.appender) local_unlock(cl);
}

/*
** rmq_commitlog_poison, and a segment's failed write reports here (under the
** put lock). Not the put lock: a dispatcher that fails while an owner's open
** holds it (waiting for that dispatcher) poisons the log too.
*/
static void poison_log(void *arg, const char *why) {
  rmq_commitlog *cl = arg;
  pthread_mutex_lock(&cl->poison_mu);
  if (!atomic_load(&cl->poisoned)) {
    snprintf(cl->poison_msg, sizeof cl->poison_msg, "%.255s", why);
    atomic_store(&cl->poisoned, true);
  }
  pthread_mutex_unlock(&cl->poison_mu);
  /* The owner's failure: followers send their puts here, to be refused with its reason. */
  if (cl->shared.log && !cl->shared.appender) atomic_store(&cl->shared.log->poisoned, 1);
}

/* ------------------------------------------------------------ lifecycle */

int rmq_commitlog_init(rmq_commitlog *cl, const char *store_dir, const rmq_commitlog_config *cfg,
                       bool writable, rmq_err *err) {
  memset(cl, 0, sizeof *cl);
  cl->cfg = *cfg;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/commitlog", store_dir);
  if (writable && mkdir(dir, 0755) != 0 && errno != EEXIST) {
    return rmq_err_set(err, RMQ_EIO, "cannot create %s: %s", dir, strerror(errno));
  }
  if ((cl->tqt = rmq_tqt_new()) == NULL) {
    return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  }
  pthread_mutex_init(&cl->put_mutex, NULL);
  pthread_spin_init(&cl->put_spin, PTHREAD_PROCESS_PRIVATE);
  pthread_mutex_init(&cl->shared.follow_mu, NULL);
  pthread_mutex_init(&cl->poison_mu, NULL);
  int rc = rmq_mfq_init(&cl->mfq, dir, cfg->file_size, writable, err);
  cl->mfq.size_setting = "commitlog_file_size";
  cl->mfq.size_unit = 1;
  cl->mfq.write_failed = poison_log;
  cl->mfq.write_failed_ctx = cl;
  return rc;
}

/* The write window's bytes. */
#define WINDOW_SIZE (1 << 20)

int rmq_commitlog_use_window(rmq_commitlog *cl, rmq_err *err) {
  cl->window = malloc(WINDOW_SIZE);
  return cl->window ? RMQ_OK : rmq_err_set(err, RMQ_ENOMEM, "out of memory");
}

bool rmq_commitlog_buffered(rmq_commitlog *cl) { return cl->mfq.pool || cl->window; }

/* The window's segment commits it and lets go: appends go through the mapping again. */
static int window_let_go(rmq_commitlog *cl, rmq_err *err) {
  rmq_mapped_file *mf = cl->window_mf;
  if (!mf) return RMQ_OK;
  int rc = rmq_mapped_file_window_detach(mf, err);
  if (rc != RMQ_OK) return rc;
  atomic_store(&cl->window_dirty, false);
  cl->window_mf = NULL;
  rmq_mapped_file_release(mf);
  return RMQ_OK;
}

int rmq_commitlog_commit_window(rmq_commitlog *cl, bool *committed, rmq_err *err) {
  *committed = false;
  if (!atomic_load(&cl->window_dirty)) return RMQ_OK;
  int rc = put_lock(cl, err);
  if (rc != RMQ_OK) return rc;
  if (cl->window_mf) rc = rmq_mapped_file_commit(cl->window_mf, 0, err);
  if (rc == RMQ_OK) {
    *committed = atomic_exchange(&cl->window_dirty, false);
  } else {
    poison_log(cl, err->msg);
  }
  put_unlock(cl);
  if (*committed && cl->appended) cl->appended(cl->appended_ctx);
  return rc;
}

void rmq_commitlog_destroy(rmq_commitlog *cl) {
  if (!cl->tqt) return;
  rmq_err ignored = {0};
  window_let_go(cl, &ignored);
  free(cl->window);
  rmq_mfq_destroy(&cl->mfq);
  rmq_tqt_free(cl->tqt);
  pthread_mutex_destroy(&cl->put_mutex);
  pthread_spin_destroy(&cl->put_spin);
  pthread_mutex_destroy(&cl->shared.follow_mu);
  pthread_mutex_destroy(&cl->poison_mu);
  cl->tqt = NULL;
}

void rmq_commitlog_poison(rmq_commitlog *cl, const char *why) { poison_log(cl, why); }

/* ------------------------------------------------------ several processes */

void rmq_commitlog_share(rmq_commitlog *cl, rmq_shared_log *log, bool appender) {
  cl->shared.log = log;
  cl->shared.q = &cl->mfq;
  cl->shared.tqt = cl->tqt;
  cl->shared.appender = appender;
  cl->shared.spin = cl->cfg.use_spin_lock;
  cl->shared.lmq = cl->cfg.enable_lmq;
}

void rmq_commitlog_shared_recovered(rmq_commitlog *cl) {
  rmq_shared_writer_recovered(&cl->shared, rmq_mfq_max_wrote(&cl->mfq));
}

bool rmq_commitlog_direct_writers(rmq_commitlog *cl) {
  return cl->shared.log &&
         atomic_load_explicit(&cl->shared.log->direct_writers, memory_order_acquire);
}

/* One queue's entry of rmq_commitlog_queue_offsets: its id, next offset, topic length and topic. */
#define QUEUE_ENTRY_HEAD (4 + 8 + 2)

int rmq_commitlog_queue_offsets(rmq_commitlog *cl, uint8_t **out, size_t *len, int64_t *end,
                                rmq_err *err) {
  int rc = put_lock(cl, err);
  if (rc != RMQ_OK) return rc;
  size_t cap = 0, pos = 0;
  for (size_t i = 0; rmq_tqt_next(cl->tqt, &i);) cap++;
  uint8_t *buf = malloc(cap * (QUEUE_ENTRY_HEAD + RMQ_MAX_TOPIC_LEN) + 1);
  rmq_tqt_entry *e;
  for (size_t i = 0; buf && (e = rmq_tqt_next(cl->tqt, &i)) != NULL;) {
    uint16_t n = (uint16_t)e->topic_len;
    memcpy(buf + pos, &e->queue_id, 4);
    memcpy(buf + pos + 4, &e->next_offset, 8);
    memcpy(buf + pos + 12, &n, 2);
    memcpy(buf + pos + QUEUE_ENTRY_HEAD, e->topic, n);
    pos += QUEUE_ENTRY_HEAD + n;
  }
  *end = cl->shared.synced;
  put_unlock(cl);
  if (!buf) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  *out = buf;
  *len = pos;
  return RMQ_OK;
}

int rmq_commitlog_seed_queue_offsets(rmq_topic_queue_table *tqt, const uint8_t *p, size_t len,
                                     rmq_err *err) {
  for (size_t pos = 0; pos < len;) {
    int32_t queue_id;
    int64_t next;
    uint16_t n;
    if (len - pos < QUEUE_ENTRY_HEAD) break;
    memcpy(&queue_id, p + pos, 4);
    memcpy(&next, p + pos + 4, 8);
    memcpy(&n, p + pos + 12, 2);
    if (n > RMQ_MAX_TOPIC_LEN || len - pos - QUEUE_ENTRY_HEAD < n) break;
    rmq_tqt_entry *e = rmq_tqt_get(tqt, (const char *)p + pos + QUEUE_ENTRY_HEAD, n, queue_id);
    if (!e) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
    e->next_offset = next;
    pos += QUEUE_ENTRY_HEAD + n;
    if (pos == len) return RMQ_OK;
  }
  return len == 0 ? RMQ_OK
                  : rmq_err_set(err, RMQ_ECORRUPT, "the owner's queue offsets are not whole");
}

int rmq_commitlog_let_others_append(rmq_commitlog *cl, rmq_err *err) {
  local_lock(cl);
  /* They read back this process's records from the file: all of them go there now. */
  int rc = window_let_go(cl, err);
  if (rc == RMQ_OK) atomic_store(&cl->shared.log->direct_writers, 1);
  local_unlock(cl);
  return rc;
}

/* ----------------------------------------------------------- validation */

static bool is_transaction_skip(int32_t sys_flag) {
  int32_t t = sys_flag & RMQ_SYSFLAG_TRANSACTION_MASK;
  return t == RMQ_SYSFLAG_TRANSACTION_PREPARED || t == RMQ_SYSFLAG_TRANSACTION_ROLLBACK;
}

/* Whether "name\1" starts a property of m: a few memchr calls, where memmem is slow. */
static bool may_hold(const rmq_message *m, const char *name, size_t nlen) {
  const char *props = m->properties, *end = props + m->properties_len;
  for (const char *p = props; p < end; p++) {
    if ((p = memchr(p, RMQ_NAME_VALUE_SEPARATOR, (size_t)(end - p))) == NULL) return false;
    const char *start = p - nlen;
    if (start >= props && memcmp(start, name, nlen) == 0 &&
        (start == props || start[-1] == RMQ_PROPERTY_SEPARATOR)) {
      return true;
    }
  }
  return false;
}

/* Parse a decimal property value; -1 when absent or not a plain number. */
static int64_t property_long(const rmq_message *m, const char *name) {
  /* Most messages have no DELAY: a quick scan settles that before a full parse. */
  if (!may_hold(m, name, strlen(name))) return -1;
  size_t n;
  const char *v = rmq_properties_get(m->properties, (size_t)m->properties_len, name, &n);
  if (!v || n == 0 || n > 18) return -1;
  int64_t x = 0;
  for (size_t i = 0; i < n; i++) {
    if (v[i] < '0' || v[i] > '9') return -1;
    x = x * 10 + (v[i] - '0');
  }
  return x;
}

/*
** With enable_lmq: a light message queue is written through
** INNER_MULTI_DISPATCH only (its offsets are the store's to assign), and
** the queues listed there are light message queues.
*/
static int check_lmq(const rmq_message *m, int i, rmq_err *err) {
  if (rmq_lmq_name(m->topic, (size_t)m->topic_len)) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "message %d: topic \"%.*s\" is a light message queue: put into it by "
                       "listing it in the INNER_MULTI_DISPATCH property of a message of another "
                       "topic",
                       i, m->topic_len, m->topic);
  }
  int rc = rmq_md_check(m->properties, (size_t)m->properties_len, err);
  if (rc != RMQ_OK) {
    char why[sizeof err->msg];
    snprintf(why, sizeof why, "%s", err->msg);
    rmq_err_clear(err);
    rmq_err_set(err, rc, "message %d: %s", i, why);
  }
  return rc;
}

static int check_message(rmq_commitlog *cl, const rmq_message *m, int i, rmq_err *err) {
  if (m->topic_len <= 0 || m->topic_len > RMQ_MAX_TOPIC_LEN ||
      !rmq_topic_valid(m->topic, (size_t)m->topic_len)) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "message %d: topic \"%.*s\" is not a valid RocketMQ topic (1..%d bytes of "
                       "[A-Za-z0-9_%%|-])",
                       i, m->topic_len > 0 && m->topic_len < 200 ? m->topic_len : 0,
                       m->topic ? m->topic : "", RMQ_MAX_TOPIC_LEN);
  }
  if (m->queue_id < 0) {
    return rmq_err_set(err, RMQ_EINVAL, "message %d: queue id %d is negative", i, m->queue_id);
  }
  if (m->properties_len < 0 || m->properties_len > RMQ_MAX_PROPERTIES_LEN) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "message %d: properties are %d bytes, more than the limit of %d bytes", i,
                       m->properties_len, RMQ_MAX_PROPERTIES_LEN);
  }
  if (m->body_len < 0 || m->body_len > cl->cfg.max_message_size) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "message %d: body is %d bytes, more than max_message_size (%d bytes)", i,
                       m->body_len, cl->cfg.max_message_size);
  }
  return cl->cfg.enable_lmq ? check_lmq(m, i, err) : RMQ_OK;
}

/* ---------------------------------------------------------- delay rewrite */

/* The delay level of a message with DELAY > 0 (not prepared or rollback), else 0. */
static int64_t delay_level(rmq_commitlog *cl, const rmq_message *m) {
  if (is_transaction_skip(m->sys_flag) || cl->cfg.delay_level_count == 0) return 0;
  int64_t level = property_long(m, RMQ_PROPERTY_DELAY);
  if (level <= 0) return 0;
  return level > cl->cfg.delay_level_count ? cl->cfg.delay_level_count : level;
}

/*
** A delayed message is stored in SCHEDULE_TOPIC_XXXX queue level-1 with
** REAL_TOPIC and REAL_QID added (CommitLog.asyncPutMessage). *props receives the
** rebuilt properties (freed by caller).
*/
static int rewrite_delayed(rmq_message *m, int64_t level, char **props, rmq_err *err) {
  size_t cap = (size_t)m->properties_len + (size_t)m->topic_len + 64, len = 0;
  char qid[16];
  int qid_len = snprintf(qid, sizeof qid, "%d", m->queue_id);
  if ((*props = malloc(cap)) == NULL) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  memcpy(*props, m->properties, (size_t)m->properties_len);
  len = (size_t)m->properties_len;
  rmq_properties_append(*props, cap, &len, RMQ_PROPERTY_REAL_TOPIC, strlen(RMQ_PROPERTY_REAL_TOPIC),
                        m->topic, (size_t)m->topic_len);
  rmq_properties_append(*props, cap, &len, RMQ_PROPERTY_REAL_QID, strlen(RMQ_PROPERTY_REAL_QID),
                        qid, (size_t)qid_len);
  if (len > RMQ_MAX_PROPERTIES_LEN) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "properties of a delayed message grow to %zu bytes with REAL_TOPIC and "
                       "REAL_QID, more than the limit of %d bytes",
                       len, RMQ_MAX_PROPERTIES_LEN);
  }
  m->properties = *props;
  m->properties_len = (int32_t)len;
  m->topic = RMQ_SCHEDULE_TOPIC;
  m->topic_len = (int32_t)strlen(RMQ_SCHEDULE_TOPIC);
  m->queue_id = (int32_t)level - 1;
  return RMQ_OK;
}

/* ------------------------------------------------------------------ put */

/*
** Check message i (m, a working copy) and fill in what the store sets before
** the lock: a delayed message's rewrite (*props: its new properties, for the
** caller to free), store host and host bits. Returns the record's length,
** or -1 with err.
*/
static int32_t prepare_message(rmq_commitlog *cl, rmq_message *m, int i, bool delay, char **props,
                               rmq_err *err) {
  int rc = check_message(cl, m, i, err);
  int64_t level = rc == RMQ_OK && delay ? delay_level(cl, m) : 0;
  if (rc == RMQ_OK && level > 0) rc = rewrite_delayed(m, level, props, err);
  if (rc != RMQ_OK) return -1;
  m->store_host = cl->cfg.store_host;
  m->sys_flag &= ~(RMQ_SYSFLAG_BORNHOST_V6 | RMQ_SYSFLAG_STOREHOST_V6);
  if (m->born_host.v6) m->sys_flag |= RMQ_SYSFLAG_BORNHOST_V6;
  if (m->store_host.v6) m->sys_flag |= RMQ_SYSFLAG_STOREHOST_V6;
  int32_t len = rmq_message_length(m->sys_flag, m->body_len, m->topic_len, m->properties_len,
                                   false);
  if (len > cl->cfg.max_message_size + RMQ_RECORD_SLACK) {
    rmq_err_set(err, RMQ_EINVAL,
                "message %d: record is %d bytes, more than max_message_size + 64 KiB", i, len);
    return -1;
  }
  return len;
}

/* A batch of `total` bytes must fit in one segment with its BLANK. */
static int check_batch_size(rmq_commitlog *cl, int n, int64_t total, rmq_err *err) {
  if (total + RMQ_END_FILE_MIN_BLANK_LENGTH <= cl->cfg.file_size) return RMQ_OK;
  return rmq_err_set(err, RMQ_EINVAL,
                     "%d message(s) of %lld bytes do not fit in one commitlog segment of %d "
                     "bytes (commitlog_file_size)",
                     n, (long long)total, cl->cfg.file_size);
}

/*
** Encode message i into buf if its record fits in cap bytes (the body CRC
** only then: a caller that finds no room calls again); its length, or -1.
*/
static int32_t encode_message(rmq_commitlog *cl, const rmq_message *in, int i, bool delay,
                              uint8_t *buf, size_t cap, rmq_err *err) {
  rmq_message m = *in;
  char *props = NULL;
  int32_t len = prepare_message(cl, &m, i, delay, &props, err);
  if (len > 0 && (size_t)len <= cap) {
    m.body_crc = rmq_body_crc(m.body, (size_t)m.body_len);
    rmq_message_encode(&m, buf, cap);
  }
  free(props);
  return len;
}

int32_t rmq_commitlog_encode(rmq_commitlog *cl, const rmq_message *in, uint8_t *buf, size_t cap,
                             rmq_err *err) {
  return encode_message(cl, in, 0, true, buf, cap, err);
}

int32_t rmq_commitlog_encode_timeup(rmq_commitlog *cl, const rmq_message *in, uint8_t *buf,
                                    size_t cap, rmq_err *err) {
  return encode_message(cl, in, 0, false, buf, cap, err);
}

/*
** Bytes up to end (in mf) are in place: other processes see them first (the
** shared end), then this one's readers, so that nothing this process may
** dispatch is ever behind another's mend of a dead writer's tail.
*/
static void publish(rmq_commitlog *cl, rmq_mapped_file *mf, int64_t end, int64_t store_timestamp) {
  if (cl->shared.log) rmq_shared_writer_publish(&cl->shared, end, store_timestamp);
  rmq_mapped_file_advance_to(mf, (int32_t)(end - mf->file_from_offset));
}

/* Close mf with a BLANK record over its unused tail and move to a new segment. */
static rmq_mapped_file *roll_segment(rmq_commitlog *cl, rmq_mapped_file *mf, rmq_err *err) {
  int32_t pos = rmq_mapped_file_wrote(mf);
  if (rmq_mapped_file_reserve(mf, pos + RMQ_END_FILE_MIN_BLANK_LENGTH, err) != RMQ_OK) return NULL;
  int64_t end = mf->file_from_offset + mf->file_size;
  if (shared_puts(cl)) rmq_shared_writer_pending(&cl->shared, end);
  if (mf == cl->window_mf && window_let_go(cl, err) != RMQ_OK) return NULL;
  uint8_t *blank = rmq_mapped_file_write_ptr(mf, pos);
  rmq_put32(blank, mf->file_size - pos);
  rmq_put32(blank + 4, RMQ_MAGIC_BLANK);
  publish(cl, mf, end, atomic_load(&mf->store_timestamp));
  /*
  ** Bytes reach the file in log order: the next segment may be written
  ** without a buffer (the pool ran out), straight into the page cache, so
  ** this one's buffered tail goes first. Else a crash could keep the later
  ** records and lose earlier ones, which recovery must call damage.
  */
  if (mf->transient && rmq_mapped_file_commit(mf, 0, err) != RMQ_OK) return NULL;
  return rmq_mfq_last_or_create(&cl->mfq, 0, err);
}

/*
** The writer's segment with room for need bytes plus a BLANK (rolling if
** needed), its disk space reserved for them.
*/
static rmq_mapped_file *writable_segment(rmq_commitlog *cl, int64_t need, int32_t *ready,
                                         rmq_err *err) {
  rmq_mapped_file *mf = cl->shared.appender ? cl->shared.segment
                                            : rmq_mfq_last_or_create(&cl->mfq, 0, err);
  bool room = mf &&
              need + RMQ_END_FILE_MIN_BLANK_LENGTH <= mf->file_size - rmq_mapped_file_wrote(mf);
  if (mf && !room && cl->shared.appender) {
    rmq_err_set(err, RMQ_EAGAIN, "the segment is full: the owner rolls the log");
    return NULL;
  }
  if (mf && !room) mf = roll_segment(cl, mf, err);
  if (!mf) return NULL;
  int32_t pos = rmq_mapped_file_wrote(mf);
  if (rmq_mapped_file_reserve(mf, pos + (int32_t)need, err) != RMQ_OK) return NULL;
  *ready = atomic_load(&mf->populated_position);
  /* Other processes' bytes may lie ahead: write through the mapping, never by pwrite. */
  if (rmq_commitlog_direct_writers(cl)) *ready = mf->file_size;
  return mf;
}

/* Under the put lock: refuse when poisoned, else the segment to append `total` bytes to. */
static rmq_mapped_file *locked_segment(rmq_commitlog *cl, int64_t total, int32_t *ready,
                                       rmq_err *err) {
  if (atomic_load(&cl->poisoned)) {
    rmq_err_set(err, RMQ_EPOISONED, "the store refuses writes until it is reopened: %s",
                cl->poison_msg);
    return NULL;
  }
  return writable_segment(cl, total, ready, err);
}

/* Read rec's head; false (with err) if rec is not a whole v1 record of at most room bytes. */
static bool read_head(const uint8_t *rec, size_t room, rmq_record_head *h, rmq_err *err) {
  if (rmq_record_head_read(rec, room, h)) return true;
  rmq_err_set(err, RMQ_EINVAL, "the batch holds a record the store did not encode");
  return false;
}

/* The record's queue in the topic-queue table; *last is tried first. */
static rmq_tqt_entry *record_queue(rmq_commitlog *cl, const rmq_record_head *h,
                                   rmq_tqt_entry **last) {
  rmq_tqt_entry *e = *last;
  if (e && e->queue_id == h->queue_id && e->topic_len == h->topic_len &&
      memcmp(e->topic, h->topic, h->topic_len) == 0) {
    return e;
  }
  return *last = rmq_tqt_get(cl->tqt, h->topic, h->topic_len, h->queue_id);
}

/*
** Where a batch is being stamped: its store time, the queue looked up last
** (a batch's records usually go to one queue, or a few) and the producer's
** result of the next record (NULL: none wanted).
*/
typedef struct stamp_state {
  int64_t now;
  rmq_tqt_entry *last;
  rmq_put_result *result;
  bool run; /* a put of a run (rmq_commitlog_put_encoded_run) */
} stamp_state;

/*
** Fill in record rec's queue offset, physical offset and store time
** (DefaultAppendMessageCallback.doAppend); a prepared or rolled-back
** transaction's record takes queue offset 0 and does not advance its queue.
*/
static bool stamp_record(rmq_commitlog *cl, uint8_t *rec, const rmq_record_head *h, int64_t offset,
                         stamp_state *st, rmq_err *err) {
  rmq_tqt_entry *e = record_queue(cl, h, &st->last);
  if (!e) {
    rmq_err_set(err, RMQ_ENOMEM, "out of memory");
    return false;
  }
  bool skip = is_transaction_skip(h->sys_flag);
  int64_t queue_offset = skip ? 0 : e->next_offset;
  rmq_put64(rec + RMQ_POS_QUEUE_OFFSET, queue_offset);
  rmq_put64(rec + RMQ_POS_PHYSICAL_OFFSET, offset);
  rmq_put64(rec + h->store_timestamp_at, st->now);
  if (!skip) e->next_offset++;
  if (st->result) {
    *st->result++ = (rmq_put_result){.physical_offset = offset,
                                     .size = h->len,
                                     .queue_offset = queue_offset,
                                     .store_timestamp = st->now};
  }
  return true;
}

/*
** Where a batch's records come from: spans in memory, or the first len bytes
** of a file (a large transaction's, rmq_commitlog_put_file), read in chunks
** of whole records through a buffer that stays hot: the kernel copies from
** and to the page cache through its own mapping, where this process's
** touching hundreds of megabytes of fresh memory would fault on every page.
*/
typedef struct batch_source {
  const rmq_span *spans;
  int nspans, next;
  int fd;           /* -1: the spans */
  int64_t len, pos; /* the file's bytes of records, and where the next chunk starts */
  uint8_t *buf;     /* the chunk */
  size_t cap;
} batch_source;

/* Bytes of a file source read at once (a record larger is read whole). */
#define SOURCE_CHUNK (4 << 20)

/* Whole records at the start of the n bytes at p: their length (0: the first is not whole). */
static size_t whole_records(const uint8_t *p, size_t n, size_t *first_len) {
  size_t at = 0;
  *first_len = n >= 4 ? (size_t)rmq_get32(p) : 0;
  while (n - at >= 4) {
    int32_t len = rmq_get32(p + at);
    if (len <= 0 || (size_t)len > n - at) break;
    at += (size_t)len;
  }
  return at;
}

/* The next span of whole records into *out; out->len 0 at the end. */
static int source_next(batch_source *src, rmq_span *out, rmq_err *err) {
  *out = (rmq_span){0};
  if (src->fd < 0) {
    if (src->next < src->nspans) *out = src->spans[src->next++];
    return RMQ_OK;
  }
  while (src->pos < src->len) {
    size_t want = (size_t)(src->len - src->pos) < src->cap ? (size_t)(src->len - src->pos)
                                                           : src->cap;
    if (rmq_io_pread(src->fd, src->buf, want, src->pos) != (ssize_t)want) {
      return rmq_err_set(err, RMQ_EIO, "cannot read a transaction's rows back: %s",
                         errno ? strerror(errno) : "short read");
    }
    size_t first_len, n = whole_records(src->buf, want, &first_len);
    if (n > 0) {
      *out = (rmq_span){src->buf, n};
      src->pos += (int64_t)n;
      return RMQ_OK;
    }
    /* A record larger than the buffer: read it whole. */
    uint8_t *grown = first_len > src->cap && (int64_t)first_len <= src->len - src->pos
                         ? realloc(src->buf, first_len)
                         : NULL;
    if (!grown) break;
    src->buf = grown;
    src->cap = first_len;
  }
  if (src->pos < src->len) {
    return rmq_err_set(err, RMQ_EINVAL, "the batch holds a record the store did not encode");
  }
  return RMQ_OK;
}

static void source_rewind(batch_source *src) {
  src->next = 0;
  src->pos = 0;
}

/* Give back the queue offsets of the batch's first `stamped` bytes, after a failure. */
static void unstamp(rmq_commitlog *cl, batch_source *src, int64_t stamped) {
  rmq_tqt_entry *last = NULL;
  rmq_err ignored = {0};
  rmq_span span;
  source_rewind(src);
  for (int64_t done = 0; done < stamped && source_next(src, &span, &ignored) == RMQ_OK && span.len;
       done += (int64_t)span.len) {
    size_t end = stamped - done < (int64_t)span.len ? (size_t)(stamped - done) : span.len;
    rmq_record_head h;
    for (size_t p = 0; p < end && read_head(span.data + p, end - p, &h, &ignored); p += h.len) {
      rmq_tqt_entry *e = is_transaction_skip(h.sys_flag) ? NULL : record_queue(cl, &h, &last);
      if (e) e->next_offset--;
    }
  }
}

/*
** Stamp the records of a span, where its first byte is at log offset
** `offset`, where they are, and copy each into dst (unless NULL) while it is
** in cache. Stamped before copied: a kill mid-batch must leave in the log
** only records with their store time, since recovery takes a record stored
** before the checkpoint's time for flushed data lost. The first `hold`
** bytes are not copied (the batch's head, written last). *at: where it
** stopped.
*/
static bool stamp_span(rmq_commitlog *cl, uint8_t *dst, const rmq_span *span, size_t hold,
                       int64_t offset, stamp_state *st, size_t *at, rmq_err *err) {
  rmq_record_head h;
  for (*at = 0; *at < span->len; *at += (size_t)h.len) {
    uint8_t *rec = span->data + *at;
    size_t skip = *at == 0 ? hold : 0;
    if (!read_head(rec, span->len - *at, &h, err)) return false;
    if (!stamp_record(cl, rec, &h, offset + (int64_t)*at, st, err)) return false;
    if (dst) memcpy(dst + *at + skip, rec + skip, (size_t)h.len - skip);
  }
  return true;
}

/*
** The first record's TOTALSIZE and MAGIC: held back until the rest of the
** batch is in place, so that a process killed mid-copy leaves zeros where
** the batch starts and recovery (ours, and RocketMQ's
** CommitLog.recoverAbnormally, which stops at a record without a magic code)
** ends the log before the batch: a batch is wholly there or absent.
*/
#define BATCH_HEAD 8

/* Eight bytes at any address, stored by one instruction. */
typedef uint64_t unaligned_u64 __attribute__((aligned(1), may_alias));

/*
** Write the batch's head with one store: a SIGKILL between two instructions
** then leaves all of it or none (a memcpy may copy in pieces, as a
** sanitizer's does), never a TOTALSIZE without its MAGIC.
*/
static void write_head(uint8_t *at, const uint8_t *head) {
  uint64_t v;
  memcpy(&v, head, sizeof v);
  *(volatile unaligned_u64 *)at = v;
}

/*
** With flush='sync', a batch of several records is forced to disk before its
** head is written (GroupCommitService flushes the head with the rest later),
** so that a power loss cannot keep the head without every record after it.
*/
static int flush_before_head(rmq_commitlog *cl, rmq_mapped_file *mf, int32_t start, int64_t total,
                             int count, rmq_err *err) {
  if (!cl->cfg.flush_sync || count < 2 || mf->transient) return RMQ_OK;
  int32_t page = start - start % RMQ_OS_PAGE_SIZE;
  if (rmq_io_msync(mf->mapped + page, (size_t)(start + total - page)) == 0) return RMQ_OK;
  rmq_err_set(err, RMQ_EIO, "cannot flush %s up to position %lld: %s", mf->path,
              (long long)(start + total), strerror(errno));
  poison_log(cl, err->msg);
  return err->code;
}

/*
** Under the put lock, before a batch of total bytes and count records: a
** put of a run goes into the write window (attached to mf first) when it
** fits, unless it must be forced before its head (flush_before_head); every
** other put commits the window and goes to the file as before. Not while
** other processes append.
*/
static int window_ready(rmq_commitlog *cl, rmq_mapped_file *mf, int64_t total, int count, bool run,
                        rmq_err *err) {
  if (!cl->window || shared_puts(cl)) return RMQ_OK;
  bool fits = run && total <= WINDOW_SIZE && !(cl->cfg.flush_sync && count > 1);
  if (!fits) return window_let_go(cl, err);
  if (cl->window_mf != mf) {
    int rc = window_let_go(cl, err);
    if (rc != RMQ_OK || !rmq_mapped_file_hold(mf)) return rc;
    cl->window_mf = mf;
    rmq_mapped_file_window_attach(mf, cl->window, WINDOW_SIZE);
  }
  return rmq_mapped_file_window_room(mf, (int32_t)total, err);
}

/* A failed batch: the queue offsets of its first `stamped` bytes given back, `copied` zeroed. */
static int append_failed(rmq_commitlog *cl, rmq_mapped_file *mf, batch_source *src, int32_t start,
                         int64_t stamped, size_t copied, rmq_err *err) {
  unstamp(cl, src, stamped);
  rmq_mapped_file_zero(mf, start, copied);
  return err->code;
}

/*
** Stamp the source's records and copy them into mf, the batch's head last;
** under the put lock. A span goes into the write window when there is one,
** else through the mapping when it lands below `ready` (pages mapped ahead),
** else by rmq_mapped_file_write. A bad record or a failed write
** fails the batch before anything is published: its queue offsets are given
** back and the bytes copied so far zeroed, lest recovery take them for
** records after a crash.
*/
static int append_encoded(rmq_commitlog *cl, rmq_mapped_file *mf, batch_source *src, int count,
                          int64_t total, stamp_state *st, int32_t ready, rmq_err *err) {
  int32_t start = rmq_mapped_file_wrote(mf), pos = start;
  if (window_ready(cl, mf, total, count, st->run, err) != RMQ_OK) return err->code;
  uint8_t head[BATCH_HEAD] = {0};
  rmq_span span;
  int rc;
  while ((rc = source_next(src, &span, err)) == RMQ_OK && span.len > 0) {
    /* A file source is large: past the window, and by pwrite rather than through fresh pages. */
    uint8_t *dst = mf->write_buffer ? rmq_mapped_file_write_ptr(mf, pos)
                   : !mf->transient && src->fd < 0 && pos + (int64_t)span.len <= ready
                       ? mf->mapped + pos
                       : NULL;
    size_t at, hold = pos == start ? BATCH_HEAD : 0;
    if (hold) memcpy(head, span.data, BATCH_HEAD);
    if (!stamp_span(cl, dst, &span, hold, mf->file_from_offset + pos, st, &at, err)) {
      return append_failed(cl, mf, src, start, pos - start + (int64_t)at,
                           (size_t)(pos - start) + (dst ? span.len : 0), err);
    }
    if (!dst && rmq_mapped_file_write(mf, pos + (int32_t)hold, span.data + hold, span.len - hold,
                                      err) != RMQ_OK) {
      return append_failed(cl, mf, src, start, pos - start + (int64_t)span.len,
                           (size_t)(pos - start), err);
    }
    pos += (int32_t)span.len;
  }
  if (rc != RMQ_OK || pos - start != total) {
    if (rc == RMQ_OK) rmq_err_set(err, RMQ_EINVAL, "the batch's records do not add up to its size");
    return append_failed(cl, mf, src, start, pos - start, (size_t)(pos - start), err);
  }
  if (flush_before_head(cl, mf, start, total, count, err) != RMQ_OK) {
    return append_failed(cl, mf, src, start, total, (size_t)total, err);
  }
  /*
  ** The compiler keeps the head's stores after the rest: a SIGKILL stops the
  ** thread between two instructions, and every store before it reaches the
  ** page cache. (Readers need no fence: the release of the write position
  ** publishes the batch.)
  */
  atomic_signal_fence(memory_order_seq_cst);
  write_head(rmq_mapped_file_write_ptr(mf, start), head);
  if (mf->write_buffer && !mf->pool) atomic_store(&cl->window_dirty, true);
  atomic_store(&mf->store_timestamp, st->now);
  publish(cl, mf, mf->file_from_offset + start + total, st->now);
  return RMQ_OK;
}

void rmq_commitlog_prepare_segment(rmq_commitlog *cl) {
  if (!cl->mfq.writable || rmq_mfq_count(&cl->mfq) > 0) return;
  rmq_err ignored = {0};
  if (put_lock(cl, &ignored) != RMQ_OK) return;
  rmq_mfq_last_or_create(&cl->mfq, 0, &ignored);
  put_unlock(cl);
}

static atomic_int *disk_full(rmq_commitlog *cl) {
  return cl->shared.log ? &cl->shared.log->disk_full : &cl->disk_full;
}

int rmq_commitlog_disk_full(rmq_commitlog *cl) { return atomic_load(disk_full(cl)); }
void rmq_commitlog_set_disk_full(rmq_commitlog *cl, int percent) {
  atomic_store(disk_full(cl), percent);
}

/* DefaultMessageStore.checkStoreStatus: no put while the disk is full (RunningFlags.DISK_FULL). */
static int check_disk(rmq_commitlog *cl, rmq_err *err) {
  int percent = atomic_load_explicit(disk_full(cl), memory_order_relaxed);
  if (percent == 0) return RMQ_OK;
  return rmq_err_set(err, RMQ_EFULL,
                     "disk of %s is %d%% full, above disk_warning_ratio %d%%: writes are refused "
                     "until cleaning brings it below",
                     cl->mfq.dir, percent, cl->cfg.disk_warning_ratio);
}

/*
** Between two clean passes a fast writer could fill a small disk: it looks
** at the disk itself every DISK_CHECK_BYTES it appends, and stops writes
** above disk_warning_ratio at once. Only a clean pass lets them in again.
*/
#define DISK_CHECK_BYTES (1 << 20)

static void recheck_disk(rmq_commitlog *cl, int64_t end) {
  int64_t at = atomic_load_explicit(&cl->disk_check_at, memory_order_relaxed);
  if (end < at ||
      !atomic_compare_exchange_strong(&cl->disk_check_at, &at, end + DISK_CHECK_BYTES)) {
    return;
  }
  int percent = rmq_io_disk_used_percent(cl->mfq.dir);
  if (percent > cl->cfg.disk_warning_ratio) atomic_store(disk_full(cl), percent);
}

/*
** Outside the put lock, after bytes up to end were appended (a put or a
** slave's append): look at the disk, and wake the commit service
** (CommitLog.handleDiskFlush: the bytes reach the file and readers soon
** after) and the HA sender.
*/
static void after_append(rmq_commitlog *cl, int64_t end) {
  recheck_disk(cl, end);
  struct rmq_service_thread *wakeup = atomic_load(&cl->put_wakeup);
  if (wakeup) rmq_service_thread_wakeup(wakeup);
  if (cl->appended) cl->appended(cl->appended_ctx);
}

/* Under the put lock: append the spans where the log ends; *first_offset, where that is. */
static int locked_append(rmq_commitlog *cl, batch_source *src, int count, int64_t total,
                         stamp_state *st, int64_t *first_offset, rmq_err *err) {
  int32_t ready;
  rmq_mapped_file *mf = locked_segment(cl, total, &ready, err);
  if (!mf) return err->code;
  *first_offset = mf->file_from_offset + rmq_mapped_file_wrote(mf);
  if (shared_puts(cl)) rmq_shared_writer_pending(&cl->shared, *first_offset + total);
  return append_encoded(cl, mf, src, count, total, st, ready, err);
}

/* ------------------------------------------------------------ multi-dispatch */

/* A batch with light message queues, rewritten under the put lock (rmq_md_wrap). */
typedef struct lmq_batch {
  uint8_t *buf;
  size_t len, cap;
  rmq_span span;
  rmq_md_undo *undo;
  size_t nundo;
} lmq_batch;

/* Does the record list queues to dispatch into (MultiDispatch.isMultiDispatchMsg)? */
static bool lists_queues(const uint8_t *rec, const rmq_record_head *h) {
  const char *props;
  size_t len, n = 0;
  if (!rmq_md_applies(h->topic, h->topic_len, h->sys_flag)) return false;
  rmq_record_properties(rec, h, &props, &len);
  return rmq_properties_get(props, len, RMQ_PROPERTY_INNER_MULTI_DISPATCH, &n) && n > 0;
}

/* Whether any record of the source lists queues; the source rewound. */
static int any_lists_queues(batch_source *src, bool *any, rmq_err *err) {
  rmq_span span;
  rmq_record_head h;
  int rc;
  *any = false;
  while (!*any && (rc = source_next(src, &span, err)) == RMQ_OK && span.len > 0) {
    for (size_t at = 0; !*any && at < span.len; at += (size_t)h.len) {
      if (!read_head(span.data + at, span.len - at, &h, err)) return err->code;
      *any = lists_queues(span.data + at, &h);
    }
  }
  source_rewind(src);
  return *any ? RMQ_OK : rc;
}

/* Append the record at rec to the batch, wrapped when it lists queues. */
static int lmq_add(rmq_commitlog *cl, lmq_batch *b, const uint8_t *rec, const rmq_record_head *h,
                   rmq_err *err) {
  bool wrap = lists_queues(rec, h);
  size_t need = (size_t)h->len + (wrap ? rmq_md_growth(rec, h) : 0);
  if (b->cap - b->len < need) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < need) cap *= 2;
    uint8_t *grown = realloc(b->buf, cap);
    if (!grown) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
    b->buf = grown;
    b->cap = cap;
  }
  if (!wrap) {
    memcpy(b->buf + b->len, rec, (size_t)h->len);
    b->len += (size_t)h->len;
    return RMQ_OK;
  }
  int32_t n = rmq_md_wrap(cl->tqt, cl->cfg.max_lmq_queues, rec, h, b->buf + b->len, &b->undo,
                          &b->nundo, err);
  if (n < 0) return err->code;
  b->len += (size_t)n;
  return RMQ_OK;
}

/*
** Under the put lock, with enable_lmq: when a record of the source lists
** light message queues, the batch is copied with each such record wrapped
** (CommitLog's DefaultAppendMessageCallback.doAppend calls
** MultiDispatch.wrapMultiDispatch under the lock, then encodes again: the
** record's length changes). b->buf stays NULL when no record lists any.
*/
static int lmq_wrap_batch(rmq_commitlog *cl, batch_source *src, lmq_batch *b, rmq_err *err) {
  bool any;
  int rc = any_lists_queues(src, &any, err);
  rmq_span span;
  rmq_record_head h;
  while (any && rc == RMQ_OK && (rc = source_next(src, &span, err)) == RMQ_OK && span.len > 0) {
    for (size_t at = 0; rc == RMQ_OK && at < span.len; at += (size_t)h.len) {
      rc = read_head(span.data + at, span.len - at, &h, err)
               ? lmq_add(cl, b, span.data + at, &h, err)
               : err->code;
    }
  }
  source_rewind(src);
  b->span = (rmq_span){b->buf, b->len};
  return rc;
}

static int put_encoded(rmq_commitlog *cl, batch_source *src, int count, rmq_put_result *results,
                       int64_t *first_offset, int64_t *end_offset, bool run, rmq_err *err) {
  if (count <= 0) return rmq_err_set(err, RMQ_EINVAL, "no message to append");
  if (!cl->mfq.writable) return rmq_err_set(err, RMQ_EINVAL, "the store is open read-only");
  int64_t total = src->len;
  for (int i = 0; i < src->nspans; i++) total += (int64_t)src->spans[i].len;
  int rc = check_batch_size(cl, count, total, err);
  if (rc == RMQ_OK) rc = check_disk(cl, err);
  if (rc != RMQ_OK) return rc;
  rc = put_lock(cl, err);
  if (rc != RMQ_OK) return rc;
  stamp_state st = {.now = rmq_now_ms(), .result = results, .run = run};
  atomic_store(&cl->begin_time_in_lock, st.now);
  lmq_batch lmq = {0};
  batch_source wrapped = {.spans = &lmq.span, .nspans = 1, .fd = -1};
  if (cl->cfg.enable_lmq) rc = lmq_wrap_batch(cl, src, &lmq, err);
  if (rc == RMQ_OK && lmq.buf) {
    src = &wrapped;
    total = (int64_t)lmq.len;
    rc = check_batch_size(cl, count, total, err);
  }
  if (rc == RMQ_OK) rc = locked_append(cl, src, count, total, &st, first_offset, err);
  if (rc != RMQ_OK) rmq_md_undo_all(cl->tqt, lmq.undo, lmq.nundo);
  atomic_store(&cl->begin_time_in_lock, 0);
  put_unlock(cl);
  free(lmq.buf);
  free(lmq.undo);
  if (rc != RMQ_OK) return rc;
  *end_offset = *first_offset + total;
  atomic_fetch_add(&cl->put_count, count);
  after_append(cl, *end_offset);
  for (int i = 0; results && i < count; i++) {
    rmq_msg_id_format(&cl->cfg.store_host, results[i].physical_offset, results[i].msg_id);
  }
  return RMQ_OK;
}

int rmq_commitlog_put_encoded(rmq_commitlog *cl, const rmq_span *spans, int nspans, int count,
                              rmq_put_result *results, int64_t *first_offset, int64_t *end_offset,
                              rmq_err *err) {
  batch_source src = {.spans = spans, .nspans = nspans, .fd = -1};
  return put_encoded(cl, &src, count, results, first_offset, end_offset, false, err);
}

int rmq_commitlog_put_encoded_run(rmq_commitlog *cl, const rmq_span *spans, int nspans, int count,
                                  int64_t *first_offset, int64_t *end_offset, rmq_err *err) {
  batch_source src = {.spans = spans, .nspans = nspans, .fd = -1};
  return put_encoded(cl, &src, count, NULL, first_offset, end_offset, true, err);
}

int rmq_commitlog_put_file(rmq_commitlog *cl, int fd, int64_t len, int count, int64_t *first_offset,
                           int64_t *end_offset, rmq_err *err) {
  batch_source src = {.fd = fd, .len = len, .cap = SOURCE_CHUNK};
  if ((src.buf = malloc(src.cap)) == NULL) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  int rc = put_encoded(cl, &src, count, NULL, first_offset, end_offset, false, err);
  free(src.buf);
  return rc;
}

/* ---------------------------------------------------------- slave append */

/*
** An empty log whose segments hold nothing (made ahead, or by a heartbeat
** before a crash): they go, so that the log can start where its master's
** data does.
*/
static void drop_empty_segments(rmq_commitlog *cl) {
  rmq_mfq_truncate_dirty(&cl->mfq, -1);
  atomic_store(&cl->mfq.flushed_where, 0);
  atomic_store(&cl->mfq.committed_where, 0);
}

/* Under the put lock: the segment that ends where offset is, created when the log is empty. */
static rmq_mapped_file *append_segment(rmq_commitlog *cl, int64_t offset, rmq_err *err) {
  int64_t end = rmq_mfq_max_wrote(&cl->mfq);
  if (end == 0 && (offset < 0 || offset % cl->cfg.file_size != 0)) {
    rmq_err_set(err, RMQ_EINVAL,
                "an empty commit log starts at a segment's start (a multiple of "
                "commitlog_file_size, %d, from 0), not at %lld",
                cl->cfg.file_size, (long long)offset);
    return NULL;
  }
  rmq_mapped_file *first = end == 0 ? rmq_mfq_first(&cl->mfq) : NULL;
  if (first) {
    bool elsewhere = first->file_from_offset != offset;
    rmq_mapped_file_release(first);
    if (elsewhere) drop_empty_segments(cl);
  }
  if (end != 0 && offset != end) {
    rmq_err_set(err, RMQ_EINVAL, "data for offset %lld, but the commit log ends at %lld",
                (long long)offset, (long long)end);
    return NULL;
  }
  /* As roll_segment: a full segment's buffered tail reaches the file before the next one. */
  rmq_mapped_file *last = rmq_mfq_last(&cl->mfq);
  int rc = last && last->transient && rmq_mapped_file_is_full(last)
               ? rmq_mapped_file_commit(last, 0, err)
               : RMQ_OK;
  if (last) rmq_mapped_file_release(last);
  return rc == RMQ_OK ? rmq_mfq_last_or_create(&cl->mfq, offset, err) : NULL;
}

static int locked_append_data(rmq_commitlog *cl, int64_t offset, const uint8_t *data, size_t len,
                              int64_t store_timestamp, rmq_err *err) {
  if (atomic_load(&cl->poisoned)) {
    return rmq_err_set(err, RMQ_EPOISONED, "the store refuses writes until it is reopened: %s",
                       cl->poison_msg);
  }
  rmq_mapped_file *mf = append_segment(cl, offset, err);
  if (!mf) return err->code;
  int32_t pos = rmq_mapped_file_wrote(mf);
  if (mf->file_from_offset + pos != offset || (int64_t)len > mf->file_size - pos) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "%zu bytes at offset %lld do not fit in the segment %s at position %d", len,
                       (long long)offset, mf->path, pos);
  }
  if (len == 0) return RMQ_OK;
  int rc = rmq_mapped_file_reserve(mf, pos + (int32_t)len, err);
  if (rc != RMQ_OK) return rc;
  if (shared_puts(cl)) rmq_shared_writer_pending(&cl->shared, offset + (int64_t)len);
  rc = rmq_mapped_file_write(mf, pos, data, len, err);
  if (rc != RMQ_OK) return rc;
  if (store_timestamp > 0) atomic_store(&mf->store_timestamp, store_timestamp);
  publish(cl, mf, offset + (int64_t)len, atomic_load(&mf->store_timestamp));
  return RMQ_OK;
}

int rmq_commitlog_append_data(rmq_commitlog *cl, int64_t offset, const uint8_t *data, size_t len,
                              int64_t store_timestamp, rmq_err *err) {
  if (!cl->mfq.writable) return rmq_err_set(err, RMQ_EINVAL, "the store is open read-only");
  int rc = check_disk(cl, err);
  if (rc == RMQ_OK) rc = put_lock(cl, err);
  if (rc != RMQ_OK) return rc;
  rc = locked_append_data(cl, offset, data, len, store_timestamp, err);
  put_unlock(cl);
  if (rc != RMQ_OK || len == 0) return rc;
  after_append(cl, offset + (int64_t)len);
  return RMQ_OK;
}

/* ------------------------------------------------------- put of messages */

/* The records of a put: on the stack while they fit (every small put), else on the heap. */
#define PUT_STACK_BYTES 16384

typedef struct put_buffer {
  uint8_t *data;
  size_t cap;
  int64_t len; /* of every record so far, including any left unencoded */
  uint8_t stack[PUT_STACK_BYTES];
} put_buffer;

static size_t buffer_room(const put_buffer *b) {
  return b->len < (int64_t)b->cap ? b->cap - (size_t)b->len : 0;
}

/*
** Grow b for a record of len bytes. Not past a segment: such a batch fails
** its size check, so its records beyond are only measured, not encoded.
*/
static int buffer_grow(rmq_commitlog *cl, put_buffer *b, int32_t len, rmq_err *err) {
  int64_t need = b->len + len;
  if (need + RMQ_END_FILE_MIN_BLANK_LENGTH > cl->cfg.file_size) return RMQ_OK;
  size_t cap = (int64_t)b->cap * 2 > need ? b->cap * 2 : (size_t)need;
  uint8_t *data = b->data == b->stack ? malloc(cap) : realloc(b->data, cap);
  if (!data) return rmq_err_set(err, RMQ_ENOMEM, "out of memory");
  if (b->data == b->stack) memcpy(data, b->stack, (size_t)b->len);
  b->data = data;
  b->cap = cap;
  return RMQ_OK;
}

/* Encode msgs end to end into b, each checked and prepared as rmq_commitlog_encode does. */
static int encode_batch(rmq_commitlog *cl, const rmq_message *msgs, int n, put_buffer *b,
                        rmq_err *err) {
  for (int i = 0; i < n; i++) {
    size_t room = buffer_room(b);
    int32_t len = encode_message(cl, &msgs[i], i, true, room ? b->data + b->len : NULL, room, err);
    if (len < 0) return err->code;
    if ((size_t)len > room) {
      if (buffer_grow(cl, b, len, err) != RMQ_OK) return err->code;
      size_t grown = buffer_room(b);
      if ((size_t)len <= grown) encode_message(cl, &msgs[i], i, true, b->data + b->len, grown, err);
    }
    b->len += len;
  }
  return check_batch_size(cl, n, b->len, err);
}

int rmq_commitlog_encode_batch(rmq_commitlog *cl, const rmq_message *msgs, int n, rmq_span *out,
                               rmq_err *err) {
  put_buffer b;
  b.data = NULL; /* on the heap from the first record: the caller keeps it */
  b.cap = 0;
  b.len = 0;
  int rc = encode_batch(cl, msgs, n, &b, err);
  if (rc != RMQ_OK) {
    free(b.data);
    return rc;
  }
  *out = (rmq_span){b.data, (size_t)b.len};
  return RMQ_OK;
}

int rmq_commitlog_put(rmq_commitlog *cl, const rmq_message *msgs, int n, rmq_put_result *results,
                      int64_t *end_offset, rmq_err *err) {
  put_buffer b;
  b.data = b.stack;
  b.cap = sizeof b.stack;
  b.len = 0;
  int rc = encode_batch(cl, msgs, n, &b, err);
  rmq_span span = {b.data, (size_t)b.len};
  int64_t first;
  if (rc == RMQ_OK) {
    rc = rmq_commitlog_put_encoded(cl, &span, 1, n, results, &first, end_offset, err);
  }
  if (b.data != b.stack) free(b.data);
  return rc;
}

/* ---------------------------------------------------------------- reads */

int64_t rmq_commitlog_min_offset(rmq_commitlog *cl) { return rmq_mfq_min_offset(&cl->mfq); }
int64_t rmq_commitlog_max_offset(rmq_commitlog *cl) {
  rmq_shared_writer_follow(&cl->shared);
  return rmq_mfq_max_offset(&cl->mfq);
}

void rmq_commitlog_follow_shared(rmq_commitlog *cl) {
  if (!rmq_shared_writer_follow(&cl->shared)) return;
  int64_t end = rmq_mfq_max_wrote(&cl->mfq);
  rmq_mapped_file *last = rmq_mfq_last(&cl->mfq);
  if (last) {
    atomic_store(&last->store_timestamp, atomic_load(&cl->shared.log->store_timestamp));
    rmq_mapped_file_release(last);
  }
  after_append(cl, end);
}
int64_t rmq_commitlog_flushed_offset(rmq_commitlog *cl) {
  return atomic_load(&cl->mfq.flushed_where);
}

int64_t rmq_commitlog_roll_next(rmq_commitlog *cl, int64_t offset) {
  int32_t size = cl->mfq.file_size;
  return offset + size - offset % size;
}

int rmq_commitlog_get_data(rmq_commitlog *cl, int64_t offset, rmq_commitlog_ref *ref) {
  memset(ref, 0, sizeof *ref);
  rmq_mapped_file *mf = rmq_mfq_find(&cl->mfq, offset);
  if (!mf) return RMQ_ENOTFOUND;
  int32_t pos = (int32_t)(offset - mf->file_from_offset);
  int32_t readable = rmq_mapped_file_read_position(mf);
  if (pos >= readable) {
    rmq_mapped_file_release(mf);
    return RMQ_ENOTFOUND;
  }
  ref->file = mf;
  ref->data = mf->mapped + pos;
  ref->avail = (size_t)(readable - pos);
  return RMQ_OK;
}

void rmq_commitlog_ref_release(rmq_commitlog_ref *ref) {
  if (ref->file) rmq_mapped_file_release(ref->file);
  memset(ref, 0, sizeof *ref);
}

bool rmq_commitlog_ref_valid(const rmq_commitlog_ref *ref) {
  return ref->file == NULL || !rmq_mapped_file_revoked(ref->file);
}

int rmq_commitlog_read_message(rmq_commitlog *cl, int64_t offset, bool check_crc,
                               rmq_commitlog_ref *ref, rmq_message *out, rmq_err *err) {
  if (rmq_commitlog_get_data(cl, offset, ref) != RMQ_OK) {
    return rmq_err_set(err, RMQ_ENOTFOUND,
                       "no message at commitlog offset %lld (the log holds "
                       "%lld..%lld)",
                       (long long)offset, (long long)rmq_commitlog_min_offset(cl),
                       (long long)rmq_commitlog_max_offset(cl));
  }
  rmq_decode_status s = rmq_message_decode(ref->data, ref->avail, check_crc, out);
  if (s != RMQ_DECODE_OK) {
    rmq_commitlog_ref_release(ref);
    return rmq_err_set(err, RMQ_ECORRUPT, "commitlog offset %lld holds no valid record: %s",
                       (long long)offset, rmq_decode_status_name(s));
  }
  return RMQ_OK;
}

int64_t rmq_commitlog_time_at(rmq_commitlog *cl, int64_t offset, int32_t size) {
  rmq_commitlog_ref ref;
  int64_t ts = -1;
  if (rmq_commitlog_get_data(cl, offset, &ref) != RMQ_OK) return ts;
  if (ref.avail >= 8 && (int64_t)ref.avail >= size) {
    int32_t sys_flag = ref.avail >= RMQ_POS_SYSFLAG + 4 ? rmq_get32(ref.data + RMQ_POS_SYSFLAG) : 0;
    size_t pos = (size_t)RMQ_POS_STORE_TIMESTAMP(sys_flag);
    if (pos + 8 <= ref.avail) ts = rmq_get64(ref.data + pos);
  }
  rmq_commitlog_ref_release(&ref);
  return ts;
}

/* ---------------------------------------------------- topic-queue access */

void rmq_commitlog_set_queue_offset(rmq_commitlog *cl, const char *topic, size_t topic_len,
                                    int32_t queue_id, int64_t next_offset) {
  rmq_tqt_entry *e = rmq_tqt_get(cl->tqt, topic, topic_len, queue_id);
  if (e) e->next_offset = next_offset;
}

int64_t rmq_commitlog_tags_code_of(rmq_commitlog *cl, const rmq_message *m, const char *tags,
                                   size_t tags_len) {
  bool schedule = (size_t)m->topic_len == strlen(RMQ_SCHEDULE_TOPIC) &&
                  memcmp(m->topic, RMQ_SCHEDULE_TOPIC, (size_t)m->topic_len) == 0;
  if (schedule) {
    int64_t level = property_long(m, RMQ_PROPERTY_DELAY);
    if (level > 0) {
      if (level > cl->cfg.delay_level_count) level = cl->cfg.delay_level_count;
      /* A record's store time may be anything (a broker's odd store): the sum must not wrap. */
      return rmq_time_add(m->store_timestamp, level > 0 ? cl->cfg.delay_ms[level - 1] : 1000);
    }
  }
  return tags ? rmq_tags_code(tags, tags_len) : 0;
}

int64_t rmq_commitlog_tags_code(rmq_commitlog *cl, const rmq_message *m) {
  size_t n = 0;
  const char *tags = rmq_properties_get(m->properties, (size_t)m->properties_len, RMQ_PROPERTY_TAGS,
                                        &n);
  return rmq_commitlog_tags_code_of(cl, m, tags, n);
}

bool rmq_commitlog_entry_check(rmq_commitlog *cl, const char *topic, int32_t queue_id, int64_t n,
                               const rmq_cq_entry *e, const rmq_message *m, char *why, size_t cap) {
  size_t tl = strlen(topic);
  bool own = (size_t)m->topic_len == tl && memcmp(m->topic, topic, tl) == 0 &&
             m->queue_id == queue_id;
  /* A light message queue's entry leads to a record that lists it (MultiDispatch). */
  bool listed = !own && rmq_md_lists(m, topic, tl, queue_id, n);
  if (!own && !listed) {
    snprintf(why, cap, "entry %lld of %s/%d leads to a record of %.*s/%d at %lld", (long long)n,
             topic, (int)queue_id, (int)m->topic_len, m->topic, (int)m->queue_id,
             (long long)e->phy_offset);
  } else if (own && m->queue_offset != n) {
    snprintf(why, cap, "entry %lld leads to the record at %lld, whose QUEUEOFFSET is %lld",
             (long long)n, (long long)e->phy_offset, (long long)m->queue_offset);
  } else if (e->size != m->total_size) {
    snprintf(why, cap, "entry %lld says size %d, its record at %lld has %d", (long long)n,
             (int)e->size, (long long)e->phy_offset, (int)m->total_size);
  } else if (strcmp(topic, RMQ_SCHEDULE_TOPIC) != 0 && !rmq_cq_ext_addr(e->tags_code) &&
             e->tags_code != rmq_commitlog_tags_code(cl, m)) {
    /* A delayed message's tagsCode is its due time, by the levels it was written with. */
    snprintf(why, cap, "entry %lld says tagsCode %lld, its record at %lld has %lld", (long long)n,
             (long long)e->tags_code, (long long)e->phy_offset,
             (long long)rmq_commitlog_tags_code(cl, m));
  } else {
    return true;
  }
  return false;
}
