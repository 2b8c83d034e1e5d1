#!/usr/bin/env python3
"""Checks Chrome Trace Event Format files (the JSON Perfetto and
chrome://tracing open) against the format's rules, and by default against
what libpathways' exporter (lib/observe/trace_json.c) promises on top.

Usage:
  trace_check.py FILE...                 check files; exit 1 at the first violation
  trace_check.py --dir DIR [--require]   check every *.json in DIR (--require: fail if none)
  trace_check.py --generic FILE          only the format's rules (X may nest, flows unbound)
  trace_check.py --expect RULE FILE      exit 0 only if FILE is rejected under RULE
                                         (the validator's own tests, tests/trace/bad)

A violation prints as `FILE: event N: RULE: detail` (N: the index in
traceEvents; `-` for the file as a whole). Rules:
  json        not strict JSON (NaN, duplicate keys, bad UTF-8)
  top-level   not an object with a traceEvents array (or a bare array),
              or displayTimeUnit/otherData of the wrong kind
  field       a field a phase requires is missing or has the wrong type
  phase       ph is not one of B E X i I s t f b e n M C
  nesting     B/E not properly nested per (pid, tid), or left open
  order       B/E of one thread out of timestamp order
  dur         X with a negative dur
  overlap     X events on one track overlap (exporter: any overlap;
              --generic: only partial overlap, nesting allowed)
  flow        f or t without an earlier s of the same (cat, id, name);
              an s never finished
  flow-bind   (exporter) s/f not within an X on its track (from its ts,
              included, to its end, excluded), or an f without "bp":"e"
  async       b/e not matched by (cat, id), e before its b, or left open
  metadata    a pid without process_name or a (pid, tid) without
              thread_name; a malformed M event
Standard library only (python3 >= 3.8).
"""
import argparse
import bisect
import glob
import json
import os
import sys

PHASES = set("BEXiIstfbenMC")
META_NAMES = {
    "process_name": "name", "thread_name": "name", "process_labels": "labels",
    "process_sort_index": "sort_index", "thread_sort_index": "sort_index",
}
EPS_US = 0.0005  # half a nanosecond: the exporter's precision


class Violation(Exception):
    def __init__(self, index, rule, detail):
        super().__init__(detail)
        self.index, self.rule, self.detail = index, rule, detail


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v):
    return (isinstance(v, (int, float))) and not isinstance(v, bool)


def load(path):
    def no_const(name):
        raise ValueError("non-standard constant %s" % name)

    def pairs(items):
        out = {}
        for k, v in items:
            if k in out:
                raise ValueError("duplicate key %r" % k)
            out[k] = v
        return out

    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
        return json.loads(text, parse_constant=no_const, object_pairs_hook=pairs)
    except (ValueError, UnicodeDecodeError) as e:
        raise Violation("-", "json", str(e))


def need(ev, i, key, check, what):
    if key not in ev:
        raise Violation(i, "field", "ph %r needs %r" % (ev.get("ph"), key))
    if not check(ev[key]):
        raise Violation(i, "field", "%r must be %s, not %r" % (key, what, ev[key]))


def check_event_fields(ev, i):
    if not isinstance(ev, dict):
        raise Violation(i, "field", "an event must be an object")
    if not isinstance(ev.get("ph"), str):
        raise Violation(i, "field", "ph missing or not a string")
    ph = ev["ph"]
    if ph not in PHASES:
        raise Violation(i, "phase", "unknown ph %r" % ph)
    need(ev, i, "pid", is_int, "an integer")
    if ph != "M" or ev.get("name") in ("thread_name", "thread_sort_index"):
        need(ev, i, "tid", is_int, "an integer")
    if ph != "E":
        need(ev, i, "name", lambda v: isinstance(v, str), "a string")
    elif "name" in ev and not isinstance(ev["name"], str):
        raise Violation(i, "field", "'name' must be a string")
    if ph != "M":
        need(ev, i, "ts", is_num, "a number")
    for key, check, what in (("cat", lambda v: isinstance(v, str), "a string"),
                             ("args", lambda v: isinstance(v, dict), "an object"),
                             ("dur", is_num, "a number")):
        if key in ev and not check(ev[key]):
            raise Violation(i, "field", "%r must be %s" % (key, what))
    if ph == "X":
        need(ev, i, "dur", is_num, "a number")
        if ev["dur"] < 0:
            raise Violation(i, "dur", "X dur %r is negative" % ev["dur"])
    if ph in "stfben":
        need(ev, i, "id", lambda v: is_int(v) or isinstance(v, str), "an integer or a string")
    if ph in "ben":
        need(ev, i, "cat", lambda v: isinstance(v, str), "a string")
    if ph in "iI" and ev.get("s", "t") not in ("g", "p", "t"):
        raise Violation(i, "field", "instant scope 's' must be g, p or t")
    if ph == "f" and "bp" in ev and ev["bp"] != "e":
        raise Violation(i, "field", "flow 'bp' must be \"e\"")
    if ph == "C":
        need(ev, i, "args", lambda v: isinstance(v, dict) and v, "a non-empty object")
        if not all(is_num(v) for v in ev["args"].values()):
            raise Violation(i, "field", "counter args must be numbers")
    if ph == "M":
        if ev["name"] not in META_NAMES:
            return
        key = META_NAMES[ev["name"]]
        need(ev, i, "args", lambda v: isinstance(v, dict), "an object")
        value = ev["args"].get(key)
        ok = is_int(value) if key == "sort_index" else isinstance(value, str)
        if not ok:
            raise Violation(i, "metadata", "%s needs args.%s of the right type" % (ev["name"], key))


