-- wrk script for scripts/soak: a fixed rotation of tiles, manifests, visible-tile
-- queries, listings and 404s; each thread stops after its share of SOAK_REQUESTS.
-- Counts every status per thread; `done` prints the totals as `soak: key value` lines.
local id = os.getenv("SOAK_ID") or "sample"
local maxLevel = tonumber(os.getenv("SOAK_MAX_LEVEL") or "4")
local perThread = tonumber(os.getenv("SOAK_PER_THREAD") or "500000")

local paths = {}
local expect404 = 0
local function add(path, is404)
  paths[#paths + 1] = path
  if is404 then expect404 = expect404 + 1 end
end
local width = tonumber(os.getenv("SOAK_WIDTH") or "4000")
local height = tonumber(os.getenv("SOAK_HEIGHT") or "3000")
-- Every tile of every level (the contract's geometry, tile size 256).
for level = 0, maxLevel do
  local f = 2 ^ (maxLevel - level)
  local columns = math.ceil(math.ceil(width / f) / 256)
  local rows = math.ceil(math.ceil(height / f) / 256)
  for row = 0, rows - 1 do
    for column = 0, columns - 1 do
      add(string.format("/images/%s/tiles/%d/%d/%d.png", id, level, row, column), false)
    end
  end
end
add("/images/" .. id, false)
add("/images/" .. id .. "/thumbnail.png", false)
add("/images", false)
add("/images/" .. id .. "/visible?x=0&y=0&width=1920&height=1080&scale=0.5", false)
add("/images/" .. id .. "/visible?x=-500&y=100&width=3000&height=2000&scale=0.125&margin=1&wrap=x", false)
add("/images/" .. id .. "/visible?x=1000&y=1000&width=800&height=600&scale=1", false)
add("/healthz", false)
-- 404s, each five times so that they are about a tenth of the mix.
for _ = 1, 5 do
  add("/images/no-such-image", true)
  add("/images/no-such-image/tiles/0/0/0.png", true)
  add(string.format("/images/%s/tiles/%d/999/999.png", id, maxLevel), true)
  add(string.format("/images/%s/tiles/%d/0/0.png", id, maxLevel + 5), true)
  add("/nothing/here", true)
end

local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  counts = {}
  sent = 0
  answered = 0
  index = tid * 7
end

function request()
  index = index % #paths + 1
  sent = sent + 1
  return wrk.format("GET", paths[index])
end

function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
  answered = answered + 1
  if answered >= perThread then wrk.thread:stop() end
end

function done(summary, latency, requests)
  local total = {}
  local n = 0
  for _, thread in ipairs(threads) do
    local c = thread:get("counts")
    for status, count in pairs(c) do
      total[status] = (total[status] or 0) + count
      n = n + count
    end
  end
  local e = summary.errors
  io.write(string.format("soak: responses %d\n", n))
  for status, count in pairs(total) do io.write(string.format("soak: status_%d %d\n", status, count)) end
  io.write(string.format("soak: expected_404_fraction %.4f\n", expect404 / #paths))
  io.write(string.format("soak: socket_errors connect=%d read=%d write=%d timeout=%d status=%d\n",
    e.connect, e.read, e.write, e.timeout, e.status))
  io.write(string.format("soak: latency_p50_ms %.2f p99_ms %.2f max_ms %.2f\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
  io.write(string.format("soak: paths %d\n", #paths))
end
