-- Nexmark q7 (highest bid): per tumbling window of 10 s, the bids with
-- the highest price (every tie).
CREATE TABLE discard_sink (
  window_start TIMESTAMP(3),
  window_end   TIMESTAMP(3),
  auction      BIGINT,
  bidder       BIGINT,
  price        BIGINT,
  dateTime     TIMESTAMP(3)
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO discard_sink
SELECT window_start, window_end, auction, bidder, price, dateTime
FROM (
  SELECT *, RANK() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rk
  FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
)
WHERE rk <= 1;
