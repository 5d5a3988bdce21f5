-- Nexmark q3 (local item suggestion): who sells in category 10 in
-- Oregon, Idaho or California? An incremental join of auctions and persons.
CREATE TABLE discard_sink (
  name  VARCHAR,
  city  VARCHAR,
  state VARCHAR,
  id    BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO discard_sink
SELECT P.name, P.city, P.state, A.id
FROM auction AS A
INNER JOIN person AS P ON A.seller = P.id
WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA');
