#!/usr/bin/python3
"""The HTML precision report, rendered in headless Chromium.

Compiles a Q/DQ model with --precision-report r.json (the reference list)
and, after `qatc bench --json` of its plan, --precision-report r.html with
that profile; Chromium loads the page (file://, JavaScript-free) and dumps
the DOM it built; the test checks, in what Chromium rendered:

  - the graph (Graphviz's SVG, inline): every fp32 node of the JSON report
    is drawn, its reason on its box, and every compute node is in the graph;
  - the fp32 table lists exactly the JSON report's fp32 nodes, each with its
    reason;
  - the coverage summary states the JSON summary's counts;
  - layer times from the profile appear;
and saves a screenshot (report.png) beside the page.

    html_report.py --qatc build/bin/qatc --model m_qdq.onnx --work DIR
"""

import argparse
import html
import json
import os
import re
import subprocess
import sys


def run(*cmd, **kw):
    p = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"FAILED: {' '.join(map(str, cmd))}\n{p.stderr[-3000:]}")
    return p.stdout


def chromium(*args):
    # --no-sandbox: test containers run as root, where Chromium's sandbox
    # refuses to start.
    return run(os.environ.get("CHROMIUM", "chromium"), "--headless", "--no-sandbox",
               "--disable-gpu", "--hide-scrollbars", *args, timeout=300)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qatc", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = lambda name: os.path.join(args.work, name)

    run(args.qatc, "compile", args.model, "-o", w("m.plan"), "--precision-report", w("r.json"))
    with open(w("bench.json"), "w") as f:
        f.write(run(args.qatc, "bench", w("m.plan"), "--iterations", "5", "--json"))
    run(args.qatc, "compile", args.model, "-o", w("m.plan"), "--precision-report", w("r.html"),
        "--precision-report-profile", w("bench.json"))
    report = json.load(open(w("r.json")))
    fp32 = [n for n in report["nodes"] if n["precision"] == "fp32"]
    compute = [n for n in report["nodes"] if n["compute"] and n["precision"] != "removed"]
    assert fp32, "the model should have fp32 nodes for this test"

    url = "file://" + os.path.abspath(w("r.html"))
    dom = chromium("--dump-dom", url)
    chromium("--window-size=1400,2000", "--screenshot=" + os.path.abspath(w("report.png")), url)
    assert os.path.getsize(w("report.png")) > 10000, "empty screenshot"

    # The graph as Chromium holds it: the SVG's text lines in order. A long
    # node name is wrapped over consecutive lines, so names are searched in
    # the concatenation.
    svg = dom[dom.index("<svg"):dom.index("</svg>")]
    lines = [html.unescape(t) for t in re.findall(r"<text[^>]*>(.*?)</text>", svg, re.S)]
    drawn = "".join(lines)
    missing = [n["node"] for n in compute if n["node"] not in drawn]
    assert not missing, f"compute nodes not drawn: {missing[:10]}"
    no_reason = [n["node"] for n in fp32 if n["reason"].replace(" ", "") not in drawn.replace(" ", "")]
    assert not no_reason, f"fp32 nodes without their reason on the graph: {no_reason[:10]}"

    # The fp32 table.
    table = dom[dom.index('<table id="fp32">'):]
    table = table[:table.index("</table>")]
    rows = re.findall(r"<tr><td>(-?\d+)</td><td>(.*?)</td><td>.*?</td><td>.*?</td><td>(.*?)</td>",
                      table, re.S)
    listed = {html.unescape(name): html.unescape(reason) for _, name, reason in rows}
    assert listed == {n["node"]: n["reason"] for n in fp32}, "the fp32 table differs from the JSON report"

    # The summary and the profile.
    s = report["summary"]
    summary = html.unescape(re.sub(r"<[^>]+>", "", dom[dom.index('id="summary"'):].split("</p>")[0]))
    assert f"Conv/Gemm/MatMul in int8: {s['conv_gemm_matmul_int8']} of {s['conv_gemm_matmul']}" in summary, summary
    assert re.search(r"Profile: \d+\.\d+ ms per run", summary), summary
    assert re.search(r"\d+\.\d{3} ms", drawn), "no layer time on the graph"
    print(f"html report: {len(compute)} compute nodes drawn, {len(fp32)} fp32 nodes with their "
          f"reasons on the graph and in the table, rendered by Chromium "
          f"({len(dom)} bytes of DOM, screenshot {w('report.png')})")


if __name__ == "__main__":
    main()
