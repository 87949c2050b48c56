-- broker_store.sql: reading a store that Apache RocketMQ wrote, offline.
-- The golden store is carried in test/golden (see its MANIFEST.md); readonly=1
-- opens it without a lock and without writing a byte. File sizes (65536-byte
-- commit-log segments here, not the 1 GiB default) are read off the files.
.load build/rocketmq
.mode box
CREATE VIRTUAL TABLE broker USING rocketmq(dir='test/golden/store-normal', readonly=1);

SELECT topic, count(*) AS messages FROM broker GROUP BY topic ORDER BY topic;
SELECT queue_offset, tags, keys, length(body) AS bytes, substr(body_text, 1, 30) AS body
  FROM broker WHERE topic = 'TopicA' AND queue_id = 0 AND queue_offset >= 0;
SELECT commitlog_offset, topic, body_text FROM broker WHERE topic = 'TopicA' AND key = 'k1';
SELECT * FROM rocketmq_queues('test/golden/store-normal') WHERE topic LIKE 'Topic%';
