-- admin.sql: looking inside a store.
.load build/rocketmq
.mode box
CREATE VIRTUAL TABLE mq USING rocketmq(dir='build/demo-store');

SELECT * FROM rocketmq_queues('build/demo-store');
SELECT name, value FROM rocketmq_stats('build/demo-store')
 WHERE name IN ('commitlog_max_offset', 'flushed_offset', 'dispatched_offset', 'dispatch_behind_bytes', 'recovery');
SELECT rocketmq_flush('build/demo-store') AS flushed_offset;
SELECT offset, size, topic, queue_id, queue_offset, valid FROM rocketmq_commitlog('build/demo-store') LIMIT 5;
SELECT cq_offset, commitlog_offset, size, tags_code
  FROM rocketmq_consumequeue('build/demo-store', 'Orders', 0);
SELECT rocketmq_java_hash('paid') AS tags_code_of_paid;
