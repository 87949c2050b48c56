/*
** config.c: the store's settings (RocketMQ's MessageStoreConfig and
** BrokerConfig as far as the store reads them): their defaults, their
** checks, the role names and the delay levels (the contract is in rmq.h).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ha_wire.h"
#include "rmq.h"

void rmq_config_init(rmq_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->commitlog_file_size = 1073741824;
  cfg->consumequeue_entries = 300000;
  cfg->index_slots = 5000000;
  cfg->index_entries = 20000000;
  cfg->max_message_size = 4194304;
  cfg->default_queues = 4;
  snprintf(cfg->delay_levels, sizeof cfg->delay_levels, "%s",
           "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h");
  cfg->file_reserved_hours = 72;
  snprintf(cfg->delete_when, sizeof cfg->delete_when, "04");
  cfg->disk_max_used_ratio = 75;
  cfg->disk_clean_forcibly_ratio = 85;
  cfg->disk_warning_ratio = 90;
  cfg->clean_interval_ms = 10000;
  cfg->clean_first_delay_ms = 60000;
  cfg->clean_grace_ms = 120000;
  rmq_host_parse("127.0.0.1:10911", &cfg->store_host);
  cfg->sync_flush_timeout_ms = 5000;
  cfg->flush_interval_ms = 500;
  cfg->max_reconsume_times = 16;
  cfg->compress_over = 4096;
  cfg->compress_type = RMQ_CODEC_ZLIB;
  cfg->compress_level = 5;
  cfg->max_lmq_queues = 20000;
  cfg->role = RMQ_ROLE_MASTER;
  cfg->ha_slave_timeout_ms = 3000;
  cfg->ha_heartbeat_ms = 5000;
  cfg->ha_housekeeping_ms = 20000;
}

static const char *const role_names[] = {"master", "sync_master", "slave"};

const char *rmq_role_name(rmq_role role) {
  return role >= RMQ_ROLE_MASTER && role <= RMQ_ROLE_SLAVE ? role_names[role] : "unknown";
}

int rmq_role_parse(const char *name, rmq_role *out, rmq_err *err) {
  for (int i = RMQ_ROLE_MASTER; i <= RMQ_ROLE_SLAVE; i++) {
    if (strcmp(name, role_names[i]) == 0) {
      *out = (rmq_role)i;
      return RMQ_OK;
    }
  }
  return rmq_err_set(err, RMQ_EINVAL, "role: '%s' must be 'master', 'sync_master' or 'slave'",
                     name);
}

int rmq_parse_delay_levels(const char *s, int64_t *ms, int max, int *count, rmq_err *err) {
  *count = 0;
  for (const char *p = s; *p;) {
    char *end;
    long long v = strtoll(p, &end, 10);
    int64_t unit = *end == 's'   ? 1000
                   : *end == 'm' ? 60000
                   : *end == 'h' ? 3600000
                   : *end == 'd' ? 86400000
                                 : 0;
    if (end == p || v <= 0 || unit == 0 || (end[1] != ' ' && end[1] != '\0')) {
      return rmq_err_set(err, RMQ_EINVAL,
                         "delay_levels: \"%s\" is not a list like '1s 5s 10m 2h' (units s m h d)",
                         s);
    }
    if (*count == max) {
      return rmq_err_set(err, RMQ_EINVAL, "delay_levels: more than %d levels", max);
    }
    /* strtoll's overflow (LLONG_MAX) lands here too. */
    if (v > RMQ_MAX_DELAY_MS / unit) {
      return rmq_err_set(err, RMQ_EINVAL, "delay_levels: level %d is %.*s; a delay is at most 365d",
                         *count + 1, (int)(end + 1 - p), p);
    }
    ms[(*count)++] = v * unit;
    p = end[1] ? end + 2 : end + 1;
  }
  if (*count == 0) return rmq_err_set(err, RMQ_EINVAL, "delay_levels: no level given");
  return RMQ_OK;
}

static int check_range(const char *name, long long v, long long lo, long long hi, rmq_err *err) {
  if (v >= lo && v <= hi) return RMQ_OK;
  return rmq_err_set(err, RMQ_EINVAL, "%s: %lld is out of range (%lld..%lld)", name, v, lo, hi);
}

/* A "host:port" address; a listener may ask for port 0 (any free port). */
static int check_address(const char *name, const char *v, int min_port, rmq_err *err) {
  char host[RMQ_HA_ADDR];
  int port;
  if (rmq_ha_split_address(v, host, sizeof host, &port) != 0) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "%s: '%s' is not host:port (e.g. 10.0.0.5:10912, broker-a:10912 or "
                       "[2001:db8::5]:10912; ports 0..65535)",
                       name, v);
  }
  return check_range(name, port, min_port, 65535, err);
}

