-- wrk's requests for scripts/cloud-load.sh: each of wrk's 2 threads reports for its own half of the units, in
-- turn, each report the next of its unit's stream (one press: a usage of 1), so every request is a report the
-- service applies (a unit's next report is UNITS/2 requests later, long after its last was answered).
local units = tonumber(os.getenv("UNITS") or "10000")
local count = 0
local threads = 0

function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

function request()
  local per = math.floor(units / 2)
  local unit = string.format("LOAD%d%05d", id, count % per)
  local sequence = math.floor(count / per) + 1
  count = count + 1
  local body = string.format(
    '{"unit":"%s","stream":"000000000000000%d","sequence":%d,"daily":false,' ..
    '"supplies":[{"slot":"pods","usage":{"@type":"Count","value":1}}]}', unit, id, sequence)
  return wrk.format("POST", "/v1/units/" .. unit .. "/reports",
    { ["Content-Type"] = "application/json", ["X-Amzn-Mtls-Clientcert-Subject"] = "CN=" .. unit }, body)
end
