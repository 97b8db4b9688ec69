-- wrk's script for `./dev bench api` (bench/api.py): each request is a path drawn at random from a file
-- (many player ids, leaderboard pages, histories, pairs), so that no cache answers the same question twice
-- in a row; optionally a fixed rate; at the end one JSON line with the counts and the latency percentiles.
--
--   wrk -t1 -c16 -d10s -s bench/wrk_paths.lua http://127.0.0.1:PORT -- PATHS_FILE [RATE]
--
-- RATE (requests/s, all threads together; WRK_THREADS in the environment: how many share it): wrk has no
-- fixed rate (wrk2, which has, is not in Debian), so each thread hands out send slots THREADS/RATE apart
-- and `delay` holds a connection until its slot. A slot missed because every connection was busy is not
-- made up (the rate achieved falls instead), and the latency is counted from the send, not from the slot:
-- bench/api.py prints the rate achieved beside the percentiles, and gives wrk connections to spare.

local ffi = require("ffi")
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
  int clock_gettime(int clock_id, bench_timespec *tp);
]]
local CLOCK_MONOTONIC = 1
local now_ts = ffi.new("bench_timespec")

local function now_ms()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, now_ts)
  return tonumber(now_ts.tv_sec) * 1000 + tonumber(now_ts.tv_nsec) / 1e6
end

local threads = {}
local next_id = 0

function setup(thread)
  next_id = next_id + 1
  thread:set("id", next_id)
  table.insert(threads, thread)
end

local paths = {}
local interval_ms = nil -- between this thread's send slots
local next_slot = nil
non2xx = 0 -- a global: `done` reads it from each thread

function init(args)
  local file = assert(io.open(args[1], "r"), "cannot open " .. tostring(args[1]))
  for line in file:lines() do
    if #line > 0 then
      table.insert(paths, line)
    end
  end
  file:close()
  assert(#paths > 0, "no paths in " .. args[1])
  math.randomseed(1000 + id)
  local rate = tonumber(args[2] or "")
  if rate and rate > 0 then
    interval_ms = 1000.0 * tonumber(os.getenv("WRK_THREADS") or "1") / rate
  end
end

function request()
  return wrk.format("GET", paths[math.random(#paths)])
end

function delay()
  if interval_ms == nil then
    return 0
  end
  local now = now_ms()
  if next_slot == nil or next_slot < now then
    next_slot = now
  end
  local wait = next_slot - now
  next_slot = next_slot + interval_ms
  return wait
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
  end
end

function done(summary, latency, requests)
  local bad = 0
  for _, thread in ipairs(threads) do
    bad = bad + (thread:get("non2xx") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d, '
      .. '"non2xx": %d, "connect": %d, "read": %d, "write": %d, "timeout": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, bad, e.connect, e.read, e.write, e.timeout))
end
