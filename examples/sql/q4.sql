-- Nexmark q4 (average price for a category): the winning bid of each
-- closed auction is its highest bid between its start and its expiry;
-- per category, the average of those winning prices. Flink's text; the
-- BETWEEN on the bid's time compiles to an interval join, so an auction's
-- rows are dropped when the watermark passes its expiry. Both GROUP BYs
-- emit their final rows at the end of the (bounded) input.
CREATE TABLE discard_sink (
  id    BIGINT,
  final BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO discard_sink
SELECT
    Q.category,
    AVG(Q.final)
FROM (
    SELECT MAX(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category;
