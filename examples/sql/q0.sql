-- Nexmark q0 (pass through): every bid, unchanged.
-- eddy local --sql examples/sql/q0.sql --input events.csv --output q0.tsv
CREATE TABLE discard_sink (
  auction  BIGINT,
  bidder   BIGINT,
  price    BIGINT,
  dateTime TIMESTAMP(3)
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO discard_sink
SELECT auction, bidder, price, dateTime FROM bid;
