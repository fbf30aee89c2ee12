-- wrk script: POST the body in the file $BODY as JSON, to the path in
-- $TARGET_PATH, and count non-2xx answers (wrk counts them as errors).
local f = assert(io.open(os.getenv("BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.path = os.getenv("TARGET_PATH")
wrk.headers["Content-Type"] = "application/json"

-- Print what the run script parses: requests/s and the p99 in ms.
done = function(summary, latency, requests)
  io.write(string.format("RESULT rps=%.1f p99_ms=%.3f p50_ms=%.3f requests=%d non2xx=%d errors=%d\n",
    summary.requests / (summary.duration / 1e6),
    latency:percentile(99) / 1000, latency:percentile(50) / 1000,
    summary.requests, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
