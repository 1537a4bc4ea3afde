"""A bounded wrk load run against `cuvil serve`: a Lua script posts one binary-tensor infer request over and over
on every connection and counts responses that are not 200 or whose size is wrong."""
import json
import os
import re
import shutil
import subprocess

import numpy as np

WRK_SCRIPT = r"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/octet-stream"
wrk.headers["Inference-Header-Content-Length"] = "%(header_len)d"
local f = io.open("%(body_path)s", "rb"); wrk.body = f:read("*a"); f:close()
local bad = 0
local expected = %(expected_len)d
function response(status, headers, body)
  if status ~= 200 or #body ~= expected then bad = bad + 1 end
end
function done(summary, latency, requests)
  local f = io.open("%(result_path)s", "w")
  f:write(string.format('{"requests": %%d, "bad": %%d, "errors": %%d, "p50_us": %%d, "p90_us": %%d, "p99_us": %%d, "mean_us": %%f, "duration_us": %%d}',
    summary.requests, bad, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean, summary.duration))
  f:close()
end
"""


def binary_request(name, array, datatype, output, binary_out=True):
    header = json.dumps({"inputs": [{"name": name, "datatype": datatype, "shape": list(array.shape),
                                     "parameters": {"binary_data_size": array.nbytes}}],
                         "outputs": [{"name": output, "parameters": {"binary_data": binary_out}}]}).encode()
    return header, header + array.tobytes()


def wrk_run(url_base, model, header, body, expected_len, work_dir, connections=32, threads=2, seconds=3):
    """Runs wrk for `seconds` on `connections` keep-alive connections; returns its measurements."""
    wrk = shutil.which("wrk")
    assert wrk, "wrk is not installed (scripts/setup.sh installs it)"
    body_path = os.path.join(work_dir, f"{model}-body.bin")
    result_path = os.path.join(work_dir, f"{model}-wrk.json")
    with open(body_path, "wb") as f:
        f.write(body)
    script = os.path.join(work_dir, f"{model}.lua")
    with open(script, "w") as f:
        f.write(WRK_SCRIPT % {"header_len": len(header), "body_path": body_path, "result_path": result_path,
                              "expected_len": expected_len})
    r = subprocess.run([wrk, "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s", "--timeout", "30s",
                        "-s", script, f"http://{url_base}/v2/models/{model}/infer"],
                       capture_output=True, text=True, timeout=seconds + 120)
    assert r.returncode == 0, r.stderr
    with open(result_path) as f:
        res = json.load(f)
    res["throughput"] = res["requests"] / (res["duration_us"] / 1e6)
    res["wrk_output"] = r.stdout
    return res


def expected_response_len(server_url, model, header, body):
    """The size of the server's response to this request (the same for every such request)."""
    import urllib.request
    req = urllib.request.Request(f"http://{server_url}/v2/models/{model}/infer", data=body, method="POST",
                                 headers={"Inference-Header-Content-Length": str(len(header)),
                                          # (urllib's default, form-urlencoded, is capped at 8 KB by httplib)
                                          "Content-Type": "application/octet-stream"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return len(r.read())
