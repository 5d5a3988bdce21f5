-- Nexmark q5 (hot items): per sliding window of 10 s every 2 s, the
-- auctions with the most bids (every tie).
CREATE TABLE discard_sink (
  window_start TIMESTAMP(3),
  window_end   TIMESTAMP(3),
  auction      BIGINT,
  num          BIGINT
) WITH (
  'connector' = 'blackhole'
);

CREATE VIEW auction_bids AS
SELECT auction, window_start, window_end, COUNT(*) AS num
FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;

INSERT INTO discard_sink
SELECT window_start, window_end, auction, num
FROM (
  SELECT *, RANK() OVER (PARTITION BY window_start, window_end ORDER BY num DESC) AS rk
  FROM auction_bids
)
WHERE rk <= 1;
