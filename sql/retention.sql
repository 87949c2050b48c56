-- retention.sql: how messages leave a store. Commit-log segments expire
-- file_reserved_hours after their last write and go during the delete_when
-- hours (or at any hour when the disk is fuller than disk_max_used_ratio),
-- with the consume-queue and index files below them.
-- Run from the repository root:  sqlite3 :memory: < sql/retention.sql
.load build/rocketmq
.mode box

-- Small segments and file_reserved_hours=0, so that the example has expired
-- files at once (RocketMQ's defaults: 1 GiB segments kept 72 hours).
CREATE VIRTUAL TABLE mq USING rocketmq(dir='build/retention-store',
  commitlog_file_size=65536, consumequeue_entries=64, index_slots=64, index_entries=256,
  file_reserved_hours=0);

WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 299)
INSERT INTO mq(topic, queue_id, keys, body)
  SELECT 'Logs', 0, 'log-' || i, zeroblob(1000) FROM n;

-- A segment is deleted only once it is on disk whole: flush now rather than
-- wait for the flush thread.
SELECT rocketmq_flush('build/retention-store') AS flushed_offset;

-- The dry run: what the next periodic pass would delete, and why.
SELECT kind, path, size, datetime(expires_at / 1000, 'unixepoch') AS expires, would_delete, reason
  FROM rocketmq_files('build/retention-store')
 WHERE kind IN ('commitlog', 'consumequeue', 'index')
 ORDER BY kind, path;

-- Delete now, at any hour (file_reserved_hours still applies): the number of files deleted.
SELECT rocketmq_clean('build/retention-store') AS files_deleted;

-- The queue starts at its first message left; a read from offset 0 starts there.
SELECT topic, queue_id, min_offset, max_offset FROM rocketmq_queues('build/retention-store');
SELECT min(queue_offset) AS first_read, count(*) AS messages
  FROM mq WHERE topic = 'Logs' AND queue_id = 0 AND queue_offset >= 0;
SELECT count(*) AS found_by_key FROM mq WHERE topic = 'Logs' AND key = 'log-0';

SELECT name, value FROM rocketmq_stats('build/retention-store')
 WHERE name IN ('commitlog_min_offset', 'disk_used_ratio', 'disk_full', 'clean_runs',
                'files_deleted', 'files_awaiting_readers');
