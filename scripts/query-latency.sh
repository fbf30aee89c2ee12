#!/bin/sh
# p50/p99 of N GETs of each query, in ms (curl's time_total, loopback),
# against writ serve on a ledger made by writ ledger generate (tenant-1,
# one record a second from 2026-01-01; see docs/scale.md).
port=$1; n=${2:-40}
for q in \
  "records?tenant_id=tenant-1&limit=50" \
  "records?tenant_id=tenant-1&limit=50&from=2026-01-12T13:46:09Z" \
  "records?tenant_id=tenant-1&limit=50&from=2026-01-05T00:00:00Z&to=2026-01-05T01:00:00Z" \
  "records?tenant_id=tenant-1&limit=50&from=2026-01-11T13:46:39Z" \
  "records?tenant_id=tenant-1&limit=50&from=2026-01-05T00:00:00Z&to=2026-01-06T00:00:00Z" \
  "records?tenant_id=tenant-1&limit=50&order=newest" \
  "records?tenant_id=tenant-1&limit=50&order=newest&from=2026-01-05T00:00:00Z&to=2026-01-06T00:00:00Z" \
  "records?tenant_id=tenant-1&limit=50&status=DEFERRED" \
  "records?tenant_id=tenant-1&limit=50&subject_id=customer:cus_77" \
  "records?tenant_id=tenant-1&limit=50&decision_key=support.refund.execute" \
  "approvals?tenant_id=tenant-1&limit=50&state=pending" \
  "decisions/in_flight?tenant_id=tenant-1&limit=50" ; do
  for i in $(seq $n); do curl -s -o /dev/null -w '%{time_total} %{http_code}\n' "http://127.0.0.1:$port/v1/$q"; done | sort -n | awk -v q="$q" '{t[NR]=$1*1000; c=$2} END {printf "%-95s p50 %7.1f ms  p99 %7.1f ms  (%d runs, HTTP %s)\n", q, t[int(NR*0.5+0.5)], t[int(NR*0.99+0.5)], NR, c}'
done
