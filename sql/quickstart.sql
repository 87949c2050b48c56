-- quickstart.sql: a store, a few messages, and three ways to read them back.
-- Run from the repository root:  sqlite3 :memory: < sql/quickstart.sql
-- (make demo runs it on a fresh build/demo-store.)
.load build/rocketmq
.mode box

CREATE VIRTUAL TABLE mq USING rocketmq(dir='build/demo-store');

-- Produce: topic is required; queue_id NULL picks a queue round-robin.
INSERT INTO mq(topic, queue_id, tags, keys, body) VALUES
  ('Orders', 0, 'created', 'order-1001', '{"order":1001,"total":25.50}'),
  ('Orders', 0, 'paid',    'order-1001', '{"order":1001,"paid":true}'),
  ('Orders', 1, 'created', 'order-1002', '{"order":1002,"total":9.99}');
SELECT last_insert_rowid() AS commitlog_offset_of_last_row;

-- Consume queue 0 of Orders from offset 0, the way a RocketMQ consumer pulls.
SELECT queue_offset, tags, keys, body_text
  FROM mq WHERE topic = 'Orders' AND queue_id = 0 AND queue_offset >= 0;

-- Find every message of a business key through the index files.
SELECT commitlog_offset, queue_id, tags, body_text
  FROM mq WHERE topic = 'Orders' AND key = 'order-1001';

-- Look one message up by its RocketMQ message id (store host + offset).
SELECT topic, tags, size FROM mq
 WHERE msg_id = (SELECT msg_id FROM mq WHERE topic = 'Orders' AND key = 'order-1002');

-- How each query runs.
EXPLAIN QUERY PLAN SELECT * FROM mq WHERE topic = 'Orders' AND queue_id = 0 AND queue_offset >= 0;
