-- consumer_group.sql: a consumer group as a RocketMQ broker keeps it. Its
-- position is committed into config/consumerOffset.json (a broker started
-- on the store sees it), a message it fails is given back for a retry, and
-- rocketmq_consumer_offsets shows how far behind each queue is.
-- max_reconsume_times=1 (RocketMQ's default is 16) so that the example
-- reaches the dead-letter queue after one retry.
.load build/rocketmq
.mode box
CREATE VIRTUAL TABLE mq USING rocketmq(dir='build/demo-store', max_reconsume_times=1);

INSERT INTO mq(topic, queue_id, tags, keys, body) VALUES
  ('Shipments', 0, 'created', 'ship-1', 'parcel 1 created'),
  ('Shipments', 0, 'created', 'ship-2', 'parcel 2 created'),
  ('Shipments', 1, 'created', 'ship-3', 'parcel 3 created');

-- Pull what the group 'warehouse' has not read yet: its committed offset
-- (0 when it has none) up to the queue's end.
CREATE TEMP VIEW pending AS
SELECT q.queue_id, m.queue_offset, m.commitlog_offset, m.keys, m.body_text
  FROM rocketmq_queues('build/demo-store') q
  JOIN mq m ON m.topic = q.topic AND m.queue_id = q.queue_id
           AND m.queue_offset >= coalesce(
             (SELECT o.offset FROM rocketmq_consumer_offsets('build/demo-store') o
               WHERE o."group" = 'warehouse' AND o.topic = q.topic
                 AND o.queue_id = q.queue_id), 0)
 WHERE q.topic = 'Shipments';
SELECT * FROM pending ORDER BY queue_id, queue_offset;

-- Processing ship-2 failed: give it back. It is stored again for
-- %RETRY%warehouse through delay level 3 (10 s with the default levels).
SELECT rocketmq_send_back('build/demo-store', 'warehouse', commitlog_offset) AS retry_offset
  FROM mq WHERE topic = 'Shipments' AND key = 'ship-2';
SELECT topic, queue_id, reconsume_times, json_extract(properties, '$.REAL_TOPIC') AS real_topic,
       json_extract(properties, '$.DELAY') AS delay_level,
       json_extract(properties, '$.RETRY_TOPIC') AS retry_topic
  FROM mq WHERE topic = 'SCHEDULE_TOPIC_XXXX' AND keys = 'ship-2';

-- Commit: the group has read everything in both queues. Durable once it returns.
SELECT rocketmq_commit_offset('build/demo-store', 'warehouse', topic, queue_id, max_offset)
       AS committed
  FROM rocketmq_queues('build/demo-store') WHERE topic = 'Shipments';

-- Positions and lag of every group of the store.
SELECT * FROM rocketmq_consumer_offsets('build/demo-store');

-- A message that fails past max_reconsume_times goes to the dead-letter
-- queue %DLQ%warehouse: given back twice, it gets there.
SELECT rocketmq_send_back('build/demo-store', 'warehouse',
         rocketmq_send_back('build/demo-store', 'warehouse',
           (SELECT commitlog_offset FROM mq WHERE topic = 'Shipments' AND key = 'ship-3')))
       AS dead_letter_offset;
SELECT topic, queue_id, queue_offset, reconsume_times, keys, body_text
  FROM mq WHERE topic = '%DLQ%warehouse' AND queue_id = 0 AND queue_offset >= 0;
