-- outbox.sql: the transactional outbox. An order row and its event commit
-- together, or neither does: rows inserted into mq inside BEGIN ... COMMIT
-- are appended at COMMIT as one contiguous batch; ROLLBACK appends nothing.
.load build/rocketmq
.mode box
CREATE VIRTUAL TABLE mq USING rocketmq(dir='build/demo-store');
CREATE TEMP TABLE orders(id INTEGER PRIMARY KEY, customer TEXT, total REAL);

BEGIN;
INSERT INTO orders VALUES (2001, 'ada', 42.0);
INSERT INTO mq(topic, tags, keys, body)
  VALUES ('OrderEvents', 'created', 'order-2001', json_object('id', 2001, 'total', 42.0));
COMMIT;

BEGIN;
INSERT INTO orders VALUES (2002, 'bob', 7.0);
INSERT INTO mq(topic, tags, keys, body) VALUES ('OrderEvents', 'created', 'order-2002', '{}');
ROLLBACK;

SELECT keys, body_text FROM mq WHERE topic = 'OrderEvents' AND key IN ('order-2001', 'order-2002');

-- The same with a trigger: every order insert produces its event.
CREATE TEMP TRIGGER order_event AFTER INSERT ON orders BEGIN
  INSERT INTO mq(topic, tags, keys, body)
  VALUES ('OrderEvents', 'created', 'order-' || NEW.id, json_object('id', NEW.id));
END;
INSERT INTO orders VALUES (2003, 'cy', 1.5);
SELECT keys, body_text FROM mq WHERE topic = 'OrderEvents' AND key = 'order-2003';
