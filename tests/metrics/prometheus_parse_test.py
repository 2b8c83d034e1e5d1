#!/usr/bin/env python3
"""Scrapes the metrics endpoint of scrape_helper over HTTP and parses the
text with prometheus_client's parser (a real one: Debian's
python3-prometheus-client), then checks the families, types, labels and
values against the events the helper reported.

Usage: prometheus_parse_test.py <path to scrape_helper>
"""
import subprocess
import sys
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def main():
    helper = subprocess.Popen([sys.argv[1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        line = helper.stdout.readline().split()
        assert len(line) == 2 and line[0] == "port", f"helper said {line!r}"
        base = f"http://127.0.0.1:{int(line[1])}"
        with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
            assert r.status == 200
            ctype = r.headers["Content-Type"]
            assert ctype.startswith("text/plain; version=0.0.4"), ctype
            text = r.read().decode("utf-8")
        try:
            urllib.request.urlopen(base + "/nope", timeout=10)
            raise AssertionError("/nope did not answer 404")
        except urllib.error.HTTPError as e:
            assert e.code == 404, e.code
    finally:
        helper.stdin.close()
        rc = helper.wait(timeout=30)
    assert rc == 0, f"helper exited {rc}"
    check(text)


def check(text):
    families = {f.name: f for f in text_string_to_metric_families(text)}

    def value(family, sample, **labels):
        for s in families[family].samples:
            if s.name == sample and s.labels == labels:
                return s.value
        raise AssertionError(f"no {sample}{labels} in {families[family].samples}")

    s0 = {"slice": "0", "slice_name": "slice0"}
    s1 = {"slice": "1", "slice_name": "slice1"}
    client = {"client": 'trainer "A"\\x', "client_tag": "1"}
    # prometheus_client names a counter's family without _total.
    assert families["pathways_ops_completed"].type == "counter"
    assert value("pathways_ops_completed", "pathways_ops_completed_total", **s0) == 2
    assert value("pathways_ops_completed", "pathways_ops_completed_total", **s1) == 1
    assert value("pathways_ops_failed", "pathways_ops_failed_total", **s1) == 1
    assert value("pathways_client_ops_submitted", "pathways_client_ops_submitted_total",
                 **client) == 4
    assert value("pathways_client_ops_launched", "pathways_client_ops_launched_total",
                 **client) == 4
    assert value("pathways_device_launches", "pathways_device_launches_total", **s1) == 4
    assert families["pathways_launches_in_flight"].type == "gauge"
    assert value("pathways_launches_in_flight", "pathways_launches_in_flight", **s0) == 0
    assert abs(value("pathways_device_busy_seconds", "pathways_device_busy_seconds_total", **s0)
               - 2 * 2 * 4e-6) < 1e-12
    assert value("pathways_transfer_bytes", "pathways_transfer_bytes_total", **s1) == 1 << 20

    lat = families["pathways_launch_latency_seconds"]
    assert lat.type == "histogram"
    buckets = {s.labels["le"]: s.value for s in lat.samples if s.name.endswith("_bucket")}
    assert len(buckets) == 23, sorted(buckets)
    assert buckets["+Inf"] == 4
    assert buckets["2.5e-06"] == 0 and buckets["5e-06"] == 4, buckets
    assert value("pathways_launch_latency_seconds", "pathways_launch_latency_seconds_count") == 4
    assert abs(value("pathways_launch_latency_seconds", "pathways_launch_latency_seconds_sum")
               - 16e-6) < 1e-12
    op = {s.labels["le"]: s.value for s in families["pathways_op_latency_seconds"].samples
          if s.name.endswith("_bucket")}
    assert op["0.025"] == 0 and op["0.05"] == 4, op
    tr = {s.labels["le"]: s.value for s in families["pathways_transfer_seconds"].samples
          if s.name.endswith("_bucket")}
    assert tr["0.0005"] == 0 and tr["0.001"] == 1, tr
    bounds = [float(le) for le in buckets if le != "+Inf"]
    assert bounds == sorted(bounds) and bounds[0] == 1e-6 and bounds[-1] == 10.0
    print(f"prometheus_parse_test: {len(families)} families parsed and checked: ok")


if __name__ == "__main__":
    main()
