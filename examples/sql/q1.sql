-- Nexmark q1 (currency conversion): bid prices from dollars to euros
-- (908/1000, integer arithmetic as eddy's C query does it).
CREATE TABLE discard_sink (
  auction  BIGINT,
  bidder   BIGINT,
  price    BIGINT,
  dateTime TIMESTAMP(3)
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO discard_sink
SELECT auction, bidder, price * 908 / 1000 AS price, dateTime
FROM bid;
