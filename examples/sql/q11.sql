-- Nexmark q11 (user sessions): how many bids each bidder makes in a
-- session, sessions ending after 10 s without a bid.
CREATE TABLE discard_sink (
  bidder    BIGINT,
  bid_count BIGINT,
  starttime TIMESTAMP(3),
  endtime   TIMESTAMP(3)
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO discard_sink
SELECT B.bidder, COUNT(*) AS bid_count,
       SESSION_START(B.dateTime, INTERVAL '10' SECOND) AS starttime,
       SESSION_END(B.dateTime, INTERVAL '10' SECOND) AS endtime
FROM bid B
GROUP BY B.bidder, SESSION(B.dateTime, INTERVAL '10' SECOND);
