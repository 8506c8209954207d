-- bench/soak.lua: the requests of bench/soak.sh for wrk. Arguments (after wrk's `--`): a mode, a
-- delay in ms before each request of a connection, then the context ids.
--
-- Mode "execute": POST /code round robin over the contexts, and every third request a GET
-- /code/executions/{id} of an execution this thread started. Mode "get": GET /code/contexts and
-- GET /ping in turn. soak.sh runs one wrk of each at once, so that the latencies of the cheap GETs
-- show how responsive kgate stays while executes stream. wrk cannot tell which request a response
-- answers, so responses are classified by what they are: one carrying an execution id is an
-- execute's SSE stream, which must hold execution_complete and no error event.

local code = '{"context":{"id":"%s"},"code":"x = sum(range(1000))\\nprint(x)"}'
local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

function init(args)
   mode = args[1]
   pause = tonumber(args[2])
   contexts = {}
   for i = 3, #args do
      contexts[#contexts + 1] = args[i]
   end
   sent = {}
   statuses = {}
   executes_ok, executes_bad = 0, 0
   ids, next_id = {}, 1
   turn = 0
end

local function count(kind)
   sent[kind] = (sent[kind] or 0) + 1
end

function delay()
   return pause
end

function request()
   turn = turn + 1
   if mode == "get" then
      if turn % 2 == 0 then
         count("GET /ping")
         return wrk.format("GET", "/ping")
      end
      count("GET /code/contexts")
      return wrk.format("GET", "/code/contexts")
   end
   if turn % 3 == 0 and #ids > 0 then
      count("GET /code/executions/{id}")
      return wrk.format("GET", "/code/executions/" .. ids[math.random(#ids)])
   end
   count("POST /code")
   local ctx = contexts[turn % #contexts + 1]
   return wrk.format("POST", "/code", {["Content-Type"] = "application/json"}, string.format(code, ctx))
end

function response(status, headers, body)
   statuses[status] = (statuses[status] or 0) + 1
   local id = headers["x-kgate-execution-id"] or headers["X-Kgate-Execution-Id"]
   if id ~= nil then
      -- the 256 most recent executions of this thread
      ids[next_id] = id
      next_id = next_id % 256 + 1
      if body:find('"type":"execution_complete"', 1, true) and not body:find('"type":"error"', 1, true) then
         executes_ok = executes_ok + 1
      else
         executes_bad = executes_bad + 1
      end
   end
end

function done(summary, latency, requests)
   local total_sent, total_statuses, ok, bad = {}, {}, 0, 0
   for _, thread in ipairs(threads) do
      for k, v in pairs(thread:get("sent")) do
         total_sent[k] = (total_sent[k] or 0) + v
      end
      for k, v in pairs(thread:get("statuses")) do
         total_statuses[k] = (total_statuses[k] or 0) + v
      end
      ok = ok + thread:get("executes_ok")
      bad = bad + thread:get("executes_bad")
   end
   local kinds = {}
   for k, v in pairs(total_sent) do
      table.insert(kinds, string.format("%d %s", v, k))
   end
   table.sort(kinds)
   local non2xx, codes = 0, {}
   for status, n in pairs(total_statuses) do
      if status < 200 or status > 299 then
         non2xx = non2xx + n
         table.insert(codes, string.format("%d x%d", status, n))
      end
   end
   local e = summary.errors
   local seconds = summary.duration / 1e6
   local mode = threads[1]:get("mode")
   local p = string.format("soak %s:", mode)
   io.write(string.format("%s %d responses in %.1f s (%.0f/s); sent %s\n", p, summary.requests, seconds,
                          summary.requests / seconds, table.concat(kinds, ", ")))
   if mode == "execute" then
      io.write(string.format("%s executes: %d complete, %d without execution_complete or with an error event\n", p, ok, bad))
   end
   io.write(string.format("%s errors: %d non-2xx%s; socket: %d connect, %d read, %d write, %d timeout\n", p, non2xx,
                          #codes > 0 and " (" .. table.concat(codes, ", ") .. ")" or "", e.connect, e.read, e.write, e.timeout))
   io.write(string.format("%s latency ms: p50 %.2f, p90 %.2f, p99 %.2f, p99.9 %.2f, max %.2f\n", p,
                          latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
                          latency:percentile(99.9) / 1000, latency.max / 1000))
   io.write(string.format("%s failures %d\n", p, non2xx + bad + e.connect + e.read + e.write + e.timeout))
end