def check_duration(events):
    """B/E nesting and order per (pid, tid), in file order."""
    stacks, last = {}, {}
    for i, ev in events:
        if ev["ph"] not in "BE":
            continue
        key = (ev["pid"], ev["tid"])
        if ev["ts"] < last.get(key, float("-inf")):
            raise Violation(i, "order", "ts %r before the previous B/E of pid %r tid %r"
                            % (ev["ts"], key[0], key[1]))
        last[key] = ev["ts"]
        stack = stacks.setdefault(key, [])
        if ev["ph"] == "B":
            stack.append((i, ev))
            continue
        if not stack:
            raise Violation(i, "nesting", "E with no open B on pid %r tid %r" % key)
        _, begin = stack.pop()
        if "name" in ev and ev["name"] != begin["name"]:
            raise Violation(i, "nesting", "E %r closes B %r" % (ev["name"], begin["name"]))
    for key, stack in stacks.items():
        if stack:
            raise Violation(stack[-1][0], "nesting", "B %r never ended (pid %r tid %r)"
                            % (stack[-1][1]["name"], key[0], key[1]))


def x_tracks(events):
    tracks = {}
    for i, ev in events:
        if ev["ph"] == "X":
            tracks.setdefault((ev["pid"], ev["tid"]), []).append((ev["ts"], ev["ts"] + ev["dur"], i))
    for spans in tracks.values():
        spans.sort(key=lambda s: (s[0], -s[1], s[2]))
    return tracks


def check_overlap(tracks, exporter):
    for key, spans in tracks.items():
        open_ends = []  # ends of the enclosing spans (generic) or the previous one
        for begin, end, i in spans:
            while open_ends and open_ends[-1] <= begin + EPS_US:
                open_ends.pop()
            if open_ends:
                if exporter:
                    raise Violation(i, "overlap", "X at %r overlaps the previous X on pid %r tid %r"
                                    " (ends %r)" % (begin, key[0], key[1], open_ends[-1]))
                if end > open_ends[-1] + EPS_US:
                    raise Violation(i, "overlap", "X at %r partially overlaps an enclosing X on pid %r"
                                    " tid %r" % (begin, key[0], key[1]))
            open_ends.append(end)


def inside_x(tracks, begins, ev):
    key = (ev["pid"], ev["tid"])
    spans = tracks.get(key, [])
    if key not in begins:
        begins[key] = [s[0] for s in spans]
    ts = ev["ts"]
    at = bisect.bisect_right(begins[key], ts + EPS_US)
    for begin, end, _ in reversed(spans[max(0, at - 64):at]):
        if begin - EPS_US <= ts < end:
            return True
    return False


