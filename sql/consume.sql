-- consume.sql: consumers that remember their offsets in an ordinary table.
-- The consume-queue plan runs as the inner side of the join: the cursor row
-- supplies topic, queue_id and the next offset.
.load build/rocketmq
.mode box
CREATE VIRTUAL TABLE mq USING rocketmq(dir='build/demo-store');

CREATE TEMP TABLE cursors(consumer TEXT, topic TEXT, queue_id INT, next_offset INT,
                          PRIMARY KEY(consumer, topic, queue_id));
INSERT INTO cursors VALUES ('billing', 'Orders', 0, 0), ('billing', 'Orders', 1, 0);

-- Pull at most 32 messages per queue for the consumer 'billing'.
SELECT c.queue_id, m.queue_offset, m.tags, m.body_text
  FROM cursors c
  JOIN mq m ON m.topic = c.topic AND m.queue_id = c.queue_id
           AND m.queue_offset >= c.next_offset AND m.queue_offset < c.next_offset + 32
 WHERE c.consumer = 'billing'
 ORDER BY c.queue_id, m.queue_offset;

-- Acknowledge: move each cursor past what was read.
UPDATE cursors SET next_offset = (
  SELECT coalesce(max(queue_offset) + 1, cursors.next_offset) FROM mq
   WHERE topic = cursors.topic AND queue_id = cursors.queue_id
     AND queue_offset >= cursors.next_offset)
 WHERE consumer = 'billing';
SELECT * FROM cursors;

-- Only one tag: the tag hash is checked in the consume queue before any read.
SELECT queue_offset, body_text FROM mq
 WHERE topic = 'Orders' AND queue_id = 0 AND queue_offset >= 0 AND tags = 'paid';

-- Long polling: wait up to 200 ms for a message at the next offset.
SELECT count(*) AS arrived FROM mq
 WHERE topic = 'Orders' AND queue_id = 1 AND queue_offset = 100 AND wait_ms = 200;
