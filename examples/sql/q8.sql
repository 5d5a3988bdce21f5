-- Nexmark q8 (monitor new users): the persons who registered and opened
-- an auction in the same tumbling window of 10 s (each person once: a
-- window semi-join, as Flink writes one).
CREATE TABLE discard_sink (
  id        BIGINT,
  name      VARCHAR,
  starttime TIMESTAMP(3)
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO discard_sink
SELECT P.id, P.name, P.window_start
FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)) P
WHERE P.id IN (
  SELECT A.seller
  FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(dateTime), INTERVAL '10' SECOND)) A
  WHERE P.window_start = A.window_start AND P.window_end = A.window_end
);