/* The replication settings (BrokerRole, haListenPort, haMasterAddress) agree with each other. */
static int check_ha(const rmq_config *cfg, rmq_err *err) {
  if (cfg->role < RMQ_ROLE_MASTER || cfg->role > RMQ_ROLE_SLAVE) {
    return rmq_err_set(err, RMQ_EINVAL, "role: %d is not master, sync_master or slave",
                       (int)cfg->role);
  }
  bool slave = cfg->role == RMQ_ROLE_SLAVE;
  if (slave && !cfg->ha_master[0]) {
    return rmq_err_set(err, RMQ_EINVAL, "role='slave' needs ha_master='host:port' (its master)");
  }
  if (!slave && cfg->ha_master[0]) {
    return rmq_err_set(err, RMQ_EINVAL, "ha_master: only a slave has a master (role is '%s')",
                       rmq_role_name(cfg->role));
  }
  if (cfg->role == RMQ_ROLE_SYNC_MASTER && !cfg->ha_listen[0]) {
    return rmq_err_set(err, RMQ_EINVAL,
                       "role='sync_master' needs ha_listen='host:port' for its slaves");
  }
  if (cfg->readonly && (slave || cfg->ha_listen[0])) {
    return rmq_err_set(err, RMQ_EINVAL, "readonly: a read-only store takes no part in replication");
  }
  int rc = cfg->ha_listen[0] ? check_address("ha_listen", cfg->ha_listen, 0, err) : RMQ_OK;
  if (!rc && slave) rc = check_address("ha_master", cfg->ha_master, 1, err);
  if (!rc) rc = check_range("ha_slave_timeout_ms", cfg->ha_slave_timeout_ms, 1, 3600000, err);
  if (!rc) rc = check_range("ha_heartbeat_ms", cfg->ha_heartbeat_ms, 10, 3600000, err);
  if (!rc) {
    rc = check_range("ha_housekeeping_ms", cfg->ha_housekeeping_ms, 2 * cfg->ha_heartbeat_ms,
                     86400000, err);
  }
  return rc;
}

/* compress_over, and compress_level within what compress_type takes. */
static int check_compression(const rmq_config *cfg, rmq_err *err) {
  int rc = check_range("compress_over", cfg->compress_over, 0, INT32_MAX, err);
  rmq_codec c = cfg->compress_type;
  if (!rc && c != RMQ_CODEC_ZLIB && c != RMQ_CODEC_LZ4 && c != RMQ_CODEC_ZSTD) {
    rc = rmq_err_set(err, RMQ_EINVAL, "compress_type must be 'zlib', 'lz4' or 'zstd'");
  }
  /* Deflater's levels; LZ4F's fast and high-compression levels; zstd's positive levels. */
  int lo = c == RMQ_CODEC_ZSTD ? 1 : 0, hi = c == RMQ_CODEC_ZLIB ? 9 : c == RMQ_CODEC_LZ4 ? 12 : 22;
  if (!rc && (cfg->compress_level < lo || cfg->compress_level > hi)) {
    rc = rmq_err_set(err, RMQ_EINVAL, "compress_level %d is out of range %d..%d for %s",
                     cfg->compress_level, lo, hi, rmq_codec_name(c));
  }
  return rc;
}

int rmq_config_check(const rmq_config *cfg, rmq_err *err) {
  int64_t levels[RMQ_MAX_DELAY_LEVELS];
  int n;
  int rc = check_range("commitlog_file_size", cfg->commitlog_file_size, 4096, INT32_MAX, err);
  if (!rc) rc = check_range("consumequeue_entries", cfg->consumequeue_entries, 1, 100000000, err);
  if (!rc) rc = check_range("index_slots", cfg->index_slots, 1, 100000000, err);
  if (!rc) rc = check_range("index_entries", cfg->index_entries, 2, 100000000, err);
  if (!rc && 40LL + 4LL * cfg->index_slots + 20LL * cfg->index_entries > INT32_MAX) {
    rc = rmq_err_set(err, RMQ_EINVAL,
                     "index_slots and index_entries make an index file larger "
                     "than 2 GiB");
  }
  if (!rc) rc = check_range("max_message_size", cfg->max_message_size, 1, 1 << 30, err);
  if (!rc) rc = check_range("max_lmq_queues", cfg->max_lmq_queues, 1, INT32_MAX, err);
  if (!rc) rc = check_range("default_queues", cfg->default_queues, 1, 1024, err);
  if (!rc) rc = check_range("file_reserved_hours", cfg->file_reserved_hours, 0, 1 << 20, err);
  if (!rc) rc = check_range("disk_max_used_ratio", cfg->disk_max_used_ratio, 10, 95, err);
  if (!rc)
    rc = check_range("disk_clean_forcibly_ratio", cfg->disk_clean_forcibly_ratio, 10, 99, err);
  if (!rc) rc = check_range("disk_warning_ratio", cfg->disk_warning_ratio, 10, 99, err);
  if (!rc && cfg->disk_clean_forcibly_ratio > cfg->disk_warning_ratio) {
    rc = rmq_err_set(err, RMQ_EINVAL,
                     "disk_clean_forcibly_ratio (%d) must not exceed disk_warning_ratio (%d): "
                     "forced cleaning starts before writes are refused",
                     cfg->disk_clean_forcibly_ratio, cfg->disk_warning_ratio);
  }
  if (!rc) rc = check_range("clean_interval_ms", cfg->clean_interval_ms, 10, 86400000, err);
  if (!rc) rc = check_range("clean_first_delay_ms", cfg->clean_first_delay_ms, 0, 86400000, err);
  if (!rc) rc = check_range("clean_grace_ms", cfg->clean_grace_ms, 0, 86400000, err);
  if (!rc) rc = check_range("sync_flush_timeout_ms", cfg->sync_flush_timeout_ms, 1, 3600000, err);
  if (!rc) rc = check_range("flush_interval_ms", cfg->flush_interval_ms, 1, 86400000, err);
  if (!rc) rc = check_range("transient_store_pool", cfg->transient_store_pool, 0, 64, err);
  if (!rc) rc = check_range("max_reconsume_times", cfg->max_reconsume_times, 0, 10000, err);
  if (!rc) rc = check_compression(cfg, err);
  if (!rc && cfg->transient_store_pool > 0 && cfg->flush_sync) {
    rc = rmq_err_set(err, RMQ_EINVAL,
                     "transient_store_pool requires flush='async' (as in "
                     "RocketMQ, the pool is for asynchronous flushing only)");
  }
  if (!rc) rc = rmq_parse_delay_levels(cfg->delay_levels, levels, RMQ_MAX_DELAY_LEVELS, &n, err);
  if (!rc) rc = check_ha(cfg, err);
  return rc;
}