def check_flows(events, tracks, exporter):
    started, finished, begins = {}, set(), {}
    for i, ev in events:
        ph = ev["ph"]
        if ph not in "stf":
            continue
        key = (ev.get("cat"), ev["id"], ev["name"])
        if exporter and not inside_x(tracks, begins, ev):
            raise Violation(i, "flow-bind", "flow %s id %r at ts %r is not within an X on pid %r tid %r"
                            % (ph, ev["id"], ev["ts"], ev["pid"], ev["tid"]))
        if ph == "s":
            started[key] = (i, ev["ts"])
            continue
        if key not in started or started[key][1] > ev["ts"] + EPS_US:
            raise Violation(i, "flow", "flow %s id %r (cat %r, name %r) has no earlier s"
                            % (ph, ev["id"], key[0], key[2]))
        if ph == "f":
            if exporter and ev.get("bp") != "e":
                raise Violation(i, "flow-bind", "f id %r without \"bp\":\"e\"" % (ev["id"],))
            finished.add(key)
    for key, (i, _) in started.items():
        if key not in finished:
            raise Violation(i, "flow", "flow s id %r (cat %r) never finished by an f" % (key[1], key[0]))


def check_async(events):
    """Nestable async b/e matched by (pid, cat, id) in timestamp order."""
    marks = sorted(((ev["ts"], 0 if ev["ph"] == "b" else 1, i, ev) for i, ev in events
                    if ev["ph"] in "be"), key=lambda m: (m[0], m[1], m[2]))
    open_count = {}
    for ts, _, i, ev in marks:
        key = (ev["pid"], ev["cat"], ev["id"])
        if ev["ph"] == "b":
            open_count.setdefault(key, []).append(i)
        elif not open_count.get(key):
            raise Violation(i, "async", "e (cat %r, id %r) at ts %r has no open b" % (key[1], key[2], ts))
        else:
            open_count[key].pop()
    for key, opened in open_count.items():
        if opened:
            raise Violation(opened[-1], "async", "b (cat %r, id %r) never ended" % (key[1], key[2]))


def check_metadata(events):
    processes, threads = set(), set()
    for _, ev in events:
        if ev["ph"] == "M" and ev["name"] == "process_name":
            processes.add(ev["pid"])
        if ev["ph"] == "M" and ev["name"] == "thread_name":
            threads.add((ev["pid"], ev["tid"]))
    for i, ev in events:
        if ev["ph"] == "M":
            continue
        if ev["pid"] not in processes:
            raise Violation(i, "metadata", "pid %r has no process_name" % ev["pid"])
        if ev["ph"] in "iI" and ev.get("s", "t") != "t":
            continue
        if (ev["pid"], ev["tid"]) not in threads:
            raise Violation(i, "metadata", "pid %r tid %r has no thread_name" % (ev["pid"], ev["tid"]))


def check_document(doc, exporter):
    if isinstance(doc, list):
        raw = doc
    elif isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        raw = doc["traceEvents"]
        if doc.get("displayTimeUnit", "ms") not in ("ms", "ns"):
            raise Violation("-", "top-level", "displayTimeUnit must be \"ms\" or \"ns\"")
        if "otherData" in doc and not isinstance(doc["otherData"], dict):
            raise Violation("-", "top-level", "otherData must be an object")
    else:
        raise Violation("-", "top-level", "not an object with a traceEvents array, nor an array")
    for i, ev in enumerate(raw):
        check_event_fields(ev, i)
    events = list(enumerate(raw))
    check_duration(events)
    tracks = x_tracks(events)
    check_overlap(tracks, exporter)
    check_flows(events, tracks, exporter)
    check_async(events)
    check_metadata(events)
    return len(raw)


def check_file(path, exporter):
    return check_document(load(path), exporter)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="*")
    p.add_argument("--dir", help="check every *.json in DIR")
    p.add_argument("--require", action="store_true", help="with --dir: fail when DIR holds none")
    p.add_argument("--generic", action="store_true", help="only the format's rules")
    p.add_argument("--expect", metavar="RULE", help="succeed only if each file fails under RULE")
    args = p.parse_args(argv)
    files = list(args.files)
    if args.dir:
        found = sorted(glob.glob(os.path.join(args.dir, "*.json")))
        if not found and args.require:
            print("trace_check: no *.json in %s" % args.dir, file=sys.stderr)
            return 1
        files += found
    if not files:
        p.error("no files")
    for path in files:
        try:
            count = check_file(path, not args.generic)
        except Violation as v:
            print("%s: event %s: %s: %s" % (path, v.index, v.rule, v.detail))
            if args.expect is None or v.rule != args.expect:
                return 1
            continue
        except OSError as e:
            print("%s: -: io: %s" % (path, e))
            return 1
        if args.expect is not None:
            print("%s: accepted, but expected a %s violation" % (path, args.expect))
            return 1
        print("%s: ok (%d events)" % (path, count))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
