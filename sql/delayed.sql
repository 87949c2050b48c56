-- delayed.sql: a message delivered later, as RocketMQ's delay levels deliver it.
-- Run from the repository root:  sqlite3 :memory: < sql/delayed.sql
.load build/rocketmq
.mode box

-- Short levels for the example: level 1 waits 1 s, level 2 waits 5 s
-- (RocketMQ's default is '1s 5s 10s 30s 1m 2m ... 2h').
CREATE VIRTUAL TABLE mq USING rocketmq(dir='build/delayed-store', delay_levels='1s 5s');

-- Where a consumer of Reminders queue 0 starts: the queue's end now.
CREATE TEMP TABLE pos AS
  SELECT coalesce((SELECT max_offset FROM rocketmq_queues('build/delayed-store')
                    WHERE topic = 'Reminders' AND queue_id = 0), 0) AS next_offset;

-- A reminder to send in 1 s: it waits in SCHEDULE_TOPIC_XXXX queue 0 until then.
INSERT INTO mq(topic, queue_id, keys, body, delay_level)
  VALUES ('Reminders', 0, 'cart-42', 'cart 42 was left unpaid', 1);

-- What is still waiting, and when it is due.
SELECT level, datetime(due_time / 1000, 'unixepoch') AS due, real_topic, real_queue_id, keys
  FROM rocketmq_scheduled('build/delayed-store');

-- A consumer long-polls the real topic: the query sleeps until the reminder
-- arrives (about 1 s), at most wait_ms.
SELECT queue_offset, keys, body_text,
       json_extract(properties, '$.DELAY') AS delay_level
  FROM mq WHERE topic = 'Reminders' AND queue_id = 0 AND wait_ms = 5000
   AND queue_offset = (SELECT next_offset FROM pos);

-- Nothing waits any more; the service's progress is in config/delayOffset.json.
SELECT count(*) AS still_waiting FROM rocketmq_scheduled('build/delayed-store');
